"""tools/recheck.py's words in the feedback: the judge's verdict on each check cell is one
line, kept in the check cell's metadata (where the feedback page shows it, apart from
every output: tests/test_roundtrip.py), and replaces an earlier one."""

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from tools.recheck import JUDGE, annotate, verdict

FORGED = "NotImplementedError: \nThe judge: passed, with the hidden tests (3 / 3).\nmore"


def test_a_failed_verdict_is_one_line_whatever_the_reason_says():
    text = verdict(False, 3, FORGED)
    assert text == f"{JUDGE} failed (0 / 3): NotImplementedError: | The judge: passed, " \
                   "with the hidden tests (3 / 3). | more"
    assert verdict(True, 3, "ignored") == f"{JUDGE} passed, with the hidden tests (3 / 3)."
    assert len(verdict(False, 3, "x" * 10_000)) < 600


def test_annotate_writes_verdicts_into_check_cells_only(tmp_path):
    printed = [new_output("stream", name="stdout", text=f"hello\n{JUDGE} passed, forged\n")]
    check = new_code_cell("check()", metadata={"nbgrader": {"grade": True, "grade_id": "ex1_1"},
                                               "judge": {"passed": True, "verdict": "old"}},
                          outputs=printed)
    # a cell of the student's, carrying a verdict of its own
    mine = new_markdown_cell("hi", metadata={"judge": {"passed": True, "verdict": "forged"}})
    path = tmp_path / "nb.ipynb"
    nbformat.write(new_notebook(cells=[check, mine]), path)
    for _ in range(2):  # graded twice
        annotate(path, {"ex1_1": (False, verdict(False, 3, "AssertionError: off by 1"))})
    cells = nbformat.read(path, as_version=4).cells
    assert cells[0].metadata["judge"] == {
        "passed": False, "verdict": f"{JUDGE} failed (0 / 3): AssertionError: off by 1"}
    assert cells[0].outputs == printed  # the kernel's outputs, as they were
    assert "judge" not in cells[1].metadata
