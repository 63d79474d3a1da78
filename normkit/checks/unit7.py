"""Unit 7's checks: Exercises 7.1 (layer_norm_forward_fast), 7.2 (layer_norm_backward_fast),
7.3 (layer_norm_forward_compiled) and 7.4 (layer_norm_backward_compiled).

Each check function compares your result with the exact one (computed in float64, rounded
to x's dtype), in value, shape and dtype, within the error model's tolerances
(normkit.testing). The fast NumPy kernels' checks (7.1, 7.2) also measure the memory your
kernel allocates for an x of 8 MiB or more (normkit.testing.peak_memory); the compiled
kernels' (7.3, 7.4) compile your Numba kernel, read its code for a data race
(normkit.kernel_code) and run it on rows of both float dtypes. A wrong result is named by
the classic mistake it matches (a block skipped or not summed, eps outside the root, a race
on dweight). Your function is imported when a check runs, so it is always your file as it
is now.
"""


import functools
import math

import numpy as np

from normkit import diagnosis
from normkit.checks import Skipped, exercise
from normkit.checks.unit1 import forward_mistakes, normalized_axes, rstd_mistakes
from normkit.checks.unit6 import assert_diagnosed
from normkit.testing import (
    MEASURED,
    CheckFailed,
    backward_mistakes,
    close,
    guard_inputs,
    layer_norm_backward_tolerances,
    layer_norm_tolerances,
    no_measure,
    peak_memory,
    torch_layer_norm,
    torch_layer_norm_backward,
    torch_normalize,
)


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


@exercise("7.1", "layer_norm_fast.layer_norm_forward_fast")
def visible_7_1():
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
    # float64 (its precision, to the last digits), an eps of its own
    x64, w64 = rng.standard_normal((64, 32)), rng.standard_normal(32)  # (R, H), (H,)
    check_fast_forward(x64, (32,), w64, None, eps=0.5)
    # an offset of 1000: E[x^2] - E[x]^2 cancels
    check_fast_forward((1000 + rng.standard_normal((16, 48))).astype(f32), (48,))


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


@exercise("7.2", "layer_norm_fast.layer_norm_backward_fast")
def visible_7_2():
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
    check_fast_backward(rng.standard_normal((9, 16)).astype(f32), (16,), None,
                        rng.standard_normal(16).astype(f32), seed=5)  # a bias alone
    # float64 (its precision, to the last digits), no weight or bias
    check_fast_backward(rng.standard_normal((64, 32)), (32,))


# -- Exercises 7.3 and 7.4: the compiled, fused kernels (Numba) -----------------------------

def compiled_kernel(name):
    """Your kernel `name` of normlib/layer_norm_compiled.py. Where Numba is not installed,
    a Skipped that says so (the exercise is skipped, not failed)."""
    from normkit.kernel_code import NUMBA_INSTALL, numba_installed

    if not numba_installed():
        raise Skipped("Numba is not installed here, so Exercises 7.3 and 7.4 are skipped: "
                      f"{NUMBA_INSTALL}.")
    import normlib.layer_norm_compiled as compiled

    return getattr(compiled, name)


COMPILED_DTYPES = (np.float32, np.float64)  # the signatures a compiled kernel's checks use


def compile_rows(kernel, arrays, hidden):
    """Numba's compile step for a kernel of rows: one call per dtype the checks use
    (float32 and float64, in the visible cases and the hidden ones alike), on 2 rows of 3
    values, so that the checks' calls find it compiled and what they measure is the
    kernel's run alone. arrays(dtype) gives the call's arguments; hidden: the hidden tests'
    step, which checks no bounds (the visible step did)."""
    import warnings

    from numba.core.errors import NumbaPerformanceWarning

    with warnings.catch_warnings():  # (no prange: the check says so, in its own words)
        warnings.simplefilter("ignore", NumbaPerformanceWarning)
        if not hidden:
            check_bounds(kernel, arrays(np.float32))
        for dtype in COMPILED_DTYPES:
            kernel(*arrays(dtype))


def check_bounds(kernel, args):
    """Your kernel run once with its indexes checked, on the compile step's tiny arrays,
    before it runs as it is: compiled kernels check no index, so a loop one element too
    long would read or write past an array's end, and could crash the notebook's kernel.
    Run as Python first (its function, py_func: prange is range there, and NumPy checks
    every index as Numba's boundscheck=True does, negative ones wrapping in both), which
    takes microseconds where a compile with Numba's index checks takes a second or two; a
    kernel that only runs compiled (a feature of Numba's that Python lacks) is compiled
    with them instead (bounds_checked). (In the notebook and make check; at grading your
    code runs in the judge's runner, whose crash is the check's failure.)"""
    if hasattr(kernel, "remote_source") or not hasattr(kernel, "py_func"):
        return
    try:
        try:
            kernel.py_func(*(a.copy() if isinstance(a, np.ndarray) else a for a in args))
        except IndexError:
            raise
        except Exception:  # (not an index: what Python cannot run, Numba's checks can)
            bounds_checked(kernel.py_func)(*args)
    except IndexError as error:
        raise CheckFailed(f"{kernel.py_func.__name__} indexes outside an array on 2 rows of 3 "
                          f"values ({error}).\n  Likely cause: a loop one element too long, or "
                          "an index off by one (x[r, j + 1], range(h + 1)): a compiled kernel "
                          "checks no index, and would read or write past the array's "
                          "end.") from None


