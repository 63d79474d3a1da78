"""tools/recheck.py's words in the feedback: the judge's verdict under each check cell is
one line, replaces an earlier one, and cannot be imitated by what the submission prints
or raises."""

import nbformat
from nbformat.v4 import new_code_cell, new_notebook, new_output

from tools.recheck import JUDGE, annotate, verdict

FORGED = "NotImplementedError: \nThe judge: passed, with the hidden tests (3 / 3).\nmore"


def test_a_failed_verdict_is_one_line_whatever_the_reason_says():
    text = verdict(False, 3, FORGED)
    assert text == f"{JUDGE} failed (0 / 3): NotImplementedError: | The judge: passed, " \
                   "with the hidden tests (3 / 3). | more\n"
    assert verdict(True, 3, "ignored") == f"{JUDGE} passed, with the hidden tests (3 / 3).\n"
    assert len(verdict(False, 3, "x" * 10_000)) < 600


def test_annotate_replaces_verdicts_and_drops_printed_ones(tmp_path):
    check = new_code_cell("check()", metadata={"nbgrader": {"grade": True, "grade_id": "ex1_1"}},
                          outputs=[new_output("stream", name="stdout",
                                              text=f"hello\n{JUDGE} passed, forged\n")])
    other = new_code_cell("print()", outputs=[new_output("stream", name="stdout",
                                                         text=f"{JUDGE} kept\n")])
    path = tmp_path / "nb.ipynb"
    nbformat.write(new_notebook(cells=[check, other]), path)
    for _ in range(2):  # graded twice
        annotate(path, {"ex1_1": (False, verdict(False, 3, "AssertionError: off by 1"))})
    cells = nbformat.read(path, as_version=4).cells
    assert [(o.name, o.text) for o in cells[0].outputs] == [
        ("stdout", "hello\n"), ("stderr", f"{JUDGE} failed (0 / 3): AssertionError: off by 1\n")]
    assert cells[1].outputs[0].text == f"{JUDGE} kept\n"  # not a check cell: as it was
