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


# Exercise 2.1: layer_norm_backward_staged ---------------------------------------------------


def staged_float64_inside(grad_output, x, eps=1e-5):
    """Every node in float64, cast back at the end; rstd through np.reciprocal."""
    g, x64 = grad_output.astype(np.float64), x.astype(np.float64)  # (B, N)
    n = x.shape[-1]
    mu = x64.mean(axis=-1, keepdims=True)
    xc = x64 - mu
    var = np.mean(xc**2, axis=-1, keepdims=True)
    rstd = np.reciprocal(np.sqrt(var + eps))
    drstd = np.einsum("bn,bn->b", g, xc)[:, None]  # (B, 1)
    dvar = drstd * -0.5 * (var + eps) ** -1.5
    dxc = rstd * g + dvar * xc * (2 / n)
    dmu = -np.sum(dxc, axis=-1, keepdims=True)
    dx = dxc + np.repeat(dmu / n, n, axis=-1)
    grads = {"drstd": drstd, "dvar": dvar, "dxc": dxc, "dmu": dmu, "dx": dx}
    return {name: a.astype(x.dtype) for name, a in grads.items()}


def staged_through_x_hat(grad_output, x, eps=1e-5):
    """The same gradients, each simplified with x_hat = xc * rstd and sum(x_hat) = 0,
    in another order of operations, dict built key by key."""
    n = x.shape[-1]
    xc = x - x.mean(axis=-1, keepdims=True)
    rstd = (np.mean(xc * xc, axis=-1, keepdims=True) + eps) ** -0.5
    x_hat = xc * rstd
    proj = np.mean(grad_output * x_hat, axis=-1, keepdims=True)  # (B, 1)
    grads = {}
    grads["drstd"] = n * proj / rstd
    grads["dvar"] = -0.5 * n * proj * rstd**2
    grads["dxc"] = rstd * (grad_output - x_hat * proj)
    grads["dmu"] = -rstd * np.sum(grad_output, axis=-1, keepdims=True)
    grads["dx"] = grads["dxc"] + grads["dmu"] / n
    return grads


# Exercise 2.2: layer_norm_backward ----------------------------------------------------------


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


# Exercise 2.3: layer_norm_jacobian ----------------------------------------------------------


def jacobian_by_rows(x, eps=1e-5):
    """Row i of J is the compact backward under the upstream gradient e_i, in float64."""
    n = x.shape[-1]
    x64 = x.astype(np.float64)
    xc = x64 - x64.mean(axis=-1, keepdims=True)
    rstd = 1 / np.sqrt(np.var(x64, axis=-1, keepdims=True) + eps)
    x_hat = xc * rstd  # (*B, N)
    J = np.empty(x.shape + (n,))
    for i in range(n):
        g = np.zeros(n)
        g[i] = 1.0
        J[..., i, :] = rstd * (g - g.mean() - x_hat * (g * x_hat).mean(axis=-1, keepdims=True))
    return J.astype(x.dtype)


def jacobian_einsum(x, eps=1e-5):
    """rstd/N (N I - 1 1^T - x_hat x_hat^T) with np.einsum and np.identity."""
    n = x.shape[-1]
    mean = x.mean(axis=-1, keepdims=True)
    rstd = (np.var(x, axis=-1, keepdims=True) + eps) ** -0.5
    x_hat = (x - mean) * rstd
    inner = n * np.identity(n, dtype=x.dtype) - 1 - np.einsum("...i,...j->...ij", x_hat, x_hat)
    return rstd[..., None] / n * inner


# Exercise 2.4: predicted_sum_gradients ------------------------------------------------------


def predictions_from_compact(x, eps=1e-5):
    """The compact formula with g = 1, each bug dropping its term, in float64."""
    x64 = x.astype(np.float64)
    rstd = 1 / np.sqrt(x64.var(axis=-1, keepdims=True) + eps)
    x_hat = (x64 - x64.mean(axis=-1, keepdims=True)) * rstd
    g = np.ones_like(x64)
    mean_term = g.mean(axis=-1, keepdims=True)
    variance_term = x_hat * (g * x_hat).mean(axis=-1, keepdims=True)
    dx = {"correct": rstd * (g - mean_term - variance_term),
          "detached variance": rstd * (g - mean_term),
          "detached mean": rstd * (g - variance_term)}
    return {name: a.astype(x.dtype) for name, a in dx.items()}


# Exercise 2.5: LayerNormFunction ------------------------------------------------------------


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
    "2.2": {
        "staged, float64 inside": backward_staged,
        "sums and einsum": backward_sums,
    },
    "2.1": {
        "float64 inside": staged_float64_inside,
        "simplified through x_hat": staged_through_x_hat,
    },
    "2.3": {
        "rows from the backward of unit vectors": jacobian_by_rows,
        "einsum and identity": jacobian_einsum,
    },
    "2.4": {"compact formula with g = 1": predictions_from_compact},
    "2.5": {"arrays kept on ctx": FunctionCtxAttributes},
}
