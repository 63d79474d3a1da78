"""A broken student file costs only its own exercises, and those built on them.

For each file students write, the reference normlib with that file ending in a syntax
error: exactly its exercises fail (with the SyntaxError), those of the files that import
it, and those whose reference calls one of them (Exercise.uses), and no other. Under three
layouts:
- `make check`: every visible check, run as tools.student.check runs it (one process, no
  judge); tests/test_check.py runs the command itself;
- "course" grading: one assignment grading every student file, each check with its hidden
  tests, in the judge (tools.judge.client.verdicts), for layer_norm.py alone (every exercise
  runs there: one file keeps the cost down);
- "unit" grading: each assignment that grades the file, the other files the course's.
The compiled kernels' checks run only where their own file is broken (`ran` says why). The
round trip grades one such submission, unit3 "broken", through nbgrader itself.
"""

import shutil
import sys
from pathlib import Path

import pytest

from tests.conftest import exercise_marks
from tests.synthetic import override
from tools.course.exercises import SOLUTIONS, by_number, exercises, imported, student_files
from tools.course.folder import Course
from tools.instructor.build import build_course
from tools.judge.client import verdicts
from tools.sandboxed.limits import Limits
from tools.student.check import run

BROKEN = "def (:\n"  # a syntax error, appended to a file
LIMITS_HERE = Limits()


def expected_failures(rel):
    """The exercises a syntax error in file rel must fail: those of rel and of the files
    that import it (tools.course.exercises.imported), and those whose reference calls one of them
    (transitively)."""
    failing = {e.number for e in exercises() if e.file == rel or rel in imported(e.file)}
    while True:
        more = {e.number for e in exercises() if set(e.uses) & failing} - failing
        if not more:
            return failing
        failing |= more


def failures(results, numbers_of):
    return {numbers_of[g] for g, (passed, _) in results.items() if not passed}


def file_param(rel):
    """A file as a parametrized case, marked with its exercises' markers."""
    numbers = sorted(e.number for e in exercises() if e.file == rel)
    return pytest.param(rel, marks=exercise_marks(*numbers), id=rel)


FILES = [file_param(rel) for rel in student_files()]
GRADE_IDS = {e.grade_id: e.number for e in exercises()}


