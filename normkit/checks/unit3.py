"""Unit 3's checks: Exercises 3.1 (normalize_forward), 3.2 (normalize_backward), 3.3
(batch_norm_forward), 3.4 (group_norm_forward), 3.5 (instance_norm_forward), 3.6
(rms_norm_forward), 3.7 (rms_norm_backward) and 3.8 (batch_norm_backward).

Each check function compares your result with torch's computed exactly (float64, rounded to
x's dtype), in value, shape and dtype, within the error model's tolerances
(normkit.testing). Your function is imported when a check runs, so it is always your file
as it is now.
"""

import numpy as np
import torch

from normkit.checks import exercise
from normkit.testing import (
    assert_close,
    backward_mistakes,
    call_updating,
    guard_inputs,
    norm_tolerance,
    stats_mistakes,
    tolerance,
    torch_grads,
    torch_normalize,
)


def check_normalize(x, axes, eps=1e-5):
    """Your x_hat, mean, var, rstd against torch's computed exactly (float64, rounded to x's
    dtype), in value, shape and dtype, within the error model's tolerances (normkit.testing):
    the mean's from the group size, the others' also from the condition of x (var and
    rstd as a sum of squared deviations)."""
    from normlib.norm import normalize_forward

    result = normalize_forward(x, axes, eps)
    assert isinstance(result, tuple) and len(result) == 4, "return (x_hat, mean, var, rstd)"
    case = f"for x {x.shape} {x.dtype}, axes={axes}, eps={eps}"
    spread = norm_tolerance(x, axes, eps, spread=True)
    tols = (norm_tolerance(x, axes, eps), tolerance(x.dtype, np.prod([x.shape[a] for a in axes])),
            spread, spread)
    mistakes = stats_mistakes(x, axes, eps)  # {quantity: {likely cause: its value}}
    for name, actual, wanted, t in zip(("x_hat", "mean", "var", "rstd"), result,
                                       torch_normalize(x, axes, eps), tols):
        assert_close(actual, wanted, f"{name} {case}", mistakes=mistakes.get(name), **t)


@exercise("3.1", "norm.normalize_forward")
def visible_3_1():
    x = np.random.default_rng(0).standard_normal((4, 3, 5)).astype(np.float32)  # (N, C, L)
    check_normalize(x, (0, 2))  # BatchNorm's axes: one group per channel
    check_normalize(x, (2,))  # InstanceNorm's: one group per sample and channel
    check_normalize(x, (1, 2))  # LayerNorm's: one group per sample
    check_normalize(1e-3 * x, (2,))  # variances below eps: where eps goes shows (Unit 1)


def check_normalize_backward(x, axes, eps=1e-5, seed=0):
    """Your dx against torch autograd's for x_hat = normalize(x), computed exactly (float64,
    rounded to x's dtype) under a random upstream gradient, in value, shape and dtype,
    within the error model's tolerance for two stages (normkit.testing). x_hat and rstd
    come from torch."""
    from normlib.norm import normalize_backward

    grad_x_hat = np.random.default_rng(seed).standard_normal(x.shape).astype(x.dtype)
    x_hat, _, _, rstd = torch_normalize(x, axes, eps)

    def normalize(t):
        mean = t.mean(dim=axes, keepdim=True)
        return (t - mean) / (t.var(dim=axes, unbiased=False, keepdim=True) + eps).sqrt()

    (expected,) = torch_grads(normalize, grad_x_hat, x)
    dx = normalize_backward(grad_x_hat, x_hat, rstd, axes)
    assert_close(dx, expected, f"dx for x {x.shape} {x.dtype}, axes={axes}", over=axes,
                 mistakes=backward_mistakes(grad_x_hat, x, axes, eps),
                 **norm_tolerance(x, axes, eps, depth=2))


