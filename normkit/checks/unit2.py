"""Unit 2's checks: Exercises 2.1 (layer_norm_backward_staged), 2.2 (layer_norm_backward),
2.3 (layer_norm_jacobian), 2.4 (predicted_sum_gradients) and 2.5 (LayerNormFunction).

Each check function compares your gradients with torch's autograd computed exactly (float64,
rounded to x's dtype), in value, shape and dtype, under a random upstream gradient (2.4: the
upstream gradient of .sum()), within the error model's tolerances (normkit.testing). Your
function is imported when a check runs, so it is always your file as it is now.
"""

import math

import numpy as np
import torch

from normkit.checks import exercise
from normkit.checks.unit1 import normalized_axes
from normkit.testing import (
    X_HAT,
    CheckFailed,
    assert_close,
    assert_computed_with,
    assert_same_computation,
    backward_mistakes,
    counted_calls,
    guard_inputs,
    layer_norm_backward_tolerances,
    norm_tolerance,
    torch_layer_norm,
    torch_layer_norm_backward,
    torch_layer_norm_jacobian,
    torch_layer_norm_nodes,
    torch_normalize,
    torch_tensor_close,
)


def staged_mistakes(grad_output, x, eps=1e-5):
    """{node: {likely cause: the gradient that mistake gives there}} for Exercise 2.1's
    graph, from torch autograd's exact nodes (float64) with a path cut or the variance
    unbiased, rounded to x's dtype."""
    n, x64 = x.shape[-1], x.astype(np.float64)  # (B, N)
    exact = torch_layer_norm_nodes(grad_output, x64, eps)  # {node: (B, 1) or (B, N)}
    no_var = torch_layer_norm_nodes(grad_output, x64, eps, cut="variance")
    no_mean = torch_layer_norm_nodes(grad_output, x64, eps, cut="mean")
    rstd = torch_normalize(x64, (-1,), eps)[3]  # (B, 1)
    via_var = exact["dxc"] - no_var["dxc"]  # (B, N): dxc's path through the variance
    via_mean = exact["dx"] - no_mean["dx"]  # (B, N): dx's path through the mean
    found = {
        "dvar": {
            "dvar has the wrong sign: rstd = (var + eps)^(-1/2) falls as var grows":
                -exact["dvar"],
            "dvar is off by a factor rstd: the power of (var + eps) in d rstd / d var is "
            "wrong": exact["dvar"] / rstd},
        "dxc": {
            "dxc lacks the path through the variance: xc reaches x_hat directly and through "
            "var (Unit 2, section 2)": no_var["dxc"],
            "the path through the variance lacks the factor 2/N of d var / d xc: var is the "
            "mean of xc ** 2, 2 from the square, 1/N from the mean":
                no_var["dxc"] + n / 2 * via_var},
        "dx": {
            "dx lacks the path through the mean: x reaches xc directly and through mu "
            "(Unit 2, section 2)": no_mean["dx"],
            "the path through the mean is not divided by N: mu = mean(x) hands each x 1/N "
            "of dmu": no_mean["dx"] + n * via_mean}}
    if n > 1:
        found["dvar"][f"the unbiased variance in the forward: var divides by N - 1 = {n - 1} "
                      f"where LayerNorm divides by N = {n}"] = \
            torch_layer_norm_nodes(grad_output, x64, eps, ddof=1)["dvar"]
    return {node: {c: v.astype(x.dtype) for c, v in causes.items()}
            for node, causes in found.items()}


def check_node_shape(actual, wanted, name, x, case):
    """A node that is one value per row (B, 1) returned as one per element (B, N): say that
    it was not summed over the row."""
    if isinstance(actual, np.ndarray) and actual.shape == x.shape != wanted.shape:
        raise CheckFailed(f"{name} {case}: expected shape {wanted.shape}, got {x.shape}.\n"
                          f"  Likely cause: {name} is not summed over the row: {name[1:]} is "
                          "one value per row, so its gradient sums what each of the row's N "
                          "elements sends it.")


