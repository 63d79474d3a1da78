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
    torch_normalize,
)

ONE_PASS = ("the one-pass variance E[x^2] - E[x]^2: at an offset large against the spread its "
            "two terms nearly cancel, and their difference loses its digits (catastrophic "
            "cancellation): subtract the mean first, then square (Unit 6 shows why)")


def one_pass_rstd(x, axes, eps=1e-5):
    """rstd (kept as size 1) from the one-pass variance E[x^2] - E[x]^2 computed in x's
    dtype, as that mistake computes it with NumPy: its error is its rounding, which the
    cancellation amplifies by the square of the condition of x (exact in float64 from
    there on, rounded to x's dtype)."""
    mean = x.mean(axis=axes, keepdims=True)  # (groups, 1s)
    var = (x * x).mean(axis=axes, keepdims=True) - mean * mean  # (groups, 1s), cancelled
    return (1 / np.sqrt(np.maximum(var.astype(np.float64), 0) + eps)).astype(x.dtype)


def eps_ignored(eps):
    """The likely cause of statistics computed with the default eps, not the one given."""
    return f"eps=1e-05 is used, not the eps={eps} given: use the argument, not a constant"


def rstd_mistakes(x, axes, eps=1e-5):
    """{likely cause: the rstd that mistake gives} (normkit.testing.stats_mistakes, the
    one-pass variance, and the default eps where another is given)."""
    found = {**stats_mistakes(x, axes, eps)["rstd"], ONE_PASS: one_pass_rstd(x, axes, eps)}
    if eps != 1e-5:
        found[eps_ignored(eps)] = torch_normalize(x, axes)[3]  # (rstd with eps=1e-5)
    return found


def normalized_axes(x, normalized_shape):
    """The axes of x (NumPy or torch) that normalized_shape means: its last
    len(normalized_shape)."""
    return tuple(range(x.ndim - len(normalized_shape), x.ndim))


def reduced_over(x, normalized_shape):
    """(x's shape, the axes normalized_shape means in it, how the check names them) for
    assert_close's `reduced`."""
    return x.shape, normalized_axes(x, normalized_shape), \
        f"normalized_shape={tuple(normalized_shape)}"


def check_stats(x, normalized_shape, eps=1e-5):
    """Your mean and rstd against the exact ones torch saves: the mean's tolerance from the
    row length, rstd's, a variance's, also from the condition of x."""
    from normlib.layer_norm import layer_norm_stats

    _, mean, rstd = torch_layer_norm(x, normalized_shape, eps=eps)
    tol = layer_norm_tolerances(x, normalized_shape, eps)
    untouched = guard_inputs(x=x)
    result = layer_norm_stats(x, normalized_shape, eps)
    assert isinstance(result, tuple) and len(result) == 2, "return the tuple (mean, rstd)."
    case = f"for x {x.shape} {x.dtype}, normalized_shape={normalized_shape}, eps={eps}"
    reduced = reduced_over(x, normalized_shape)
    assert_close(result[0], mean, f"mean {case}", reduced=reduced, **tol["mean"])
    assert_close(result[1], rstd, f"rstd {case}", mistakes=rstd_mistakes(x, reduced[1], eps),
                 reduced=reduced, **tol["rstd"])
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
    check_stats(X, (3, 4), eps=0.1)  # an eps of its own
    # an offset of 1000 against a spread of ~0.5 (condition ~1500): E[x^2] - E[x]^2 cancels
    check_stats(1000 + X / 4, (4,))
    # float64: its precision, to the last digits (a float32 step in between fails it)
    check_stats(np.random.default_rng(1).standard_normal((2, 3, 4)), (3, 4))


def affine(x_hat, weight=None, bias=None):
    """x_hat * weight + bias (NumPy or torch), an absent parameter left out: in x_hat's
    dtype, so give float64 for an exact result."""
    y = x_hat if weight is None else x_hat * weight  # (*B, *S)
    return y if bias is None else y + bias  # (*B, *S)