@exercise("3.2", "norm.normalize_backward")
def visible_3_2():
    x = np.random.default_rng(0).standard_normal((4, 3, 5)).astype(np.float32)  # (N, C, L)
    check_normalize_backward(x, (0, 2))
    check_normalize_backward(x, (2,))
    check_normalize_backward(x, (1, 2))


def float64(*arrays):
    """Each array as a float64 tensor (the exact reference's input), None as None."""
    return [None if a is None else torch.tensor(a, dtype=torch.float64) for a in arrays]


def check_running(running_mean, running_var, torch_stats, case, tol):
    """The running statistics (C,), updated in place, against torch's (float64 tensors,
    rounded to their dtype)."""
    for name, actual, wanted in zip(("running_mean", "running_var"),
                                    (running_mean, running_var), torch_stats):
        assert_close(actual, wanted.numpy().astype(actual.dtype), f"{name} after {case}", **tol)


def channel_parameters(x, affine, running, seed):
    """(weight, bias, running_mean, running_var), each (C,) in x's dtype and drawn from one
    generator seeded with seed, or None where affine or running is False."""
    rng = np.random.default_rng(seed)
    c, dtype = x.shape[1], x.dtype
    weight = rng.standard_normal(c).astype(dtype) if affine else None  # (C,)
    bias = rng.standard_normal(c).astype(dtype) if affine else None  # (C,)
    running_mean = rng.standard_normal(c).astype(dtype) if running else None  # (C,)
    running_var = (0.5 + rng.random(c)).astype(dtype) if running else None  # (C,)
    return weight, bias, running_mean, running_var


def check_batch_norm(x, training, affine=True, running=True, momentum=0.1, eps=1e-5, seed=0):
    """Your y, x_hat, rstd and running statistics against torch's batch_norm computed
    exactly (float64, rounded to x's dtype), in value, shape and dtype, within the error
    model's tolerances (normkit.testing; y is one stage after x_hat). The running statistics
    must be updated in place in training."""
    from normlib.batch_norm import batch_norm_forward

    c, dtype = x.shape[1], x.dtype
    weight, bias, running_mean, running_var = channel_parameters(x, affine, running, seed)
    exact = float64(x, weight, bias, running_mean, running_var)
    t, torch_stats = exact[:3], exact[3:]
    expected_y = torch.nn.functional.batch_norm(t[0], *torch_stats, t[1], t[2], training,
                                                momentum, eps).numpy().astype(dtype)
    case = (f"for x {x.shape} {dtype}, training={training}, momentum={momentum}, "
            f"affine={affine}, running stats {'given' if running else 'None'}")
    # the running statistics are updated in place (call_updating: see normkit.testing)
    result = call_updating(batch_norm_forward, x, running_mean, running_var, weight, bias,
                           training, momentum, eps, updates=(running_mean, running_var))
    assert isinstance(result, tuple) and len(result) == 3, "return (y, x_hat, rstd)"
    y, x_hat, rstd = result
    axes = (0, *range(2, x.ndim))
    tol = norm_tolerance(x, axes, eps, spread=True)  # rstd, running statistics
    assert_close(y, expected_y, f"y {case}", **norm_tolerance(x, axes, eps, depth=2))
    if training:
        expected_x_hat, _, _, expected_rstd = torch_normalize(x, axes, eps)
    else:
        shape = (1, c) + (1,) * (x.ndim - 2)
        expected_rstd = (1 / np.sqrt(torch_stats[1].numpy() + eps)).reshape(shape)
        expected_x_hat = (t[0].numpy() - torch_stats[0].numpy().reshape(shape)) * expected_rstd
    assert_close(x_hat, expected_x_hat.astype(dtype), f"x_hat {case}",
                 **norm_tolerance(x, axes, eps))
    assert_close(rstd, expected_rstd.astype(dtype), f"rstd {case}", **tol)
    if running:  # the arrays passed in must now hold torch's updated statistics
        check_running(running_mean, running_var, torch_stats, case, tol)


