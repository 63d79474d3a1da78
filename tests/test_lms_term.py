"""A term's chain for each LMS, end to end: one class's sample download, as the LMS writes
it, collected by tools/instructor/collect.py; the gradebook filled as autograde leaves it
(nbgrader's API, no grading; each submission's time the timestamp.txt collect wrote); the
LMS's gradebook export filled in by `make grades LMS=... TEMPLATE=...`; and the upload of
`make feedback LMS=...` (nbgrader's generate_feedback replaced), each checked against the
LMS's documented format. Grades and upload read only what collect recorded (collected.json)
and wrote.

Each class: three students of the roster, with the ids the LMS carries; one submitted on
time, one late (by the LMS's date, or Canvas's _LATE marker), and one nothing, whose rows
stay as the export wrote them. The pieces, and the sources of each format, come from the
tests of each step alone: tests/test_downloads.py, tests/test_lms_grades.py and
tests/test_feedback_upload.py.
"""

import contextlib
import csv
import dataclasses
import datetime
import io
import shutil
import zipfile

import pytest

from tests.test_collect import worksheet
from tests.test_downloads import (
    NB,
    NOTEBOOK,
    PY,
    blackboard_entry,
    brightspace_entry,
    canvas_display_name,
    canvas_entry,
    canvas_prefix,
    download,
    held,
    moodle_prefix,
    provenance,
    reasons,
    zipped,
)
from tests.test_feedback_upload import STEMS, canvas_import, moodle_import, pages_of
from tests.test_lms_grades import (
    POINTS,
    blackboard_export,
    brightspace_export,
    canvas_export,
    grade,
    moodle_export,
)
from tools.course.folder import Course, submissions
from tools.instructor import feedback as feedback_step
from tools.instructor.build import build_course
from tools.instructor.collect import collect, read_collected, submitted_at
from tools.instructor.grades import export
from tools.instructor.release import release

CONFIG = """c.Grading.timezone = "Europe/Berlin"
c.Grading.due = {"unit1": "2026-10-05 23:59"}
c.Grading.late_penalty = 10
c.Grading.late_per = "hour"
c.Grading.late_floor = 50
c.Grading.late_unknown_penalty = 20
c.Grading.roster = "roster.csv"
"""  # (due 2026-10-05 21:59 UTC)
# (student id, first name, last name, email, SIS id, LMS login); s1003 submits nothing
CLASS = [("s1001", "Ada", "Lovelace", "ada@example.edu", "S001", "alovelace"),
         ("s1002", "Grace", "Hopper", "grace@example.edu", "S002", "ghopper"),
         ("s1003", "Alan", "Turing", "alan@example.edu", "S003", "aturing")]
COLLECTED = ["s1001", "s1002"]
WORK = zipped({NOTEBOOK: NB, "normlib/layer_norm.py": PY})  # a student's own zip


@dataclasses.dataclass
class Sample:
    """One LMS's class: its config and roster; its download (entries in archive/, files
    beside it) and the entries collect must reject; what collect must keep of each
    student, and when each submitted (UTC, as grades.csv writes it: "" without an LMS
    time); the ids the download named them by; the late policy's reason and final score
    of each; the LMS's gradebook export of the class (unit1's cells of each row given)."""
    config: str
    roster: str
    entries: dict
    provenances: dict
    submitted_at: dict
    reasons: dict
    finals: dict
    export: object  # {student: (unit1's cells, as written)} -> the export's text
    blank: tuple  # unit1's cells of a student the export has no grade for
    beside: dict = dataclasses.field(default_factory=dict)
    rejected: tuple = ()
    ids: dict = dataclasses.field(default_factory=dict)  # Moodle's participant numbers;
    # Canvas's user id and uploads ({attachment id: display name}) of each student
    feedback: dict = dataclasses.field(default_factory=dict)  # Moodle's feedback column
    head_rows: int = 1  # the export's rows before the students' (Canvas: Points Possible)
    rows: tuple = ("s1001", "s1002", "s1003")  # the students of the export's rows, in order
    encoding: str = "utf-8"
    bom: bytes = b""
    delimiter: str = ","


def roster(columns, lms_ids):
    """The roster: lms_id (lms_ids: {student: the LMS's id}, else blank), student_id, name,
    and these columns of CLASS's (email, sis_id, username)."""
    names = ("student_id", "first", "last", "email", "sis_id", "username")
    rows = [dict(zip(names, person)) for person in CLASS]
    return "".join(",".join(fields) + "\n" for fields in [
        ["lms_id", "student_id", "name", *columns],
        *([lms_ids.get(r["student_id"], ""), r["student_id"], f"{r['first']} {r['last']}",
           *(r[c] for c in columns)] for r in rows)])


