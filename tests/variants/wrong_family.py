"""Realistic wrong implementations of Unit 3's exercises: every one must fail its graded
check (tests/test_graders.py). Keyed by exercise number, then by the mistake's name."""

import numpy as np

from normlib._channels import channel_affine, per_channel, update_running
from normlib.norm import normalize_forward
from tests.variants.mistake import Mistake


def _stats(x, axes, eps, ddof=0):
    """x_hat, mean, var (biased) and rstd (with ddof) of x over axes."""
    mean = x.mean(axis=axes, keepdims=True)
    var = x.var(axis=axes, keepdims=True)
    rstd = 1 / np.sqrt(x.var(axis=axes, keepdims=True, ddof=ddof) + eps)
    return (x - mean) * rstd, mean, var, rstd


# Exercise 3.1: normalize_forward ------------------------------------------------------------


def normalize_unbiased(x, axes, eps):
    """Divides by N - 1 (ddof=1)."""
    x_hat, mean, _, rstd = _stats(x, axes, eps, ddof=1)
    return x_hat, mean, x.var(axis=axes, keepdims=True, ddof=1), rstd


def normalize_eps_on_std(x, axes, eps):
    """Adds eps to the std, outside the square root."""
    mean, std = x.mean(axis=axes, keepdims=True), x.std(axis=axes, keepdims=True)
    return (x - mean) / (std + eps), mean, std**2, 1 / (std + eps)


def normalize_no_keepdims(x, axes, eps):
    """Returns the statistics without their reduced axes."""
    x_hat, mean, var, rstd = _stats(x, axes, eps)
    return x_hat, mean.squeeze(axes), var.squeeze(axes), rstd.squeeze(axes)


def normalize_std_for_var(x, axes, eps):
    """Returns the std where var is asked for."""
    x_hat, mean, var, rstd = _stats(x, axes, eps)
    return x_hat, mean, np.sqrt(var), rstd


def normalize_last_axis(x, axes, eps):
    """Ignores `axes`: normalizes over the last axis, as LayerNorm over one dim does."""
    return _stats(x, (x.ndim - 1,), eps)


def normalize_in_place(x, axes, eps):
    """Centres x in place (x -= mean), overwriting the caller's array."""
    mean = x.mean(axis=axes, keepdims=True)
    x -= mean  # overwrites the caller's x
    var = (x * x).mean(axis=axes, keepdims=True)
    rstd = 1 / np.sqrt(var + eps)
    return x * rstd, mean, var, rstd


def normalize_float64(x, axes, eps):
    """Accumulates the mean in float64 (dtype=np.float64) and never casts back to x's dtype."""
    mean = x.mean(axis=axes, keepdims=True, dtype=np.float64)  # (1 on axes), float64
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    rstd = 1 / np.sqrt(var + eps)
    return (x - mean) * rstd, mean, var, rstd


# Exercise 3.2: normalize_backward -----------------------------------------------------------


def _normalize_backward(mistake):
    """The compact backward with `mistake`: a term missing, means over every axis, sums."""
    def backward(grad_x_hat, x_hat, rstd, axes):
        means = tuple(range(x_hat.ndim)) if mistake == "all axes" else axes
        reduce = np.sum if mistake == "sums" else np.mean
        g_mean = 0 if mistake == "no mean" else reduce(grad_x_hat, axis=means, keepdims=True)
        gx = 0 if mistake == "no var" else reduce(grad_x_hat * x_hat, axis=means, keepdims=True)
        return (1 if mistake == "no rstd" else rstd) * (grad_x_hat - g_mean - x_hat * gx)

    return backward


# Exercise 3.3: batch_norm_forward -----------------------------------------------------------


