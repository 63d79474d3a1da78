"""Realistic wrong implementations of Unit 3's exercises: every one must fail its graded
check (tests/test_graders.py). Keyed by exercise number, then by the mistake's name."""

import numpy as np

from normkit.channels import channel_affine, per_channel, update_running
from normlib.norm import normalize_forward


def _stats(x, axes, eps, ddof=0):
    mean = x.mean(axis=axes, keepdims=True)
    var = x.var(axis=axes, keepdims=True)
    rstd = 1 / np.sqrt(x.var(axis=axes, keepdims=True, ddof=ddof) + eps)
    return (x - mean) * rstd, mean, var, rstd


# Exercise 3.1: normalize_forward ------------------------------------------------------------


def normalize_unbiased(x, axes, eps):
    x_hat, mean, _, rstd = _stats(x, axes, eps, ddof=1)
    return x_hat, mean, x.var(axis=axes, keepdims=True, ddof=1), rstd


def normalize_eps_on_std(x, axes, eps):
    mean, std = x.mean(axis=axes, keepdims=True), x.std(axis=axes, keepdims=True)
    return (x - mean) / (std + eps), mean, std**2, 1 / (std + eps)


def normalize_no_keepdims(x, axes, eps):
    x_hat, mean, var, rstd = _stats(x, axes, eps)
    return x_hat, mean.squeeze(axes), var.squeeze(axes), rstd.squeeze(axes)


def normalize_std_for_var(x, axes, eps):
    x_hat, mean, var, rstd = _stats(x, axes, eps)
    return x_hat, mean, np.sqrt(var), rstd


def normalize_last_axis(x, axes, eps):
    return _stats(x, (x.ndim - 1,), eps)


def normalize_in_place(x, axes, eps):
    mean = x.mean(axis=axes, keepdims=True)
    x -= mean  # overwrites the caller's x
    var = (x * x).mean(axis=axes, keepdims=True)
    rstd = 1 / np.sqrt(var + eps)
    return x * rstd, mean, var, rstd


# Exercise 3.2: normalize_backward -----------------------------------------------------------


def _normalize_backward(mistake):
    def backward(grad_x_hat, x_hat, rstd, axes):
        means = tuple(range(x_hat.ndim)) if mistake == "all axes" else axes
        g_mean = 0 if mistake == "no mean" else grad_x_hat.mean(axis=means, keepdims=True)
        gx = 0 if mistake == "no var" else (grad_x_hat * x_hat).mean(axis=means, keepdims=True)
        return (1 if mistake == "no rstd" else rstd) * (grad_x_hat - g_mean - x_hat * gx)

    return backward


# Exercise 3.3: batch_norm_forward -----------------------------------------------------------


def _batch_norm(mistake):
    def forward(x, running_mean=None, running_var=None, weight=None, bias=None, training=False,
                momentum=0.1, eps=1e-5):
        axes = (0,) if mistake == "axis 0 only" else (0, *range(2, x.ndim))
        if training or mistake == "eval uses batch stats":
            x_hat, mean, var, rstd = normalize_forward(x, axes, eps)
            if mistake == "normalizes with unbiased var":
                n = x.size // np.prod(mean.shape)
                rstd = (1 / np.sqrt(var * n / (n - 1) + eps)).astype(x.dtype)
                x_hat = (x - mean) * rstd
            if running_mean is not None and training:
                n = x.size // x.shape[1]
                unbiased = 1 if mistake == "running_var biased" else n / (n - 1)
                batch_mean = mean.mean(axis=tuple(range(2, mean.ndim))).ravel()  # (C,)
                batch_var = var.mean(axis=tuple(range(2, var.ndim))).ravel() * unbiased
                if mistake == "not in place":
                    running_mean = (1 - momentum) * running_mean + momentum * batch_mean
                    running_var = (1 - momentum) * running_var + momentum * batch_var
                elif mistake == "momentum reversed":
                    update_running(running_mean, batch_mean, 1 - momentum)
                    update_running(running_var, batch_var, 1 - momentum)
                else:
                    update_running(running_mean, batch_mean, momentum)
                    update_running(running_var, batch_var, momentum)
        else:
            if mistake == "updates running stats in eval":
                update_running(running_mean, x.mean(axis=(0, *range(2, x.ndim))), momentum)
            mean = per_channel(running_mean, x.ndim)
            rstd = 1.0 / np.sqrt(per_channel(running_var, x.ndim) + eps)
            x_hat = (x - mean) * rstd
        return channel_affine(x_hat, weight, bias), x_hat, rstd

    return forward


# Exercise 3.4: group_norm_forward -----------------------------------------------------------