def check_staged(x, eps=1e-5, seed=0):
    """Your gradient at every node against the .grad torch's autograd holds for that
    intermediate (computed exactly, float64, rounded to x's dtype) under a random upstream
    gradient, in value, shape and dtype, in the order backprop reaches the nodes; a wrong
    one named by the path or term it misses (staged_mistakes). Tolerance: two stages of the
    error model (forward, backward; normkit.testing)."""
    from normlib.layer_norm import layer_norm_backward_staged

    grad_output = np.random.default_rng(seed).standard_normal(x.shape).astype(x.dtype)
    expected = torch_layer_norm_nodes(grad_output, x, eps)  # {"drstd": ..., ..., "dx": ...}
    untouched = guard_inputs(grad_output=grad_output, x=x)
    result = layer_norm_backward_staged(grad_output, x, eps)
    case = f"for x {x.shape} {x.dtype}, eps={eps}"
    assert isinstance(result, dict), \
        (f"return a dict of the gradients {{node: gradient}}, got {type(result).__name__}.\n"
         "  Where: the result's type: the gradients go in one dict, each under its node's "
         "name (the docstring's keys)")
    missing = [name for name in expected if name not in result]
    assert not missing, f"the dict has no {missing} {case}."
    tol = norm_tolerance(x, (-1,), eps, depth=2)
    mistakes = staged_mistakes(grad_output, x, eps)
    for name, wanted in expected.items():
        check_node_shape(result[name], wanted, name, x, case)
        assert_close(result[name], wanted, f"{name} {case}", mistakes=mistakes.get(name),
                     **tol)
    untouched(case)


@exercise("2.1", "layer_norm.layer_norm_backward_staged")
def visible_2_1():
    x = np.array([[1, 2, 3, 4], [-1, 0, 0, 5]], dtype=np.float64)  # (2, 4)
    check_staged(x)
    check_staged(x.astype(np.float32), seed=1)
    check_staged(x, eps=0.5, seed=2)  # an eps of its own, on the scale of the variance


def backward_kernel_mistakes(grad_output, x, normalized_shape, weight, bias, eps=1e-5):
    """{quantity: {likely cause: what that mistake gives}} for LayerNorm's backward kernel:
    dx without the mean's or the variance's term (normkit.testing.backward_mistakes),
    without the weight, without rstd; dweight from x instead of x_hat. Computed exactly
    (float64) from torch autograd's gradients, rounded to x's dtype."""
    axes = normalized_axes(x, normalized_shape)  # (the groups' axes)
    g = grad_output if weight is None else grad_output * weight  # dL/dx_hat
    found = {"dx": backward_mistakes(g, x, axes, eps), "dweight": {}}
    x64, g64 = x.astype(np.float64), grad_output.astype(np.float64)  # (*B, *S)
    dx = torch_layer_norm_backward(g64, x64, normalized_shape, eps=eps)[0]  # (*B, *S)
    rstd = torch_normalize(x64, axes, eps)[3]  # (*B, 1..1)
    found["dx"]["a scale factor is missing: dx lacks the factor rstd"] = (dx / rstd).astype(
        x.dtype)
    if weight is not None:
        found["dx"]["dx ignores the weight: the upstream gradient reaches x_hat multiplied "
                    "by the weight"] = torch_layer_norm_backward(
            g64, x64, normalized_shape, eps=eps)[0].astype(x.dtype)
        found["dweight"]["dweight multiplies the upstream gradient by x, where y scales "
                         "x_hat"] = (g64 * x64).sum(axis=tuple(range(x.ndim - len(axes)))
                                                    ).astype(x.dtype)
    return found


