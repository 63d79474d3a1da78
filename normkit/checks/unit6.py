"""Unit 6's checks: Exercises 6.1 (welford), 6.2 (welford_merge), 6.3 (layer_norm_mixed),
6.4 (rms_norm_mixed), 6.5 (layer_norm_forward_fast) and 6.6 (layer_norm_backward_fast).

Each check function compares your result with the exact one (computed in float64, rounded
to x's dtype), in value, shape and dtype, within the error model's tolerances
(normkit.testing); the 16-bit ones (6.3, 6.4, normkit.testing.check_mixed) within 2 eps of
their dtype; the fast kernels' (6.5, 6.6) also measure the memory your kernel allocates for
an x of 8 MiB or more (normkit.testing.peak_memory). A wrong result is named by the classic
mistake it matches: each check computes what those mistakes give (exactly, in float64) or
knows their signature (the one-pass formula's cancellation, a block skipped or not summed).
Your function is imported when a check runs, so it is always your file as it is now.
"""

import math

import numpy as np
import torch

from normkit.checks import exercise
from normkit.checks.unit1 import affine, forward_mistakes, normalized_axes, rstd_mistakes
from normkit.testing import (
    MEASURED,
    CheckFailed,
    assert_close,
    backward_mistakes,
    check_mixed,
    close,
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
    torch_normalize,
)
from normkit.testing import randn_tensor as randn


def assert_diagnosed(actual, expected, name, mistakes=dict, signature=None, **tol):
    """assert_close(actual, expected, name, **tol), naming the likely cause: mistakes() gives
    {likely cause: what that mistake computes here} (assert_close's `mistakes`), computed
    only when the values are wrong (on the large cases it costs more than the check); where
    none matches, signature() gives the cause of an error with a known pattern, or ""."""
    try:
        assert_close(actual, expected, name, **tol)
    except CheckFailed:
        try:
            assert_close(actual, expected, name, mistakes=mistakes(), **tol)
        except CheckFailed as error:
            comparable = isinstance(actual, np.ndarray) and actual.shape == expected.shape
            cause = comparable and "Likely cause" not in str(error) and signature and \
                signature()
            if cause:
                raise CheckFailed(f"{error}\n  Likely cause: {cause}.") from None
            raise


def one_pass_cause(m2_of, x):
    """The one-pass formula's signature, for an m2 found wrong on the rows of x (*B, N):
    m2_of(x), your m2 (*B,), is right for the same rows shifted near 0 (x minus its mean
    rounded to an integer, exactly: m2 does not change), where sum(x ** 2) - n mean ** 2
    has little to cancel; or "" (also where there is no offset to remove)."""
    shift = np.round(x.astype(np.float64).mean(axis=-1, keepdims=True))  # (*B, 1)
    if not shift.any():
        return ""
    shifted = (x - shift).astype(x.dtype)  # (*B, N)
    try:
        m2 = m2_of(shifted)  # (*B,)
    except Exception:  # (a kernel that fails there is not the one-pass formula's)
        return ""
    wanted = exact_welford_state(shifted)[2]  # (*B,)
    if not (isinstance(m2, np.ndarray) and m2.shape == wanted.shape and
            close(m2, wanted, **norm_tolerance(shifted, (-1,), spread=True))):
        return ""
    return (f"m2 is right for the same rows shifted near 0 (x - {np.abs(shift).max():.4g}, "
            "which leaves m2 as it is) and wrong at their offset: there sum(x ** 2) and "
            "n mean ** 2 nearly cancel, and their difference loses m2's digits to "
            "cancellation, the one-pass formula's flaw (notebook 06, section 1)")


def welford_mistakes(x):
    """{likely cause: the m2 that mistake gives} for Welford's state of x (*B, N): the update
    with the mean before it (or after it) in both factors, the variance in m2's place;
    computed exactly (float64) and rounded to x's dtype."""
    x64 = x.astype(np.float64)  # (*B, N)
    n = x.shape[-1]
    after = np.cumsum(x64, axis=-1) / np.arange(1, n + 1)  # (*B, N) the mean after x_k
    before = np.concatenate([np.zeros_like(after[..., :1]), after[..., :-1]], axis=-1)
    m2 = ((x64 - after[..., -1:]) ** 2).sum(axis=-1)  # (*B,)
    found = {
        "m2 adds delta * delta, the mean before the update in both factors: the second "
        "factor takes the mean after it": ((x64 - before) ** 2).sum(axis=-1),
        "m2 adds (x_k - mean) ** 2 with the mean after the update in both factors: delta, "
        "the first factor, is taken before it": ((x64 - after) ** 2).sum(axis=-1),
        "this is the variance, m2 / count, where the state holds m2, the sum of squared "
        "deviations": m2 / n}
    return {cause: v.astype(x.dtype) for cause, v in found.items()}


