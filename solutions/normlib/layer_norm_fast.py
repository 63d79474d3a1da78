"""A fast LayerNorm in NumPy (Exercises 7.1 and 7.2): same results, far less memory traffic.

Every NumPy expression such as `(x - mean) * rstd` reads its operands from memory and writes
a new full-size array: the naive forward makes about 15 passes over arrays the size of x,
while the least any LayerNorm can do is read x once and write y once. The three fixes:
- write into the output in place (np.subtract(x, mean, out=y); y *= rstd), so that no
  full-size temporary is ever allocated;
- process the rows in blocks of about BLOCK_BYTES, small enough to stay in the CPU's cache
  between the passes over them, so that only the first read of x and the final write of y
  reach main memory;
- let one call do a whole reduction: np.vecdot(y, y) is the sum of squares of every row
  without forming y * y, and x @ (ones / H) the mean of every row.
Shapes: x (*B, *S), S = normalized_shape, flattened here to R rows of H = prod(S) values;
mean and rstd (*B, 1, .., 1) as the naive kernels save them; weight, bias (*S).
"""

import math

import numpy as np

# About 256 KiB of rows per block: x's block, y's block and a scratch block fit in a
# typical 1-2 MiB L2 cache. Measured on a 2-core machine at H = 1024: 64 KiB blocks are
# about 1.5x slower (more NumPy calls per row), 1 MiB blocks no faster.
BLOCK_BYTES = 256 * 1024


def rows_per_block(h, itemsize):
    """How many rows of h values of itemsize bytes make a block (at least one)."""
    return max(1, BLOCK_BYTES // (h * itemsize))


def _rows(a, h):
    """a (*B, *S) as (R, H), a view when a is contiguous."""
    return a.reshape(-1, h)


def layer_norm_forward_fast(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Exercise 7.1: LayerNorm forward, the same results as layer_norm_forward, with no
    full-size temporary: besides y, at most half of x's size in temporaries at any time.

    Args and returns: as normlib.layer_norm.layer_norm_forward: x (*B, *S);
    normalized_shape S; weight, bias (*S) or None; returns y (*B, *S) and the saved
    mean, rstd (*B, 1, .., 1), all in x's dtype. x is not modified.
    """
    ### BEGIN SOLUTION
    h = math.prod(normalized_shape)
    x2 = _rows(x, h)  # (R, H)
    y = np.empty_like(x2)  # (R, H): the one full-size allocation
    mean = np.empty((x2.shape[0], 1), x.dtype)  # (R, 1)
    rstd = np.empty_like(mean)  # (R, 1)
    ones = np.full(h, 1.0 / h, x.dtype)  # (H,): x @ ones is the mean of each row
    w = None if weight is None else weight.reshape(h)  # (H,)
    b = None if bias is None else bias.reshape(h)  # (H,)
    step = rows_per_block(h, x.itemsize)
    for i in range(0, x2.shape[0], step):
        xb, yb = x2[i:i + step], y[i:i + step]  # (r, H) views
        mb, rb = mean[i:i + step], rstd[i:i + step]  # (r, 1) views
        np.matmul(xb, ones, out=mb[:, 0])  # (r,) the mean
        np.subtract(xb, mb, out=yb)  # (r, H) x - mean, written into y
        var = np.vecdot(yb, yb) / h  # (r,) the biased variance, two-pass
        rb[:, 0] = 1.0 / np.sqrt(var + eps)  # (r,)
        yb *= rb  # (r, H) x_hat
        if w is not None:
            yb *= w
        if b is not None:
            yb += b
    stats_shape = x.shape[: x.ndim - len(normalized_shape)] + (1,) * len(normalized_shape)
    return y.reshape(x.shape), mean.reshape(stats_shape), rstd.reshape(stats_shape)
    ### END SOLUTION


def layer_norm_backward_fast(grad_output, x, normalized_shape, mean, rstd, weight=None,
                             bias=None):
    """Exercise 7.2: LayerNorm backward, the same results as layer_norm_backward, with no
    full-size temporary: besides dx, at most half of x's size in temporaries at any time.

    Args and returns: as normlib.layer_norm.layer_norm_backward: grad_output and x
    (*B, *S); mean, rstd (*B, 1, .., 1) saved by the forward; weight, bias (*S) or None;
    returns dx (*B, *S), dweight and dbias (*S) or None, in x's dtype. No argument is
    modified.
    """
    ### BEGIN SOLUTION
    h = math.prod(normalized_shape)
    dy, x2 = _rows(grad_output, h), _rows(x, h)  # (R, H)
    mean2, rstd2 = mean.reshape(-1, 1), rstd.reshape(-1, 1)  # (R, 1)
    dx = np.empty_like(x2)  # (R, H): the one full-size allocation
    dweight = None if weight is None else np.zeros(h, x.dtype)  # (H,), summed over blocks
    dbias = None if bias is None else np.zeros(h, x.dtype)  # (H,)
    ones = np.full(h, 1.0 / h, x.dtype)  # (H,): g @ ones is the mean of each row of g
    w = None if weight is None else weight.reshape(h)  # (H,)
    step = rows_per_block(h, x.itemsize)
    scratch = np.empty((min(step, x2.shape[0]), h), x.dtype)  # (step, H): x_hat's block
    for i in range(0, x2.shape[0], step):
        dyb, xb, dxb = dy[i:i + step], x2[i:i + step], dx[i:i + step]  # (r, H) views
        rb = rstd2[i:i + step]  # (r, 1)
        x_hat = scratch[: len(xb)]  # (r, H)
        np.subtract(xb, mean2[i:i + step], out=x_hat)
        x_hat *= rb  # (r, H) x_hat, recomputed from what the forward saved
        if dbias is not None:
            dbias += dyb.sum(axis=0)  # (H,)
        if dweight is not None:
            np.multiply(dyb, x_hat, out=dxb)  # (r, H) dx's block as scratch
            dweight += dxb.sum(axis=0)  # (H,)
        if w is None:
            np.copyto(dxb, dyb)  # (r, H) g = dL/dx_hat
        else:
            np.multiply(dyb, w, out=dxb)  # (r, H) g
        g_mean = dxb @ ones  # (r,)
        gx_mean = np.vecdot(dxb, x_hat) / h  # (r,)
        x_hat *= gx_mean[:, None]  # (r, H) x_hat * mean(g * x_hat)
        dxb -= x_hat
        dxb -= g_mean[:, None]
        dxb *= rb  # (r, H) dx = rstd (g - mean(g) - x_hat mean(g x_hat))
    shape = tuple(normalized_shape)
    return (dx.reshape(x.shape), None if dweight is None else dweight.reshape(shape),
            None if dbias is None else dbias.reshape(shape))
    ### END SOLUTION