def check_backward(x, normalized_shape, weight=None, bias=None, eps=1e-5, seed=0):
    """Your dx, dweight, dbias against torch autograd's computed exactly (float64, rounded
    to x's dtype) under a random upstream gradient, in value, shape and dtype. mean and rstd
    come from torch, so this checks only 2.2. Tolerances from the error model
    (normkit.testing.layer_norm_backward_tolerances): two stages (forward, backward);
    dweight and dbias sum over the rows, so their tolerance also grows with the number of
    rows; dbias does not depend on x, so not with its condition."""
    from normlib.layer_norm import layer_norm_backward

    grad_output = np.random.default_rng(seed).standard_normal(x.shape).astype(x.dtype)
    _, mean, rstd = torch_layer_norm(x, normalized_shape, weight, bias, eps)
    expected = torch_layer_norm_backward(grad_output, x, normalized_shape, weight, bias, eps)
    untouched = guard_inputs(grad_output=grad_output, x=x, mean=mean, rstd=rstd, weight=weight,
                             bias=bias)
    result = layer_norm_backward(grad_output, x, normalized_shape, mean, rstd, weight, bias)
    assert isinstance(result, tuple) and len(result) == 3, "return (dx, dweight, dbias)."
    given = [n for n, a in (("weight", weight), ("bias", bias)) if a is not None]
    case = f"for x {x.shape} {x.dtype}, normalized_shape={normalized_shape}, affine {given}"
    tol = layer_norm_backward_tolerances(x, normalized_shape, eps)
    axes = normalized_axes(x, normalized_shape)  # (the groups' axes)
    leading = tuple(range(x.ndim - len(axes)))  # (the rows' axes)
    mistakes = backward_kernel_mistakes(grad_output, x, normalized_shape, weight, bias, eps)
    for name, actual, wanted in zip(("dx", "dweight", "dbias"), result, expected):
        param = name[1:]
        rows = (x.shape, leading, f"{name}'s sum over the rows", False)  # (reduced)
        if wanted is None:
            assert actual is None, \
                (f"{name} must be None {case}: there is no {param}, so no gradient for it.\n"
                 f"  Where: {name}, an array where {param} is None")
        elif actual is None:
            raise CheckFailed(f"{name} is None {case}: {param} was given, so its gradient is "
                              "due, whether the other parameter is there or not.\n"
                              f"  Where: {name}, None where {param} is given")
        else:
            assert_close(actual, wanted, f"{name} {case}", over=axes if name == "dx" else None,
                         mistakes=mistakes.get(name), reduced=None if name == "dx" else rows,
                         **tol[name])
    untouched(case)


@exercise("2.2", "layer_norm.layer_norm_backward")
def visible_2_2():
    from normkit.checks.unit1 import X  # (2, 3, 4): the worked example of Unit 1

    x = np.array([[1, 2, 3, 4], [-1, -2, -3, -4]], dtype=np.float32)  # (2, 4)
    weight = np.array([2.0, 1.0, 0.5, -1.0], dtype=np.float32)  # (4,)
    bias = np.array([0.0, 1.0, 2.0, 3.0], dtype=np.float32)  # (4,)
    check_backward(x, (4,))
    check_backward(x, (4,), weight, bias)
    check_backward(x, (4,), None, bias)  # a shift alone: dbias all the same
    check_backward(X, (4,), weight, bias)  # two leading axes: the parameters sum over both
    w12 = np.linspace(-1.5, 2.0, 12, dtype=np.float32).reshape(3, 4)  # (3, 4)
    check_backward(X, (3, 4), w12, w12[::-1, ::-1] / 2)  # a 2-D normalized_shape
    rng = np.random.default_rng(1)  # float64: its precision, to the last digits
    check_backward(rng.standard_normal((3, 4)), (4,), rng.standard_normal(4),
                   rng.standard_normal(4))


def cut_jacobians(x, eps=1e-5):
    """{graph: its Jacobian, float64 (*B, N, N)}: torch's for x_hat over the last axis of x
    with a path cut, as normkit.testing.X_HAT computes it ("detached variance", "detached
    mean"), row by row."""
    rows = torch.tensor(x, dtype=torch.float64).reshape(-1, x.shape[-1])  # (rows, N)
    return {name: torch.stack([torch.autograd.functional.jacobian(
        lambda r, f=f: f(r, eps), row) for row in rows]).reshape(*x.shape, x.shape[-1]).numpy()
        for name, f in X_HAT.items() if name != "correct"}


def jacobian_mistakes(x, exact, eps=1e-5):
    """{likely cause: the J that mistake gives} for Exercise 2.3, from the exact Jacobians
    (float64) of the full graph (exact, (*B, N, N)) and of the graphs with the mean's or the
    variance's path cut, rounded to x's dtype."""
    n, x64 = x.shape[-1], x.astype(np.float64)  # (*B, N)
    J = cut_jacobians(x, eps)  # {graph: (*B, N, N)}
    _, _, var, rstd = torch_normalize(x64, (-1,), eps)  # (*B, 1) each
    rstd = rstd[..., None]  # (*B, 1, 1)
    direct = J["detached variance"]  # (*B, N, N): all but the variance's term
    var_term = direct - exact  # (*B, N, N), rstd times one row's outer product
    batch = (var_term / rstd).reshape(-1, n, n).sum(axis=0)  # (N, N): over every row
    found = {
        "the mean's term is missing (the path through the mean)": J["detached mean"],
        "the variance's term is missing (the path through the variance)": direct,
        "J lacks the factor rstd": exact / rstd,
        "the outer product of x_hat is summed over the rows: each row's J uses its own x_hat "
        "alone": direct - rstd * batch}
    if n > 1:  # rstd and x_hat from the unbiased variance: each c times the exact ones
        var = var[..., 0] + eps  # (*B,)
        c = np.sqrt(var / (x64.var(axis=-1, ddof=1) + eps))[..., None, None]  # (*B, 1, 1)
        found[f"the unbiased variance: dividing by N - 1 = {n - 1} where LayerNorm divides "
              f"by N = {n}"] = c * (direct - c**2 * var_term)
    return {cause: value.astype(x.dtype) for cause, value in found.items()}


