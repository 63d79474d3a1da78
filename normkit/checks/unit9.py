"""Unit 9's checks: Exercises 9.1 (angular_update), 9.2 (ReZeroBlock), 9.3 (z_loss) and 9.4
(fold_rms_gain).

9.1 compares your angle with the exact one (float64, from a formula stable at every angle)
within the float64 error model's tolerance, down to 1e-7 rad; 9.2 asserts your block's
exact identity at initialization and the gradients there, then loads a reference block's
random weights and compares the output and every gradient; 9.3 compares the loss and its
gradient with torch's logsumexp under autograd, computed exactly, for logits up to the
hundreds; 9.4 compares the folded pair's output with the original pair's, computed exactly,
and asserts what the two new modules are and that the originals are left as they were.
A wrong result is matched against what each classic mistake gives, computed exactly, to
name its likely cause. Your code is imported when a check runs.
"""

import copy
import math

import numpy as np
import torch

from normkit.checks import exercise
from normkit.checks.unit8 import assert_tensor
from normkit.testing import (
    LAMBDA,
    MARGIN,
    ROUNDINGS,
    CheckFailed,
    assert_close,
    guard_inputs,
    perturb_,
    tolerance,
    torch_tensor_close,
)

# Exercise 9.1: angular_update -------------------------------------------------------------


def exact_angle(before, after):
    """The angle between two arrays read as vectors, in float64, from the chord and its
    complement (accurate at every angle, to a few units of float64's roundoff)."""
    a, b = (np.asarray(w, dtype=np.float64).ravel() for w in (before, after))  # (n,)
    a, b = a / np.linalg.norm(a), b / np.linalg.norm(b)  # (n,)
    return 2 * math.atan2(np.linalg.norm(a - b), np.linalg.norm(a + b))


ARCCOS = ("the angle is arccos of the cosine: near 1 the cosine's last digits are the whole "
          "angle (1 - theta^2 / 2 rounds to 1 below about 1e-8 rad in float64), so small "
          "updates come out wrong or 0; use a formula that reads the angle off the chord "
          "|a/|a| - b/|b||")
FLOAT32 = ("the angle was computed in float32 (it is a float32 number): a small angle is a "
           "small difference of nearly equal unit vectors, and float32 keeps 7 digits of "
           "each; compute in float64")


def angle_mistakes(before, after):
    """{likely cause: the angle that mistake gives} (float64 0-d arrays). (A float32
    computation is told by its result, a float32 number, and arccos's at a small angle by
    its error, of the size a cosine's last bits make: check_angle.)"""
    a, b = (np.asarray(w, dtype=np.float64).ravel() for w in (before, after))  # (n,)
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    cos = np.clip(a @ b / (na * nb), -1, 1)
    theta = exact_angle(before, after)
    found = {
        ARCCOS: np.arccos(cos),
        "the angle is in degrees: return radians": np.degrees(theta),
        "this is the relative size of the update, |after - before| / |before|, not the "
        "angle: it counts the change of the weight's norm too (weight decay shrinks it), "
        "which a norm after the weight ignores": np.linalg.norm(b - a) / na,
        "the angle is arcsin of the sine: the sine is the same for theta and pi - theta, "
        "so angles past pi/2 come out wrong": np.arcsin(np.sqrt(max(0.0, 1 - cos * cos))),
        "the vectors were not normalized: arccos(a . b) needs the unit vectors a/|a| and "
        "b/|b|": np.arccos(np.clip(a @ b, -1, 1)),
    }
    return {cause: np.asarray(v, dtype=np.float64) for cause, v in found.items()}


def check_angle(before, after, what):
    """Your angular_update(before, after) against the exact angle: a float, within the
    float64 error model's tolerance (cond 1 / theta near 0, 1 / (pi - theta) near pi); the
    inputs left as they were."""
    from normlib.rotation import angular_update

    case = f"for {what}, before {before.shape} {before.dtype}"
    untouched = guard_inputs(before=before, after=after)
    result = angular_update(before, after)
    untouched(case)
    if isinstance(result, np.ndarray) and result.ndim >= 1:
        raise CheckFailed(f"the angle {case}: expected one float, got an array of shape "
                          f"{result.shape}.\n  Likely cause: the angle was taken row by row "
                          "(a norm or a dot product along an axis): read each weight as one "
                          "vector of all its entries (ravel it first)")
    if not isinstance(result, (float, np.floating)) or isinstance(result, np.float32):
        raise CheckFailed(f"the angle {case}: expected a float (a Python float or a NumPy "
                          f"float64), got {type(result).__name__}.\n  Where: the value "
                          "angular_update returns (float(...) of a float64)")
    theta = exact_angle(before, after)
    rtol = angle_tolerance(before.size, theta)
    mistakes = angle_mistakes(before, after)
    wrong = not close(result, theta, rtol)
    if wrong and float(np.float32(result)) == float(result):
        mistakes[FLOAT32] = np.asarray(result, dtype=np.float64)  # (a float32 number)
    elif wrong and 0 < theta < 1e-3 and \
            abs(float(result) - theta) < 64 * math.sqrt(before.size) * 2.0**-53 / theta:
        # an error of the size a cosine's last bits make at theta: arccos's
        mistakes[ARCCOS] = np.asarray(result, dtype=np.float64)
    assert_close(np.asarray(result, dtype=np.float64), np.asarray(theta), f"the angle {case}",
                 rtol=rtol, atol=rtol if theta == 0 else 0.0, mistakes=mistakes)


