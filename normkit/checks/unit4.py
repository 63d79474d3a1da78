"""Unit 4's checks: Exercises 4.1 (mlp_forward) and 4.2 (mlp_backward), the network trained
by hand (normlib/mlp.py).

Each check builds the network's parameters (normkit.network.init_mlp, with every gamma,
beta, bias and running statistic moved away from its initial value, so that a misplaced
one shows), runs your function, and compares with the same network in torch, computed
exactly in float64 (normkit.network.torch_mlp, torch_grads: autograd under a random
upstream gradient), in value, shape and dtype, within the error model's tolerance for the
network's depth (network_tolerance). A wrong result is matched against what each classic
mistake computes (the network as that mistake wires it, in torch), to name its likely
cause. Your functions are imported when a check runs, so they are always your file as it
is now. The hidden checks add other widths, depths, batch sizes, float32 and a short
training run (check_training).
"""

import numpy as np

from normkit.checks import exercise
from normkit.network import (
    copy_params,
    init_mlp,
    running,
    torch_grads,
    torch_mlp,
    train_by_hand,
)
from normkit.testing import (
    CheckFailed,
    assert_close,
    call_updating,
    close,
    condition,
    tolerance,
)

FORWARD_CAUSES = {  # normkit.network's mistake: what it is, as the message names it
    "relu before the norm": "the ReLU comes before the norm: each hidden layer is linear, "
                            "then norm, then ReLU",
    "norm on the logits": "the logits are normalized: the output layer is linear alone",
    "eval mode in training": "BatchNorm normalized with its running statistics in training "
                             "mode: training=True uses the batch's mean and variance",
    "training mode in eval": "BatchNorm normalized with the batch's statistics in evaluation "
                             "mode: training=False uses the running ones",
    "layer norm over the batch": "LayerNorm's statistics were taken over the batch (axis 0): "
                                 "each sample is normalized over its own features",
    "no last relu": "the last hidden layer has no ReLU: every hidden layer ends with one",
}
BACKWARD_CAUSES = {
    "mask from z": "the ReLU's gradient was masked where z (the linear layer's output) is "
                   "positive: the ReLU's input is the norm's output",
    "statistics detached": "BatchNorm's backward ran in evaluation mode after a training-mode "
                           "forward: the batch's mean and variance depend on z too (pass "
                           "the forward's mode to batch_norm_backward)",
    "norm skipped": "the norm's backward was left out: the gradient reaching the linear layer "
                    "is the norm's input gradient, from its backward",
    "relu skipped": "the ReLU's backward was left out: no gradient passes where the ReLU's "
                    "input was negative",
}
BATCH_ONLY = {"eval mode in training", "training mode in eval", "statistics detached"}
NORM_ONLY = {"relu before the norm", "layer norm over the batch", "norm skipped"}


def applicable(causes, norm, training):
    """The mistakes of causes that change this network's result (norm, mode)."""
    found = [m for m in causes if (norm == "batch" or m not in BATCH_ONLY)
             and (norm != "none" or m not in NORM_ONLY)]
    found = [m for m in found if m != ("training mode in eval" if training else
                                       "eval mode in training")]
    return [m for m in found if m != "layer norm over the batch" or norm == "layer"]


def network(norm, sizes, n, seed, dtype):
    """(x (n, D), parameters) of a case: He's weights, and every other parameter and
    running statistic moved from its initial value by a seeded draw."""
    rng = np.random.default_rng(seed)
    params = init_mlp(sizes, norm, seed, dtype)
    for layer in params:
        for name, a in layer.items():
            move = {"norm.weight": 1 + 0.5 * rng.standard_normal(a.shape),
                    "norm.running_var": 0.5 + rng.random(a.shape)}.get(
                name, a + 0.5 * rng.standard_normal(a.shape))
            layer[name] = move.astype(dtype) if name != "linear.weight" else a
    return rng.standard_normal((n, sizes[0])).astype(dtype), params