def check_jacobian(x, eps=1e-5):
    """Your Jacobian against torch.autograd.functional.jacobian's, row by row (computed in
    float64, rounded to x's dtype), in value, shape and dtype; tolerance: two stages of the
    error model (normkit.testing)."""
    from normlib.layer_norm import layer_norm_jacobian

    untouched = guard_inputs(x=x)
    J = layer_norm_jacobian(x, eps)
    case = f"for x {x.shape} {x.dtype}, eps={eps}"
    exact = torch_layer_norm_jacobian(x, eps).numpy()  # (*B, N, N), float64
    assert_close(J, exact.astype(x.dtype), f"J {case}", mistakes=jacobian_mistakes(x, exact, eps),
                 **norm_tolerance(x, (-1,), eps, depth=2))
    untouched(case)


@exercise("2.3", "layer_norm.layer_norm_jacobian")
def visible_2_3():
    check_jacobian(np.array([[1, 2, 3, 4], [-1, 0, 0, 5]], dtype=np.float64))  # (2, 4)
    check_jacobian(np.array([0.5, -1.0, 2.0], dtype=np.float32))  # one row, no leading axis
    check_jacobian(np.array([[0.5, -1.0, 2.0]]), eps=0.5)  # an eps of its own


def prediction_mistakes(x, eps=1e-5):
    """{implementation: {likely cause: the dx that mistake predicts}} for Exercise 2.4:
    zeros, ones and rstd (broadcast over the row, float64), rounded to x's dtype, each named
    where it is not .sum()'s gradient."""
    rstd = torch_normalize(x.astype(np.float64), (-1,), eps)[3]  # (*B, 1)
    full = np.broadcast_to(rstd, x.shape).astype(x.dtype)  # (*B, N)
    return {"detached variance": {
                "rstd is not .sum()'s gradient once the variance is detached: the mean's path "
                "is still there (Unit 2, section 4)": full},
            "detached mean": {
                "zero is .sum()'s gradient while the mean's path is there; with the mean "
                "detached it is gone (Unit 2, section 4)": np.zeros_like(x),
                "ones: the factor rstd of x_hat = (x - mean) * rstd is missing":
                    np.ones_like(x)}}


def check_prediction(x, eps=1e-5):
    """Your predicted dL/dx for L = x_hat.sum() against running .sum().backward() on each of
    normkit.testing's X_HAT implementations (float64, rounded to x's dtype), in value, shape
    and dtype; tolerance: two stages of the error model (normkit.testing)."""
    from normlib.layer_norm import predicted_sum_gradients

    untouched = guard_inputs(x=x)
    predicted = predicted_sum_gradients(x, eps)
    case = f"for x {x.shape} {x.dtype}, eps={eps}"
    assert isinstance(predicted, dict), f"return a dict, got {type(predicted).__name__}."
    tol = norm_tolerance(x, (-1,), eps, depth=2)
    mistakes = prediction_mistakes(x, eps)
    for name, x_hat in X_HAT.items():
        assert name in predicted, f"the dict has no {name!r} {case}."
        xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
        x_hat(xt, eps).sum().backward()
        wanted = xt.grad.numpy().astype(x.dtype)
        what = f"dx of the {name} implementation {case}"
        if isinstance(predicted[name], np.ndarray) and \
                predicted[name].shape == x.shape[:-1] + (1,) != x.shape:
            raise CheckFailed(f"{what}: expected shape {x.shape}, got {predicted[name].shape}."
                              "\n  Likely cause: one value per row, where dx has one per "
                              "element of x: broadcast it to x's shape (np.broadcast_to).")
        assert_close(predicted[name], wanted, what, mistakes=mistakes.get(name), **tol)
    untouched(case)


