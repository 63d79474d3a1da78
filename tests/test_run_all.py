"""Run All goes on past unfinished work, and says what is unfinished (tests/test_browser.py
watches it in JupyterLab; the round trip checks the stub submissions' graded notebooks).

- Every check cell carries the `raises-exception` tag: JupyterLab's Run All stops at the
  first error of an untagged cell.
- The tag does not hide a broken reference: under nbval a tagged solution cell may raise
  only where its stored output shows the error (tests/conftest.py).
- normlib.notebook turns a stub's NotImplementedError into one line that names the
  exercise and the file, and leaves every other error's traceback alone.
"""

import json
import re
import subprocess
import sys

import pytest

from normlib.notebook import not_yet_implemented
from tests.conftest import REPO
from tools.exercises import notebooks


def test_every_check_cell_lets_run_all_go_on():
    for path in notebooks():
        for c in json.loads(path.read_text())["cells"]:
            if c["metadata"].get("nbgrader", {}).get("grade") and c["cell_type"] == "code":
                assert "raises-exception" in c["metadata"].get("tags", []), \
                    f"{path.name}: {c['metadata']['nbgrader']['grade_id']}"
        first = next(c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code")
        assert "%load_ext normlib.notebook" in "".join(first["source"]), path.name


NOTEBOOK = {
    "cells": [{"cell_type": "code", "execution_count": 1, "id": "c1",
               "metadata": {"tags": ["raises-exception"]},
               "outputs": [{"name": "stdout", "output_type": "stream", "text": "ok\n"}],
               "source": "print('ok')\nraise NotImplementedError('Exercise 1.1: implement f')"}],
    "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                "language": "python"}},
    "nbformat": 4, "nbformat_minor": 5,
}


def test_nbval_fails_a_tagged_cell_that_raises_unless_its_reference_did(tmp_path):
    """Two references of one tagged cell that raises: the one whose stored output shows
    the error passes, the one whose output does not fails (one nbval run for both)."""
    demonstrated = json.loads(json.dumps(NOTEBOOK))
    demonstrated["cells"][0]["outputs"].append({
        "output_type": "error", "ename": "NotImplementedError",
        "evalue": "Exercise 1.1: implement f", "traceback": []})
    (tmp_path / "broken.ipynb").write_text(json.dumps(NOTEBOOK))
    (tmp_path / "demonstrated.ipynb").write_text(json.dumps(demonstrated))
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.conftest", "--nbval",
         "--nbval-current-env", "-rA", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
         str(tmp_path)], cwd=REPO, capture_output=True, text=True)
    out = result.stdout + result.stderr
    assert result.returncode == 1 and "Cell execution caused an exception" in out, out
    assert re.search(r"^PASSED .*demonstrated\.ipynb::Cell 0$", out, re.M), out
    assert re.search(r"^FAILED .*broken\.ipynb::Cell 0", out, re.M), out


def raised(source, filename):
    """The exception that source, compiled as filename, raises."""
    try:
        exec(compile(source, filename, "exec"), {})
    except Exception as e:
        return e
    raise AssertionError("it did not raise")


STUB = 'def layer_norm_stats():\n    raise NotImplementedError("Exercise 1.1: implement layer_norm_stats")\nlayer_norm_stats()'
CELL_STUB = "def max_error():\n    raise NotImplementedError()\nmax_error()"


def test_a_stub_says_which_exercise_and_file():
    message = not_yet_implemented(raised(STUB, str(REPO / "normlib" / "layer_norm.py")))
    assert message == ("Exercise 1.1 is not yet implemented: layer_norm_stats in "
                       "normlib/layer_norm.py still raises NotImplementedError. Write it, "
                       "then run this cell again.")


def test_a_your_turn_function_says_where_to_write_it():
    message = not_yet_implemented(raised(CELL_STUB, "/tmp/ipykernel_7/123.py"))
    assert message.startswith("max_error is not yet implemented: write it in its cell above")


@pytest.mark.parametrize("source, filename", [
    (STUB.replace("Exercise 1.1: implement", "not done:"), "normlib/layer_norm.py"),
    (CELL_STUB, "/home/student/normlib/layer_norm.py"),  # bare, but not from a cell
    ("import numpy\nnumpy.ones(2) @ 'x'", "/tmp/ipykernel_7/1.py"),  # another error
])
def test_any_other_error_keeps_its_traceback(source, filename):
    assert not_yet_implemented(raised(source, filename)) is None