@exercise("3.3", "batch_norm.batch_norm_forward")
def visible_3_3():
    x = np.random.default_rng(0).standard_normal((8, 3)).astype(np.float32)  # (N, C)
    check_batch_norm(x, training=True)
    check_batch_norm(x, training=False)


def check_group_norm(x, num_groups, affine=True, eps=1e-5, seed=0):
    """Your y, x_hat, rstd against torch's group_norm computed exactly (float64, rounded to
    x's dtype), in value, shape and dtype, within the error model's tolerances
    (normkit.testing; y is one stage after x_hat)."""
    from normlib.group_norm import group_norm_forward

    dtype = x.dtype
    weight, bias, _, _ = channel_parameters(x, affine, False, seed)
    t = float64(x, weight, bias)
    expected_y = torch.nn.functional.group_norm(t[0], num_groups, t[1], t[2], eps).numpy()
    groups = x.reshape(x.shape[0], num_groups, -1)  # (N, G, C/G * spatial)
    tol = norm_tolerance(groups, (2,), eps)
    expected_x_hat, _, _, expected_rstd = torch_normalize(groups, (2,), eps)
    result = group_norm_forward(x, num_groups, weight, bias, eps)
    assert isinstance(result, tuple) and len(result) == 3, "return (y, x_hat, rstd)"
    case = f"for x {x.shape} {dtype}, num_groups={num_groups}, affine={affine}"
    for name, actual, wanted, t in zip(
        ("y", "x_hat", "rstd"), result,
        (expected_y.astype(dtype), expected_x_hat.reshape(x.shape), expected_rstd),
        (norm_tolerance(groups, (2,), eps, depth=2), tol, tol),
    ):
        assert_close(actual, wanted, f"{name} {case}", **t)


@exercise("3.4", "group_norm.group_norm_forward")
def visible_3_4():
    x = np.random.default_rng(0).standard_normal((2, 6, 5)).astype(np.float32)  # (N, C, L)
    check_group_norm(x, 3)  # groups of 2 consecutive channels
    check_group_norm(x, 1)  # one group: LayerNorm over (C, L), per-channel affine


def check_instance_norm(x, use_input_stats=True, affine=True, running=True, momentum=0.1,
                        eps=1e-5, seed=0):
    """Your y, x_hat, rstd and running statistics against torch's instance_norm computed
    exactly (float64, rounded to x's dtype), in value, shape and dtype, within the error
    model's tolerances (normkit.testing; y is one stage after x_hat); running statistics
    updated in place."""
    from normlib.instance_norm import instance_norm_forward

    dtype = x.dtype
    weight, bias, running_mean, running_var = channel_parameters(x, affine, running, seed)
    exact = float64(x, weight, bias, running_mean, running_var)
    t, torch_stats = exact[:3], exact[3:]
    expected_y = torch.nn.functional.instance_norm(t[0], *torch_stats, t[1], t[2],
                                                   use_input_stats, momentum, eps)
    case = (f"for x {x.shape} {dtype}, use_input_stats={use_input_stats}, affine={affine}, "
            f"running stats {'given' if running else 'None'}")
    # the running statistics are updated in place (call_updating: see normkit.testing)
    result = call_updating(instance_norm_forward, x, running_mean, running_var, weight, bias,
                           use_input_stats, momentum, eps, updates=(running_mean, running_var))
    assert isinstance(result, tuple) and len(result) == 3, "return (y, x_hat, rstd)"
    y, x_hat, rstd = result
    axes = tuple(range(2, x.ndim))
    tol = norm_tolerance(x, axes, eps, spread=True)  # rstd, running statistics
    assert_close(y, expected_y.numpy().astype(dtype), f"y {case}",
                 **norm_tolerance(x, axes, eps, depth=2))
    if use_input_stats:
        expected_x_hat, _, _, expected_rstd = torch_normalize(x, axes, eps)
        assert_close(x_hat, expected_x_hat, f"x_hat {case}", **norm_tolerance(x, axes, eps))
        assert_close(rstd, expected_rstd, f"rstd {case}", **tol)
    if running:  # the arrays passed in must now hold torch's statistics
        check_running(running_mean, running_var, torch_stats, case, tol)


