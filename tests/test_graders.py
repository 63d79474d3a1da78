"""Every graded check (visible and hidden tests of the solution notebooks' graded cells)
fails on realistic wrong implementations and passes on correct ones written differently.

Each check cell is run as nbgrader runs it, with the exercise's function or class
replaced by a variant from tests/variants. Correct variants must pass with the
tolerances of normkit.testing cut to a tenth; wrong ones must fail even with them
multiplied by ten, so neither verdict hangs on a tolerance.
"""

import importlib

import numpy as np
import pytest

import normkit.testing
from normkit.checks import namespace
from tests.conftest import exercise_param
from tests.variants import RIGHT, WRONG
from tools.course.exercises import by_number

EXERCISES = by_number()  # {number: Exercise}: its check cell, the function a variant replaces
# (correct, wrong) tolerance factors: correct variants pass at a tenth of the checks'
# tolerances, mistakes fail at ten times them. 16 bits cannot give that margin: the best
# possible result is already half a unit in the last place from the exact one, and the checks
# allow 2; so correct variants pass at 1 unit and mistakes fail at 4 (most fail at any
# tolerance: an overflow to inf, a wrong dtype, the wrong eps).
SCALES = {"6.3": (0.5, 2.0), "6.4": (0.5, 2.0), "6.5": (0.5, 2.0)}


def scales(number):
    """(correct, wrong) tolerance factors of exercise `number`'s check."""
    return SCALES.get(number, (0.1, 10.0))


def run_check(monkeypatch, number, implementation=None, tolerance_scale=1.0, hidden_only=False):
    """Run exercise `number`'s graded cell, hidden tests included (hidden_only: those alone,
    without the visible check("N.M"))."""
    exercise = EXERCISES[number]
    if implementation is not None:
        monkeypatch.setattr(importlib.import_module(exercise.module), exercise.name,
                            implementation)
    original = normkit.testing.assert_close
    checks = importlib.import_module(f"normkit.checks.unit{exercise.unit}")

    def scaled_assert_close(actual, expected, name, rtol=None, atol=None, **kwargs):
        tol = dict(normkit.testing.TOLERANCES.get(getattr(expected, "dtype", None), {}))
        tol.update({k: v for k, v in (("rtol", rtol), ("atol", atol)) if v is not None})
        tol = {k: v * tolerance_scale for k, v in tol.items()}
        original(actual, expected, name, **tol, **kwargs)

    monkeypatch.setattr(normkit.testing, "assert_close", scaled_assert_close)
    if hasattr(checks, "assert_close"):  # (imported by name there)
        monkeypatch.setattr(checks, "assert_close", scaled_assert_close)
    source = exercise.hidden if hidden_only else exercise.source
    exec(compile(source, f"<check {number}>", "exec"), namespace())


@pytest.mark.parametrize("number", [exercise_param(n) for n in EXERCISES])
def test_every_exercise_has_hidden_tests_and_variants_of_both_kinds(number):
    assert EXERCISES[number].hidden.strip(), "no hidden tests"
    assert WRONG.get(number) and RIGHT.get(number), "tests/variants has no wrong or right one"


def test_every_variant_is_of_an_exercise():
    assert set(RIGHT) | set(WRONG) <= set(EXERCISES)


@pytest.mark.parametrize("number", [exercise_param(n) for n in EXERCISES])
def test_reference_passes(monkeypatch, number):
    run_check(monkeypatch, number, tolerance_scale=scales(number)[0])


@pytest.mark.parametrize(
    "number,name", [exercise_param(n, name) for n in sorted(RIGHT) for name in RIGHT[n]]
)
def test_correct_variant_passes(monkeypatch, number, name):
    run_check(monkeypatch, number, RIGHT[number][name],
              tolerance_scale=scales(number)[0])