def _batch_norm(mistake):
    """BatchNorm's forward with `mistake` (its catalogue entry in WRONG says which)."""
    def forward(x, running_mean=None, running_var=None, weight=None, bias=None, training=False,
                momentum=0.1, eps=1e-5):
        axes = (0,) if mistake == "axis 0 only" else (0, *range(2, x.ndim))
        if training or mistake == "eval uses batch stats":
            x_hat, mean, var, rstd = normalize_forward(x, axes, eps)
            if mistake == "normalizes with unbiased var":
                n = x.size // np.prod(mean.shape)
                rstd = (1 / np.sqrt(var * n / (n - 1) + eps)).astype(x.dtype)
                x_hat = (x - mean) * rstd
            if mistake == "eps on std":
                rstd = 1 / (np.sqrt(var) + eps)
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
            if mistake == "eval stats (C,)":  # (C,): they broadcast against (N, C) alone
                mean, rstd = running_mean, 1.0 / np.sqrt(running_var + eps)
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


def _group_norm(mistake):
    """GroupNorm's forward on the grouped view with `mistake`: ddof=1, eps on the std, or
    num_groups taken as the number of channels in a group."""
    def forward(x, num_groups, weight=None, bias=None, eps=1e-5):
        n, c = x.shape[:2]
        groups = c // num_groups if mistake == "group size" else num_groups
        view = x.reshape(n, groups, -1)  # (N, G, C/G * spatial)
        mean = view.mean(axis=2, keepdims=True)  # (N, G, 1)
        std = view.std(axis=2, keepdims=True, ddof=1 if mistake == "unbiased" else 0)
        rstd = 1 / (std + eps) if mistake == "eps on std" else 1 / np.sqrt(std**2 + eps)
        x_hat = ((view - mean) * rstd).reshape(x.shape)
        return channel_affine(x_hat, weight, bias), x_hat, rstd

    return forward


# Exercise 3.5: instance_norm_forward --------------------------------------------------------


def _instance_norm(mistake):
    """InstanceNorm's forward with `mistake` (its catalogue entry in WRONG says which)."""
    def forward(x, running_mean=None, running_var=None, weight=None, bias=None,
                use_input_stats=True, momentum=0.1, eps=1e-5):
        axes = (0, *range(2, x.ndim)) if mistake == "batch axis included" else tuple(
            range(2, x.ndim))
        if use_input_stats or mistake == "eval uses input stats":
            x_hat, mean, var, rstd = normalize_forward(x, axes, eps)
            if mistake == "eps on std":
                rstd = 1 / (np.sqrt(var) + eps)
                x_hat = (x - mean) * rstd
            if running_mean is not None and use_input_stats:
                n = int(np.prod(x.shape[2:]))
                unbiased = 1 if mistake == "running_var biased" else n / (n - 1)
                batch_mean = mean.mean(axis=0).ravel()
                batch_var = (var * unbiased).mean(axis=0).ravel()
                if mistake == "pooled running_var":  # the whole batch's, as BatchNorm's
                    batch_var = x.var(axis=(0, *axes), ddof=1)
                if mistake == "momentum reversed":
                    momentum = 1 - momentum
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
    """RMSNorm's forward with `mistake` (its catalogue entry in WRONG says which)."""
    def forward(x, normalized_shape, weight=None, eps=None):
        axes = (x.ndim - 1,) if mistake == "last axis only" else tuple(
            range(x.ndim - len(normalized_shape), x.ndim))
        if eps is None:
            eps = 1e-5 if mistake == "eps 1e-5 when None" else np.finfo(x.dtype).eps
        if mistake == "subtracts the mean":
            x = x - x.mean(axis=axes, keepdims=True)
        ms = (x * x).mean(axis=axes, keepdims=mistake != "no keepdims")
        rrms = 1 / (np.sqrt(ms) + eps) if mistake == "eps outside sqrt" else 1 / np.sqrt(ms + eps)
        y = x * rrms
        if weight is not None:
            y = y * weight
            if mistake == "adds a bias":  # a LayerNorm copied over: bias = mean of the weight
                y = y + weight.mean()
        return y, rrms.astype(x.dtype)

    return forward


