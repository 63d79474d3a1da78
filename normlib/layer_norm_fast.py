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
    raise NotImplementedError("Exercise 7.1: implement layer_norm_forward_fast")


def layer_norm_backward_fast(grad_output, x, normalized_shape, mean, rstd, weight=None,
                             bias=None):
    """Exercise 7.2: LayerNorm backward, the same results as layer_norm_backward, with no
    full-size temporary: besides dx, at most half of x's size in temporaries at any time.

    Args and returns: as normlib.layer_norm.layer_norm_backward: grad_output and x
    (*B, *S); mean, rstd (*B, 1, .., 1) saved by the forward; weight, bias (*S) or None;
    returns dx (*B, *S), dweight and dbias (*S) or None, in x's dtype. No argument is
    modified.
    """
    raise NotImplementedError("Exercise 7.2: implement layer_norm_backward_fast")
