"""The instructor's round trip: build an nbgrader course from solutions/, release it,
autograde four submissions, export the grades, and check every score.

- reference: the student edition with the reference normlib files -> full marks
- stubs: the untouched student edition -> 0
- wrong_backward: the reference with a backward missing its mean term -> partial
- tampered: a wrong kernel whose check cell was edited to pass -> the cell is
  restored and scores 0; and a cell added to notebook 02 that patches the checks'
  assert_close -> 2.2 scores in the notebook, and tools.recheck's clean process flags it
The student's normlib files are what gets graded (exclude_overwriting): the same
course grades the stubs 0 and the reference full marks.
"""

import csv
import html
import json
import re
import shutil
from pathlib import Path

import pytest
from nbgrader.api import Gradebook

from tools.course import (
    ASSIGNMENT,
    SOLUTIONS,
    build_course,
    graded_cells,
    nbgrader,
    student_files,
)
from tools.grading import SKIPPED
from tools.grading import TAG as SKIP_TAG
from tools.recheck import disagreements

CHECKS = {grade_id: (notebook, points) for notebook, grade_id, points, _ in graded_cells()}
POINTS = {grade_id: points for grade_id, (_, points) in CHECKS.items()}
BACKWARD = "    dx = rstd * (g - g_mean - x_hat * gx_mean)  # (*B, *S)\n"
RSTD = "    rstd = 1.0 / np.sqrt(var + eps)  # (*B, 1..1)\n"
TAMPERED_ID = "ex1_1_layer_norm_stats"
SKIP_TAGGED_ID = "ex1_2_layer_norm_forward"  # scores 0 for "tampered" only if it still runs
PATCH = "import normlib.testing\nnormlib.testing.assert_close = lambda *args, **kwargs: None\n"
EXPECTED = {  # student -> grade_id -> points earned
    "reference": dict(POINTS),
    "stubs": dict.fromkeys(POINTS, 0),
    # 2.2 runs the wrong backward through the autograd Function too
    "wrong_backward": {**POINTS, "ex2_1_layer_norm_backward": 0, "ex2_2_layer_norm_function": 0},
    # eps outside the sqrt breaks the stats, hence the forward and the module; but in
    # notebook 02 a cell patches assert_close, so 2.2 scores there (tools.recheck flags it)
    "tampered": {**POINTS, "ex1_1_layer_norm_stats": 0, "ex1_2_layer_norm_forward": 0},
}


def reference_file(name, replace=None):
    text = (SOLUTIONS / "normlib" / name).read_text()
    if replace:
        old, new = replace
        assert old in text, f"the reference {name} changed: update this test's mutation"
        text = text.replace(old, new)
    return text


