"""Grades ready to import (tools/instructor/grade_sheet.py) and the late policy applied to them
(tools/course/late.py, tools/instructor/grades.py), on a graded gradebook built through nbgrader's API (no
grading): a class of seven, an hourly late policy with a grace period, a floor and one
student's extension, and a Canvas _LATE marker without a time.

For each LMS a test builds its gradebook export as the LMS documents it (the sources are
cited at each), has `make grades LMS=... TEMPLATE=...`'s export fill it in, and compares
the file written with the export byte for byte: only the assignment's cells (and Moodle's
feedback) differ, every other column and row, the encoding, byte-order mark, delimiter,
quoting and line ends are the export's. grades.csv's new columns (penalty, final,
penalty_reason) and logs/late.csv are compared cell for cell."""

import contextlib
import csv
import datetime
import io
import json
import re
import shutil
from pathlib import Path

import pytest

from tests.test_collect import php_fputcsv
from tools.course.exercises import questions_of
from tools.course.folder import Course
from tools.course.late import LOG
from tools.course.settings import read
from tools.instructor import gradebook
from tools.instructor.__main__ import main
from tools.instructor.autograde import due_dates
from tools.instructor.build import build_course
from tools.instructor.grades import export
from tools.instructor.release import release

CONFIG = """c.Grading.timezone = "Europe/Berlin"
c.Grading.due = {"unit1": "2026-10-05 23:59"}
c.Grading.late_grace_minutes = 15
c.Grading.late_penalty = 10
c.Grading.late_per = "hour"
c.Grading.late_floor = 50
c.Grading.extensions = {"unit1": {"ada": "2026-10-07 23:59"}}
c.Grading.roster = "roster.csv"
"""
ROSTER = """lms_id,student_id,name,email,sis_id,username
50001,ada,Ada Lovelace,ada@example.edu,S001,alovelace
50002,bob,Bob Babbage,bob@example.edu,S002,bbabbage
50003,carol,Carol Shaw,carol@example.edu,S003,cshaw
50004,dave,Dave Cutler,dave@example.edu,S004,dcutler
50005,erin,Erin Catto,erin@example.edu,S005,ecatto
50006,frank,Frank Allen,frank@example.edu,S006,fallen
50007,gus,Gus Hopper,gus@example.edu,S007,ghopper
"""
# the graded submissions' times (UTC, as collect recorded them); dave submitted nothing;
# carol's came through Canvas with its _LATE marker and no time
SUBMITTED = {"ada": datetime.datetime(2026, 10, 6, 20, 0),  # before her extension
             "bob": datetime.datetime(2026, 10, 6, 0, 29, 30),  # 2 h 30 min 30 s late
             "carol": None,
             "erin": datetime.datetime(2026, 10, 5, 22, 10),  # 11 min: the grace period
             "frank": datetime.datetime(2026, 10, 5, 20, 0),  # on time
             "gus": datetime.datetime(2026, 10, 6, 6, 59)}  # 9 h: 90%, at most 50%
SCORES = {"ex1_1_layer_norm_stats": 3.0, "ex1_2_layer_norm_forward": 2.5}  # the rest 0

REASONS = {
    "ada": "on time (extension to 2026-10-07 23:59 CEST)",
    "bob": "2 h 31 min late: 3 started hours x 10% = 30% of the autograded 5.5 = 1.65 off",
    "carol": "late, time unknown (Canvas's _LATE marker): no penalty (no time to count "
             "from; c.Grading.late_unknown_penalty sets a flat one)",
    "erin": "11 min late, within the grace period of 15 min: no penalty",
    "frank": "on time",
    "gus": "9 h late: 9 started hours x 10% = 90%, at most 50% (c.Grading.late_floor = 50): "
           "50% of the autograded 5.5 = 2.75 off",
}
FINAL = {"ada": "7", "bob": "5.35", "carol": "5.5", "erin": "7", "gus": "4.25"}
POINTS = 8  # unit1's maximum in the course (grades.csv's max_score: asserted below), which
# each export's item must have where the export says (Canvas's, Blackboard's, Brightspace's)


