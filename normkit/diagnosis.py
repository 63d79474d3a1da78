"""Why a check failed: the short message of normkit.testing.assert_close, and the likely
cause where the error has a known signature (not an exercise; at grading the course's copy
of this file is used, not the student's).

A failed comparison reads

    rstd for x (2, 4) float32, normalized_shape=(4,), eps=1e-05: 8 of 8 values are wrong.
      Worst at index (1, 0): expected 0.4472136, got 0.3872983 (tolerance 1.4e-05).
      Likely cause: the unbiased variance: dividing by N - 1 = 3 (ddof=1, ...), where ...

The signatures, from the most specific:
- a known mistake of this check (the check computes what that mistake gives, exactly, and
  passes it as `mistakes`): eps added to the std, the std returned for rstd, ...;
- NaN or inf where the exact value is finite: a division by zero or an overflow;
- every value off by one factor: the sign, or a scale;
- with `over` (the axes of one normalization group): an error that is the same for every
  element of a group (a missing or extra mean term).
"""

import itertools

import numpy as np

AGREE = 1e-3  # relative spread below which an error's pattern counts as exact (float32
# results carry ~1e-7 of rounding; a mistake's pattern holds to that, not to 1e-3)


def shape_words(actual, expected):
    """A result's shape (a tuple) as a message quotes it beside the expected one: as it is
    where each of its dimensions is one of expected's or 1 and it has at most one more (a
    missing keepdims, a transpose, a broadcast), "a zero-size array" for an empty one, else
    how many dimensions it has. (At grading, the student's code chooses a result's shape
    freely, after seeing the hidden tests' arguments: a zero-size array's other dimensions
    could be any numbers, which a verdict would carry out: tools/judge/judge.py.)"""
    actual, expected = tuple(actual), tuple(expected)
    if 0 in actual and 0 not in expected:
        return "a zero-size array"
    dims = set(expected) | {1}
    if len(actual) <= len(expected) + 1 and all(d in dims for d in actual):
        return str(actual)
    return f"an array of another shape ({len(actual)} dimensions)"


def shape_cause(actual, expected):
    """The likely cause of a wrong shape, or ""."""
    if actual.size == expected.size and tuple(s for s in actual.shape if s != 1) == \
            tuple(s for s in expected.shape if s != 1):
        if actual.ndim < expected.ndim:
            return ("the reduced axes were dropped: keep them as size 1 (keepdims=True), so "
                    "that the result broadcasts against x")
        return "the result keeps size-1 axes that it should not have: drop them (reshape)"
    if actual.shape == expected.shape[::-1]:
        return "the axes are in the reverse order (a transpose?)"
    return ""


def _reduced(actual, x_shape):
    """The axes of x_shape that a reduction to the shape `actual` went over, and whether it
    dropped them ((axes, dropped)), or None where no reduction of x gives that shape."""
    actual, x_shape = tuple(actual), tuple(x_shape)
    if len(actual) == len(x_shape) and all(a in (1, s) for a, s in zip(actual, x_shape)):
        return tuple(i for i, (a, s) in enumerate(zip(actual, x_shape)) if a != s), False
    for r in range(1, len(x_shape) + 1):
        for axes in itertools.combinations(range(len(x_shape)), r):
            if tuple(s for i, s in enumerate(x_shape) if i not in axes) == actual:
                return axes, True
    return None


def axes_cause(actual, x_shape, axes, meaning, keepdims=True):
    """The likely cause of a reduction's result of the wrong shape (a tuple) from an input
    of x_shape, where it should go over `axes` (which `meaning` names: "normalized_shape=
    (3, 4)"), keeping them as size 1 or not: which axes it went over, or "" (it is no
    reduction of x, or over the right axes: shape_cause says more)."""
    found = _reduced(actual, x_shape)
    if found is None or found[0] == tuple(axes):
        return ""
    went, dropped = found
    return (f"the result was reduced over axes {went} where {meaning} means axes "
            f"{tuple(axes)}" + (" (and it dropped them: keepdims=True)"
                                if dropped and keepdims else ""))


def dtype_cause(actual, expected):
    """The likely cause of a wrong dtype, or ""."""
    if actual.dtype == np.float64 and expected.dtype in (np.float32, np.float16):
        return (f"a {expected.dtype} input gives a {expected.dtype} result: NumPy promotes "
                "to float64 when a float64 array takes part; cast back with "
                ".astype(x.dtype)")
    if actual.dtype.kind != "f":
        return "the result is not floating point (an integer array, or a bool?)"
    return ""


