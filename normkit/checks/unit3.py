"""Unit 3's checks: Exercises 3.1 (normalize_forward), 3.2 (normalize_backward), 3.3
(batch_norm_forward), 3.4 (group_norm_forward), 3.5 (instance_norm_forward), 3.6
(rms_norm_forward), 3.7 (rms_norm_backward) and 3.8 (batch_norm_backward).

Each check function compares your result with torch's computed exactly (float64, rounded to
x's dtype), in value, shape and dtype, within the error model's tolerances
(normkit.testing). Where your result equals what a classic mistake computes (the check
computes it too, exactly), the message names that mistake. Your function is imported when a
check runs, so it is always your file as it is now.
"""

import numpy as np
import torch

from normkit.checks import exercise
from normkit.testing import (
    CheckFailed,
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
from normlib._channels import per_channel

NOT_MEANS = ("dweight and dbias sum over every value of their channel (each value uses the "
             "weight and the bias), not their mean")
IGNORES_WEIGHT = ("dx ignores the weight: the upstream gradient reaches x_hat multiplied by "
                  "the weight")


def sorted_axes(x, axes):
    """axes as non-negative ints in increasing order (how a reduction's shape shows them)."""
    return tuple(sorted(int(a) % x.ndim for a in axes))


def rounded(found, dtype):
    """{cause: value} (float64 arrays) with each value rounded to dtype."""
    return {cause: np.asarray(value).astype(dtype) for cause, value in found.items()}


def check_normalize(x, axes, eps=1e-5):
    """Your mean, var, rstd and x_hat against torch's computed exactly (float64, rounded to
    x's dtype), in value, shape and dtype, within the error model's tolerances
    (normkit.testing): the mean's from the group size, the others' also from the condition
    of x (var and rstd as a sum of squared deviations). x must be left as it was."""
    from normlib.norm import normalize_forward

    expected = dict(zip(("x_hat", "mean", "var", "rstd"), torch_normalize(x, axes, eps)))
    untouched = guard_inputs(x=x)
    result = normalize_forward(x, axes, eps)
    assert isinstance(result, tuple) and len(result) == 4, "return (x_hat, mean, var, rstd)."
    case = f"for x {x.shape} {x.dtype}, axes={axes}, eps={eps}"
    spread = norm_tolerance(x, axes, eps, spread=True)
    tols = {"x_hat": norm_tolerance(x, axes, eps), "var": spread, "rstd": spread,
            "mean": tolerance(x.dtype, np.prod([x.shape[a] for a in axes]))}
    mistakes = stats_mistakes(x, axes, eps)  # {quantity: {likely cause: its value}}
    std = np.sqrt(x.astype(np.float64).var(axis=axes, keepdims=True))  # (1 on axes)
    mistakes["var"]["this is the std, not the variance"] = std.astype(x.dtype)
    reduced = (x.shape, sorted_axes(x, axes), f"the argument axes={axes}")
    for name in ("mean", "var", "rstd", "x_hat"):  # the statistics first: their shape shows
        actual = result[("x_hat", "mean", "var", "rstd").index(name)]
        assert_close(actual, expected[name], f"{name} {case}", mistakes=mistakes.get(name),
                     reduced=None if name == "x_hat" else reduced, **tols[name])
    untouched(case)


@exercise("3.1", "norm.normalize_forward")
def visible_3_1():
    x = np.random.default_rng(0).standard_normal((4, 3, 5)).astype(np.float32)  # (N, C, L)
    check_normalize(x, (0, 2))  # BatchNorm's axes: one group per channel
    check_normalize(x, (2,))  # InstanceNorm's: one group per sample and channel
    check_normalize(x, (1, 2))  # LayerNorm's: one group per sample
    check_normalize(1e-3 * x, (2,))  # variances below eps: where eps goes shows (Unit 1)
    check_normalize(1000 + x, (1, 2))  # an offset of 1000: E[x^2] - E[x]^2 cancels
    # float64 (its precision, to the last digits), with an eps of its own
    check_normalize(np.random.default_rng(1).standard_normal((3, 2, 4)), (0, 2), eps=0.5)


def through_statistics(grad_x_hat, x_hat, rstd, axes):
    """What the upstream gradient grad_x_hat becomes at x, in float64, where x_hat and rstd
    are the ones given (rounded to their dtype) and the statistics' paths run over `axes`:
    rstd times the backward of torch's LayerNorm node (torch.ops.aten.
    native_layer_norm_backward, the kernel autograd runs) over axes, at x_hat with its saved
    mean 0 and rstd 1. Over other axes than x_hat's own: what a backward that reduces
    over the wrong axes gives (autograd over those axes would normalize x anew)."""
    g, h = float64(grad_x_hat, x_hat)  # (*x.shape)
    axes = sorted_axes(x_hat, axes)
    order = [a for a in range(h.ndim) if a not in axes] + list(axes)  # the group's axes last
    n = int(np.prod([h.shape[a] for a in axes]))  # the group's size
    rows = h.permute(order).reshape(-1, n)  # (groups, n)
    saved = torch.zeros(rows.shape[0], 1, dtype=torch.float64)  # (groups, 1)
    dx = torch.ops.aten.native_layer_norm_backward(
        g.permute(order).reshape(-1, n), rows, [n], saved, saved + 1, None, None,
        [True, False, False])[0]  # (groups, n)
    dx = dx.reshape([h.shape[a] for a in order]).permute(np.argsort(order).tolist())
    return np.asarray(rstd, dtype=np.float64) * dx.numpy()  # (*x.shape)


def normalize_backward_mistakes(grad_x_hat, x_hat, rstd, x, axes, eps=1e-5):
    """{likely cause: the dx that mistake gives} for normalize_backward: without the mean's
    or the variance's term (backward_mistakes), its means over every axis, sums for means,
    without the factor rstd; from torch autograd (float64), rounded to x's dtype."""
    found = backward_mistakes(grad_x_hat, x, axes, eps)
    every = tuple(range(x.ndim))
    if sorted_axes(x, axes) != every:
        found.update(rounded({f"the means were taken over every axis of x, not over the "
                              f"group's axes {axes}": through_statistics(
                                  grad_x_hat, x_hat, rstd, every)}, x.dtype))
    n = x.size // rstd.size  # the group's size
    x64, g = x.astype(np.float64), grad_x_hat.astype(np.float64)  # (*x.shape)
    exact = torch_grads(lambda t: normalized(t, axes, eps), g, x64)[0]  # (*x.shape)
    direct = torch_grads(lambda t: normalized(t, axes, eps, cut=True), g, x64)[0]  # rstd * g
    return {**found, **rounded({
        f"sums where the backward takes means: each reduction over a group divides by its "
        f"size N = {n}": direct + n * (exact - direct),
        "a scale factor is missing: dx lacks the factor rstd": exact / rstd}, x.dtype)}


def normalized(t, axes, eps, cut=False):
    """x_hat of the float64 tensor t over axes; cut: with the mean and the variance
    detached (only the direct path left, as torch_layer_norm_nodes' cut)."""
    mean = t.mean(dim=axes, keepdim=True)  # (1 on axes)
    var = t.var(dim=axes, unbiased=False, keepdim=True)  # (1 on axes)
    if cut:
        mean, var = mean.detach(), var.detach()
    return (t - mean) / (var + eps).sqrt()  # (*t.shape)


def check_normalize_backward(x, axes, eps=1e-5, seed=0):
    """Your dx against torch autograd's for x_hat = normalize(x), computed exactly (float64,
    rounded to x's dtype) under a random upstream gradient, in value, shape and dtype,
    within the error model's tolerance for two stages (normkit.testing). x_hat and rstd
    come from torch."""
    from normlib.norm import normalize_backward

    grad_x_hat = np.random.default_rng(seed).standard_normal(x.shape).astype(x.dtype)
    x_hat, _, _, rstd = torch_normalize(x, axes, eps)

    (expected,) = torch_grads(lambda t: normalized(t, axes, eps), grad_x_hat, x)
    dx = normalize_backward(grad_x_hat, x_hat, rstd, axes)
    assert_close(dx, expected, f"dx for x {x.shape} {x.dtype}, axes={axes}", over=axes,
                 mistakes=normalize_backward_mistakes(grad_x_hat, x_hat, rstd, x, axes, eps),
                 **norm_tolerance(x, axes, eps, depth=2))


@exercise("3.2", "norm.normalize_backward")
def visible_3_2():
    x = np.random.default_rng(0).standard_normal((4, 3, 5)).astype(np.float32)  # (N, C, L)
    # seeds other than x's: an upstream gradient equal to x would give dx = 0 (x_hat does
    # not change when x is scaled)
    check_normalize_backward(x, (0, 2), seed=1)
    check_normalize_backward(x, (2,), seed=2)
    check_normalize_backward(x, (1, 2), seed=3)
    # float64: its precision, to the last digits
    x64 = np.random.default_rng(1).standard_normal((3, 2, 4))  # (N, C, L)
    check_normalize_backward(x64, (0, 2), seed=4)


def float64(*arrays):
    """Each array as a float64 tensor (the exact reference's input), None as None."""
    return [None if a is None else torch.tensor(a, dtype=torch.float64) for a in arrays]


def running_mistakes(old, mean, var, n, momentum, dtype):
    """{"running_mean": {cause: value}, "running_var": {...}}: what the update of the running
    statistics old = (mean, var) (C,), float64, gives under its classic mistakes, from the
    batch's mean and biased variance (C,) over n values (rounded to dtype): not updated in
    place, momentum's direction reversed, running_var from the biased variance."""
    def update(old, new, weight):
        return (1 - weight) * old + weight * new  # (C,)

    reverse = ("momentum's direction is reversed: in torch, momentum weighs the batch's "
               "statistic, new = (1 - momentum) * old + momentum * batch (update_running)")
    unbiased = var * n / (n - 1) if n > 1 else var  # (C,)
    found = {name: {f"{name} still holds the values passed in: the running statistics are "
                    "updated in place, in the caller's arrays (assigning to the name alone "
                    "makes a new array)": value, reverse: update(value, new, 1 - momentum)}
             for name, value, new in zip(("running_mean", "running_var"), old,
                                         (mean, unbiased))}
    found["running_var"][f"running_var is updated with the biased variance: torch keeps the "
                         f"unbiased one, n / (n - 1) times it (n = {n} values per "
                         f"statistic)"] = update(old[1], var, momentum)
    return {name: rounded(causes, dtype) for name, causes in found.items()}


def check_running(running_mean, running_var, torch_stats, case, tol, mistakes=None):
    """The running statistics (C,), updated in place, against torch's (float64 tensors,
    rounded to their dtype). mistakes: running_mistakes()."""
    for name, actual, wanted in zip(("running_mean", "running_var"),
                                    (running_mean, running_var), torch_stats):
        assert_close(actual, wanted.numpy().astype(actual.dtype), f"{name} after {case}",
                     mistakes=(mistakes or {}).get(name), **tol)


def assert_not_updated(running_mean, running_var, old, case, mode):
    """The running statistics still hold old (float64 (C,)) after a call in `mode`
    ("evaluation mode (training=False)"), where torch does not update them."""
    for name, actual, saved in zip(("running_mean", "running_var"), (running_mean, running_var),
                                   old):
        if not np.array_equal(actual, saved.astype(actual.dtype)):
            raise CheckFailed(f"{name} was changed {case}.\n  Likely cause: the running "
                              f"statistics were updated in {mode}: only a forward that "
                              "normalizes with the input's statistics updates them.")


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


def running_normalize(x, old, eps):
    """(x_hat, rstd (1, C, 1..1)) of x normalized with running statistics old = (mean,
    var) (C,), in float64, rounded to x's dtype: evaluation mode."""
    rstd = per_channel(1 / np.sqrt(old[1] + eps), x.ndim)  # (1, C, 1..1)
    x_hat = (x.astype(np.float64) - per_channel(old[0], x.ndim)) * rstd  # (N, C, *)
    return x_hat.astype(x.dtype), rstd.astype(x.dtype)


def forward_tolerances(x, axes, eps):
    """{"x_hat", "rstd", "y"}: the error model's tolerances of a normalization of x over
    axes (rstd a sum of squared deviations; y one stage after x_hat)."""
    return {"x_hat": norm_tolerance(x, axes, eps), "rstd": norm_tolerance(x, axes, eps,
                                                                          spread=True),
            "y": norm_tolerance(x, axes, eps, depth=2)}


def check_outputs(result, expected, case, tols, mistakes, reduced=None):
    """result = your (y, x_hat, rstd) against expected {"y", "x_hat", "rstd"}: x_hat first,
    then rstd (reduced: assert_close's, for its shape), then y (the affine).
    mistakes: {quantity: {likely cause: its value}}."""
    assert isinstance(result, tuple) and len(result) == 3, "return (y, x_hat, rstd)."
    for name, actual in zip(("x_hat", "rstd", "y"), (result[1], result[2], result[0])):
        assert_close(actual, expected[name], f"{name} {case}", mistakes=mistakes.get(name),
                     reduced=reduced if name == "rstd" else None, **tols[name])


def batch_stats_mistakes(x, axes, eps, other_axes=()):
    """stats_mistakes(x, axes, eps) for x_hat and rstd, and for x_hat the normalization
    over each of other_axes ({axes: its cause})."""
    found = stats_mistakes(x, axes, eps)
    for wrong, cause in dict(other_axes).items():
        found["x_hat"][cause] = torch_normalize(x, wrong, eps)[0]
    return found


def check_batch_norm(x, training, affine=True, running=True, momentum=0.1, eps=1e-5, seed=0):
    """Your x_hat, rstd, y and running statistics against torch's batch_norm computed
    exactly (float64, rounded to x's dtype), in value, shape and dtype, within the error
    model's tolerances (normkit.testing; y is one stage after x_hat). The running statistics
    must be updated in place in training, and left alone in evaluation."""
    from normlib.batch_norm import batch_norm_forward

    c, dtype = x.shape[1], x.dtype
    weight, bias, running_mean, running_var = channel_parameters(x, affine, running, seed)
    exact = float64(x, weight, bias, running_mean, running_var)
    t, torch_stats = exact[:3], exact[3:]
    old = [None if s is None else s.numpy().copy() for s in torch_stats]  # (C,) before
    expected_y = torch.nn.functional.batch_norm(t[0], *torch_stats, t[1], t[2], training,
                                                momentum, eps).numpy().astype(dtype)
    case = (f"for x {x.shape} {dtype}, training={training}, momentum={momentum}, "
            f"affine={affine}, running stats {'given' if running else 'None'}")
    # the running statistics are updated in place (call_updating: see normkit.testing)
    result = call_updating(batch_norm_forward, x, running_mean, running_var, weight, bias,
                           training, momentum, eps, updates=(running_mean, running_var))
    axes = (0, *range(2, x.ndim))
    batch = torch_normalize(x, axes, eps)  # x_hat, mean, var, rstd
    if running and not training:
        assert_not_updated(running_mean, running_var, old, case,
                           "evaluation mode (training=False)")
    if training:
        expected = {"x_hat": batch[0], "rstd": batch[3]}
        alone = {(0,): "the statistics were taken over the batch axis alone: BatchNorm's are "
                       f"over every axis but the channels, axes {axes}"} if x.ndim > 2 else {}
        mistakes = batch_stats_mistakes(x, axes, eps, alone)
    else:
        expected = dict(zip(("x_hat", "rstd"), running_normalize(x, old, eps)))
        stats = ("in evaluation mode (training=False) BatchNorm normalizes with running_mean "
                 "and running_var, not with the batch's statistics")
        mistakes = {"x_hat": {stats: batch[0]}, "rstd": {stats: batch[3]}}
    check_outputs(result, {**expected, "y": expected_y}, case, forward_tolerances(x, axes, eps),
                  mistakes, reduced=(x.shape, axes, "BatchNorm (a statistic per channel)"))
    if running:  # the arrays passed in must now hold torch's updated statistics
        x64 = x.astype(np.float64)
        found = running_mistakes(old, x64.mean(axis=axes), x64.var(axis=axes), x.size // c,
                                 momentum, dtype)
        check_running(running_mean, running_var, torch_stats, case,
                      norm_tolerance(x, axes, eps, spread=True), found)


@exercise("3.3", "batch_norm.batch_norm_forward")
def visible_3_3():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 3)).astype(np.float32)  # (N, C)
    check_batch_norm(x, training=True)
    check_batch_norm(x, training=False)
    # a channel's statistics run over the batch and every position
    check_batch_norm(rng.standard_normal((4, 3, 5)).astype(np.float32), training=True)
    check_batch_norm(1e-3 * x, training=True)  # variances below eps: where eps goes shows
    # an offset of 1000 (E[x^2] - E[x]^2 cancels), no weight, bias or running statistics
    check_batch_norm(1000 + x, training=True, affine=False, running=False)
    # float64 (its precision, to the last digits), a momentum and an eps of its own
    check_batch_norm(rng.standard_normal((6, 4)), training=True, momentum=0.3, eps=0.5)