def reference_with_broken(folder, rel):
    shutil.copytree(SOLUTIONS / "normlib", Path(folder) / "normlib",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (Path(folder) / rel).write_text(override(rel, BROKEN))


def test_the_files_students_write_are_those_of_the_exercises():
    assert student_files() == [
        "normlib/adaln.py", "normlib/batch_norm.py", "normlib/dyt.py", "normlib/fold.py",
        "normlib/fused_add_norm.py", "normlib/group_norm.py", "normlib/instance_norm.py", "normlib/layer_norm.py",
        "normlib/layer_norm_compiled.py", "normlib/layer_norm_fast.py",
        "normlib/mixed_precision.py", "normlib/mlp.py", "normlib/nn.py", "normlib/norm.py",
        "normlib/qk_norm.py", "normlib/rezero.py", "normlib/rms_norm.py", "normlib/rotation.py",
        "normlib/transformer.py", "normlib/variance.py", "normlib/z_loss.py"]
    # what the reference's code calls (tools.course.exercises reads it from the code)
    assert {n: e.uses for n, e in by_number().items() if e.uses} == {
        "1.2": ("1.1",), "2.5": ("1.2", "2.2"), "3.3": ("3.1",), "3.4": ("3.1",),
        "3.5": ("3.1",), "4.1": ("1.2", "3.3"), "4.2": ("2.2", "3.8", "4.1"), "5.2": ("5.1",),
        "5.3": ("5.2",), "8.4": ("8.2", "8.3")}
    # what a file imports to import at all: QK-norm subclasses Unit 5's provided attention,
    # so Unit 8's assignment grades transformer.py too, and a broken one fails 8.1
    assert {rel: imported(rel) for rel in student_files() if imported(rel)} == {
        "normlib/group_norm.py": ["normlib/norm.py"], "normlib/instance_norm.py":
        ["normlib/norm.py"], "normlib/mlp.py": ["normlib/batch_norm.py", "normlib/layer_norm.py"],
        "normlib/nn.py": ["normlib/layer_norm.py"], "normlib/qk_norm.py":
        ["normlib/transformer.py"]}
    assert student_files([8]) == ["normlib/adaln.py", "normlib/dyt.py", "normlib/qk_norm.py",
                                  "normlib/transformer.py"]
    # the compiled kernels' file imports no other student file (make_check relies on it)
    assert [line for line in (SOLUTIONS / COMPILED).read_text().splitlines()
            if line.startswith(("import ", "from "))] == \
        ["import numpy as np", "from numba import get_num_threads, njit, prange"]
    # Unit 4's network runs the student's kernels of Units 1 and 3: its assignment grades
    # their files too (a broken one costs Unit 4's exercises as well: the tests below)
    assert student_files([4]) == ["normlib/batch_norm.py", "normlib/layer_norm.py",
                                  "normlib/mlp.py", "normlib/norm.py"]


COMPILED = "normlib/layer_norm_compiled.py"  # Numba's kernels (Exercises 7.3, 7.4)


def ran(exercise, folder):
    """Whether make_check, and grade in the unit layout, run an exercise's check on folder
    (a submission): every one, but the compiled
    kernels' (2 s of compiling a run) where their own file is intact: their file imports
    NumPy and Numba alone and they use no other exercise (Exercise.uses, asserted above),
    so another file's break cannot reach them; the course layout grades them beside a
    broken file (test_grading[course-...])."""
    return exercise.file != COMPILED or \
        (Path(folder) / COMPILED).read_text() != (SOLUTIONS / COMPILED).read_text()


def make_check(folder):
    """{grade_id: (passed, detail)} of every visible check, run as tools.student.check runs them
    (in this process) with folder's normlib/ as `normlib`."""
    ours = [name for name in sys.modules if name == "normlib" or name.startswith("normlib.")]
    saved = {name: sys.modules.pop(name) for name in ours}
    sys.path.insert(0, str(folder))
    try:
        return {e.grade_id: (status == "pass", detail) for e in exercises() if ran(e, folder)
                for status, detail in [run(e.visible, f"<{e.number}>")]}
    finally:
        sys.path.remove(str(folder))
        for name in [n for n in sys.modules if n == "normlib" or n.startswith("normlib.")]:
            del sys.modules[name]
        sys.modules.update(saved)


@pytest.mark.parametrize("rel", FILES)
def test_make_check(tmp_path, rel, capsys):
    reference_with_broken(tmp_path, rel)
    results = make_check(tmp_path)
    assert set(results) == {e.grade_id for e in exercises() if rel == COMPILED or
                            e.file != COMPILED}
    assert failures(results, GRADE_IDS) == expected_failures(rel)
    for e in exercises():
        if e.file == rel:
            assert results[e.grade_id][1].startswith("SyntaxError"), results[e.grade_id]


@pytest.fixture(scope="module")
def courses(tmp_path_factory):
    """{layout: course root}, built once."""
    return {layout: build_course(tmp_path_factory.mktemp(layout), layout=layout)
            for layout in ("course", "unit")}


def grade(root, rel, every):
    """{number: passed} of a submission of the reference with rel broken, in every
    assignment of the course at root that grades rel, judged as autograde judges it: every
    check, or (every=False) those that ran() says a break of rel could reach (the compiled kernels' checks, 10 s of compiling and
    measuring a run, are judged beside a broken file in the course layout)."""
    found = {}
    for name, info in Course.load(root).assignments.items():
        if rel not in info.student_files:
            continue
        submission = Path(root) / "submitted" / "student" / name
        shutil.rmtree(submission, ignore_errors=True)
        for other in info.student_files:
            (submission / other).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(SOLUTIONS / other, submission / other)
        (submission / rel).write_text(override(rel, BROKEN))
        results, _ = verdicts(root, name, Course.load(root).assignments[name], "student",
                              LIMITS_HERE,
                              chosen=None if every else lambda e, s=submission: ran(e, s))
        found |= {GRADE_IDS[g]: passed for g, (passed, _) in results.items()}
    return found


# The course layout grades every exercise (14 s a file): one file there, layer_norm.py,
# whose exercises are built on in two units; the unit layout covers every file, in each
# assignment that grades it (transformer.py in unit5's and unit8's), with the checks a
# break of it could reach (ran: the compiled kernels' only where their own file breaks).
LAYOUT_FILES = [pytest.param("unit", f.values[0], marks=f.marks, id=f"unit-{f.id}")
                for f in FILES] + [pytest.param("course", f.values[0], marks=f.marks,
                                                id=f"course-{f.id}")
                                   for f in FILES if f.id == "normlib/layer_norm.py"]


@pytest.mark.parametrize("layout, rel", LAYOUT_FILES)
def test_grading(courses, layout, rel):
    found = grade(courses[layout], rel, every=layout == "course")
    if layout == "course":
        assert set(found) == set(GRADE_IDS.values())  # one assignment: every exercise
    failed = {number for number, passed in found.items() if not passed}
    # in the unit layout, only the assignments grading rel: its own units' exercises
    assert failed == {n for n in expected_failures(rel) if n in found}
    assert {e.number for e in exercises() if e.file == rel} <= failed
