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


# Exercise 2.1: layer_norm_backward_staged ---------------------------------------------------


def _staged(grad_output, x, eps, mistake):
    """The staged backward with one mistake at one node."""
    n = x.shape[-1]
    mu = x.mean(axis=-1, keepdims=True)
    xc = x - mu
    var = (xc * xc).sum(axis=-1, keepdims=True) / (n - 1 if mistake == "unbiased" else n)
    rstd = 1.0 / np.sqrt(var + eps)
    drstd = grad_output * xc if mistake == "drstd_not_summed" else (
        (grad_output * xc).sum(axis=-1, keepdims=True))
    power = {"dvar_sign": 0.5 * rstd**3, "dvar_rstd_squared": -0.5 * rstd**2}
    dvar = power.get(mistake, -0.5 * rstd**3) * drstd
    via_var = {"no_var_path": 0.0, "no_2_over_n": xc * dvar}.get(mistake, 2.0 / n * xc * dvar)
    dxc = grad_output * rstd + via_var
    dmu = -dxc if mistake == "dmu_not_summed" else -dxc.sum(axis=-1, keepdims=True)
    dx = {"no_mean_path": dxc, "dmu_not_divided": dxc + dmu}.get(mistake, dxc + dmu / n)
    return {"drstd": drstd, "dvar": dvar, "dxc": dxc, "dmu": dmu, "dx": dx}


def _staged_with(mistake):
    def layer_norm_backward_staged(grad_output, x, eps=1e-5):
        return _staged(grad_output, x, eps, mistake)

    return layer_norm_backward_staged


def staged_returns_tuple(grad_output, x, eps=1e-5):
    result = _staged(grad_output, x, eps, None)
    return tuple(result.values())


# Exercise 2.2: layer_norm_backward ----------------------------------------------------------


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


# Exercise 2.3: layer_norm_jacobian ----------------------------------------------------------


def _jacobian(x, eps, mistake):
    n = x.shape[-1]
    xc = x - x.mean(axis=-1, keepdims=True)
    var = (xc * xc).sum(axis=-1, keepdims=True) / (n - 1 if mistake == "unbiased" else n)
    rstd = 1.0 / np.sqrt(var + eps)  # (*B, 1)
    x_hat = xc * rstd
    eye = np.eye(n) if mistake == "eye_float64" else np.eye(n, dtype=x.dtype)
    mean_term = 0.0 if mistake == "no_mean_term" else 1.0 / n
    outer = x_hat[..., :, None] * x_hat[..., None, :]
    if mistake == "no_variance_term":
        outer = 0.0 * outer
    if mistake == "outer_over_batch":
        outer = np.einsum("...i,...j->ij", x_hat, x_hat)
    scale = 1.0 if mistake == "no_rstd" else rstd[..., None]
    return scale * (eye - mean_term - outer / n)


def _jacobian_with(mistake):
    def layer_norm_jacobian(x, eps=1e-5):
        return _jacobian(x, eps, mistake)

    return layer_norm_jacobian


# Exercise 2.4: predicted_sum_gradients ------------------------------------------------------


def _predictions(x, eps, variance, mean):
    """{"correct": 0, "detached variance": variance(rstd), "detached mean": mean(rstd)}."""
    xc = x - x.mean(axis=-1, keepdims=True)
    rstd = 1.0 / np.sqrt((xc * xc).mean(axis=-1, keepdims=True) + eps)  # (*B, 1)
    full = np.broadcast_to(rstd, x.shape).astype(x.dtype)  # (*B, N)
    return {"correct": np.zeros_like(x), "detached variance": variance(full),
            "detached mean": mean(full)}


def _predictions_with(variance, mean):
    def predicted_sum_gradients(x, eps=1e-5):
        return _predictions(x, eps, variance, mean)

    return predicted_sum_gradients


def predictions_rstd_not_broadcast(x, eps=1e-5):
    result = _predictions(x, eps, np.zeros_like, lambda full: full)
    result["detached mean"] = result["detached mean"][..., :1]  # (*B, 1)
    return result


# Exercise 2.5: LayerNormFunction ------------------------------------------------------------


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
    "2.2": {
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
    "2.1": {
        "dxc without the path through the variance": _staged_with("no_var_path"),
        "dx without the path through the mean": _staged_with("no_mean_path"),
        "dvar with the wrong sign": _staged_with("dvar_sign"),
        "dvar with rstd squared, not cubed": _staged_with("dvar_rstd_squared"),
        "the 2/N of the mean of squares missing": _staged_with("no_2_over_n"),
        "dmu not divided by N into dx": _staged_with("dmu_not_divided"),
        "drstd not summed over the row": _staged_with("drstd_not_summed"),
        "dmu not summed over the row": _staged_with("dmu_not_summed"),
        "unbiased variance in the forward": _staged_with("unbiased"),
        "a tuple, not a dict": staged_returns_tuple,
    },
    "2.3": {
        "missing the mean term (11^T / N)": _jacobian_with("no_mean_term"),
        "missing the variance term (x_hat x_hat^T / N)": _jacobian_with("no_variance_term"),
        "rstd factor missing": _jacobian_with("no_rstd"),
        "unbiased variance": _jacobian_with("unbiased"),
        "outer product summed over the batch": _jacobian_with("outer_over_batch"),
        "float64 np.eye makes a float32 input's J float64": _jacobian_with("eye_float64"),
    },
    "2.4": {
        "zero for all three (.sum() shows nothing)": _predictions_with(np.zeros_like,
                                                                       np.zeros_like),
        "rstd for both bugs": _predictions_with(lambda full: full, lambda full: full),
        "the two bugs swapped": _predictions_with(lambda full: full, np.zeros_like),
        "ones, without rstd, for the detached mean": _predictions_with(np.zeros_like,
                                                                       np.ones_like),
        "rstd not broadcast over the row": predictions_rstd_not_broadcast,
    },
    "2.5": {
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
