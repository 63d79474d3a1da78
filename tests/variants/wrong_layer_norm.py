"""Realistic wrong implementations of each exercise: every one must fail its graded check
(tests/test_graders.py). Keyed by exercise number, then by the mistake's name."""

import numpy as np
import torch

from normlib.nn import to_numpy, to_tensor
from tests.variants.mistake import Mistake


def _axes(x, normalized_shape):
    """The axes normalized_shape means in x."""
    return tuple(range(x.ndim - len(normalized_shape), x.ndim))


def _lead(x, normalized_shape):
    """The leading axes of x, before those of normalized_shape."""
    return tuple(range(x.ndim - len(normalized_shape)))


# Exercise 1.1: layer_norm_stats -------------------------------------------------------------


def stats_unbiased_variance(x, normalized_shape, eps=1e-5):
    """The unbiased variance (ddof=1) where LayerNorm divides by N."""
    axes = _axes(x, normalized_shape)
    var = x.var(axis=axes, keepdims=True, ddof=1)
    return x.mean(axis=axes, keepdims=True), 1 / np.sqrt(var + eps)


def stats_eps_outside_sqrt(x, normalized_shape, eps=1e-5):
    """eps added to the std instead of the variance."""
    axes = _axes(x, normalized_shape)
    return x.mean(axis=axes, keepdims=True), 1 / (x.std(axis=axes, keepdims=True) + eps)


def stats_last_axis_only(x, normalized_shape, eps=1e-5):
    """The statistics over the last axis alone, whatever normalized_shape says."""
    mean = x.mean(axis=-1, keepdims=True)
    return mean, 1 / np.sqrt(x.var(axis=-1, keepdims=True) + eps)


def stats_all_but_first_axis(x, normalized_shape, eps=1e-5):
    """The statistics over every axis but the first, whatever normalized_shape says."""
    axes = tuple(range(1, x.ndim)) or (0,)
    mean = x.mean(axis=axes, keepdims=True)
    return mean, 1 / np.sqrt(x.var(axis=axes, keepdims=True) + eps)


def stats_no_keepdims(x, normalized_shape, eps=1e-5):
    """The reduced axes dropped (no keepdims)."""
    axes = _axes(x, normalized_shape)
    return x.mean(axis=axes), 1 / np.sqrt(x.var(axis=axes) + eps)


def stats_eps_hard_coded(x, normalized_shape, eps=1e-5):
    """Ignores the eps argument: 1e-5 hard-coded."""
    axes = _axes(x, normalized_shape)
    return x.mean(axis=axes, keepdims=True), 1 / np.sqrt(x.var(axis=axes, keepdims=True) + 1e-5)


def stats_std_not_rstd(x, normalized_shape, eps=1e-5):
    """The std returned for rstd."""
    axes = _axes(x, normalized_shape)
    return x.mean(axis=axes, keepdims=True), np.sqrt(x.var(axis=axes, keepdims=True) + eps)


def stats_float64_not_cast_back(x, normalized_shape, eps=1e-5):
    """Computes in float64 and never casts back to x's dtype."""
    axes = _axes(x, normalized_shape)
    x = x.astype(np.float64)
    return x.mean(axis=axes, keepdims=True), 1 / np.sqrt(x.var(axis=axes, keepdims=True) + eps)


def stats_one_pass_variance(x, normalized_shape, eps=1e-5):
    """The one-pass variance E[x^2] - E[x]^2, which cancels at a large offset."""
    axes = _axes(x, normalized_shape)
    mean = x.mean(axis=axes, keepdims=True)
    var = (x * x).mean(axis=axes, keepdims=True) - mean * mean  # E[x^2] - E[x]^2
    return mean, 1 / np.sqrt(np.maximum(var, 0) + eps)


def stats_writes_into_x(x, normalized_shape, eps=1e-5):
    """Centres x in place (x -= mean), overwriting the caller's array."""
    axes = _axes(x, normalized_shape)
    mean = x.mean(axis=axes, keepdims=True)
    xc = x
    xc -= mean  # overwrites the caller's x
    return mean, 1 / np.sqrt((xc * xc).mean(axis=axes, keepdims=True) + eps)


