"""Checks that diagnose (normkit/diagnosis.py): each classic mistake, run through its
exercise's visible check, fails with a short message that names its likely cause; a correct
implementation written differently passes; an error without a known signature is not
given a wrong cause; and a failed check reads, in a notebook, as that message and where to
look, not as a NumPy traceback."""

import importlib
import os
import re
import subprocess
import sys

import nbformat
import numpy as np
import pytest
from nbclient import NotebookClient

from normkit.checks import namespace
from normkit.notebook import check_failed
from normkit.testing import CheckFailed, assert_close, stats_mistakes
from tests.conftest import REPO, exercise_param
from tests.variants import FEWER, RIGHT, WRONG
from tests.variants.mistake import Mistake
from tests.variants.wrong_compiled import RACES
from tools.course.exercises import by_number

EXERCISES = by_number()

FEWER_ALLOWED = 3  # mistakes a catalogue holds at least, unless tests/variants.FEWER says why


def visible_check(monkeypatch, number, implementation):
    """Run exercise `number`'s check cell as a student sees it (no hidden tests), with
    implementation in place of the exercise's function."""
    exercise = EXERCISES[number]
    monkeypatch.setattr(importlib.import_module(exercise.module), exercise.name, implementation)
    exec(compile(exercise.visible, f"<check {number}>", "exec"), namespace())


@pytest.mark.parametrize("number", [exercise_param(n) for n in EXERCISES])
def test_every_exercise_has_its_catalogue_of_mistakes(number):
    """At least three classic mistakes, or fewer with the reason (a prediction has few)."""
    mistakes = WRONG.get(number, {})
    assert len(mistakes) >= FEWER_ALLOWED or (mistakes and FEWER.get(number)), \
        f"Exercise {number}: {len(mistakes)} catalogued mistakes (tests/variants)"
    for name, mistake in mistakes.items():
        assert isinstance(mistake, Mistake) and mistake.named, (number, name)


@pytest.mark.parametrize(
    "number,name", [exercise_param(n, name) for n in sorted(WRONG) for name in WRONG[n]])
def test_a_classic_mistake_is_named_by_the_visible_check(monkeypatch, number, name):
    """The visible check fails, with a CheckFailed (one short message in a notebook), that
    names the catalogued cause: as the notebook shows it (with where to look)."""
    with pytest.raises(CheckFailed) as failed:
        visible_check(monkeypatch, number, WRONG[number][name].variant)
    message = check_failed(failed.value)
    assert WRONG[number][name].named in message, message
    assert len(message) < 1200 and len(message.splitlines()) <= 10, message  # short
    assert re.search(r"^  (Likely cause|Where): \S", message, re.M), message
    causes = [line for line in message.splitlines() if "Likely cause:" in line]
    wrongly = [other for other, m in WRONG[number].items() for line in causes
               if other != name and m.named in line and WRONG[number][name].named not in line]
    assert not wrongly, f"{name!r} is given the cause of {wrongly}: {message}"


@pytest.mark.parametrize("number, name", [exercise_param(n, name) for n in RACES
                                           for name in RACES[n]])
def test_a_race_fails_every_run(monkeypatch, number, name):
    """A data race is read from the code (normkit/kernel_code.py), through the functions the
    loop calls, before any case runs: the visible check fails 20 runs out of 20, never only
    the runs whose threads happen to meet."""
    for _ in range(20):
        with pytest.raises(CheckFailed, match="a data race"):
            visible_check(monkeypatch, number, WRONG[number][name].variant)


def test_the_instructors_catalogue_is_generated_from_the_variants(tmp_path):
    """docs/mistakes.md is what `python -m tests.variants --catalogue` writes: one line per
    catalogued mistake, with the cause its check names."""
    written = tmp_path / "mistakes.md"
    subprocess.run([sys.executable, "-m", "tests.variants", "--catalogue", str(written)],
                   cwd=REPO, check=True, capture_output=True)
    assert written.read_text() == (REPO / "docs" / "mistakes.md").read_text(), \
        "docs/mistakes.md is stale: run python -m tests.variants --catalogue"
    lines = [line for line in written.read_text().splitlines() if line.startswith("- ")]
    assert len(lines) == sum(len(m) for m in WRONG.values())


@pytest.mark.parametrize("number", [exercise_param(n) for n in sorted(RIGHT)])
def test_a_correct_variant_passes_the_visible_check(monkeypatch, number):
    for implementation in RIGHT[number].values():
        visible_check(monkeypatch, number, implementation)