def grade(root, submitted, waiting=()):
    """unit1 as autograde leaves it, through nbgrader's API (no grading): the course's due
    dates (as autograde writes them: nbgrader's "late" column), and each submission of
    submitted ({student: its time, naive UTC, or None}) with every autograded score
    SCORES's (5.5 in all), every written answer graded (1.5 in all) but those of the
    students waiting, and its status "graded" (with the digest of the student's collected
    folder, where collect wrote one). Returns how many written answers unit1 has."""
    due_dates(root, read(root))
    answers = questions_of(Course.load(root).assignments["unit1"].notebooks)
    with gradebook.connect(root) as gb:
        for student, when in submitted.items():
            gb.update_or_create_student(student)
            gb.add_submission("unit1", student, timestamp=when)
            for grade_id, score in SCORES.items():
                gb.find_grade(grade_id, "01_layernorm_forward", "unit1", student
                              ).auto_score = score
            for q in answers if student not in waiting else []:
                gb.find_grade(q.grade_id, q.notebook, "unit1", student).manual_score = (
                    1.5 if q.grade_id == "q1_1_why_eps" else 0.0)
        gb.db.commit()
    folders = {s: root / "submitted" / s / "unit1" for s in submitted}
    gradebook.set_graded(root, {("unit1", s): ("graded", gradebook.digest(f) if f.is_dir() else "0")
                            for s, f in folders.items()})
    return len(answers)


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """unit1 released and graded for six of the seven students of the roster: every
    autograded score 5.5, every written answer graded (1.5 in all) but carol's, which
    wait for a grader."""
    root = build_course(tmp_path_factory.mktemp("lms_grades") / "course", layout="unit")
    (root / "nbgrader_config_local.py").write_text(CONFIG)
    (root / "roster.csv").write_text(ROSTER)
    with contextlib.redirect_stdout(io.StringIO()):
        release(root, ["unit1"])
    answers = grade(root, SUBMITTED, waiting=["carol"])
    provenance = {"carol": {"entry": "shawcarol_LATE_50003_7001_01_layernorm_forward.ipynb",
                        "entries": ["shawcarol_LATE_50003_7001_01_layernorm_forward.ipynb"],
                        "lms": "canvas", "key": "50003", "name": "shawcarol", "time": None,
                        "time_from": None, "late_marker": True}}
    (root / "downloaded" / "unit1").mkdir(parents=True)
    (root / "downloaded" / "unit1" / "collected.json").write_text(json.dumps(provenance))
    return root, answers


def run_export(root, *args):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        export(root, root / "grades.csv", ["unit1"], *args)
    return out.getvalue()


def test_grades_csv_and_the_late_log_say_what_the_policy_did(course):
    """Issue 40's case: an extension, a per-hour penalty (with its grace period and its
    floor) and a _LATE marker without a time, with raw and final scores and reasons."""
    root, answers = course
    run_export(root)
    rows = {r["student_id"]: r for r in csv.DictReader((root / "grades.csv").open())}
    waiting = f"graded; {answers} written answer{'s' * (answers > 1)} to grade by hand"
    columns = ("submitted", "submitted_at", "late", "status", "score", "penalty", "final",
               "penalty_reason")
    assert {s: tuple(r[c] for c in columns) for s, r in rows.items()} == {
        "ada": ("yes", "2026-10-06 20:00:00", "on time (extension to 2026-10-07 23:59 CEST)",
                "graded", "7.0", "0.0", "7.0", REASONS["ada"]),  # (late: against her own)
        "bob": ("yes", "2026-10-06 00:29:30", "2 h 31 min late", "graded", "7.0", "1.65",
                "5.35", REASONS["bob"]),
        "carol": ("yes", "", "late by Canvas's _LATE marker; no time", waiting, "5.5", "0.0",
                  "5.5", REASONS["carol"]),
        "dave": ("no", "", "", "missing", "0", "", "", ""),
        "erin": ("yes", "2026-10-05 22:10:00", "11 min late", "graded", "7.0", "0.0", "7.0",
                 REASONS["erin"]),
        "frank": ("yes", "2026-10-05 20:00:00", "", "graded", "7.0", "0.0", "7.0", "on time"),
        "gus": ("yes", "2026-10-06 06:59:00", "9 h late", "graded", "7.0", "2.75", "4.25",
                REASONS["gus"])}
    assert {r["max_score"] for r in rows.values()} == {str(POINTS)}
    header = next(csv.reader((root / "grades.csv").open()))
    assert header[:11] == ["assignment", "student_id", "submitted", "submitted_at", "late",
                           "status", "score", "max_score", "penalty", "final",
                           "penalty_reason"]
    log = list(csv.reader((root / "logs" / "late.csv").open()))
    due = "2026-10-05 23:59 CEST"
    assert log == [
        ["assignment", "student_id", "due", "extension", "submitted", "late_by", "rule", "raw",
         "penalty", "final", "reason"],
        ["unit1", "ada", due, "2026-10-07 23:59 CEST", "2026-10-06 22:00 CEST", "", "on time",
         "7.0", "0.0", "7.0", REASONS["ada"]],
        ["unit1", "bob", due, "", "2026-10-06 02:29 CEST", "2 h 31 min late", "per hour", "7.0",
         "1.65", "5.35", REASONS["bob"]],
        ["unit1", "carol", due, "", "", "unknown", "late marker", "5.5", "0.0", "5.5",
         REASONS["carol"]],
        ["unit1", "dave", "", "", "", "", "not graded", "", "", "", ""],
        ["unit1", "erin", due, "", "2026-10-06 00:10 CEST", "11 min late", "grace", "7.0", "0.0",
         "7.0", REASONS["erin"]],
        ["unit1", "frank", due, "", "2026-10-05 22:00 CEST", "", "on time", "7.0", "0.0", "7.0",
         "on time"],
        ["unit1", "gus", due, "", "2026-10-06 08:59 CEST", "9 h late", "per hour", "7.0", "2.75",
         "4.25", REASONS["gus"]]]


