"""`make collect` from an LMS's download (tools/instructor/collect.py): every entry of archive/ is
collected, with its student id, files and submission time, or rejected with its reason,
and the instructor is told which and why; none vanishes. Who and when come from what the
LMS wrote, never from what the student wrote (issue 39: cases 3, 4, 5, 6, 9, 14 and 15 of
the hostile class, each beside honest students, and the rules they broke)."""

import contextlib
import csv
import datetime
import io
import os
import shutil
import struct
import subprocess
import time
import zipfile
from pathlib import Path

import pytest

from tools.course.bounds import BOUNDS
from tools.course.folder import Course, submissions
from tools.instructor.build import build_course
from tools.instructor.collect import collect, read_collected
from tools.instructor.roster import student_of
from tools.lms.downloads import names

NOTEBOOK = "01_layernorm_forward.ipynb"
GOOD = {NOTEBOOK: "{}", "normlib/layer_norm.py": "x = 1\n"}
WRONG = {NOTEBOOK: "{}", "normlib/layer_norm.py": "x = 2  # wrong\n"}
DAY = 86400


def write_zip(path, files, mtime=None):
    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    if mtime is not None:
        os.utime(path, (mtime, mtime))


def invalid_utf8_name(path):
    """A zip whose entry name is flagged UTF-8 but is not (bytes replaced in place)."""
    write_zip(path, {"normlib/\u00e9.py": "x = 1\n"})
    path.write_bytes(path.read_bytes().replace("\u00e9".encode(), b"\xff\xfe"))


def run(root, *names):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        collect(root, list(names))
    return out.getvalue()


def course(tmp_path, config=""):
    root = build_course(tmp_path / "course", layout="unit")
    (root / "nbgrader_config_local.py").write_text(config)
    archive = root / "downloaded" / "unit1" / "archive"
    archive.mkdir(parents=True)
    return root, archive


def rejected(out, entry):
    """The reason printed for a rejected entry (one line), or None."""
    lines = [line for line in out.splitlines() if line.strip().startswith(f"REJECTED {entry}:")]
    assert len(lines) <= 1, lines
    return lines[0] if lines else None


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    root = build_course(tmp_path_factory.mktemp("collect"), layout="unit")
    archive = root / "downloaded" / "unit1" / "archive"
    archive.mkdir(parents=True)
    write_zip(archive / "alice_unit1.zip", GOOD)
    write_zip(archive / "bob_unit1.zip", {"../../escape.py": "x = 1\n", **GOOD})
    (archive / "carol_unit1.zip").write_bytes(b"PK\x03\x04 truncated")
    invalid_utf8_name(archive / "dave_unit1.zip")
    write_zip(archive / "erin_unit1.zip", GOOD, mtime=1_700_000_000)
    write_zip(archive / "erin_unit1_v2.zip", {**GOOD, NOTEBOOK: '{"v": 2}'},
              mtime=1_700_000_000 + DAY)
    # one extra folder level, and junk beside it
    write_zip(archive / "frank_unit1.zip", {f"frank_unit1/unit1/{k}": v for k, v in GOOD.items()}
              | {"__MACOSX/frank_unit1/._x": "", "frank_unit1/unit1/.ipynb_checkpoints/a": ""})
    write_zip(archive / "Grace Hopper_1234567_assignsubmission_file_.zip", GOOD)  # Moodle
    write_zip(archive / "hoppergrace_LATE_12345_67890_unit1.zip", GOOD)  # Canvas
    write_zip(archive / "van_der_berg_unit1.zip", {"unit1/" + k: v for k, v in GOOD.items()})
    write_zip(archive / "ivan_unit1.zip", {"notes.txt": "I could not do it"})
    write_zip(archive / "judy_unit1.zip", {**GOOD, "timestamp.txt": "2026-10-05 21:14:03 UTC"})
    return root, run(root, "unit1")


def test_every_entry_is_collected_or_rejected_and_none_vanishes(collected):
    root, out = collected
    assert submissions(root, Course.load(root), ["unit1"]) == {"unit1": [
        "alice", "frank", "grace-hopper", "hoppergrace", "judy", "van_der_berg"]}
    gone = sorted(p.name for p in (root / "downloaded" / "unit1" / "rejected").iterdir())
    assert gone == ["bob_unit1.zip", "carol_unit1.zip", "dave_unit1.zip", "erin_unit1.zip",
                    "erin_unit1_v2.zip", "ivan_unit1.zip"]
    assert len(list((root / "downloaded" / "unit1" / "archive").iterdir())) == 6
    assert "collected unit1: 12 entries in archive/, 6 collected (6 new, 0 replacing an " \
           "older submission, 0 unchanged), 6 rejected" in out
    assert not list(root.rglob("escape.py"))


@pytest.mark.parametrize("entry,reason", [
    ("bob_unit1.zip", "an entry outside its folder ('../../escape.py')"),
    ("carol_unit1.zip", "not a readable zip (BadZipFile"),
    ("dave_unit1.zip", "not a readable zip (UnicodeDecodeError"),
    ("erin_unit1.zip", "2 entries of erin (erin_unit1.zip, erin_unit1_v2.zip), and no date "
                       "from the LMS tells which is the later: all refused"),
    ("erin_unit1_v2.zip", "2 entries of erin"),
    ("ivan_unit1.zip", "no notebook and no normlib/ file in it"),
])
def test_each_rejection_is_printed_with_its_reason(collected, entry, reason):
    _, out = collected
    assert reason in (rejected(out, entry) or ""), out


def test_the_files_are_found_however_deep_and_junk_is_left(collected):
    root, _ = collected
    for student in ("frank", "van_der_berg", "alice"):
        folder = root / "submitted" / student / "unit1"
        assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*")
                      if p.is_file()) == [NOTEBOOK, "normlib/layer_norm.py"]


def test_neither_a_timestamp_in_the_zip_nor_a_files_date_is_a_submission_time(collected):
    """Case 5's channel: judy's zip carries a timestamp.txt, erin's zips dates a day apart;
    neither is a date the LMS wrote. No timestamp.txt is collected, and collect says loudly
    that the times are unknown."""
    root, out = collected
    assert not list((root / "submitted").rglob("timestamp.txt"))
    assert "TIMES UNKNOWN for 6 of 6: alice, frank, grace-hopper, hoppergrace, judy, " \
           "van_der_berg" in out and "none of them is marked late by a date" in out
    provenance = read_collected(root, "unit1")
    assert provenance["judy"]["time"] is None and provenance["hoppergrace"] == {
        "entry": "hoppergrace_LATE_12345_67890_unit1.zip",
        "entries": ["hoppergrace_LATE_12345_67890_unit1.zip"], "lms": "canvas", "key": "12345",
        "name": "hoppergrace", "time": None, "time_from": None, "late_marker": True,
        "superseded": {}, "extension": None}
    assert provenance["judy"] == {"entry": "judy_unit1.zip", "entries": ["judy_unit1.zip"],
                                  "lms": "plain", "key": "judy", "name": None, "time": None,
                                  "time_from": None, "late_marker": False, "superseded": {},
                                  "extension": None}
    assert "late: hoppergrace (late by Canvas's _LATE marker; no time)" in out


# --- who: the name as the LMS writes it, the allow-list, the roster --------------------