@exercise("3.5", "instance_norm.instance_norm_forward")
def visible_3_5():
    x = np.random.default_rng(0).standard_normal((4, 3, 5)).astype(np.float32)  # (N, C, L)
    check_instance_norm(x)
    check_instance_norm(x, use_input_stats=False)


def check_rms_norm(x, normalized_shape, weight=None, eps=None):
    """Your y and rrms against torch's rms_norm computed exactly (float64, rounded to x's
    dtype; eps=None read as x's dtype's eps), in value, shape and dtype, within the error
    model's tolerances (normkit.testing: no cancellation, so the mean square's length
    alone; y is one stage after rrms)."""
    from normlib.rms_norm import rms_norm_forward

    e = np.finfo(x.dtype).eps if eps is None else eps
    t, w = float64(x, weight)
    expected_y = torch.nn.functional.rms_norm(t, normalized_shape, w, e)
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    expected_rrms = torch.rsqrt(t.pow(2).mean(dim=axes, keepdim=True) + e)
    n = np.prod(normalized_shape)
    result = rms_norm_forward(x, normalized_shape, weight, eps)
    assert isinstance(result, tuple) and len(result) == 2, "return (y, rrms)"
    case = (f"for x {x.shape} {x.dtype}, normalized_shape={normalized_shape}, eps={eps}, "
            f"weight {'None' if weight is None else 'given'}")
    centred = torch.nn.functional.layer_norm(t, normalized_shape, w, eps=e)  # a mistake's
    mistakes = {"the mean is subtracted: RMSNorm does not centre (LayerNorm does)":
                centred.numpy().astype(x.dtype)}
    assert_close(result[0], expected_y.numpy().astype(x.dtype), f"y {case}",
                 mistakes=mistakes, **tolerance(x.dtype, n, depth=2))
    assert_close(result[1], expected_rrms.numpy().astype(x.dtype), f"rrms {case}",
                 **tolerance(x.dtype, n))


@exercise("3.6", "rms_norm.rms_norm_forward")
def visible_3_6():
    rng = np.random.default_rng(0)
    x = (1 + rng.standard_normal((2, 3, 4))).astype(np.float32)  # offset 1: centring would show
    check_rms_norm(x, (4,))
    check_rms_norm(x, (3, 4), rng.standard_normal((3, 4)).astype(np.float32), eps=1e-5)