def angle_tolerance(n, theta):
    """The relative tolerance of an angle computed in float64 from n entries: the error
    model's (normkit.testing.tolerance) with float64's own unit roundoff (the inputs convert
    to float64 exactly, and the angle is one float64 computation, not a float32 result's
    reference), 4 stages, cond 1 / theta near 0 and 1 / (pi - theta) near pi: the angle
    is a small difference of unit vectors there."""
    cond = 1 / max(min(theta, math.pi - theta), 1e-300)
    return MARGIN * 2.0**-53 * 4 * (ROUNDINGS + LAMBDA * math.sqrt(n)) * cond


def close(result, theta, rtol):
    """Whether result is within rtol of theta (an exact 0 within rtol absolute)."""
    return abs(float(result) - theta) <= rtol * (abs(theta) if theta else 1.0)


def turned(w, angle, seed, shrink=1.0):
    """w turned by `angle` radians (exactly, up to rounding in w's dtype) towards a random
    direction orthogonal to it, and scaled by shrink (weight decay's effect on the norm)."""
    rng = np.random.default_rng(seed)
    a = w.astype(np.float64).ravel()  # (n,)
    r = rng.standard_normal(a.size)  # (n,)
    r -= (r @ a) / (a @ a) * a  # orthogonal to a
    r *= np.linalg.norm(a) / np.linalg.norm(r)  # |r| = |a|
    b = shrink * (math.cos(angle) * a + math.sin(angle) * r)  # (n,)
    return b.reshape(w.shape).astype(w.dtype)


def check_refuses_bad_pairs():
    """Different shapes, a zero weight and integer arrays raise (the provided
    check_weight_pair, first in your function)."""
    from normlib.rotation import angular_update

    w = np.ones((2, 3))
    for before, after, what in ((w, np.ones((3, 2)), "of shapes (2, 3) and (3, 2)"),
                                (w, np.zeros((2, 3)), "where after is all zeros"),
                                (w.astype(int), w, "of integers")):
        try:
            angular_update(before, after)
        except (TypeError, ValueError):
            continue
        raise CheckFailed(f"weights {what} raised no TypeError or ValueError.\n  Where: keep "
                          "the provided check_weight_pair(before, after) as your function's "
                          "first line")


@exercise("9.1", "rotation.angular_update")
def visible_9_1():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 16)).astype(np.float32)
    check_angle(w, turned(w, 0.3, 1, shrink=0.9), "a step of 0.3 rad that also shrank w")
    check_angle(w, turned(w, 2.5, 2), "an angle past pi/2 (2.5 rad)")
    check_angle(w, turned(w, 1e-3, 3), "a small step (1e-3 rad), float32 weights")
    w64 = rng.standard_normal((32, 32))
    check_angle(w64, turned(w64, 1e-7, 4), "a tiny step (1e-7 rad), as lr 1e-6 gives")
    conv = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    check_angle(conv, turned(conv, 0.05, 5, shrink=1.3), "a convolution's weight")
    check_refuses_bad_pairs()


# Exercise 9.2: ReZeroBlock ---------------------------------------------------------------


