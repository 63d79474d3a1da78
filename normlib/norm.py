"""The one normalization every layer of Unit 3 is a view of (Exercises 3.1 and 3.2).
(The per-channel affine and running statistics that BatchNorm, InstanceNorm and GroupNorm
share are provided in normlib/_channels.py.)

A layer is a choice of reduction axes. For an image batch x of shape (N, C, H, W):

    BatchNorm      axes (0, 2, 3)   one mean per channel, over the batch and the pixels
    InstanceNorm   axes (2, 3)      one mean per sample and channel
    GroupNorm      axes (2, 3, 4)   of x reshaped to (N, G, C/G, H, W): per sample and group
    LayerNorm      axes (1, 2, 3)   one mean per sample (normalized_shape = (C, H, W))

The statistics keep the reduced axes as size 1, so they broadcast against x. Every
array returned has the dtype of x. The kernels trust their arguments:
normlib.functional checks them first.
"""

import numpy as np


def normalize_forward(x, axes, eps):
    """Exercise 3.1: standardize x over `axes`.

    Args:
        x: float32 or float64 array of any shape.
        axes: tuple of ints, the axes to reduce over (non-negative, any order).
        eps: added to the variance, inside the square root.
    Returns:
        x_hat: x's shape, (x - mean) * rstd.
        mean: x's shape with `axes` set to 1.
        var: same shape, the biased variance (divide by the number of elements reduced).
        rstd: same shape, 1 / sqrt(var + eps).
    Saved for backward: x_hat and rstd.
    """
    raise NotImplementedError("Exercise 3.1: implement normalize_forward")


def normalize_backward(grad_x_hat, x_hat, rstd, axes):
    """Exercise 3.2: the gradient of x_hat = normalize_forward(x, axes, eps)[0] wrt x.

    Args:
        grad_x_hat: x's shape, dL/dx_hat (for an affine layer, dL/dy * weight).
        x_hat: x's shape, saved by the forward.
        rstd: x's shape with `axes` set to 1, saved by the forward.
        axes: the forward's axes.
    Returns:
        dx: x's shape, dL/dx: the input gradient of Unit 2's compact backward, with the
            group given by `axes` instead of the trailing dims. x_hat's dtype.
    """
    raise NotImplementedError("Exercise 3.2: implement normalize_backward")
