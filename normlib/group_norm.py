"""GroupNorm in NumPy (Exercise 3.4): the C channels are split into num_groups groups of
C/G *consecutive* channels; each (sample, group) is normalized over its channels and
every spatial position; the affine is per channel.

Shapes: x (N, C, *spatial); weight, bias (C,); the saved rstd (N, G, 1).
"""

from normlib._channels import channel_affine, channel_affine_backward

from .norm import normalize_backward, normalize_forward


def group_norm_forward(x, num_groups, weight=None, bias=None, eps=1e-5):
    """Exercise 3.4: GroupNorm forward, torch's semantics.

    View x as (N, G, C/G * prod(spatial)): group g holds channels g*C/G .. (g+1)*C/G - 1.
    Normalize over the last axis of that view (normalize_forward), view the result back
    as x's shape, then y = x_hat * weight + bias per channel (channel_affine).

    Returns:
        y, x_hat: x's shape and dtype.
        rstd: (N, G, 1).
    Saved for backward: x_hat and rstd.
    """
    raise NotImplementedError("Exercise 3.4: implement group_norm_forward")


def group_norm_backward(grad_output, x_hat, rstd, weight=None, bias=None):
    """GroupNorm backward (provided): dx (x's shape), dweight and dbias ((C,) or None)."""
    g, dweight, dbias = channel_affine_backward(grad_output, x_hat, weight, bias)
    n, groups = rstd.shape[:2]
    dx = normalize_backward(g.reshape(n, groups, -1), x_hat.reshape(n, groups, -1), rstd, (2,))
    return dx.reshape(x_hat.shape), dweight, dbias