class ReferenceReZero(torch.nn.Module):
    """ReZero's block written out, with ReZeroBlock's names (attn, mlp, resweight), so that
    the state_dict of yours loads into it. forward(x, mistake=None): (N, T, E); mistake, one
    of REZERO_MISTAKES' keys, computes what that classic mistake gives instead."""

    def __init__(self, d_model, nhead):
        from normlib._blocks import Attention

        super().__init__()
        self.attn = Attention(d_model, nhead)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(d_model, 4 * d_model),
                                       torch.nn.GELU(), torch.nn.Linear(4 * d_model, d_model))
        self.resweight = torch.nn.Parameter(torch.zeros(1))

    def forward(self, x, mistake=None):
        a, e = self.resweight, x.shape[-1]

        def branch(f, h):  # a sublayer's output, or a mistake's
            if mistake == "norm kept":
                h = torch.nn.functional.layer_norm(h, (e,))
            return f(h)

        x0 = x
        if mistake == "alpha on x":
            x = a * x + branch(self.attn, x)
            return a * x + branch(self.mlp, x)
        if mistake == "whole residual":
            x = a * (x + branch(self.attn, x))
            return a * (x + branch(self.mlp, x))
        x = x + (1 if mistake == "attention ungated" else a) * branch(self.attn, x)
        h = x0 if mistake == "block input" else x
        return x + (1 if mistake == "MLP ungated" else a) * branch(self.mlp, h)


REZERO_MISTAKES = {
    "alpha on x": "alpha multiplies the residual stream x, not the sublayer's output: "
                  "ReZero's block is x + alpha * F(x), so that x passes untouched",
    "whole residual": "alpha multiplies the whole sum, alpha * (x + F(x)): it scales the "
                      "sublayer's output alone, x + alpha * F(x)",
    "attention ungated": "the attention's branch is not scaled by alpha: both sublayers' "
                         "outputs are",
    "MLP ungated": "the MLP's branch is not scaled by alpha: both sublayers' outputs are",
    "block input": "the MLP reads the block's input x, not x after the attention's "
                   "residual step: the sublayers run one after the other",
    "norm kept": "a norm is kept before each sublayer: ReZero drops the norms; alpha alone "
                 "keeps the stream's scale in check",
}


def rezero_tolerance(x):
    """tolerance() for the block on x (N, T, E): output and gradients, forward and backward
    through 10 stages (the attention's 5, the MLP's 3, two scaled additions), reductions up
    to N * T * E terms (alpha's gradient sums every element of both branches)."""
    n, t, e = x.shape
    return tolerance(x.dtype, length=max(4 * e, n * t * e), depth=2 * 10)


def check_rezero_structure(block, d_model, nhead, case):
    """Your block's parameters and buffers are the reference's, by name and shape; alpha
    is a trainable parameter; no norm is left in it."""
    want = {k: tuple(v.shape) for k, v in ReferenceReZero(d_model, nhead).state_dict().items()}
    have = {k: tuple(v.shape) for k, v in block.state_dict().items()}
    norms = [name for name, m in block.named_modules()
             if isinstance(m, (torch.nn.LayerNorm, torch.nn.RMSNorm))]
    if norms:
        raise CheckFailed(f"the block {case} holds norms: {norms}.\n  Likely cause: "
                          f"{REZERO_MISTAKES['norm kept']}")
    extra, missing = sorted(set(have) - set(want)), sorted(set(want) - set(have))
    if extra or missing:
        cause = ("\n  Likely cause: one alpha per sublayer: ReZero's official block shares "
                 "one, resweight (1,), between both" if missing == ["resweight"] and extra
                 else "\n  Where: the names of your parameters: attn, mlp (provided) and "
                 "resweight, as the docstring says")
        raise CheckFailed(f"parameters {case}: missing {missing}, unexpected {extra}.{cause}")
    if have["resweight"] != (1,):
        raise CheckFailed(f"resweight {case} has shape {have['resweight']}, expected (1,).\n"
                          "  Where: alpha is one scalar for the whole block, a tensor of "
                          "shape (1,)")
    params = dict(block.named_parameters())
    if "resweight" not in params or not params["resweight"].requires_grad:
        raise CheckFailed(f"resweight {case} is not a trainable parameter.\n  Likely cause: "
                          "alpha was registered as a buffer or a plain tensor, or with "
                          "requires_grad=False: it never trains, and the block stays the "
                          "identity (wrap it in torch.nn.Parameter)")


def build_rezero(d_model, nhead, dtype, seed):
    """Your ReZeroBlock(d_model, nhead) in dtype, built after torch.manual_seed(seed)."""
    from normlib.rezero import ReZeroBlock

    torch.manual_seed(seed)
    return ReZeroBlock(d_model, nhead).to(dtype)


def run_rezero(block, x, g):
    """[(name, tensor)]: block(x), the gradients of x and each parameter (sorted by name)
    under the upstream gradient g."""
    x = x.detach().clone().requires_grad_()
    y = block(x)
    if not isinstance(y, torch.Tensor):
        raise CheckFailed(f"expected the output to be a torch.Tensor, got {type(y).__name__}"
                          ".\n  Where: the forward's result")
    y.backward(g.to(y.dtype))
    return [("output", y), ("x.grad", x.grad)] + \
        [(f"{name}.grad", p.grad) for name, p in sorted(block.named_parameters())]


