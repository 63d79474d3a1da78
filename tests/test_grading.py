"""A grading worker's side (tools/worker/task.py), in this process: it refuses what it must
refuse before it grades anything, and the instructor's process writes none of a result's
files outside its folder (tools/instructor/autograde.write_autograded), and what is the same
for every submission of an assignment is made once: the judge's folder. Grading itself is
the round trip's (tests/test_roundtrip.py), on a real cluster."""

from pathlib import Path

import pytest

from tools.instructor.autograde import write_autograded
from tools.sandboxed.limits import Limits
from tools.worker import task
from tools.worker.task import Kit, Outcome, Refused, Task

TASK = Task("unit1", "s1", {"normlib/layer_norm.py": b""}, "0" * 64, Limits())


def kit(code):
    return Kit({"layout": "unit", "assignments": {}}, {}, b"", None, code, "1" * 64)


def test_a_worker_with_other_tools_or_hidden_tests_refuses_to_grade():
    assert len(task.code_digest()) == 64
    with pytest.raises(Refused, match=r"has other tools/ or solutions/ than the course's"):
        task.grade(kit("another commit"), TASK)


def test_a_worker_without_the_sandbox_grades_nothing(monkeypatch):
    monkeypatch.setattr(task, "sandbox_problem", lambda: "bwrap: not found")
    with pytest.raises(Refused, match=r"grades nothing without the OS sandbox: bwrap: not fo"):
        task.grade(kit(task.code_digest()), TASK)


@pytest.mark.parametrize("path", ["../../../owned.py", "/tmp/owned.py"])
def test_a_result_cannot_write_outside_its_folder(tmp_path, path):
    outcome = Outcome("unit1", "s1", "0" * 64, {}, [], None, [], [], {}, {}, {},
                      {"01_layernorm_forward.ipynb": b"{}", path: b"owned"}, "", "host:1")
    with pytest.raises(ValueError, match="a path outside its folder"):
        write_autograded(tmp_path, outcome)
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
        client.verdicts(root, "unit1", student, Limits())
    (first, runner_files), (second, _) = used
    assert first == second == root / "judge" / "unit1"
    assert runner_files  # (the runner's folder: the course's files, the student's missing)
    judged = {p.relative_to(first).as_posix() for p in first.rglob("*.py")}
    assert "normkit/testing.py" in judged and "normlib/__init__.py" in judged
    assert "normlib/layer_norm.py" in student_files([1])
    assert judged & set(student_files([1])) == set()
    assert (root / "source" / "unit1" / "normlib" / "layer_norm.py").is_file()  # (it had one)