def group_norm_mistakes(x, num_groups, eps):
    """{"x_hat": {cause: value}, "rstd": {...}} for GroupNorm of x (N, C, *) under its
    classic mistakes, exact (float64), rounded to x's dtype: stats_mistakes of the grouped
    view; channels grouped g, g + G, ... (x_hat and rstd); num_groups taken as the size of
    a group, each position normalized alone (x_hat)."""
    n, c = x.shape[:2]
    size = c // num_groups  # channels per group
    stats = stats_mistakes(x.reshape(n, num_groups, -1), (2,), eps)
    found = {"x_hat": {cause: v.reshape(x.shape) for cause, v in stats["x_hat"].items()},
             "rstd": stats["rstd"]}
    strided = x.reshape(n, size, num_groups, -1).swapaxes(1, 2)  # (N, G, C/G, spatial)
    x_hat, _, _, rstd = torch_normalize(strided.reshape(n, num_groups, -1), (2,), eps)
    cause = (f"group g holds channels g, g + {num_groups}, g + {2 * num_groups}, ...: "
             f"torch's groups are {size} consecutive channels (group 0 is channels "
             f"0..{size - 1})")
    found["x_hat"][cause] = x_hat.reshape(strided.shape).swapaxes(1, 2).reshape(x.shape)
    found["rstd"][cause] = rstd
    if size != num_groups:
        found["x_hat"][f"num_groups is the number of groups ({num_groups} groups of {size} "
                       f"channels), not the size of a group"] = torch_normalize(
            x.reshape(n, size, -1), (2,), eps)[0].reshape(x.shape)
    if x.ndim > 2:
        per_position = x.reshape(n, num_groups, size, -1)  # (N, G, C/G, spatial)
        found["x_hat"]["each spatial position was normalized alone: a group's statistics run "
                       "over its channels and every position together"] = torch_normalize(
            per_position, (2,), eps)[0].reshape(x.shape)
    return found


