"""A grading worker's side (tools/worker/task.py), in this process: it refuses what it must
refuse before it grades anything, and the instructor's process writes none of a result's
files outside its folder (tools/instructor/autograde.write_autograded). Grading itself is the round
trip's (tests/test_roundtrip.py), on a real cluster."""

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