def filled(root, lms, template, name, encoding="utf-8", bom=b""):
    """Write template (text) as the LMS's export, fill it in; (what grades-<lms>.csv holds,
    as text, and what the export printed). The export's own bytes must be untouched."""
    data = bom + template.encode(encoding)
    (root / name).write_bytes(data)
    printed = run_export(root, lms, root / name)
    assert (root / name).read_bytes() == data
    written = (root / f"grades-{lms}.csv").read_bytes()
    assert written.startswith(bom)
    return written[len(bom):].decode(encoding), printed


CANVAS_HEAD = ("Student,ID,SIS User ID,SIS Login ID,Section,unit1 (4521),unit2 (4522),"
               "Current Score,Unposted Current Score,Final Score,Unposted Final Score\n"
               f"    Points Possible,,,,,{POINTS}.00,19.00,(read only),(read only),(read only),"
               "(read only)\n")


def canvas_export(rows):
    """Canvas's gradebook export (test_canvas says whose format) of rows [(the student's
    cells up to unit1's, unit1's cell, the cells after it)], each as written."""
    return CANVAS_HEAD + "".join(f"{person}{score},{rest}\n" for person, score, rest in rows)


def test_canvas(course):
    """Canvas's gradebook export, as lib/gradebook_exporter.rb (instructure/canvas-lms)
    writes it: "Student", "ID", "SIS User ID", "SIS Login ID", "Section", each assignment as
    "<title> (<assignment id>)", the totals; the "    Points Possible" row; Ruby's CSV (quotes
    only where needed, "\\n"), with the byte-order mark a user may ask for. Its importer
    (app/models/gradebook_importer.rb) finds a student by ID, then SIS User ID, then SIS
    Login ID, and makes a new assignment of any column it does not know: so the score
    alone. The roster's lms_id is the Canvas user id; carol's also came from collect's
    provenance; "Student, Test" (Canvas's student view) is no student of the course."""
    root, answers = course
    rows = [('"Lovelace, Ada",50001,S001,alovelace,Normalization,', "", ",0.00,0.00,0.00,0.00"),
            ('"Babbage, Bob",50002,S002,bbabbage,Normalization,', "4.00",
             ",21.05,21.05,21.05,21.05"),
            ('"Shaw, Carol",50003,S003,cshaw,Normalization,', "", ",,,,"),
            ('"Cutler, Dave",50004,S004,dcutler,Normalization,', "", ",,,,"),
            ('"Catto, Erin",50005,S005,ecatto,Normalization,', "", ",,,,"),
            ('"Hopper, Gus",50007,S007,ghopper,Normalization,', "", ",,,,"),
            ('"Student, Test",99999,,aaa-test,Normalization,', "", ",,,,")]
    template = canvas_export(rows)
    students = ["ada", "bob", "carol", "dave", "erin", "gus", None]
    expected = canvas_export([(a, FINAL.get(s, score), rest)
                              for (a, score, rest), s in zip(rows, students)])
    text, printed = filled(root, "canvas", template, "canvas-export.csv",
                           bom=b"\xef\xbb\xbf")
    assert text == expected
    lines = printed.splitlines()
    assert f"canvas: {root / 'grades-canvas.csv'} from {root / 'canvas-export.csv'} " \
           "(unit1 -> 'unit1 (4521)'): 5 scores filled in" in lines
    assert "  rows of no student of the course (or of two), left as they were: 1: line 9 " \
           "(ID '99999', SIS Login ID 'aaa-test')" in lines
    assert "  students of the course with no row in the template (add them in the LMS, or " \
           "their ids to the roster): 1: frank" in lines
    assert "  not filled, or partly: 2: unit1 carol (filled, but " \
           f"{answers} written answer{'s' * (answers > 1)} wait{'s' * (answers == 1)} for a " \
           "grader); unit1 dave (missing)" in lines
    assert "  late, time unknown (Canvas's _LATE marker; grades.csv says what was applied): " \
           "1: unit1 carol" in lines
    assert "  late policy: 2 of the 5 scores filled in are after a penalty (unit1 bob; unit1 " \
           f"gus); the raw " \
           f"score, penalty and reason of each: {root / 'grades.csv'}, " \
           f"{root / 'logs' / 'late.csv'}" in lines



