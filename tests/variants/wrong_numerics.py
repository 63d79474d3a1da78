"""Realistic wrong implementations of Unit 6's exercises and Unit 7's NumPy kernels: every one must fail its graded
check (tests/test_graders.py). Keyed by exercise number, then by the mistake's name."""

import math

import numpy as np
import torch

from normlib.layer_norm import layer_norm_backward, layer_norm_forward
from normlib.layer_norm_fast import (
    layer_norm_backward_fast,
    layer_norm_forward_fast,
    rows_per_block,
)
from normlib.mixed_precision import (
    layer_norm_mixed,
    layer_norm_param_grads_mixed,
    rms_norm_mixed,
)
from tests.variants.mistake import Mistake

# Exercise 6.1: welford ----------------------------------------------------------------------


def welford_one_pass(x):
    """The shortcut: m2 = sum(x^2) - n mean^2."""
    n = x.shape[-1]
    mean = x.mean(axis=-1)
    return n, mean, (x * x).sum(axis=-1) - n * mean * mean


def welford_old_mean_twice(x):
    """m2 += delta * delta: the second factor should use the updated mean."""
    mean, m2 = np.zeros(x.shape[:-1], x.dtype), np.zeros(x.shape[:-1], x.dtype)
    for k in range(x.shape[-1]):
        delta = x[..., k] - mean
        mean += delta / (k + 1)
        m2 += delta * delta
    return x.shape[-1], mean, m2


def welford_new_mean_twice(x):
    """m2 += (x_k - mean) ** 2 after the mean's update: both factors use the new mean."""
    mean, m2 = np.zeros(x.shape[:-1], x.dtype), np.zeros(x.shape[:-1], x.dtype)
    for k in range(x.shape[-1]):
        mean += (x[..., k] - mean) / (k + 1)
        m2 += (x[..., k] - mean) ** 2
    return x.shape[-1], mean, m2


def welford_float64_state(x):
    """Accumulators made with np.zeros' default dtype: a float64 state for float32 x."""
    mean, m2 = np.zeros(x.shape[:-1]), np.zeros(x.shape[:-1])
    for k in range(x.shape[-1]):
        delta = x[..., k] - mean
        mean += delta / (k + 1)
        m2 += delta * (x[..., k] - mean)
    return x.shape[-1], mean, m2


def welford_variance_for_m2(x):
    """Returns m2 / count (the variance) where the state holds m2."""
    n = x.shape[-1]
    return n, x.mean(axis=-1), x.var(axis=-1)


def welford_last_value_left_out(x):
    """The loop runs over range(n - 1): the last value never enters the state."""
    mean, m2 = np.zeros(x.shape[:-1], x.dtype), np.zeros(x.shape[:-1], x.dtype)
    for k in range(x.shape[-1] - 1):
        delta = x[..., k] - mean
        mean += delta / (k + 1)
        m2 += delta * (x[..., k] - mean)
    return x.shape[-1], mean, m2


def welford_float32_state(x):
    """The state kept in float32 whatever x's dtype."""
    mean, m2 = np.zeros(x.shape[:-1], np.float32), np.zeros(x.shape[:-1], np.float32)
    for k in range(x.shape[-1]):
        delta = x[..., k] - mean
        mean += (delta / (k + 1)).astype(np.float32)
        m2 += (delta * (x[..., k] - mean)).astype(np.float32)
    return x.shape[-1], mean.astype(x.dtype), m2.astype(x.dtype)


# Exercise 6.2: welford_merge ----------------------------------------------------------------


def merge_unweighted_mean(a, b):
    (na, ma, m2a), (nb, mb, m2b) = a, b
    n = na + nb
    return n, (ma + mb) / 2, m2a + m2b + (mb - ma) ** 2 * (na * nb / n)


def merge_counts_swapped(a, b):
    """The mean moves towards b's by count_a / count: the counts swapped."""
    (na, ma, m2a), (nb, mb, m2b) = a, b
    n = na + nb
    delta = mb - ma
    return n, ma + delta * (na / n), m2a + m2b + delta**2 * (na * nb / n)