def stream_inputs(shape, dtype, seed, scale=1.0):
    """x (N, T, E) and an upstream gradient, random, in dtype."""
    gen = torch.Generator().manual_seed(seed + 100)
    x = scale * torch.randn(shape, generator=gen, dtype=torch.float64)
    g = torch.randn(shape, generator=gen, dtype=torch.float64)
    return x.to(dtype), g.to(dtype)


def rezero_mistakes(reference, x, g=None):
    """{likely cause: the output (g None) or resweight's gradient (under g) that mistake
    gives}, reference computed exactly (float64), as NumPy arrays of x's dtype."""
    found = {}
    for mistake, cause in REZERO_MISTAKES.items():
        exact = copy.deepcopy(reference).double()
        h = x.detach().double()
        if g is None:
            with torch.no_grad():
                found[cause] = exact(h, mistake)
            continue
        exact(h, mistake).backward(g.double())
        found[cause] = exact.resweight.grad
    return {cause: v.to(x.dtype).numpy() for cause, v in found.items()}


def check_rezero_init(shape=(2, 3, 8), nhead=2, dtype=torch.float32, seed=0, scale=1.0):
    """Your block at initialization: alpha exactly 0, the output x exactly (torch.equal),
    x's gradient the upstream gradient exactly, no gradient on the sublayers' parameters,
    and alpha's gradient against the reference's, computed exactly."""
    n, t, e = shape
    case = f"at initialization, for x {shape} {dtype}, nhead={nhead}"
    block = build_rezero(e, nhead, dtype, seed)
    check_rezero_structure(block, e, nhead, case)
    alpha = dict(block.named_parameters())["resweight"].detach()
    if alpha.abs().max() != 0:
        raise CheckFailed(f"resweight {case} is {alpha.tolist()}, expected [0.0].\n  Likely "
                          "cause: alpha is not zero-initialized: ReZero starts it at exactly "
                          "0, so that every block starts as the identity")
    x, g = stream_inputs(shape, dtype, seed, scale)
    found = dict(run_rezero(block, x, g))
    assert_tensor(found["output"], x, f"output {case}")
    reference = ReferenceReZero(e, nhead)
    reference.load_state_dict(block.state_dict())
    if not torch.equal(found["output"], x):
        torch_tensor_close(found["output"], x, f"output {case} (ReZero's block starts as the "
                           "identity, exactly)", **rezero_tolerance(x),
                           mistakes=rezero_mistakes(reference, x))
        raise CheckFailed(f"output {case}: not x exactly (torch.equal), though within "
                          "rounding.\n  Where: with alpha zero the block returns x + 0 * F: "
                          "nothing else may touch x")
    assert_tensor(found["x.grad"], x, f"x.grad {case}")
    if not torch.equal(found["x.grad"], g):
        raise CheckFailed(f"x.grad {case} is not the upstream gradient exactly.\n  Where: at "
                          "initialization the block is the identity, so its gradient passes "
                          "through unchanged")
    for name, grad in found.items():
        if name.startswith(("attn.", "mlp.")) and grad is not None and grad.abs().max() > 0:
            raise CheckFailed(f"{name} {case} is not zero.\n  Where: with alpha zero no "
                              "gradient reaches a sublayer's parameters: what else multiplies "
                              "the branch, or reaches x?")
    grad = found.get("resweight.grad")
    if grad is None:
        raise CheckFailed(f"resweight.grad is None {case}.\n  Where: alpha is not used in the "
                          "forward, or is detached")
    expected = dict(run_rezero(copy.deepcopy(reference).double(), x.double(), g.double()))
    torch_tensor_close(grad, expected["resweight.grad"].to(dtype), f"resweight.grad {case}",
                       **rezero_tolerance(x), mistakes=rezero_mistakes(reference, x, g))