@exercise("2.4", "layer_norm.predicted_sum_gradients")
def visible_2_4():
    check_prediction(np.array([[1, 2, 3, 4], [-1, 0, 0, 5]], dtype=np.float64))
    check_prediction(np.array([[0.5, -1.0, 2.0]], dtype=np.float32))
    check_prediction(np.array([[0.5, -1.0, 2.0]]), eps=0.5)  # an eps of its own


def float64_arrays(*tensors):
    """The tensors given as float64 NumPy arrays (None stays None): the inputs of
    normkit.testing's exact computations."""
    return [None if t is None else t.detach().double().numpy() for t in tensors]


def module_mistakes(x, normalized_shape, weight, bias, eps):
    """mistakes(grad_output) for assert_same_computation: {name: {likely cause: the tensor
    that mistake of a LayerNormFunction gives}}, exactly (float64, normkit.testing's
    torch_layer_norm and torch_layer_norm_backward): the eps argument ignored,
    normalized_shape taken from the last axis, the weight not passed to the backward
    kernel, dweight and dbias swapped."""
    shape = tuple(normalized_shape)
    x64, w64, b64 = float64_arrays(x, weight, bias)  # (*B, *S), (*S), (*S)

    def mistakes(grad_output):
        g64 = float64_arrays(grad_output)[0]  # (*B, *S)
        found = {"output": {}, "input.grad": {}, "weight.grad": {}, "bias.grad": {}}
        if eps != 1e-5:
            found["output"][f"the output is LayerNorm's with the default eps=1e-05, not the "
                            f"eps={eps} given: pass eps on to layer_norm_forward"] = \
                torch_layer_norm(x64, shape, w64, b64)[0]  # (*B, *S)
        if len(shape) > 1 and weight is None:
            found["output"][f"the output is normalized over the last axis alone, where "
                            f"normalized_shape={shape} means the last {len(shape)} axes: use "
                            "the normalized_shape given"] = \
                torch_layer_norm(x64, shape[-1:], eps=eps)[0]  # (*B, *S)
        if weight is not None:
            found["input.grad"]["input.grad ignores the weight: pass the weight to "
                                "layer_norm_backward, whose dx depends on it"] = \
                torch_layer_norm_backward(g64, x64, shape, eps=eps)[0]  # (*B, *S)
        if weight is not None and bias is not None:
            _, dweight, dbias = torch_layer_norm_backward(g64, x64, shape, w64, b64, eps)  # (*S)
            swapped = ("weight.grad and bias.grad are swapped: backward returns one gradient "
                       "per argument of forward, in its order")
            found["weight.grad"][swapped], found["bias.grad"][swapped] = dbias, dweight
        return {name: {cause: torch.from_numpy(v) for cause, v in causes.items()}
                for name, causes in found.items()}

    return mistakes


WRONG_COUNT = ("backward returned the wrong number of gradients {case}.\n  Likely cause: "
               "backward returns one gradient per argument of forward (input, "
               "normalized_shape, weight, bias, eps), None for those that are not tensors.")


def check_module(shape, normalized_shape, dtype=torch.float32, seed=0, offset=0.0,
                 **kwargs):
    """normlib.nn.LayerNorm (which calls your LayerNormFunction) against torch.nn.LayerNorm
    with the same random parameters, computed exactly (float64): output, input gradient and
    parameter gradients under a random upstream gradient, in value, shape and dtype, within
    the error model's tolerance for two stages (normkit.testing); a wrong one named where it
    is what a classic mistake gives (module_mistakes). kwargs: constructor arguments."""
    from normlib.nn import LayerNorm

    torch.manual_seed(seed)
    ours = LayerNorm(normalized_shape, dtype=dtype, **kwargs)
    theirs = torch.nn.LayerNorm(normalized_shape, dtype=dtype, **kwargs)
    with torch.no_grad():
        for p in ours.parameters():
            p.normal_()
    theirs.load_state_dict(ours.state_dict())
    x = torch.randn(shape, dtype=dtype) + offset
    case = f"for x {tuple(shape)} {dtype}, LayerNorm({normalized_shape}, {kwargs})"
    size = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
    rows = x.numel() // math.prod(size)  # the parameter gradients sum over the rows
    eps = kwargs.get("eps", 1e-5)
    tol = norm_tolerance(x, normalized_axes(x, size), eps, depth=2, length=rows)
    mistakes = module_mistakes(x, size, theirs.weight, theirs.bias, eps)
    try:
        assert_same_computation(ours, theirs, x, case, seed, tol, mistakes)
    except RuntimeError as error:
        if "incorrect number of gradients" not in str(error):
            raise
        raise CheckFailed(WRONG_COUNT.format(case=case)) from None