def per_group_affine(x_hat, num_groups, weight, bias):
    """{likely cause: y} for an affine with one weight and bias per group (the first
    num_groups entries), in float64 from x_hat, rounded to its dtype; {} without one."""
    if weight is None or bias is None:
        return {}
    n, c = x_hat.shape[:2]
    groups = x_hat.astype(np.float64).reshape(n, num_groups, -1)  # (N, G, C/G * spatial)
    y = groups * weight[:num_groups, None] + bias[:num_groups, None]  # (N, G, C/G * spatial)
    return rounded({f"the affine is per channel: weight and bias hold one value per channel "
                    f"(C = {c}), not one per group": y.reshape(x_hat.shape)}, x_hat.dtype)


def check_group_norm(x, num_groups, affine=True, eps=1e-5, seed=0):
    """Your x_hat, rstd, y against torch's group_norm computed exactly (float64, rounded to
    x's dtype), in value, shape and dtype, within the error model's tolerances
    (normkit.testing; y is one stage after x_hat)."""
    from normlib.group_norm import group_norm_forward

    dtype = x.dtype
    weight, bias, _, _ = channel_parameters(x, affine, False, seed)
    t = float64(x, weight, bias)
    expected_y = torch.nn.functional.group_norm(t[0], num_groups, t[1], t[2], eps).numpy()
    groups = x.reshape(x.shape[0], num_groups, -1)  # (N, G, C/G * spatial)
    expected_x_hat, _, _, expected_rstd = torch_normalize(groups, (2,), eps)
    result = group_norm_forward(x, num_groups, weight, bias, eps)
    case = f"for x {x.shape} {dtype}, num_groups={num_groups}, affine={affine}"
    mistakes = group_norm_mistakes(x, num_groups, eps)
    mistakes["y"] = per_group_affine(expected_x_hat.reshape(x.shape), num_groups, weight, bias)
    check_outputs(result, {"y": expected_y.astype(dtype), "x_hat": expected_x_hat.reshape(
        x.shape), "rstd": expected_rstd}, case, forward_tolerances(groups, (2,), eps), mistakes)