def check_rezero_block(shape=(2, 3, 8), nhead=2, dtype=torch.float32, seed=0, scale=1.0,
                       alpha=0.7):
    """Your block with the weights of a reference block made random and alpha set, against
    that reference computed exactly (float64): the output and the gradients of x and every
    parameter under a random upstream gradient, in value, shape and dtype."""
    n, t, e = shape
    case = f"for x {shape} {dtype}, nhead={nhead}, random weights, alpha={alpha}"
    block = build_rezero(e, nhead, dtype, seed)
    check_rezero_structure(block, e, nhead, case)
    torch.manual_seed(seed + 1)
    reference = perturb_(ReferenceReZero(e, nhead), seed + 1, scale=0.3, weight_scale=0.2)
    with torch.no_grad():
        reference.resweight.fill_(alpha)
    block.load_state_dict(reference.state_dict())
    x, g = stream_inputs(shape, dtype, seed, scale)
    expected = run_rezero(copy.deepcopy(reference).double(), x.double(), g.double())
    actual = run_rezero(block, x, g)
    tol = rezero_tolerance(x)
    for (name, a), (_, want) in zip(actual, expected):
        if a is None:
            raise CheckFailed(f"{name} is None {case}.\n  Where: {name}, no gradient after "
                              "backward: the parameter is not used by the forward, or is "
                              "detached")
        torch_tensor_close(a, want.to(dtype), f"{name} {case}", **tol,
                           mistakes=rezero_mistakes(reference, x) if name == "output" else
                           rezero_mistakes(reference, x, g) if name == "resweight.grad"
                           else None)


def check_rezero_refuses(e=8, nhead=2):
    """An x that is not (N, T, E) raises a ValueError (the provided check_stream)."""
    block = build_rezero(e, nhead, torch.float32, 0)
    for bad in ((3, e), (2, 3, e + 1)):
        try:
            block(torch.zeros(bad))
        except ValueError:
            continue
        except Exception as error:
            raise CheckFailed(f"x of shape {bad} raised {type(error).__name__}, expected a "
                              "ValueError.\n  Where: keep the provided check_stream(x, ...) as "
                              "your forward's first line") from None
        raise CheckFailed(f"x of shape {bad} raised no error, expected a ValueError.\n  "
                          "Where: keep the provided check_stream(x, ...) as your forward's "
                          "first line")


@exercise("9.2", "rezero.ReZeroBlock")
def visible_9_2():
    check_rezero_init((2, 3, 8))
    check_rezero_block((2, 3, 8))
    check_rezero_init((3, 4, 12), nhead=3, dtype=torch.float64, seed=1, scale=3.0)
    check_rezero_block((3, 4, 12), nhead=3, dtype=torch.float64, seed=2, alpha=-0.4)
    check_rezero_refuses()


# Exercise 9.3: z_loss --------------------------------------------------------------------


def torch_z_loss(logits, coefficient):
    """z-loss computed by torch (autograd on logits if it requires grad)."""
    z = torch.logsumexp(logits, dim=-1)  # (*B,)
    return coefficient * (z * z).mean()  # ()


def z_loss_mistakes(logits, coefficient):
    """{"loss": {cause: value}, "dlogits": {cause: value}}, each mistake computed exactly
    (float64), rounded to the logits' dtype."""
    x = torch.tensor(logits, dtype=torch.float64)  # (*B, V)
    c, rows = coefficient, x.numel() // x.shape[-1]
    z = torch.logsumexp(x, dim=-1, keepdim=True)  # (*B, 1)
    p = torch.softmax(x, dim=-1)  # (*B, V)
    unshifted = z - x.amax(dim=-1, keepdim=True)  # log sum exp(x - max): the max not added
    loss, grad = {}, {}
    cause = ("z is not squared: z-loss is coefficient * mean(z^2), and its gradient "
             "2 * coefficient * z / M times the softmax")
    loss[cause], grad[cause] = c * z.mean(), c / rows * p
    cause = "the rows' z^2 are summed, not averaged: z-loss is a mean over the M rows"
    loss[cause], grad[cause] = c * (z * z).sum(), 2 * c * z * p
    cause = ("the row's max was subtracted inside the exp and not added back: log sum "
             "exp(x) = max + log sum exp(x - max)")
    loss[cause] = c * (unshifted ** 2).mean()
    grad[cause] = 2 * c / rows * unshifted * p
    if x.dim() >= 3:
        first = x.shape[0]
        cause = ("the mean divides by the first axis only: the rows are every leading "
                 f"axis, here M = {rows}, not {first}")
        loss[cause], grad[cause] = c * (z * z).sum() / first, 2 * c / first * z * p
    grad["the gradient lacks the factor 2 of d(z^2)/dz = 2 z"] = c / rows * z * p
    grad["the gradient has exp(logits) where the softmax belongs: dz/dlogits = "
         "exp(logits) / sum exp(logits), the softmax"] = 2 * c / rows * z * torch.exp(x)
    grad["the gradient lacks z: d(z^2)/dlogits = 2 z dz/dlogits"] = 2 * c / rows * p
    if x.dim() >= 2 and x.shape[0] > 1:
        wrong = 2 * c / rows * z * torch.softmax(x, dim=0)
        grad["the gradient's softmax runs over the rows (axis 0), not over the classes (the "
             "last axis, V)"] = wrong
    finite = np.finfo(logits.dtype).max  # (a mistake beyond the dtype's range is not kept)
    return {name: {k: v.numpy().astype(logits.dtype) for k, v in found.items()
                   if v.abs().max() < finite}
            for name, found in (("loss", loss), ("dlogits", grad))}