def test_a_formula_in_the_lmss_own_cells_is_kept_and_warned_of(course):
    """Issue 58, point 7: a Canvas display name that is a formula ("=1+2, Ada", "+", "@",
    OWASP's CSV injection) stayed in grades-canvas.csv as Canvas exported it, unsaid. Canvas's
    import needs its own cells back as they were (they are the student's name there): they
    are kept byte for byte and the score filled in, and make grades warns, naming each row;
    a number's "-" and Moodle's "-" are no formula, and the scores it wrote are not listed."""
    root, _ = course
    rows = [('"=1+2, Ada",50001,S001,alovelace,Normalization,', "", ",-1.5,0.00,0.00,0.00"),
            ('"+Babbage, Bob",50002,S002,bbabbage,Normalization,', "4.00", ",,,,"),
            ('"Shaw, Carol",50003,S003,cshaw,Normalization,', "", ",,,,"),
            ('"Cutler, Dave",50004,S004,dcutler,Normalization,', "", ",,,,"),
            ('"@Catto, Erin",50005,S005,ecatto,Normalization,', "-", ",,,,")]
    template = canvas_export(rows)
    expected = canvas_export([(a, FINAL.get(s, score), rest) for (a, score, rest), s in
                              zip(rows, ["ada", "bob", "carol", "dave", "erin"])])
    text, printed = filled(root, "canvas", template, "canvas-formulas.csv")
    assert text == expected
    assert ": 4 scores filled in" in printed
    assert "  WARNING: cells that a spreadsheet would run as a formula, left as canvas wrote " \
           "them (its import needs them): import grades-canvas.csv as it is, never open it in " \
           "a spreadsheet: 3: line 3 (Student '=1+2, Ada'); line 4 (Student '+Babbage, Bob'); " \
           "line 7 (Student '@Catto, Erin')" in printed.splitlines()


MOODLE_HEAD = ('"First name","Last name","ID number",Institution,Department,"Email address",'
               '"Assignment: unit1 (Real)","Assignment: unit1 (Feedback)",'
               '"Assignment: unit2 (Real)","Last downloaded from this course"\n')


def moodle_export(rows):
    """Moodle's grade export (test_moodle says whose format) of rows [(the student's
    profile cells, unit1's grade, unit1's feedback)], each as written."""
    return MOODLE_HEAD + "".join(f"{person}{grade},{feedback},-,1791000000\n"
                                 for person, grade, feedback in rows)


def test_moodle(course):
    """Moodle's "Plain text file" grade export (grade/export/txt/grade_export_txt.php,
    grade/export/lib.php's format_column_name: "<Module>: <item> (Real)", and "(Feedback)"
    with "Export feedback"; the profile fields First name, Last name, ID number,
    Institution, Department, Email address; "Last downloaded from this course"), written
    by lib/csvlib.class.php's csv_export_writer with PHP's fputcsv (a field with a space is
    quoted; "\\n"). Moodle's CSV import (grade/import/csv) maps a column to a grade item or
    to "Feedback for <item>", which replaces the item's feedback: so the grader's feedback
    the export holds (bob's "Good start") is kept, and the late policy's reason follows it
    in a paragraph of its own, only for a submission that was late (ada's, on time by her
    extension, and its cell are left alone). Filling in an export of a file already
    imported changes nothing: the paragraph is replaced, not added twice. Students are
    matched by email (in any case) or ID number (the roster's sis_id)."""
    root, answers = course
    people = [("ada", "Ada,Lovelace,S001,,,ADA@example.edu,"),
              ("bob", "Bob,Babbage,S002,,,bob@example.edu,"),
              ("carol", "Carol,Shaw,S003,,,carol@example.edu,"),
              ("dave", "Dave,Cutler,S004,,,dave@example.edu,"),
              ("erin", "Erin,Catto,S005,,,erin@example.edu,"),
              ("gus", "Gus,Hopper,,,,gus@example.edu,")]
    before = {"bob": ("4.00", '"Good start"'), "ada": ("-", '"Nice derivation"')}
    template = moodle_export([(p, *before.get(s, ("-", ""))) for s, p in people])
    feedback = {
        "ada": '"Nice derivation"',
        "bob": f'"Good start\n\nLate policy: {REASONS["bob"]}; score 7 - 1.65 = 5.35"',
        "carol": f'"Late policy: {REASONS["carol"]}; score 5.5"',
        "erin": f'"Late policy: {REASONS["erin"]}; score 7"',
        "gus": f'"Late policy: {REASONS["gus"]}; score 7 - 2.75 = 4.25"'}
    expected = moodle_export([(p, FINAL[s], feedback[s]) if s in FINAL
                              else (p, *before.get(s, ("-", ""))) for s, p in people])
    text, printed = filled(root, "moodle", template, "moodle-export.csv")
    assert text == expected
    assert "(unit1 -> 'Assignment: unit1 (Real)' (and the late policy's reason in its " \
           "feedback, after the grader's)): 5 scores filled in" in printed
    assert "their ids to the roster): 1: frank\n" in printed
    assert "  unit1: Moodle's export gives no item's maximum: check that its maximum grade " \
           f"in Moodle is {POINTS} (scores are written out of {POINTS})" in printed.splitlines()
    again, _ = filled(root, "moodle", expected, "moodle-again.csv")  # (exported after import)
    assert again == expected