def _rms_norm_backward(mistake):
    """RMSNorm's backward with `mistake` (its catalogue entry in WRONG says which)."""
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
    """BatchNorm's backward with `mistake` (its catalogue entry in WRONG says which)."""
    axes = (0, *range(2, x_hat.ndim))
    sum_axes = (0,) if mistake == "batch_axis_only" else axes
    if mistake == "channel_axis":
        axes = tuple(range(1, x_hat.ndim))
    shape = (1, -1) + (1,) * (x_hat.ndim - 2)
    reduce = np.mean if mistake == "averaged" else np.sum
    dweight = None if weight is None else reduce(grad_output * x_hat, axis=sum_axes)
    dbias = None if bias is None else reduce(grad_output, axis=sum_axes)
    g = grad_output if weight is None or mistake == "weight_ignored" else (
        grad_output * weight.reshape(shape))
    if mistake == "weighted dweight" and weight is not None:
        dweight = (g * x_hat).sum(axis=sum_axes)
    if mistake == "batch_axis_only":
        axes = (0,)
    if not training and mistake != "eval_like_training":
        return g * rstd, dweight, dbias
    g_mean = 0 if mistake == "no_mean_term" else g.mean(axis=axes, keepdims=True)
    gx_mean = 0 if mistake == "no_variance_term" else (g * x_hat).mean(axis=axes, keepdims=True)
    return rstd * (g - g_mean - x_hat * gx_mean), dweight, dbias


def _bn_backward_with(mistake):
    """batch_norm_backward with `mistake`."""
    def batch_norm_backward(grad_output, x_hat, rstd, weight=None, bias=None, training=False):
        return _bn_backward(grad_output, x_hat, rstd, weight, bias, training, mistake)

    return batch_norm_backward


