"""Correct implementations written differently from the reference: every one must pass
its graded check (tests/test_graders.py), even at a tenth of the tolerances."""

import numpy as np
import torch

# Exercise 1.1: layer_norm_stats -------------------------------------------------------------


def stats_float64_inside(x, normalized_shape, eps=1e-5):
    """Accumulate in float64, cast back at the end."""
    axes = tuple(range(-len(normalized_shape), 0))
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=axes, keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=axes, keepdims=True)
    return mean.astype(x.dtype), (1 / np.sqrt(var + eps)).astype(x.dtype)


def stats_welford(x, normalized_shape, eps=1e-5):
    """Welford's running mean and M2 over the flattened normalized dims, all rows at once."""
    lead = x.shape[: x.ndim - len(normalized_shape)]
    rows = x.reshape(-1, int(np.prod(normalized_shape)))  # (B, N)
    mean = np.zeros(rows.shape[0], x.dtype)  # (B,)
    m2 = np.zeros(rows.shape[0], x.dtype)  # (B,)
    for n in range(rows.shape[1]):
        delta = rows[:, n] - mean
        mean += delta / (n + 1)
        m2 += delta * (rows[:, n] - mean)
    stat_shape = lead + (1,) * len(normalized_shape)
    rstd = (m2 / rows.shape[1] + eps) ** -0.5  # rsqrt
    return mean.reshape(stat_shape), rstd.reshape(stat_shape).astype(x.dtype)


def stats_np_var_reciprocal(x, normalized_shape, eps=1e-5):
    """np.var and np.reciprocal, axes counted from the end."""
    axes = tuple(range(-1, -len(normalized_shape) - 1, -1))
    var = np.var(x, axis=axes, keepdims=True)
    return np.mean(x, axis=axes, keepdims=True), np.reciprocal(np.sqrt(var + eps))


# Exercise 1.2: layer_norm_forward -----------------------------------------------------------


def forward_fused_order(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """y = x * (rstd * w) + (b - mean * rstd * w): another order of operations."""
    mean, rstd = stats_welford(x, normalized_shape, eps)
    scale = rstd if weight is None else rstd * weight  # (*B, *S) after broadcasting
    shift = -mean * scale if bias is None else bias - mean * scale
    return x * scale + shift, mean, rstd


def forward_float64_inside(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    mean, rstd = stats_float64_inside(x, normalized_shape, eps)
    y = (x.astype(np.float64) - mean) * rstd.astype(np.float64)
    y = y * (1.0 if weight is None else weight) + (0.0 if bias is None else bias)
    return y.astype(x.dtype), mean, rstd


# Exercise 2.1: layer_norm_backward ----------------------------------------------------------


def backward_staged(grad_output, x, normalized_shape, mean, rstd, weight=None, bias=None):
    """Node by node through the graph, in float64, on rows flattened to (B, N)."""
    n = int(np.prod(normalized_shape))
    dy = grad_output.reshape(-1, n).astype(np.float64)  # (B, N)
    xc = x.reshape(-1, n) - mean.reshape(-1, 1)  # (B, N)
    r = rstd.reshape(-1, 1).astype(np.float64)  # (B, 1)
    x_hat = xc * r  # (B, N)
    w = np.ones(n) if weight is None else weight.reshape(n)  # (N,)
    dx_hat = dy * w  # (B, N)
    dr = (dx_hat * xc).sum(axis=1, keepdims=True)  # (B, 1)
    dvar = dr * -0.5 * r**3  # (B, 1)
    dxc = dx_hat * r + dvar * 2 * xc / n  # (B, N)
    dx = dxc - dxc.mean(axis=1, keepdims=True)  # (B, N): through the mean
    dweight = None if weight is None else (dy * x_hat).sum(axis=0).reshape(normalized_shape)
    dbias = None if bias is None else dy.sum(axis=0).reshape(normalized_shape)
    cast = [None if a is None else a.astype(x.dtype) for a in (dweight, dbias)]
    return (dx.reshape(x.shape).astype(x.dtype), *cast)


def backward_sums(grad_output, x, normalized_shape, mean, rstd, weight=None, bias=None):
    """dx = rstd / N * (N g - sum g - x_hat sum(g x_hat)), params with einsum."""
    k = len(normalized_shape)
    axes = tuple(range(-k, 0))
    n = int(np.prod(normalized_shape))
    x_hat = (x - mean) * rstd
    g = grad_output * weight if weight is not None else grad_output
    total = n * g - g.sum(axis=axes, keepdims=True)
    total = total - x_hat * (g * x_hat).sum(axis=axes, keepdims=True)
    dx = rstd / n * total
    flat = (-1, *normalized_shape)
    dweight = None
    if weight is not None:
        dweight = np.einsum("b...,b...->...", grad_output.reshape(flat), x_hat.reshape(flat))
    dbias = None if bias is None else grad_output.reshape(flat).sum(axis=0)
    return dx, dweight, dbias


# Exercise 2.2: LayerNormFunction ------------------------------------------------------------


class FunctionCtxAttributes(torch.autograd.Function):
    """Keeps the NumPy arrays on ctx instead of save_for_backward, converts with
    torch.as_tensor / .numpy() directly, and computes only the gradients needed."""

    @staticmethod
    def forward(ctx, input, normalized_shape, weight, bias, eps):
        from normlib.layer_norm import layer_norm_forward

        x = input.detach().numpy()
        w = None if weight is None else weight.detach().numpy()
        b = None if bias is None else bias.detach().numpy()
        y, ctx.mean, ctx.rstd = layer_norm_forward(x, normalized_shape, w, b, eps)
        ctx.x, ctx.w, ctx.b, ctx.normalized_shape = x.copy(), w, b, normalized_shape
        return torch.as_tensor(y)

    @staticmethod
    def backward(ctx, grad_output):
        from normlib.layer_norm import layer_norm_backward

        dx, dw, db = layer_norm_backward(
            grad_output.numpy(), ctx.x, ctx.normalized_shape, ctx.mean, ctx.rstd, ctx.w, ctx.b
        )
        need = ctx.needs_input_grad
        return (
            torch.as_tensor(dx) if need[0] else None,
            None,
            torch.as_tensor(dw) if dw is not None and need[2] else None,
            torch.as_tensor(db) if db is not None and need[3] else None,
            None,
        )


RIGHT = {
    "1.1": {
        "float64 inside": stats_float64_inside,
        "Welford with rsqrt": stats_welford,
        "np.var and np.reciprocal": stats_np_var_reciprocal,
    },
    "1.2": {
        "fused scale and shift": forward_fused_order,
        "float64 inside": forward_float64_inside,
    },
    "2.1": {
        "staged, float64 inside": backward_staged,
        "sums and einsum": backward_sums,
    },
    "2.2": {"arrays kept on ctx": FunctionCtxAttributes},
}