def test_moodle_profile_fields_are_read_as_php_writes_them(course):
    """Issue 58: a profile field holding '\\"' and commas (a Department 'Maths \\", x,'),
    as PHP's fputcsv writes it (the '"' after a backslash not doubled: tests.test_collect's
    php_fputcsv), stopped make grades for the whole class ("a quote that does not close").
    Read as fputcsv writes it, bob's row is filled like the others, every other byte the
    export's; a row with a column too many (not what Moodle writes) is left as it was and
    listed with why."""
    root, _ = course
    bob = php_fputcsv(["Bob", "Babbage", "S002", "", 'Maths \\", x,', "bob@example.edu"])
    assert bob == 'Bob,Babbage,S002,,"Maths \\", x,",bob@example.edu\n'
    people = [("ada", "Ada,Lovelace,S001,,,ADA@example.edu,"), ("bob", bob[:-1] + ","),
              ("erin", "Erin,Catto,S005,,,erin@example.edu,"),
              ("gus", "Gus,Hopper,,,Extra,,gus@example.edu,")]  # (a column too many)
    template = moodle_export([(p, "-", "") for _, p in people])
    text, printed = filled(root, "moodle", template, "moodle-php.csv")
    late = {"bob": f'Late policy: {REASONS["bob"]}; score 7 - 1.65 = 5.35',
            "erin": f'"Late policy: {REASONS["erin"]}; score 7"'}  # (RFC 4180's quoting)
    assert text == moodle_export([(p, FINAL[s], late.get(s, "")) if s != "gus" else
                                  (p, "-", "") for s, p in people])
    assert "1 score filled in" not in printed and ": 3 scores filled in" in printed
    assert "line 5 (it cannot be read: 11 columns where the header has 10)" in printed


BLACKBOARD_HEAD = (
    '"Last Name"\t"First Name"\t"Username"\t"Student ID"\t"Last Access"\t"Availability"'
    f'\t"Total [Total Pts: up to 27 Score] |1001"\t"unit1 [Total Pts: {POINTS} Score] |1002"'
    '\t"unit2 [Total Pts: 19 Score] |1003"\r\n')


def blackboard_export(rows):
    """Blackboard's Grade Center download (test_blackboard says whose format), as text
    (before its UTF-16 encoding), of rows [(the student's cells up to the Student ID's,
    unit1's cell)], each as written."""
    tail = '\t"2026-10-06 22:05:00"\t"Available"\t"0"\t'
    return BLACKBOARD_HEAD + "".join(f'{person}{tail}{score}\t""\r\n' for person, score in rows)


def test_blackboard(course):
    """Blackboard Learn's Grade Center "Work Offline > Download" as a tab-delimited ".xls"
    (UTF-16 with its byte-order mark, every text quoted: nbeaver/offline-grades-upload's
    01.tsv; Blackboard's "Uploading or Downloading Grade Center Items for Working
    Offline": the username identifies the student, "|<column id>" the column, a column
    without one becomes a new column: so the score alone), "\\r\\n". Built from
    documentation, not yet checked against a real download."""
    root, _ = course
    people = [("ada", '"Lovelace"\t"Ada"\t"alovelace"\t"S001"'),
              ("bob", '"Babbage"\t"Bob"\t"bbabbage"\t"S002"'),
              ("erin", '"Catto"\t"Erin"\t"ecatto"\t""'),
              ("gus", '"Hopper"\t"Gus"\t"ghopper"\t"S007"'),
              ("nobody", '"Else"\t"Some"\t"selse"\t"S099"')]
    template = blackboard_export([(p, '""') for _, p in people])
    expected = blackboard_export([(p, f'"{FINAL[s]}"' if s in FINAL else '""')
                                  for s, p in people])
    text, printed = filled(root, "blackboard", template, "blackboard-export.xls",
                           encoding="utf-16-le", bom=b"\xff\xfe")
    assert text == expected
    assert f"(unit1 -> 'unit1 [Total Pts: {POINTS} Score] |1002'): 4 scores filled in" in printed
    assert "left as they were: 1: line 6 (Username 'selse', Student ID 'S099')" in printed
    assert "their ids to the roster): 3: carol; dave; frank\n" in printed


BRIGHTSPACE_HEAD = (
    "OrgDefinedId,Username,Last Name,First Name,Email,unit1 Points Grade <Numeric "
    f"MaxPoints:{POINTS} Weight:50 Category:Units CategoryWeight:100>,unit2 Points Grade "
    "<Numeric MaxPoints:19>,End-of-Line Indicator\r\n")


