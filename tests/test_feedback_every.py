"""Feedback for every submission (issue 40, point 4) and only for released units: one
submission whose notebook cannot be read (an upload cut short) graded in this process, as a
grading worker grades it (tools/worker/task.grade, the judge in the OS sandbox), saved as
autograde saves it, then `feedback` with Moodle's upload. Its student gets a page (the
judge's verdicts on their code, a note saying the notebook could not be read and why), its
written answer scores 0 with that reason (a grader's to change), and its status is final.
"""

import contextlib
import csv
import hashlib
import html
import io
import json
import re
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from bs4 import BeautifulSoup

from tests.synthetic import both, reference_submission, write_submission
from tools.course.exercises import exercises, questions
from tools.course.folder import Course
from tools.course.settings import read
from tools.instructor import autograde, gradebook
from tools.instructor.build import build_course
from tools.instructor.feedback import feedback
from tools.instructor.grades import export
from tools.instructor.release import release
from tools.worker import task

CHECKS = [e for e in exercises() if e.unit == 1]
ANSWERS = [q for q in questions() if q.unit == 1]
NOTEBOOK = "01_layernorm_forward"
FOLDER = "Ada Lovelace_101_assignsubmission_file"  # (Moodle's, mod/assign/classes/downloader.php)


def truncate(folder):
    """An upload cut short: the notebook's first 5000 characters."""
    path = Path(folder) / f"{NOTEBOOK}.ipynb"
    path.write_text(path.read_text()[:5000])


def quietly(function, *args, **kwargs):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result = function(*args, **kwargs)
    return result, out.getvalue()


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """The course (unit1 released, the others not), s1's submission (the reference's code,
    its notebook cut short) graded and saved, its provenance a Moodle download's, and
    `feedback` with Moodle's upload: (root, the outcome, the status, feedback's output)."""
    tmp = tmp_path_factory.mktemp("every")
    root = build_course(tmp / "course", layout="unit")
    quietly(release, root, ["unit1"])
    write_submission(root, "unit1", "cut", root / "submitted" / "s1" / "unit1",
                     {"cut": both(reference_submission(1), truncate)})
    download = root / "downloaded" / "unit1"
    download.mkdir(parents=True)
    (download / "collected.json").write_text(json.dumps({"s1": {  # (tools/instructor/collect.py's)
        "entry": FOLDER, "entries": [FOLDER], "lms": "moodle", "key": "101",
        "name": "Ada Lovelace", "time": None, "time_from": None, "late_marker": False}}))
    course = Course.load(root)
    todo, _ = autograde.pending(root, course, ["unit1"])
    (one,), [] = autograde.tasks(root, todo, read(root).limits, False, True)
    outcome = task.grade(autograde.make_kit(root, course, ["unit1"]), one)
    status, _ = autograde.save(root, course, outcome, one)
    _, said = quietly(feedback, root, lms="moodle")
    return root, outcome, one, status, said


def why(root):
    """What the status, the gradebook and the page say of the notebook: its name, the
    error nbformat raised, and its file's digest."""
    data = (root / "submitted" / "s1" / "unit1" / f"{NOTEBOOK}.ipynb").read_bytes()
    return (f"{NOTEBOOK}.ipynb: not a readable notebook (NotJSONError: Notebook does not "
            f"appear to be JSON; file {hashlib.sha256(data).hexdigest()[:12]})")


def text_of(page):
    """A page's body as text, its whitespace runs one space."""
    body = page[page.index("<body"):]
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", body)).split())


def test_an_unreadable_notebook_gets_a_page_with_the_verdicts_and_the_note(course):
    root, outcome, _, _, _ = course
    assert outcome.unreadable == {NOTEBOOK: why(root)} and outcome.error is None
    page = (root / "feedback" / "s1" / "unit1" / f"{NOTEBOOK}.html").read_text()
    text = text_of(page)
    assert f"This notebook could not be read : {why(root)}. Your code ( normlib/ ) was " \
           "graded all the same" in text
    for e in CHECKS:  # the judge's verdict on the code: in the summary, and under the check
        verdict = outcome.verdicts[e.grade_id][1]
        assert outcome.verdicts[e.grade_id][0] and verdict.startswith("The judge: passed")
        shown = BeautifulSoup(page, "html.parser").find_all(attrs={"data-judge": e.grade_id})
        assert [s.get_text() for s in shown] == [f"{verdict} ({e.grade_id})", verdict]
        hidden = {line.strip() for line in e.hidden.splitlines() if line.strip()} - {
            line.strip() for line in e.visible.splitlines()}
        assert hidden and not [line for line in hidden if line in text]  # (folded)
    for q in ANSWERS:
        assert f"Your answer Score: 0.0 / {q.points:.1f}" in text
        assert f"[feedback: not read: {why(root)}] Comments: 0 points: {why(root)}. A " \
               "grader may change this score." in text
    points = sum(e.points for e in CHECKS)
    assert text.startswith(f"{NOTEBOOK} : {points:.1f} / "
                           f"{points + sum(q.points for q in ANSWERS):.1f} points so far.")


