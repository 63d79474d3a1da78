"""What BatchNorm, InstanceNorm and GroupNorm share, provided (no exercise here): the
per-channel affine y = x_hat * weight + bias and its backward, and the update of running
statistics. Shapes: x_hat (N, C, *spatial); weight, bias and the running statistics (C,).
"""


def per_channel(a, ndim):
    """A per-channel vector (C,) as (1, C, 1, .., 1), broadcastable against (N, C, *)."""
    return a.reshape((1, -1) + (1,) * (ndim - 2))


def channel_affine(x_hat, weight=None, bias=None):
    """y = x_hat * weight + bias, with weight and bias (C,) or None, x_hat (N, C, *)."""
    y = x_hat if weight is None else x_hat * per_channel(weight, x_hat.ndim)  # (N, C, *)
    return y if bias is None else y + per_channel(bias, x_hat.ndim)


def channel_affine_backward(grad_output, x_hat, weight=None, bias=None):
    """The backward of channel_affine: (dL/dx_hat, dweight, dbias).

    dweight and dbias are (C,), summed over every axis but the channels; None where
    weight or bias is None. dL/dx_hat has x_hat's shape.
    """
    not_channels = (0, *range(2, x_hat.ndim))
    dweight = None if weight is None else (grad_output * x_hat).sum(axis=not_channels)  # (C,)
    dbias = None if bias is None else grad_output.sum(axis=not_channels)  # (C,)
    if weight is not None:
        grad_output = grad_output * per_channel(weight, x_hat.ndim)  # (N, C, *)
    return grad_output, dweight, dbias


def update_running(running, batch, momentum):
    """running = (1 - momentum) * running + momentum * batch, in place (torch's convention:
    momentum is the weight of the new value)."""
    running *= 1 - momentum
    running += momentum * batch