def check_welford(x):
    """Your state against the exact one, in value, shape and dtype, within the error
    model's tolerances (normkit.testing): the mean's from the row length; m2's also from
    the condition of x (offset / spread: each x - mean rounds by eps * offset). A wrong m2
    is named by the mistake it matches (welford_mistakes, one_pass_cause)."""
    from normlib.variance import welford

    count, mean, m2 = exact_welford_state(x)
    result = welford(x)
    assert isinstance(result, tuple) and len(result) == 3, "return (count, mean, m2)."
    case = f"for x {x.shape} {x.dtype}"
    assert result[0] == count and isinstance(result[0], int), \
        f"count {case}: expected the int {count}, got {result[0]!r}."
    assert_close(result[1], mean, f"mean {case}", **tolerance(x.dtype, count))
    assert_diagnosed(result[2], m2, f"m2 {case}", lambda: welford_mistakes(x),
                     lambda: one_pass_cause(lambda shifted: welford(shifted)[2], x),
                     **norm_tolerance(x, (-1,), spread=True))


@exercise("6.1", "variance.welford")
def visible_6_1():
    rng = np.random.default_rng(0)
    check_welford(rng.standard_normal((3, 8)))
    check_welford((1e3 + rng.standard_normal((4, 256))).astype(np.float32))


def merge_mistakes(a, b):
    """{quantity: {likely cause: what that mistake gives}} for merging the states a and b:
    each term of the merge missing or wrong, computed exactly (float64) from the states
    given, rounded to their dtype."""
    (na, ma, m2a), (nb, mb, m2b) = [(n, m.astype(np.float64), q.astype(np.float64))
                                    for n, m, q in (a, b)]  # (*B,) each
    n, delta = na + nb, mb - ma  # delta (*B,)
    between = delta * delta * (na * nb / n)  # (*B,)
    found = {
        "mean": {
            "the means are averaged without their counts: each part's mean weighs by how "
            "many elements it holds": (ma + mb) / 2,
            "the counts are swapped: the mean moves from mean_a towards mean_b by the share "
            "of the elements that b holds": ma + delta * (na / n)},
        "m2": {
            "the between-group term is missing: m2 of the union also counts how far the "
            "parts' means lie from each other, not only the spread within each part":
                m2a + m2b,
            "the between-group term is divided by count once too often: that is its share "
            "of the variance, and m2 is a sum of squares, not a mean": m2a + m2b + between / n,
            "the m2s are weighted by their counts like the means: m2 is a sum of squares "
            "over the elements, not a mean, so the parts' m2s are not weighted":
                (m2a * na + m2b * nb) / n + between}}
    return {q: {cause: v.astype(a[1].dtype) for cause, v in causes.items()}
            for q, causes in found.items()}


def split_states(x, split):
    """The exact states of x[..., :split] and x[..., split:] (a part with no element:
    count 0, mean and m2 0)."""
    count, mean, m2 = exact_welford_state(x)
    empty = (0, np.zeros_like(mean), np.zeros_like(m2))  # (*B,) each
    return (exact_welford_state(x[..., :split]) if split > 0 else empty,
            exact_welford_state(x[..., split:]) if split < count else empty)


def check_merge(x, split):
    """Merging the exact states of x[..., :split] and x[..., split:] gives x's exact state,
    in value, shape and dtype, within the error model's tolerances for a few operations
    (normkit.testing): m2's also from the condition of x (offset / spread). A wrong term is
    named by the mistake it matches (merge_mistakes, one_pass_cause)."""
    from normlib.variance import welford_merge

    count, mean, m2 = exact_welford_state(x)
    a, b = split_states(x, split)
    result = welford_merge(a, b)
    assert isinstance(result, tuple) and len(result) == 3, "return (count, mean, m2)."
    case = f"for x {x.shape} {x.dtype} split at {split}"
    assert result[0] == count, f"count {case}: expected {count}, got {result[0]!r}."
    mistakes = lambda: merge_mistakes(a, b)  # noqa: E731
    assert_diagnosed(result[1], mean, f"mean {case}", lambda: mistakes()["mean"],
                     **tolerance(x.dtype))
    assert_diagnosed(result[2], m2, f"m2 {case}", lambda: mistakes()["m2"],
                     lambda: one_pass_cause(
                         lambda shifted: welford_merge(*split_states(shifted, split))[2], x),
                     **norm_tolerance(x, (-1,), spread=True))