def test_its_answers_score_0_saying_why_and_its_status_is_final(course):
    root, _, _, status, _ = course
    assert status == f"graded; {why(root)}: its written answers score 0 (a grader may " \
                     "change that in formgrader)"
    quietly(export, root, root / "grades.csv")
    row, = csv.DictReader((root / "grades.csv").open())
    assert row["status"] == status and "by hand" not in row["status"]
    assert [row[q.grade_id] for q in ANSWERS] == ["0.0"] * len(ANSWERS)
    with gradebook.connect(root) as gb:
        for q in ANSWERS:
            grade = gb.find_grade(q.grade_id, NOTEBOOK, "unit1", "s1")
            comment = gb.find_comment(q.grade_id, NOTEBOOK, "unit1", "s1")
            assert (grade.manual_score, grade.needs_manual_grade) == (0, False)
            assert comment.manual_comment == f"0 points: {why(root)}. A grader may change " \
                                             "this score."


def test_feedback_reports_released_units_alone_and_writes_moodles_upload(course):
    """No "(0)" line for the units not yet released; one named is said to be so."""
    root, _, _, _, said = course
    assert said.splitlines() == [
        "feedback for unit1: feedback/*/unit1/, one zip per student in feedback_zips/unit1/ (1)",
        "  Moodle's \"Upload multiple feedback files in a zip\": "
        "feedback_upload/unit1-moodle.zip (1 student)"]
    page = root / "feedback" / "s1" / "unit1" / f"{NOTEBOOK}.html"
    with zipfile.ZipFile(root / "feedback_upload" / "unit1-moodle.zip") as z:
        assert z.namelist() == [f"{FOLDER}/{NOTEBOOK}.html"]
        assert z.read(z.namelist()[0]) == page.read_bytes()
    _, said = quietly(feedback, root, ["unit3", "unit1"])
    assert said.splitlines() == [
        "unit3: not released yet (make release A=unit3): no feedback",
        "feedback for unit1: feedback/*/unit1/, one zip per student in feedback_zips/unit1/ (1)"]
    assert not (root / "feedback_zips" / "unit3").exists()


def test_a_graders_override_survives_grading_the_same_file_again(course):
    root, outcome, sent, status, _ = course
    q = ANSWERS[0]
    with gradebook.connect(root) as gb:
        gb.find_grade(q.grade_id, NOTEBOOK, "unit1", "s1").manual_score = 1.5
        gb.db.commit()
    assert autograde.save(root, Course.load(root), outcome, sent)[0] == status  # (the same file, graded again)
    with gradebook.connect(root) as gb:
        assert gb.find_grade(q.grade_id, NOTEBOOK, "unit1", "s1").manual_score == 1.5


# --- a written answer's grade after grading again (tools/instructor/autograde.written_answer) ------

def answer(manual=None, comment=None, auto=None):
    return (SimpleNamespace(manual_score=manual, auto_score=auto, needs_manual_grade=True),
            SimpleNamespace(manual_comment=comment))


WHY = "01_layernorm_forward.ipynb: not a readable notebook (NotJSONError; file 0123456789ab)"
OURS = f"0 points: {WHY}. A grader may change this score."


@pytest.mark.parametrize("before, manual, comment, unreadable, now, expected", [
    # unreadable, graded first: 0, final, and why
    (None, None, None, WHY, "[not read 1]", (0, False, OURS, False)),
    # the same unreadable file again: a grader's score of it stays
    ("[not read 1]", 1.5, OURS, WHY, "[not read 1]", (1.5, False, OURS, False)),
    # another unreadable file: 0 again, with its own why
    ("[not read 1]", 1.5, OURS, WHY, "[not read 2]", (0, False, OURS, False)),
    # read now: the 0 and its comment are gone, the answer waits for a grader
    ("[not read 1]", 0, OURS, None, "An answer", (None, True, None, False)),
    # a readable answer that changed since a grader scored it: dropped, said
    ("An answer", 2, "Good", None, "Another", (None, True, "Good", True)),
    # unchanged: kept
    ("An answer", 2, "Good", None, "An answer", (2, True, "Good", False)),
])
def test_a_written_answers_grade_after_grading_again(before, manual, comment, unreadable, now,
                                                     expected):
    grade, note = answer(manual, comment)
    dropped = autograde.written_answer(grade, note, unreadable, before, now)
    assert (grade.manual_score, grade.needs_manual_grade, note.manual_comment, dropped) == \
        expected