def group_norm_interleaved(x, num_groups, weight=None, bias=None, eps=1e-5):
    """Group g holds channels g, g + G, g + 2G, ...: reshaped (N, C/G, G, *) by mistake."""
    n, c = x.shape[:2]
    view = x.reshape(n, c // num_groups, num_groups, -1)  # (N, C/G, G, spatial)
    x_hat, _, _, rstd = normalize_forward(view, (1, 3), eps)
    x_hat = x_hat.reshape(x.shape)
    return channel_affine(x_hat, weight, bias), x_hat, rstd.reshape(n, num_groups, 1)


def group_norm_channels_only(x, num_groups, weight=None, bias=None, eps=1e-5):
    """Normalizes each group's channels at each position separately (spatial axes kept)."""
    n, c = x.shape[:2]
    view = x.reshape(n, num_groups, c // num_groups, -1)  # (N, G, C/G, spatial)
    x_hat, _, _, rstd = normalize_forward(view, (2,), eps)
    x_hat = x_hat.reshape(x.shape)
    return channel_affine(x_hat, weight, bias), x_hat, rstd.mean(axis=3).reshape(n, -1, 1)


def group_norm_affine_per_group(x, num_groups, weight=None, bias=None, eps=1e-5):
    """Uses the first num_groups entries of weight and bias, one per group."""
    groups = x.reshape(x.shape[0], num_groups, -1)
    x_hat, _, _, rstd = normalize_forward(groups, (2,), eps)
    y = x_hat
    if weight is not None:
        y = y * weight[:num_groups, None]
    if bias is not None:
        y = y + bias[:num_groups, None]
    return y.reshape(x.shape), x_hat.reshape(x.shape), rstd


# Exercise 3.5: instance_norm_forward --------------------------------------------------------


def _instance_norm(mistake):
    def forward(x, running_mean=None, running_var=None, weight=None, bias=None,
                use_input_stats=True, momentum=0.1, eps=1e-5):
        axes = (0, *range(2, x.ndim)) if mistake == "batch axis included" else tuple(
            range(2, x.ndim))
        if use_input_stats or mistake == "eval uses input stats":
            x_hat, mean, var, rstd = normalize_forward(x, axes, eps)
            if running_mean is not None and use_input_stats:
                n = int(np.prod(x.shape[2:]))
                unbiased = 1 if mistake == "running_var biased" else n / (n - 1)
                batch_mean = mean.mean(axis=0).ravel()
                batch_var = (var * unbiased).mean(axis=0).ravel()
                if mistake == "not in place":
                    running_mean = (1 - momentum) * running_mean + momentum * batch_mean
                    running_var = (1 - momentum) * running_var + momentum * batch_var
                else:
                    update_running(running_mean, batch_mean, momentum)
                    update_running(running_var, batch_var, momentum)
        else:
            mean = per_channel(running_mean, x.ndim)
            rstd = 1.0 / np.sqrt(per_channel(running_var, x.ndim) + eps)
            x_hat = (x - mean) * rstd
        return channel_affine(x_hat, weight, bias), x_hat, rstd

    return forward


# Exercises 3.6 and 3.7: rms_norm_forward, rms_norm_backward ---------------------------------


def _rms_norm(mistake):
    def forward(x, normalized_shape, weight=None, eps=None):
        axes = (x.ndim - 1,) if mistake == "last axis only" else tuple(
            range(x.ndim - len(normalized_shape), x.ndim))
        if eps is None:
            eps = 1e-5 if mistake == "eps 1e-5 when None" else np.finfo(x.dtype).eps
        if mistake == "subtracts the mean":
            x = x - x.mean(axis=axes, keepdims=True)
        ms = (x * x).mean(axis=axes, keepdims=True)
        rrms = 1 / (np.sqrt(ms) + eps) if mistake == "eps outside sqrt" else 1 / np.sqrt(ms + eps)
        y = x * rrms
        if weight is not None:
            y = y * weight
            if mistake == "adds a bias":  # a LayerNorm copied over: bias = mean of the weight
                y = y + weight.mean()
        return y, rrms.astype(x.dtype)

    return forward


def _rms_norm_backward(mistake):
    def backward(grad_output, x, normalized_shape, rrms, weight=None):
        axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
        lead = (0,) if mistake == "dweight over axis 0 only" else tuple(
            range(x.ndim - len(normalized_shape)))
        x_hat = x * rrms
        source = x if mistake == "dweight from x" else x_hat
        dweight = None if weight is None else (grad_output * source).sum(axis=lead)
        g = grad_output if weight is None or mistake == "weight ignored" else grad_output * weight
        gx = 0 if mistake == "no x_hat term" else (g * x_hat).mean(axis=axes, keepdims=True)
        mean = g.mean(axis=axes, keepdims=True) if mistake == "LayerNorm's mean term" else 0
        return rrms * (g - mean - x_hat * gx), dweight

    return backward


# Exercise 3.8: batch_norm_backward -----------------------------------------------------------


def _bn_backward(grad_output, x_hat, rstd, weight, bias, training, mistake):
    axes = (0, *range(2, x_hat.ndim))
    sum_axes = (0,) if mistake == "batch_axis_only" else axes
    if mistake == "channel_axis":
        axes = tuple(range(1, x_hat.ndim))
    shape = (1, -1) + (1,) * (x_hat.ndim - 2)
    dweight = None if weight is None else (grad_output * x_hat).sum(axis=sum_axes)
    dbias = None if bias is None else grad_output.sum(axis=sum_axes)
    g = grad_output if weight is None or mistake == "weight_ignored" else (
        grad_output * weight.reshape(shape))
    if mistake == "batch_axis_only":
        axes = (0,)
    if not training and mistake != "eval_like_training":
        return g * rstd, dweight, dbias
    g_mean = 0 if mistake == "no_mean_term" else g.mean(axis=axes, keepdims=True)
    gx_mean = 0 if mistake == "no_variance_term" else (g * x_hat).mean(axis=axes, keepdims=True)
    return rstd * (g - g_mean - x_hat * gx_mean), dweight, dbias


def _bn_backward_with(mistake):
    def batch_norm_backward(grad_output, x_hat, rstd, weight=None, bias=None, training=False):
        return _bn_backward(grad_output, x_hat, rstd, weight, bias, training, mistake)

    return batch_norm_backward


WRONG = {
    "3.1": {
        "unbiased variance": normalize_unbiased,
        "eps added to the std": normalize_eps_on_std,
        "no keepdims": normalize_no_keepdims,
        "std returned as var": normalize_std_for_var,
        "axes ignored (last axis)": normalize_last_axis,
        "writes into x": normalize_in_place,
    },
    "3.2": {
        "missing mean term": _normalize_backward("no mean"),
        "missing variance term": _normalize_backward("no var"),
        "means over every axis": _normalize_backward("all axes"),
        "rstd factor missing": _normalize_backward("no rstd"),
    },
    "3.3": {
        "normalizes with the unbiased variance": _batch_norm("normalizes with unbiased var"),
        "running_var updated with the biased variance": _batch_norm("running_var biased"),
        "running stats not updated in place": _batch_norm("not in place"),
        "eval mode uses batch statistics": _batch_norm("eval uses batch stats"),
        "momentum reversed": _batch_norm("momentum reversed"),
        "running stats updated in eval mode": _batch_norm("updates running stats in eval"),
        "statistics over axis 0 only": _batch_norm("axis 0 only"),
    },
    "3.4": {
        "channels grouped in the wrong order": group_norm_interleaved,
        "spatial axes not normalized together": group_norm_channels_only,
        "affine per group, not per channel": group_norm_affine_per_group,
    },
    "3.5": {
        "batch axis included": _instance_norm("batch axis included"),
        "running_var updated with the biased variance": _instance_norm("running_var biased"),
        "running stats not updated in place": _instance_norm("not in place"),
        "use_input_stats=False still uses the input": _instance_norm("eval uses input stats"),
    },
    "3.6": {
        "subtracts the mean": _rms_norm("subtracts the mean"),
        "adds a bias": _rms_norm("adds a bias"),
        "eps=None taken as 1e-5": _rms_norm("eps 1e-5 when None"),
        "eps outside the sqrt": _rms_norm("eps outside sqrt"),
        "last axis only": _rms_norm("last axis only"),
    },
    "3.7": {
        "LayerNorm's mean term kept": _rms_norm_backward("LayerNorm's mean term"),
        "missing the x_hat term": _rms_norm_backward("no x_hat term"),
        "dweight from x, not x_hat": _rms_norm_backward("dweight from x"),
        "dweight summed over axis 0 only": _rms_norm_backward("dweight over axis 0 only"),
        "weight ignored in dx": _rms_norm_backward("weight ignored"),
    },
    "3.8": {
        "evaluation mode with the batch terms": _bn_backward_with("eval_like_training"),
        "missing mean term": _bn_backward_with("no_mean_term"),
        "missing variance term": _bn_backward_with("no_variance_term"),
        "means over the batch axis only, not the positions": _bn_backward_with("batch_axis_only"),
        "means over the channels (LayerNorm's group)": _bn_backward_with("channel_axis"),
        "weight ignored in dx": _bn_backward_with("weight_ignored"),
    },
}
