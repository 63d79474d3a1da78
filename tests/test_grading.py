"""A grading worker's side (tools/worker/task.py), in this process: it refuses what it must
refuse before it grades anything, and the instructor's process writes none of a result's
files outside its folder (tools/instructor/autograde.write_autograded), and what is the same
for every submission of an assignment is made once: the judge's folder. Grading itself is
the round trip's (tests/test_roundtrip.py), on a real cluster."""

import shutil
from pathlib import Path

import pytest

from tools.course.exercises import REPO
from tools.course.folder import Course
from tools.instructor import autograde
from tools.instructor.autograde import write_autograded
from tools.sandboxed.limits import BUSY, Limits
from tools.worker import task
from tools.worker.task import Kit, Outcome, Refused, Task

TASK = Task("unit1", "s1", {"normlib/layer_norm.py": b""}, "0" * 64, Limits())


def kit(code):
    return Kit(Course("unit", {}), {}, b"", None, code, "1" * 64)


def test_a_worker_with_other_tools_or_hidden_tests_refuses_to_grade():
    assert len(task.code_digest()) == 64
    with pytest.raises(Refused, match=r"has other tools/, normkit/, solutions/ or nbgrader_config.py than the "):
        task.grade(kit("another commit"), TASK)


def test_the_code_digest_covers_the_judge_the_checks_and_the_hidden_tests(tmp_path, monkeypatch):
    """A worker with another normkit/ grades by other checks (the judge runs its own), and
    one with another nbgrader_config.py by other preprocessors (its Autograde loads it), so
    its digest differs, as with other tools/ or solutions/ (issue 61)."""
    grading = ("tools", "normkit", "solutions", "nbgrader_config.py")  # (written out: the
    # test holds task.CODE to it)
    assert task.CODE == grading
    for top in grading[:-1]:
        shutil.copytree(REPO / top, tmp_path / top,
                        ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
    shutil.copy(REPO / grading[-1], tmp_path)
    monkeypatch.setattr(task, "REPO", tmp_path)
    seen = []
    try:
        for top in grading:
            task.code_digest.cache_clear()
            seen.append(task.code_digest())
            edited = min((tmp_path / top).rglob("*.py")) if top != grading[-1] else tmp_path / top
            edited.write_text(edited.read_text() + "# edited\n")
        task.code_digest.cache_clear()
        seen.append(task.code_digest())
    finally:
        task.code_digest.cache_clear()
    assert len(set(seen)) == len(grading) + 1, seen


def test_a_worker_without_the_sandbox_grades_nothing(monkeypatch):
    monkeypatch.setattr(task, "sandbox_problem", lambda: "bwrap: not found")
    with pytest.raises(Refused, match=r"grades nothing without the OS sandbox: bwrap: not fo"):
        task.grade(kit(task.code_digest()), TASK)


@pytest.mark.parametrize("path, message", [
    ("../../../owned.ipynb", "not notebooks: '../../../owned.ipynb'"),
    ("/tmp/owned.ipynb", "not notebooks: '/tmp/owned.ipynb'"),
    # only the notebooks return from a worker (issue 61): the course's files are the head's
    ("normkit/checks/unit1.py", "the worker host:1 returned files that are not notebooks: "
                                "'normkit/checks/unit1.py'"),
    ("normlib/owned.ipynb", "returned files that are not notebooks: 'normlib/owned.ipynb'")])
def test_a_result_writes_its_notebooks_alone_and_never_outside_its_folder(tmp_path, path,
                                                                           message):
    outcome = Outcome("unit1", "s1", "0" * 64, {}, [], None, [], [], {}, {}, {},
                      {"01_layernorm_forward.ipynb": b"{}", path: b"owned"}, "", "host:1")
    with pytest.raises(ValueError, match=message):
        write_autograded(tmp_path, outcome, TASK)
    assert not list(tmp_path.rglob("*"))



@pytest.mark.parametrize("path", ["../../../owned.py", "/tmp/owned.py", "a/../../owned.py"])
def test_files_are_never_put_outside_their_folder(tmp_path, path):
    """What crosses between the head and a worker (tools.course.folder.put)."""
    from tools.course.folder import put

    with pytest.raises(ValueError, match="a path outside its folder"):
        put(tmp_path / "in", {"ok.txt": b"", path: b"owned"})
    assert not list(tmp_path.rglob("*"))

@pytest.mark.parametrize("student, digest", [("s2", "0" * 64), ("s1", "1" * 64)])
def test_a_result_for_another_submission_or_other_files_is_refused(tmp_path, student, digest):
    """The head saves a result only for the task it sent: the same submission, and the
    digest of the files the task carried."""
    outcome = Outcome("unit1", student, digest, {}, [], None, [], {}, {}, {}, {},
                      {"01_layernorm_forward.ipynb": b"{}"}, "", "host:1")
    with pytest.raises(ValueError, match=rf"the worker host:1 answered for another "
                                         rf"submission or other files \(unit1 {student}, "
                                         rf"files {digest[:12]}; sent: unit1 s1, files 0{{12}}\)"):
        autograde.save(tmp_path, Course("unit", {}), outcome, TASK)
    assert not list(tmp_path.rglob("*"))


def test_the_judges_folder_is_made_once_per_assignment_without_student_code(tmp_path,
                                                                            monkeypatch):
    """Every submission of an assignment is judged with one folder (the judge process
    compiles the course's modules once); it holds the course's normlib/ and normkit/ but
    no student file, not even the reference's."""
    from tools.course.exercises import student_files
    from tools.instructor.build import build_course
    from tools.judge import client

    root = build_course(tmp_path / "course")
    for student in ("s1", "s2"):
        (root / "submitted" / student / "unit1" / "normlib").mkdir(parents=True)
    used = []
    monkeypatch.setattr(client, "run_checks", lambda folder, cells, *args: used.append(
        (args[-1], sorted(p.name for p in Path(folder, "normlib").glob("*.py")))) or {
        g: (False, "x") for g, _ in cells})
    for student in ("s1", "s2"):
        client.verdicts(root, "unit1", Course.load(root).assignments["unit1"], student, Limits())
    (first, runner_files), (second, _) = used
    assert first == second == root / "judge" / "unit1"
    assert runner_files  # (the runner's folder: the course's files, the student's missing)
    judged = {p.relative_to(first).as_posix() for p in first.rglob("*.py")}
    assert "normkit/testing.py" in judged and "normlib/__init__.py" in judged
    assert "normlib/layer_norm.py" in student_files([1])
    assert judged & set(student_files([1])) == set()
    assert (root / "source" / "unit1" / "normlib" / "layer_norm.py").is_file()  # (it had one)


# --- what nbgrader reads of a submission, and its time (issue 58, point 3) ---------------

def test_a_deadline_stops_python_work_in_its_thread_and_nothing_after():
    """tools/course/deadline.py: a loop past its seconds gets TimeUp, in the main thread and
    in another (a Dask worker's); work that ends in time gets none, then or later."""
    import threading
    import time

    from tools.course.deadline import TimeUp, deadline

    def spin():
        with deadline(0.3):
            while True:
                pass

    start = time.monotonic()
    with pytest.raises(TimeUp):
        spin()
    found = []
    thread = threading.Thread(target=lambda: found.append(pytest.raises(TimeUp, spin)))
    thread.start()
    thread.join(10)
    assert found and not thread.is_alive() and time.monotonic() - start < 5
    with deadline(0.3):
        total = sum(range(1000))
    end = time.monotonic() + 0.6
    while time.monotonic() < end:  # (Python instructions past the deadline: none raises)
        total += 1
    assert total > 1000


def test_a_notebook_over_a_bound_is_not_read(tmp_path):
    """tools/worker/stage.read_bounded: a notebook over its bytes is refused before it is
    read, one over its cells before nbformat validates them; a file that is not JSON
    keeps nbformat's error."""
    import nbformat

    from tools.course.bounds import Bounds
    from tools.worker.stage import NotebookTooLarge, read_bounded

    def write(cells):
        nbformat.write(nbformat.v4.new_notebook(
            cells=[nbformat.v4.new_code_cell("") for _ in range(cells)]), path)

    path = tmp_path / "n.ipynb"
    write(4)
    assert len(read_bounded(path, Bounds(notebook_cells=4)).cells) == 4
    write(5)
    with pytest.raises(NotebookTooLarge, match=r"^5 cells, more than the 4 a notebook may "):
        read_bounded(path, Bounds(notebook_cells=4))
    size = path.stat().st_size
    with pytest.raises(NotebookTooLarge, match=f"^{size:,} bytes, more than the 100 a "):
        read_bounded(path, Bounds(file_bytes=100))
    path.write_text('{"cells": [')
    with pytest.raises(nbformat.reader.NotJSONError):
        read_bounded(path)


def test_a_notebook_over_the_cell_bound_is_refused_saying_why_beside_an_honest_one(
        tmp_path, monkeypatch):
    """The attack: the unit's notebook with 5,000 empty cells more (nbgrader's autograde
    took 13 minutes over 100,000, its feedback 5). It is not read: its code is graded by
    the judge, its notebook is replaced by a stand-in (its checks with the judge's verdicts,
    its written answers 0) and its status says why; the honest student beside it is graded
    in full. Then nbgrader's autograde past its time (record_seconds made 0.01 s): the
    submission fails saying so, nothing of its notebook recorded, the judge's scores kept."""
    import contextlib
    import dataclasses
    import hashlib
    import io

    from tests.synthetic import both, edit_notebook, reference_submission, write_submission
    from tools.course.exercises import exercises, maximum
    from tools.course.settings import read
    from tools.instructor import gradebook
    from tools.instructor.build import build_course
    from tools.instructor.release import release
    from tools.judge import client
    from tools.judge.client import Verdict

    root = build_course(tmp_path / "course", layout="unit")
    with contextlib.redirect_stdout(io.StringIO()):
        release(root, ["unit1"])
    pad = [{"cell_type": "code", "id": f"pad-{i}", "metadata": {}, "source": "",
            "outputs": [], "execution_count": None} for i in range(5000)]
    cases = {"honest": reference_submission(1),
             "cells": both(reference_submission(1), lambda f: edit_notebook(f, lambda c: c.extend(pad)))}
    for student in cases:
        write_submission(root, "unit1", student, root / "submitted" / student / "unit1", cases)
    course = Course.load(root)
    kit = autograde.make_kit(root, course, ["unit1"])

    graded = {}  # {student: (Outcome, Task)}, the last

    def grade(*students):
        todo, _ = autograde.pending(root, course, ["unit1"], students)
        listed, refused = autograde.tasks(root, todo, read(root).limits, False, True)
        assert refused == []
        graded.update({one.student: (task.grade(kit, one), one) for one in listed})
        return {s: autograde.save(root, course, *graded[s]) for s in students}

    found = grade("honest", "cells")
    points = sum(e.points for e in exercises() if e.unit == 1)
    path = root / "submitted" / "cells" / "unit1" / "01_layernorm_forward.ipynb"
    sha = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    assert found["cells"][0] == (
        "graded; 01_layernorm_forward.ipynb: not a readable notebook (NotebookTooLarge: "
        f"5,031 cells, more than the 1,000 a notebook may have; file {sha}): its written "
        "answers score 0 (a grader may change that in formgrader)")
    assert found["honest"][0] == "graded"
    assert found["cells"][1].startswith(f"{points:g} / ")  # (the judge's, for its code)
    assert found["honest"][1].startswith(f"{points:g} / ")
    autograded = root / "autograded" / "cells" / "unit1" / "01_layernorm_forward.ipynb"
    assert len(autograded.read_bytes()) < 100_000  # (the stand-in)

    # a check's score is its verdict's alone: nbgrader's copy of it (the notebook's) is not
    # written, whatever it says (issue 61: one verdict)
    checks = {e.grade_id: e for e in exercises() if e.unit == 1}

    def check_scores():
        with gradebook.connect(root) as gb:
            return {g: gb.find_grade(g, e.notebook, "unit1", "honest").auto_score
                    for g, e in checks.items()}

    outcome, sent = graded["honest"]
    assert check_scores() == {g: e.points for g, e in checks.items()}
    nothing = {k: 0 if k[1] in checks else v for k, v in outcome.scores.items()}
    assert nothing != outcome.scores
    autograde.save(root, course, dataclasses.replace(outcome, scores=nothing), sent)
    assert check_scores() == {g: e.points for g, e in checks.items()}
    failed = {g: Verdict(False, "The judge: failed") for g in outcome.verdicts}
    status, score = autograde.save(root, course, dataclasses.replace(outcome, verdicts=failed),
                                   sent)
    assert check_scores() == dict.fromkeys(checks, 0)
    assert score == f"0 / {maximum(['01_layernorm_forward']):g}"
    # a check a busy machine cut short: 0 points, said in the status, graded again next time
    first = min(checks)
    busy = {**outcome.verdicts, first: Verdict(False, client.verdict(
        False, f"{BUSY} (its runner waited ...)", checks[first].points))}
    status, _ = autograde.save(root, course, dataclasses.replace(outcome, verdicts=busy), sent)
    assert f"{BUSY} (Exercise {checks[first].number}: make autograde grades it again)" in \
        status, status
    assert "could not finish it (0 / " in busy[first].text
    assert autograde.pending(root, course, ["unit1"])[0] == {"unit1": ["honest"]}
    with gradebook.connect(root) as gb:  # nbgrader's record alone leaves the checks' rows
        for g, e in checks.items():
            gb.find_grade(g, e.notebook, "unit1", "honest").auto_score = None
        autograde.save_to_nbgrader(gb, outcome, sent.submitted_at, set(checks))
        assert {g: gb.find_grade(g, e.notebook, "unit1", "honest").auto_score
                for g, e in checks.items()} == dict.fromkeys(checks)
        gb.db.rollback()
    autograde.save(root, course, outcome, sent)
    assert check_scores() == {g: e.points for g, e in checks.items()}

    monkeypatch.setattr(task, "record_seconds", lambda *args: 0.01)
    status, score = grade("honest")["honest"]
    assert status == "failed: nbgrader's autograde ran over its 0.01 s limit (c.Grading." \
                     "record_timeout): nothing of its notebooks was recorded"
    assert score.startswith(f"{points:g} / ")
    assert not (root / "autograded" / "honest" / "unit1").exists()


def test_a_course_built_before_normlibs_private_modules_is_graded_with_them(tmp_path):
    """normkit/ (the repository's, at grading) imports normlib's provided private modules:
    the runner's and the judge's folders take them from the repository, as normkit/, so a
    course whose source/ was built before they existed still grades. They hold no solution
    block (the runner has them)."""
    import contextlib
    import io

    from tools.course.exercises import SOLUTIONS
    from tools.course.markers import has_marker
    from tools.instructor.build import build_course
    from tools.judge.client import assignment_judge_folder, graded_folder

    with contextlib.redirect_stdout(io.StringIO()):
        root = build_course(tmp_path / "course", layout="unit")
    private = sorted((SOLUTIONS / "normlib").glob("_[!_]*.py"))
    assert [p.name for p in private] == ["_blocks.py", "_channels.py", "_validation.py"]
    assert not [p for p in private if has_marker(p.read_text())]
    for path in private:
        (root / "source" / "unit3" / "normlib" / path.name).unlink()
    own = Course.load(root).assignments["unit3"].student_files
    graded_folder(root, "unit3", own, "s1", tmp_path / "runner")
    for folder in (tmp_path / "runner", assignment_judge_folder(root, "unit3", own)):
        assert [(folder / "normlib" / p.name).read_bytes() for p in private] == \
            [p.read_bytes() for p in private], folder