def brightspace_export(rows):
    """Brightspace's grades export (test_brightspace says whose format) of rows [(the
    student's cells up to unit1's, unit1's cell)], each as written."""
    return BRIGHTSPACE_HEAD + "".join(f"{person}{score},,#\r\n" for person, score in rows)


def test_brightspace(course):
    """Brightspace's grades export (D2L's "Importing grades": OrgDefinedId and/or Username
    identify the user, "<item> Points Grade" a numeric item; the export's "<Numeric
    MaxPoints:N ...>" and "End-of-Line Indicator" columns, and the "#" Brightspace puts
    before each row's first ids and as its last field: edubag's and christopherphan/
    brightspace-scripts' readers), "\\r\\n". A column the import does not know creates a
    grade item: so the score alone. Built from documentation, not yet checked against a
    real export."""
    root, _ = course
    people = [("ada", "#S001,#alovelace,Lovelace,Ada,ada@example.edu,"),
              ("bob", "#S002,#bbabbage,Babbage,Bob,bob@example.edu,"),
              ("carol", "#,#cshaw,Shaw,Carol,carol@example.edu,"),  # (by username alone)
              ("gus", "#S007,#ghopper,Hopper,Gus,gus@example.edu,")]
    template = brightspace_export([(p, "") for _, p in people])
    expected = brightspace_export([(p, FINAL[s]) for s, p in people])
    text, printed = filled(root, "brightspace", template, "brightspace-export.csv")
    assert text == expected
    assert "4 scores filled in" in printed
    assert "their ids to the roster): 3: dave; erin; frank\n" in printed


CANVAS = "Student,ID,SIS User ID,SIS Login ID,Section,{}\n\"Babbage, Bob\",50002,S002,bbabbage,A,{}\n"


@pytest.mark.parametrize("columns,values,config,message,written", [
    ("unit2 (4522)", "1", "", r"canvas-bad.csv: unit1: no columns titled 'unit1'. Its item "
     r"columns: 'unit2 \(4522\)'. Name each assignment's column in c.Grading.lms_columns",
     None),
    ("unit1 (4521),unit1 (4599)", "1,2", "", r"unit1: 2 columns titled 'unit1' \('unit1 "
     r"\(4521\)', 'unit1 \(4599\)'\)", None),
    ("unit1 (4521),unit1 (4599)", "1,2", "c.Grading.lms_columns = {'unit1': 'unit1 (4599)'}",
     None, "1,5.35"),  # (the whole header names one of two)
    ("Unit 1: LayerNorm forward (4521)", "1", "c.Grading.lms_columns = {'unit1': 'Unit 1: "
     "LayerNorm forward'}", None, "5.35"),
])
def test_which_column_is_the_assignment(course, columns, values, config, message, written):
    root, _ = course
    local = root / "nbgrader_config_local.py"
    local.write_text(CONFIG + config + "\n")
    try:
        template = CANVAS.format(columns, values)
        if message:
            (root / "canvas-bad.csv").write_text(template)
            with pytest.raises(SystemExit, match=message):
                run_export(root, "canvas", root / "canvas-bad.csv")
        else:
            text, _ = filled(root, "canvas", template, "canvas-bad.csv")
            assert text == CANVAS.format(columns, written)
    finally:
        local.write_text(CONFIG)


@pytest.mark.parametrize("lms,template,message", [
    ("canvas", "grades-canvas.csv", "is where grades-canvas.csv goes"),
    ("moodle", "nowhere.csv", "TEMPLATE=.*nowhere.csv: no such file"),
    ("moodle", "no/where.csv", None),  # (relative: looked up in the course folder)
    (None, "canvas-export.csv", "needs LMS= \\(canvas|moodle|blackboard|brightspace\\)"),
    ("brightspace", "canvas-export.csv", "not an export of Brightspace's gradebook: its first "
     "line has none of the id columns OrgDefinedId, Username, Email"),
])
def test_a_template_that_cannot_be_filled_is_refused_before_anything_is_written(
        course, lms, template, message):
    root, _ = course
    (root / "canvas-export.csv").write_text(CANVAS.format("unit1 (4521)", "1"))
    (root / "grades.csv").unlink(missing_ok=True)
    if message is None:  # a relative TEMPLATE: the message names where it was looked for
        message = re.escape(f"TEMPLATE={template}: no such file: {root / template} (a "
                            "relative TEMPLATE is read from the course folder)")
    else:
        template = root / template
    with pytest.raises(SystemExit, match=message):
        run_export(root, lms, template)
    assert not (root / "grades.csv").exists()


def test_an_lms_without_a_template_writes_grades_csv_and_says_so(course):
    root, _ = course
    printed = run_export(root, "moodle", None)
    assert "grades: no grades-moodle.csv without TEMPLATE= (the export of Moodle's gradebook " \
           "that it fills in: docs/instructors.md, section 6)" in printed
    assert (root / "grades.csv").is_file()