@pytest.mark.parametrize("name,folder,student", [
    ("s1004_unit1.zip", False, "s1004"),
    ("van_der_berg_unit1.zip", False, "van_der_berg"),
    ("van_der_berg.zip", False, "van_der_berg"),
    ("s1004_unit1_v2.zip", False, "s1004"),
    ("John Smith_1234567_assignsubmission_file_.zip", False, "john-smith"),
    ("John Smith_1234567_assignsubmission_file_work.zip", False, "john-smith"),
    ("John Smith_1234567_assignsubmission_file", True, "john-smith"),  # Moodle 4.1+
    ("John Smith_1234567_assignsubmission_file_", True, "john-smith"),  # before 4.1
    ("smithjohn_LATE_12345_67890_unit1.zip", False, "smithjohn"),
    ("smithjohn_12345_67890_normlib.zip", False, "smithjohn"),
    ("o_brienpat_12345_67890_x_1_2_y.zip", False, "o_brienpat"),  # "_" kept, Canvas's
    ("e\u0301_unit1.zip", False, "\u00e9"),  # decomposed: read in NFC (issue 62)
])
def test_student_ids_of_names_without_a_roster(name, folder, student):
    assert student_of(names(name, folder), "unit1")[0] == student


@pytest.mark.parametrize("name", [".._unit1.zip", "._unit1.zip", "-rf_unit1.zip",
                                  "=HYPERLINK(1)_unit1.zip", "+2+3_unit1.zip", "@SUM_unit1.zip",
                                  "a+b_unit1.zip", "tab\tname_unit1.zip", "\u0301e_unit1.zip",
                                  "x" * 65 + "_unit1.zip", " lead_unit1.zip"])
def test_an_id_outside_the_allow_list_is_refused(name):
    """Case 15 (".." and "." as ids wrote outside submitted/), and the allow-list's other
    refusals: a leading "-", a formula's first character, the exchange's "+", a tab, a
    mark first, one too long. (A name decomposed, as a Mac extracts it, is read in NFC:
    issue 62.)"""
    found = student_of(names(name, False), "unit1")
    assert isinstance(found, str) and "student id" in found, found


def test_dot_dot_as_a_name_writes_nothing_outside_submitted(tmp_path):
    """Case 15: `.._unit1.zip` wrote into the course root."""
    root, archive = course(tmp_path)
    write_zip(archive / ".._unit1.zip", GOOD)
    write_zip(archive / "honest1_unit1.zip", GOOD)
    out = run(root, "unit1")
    assert "a student id must start with a letter or a digit ('..')" in rejected(out, ".._unit1.zip")
    assert submissions(root, Course.load(root), ["unit1"]) == {"unit1": ["honest1"]}
    assert not (root / "unit1").exists() and not (root / "submitted" / "unit1").exists()


def test_a_name_no_line_can_show_is_printed_escaped_and_refused_alone(tmp_path):
    """An entry's name holding a line's end, or bytes that are no UTF-8, neither stops
    collect nor prints a line of its own (a forged `new: ...`): escaped as Python writes it
    (issue 58; the exchange's folders are printed so too)."""
    root, archive = course(tmp_path)
    write_zip(archive / "s1001_unit1.zip", {"01_layernorm_forward.ipynb": "{}"})
    forged = "x.zip\n  new: s1666"
    (archive / forged).write_bytes(b"not a zip")
    os.mkdir(os.fsencode(archive) + b"/\xff\xfe_unit1")
    out = run(root, "unit1")
    assert "  new: s1001" in out.splitlines() and "  new: s1666" not in out.splitlines()
    assert rejected(out, "x.zip\\n  new: s1666") and rejected(out, "\\udcff\\udcfe_unit1")
    assert submissions(root, Course.load(root), ["unit1"])["unit1"] == ["s1001"]


def test_ids_that_differ_only_in_case_or_normalization_are_refused(tmp_path):
    root, archive = course(tmp_path)
    write_zip(archive / "Alice_unit1.zip", GOOD)
    write_zip(archive / "alice_unit1.zip", GOOD)
    write_zip(archive / "honest1_unit1.zip", GOOD)
    out = run(root, "unit1")
    for entry, other in (("Alice_unit1.zip", "alice"), ("alice_unit1.zip", "Alice")):
        assert f"differs from {other} only in case, Unicode normalization or look-alike " \
               "characters" in rejected(out, entry)
    assert submissions(root, Course.load(root), ["unit1"]) == {"unit1": ["honest1"]}
    write_zip(archive / "HONEST1_unit1.zip", GOOD)  # against one collected before
    out = run(root, "unit1")
    assert "differs from honest1 only in case" in rejected(out, "HONEST1_unit1.zip")


def test_look_alike_ids_and_names_are_never_two_students(tmp_path):
    """Issue 58: a Cyrillic "\u0435" for a Latin "e" gave two rows that read as one
    student: "Ada Lov\u0435lace"'s entry beside Ada's (Moodle's display names, no roster)
    and a plain id "s1\u0430" beside "s1a", in this collect or in one before (another
    assignment of the class). Ids whose confusable skeletons (UTS #39) are one are refused,
    saying so; the honest students beside them are collected."""
    root, archive = course(tmp_path)
    (root / "submitted" / "s1a" / "unit0").mkdir(parents=True)  # (collected before)
    write_zip(archive / "Ada Lovelace_11_assignsubmission_file_a.zip", GOOD)
    write_zip(archive / "Ada Lov\u0435lace_12_assignsubmission_file_a.zip", WRONG)
    write_zip(archive / "s1\u0430_unit1.zip", WRONG)
    write_zip(archive / "Grace Hopper_13_assignsubmission_file_a.zip", GOOD)
    write_zip(archive / "s1002_unit1.zip", GOOD)
    out = run(root, "unit1")
    for entry, who, other in (
            ("Ada Lovelace_11_assignsubmission_file_a.zip", "ada-lovelace", "ada-lov\u0435lace"),
            ("Ada Lov\u0435lace_12_assignsubmission_file_a.zip", "ada-lov\u0435lace",
             "ada-lovelace"),
            ("s1\u0430_unit1.zip", "s1\u0430", "s1a")):
        assert rejected(out, entry).endswith(
            f"its student id {who!r} differs from {other} only in case, Unicode normalization "
            "or look-alike characters (Unicode's confusable skeletons, UTS #39): refused (if "
            "they are two students, list both ids in the roster, c.Grading.roster); moved to "
            "downloaded/unit1/rejected/")
    assert submissions(root, Course.load(root), ["unit1"]) == {"unit1": ["grace-hopper", "s1002"]}


def test_look_alike_ids_a_roster_lists_are_two_students_and_it_says_so(tmp_path):
    """Issue 58, after a review: two roster rows whose ids are one to a reader ("s1001",
    "sl00l": honest ids can be, "user1" and "userl") are the instructor's to list. The roster
    is read with a warning naming both lines; both students are collected (an unlisted id is
    refused, as every id the roster lacks). Two rows of one id up to case still stop
    collect, naming the line."""
    root, archive = course(tmp_path, 'c.Grading.roster = "roster.csv"\n')
    (root / "roster.csv").write_text("lms_id,student_id,name\n,s1001,Ada Lovelace\n"
                                     ",s1002,Alan Turing\n,sl00l,Eve Other\n")
    for student in ("s1001", "sl00l", "s100l"):
        write_zip(archive / f"{student}_unit1.zip", GOOD)
    out = run(root, "unit1")
    assert "WARNING: roster.csv, line 4: student id 'sl00l' looks like line 2's 's1001'" in \
        out.replace(str(root) + "/", "")
    assert submissions(root, Course.load(root), ["unit1"])["unit1"] == ["s1001", "sl00l"]
    assert "no student of the roster has this id 's100l'" in rejected(out, "s100l_unit1.zip")
    (root / "roster.csv").write_text("lms_id,student_id,name\n,s1001,Ada Lovelace\n"
                                     ",S1001,Eve Other\n")
    with pytest.raises(SystemExit) as stopped:
        run(root, "unit1")
    assert str(stopped.value).endswith("roster.csv, line 3: student id 'S1001' is also line "
                                       "2's (up to case and Unicode normalization)")


