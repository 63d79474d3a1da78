"""Correct implementations of Unit 6's exercises and Unit 7's NumPy kernels written differently from the reference:
every one must pass its graded check (tests/test_graders.py)."""

import math

import numpy as np
import torch
import torch.nn.functional as F

# Exercise 6.1: welford ----------------------------------------------------------------------


def welford_float64(x):
    """Welford's update in float64, cast back at the end."""
    mean = np.zeros(x.shape[:-1])
    m2 = np.zeros(x.shape[:-1])
    for k in range(x.shape[-1]):
        delta = x[..., k] - mean
        mean = mean + delta / (k + 1)
        m2 = m2 + delta * (x[..., k] - mean)
    return x.shape[-1], mean.astype(x.dtype), m2.astype(x.dtype)


def welford_numpy_two_pass(x):
    """Not Welford's loop but the same state, from NumPy's two-pass mean and variance."""
    n = x.shape[-1]
    return n, x.mean(axis=-1), x.var(axis=-1) * n


# Exercise 6.2: welford_merge ----------------------------------------------------------------


def merge_weighted_means(a, b):
    """The merged mean as a weighted average, the correction through the squared distance
    of each mean from it: sum_i n_i (mean_i - mean)^2 = delta^2 n_a n_b / n."""
    (na, ma, m2a), (nb, mb, m2b) = a, b
    n = na + nb
    mean = (ma * (na / n) + mb * (nb / n))
    return n, mean, m2a + m2b + (ma - mean) ** 2 * na + (mb - mean) ** 2 * nb


def merge_float64(a, b):
    """The reference formula in float64, cast back."""
    (na, ma, m2a), (nb, mb, m2b) = a, b
    n = na + nb
    delta = mb.astype(np.float64) - ma
    mean = ma + delta * nb / n
    m2 = m2a.astype(np.float64) + m2b + delta**2 * na * nb / n
    return n, mean.astype(ma.dtype), m2.astype(ma.dtype)


# Exercises 6.3 and 6.4: 16-bit norms ----------------------------------------------------------