# Exercise 1.2: layer_norm_forward -----------------------------------------------------------


def _x_hat(x, normalized_shape, eps):
    """x_hat, mean and rstd, correct."""
    axes = _axes(x, normalized_shape)
    mean = x.mean(axis=axes, keepdims=True)
    rstd = 1 / np.sqrt(x.var(axis=axes, keepdims=True) + eps)
    return (x - mean) * rstd, mean, rstd


def stats_forward(stats, x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """The forward on the statistics that stats(x, normalized_shape, eps) returns."""
    mean, rstd = stats(x, normalized_shape, eps)
    y = (x - mean) * rstd
    y = y if weight is None else y * weight
    return (y if bias is None else y + bias), mean, rstd


def forward_one_pass_variance(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """The statistics of E[x^2] - E[x]^2, which cancels catastrophically at a large offset."""
    return stats_forward(stats_one_pass_variance, x, normalized_shape, weight, bias, eps)


def forward_no_affine(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Weight and bias never applied."""
    return _x_hat(x, normalized_shape, eps)


def forward_weight_bias_swapped(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Scales by the bias and shifts by the weight."""
    y, mean, rstd = _x_hat(x, normalized_shape, eps)
    if bias is not None:
        y = y * bias
    if weight is not None:
        y = y + weight
    return y, mean, rstd


def forward_bias_before_scale(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Adds the bias before scaling by the weight."""
    y, mean, rstd = _x_hat(x, normalized_shape, eps)
    if bias is not None:
        y = y + bias
    if weight is not None:
        y = y * weight
    return y, mean, rstd


def forward_affine_before_normalizing(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Scales and shifts x before normalizing it."""
    if weight is not None:
        x = x * weight
    if bias is not None:
        x = x + bias
    return _x_hat(x, normalized_shape, eps)


def forward_bias_only_with_weight(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Adds the bias only when there is a weight too."""
    y, mean, rstd = _x_hat(x, normalized_shape, eps)
    if weight is not None:
        y = y * weight + (0 if bias is None else bias)
    return y, mean, rstd


def forward_eps_on_std_inline(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """The statistics inline, eps added to the std instead of the variance."""
    return stats_forward(stats_eps_outside_sqrt, x, normalized_shape, weight, bias, eps)


def forward_unbiased_inline(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """The statistics inline, with np.var's ddof=1 (the unbiased variance)."""
    return stats_forward(stats_unbiased_variance, x, normalized_shape, weight, bias, eps)


def forward_eps_hard_coded(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """The statistics inline, ignoring the eps argument: 1e-5 hard-coded."""
    return stats_forward(stats_eps_hard_coded, x, normalized_shape, weight, bias, eps)


def forward_last_axis_only(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalizes over the last axis alone, whatever normalized_shape says."""
    return stats_forward(stats_last_axis_only, x, normalized_shape, weight, bias, eps)


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
    """The staged backward with one mistake."""
    def layer_norm_backward_staged(grad_output, x, eps=1e-5):
        return _staged(grad_output, x, eps, mistake)

    return layer_norm_backward_staged


def staged_returns_tuple(grad_output, x, eps=1e-5):
    """The five gradients as a tuple, not a dict."""
    result = _staged(grad_output, x, eps, None)
    return tuple(result.values())


# Exercise 2.2: layer_norm_backward ----------------------------------------------------------


def _backward(grad_output, x, normalized_shape, mean, rstd, weight, bias, mistake):
    """The backward kernel with one mistake (None: correct)."""
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
    """Multiplies grad_output by the weight in place (g *= weight)."""
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
    """Returns no dbias when there is no weight."""
    dx, dweight, dbias = _backward(grad_output, x, normalized_shape, mean, rstd, weight, bias,
                                   None)
    return (dx, None, None) if weight is None else (dx, dweight, dbias)


def _backward_with(mistake):
    """The backward kernel with one mistake."""
    def backward(grad_output, x, normalized_shape, mean, rstd, weight=None, bias=None):
        return _backward(grad_output, x, normalized_shape, mean, rstd, weight, bias, mistake)

    return backward


# Exercise 2.3: layer_norm_jacobian ----------------------------------------------------------


def _jacobian(x, eps, mistake):
    """The Jacobian with one mistake (None: correct)."""
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
        rows = x_hat.reshape(-1, n)
        outer = rows.T @ rows  # summed over the rows
    scale = 1.0 if mistake == "no_rstd" else rstd[..., None]
    return scale * (eye - mean_term - outer / n)


def _jacobian_with(mistake):
    """The Jacobian with one mistake."""
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
    """The predictions with the two bugs' given."""
    def predicted_sum_gradients(x, eps=1e-5):
        return _predictions(x, eps, variance, mean)

    return predicted_sum_gradients


def predictions_rstd_not_broadcast(x, eps=1e-5):
    """rstd for the detached mean, one value per row, not broadcast."""
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
    """Returns dbias for weight and dweight for bias."""

    @staticmethod
    def backward(ctx, grad_output):
        dx, dw, db = FunctionSwapsParamGrads.grads(ctx, grad_output)
        return dx, None, db, dw, None


class FunctionThreeGrads(_Function):
    """Returns the kernel's three gradients for forward's five arguments."""

    @staticmethod
    def backward(ctx, grad_output):
        return FunctionThreeGrads.grads(ctx, grad_output)


class FunctionNoParamGrads(_Function):
    """Returns None for the weight's and bias's gradients."""

    @staticmethod
    def backward(ctx, grad_output):
        dx, _, _ = FunctionNoParamGrads.grads(ctx, grad_output)
        return dx, None, None, None, None


class FunctionWeightNotPassed(_Function):
    """Does not pass the weight to the backward kernel."""
    mistake = "weight_not_passed"

    @staticmethod
    def backward(ctx, grad_output):
        dx, dw, db = FunctionWeightNotPassed.grads(ctx, grad_output)
        return dx, None, dw, db, None


class FunctionReturnsNumpy(_Function):
    """Forward returns the kernel's NumPy array, not a tensor."""

    @staticmethod
    def forward(ctx, input, normalized_shape, weight, bias, eps):
        return _Function.forward(ctx, input, normalized_shape, weight, bias, eps).numpy()

    @staticmethod
    def backward(ctx, grad_output):
        dx, dw, db = FunctionReturnsNumpy.grads(ctx, grad_output)
        return dx, None, dw, db, None


class FunctionUsesDefaultEps(_Function):
    """Ignores the eps argument: always 1e-5."""

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
        from normlib.layer_norm import layer_norm_forward

        x, w, b = to_numpy(input), to_numpy(weight), to_numpy(bias)
        y, mean, rstd = layer_norm_forward(x, normalized_shape, w, b, eps)
        FunctionStateOnClass.saved = x, normalized_shape, mean, rstd, w, b
        return to_tensor(y)

    @staticmethod
    def backward(ctx, grad_output):
        from normlib.layer_norm import layer_norm_backward

        x, normalized_shape, mean, rstd, w, b = FunctionStateOnClass.saved
        dx, dw, db = layer_norm_backward(to_numpy(grad_output), x, normalized_shape, mean,
                                         rstd, w, b)
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


class FunctionKernelsForShow(FunctionInTorch):
    """torch computes it; the NumPy kernels are called once each, on a 1x1 array, for a
    counter to see (issue 58's attack)."""

    @staticmethod
    def forward(ctx, input, normalized_shape, weight, bias, eps):
        from normlib.layer_norm import layer_norm_backward, layer_norm_forward

        one = np.ones((1, 1))
        layer_norm_forward(one, (1,))
        layer_norm_backward(one, one, (1,), one, one)
        return FunctionInTorch.forward(ctx, input, normalized_shape, weight, bias, eps)


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
        "unbiased variance": Mistake(stats_unbiased_variance, 'the unbiased variance: dividing by N - 1 = 3'),
        "eps added to the std": Mistake(stats_eps_outside_sqrt, 'eps is added to the std'),
        "last axis only": Mistake(stats_last_axis_only, "reduced over axes (2,) where normalized_shape=(3, 4) means axes (1, 2)"),
        "all axes but the first": Mistake(stats_all_but_first_axis, "reduced over axes (1, 2) where normalized_shape=(4,) means axes (2,)"),
        "no keepdims": Mistake(stats_no_keepdims, 'the reduced axes were dropped: keep them as size 1 (keepdims=True)'),
        "eps argument ignored (1e-5 hard-coded)": Mistake(stats_eps_hard_coded, "eps=1e-05 is used, not the eps=0.1 given"),
        "std instead of rstd": Mistake(stats_std_not_rstd, 'this is the std, not its reciprocal'),
        "float64 result for float32 input": Mistake(stats_float64_not_cast_back, 'a float32 input gives a float32 result'),
        "one-pass variance E[x^2]-E[x]^2": Mistake(stats_one_pass_variance, "the one-pass variance E[x^2] - E[x]^2"),
        "writes into its input x": Mistake(stats_writes_into_x, "x was modified in place"),
    },
    "1.2": {
        "one-pass variance E[x^2]-E[x]^2": Mistake(forward_one_pass_variance, "the one-pass variance E[x^2] - E[x]^2"),
        "no affine": Mistake(forward_no_affine, "weight and bias are not applied"),
        "weight and bias swapped": Mistake(forward_weight_bias_swapped, "weight and bias are swapped"),
        "bias added before scaling": Mistake(forward_bias_before_scale, "the bias is added before the weight scales"),
        "affine before normalizing": Mistake(forward_affine_before_normalizing, "applied to x before normalizing"),
        "bias ignored without weight": Mistake(forward_bias_only_with_weight, "the bias is not added when weight is None"),
        "eps added to the std (statistics inline)": Mistake(forward_eps_on_std_inline, "eps is added to the std"),
        "unbiased variance (statistics inline)": Mistake(forward_unbiased_inline, "the unbiased variance: dividing by N - 1 = 3"),
        "eps argument ignored (1e-5 hard-coded)": Mistake(forward_eps_hard_coded, "eps=1e-05 is used, not the eps=0.1 given"),
        "statistics over the last axis only": Mistake(forward_last_axis_only, "reduced over axes (2,) where normalized_shape=(3, 4) means axes (1, 2)"),
    },
    "2.2": {
        "missing mean term": Mistake(_backward_with("no_mean_term"), "the mean's term is missing"),
        "missing variance term": Mistake(_backward_with("no_variance_term"), "the variance's term is missing"),
        "dweight from x, not x_hat": Mistake(_backward_with("dweight_from_x"), "dweight multiplies the upstream gradient by x"),
        "dweight/dbias summed over axis 0 only": Mistake(_backward_with("first_axis_only"), "reduced over axes (0,) where dweight's sum over the rows means axes (0, 1)"),
        "weight ignored in dx": Mistake(_backward_with("weight_ignored"), "dx ignores the weight"),
        "rstd factor missing": Mistake(_backward_with("no_rstd"), "dx lacks the factor rstd"),
        "dweight/dbias returned when absent": Mistake(_backward_with("params_when_absent"), "dweight must be None"),
        "writes into grad_output": Mistake(backward_writes_into_grad_output, "grad_output was modified in place"),
        "dbias lost when there is no weight": Mistake(backward_no_dbias_without_weight, "bias was given, so its gradient is due"),
    },
    "2.1": {
        "dxc without the path through the variance": Mistake(_staged_with("no_var_path"), "dxc lacks the path through the variance"),
        "dx without the path through the mean": Mistake(_staged_with("no_mean_path"), "dx lacks the path through the mean"),
        "dvar with the wrong sign": Mistake(_staged_with("dvar_sign"), "dvar has the wrong sign"),
        "dvar with rstd squared, not cubed": Mistake(_staged_with("dvar_rstd_squared"), "dvar is off by a factor rstd"),
        "the 2/N of the mean of squares missing": Mistake(_staged_with("no_2_over_n"), "the path through the variance lacks the factor 2/N of d var / d xc"),
        "dmu not divided by N into dx": Mistake(_staged_with("dmu_not_divided"), "the path through the mean is not divided by N"),
        "drstd not summed over the row": Mistake(_staged_with("drstd_not_summed"), "drstd is not summed over the row"),
        "dmu not summed over the row": Mistake(_staged_with("dmu_not_summed"), "dmu is not summed over the row"),
        "unbiased variance in the forward": Mistake(_staged_with("unbiased"), "the unbiased variance in the forward: var divides by N - 1 = 3"),
        "a tuple, not a dict": Mistake(staged_returns_tuple, "return a dict of the gradients"),
    },
    "2.3": {
        "missing the mean term (11^T / N)": Mistake(_jacobian_with("no_mean_term"), "the mean's term is missing (the path through the mean)"),
        "missing the variance term (x_hat x_hat^T / N)": Mistake(_jacobian_with("no_variance_term"), "the variance's term is missing (the path through the variance)"),
        "rstd factor missing": Mistake(_jacobian_with("no_rstd"), "J lacks the factor rstd"),
        "unbiased variance": Mistake(_jacobian_with("unbiased"), "the unbiased variance: dividing by N - 1 = 3"),
        "outer product summed over the batch": Mistake(_jacobian_with("outer_over_batch"), "the outer product of x_hat is summed over the rows"),
        "float64 np.eye makes a float32 input's J float64": Mistake(_jacobian_with("eye_float64"), "a float32 input gives a float32 result"),
    },
    "2.4": {
        "zero for all three (.sum() shows nothing)": Mistake(_predictions_with(np.zeros_like,
                                                                       np.zeros_like), "with the mean detached it is gone"),
        "rstd for both bugs": Mistake(_predictions_with(lambda full: full, lambda full: full), "rstd is not .sum()'s gradient once the variance is detached"),
        "the two bugs swapped": Mistake(_predictions_with(lambda full: full, np.zeros_like), "rstd is not .sum()'s gradient once the variance is detached"),
        "ones, without rstd, for the detached mean": Mistake(_predictions_with(np.zeros_like,
                                                                       np.ones_like), "the factor rstd of x_hat = (x - mean) * rstd is missing"),
        "rstd not broadcast over the row": Mistake(predictions_rstd_not_broadcast, "one value per row, where dx has one per element"),
    },
    "2.5": {
        "dweight and dbias swapped": Mistake(FunctionSwapsParamGrads, "weight.grad and bias.grad are swapped"),
        "three gradients for five inputs": Mistake(FunctionThreeGrads, "one gradient per argument of forward"),
        "no parameter gradients": Mistake(FunctionNoParamGrads, "bias.grad is None"),
        "weight not passed to the backward kernel": Mistake(FunctionWeightNotPassed, "input.grad ignores the weight"),
        "forward returns a NumPy array": Mistake(FunctionReturnsNumpy, "expected the output to be a torch.Tensor"),
        "eps argument ignored": Mistake(FunctionUsesDefaultEps, "not the eps=0.25 given"),
        "saved state on the class, not ctx": Mistake(FunctionStateOnClass, "the two calls share what forward saved"),
        "torch computes it, not the NumPy kernels": Mistake(FunctionInTorch, "it must compute with your NumPy kernels"),
        "the kernels called for show, on a 1x1 array": Mistake(FunctionKernelsForShow, "the Function's output is not what your layer_norm_forward returned"),
        "normalized_shape taken from weight or the last dim": Mistake(FunctionShapeFromWeight, "normalized over the last axis alone"),
    },
}
