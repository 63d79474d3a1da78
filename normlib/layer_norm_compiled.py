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
    raise NotImplementedError("Exercise 7.3: implement layer_norm_forward_compiled")


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
    raise NotImplementedError("Exercise 7.4: implement layer_norm_backward_compiled")
