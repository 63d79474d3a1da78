"""A compiled, fused LayerNorm in Numba (Exercises 7.3 and 7.4): one pass over memory, every core.

The forward and backward of Exercises 1.2 and 2.2 as Numba kernels. A NumPy call makes one
pass over its block, on one thread; a compiled loop does all of a row's work while the row
is in the cache, so main memory sees one read of x and one write of the output, and `prange`
shares the rows among the cores. `@njit` compiles on the first call for each combination of
argument types (a second or two each). With `parallel=True`, the iterations of
`for r in prange(rows):` run on several threads: they must not depend on each other, and two
of them must never write the same element (a data race: both add, one write is lost).
`fastmath={"reassoc", "contract"}` lets LLVM reorder a sum (for SIMD) and fuse a multiply
and an add; never `fastmath=True`, whose no-NaN and no-inf flags let LLVM compile NaN and
inf handling away. Shapes: rows of x (R, H), C-contiguous, float32 or float64 (a caller
flattens x (*B, *S) to (R, prod(S)), a view); weight, bias (H,) of x's dtype (ones and zeros
where a layer has none); mean, rstd (R,), saved by the forward. Results are in x's dtype.
"""

import numpy as np
from numba import get_num_threads, njit, prange

# LLVM may reorder sums and fuse multiply-adds; it may not assume that no NaN or inf occurs
FAST = {"reassoc", "contract"}


@njit(parallel=True, fastmath=FAST)
def layer_norm_forward_compiled(x, weight, bias, eps):
    """Exercise 7.3: LayerNorm forward over the rows of x, fused: each row's statistics and
    output computed while the row is in the cache, the rows shared among the threads.

    Args:
        x: (R, H) float32 or float64, C-contiguous; not modified.
        weight, bias: (H,) of x's dtype.
        eps: added to the biased variance inside the square root.
    Returns:
        y (R, H), and the saved mean and rstd (R,), all in x's dtype.
    """
    ### BEGIN SOLUTION
    rows, h = x.shape
    y = np.empty_like(x)  # (R, H): the one full-size allocation
    mean = np.empty(rows, x.dtype)  # (R,)
    rstd = np.empty(rows, x.dtype)  # (R,)
    for r in prange(rows):
        # Two passes over the row for its statistics: from main memory the first time, from
        # the cache the second, so as accurate as two-pass and as cheap as one pass.
        total = 0.0  # float64 accumulators: 16 digits whatever x's dtype
        for j in range(h):
            total += x[r, j]
        m = total / h
        squares = 0.0
        for j in range(h):
            d = x[r, j] - m
            squares += d * d
        rs = 1.0 / np.sqrt(squares / h + eps)
        for j in range(h):  # the third pass, from the cache: y's row written once
            y[r, j] = (x[r, j] - m) * rs * weight[j] + bias[j]
        mean[r] = m
        rstd[r] = rs
    return y, mean, rstd
    ### END SOLUTION


@njit(parallel=True, fastmath=FAST)
def layer_norm_backward_compiled(grad_output, x, mean, rstd, weight):
    """Exercise 7.4: LayerNorm backward over the rows of x, fused: each row's dx from the
    row of x and of grad_output while they are in the cache, and dweight and dbias, sums
    over every row, reduced in two stages: each thread sums its own rows' shares into a
    partial sum of its own, then the partial sums are added.

    Args:
        grad_output, x: (R, H) float32 or float64, C-contiguous; not modified.
        mean, rstd: (R,) saved by layer_norm_forward_compiled.
        weight: (H,) of x's dtype.
    Returns:
        dx (R, H), dweight (H,) and dbias (H,), in x's dtype.
    """
    ### BEGIN SOLUTION
    rows, h = x.shape
    dx = np.empty_like(x)  # (R, H)
    parts = max(1, min(rows, get_num_threads()))  # one partial sum per thread
    # (P, H) each: stage one's partial sums, in x's dtype (float64 ones halve the SIMD lanes
    # of the row's loop; R / P rows each, their rounding is within the tolerance of a sum)
    dweight_parts = np.zeros((parts, h), x.dtype)
    dbias_parts = np.zeros((parts, h), x.dtype)
    for p in prange(parts):  # part p: rows [p R / P, (p + 1) R / P)
        for r in range(p * rows // parts, (p + 1) * rows // parts):
            m, rs = mean[r], rstd[r]
            g_mean = 0.0  # mean(g) and mean(g * x_hat) of the row, g = dy * weight
            gx_mean = 0.0
            for j in range(h):
                x_hat = (x[r, j] - m) * rs
                g = grad_output[r, j] * weight[j]
                g_mean += g
                gx_mean += g * x_hat
                dweight_parts[p, j] += grad_output[r, j] * x_hat  # this part's own row
                dbias_parts[p, j] += grad_output[r, j]
            g_mean /= h
            gx_mean /= h
            for j in range(h):  # the row again, from the cache: dx's row written once
                x_hat = (x[r, j] - m) * rs
                dx[r, j] = rs * (grad_output[r, j] * weight[j] - g_mean - x_hat * gx_mean)
    dweight = np.empty(h, x.dtype)  # (H,)
    dbias = np.empty(h, x.dtype)  # (H,)
    for j in range(h):  # stage two: the P partial sums of each column, in float64 (small)
        sw = 0.0
        sb = 0.0
        for p in range(parts):
            sw += dweight_parts[p, j]
            sb += dbias_parts[p, j]
        dweight[j] = sw
        dbias[j] = sb
    return dx, dweight, dbias
    ### END SOLUTION
