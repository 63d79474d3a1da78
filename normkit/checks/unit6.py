"""Unit 6's checks: Exercises 6.1 (welford), 6.2 (welford_merge), 6.3 (layer_norm_mixed),
6.4 (rms_norm_mixed) and 6.5 (layer_norm_param_grads_mixed).

Each check function compares your result with the exact one (computed in float64, rounded
to x's dtype), in value, shape and dtype, within the error model's tolerances
(normkit.testing); the 16-bit ones (6.3, 6.4, normkit.testing.check_mixed) within 2 eps of
their dtype, 6.5's sums within the error model's bound for a float32 accumulator. A wrong
result is named by the classic mistake it matches: each check computes what those mistakes
give (exactly, in float64) or knows their signature (the one-pass formula's cancellation, a
sum accumulated in 16 bits). Your function is imported when a check runs, so it is always
your file as it is now.
"""


import math

import numpy as np
import torch

from normkit import diagnosis
from normkit.checks import exercise
from normkit.checks.unit1 import affine, normalized_axes
from normkit.testing import (
    LAMBDA,
    MARGIN,
    ROUNDINGS,
    CheckFailed,
    assert_close,
    check_mixed,
    close,
    exact_welford_state,
    norm_tolerance,
    tolerance,
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
        (f"count {case}: expected the int {count}, got {result[0]!r}.\n  Where: the state's "
         "count, its first item (the number of values along x's last axis)")
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
    assert result[0] == count, (f"count {case}: expected {count}, got {result[0]!r}.\n  Where: "
                                "the merged state's count, its first item (from both "
                                "states' counts)")
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
        "eps is added to the std; torch's contract, which this course's kernels follow, adds "
        "it to the variance, under the square root (notebook 06, section 3)": eps_on_std}
    if last_axis_cause(normalized_shape):
        found[last_axis_cause(normalized_shape)] = last_axis
    return found


@exercise("6.3", "mixed_precision.layer_norm_mixed")
def visible_6_3():
    from normlib.mixed_precision import layer_norm_mixed

    h = torch.float16

    def check(x, shape, *params, **eps):
        check_mixed(layer_norm_mixed, torch.nn.functional.layer_norm, x, shape, *params,
                    mistakes=layer_norm_mistakes(h, shape), **eps)

    check(randn(h, 4, 64, seed=1), (64,), randn(h, 64, seed=2), randn(h, 64, seed=3))
    check(randn(h, 4, 256, scale=300), (256,), randn(h, 256, seed=2),
          randn(h, 256, seed=3))  # x ** 2 overflows float16
    check(randn(h, 2, 4096, offset=20, scale=3), (4096,))  # so does the sum
    check(randn(h, 4, 64, offset=100, seed=5), (64,))  # the mean's rounding shows
    check(randn(h, 4, 32, scale=1e-3, seed=6), (32,))  # a variance below eps
    check(randn(h, 2, 3, 8, seed=8), (3, 8), randn(h, 3, 8, seed=9))  # two axes
    check(randn(h, 4, 16, scale=0.5, seed=10), (16,), eps=0.5)  # an eps of its own


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
        "eps is added to the RMS; torch's contract, which this course's kernels follow, adds "
        "it to the mean square, under the square root (notebook 06, section 3)": eps_on_rms}
    if last_axis_cause(normalized_shape):
        found[last_axis_cause(normalized_shape)] = last_axis
    return found


@exercise("6.4", "mixed_precision.rms_norm_mixed")
def visible_6_4():
    from normlib.mixed_precision import rms_norm_mixed

    h = torch.float16

    def check(x, shape, *params, **eps):
        check_mixed(rms_norm_mixed, rms_exact, x, shape, *params,
                    mistakes=rms_norm_mistakes(h, shape), **eps)

    check(randn(h, 4, 64, seed=1), (64,), randn(h, 64, seed=2))
    check(randn(h, 4, 256, scale=300), (256,), randn(h, 256, seed=2))  # x ** 2 overflows
    check(randn(h, 2, 4096, offset=20, scale=3), (4096,))
    check(randn(h, 4, 32, scale=1e-3, seed=6), (32,))  # a mean square below float16's eps
    check(randn(h, 2, 3, 8, seed=8), (3, 8), randn(h, 3, 8, seed=9))  # two axes
    check(randn(h, 4, 16, scale=0.5, seed=10), (16,), eps=0.5)  # an eps of its own


# Exercise 6.5: the backward's reductions in low precision ---------------------------------
# (dweight and dbias of a 16-bit LayerNorm: sums over every row, accumulated in float32)