def canvas():
    """Loose files (ada: her module, then her notebook, which she had uploaded in an
    earlier submission: "-1"), a zip (grace, late by Canvas's marker); Canvas gives no
    time. Rows by Canvas's user id (the roster's lms_id); Canvas's test student's row."""
    ada = canvas_prefix("Lovelace, Ada", 50001)
    grace = canvas_prefix("Hopper, Grace", 50002, late=True)
    uploads = {"s1001": ("50001", ada, {"7201": ("layer_norm.py", PY), "7202": (
                   canvas_display_name(NOTEBOOK, {NOTEBOOK}), NB)}),
               "s1002": ("50002", grace, {"7301": ("unit1.zip", WORK)})}
    person = {"s1001": '"Lovelace, Ada",50001,,,Normalization,',
              "s1002": '"Hopper, Grace",50002,,,Normalization,',
              "s1003": '"Turing, Alan",50003,,,Normalization,',
              None: '"Student, Test",99999,,aaa-test,Normalization,'}  # (Canvas's student view)
    return Sample(
        config=CONFIG, roster=roster([], {"s1001": "50001", "s1002": "50002", "s1003": "50003"}),
        entries={canvas_entry(prefix, a, name): data for _, prefix, files in uploads.values()
                 for a, (name, data) in files.items()},
        provenances={"s1001": provenance(["lovelaceada_50001_7201_layer_norm.py",
                                  "lovelaceada_50001_7202_01_layernorm_forward-1.ipynb"],
                                 "canvas", "50001", "lovelaceada"),
                 "s1002": provenance(["hoppergrace_LATE_50002_7301_unit1.zip"], "canvas", "50002",
                                 "hoppergrace", late=True)},
        submitted_at={"s1001": "", "s1002": ""},
        reasons={"s1001": "time unknown: no penalty",
                 "s1002": "late, time unknown (Canvas's _LATE marker): flat 20% of the "
                          "autograded 5.5 = 1.1 off"},
        finals={"s1001": "7", "s1002": "5.9"},
        export=lambda cells: canvas_export([(person[s], *cells[s], ",,,,") for s in person]),
        blank=("",), ids={s: (uid, {a: name for a, (name, _) in files.items()})
                          for s, (uid, _, files) in uploads.items()},
        head_rows=2, rows=("s1001", "s1002", "s1003", None))


def moodle():
    """Moodle's default, "submissions in folders" (ada's loose files, grace's zip), and its
    grading worksheet beside archive/ for who (by email) and when (in Europe/Berlin). Rows
    by email."""
    ada, grace = moodle_prefix("Ada Lovelace", 11), moodle_prefix("Grace Hopper", 13)
    sheet = "Moodle's grading worksheet Grades-unit1.csv"
    person = {s: f"{first},{last},,,,{email}," for s, first, last, email, *_ in CLASS}
    late = "1 h 31 min late: 2 started hours x 10% = 20% of the autograded 5.5 = 1.1 off"
    return Sample(
        config=CONFIG + 'c.Grading.lms_timezone = "Europe/Berlin"\n',
        roster=roster(["email"], {}),
        entries={f"{ada}_assignsubmission_file/{NOTEBOOK}": NB,
                 f"{ada}_assignsubmission_file/layer_norm.py": PY,
                 f"{grace}_assignsubmission_file/unit1.zip": WORK},
        beside={"Grades-unit1.csv": worksheet([
            (11, "Ada Lovelace", "ada@example.edu", "Monday, 5 October 2026, 9:14 PM"),
            (13, "Grace Hopper", "grace@example.edu", "Tuesday, 6 October 2026, 1:30 AM")])},
        provenances={"s1001": provenance([f"{ada}_assignsubmission_file"], "moodle", "11",
                                 "Ada Lovelace", "2026-10-05T21:14:00+02:00", sheet),
                 "s1002": provenance([f"{grace}_assignsubmission_file"], "moodle", "13",
                                 "Grace Hopper", "2026-10-06T01:30:00+02:00", sheet)},
        submitted_at={"s1001": "2026-10-05 19:14:00", "s1002": "2026-10-05 23:30:00"},
        reasons={"s1001": "on time", "s1002": late}, finals={"s1001": "7", "s1002": "5.9"},
        export=lambda cells: moodle_export([(person[s], *cells[s]) for s in person]),
        blank=("-", ""), ids={"s1001": 11, "s1002": 13},
        feedback={"s1002": f"Late policy: {late}; score 7 - 1.1 = 5.9"})  # (on time: none)