@functools.lru_cache(maxsize=8)
def bounds_checked(py_func):
    """py_func compiled with Numba's index checks on: once per function (a check run again
    on the same code compiles nothing; an edited file gives a new function)."""
    from numba import njit

    return njit(boundscheck=True)(py_func)


def _rows_of(dtype, seed=0):
    """(x (2, 3), weight (3,), bias (3,)) of dtype, for the compile step."""
    rng = np.random.default_rng(seed)
    return tuple(np.ascontiguousarray(rng.standard_normal(s).astype(dtype))
                 for s in ((2, 3), (3,), (3,)))


def code_problems(kernel):
    """A CheckFailed for what your kernel's code shows (normkit.kernel_code): no @njit,
    fastmath flags that drop NaN and inf handling, no parallel loop, a data race."""
    from normkit import kernel_code

    source, name = kernel_code.module_source(kernel)
    resolve = None if hasattr(kernel, "remote_source") else kernel_code.IMPORTS
    cause = kernel_code.code_cause(source, name, resolve) if source else ""
    if cause:
        raise CheckFailed(f"the code of {name} cannot pass.\n  Likely cause: {cause}.")


def check_dtype(result, name, x):
    """A result of x's dtype; where it is float64 for a float32 x, the likely cause."""
    if isinstance(result, np.ndarray) and result.dtype != x.dtype:
        cause = ("NumPy's np.empty(n) and np.zeros(n) are float64 unless given a dtype, in "
                 "Numba too, and so is a sum of float64 partial sums: make each result "
                 "np.empty(n, x.dtype), or cast it with .astype(x.dtype)"
                 if result.dtype == np.float64 else diagnosis.dtype_cause(result, x)
                 or f"{name} is made {result.dtype}: each result keeps x's dtype")
        raise CheckFailed(f"{name}: dtype {result.dtype}, expected {x.dtype}.\n"
                          f"  Likely cause: {cause}.")


def check_compiled_memory(kernel, args, x, output, outputs=1):
    """At most `outputs` times x's size (the outputs: y, or none for a kernel that writes
    in place) and a quarter of it allocated during the call (and 1 MiB): a fused kernel
    needs no full-size temporary. Measured like 7.1's (normkit.testing.peak_memory), after
    the compile step: compiling is not the kernel's memory."""
    if x.nbytes < MEASURED:
        return
    _, peak = peak_memory(kernel, *args)
    if peak > x.nbytes * (outputs + 0.25) + 2**20:
        arrays = round(peak / x.nbytes) - outputs
        raise CheckFailed(
            f"memory for x {x.shape} {x.dtype}: {peak / x.nbytes:.2f} times x's size allocated "
            f"during the call; at most {outputs + 0.25:g} ({output} and small arrays) "
            "allowed.\n  Likely "
            f"cause: about {max(arrays, 1)} full-size temporar{'ies' if arrays > 1 else 'y'} "
            f"besides {output}: a fused kernel keeps a row's intermediate values in scalars "
            "(or one row's scratch of its own), never in an array the size of x.")


def check_compiled_forward(x, weight, bias, eps=1e-5):
    """Your layer_norm_forward_compiled(x (R, H), weight, bias, eps): y (R, H), mean and
    rstd (R,) against torch's computed exactly (value, shape, dtype; 1.2's tolerances; NaN
    where torch gives NaN); x, weight and bias unchanged; its code free of races and of
    fastmath=True, with a parallel loop; for an x of 8 MiB or more, no full-size
    temporary. A wrong value is named by the mistake it matches (Unit 1's)."""
    kernel = compiled_kernel("layer_norm_forward_compiled")
    code_problems(kernel)
    shape = (x.shape[-1],)
    expected = torch_layer_norm(x, shape, weight, bias, eps)
    expected = (expected[0], expected[1].reshape(-1), expected[2].reshape(-1))
    tol = layer_norm_tolerances(x, shape, eps)
    untouched = guard_inputs(x=x, weight=weight, bias=bias)
    result = kernel(x, weight, bias, eps)
    case = f"for x {x.shape} {x.dtype}"
    assert isinstance(result, tuple) and len(result) == 3, "return (y, mean, rstd)."
    mistakes = {"y": lambda: forward_mistakes(x, shape, weight, bias, eps),
                "rstd": lambda: {c: r.reshape(-1) for c, r in
                                 rstd_mistakes(x, normalized_axes(x, shape), eps).items()}}
    for name, actual, wanted in zip(("y", "mean", "rstd"), result, expected):
        check_dtype(actual, f"{name} {case}", x)
        assert_diagnosed(actual, wanted, f"{name} {case}", mistakes.get(name, dict),
                         **tol[name])
    untouched(case)
    check_compiled_memory(kernel, (x, weight, bias, eps), x, "y")


