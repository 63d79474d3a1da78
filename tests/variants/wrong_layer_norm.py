"""Realistic wrong implementations of each exercise: every one must fail its graded check
(tests/test_graders.py). Keyed by exercise number, then by the mistake's name."""

import numpy as np
import torch

from normlib.nn import to_numpy, to_tensor


def _axes(x, normalized_shape):
    return tuple(range(x.ndim - len(normalized_shape), x.ndim))


def _lead(x, normalized_shape):
    return tuple(range(x.ndim - len(normalized_shape)))


# Exercise 1.1: layer_norm_stats -------------------------------------------------------------


def stats_unbiased_variance(x, normalized_shape, eps=1e-5):
    axes = _axes(x, normalized_shape)
    var = x.var(axis=axes, keepdims=True, ddof=1)
    return x.mean(axis=axes, keepdims=True), 1 / np.sqrt(var + eps)


def stats_eps_outside_sqrt(x, normalized_shape, eps=1e-5):
    axes = _axes(x, normalized_shape)
    return x.mean(axis=axes, keepdims=True), 1 / (x.std(axis=axes, keepdims=True) + eps)


def stats_last_axis_only(x, normalized_shape, eps=1e-5):
    mean = x.mean(axis=-1, keepdims=True)
    return mean, 1 / np.sqrt(x.var(axis=-1, keepdims=True) + eps)


def stats_all_but_first_axis(x, normalized_shape, eps=1e-5):
    axes = tuple(range(1, x.ndim)) or (0,)
    mean = x.mean(axis=axes, keepdims=True)
    return mean, 1 / np.sqrt(x.var(axis=axes, keepdims=True) + eps)


def stats_no_keepdims(x, normalized_shape, eps=1e-5):
    axes = _axes(x, normalized_shape)
    return x.mean(axis=axes), 1 / np.sqrt(x.var(axis=axes) + eps)


def stats_std_not_rstd(x, normalized_shape, eps=1e-5):
    axes = _axes(x, normalized_shape)
    return x.mean(axis=axes, keepdims=True), np.sqrt(x.var(axis=axes, keepdims=True) + eps)


def stats_float64_not_cast_back(x, normalized_shape, eps=1e-5):
    axes = _axes(x, normalized_shape)
    x = x.astype(np.float64)
    return x.mean(axis=axes, keepdims=True), 1 / np.sqrt(x.var(axis=axes, keepdims=True) + eps)


def stats_one_pass_variance(x, normalized_shape, eps=1e-5):
    axes = _axes(x, normalized_shape)
    mean = x.mean(axis=axes, keepdims=True)
    var = (x * x).mean(axis=axes, keepdims=True) - mean * mean  # E[x^2] - E[x]^2
    return mean, 1 / np.sqrt(np.maximum(var, 0) + eps)


def stats_writes_into_x(x, normalized_shape, eps=1e-5):
    axes = _axes(x, normalized_shape)
    mean = x.mean(axis=axes, keepdims=True)
    xc = x
    xc -= mean  # overwrites the caller's x
    return mean, 1 / np.sqrt((xc * xc).mean(axis=axes, keepdims=True) + eps)


# Exercise 1.2: layer_norm_forward -----------------------------------------------------------


def _x_hat(x, normalized_shape, eps):
    axes = _axes(x, normalized_shape)
    mean = x.mean(axis=axes, keepdims=True)
    rstd = 1 / np.sqrt(x.var(axis=axes, keepdims=True) + eps)
    return (x - mean) * rstd, mean, rstd