def blackboard():
    """An attempt's loose files (ada) and a zip (grace), with each attempt's receipt; the
    username in the names (the roster's lms_id), the time in America/New_York. Rows by
    username."""
    files = {"s1001": ("alovelace", datetime.datetime(2026, 10, 5, 15, 0),
                       {NOTEBOOK: NB, "layer_norm.py": PY}),
             "s1002": ("ghopper", datetime.datetime(2026, 10, 5, 20, 29), {"unit1.zip": WORK})}
    entries = {}
    for student, (username, when, uploaded) in files.items():
        entries |= {blackboard_entry("Unit 1", username, when, n): d for n, d in uploaded.items()}
        entries[blackboard_entry("Unit 1", username, when)] = f"Name: {student} ({username})\n"
    person = {s: f'"{last}"\t"{first}"\t"{login}"\t""' for s, first, last, _, _, login in CLASS}
    return Sample(
        config=CONFIG + 'c.Grading.lms_timezone = "America/New_York"\n',
        roster=roster([], {s: login for s, *_, login in CLASS}), entries=entries,
        provenances={s: provenance([blackboard_entry("Unit 1", username, when, n) for n in uploaded],
                           "blackboard", username, None, f"{when:%Y-%m-%dT%H:%M:%S}-04:00",
                           "Blackboard's name") for s, (username, when, uploaded) in files.items()},
        submitted_at={"s1001": "2026-10-05 19:00:00", "s1002": "2026-10-06 00:29:00"},
        reasons={"s1001": "on time", "s1002": "2 h 30 min late: 3 started hours x 10% = 30% of "
                                              "the autograded 5.5 = 1.65 off"},
        finals={"s1001": "7", "s1002": "5.35"},
        export=lambda cells: blackboard_export([(person[s], *cells[s]) for s in person]),
        blank=('""',), encoding="utf-16-le", bom=b"\xff\xfe", delimiter="\t")


def brightspace():
    """A folder per submission (ada) and an older download's loose files (grace), in
    America/Chicago, and the download's index.html, rejected. Rows by OrgDefinedId (the
    roster's sis_id) and Username."""
    ada = brightspace_entry("39786-640693", "Ada Lovelace", datetime.datetime(2026, 10, 5, 14, 14))
    grace = [brightspace_entry("39787-640694", "Grace Hopper",
                               datetime.datetime(2026, 10, 6, 10, 5), n)
             for n in (NOTEBOOK, "layer_norm.py")]
    person = {s: f"#{sis},#{login},{last},{first},{email},"
              for s, first, last, email, sis, login in CLASS}
    return Sample(
        config=CONFIG + 'c.Grading.lms_timezone = "America/Chicago"\n',
        roster=roster(["sis_id", "username"], {}),
        entries={f"{ada}/{NOTEBOOK}": NB, f"{ada}/layer_norm.py": PY, grace[0]: NB,
                 grace[1]: PY, "index.html": "<html>the download's index</html>"},
        rejected=("index.html",),
        provenances={"s1001": provenance([ada], "brightspace", "39786-640693", "Ada Lovelace",
                                 "2026-10-05T14:14:00-05:00", "Brightspace's name"),
                 "s1002": provenance(grace, "brightspace", "39787-640694", "Grace Hopper",
                                 "2026-10-06T10:05:00-05:00", "Brightspace's name")},
        submitted_at={"s1001": "2026-10-05 19:14:00", "s1002": "2026-10-06 15:05:00"},
        reasons={"s1001": "on time",
                 "s1002": "17 h 6 min late: 18 started hours x 10% = 180%, at most 50% "
                          "(c.Grading.late_floor = 50): 50% of the autograded 5.5 = 2.75 off"},
        finals={"s1001": "7", "s1002": "4.25"},
        export=lambda cells: brightspace_export([(person[s], *cells[s]) for s in person]),
        blank=("",))


