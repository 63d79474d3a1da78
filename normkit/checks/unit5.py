"""Unit 5's checks: Exercises 5.1 (welford), 5.2 (welford_merge), 5.3 (layer_norm_mixed),
5.4 (rms_norm_mixed), 5.5 (layer_norm_forward_fast) and 5.6 (layer_norm_backward_fast).

Each check function compares your result with the exact one (computed in float64, rounded
to x's dtype), in value, shape and dtype, within the error model's tolerances
(normkit.testing); the 16-bit ones (5.3, 5.4, normkit.testing.check_mixed) within 2 eps of
their dtype; the fast kernels' (5.5, 5.6) also measure the memory your kernel allocates for
an x of 8 MiB or more (normkit.testing.peak_memory). Your function is imported when a check
runs, so it is always your file as it is now.
"""

import math

import numpy as np
import torch

from normkit.checks import exercise
from normkit.testing import (
    MEASURED,
    assert_close,
    check_mixed,
    exact_welford_state,
    guard_inputs,
    layer_norm_backward_tolerances,
    layer_norm_tolerances,
    no_measure,
    norm_tolerance,
    peak_memory,
    tolerance,
    torch_layer_norm,
    torch_layer_norm_backward,
)
from normkit.testing import randn_tensor as randn


def check_welford(x):
    """Your state against the exact one, in value, shape and dtype, within the error
    model's tolerances (normkit.testing): the mean's from the row length; m2's also from
    the condition of x (offset / spread: each x - mean rounds by eps * offset)."""
    from normlib.variance import welford

    count, mean, m2 = exact_welford_state(x)
    result = welford(x)
    assert isinstance(result, tuple) and len(result) == 3, "return (count, mean, m2)"
    case = f"for x {x.shape} {x.dtype}"
    assert result[0] == count and isinstance(result[0], int), \
        f"count {case}: expected the int {count}, got {result[0]!r}"
    assert_close(result[1], mean, f"mean {case}", **tolerance(x.dtype, count))
    assert_close(result[2], m2, f"m2 {case}", **norm_tolerance(x, (-1,), spread=True))


@exercise("5.1", "variance.welford")
def visible_5_1():
    rng = np.random.default_rng(0)
    check_welford(rng.standard_normal((3, 8)))
    check_welford((1e3 + rng.standard_normal((4, 256))).astype(np.float32))


def check_merge(x, split):
    """Merging the exact states of x[..., :split] and x[..., split:] gives x's exact state,
    in value, shape and dtype, within the error model's tolerances for a few operations
    (normkit.testing): m2's also from the condition of x (offset / spread)."""
    from normlib.variance import welford_merge

    count, mean, m2 = exact_welford_state(x)
    empty = (0, np.zeros_like(mean), np.zeros_like(m2))  # a part with no element
    a = exact_welford_state(x[..., :split]) if split > 0 else empty
    b = exact_welford_state(x[..., split:]) if split < count else empty
    result = welford_merge(a, b)
    assert isinstance(result, tuple) and len(result) == 3, "return (count, mean, m2)"
    case = f"for x {x.shape} {x.dtype} split at {split}"
    assert result[0] == count, f"count {case}: expected {count}, got {result[0]!r}"
    assert_close(result[1], mean, f"mean {case}", **tolerance(x.dtype))
    assert_close(result[2], m2, f"m2 {case}", **norm_tolerance(x, (-1,), spread=True))


@exercise("5.2", "variance.welford_merge")
def visible_5_2():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 10))
    x[:, 3:] += 2.0  # the second part's mean differs from the first's
    check_merge(x, 3)


@exercise("5.3", "mixed_precision.layer_norm_mixed")
def visible_5_3():
    from normlib.mixed_precision import layer_norm_mixed

    h = torch.float16
    ln = torch.nn.functional.layer_norm
    check_mixed(layer_norm_mixed, ln, randn(h, 4, 64, seed=1), (64,), randn(h, 64, seed=2),
                randn(h, 64, seed=3))
    check_mixed(layer_norm_mixed, ln, randn(h, 4, 256, scale=300), (256,),
                randn(h, 256, seed=2), randn(h, 256, seed=3))  # x ** 2 overflows float16
    check_mixed(layer_norm_mixed, ln, randn(h, 2, 4096, offset=20, scale=3),
                (4096,))  # so does the sum


def rms_exact(x, normalized_shape, weight=None, eps=None):
    """F.rms_norm on the float64 copy of a 16-bit or float32 input, with eps=None read
    as torch reads it for such inputs: float32's eps."""
    eps = torch.finfo(torch.float32).eps if eps is None else eps
    return torch.nn.functional.rms_norm(x, normalized_shape, weight, eps)


@exercise("5.4", "mixed_precision.rms_norm_mixed")
def visible_5_4():
    from normlib.mixed_precision import rms_norm_mixed

    h = torch.float16
    check_mixed(rms_norm_mixed, rms_exact, randn(h, 4, 64, seed=1), (64,), randn(h, 64, seed=2))
    check_mixed(rms_norm_mixed, rms_exact, randn(h, 4, 256, scale=300), (256,),
                randn(h, 256, seed=2))
    check_mixed(rms_norm_mixed, rms_exact, randn(h, 2, 4096, offset=20, scale=3), (4096,))