def check_rms_norm_backward(x, normalized_shape, weight=None, eps=None, seed=0):
    """Your dx, dweight against torch autograd's for rms_norm computed exactly (float64,
    rounded to x's dtype; eps=None read as x's dtype's eps) under a random upstream
    gradient, in value, shape and dtype, within the error model's tolerances for two stages
    (normkit.testing; dweight sums over the rows too). rrms comes from torch."""
    from normlib.rms_norm import rms_norm_backward

    grad_output = np.random.default_rng(seed).standard_normal(x.shape).astype(x.dtype)
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    e = np.finfo(x.dtype).eps if eps is None else eps
    t = torch.tensor(x, dtype=torch.float64)
    rrms = torch.rsqrt(t.pow(2).mean(dim=axes, keepdim=True) + e).numpy().astype(x.dtype)
    expected = torch_grads(
        lambda x, w: torch.nn.functional.rms_norm(x, normalized_shape, w, e),
        grad_output, x, weight)
    n = np.prod(normalized_shape)
    result = rms_norm_backward(grad_output, x, normalized_shape, rrms, weight)
    assert isinstance(result, tuple) and len(result) == 2, "return (dx, dweight)"
    case = (f"for x {x.shape} {x.dtype}, normalized_shape={normalized_shape}, "
            f"weight {'None' if weight is None else 'given'}")
    assert_close(result[0], expected[0], f"dx {case}", over=axes,
                 **tolerance(x.dtype, n, depth=2))
    if weight is None:
        assert result[1] is None, f"dweight must be None {case}"
    else:
        assert_close(result[1], expected[1], f"dweight {case}",
                     **tolerance(x.dtype, max(n, x.size // n), depth=2))


@exercise("3.7", "rms_norm.rms_norm_backward")
def visible_3_7():
    rng = np.random.default_rng(0)
    x = (1 + rng.standard_normal((2, 3, 4))).astype(np.float32)
    check_rms_norm_backward(x, (4,))
    check_rms_norm_backward(x, (4,), rng.standard_normal(4).astype(np.float32))


def check_bn_backward(x, training, affine=(True, True), seed=0, eps=1e-5):
    """Your dx, dweight, dbias against torch autograd's through F.batch_norm (computed
    exactly, float64, rounded to x's dtype) under a random upstream gradient, in value,
    shape and dtype; x_hat and rstd are the exact ones. Tolerances from the error model:
    two stages; the parameter gradients sum over every axis but 1."""
    from normlib.batch_norm import batch_norm_backward

    rng = np.random.default_rng(seed)
    c, axes = x.shape[1], (0, *range(2, x.ndim))
    stat_shape = (1, c) + (1,) * (x.ndim - 2)
    grad_output = rng.standard_normal(x.shape).astype(x.dtype)
    weight, bias = (rng.standard_normal(c).astype(x.dtype) if a else None for a in affine)
    running_mean, running_var = rng.standard_normal(c), rng.uniform(0.5, 2.0, c)
    xt, wt, bt = (None if a is None else torch.tensor(a, dtype=torch.float64,
                                                      requires_grad=True)
                  for a in (x, weight, bias))
    torch.nn.functional.batch_norm(xt, torch.tensor(running_mean), torch.tensor(running_var),
                                   wt, bt, training, 0.1, eps).backward(
        torch.tensor(grad_output, dtype=torch.float64))
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=axes, keepdims=True) if training else running_mean.reshape(stat_shape)
    var = x64.var(axis=axes, keepdims=True) if training else running_var.reshape(stat_shape)
    rstd = 1 / np.sqrt(var + eps)  # (1, C, 1..1), float64
    x_hat = ((x64 - mean) * rstd).astype(x.dtype)
    rstd = rstd.astype(x.dtype)
    untouched = guard_inputs(grad_output=grad_output, x_hat=x_hat, rstd=rstd)
    result = batch_norm_backward(grad_output, x_hat, rstd, weight, bias, training)
    assert isinstance(result, tuple) and len(result) == 3, "return (dx, dweight, dbias)"
    mode = "training" if training else "evaluation"
    case = f"for x {x.shape} {x.dtype}, {mode} mode, weight/bias given: {affine}"
    length = x.size // c  # the values of a channel
    tols = {"dx": norm_tolerance(x, axes, eps, depth=2),
            "dweight": norm_tolerance(x, axes, eps, depth=2, length=length),
            "dbias": tolerance(x.dtype, length)}
    g = grad_output if weight is None else grad_output * weight.reshape(stat_shape[1:])
    mistakes = {"dx": backward_mistakes(g, x, axes, eps)} if training else {}
    for name, actual, t in zip(("dx", "dweight", "dbias"), result, (xt, wt, bt)):
        if t is None:
            assert actual is None, f"{name} must be None {case}"
        else:
            assert_close(actual, t.grad.numpy().astype(x.dtype), f"{name} {case}",
                         over=axes if name == "dx" else None, mistakes=mistakes.get(name),
                         **tols[name])
    untouched(case)


@exercise("3.8", "batch_norm.batch_norm_backward")
def visible_3_8():
    x = 3 + 2 * np.random.default_rng(0).standard_normal((8, 3)).astype(np.float32)  # (N, C)
    check_bn_backward(x, training=True)
    check_bn_backward(x, training=False)