def check_two_calls(shape, eps=1e-5, seed=0):
    """Two LayerNormFunction calls in one graph, y = f(x1) + 2 f(x2) (float64, no weight or
    bias): each input's gradient is its own call's, against torch's, exactly; where x1's is
    what x2's saved tensors give, what forward saves is shared (not on ctx)."""
    from normlib.nn import LayerNormFunction

    gen = torch.Generator().manual_seed(seed)
    x1, x2, g = (torch.randn(shape, generator=gen, dtype=torch.float64) for _ in range(3))
    inputs = [x1.clone().requires_grad_(), x2.clone().requires_grad_()]
    y = LayerNormFunction.apply(inputs[0], shape[-1:], None, None, eps) + \
        2 * LayerNormFunction.apply(inputs[1], shape[-1:], None, None, eps)
    grads = torch.autograd.grad(y, inputs, g)

    def dx(grad, x):
        """dx of LayerNorm over x's last axis under grad, exactly (float64 (*shape))."""
        return torch_layer_norm_backward(grad.numpy(), x.numpy(), shape[-1:], eps=eps)[0]

    wanted = [torch.from_numpy(dx(g, x1)), torch.from_numpy(dx(2 * g, x2))]  # (*shape) each
    shared = {"x1.grad is what backward gives with the second call's saved tensors: the two "
              "calls share what forward saved: keep it on ctx (ctx.save_for_backward), not "
              "on the class or in a global": dx(g, x2)}  # (*shape)
    tol = norm_tolerance(torch.cat([x1, x2]), (-1,), eps, depth=2)
    for name, actual, exact in zip(("x1.grad", "x2.grad"), grads, wanted):
        torch_tensor_close(actual, exact, f"{name} for y = f(x1) + 2 f(x2), x1 and x2 {shape}",
                           mistakes=shared if name == "x1.grad" else None, **tol)


KERNELS = ("layer_norm_forward", "layer_norm_backward")  # what LayerNormFunction computes with


def counted_kernels(values=None):
    """Inside the block, each call of the NumPy kernels (KERNELS, in normlib.layer_norm and
    wherever normlib.nn imported them) appends its name to the list it yields (and its
    arguments and result to values, if given)."""
    import normlib.layer_norm
    import normlib.nn

    return counted_calls((normlib.layer_norm, normlib.nn), KERNELS, values)


def check_uses_kernels(shape, eps=1e-5, seed=0):
    """LayerNormFunction's forward and backward (float64, no weight or bias) compute with
    your NumPy kernels, layer_norm_forward and layer_norm_backward: called on the input
    and the upstream gradient, their results are what the Function returns."""
    from normlib.nn import LayerNormFunction

    gen = torch.Generator().manual_seed(seed)
    x, g = (torch.randn(shape, generator=gen, dtype=torch.float64) for _ in range(2))
    values = []
    with counted_kernels(values) as calls:
        y = LayerNormFunction.apply(x.requires_grad_(), shape[-1:], None, None, eps)
        y.backward(g)
    assert_computed_with("LayerNormFunction", "1.2 and 2.2", KERNELS, calls, values, x, y, g)


@exercise("2.5", "nn.LayerNormFunction")
def visible_2_5():
    from normlib.nn import LayerNormFunction

    check_module((2, 3, 4), (3, 4))
    check_module((3, 5), 5, eps=0.25)  # an eps of its own, as large as the variance
    check_module((3, 2, 5), (2, 5), elementwise_affine=False)  # no weight: a 2-D shape still
    check_two_calls((3, 5))  # what forward saves is each call's own
    check_uses_kernels((2, 6))
    # gradcheck: your backward against finite differences of your forward, in float64
    x = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    w = torch.randn(5, dtype=torch.float64, requires_grad=True)
    b = torch.randn(5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, w, b: LayerNormFunction.apply(x, (5,), w, b, 1e-5),
                                    (x, w, b))
