"""BatchNorm in NumPy (Exercises 3.3 and 3.8): one mean and variance per channel, over the
batch and every spatial position, with torch's running statistics.

Shapes: x (N, C) or (N, C, *spatial); weight, bias, running_mean, running_var (C,);
the saved rstd (1, C, 1, .., 1).
"""

import numpy as np

from normlib._channels import channel_affine, per_channel, update_running


def batch_norm_forward(x, running_mean=None, running_var=None, weight=None, bias=None,
                       training=False, momentum=0.1, eps=1e-5):
    """Exercise 3.3: BatchNorm forward, torch's semantics.

    training=True: normalize with the batch's mean and *biased* variance over every axis
    but 1 (use normalize_forward). If running_mean and running_var are given, update them
    **in place** (update_running) with the batch mean and the *unbiased* batch variance
    (n / (n - 1) times the biased one, n = the number of values per channel).
    training=False: normalize with running_mean and running_var; update nothing.
    Then y = x_hat * weight + bias per channel (channel_affine; either may be None).

    Returns:
        y: x's shape and dtype.
        x_hat: x's shape, the normalized input.
        rstd: (1, C, 1, .., 1), 1 / sqrt(var + eps) of the statistics used.
    Saved for backward: x_hat and rstd.
    """
    from .norm import normalize_forward  # here: a broken norm.py leaves the backward alone

    ### BEGIN SOLUTION
    if training:
        axes = (0, *range(2, x.ndim))  # every axis but the channels
        x_hat, mean, var, rstd = normalize_forward(x, axes, eps)  # stats (1, C, 1..1)
        if running_mean is not None:
            n = x.size // x.shape[1]  # values per channel
            update_running(running_mean, mean.ravel(), momentum)
            update_running(running_var, var.ravel() * (n / (n - 1)), momentum)  # unbiased
    else:
        mean = per_channel(running_mean, x.ndim)  # (1, C, 1..1)
        rstd = 1.0 / np.sqrt(per_channel(running_var, x.ndim) + eps)  # (1, C, 1..1)
        x_hat = (x - mean) * rstd  # (N, C, *)
    return channel_affine(x_hat, weight, bias), x_hat, rstd
    ### END SOLUTION


def batch_norm_backward(grad_output, x_hat, rstd, weight=None, bias=None, training=False):
    """Exercise 3.8: BatchNorm backward, in training mode and in evaluation mode, derived
    from the computation graph as notebook 03 asks: the per-channel reductions of the
    affine's gradients and dx in both modes, with NumPy alone (the point is the derivation:
    do not call normalize_backward or channel_affine_backward).

    Args:
        grad_output: (N, C, *), dL/dy.
        x_hat: (N, C, *), saved by batch_norm_forward.
        rstd: (1, C, 1, .., 1), saved by batch_norm_forward: the batch's in training mode,
            the running statistics' in evaluation mode.
        weight, bias: (C,) or None, as given to the forward.
        training: the forward's mode.
    Returns:
        dx: (N, C, *), dL/dx.
        dweight, dbias: (C,); None where weight or bias is.
        All with x_hat's dtype.
    """
    ### BEGIN SOLUTION
    axes = (0, *range(2, x_hat.ndim))  # a channel's values: the batch and every position
    # each channel's weight and bias are used by every value of the channel: their
    # gradients sum over all of them
    dweight = None if weight is None else (grad_output * x_hat).sum(axis=axes)  # (C,)
    dbias = None if bias is None else grad_output.sum(axis=axes)  # (C,)
    g = grad_output if weight is None else grad_output * per_channel(weight, x_hat.ndim)
    if not training:  # the running statistics are constants: x reaches y by one path
        return g * rstd, dweight, dbias  # (N, C, *)
    g_mean = g.mean(axis=axes, keepdims=True)  # (1, C, 1..1), the path through the mean
    gx_mean = (g * x_hat).mean(axis=axes, keepdims=True)  # (1, C, 1..1), the variance's
    return rstd * (g - g_mean - x_hat * gx_mean), dweight, dbias  # (N, C, *)
    ### END SOLUTION