@exercise("6.2", "variance.welford_merge")
def visible_6_2():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 10))
    x[:, 3:] += 2.0  # the second part's mean differs from the first's
    check_merge(x, 3)
    x = 1e3 + rng.standard_normal((4, 512))  # a large mean against the spread
    x[:, 200:] += 2.0
    check_merge(x.astype(np.float32), 200)


def dtype_name(dtype):
    """A torch dtype as a message names it: "float16"."""
    return str(dtype).removeprefix("torch.")


def overflowed(x, normalized_shape, centred, dtype):
    """(*B, 1..1) bool: where a group's largest square, of x - mean (centred) or of x,
    overflows dtype, so that a mean of squares computed in it is inf."""
    axes = normalized_axes(x, normalized_shape)
    x = x - x.mean(dim=axes, keepdim=True) if centred else x  # (*B, *S)
    return x.abs().amax(dim=axes, keepdim=True) ** 2 > torch.finfo(dtype).max  # (*B, 1..1)


def last_axis_cause(normalized_shape):
    """The likely cause of statistics over the last axis alone, or None (one axis)."""
    if len(normalized_shape) < 2:
        return None
    return (f"the statistics were taken over the last axis alone, where normalized_shape="
            f"{tuple(normalized_shape)} means the last {len(normalized_shape)} axes")


def layer_norm_mistakes(dtype, normalized_shape):
    """{likely cause: a function like F.layer_norm computing in float64 what that mistake
    gives} for Exercise 6.3 on a dtype input (normkit.testing.check_mixed's mistakes)."""
    ln = torch.nn.functional.layer_norm
    big, name = torch.finfo(dtype).max, dtype_name(dtype)
    bits = 1 - round(math.log2(torch.finfo(dtype).eps))  # significant bits

    def overflow(x, shape, weight=None, bias=None, eps=1e-5):
        flat = affine(torch.zeros_like(x), weight, bias)  # (*B, *S): x_hat = 0
        return torch.where(overflowed(x, shape, True, dtype), flat, ln(x, shape, weight, bias,
                                                                        eps))

    def mean_rounded(x, shape, weight=None, bias=None, eps=1e-5):
        xc = x - x.mean(dim=normalized_axes(x, shape), keepdim=True).to(dtype).double()  # (*B, *S)
        var = (xc * xc).mean(dim=normalized_axes(x, shape), keepdim=True)  # (*B, 1..1)
        return affine(xc * torch.rsqrt(var + eps), weight, bias)

    def eps_on_std(x, shape, weight=None, bias=None, eps=1e-5):
        var, mean = torch.var_mean(x, dim=normalized_axes(x, shape), unbiased=False, keepdim=True)
        return affine((x - mean) / (var.sqrt() + eps), weight, bias)

    def last_axis(x, shape, weight=None, bias=None, eps=1e-5):
        return affine(ln(x, shape[-1:], eps=eps), weight, bias)

    found = {
        f"the squares overflow {name} (its largest value is {big:.0f}) to inf, so rstd is 0 "
        "and y the bias alone: compute the statistics in float32": overflow,
        f"the mean was rounded to {name}: its {bits} significant bits leave it off by up "
        "to half a unit in the last place of x's offset, and x - mean carries that error: "
        "keep it in float32": mean_rounded,
        "eps is added to the std; it belongs under the square root, added to the variance "
        "(notebook 06, section 3)": eps_on_std}
    if last_axis_cause(normalized_shape):
        found[last_axis_cause(normalized_shape)] = last_axis
    return found


@exercise("6.3", "mixed_precision.layer_norm_mixed")
def visible_6_3():
    from normlib.mixed_precision import layer_norm_mixed

    h = torch.float16

    def check(x, shape, *params):
        check_mixed(layer_norm_mixed, torch.nn.functional.layer_norm, x, shape, *params,
                    mistakes=layer_norm_mistakes(h, shape))

    check(randn(h, 4, 64, seed=1), (64,), randn(h, 64, seed=2), randn(h, 64, seed=3))
    check(randn(h, 4, 256, scale=300), (256,), randn(h, 256, seed=2),
          randn(h, 256, seed=3))  # x ** 2 overflows float16
    check(randn(h, 2, 4096, offset=20, scale=3), (4096,))  # so does the sum
    check(randn(h, 4, 64, offset=100, seed=5), (64,))  # the mean's rounding shows
    check(randn(h, 4, 32, scale=1e-3, seed=6), (32,))  # a variance below eps
    check(randn(h, 2, 3, 8, seed=8), (3, 8), randn(h, 3, 8, seed=9))  # two axes


