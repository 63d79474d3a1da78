"""Correct implementations of Unit 3's exercises written differently from the reference:
every one must pass its graded check (tests/test_graders.py) at a tenth of the
tolerances."""

import numpy as np

from normlib._channels import per_channel


def _float64_stats(x, axes, eps):
    """Two-pass statistics accumulated in float64, cast back to x's dtype."""
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=axes, keepdims=True)
    var = np.mean((x64 - mean) ** 2, axis=axes, keepdims=True)
    rstd = (var + eps) ** -0.5
    cast = [a.astype(x.dtype) for a in ((x64 - mean) * rstd, mean, var, rstd)]
    return tuple(cast)


def normalize_moveaxis(x, axes, eps):
    """Moves the reduced axes to the end, flattens them, and uses np.var."""
    axes = tuple(sorted(a % x.ndim for a in axes))
    rows = np.moveaxis(x, axes, range(x.ndim - len(axes), x.ndim))
    rows = rows.reshape(rows.shape[: x.ndim - len(axes)] + (-1,))  # (*kept, n)
    mean = rows.mean(axis=-1)
    var = rows.var(axis=-1)
    shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    mean, var = mean.reshape(shape), var.reshape(shape)
    rstd = np.reciprocal(np.sqrt(var + eps))
    return (x - mean) * rstd, mean, var, rstd


def normalize_backward_sums(grad_x_hat, x_hat, rstd, axes):
    """dx = rstd / n * (n g - sum(g) - x_hat sum(g x_hat)), in float64."""
    n = grad_x_hat.size // rstd.size
    g, xh = grad_x_hat.astype(np.float64), x_hat.astype(np.float64)
    dx = rstd / n * (n * g - g.sum(axis=axes, keepdims=True)
                     - xh * (g * xh).sum(axis=axes, keepdims=True))
    return dx.astype(grad_x_hat.dtype)


def batch_norm_channels_first(x, running_mean=None, running_var=None, weight=None, bias=None,
                              training=False, momentum=0.1, eps=1e-5):
    """Statistics on x as (C, everything else) in float64; running stats assigned with [:]."""
    c = x.shape[1]
    rows = np.moveaxis(x, 1, 0).reshape(c, -1).astype(np.float64)  # (C, n)
    if training:
        mean, var = rows.mean(axis=1), rows.var(axis=1)  # (C,) each
        if running_mean is not None:
            n = rows.shape[1]
            running_mean[:] = (1 - momentum) * running_mean + momentum * mean
            running_var[:] = (1 - momentum) * running_var + momentum * var * n / (n - 1)
    else:
        mean, var = running_mean.astype(np.float64), running_var.astype(np.float64)
    rstd = per_channel(1 / np.sqrt(var + eps), x.ndim)  # (1, C, 1..1)
    x_hat = (x - per_channel(mean, x.ndim)) * rstd
    y = x_hat * (1 if weight is None else per_channel(weight, x.ndim))
    y = y + (0 if bias is None else per_channel(bias, x.ndim))
    return y.astype(x.dtype), x_hat.astype(x.dtype), rstd.astype(x.dtype)


def group_norm_loop(x, num_groups, weight=None, bias=None, eps=1e-5):
    """One group at a time, by channel slices."""
    n, c = x.shape[:2]
    size = c // num_groups
    x_hat = np.empty_like(x)
    rstd = np.empty((n, num_groups, 1), x.dtype)
    for g in range(num_groups):
        block = x[:, g * size:(g + 1) * size]  # (N, C/G, *)
        axes = tuple(range(1, x.ndim))
        mean = block.mean(axis=axes, keepdims=True)
        r = 1 / np.sqrt(block.var(axis=axes, keepdims=True) + eps)
        x_hat[:, g * size:(g + 1) * size] = (block - mean) * r
        rstd[:, g, 0] = r.reshape(n)
    y = x_hat if weight is None else x_hat * per_channel(weight, x.ndim)
    y = y if bias is None else y + per_channel(bias, x.ndim)
    return y, x_hat, rstd


