"""Why a check failed: the message of normkit.testing.assert_close, with the likely cause.

A failed comparison names the quantity and the case, how many values are wrong and the worst
one against its tolerance, then a likely cause where the error has a known signature, from
the most specific: a known mistake of this check (passed as `mistakes`, which the check
computes exactly); one factor over every value (the sign, a scale); with `over` (the axes of
one normalization group), an error the same for every element of a group (a missing or extra
mean term). Where none matches, where() says where the wrong values are and what pattern
they have, from the two arrays alone, for any wrong code: which indices along which axes,
NaN or inf, right values at wrong places, wrong where the exact value is negative, 0 where
it is not, one factor or shift, a lower precision's error, else its size. Each pattern holds
to within AGREE and is worded as where to look, never as the exercise's answer (what a
message may quote: docs/security.md, section 5). Not an exercise: at grading the course's
copy of this file is used, not the student's.
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
    if actual.dtype.itemsize < expected.dtype.itemsize:
        return (f"a {expected.dtype} input gives a {expected.dtype} result: a step computes in, "
                f"or casts to, {actual.dtype} (an array made with that dtype, an .astype?)")
    return ""


def shape_where(actual, expected):
    """Which axes of a result of the wrong shape differ (tuples), without its sizes: at
    grading a result's shape is the student's choice (shape_words)."""
    actual, expected = tuple(actual), tuple(expected)
    if len(actual) != len(expected):
        return f"the result has {len(actual)} dimensions, where {len(expected)} are expected"
    axes = [k for k, (a, e) in enumerate(zip(actual, expected)) if a != e]
    return (f"axis {axes[0]}'s size differs, the others match" if len(axes) == 1 else
            f"axes {', '.join(map(str, axes))} differ in size, the others match")


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
        return ""  # (where() says where, and what to look for: no one cause is known)
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
    lines.append(f"  Likely cause: {cause}." if cause else
                 f"  Where: {where(actual, expected, wrong, close)}.")
    return "\n".join(lines)


def where(actual, expected, wrong, close):
    """Where the wrong values are (the mask `wrong`, of actual's and expected's shape) and
    what pattern the difference has, as one sentence without its full stop: never empty.
    close(a, b): where a equals b within the check's tolerance (a mask; arrays of one
    shape)."""
    a, e = actual.astype(np.float64), expected.astype(np.float64)
    place = located(wrong) or ("the one value" if wrong.size == 1 else "")
    pattern = (nonfinite_pattern(a, e, wrong) or moved_pattern(a, e, close)
               or sign_pattern(a, e, wrong, close) or value_pattern(a, e, wrong)
               or size_pattern(a, e, wrong, actual.dtype))
    return f"{place}; {pattern}" if place else pattern


def indices_words(hit):
    """The True indices of a 1-d bool array of length n, in words: "6, 7 of 0..7 (the last
    2)", "0 of 0..3 (the first)", "4 to 9 of 0..15", "0, 2, 4, 6 of 0..7 (every 2nd)"."""
    n, found = hit.size, np.flatnonzero(hit)
    k, first, last = found.size, int(found[0]), int(found[-1])
    listed = ", ".join(str(i) for i in found[:6]) + (", ..." if k > 6 else "")
    if k > 2 and last - first == k - 1:
        listed = f"{first} to {last}"
    words = f"{listed} of 0..{n - 1}"
    if last == n - 1 and last - first == k - 1:
        return words + (" (the last)" if k == 1 else f" (the last {k})")
    if first == 0 and last == k - 1:
        return words + (" (the first)" if k == 1 else f" (the first {k})")
    steps = np.diff(found)
    if k > 2 and steps[0] > 1 and np.all(steps == steps[0]):
        suffix = {2: "nd", 3: "rd"}.get(int(steps[0]), "th")
        return words + f" (every {steps[0]}{suffix})"
    return words


def located(wrong):
    """Where the wrong values are, in words: "all 48 values", or how many and, where they
    keep to some indices of an axis, which ("12 of 48 values: every value at axis 0's
    indices 6, 7 of 0..7 (the last 2)" where they fill those indices, "..., all at ..."
    where they lie among them), else the first few."""
    if wrong.ndim == 0 or wrong.size == 1:
        return ""
    count = f"{int(wrong.sum())} of {wrong.size} values"
    if wrong.all():
        return f"all {wrong.size} values"
    hits = [wrong.any(axis=tuple(i for i in range(wrong.ndim) if i != k))
            for k in range(wrong.ndim)]  # [(shape[k],)]: the indices of axis k holding one
    confined = [f"axis {k}'s {'index' if hit.sum() == 1 else 'indices'} "
                f"{indices_words(hit)}" for k, hit in enumerate(hits)
                if hit.size > 1 and 2 * hit.sum() <= hit.size]  # (at most half of them)
    if confined:
        block = wrong.sum() == np.prod([hit.sum() for hit in hits])
        return f"{count}{': every value' if block else ', all'} at {' and '.join(confined)}"
    spots = np.argwhere(wrong)[:4]  # (up to 4, ndim)
    return (f"{count}, at " + ", ".join(str(tuple(int(i) for i in spot)) for spot in spots)
            + (", ..." if wrong.sum() > 4 else ""))


def nonfinite_pattern(a, e, wrong):
    """NaN or inf where the exact value is finite: what to look for, or ""."""
    bad = ~np.isfinite(a) & np.isfinite(e)
    if not bad.any():
        return ""
    what = "NaN" if np.isnan(a[bad]).all() else "inf" if np.isinf(a[bad]).all() else \
        "NaN or inf"
    return (f"{what} at {int(bad.sum())} of them, where the exact value is finite: look for "
            "a division by zero (a group of equal values has variance 0), an overflow, or an "
            "array read before anything was written into it (np.empty)")