@exercise("3.4", "group_norm.group_norm_forward")
def visible_3_4():
    x = np.random.default_rng(0).standard_normal((2, 6, 5)).astype(np.float32)  # (N, C, L)
    check_group_norm(x, 3)  # groups of 2 consecutive channels
    check_group_norm(x, 1)  # one group: LayerNorm over (C, L), per-channel affine
    check_group_norm(1e-3 * x, 2)  # variances below eps: where eps goes shows
    check_group_norm(1000 + x, 3)  # an offset of 1000: E[x^2] - E[x]^2 cancels
    # float64 (its precision, to the last digits), no weight or bias, an eps of its own
    x64 = np.random.default_rng(1).standard_normal((2, 4, 3))  # (N, C, L)
    check_group_norm(x64, 2, affine=False, eps=0.5)


def check_instance_norm(x, use_input_stats=True, affine=True, running=True, momentum=0.1,
                        eps=1e-5, seed=0):
    """Your x_hat, rstd, y and running statistics against torch's instance_norm computed
    exactly (float64, rounded to x's dtype), in value, shape and dtype, within the error
    model's tolerances (normkit.testing; y is one stage after x_hat); running statistics
    updated in place with the input's statistics, left alone without."""
    from normlib.instance_norm import instance_norm_forward

    c, dtype = x.shape[1], x.dtype
    weight, bias, running_mean, running_var = channel_parameters(x, affine, running, seed)
    exact = float64(x, weight, bias, running_mean, running_var)
    t, torch_stats = exact[:3], exact[3:]
    old = [None if s is None else s.numpy().copy() for s in torch_stats]  # (C,) before
    expected_y = torch.nn.functional.instance_norm(t[0], *torch_stats, t[1], t[2],
                                                   use_input_stats, momentum, eps)
    case = (f"for x {x.shape} {dtype}, use_input_stats={use_input_stats}, affine={affine}, "
            f"running stats {'given' if running else 'None'}")
    # the running statistics are updated in place (call_updating: see normkit.testing)
    result = call_updating(instance_norm_forward, x, running_mean, running_var, weight, bias,
                           use_input_stats, momentum, eps, updates=(running_mean, running_var))
    axes = tuple(range(2, x.ndim))
    own = torch_normalize(x, axes, eps)  # x_hat, mean, var, rstd of each instance
    if running and not use_input_stats:
        assert_not_updated(running_mean, running_var, old, case, "use_input_stats=False")
    if use_input_stats:
        expected = {"x_hat": own[0], "rstd": own[3]}
        mistakes = batch_stats_mistakes(x, axes, eps, {(0, *axes): (
            "the statistics include the batch axis (that is BatchNorm): InstanceNorm "
            f"normalizes each sample and channel over its positions alone, axes {axes}")})
    else:
        expected = dict(zip(("x_hat", "rstd"), running_normalize(x, old, eps)))
        stats = ("use_input_stats=False normalizes with running_mean and running_var, not "
                 "with the input's statistics")
        mistakes = {"x_hat": {stats: own[0]}, "rstd": {stats: own[3]}}
    reduced = (x.shape, axes, "InstanceNorm (a statistic per sample and channel)")
    check_outputs(result, {**expected, "y": expected_y.numpy().astype(dtype)}, case,
                  forward_tolerances(x, axes, eps), mistakes,
                  reduced=reduced if use_input_stats else None)
    if running:  # the arrays passed in must now hold torch's statistics
        x64 = x.astype(np.float64)
        n = x.size // (x.shape[0] * c)  # positions per instance
        found = running_mistakes(old, x64.mean(axis=(0, *axes)),
                                 x64.var(axis=axes).mean(axis=0), n, momentum, dtype)
        found["running_var"].update(rounded({
            "running_var is the mean over the batch of each instance's unbiased variance, not "
            "the variance of the whole batch (BatchNorm's)": (1 - momentum) * old[1]
            + momentum * x64.var(axis=(0, *axes), ddof=1)}, dtype))
        check_running(running_mean, running_var, torch_stats, case,
                      norm_tolerance(x, axes, eps, spread=True), found)