def saved_statistics(x, normalized_shape, eps=1e-5):
    """mean and rstd (*B, 1, .., 1) as torch's LayerNorm forward saves them for x, no
    weight or bias (torch.ops.aten.native_layer_norm): for a 16-bit x, torch 2.13's CPU
    kernel computes them in float32 and saves them rounded to x's dtype."""
    _, mean, rstd = torch.ops.aten.native_layer_norm(x, list(normalized_shape), None, None,
                                                     eps)
    return mean, rstd


def param_grad_terms(grad_output, x, normalized_shape, mean, rstd):
    """{"dweight", "dbias"}: each row's term of the two sums, computed exactly (float64) from
    the numbers given, (R, *S) each: grad_output times x_hat = (x - mean) * rstd, and
    grad_output."""
    rows = (-1, *normalized_shape)
    g = grad_output.double()  # (*B, *S)
    x_hat = (x.double() - mean.double()) * rstd.double()  # (*B, *S)
    return {"dweight": (g * x_hat).reshape(rows), "dbias": g.reshape(rows)}


def param_grads_tolerance(terms, dtype):
    """{"rtol", "atol"} for a sum over the rows of terms (R, *S) (float64), computed in
    float32 and rounded once to dtype, against e, the exact sum rounded to dtype. A correct
    result is the float32 sum, off by some delta before its rounding, rounded once: it
    lies within half a unit in the last place, plus delta, plus half a unit (e's own
    rounding) of e, so within eps * |e| + delta (eps = torch.finfo(dtype).eps; a unit at e
    is at most eps * |e|). rtol = 2 eps covers the units, as check_mixed allows; atol is
    MARGIN times the error model's bound on delta (normkit.testing): u32 (ROUNDINGS +
    LAMBDA sqrt(R)) times the largest column's sum of |terms|, however the rows are
    ordered, in units of max(1, max |e|) as assert_close reads atol. It matters only where
    the rows' terms cancel, the sum small against them."""
    u32, rows = 2.0**-24, terms.shape[0]
    size = float(terms.abs().sum(dim=0).max()) if terms.numel() else 0.0
    bound = u32 * (ROUNDINGS + LAMBDA * math.sqrt(rows)) * size
    scale = max(1.0, float(in_dtype(terms.sum(dim=0), dtype).abs().max()))  # (e's largest)
    return {"rtol": 2 * torch.finfo(dtype).eps, "atol": MARGIN * bound / scale}