def network_tolerance(tensors, norm, sizes, n, dtype):
    """tolerance() for the network's logits and gradients: two stages a layer (its linear
    layer and its norm) each way; reductions up to the widest layer or the batch; cond:
    the largest of its norms' (normkit.testing.condition of each z)."""
    axes = {"batch": 0, "layer": 1}.get(norm)
    conds = [condition(tensors[k, "z"].numpy(), axes) for k in range(len(sizes) - 2)
             if axes is not None]
    return tolerance(dtype, max(n, *sizes), 4 * (len(sizes) - 1), max(conds, default=1.0))


def rounded(t, dtype):
    return t.detach().numpy().astype(dtype)


def forward_yours(x, params, norm, training, momentum=0.1, eps=1e-5):
    """Your mlp_forward on a copy of params: (logits, cache, the copy after the call)."""
    from normlib.mlp import mlp_forward

    mine = copy_params(params)
    result = call_updating(mlp_forward, x, mine, norm, training, momentum, eps,
                           updates=running(mine))
    if not (isinstance(result, tuple) and len(result) == 2):
        raise CheckFailed("mlp_forward: expected (logits, cache), got "
                          f"{type(result).__name__}.\n  Likely cause: return the logits "
                          "and what your backward needs, as a pair.")
    return (*result, mine)


def check_forward(norm, training=True, sizes=(5, 8, 6, 3), n=8, seed=0, dtype=np.float64,
                  momentum=0.1, eps=1e-5):
    """Your mlp_forward's logits, and BatchNorm's running statistics after it, against the
    network in torch (float64); a wrong result matched against FORWARD_CAUSES."""
    x, params = network(norm, sizes, n, seed, dtype)
    expected, tensors = torch_mlp(x, params, norm, training, momentum, eps)
    logits, _, mine = forward_yours(x, params, norm, training, momentum, eps)
    case = (f"for norm={norm!r}, training={training}, sizes {sizes}, x {x.shape} {x.dtype}"
            + (f", momentum={momentum}" if momentum != 0.1 else "")
            + (f", eps={eps}" if eps != 1e-5 else ""))
    tol = network_tolerance(tensors, norm, sizes, n, dtype)
    mistakes = {FORWARD_CAUSES[m]: rounded(torch_mlp(x, params, norm, training, momentum, eps,
                                                     mistake=m)[0], dtype)
                for m in applicable(FORWARD_CAUSES, norm, training)}
    defaults = rounded(torch_mlp(x, params, norm, training)[0], dtype)
    if norm != "none" and (momentum, eps) != (0.1, 1e-5) and not close(defaults, rounded(
            expected, dtype), **tol):
        mistakes["the norms ran with their default momentum and eps: mlp_forward's momentum "
                 "and eps must reach every norm it calls"] = defaults
    try:
        assert_close(logits, rounded(expected, dtype), f"logits {case}", **tol,
                     mistakes=mistakes)
    except CheckFailed as error:
        if "Likely cause" in str(error):
            raise
        first = first_wrong_layer(x, params, norm, training, tol, momentum, eps)
        raise CheckFailed(f"{error}\n  First to differ: {first}.") from None
    slow = torch_mlp(x, params, norm, training, eps=eps)[1] if momentum != 0.1 else {}
    for k, layer in enumerate(mine):
        for name in [name for name in layer if name.startswith("norm.running")]:
            found = {"the running statistics were not updated in place (in training mode "
                     "batch_norm_forward updates those it is given)": params[k][name]}
            if slow:
                found["the running statistics moved at the default momentum, 0.1: "
                      "mlp_forward's momentum must reach every norm"] = rounded(slow[k, name],
                                                                                 dtype)
            assert_close(layer[name], rounded(tensors[k, name], dtype),
                         f"layer {k + 1}'s {name} after the forward {case}", **tol,
                         mistakes=found)