def moved_pattern(a, e, close):
    """The right values at the wrong places: two axes swapped, an axis reversed or shifted
    by one; or ""."""
    if a.ndim == 0 or not np.isfinite(a).all():
        return ""
    for i, j in itertools.combinations(range(a.ndim), 2):
        if a.shape[i] == a.shape[j] > 1 and close(a, np.swapaxes(e, i, j)).all():
            return (f"the right values at the wrong places: got is the exact result with axes "
                    f"{i} and {j} swapped (a transpose?)")
    for k in range(a.ndim):
        if a.shape[k] > 1 and close(a, np.flip(e, k)).all():
            return (f"the right values at the wrong places: got is the exact result reversed "
                    f"along axis {k}")
        n = a.shape[k]
        if n > 2:
            a_head, a_tail, e_head, e_tail = (np.take(t, range(lo, lo + n - 1), axis=k)
                                              for t in (a, e) for lo in (0, 1))
            for got, exact, unmoved, words in ((a_tail, e_head, e_tail, "later"),
                                               (a_head, e_tail, e_head, "earlier")):
                if close(got, exact).all() and not close(got, unmoved).all():
                    return (f"the right values at the wrong places: along axis {k}, got is "
                            f"the exact result shifted one index {words} (an index off by "
                            "one?)")
    return ""


def sign_pattern(a, e, wrong, close):
    """Wrong exactly where the exact value is negative (or positive): set to 0 there, or its
    sign flipped; or ""."""
    zero = np.zeros_like(e)
    for sign, side in ((-1, "negative"), (1, "positive")):
        signed = (np.sign(e) == sign) & ~close(zero, e)  # (*shape) clearly of that sign
        if not signed.any() or not np.array_equal(wrong, signed) or signed.all():
            continue
        if close(a[wrong], zero[wrong]).all():
            return (f"wrong exactly where the exact value is {side}, and 0 there: something "
                    f"sets the {side} values to 0 (a clamp)")
        if close(a[wrong], -e[wrong]).all():
            return (f"wrong exactly where the exact value is {side}, whose sign is flipped "
                    "there (an absolute value, or a sign taken from elsewhere?)")
        return f"wrong exactly where the exact value is {side}"
    return ""


def value_pattern(a, e, wrong):
    """What the wrong values have in common: 0 where the exact value is not, one factor, or
    one shift (got - expected the same everywhere there); or ""."""
    got, exact = a[wrong], e[wrong]  # (count)
    if not np.isfinite(got).all():
        return ""
    if np.all(got == 0):
        return "there, got is 0 (values never written, or a branch that gives zeros?)"
    r = _factor(got, exact)
    if r is not None and abs(r - 1) >= AGREE and got.size > 1:
        return (f"there, every value is {r:.6g} times the exact one (a scale factor missing or "
                "extra there?)")
    shift = got - exact  # (count)
    middle = float(np.median(shift))
    if got.size > 1 and middle != 0 and np.abs(shift - middle).max() <= AGREE * abs(middle):
        return (f"there, got - expected is the same, {middle:.6g}, at every wrong value (a "
                "constant term added or left out?)")
    return power_pattern(got, exact)


POWERS = {2.0: "the exact value squared", 0.5: "the square root of the exact value",
          -1.0: "the reciprocal of the exact value", -2.0: "one over the exact value squared",
          -0.5: "one over the square root of the exact value"}


def power_pattern(got, exact):
    """'there, got is the exact value squared' (or another power p: got = exact ** p,
    same signs) where that holds at every wrong value, or ""."""
    if got.size < 2 or not (np.all(exact > 0) and np.all(got > 0)):
        return ""  # (positive values alone: a power of a negative value has no one sign)
    lg, le = np.log(got), np.log(exact)  # (count)
    away = np.abs(le) > 0.1  # (count): where exact is not near 1 (there, any power fits)
    if away.sum() < 2 or np.ptp(le) < np.log(2):
        return ""  # (the exact values must spread over a factor of 2 at least)
    p = float(np.median(lg[away] / le[away]))
    if abs(p - 1) < 0.05 or np.abs(lg - p * le).max() > AGREE * max(1.0, np.abs(lg).max()):
        return ""
    named = next((words for q, words in POWERS.items() if abs(p - q) < 10 * AGREE), None)
    return ("there, got is " + (named or f"the exact value to the power {p:.3g}")
            + " (a power, a square or a square root, misplaced?)")


def size_pattern(a, e, wrong, dtype):
    """How large the error is beside the values: a lower precision's rounding, small, or as
    large as a wrong formula's (never empty)."""
    scale = max(float(np.abs(e[np.isfinite(e)]).max(initial=0.0)), np.finfo(np.float64).tiny)
    error = float(np.abs(a - e)[wrong].max())  # (finite: nonfinite_pattern came first)
    rel = error / scale
    single = a[wrong].astype(np.float32).astype(np.float64) == a[wrong]  # (count)
    if np.dtype(dtype) == np.float64 and rel < 1e-5 and single.all():
        return (f"the largest error is {rel:.1e} of the values' size, and every wrong value is "
                "a float32 number: float32's precision (about 7 digits), where a float64 "
                "result needs about 15: some intermediate, constant or buffer is float32")
    if rel < 1e-2:
        return (f"small: the largest error is {rel:.1e} of the values' size, beyond rounding: "
                "look for a sum that cancels (a large offset subtracted late), a "
                "lower-precision intermediate, or a term that is small here")
    return (f"the error is up to {rel:.2g} times the values' largest size, with no simpler "
            "pattern (not one factor, one shift, or the right values at other places)")