def submit(root, student, files=(), tamper=False):
    """A submission: the released edition with some normlib files replaced."""
    folder = root / "submitted" / student / ASSIGNMENT
    shutil.copytree(root / "release" / ASSIGNMENT, folder)
    for name, text in files:
        (folder / "normlib" / name).write_text(text)
    if tamper:  # make the stats check pass whatever the kernel does
        path = next(folder.glob("01_*.ipynb"))
        notebook = json.loads(path.read_text())
        for cell in notebook["cells"]:
            if cell["metadata"].get("nbgrader", {}).get("grade_id") == TAMPERED_ID:
                cell["source"] = "# Exercise 1.1: layer_norm_stats (3 points)\npass\n"
            if cell["metadata"].get("nbgrader", {}).get("grade_id") == SKIP_TAGGED_ID:
                cell["metadata"]["tags"] = [SKIP_TAG]  # asks the grader to skip a check
        path.write_text(json.dumps(notebook))
        path = next(folder.glob("02_*.ipynb"))  # a cell that disarms the checks
        notebook = json.loads(path.read_text())
        notebook["cells"].insert(1, {"cell_type": "code", "metadata": {}, "outputs": [],
                                     "execution_count": None, "source": PATCH})
        path.write_text(json.dumps(notebook))


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = build_course(tmp_path_factory.mktemp("course"))
    nbgrader(root, "generate_assignment", ASSIGNMENT)
    reference = {Path(f).name: reference_file(Path(f).name) for f in student_files()}
    submit(root, "reference", reference.items())
    submit(root, "stubs")
    wrong = reference_file("layer_norm.py", (BACKWARD, BACKWARD.replace("g_mean - ", "")))
    submit(root, "wrong_backward", {**reference, "layer_norm.py": wrong}.items())
    eps_outside = reference_file("layer_norm.py", (RSTD, RSTD.replace("np.sqrt(var + eps)", "(np.sqrt(var) + eps)")))
    submit(root, "tampered", {**reference, "layer_norm.py": eps_outside}.items(), tamper=True)
    result = nbgrader(root, "autograde", ASSIGNMENT, "--create", check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    nbgrader(root, "export")
    return root


def test_the_course_has_the_layer_norm_checks():
    assert {k: POINTS[k] for k in ("ex1_1_layer_norm_stats", "ex1_2_layer_norm_forward",
                                   "ex2_1_layer_norm_backward", "ex2_2_layer_norm_function")} \
        == {"ex1_1_layer_norm_stats": 3, "ex1_2_layer_norm_forward": 3,
            "ex2_1_layer_norm_backward": 4, "ex2_2_layer_norm_function": 4}


def test_every_check_cell_scores_as_expected(graded):
    with Gradebook(f"sqlite:///{graded / 'gradebook.db'}") as gb:
        for student, expected in EXPECTED.items():
            for grade_id, points in expected.items():
                grade = gb.find_grade(grade_id, CHECKS[grade_id][0], ASSIGNMENT, student)
                assert grade.max_score == POINTS[grade_id]
                assert grade.score == points, f"{student} {grade_id}: {grade.score} != {points}"


def test_grades_csv_has_the_totals(graded):
    rows = {r["student_id"]: r for r in csv.DictReader((graded / "grades.csv").open())}
    assert set(rows) == set(EXPECTED)
    for student, expected in EXPECTED.items():
        assert float(rows[student]["max_score"]) == sum(POINTS.values())
        assert float(rows[student]["raw_score"]) == sum(expected.values())


def check_cell(path, grade_id):
    cells = json.loads(path.read_text())["cells"]
    return next("".join(c["source"]) for c in cells
                if c["metadata"].get("nbgrader", {}).get("grade_id") == grade_id)


def test_tampered_check_cell_is_restored(graded):
    """The edited cell ran as the course wrote it, hidden tests included."""
    path = next((graded / "autograded" / "tampered" / ASSIGNMENT).glob("01_*.ipynb"))
    restored = check_cell(path, TAMPERED_ID)
    assert restored == check_cell(next(SOLUTIONS.glob("01_*.ipynb")), TAMPERED_ID)
    assert "check_stats(x, (3, 4))" in restored and "### BEGIN HIDDEN TESTS" in restored


def test_release_has_no_solution_and_student_files_are_graded(graded):
    release = graded / "release" / ASSIGNMENT
    for path in release.rglob("*"):
        if path.is_file():
            assert "BEGIN SOLUTION" not in path.read_text(errors="ignore"), path
            assert "BEGIN HIDDEN TESTS" not in path.read_text(errors="ignore"), path
    # what autograde ran is the student's file, not the course's reference
    graded_file = graded / "autograded" / "stubs" / ASSIGNMENT / "normlib" / "layer_norm.py"
    assert 'raise NotImplementedError("Exercise 1.1' in graded_file.read_text()


def test_experiments_are_skipped_at_grading_and_checks_never(graded):
    """Cells tagged skip-at-grading (Unit 4's training runs) were not run at autograde;
    the check cells were, including the one the tampered submission tagged
    (test_every_check_cell_scores_as_expected: it still scores 0 there)."""
    source = next(SOLUTIONS.glob("04_*.ipynb"))
    tagged = [i for i, c in enumerate(json.loads(source.read_text())["cells"])
              if SKIP_TAG in c["metadata"].get("tags", [])]
    assert tagged, "the warm-up experiment of Unit 4 is tagged skip-at-grading"
    path = next((graded / "autograded" / "reference" / ASSIGNMENT).glob("04_*.ipynb"))
    cells = json.loads(path.read_text())["cells"]
    for i in tagged:
        assert "".join(cells[i]["source"]) == SKIPPED and not cells[i]["outputs"]
    checks = [c for c in cells if c["metadata"].get("nbgrader", {}).get("grade")]
    assert checks and all(c["outputs"] for c in checks)


def test_clean_process_flags_the_patched_checks_and_only_them(graded):
    """tools.recheck re-runs every check on the submission's normlib in a fresh process:
    the tampered submission's patched 2.2 (4 points in the notebook) is 0 there; the
    reference agrees everywhere."""
    assert disagreements(graded, "tampered") == [("ex2_2_layer_norm_function", 4, 0)]
    assert disagreements(graded, "reference") == []


def hidden_only_lines(grade_id):
    """The lines of a check's hidden-test block that appear nowhere else in the cell."""
    source = check_cell(next(SOLUTIONS.glob("02_*.ipynb")), grade_id)
    visible, hidden = source.split("### BEGIN HIDDEN TESTS")[0], source.split(
        "### BEGIN HIDDEN TESTS")[1].split("### END HIDDEN TESTS")[0]
    seen = {line.strip() for line in visible.splitlines()}
    return {line.strip() for line in hidden.splitlines() if line.strip()} - seen


def test_feedback_says_what_failed_without_the_hidden_tests(graded):
    result = nbgrader(graded, "generate_feedback", ASSIGNMENT, "--student", "wrong_backward",
                      check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    page = next((graded / "feedback" / "wrong_backward" / ASSIGNMENT).glob("02_*.html"))
    text = html.unescape(re.sub(r"<[^>]+>", "", page.read_text()))  # what a reader sees
    assert "check_backward(x, (4,), weight, bias)" in text  # the visible checks are shown
    assert "dx for x (2, 4) float32" in text and "Not equal to tolerance" in text  # and why
    assert "lines of hidden tests, not shown" in text
    hidden = hidden_only_lines("ex2_1_layer_norm_backward")
    assert len(hidden) > 10
    assert not [line for line in hidden if line in text]
