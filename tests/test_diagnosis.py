"""Checks that diagnose (normkit/diagnosis.py): each classic mistake, run through its
exercise's visible check, fails with a short message that names its likely cause; a correct
implementation written differently passes; an error without a known signature is not
given a wrong cause; and a failed check reads, in a notebook, as that message and where to
look, not as a NumPy traceback."""

import importlib
import re

import nbformat
import numpy as np
import pytest
from nbclient import NotebookClient

from normkit.checks import namespace
from normkit.notebook import check_failed
from normkit.testing import CheckFailed, assert_close, stats_mistakes
from tests.conftest import REPO
from tests.variants import RIGHT, WRONG
from tools.exercises import by_number

EXERCISES = by_number()

# (exercise, the wrong variant's name in tests/variants, what its message must say)
DIAGNOSED = [
    ("1.1", "unbiased variance", "Likely cause: the unbiased variance: dividing by N - 1 = 3"),
    ("1.1", "eps added to the std", "Likely cause: eps is added to the std"),
    ("1.1", "std instead of rstd", "Likely cause: this is the std, not its reciprocal"),
    ("1.1", "no keepdims", "expected shape (2, 3, 1), got (2, 3).\n  Likely cause: the "
     "reduced axes were dropped: keep them as size 1 (keepdims=True)"),
    ("1.1", "float64 result for float32 input", "Likely cause: a float32 input gives a "
     "float32 result"),
    ("2.1", "dvar with the wrong sign", "Likely cause: every value has the wrong sign"),
    ("2.2", "missing mean term", "Likely cause: the mean's term is missing"),
    ("2.2", "missing variance term", "Likely cause: the variance's term is missing"),
    ("3.1", "unbiased variance", "Likely cause: the unbiased variance: dividing by N - 1 = 19"),
    ("3.1", "eps added to the std", "Likely cause: eps is added to the std"),
    ("3.2", "missing mean term", "Likely cause: the mean's term is missing"),
    ("3.2", "missing variance term", "Likely cause: the variance's term is missing"),
    ("3.6", "subtracts the mean", "Likely cause: the mean is subtracted: RMSNorm does not "
     "centre"),
    ("3.7", "LayerNorm's mean term kept", "Likely cause: the error is the same for every "
     "element"),
    ("3.8", "missing mean term", "Likely cause: the mean's term is missing"),
    ("3.8", "missing variance term", "Likely cause: the variance's term is missing"),
]


def visible_check(monkeypatch, number, implementation):
    """Run exercise `number`'s check cell as a student sees it (no hidden tests), with
    implementation in place of the exercise's function."""
    exercise = EXERCISES[number]
    monkeypatch.setattr(importlib.import_module(exercise.module), exercise.name, implementation)
    exec(compile(exercise.visible, f"<check {number}>", "exec"), namespace())


@pytest.mark.parametrize("number, name, cause", DIAGNOSED,
                         ids=[f"{n} {m}" for n, m, _ in DIAGNOSED])
def test_a_classic_mistake_is_named_by_the_visible_check(monkeypatch, number, name, cause):
    with pytest.raises(CheckFailed) as failed:
        visible_check(monkeypatch, number, WRONG[number][name])
    message = str(failed.value)
    assert cause in message, message
    assert re.search(r"\d+ of \d+ values are wrong\.\n  Worst at index \(.*\): expected \S+, "
                     r"got \S+ \(tolerance \S+\)\.", message) or "expected shape" in message \
        or "expected dtype" in message, message
    assert len(message.splitlines()) <= 3, message  # short: no dump of the arrays


@pytest.mark.parametrize("number", sorted({n for n, _, _ in DIAGNOSED}))
def test_a_correct_variant_passes_the_diagnosing_check(monkeypatch, number):
    for implementation in RIGHT[number].values():
        visible_check(monkeypatch, number, implementation)


@pytest.mark.parametrize("number, name, allowed", [
    ("2.2", "rstd factor missing", "a scale factor is missing"),  # 1/rstd: not sqrt((N-1)/N)
    ("2.2", "weight ignored in dx", None),  # (its error sums to 0 over a group, as any does)
    ("3.4", "channels grouped in the wrong order", None),
])
def test_no_cause_is_claimed_that_is_not_the_mistake(monkeypatch, number, name, allowed):
    with pytest.raises(CheckFailed) as failed:
        visible_check(monkeypatch, number, WRONG[number][name])
    causes = [line for line in str(failed.value).splitlines() if "Likely cause" in line]
    assert causes == [] if allowed is None else (len(causes) == 1 and allowed in causes[0]), \
        causes