def first_wrong_layer(x, params, norm, training, tol, momentum=0.1, eps=1e-5):
    """Where your mlp_forward's logits first go wrong, in words: the first k whose network
    cut after hidden layer k (an identity output layer in place of the rest: its logits are
    that layer's output) your mlp_forward gets wrong, or none."""
    for k in range(1, len(params)):
        h = params[k - 1]["linear.weight"].shape[0]
        dtype = x.dtype
        cut = copy_params(params[:k]) + [{"linear.weight": np.eye(h, dtype=dtype),
                                          "linear.bias": np.zeros(h, dtype)}]
        expected = rounded(torch_mlp(x, cut, norm, training, momentum, eps)[0], dtype)
        try:
            got = forward_yours(x, cut, norm, training, momentum, eps)[0]
        except Exception:  # (it raised on the cut network: the error is there too)
            got = None
        if not (isinstance(got, np.ndarray) and got.shape == expected.shape
                and close(got, expected, **tol)):
            before = ", the cuts before it right" if k > 1 else ""
            return (f"hidden layer {k}'s output (your mlp_forward on the network cut after "
                    f"it, an identity output layer in its place, is wrong{before}): look at "
                    "one hidden layer's forward")
    return ("the output layer: your mlp_forward is right on the network cut after each hidden "
            "layer (an identity output layer in place of the rest), wrong on the whole one")


@exercise("4.1", "mlp.mlp_forward")
def visible_4_1():
    check_forward("batch", training=True)
    check_forward("batch", training=False, seed=1)
    check_forward("layer", seed=2)
    check_forward("none", seed=3)
    check_forward("batch", training=True, seed=4, momentum=0.5, eps=0.5)  # the norms' own
    check_forward("layer", seed=5, eps=0.5)  # settings, passed on


def backward_mistakes(x, params, norm, training, grad_logits, expected, n):
    """{likely cause: the gradients that mistake gives (mlp_backward's list of dicts)}."""
    found = {BACKWARD_CAUSES[m]: torch_grads(x, params, norm, grad_logits, training, m)
             for m in applicable(BACKWARD_CAUSES, norm, training)}
    found["divided by the batch size: grad_logits already holds the loss's 1/N, and a "
          "gradient sums over the batch"] = [{name: g / n for name, g in layer.items()}
                                             for layer in expected]
    if norm != "none":
        swap = {"norm.weight": "norm.bias", "norm.bias": "norm.weight"}
        found["the gradients of norm.weight (gamma) and norm.bias (beta) are swapped"] = [
            {name: layer[swap.get(name, name)] for name in layer} for layer in expected]
    return found


def check_grads_structure(grads, expected, case):
    """grads is a list of one dict per layer, with exactly the learned parameters' names."""
    if not (isinstance(grads, list) and len(grads) == len(expected)
            and all(isinstance(g, dict) for g in grads)):
        raise CheckFailed(f"mlp_backward {case}: expected a list of {len(expected)} dicts "
                          f"(one per layer, the output layer last), got {type(grads).__name__}"
                          + (f" of {len(grads)}" if isinstance(grads, (list, tuple)) else ""))
    for k, (mine, theirs) in enumerate(zip(grads, expected)):
        if set(mine) != set(theirs):
            extra = sorted(set(mine) - set(theirs))
            cause = ("the running statistics are not learned: they get no gradient"
                     if any(e.startswith("norm.running") for e in extra) else
                     "each dict holds the gradient of each parameter the layer learns, "
                     "under the parameter's name")
            raise CheckFailed(f"layer {k + 1}'s gradients {case}: expected the keys "
                              f"{sorted(theirs)}, got {sorted(mine)}.\n  Likely cause: "
                              f"{cause}.")


