"""Every graded check (visible and hidden tests of the solution notebooks' graded cells)
fails on realistic wrong implementations and passes on correct ones written differently.

Each check cell is run as nbgrader runs it, with the exercise's function or class
replaced by a variant from tests/variants. Correct variants must pass with the
tolerances of normlib.testing cut to a tenth; wrong ones must fail even with them
multiplied by ten, so neither verdict hangs on a tolerance.
"""

import importlib

import numpy as np
import pytest

import normlib.testing
from tests.conftest import REPO
from tests.variants import (
    right,
    right_family,
    right_numerics,
    right_transformer,
    wrong,
    wrong_family,
    wrong_numerics,
    wrong_transformer,
)
from tools.check import exercises
from tools.markers import split_check

CELLS = {number: source for number, _, source in exercises(REPO / "solutions")}
RIGHT = {**right.RIGHT, **right_family.RIGHT, **right_transformer.RIGHT, **right_numerics.RIGHT}
WRONG = {**wrong.WRONG, **wrong_family.WRONG, **wrong_transformer.WRONG, **wrong_numerics.WRONG}
TARGETS = {  # what each exercise implements
    "1.1": ("normlib.layer_norm", "layer_norm_stats"),
    "1.2": ("normlib.layer_norm", "layer_norm_forward"),
    "2.1": ("normlib.layer_norm", "layer_norm_backward"),
    "2.2": ("normlib.nn", "LayerNormFunction"),
    "3.1": ("normlib.norm", "normalize_forward"),
    "3.2": ("normlib.norm", "normalize_backward"),
    "3.3": ("normlib.batch_norm", "batch_norm_forward"),
    "3.4": ("normlib.group_norm", "group_norm_forward"),
    "3.5": ("normlib.instance_norm", "instance_norm_forward"),
    "3.6": ("normlib.rms_norm", "rms_norm_forward"),
    "3.7": ("normlib.rms_norm", "rms_norm_backward"),
    "4.1": ("normlib.transformer", "add_norm"),
    "4.2": ("normlib.transformer", "TransformerEncoderLayer"),
    "4.3": ("normlib.transformer", "TransformerEncoder"),
    "5.1": ("normlib.variance", "welford"),
    "5.2": ("normlib.variance", "welford_merge"),
    "5.3": ("normlib.mixed_precision", "layer_norm_mixed"),
    "5.4": ("normlib.mixed_precision", "rms_norm_mixed"),
    "5.5": ("normlib.layer_norm_fast", "layer_norm_forward_fast"),
    "5.6": ("normlib.layer_norm_fast", "layer_norm_backward_fast"),
}
# (correct, wrong) tolerance factors: correct variants pass at a tenth of the checks'
# tolerances, mistakes fail at ten times them. 16 bits cannot give that margin: the best
# possible result is already half a unit in the last place from the exact one, and the checks
# allow 2; so correct variants pass at 1 unit and mistakes fail at 4 (most fail at any
# tolerance: an overflow to inf, a wrong dtype, the wrong eps).
SCALES = {"5.3": (0.5, 2.0), "5.4": (0.5, 2.0)}


def scales(number):
    """(correct, wrong) tolerance factors of exercise `number`'s check."""
    return SCALES.get(number, (0.1, 10.0))


def run_check(monkeypatch, number, implementation=None, tolerance_scale=1.0):
    """Run exercise `number`'s graded cell, hidden tests included."""
    if implementation is not None:
        module, name = TARGETS[number]
        monkeypatch.setattr(importlib.import_module(module), name, implementation)
    original = normlib.testing.assert_close

    def scaled_assert_close(actual, expected, name, rtol=None, atol=None):
        tol = dict(normlib.testing.TOLERANCES.get(getattr(expected, "dtype", None), {}))
        tol.update({k: v for k, v in (("rtol", rtol), ("atol", atol)) if v is not None})
        tol = {k: v * tolerance_scale for k, v in tol.items()}
        original(actual, expected, name, **tol)

    monkeypatch.setattr(normlib.testing, "assert_close", scaled_assert_close)
    exec(compile(CELLS[number], f"<check {number}>", "exec"), {"__name__": "__check__"})


def test_every_exercise_has_a_check_with_hidden_tests():
    assert sorted(CELLS) == sorted(TARGETS)
    for source in CELLS.values():
        assert split_check(source)[1].strip(), "no hidden tests"


@pytest.mark.parametrize("number", sorted(TARGETS))
def test_reference_passes(monkeypatch, number):
    run_check(monkeypatch, number, tolerance_scale=scales(number)[0])


@pytest.mark.parametrize(
    "number,name", [(n, name) for n in sorted(RIGHT) for name in RIGHT[n]]
)
def test_correct_variant_passes(monkeypatch, number, name):
    run_check(monkeypatch, number, RIGHT[number][name],
              tolerance_scale=scales(number)[0])


@pytest.mark.parametrize(
    "number,name", [(n, name) for n in sorted(WRONG) for name in WRONG[n]]
)
def test_mistake_is_caught(monkeypatch, number, name):
    with pytest.raises(Exception) as caught:
        run_check(monkeypatch, number, WRONG[number][name],
                  tolerance_scale=scales(number)[1])
    # a failure of the check itself, not of the variant's own code
    assert not isinstance(caught.value, (NameError, ImportError, SyntaxError, NotImplementedError))


def test_the_mistakes_named_by_the_course_are_covered():
    named = {
        "1.1": ["unbiased variance", "eps added to the std", "last axis only", "no keepdims"],
        "1.2": ["no affine", "bias added before scaling", "affine before normalizing",
                "one-pass variance E[x^2]-E[x]^2"],
        "2.1": ["missing mean term", "missing variance term", "dweight from x, not x_hat",
                "dweight/dbias summed over axis 0 only"],
        "3.2": ["missing mean term", "missing variance term"],
        "3.3": ["normalizes with the unbiased variance",
                "running_var updated with the biased variance",
                "running stats not updated in place", "eval mode uses batch statistics"],
        "3.4": ["channels grouped in the wrong order"],
        "3.5": ["batch axis included"],
        "3.6": ["subtracts the mean", "adds a bias"],
        "3.7": ["LayerNorm's mean term kept", "missing the x_hat term"],
        "4.1": ["norm in the wrong place", "residual added after the norm in Pre-LN"],
        "4.2": ["norm over the wrong axis"],
        "4.3": ["missing final norm in a Pre-LN stack", "one norm module shared across layers"],
        "5.1": ["one-pass shortcut"],
        "5.2": ["unweighted mean", "missing between-group term", "n squared in the denominator",
                "one-pass merge through sums of squares"],
        "5.3": ["computed in the 16-bit dtype", "no cast back"],
        "5.4": ["computed in the 16-bit dtype", "no cast back"],
        "5.5": ["the naive kernel"],
        "5.6": ["the naive kernel"],
    }
    for number, names in named.items():
        assert set(names) <= set(WRONG[number])


def test_assert_close_checks_type_shape_dtype_and_values():
    x = np.ones((2, 1))
    normlib.testing.assert_close(x * (1 + 1e-10), x, "within the float64 tolerance")
    for actual, message in [
        (x * (1 + 1e-7), "Not equal to tolerance"),
        (np.ones(2), "expected shape"),  # a broadcastable shape is still wrong
        (x.astype(np.float32), "expected dtype"),
        (x.tolist(), "expected a numpy.ndarray"),
    ]:
        with pytest.raises(AssertionError, match=message):
            normlib.testing.assert_close(actual, x, "case")