@pytest.mark.parametrize("relative", [False, True])
def test_the_instructor_command_passes_lms_and_template_through(course, relative):
    """`make grades LMS=canvas TEMPLATE=...` runs `python -m tools.instructor grades ROOT
    --lms canvas --template ...` (the Makefile's grades target): an absolute TEMPLATE as
    it is, a relative one from the course folder (ROOT), wherever the command runs (here,
    the repository: tests run there)."""
    root, _ = course
    template = CANVAS.format("unit1 (4521)", "1")
    (root / "exports").mkdir(exist_ok=True)
    (root / "exports" / "canvas-cli.csv").write_text(template)
    (root / "grades-canvas.csv").unlink(missing_ok=True)
    given = "exports/canvas-cli.csv" if relative else str(root / "exports" / "canvas-cli.csv")
    assert not Path(given).exists() or not relative  # (not there from where it runs)
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["grades", str(root), "unit1", "--lms", "canvas", "--template",
                     given]) == 0
    assert (root / "grades-canvas.csv").read_text() == CANVAS.format("unit1 (4521)", "5.35")


def test_a_newer_submission_waiting_for_autograde_is_not_filled_and_is_listed(course):
    """bob resubmitted after unit1 was graded: collect put it in submitted/, autograde has
    not graded it yet. The score there is his older submission's, which is not the one
    that counts (the last collected): his cell is left as the export has it, and listed."""
    root, _ = course
    newer = root / "submitted" / "bob" / "unit1"
    newer.mkdir(parents=True)
    (newer / "01_layernorm_forward.ipynb").write_text("{}")
    try:
        template = CANVAS.format("unit1 (4521)", "4")
        text, printed = filled(root, "canvas", template, "canvas-newer.csv")
    finally:
        shutil.rmtree(root / "submitted" / "bob")
    assert text == template
    assert "0 scores filled in" in printed
    assert "  not filled, or partly: 1: unit1 bob (graded; a newer submission, collected " \
           "since, waits for make autograde: not filled, the score is the older " \
           "submission's)" in printed.splitlines()


MAXIMA = {  # each LMS's export with unit1 out of 100 points, where the export says so
    "canvas": (CANVAS_HEAD.replace(f"{POINTS}.00,19.00", "100.00,19.00"), "unit1 (4521)",
               "Canvas"),
    "blackboard": (BLACKBOARD_HEAD.replace(f"Total Pts: {POINTS} ", "Total Pts: 100 "),
                   "unit1 [Total Pts: 100 Score] |1002", "Blackboard"),
    "brightspace": (BRIGHTSPACE_HEAD.replace(f"MaxPoints:{POINTS} ", "MaxPoints:100 "),
                    "unit1 Points Grade <Numeric MaxPoints:100 Weight:50 Category:Units "
                    "CategoryWeight:100>", "Brightspace"),
    # (Canvas in a decimal-comma locale: ";" between fields, "100,00": I18n.n's)
    "canvas;": (CANVAS_HEAD.replace(",", ";").replace(f"{POINTS}.00;19.00", "100,00;19,00"),
                "unit1 (4521)", "Canvas")}


@pytest.mark.parametrize("lms", MAXIMA)
def test_an_item_out_of_another_maximum_stops_before_anything_is_written(course, lms):
    """A 7 imported into an item out of 100 is 7%: the item's points possible (Canvas's
    "Points Possible" row, Blackboard's "[Total Pts: N ...]", Brightspace's "<Numeric
    MaxPoints:N ...>") must be the course's maximum. (Moodle's export gives none:
    test_moodle.)"""
    root, _ = course
    head, column, name = MAXIMA[lms]
    lms = lms.rstrip(";")
    (root / "export-100.csv").write_text(head)
    (root / "grades.csv").unlink(missing_ok=True)
    (root / f"grades-{lms}.csv").unlink(missing_ok=True)
    with pytest.raises(SystemExit) as stopped:
        run_export(root, lms, root / "export-100.csv")
    assert str(stopped.value.code) == (
        f"{root / 'export-100.csv'}: unit1: its column {column!r} is out of 100 points in "
        f"{name}, the course's unit1 out of {POINTS}: set the item's points to {POINTS} in "
        f"{name} and export the gradebook again (nothing written)")
    assert not (root / "grades.csv").exists() and not (root / f"grades-{lms}.csv").exists()


def test_a_decimal_comma_maximum_that_is_the_courses_is_filled_in(course):
    """Canvas's export in a decimal-comma locale: ";" and "8,00" (Canvas's I18n.n): the
    course's maximum, so bob's score is written (with a "."; Canvas reads either)."""
    root, _ = course
    template = CANVAS_HEAD.replace(",", ";").replace(f"{POINTS}.00;19.00", f"{POINTS},00;19,00") \
        + '"Babbage, Bob";50002;S002;bbabbage;A;;;;;;\n'
    text, printed = filled(root, "canvas", template, "canvas-comma.csv")
    assert text == template.replace("bbabbage;A;;", "bbabbage;A;5.35;")
    assert "1 score filled in" in printed and "maximum" not in printed