def running_sum(terms, dtype, chunks=1):
    """The sum over the rows of terms (R, *S) (float64) accumulated in dtype, row by row,
    total = dtype(total + term), as a loop adding into a tensor of dtype does; in `chunks`
    contiguous parts of the rows, each with a running sum of its own, the parts' sums
    added at the end and rounded once (float64, *S). torch's own CPU LayerNorm backward
    sums a 16-bit x so, one part per thread: its per-thread buffers of dweight and dbias
    have x's dtype (aten/src/ATen/native/cpu/layer_norm_kernel.cpp, torch 2.11 to 2.13)."""
    size = -(-terms.shape[0] // chunks)  # rows per part, as at::parallel_for splits them
    total = torch.zeros(terms.shape[1:], dtype=torch.float64)  # (*S)
    for start in range(0, terms.shape[0], size):
        part = torch.zeros(terms.shape[1:], dtype=torch.float64)  # (*S)
        for term in terms[start:start + size]:
            part = (part + term).to(dtype).double()
        total += part
    return total.to(dtype).double()


def in_dtype(t, dtype):
    """t (float64) rounded to dtype, as float64: one operation computed in dtype (torch
    computes a 16-bit product or difference of 16-bit numbers in float32, where it is exact,
    and rounds it once). torch converts float64 to a 16-bit dtype through float32: a second
    rounding, which can add 2**-24 relative to the half unit of the first."""
    return t.to(dtype).double()


def accumulated_cause(name, rows, reached, chunks):
    """The likely cause of a sum over the rows accumulated in the 16-bit dtype `name`, in
    `chunks` running sums, which reached `reached` of the exact sum."""
    where = ("" if chunks == 1 else f" (in {chunks} running sums, one per thread, as torch's "
             "own CPU LayerNorm backward keeps them: its buffers have x's dtype)")
    stalled = (f"; over these {rows} rows it reached {reached:.0%} of the exact sum"
               if reached < 0.9 else "")
    return (f"the sum over the rows was accumulated in {name}{where}: every row's addition "
            "rounds the running sum to 16 bits, and once a row's term falls below half a "
            "unit in its last place the sum stops growing (in bfloat16 at 256 to 512 times "
            f"the term){stalled}. Accumulate in float32 and round once, at the end")


def rounded_cause(what, name, cancel):
    """The likely cause of terms rounded to the 16-bit dtype `name` before a float32 sum
    (what: which value was), where the sums are `cancel` of their terms' magnitudes."""
    left = (f", and where the rows' terms cancel, as here (the sums are {cancel:.1g} times "
            "the sums of their magnitudes), those roundings are all that is left"
            if cancel < 0.1 else "")
    return (f"{what} rounded to {name} before the sum: each row's term then carries a "
            f"rounding of up to half a unit of {name}{left}. Compute them in float32")


def param_grads_mistakes(grad_output, x, normalized_shape, mean, rstd):
    """{"dweight", "dbias": {likely cause: what that mistake gives (float64, *S)}} for
    Exercise 6.5, computed exactly (float64): the sum over the rows accumulated in x's
    dtype (one running sum, or one per thread of this process, as torch's CPU kernel
    does), x_hat or the products rounded to x's dtype before a float32 sum."""
    dtype, name = x.dtype, dtype_name(x.dtype)
    terms = param_grad_terms(grad_output, x, normalized_shape, mean, rstd)
    rows = (-1, *normalized_shape)
    g = grad_output.double().reshape(rows)  # (R, *S)
    x_hat = in_dtype(in_dtype(x.double() - mean.double(), dtype) * rstd.double(), dtype)
    x_hat = x_hat.reshape(rows)  # (R, *S): x_hat computed in dtype
    exact = float(terms["dbias"].sum(dim=0).abs().max())
    size = float(terms["dweight"].abs().sum(dim=0).max())
    cancel = float(terms["dweight"].sum(dim=0).abs().max()) / size if size else 1.0
    found = {
        "dweight": {rounded_cause("the products grad_output * x_hat were", name, cancel):
                        in_dtype(g * x_hat, dtype).sum(dim=0),
                    rounded_cause("x_hat was", name, cancel): (g * x_hat).sum(dim=0)},
        "dbias": {}}
    for chunks in sorted({1, min(torch.get_num_threads(), len(g))}):
        stalled = running_sum(terms["dbias"], dtype, chunks)  # (*S)
        reached = float(stalled.abs().max()) / exact if exact else 1.0
        cause = accumulated_cause(name, len(g), reached, chunks)
        found["dweight"][cause] = running_sum(terms["dweight"], dtype, chunks)
        found["dbias"][cause] = stalled
    return found


def param_grads_shape_cause(actual, x, normalized_shape):
    """The likely cause of a parameter gradient of the wrong shape, or ""."""
    batch = tuple(range(x.dim() - len(normalized_shape)))
    meaning = (f"the sum over the rows (all of x's axes but normalized_shape="
               f"{tuple(normalized_shape)})")
    return (diagnosis.axes_cause(tuple(actual.shape), tuple(x.shape), batch, meaning,
                                 keepdims=False) or
            diagnosis.shape_cause(np.empty(tuple(actual.shape)),
                                  np.empty(tuple(normalized_shape))))


def check_param_grad(actual, expected, name, case, x, normalized_shape, mistakes, tol):
    """One parameter gradient: a tensor of exactly the shape normalized_shape and x's
    dtype, close to expected (float64, rounded to the dtype) within tol; a wrong value
    named by the mistake it matches (mistakes(): {likely cause: float64 tensor})."""
    dtype = x.dtype
    if not isinstance(actual, torch.Tensor):
        raise CheckFailed(f"{name} {case}: expected a torch.Tensor, got {type(actual).__name__}.")
    if tuple(actual.shape) != tuple(normalized_shape):
        cause = param_grads_shape_cause(actual, x, normalized_shape)
        raise CheckFailed(f"{name} {case}: expected shape {tuple(normalized_shape)}, got "
                          f"{diagnosis.shape_words(actual.shape, tuple(normalized_shape))}"
                          + (f".\n  Likely cause: {cause}." if cause else "."))
    if actual.dtype != dtype:
        wider = actual.is_floating_point() and actual.dtype.itemsize > dtype.itemsize
        cause = (f".\n  Likely cause: the result stayed in {dtype_name(actual.dtype)}, where "
                 f"it was summed; the parameters are x's dtype, and so are their gradients "
                 "(the optimizer adds them to the weight): round once, at the end"
                 if wider else "")
        raise CheckFailed(f"{name} {case}: expected dtype {dtype_name(dtype)}, got "
                          f"{dtype_name(actual.dtype)}" + cause + ".")
    assert_diagnosed(actual.detach().double().numpy(), expected.numpy(), f"{name} {case}",
                     lambda: {cause: v.numpy() for cause, v in mistakes().items()}, **tol)


def check_param_grads_mixed(grad_output, x, normalized_shape, eps=1e-5):
    """Your (dweight, dbias) for grad_output and x (*B, *S), with the mean and rstd that
    torch's forward saves (saved_statistics), against the exact sums over the rows
    (float64, from the same 16-bit numbers) rounded once to x's dtype: shape S and x's dtype
    exactly, values within param_grads_tolerance; no argument modified. dbias first (its
    terms are grad_output itself, so a 16-bit accumulator's stall is computed exactly),
    then dweight. A wrong value is named by the mistake it matches
    (param_grads_mistakes)."""
    from normlib.mixed_precision import layer_norm_param_grads_mixed

    mean, rstd = saved_statistics(x, normalized_shape, eps)
    terms = param_grad_terms(grad_output, x, normalized_shape, mean, rstd)
    expected = {name: in_dtype(t.sum(dim=0), x.dtype) for name, t in terms.items()}  # (*S)
    inputs = {"grad_output": grad_output, "x": x, "mean": mean, "rstd": rstd}
    saved = {name: t.clone() for name, t in inputs.items()}
    result = layer_norm_param_grads_mixed(grad_output, x, normalized_shape, mean, rstd)
    case = (f"for grad_output and x {tuple(x.shape)} {dtype_name(x.dtype)}, "
            f"normalized_shape={tuple(normalized_shape)}")
    for name, t in inputs.items():
        if not torch.equal(t, saved[name]):
            raise CheckFailed(f"{name} was modified in place {case}: a kernel must not write "
                              "into its inputs (autograd still holds them).")
    if not (isinstance(result, tuple) and len(result) == 2):
        raise CheckFailed(f"{case}: return (dweight, dbias), a tuple of two tensors.")
    found = {}

    def mistakes(name):
        if not found:
            found.update(param_grads_mistakes(grad_output, x, normalized_shape, mean, rstd))
        return found[name]

    for name, actual in (("dbias", result[1]), ("dweight", result[0])):
        check_param_grad(actual, expected[name], name, case, x, normalized_shape,
                         lambda name=name: mistakes(name),
                         param_grads_tolerance(terms[name], x.dtype))


def outlier_features(dtype, rows, features, spread=2.0, seed=0):
    """x (rows, features) of dtype: each feature (column) with an offset of its own, drawn
    with this spread, plus a standard normal sample: x_hat keeps one sign in most of a
    column, as in networks whose features carry large offsets, so a column's terms of
    dweight add up instead of cancelling."""
    offsets = randn(torch.float64, features, scale=spread, seed=seed + 1)  # (H,)
    return (offsets + randn(torch.float64, rows, features, seed=seed)).to(dtype)


def orthogonal_grad(x, normalized_shape, seed=0):
    """An upstream gradient (of x's shape and dtype) whose dweight is near 0: a random one
    minus its projection on x_hat in each column (float64), then rounded to x's dtype, as at
    a minimum of the loss in the weight. The rows' terms of dweight cancel, and what is left
    is about the size of the rounding of the terms in x's dtype."""
    rows = (-1, *normalized_shape)
    mean, rstd = saved_statistics(x, normalized_shape)
    x_hat = ((x.double() - mean.double()) * rstd.double()).reshape(rows)  # (R, *S)
    g = randn(torch.float64, *x_hat.shape, seed=seed)  # (R, *S)
    norm = (x_hat * x_hat).sum(dim=0).clamp_min(1e-30)  # (*S)
    return (g - x_hat * ((g * x_hat).sum(dim=0) / norm)).reshape(x.shape).to(x.dtype)


@exercise("6.5", "mixed_precision.layer_norm_param_grads_mixed")
def visible_6_5():
    b = torch.bfloat16
    # 4096 rows, gradients of one sign: a 16-bit running sum stalls far below the total
    check_param_grads_mixed(randn(b, 4096, 64, offset=1, scale=0.5, seed=3),
                            outlier_features(b, 4096, 64, seed=4), (64,))
    x = randn(b, 64, 256, offset=0.5, seed=5)  # dweight near 0: its terms cancel
    check_param_grads_mixed(orthogonal_grad(x, (256,), seed=6), x, (256,))
    check_param_grads_mixed(randn(b, 6, 16, seed=1), randn(b, 6, 16, seed=2), (16,))
    check_param_grads_mixed(randn(b, 4, 3, 8, seed=7), randn(b, 4, 3, 8, seed=8), (3, 8))