@exercise("3.5", "instance_norm.instance_norm_forward")
def visible_3_5():
    x = np.random.default_rng(0).standard_normal((4, 3, 5)).astype(np.float32)  # (N, C, L)
    check_instance_norm(x)
    check_instance_norm(x, use_input_stats=False)
    check_instance_norm(1e-3 * x)  # variances below eps: where eps goes shows
    # an offset of 1000 (E[x^2] - E[x]^2 cancels), no weight, bias or running statistics
    check_instance_norm(1000 + x, affine=False, running=False)
    # float64 (its precision, to the last digits), a momentum and an eps of its own
    x64 = np.random.default_rng(1).standard_normal((3, 2, 4))  # (N, C, L)
    check_instance_norm(x64, momentum=0.3, eps=0.5)


CENTRED = "the mean is subtracted: RMSNorm does not centre (LayerNorm does)"


def rms_norm_mistakes(x, normalized_shape, weight, eps):
    """{"y": {cause: value}, "rrms": {...}} for RMSNorm of x under its classic mistakes,
    exact (float64), rounded to x's dtype: centred, eps outside the root, eps=None read as
    1e-5."""
    e = np.finfo(x.dtype).eps if eps is None else eps
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))  # the dims of S
    x64 = x.astype(np.float64)  # (*B, *S)
    centred = x64 - x64.mean(axis=axes, keepdims=True)  # (*B, *S)
    ms = (x64 * x64).mean(axis=axes, keepdims=True)  # (*B, 1..1)
    rrms = {CENTRED: 1 / np.sqrt((centred * centred).mean(axis=axes, keepdims=True) + e),
            "eps is added to the root mean square; torch's contract, which this course's kernels "
            "follow, adds it to the mean square, under the square root": 1 / (np.sqrt(ms) + e)}
    if eps is None:
        rrms[f"eps=None means the machine epsilon of x's dtype (np.finfo(x.dtype).eps = "
             f"{e:.3g}), as in torch, not 1e-5"] = 1 / np.sqrt(ms + 1e-5)
    w = 1.0 if weight is None else weight.astype(np.float64)  # (*S)
    y = {cause: (centred if cause == CENTRED else x64) * r * w for cause, r in rrms.items()}
    return {"y": rounded(y, x.dtype), "rrms": rounded(rrms, x.dtype)}


