"""Correct Numba kernels for Exercises 7.3, 7.4 and 9.5 written otherwise than the reference:
the checks must pass them (tests/test_graders.py, tests/test_diagnosis.py). Cached like
tests/variants/wrong_compiled.py's, but the one that calls get_num_threads(); the row's steps
they share are tests/variants/compiled_rows.py's."""

import numpy as np
from numba import get_num_threads, get_thread_id, njit, prange

from tests.variants.compiled_rows import FAST, row_means, write_dx


@njit(parallel=True, fastmath=FAST, cache=True)
def forward_welford(x, weight, bias, eps):
    """Welford's update over each row, one pass, then the output."""
    rows, h = x.shape
    y = np.empty_like(x)
    mean, rstd = np.empty(rows, x.dtype), np.empty(rows, x.dtype)
    for r in prange(rows):
        m, m2 = 0.0, 0.0
        for j in range(h):
            delta = x[r, j] - m
            m += delta / (j + 1)
            m2 += delta * (x[r, j] - m)
        rs = 1.0 / np.sqrt(m2 / h + eps)
        for j in range(h):
            y[r, j] = (x[r, j] - m) * rs * weight[j] + bias[j]
        mean[r], rstd[r] = m, rs
    return y, mean, rstd


@njit(parallel=True, cache=True)
def forward_blocks_with_scratch(x, weight, bias, eps):
    """Blocks of 16 rows per iteration, each row centred into a scratch row of the
    iteration's own; strict floating point (no fastmath)."""
    rows, h = x.shape
    y = np.empty_like(x)
    mean, rstd = np.empty(rows, x.dtype), np.empty(rows, x.dtype)
    blocks = (rows + 15) // 16
    for block in prange(blocks):
        row = np.empty(h)  # (H,) float64
        for r in range(16 * block, min(rows, 16 * block + 16)):
            m = x[r].astype(np.float64).sum() / h
            for j in range(h):
                row[j] = x[r, j] - m
            rs = 1.0 / np.sqrt((row * row).sum() / h + eps)
            for j in range(h):
                y[r, j] = row[j] * rs * weight[j] + bias[j]
            mean[r], rstd[r] = m, rs
    return y, mean, rstd


@njit(parallel=True, fastmath=FAST)  # (not cached: get_num_threads() is not)
def backward_thread_partials(grad_output, x, mean, rstd, weight):
    """A partial sum per thread, indexed by numba.get_thread_id(), over a prange of rows."""
    rows, h = x.shape
    dx = np.empty_like(x)
    dw, db = np.zeros((get_num_threads(), h)), np.zeros((get_num_threads(), h))
    for r in prange(rows):
        t = get_thread_id()
        for j in range(h):
            dw[t, j] += grad_output[r, j] * (x[r, j] - mean[r]) * rstd[r]
            db[t, j] += grad_output[r, j]
        g_mean, gx_mean = row_means(grad_output, x, r, mean, rstd, weight)
        write_dx(dx, grad_output, x, r, mean, rstd, weight, g_mean, gx_mean)
    return dx, dw.sum(axis=0).astype(x.dtype), db.sum(axis=0).astype(x.dtype)


@njit(parallel=True, fastmath=FAST, cache=True)
def backward_by_columns(grad_output, x, mean, rstd, weight):
    """dx over rows, then dweight and dbias over columns (each column one thread's):
    two parallel loops, no partial sums."""
    rows, h = x.shape
    dx = np.empty_like(x)
    for r in prange(rows):
        g_mean, gx_mean = row_means(grad_output, x, r, mean, rstd, weight)
        write_dx(dx, grad_output, x, r, mean, rstd, weight, g_mean, gx_mean)
    dweight, dbias = np.empty(h, x.dtype), np.empty(h, x.dtype)
    for j in prange(h):
        sw, sb = 0.0, 0.0
        for r in range(rows):
            sw += grad_output[r, j] * (x[r, j] - mean[r]) * rstd[r]
            sb += grad_output[r, j]
        dweight[j], dbias[j] = sw, sb
    return dx, dweight, dbias


# Exercise 9.5: fused_add_rms_norm (Numba) ---------------------------------------------------


@njit(parallel=True, fastmath=FAST, cache=True)
def fused_three_passes(x, residual, weight, eps):
    """The add, the squares and the norm each a pass of their own over the row (the last two
    from the cache), each square cast to float64 first, rsqrt written as a power."""
    rows, h = x.shape
    stream = np.empty_like(x)
    y = np.empty_like(x)
    for r in prange(rows):
        for j in range(h):
            stream[r, j] = residual[r, j] + x[r, j]
        squares = np.float64(0.0)
        for j in range(h):
            squares += np.float64(stream[r, j]) ** 2
        rs = (squares / h + eps) ** -0.5
        for j in range(h):
            y[r, j] = weight[j] * (stream[r, j] * rs)
    return y, stream


@njit(parallel=True, fastmath=FAST, cache=True)
def fused_row_slices(x, residual, weight, eps):
    """NumPy on one row at a time inside the parallel loop: row-sized scratch, never the
    whole array's."""
    rows, h = x.shape
    y, stream = np.empty_like(x), np.empty_like(x)
    for r in prange(rows):
        stream[r, :] = x[r, :] + residual[r, :]
        row = stream[r, :].astype(np.float64)  # (H,): one row's scratch
        rs = 1.0 / np.sqrt(np.mean(row * row) + eps)
        y[r, :] = (row * rs * weight).astype(x.dtype)
    return y, stream


RIGHT = {
    "7.3": {"Welford in the row's loop": forward_welford,
            "blocks of rows, a scratch row, strict": forward_blocks_with_scratch},
    "7.4": {"a partial sum per thread id": backward_thread_partials,
            "dweight and dbias by columns": backward_by_columns},
    "9.5": {"three passes, a power for rsqrt": fused_three_passes,
            "NumPy on row slices": fused_row_slices},
}