def check_memory(peak, x, normalized_shape, case, output):
    """The peak allocated during a fast kernel's call: its output (x's size), then half of
    x or, for a few long rows, 8 rows (a block, row-sized sums), and 1 MiB for the small
    arrays and what measuring adds."""
    budget = x.nbytes + max(x.nbytes // 2, 8 * x.itemsize * math.prod(normalized_shape))
    assert peak <= budget + 2**20, (
        f"memory {case}: {peak / x.nbytes:.2f} times x's size allocated during the "
        f"call; at most 1.5 ({output} and half of x) allowed (or 8 rows)")


def check_fast_forward(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Your y, mean and rstd against torch's computed exactly (value, shape, dtype; the
    tolerances of Exercise 1.2); x, weight and bias unchanged; at most |x| / 2 allocated
    besides y (and the small statistics)."""
    from normlib.layer_norm_fast import layer_norm_forward_fast

    expected = torch_layer_norm(x, normalized_shape, weight, bias, eps)
    tol = layer_norm_tolerances(x, normalized_shape, eps)
    untouched = guard_inputs(x=x, weight=weight, bias=bias)
    args = (x, normalized_shape, weight, bias, eps)
    measured = x.nbytes >= MEASURED  # (smaller, what measuring costs would blur it)
    result, peak = (peak_memory if measured else no_measure)(layer_norm_forward_fast, *args)
    case = (f"for x {x.shape} {x.dtype}, normalized_shape={normalized_shape}, weight "
            f"{'None' if weight is None else 'given'}, bias {'None' if bias is None else 'given'}")
    assert isinstance(result, tuple) and len(result) == 3, "return (y, mean, rstd)"
    for name, actual, wanted in zip(("y", "mean", "rstd"), result, expected):
        assert_close(actual, wanted, f"{name} {case}", **tol[name])
    untouched(case)
    if measured:
        check_memory(peak, x, normalized_shape, case, "y")


@exercise("5.5", "layer_norm_fast.layer_norm_forward_fast")
def visible_5_5():
    rng = np.random.default_rng(0)
    f32 = np.float32
    check_fast_forward((1 + rng.standard_normal((2048, 1024))).astype(f32), (1024,),
                       rng.standard_normal(1024).astype(f32),
                       rng.standard_normal(1024).astype(f32))
    check_fast_forward(rng.standard_normal((2, 3, 4)).astype(f32), (3, 4),
                       rng.standard_normal((3, 4)).astype(f32),
                       rng.standard_normal((3, 4)).astype(f32))


def check_fast_backward(x, normalized_shape, weight=None, bias=None, seed=0):
    """Your dx, dweight, dbias against torch autograd's computed exactly under a random
    upstream gradient (value, shape, dtype; None where a parameter is None; the tolerances
    of Exercise 2.2); no argument modified; at most |x| / 2 allocated besides dx (and the
    small gradients)."""
    from normlib.layer_norm_fast import layer_norm_backward_fast

    grad = np.random.default_rng(seed).standard_normal(x.shape).astype(x.dtype)
    _, mean, rstd = torch_layer_norm(x, normalized_shape, weight, bias)
    expected = torch_layer_norm_backward(grad, x, normalized_shape, weight, bias)
    untouched = guard_inputs(grad_output=grad, x=x, mean=mean, rstd=rstd, weight=weight,
                             bias=bias)
    args = (grad, x, normalized_shape, mean, rstd, weight, bias)
    measured = x.nbytes >= MEASURED  # (smaller, what measuring costs would blur it)
    result, peak = (peak_memory if measured else no_measure)(layer_norm_backward_fast, *args)
    case = (f"for x {x.shape} {x.dtype}, normalized_shape={normalized_shape}, weight "
            f"{'None' if weight is None else 'given'}, bias {'None' if bias is None else 'given'}")
    assert isinstance(result, tuple) and len(result) == 3, "return (dx, dweight, dbias)"
    tol = layer_norm_backward_tolerances(x, normalized_shape)
    for name, actual, wanted in zip(("dx", "dweight", "dbias"), result, expected):
        if wanted is None:
            assert actual is None, f"{name} {case}: expected None, got {type(actual).__name__}"
        else:
            assert_close(actual, wanted, f"{name} {case}", **tol[name])
    untouched(case)
    if measured:
        check_memory(peak, x, normalized_shape, case, "dx")


@exercise("5.6", "layer_norm_fast.layer_norm_backward_fast")
def visible_5_6():
    rng = np.random.default_rng(0)
    f32 = np.float32
    check_fast_backward((1 + rng.standard_normal((2048, 1024))).astype(f32), (1024,),
                        rng.standard_normal(1024).astype(f32),
                        rng.standard_normal(1024).astype(f32))
    check_fast_backward(rng.standard_normal((2, 3, 4)).astype(f32), (3, 4),
                        rng.standard_normal((3, 4)).astype(f32),
                        rng.standard_normal((3, 4)).astype(f32))