# each LMS's export's columns of unit1: its score's (and Moodle's, its feedback's)
SCORE = {"canvas": ["unit1 (4521)"],
         "moodle": ["Assignment: unit1 (Real)", "Assignment: unit1 (Feedback)"],
         "blackboard": [f"unit1 [Total Pts: {POINTS} Score] |1002"],
         "brightspace": [f"unit1 Points Grade <Numeric MaxPoints:{POINTS} Weight:50 "
                         "Category:Units CategoryWeight:100>"]}
SAMPLES = {"canvas": canvas, "moodle": moodle, "blackboard": blackboard,
           "brightspace": brightspace}


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    """A course with unit1 released, copied for each LMS's term."""
    root = build_course(tmp_path_factory.mktemp("lms_term") / "course", layout="unit")
    (root / "nbgrader_config_local.py").write_text(CONFIG)
    with contextlib.redirect_stdout(io.StringIO()):
        release(root, ["unit1"])
    return root


def printed(step, *args, **kwargs):
    """What step(*args, **kwargs) printed."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        step(*args, **kwargs)
    return out.getvalue()


def cells(data, sample):
    """The cells of an export's bytes, [[cell]], read as the LMS wrote them."""
    assert data.startswith(sample.bom)
    text = data[len(sample.bom):].decode(sample.encoding)
    return list(csv.reader(io.StringIO(text, newline=""), delimiter=sample.delimiter))


def collected_and_graded(released, tmp_path, sample):
    """The LMS's download collected in a copy of the course, and graded as autograde
    leaves it: the gradebook's submission times are the collected timestamp.txt's."""
    root = shutil.copytree(released, tmp_path / "course")
    (root / "nbgrader_config_local.py").write_text(sample.config)
    (root / "roster.csv").write_text(sample.roster)
    archive = root / "downloaded" / "unit1" / "archive"
    archive.mkdir(parents=True)
    download(archive, sample.entries)
    for name, text in sample.beside.items():
        (archive.parent / name).write_text(text)
    out = printed(collect, root, ["unit1"])
    assert submissions(root, Course.load(root), ["unit1"]) == {"unit1": COLLECTED}, out
    assert sorted(reasons(out)) == list(sample.rejected)
    assert read_collected(root, "unit1") == sample.provenances
    for student in COLLECTED:
        when = sample.submitted_at[student]
        assert held(root, student) == {NOTEBOOK: NB, "normlib/layer_norm.py": PY} | (
            {"timestamp.txt": f"{when}.000000 UTC"} if when else {})
    times = {s: submitted_at(root / "submitted" / s / "unit1") for s in COLLECTED}
    grade(root, {s: when and when.replace(tzinfo=None) for s, when in times.items()})
    return root, out


def check_grades(root, lms, sample):
    """grades.csv, and the LMS's file: the collected students' cells filled, cell by cell,
    every other cell as the export wrote it; the whole file the export with those cells."""
    blank = {s: sample.blank for s in sample.rows}
    template = sample.bom + sample.export(blank).encode(sample.encoding)
    (root / "export.csv").write_bytes(template)
    out = printed(export, root, root / "grades.csv", ["unit1"], lms, root / "export.csv")
    rows = {r["student_id"]: r for r in csv.DictReader((root / "grades.csv").open())}
    assert {s: (r["submitted_at"], r["score"], r["final"], r["penalty_reason"])
            for s, r in rows.items()} == {
        **{s: (sample.submitted_at[s], "7.0", str(float(sample.finals[s])), sample.reasons[s])
           for s in COLLECTED},
        "s1003": ("", "0", "", "")}
    assert "2 scores filled in" in out, out
    assert "  not filled, or partly: 1: unit1 s1003 (missing)" in out.splitlines()
    penalized = [f"unit1 {s}" for s in COLLECTED if sample.finals[s] != "7"]  # (one: s1002)
    assert f"  late policy: 1 of the 2 scores filled in is after a penalty " \
           f"({'; '.join(penalized)}); the raw score, penalty and reason of each: " \
           f"{root / 'grades.csv'}, {root / 'logs' / 'late.csv'}" + (
               " (the reason also in the item's feedback)" if lms == "moodle" else "") \
        in out.splitlines(), out
    written = (root / f"grades-{lms}.csv").read_bytes()
    before, after = cells(template, sample), cells(written, sample)
    assert [len(r) for r in after] == [len(r) for r in before]
    changed = {(sample.rows[i - sample.head_rows], before[0][j]): new
               for i, (was, now) in enumerate(zip(before, after))
               for j, (old, new) in enumerate(zip(was, now)) if old != new}
    assert changed == {(s, column): value for s in COLLECTED for column, value in zip(
        SCORE[lms], (sample.finals[s], sample.feedback.get(s))) if value is not None}
    quote = '"' * (lms == "blackboard")  # (Blackboard's export quotes every text)
    filled = {s: (f"{quote}{sample.finals[s]}{quote}", *(
        [sample.feedback[s]] if s in sample.feedback else sample.blank[1:]))
        for s in COLLECTED}
    assert written == sample.bom + sample.export(blank | filled).encode(sample.encoding)