@pytest.mark.parametrize("number, name, allowed", [
    ("2.2", "rstd factor missing", "a scale factor is missing"),  # 1/rstd: not sqrt((N-1)/N)
    ("2.2", "weight ignored in dx", "dx ignores the weight"),  # (computed: not a group pattern)
    ("3.4", "channels grouped in the wrong order", "consecutive channels"),  # (computed)
])
def test_no_cause_is_claimed_that_is_not_the_mistake(monkeypatch, number, name, allowed):
    with pytest.raises(CheckFailed) as failed:
        visible_check(monkeypatch, number, WRONG[number][name].variant)
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
FORWARD = '''
def layer_norm_forward(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    mean, rstd = layer_norm_stats(x, normalized_shape, eps)
    y = (x - mean) * rstd
    return y if weight is None else y * weight + (0 if bias is None else bias), mean, rstd
'''
RAISES = '''
def layer_norm_stats(x, normalized_shape, eps=1e-5):
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    mean = x.mean(axis=axes)
    return mean, 1 / np.sqrt(((x - mean) ** 2).mean(axis=axes) + eps)
'''


def test_a_failed_check_in_a_notebook_is_its_message_and_where_to_look(tmp_path):
    """Through a real kernel with the notebooks' setup cell (autoreload, the extension): the
    short message, the student's function and line, the case's line in normkit/checks/, no
    NumPy frame; a dependent exercise's check names the failing one it calls; after an edit
    that moves the function, its new line; an exception of the student's code, its line."""
    from tests.test_notebook import setup_cell

    folder = tmp_path / "normlib"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    path = folder / "layer_norm.py"
    path.write_text("import numpy as np\n" + WRONG_STATS + FORWARD)
    setup = (f"import sys; sys.path.insert(0, {str(REPO / 'solutions')!r})\n"
             "import normlib, normlib.layer_norm\n"
             f"normlib.__path__.insert(0, {str(folder)!r})\n"
             "import importlib; importlib.reload(normlib.layer_norm)\n"
             + setup_cell() + "\nfrom normkit.checks import check")
    notebook = nbformat.v4.new_notebook()
    client = NotebookClient(notebook, kernel_name="python3", allow_errors=True, timeout=120,
                            resources={"metadata": {"path": str(tmp_path)}})
    outputs = []
    with client.setup_kernel():
        for step in [setup, EXERCISES["1.1"].visible, EXERCISES["1.2"].visible, "edit",
                     EXERCISES["1.1"].visible, "raises", EXERCISES["1.1"].visible]:
            if step in ("edit", "raises"):
                mtime = path.stat().st_mtime
                path.write_text("import numpy as np\n\n\n# two lines added above\n" +
                                (WRONG_STATS if step == "edit" else RAISES) + FORWARD)
                os.utime(path, (mtime + 2, mtime + 2))  # (newer, whatever the clock's step)
                continue
            notebook.cells.append(nbformat.v4.new_code_cell(step))
            client.execute_cell(notebook.cells[-1], len(notebook.cells) - 1)
            outputs.append(notebook.cells[-1].outputs)
    assert outputs[0] == [], outputs[0]
    (error,) = outputs[1]
    text = "\n".join(error["traceback"])
    assert error["ename"] == "CheckFailed"
    assert "Likely cause: the unbiased variance: dividing by N - 1 = 3" in text, text
    assert "Exercise 1.1: your layer_norm_stats is in normlib/layer_norm.py, line 3." in text
    assert re.search(r"The case is normkit/checks/unit1\.py, line \d+: check_stats\(X, \(4,\)\)",
                     text), text
    assert "site-packages" not in text and "Traceback" not in text and len(text) < 800, text
    (error,) = outputs[2]  # 1.2, whose layer_norm_forward calls the failing 1.1
    text = "\n".join(error["traceback"])
    assert ("Your layer_norm_forward calls layer_norm_stats (Exercise 1.1), which fails its "
            "check too: fix that first, then this check again.") in text, text
    (error,) = outputs[3]  # the same mistake, three lines further down the file
    assert "your layer_norm_stats is in normlib/layer_norm.py, line 6." in \
        "\n".join(error["traceback"])
    (error,) = outputs[4]  # an exception in the student's code: its line, one message
    text = "\n".join(error["traceback"])
    assert error["ename"] == "CheckFailed" and "Traceback" not in text, text
    assert ("your code raised ValueError: operands could not be broadcast together" in text
            and "at normlib/layer_norm.py, line 9: return mean, 1 / np.sqrt(((x - mean) ** 2)"
            in text and "Likely cause: two arrays' shapes do not line up" in text), text


def test_check_failed_outside_a_check_cell_is_the_message_alone():
    error = CheckFailed("rstd: 1 of 2 values are wrong.")
    assert check_failed(error) == "rstd: 1 of 2 values are wrong."



E = np.random.default_rng(0).standard_normal((8, 6))  # an exact result of no special form
NOISE = np.random.default_rng(1).standard_normal((8, 6))  # an error of no special form


def tail_zeroed(e):
    a = e.copy()
    a[6:] = 0
    return a


def one_column_doubled(e):
    a = e.copy()
    a[:, 3] *= 2
    return a


def even_rows_shifted(e):
    a = e.copy()
    a[::2] += 1
    return a


def two_values_off(e):
    a = e.copy()
    a[1, 2], a[5, 4] = a[1, 2] + 1, a[5, 4] - 2
    return a