def compile_7_3(hidden):
    compile_rows(compiled_kernel("layer_norm_forward_compiled"),
                 lambda dtype: (*_rows_of(dtype), 1e-5), hidden)


@exercise("7.3", "layer_norm_compiled.layer_norm_forward_compiled", compile=compile_7_3)
def visible_7_3():
    rng = np.random.default_rng(0)
    f32 = np.float32
    check_compiled_forward((1 + rng.standard_normal((2048, 1024))).astype(f32),
                           rng.standard_normal(1024).astype(f32),
                           rng.standard_normal(1024).astype(f32))
    check_compiled_forward(rng.standard_normal((601, 257)).astype(f32),  # H odd
                           rng.standard_normal(257).astype(f32), np.zeros(257, f32))
    check_compiled_forward((1e-3 * rng.standard_normal((8, 64))).astype(f32),  # var < eps
                           np.ones(64, f32), rng.standard_normal(64).astype(f32))
    # an offset of 1000 (E[x^2] - E[x]^2 cancels), an eps of its own
    check_compiled_forward((1000 + rng.standard_normal((16, 48))).astype(f32),
                           rng.standard_normal(48).astype(f32), np.zeros(48, f32), eps=0.1)
    # float64: its precision, to the last digits (statistics and sums in float64 too)
    check_compiled_forward(rng.standard_normal((40, 24)), rng.standard_normal(24),
                           rng.standard_normal(24))


def check_compiled_backward(x, weight, seed=0):
    """Your layer_norm_backward_compiled(grad_output, x (R, H), mean, rstd, weight): dx
    (R, H), dweight and dbias (H,) against torch autograd's computed exactly under a random
    upstream gradient (value, shape, dtype; 2.2's tolerances); no argument modified; its
    code free of races (dweight and dbias reduced in two stages) and of fastmath=True, with
    a parallel loop; for an x of 8 MiB or more, no full-size temporary besides dx. A wrong
    value is named by the mistake it matches (dx: normkit.testing.backward_mistakes;
    dweight, dbias: partial_sum_cause)."""
    kernel = compiled_kernel("layer_norm_backward_compiled")
    code_problems(kernel)
    shape = (x.shape[-1],)
    grad = np.random.default_rng(seed).standard_normal(x.shape).astype(x.dtype)
    _, mean, rstd = torch_layer_norm(x, shape, weight)
    mean, rstd = mean.reshape(-1), rstd.reshape(-1)  # (R,)
    expected = torch_layer_norm_backward(grad, x, shape, weight, np.zeros_like(weight))
    args = (grad, x, mean, rstd, weight)
    untouched = guard_inputs(grad_output=grad, x=x, mean=mean, rstd=rstd, weight=weight)
    result = kernel(*args)
    case = f"for x {x.shape} {x.dtype}"
    assert isinstance(result, tuple) and len(result) == 3, "return (dx, dweight, dbias)."
    tol = layer_norm_backward_tolerances(x, shape)
    g = grad.astype(np.float64) * weight  # (R, H) dL/dx_hat
    terms = backward_terms(grad, x, shape)
    for name, actual, wanted in zip(("dx", "dweight", "dbias"), result, expected):
        check_dtype(actual, f"{name} {case}", x)
        assert_diagnosed(actual, wanted, f"{name} {case}",
                         lambda dx=name == "dx": backward_mistakes(g, x, (1,)) if dx else {},
                         lambda a=actual, name=name: "" if name == "dx" else
                         partial_sum_cause(a, terms[name], tol[name], name), **tol[name])
    untouched(case)
    check_compiled_memory(kernel, args, x, "dx")


def compile_7_4(hidden):
    def arrays(dtype):
        x, weight, _ = _rows_of(dtype)
        return x, x, np.zeros(2, dtype), np.ones(2, dtype), weight  # (dy, x, mean, rstd, w)
    compile_rows(compiled_kernel("layer_norm_backward_compiled"), arrays, hidden)


@exercise("7.4", "layer_norm_compiled.layer_norm_backward_compiled", compile=compile_7_4)
def visible_7_4():
    rng = np.random.default_rng(0)
    f32 = np.float32
    check_compiled_backward((1 + rng.standard_normal((2048, 1024))).astype(f32),
                            rng.standard_normal(1024).astype(f32))
    check_compiled_backward(rng.standard_normal((601, 257)).astype(f32),  # H odd
                            rng.standard_normal(257).astype(f32), seed=1)
    check_compiled_backward(rng.standard_normal((3, 4)).astype(f32),
                            rng.standard_normal(4).astype(f32), seed=2)
    # float64: its precision, to the last digits (partial sums in float64 too)
    check_compiled_backward(rng.standard_normal((40, 24)), rng.standard_normal(24), seed=3)