def shifted(actual, expected):
    """{an observation: expected shifted by actual's mean error} where actual is an array of
    expected's shape with finite values: it matches where every value is off by the same
    constant c, else {}. (Built from your own output, it names no mistake: it only says
    what the error is.)"""
    if not isinstance(actual, np.ndarray) or actual.shape != expected.shape:
        return {}
    shift = np.mean(actual.astype(np.float64) - expected)  # () the mean error
    if not np.isfinite(shift):  # (NaN or inf: a shift says nothing)
        return {}
    return rounded({f"every value is off by the same c = {shift:.4g}: something is added "
                    "after the weight": expected + shift}, expected.dtype)  # (*x.shape)


def check_rms_norm(x, normalized_shape, weight=None, eps=None):
    """Your rrms and y against torch's rms_norm computed exactly (float64, rounded to x's
    dtype; eps=None read as x's dtype's eps), in value, shape and dtype, within the error
    model's tolerances (normkit.testing: no cancellation, so the mean square's length
    alone; y is one stage after rrms)."""
    from normlib.rms_norm import rms_norm_forward

    e = np.finfo(x.dtype).eps if eps is None else eps
    t, w = float64(x, weight)
    expected_y = torch.nn.functional.rms_norm(t, normalized_shape, w, e)
    expected_y = expected_y.numpy().astype(x.dtype)
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    expected_rrms = torch.rsqrt(t.pow(2).mean(dim=axes, keepdim=True) + e)
    n = np.prod(normalized_shape)
    result = rms_norm_forward(x, normalized_shape, weight, eps)
    assert isinstance(result, tuple) and len(result) == 2, "return (y, rrms)."
    case = (f"for x {x.shape} {x.dtype}, normalized_shape={normalized_shape}, eps={eps}, "
            f"weight {'None' if weight is None else 'given'}")
    mistakes = rms_norm_mistakes(x, normalized_shape, weight, eps)
    assert_close(result[1], expected_rrms.numpy().astype(x.dtype), f"rrms {case}",
                 mistakes=mistakes["rrms"], **tolerance(x.dtype, n),
                 reduced=(x.shape, axes, f"normalized_shape={tuple(normalized_shape)}"))
    assert_close(result[0], expected_y, f"y {case}", **tolerance(x.dtype, n, depth=2),
                 mistakes={**mistakes["y"], **shifted(result[0], expected_y)})