def test_a_moodle_display_name_cannot_carry_another_students_number(tmp_path):
    """Case 4: a folder named so that its first "_<digits>_" was honest2's number replaced
    honest2's submission. Moodle writes no "_" in a display name: a folder's name is read
    from its end, and a name holding "_" is not one Moodle wrote."""
    root, archive = course(tmp_path)
    real = archive / "Honest Two_1002_assignsubmission_file"
    forged = archive / "Honest Two_1002_assignsubmission_file_x_1666_assignsubmission_file_"
    for folder, files in ((real, GOOD), (forged, WRONG)):
        (folder / "normlib").mkdir(parents=True)
        for rel, text in files.items():
            (folder / rel).write_text(text)
    write_zip(archive / "Honest One_1001_assignsubmission_file_work.zip", GOOD)
    out = run(root, "unit1")
    assert "holds '_', which Moodle never writes" in rejected(out, forged.name)
    assert submissions(root, Course.load(root), ["unit1"]) == {"unit1": ["honest-one", "honest-two"]}
    assert (root / "submitted/honest-two/unit1/normlib/layer_norm.py").read_text() == "x = 1\n"


WORKSHEET_HEADER = ('"Identifier","Full name","Email address","Status","Grade","Maximum Grade",'
                    '"Grade can be changed","Last modified (submission)","Last modified (grade)",'
                    '"Feedback comments"\n')


def worksheet(rows, status=None):
    """Moodle's grading worksheet (mod/assign/gradingtable.php's columns), rows of
    (number, full name, email, last modified); status: {number: its Status}."""
    return WORKSHEET_HEADER + "".join(
        f'"Participant {n}","{name}","{email}",'
        f'"{(status or {}).get(n, "Submitted for grading")}","","100.00","Yes",'
        f'"{when}","-",""\n' for n, name, email, when in rows)


def test_with_a_roster_and_the_worksheet_a_number_is_one_student(tmp_path):
    """Moodle's number is a participant number: the worksheet's row says whose, and the
    entry's display name must agree with it; with a roster, the row's email names one
    student. A name that matches two rows is refused, never guessed."""
    root, archive = course(tmp_path, 'c.Grading.roster = "roster.csv"\n'
                                     'c.Grading.lms_timezone = "Europe/Berlin"\n')
    (root / "roster.csv").write_text(
        "lms_id,student_id,name,email\n,s1001,Ada Lovelace,ada@example.edu\n"
        ",s1002,Alan Turing,alan@example.edu\n,s1003,Alan Turing,turing2@example.edu\n"
        ",s1004,Mallory Other,mallory@example.edu\n")
    (archive.parent / "Grades-unit1.csv").write_text(worksheet([
        (11, "Ada Lovelace", "ada@example.edu", "Monday, 5 October 2026, 9:14 PM"),
        (12, "Alan Turing", "turing2@example.edu", "Monday, 5 October 2026, 9:15 PM"),
        (13, "Mallory Other", "mallory@example.edu", "Monday, 5 October 2026, 9:16 PM")]))
    write_zip(archive / "Ada Lovelace_11_assignsubmission_file_a.zip", GOOD)
    write_zip(archive / "Alan Turing_12_assignsubmission_file_a.zip", GOOD)
    write_zip(archive / "Ada Lovelace_13_assignsubmission_file_a.zip", WRONG)  # 13's
    write_zip(archive / "Somebody_99_assignsubmission_file_a.zip", GOOD)
    out = run(root, "unit1")
    assert submissions(root, Course.load(root), ["unit1"]) == {"unit1": ["s1001", "s1003"]}
    assert "participant 13 is 'Mallory Other' in Grades-unit1.csv, but the entry's name " \
           "says 'Ada Lovelace'" in rejected(out, "Ada Lovelace_13_assignsubmission_file_a.zip")
    assert "participant 99 is not in Grades-unit1.csv" in \
        rejected(out, "Somebody_99_assignsubmission_file_a.zip")
    # without the worksheet, the display name alone: Alan Turing is two students
    (archive.parent / "Grades-unit1.csv").unlink()
    write_zip(archive / "Alan Turing_14_assignsubmission_file_b.zip", GOOD)
    out = run(root, "unit1")
    assert "name 'Alan Turing' matches 2 students of the roster (s1002, s1003): refused, " \
           "never guessed" in rejected(out, "Alan Turing_14_assignsubmission_file_b.zip")


def test_a_roster_maps_lms_names_and_an_unknown_name_is_listed_not_guessed(tmp_path):
    root, archive = course(tmp_path, 'c.Grading.roster = "roster.csv"\n')
    (root / "roster.csv").write_text("lms_id,student_id,name\n1234567,s1001,Grace Hopper\n"
                                     "12345,s1002,Alan Turing\n,s1003,Ada Lovelace\n"
                                     ",s1004,Barbara Liskov\n")
    write_zip(archive / "Grace Hopper_1234567_assignsubmission_file_.zip", GOOD)  # by name
    write_zip(archive / "turingalan_12345_67890_unit1.zip", GOOD)  # Canvas's user id
    write_zip(archive / "lovelaceada_555_67891_unit1.zip", GOOD)  # by name: id unknown
    write_zip(archive / "s1004_unit1.zip", GOOD)  # by student id
    write_zip(archive / "Mallory Unknown_999_assignsubmission_file_.zip", GOOD)
    out = run(root, "unit1")
    assert submissions(root, Course.load(root), ["unit1"]) == {"unit1": ["s1001", "s1002", "s1003", "s1004"]}
    assert "no student of the roster has this name 'Mallory Unknown'" in \
        rejected(out, "Mallory Unknown_999_assignsubmission_file_.zip")


def test_a_roster_with_an_id_outside_the_allow_list_stops_collect(tmp_path):
    root, archive = course(tmp_path, 'c.Grading.roster = "roster.csv"\n')
    (root / "roster.csv").write_text("lms_id,student_id,name\n1,s1,A\n2,=cmd(),B\n")
    write_zip(archive / "s1_unit1.zip", GOOD)
    with pytest.raises(SystemExit, match=r"roster.csv, line 3: a student id must start with"):
        run(root, "unit1")


# --- which entry, and when: dates the LMS wrote ------------------------------------------

def test_an_entry_never_replaces_another_students_submission(tmp_path):
    """Case 3: honest2_unit1_v2.zip (wrong code, and a timestamp.txt of 2099) won over
    honest2's own zip. Two entries of one student that no LMS date tells apart are both
    refused and listed; a later resubmission is collected, never refused as older."""
    root, archive = course(tmp_path)
    write_zip(archive / "honest1_unit1.zip", GOOD)
    write_zip(archive / "honest2_unit1.zip", GOOD)
    out = run(root, "unit1")
    assert "2 collected (2 new" in out
    write_zip(archive / "honest2_unit1_v2.zip", {**WRONG, "timestamp.txt": "2099-01-01 00:00:00"})
    out = run(root, "unit1")
    for entry in ("honest2_unit1.zip", "honest2_unit1_v2.zip"):
        assert "2 entries of honest2" in rejected(out, entry), out
    assert (root / "submitted/honest2/unit1/normlib/layer_norm.py").read_text() == "x = 1\n"
    assert not (root / "submitted/honest2/unit1/timestamp.txt").exists()
    write_zip(archive / "honest2_unit1_v3.zip", {**GOOD, NOTEBOOK: '{"v": 3}'})  # resubmitted
    out = run(root, "unit1")
    assert "1 replacing an older submission" in out and "honest2_unit1_v3" not in out
    assert (root / "submitted/honest2/unit1" / NOTEBOOK).read_text() == '{"v": 3}'