def check_backward(norm, training=True, sizes=(5, 8, 6, 3), n=8, seed=0, dtype=np.float64):
    """Your mlp_backward (after your mlp_forward, whose cache it reads) against torch's
    autograd of the same network under a random upstream gradient (float64); a wrong
    gradient matched against backward_mistakes."""
    from normlib.mlp import mlp_backward

    x, params = network(norm, sizes, n, seed, dtype)
    grad_logits = np.random.default_rng(seed + 100).standard_normal((n, sizes[-1])).astype(dtype)
    logits, tensors = torch_mlp(x, params, norm, training)
    case = f"for norm={norm!r}, training={training}, sizes {sizes}, x {x.shape} {x.dtype}"
    tol = network_tolerance(tensors, norm, sizes, n, dtype)
    mine_logits, cache, mine = forward_yours(x, params, norm, training)
    if not (isinstance(mine_logits, np.ndarray) and mine_logits.shape == logits.shape
            and close(mine_logits, rounded(logits, dtype), **tol)):
        raise CheckFailed(f"mlp_forward's logits {case} are wrong, and this check runs it "
                          "first (its cache is what your backward reads): fix Exercise 4.1 "
                          "first, then this check again.")
    grads = mlp_backward(grad_logits, mine, cache, norm)
    expected = torch_grads(x, params, norm, grad_logits, training)
    check_grads_structure(grads, expected, case)
    mistakes = backward_mistakes(x, params, norm, training, grad_logits, expected, n)
    for k, layer in reversed(list(enumerate(expected))):  # (as the backward computes them)
        for name, want in layer.items():
            got = grads[k][name]
            if name == "linear.weight" and getattr(got, "shape", None) == want.shape[::-1] \
                    and want.shape[0] != want.shape[1]:
                raise CheckFailed(f"layer {k + 1}'s {name} gradient {case}: expected shape "
                                  f"{want.shape}, got {got.shape}.\n  Likely cause: the "
                                  "weight gradient is transposed: torch's Linear keeps its "
                                  "weight (out_features, in_features), and so does its "
                                  "gradient: (H, D), like W.")
            try:
                assert_close(got, want, f"layer {k + 1}'s {name} gradient {case}", **tol,
                             mistakes={cause: gives[k][name]
                                       for cause, gives in mistakes.items()})
            except CheckFailed as error:
                if "Likely cause" in str(error):
                    raise
                later = (f"the gradients of layers {k + 2} to {len(expected)} are right"
                         if k + 2 < len(expected) else
                         f"layer {len(expected)}'s are right" if k + 2 == len(expected) else
                         "the first the backward computes")
                raise CheckFailed(f"{error}\n  First to differ: layer {k + 1}, counting back "
                                  f"from the output ({later}): look at layer {k + 1}'s "
                                  "backward, or at the gradient the layer above passes down "
                                  "to it") from None


@exercise("4.2", "mlp.mlp_backward")
def visible_4_2():
    check_backward("batch", training=True)
    check_backward("layer", seed=1)
    check_backward("none", seed=2)
    check_backward("batch", training=False, seed=3)


def check_training(norm, steps=50, below=0.75, seed=0):
    """A short run of SGD with your mlp_forward and mlp_backward (normkit.network.
    train_by_hand): the loss of the whole spiral in evaluation mode at the end must be
    below `below` (the reference's: about 0.1 to 0.5 after 50 steps, by seed and norm; a
    uniform guess: ln 3 = 1.1)."""
    losses, _, final = train_by_hand(norm, steps=steps, seed=seed)
    if not (np.isfinite(final) and final < below):
        raise CheckFailed(f"training with norm={norm!r}, {steps} steps of SGD (seed {seed}): "
                          f"the final loss is {final:.3g}, expected below {below} (the "
                          "reference's is about 0.1 to 0.5; a uniform guess's ln 3 = 1.1).\n  "
                          "Likely cause: the gradients are wrong where the checks above do "
                          "not look, or BatchNorm's running statistics are (evaluation mode "
                          "uses them).")