def z_condition(logits):
    """How much rounding in z can grow, relative to z: each row's z = max + log(sum), the
    sum's terms in (0, 1], so z's rounding is about u (|max| + log V); relative to the
    largest |z|."""
    x = logits.astype(np.float64)
    top = np.abs(x).max(axis=-1)  # (*B,)
    z = np.log(np.exp(x - x.max(axis=-1, keepdims=True)).sum(axis=-1)) + x.max(axis=-1)
    return float((top + math.log(x.shape[-1])).max() / max(np.abs(z).max(), 1e-30))


def check_z_loss(logits, coefficient=1e-4, what="random logits"):
    """Your (loss, dlogits) against torch's, computed exactly (float64, rounded to the
    logits' dtype), in value, shape and dtype; the logits left as they were."""
    from normlib.z_loss import z_loss

    case = f"for {what}, logits {logits.shape} {logits.dtype}, coefficient {coefficient:g}"
    x = torch.tensor(logits, dtype=torch.float64, requires_grad=True)
    expected_loss = torch_z_loss(x, coefficient)
    expected_loss.backward()
    untouched = guard_inputs(logits=logits)
    result = z_loss(logits, coefficient)
    untouched(case)
    if not (isinstance(result, tuple) and len(result) == 2):
        raise CheckFailed(f"z_loss {case}: return (loss, dlogits), got "
                          f"{type(result).__name__}.\n  Where: the function's return")
    loss, dlogits = result
    if not isinstance(loss, (np.ndarray, np.generic)):
        raise CheckFailed(f"loss {case}: expected a NumPy scalar of the logits' dtype, got "
                          f"{type(loss).__name__}.\n  Where: the loss you return (a Python "
                          "float loses the dtype)")
    loss = np.asarray(loss)
    if np.isfinite(logits).all() and not (np.isfinite(loss).all() and
                                          np.isfinite(np.asarray(dlogits, float)).all()):
        raise CheckFailed(f"z_loss {case} is not finite: loss {loss}.\n  Likely cause: exp "
                          "overflowed: exp(89) is beyond float32's range, and diverging "
                          "logits reach the hundreds. Subtract each row's max before exp "
                          "(and add it back after the log).")
    rows = logits.size // logits.shape[-1]
    tol = tolerance(logits.dtype, length=max(logits.shape[-1], rows), depth=6,
                    cond=z_condition(logits))
    mistakes = z_loss_mistakes(logits, coefficient)
    for name, actual, exact in (("loss", loss, expected_loss.detach().numpy()),
                                ("dlogits", dlogits, x.grad.numpy())):
        # relative to the largest value: z-loss's values are tiny (coefficient 1e-4), and
        # assert_close's atol counts in units of at least 1
        size = float(np.abs(exact).max())
        assert_close(actual, exact.astype(logits.dtype), f"{name} {case}",
                     mistakes=mistakes[name], rtol=tol["rtol"],
                     atol=tol["atol"] * min(1.0, size))


def check_refuses_bad_logits():
    """Integer logits, an empty class axis and a negative coefficient raise (the provided
    check_logits)."""
    from normlib.z_loss import z_loss

    for logits, c, what in ((np.ones((2, 3), dtype=int), 1e-4, "integer logits"),
                            (np.ones((2, 0)), 1e-4, "logits of shape (2, 0)"),
                            (np.ones((2, 3)), -1.0, "coefficient -1")):
        try:
            z_loss(logits, c)
        except (TypeError, ValueError):
            continue
        raise CheckFailed(f"{what} raised no TypeError or ValueError.\n  Where: keep the "
                          "provided check_logits(logits, coefficient) as your function's "
                          "first line")


@exercise("9.3", "z_loss.z_loss")
def visible_9_3():
    rng = np.random.default_rng(0)
    check_z_loss(rng.standard_normal((4, 6)).astype(np.float32))
    check_z_loss(3 * rng.standard_normal((2, 3, 5)), coefficient=0.5, what="a (B, T, V) "
                 "batch, float64")
    check_z_loss((rng.standard_normal((3, 7)) + 200).astype(np.float32),
                 what="logits near 200 (a diverging model's)")
    check_z_loss((rng.standard_normal((5, 4)) - 40).astype(np.float32), coefficient=2e-3,
                 what="logits near -40")
    check_refuses_bad_logits()