def forward_mistakes(x, normalized_shape, weight, bias, eps):
    """{likely cause: the y that mistake gives} for LayerNorm's forward, computed in float64
    from the exact x_hat, or the mistake's (normkit.testing.stats_mistakes, the one-pass
    variance, the default eps), and rounded to x's dtype."""
    axes, x64 = normalized_axes(x, normalized_shape), x.astype(np.float64)  # x64 (*B, *S)
    x_hat, mean, _ = torch_layer_norm(x64, normalized_shape, eps=eps)  # (*B, *S), (*B, 1s)
    found = {cause: affine(value, weight, bias)
             for cause, value in stats_mistakes(x64, axes, eps)["x_hat"].items()}
    found[ONE_PASS] = affine((x64 - mean) * one_pass_rstd(x, axes, eps), weight, bias)
    if eps != 1e-5:
        found[eps_ignored(eps)] = affine(torch_layer_norm(x64, normalized_shape)[0], weight,
                                         bias)
    if weight is not None and bias is not None:
        found["weight and bias are not applied: y is x_hat itself"] = x_hat
        found["weight and bias are swapped: the weight scales x_hat, the bias shifts it"] = \
            affine(x_hat, bias, weight)
        found["the bias is added before the weight scales x_hat, not after"] = \
            (x_hat + bias) * weight
    if weight is None and bias is not None:
        found["the bias is not added when weight is None: each of the two applies on its "
              "own"] = x_hat
    if weight is not None or bias is not None:
        found["weight and bias were applied to x before normalizing: they scale and shift "
              "x_hat, after it"] = torch_layer_norm(affine(x64, weight, bias), normalized_shape,
                                                    eps=eps)[0]
    return {cause: value.astype(x.dtype) for cause, value in found.items()}


def check_forward(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Your y, mean and rstd against torch's (y is one stage, scale and shift, after
    rstd); the statistics' shapes first (which axes they reduce), then the values."""
    from normlib.layer_norm import layer_norm_forward

    expected = torch_layer_norm(x, normalized_shape, weight, bias, eps)
    tol = layer_norm_tolerances(x, normalized_shape, eps)
    untouched = guard_inputs(x=x, weight=weight, bias=bias)
    result = layer_norm_forward(x, normalized_shape, weight, bias, eps)
    assert isinstance(result, tuple) and len(result) == 3, "return the tuple (y, mean, rstd)."
    given = [n for n, a in (("weight", weight), ("bias", bias)) if a is not None]
    case = f"for x {x.shape} {x.dtype}, normalized_shape={normalized_shape}, affine {given}"
    reduced = reduced_over(x, normalized_shape)
    for name, actual, wanted in zip(("mean", "rstd"), result[1:], expected[1:]):
        if isinstance(actual, np.ndarray) and actual.shape != wanted.shape:
            assert_close(actual, wanted, f"{name} {case}", reduced=reduced, **tol[name])
    mistakes = {"y": forward_mistakes(x, normalized_shape, weight, bias, eps),
                "rstd": rstd_mistakes(x, reduced[1], eps)}
    for name, actual, wanted in zip(("y", "mean", "rstd"), result, expected):
        assert_close(actual, wanted, f"{name} {case}", mistakes=mistakes.get(name), **tol[name])
    untouched(case)


@exercise("1.2", "layer_norm.layer_norm_forward")
def visible_1_2():
    x = np.array([[1, 2, 3, 4], [-1, -2, -3, -4]], dtype=np.float32)  # (2, 4)
    weight = np.array([2.0, 1.0, 0.5, -1.0], dtype=np.float32)  # (4,)
    bias = np.array([0.0, 1.0, 2.0, 3.0], dtype=np.float32)  # (4,)
    check_forward(x, (4,))
    check_forward(x, (4,), weight, bias)
    check_forward(x, (4,), None, bias)  # a shift alone
    check_forward(x, (4,), weight, bias, eps=0.1)  # an eps of its own
    check_forward(1e-3 * X, (4,), weight, bias)  # variances near eps: where eps goes shows
    w12 = np.linspace(-1.5, 2.0, 12, dtype=np.float32).reshape(3, 4)  # (3, 4)
    check_forward(X, (3, 4), w12, w12[::-1, ::-1] / 2)  # a 2-D normalized_shape
    check_forward(1000 + X / 4, (4,), weight, bias)  # an offset of 1000, a spread of ~0.5
    rng = np.random.default_rng(1)  # float64: its precision, to the last digits
    check_forward(rng.standard_normal((3, 4)), (4,), rng.standard_normal(4),
                  rng.standard_normal(4))