def test_with_a_roster_a_second_entry_of_a_student_is_refused_too(tmp_path):
    """Case 3 with a roster: s1002_unit1_v2.zip did the same to s1002."""
    root, archive = course(tmp_path, 'c.Grading.roster = "roster.csv"\n')
    (root / "roster.csv").write_text("lms_id,student_id,name\n,s1001,A B\n,s1002,C D\n")
    write_zip(archive / "s1002_unit1.zip", GOOD)
    write_zip(archive / "s1002_unit1_v2.zip", {**WRONG, "timestamp.txt": "2099-01-01 00:00:00"})
    write_zip(archive / "s1001_unit1.zip", GOOD)
    out = run(root, "unit1")
    assert submissions(root, Course.load(root), ["unit1"]) == {"unit1": ["s1001"]}
    assert "2 entries of s1002" in rejected(out, "s1002_unit1_v2.zip")


def test_canvas_orders_two_uploads_by_its_attachment_ids(tmp_path):
    """Own case (rule 4): two Canvas downloads in one archive: the later upload (the larger
    attachment id, Canvas's) is kept, the earlier rejected saying so; the _LATE marker says
    late without a time."""
    root, archive = course(tmp_path)
    write_zip(archive / "lovelaceada_LATE_555_901_unit1.zip", {**GOOD, NOTEBOOK: '{"v": 2}'})
    write_zip(archive / "lovelaceada_555_77_unit1.zip", GOOD)
    out = run(root, "unit1")
    assert "an earlier upload of lovelaceada (Canvas's attachment 77)" in \
        rejected(out, "lovelaceada_555_77_unit1.zip")
    assert (root / "submitted/lovelaceada/unit1" / NOTEBOOK).read_text() == '{"v": 2}'
    assert read_collected(root, "unit1")["lovelaceada"]["late_marker"] is True


def test_the_late_mark_comes_from_the_lms_not_the_students_timestamp(tmp_path):
    """Case 5: a zip whose timestamp.txt said it came before the due date was not marked
    late, whatever the LMS's date said. The LMS's date (here Blackboard's name) decides;
    with an export beside the download, the export's does."""
    root, archive = course(tmp_path, 'c.Grading.lms_timezone = "Europe/Berlin"\n'
                                     'c.Grading.due = {"unit1": "2026-10-05 23:59 +02:00"}\n')
    early = {**GOOD, "timestamp.txt": "2026-10-01 10:00:00 UTC"}
    write_zip(archive / "Unit 1_s1001_attempt_2026-10-06-09-30-00_work.zip", early)
    write_zip(archive / "Unit 1_s1002_attempt_2026-10-05-21-00-00_work.zip", GOOD)
    (archive / "Unit 1_s1001_attempt_2026-10-06-09-30-00.txt").write_text(
        "Name: A B (s1001)\nAssignment: Unit 1\nDate Submitted: Tuesday, 6 October 2026 "
        "09:30:00 o'clock CEST\n")
    out = run(root, "unit1")
    assert "late: s1001 (9 h 31 min late)" in out and "s1002 (" not in out
    assert (root / "submitted/s1001/unit1/timestamp.txt").read_text() == \
        "2026-10-06 07:30:00.000000 UTC"
    assert "1 Blackboard receipt read" in out
    assert read_collected(root, "unit1")["s1002"]["time_from"] == "Blackboard's name"


def test_an_export_beside_the_download_gives_the_times(tmp_path):
    root, archive = course(tmp_path, 'c.Grading.lms_timezone = "America/New_York"\n'
                                     'c.Grading.due = {"unit1": "2026-10-05 23:59 -04:00"}\n')
    (archive.parent / "times.csv").write_text(
        "student_id,submitted_at\ns1,2026-10-05 23:00\ns2,2026-10-06T04:30:00+00:00\n")
    write_zip(archive / "s1_unit1.zip", GOOD)
    write_zip(archive / "s2_unit1.zip", GOOD)
    out = run(root, "unit1")
    assert "times: an export times.csv" in out
    assert "late: s2 (31 min late)" in out and "s1 (" not in out
    assert (root / "submitted/s1/unit1/timestamp.txt").read_text() == \
        "2026-10-06 03:00:00.000000 UTC"


def test_a_date_that_cannot_be_read_stops_collect_naming_its_line(tmp_path):
    root, archive = course(tmp_path, 'c.Grading.lms_timezone = "Europe/Berlin"\n')
    (archive.parent / "Grades.csv").write_text(worksheet([
        (1, "Ada Lovelace", "a@x", "Monday, 5 October 2026, 9:14 PM"),
        (2, "Alan Turing", "t@x", "lundi 5 octobre 2026, 21:15")]))
    write_zip(archive / "s1_unit1.zip", GOOD)
    with pytest.raises(SystemExit, match=r"Grades.csv, line 3: 'lundi 5 octobre 2026, 21:15' "
                                         r"is not a date written as '%A, %d %B %Y, %I:%M %p'"):
        run(root, "unit1")
    assert not (root / "submitted").exists()
    (root / "nbgrader_config_local.py").write_text("")  # and without a time zone: says so
    with pytest.raises(SystemExit, match="c.Grading.lms_timezone is not set"):
        run(root, "unit1")


# --- done when: a Moodle "submissions in folders" class, with and without its worksheet --

MOODLE_CLASS = {  # participant: (full name, last modified, as the worksheet writes it)
    1001: ("Ada Lovelace", "Monday, 5 October 2026, 9:14 PM"),
    1002: ("Alan Turing", "Monday, 5 October 2026, 11:58 PM"),
    1003: ("Grace Hopper", "Tuesday, 6 October 2026, 1:05 AM"),  # late: due 23:59
}


def moodle_download(path, made):
    """A Moodle 4.1+ "Download all submissions" zip, submissions in folders
    (mod/assign/classes/downloader.php: "<Full Name>_<n>_assignsubmission_file/<path>"),
    every entry dated `made`, the moment the zip is made (zipstream's default)."""
    with zipfile.ZipFile(path, "w") as z:
        for number, (name, _) in MOODLE_CLASS.items():
            for rel, text in GOOD.items():
                info = zipfile.ZipInfo(f"{name}_{number}_assignsubmission_file/{rel}",
                                       made.timetuple()[:6])
                z.writestr(info, text)


@pytest.mark.parametrize("extract", ["unzip", "zipfile"])
def test_a_moodle_class_in_folders_is_late_by_its_worksheet_alone(tmp_path, extract):
    """Extracted with unzip (the entries' dates kept: the download's moment, after the due
    date) and with Python's zipfile (the extraction's moment): the two on-time students
    are not late and the late one is; without the worksheet, collect says the times are
    unknown and marks no one late."""
    config = 'c.Grading.lms_timezone = "Europe/Berlin"\n' \
             'c.Grading.due = {"unit1": "2026-10-05 23:59 +02:00"}\n'
    root, archive = course(tmp_path, config)
    download = tmp_path / "unit1.zip"
    moodle_download(download, datetime.datetime(2026, 10, 9, 12, 0))
    if extract == "unzip":
        subprocess.run(["unzip", "-q", str(download), "-d", str(archive)], check=True)
        dated = (archive / "Ada Lovelace_1001_assignsubmission_file" / NOTEBOOK).stat().st_mtime
        assert abs(dated - datetime.datetime(2026, 10, 9, 12, 0).timestamp()) < 2
    else:
        zipfile.ZipFile(download).extractall(archive)
        assert abs((archive / "Ada Lovelace_1001_assignsubmission_file").stat().st_mtime
                   - time.time()) < 60
    out = run(root, "unit1")
    assert "TIMES UNKNOWN for 3 of 3: ada-lovelace, alan-turing, grace-hopper" in out
    assert "late:" not in out
    assert not list((root / "submitted").rglob("timestamp.txt"))

    (archive.parent / "Grades-unit1.csv").write_text(worksheet(
        [(n, name, f"{n}@example.edu", when) for n, (name, when) in MOODLE_CLASS.items()]))
    out = run(root, "unit1")
    assert "times: Moodle's grading worksheet Grades-unit1.csv" in out and "TIMES UNKNOWN" not in out
    assert "late: grace-hopper (1 h 6 min late)" in out
    assert "ada-lovelace (" not in out and "alan-turing (" not in out
    times = {s: (root / "submitted" / s / "unit1" / "timestamp.txt").read_text()
             for s in ("ada-lovelace", "alan-turing", "grace-hopper")}
    assert times == {"ada-lovelace": "2026-10-05 19:14:00.000000 UTC",
                     "alan-turing": "2026-10-05 21:58:00.000000 UTC",
                     "grace-hopper": "2026-10-05 23:05:00.000000 UTC"}