def merge_weighted_m2(a, b):
    """The m2s weighted by their counts like the means, as if m2 were a mean."""
    (na, ma, m2a), (nb, mb, m2b) = a, b
    n = na + nb
    delta = mb - ma
    return n, ma + delta * (nb / n), (m2a * na + m2b * nb) / n + delta**2 * (na * nb / n)


def merge_without_between_term(a, b):
    (na, ma, m2a), (nb, mb, m2b) = a, b
    n = na + nb
    return n, ma + (mb - ma) * (nb / n), m2a + m2b


def merge_n_squared(a, b):
    """delta^2 n_a n_b / n^2: the between-group *variance*, not its sum of squares."""
    (na, ma, m2a), (nb, mb, m2b) = a, b
    n = na + nb
    return n, ma + (mb - ma) * (nb / n), m2a + m2b + (mb - ma) ** 2 * (na * nb / n**2)


def merge_through_sums_of_squares(a, b):
    """The one-pass shortcut: sum x^2 = m2 + n mean^2 for each part, added, and back."""
    (na, ma, m2a), (nb, mb, m2b) = a, b
    n = na + nb
    mean = (ma * na + mb * nb) / n
    squares = (m2a + na * ma * ma) + (m2b + nb * mb * mb)
    return n, mean, squares - n * mean * mean


def merge_counts_not_added(a, b):
    """The merged count is a's alone."""
    (na, ma, m2a), (nb, mb, m2b) = a, b
    n = na + nb
    delta = mb - ma
    return na, ma + delta * nb / n, m2a + m2b + delta ** 2 * na * nb / n


def merge_delta_sign_flipped(a, b):
    """delta = mean_a - mean_b, used as if it were mean_b - mean_a."""
    (na, ma, m2a), (nb, mb, m2b) = a, b
    n = na + nb
    delta = ma - mb
    return n, ma + delta * nb / n, m2a + m2b + delta ** 2 * na * nb / n


# Exercises 6.3 and 6.4: 16-bit norms ----------------------------------------------------------


