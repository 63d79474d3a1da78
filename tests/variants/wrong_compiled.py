"""Realistic wrong Numba kernels for Exercises 7.3, 7.4 (normlib/layer_norm_compiled.py) and
9.5 (normlib/fused_add_norm.py): every one must fail its graded check
(tests/test_graders.py), and its visible check must name the cause (tests/test_diagnosis.py). Keyed by exercise number, then by the mistake's
name. Each is compiled on its first call, for float32 and float64, a second or two each,
and cached (cache=True, in tests/variants/__pycache__) for the other test processes. The
steps they share are tests/variants/compiled_rows.py's: what is written out here is the
mistake."""

import numpy as np
from numba import njit, prange

from tests.variants.compiled_rows import (
    FAST,
    PARTS,
    add_row,
    add_shares,
    row_means,
    row_statistics,
    scale_row,
    write_dx,
    write_row,
)
from tests.variants.mistake import Mistake

# Exercise 7.3: layer_norm_forward_compiled ---------------------------------------------------


@njit(parallel=True, fastmath=FAST, cache=True)
def forward_eps_outside_sqrt(x, weight, bias, eps):
    """rstd = 1 / (sqrt(var) + eps): eps added to the std, outside the square root."""
    rows = x.shape[0]
    y, mean, rstd = np.empty_like(x), np.empty(rows, x.dtype), np.empty(rows, x.dtype)
    for r in prange(rows):
        m, v = row_statistics(x, r)
        rs = 1.0 / (np.sqrt(v) + eps)
        write_row(y, x, r, m, rs, weight, bias)
        mean[r], rstd[r] = m, rs
    return y, mean, rstd


@njit(parallel=True, fastmath=FAST, cache=True)
def forward_float64_statistics(x, weight, bias, eps):
    """mean and rstd made with np.empty(rows): float64 whatever x's dtype."""
    rows = x.shape[0]
    y, mean, rstd = np.empty_like(x), np.empty(rows), np.empty(rows)
    for r in prange(rows):
        m, v = row_statistics(x, r)
        rs = 1.0 / np.sqrt(v + eps)
        write_row(y, x, r, m, rs, weight, bias)
        mean[r], rstd[r] = m, rs
    return y, mean, rstd


@njit(parallel=True, fastmath=True, cache=True)
def forward_fastmath_true(x, weight, bias, eps):
    """fastmath=True: LLVM may assume no NaN or inf, and drop their handling."""
    rows = x.shape[0]
    y, mean, rstd = np.empty_like(x), np.empty(rows, x.dtype), np.empty(rows, x.dtype)
    for r in prange(rows):
        m, v = row_statistics(x, r)
        rs = 1.0 / np.sqrt(v + eps)
        write_row(y, x, r, m, rs, weight, bias)
        mean[r], rstd[r] = m, rs
    return y, mean, rstd


@njit(parallel=True, fastmath=FAST, cache=True)
def forward_range_not_prange(x, weight, bias, eps):
    """parallel=True with a plain range over the rows: nothing runs in parallel."""
    rows = x.shape[0]
    y, mean, rstd = np.empty_like(x), np.empty(rows, x.dtype), np.empty(rows, x.dtype)
    for r in range(rows):
        m, v = row_statistics(x, r)
        rs = 1.0 / np.sqrt(v + eps)
        write_row(y, x, r, m, rs, weight, bias)
        mean[r], rstd[r] = m, rs
    return y, mean, rstd


@njit(parallel=True, fastmath=FAST, cache=True)
def forward_unbiased(x, weight, bias, eps):
    """The variance divided by H - 1 (the unbiased estimate)."""
    rows = x.shape[0]
    y, mean, rstd = np.empty_like(x), np.empty(rows, x.dtype), np.empty(rows, x.dtype)
    for r in prange(rows):
        m, v = row_statistics(x, r, 1)
        rs = 1.0 / np.sqrt(v + eps)
        write_row(y, x, r, m, rs, weight, bias)
        mean[r], rstd[r] = m, rs
    return y, mean, rstd


@njit(parallel=True, fastmath=FAST, cache=True)
def forward_centred_copy(x, weight, bias, eps):
    """x - mean kept in a full-size array between the passes: a temporary the size of x."""
    rows, h = x.shape
    y, mean, rstd = np.empty_like(x), np.empty(rows, x.dtype), np.empty(rows, x.dtype)
    xc = np.empty_like(x)
    for r in prange(rows):
        m, _ = row_statistics(x, r)
        v = 0.0
        for j in range(h):
            xc[r, j] = x[r, j] - m
            v += xc[r, j] ** 2
        rs = 1.0 / np.sqrt(v / h + eps)
        for j in range(h):
            y[r, j] = xc[r, j] * rs * weight[j] + bias[j]
        mean[r], rstd[r] = m, rs
    return y, mean, rstd