def php_fputcsv(values):
    """A line as PHP's fputcsv writes it with its default escape character (php-src
    ext/standard/file.c, php_fputcsv; Moodle's csv_export_writer): a field holding
    ',', '"', '\\', a space, tab, CR or LF is enclosed, and each '"' in it doubled unless a
    backslash comes before it."""
    out = []
    for text in values:
        if not any(c in text for c in ',"\\ \t\r\n'):
            out.append(text)
            continue
        field, escaped = '"', False
        for c in text:
            if c == "\\":
                escaped = True
            elif c == '"' and not escaped:
                field += '"'
            else:
                escaped = False
            field += c
        out.append(field + '"')
    return ",".join(out) + "\n"


def moodle_worksheet(rows):
    """The grading worksheet as Moodle writes it (fputcsv), rows of (number, full name,
    last modified)."""
    return php_fputcsv(next(csv.reader([WORKSHEET_HEADER]))) + "".join(php_fputcsv(
        [f"Participant {n}", name, f"{n}@example.edu", "Submitted for grading", "", "100.00",
         "Yes", when, "-", ""]) for n, name, when in rows)


def moodle_class(tmp_path, extra):
    """A Moodle class in folders (MOODLE_CLASS and the students of extra: {number: (full
    name, the name of its entry, last modified)}), due 2026-10-05 23:59 in Berlin."""
    root, archive = course(tmp_path, 'c.Grading.lms_timezone = "Europe/Berlin"\n'
                                     'c.Grading.due = {"unit1": "2026-10-05 23:59 +02:00"}\n')
    people = {n: (name, name, when) for n, (name, when) in MOODLE_CLASS.items()} | extra
    for n, (_, entry, _) in people.items():
        for rel, text in GOOD.items():
            (archive / f"{entry}_{n}_assignsubmission_file" / rel).parent.mkdir(
                parents=True, exist_ok=True)
            (archive / f"{entry}_{n}_assignsubmission_file" / rel).write_text(text)
    return root, archive, [(n, name, when) for n, (name, _, when) in people.items()]


def test_a_full_name_holding_backslash_quote_keeps_the_worksheets_columns(tmp_path):
    """Issue 58: Moodle writes its worksheet with PHP's fputcsv, which leaves a '"' after a
    backslash alone; read as Python's csv reads it, a full name 'Eve \\",-,-,...' ends
    at that quote and its dashes fill the columns after it, the time's among them ("-":
    time unknown, no penalty). Read as fputcsv writes it, Eve is late by her row's time, and
    the class beside her is graded by theirs."""
    eve = 'Eve \\",-,-,-,-,-,-,-'
    root, archive, rows = moodle_class(tmp_path, {
        1004: (eve, "Eve", "Wednesday, 7 October 2026, 10:00 AM")})
    (archive.parent / "Grades-unit1.csv").write_text(moodle_worksheet(rows))
    assert next(csv.reader(io.StringIO(moodle_worksheet(rows)).readlines()[4:]))[7] == "-"
    out = run(root, "unit1")
    assert "TIMES UNKNOWN" not in out and "REJECTED" not in out
    assert "late: eve (1 d 10 h 1 min late), grace-hopper (1 h 6 min late)" in out
    times = {s: (root / "submitted" / s / "unit1" / "timestamp.txt").read_text()
             for s in ("ada-lovelace", "alan-turing", "grace-hopper", "eve")}
    assert times == {"ada-lovelace": "2026-10-05 19:14:00.000000 UTC",
                     "alan-turing": "2026-10-05 21:58:00.000000 UTC",
                     "grace-hopper": "2026-10-05 23:05:00.000000 UTC",
                     "eve": "2026-10-07 08:00:00.000000 UTC"}


def test_a_worksheet_row_whose_columns_are_off_refuses_that_entry_alone(tmp_path):
    """Issue 58: a row of the worksheet with a column more than its header (not what
    fputcsv writes) is refused alone, its entry with it, saying why; the rest of the class
    is collected and dated by its rows (it stopped collect, reading "Yes" as the time)."""
    root, archive, rows = moodle_class(tmp_path, {
        1005: ("Mallory Other", "Mallory Other", "Friday, 9 October 2026, 10:00 AM")})
    lines = moodle_worksheet(rows).splitlines(keepends=True)
    lines[-1] = lines[-1].replace('"Submitted for grading",', '"Submitted for grading",' * 2)
    text = "".join(lines)
    (archive.parent / "Grades-unit1.csv").write_text(text)
    out = run(root, "unit1")
    assert rejected(out, "Mallory Other_1005_assignsubmission_file").endswith(
        ": participant 1005's row: line 5 of Grades-unit1.csv cannot be read: 11 columns "
        "where the header has 10; moved to downloaded/unit1/rejected/")
    assert submissions(root, Course.load(root), ["unit1"]) == {"unit1": ["ada-lovelace", "alan-turing",
                                                      "grace-hopper"]}
    assert "late: grace-hopper (1 h 6 min late)" in out and "TIMES UNKNOWN" not in out


# --- what an entry holds: bounds checked before any work, no link followed -------------

def folder_entry(archive, name, files):
    folder = archive / name
    for rel, text in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    return folder


def test_a_link_in_a_folder_is_refused_never_followed(tmp_path):
    """Case 9: a folder whose normlib/layer_norm.py linked to the course's source was
    collected as the reference's code (6/8, and its feedback showed the solution)."""
    root, archive = course(tmp_path)
    folder = folder_entry(archive, "Mallory Doe_1666_assignsubmission_file", {NOTEBOOK: "{}"})
    (folder / "normlib").mkdir()
    (folder / "normlib" / "layer_norm.py").symlink_to(
        "../../../../../source/unit1/normlib/layer_norm.py")
    folder_entry(archive, "Honest One_1001_assignsubmission_file", GOOD)
    out = run(root, "unit1")
    assert "a link (normlib/layer_norm.py -> ../../../../../source/unit1/normlib/layer_norm.py" \
           "): links are not followed" in rejected(out, folder.name)
    assert submissions(root, Course.load(root), ["unit1"]) == {"unit1": ["honest-one"]}
    assert not list((root / "submitted").rglob("*.py")) == []  # honest one's, only
    assert "BEGIN SOLUTION" not in "".join(p.read_text() for p in (root / "submitted").rglob("*.py"))


