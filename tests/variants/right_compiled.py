"""Correct Numba kernels for Exercises 7.3 and 7.4 written otherwise than the reference:
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


RIGHT = {
    "7.3": {"Welford in the row's loop": forward_welford,
            "blocks of rows, a scratch row, strict": forward_blocks_with_scratch},
    "7.4": {"a partial sum per thread id": backward_thread_partials,
            "dweight and dbias by columns": backward_by_columns},
}