def layer_norm_in_dtype(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Every operation in the 16-bit dtype."""
    dims = tuple(range(-len(normalized_shape), 0))
    mean = x.mean(dim=dims, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=dims, keepdim=True)
    y = (x - mean) * torch.rsqrt(var + eps)
    y = y if weight is None else y * weight
    return y if bias is None else y + bias


def layer_norm_no_cast_back(x, *args, **kwargs):
    return layer_norm_mixed(x, *args, **kwargs).float() if x.dtype != torch.float32 else x


def layer_norm_mean_in_dtype(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """The mean taken in the 16-bit dtype (rounded to it), the rest in float32."""
    dims = tuple(range(-len(normalized_shape), 0))
    mean = x.mean(dim=dims, keepdim=True).float()
    xc = x.float() - mean
    y = xc * torch.rsqrt((xc * xc).mean(dim=dims, keepdim=True) + eps)
    y = y if weight is None else y * weight.float()
    return (y if bias is None else y + bias.float()).to(x.dtype)


def layer_norm_eps_on_std(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """In float32, but eps added to the std: (x - mean) / (std + eps)."""
    dims = tuple(range(-len(normalized_shape), 0))
    x32 = x.float()
    var, mean = torch.var_mean(x32, dim=dims, unbiased=False, keepdim=True)
    y = (x32 - mean) / (var.sqrt() + eps)
    y = y if weight is None else y * weight.float()
    return (y if bias is None else y + bias.float()).to(x.dtype)


def layer_norm_last_axis(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """The statistics over dim=-1, whatever normalized_shape says."""
    x32 = x.float()
    mean = x32.mean(dim=-1, keepdim=True)
    xc = x32 - mean
    y = xc * torch.rsqrt((xc * xc).mean(dim=-1, keepdim=True) + eps)
    y = y if weight is None else y * weight.float()
    return (y if bias is None else y + bias.float()).to(x.dtype)


def rms_norm_in_dtype(x, normalized_shape, weight=None, eps=None):
    eps = torch.finfo(torch.float32).eps if eps is None else eps
    dims = tuple(range(-len(normalized_shape), 0))
    y = x * torch.rsqrt(x.pow(2).mean(dim=dims, keepdim=True) + eps)
    return y if weight is None else y * weight


def rms_norm_eps_of_input_dtype(x, normalized_shape, weight=None, eps=None):
    """eps=None as the documentation reads: finfo(x.dtype).eps, 9.8e-4 for float16."""
    return rms_norm_mixed(x, normalized_shape, weight,
                          torch.finfo(x.dtype).eps if eps is None else eps)


def rms_norm_no_cast_back(x, normalized_shape, weight=None, eps=None):
    return rms_norm_mixed(x.float(), normalized_shape,
                          None if weight is None else weight.float(), eps)


def rms_norm_eps_on_rms(x, normalized_shape, weight=None, eps=None):
    """In float32, but eps added to the RMS: x / (rms + eps)."""
    eps = torch.finfo(torch.float32).eps if eps is None else eps
    dims = tuple(range(-len(normalized_shape), 0))
    x32 = x.float()
    y = x32 / (x32.pow(2).mean(dim=dims, keepdim=True).sqrt() + eps)
    return (y if weight is None else y * weight.float()).to(x.dtype)


def rms_norm_last_axis(x, normalized_shape, weight=None, eps=None):
    """The mean square over dim=-1, whatever normalized_shape says."""
    eps = torch.finfo(torch.float32).eps if eps is None else eps
    x32 = x.float()
    y = x32 * torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (y if weight is None else y * weight.float()).to(x.dtype)


def layer_norm_mixed_without_bias(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """The bias never added."""
    return layer_norm_mixed(x, normalized_shape, weight, None, eps)


def layer_norm_mixed_default_eps(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """eps not passed on: the default, 1e-5, whatever the caller's."""
    return layer_norm_mixed(x, normalized_shape, weight, bias)


def rms_norm_mixed_without_weight(x, normalized_shape, weight=None, eps=None):
    """The weight never applied."""
    return rms_norm_mixed(x, normalized_shape, None, eps)


def rms_norm_mixed_default_eps(x, normalized_shape, weight=None, eps=None):
    """eps not passed on: None (the dtype's eps) whatever the caller's."""
    return rms_norm_mixed(x, normalized_shape, weight)


# Exercises 7.1 and 7.2: fast LayerNorm ------------------------------------------------------


def forward_naive_renamed(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """The naive kernel under the fast one's name: right values, three times the memory."""
    return layer_norm_forward(x, normalized_shape, weight, bias, eps)


def forward_centres_x_in_place(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Saves memory by writing x - mean into x itself."""
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    np.subtract(x, mean, out=x)
    rstd = 1 / np.sqrt((x**2).mean(axis=axes, keepdims=True) + eps)
    y = x * rstd
    if weight is not None:
        y *= weight
    if bias is not None:
        y += bias
    return y, mean, rstd


def forward_drops_partial_block(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """The loop stops before a last block shorter than the others."""
    h = math.prod(normalized_shape)
    x2 = x.reshape(-1, h)
    y, mean, rstd = layer_norm_forward_fast(x, normalized_shape, weight, bias, eps)
    step = rows_per_block(h, x.itemsize)
    kept = len(x2) // step * step
    y.reshape(-1, h)[kept:] = 0
    return y, mean, rstd


def forward_flat_statistics(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """mean and rstd returned as (R,) rows, not (*B, 1, .., 1)."""
    y, mean, rstd = layer_norm_forward_fast(x, normalized_shape, weight, bias, eps)
    return y, mean.reshape(-1), rstd.reshape(-1)


def forward_eps_on_std(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """In blocks and in place, but rstd = 1 / (std + eps): eps added to the std."""
    h = math.prod(normalized_shape)
    x2 = x.reshape(-1, h)
    y = np.empty_like(x2)
    mean = x2.mean(axis=1, keepdims=True)
    rstd = np.empty_like(mean)
    step = rows_per_block(h, x.itemsize)
    for i in range(0, len(x2), step):
        yb = y[i:i + step]
        np.subtract(x2[i:i + step], mean[i:i + step], out=yb)
        rstd[i:i + step] = 1 / (np.sqrt(np.vecdot(yb, yb)[:, None] / h) + eps)
        yb *= rstd[i:i + step]
    if weight is not None:
        y *= weight.reshape(h)
    if bias is not None:
        y += bias.reshape(h)
    stats = x.shape[: x.ndim - len(normalized_shape)] + (1,) * len(normalized_shape)
    return y.reshape(x.shape), mean.reshape(stats), rstd.reshape(stats)


def backward_naive_renamed(grad_output, x, normalized_shape, mean, rstd, weight=None, bias=None):
    return layer_norm_backward(grad_output, x, normalized_shape, mean, rstd, weight, bias)


def backward_last_block_sums(grad_output, x, normalized_shape, mean, rstd, weight=None,
                             bias=None):
    """dweight and dbias assigned per block instead of accumulated: only the last counts."""
    h = math.prod(normalized_shape)
    dx, _, _ = layer_norm_backward_fast(grad_output, x, normalized_shape, mean, rstd, weight,
                                        bias)
    step = rows_per_block(h, x.itemsize)
    last = (len(x.reshape(-1, h)) - 1) // step * step
    part = [a.reshape(-1, h)[last:] for a in (grad_output, x)]
    _, dw, db = layer_norm_backward_fast(part[0], part[1], normalized_shape,
                                         mean.reshape(-1, 1)[last:], rstd.reshape(-1, 1)[last:],
                                         weight, bias)
    return dx, dw, db


def backward_missing_mean_term(grad_output, x, normalized_shape, mean, rstd, weight=None,
                               bias=None):
    """dx = rstd (g - x_hat mean(g x_hat)): the mean(g) term forgotten, in blocks."""
    h = math.prod(normalized_shape)
    dx, dw, db = layer_norm_backward_fast(grad_output, x, normalized_shape, mean, rstd, weight,
                                          bias)
    g = grad_output.reshape(-1, h) if weight is None else grad_output.reshape(-1, h) * weight.reshape(h)
    dx.reshape(-1, h)[...] += rstd.reshape(-1, 1) * g.mean(axis=1, keepdims=True)
    return dx, dw, db


def backward_drops_partial_block(grad_output, x, normalized_shape, mean, rstd, weight=None,
                                 bias=None):
    """The loop stops before a last block shorter than the others: dx's last rows unwritten
    (zeros), dweight and dbias without them."""
    h = math.prod(normalized_shape)
    dy, x2 = grad_output.reshape(-1, h), x.reshape(-1, h)
    mean2, rstd2 = mean.reshape(-1, 1), rstd.reshape(-1, 1)
    w = None if weight is None else weight.reshape(h)
    b = None if bias is None else bias.reshape(h)
    dx, dw, db = np.zeros_like(x2), np.zeros(h, x.dtype), np.zeros(h, x.dtype)
    step = rows_per_block(h, x.itemsize)
    for i in range(0, len(x2) - step + 1, step):  # the bug: a partial last block is skipped
        rows = slice(i, i + step)
        dx[rows], dwb, dbb = layer_norm_backward_fast(dy[rows], x2[rows], (h,), mean2[rows],
                                                      rstd2[rows], w, b)
        dw += 0 if dwb is None else dwb
        db += 0 if dbb is None else dbb
    shape = tuple(normalized_shape)
    return (dx.reshape(x.shape), None if weight is None else dw.reshape(shape),
            None if bias is None else db.reshape(shape))


def backward_missing_variance_term(grad_output, x, normalized_shape, mean, rstd, weight=None,
                                   bias=None):
    """dx = rstd (g - mean(g)): the x_hat mean(g x_hat) term forgotten, in blocks."""
    h = math.prod(normalized_shape)
    dx, dw, db = layer_norm_backward_fast(grad_output, x, normalized_shape, mean, rstd, weight,
                                          bias)
    g = grad_output.reshape(-1, h) * (1 if weight is None else weight.reshape(h))
    x_hat = (x.reshape(-1, h) - mean.reshape(-1, 1)) * rstd.reshape(-1, 1)
    dx.reshape(-1, h)[...] += rstd.reshape(-1, 1) * x_hat * (g * x_hat).mean(axis=1,
                                                                              keepdims=True)
    return dx, dw, db


def forward_fast_default_eps(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """eps not passed on: 1e-5 whatever the caller's."""
    return layer_norm_forward_fast(x, normalized_shape, weight, bias)


def forward_fast_bias_only_with_weight(x, normalized_shape, weight=None, bias=None,
                                       eps=1e-5):
    """The bias added inside the weight's branch: lost where there is no weight."""
    return layer_norm_forward_fast(x, normalized_shape, weight,
                                   bias if weight is not None else None, eps)


def backward_fast_dbias_only_with_weight(grad_output, x, normalized_shape, mean, rstd,
                                         weight=None, bias=None):
    """dbias summed inside the weight's branch: zero where there is no weight."""
    dx, dweight, dbias = layer_norm_backward_fast(grad_output, x, normalized_shape, mean, rstd,
                                                  weight, bias)
    return dx, dweight, dbias if weight is not None or bias is None else np.zeros_like(bias)


def backward_fast_scratch_rows_of_h(grad_output, x, normalized_shape, mean, rstd,
                                    weight=None, bias=None):
    """The scratch block made (H, H) where it holds a block of rows: wrong wherever a block
    has more rows than H (its x_hat rows past H never computed, zeros instead)."""
    dx, dweight, dbias = layer_norm_backward_fast(grad_output, x, normalized_shape, mean, rstd,
                                                  weight, bias)
    h = math.prod(normalized_shape)
    step = rows_per_block(h, x.itemsize)
    rows, dy = dx.reshape(-1, h), grad_output.reshape(-1, h)  # (R, H) views
    for i in range(h, len(rows), step) if step > h else ():  # rows h.. of each block:
        gb = dy[i:i - h + step] * (1 if weight is None else weight.reshape(h))  # x_hat 0
        rows[i:i - h + step] = rstd.reshape(-1, 1)[i:i - h + step] * (
            gb - gb.mean(axis=1, keepdims=True))
    return dx, dweight, dbias


# Exercise 6.5: the parameter gradients of a 16-bit LayerNorm --------------------------------


def param_grads_16bit_accumulator(grad_output, x, normalized_shape, mean, rstd):
    """x_hat in float32, but dweight and dbias accumulated row by row in x's dtype."""
    rows = (-1, *normalized_shape)
    g = grad_output.reshape(rows)
    x_hat = ((x.float() - mean.float()) * rstd.float()).reshape(rows)
    dweight = torch.zeros(normalized_shape, dtype=x.dtype)
    dbias = torch.zeros(normalized_shape, dtype=x.dtype)
    for r in range(g.shape[0]):
        dweight += g[r].float() * x_hat[r]
        dbias += g[r]
    return dweight, dbias


def param_grads_torch_cpu_kernel(grad_output, x, normalized_shape, mean, rstd):
    """torch's own LayerNorm backward (aten's CPU kernel), asked for dweight and dbias."""
    ones = torch.ones(normalized_shape, dtype=x.dtype)
    _, dweight, dbias = torch.ops.aten.native_layer_norm_backward(
        grad_output, x, list(normalized_shape), mean, rstd, ones, ones, [False, True, True])
    return dweight, dbias


def param_grads_x_hat_in_dtype(grad_output, x, normalized_shape, mean, rstd):
    """x_hat computed in x's dtype; the products and the sums in float32."""
    dims = tuple(range(x.dim() - len(normalized_shape)))
    x_hat = (x - mean) * rstd
    dweight = (grad_output.float() * x_hat.float()).sum(dim=dims)
    return dweight.to(x.dtype), grad_output.float().sum(dim=dims).to(x.dtype)


def param_grads_products_in_dtype(grad_output, x, normalized_shape, mean, rstd):
    """Everything in x's dtype (torch's .sum accumulates in float32 inside, but the
    products are rounded to 16 bits before it)."""
    dims = tuple(range(x.dim() - len(normalized_shape)))
    return (grad_output * ((x - mean) * rstd)).sum(dim=dims), grad_output.sum(dim=dims)


def param_grads_float32_result(grad_output, x, normalized_shape, mean, rstd):
    """Summed in float32 and returned as they are, in float32."""
    dims = tuple(range(x.dim() - len(normalized_shape)))
    g = grad_output.float()
    return (g * (x.float() - mean.float()) * rstd.float()).sum(dim=dims), g.sum(dim=dims)


def param_grads_all_but_last_axis(grad_output, x, normalized_shape, mean, rstd):
    """Summed over every axis but the last, whatever normalized_shape says."""
    dims = tuple(range(x.dim() - 1))
    g = grad_output.float()
    dweight = (g * (x.float() - mean.float()) * rstd.float()).sum(dim=dims)
    return dweight.to(x.dtype), g.sum(dim=dims).to(x.dtype)


def param_grads_swapped(grad_output, x, normalized_shape, mean, rstd):
    """dbias returned first, dweight second."""
    dweight, dbias = layer_norm_param_grads_mixed(grad_output, x, normalized_shape, mean, rstd)
    return dbias, dweight


def param_grads_uncentred(grad_output, x, normalized_shape, mean, rstd):
    """x_hat taken as x * rstd: the mean never subtracted."""
    dims = tuple(range(x.dim() - len(normalized_shape)))
    x_hat = x.float() * rstd.float()
    dweight = (grad_output.float() * x_hat).sum(dim=dims)
    return dweight.to(x.dtype), grad_output.float().sum(dim=dims).to(x.dtype)


WRONG = {
    "6.1": {"one-pass shortcut": Mistake(welford_one_pass, "cancellation"),
            "old mean twice": Mistake(welford_old_mean_twice,
                                      "the mean before the update in both factors"),
            "new mean twice": Mistake(welford_new_mean_twice,
                                      "the mean after the update in both factors"),
            "float64 state for float32 x": Mistake(welford_float64_state,
                                                   "NumPy promotes to float64"),
            "variance returned as m2": Mistake(welford_variance_for_m2,
                                               "this is the variance, m2 / count"),
            "the last value left out": Mistake(welford_last_value_left_out,
                                               "mean for x (3, 8) float64: 3 of 3"),
            "a float32 state for float64 x": Mistake(welford_float32_state,
                                                     "float32's precision")},
    "6.2": {"unweighted mean": Mistake(merge_unweighted_mean, "averaged without their counts"),
            "counts swapped in the mean": Mistake(merge_counts_swapped,
                                                  "the counts are swapped"),
            "missing between-group term": Mistake(merge_without_between_term,
                                                  "the between-group term is missing"),
            "n squared in the denominator": Mistake(merge_n_squared,
                                                    "divided by count once too often"),
            "m2s weighted like the means": Mistake(merge_weighted_m2,
                                                   "m2s are weighted by their counts"),
            "one-pass merge through sums of squares": Mistake(merge_through_sums_of_squares,
                                                              "cancellation"),
            "the counts not added": Mistake(merge_counts_not_added,
                                            "Where: the merged state's count"),
            "delta's sign flipped": Mistake(merge_delta_sign_flipped,
                                             "mean for x (4, 10) float64 split at 3")},
    "6.3": {"computed in the 16-bit dtype": Mistake(layer_norm_in_dtype,
                                                    "the squares overflow float16"),
            "no cast back": Mistake(layer_norm_no_cast_back, "round it to x's dtype once"),
            "mean in the 16-bit dtype": Mistake(layer_norm_mean_in_dtype,
                                                "the mean was rounded to float16"),
            "eps added to the std": Mistake(layer_norm_eps_on_std, "eps is added to the std"),
            "last axis only": Mistake(layer_norm_last_axis, "over the last axis alone"),
            "the bias left out": Mistake(layer_norm_mixed_without_bias,
                                                 "y for x (4, 64) torch.float16"),
            "eps not passed on": Mistake(layer_norm_mixed_default_eps,
                                                 "{'eps': 0.5}: 64 of 64 values")},
    "6.4": {"computed in the 16-bit dtype": Mistake(rms_norm_in_dtype,
                                                    "the squares overflow float16"),
            "eps of the input's dtype": Mistake(rms_norm_eps_of_input_dtype,
                                                "eps=None was read as float16's eps"),
            "no cast back": Mistake(rms_norm_no_cast_back, "round it to x's dtype once"),
            "eps added to the RMS": Mistake(rms_norm_eps_on_rms, "eps is added to the RMS"),
            "last axis only": Mistake(rms_norm_last_axis, "over the last axis alone"),
            "the weight left out": Mistake(rms_norm_mixed_without_weight,
                                                  "y for x (4, 64) torch.float16"),
            "eps not passed on": Mistake(rms_norm_mixed_default_eps,
                                                 "{'eps': 0.5}: 63 of 64 values")},
    "7.1": {"the naive kernel": Mistake(forward_naive_renamed, "as the naive kernel makes"),
            "centres x in place": Mistake(forward_centres_x_in_place, "x was modified in place"),
            "drops the partial last block": Mistake(
                forward_drops_partial_block, "the loop over blocks stops before the last one"),
            "statistics without their singleton dims": Mistake(
                forward_flat_statistics, "the reduced axes were dropped"),
            "eps added to the std": Mistake(forward_eps_on_std, "eps is added to the std"),
            "eps not passed on": Mistake(forward_fast_default_eps,
                                               "eps=1e-05 is used, not the eps=0.5 given"),
            "the bias only with a weight": Mistake(
                forward_fast_bias_only_with_weight, "the bias is not added when weight is None")},
    "7.2": {"the naive kernel": Mistake(backward_naive_renamed, "as the naive kernel makes"),
            "dweight and dbias of the last block only": Mistake(
                backward_last_block_sums, "each block's share must be added"),
            "drops the partial last block": Mistake(
                backward_drops_partial_block, "the loop over blocks stops before the last one"),
            "missing mean term": Mistake(backward_missing_mean_term,
                                         "the mean's term is missing"),
            "missing variance term": Mistake(backward_missing_variance_term,
                                             "the variance's term is missing"),
            "dbias only with a weight": Mistake(
                backward_fast_dbias_only_with_weight, "weight None, bias given: 16 of 16 values are "
                                                      "wrong"),
            "a scratch block of H rows": Mistake(
                backward_fast_scratch_rows_of_h, "axis 0's indices 32 to 63 of 0..63 (the last 32)")},
    "6.5": {"16-bit accumulator": Mistake(param_grads_16bit_accumulator,
                                          "accumulated in bfloat16"),
            "torch's own CPU kernel": Mistake(param_grads_torch_cpu_kernel,
                                              "accumulated in bfloat16"),
            "x_hat in the 16-bit dtype": Mistake(param_grads_x_hat_in_dtype,
                                                 "x_hat was rounded to bfloat16"),
            "products in the 16-bit dtype": Mistake(
                param_grads_products_in_dtype,
                "the products grad_output * x_hat were rounded to bfloat16"),
            "float32 result": Mistake(param_grads_float32_result,
                                      "the result stayed in float32"),
            "all axes but the last": Mistake(param_grads_all_but_last_axis,
                                             "the result was reduced over axes (0, 1)"),
            "dweight and dbias swapped": Mistake(param_grads_swapped,
                                                 "dbias for grad_output and x (4096, 64)"),
            "x_hat not centred": Mistake(param_grads_uncentred,
                                         "dweight for grad_output and x (4096, 64)")},
}
