"""The student-edition check (`python -m tools.maintainer.edition --check`) cannot pass a leak or a
hand edit: each is injected into a copy of the committed edition and must be reported."""

import json
import shutil

import pytest

from tests.conftest import REPO
from tools.course.leaks import leaks, secret_lines
from tools.course.markers import BEGIN_HIDDEN
from tools.maintainer.edition import differences, problems

RSTD = "    rstd = 1.0 / np.sqrt(var + eps)  # (*B, 1..1)"  # a line of the reference solution


HIDDEN = "check_stats(X.astype(dtype), (2, 3, 4))  # the whole tensor is one group"  # 1.1's


@pytest.fixture
def edition(tmp_path):
    for folder in ("notebooks", "normlib", "normkit"):
        shutil.copytree(REPO / folder, tmp_path / folder,
                        ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
    return tmp_path


def test_the_committed_edition_is_what_solutions_generate():
    """`make test`'s check of the edition (what `python -m tools.maintainer.edition --check` prints):
    regenerated from solutions/, it equals the committed one, and neither leaks. (A test,
    not a step before pytest, so that it runs beside the grading round trip.)"""
    assert problems() == []


def test_solution_lines_are_secret_and_shared_lines_are_not():
    secret = secret_lines()
    assert RSTD.strip() in secret  # from normlib/layer_norm.py
    assert "check_stats(X.astype(dtype), (2, 3, 4))  # the whole tensor is one group" in secret
    assert "import numpy as np" not in secret  # also outside the blocks: no false alarm
    # a provided helper's line (normlib/_channels.py) that a solution block holds too
    assert "if weight is not None:" not in secret


def test_a_hidden_case_in_the_course_package_is_reported(edition):
    """normkit/ is released as it is (nbgrader copies .py files verbatim): a hidden test's
    line there is a leak, however public the rest of the file is."""
    path = edition / "normkit" / "checks" / "unit1.py"
    assert not leaks(edition, ("normkit",))
    path.write_text(path.read_text() + f"\n\ndef more():\n    {HIDDEN}\n")
    assert leaks(edition, ("normkit",)) == [
        f"normkit/checks/unit1.py: solution line {HIDDEN!r}"]


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
        "check_stats(X.astype(dtype), (2, 3, 4))  # the whole tensor is one group\n"
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
