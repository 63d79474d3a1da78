"""The student-edition check (`python -m tools.student --check`) cannot pass a leak or a
hand edit: each is injected into a copy of the committed edition and must be reported."""

import json
import shutil

import pytest

from tests.conftest import REPO
from tools.markers import BEGIN_HIDDEN
from tools.student import differences, leaks, problems, secret_lines

RSTD = "    rstd = 1.0 / np.sqrt(var + eps)  # (*B, 1..1)"  # a line of the reference solution


@pytest.fixture
def edition(tmp_path):
    for folder in ("notebooks", "normlib"):
        shutil.copytree(REPO / folder, tmp_path / folder,
                        ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
    return tmp_path


def test_the_committed_edition_is_what_solutions_generate():
    """`make test`'s check of the edition (what `python -m tools.student --check` prints):
    regenerated from solutions/, it equals the committed one, and neither leaks. (A test,
    not a step before pytest, so that it runs beside the grading round trip.)"""
    assert problems() == []


def test_solution_lines_are_secret_and_shared_lines_are_not():
    secret = secret_lines()
    assert RSTD.strip() in secret  # from normlib/layer_norm.py
    assert "check_stats(x.astype(dtype), (2, 3, 4))  # the whole tensor is one group" in secret
    assert "import numpy as np" not in secret  # also outside the blocks: no false alarm


def test_a_leaked_solution_line_is_reported(edition):
    path = edition / "normlib" / "layer_norm.py"
    path.write_text(path.read_text() + RSTD + "\n")
    assert any("solution line" in p and "layer_norm.py" in p for p in leaks(edition))
    assert any("differs" in p and "layer_norm.py" in p for p in differences(edition, REPO))


def test_a_marker_and_a_hidden_test_line_in_a_notebook_are_reported(edition):
    path = next((edition / "notebooks").glob("01_*.ipynb"))
    notebook = json.loads(path.read_text())
    notebook["cells"][-1]["source"] += (
        f"\n{BEGIN_HIDDEN}\n"
        "check_stats(x.astype(dtype), (2, 3, 4))  # the whole tensor is one group\n"
    )
    path.write_text(json.dumps(notebook))
    problems = leaks(edition)
    assert any("marker" in p for p in problems) and any("solution line" in p for p in problems)


def test_stored_outputs_are_reported(edition):
    path = next((edition / "notebooks").glob("02_*.ipynb"))
    notebook = json.loads(path.read_text())
    code = next(c for c in notebook["cells"] if c["cell_type"] == "code")
    code["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "1.0\n"}]
    path.write_text(json.dumps(notebook))
    assert any("stored outputs" in p for p in leaks(edition))
