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
from normkit.testing import (
    X_HAT,
    assert_close,
    assert_same_computation,
    backward_mistakes,
    guard_inputs,
    layer_norm_backward_tolerances,
    norm_tolerance,
    torch_layer_norm,
    torch_layer_norm_backward,
    torch_layer_norm_jacobian,
    torch_layer_norm_nodes,
)


def check_staged(x, eps=1e-5, seed=0):
    """Your gradient at every node against the .grad torch's autograd holds for that
    intermediate (computed exactly, float64, rounded to x's dtype) under a random upstream
    gradient, in value, shape and dtype, in the order backprop reaches the nodes. Tolerance:
    two stages of the error model (forward, backward; normkit.testing)."""
    from normlib.layer_norm import layer_norm_backward_staged

    grad_output = np.random.default_rng(seed).standard_normal(x.shape).astype(x.dtype)
    expected = torch_layer_norm_nodes(grad_output, x, eps)  # {"drstd": ..., ..., "dx": ...}
    untouched = guard_inputs(grad_output=grad_output, x=x)
    result = layer_norm_backward_staged(grad_output, x, eps)
    case = f"for x {x.shape} {x.dtype}, eps={eps}"
    assert isinstance(result, dict), f"return a dict of the gradients, got {type(result)}"
    missing = [name for name in expected if name not in result]
    assert not missing, f"the dict has no {missing} {case}"
    tol = norm_tolerance(x, (-1,), eps, depth=2)
    for name, wanted in expected.items():
        assert_close(result[name], wanted, f"{name} {case}", **tol)
    untouched(case)


@exercise("2.1", "layer_norm.layer_norm_backward_staged")
def visible_2_1():
    x = np.array([[1, 2, 3, 4], [-1, 0, 0, 5]], dtype=np.float64)  # (2, 4)
    check_staged(x)
    check_staged(x.astype(np.float32), seed=1)


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
    assert isinstance(result, tuple) and len(result) == 3, "return (dx, dweight, dbias)"
    given = [n for n, a in (("weight", weight), ("bias", bias)) if a is not None]
    case = f"for x {x.shape} {x.dtype}, normalized_shape={normalized_shape}, affine {given}"
    tol = layer_norm_backward_tolerances(x, normalized_shape, eps)
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))  # (the groups' axes)
    g = grad_output if weight is None else grad_output * weight  # dL/dx_hat
    mistakes = {"dx": backward_mistakes(g, x, axes, eps)}  # {quantity: {cause: its value}}
    for name, actual, wanted in zip(("dx", "dweight", "dbias"), result, expected):
        if wanted is None:
            assert actual is None, f"{name} must be None {case}"
        else:
            assert_close(actual, wanted, f"{name} {case}", over=axes if name == "dx" else None,
                         mistakes=mistakes.get(name), **tol[name])
    untouched(case)


@exercise("2.2", "layer_norm.layer_norm_backward")
def visible_2_2():
    x = np.array([[1, 2, 3, 4], [-1, -2, -3, -4]], dtype=np.float32)  # (2, 4)
    weight = np.array([2.0, 1.0, 0.5, -1.0], dtype=np.float32)  # (4,)
    bias = np.array([0.0, 1.0, 2.0, 3.0], dtype=np.float32)  # (4,)
    check_backward(x, (4,))
    check_backward(x, (4,), weight, bias)


def check_jacobian(x, eps=1e-5):
    """Your Jacobian against torch.autograd.functional.jacobian's, row by row (computed in
    float64, rounded to x's dtype), in value, shape and dtype; tolerance: two stages of the
    error model (normkit.testing)."""
    from normlib.layer_norm import layer_norm_jacobian

    untouched = guard_inputs(x=x)
    J = layer_norm_jacobian(x, eps)
    case = f"for x {x.shape} {x.dtype}, eps={eps}"
    expected = torch_layer_norm_jacobian(x, eps).numpy().astype(x.dtype)  # (*B, N, N)
    assert_close(J, expected, f"J {case}", **norm_tolerance(x, (-1,), eps, depth=2))
    untouched(case)


@exercise("2.3", "layer_norm.layer_norm_jacobian")
def visible_2_3():
    check_jacobian(np.array([[1, 2, 3, 4], [-1, 0, 0, 5]], dtype=np.float64))  # (2, 4)
    check_jacobian(np.array([0.5, -1.0, 2.0], dtype=np.float32))  # one row, no leading axis


def check_prediction(x, eps=1e-5):
    """Your predicted dL/dx for L = x_hat.sum() against running .sum().backward() on each of
    normkit.testing's X_HAT implementations (float64, rounded to x's dtype), in value, shape
    and dtype; tolerance: two stages of the error model (normkit.testing)."""
    from normlib.layer_norm import predicted_sum_gradients

    untouched = guard_inputs(x=x)
    predicted = predicted_sum_gradients(x, eps)
    case = f"for x {x.shape} {x.dtype}, eps={eps}"
    assert isinstance(predicted, dict), f"return a dict, got {type(predicted)}"
    tol = norm_tolerance(x, (-1,), eps, depth=2)
    for name, x_hat in X_HAT.items():
        assert name in predicted, f"the dict has no {name!r} {case}"
        xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
        x_hat(xt, eps).sum().backward()
        wanted = xt.grad.numpy().astype(x.dtype)
        assert_close(predicted[name], wanted, f"dx of the {name} implementation {case}", **tol)
    untouched(case)


@exercise("2.4", "layer_norm.predicted_sum_gradients")
def visible_2_4():
    check_prediction(np.array([[1, 2, 3, 4], [-1, 0, 0, 5]], dtype=np.float64))
    check_prediction(np.array([[0.5, -1.0, 2.0]], dtype=np.float32))


def check_module(shape, normalized_shape, dtype=torch.float32, seed=0, offset=0.0,
                 **kwargs):
    """normlib.nn.LayerNorm (which calls your LayerNormFunction) against torch.nn.LayerNorm
    with the same random parameters, computed exactly (float64): output, input gradient and
    parameter gradients under a random upstream gradient, in value, shape and dtype, within
    the error model's tolerance for two stages (normkit.testing). kwargs: constructor
    arguments."""
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
    tol = norm_tolerance(x, tuple(range(-len(size), 0)), kwargs.get("eps", 1e-5), depth=2,
                         length=rows)
    assert_same_computation(ours, theirs, x, case, seed, tol)


@exercise("2.5", "nn.LayerNormFunction")
def visible_2_5():
    from normlib.nn import LayerNormFunction

    check_module((2, 3, 4), (3, 4))
    # gradcheck: your backward against finite differences of your forward, in float64
    x = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    w = torch.randn(5, dtype=torch.float64, requires_grad=True)
    b = torch.randn(5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, w, b: LayerNormFunction.apply(x, (5,), w, b, 1e-5),
                                    (x, w, b))