def layer_norm_via_float32(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """torch's own float32 LayerNorm on the upcast tensors."""
    up = [None if t is None else t.float() for t in (weight, bias)]
    return F.layer_norm(x.float(), normalized_shape, *up, eps).to(x.dtype)


def layer_norm_float64(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Upcast to float64 (more than needed, and just as correct)."""
    dims = tuple(range(-len(normalized_shape), 0))
    x64 = x.double()
    var, mean = torch.var_mean(x64, dim=dims, unbiased=False, keepdim=True)
    y = (x64 - mean) / torch.sqrt(var + eps)
    y = y if weight is None else y * weight.double()
    y = y if bias is None else y + bias.double()
    return y.to(x.dtype)


def rms_norm_via_float32(x, normalized_shape, weight=None, eps=None):
    """torch's own float32 RMSNorm on the upcast tensors (its eps=None is float32's)."""
    return F.rms_norm(x.float(), normalized_shape, None if weight is None else weight.float(),
                      eps).to(x.dtype)


def rms_norm_float64(x, normalized_shape, weight=None, eps=None):
    """In float64, with float32's eps spelled out."""
    eps = np.finfo(np.float32).eps if eps is None else eps
    dims = tuple(range(-len(normalized_shape), 0))
    x64 = x.double()
    y = x64 / torch.sqrt(x64.pow(2).mean(dim=dims, keepdim=True) + eps)
    return (y if weight is None else y * weight.double()).to(x.dtype)


# Exercises 7.1 and 7.2: fast LayerNorm ------------------------------------------------------


def forward_in_place(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """No blocks: the whole array at once, but in place (one allocation, y)."""
    h = math.prod(normalized_shape)
    x2 = x.reshape(-1, h)
    mean = x2.mean(axis=1, keepdims=True)
    y = np.subtract(x2, mean)
    rstd = 1 / np.sqrt(np.einsum("ij,ij->i", y, y)[:, None] / h + eps)
    y *= rstd
    if weight is not None:
        y *= weight.reshape(h)
    if bias is not None:
        y += bias.reshape(h)
    stats = x.shape[: x.ndim - len(normalized_shape)] + (1,) * len(normalized_shape)
    return y.reshape(x.shape), mean.reshape(stats).astype(x.dtype), rstd.reshape(stats)


def backward_small_blocks(grad_output, x, normalized_shape, mean, rstd, weight=None, bias=None):
    """Blocks of 16 rows (1 row when rows are long), the sums by np.einsum, dx's block
    assigned from an expression (block-sized temporaries)."""
    h = math.prod(normalized_shape)
    dy, x2 = grad_output.reshape(-1, h), x.reshape(-1, h)
    mean2, rstd2 = mean.reshape(-1, 1), rstd.reshape(-1, 1)
    dx = np.empty_like(x2)
    dw, db = np.zeros(h, x.dtype), np.zeros(h, x.dtype)
    step = 16 if h <= 4096 else 1
    for i in range(0, len(x2), step):
        rows = slice(i, i + step)
        x_hat = (x2[rows] - mean2[rows]) * rstd2[rows]
        g = dy[rows] if weight is None else dy[rows] * weight.reshape(h)
        db += np.einsum("ij->j", dy[rows])
        dw += np.einsum("ij,ij->j", dy[rows], x_hat)
        a = np.einsum("ij->i", g)[:, None] / h
        c = np.einsum("ij,ij->i", g, x_hat)[:, None] / h
        dx[rows] = rstd2[rows] * (g - a - x_hat * c)
    shape = tuple(normalized_shape)
    return (dx.reshape(x.shape), None if weight is None else dw.reshape(shape),
            None if bias is None else db.reshape(shape))


# Exercise 6.5: the parameter gradients of a 16-bit LayerNorm --------------------------------


def param_grads_einsum(grad_output, x, normalized_shape, mean, rstd):
    """torch.einsum over the flattened rows, in float32."""
    h = math.prod(normalized_shape)
    g = grad_output.float().reshape(-1, h)
    x_hat = ((x.float() - mean.float()) * rstd.float()).reshape(-1, h)
    dweight = torch.einsum("rh,rh->h", g, x_hat).reshape(normalized_shape)
    dbias = torch.einsum("rh->h", g).reshape(normalized_shape)
    return dweight.to(x.dtype), dbias.to(x.dtype)


def param_grads_row_blocks(grad_output, x, normalized_shape, mean, rstd):
    """A loop over blocks of 100 rows into float32 accumulators, rounded once at the end."""
    h = math.prod(normalized_shape)
    g, x2 = grad_output.reshape(-1, h), x.reshape(-1, h)
    mean2, rstd2 = mean.reshape(-1, 1).float(), rstd.reshape(-1, 1).float()
    dweight = torch.zeros(h, dtype=torch.float32)
    dbias = torch.zeros(h, dtype=torch.float32)
    for i in range(0, g.shape[0], 100):
        gb = g[i:i + 100].float()
        dweight += (gb * ((x2[i:i + 100].float() - mean2[i:i + 100]) * rstd2[i:i + 100])).sum(0)
        dbias += gb.sum(0)
    return (dweight.reshape(normalized_shape).to(x.dtype),
            dbias.reshape(normalized_shape).to(x.dtype))


def param_grads_float64(grad_output, x, normalized_shape, mean, rstd):
    """In float64 (more than needed), with x_hat as x * rstd - mean * rstd."""
    dims = tuple(range(x.dim() - len(normalized_shape)))
    g, r = grad_output.double(), rstd.double()
    x_hat = x.double() * r - mean.double() * r
    return (g * x_hat).sum(dim=dims).to(x.dtype), g.sum(dim=dims).to(x.dtype)


RIGHT = {
    "6.1": {"float64 inside": welford_float64, "NumPy's two-pass state": welford_numpy_two_pass},
    "6.2": {"weighted means": merge_weighted_means, "float64 inside": merge_float64},
    "6.3": {"F.layer_norm in float32": layer_norm_via_float32, "float64": layer_norm_float64},
    "6.4": {"F.rms_norm in float32": rms_norm_via_float32, "float64": rms_norm_float64},
    "7.1": {"in place, no blocks": forward_in_place},
    "7.2": {"blocks of 16 rows, einsum sums": backward_small_blocks},
    "6.5": {"einsum in float32": param_grads_einsum,
            "blocks of 100 rows, float32 accumulators": param_grads_row_blocks,
            "float64": param_grads_float64},
}