def test_a_link_anywhere_is_refused_the_entry_itself_or_a_zip_listing(tmp_path):
    """Own case (rule 8): the entry a link itself, a link to a folder, and a zip listing
    that is a link (Unix mode S_IFLNK)."""
    root, archive = course(tmp_path)
    (archive / "linked_unit1.zip").symlink_to(tmp_path / "elsewhere.zip")
    write_zip(tmp_path / "elsewhere.zip", GOOD)
    folder = folder_entry(archive, "Folder Linker_77_assignsubmission_file", {NOTEBOOK: "{}"})
    (folder / "normlib").symlink_to(root / "source" / "unit1" / "normlib")
    with zipfile.ZipFile(archive / "ziplink_unit1.zip", "w") as z:
        z.writestr(NOTEBOOK, "{}")
        info = zipfile.ZipInfo("normlib/layer_norm.py")
        info.external_attr = 0o120777 << 16  # a symbolic link, as zip -y stores one
        z.writestr(info, "../../source/unit1/normlib/layer_norm.py")
    out = run(root, "unit1")
    for entry in ("linked_unit1.zip", folder.name, "ziplink_unit1.zip"):
        assert "links are not followed" in rejected(out, entry), out
    assert not (root / "submitted").exists() or not list((root / "submitted").iterdir())


def share_data(path, name, twin):
    """Rewrite a one-file zip so that its listing is there twice (the second named twin,
    of name's length), both pointing at the same compressed data: Fifield's overlap."""
    data = bytearray(path.read_bytes())
    start, end = data.index(b"PK\x01\x02"), data.rindex(b"PK\x05\x06")
    record = bytes(data[start:end]).replace(name.encode(), twin.encode())
    data[end:end] = record
    end += len(record)
    count, size = struct.unpack_from("<HHII", data, end + 8)[0] + 1, end - start
    struct.pack_into("<HHI", data, end + 8, count, count, size)
    path.write_bytes(bytes(data))


def forge_size(path, size):
    """Rewrite a one-file zip's listing to say its file holds `size` bytes (a listing that
    lies: it is never inflated past what it says)."""
    data = bytearray(path.read_bytes())
    struct.pack_into("<I", data, data.index(b"PK\x01\x02") + 24, size)
    path.write_bytes(bytes(data))


def junk_zip(folder, n):  # n listings: a submission and junk
    write_zip(folder / "s_unit1.zip", {**GOOD, **{f"junk/{i}": "" for i in range(n - 2)}})


def junk_folder(folder, n):  # n files and folders in a folder entry (normlib/ one of them)
    folder_entry(folder, "s_unit1", {**GOOD, **{f"junk{i}": "" for i in range(n - 3)}})


def kept_zip(folder, n):  # n files kept: notebooks (any name) and the exercise file
    write_zip(folder / "s_unit1.zip", {"normlib/layer_norm.py": "", **{f"n{i}.ipynb": "{}"
                                                                       for i in range(n - 1)}})


def deep_zip(folder, n):  # a notebook n folders deep (its name the n-th part)
    write_zip(folder / "s_unit1.zip", {"/".join(["d"] * (n - 1) + [NOTEBOOK]): "{}"})


