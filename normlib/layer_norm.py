"""LayerNorm in NumPy: the statistics (Exercise 1.1), the forward (Exercise 1.2)
and the backward (Exercise 2.1).

Shapes. The input x has shape (*B, *S): S = normalized_shape, the k trailing dims
normalized together, and B the leading dims, one normalization each. The
statistics keep k singleton dims so that they broadcast against x, as
torch.native_layer_norm returns them:

    x            (*B, *S)       e.g. (2, 3, 4) with S = (3, 4)
    mean, rstd   (*B, 1, .., 1)      (2, 1, 1)
    weight, bias (*S)                (3, 4)

Every array returned has the dtype of x. The kernels trust their arguments:
normlib.functional.layer_norm checks them first.
"""

import numpy as np


def layer_norm_stats(x, normalized_shape, eps=1e-5):
    """Exercise 1.1: the mean and reciprocal standard deviation LayerNorm normalizes with.

    Args:
        x: float32 or float64 array of shape (*B, *S).
        normalized_shape: tuple of ints S, the trailing dims of x to normalize over.
        eps: added to the variance, inside the square root.
    Returns:
        mean: (*B, 1, .., 1), the mean of x over the dims of S.
        rstd: (*B, 1, .., 1), 1 / sqrt(var + eps), where var is the biased variance
            (divide by the number of elements, not that minus one) over the dims of S.
        Both have the dtype of x and len(S) trailing singleton dims.
    """
    raise NotImplementedError("Exercise 1.1: implement layer_norm_stats")


def layer_norm_forward(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Exercise 1.2: LayerNorm forward, y = (x - mean) * rstd * weight + bias.

    Args:
        x: float array of shape (*B, *S).
        normalized_shape: tuple of ints S.
        weight: (*S) or None (no scaling).
        bias: (*S) or None (no shift).
        eps: as in layer_norm_stats.
    Returns:
        y: (*B, *S), same dtype as x.
        mean, rstd: (*B, 1, .., 1), as layer_norm_stats returns them. They are what
            the backward needs besides x and weight: save them, don't recompute them.
    """
    raise NotImplementedError("Exercise 1.2: implement layer_norm_forward")


def layer_norm_backward(grad_output, x, normalized_shape, mean, rstd, weight=None, bias=None):
    """Exercise 2.1: LayerNorm backward, the compact formula.

    Args:
        grad_output: (*B, *S), dL/dy.
        x: (*B, *S), the forward's input.
        normalized_shape: tuple of ints S.
        mean, rstd: (*B, 1, .., 1), saved by layer_norm_forward.
        weight: (*S) or None, as given to the forward.
        bias: (*S) or None, as given to the forward (only whether it is None matters).
    Returns:
        dx: (*B, *S), dL/dx.
        dweight: (*S), dL/dweight summed over every leading dim; None if weight is None.
        dbias: (*S), dL/dbias summed over every leading dim; None if bias is None.
        All with the dtype of x.
    """
    raise NotImplementedError("Exercise 2.1: implement layer_norm_backward")
