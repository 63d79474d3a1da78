"""Unit 1's checks: Exercises 1.1 (layer_norm_stats) and 1.2 (layer_norm_forward).

Each check function compares your result with torch's computed exactly (float64, rounded to
x's dtype), in value, shape and dtype, within the error model's tolerances
(normkit.testing.layer_norm_tolerances). Your function is imported when a check runs, so
it is always your file as it is now.
"""

import numpy as np

from normkit.checks import exercise
from normkit.testing import (
    assert_close,
    guard_inputs,
    layer_norm_tolerances,
    stats_mistakes,
    torch_layer_norm,
)


def check_stats(x, normalized_shape, eps=1e-5):
    """Your mean and rstd against the exact ones torch saves: the mean's tolerance from the
    row length, rstd's, a variance's, also from the condition of x."""
    from normlib.layer_norm import layer_norm_stats

    _, mean, rstd = torch_layer_norm(x, normalized_shape, eps=eps)
    tol = layer_norm_tolerances(x, normalized_shape, eps)
    untouched = guard_inputs(x=x)
    result = layer_norm_stats(x, normalized_shape, eps)
    assert isinstance(result, tuple) and len(result) == 2, "return the tuple (mean, rstd)"
    case = f"for x {x.shape} {x.dtype}, normalized_shape={normalized_shape}, eps={eps}"
    assert_close(result[0], mean, f"mean {case}", **tol["mean"])
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))  # (the groups' axes)
    assert_close(result[1], rstd, f"rstd {case}", mistakes=stats_mistakes(x, axes, eps)["rstd"],
                 **tol["rstd"])
    untouched(case)


X = np.array(
    [[[4, 9, 3, 0], [3, 9, 7, 3], [7, 3, 1, 6]],
     [[6, 9, 8, 6], [6, 8, 4, 3], [6, 9, 1, 4]]],
    dtype=np.float32,
)  # (2, 3, 4): the worked example of section 1


@exercise("1.1", "layer_norm.layer_norm_stats")
def visible_1_1():
    check_stats(X, (4,))  # 6 groups of 4
    check_stats(X, (3, 4))  # 2 groups of 12
    check_stats(1e-3 * X, (4,))  # variances near eps: where eps goes shows (Unit 1, section 1)


def check_forward(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Your y, mean and rstd against torch's (y is one stage, scale and shift, after
    rstd)."""
    from normlib.layer_norm import layer_norm_forward

    expected = torch_layer_norm(x, normalized_shape, weight, bias, eps)
    tol = layer_norm_tolerances(x, normalized_shape, eps)
    untouched = guard_inputs(x=x, weight=weight, bias=bias)
    result = layer_norm_forward(x, normalized_shape, weight, bias, eps)
    assert isinstance(result, tuple) and len(result) == 3, "return the tuple (y, mean, rstd)"
    given = [n for n, a in (("weight", weight), ("bias", bias)) if a is not None]
    case = f"for x {x.shape} {x.dtype}, normalized_shape={normalized_shape}, affine {given}"
    for name, actual, wanted in zip(("y", "mean", "rstd"), result, expected):
        assert_close(actual, wanted, f"{name} {case}", **tol[name])
    untouched(case)


@exercise("1.2", "layer_norm.layer_norm_forward")
def visible_1_2():
    x = np.array([[1, 2, 3, 4], [-1, -2, -3, -4]], dtype=np.float32)  # (2, 4)
    weight = np.array([2.0, 1.0, 0.5, -1.0], dtype=np.float32)  # (4,)
    bias = np.array([0.0, 1.0, 2.0, 3.0], dtype=np.float32)  # (4,)
    check_forward(x, (4,))
    check_forward(x, (4,), weight, bias)