@pytest.mark.parametrize("extensions,roster,message", [
    ({"unit10": {"ada": "2026-10-07 23:59"}}, True,
     "c.Grading.extensions['unit10']['ada']: the course has no assignment 'unit10' (course.json: "
     "unit1, unit2, unit3, unit4, unit5, unit6, unit7, unit8, unit9)"),
    ({"unit1": {"adaa": "2026-10-07 23:59"}}, True,
     "c.Grading.extensions['unit1']['adaa']: no student 'adaa' in the roster ({roster}) or "
     "the gradebook"),
    ({"unit10": {"adaa": "2026-10-07 23:59"}}, False,  # (no roster: the assignment stops it)
     "c.Grading.extensions['unit10']['adaa']: the course has no assignment 'unit10' "
     "(course.json: unit1, unit2, unit3, unit4, unit5, unit6, unit7, unit8, unit9)"),
])
def test_an_extension_that_names_no_one_stops_make_grades(course, extensions, roster, message):
    """A misspelt student id or an assignment that is not the course's would leave the
    student penalized as if they had no extension: make grades stops, naming it, before
    anything is written."""
    root, _ = course
    local = root / "nbgrader_config_local.py"
    config = CONFIG.replace('"ada": "2026-10-07 23:59"}}', '"ada": "2026-10-07 23:59"}}\n'
                            f"c.Grading.extensions = {extensions!r}")
    local.write_text(config if roster else config.replace('c.Grading.roster = "roster.csv"', ""))
    (root / "grades.csv").unlink(missing_ok=True)
    try:
        with pytest.raises(SystemExit) as stopped:
            run_export(root)
    finally:
        local.write_text(CONFIG)
    assert str(stopped.value.code) == (
        f"make grades: an extension that applies to no one (its student would be penalized "
        f"as if they had none): {message.format(roster=root / 'roster.csv')}. Correct it in "
        "nbgrader_config_local.py")
    assert not (root / "grades.csv").exists()


def test_without_a_roster_an_extension_of_an_unknown_student_is_printed_loudly(course):
    """Without a roster the gradebook knows only the students who submitted: one with an
    extension who has not yet is no mistake, so make grades goes on, and says so."""
    root, _ = course
    local = root / "nbgrader_config_local.py"
    local.write_text(CONFIG.replace('c.Grading.roster = "roster.csv"', "").replace(
        '{"ada": "2026-10-07 23:59"}', '{"ada": "2026-10-07 23:59", "zoe": "2026-10-09 23:59"}'))
    try:
        printed = run_export(root)
    finally:
        local.write_text(CONFIG)
    assert "UNUSED EXTENSION c.Grading.extensions['unit1']['zoe']: no student 'zoe' in the " \
           "gradebook (and c.Grading.roster is not set): it applies to no one yet" \
           in printed.splitlines()
    assert (root / "grades.csv").is_file()


def log_of(root):
    with open(root / "logs" / "late.csv", newline="") as f:
        return list(csv.reader(f))


def test_the_late_log_keeps_the_other_assignments_rows(course, tmp_path):
    """`make grades A=unit2` replaces unit2's rows of logs/late.csv and keeps unit1's, as
    `make grades A=unit1` wrote them (and the other way round); the rows in the course's
    order of assignments."""
    root = shutil.copytree(course[0], tmp_path / "course")
    with contextlib.redirect_stdout(io.StringIO()):
        release(root, ["unit2"])
    with gradebook.connect(root) as gb:  # bob's unit2, graded (no due date: no penalty)
        gb.add_submission("unit2", "bob", timestamp=datetime.datetime(2026, 11, 2, 9, 0))
        gb.db.commit()
    run_export(root)  # (unit1)
    unit1 = log_of(root)
    students = ("ada", "bob", "carol", "dave", "erin", "frank", "gus")
    assert unit1[0] == LOG and [r[:2] for r in unit1[1:]] == [["unit1", s] for s in students]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        export(root, root / "grades.csv", ["unit2"])
    both = log_of(root)
    bob = ["unit2", "bob", "", "", "2026-11-02 10:00 CET", "unknown", "no due date", "0", "0.0",
           "0.0", "no due date (c.Grading.due): no penalty"]
    unit2 = [bob if s == "bob" else ["unit2", s, "", "", "", "", "not graded", "", "", "", ""]
             for s in students]
    assert both == unit1 + unit2
    assert f"late policy: {root / 'logs' / 'late.csv'} (unit2: 0 penalties applied; unit1's " \
           "rows kept as an earlier make grades wrote them)" in printed.getvalue().splitlines()
    run_export(root)  # unit1 again: unit2's rows kept, unit1's where they were
    assert log_of(root) == both

