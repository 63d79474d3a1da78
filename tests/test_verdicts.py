"""The judge's words in the feedback (tools/judge/client.py, tools/worker/judged.Judged): each
check's verdict, whole, kept in the check cell's metadata (where the feedback page shows
it, apart from every output: tests/test_roundtrip.py), replacing whatever the notebook
carried; and a check that fails because an exercise it builds on fails says so."""

import json

import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output
from traitlets.config import Config

from tools.course.exercises import by_number, needs
from tools.judge.client import JUDGE, verdict
from tools.worker.judged import Judged

FORGED = "NotImplementedError: \nThe judge: passed, with the hidden tests (3 / 3).\nmore"


def test_a_verdict_says_passed_or_failed_and_why_whole():
    text = verdict(False, FORGED, 3)
    assert text.startswith(f"{JUDGE} failed (0 / 3): NotImplementedError:")
    assert text.splitlines()[1:] == ["The judge: passed, with the hidden tests (3 / 3).", "more"]
    assert verdict(True, "ignored", 3) == f"{JUDGE} passed, with the hidden tests (3 / 3)."
    long = verdict(False, "x" * 10_000, 3)
    assert long.endswith("x" * 10_000)  # not clipped: the page wraps it


def test_a_check_that_builds_on_a_failed_exercise_says_so():
    assert "1.1" in by_number()["1.2"].uses
    assert needs("1.2", {"1.1", "3.1"}) == ["1.1"]
    assert needs("1.2", {"1.2"}) == []
    assert needs("1.1", {"1.1"}) == []
    assert "1.1" in needs("2.5", {"1.1", "2.2"})  # (through 1.2, which 2.5's forward calls)
    text = verdict(False, "AssertionError: rstd off", 3, needs("1.2", {"1.1"}))
    assert text.splitlines()[-1] == ("It needs Exercise 1.1 (layer_norm_stats), which fails: "
                                     "fix that first, then this check again.")


@pytest.mark.parametrize("found", [True, False])
def test_judged_writes_verdicts_into_check_cells_only(tmp_path, found):
    printed = [new_output("stream", name="stdout", text=f"hello\n{JUDGE} passed, forged\n")]
    check = new_code_cell("check()", metadata={"nbgrader": {"grade": True, "grade_id": "ex1_1"},
                                               "judge": {"passed": True, "verdict": "forged"}},
                          outputs=printed)
    # a cell of the student's, carrying a verdict of its own
    mine = new_markdown_cell("hi", metadata={"judge": {"passed": True, "verdict": "forged"}})
    text = verdict(False, "AssertionError: off by 1", 3)
    path = tmp_path / "verdicts.json"
    path.write_text(json.dumps({"unit1": {"s1": {"ex1_1": [False, text]} if found else {}}}))
    judged = Judged(config=Config({"Judged": {"verdicts": str(path)}}))
    nb, _ = judged.preprocess(new_notebook(cells=[check, mine]),
                              {"nbgrader": {"assignment": "unit1", "student": "s1"}})
    assert nb.cells[0].metadata["judge"] == {
        "passed": False, "verdict": text if found else f"{JUDGE} no verdict (not graded)"}
    assert nb.cells[0].outputs == printed  # the notebook's outputs, as they were
    assert "judge" not in nb.cells[1].metadata