def test_a_one_value_result_and_an_extra_axis_are_told_apart():
    with pytest.raises(CheckFailed, match=r"expected 2, got 3 \(tolerance"):
        assert_close(np.array(3.0), np.array(2.0), "gain")  # 0-d arrays
    with pytest.raises(CheckFailed, match="keeps size-1 axes that it should not have"):
        assert_close(np.ones((3, 1)), np.ones(3), "mean")
    with pytest.raises(CheckFailed, match="keepdims=True"):
        assert_close(np.ones(3), np.ones((3, 1)), "mean")


def test_the_unbiased_signature_is_the_group_size_of_the_case():
    """sqrt((N-1)/N) is checked against the group's own N: the same rstd from groups of 5
    is not called unbiased for groups of 4."""
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    n4 = stats_mistakes(x, (1,))["rstd"]
    exact = 1 / np.sqrt(x.astype(np.float64).var(axis=1, keepdims=True) + 1e-5)
    unbiased = 1 / np.sqrt(x.astype(np.float64).var(axis=1, keepdims=True, ddof=1) + 1e-5)
    with pytest.raises(CheckFailed, match="N - 1 = 3"):
        assert_close(unbiased.astype(np.float32), exact.astype(np.float32), "rstd", mistakes=n4)
    five = np.sqrt(4 / 5) * exact
    with pytest.raises(CheckFailed) as failed:
        assert_close(five.astype(np.float32), exact.astype(np.float32), "rstd", mistakes=n4)
    assert "unbiased" not in str(failed.value) and "0.894427 times" in str(failed.value)


def test_nan_where_the_exact_value_is_finite_suggests_a_division_by_zero():
    with pytest.raises(CheckFailed, match="a division by zero"):
        assert_close(np.array([np.nan, 1.0]), np.array([2.0, 1.0]), "rstd")


WRONG_STATS = '''
def layer_norm_stats(x, normalized_shape, eps=1e-5):
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    var = x.var(axis=axes, keepdims=True, ddof=1)
    return x.mean(axis=axes, keepdims=True), 1 / np.sqrt(var + eps)
'''


def test_a_failed_check_in_a_notebook_is_its_message_and_where_to_look(tmp_path):
    """Through a real kernel with the notebooks' extension: the short message, the student's
    function and line, the case's line in normkit/checks/, and no NumPy frame."""
    folder = tmp_path / "normlib"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    (folder / "layer_norm.py").write_text("import numpy as np\n\n" + WRONG_STATS)
    setup = (f"import sys; sys.path.insert(0, {str(REPO / 'solutions')!r})\n"
             "import normlib, normlib.layer_norm\n"
             f"normlib.__path__.insert(0, {str(folder)!r})\n"
             "import importlib; importlib.reload(normlib.layer_norm)\n"
             "%load_ext normkit.notebook\n"
             "from normkit.checks import check")
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(setup),
                      nbformat.v4.new_code_cell(EXERCISES["1.1"].visible)]
    NotebookClient(notebook, kernel_name="python3", allow_errors=True, timeout=120,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    assert notebook.cells[0].outputs == [], notebook.cells[0].outputs
    (error,) = notebook.cells[1].outputs
    text = "\n".join(error["traceback"])
    assert error["ename"] == "CheckFailed"
    assert "Likely cause: the unbiased variance: dividing by N - 1 = 3" in text, text
    assert "Exercise 1.1: your layer_norm_stats is in normlib/layer_norm.py, line 4." in text
    assert re.search(r"The case is normkit/checks/unit1\.py, line \d+: check_stats\(X, \(4,\)\)",
                     text), text
    assert "site-packages" not in text and "Traceback" not in text and len(text) < 800, text


def test_check_failed_outside_a_check_cell_is_the_message_alone():
    error = CheckFailed("rstd: 1 of 2 values are wrong.")
    assert check_failed(error) == "rstd: 1 of 2 values are wrong."