def big_zip(folder, n):  # a notebook of n bytes (zeros: about n / 1000 compressed)
    with zipfile.ZipFile(folder / "s_unit1.zip", "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(NOTEBOOK, bytes(n))


def ratio_zip(folder, n):  # a stored listing of 1000 bytes that says it holds 1000 * n
    write_zip(folder / "s_unit1.zip", {NOTEBOOK: "{" + " " * 998 + "}"})
    forge_size(folder / "s_unit1.zip", 1000 * n)


def total_zip(folder, n):  # four listings that say they hold n bytes in all (each within
    # the file bound and the ratio)
    per = BOUNDS.file_bytes // 2
    sizes = [per, per, per, n - 3 * per]
    path = folder / "s_unit1.zip"
    with zipfile.ZipFile(path, "w") as z:
        for i, size in enumerate(sizes):
            z.writestr(f"normlib/f{i}.py" if i else NOTEBOOK, b" " * (size // 1000 + 1))
    data, offset = bytearray(path.read_bytes()), 0
    for size in sizes:
        offset = data.index(b"PK\x01\x02", offset) + 1
        struct.pack_into("<I", data, offset - 1 + 24, size)
    path.write_bytes(bytes(data))


def shared_zip(folder, n):  # one listing, or (n = 2) two that share its compressed data
    write_zip(folder / "s_unit1.zip", {NOTEBOOK: "{}"})
    if n == 2:
        share_data(folder / "s_unit1.zip", NOTEBOOK, NOTEBOOK.replace("01", "02"))


BOUND_CASES = {  # case: (an entry of n, the bound's n, the reason at n + 1)
    "listings": (junk_zip, BOUNDS.listings, f"more than {BOUNDS.listings} listings in the zip"),
    "files in a folder": (junk_folder, BOUNDS.listings,
                          f"more than {BOUNDS.listings} files and folders"),
    "kept": (kept_zip, BOUNDS.kept, f"more than {BOUNDS.kept} notebooks and normlib/ files"),
    "depth": (deep_zip, BOUNDS.depth, f"deeper than {BOUNDS.depth} folders"),
    "file size": (big_zip, BOUNDS.file_bytes,
                  f"a file of more than {BOUNDS.file_bytes >> 20} MiB"),
    "ratio": (ratio_zip, BOUNDS.ratio, f"times its compressed size ('{NOTEBOOK}'; at most "
                                       f"{BOUNDS.ratio})"),
    "total size": (total_zip, BOUNDS.entry_bytes,
                   f"more than {BOUNDS.entry_bytes >> 20} MiB unzipped"),
    "shared data": (shared_zip, 1, "listings that share compressed data"),
}


@pytest.mark.parametrize("case", BOUND_CASES)
def test_each_bound_refuses_its_bound_plus_one_in_seconds(tmp_path, case):
    """Cases 6 and 14 at the bound, not at the attack's scale: 100,000 empty files stalled
    a grading worker for hours, and a 1 MB zip listing a deflated 1 GiB entry 20 times
    took collect 68 s (every listing inflated before the size was checked). Each bound
    (tools/course/bounds.py) refuses its bound + 1, before anything is inflated, in seconds; the
    bound itself is collected (the ratio's and the total's lie about their sizes: their
    listings are inflated no further than they say, and fail their CRC)."""
    make, bound, reason = BOUND_CASES[case]
    for where, n in (("at", bound), ("over", bound + 1)):
        root, archive = course(tmp_path / where)
        make(archive, n)
        start = time.monotonic()
        out = run(root, "unit1")
        assert time.monotonic() - start < 10
        found = rejected(out, "s_unit1.zip") or rejected(out, "s_unit1")
        if where == "over":
            assert found and reason in found, out
        else:
            assert found is None or reason not in found, out


@pytest.mark.filterwarnings("ignore:Duplicate name:UserWarning")
def test_a_name_listed_twice_in_a_zip_is_refused(tmp_path):
    """Which of the two is the submission's? (zipfile would read the last.)"""
    root, archive = course(tmp_path)
    with zipfile.ZipFile(archive / "s_unit1.zip", "w") as z:
        z.writestr(NOTEBOOK, "{}")
        z.writestr("normlib/layer_norm.py", "x = 1\n")
        z.writestr("normlib/layer_norm.py", "x = 2\n")
    out = run(root, "unit1")
    assert "a name listed twice ('normlib/layer_norm.py')" in rejected(out, "s_unit1.zip")


def test_a_zip_of_many_listings_is_refused_before_it_is_read_whole(tmp_path):
    """Case 14's other form: 65,535 listings. Their count is read from the zip's end record,
    before zipfile reads one listing."""
    root, archive = course(tmp_path)
    write_zip(archive / "s_unit1.zip", {f"{i}": "" for i in range(20000)})
    start = time.monotonic()
    out = run(root, "unit1")
    assert "more than 1000 listings in the zip" in rejected(out, "s_unit1.zip")
    assert time.monotonic() - start < 5


# --- what a review of the border found (each a way around a rule above) -----------------

def test_a_students_file_name_cannot_read_as_another_lms_name_for_another_student(tmp_path):
    """Own case (rule 4): a Canvas upload named "..._victim_attempt_<2030>_x.zip" read as a
    Blackboard name: another student's, dated in the future. Every LMS's reading of a name
    is made, each from the part that LMS writes: two readings that are two students refuse
    the entry; a date in the future refuses it; a date that cannot be read (no time zone
    here, a Canvas course) refuses that entry alone, never the class's collect."""
    root, archive = course(tmp_path)
    write_zip(archive / "smithjohn_123_456_victim_attempt_2030-01-01-00-00-00_x.zip", WRONG)
    write_zip(archive / "victim_unit1.zip", GOOD)
    write_zip(archive / "Unit 1_ada_attempt_2026-10-05-21-14-03_work.zip", GOOD)
    out = run(root, "unit1")
    assert "its name reads as 4 students (123_456_victim, 456_victim, smithjohn, victim): " \
           "refused; moved" in rejected(
        out, "smithjohn_123_456_victim_attempt_2030-01-01-00-00-00_x.zip")
    assert "its date cannot be read: c.Grading.lms_timezone is not set" in rejected(
        out, "Unit 1_ada_attempt_2026-10-05-21-14-03_work.zip")
    assert submissions(root, Course.load(root), ["unit1"]) == {"unit1": ["victim"]}
    (root / "nbgrader_config_local.py").write_text('c.Grading.lms_timezone = "UTC"\n')
    write_zip(archive / "Unit 1_bob_attempt_2099-01-01-00-00-00_work.zip", GOOD)
    out = run(root, "unit1")
    assert "its date, 2099-01-01 00:00 UTC, is in the future" in rejected(
        out, "Unit 1_bob_attempt_2099-01-01-00-00-00_work.zip")


def test_a_name_the_file_system_cannot_hold_is_refused_not_a_crash(tmp_path):
    """A name of 206 characters is 406 bytes in UTF-8: over the file system's 255. Refused
    with its reason; the class is collected."""
    root, archive = course(tmp_path)
    write_zip(archive / "s1_unit1.zip", {"\u00fc" * 200 + ".ipynb": "{}", **GOOD})
    write_zip(archive / "s2_unit1.zip", GOOD)
    out = run(root, "unit1")
    assert "a name longer than 255 bytes" in rejected(out, "s1_unit1.zip")
    assert submissions(root, Course.load(root), ["unit1"]) == {"unit1": ["s2"]}
    assert not list((root / "submitted").glob("*/.collecting-*"))


def test_a_zip_whose_end_record_lies_about_its_count_is_refused_by_its_listings_size(tmp_path):
    """The end record's count says 1; its listing holds 30,000: refused by the listing's
    size (BOUNDS.directory_bytes), before zipfile reads it."""
    root, archive = course(tmp_path)
    path = archive / "s_unit1.zip"
    write_zip(path, {f"{i:05d}": "" for i in range(30000)})
    data = bytearray(path.read_bytes())
    end = data.rindex(b"PK\x05\x06")
    struct.pack_into("<HH", data, end + 8, 1, 1)
    path.write_bytes(bytes(data))
    start = time.monotonic()
    out = run(root, "unit1")
    assert f"a listing of more than {BOUNDS.directory_bytes >> 10} KiB" in rejected(
        out, "s_unit1.zip")
    assert time.monotonic() - start < 5


def test_two_people_of_one_name_are_never_one_student(tmp_path):
    """Without a roster, two Moodle participants of the same name are one id: the LMS's
    numbers say they are two people, so both are refused (a roster tells them apart),
    never one taken for the other's "older submission"."""
    root, archive = course(tmp_path)
    write_zip(archive / "Alan Turing_11_assignsubmission_file_a.zip", GOOD)
    write_zip(archive / "Alan Turing_12_assignsubmission_file_a.zip", WRONG)
    out = run(root, "unit1")
    assert "2 entries named alan-turing" in rejected(
        out, "Alan Turing_11_assignsubmission_file_a.zip")
    assert "are 2 people to the LMS" in rejected(out, "Alan Turing_12_assignsubmission_file_a.zip")


def test_an_undated_entry_never_replaces_a_dated_submission(tmp_path):
    """Its late mark would go with it: refused, unless it is the same submission."""
    root, archive = course(tmp_path)
    (archive.parent / "times.csv").write_text("student_id,submitted_at\ns1,2026-10-06T09:30Z\n")
    (root / "nbgrader_config_local.py").write_text('c.Grading.lms_timezone = "UTC"\n')
    write_zip(archive / "s1_unit1.zip", GOOD)
    run(root, "unit1")
    (archive.parent / "times.csv").unlink()
    assert "1 unchanged" in run(root, "unit1")  # the same files: kept, its time too
    write_zip(archive / "s1_unit1.zip", WRONG)
    out = run(root, "unit1")
    assert "has the LMS's time (2026-10-06 09:30 UTC) and this entry none" in rejected(
        out, "s1_unit1.zip")
    assert (root / "submitted/s1/unit1/timestamp.txt").read_text().startswith("2026-10-06")


@pytest.mark.filterwarnings("ignore:Duplicate name:UserWarning")
def test_names_that_are_one_path_are_one_name(tmp_path):
    """"normlib//layer_norm.py" and "normlib/./layer_norm.py" are "normlib/layer_norm.py"."""
    root, archive = course(tmp_path)
    write_zip(archive / "s_unit1.zip", {**GOOD, "normlib//layer_norm.py": "x = 2\n"})
    write_zip(archive / "t_unit1.zip", {**GOOD, "./normlib/./layer_norm.py": "x = 2\n"})
    out = run(root, "unit1")
    for entry in ("s_unit1.zip", "t_unit1.zip"):
        assert "a name listed twice" in rejected(out, entry)


def test_a_folder_of_empty_folders_is_bounded_too(tmp_path):
    root, archive = course(tmp_path)
    folder = folder_entry(archive, "s_unit1", GOOD)
    for i in range(BOUNDS.listings):
        (folder / f"d{i}").mkdir()
    out = run(root, "unit1")
    assert f"more than {BOUNDS.listings} files and folders" in rejected(out, "s_unit1")


def test_a_moodle_folder_holding_the_students_zip_and_another_upload(tmp_path):
    """The zip is the submission; a PDF uploaded beside it is not a reason to refuse it."""
    root, archive = course(tmp_path)
    folder = folder_entry(archive, "Ada Lovelace_7_assignsubmission_file", {"notes.pdf": "%PDF"})
    write_zip(folder / "work.zip", GOOD)
    out = run(root, "unit1")
    assert "1 collected (1 new" in out and submissions(root, Course.load(root), ["unit1"]) == {
        "unit1": ["ada-lovelace"]}


def test_a_stray_module_at_the_top_never_hides_the_submission(tmp_path):
    """layer_norm.py at the top of a zip whose notebook and normlib/ are in unit1/: the
    top was the root (the module's), and the notebook and unit1/normlib/ were dropped
    without a word. The root is the notebooks' and normlib/'s; a module at the top joins it
    only where that root is the top; otherwise the entry is refused, naming both places."""
    from tools.instructor.unpack import Places, kept_names

    places = Places(frozenset({NOTEBOOK}), frozenset({"layer_norm.py", "nn.py"}))
    stray = ["layer_norm.py", f"unit1/{NOTEBOOK}", "unit1/normlib/layer_norm.py"]
    why = ("layer_norm.py at the top, and the notebooks or normlib/ in unit1/: which is the "
           "submission's? (put it in unit1/normlib/, or leave it out)")
    assert kept_names(stray, places) == why
    assert kept_names(["nn.py", "layer_norm.py", "a/b/normlib/x.py"], places) == (
        "layer_norm.py, nn.py at the top, and the notebooks or normlib/ in a/b/: which is the "
        "submission's? (put them in a/b/normlib/, or leave them out)")
    assert kept_names(["layer_norm.py", NOTEBOOK, "normlib/nn.py"], places) == {
        NOTEBOOK: NOTEBOOK, "normlib/nn.py": "normlib/nn.py",
        "normlib/layer_norm.py": "layer_norm.py"}  # beside the notebook: normlib/'s
    assert kept_names(["layer_norm.py", "notes.txt"], places) == {
        "normlib/layer_norm.py": "layer_norm.py"}  # a module alone: its root is the top
    root, archive = course(tmp_path)
    write_zip(archive / "s1_unit1.zip", {"layer_norm.py": "x = 0\n",
                                         **{f"unit1/{k}": v for k, v in GOOD.items()}})
    folder_entry(archive, "s2_unit1", {"layer_norm.py": "x = 0\n",
                                       **{f"unit1/{k}": v for k, v in GOOD.items()}})
    out = run(root, "unit1")
    for entry in ("s1_unit1.zip", "s2_unit1"):
        assert rejected(out, entry) == f"  REJECTED {entry}: {why}; moved to " \
                                       "downloaded/unit1/rejected/"
    assert submissions(root, Course.load(root), ["unit1"]) == {"unit1": []}


def test_a_moodle_folder_of_two_zips_is_refused_naming_them(tmp_path):
    """Two zips and a loose notebook in a student's folder: the zips were dropped without a
    word (the loose files alone read). Which zip, or which files, is the submission's is
    not for collect to guess: the folder is refused, naming the zips."""
    root, archive = course(tmp_path)
    folder = folder_entry(archive, "Ada Lovelace_7_assignsubmission_file", {NOTEBOOK: "{}"})
    write_zip(folder / "a.zip", {"normlib/layer_norm.py": "x = 1\n"})
    write_zip(folder / "b.zip", {"normlib/nn.py": "y = 1\n"})
    out = run(root, "unit1")
    assert rejected(out, "Ada Lovelace_7_assignsubmission_file") == (
        "  REJECTED Ada Lovelace_7_assignsubmission_file: 2 zips in the folder (a.zip, "
        "b.zip): which holds the submission? (unzip them into the folder, or keep one, then "
        "collect again); moved to downloaded/unit1/rejected/")
    assert submissions(root, Course.load(root), ["unit1"]) == {"unit1": []}


def snapshot(root):
    """What collect leaves: submitted/'s and rejected/'s files with their bytes, the
    provenances, and archive/'s entries."""
    download = root / "downloaded" / "unit1"
    return ({p.relative_to(root).as_posix(): p.read_bytes() for folder in
             (root / "submitted", download / "rejected") for p in sorted(folder.rglob("*"))
             if p.is_file()},
            read_collected(root, "unit1"), sorted(p.name for p in (download / "archive").iterdir()))


def test_collecting_the_same_download_again_and_again_changes_nothing(tmp_path):
    """Issue 62, point 2: the download extracted again over archive/ (its rejected entries
    back in it) and collected, twice: the same submitted/, rejected/ (a folder entry not
    nested in its earlier copy) and provenances, every submission "unchanged"."""
    root, archive = course(tmp_path)
    download = tmp_path / "download"  # (the LMS's zip, extracted: entries as they come)
    download.mkdir()
    write_zip(download / "s1_unit1.zip", GOOD)
    write_zip(download / "Ada Lovelace_11_assignsubmission_file_.zip", GOOD)
    (download / "s2_unit1.zip").write_bytes(b"PK\x03\x04 truncated")
    two = download / "Eve Two_13_assignsubmission_file"  # (a folder of two zips: refused)
    two.mkdir()
    write_zip(two / "a.zip", GOOD)
    write_zip(two / "b.zip", WRONG)
    shutil.copytree(download, archive, dirs_exist_ok=True)
    first = run(root, "unit1")
    assert "2 collected (2 new, 0 replacing an older submission, 0 unchanged), 2 rejected" in \
        first, first
    state = snapshot(root)
    assert sorted(state[1]) == ["ada-lovelace", "s1"]
    for _ in range(2):
        shutil.copytree(download, archive, dirs_exist_ok=True)
        again = run(root, "unit1")
        assert "2 collected (0 new, 0 replacing an older submission, 2 unchanged), 2 " \
               "rejected" in again, again
        assert snapshot(root) == state
    # another entry of a rejected one's name: kept beside it, never over it
    (download / "s2_unit1.zip").write_bytes(b"PK\x03\x04 truncated, another")
    shutil.copytree(download, archive, dirs_exist_ok=True)
    run(root, "unit1")
    rejected_folder = root / "downloaded" / "unit1" / "rejected"
    assert (rejected_folder / "s2_unit1.zip").read_bytes() == b"PK\x03\x04 truncated"
    assert (rejected_folder / "s2_unit1.zip.2").read_bytes().endswith(b", another")


def test_an_entry_that_cannot_be_moved_is_named_and_the_rest_is_collected(tmp_path,
                                                                          monkeypatch):
    """A rejected entry that cannot be moved to rejected/ stays in archive/, named with why;
    the submissions collected beside it keep their provenance."""
    import tools.instructor.collect as steps

    root, archive = course(tmp_path)
    write_zip(archive / "s1_unit1.zip", GOOD)
    (archive / "s2_unit1.zip").write_bytes(b"PK\x03\x04 truncated")
    moved = steps.shutil.move

    def refuse(source, target):
        if Path(source).name == "s2_unit1.zip":
            raise PermissionError(13, "Permission denied", str(target))
        return moved(source, target)

    monkeypatch.setattr(steps.shutil, "move", refuse)
    out = run(root, "unit1")
    assert "NOT MOVED s2_unit1.zip: it stays in archive/ (PermissionError: Permission " \
           "denied)" in out, out
    assert (archive / "s2_unit1.zip").is_file() and sorted(read_collected(root, "unit1")) == \
        ["s1"]


def test_a_collect_stopped_halfway_loses_nothing_the_next_run_mends(tmp_path, monkeypatch):
    """A collect killed after placing a submission, before its provenance was written: the
    next run finds it "unchanged" and writes its provenance."""
    import tools.instructor.collect as steps

    root, archive = course(tmp_path)
    write_zip(archive / "s1_unit1.zip", GOOD)
    written = steps._write_collected

    def killed(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(steps, "_write_collected", killed)
    with pytest.raises(KeyboardInterrupt):
        run(root, "unit1")
    assert (root / "submitted" / "s1" / "unit1" / NOTEBOOK).is_file()
    assert read_collected(root, "unit1") == {}
    monkeypatch.setattr(steps, "_write_collected", written)
    assert "1 collected (0 new, 0 replacing an older submission, 1 unchanged)" in \
        run(root, "unit1")
    assert read_collected(root, "unit1")["s1"]["entry"] == "s1_unit1.zip"


def test_one_name_composed_and_decomposed_is_one_student_never_two(tmp_path):
    """Issue 62: "é" and "e" with a combining acute are one name in NFC: two entries of
    one student that no LMS date orders, both refused, never taken for two students."""
    root, archive = course(tmp_path)
    write_zip(archive / "\u00e9_unit1.zip", GOOD)
    write_zip(archive / "e\u0301_unit1.zip", WRONG)
    out = run(root, "unit1")
    assert rejected(out, "\u00e9_unit1.zip") and rejected(out, "e\u0301_unit1.zip"), out
    assert submissions(root, Course.load(root), ["unit1"]) == {"unit1": []}