@exercise("3.6", "rms_norm.rms_norm_forward")
def visible_3_6():
    rng = np.random.default_rng(0)
    x = (1 + rng.standard_normal((2, 3, 4))).astype(np.float32)  # offset 1: centring would show
    check_rms_norm(x, (4,))
    check_rms_norm(x, (3, 4), rng.standard_normal((3, 4)).astype(np.float32), eps=1e-5)
    small = (1e-3 * rng.standard_normal((4, 8))).astype(np.float32)  # mean square ~1e-6
    check_rms_norm(small, (8,), eps=1e-5)  # near eps: where eps goes shows
    check_rms_norm(small, (8,))  # eps=None: float32's eps, 1.2e-7, far below it
    check_rms_norm(rng.standard_normal((3, 4)), (4,), rng.standard_normal(4))  # float64


MEAN_TERM_KEPT = ("LayerNorm's mean term was kept: RMSNorm subtracts no mean in its forward, "
                  "so no path of its backward runs through one")


def rms_backward_mistakes(grad_output, x, normalized_shape, weight, e):
    """{"dx": {cause: value}, "dweight": {...}} for RMSNorm's backward under its classic
    mistakes, from torch autograd (float64), rounded to x's dtype: without the path through
    rrms (detached), with LayerNorm's mean term, dx without the weight, dweight from x."""
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))  # the dims of S
    lead = tuple(range(x.ndim - len(normalized_shape)))  # the dims of B
    x64, go = x.astype(np.float64), grad_output.astype(np.float64)  # (*B, *S)

    def rms_norm(t, w, cut=False):  # (*B, *S)
        rrms = torch.rsqrt(t.pow(2).mean(dim=axes, keepdim=True) + e)  # (*B, 1..1)
        y = t * (rrms.detach() if cut else rrms)  # (*B, *S)
        return y if w is None else y * w

    exact, direct = (torch_grads(lambda t, w, cut=cut: rms_norm(t, w, cut), go, x64, weight)[0]
                     for cut in (False, True))  # (*B, *S): dx, and rrms * g alone
    g = go if weight is None else go * weight  # (*B, *S), dL/d(x * rrms)
    rrms = 1 / np.sqrt((x64 * x64).mean(axis=axes, keepdims=True) + e)  # (*B, 1..1)
    found = {"dx": {"the path through rrms is missing: rrms depends on x too (through the "
                    "mean square)": direct,
                    MEAN_TERM_KEPT: exact - rrms * g.mean(axis=axes, keepdims=True)},
             "dweight": {}}
    if weight is not None:
        found["dx"][IGNORES_WEIGHT] = torch_grads(
            lambda x: torch.nn.functional.rms_norm(x, normalized_shape, None, e),
            grad_output, x)[0]
        found["dweight"]["dweight multiplies the upstream gradient by x, where y scales the "
                         "normalized x * rrms"] = (go * x64).sum(axis=lead)
    return {name: rounded(causes, x.dtype) for name, causes in found.items()}