def rms_exact(x, normalized_shape, weight=None, eps=None):
    """F.rms_norm on the float64 copy of a 16-bit or float32 input, with eps=None read
    as torch reads it for such inputs: float32's eps."""
    eps = torch.finfo(torch.float32).eps if eps is None else eps
    return torch.nn.functional.rms_norm(x, normalized_shape, weight, eps)


def rms_norm_mistakes(dtype, normalized_shape):
    """{likely cause: a function like rms_exact computing in float64 what that mistake
    gives} for Exercise 6.4 on a dtype input (normkit.testing.check_mixed's mistakes)."""
    big, eps16, eps32 = torch.finfo(dtype).max, torch.finfo(dtype).eps, \
        torch.finfo(torch.float32).eps
    name = dtype_name(dtype)

    def overflow(x, shape, weight=None, eps=None):
        return torch.where(overflowed(x, shape, False, dtype), 0.0, rms_exact(x, shape,
                                                                               weight, eps))

    def eps_of_dtype(x, shape, weight=None, eps=None):
        return rms_exact(x, shape, weight, eps16 if eps is None else eps)

    def eps_on_rms(x, shape, weight=None, eps=None):
        rms = x.pow(2).mean(dim=normalized_axes(x, shape), keepdim=True).sqrt()  # (*B, 1..1)
        return affine(x / (rms + (eps32 if eps is None else eps)), weight)

    def last_axis(x, shape, weight=None, eps=None):
        return affine(rms_exact(x, shape[-1:], None, eps), weight)

    found = {
        f"the squares overflow {name} (its largest value is {big:.0f}) to inf, so 1 / rms "
        "is 0 and so is y: compute the mean square in float32": overflow,
        f"eps=None was read as {name}'s eps ({eps16:.2g}); torch's kernel adds float32's "
        f"({eps32:.2g}), the eps of the dtype it computes in (see the docstring)":
            eps_of_dtype,
        "eps is added to the RMS; it belongs under the square root, added to the mean "
        "square (notebook 06, section 3)": eps_on_rms}
    if last_axis_cause(normalized_shape):
        found[last_axis_cause(normalized_shape)] = last_axis
    return found


@exercise("6.4", "mixed_precision.rms_norm_mixed")
def visible_6_4():
    from normlib.mixed_precision import rms_norm_mixed

    h = torch.float16

    def check(x, shape, *params):
        check_mixed(rms_norm_mixed, rms_exact, x, shape, *params,
                    mistakes=rms_norm_mistakes(h, shape))

    check(randn(h, 4, 64, seed=1), (64,), randn(h, 64, seed=2))
    check(randn(h, 4, 256, scale=300), (256,), randn(h, 256, seed=2))  # x ** 2 overflows
    check(randn(h, 2, 4096, offset=20, scale=3), (4096,))
    check(randn(h, 4, 32, scale=1e-3, seed=6), (32,))  # a mean square below float16's eps
    check(randn(h, 2, 3, 8, seed=8), (3, 8), randn(h, 3, 8, seed=9))  # two axes