def forward_one_pass_variance(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """The statistics of E[x^2] - E[x]^2, which cancels catastrophically at a large offset."""
    mean, rstd = stats_one_pass_variance(x, normalized_shape, eps)
    y = (x - mean) * rstd
    y = y if weight is None else y * weight
    return (y if bias is None else y + bias), mean, rstd


def forward_no_affine(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    return _x_hat(x, normalized_shape, eps)


def forward_weight_bias_swapped(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    y, mean, rstd = _x_hat(x, normalized_shape, eps)
    if bias is not None:
        y = y * bias
    if weight is not None:
        y = y + weight
    return y, mean, rstd


def forward_bias_before_scale(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    y, mean, rstd = _x_hat(x, normalized_shape, eps)
    if bias is not None:
        y = y + bias
    if weight is not None:
        y = y * weight
    return y, mean, rstd


def forward_affine_before_normalizing(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    if weight is not None:
        x = x * weight
    if bias is not None:
        x = x + bias
    return _x_hat(x, normalized_shape, eps)


def forward_bias_only_with_weight(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    y, mean, rstd = _x_hat(x, normalized_shape, eps)
    if weight is not None:
        y = y * weight + (0 if bias is None else bias)
    return y, mean, rstd


# Exercise 2.1: layer_norm_backward ----------------------------------------------------------


def _backward(grad_output, x, normalized_shape, mean, rstd, weight, bias, mistake):
    axes, lead = _axes(x, normalized_shape), _lead(x, normalized_shape)
    x_hat = (x - mean) * rstd
    source = x if mistake == "dweight_from_x" else x_hat
    sum_axes = (0,) if mistake == "first_axis_only" else lead
    dweight = None if weight is None else (grad_output * source).sum(axis=sum_axes)
    dbias = None if bias is None else grad_output.sum(axis=sum_axes)
    if mistake == "params_when_absent":
        dweight, dbias = (grad_output * x_hat).sum(axis=lead), grad_output.sum(axis=lead)
    g = grad_output if weight is None or mistake == "weight_ignored" else grad_output * weight
    g_mean = 0 if mistake == "no_mean_term" else g.mean(axis=axes, keepdims=True)
    gx = 0 if mistake == "no_variance_term" else (g * x_hat).mean(axis=axes, keepdims=True)
    scale = 1 if mistake == "no_rstd" else rstd
    return scale * (g - g_mean - x_hat * gx), dweight, dbias


def backward_writes_into_grad_output(grad_output, x, normalized_shape, mean, rstd, weight=None,
                                     bias=None):
    dbias = None if bias is None else grad_output.sum(axis=_lead(x, normalized_shape))
    dweight = None if weight is None else (
        (grad_output * (x - mean) * rstd).sum(axis=_lead(x, normalized_shape)))
    g = grad_output
    if weight is not None:
        g *= weight  # overwrites the caller's grad_output
    dx, _, _ = _backward(g, x, normalized_shape, mean, rstd, None, None, None)
    return dx, dweight, dbias


def backward_no_dbias_without_weight(grad_output, x, normalized_shape, mean, rstd, weight=None,
                                     bias=None):
    dx, dweight, dbias = _backward(grad_output, x, normalized_shape, mean, rstd, weight, bias,
                                   None)
    return (dx, None, None) if weight is None else (dx, dweight, dbias)


def _backward_with(mistake):
    def backward(grad_output, x, normalized_shape, mean, rstd, weight=None, bias=None):
        return _backward(grad_output, x, normalized_shape, mean, rstd, weight, bias, mistake)

    return backward


# Exercise 2.2: LayerNormFunction ------------------------------------------------------------


class _Function(torch.autograd.Function):
    """The reference, with a `mistake` hook in backward."""

    mistake = None

    @staticmethod
    def forward(ctx, input, normalized_shape, weight, bias, eps):
        from normlib.layer_norm import layer_norm_forward

        y, mean, rstd = layer_norm_forward(
            to_numpy(input), normalized_shape, to_numpy(weight), to_numpy(bias), eps
        )
        ctx.save_for_backward(input, weight, bias, to_tensor(mean), to_tensor(rstd))
        ctx.normalized_shape = normalized_shape
        return to_tensor(y)

    @classmethod
    def grads(cls, ctx, grad_output):
        from normlib.layer_norm import layer_norm_backward

        input, weight, bias, mean, rstd = ctx.saved_tensors
        kernel_weight = None if cls.mistake == "weight_not_passed" else to_numpy(weight)
        dx, dw, db = layer_norm_backward(
            to_numpy(grad_output), to_numpy(input), ctx.normalized_shape,
            to_numpy(mean), to_numpy(rstd), kernel_weight, to_numpy(bias),
        )
        return to_tensor(dx), to_tensor(dw), to_tensor(db)


class FunctionSwapsParamGrads(_Function):
    @staticmethod
    def backward(ctx, grad_output):
        dx, dw, db = FunctionSwapsParamGrads.grads(ctx, grad_output)
        return dx, None, db, dw, None


class FunctionThreeGrads(_Function):
    @staticmethod
    def backward(ctx, grad_output):
        return FunctionThreeGrads.grads(ctx, grad_output)


class FunctionNoParamGrads(_Function):
    @staticmethod
    def backward(ctx, grad_output):
        dx, _, _ = FunctionNoParamGrads.grads(ctx, grad_output)
        return dx, None, None, None, None


class FunctionWeightNotPassed(_Function):
    mistake = "weight_not_passed"

    @staticmethod
    def backward(ctx, grad_output):
        dx, dw, db = FunctionWeightNotPassed.grads(ctx, grad_output)
        return dx, None, dw, db, None


class FunctionReturnsNumpy(_Function):
    @staticmethod
    def forward(ctx, input, normalized_shape, weight, bias, eps):
        return _Function.forward(ctx, input, normalized_shape, weight, bias, eps).numpy()

    @staticmethod
    def backward(ctx, grad_output):
        dx, dw, db = FunctionReturnsNumpy.grads(ctx, grad_output)
        return dx, None, dw, db, None


class FunctionUsesDefaultEps(_Function):
    @staticmethod
    def forward(ctx, input, normalized_shape, weight, bias, eps):
        return _Function.forward(ctx, input, normalized_shape, weight, bias, 1e-5)

    @staticmethod
    def backward(ctx, grad_output):
        dx, dw, db = FunctionUsesDefaultEps.grads(ctx, grad_output)
        return dx, None, dw, db, None


class FunctionStateOnClass(_Function):
    """Keeps what backward needs on the class: the last forward call wins."""

    @staticmethod
    def forward(ctx, input, normalized_shape, weight, bias, eps):
        y = _Function.forward(ctx, input, normalized_shape, weight, bias, eps)
        FunctionStateOnClass.saved = ctx.saved_tensors, normalized_shape
        return y

    @staticmethod
    def backward(ctx, grad_output):
        from normlib.layer_norm import layer_norm_backward

        (input, weight, bias, mean, rstd), normalized_shape = FunctionStateOnClass.saved
        dx, dw, db = layer_norm_backward(
            to_numpy(grad_output), to_numpy(input), normalized_shape,
            to_numpy(mean), to_numpy(rstd), to_numpy(weight), to_numpy(bias),
        )
        return to_tensor(dx), None, to_tensor(dw), to_tensor(db), None


class FunctionInTorch(torch.autograd.Function):
    """Right values, but torch computes them: the NumPy kernels are never called."""

    @staticmethod
    def forward(ctx, input, normalized_shape, weight, bias, eps):
        ctx.save_for_backward(input, weight, bias)
        ctx.normalized_shape, ctx.eps = normalized_shape, eps
        return torch.nn.functional.layer_norm(input, normalized_shape, weight, bias, eps)

    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        with torch.enable_grad():
            leaves = [t.detach().requires_grad_() if t is not None else None
                      for t in (input, weight, bias)]
            y = torch.nn.functional.layer_norm(leaves[0], ctx.normalized_shape, leaves[1],
                                               leaves[2], ctx.eps)
            present = [t for t in leaves if t is not None]
            grads = iter(torch.autograd.grad(y, present, grad_output))
        dx, dw, db = (next(grads) if t is not None else None for t in leaves)
        return dx, None, dw, db, None


class FunctionShapeFromWeight(_Function):
    """Takes normalized_shape from the last dim of the input instead of the argument."""

    @staticmethod
    def forward(ctx, input, normalized_shape, weight, bias, eps):
        shape = tuple(weight.shape) if weight is not None else tuple(input.shape[-1:])
        return _Function.forward(ctx, input, shape, weight, bias, eps)

    @staticmethod
    def backward(ctx, grad_output):
        dx, dw, db = FunctionShapeFromWeight.grads(ctx, grad_output)
        return dx, None, dw, db, None


WRONG = {
    "1.1": {
        "unbiased variance": stats_unbiased_variance,
        "eps added to the std": stats_eps_outside_sqrt,
        "last axis only": stats_last_axis_only,
        "all axes but the first": stats_all_but_first_axis,
        "no keepdims": stats_no_keepdims,
        "std instead of rstd": stats_std_not_rstd,
        "float64 result for float32 input": stats_float64_not_cast_back,
        "one-pass variance E[x^2]-E[x]^2": stats_one_pass_variance,
        "writes into its input x": stats_writes_into_x,
    },
    "1.2": {
        "one-pass variance E[x^2]-E[x]^2": forward_one_pass_variance,
        "no affine": forward_no_affine,
        "weight and bias swapped": forward_weight_bias_swapped,
        "bias added before scaling": forward_bias_before_scale,
        "affine before normalizing": forward_affine_before_normalizing,
        "bias ignored without weight": forward_bias_only_with_weight,
    },
    "2.1": {
        "missing mean term": _backward_with("no_mean_term"),
        "missing variance term": _backward_with("no_variance_term"),
        "dweight from x, not x_hat": _backward_with("dweight_from_x"),
        "dweight/dbias summed over axis 0 only": _backward_with("first_axis_only"),
        "weight ignored in dx": _backward_with("weight_ignored"),
        "rstd factor missing": _backward_with("no_rstd"),
        "dweight/dbias returned when absent": _backward_with("params_when_absent"),
        "writes into grad_output": backward_writes_into_grad_output,
        "dbias lost when there is no weight": backward_no_dbias_without_weight,
    },
    "2.2": {
        "dweight and dbias swapped": FunctionSwapsParamGrads,
        "three gradients for five inputs": FunctionThreeGrads,
        "no parameter gradients": FunctionNoParamGrads,
        "weight not passed to the backward kernel": FunctionWeightNotPassed,
        "forward returns a NumPy array": FunctionReturnsNumpy,
        "eps argument ignored": FunctionUsesDefaultEps,
        "saved state on the class, not ctx": FunctionStateOnClass,
        "torch computes it, not the NumPy kernels": FunctionInTorch,
        "normalized_shape taken from weight or the last dim": FunctionShapeFromWeight,
    },
}