@pytest.mark.parametrize(
    "number,name", [exercise_param(n, name) for n in sorted(WRONG) for name in WRONG[n]]
)
def test_mistake_is_caught(monkeypatch, number, name):
    with pytest.raises(Exception) as caught:
        run_check(monkeypatch, number, WRONG[number][name].variant,
                  tolerance_scale=scales(number)[1])
    # a failure of the check itself, not of the variant's own code
    assert not isinstance(caught.value, (NameError, ImportError, SyntaxError, NotImplementedError))


# Exercise 8.5 (issue 59): its hidden tests alone fail every catalogued mistake, and pass
# every correct variant, as well as the visible check does
@pytest.mark.parametrize("name", sorted(WRONG["8.5"]))
def test_the_hidden_tests_alone_fail_each_mistake_of_8_5(monkeypatch, name):
    with pytest.raises(Exception) as caught:
        run_check(monkeypatch, "8.5", WRONG["8.5"][name].variant, scales("8.5")[1],
                  hidden_only=True)
    assert not isinstance(caught.value, (NameError, ImportError, SyntaxError, NotImplementedError))


@pytest.mark.parametrize("name", sorted(RIGHT["8.5"]))
def test_the_hidden_tests_alone_pass_each_correct_variant_of_8_5(monkeypatch, name):
    run_check(monkeypatch, "8.5", RIGHT["8.5"][name], scales("8.5")[0], hidden_only=True)


def test_the_mistakes_named_by_the_course_are_covered():
    named = {
        "1.1": ["unbiased variance", "eps added to the std", "last axis only", "no keepdims"],
        "1.2": ["no affine", "bias added before scaling", "affine before normalizing",
                "one-pass variance E[x^2]-E[x]^2"],
        "2.1": ["dxc without the path through the variance",
                "dx without the path through the mean", "dvar with the wrong sign"],
        "2.2": ["missing mean term", "missing variance term", "dweight from x, not x_hat",
                "dweight/dbias summed over axis 0 only"],
        "2.3": ["missing the mean term (11^T / N)",
                "missing the variance term (x_hat x_hat^T / N)"],
        "2.4": ["zero for all three (.sum() shows nothing)", "the two bugs swapped"],
        "3.2": ["missing mean term", "missing variance term"],
        "3.3": ["normalizes with the unbiased variance",
                "running_var updated with the biased variance",
                "running stats not updated in place", "eval mode uses batch statistics"],
        "3.4": ["channels grouped in the wrong order"],
        "3.5": ["batch axis included"],
        "3.6": ["subtracts the mean", "adds a bias"],
        "3.7": ["LayerNorm's mean term kept", "missing the x_hat term"],
        "5.1": ["norm in the wrong place", "residual added after the norm in Pre-LN"],
        "5.2": ["norm over the wrong axis"],
        "5.3": ["missing final norm in a Pre-LN stack", "one norm module shared across layers"],
        "3.8": ["evaluation mode with the batch terms", "missing mean term"],
        "5.4": ["1 / RMS without centring", "rstd squared"],
        "5.5": ["gradients accumulate over calls (no zero_grad)", "summed loss, not mean"],
        "6.1": ["one-pass shortcut"],
        "6.2": ["unweighted mean", "missing between-group term", "n squared in the denominator",
                "one-pass merge through sums of squares"],
        "6.3": ["computed in the 16-bit dtype", "no cast back"],
        "6.4": ["computed in the 16-bit dtype", "no cast back"],
        "7.1": ["the naive kernel"],
        "7.2": ["the naive kernel"],
    }
    for number, names in named.items():
        assert set(names) <= set(WRONG[number])


def test_assert_close_checks_type_shape_dtype_and_values():
    x = np.ones((2, 1))
    normkit.testing.assert_close(x * (1 + 1e-10), x, "within the float64 tolerance")
    for actual, message in [
        (x * (1 + 1e-7), "2 of 2 values are wrong"),
        (np.ones(2), "expected shape"),  # a broadcastable shape is still wrong
        (x.astype(np.float32), "expected dtype"),
        (x.tolist(), "expected a numpy.ndarray"),
    ]:
        with pytest.raises(AssertionError, match=message):
            normkit.testing.assert_close(actual, x, "case")