@njit(parallel=True, fastmath=FAST, cache=True)
def forward_one_past_the_row(x, weight, bias, eps):
    """The row's sum over range(h + 1): one element past the row's end. (The checks run it
    with its indexes checked first, as Python, never compiled as it is: past the last row,
    it reads outside x.)"""
    rows, h = x.shape
    y, mean, rstd = np.empty_like(x), np.empty(rows, x.dtype), np.empty(rows, x.dtype)
    for r in prange(rows):
        m = 0.0
        for j in range(h + 1):
            m += x[r, j]
        m /= h
        _, v = row_statistics(x, r)
        rs = 1.0 / np.sqrt(v + eps)
        write_row(y, x, r, m, rs, weight, bias)
        mean[r], rstd[r] = m, rs
    return y, mean, rstd


@njit(parallel=True, fastmath=FAST, cache=True)
def forward_constant_eps(x, weight, bias, eps):
    """eps written as the constant 1e-5: the caller's eps never used."""
    rows = x.shape[0]
    y, mean, rstd = np.empty_like(x), np.empty(rows, x.dtype), np.empty(rows, x.dtype)
    for r in prange(rows):
        m, v = row_statistics(x, r)
        rs = 1.0 / np.sqrt(v + 1e-5)
        write_row(y, x, r, m, rs, weight, bias)
        mean[r], rstd[r] = m, rs
    return y, mean, rstd


@njit(parallel=True, fastmath=FAST, cache=True)
def forward_shared_scratch(x, weight, bias, eps):
    """The centred row kept in one scratch row made before the loop: every iteration writes
    it at once (a race on the scratch row)."""
    rows, h = x.shape
    y, mean, rstd = np.empty_like(x), np.empty(rows, x.dtype), np.empty(rows, x.dtype)
    scratch = np.empty(h, x.dtype)
    for r in prange(rows):
        m, _ = row_statistics(x, r)
        v = 0.0
        for j in range(h):
            scratch[j] = x[r, j] - m
            v += scratch[j] ** 2
        rs = 1.0 / np.sqrt(v / h + eps)
        for j in range(h):
            y[r, j] = scratch[j] * rs * weight[j] + bias[j]
        mean[r], rstd[r] = m, rs
    return y, mean, rstd


# Exercise 7.4: layer_norm_backward_compiled --------------------------------------------------


@njit(fastmath=FAST, cache=True)
def add_to_totals(dweight, dbias, grad_output, x, r, mean, rstd):
    """Row r's shares added straight into the totals (H,): called from a loop over rows in
    parallel, a race that a reader of the kernel alone would not see."""
    for j in range(x.shape[1]):
        dweight[j] += grad_output[r, j] * (x[r, j] - mean[r]) * rstd[r]
        dbias[j] += grad_output[r, j]


@njit(parallel=True, fastmath=FAST, cache=True)
def backward_race_in_a_helper(grad_output, x, mean, rstd, weight):
    """dweight and dbias summed by a helper called from the parallel loop over rows."""
    rows, h = x.shape
    dx = np.empty_like(x)
    dweight, dbias = np.zeros(h, x.dtype), np.zeros(h, x.dtype)
    for r in prange(rows):
        add_to_totals(dweight, dbias, grad_output, x, r, mean, rstd)
        g_mean, gx_mean = row_means(grad_output, x, r, mean, rstd, weight)
        write_dx(dx, grad_output, x, r, mean, rstd, weight, g_mean, gx_mean)
    return dx, dweight, dbias