def instance_norm_float64(x, running_mean=None, running_var=None, weight=None, bias=None,
                          use_input_stats=True, momentum=0.1, eps=1e-5):
    """Per-instance statistics in float64 from np.var with ddof; running stats with [:]."""
    axes = tuple(range(2, x.ndim))
    if use_input_stats:
        x_hat, mean, var, rstd = _float64_stats(x, axes, eps)
        if running_mean is not None:
            x64 = x.astype(np.float64)
            unbiased = x64.var(axis=axes, ddof=1).mean(axis=0)  # (C,)
            running_mean[:] = (1 - momentum) * running_mean + momentum * x64.mean(axis=axes).mean(0)
            running_var[:] = (1 - momentum) * running_var + momentum * unbiased
    else:
        rstd = per_channel((running_var + eps) ** -0.5, x.ndim)
        x_hat = (x - per_channel(running_mean, x.ndim)) * rstd
    y = x_hat if weight is None else x_hat * per_channel(weight, x.ndim)
    y = y if bias is None else y + per_channel(bias, x.ndim)
    return y, x_hat, rstd


def rms_norm_norm(x, normalized_shape, weight=None, eps=None):
    """rms from np.linalg.norm over the flattened trailing dims, in float64."""
    eps = np.finfo(x.dtype).eps if eps is None else eps
    lead = x.shape[: x.ndim - len(normalized_shape)]
    rows = x.reshape(lead + (-1,)).astype(np.float64)  # (*B, N)
    ms = np.linalg.norm(rows, axis=-1) ** 2 / rows.shape[-1]  # (*B,)
    rrms = ((ms + eps) ** -0.5).reshape(lead + (1,) * len(normalized_shape))
    y = x * rrms * (1 if weight is None else weight)
    return y.astype(x.dtype), rrms.astype(x.dtype)


def rms_norm_backward_staged(grad_output, x, normalized_shape, rrms, weight=None):
    """Node by node: y = x * r * w, r = (ms + eps)^-1/2, ms = mean(x^2); in float64."""
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    lead = tuple(range(x.ndim - len(normalized_shape)))
    n = int(np.prod(normalized_shape))
    x64, r = x.astype(np.float64), rrms.astype(np.float64)
    dweight = None if weight is None else (grad_output * x64 * r).sum(axis=lead).astype(x.dtype)
    g = grad_output * (1 if weight is None else weight)  # dL/d(x * r)
    dr = (g * x64).sum(axis=axes, keepdims=True)  # (*B, 1..1)
    dms = -0.5 * r**3 * dr  # r = (ms + eps)^-1/2
    dx = g * r + 2 * x64 / n * dms
    return dx.astype(x.dtype), dweight


# Exercise 3.8: batch_norm_backward -----------------------------------------------------------


def batch_norm_backward_channels_first(grad_output, x_hat, rstd, weight=None, bias=None,
                                       training=False):
    """Channels moved first and flattened to (C, M), sums in float64, N = M terms per channel."""
    c = x_hat.shape[1]
    dy = np.moveaxis(grad_output, 1, 0).reshape(c, -1).astype(np.float64)  # (C, M)
    xh = np.moveaxis(x_hat, 1, 0).reshape(c, -1).astype(np.float64)  # (C, M)
    r = rstd.reshape(c, 1).astype(np.float64)  # (C, 1)
    g = dy * (1.0 if weight is None else weight.reshape(c, 1))  # (C, M)
    if training:
        m = g.shape[1]
        dx = r / m * (m * g - g.sum(axis=1, keepdims=True) - xh * (g * xh).sum(axis=1,
                                                                              keepdims=True))
    else:
        dx = g * r
    dx = np.moveaxis(dx.reshape((c, x_hat.shape[0]) + x_hat.shape[2:]), 0, 1)
    dweight = None if weight is None else (dy * xh).sum(axis=1).astype(x_hat.dtype)
    dbias = None if bias is None else dy.sum(axis=1).astype(x_hat.dtype)
    return dx.astype(x_hat.dtype), dweight, dbias


RIGHT = {
    "3.1": {"float64 inside": lambda x, axes, eps: _float64_stats(x, axes, eps),
            "moveaxis and np.var": normalize_moveaxis},
    "3.2": {"explicit sums in float64": normalize_backward_sums},
    "3.3": {"channels first, float64, [:] assignment": batch_norm_channels_first},
    "3.4": {"a loop over channel slices": group_norm_loop},
    "3.5": {"float64 with ddof": instance_norm_float64},
    "3.6": {"np.linalg.norm in float64": rms_norm_norm},
    "3.7": {"staged in float64": rms_norm_backward_staged},
    "3.8": {"channels first, flattened, float64 sums": batch_norm_backward_channels_first},
}