def one_nan(e):
    a = e.copy()
    a[2, 3] = np.nan
    return a


@pytest.mark.parametrize("wrong, where", [
    (tail_zeroed, "12 of 48 values: every value at axis 0's indices 6, 7 of 0..7 (the last "
                  "2); there, got is 0"),
    (one_column_doubled, "8 of 48 values: every value at axis 1's index 3 of 0..5; there, "
                         "every value is 2 times the exact one"),
    (even_rows_shifted, "every value at axis 0's indices 0, 2, 4, 6 of 0..7 (every 2nd); "
                        "there, got - expected is the same, 1,"),
    (two_values_off, "2 of 48 values, all at axis 0's indices 1, 5 of 0..7 and axis 1's "
                     "indices 2, 4 of 0..5; the error is up to"),
    (one_nan, "NaN at 1 of them, where the exact value is finite"),
    (lambda e: np.maximum(e, 0), "wrong exactly where the exact value is negative, and 0 there"),
    (lambda e: np.abs(e), "wrong exactly where the exact value is negative, whose sign is "
                          "flipped"),
    (lambda e: np.flip(e, 0), "got is the exact result reversed along axis 0"),
    (lambda e: np.roll(e, 1, axis=1), "along axis 1, got is the exact result shifted one index "
                                      "later"),
    (lambda e: e + 0.5, "all 48 values; there, got - expected is the same, 0.5,"),
    (lambda e: e.astype(np.float32).astype(np.float64), "float32's precision"),
    (lambda e: e + NOISE, "all 48 values; the error is up to"),
])
def test_an_uncatalogued_error_is_located_and_its_pattern_named(wrong, where):
    """Where no catalogued cause matches, the message says which values are wrong and the
    difference's pattern, tested exactly on the difference."""
    with pytest.raises(CheckFailed) as failed:
        assert_close(wrong(E), E, "dx")
    (line,) = [line for line in str(failed.value).splitlines() if "Where:" in line]
    assert where in line, line
    assert "Likely cause" not in str(failed.value)


def test_a_transpose_is_named_where_the_shape_cannot_tell():
    square = np.random.default_rng(2).standard_normal((5, 5))
    with pytest.raises(CheckFailed, match="with axes 0 and 1 swapped"):
        assert_close(square.T.copy(), square, "dweight")


@pytest.mark.parametrize("seed", range(20))
def test_no_pattern_is_claimed_that_the_difference_does_not_have(seed):
    """A random error in random places gets its place and size, never a clamp, a sign, a
    factor, a shift or moved values (each pattern fires only where it holds exactly); a
    float32 result's small error is not called float32's precision."""
    rng = np.random.default_rng(seed)
    e = rng.standard_normal((6, 5))
    a = e + np.where(rng.random(e.shape) < 0.5, rng.standard_normal(e.shape), 0)
    with pytest.raises(CheckFailed) as failed:
        assert_close(a, e, "y")
    line = str(failed.value).splitlines()[-1]
    assert line.startswith("  Where: ") and "the error is up to" in line, line
    small = (e * (1 + 1e-3 * rng.standard_normal(e.shape))).astype(np.float32)
    with pytest.raises(CheckFailed) as failed:
        assert_close(small, e.astype(np.float32), "y")
    assert "small: the largest error" in str(failed.value)
    assert "float32's precision" not in str(failed.value)


def test_a_power_or_float32_is_named_only_where_it_holds_exactly():
    """A constant near the square root of values near 2 is no square root (the exact values
    must spread over a factor of 2); a float64 error of float32's size whose values are no
    float32 numbers (an eps misplaced) is not called float32's precision."""
    e = 2 + 0.02 * np.random.default_rng(3).standard_normal(6)
    with pytest.raises(CheckFailed) as failed:
        assert_close(np.full(6, 1.41), e, "gain")
    assert "square root" not in str(failed.value)
    var = np.random.default_rng(4).random(6) + 0.5
    exact, eps_outside = 1 / np.sqrt(var + 1e-5), 1 / (np.sqrt(var) + 1e-5)
    with pytest.raises(CheckFailed) as failed:
        assert_close(eps_outside, exact, "rstd")
    assert "float32's precision" not in str(failed.value) and "small:" in str(failed.value)


def test_a_wrong_shape_or_dtype_without_a_known_cause_says_where():
    with pytest.raises(CheckFailed, match="Where: axis 1's size differs, the others match"):
        assert_close(np.ones((3, 5)), np.ones((3, 4)), "y")
    with pytest.raises(CheckFailed, match="Where: the result has 3 dimensions, where 2"):
        assert_close(np.ones((3, 5, 7)), np.ones((3, 4)), "y")
    with pytest.raises(CheckFailed, match="Likely cause: a float64 input gives a float64 "
                                          "result: a step computes in, or casts to, float32"):
        assert_close(np.ones(3, np.float32), np.ones(3), "y")