def check_memory(peak, x, normalized_shape, case, output):
    """The peak allocated during a fast kernel's call: its output (x's size), then half of
    x or, for a few long rows, 8 rows (a block, row-sized sums), and 1 MiB for the small
    arrays and what measuring adds. Over it, the likely cause from how many arrays of x's
    size the peak holds besides the output."""
    budget = x.nbytes + max(x.nbytes // 2, 8 * x.itemsize * math.prod(normalized_shape))
    if peak <= budget + 2**20:
        return
    arrays = round(peak / x.nbytes) - 1  # full-size temporaries besides the output
    cause = (f"about {arrays} full-size temporar{'ies' if arrays > 1 else 'y'} besides "
             f"{output}, as the naive kernel makes: each NumPy expression such as (x - mean) "
             f"* rstd writes a new array the size of x; write into {output} in place (out=) and "
             "work in blocks of rows" if arrays >= 1 else
             "the blocks' temporaries take more than half of x's size: make them smaller")
    raise CheckFailed(f"memory {case}: {peak / x.nbytes:.2f} times x's size allocated during "
                      f"the call; at most 1.5 ({output} and half of x) allowed (or 8 rows).\n"
                      f"  Likely cause: {cause}.")


def tail_rows_cause(actual, expected, tol):
    """The likely cause of a loop over blocks that stops early: actual (R, H) is expected
    with its rows from some k > 0 on left as np.zeros made them (never written), within
    tol; or ""."""
    zero = ~actual.any(axis=1)  # (R,): the rows all 0
    k = len(zero) - int(np.argmin(zero[::-1])) if not zero.all() else 0  # the last 0s' first
    skipped = expected.astype(np.float64)  # (R, H): what the mistake leaves
    skipped[k:] = 0
    if not 0 < k < len(zero) or not close(actual, skipped, **tol):
        return ""
    return (f"rows {k} to {len(zero) - 1} of the {len(zero)} are 0, never written, and all "
            "before them right: the loop over blocks stops before the last one, which is "
            f"shorter than the others when the block does not divide the {len(zero)} rows")


def partial_sum_cause(actual, terms, tol, name):
    """The signature of a parameter's gradient not summed over every block: actual (H,)
    equals the sum of terms (R, H), each row's share, over the last rows alone or the first
    ones; or ""."""
    a = actual.reshape(-1).astype(np.float64)  # (H,)
    for sums, rows, whole in ((np.cumsum(terms[::-1], axis=0)[::-1], "{k} to {last}", 0),
                              (np.cumsum(terms, axis=0), "0 to {k}", len(terms) - 1)):
        # sums (R, H): over the rows from k on, or up to k; `whole` the k of every row
        k = int(np.argmin(np.abs(sums - a).max(axis=1)))
        if k != whole and close(a, sums[k], **tol):
            return (f"{name} sums rows {rows.format(k=k, last=len(terms) - 1)} alone of the "
                    f"{len(terms)}: each block's share must be added to the total over all "
                    "the blocks")
    return ""


def case_words(x, normalized_shape, weight, bias):
    """A fast kernel's case as its messages name it."""
    return (f"for x {x.shape} {x.dtype}, normalized_shape={normalized_shape}, weight "
            f"{'None' if weight is None else 'given'}, bias {'None' if bias is None else 'given'}")


def check_fast_forward(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Your y, mean and rstd against torch's computed exactly (value, shape, dtype; the
    tolerances of Exercise 1.2); x, weight and bias unchanged; at most |x| / 2 allocated
    besides y (and the small statistics). A wrong value is named by the mistake it matches
    (Unit 1's forward_mistakes and rstd_mistakes, tail_rows_cause)."""
    from normlib.layer_norm_fast import layer_norm_forward_fast

    expected = torch_layer_norm(x, normalized_shape, weight, bias, eps)
    tol = layer_norm_tolerances(x, normalized_shape, eps)
    untouched = guard_inputs(x=x, weight=weight, bias=bias)
    args = (x, normalized_shape, weight, bias, eps)
    measured = x.nbytes >= MEASURED  # (smaller, what measuring costs would blur it)
    result, peak = (peak_memory if measured else no_measure)(layer_norm_forward_fast, *args)
    case = case_words(x, normalized_shape, weight, bias)
    assert isinstance(result, tuple) and len(result) == 3, "return (y, mean, rstd)."
    rows = x.size // max(1, math.prod(normalized_shape))
    mistakes = {"y": lambda: forward_mistakes(x, normalized_shape, weight, bias, eps),
                "rstd": lambda: rstd_mistakes(x, normalized_axes(x, normalized_shape), eps)}
    for name, actual, wanted in zip(("y", "mean", "rstd"), result, expected):
        assert_diagnosed(actual, wanted, f"{name} {case}", mistakes.get(name, dict),
                         lambda a=actual, e=wanted, name=name: tail_rows_cause(
                             a.reshape(rows, -1), e.reshape(rows, -1), tol[name]),
                         **tol[name])
    untouched(case)
    if measured:
        check_memory(peak, x, normalized_shape, case, "y")


@exercise("6.5", "layer_norm_fast.layer_norm_forward_fast")
def visible_6_5():
    rng = np.random.default_rng(0)
    f32 = np.float32
    check_fast_forward((1 + rng.standard_normal((2048, 1024))).astype(f32), (1024,),
                       rng.standard_normal(1024).astype(f32),
                       rng.standard_normal(1024).astype(f32))
    check_fast_forward(rng.standard_normal((601, 256)).astype(f32), (256,),
                       rng.standard_normal(256).astype(f32))  # 601 rows: no block divides
    check_fast_forward((1e-3 * rng.standard_normal((8, 64))).astype(f32), (64,),
                       None, rng.standard_normal(64).astype(f32))  # a variance below eps
    check_fast_forward(rng.standard_normal((2, 3, 4)).astype(f32), (3, 4),
                       rng.standard_normal((3, 4)).astype(f32),
                       rng.standard_normal((3, 4)).astype(f32))


def backward_terms(grad, x, normalized_shape, eps=1e-5):
    """dweight's and dbias's terms, each row's share, computed exactly (float64): (R, H)
    each: grad times x_hat, and grad."""
    h = math.prod(normalized_shape)
    g, x64 = grad.astype(np.float64).reshape(-1, h), x.astype(np.float64).reshape(-1, h)
    x_hat = torch_normalize(x64, (1,), eps)[0]  # (R, H)
    return {"dweight": g * x_hat, "dbias": g}


def check_fast_backward(x, normalized_shape, weight=None, bias=None, seed=0):
    """Your dx, dweight, dbias against torch autograd's computed exactly under a random
    upstream gradient (value, shape, dtype; None where a parameter is None; the tolerances
    of Exercise 2.2); no argument modified; at most |x| / 2 allocated besides dx (and the
    small gradients). A wrong value is named by the mistake it matches (dx: the missing
    terms of normkit.testing.backward_mistakes, tail_rows_cause; dweight and dbias:
    partial_sum_cause)."""
    from normlib.layer_norm_fast import layer_norm_backward_fast

    grad = np.random.default_rng(seed).standard_normal(x.shape).astype(x.dtype)
    _, mean, rstd = torch_layer_norm(x, normalized_shape, weight, bias)
    expected = torch_layer_norm_backward(grad, x, normalized_shape, weight, bias)
    untouched = guard_inputs(grad_output=grad, x=x, mean=mean, rstd=rstd, weight=weight,
                             bias=bias)
    args = (grad, x, normalized_shape, mean, rstd, weight, bias)
    measured = x.nbytes >= MEASURED  # (smaller, what measuring costs would blur it)
    result, peak = (peak_memory if measured else no_measure)(layer_norm_backward_fast, *args)
    case = case_words(x, normalized_shape, weight, bias)
    assert isinstance(result, tuple) and len(result) == 3, "return (dx, dweight, dbias)."
    tol = layer_norm_backward_tolerances(x, normalized_shape)
    axes = normalized_axes(x, normalized_shape)
    rows = x.size // max(1, math.prod(normalized_shape))
    g = grad.astype(np.float64) * (1.0 if weight is None else weight)  # (*B, *S) dL/dx_hat
    signatures = {
        "dx": lambda a, e: tail_rows_cause(a.reshape(rows, -1), e.reshape(rows, -1), tol["dx"]),
        **{name: lambda a, e, name=name: partial_sum_cause(
            a, backward_terms(grad, x, normalized_shape)[name], tol[name], name)
           for name in ("dweight", "dbias")}}
    for name, actual, wanted in zip(("dx", "dweight", "dbias"), result, expected):
        if wanted is None:
            assert actual is None, f"{name} {case}: expected None, got {type(actual).__name__}."
        else:
            assert_diagnosed(actual, wanted, f"{name} {case}",
                             lambda dx=name == "dx": backward_mistakes(g, x, axes) if dx else {},
                             lambda a=actual, e=wanted, name=name: signatures[name](a, e),
                             **tol[name])
    untouched(case)
    if measured:
        check_memory(peak, x, normalized_shape, case, "dx")


@exercise("6.6", "layer_norm_fast.layer_norm_backward_fast")
def visible_6_6():
    rng = np.random.default_rng(0)
    f32 = np.float32
    check_fast_backward((1 + rng.standard_normal((2048, 1024))).astype(f32), (1024,),
                        rng.standard_normal(1024).astype(f32),
                        rng.standard_normal(1024).astype(f32))
    check_fast_backward(rng.standard_normal((601, 256)).astype(f32), (256,),
                        rng.standard_normal(256).astype(f32),
                        rng.standard_normal(256).astype(f32))  # 601 rows: no block divides
    check_fast_backward(rng.standard_normal((2, 3, 4)).astype(f32), (3, 4),
                        rng.standard_normal((3, 4)).astype(f32),
                        rng.standard_normal((3, 4)).astype(f32))
