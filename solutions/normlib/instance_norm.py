"""InstanceNorm in NumPy (Exercise 3.5): one mean and variance per sample and channel,
over the spatial axes only, with optional running statistics as torch keeps them.

Shapes: x (N, C, *spatial); weight, bias, running_mean, running_var (C,); the saved
rstd (N, C, 1, .., 1) from the input's statistics, (1, C, 1, .., 1) from running ones.
"""

import numpy as np

from normlib._channels import channel_affine, channel_affine_backward, per_channel, update_running

from .norm import normalize_backward, normalize_forward


def instance_norm_forward(x, running_mean=None, running_var=None, weight=None, bias=None,
                          use_input_stats=True, momentum=0.1, eps=1e-5):
    """Exercise 3.5: InstanceNorm forward, torch's semantics.

    use_input_stats=True: normalize each (sample, channel) over the spatial axes with its
    mean and biased variance (normalize_forward). If running_mean and running_var are
    given, update them in place (update_running) with the mean over the batch of the
    per-instance means, and of the per-instance *unbiased* variances (n / (n - 1), n the
    number of spatial positions).
    use_input_stats=False: normalize with running_mean and running_var, like BatchNorm in
    eval mode.
    Then y = x_hat * weight + bias per channel (channel_affine).

    Returns:
        y, x_hat: x's shape and dtype.
        rstd: (N, C, 1, .., 1) or, from running statistics, (1, C, 1, .., 1).
    Saved for backward: x_hat and rstd.
    """
    ### BEGIN SOLUTION
    if use_input_stats:
        axes = tuple(range(2, x.ndim))  # the spatial axes
        x_hat, mean, var, rstd = normalize_forward(x, axes, eps)  # stats (N, C, 1..1)
        if running_mean is not None:
            n = int(np.prod(x.shape[2:]))  # positions per instance
            update_running(running_mean, mean.mean(axis=0).ravel(), momentum)
            update_running(running_var, (var * (n / (n - 1))).mean(axis=0).ravel(), momentum)
    else:
        mean = per_channel(running_mean, x.ndim)  # (1, C, 1..1)
        rstd = 1.0 / np.sqrt(per_channel(running_var, x.ndim) + eps)  # (1, C, 1..1)
        x_hat = (x - mean) * rstd  # (N, C, *)
    return channel_affine(x_hat, weight, bias), x_hat, rstd
    ### END SOLUTION


def instance_norm_backward(grad_output, x_hat, rstd, weight=None, bias=None,
                           use_input_stats=True):
    """InstanceNorm backward (provided): dx (x's shape), dweight and dbias ((C,) or None).
    With the running statistics (use_input_stats=False) the layer normalizes as BatchNorm
    does in evaluation mode, so its backward is batch_norm_backward's (Exercise 3.8)."""
    if not use_input_stats:
        from .batch_norm import batch_norm_backward

        return batch_norm_backward(grad_output, x_hat, rstd, weight, bias, training=False)
    g, dweight, dbias = channel_affine_backward(grad_output, x_hat, weight, bias)
    dx = normalize_backward(g, x_hat, rstd, tuple(range(2, x_hat.ndim)))  # (N, C, *)
    return dx, dweight, dbias