def check_rms_norm_backward(x, normalized_shape, weight=None, eps=None, seed=0):
    """Your dx, dweight against torch autograd's for rms_norm computed exactly (float64,
    rounded to x's dtype; eps=None read as x's dtype's eps) under a random upstream
    gradient, in value, shape and dtype, within the error model's tolerances for two stages
    (normkit.testing; dweight sums over the rows too). rrms comes from torch."""
    from normlib.rms_norm import rms_norm_backward

    grad_output = np.random.default_rng(seed).standard_normal(x.shape).astype(x.dtype)
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    lead = tuple(range(x.ndim - len(normalized_shape)))
    e = np.finfo(x.dtype).eps if eps is None else eps
    t = torch.tensor(x, dtype=torch.float64)
    rrms = torch.rsqrt(t.pow(2).mean(dim=axes, keepdim=True) + e).numpy().astype(x.dtype)
    expected = torch_grads(
        lambda x, w: torch.nn.functional.rms_norm(x, normalized_shape, w, e),
        grad_output, x, weight)
    n = np.prod(normalized_shape)
    result = rms_norm_backward(grad_output, x, normalized_shape, rrms, weight)
    assert isinstance(result, tuple) and len(result) == 2, "return (dx, dweight)."
    case = (f"for x {x.shape} {x.dtype}, normalized_shape={normalized_shape}, "
            f"weight {'None' if weight is None else 'given'}")
    mistakes = rms_backward_mistakes(grad_output, x, normalized_shape, weight, e)
    assert_close(result[0], expected[0], f"dx {case}", over=axes, mistakes=mistakes["dx"],
                 **tolerance(x.dtype, n, depth=2))
    if weight is None:
        assert result[1] is None, f"dweight must be None {case}."
    else:
        assert_close(result[1], expected[1], f"dweight {case}", mistakes=mistakes["dweight"],
                     reduced=(x.shape, lead, "the leading dims (every axis before "
                              "normalized_shape)", False),
                     **tolerance(x.dtype, max(n, x.size // n), depth=2))


@exercise("3.7", "rms_norm.rms_norm_backward")
def visible_3_7():
    rng = np.random.default_rng(0)
    x = (1 + rng.standard_normal((2, 3, 4))).astype(np.float32)
    check_rms_norm_backward(x, (4,), seed=1)  # (an upstream gradient other than x - 1)
    check_rms_norm_backward(x, (4,), rng.standard_normal(4).astype(np.float32), seed=2)
    # float64 (its precision, to the last digits), a 2-D normalized_shape
    check_rms_norm_backward(rng.standard_normal((2, 3, 4)), (3, 4),
                            rng.standard_normal((3, 4)), seed=3)


def bn_backward_mistakes(grad_output, x_hat, rstd, weight, x, training, eps=1e-5):
    """{"dx": {cause: value}, "dweight": {...}, "dbias": {...}} for BatchNorm's backward
    under its classic mistakes, exact (float64, from the x_hat and rstd given), rounded to
    x's dtype: a term missing, means over other axes, the batch's terms in evaluation, dx
    without the weight; parameter gradients averaged, dweight from the weighted gradient."""
    axes = (0, *range(2, x.ndim))  # a channel's values
    go = grad_output.astype(np.float64)  # (N, C, *)
    w = 1.0 if weight is None else per_channel(weight.astype(np.float64), x.ndim)
    g = go * w  # (N, C, *), dL/dx_hat
    dx = {}
    if training:
        dx.update(backward_mistakes(g, x, axes, eps))
        if x.ndim > 2:
            dx["the means were taken over the batch axis alone: a channel's statistics run "
               f"over the batch and every position, axes {axes}"] = through_statistics(
                g, x_hat, rstd, (0,))
        dx["the means were taken over the channels (LayerNorm's group): BatchNorm's run over "
           f"every axis but the channels, axes {axes}"] = through_statistics(
            g, x_hat, rstd, tuple(range(1, x.ndim)))
        if weight is not None:
            dx[IGNORES_WEIGHT] = through_statistics(go, x_hat, rstd, axes)
    else:  # torch's training-mode backward, with the running statistics as the saved ones
        dx["in evaluation mode the running statistics are constants: dx has no terms "
           "through the batch's mean and variance"] = through_statistics(g, x_hat, rstd, axes)
        if weight is not None:
            dx[IGNORES_WEIGHT] = go * rstd  # (N, C, *)
    xh = x_hat.astype(np.float64)  # (N, C, *)
    found = {"dx": dx, "dweight": {NOT_MEANS: (go * xh).mean(axis=axes)},
             "dbias": {NOT_MEANS: go.mean(axis=axes)}}
    if weight is not None:
        found["dweight"]["dweight uses the upstream gradient already multiplied by the "
                         "weight: the weight's own gradient does not contain it"] = (
            g * xh).sum(axis=axes)
    return {name: rounded(causes, x.dtype) for name, causes in found.items()}


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
    assert isinstance(result, tuple) and len(result) == 3, "return (dx, dweight, dbias)."
    mode = "training" if training else "evaluation"
    case = f"for x {x.shape} {x.dtype}, {mode} mode, weight/bias given: {affine}"
    length = x.size // c  # the values of a channel
    tols = {"dx": norm_tolerance(x, axes, eps, depth=2),
            "dweight": norm_tolerance(x, axes, eps, depth=2, length=length),
            "dbias": tolerance(x.dtype, length)}
    mistakes = bn_backward_mistakes(grad_output, x_hat, rstd, weight, x, training, eps)
    channels = (x.shape, axes, "a channel's values (every axis but 1)", False)
    for name, actual, t in zip(("dx", "dweight", "dbias"), result, (xt, wt, bt)):
        if t is None:
            assert actual is None, f"{name} must be None {case}."
        else:
            assert_close(actual, t.grad.numpy().astype(x.dtype), f"{name} {case}",
                         over=axes if name == "dx" else None, mistakes=mistakes[name],
                         reduced=None if name == "dx" else channels, **tols[name])
    untouched(case)


@exercise("3.8", "batch_norm.batch_norm_backward")
def visible_3_8():
    rng = np.random.default_rng(0)
    x = 3 + 2 * rng.standard_normal((8, 3)).astype(np.float32)  # (N, C)
    # seeds other than x's: an upstream gradient proportional to x_hat gives dx = 0
    check_bn_backward(x, training=True, seed=1)
    check_bn_backward(x, training=False, seed=2)
    # a channel's values: the batch and every position
    x = 3 + 2 * rng.standard_normal((4, 3, 5)).astype(np.float32)  # (N, C, L)
    check_bn_backward(x, training=True, seed=3)
    # float64 (its precision, to the last digits), no weight or bias
    x64 = rng.standard_normal((6, 2, 3))  # (N, C, L)
    check_bn_backward(x64, training=True, affine=(False, False), seed=4)