# Exercise 9.4: fold_rms_gain -------------------------------------------------------------


def fold_pair(e, f, dtype, seed, bias=True, affine=True, eps=1e-6):
    """An RMSNorm over (E,) with a random gain (a few channels large, as trained models'
    are) and a random Linear(E, F), in dtype."""
    gen = torch.Generator().manual_seed(seed)
    norm = torch.nn.RMSNorm(e, eps=eps, elementwise_affine=affine, dtype=dtype)
    linear = torch.nn.Linear(e, f, bias=bias, dtype=dtype)
    with torch.no_grad():
        if affine:
            gain = 1 + 0.3 * torch.randn(e, generator=gen, dtype=torch.float64)  # (E,)
            gain[:: max(1, e // 3)] *= 8  # outlier channels
            norm.weight.copy_(gain)
        linear.weight.copy_(torch.randn(f, e, generator=gen, dtype=torch.float64) / e ** 0.5)
        if bias:
            linear.bias.copy_(torch.randn(f, generator=gen, dtype=torch.float64))
    return norm, linear


def fold_mistakes(norm, linear, x):
    """{likely cause: the output that mistake gives}, computed exactly (float64)."""
    w = linear.weight.detach().double()  # (F, E)
    g = (norm.weight.detach().double() if norm.weight is not None
         else torch.ones(w.shape[1], dtype=torch.float64))  # (E,)
    b = None if linear.bias is None else linear.bias.detach().double()  # (F,)
    h = torch.nn.functional.rms_norm(x.double(), (w.shape[1],), None, norm.eps)  # (*B, E)

    def out(weight, bias=b, hidden=h):
        return torch.nn.functional.linear(hidden, weight, bias)

    found = {"the gain divides the weight: the norm's output is multiplied by g, so W "
             "must take g as a factor": out(w / g),
             "the norm kept its gain and the weight took it too: g now applies twice":
             out(w * g, hidden=h * g)}
    if w.shape[0] == w.shape[1]:
        found["g scales the weight's rows (its outputs), not its columns: g multiplies the "
              "norm's output, the linear's input, whose channels are W's columns"] = \
            out(w * g[:, None])
    if b is not None and w.shape[0] == w.shape[1]:
        found["the bias was scaled by g too: the bias is added after the matmul, and g "
              "never reaches it"] = out(w * g, b * g)
    return {cause: v.to(x.dtype).numpy() for cause, v in found.items()}


def check_fold(e=8, f=6, dtype=torch.float32, seed=0, bias=True, affine=True, eps=1e-6,
               lead=(3,)):
    """Your fold_rms_gain(norm, linear): two new modules of the right kinds and sizes, the
    norm without a gain and with norm's eps, the bias unchanged, the originals untouched,
    and the folded pair's output against the original pair's, computed exactly."""
    from normlib.fold import fold_rms_gain

    norm, linear = fold_pair(e, f, dtype, seed, bias, affine, eps)
    case = (f"for RMSNorm({e}, eps={eps:g}{'' if affine else ', no gain'}) then Linear({e}, "
            f"{f}{'' if bias else ', bias=False'}), {dtype}")
    saved = copy.deepcopy((norm.state_dict(), linear.state_dict()))
    result = fold_rms_gain(norm, linear)
    for module, state in zip((norm, linear), saved):
        for name, value in module.state_dict().items():
            if not torch.equal(value, state[name]):
                raise CheckFailed(f"the original {type(module).__name__}'s {name} changed "
                                  f"{case}.\n  Likely cause: the fold wrote into the original "
                                  "modules (an in-place *= or copy_ on their tensors, or a new "
                                  "module sharing them): build new tensors for the new "
                                  "modules")
    if not (isinstance(result, tuple) and len(result) == 2):
        raise CheckFailed(f"fold_rms_gain {case}: return (folded_norm, folded_linear), got "
                          f"{type(result).__name__}.\n  Where: the function's return")
    folded_norm, folded_linear = result
    if not isinstance(folded_norm, torch.nn.RMSNorm) or \
            not isinstance(folded_linear, torch.nn.Linear):
        raise CheckFailed(f"fold_rms_gain {case} returned ({type(folded_norm).__name__}, "
                          f"{type(folded_linear).__name__}), expected (RMSNorm, Linear).\n  "
                          "Where: the modules you return")
    if folded_norm is norm or folded_linear is linear:
        raise CheckFailed(f"fold_rms_gain {case} returned an original module, not a new one."
                          "\n  Where: build two new modules; the originals stay as they were")
    if folded_norm.weight is not None:
        raise CheckFailed(f"folded_norm {case} has a gain.\n  Likely cause: the folded norm "
                          "keeps elementwise_affine: once g is in the linear's weight, the "
                          "norm has none (elementwise_affine=False)")
    if folded_norm.eps != norm.eps or tuple(folded_norm.normalized_shape) != (e,):
        raise CheckFailed(f"folded_norm {case} has eps {folded_norm.eps} and normalized_shape "
                          f"{tuple(folded_norm.normalized_shape)}, expected {norm.eps} and "
                          f"({e},).\n  Likely cause: a new RMSNorm takes torch's default eps "
                          "(None: the dtype's machine epsilon) unless it is given norm's")
    weight = folded_linear.weight
    if tuple(weight.shape) != (f, e) or weight.dtype != dtype:
        raise CheckFailed(f"folded_linear.weight {case} is {tuple(weight.shape)} "
                          f"{weight.dtype}, expected ({f}, {e}) {dtype}.\n  Where: the new "
                          "Linear's size and dtype, linear's")
    if (folded_linear.bias is None) != (linear.bias is None):
        raise CheckFailed(f"folded_linear {case} {'lacks' if bias else 'has'} a bias.\n  "
                          "Where: the new Linear has a bias where linear has one")
    if bias and not torch.equal(folded_linear.bias.detach(), linear.bias.detach()):
        scaled = affine and e == f and torch.allclose(
            folded_linear.bias.detach(), (linear.bias * norm.weight).detach())
        raise CheckFailed(f"folded_linear.bias {case} is not linear's bias." + (
            "\n  Likely cause: the bias was scaled by g too: the bias is added after the "
            "matmul, and g never reaches it" if scaled else "\n  Where: the new Linear's "
            "bias: the fold moves g into the weight alone; the bias is copied as it is"))
    gen = torch.Generator().manual_seed(seed + 100)
    x = (2 * torch.randn(*lead, e, generator=gen, dtype=torch.float64) + 0.5).to(dtype)
    with torch.no_grad():
        exact = torch.nn.functional.linear(
            torch.nn.functional.rms_norm(x.double(), (e,), None if norm.weight is None else
                                         norm.weight.double(), eps),
            linear.weight.double(), None if linear.bias is None else linear.bias.double())
    with torch.no_grad():
        y = folded_linear(folded_norm(x))
    assert_tensor(y, exact.to(dtype), f"the folded pair's output {case}")
    hidden = torch.nn.functional.rms_norm(x.double(), (e,), None, eps)  # (*B, E)
    gain = 1 if norm.weight is None else norm.weight.detach().double()  # (E,)
    terms = hidden.abs() @ (linear.weight.detach().double() * gain).abs().T  # (*B, F)
    cond = float(terms.max() / exact.detach().abs().max().clamp_min(1e-30))
    torch_tensor_close(y, exact.to(dtype), f"the folded pair's output {case}",
                       mistakes=fold_mistakes(norm, linear, x),
                       **tolerance(dtype, length=e, depth=5, cond=cond))


def check_refuses_bad_modules():
    """A LayerNorm, sizes that do not chain, and mixed dtypes raise (check_fold_args)."""
    from normlib.fold import fold_rms_gain

    for norm, linear, what in (
            (torch.nn.LayerNorm(4), torch.nn.Linear(4, 2), "a LayerNorm"),
            (torch.nn.RMSNorm(4), torch.nn.Linear(5, 2), "RMSNorm(4) then Linear(5, 2)"),
            (torch.nn.RMSNorm(4), torch.nn.Linear(4, 2, dtype=torch.float64),
             "a float32 norm and a float64 linear")):
        try:
            fold_rms_gain(norm, linear)
        except (TypeError, ValueError):
            continue
        raise CheckFailed(f"{what} raised no TypeError or ValueError.\n  Where: keep the "
                          "provided check_fold_args(norm, linear) as your function's first "
                          "line")


@exercise("9.4", "fold.fold_rms_gain")
def visible_9_4():
    check_fold(6, 6, lead=(2, 3))  # square first: rows and columns can be confused
    check_fold(8, 5, seed=1)
    check_fold(12, 5, dtype=torch.float64, seed=2, bias=False, eps=1e-5)
    check_fold(4, 4, seed=3, affine=False)
    check_refuses_bad_modules()