def _factor(actual, expected):
    """The one factor r with actual = r * expected everywhere (float64), or None."""
    big = np.abs(expected) > 1e-6 * np.abs(expected).max(initial=0.0)
    if big.sum() < 1 or not np.all(np.isfinite(actual)):
        return None
    ratio = actual[big] / expected[big]  # (values)
    r = float(np.median(ratio))
    if r == 0 or np.abs(ratio - r).max() > AGREE * abs(r):
        return None
    if np.abs(actual[~big]).max(initial=0.0) > AGREE * np.abs(actual).max():
        return None  # (where expected is 0, actual must be too)
    return r


def factor_cause(actual, expected):
    """The likely cause when every value is off by one factor, or ""."""
    r = _factor(actual, expected)
    if r is None or abs(r - 1) < AGREE:
        return ""
    if abs(r + 1) < AGREE:
        return "every value has the wrong sign"
    return (f"every value is {r:.6g} times the exact one: a scale factor is missing or extra "
            "(rstd, the weight, a 1/N?)")


def group_cause(actual, expected, over):
    """The likely cause of an error that is the same for every element of each
    normalization group (axes `over`), or "". (An error that sums to zero over each group
    says nothing: a LayerNorm gradient sums to zero whatever the mistake.)"""
    error = actual - expected  # (*shape)
    size = np.abs(error).max(initial=0.0)
    if not np.isfinite(size) or size == 0:
        return ""
    group_mean = error.mean(axis=over, keepdims=True)  # (*shape with over as size 1)
    if np.abs(error - group_mean).max() <= AGREE * size:
        return ("the error is the same for every element of a group: a term that is constant "
                "over the group is missing or extra (in a backward: the mean's path, the mean "
                "of the upstream gradient)")
    return ""


def error_cause(error):
    """The likely cause of an exception that your code raised during a check, or ""."""
    text = str(error)
    if isinstance(error, ValueError) and "could not be broadcast" in text:
        return ("two arrays' shapes do not line up: a reduced array lost its axes (keep them "
                "as size 1 with keepdims=True, so that it broadcasts against x), or an array "
                "was reduced over the wrong axes")
    if isinstance(error, (TypeError, ValueError)) and "unpack" in text:
        return ("a value unpacked on this line does not hold the number of items assumed (a "
                "function's result, or an argument such as a state tuple: see its docstring)")
    return ""


def likely_cause(actual, expected, over=None, mistakes=None, close=None):
    """The likely cause of a wrong value (arrays of one shape), or "". mistakes: {cause:
    what that mistake computes here}; close(a, b): whether a equals b within the check's
    tolerance."""
    for cause, value in (mistakes or {}).items():
        if value.shape == actual.shape and close(actual, value):
            return cause
    a, e = actual.astype(np.float64), expected.astype(np.float64)
    if np.any(~np.isfinite(a) & np.isfinite(e)):
        return ("NaN or inf where the exact value is finite: a division by zero (a constant "
                "group has variance 0: is eps added inside the square root?) or an overflow")
    return factor_cause(a, e) or (group_cause(a, e, over) if over is not None else "")


def mismatch(actual, expected, rtol, atol, over=None, mistakes=None):
    """The message for values that differ beyond rtol and atol (absolute), or None."""
    def close(a, b):
        return np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)

    wrong = ~close(actual, expected)  # (*shape)
    if not wrong.any():
        return None
    a, e = actual.astype(np.float64), expected.astype(np.float64)
    excess = np.abs(a - e) - (atol + rtol * np.abs(e))  # (*shape)
    excess = np.where(np.isnan(excess), np.inf, excess)  # (*shape; 0-d arrays too)
    worst = np.unravel_index(np.argmax(excess), actual.shape)
    lines = [f"{int(wrong.sum())} of {wrong.size} values are wrong.",
             f"  Worst at index {tuple(int(i) for i in worst)}: expected {e[worst]:.7g}, "
             f"got {a[worst]:.7g}"
             + (f" (tolerance {atol + rtol * abs(e[worst]):.2g})." if np.isfinite(e[worst])
                else ".")]
    cause = likely_cause(actual, expected, over, mistakes, lambda p, q: close(p, q).all())
    if cause:
        lines.append(f"  Likely cause: {cause}.")
    return "\n".join(lines)