@njit(parallel=True, fastmath=FAST, cache=True)
def backward_float32_partials(grad_output, x, mean, rstd, weight):
    """The partial sums made float32 whatever x's dtype: a float64 gradient summed at
    float32's precision."""
    rows, h = x.shape
    dx = np.empty_like(x)
    parts = max(1, min(rows, PARTS))
    dw, db = np.zeros((parts, h), np.float32), np.zeros((parts, h), np.float32)
    for p in prange(parts):
        for r in range(p * rows // parts, (p + 1) * rows // parts):
            add_shares(dw, db, p, grad_output, x, r, mean, rstd)
            g_mean, gx_mean = row_means(grad_output, x, r, mean, rstd, weight)
            write_dx(dx, grad_output, x, r, mean, rstd, weight, g_mean, gx_mean)
    return dx, dw.sum(axis=0).astype(x.dtype), db.sum(axis=0).astype(x.dtype)


@njit(parallel=True, fastmath=FAST, cache=True)
def backward_race(grad_output, x, mean, rstd, weight):
    """dweight[j] += ... straight from the parallel loop over rows: a data race."""
    rows, h = x.shape
    dx = np.empty_like(x)
    dweight, dbias = np.zeros(h, x.dtype), np.zeros(h, x.dtype)
    for r in prange(rows):
        for j in range(h):
            dweight[j] += grad_output[r, j] * (x[r, j] - mean[r]) * rstd[r]
            dbias[j] += grad_output[r, j]
        g_mean, gx_mean = row_means(grad_output, x, r, mean, rstd, weight)
        write_dx(dx, grad_output, x, r, mean, rstd, weight, g_mean, gx_mean)
    return dx, dweight, dbias


@njit(parallel=True, fastmath=FAST, cache=True)
def backward_race_disguised(grad_output, x, mean, rstd, weight):
    """The race on dweight and dbias, its inner loop written range(r * 0, h): it starts at
    a value computed from the row, and still runs over every column in every row (issue
    58's attack: read as the row's own, it scored 4/4)."""
    rows, h = x.shape
    dx = np.empty_like(x)
    dweight, dbias = np.zeros(h, x.dtype), np.zeros(h, x.dtype)
    for r in prange(rows):
        for j in range(r * 0, h):
            dweight[j] += grad_output[r, j] * (x[r, j] - mean[r]) * rstd[r]
            dbias[j] += grad_output[r, j]
        g_mean, gx_mean = row_means(grad_output, x, r, mean, rstd, weight)
        write_dx(dx, grad_output, x, r, mean, rstd, weight, g_mean, gx_mean)
    return dx, dweight, dbias


@njit(parallel=True, fastmath=FAST, cache=True)
def backward_float64_sums(grad_output, x, mean, rstd, weight):
    """dweight and dbias returned as the float64 sums of the partials, never cast back."""
    rows, h = x.shape
    dx = np.empty_like(x)
    parts = max(1, min(rows, PARTS))
    dw, db = np.zeros((parts, h)), np.zeros((parts, h))
    for p in prange(parts):
        for r in range(p * rows // parts, (p + 1) * rows // parts):
            add_shares(dw, db, p, grad_output, x, r, mean, rstd)
            g_mean, gx_mean = row_means(grad_output, x, r, mean, rstd, weight)
            write_dx(dx, grad_output, x, r, mean, rstd, weight, g_mean, gx_mean)
    return dx, dw.sum(axis=0), db.sum(axis=0)


@njit(parallel=True, fastmath=FAST, cache=True)
def backward_missing_mean_term(grad_output, x, mean, rstd, weight):
    """dx without the mean(g) term: the gradient through the mean is forgotten."""
    rows, h = x.shape
    dx = np.empty_like(x)
    parts = max(1, min(rows, PARTS))
    dw, db = np.zeros((parts, h)), np.zeros((parts, h))
    for p in prange(parts):
        for r in range(p * rows // parts, (p + 1) * rows // parts):
            add_shares(dw, db, p, grad_output, x, r, mean, rstd)
            _, gx_mean = row_means(grad_output, x, r, mean, rstd, weight)
            write_dx(dx, grad_output, x, r, mean, rstd, weight, 0.0, gx_mean)
    return dx, dw.sum(axis=0).astype(x.dtype), db.sum(axis=0).astype(x.dtype)


@njit(parallel=True, fastmath=True, cache=True)
def backward_fastmath_true(grad_output, x, mean, rstd, weight):
    """fastmath=True on the backward: LLVM may drop NaN and inf handling."""
    rows, h = x.shape
    dx = np.empty_like(x)
    parts = max(1, min(rows, PARTS))
    dw, db = np.zeros((parts, h)), np.zeros((parts, h))
    for p in prange(parts):
        for r in range(p * rows // parts, (p + 1) * rows // parts):
            add_shares(dw, db, p, grad_output, x, r, mean, rstd)
            g_mean, gx_mean = row_means(grad_output, x, r, mean, rstd, weight)
            write_dx(dx, grad_output, x, r, mean, rstd, weight, g_mean, gx_mean)
    return dx, dw.sum(axis=0).astype(x.dtype), db.sum(axis=0).astype(x.dtype)


@njit(parallel=True, fastmath=FAST, cache=True)
def backward_x_hat_array(grad_output, x, mean, rstd, weight):
    """x_hat computed for every row first, into an array the size of x, then used."""
    rows, h = x.shape
    x_hat = np.empty_like(x)
    for r in prange(rows):
        for j in range(h):
            x_hat[r, j] = (x[r, j] - mean[r]) * rstd[r]
    dx = np.empty_like(x)
    for r in prange(rows):
        g_mean, gx_mean = row_means(grad_output, x, r, mean, rstd, weight)
        write_dx(dx, grad_output, x, r, mean, rstd, weight, g_mean, gx_mean)
    dweight, dbias = np.empty(h, x.dtype), np.empty(h, x.dtype)
    for j in prange(h):
        sw, sb = 0.0, 0.0
        for r in range(rows):
            sw += grad_output[r, j] * x_hat[r, j]
            sb += grad_output[r, j]
        dweight[j], dbias[j] = sw, sb
    return dx, dweight, dbias


RACES = {"7.3": ["a scratch row shared by every iteration"],  # the data races, each of
         "7.4": ["a race on dweight and dbias", "a race in a helper the loop calls",
                 "a race in a loop written range(r * 0, h)"]}  # which
# must fail every run (tests/test_diagnosis.py), not the runs whose threads happen to meet

# Exercise 9.5: fused_add_rms_norm (Numba; compiled on first use, cached) --------------------


@njit(parallel=True, fastmath=FAST, cache=True)
def fused_norm_of_x(x, residual, weight, eps):
    """The norm of the sublayer's output alone, not of the stream."""
    rows, h = x.shape
    y, stream = np.empty_like(x), np.empty_like(x)
    for r in prange(rows):
        add_row(stream, x, residual, r)
        squares = 0.0
        for j in range(h):
            squares += x[r, j] * x[r, j]
        scale_row(y, x, r, 1.0 / np.sqrt(squares / h + eps), weight)
    return y, stream


@njit(parallel=True, fastmath=FAST, cache=True)
def fused_layer_norm(x, residual, weight, eps):
    """The mean subtracted: a LayerNorm (without bias), not an RMSNorm."""
    rows = x.shape[0]
    y, stream = np.empty_like(x), np.empty_like(x)
    for r in prange(rows):
        add_row(stream, x, residual, r)
        m, v = row_statistics(stream, r)
        write_row(y, stream, r, m, 1.0 / np.sqrt(v + eps), weight, np.zeros_like(weight))
    return y, stream


@njit(parallel=True, fastmath=FAST, cache=True)
def fused_eps_outside(x, residual, weight, eps):
    """1 / (sqrt(mean square) + eps)."""
    rows, h = x.shape
    y, stream = np.empty_like(x), np.empty_like(x)
    for r in prange(rows):
        squares = add_row(stream, x, residual, r)
        scale_row(y, stream, r, 1.0 / (np.sqrt(squares / h) + eps), weight)
    return y, stream


@njit(parallel=True, fastmath=FAST, cache=True)
def fused_no_weight(x, residual, weight, eps):
    rows, h = x.shape
    y, stream = np.empty_like(x), np.empty_like(x)
    for r in prange(rows):
        squares = add_row(stream, x, residual, r)
        scale_row(y, stream, r, 1.0 / np.sqrt(squares / h + eps), np.ones_like(weight))
    return y, stream


@njit(parallel=True, fastmath=FAST, cache=True)
def fused_in_place(x, residual, weight, eps):
    """vLLM's way, here against the contract: the results written into the inputs."""
    rows, h = x.shape
    for r in prange(rows):
        squares = add_row(residual, x, residual, r)
        scale_row(x, residual, r, 1.0 / np.sqrt(squares / h + eps), weight)
    return x, residual


@njit(parallel=True, fastmath=FAST, cache=True)
def fused_swapped(x, residual, weight, eps):
    """(stream, y): the outputs in the wrong order."""
    rows, h = x.shape
    y, stream = np.empty_like(x), np.empty_like(x)
    for r in prange(rows):
        squares = add_row(stream, x, residual, r)
        scale_row(y, stream, r, 1.0 / np.sqrt(squares / h + eps), weight)
    return stream, y


@njit(parallel=True, fastmath=FAST, cache=True)
def fused_old_stream(x, residual, weight, eps):
    """The norm of the sum, but the stream returned is the residual as it came."""
    rows, h = x.shape
    y, stream = np.empty_like(x), np.empty_like(x)
    for r in prange(rows):
        squares = add_row(y, x, residual, r)  # (the sum, in y for now)
        scale_row(y, y, r, 1.0 / np.sqrt(squares / h + eps), weight)
        for j in range(h):
            stream[r, j] = residual[r, j]
    return y, stream


@njit(parallel=True, fastmath=FAST, cache=True)
def fused_squares_array(x, residual, weight, eps):
    """The squares kept in a full-size array, summed row by row after."""
    stream = x + residual  # (R, H): the output, NumPy style
    squares = stream.astype(np.float64) ** 2  # (R, H) float64: a temporary twice x's size
    rows, h = x.shape
    y = np.empty_like(x)
    for r in prange(rows):
        scale_row(y, stream, r, 1.0 / np.sqrt(squares[r].sum() / h + eps), weight)
    return y, stream


@njit(parallel=True, fastmath=FAST, cache=True)
def fused_shared_squares(x, residual, weight, eps):
    """One accumulator array for every row: the threads add into the same element."""
    rows, h = x.shape
    y, stream = np.empty_like(x), np.empty_like(x)
    acc = np.zeros(1)
    for r in prange(rows):
        acc[0] = 0.0
        for j in range(h):
            s = x[r, j] + residual[r, j]
            stream[r, j] = s
            acc[0] += s * s
        scale_row(y, stream, r, 1.0 / np.sqrt(acc[0] / h + eps), weight)
    return y, stream


@njit(fastmath=FAST, cache=True)
def fused_one_thread(x, residual, weight, eps):
    """range, not prange: right values on one thread."""
    rows, h = x.shape
    y, stream = np.empty_like(x), np.empty_like(x)
    for r in range(rows):
        squares = add_row(stream, x, residual, r)
        scale_row(y, stream, r, 1.0 / np.sqrt(squares / h + eps), weight)
    return y, stream


WRONG = {
    "7.3": {"eps outside the square root": Mistake(forward_eps_outside_sqrt,
                                                   "eps is added to the std"),
            "float64 statistics": Mistake(forward_float64_statistics,
                                          "float64 unless given a dtype"),
            "fastmath=True": Mistake(forward_fastmath_true, "fastmath=True"),
            "no prange": Mistake(forward_range_not_prange, "it runs on one thread"),
            "the unbiased variance": Mistake(forward_unbiased, "unbiased"),
            "a full-size temporary": Mistake(forward_centred_copy, "full-size temporar"),
            "one past the row's end": Mistake(forward_one_past_the_row, "indexes outside an "
                                                                        "array"),
            "a scratch row shared by every iteration": Mistake(forward_shared_scratch,
                                                               "writes scratch[...]"),
            "eps written as a constant": Mistake(forward_constant_eps,
                                                 "eps=1e-05 is used, not the eps=0.1 given")},
    "7.4": {"a race on dweight and dbias": Mistake(backward_race, "a data race"),
            "float64 parameter gradients": Mistake(backward_float64_sums,
                                                   "float64 unless given a dtype"),
            "missing mean term": Mistake(backward_missing_mean_term,
                                         "the mean's term is missing"),
            "fastmath=True": Mistake(backward_fastmath_true, "fastmath=True"),
            "a full-size temporary": Mistake(backward_x_hat_array, "full-size temporar"),
            "a race in a loop written range(r * 0, h)": Mistake(backward_race_disguised,
                                                                "a data race"),
            "a race in a helper the loop calls": Mistake(
                backward_race_in_a_helper, "calls add_to_totals, whose line"),
            "float32 partial sums": Mistake(backward_float32_partials,
                                            "float32's precision")},
    "9.5": {"the norm of x alone": Mistake(fused_norm_of_x, "reads x alone"),
            "a LayerNorm": Mistake(fused_layer_norm, "the mean was subtracted"),
            "eps outside the square root": Mistake(fused_eps_outside, "outside the square root"),
            "no weight": Mistake(fused_no_weight, "the weight is missing"),
            "written in place": Mistake(fused_in_place, "modified in place"),
            "the outputs swapped": Mistake(fused_swapped, "swapped"),
            "the old stream returned": Mistake(fused_old_stream, "x was never added"),
            "the squares as a full-size array": Mistake(fused_squares_array,
                                                        "full-size temporar"),
            "one accumulator for every row": Mistake(fused_shared_squares, "a data race"),
            "no prange": Mistake(fused_one_thread, "it runs on one thread")},
}
