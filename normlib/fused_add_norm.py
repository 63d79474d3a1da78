"""A fused residual add and RMSNorm in Numba (Unit 9: Exercise 9.5): the inference engines'
kernel.

In a Pre-LN transformer each sublayer's output x is added to the residual stream, and the
next sublayer reads the stream through an RMSNorm: in torch two kernels, the add writing the
stream and the norm reading it back. vLLM's kernel (vllm-project/vllm,
csrc/layernorm_kernels.cu, fused_add_rms_norm_kernel) does both in one visit of each row.
Notebook 09, section 5, states it, and `make bench` times yours against torch's two steps.
The rules of Exercises 7.3 and 7.4: `@njit(parallel=True, fastmath=FAST)`, the rows shared
with prange, no full-size temporary. Shapes: x, residual (R, H), C-contiguous, one dtype
(float32 or float64); weight (H,) of that dtype.
"""

import numpy as np
from numba import njit, prange

# LLVM may reorder sums and fuse multiply-adds; it may not assume that no NaN or inf occurs
FAST = {"reassoc", "contract"}


@njit(parallel=True, fastmath=FAST)
def fused_add_rms_norm(x, residual, weight, eps):
    """Exercise 9.5: the stream residual + x, and its RMSNorm times weight, row by row.

    Args:
        x: (R, H), the sublayer's output; not modified.
        residual: (R, H), the residual stream before the add, x's dtype; not modified.
        weight: (H,), the norm's gain, x's dtype.
        eps: added to the mean of the squares inside the square root.
    Returns:
        (y, stream), both (R, H) in x's dtype: stream = residual + x (rounded once to the
        dtype: what the next block adds to), and y = RMSNorm(stream) * weight, the norm of
        the stream as it is stored. (vLLM writes the two into its inputs instead.)
    """
    raise NotImplementedError("Exercise 9.5: implement fused_add_rms_norm")