def check_upload(root, lms, sample, pages, out):
    """The feedback: a zip per student, and the LMS's bulk upload that its importer reads,
    each page found as its student's by the ids the LMS's download gave them; or, for an
    LMS without one, saying so and naming the per-student zips."""
    assert f"feedback for unit1: feedback/*/unit1/, one zip per student in " \
           f"feedback_zips/unit1/ ({len(COLLECTED)})" in out
    for student, found in pages.items():
        with zipfile.ZipFile(root / "feedback_zips" / "unit1" / f"{student}.zip") as z:
            assert {n: z.read(n) for n in z.namelist()} == {
                f"unit1/{p.name}": p.read_bytes() for p in found}
    upload = root / "feedback_upload" / f"unit1-{lms}.zip"
    if lms in ("blackboard", "brightspace"):
        assert out.splitlines()[-1] == (
            f"  {lms.capitalize()} has no bulk feedback upload here: upload each student's "
            "feedback_zips/unit1/<student>.zip (docs/instructors.md, step 6)")
        assert not (root / "feedback_upload").exists()
        return
    assert out.splitlines()[-1] == {
        "moodle": "  Moodle's \"Upload multiple feedback files in a zip\": "
                  "feedback_upload/unit1-moodle.zip (2 students)",
        "canvas": "  Canvas's \"Re-Upload Submissions\": feedback_upload/unit1-canvas.zip "
                  "(2 students)"}[lms]
    with zipfile.ZipFile(upload) as z:
        if lms == "moodle":
            participants = {n: s for s, n in sample.ids.items()}
            found = {name: moodle_import(name, participants) for name in z.namelist()}
            found = {name: (s, stored.lstrip("/")) for name, (s, stored) in found.items()}
        else:
            users = {uid: s for s, (uid, _) in sample.ids.items()}
            read = {name: canvas_import(name, dict(sample.ids.values())) for name in z.namelist()}
            found = {name: (users[uid], next(f"{stem}.html" for stem in STEMS
                                             if name.endswith(f"_{stem}.html")))
                     for name, (uid, _) in read.items()}
            # each page shown under the upload it matched: the student's of that notebook,
            # else their last (tools/lms/feedback_upload.py's docstring; docs/instructors.md, step 6)
            assert {found[name]: shown for name, (_, shown) in read.items()} == {
                ("s1001", f"{STEMS[0]}.html"): "01_layernorm_forward-1.ipynb",
                ("s1001", f"{STEMS[1]}.html"): "01_layernorm_forward-1.ipynb",
                ("s1002", f"{STEMS[0]}.html"): "unit1.zip",
                ("s1002", f"{STEMS[1]}.html"): "unit1.zip"}
        assert sorted(found.values()) == sorted((s, p.name) for s in pages for p in pages[s])
        for name, (student, page) in found.items():
            assert z.read(name) == (root / "feedback" / student / "unit1" / page).read_bytes()


@pytest.mark.parametrize("lms", SAMPLES)
def test_a_term_with_the_lms(released, tmp_path, monkeypatch, lms):
    sample = SAMPLES[lms]()
    root, _ = collected_and_graded(released, tmp_path, sample)
    check_grades(root, lms, sample)
    # feedback as `make feedback LMS=...` writes it; nbgrader's generate_feedback (which
    # needs graded notebooks) is replaced by pages made as tests/test_feedback_upload.py makes them
    ran = []
    monkeypatch.setattr(feedback_step, "generate",
                        lambda _, target: ran.append(("generate_feedback", target)) or {})
    for student in COLLECTED:
        (root / "autograded" / student / "unit1").mkdir(parents=True)
    pages = pages_of(root, COLLECTED)
    out = printed(feedback_step.feedback, root, ["unit1"], lms=lms)
    assert ran == [("generate_feedback", "unit1")]
    check_upload(root, lms, sample, pages, out)