WRONG = {
    "3.1": {
        "unbiased variance": Mistake(normalize_unbiased, 'the unbiased variance: dividing by N - 1 = 19'),
        "eps added to the std": Mistake(normalize_eps_on_std, 'eps is added to the std'),
        "no keepdims": Mistake(normalize_no_keepdims, "keep them as size 1 (keepdims=True)"),
        "std returned as var": Mistake(normalize_std_for_var, "this is the std, not the variance"),
        "axes ignored (last axis)": Mistake(normalize_last_axis, "reduced over axes (2,) where the argument axes=(0, 2)"),
        "writes into x": Mistake(normalize_in_place, "x was modified in place"),
        "statistics left in float64": Mistake(normalize_float64, "NumPy promotes to float64"),
    },
    "3.2": {
        "missing mean term": Mistake(_normalize_backward("no mean"), "the mean's term is missing"),
        "missing variance term": Mistake(_normalize_backward("no var"), "the variance's term is missing"),
        "means over every axis": Mistake(_normalize_backward("all axes"), "the means were taken over every axis of x"),
        "rstd factor missing": Mistake(_normalize_backward("no rstd"), "dx lacks the factor rstd"),
        "sums where the means go": Mistake(_normalize_backward("sums"), "sums where the backward takes means"),
    },
    "3.3": {
        "normalizes with the unbiased variance": Mistake(_batch_norm("normalizes with unbiased var"), "the unbiased variance: dividing by N - 1 = 7"),
        "running_var updated with the biased variance": Mistake(_batch_norm("running_var biased"), "running_var is updated with the biased variance"),
        "running stats not updated in place": Mistake(_batch_norm("not in place"), "still holds the values passed in"),
        "eval mode uses batch statistics": Mistake(_batch_norm("eval uses batch stats"), "BatchNorm normalizes with running_mean and running_var"),
        "momentum reversed": Mistake(_batch_norm("momentum reversed"), "momentum's direction is reversed"),
        "running stats updated in eval mode": Mistake(_batch_norm("updates running stats in eval"), "updated in evaluation mode"),
        "statistics over axis 0 only": Mistake(_batch_norm("axis 0 only"), "taken over the batch axis alone"),
        "eps added to the std": Mistake(_batch_norm("eps on std"), "eps is added to the std"),
        "evaluation statistics not kept per channel": Mistake(_batch_norm("eval stats (C,)"), "keep them as size 1 (keepdims=True)"),
    },
    "3.4": {
        "channels grouped in the wrong order": Mistake(group_norm_interleaved, "consecutive channels"),
        "spatial axes not normalized together": Mistake(group_norm_channels_only, "each spatial position was normalized alone"),
        "affine per group, not per channel": Mistake(group_norm_affine_per_group, "one value per channel"),
        "unbiased variance": Mistake(_group_norm("unbiased"), "the unbiased variance: dividing by N - 1 = 9"),
        "eps added to the std": Mistake(_group_norm("eps on std"), "eps is added to the std"),
        "num_groups taken as the group size": Mistake(_group_norm("group size"), "not the size of a group"),
    },
    "3.5": {
        "batch axis included": Mistake(_instance_norm("batch axis included"), "the statistics include the batch axis"),
        "running_var updated with the biased variance": Mistake(_instance_norm("running_var biased"), "running_var is updated with the biased variance"),
        "running stats not updated in place": Mistake(_instance_norm("not in place"), "still holds the values passed in"),
        "use_input_stats=False still uses the input": Mistake(_instance_norm("eval uses input stats"), "use_input_stats=False normalizes with running_mean"),
        "momentum reversed": Mistake(_instance_norm("momentum reversed"), "momentum's direction is reversed"),
        "eps added to the std": Mistake(_instance_norm("eps on std"), "eps is added to the std"),
        "running_var of the whole batch": Mistake(_instance_norm("pooled running_var"), "not the variance of the whole batch"),
    },
    "3.6": {
        "subtracts the mean": Mistake(_rms_norm("subtracts the mean"), 'the mean is subtracted: RMSNorm does not centre'),
        "adds a bias": Mistake(_rms_norm("adds a bias"), "something is added after the weight"),
        "eps=None taken as 1e-5": Mistake(_rms_norm("eps 1e-5 when None"), "eps=None means the machine epsilon"),
        "eps outside the sqrt": Mistake(_rms_norm("eps outside sqrt"), "adds it to the mean square, under the square root"),
        "last axis only": Mistake(_rms_norm("last axis only"), "reduced over axes (2,) where normalized_shape=(3, 4)"),
        "no keepdims": Mistake(_rms_norm("no keepdims"), "keep them as size 1 with keepdims=True"),
    },
    "3.7": {
        "LayerNorm's mean term kept": Mistake(_rms_norm_backward("LayerNorm's mean term"), "LayerNorm's mean term was kept"),
        "missing the x_hat term": Mistake(_rms_norm_backward("no x_hat term"), "the path through rrms is missing"),
        "dweight from x, not x_hat": Mistake(_rms_norm_backward("dweight from x"), "dweight multiplies the upstream gradient by x"),
        "dweight summed over axis 0 only": Mistake(_rms_norm_backward("dweight over axis 0 only"), "reduced over axes (0,) where the leading dims"),
        "weight ignored in dx": Mistake(_rms_norm_backward("weight ignored"), "dx ignores the weight"),
    },
    "3.8": {
        "evaluation mode with the batch terms": Mistake(_bn_backward_with("eval_like_training"), "the running statistics are constants"),
        "missing mean term": Mistake(_bn_backward_with("no_mean_term"), "the mean's term is missing"),
        "missing variance term": Mistake(_bn_backward_with("no_variance_term"), "the variance's term is missing"),
        "means over the batch axis only, not the positions": Mistake(_bn_backward_with("batch_axis_only"), "taken over the batch axis alone"),
        "means over the channels (LayerNorm's group)": Mistake(_bn_backward_with("channel_axis"), "the means were taken over the channels"),
        "weight ignored in dx": Mistake(_bn_backward_with("weight_ignored"), "dx ignores the weight"),
        "parameter gradients averaged, not summed": Mistake(_bn_backward_with("averaged"), "not their mean"),
        "dweight from the weighted gradient": Mistake(_bn_backward_with("weighted dweight"), "already multiplied by the weight"),
    },
}
