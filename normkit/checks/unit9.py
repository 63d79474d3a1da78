"""Unit 9's checks: Exercises 9.1 (angular_update), 9.2 (ReZeroBlock), 9.3 (z_loss), 9.4
(fold_rms_gain) and 9.5 (fused_add_rms_norm, Numba).

9.1 compares your angle with the exact one (float64, from a formula stable at every angle)
within the float64 error model's tolerance, down to 1e-7 rad; 9.2 asserts your block's
exact identity at initialization and the gradients there, then loads a reference block's
random weights and compares the output and every gradient; 9.3 compares the loss and its
gradient with torch's logsumexp under autograd, computed exactly, for logits up to the
hundreds; 9.4 compares the folded weight with W times g, and the folded pair's output with
the original pair's, computed exactly, and asserts that the inputs are left as they were;
9.5 compares the stream and its norm with the exact ones, and reads your kernel's code and
measures its memory as Unit 7's checks do.
A wrong result is matched against what each classic mistake gives, computed exactly, to
name its likely cause. Your code is imported when a check runs.
"""

import copy
import math

import numpy as np
import torch
import torch.nn.functional as F

from normkit.checks import Skipped, exercise
from normkit.checks.unit8 import assert_tensor
from normkit.equilibrium import angle
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
    complement (accurate at every angle, to a few units of float64's roundoff): section 1's
    experiment's measure, normkit.equilibrium.angle."""
    return angle(*(torch.from_numpy(np.asarray(w)) for w in (before, after)))


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
    if type(loss) is float and logits.dtype == np.float64:
        loss = np.float64(loss)  # (a float is a float64: at grading a NumPy float64 is one)
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


def fold_tensors(e, f, dtype, seed, bias=True, affine=True):
    """(gain (E,) with a few channels large, as trained models' are, or None; weight (F, E);
    bias (F,) or None), random, in dtype."""
    gen = torch.Generator().manual_seed(seed)
    gain = 1 + 0.3 * torch.randn(e, generator=gen, dtype=torch.float64)  # (E,)
    gain[:: max(1, e // 3)] *= 8  # outlier channels
    weight = torch.randn(f, e, generator=gen, dtype=torch.float64) / e ** 0.5  # (F, E)
    b = torch.randn(f, generator=gen, dtype=torch.float64)  # (F,)
    return (gain.to(dtype) if affine else None, weight.to(dtype),
            b.to(dtype) if bias else None)


def fold_mistakes(gain, weight, bias):
    """{likely cause: the folded weight that mistake gives}, computed exactly (float64)."""
    w = weight.double()  # (F, E)
    g = torch.ones(w.shape[1], dtype=torch.float64) if gain is None else gain.double()
    found = {"the gain divides the weight: the norm's output is multiplied by g, so W must "
             "take g as a factor": w / g,
             "the gain was left out: the weight is W as it was, and the norm without its "
             "gain computes something else": w}
    if w.shape[0] == w.shape[1]:
        found["g scales the weight's rows (its outputs), not its columns: g multiplies the "
              "norm's output, the linear's input, whose channels are W's columns"] = \
            w * g[:, None]
    return {cause: v.to(weight.dtype).numpy() for cause, v in found.items() if gain is not None
            or "left out" not in cause}


def check_fold(e=8, f=6, dtype=torch.float32, seed=0, bias=True, affine=True, eps=1e-6,
               lead=(3,)):
    """Your fold_rms_gain(gain, weight, bias): the inputs left as they were; the folded weight
    against W times g computed exactly (one rounding: the error model's tolerance for one
    stage), in value, shape and dtype; the bias as it was; and the folded pair's output, the
    norm without its gain, against the original pair's computed exactly."""
    from normlib.fold import fold_rms_gain

    gain, weight, b = fold_tensors(e, f, dtype, seed, bias, affine)
    case = (f"for gain {'None' if gain is None else (e,)}, weight ({f}, {e}), bias "
            f"{'None' if b is None else (f,)}, {dtype}")
    given = {"gain": gain, "weight": weight, "bias": b}
    saved = {name: t.clone() for name, t in given.items() if t is not None}
    result = fold_rms_gain(gain, weight, b)
    for name, t in saved.items():
        if not torch.equal(given[name], t):
            raise CheckFailed(f"{name} changed during the call {case}.\n  Likely cause: the "
                              "fold wrote into the original tensors (an in-place *= or mul_): "
                              "return new tensors; the model you fold from may still be in use")
    if not (isinstance(result, tuple) and len(result) == 2):
        raise CheckFailed(f"fold_rms_gain {case}: return (folded_weight, folded_bias), got "
                          f"{type(result).__name__}.\n  Where: the function's return")
    folded, folded_bias = result
    exact = weight.double() * (1 if gain is None else gain.double())  # (F, E)
    assert_tensor(folded, weight, f"folded_weight {case}")
    torch_tensor_close(folded, exact.to(dtype), f"folded_weight {case}",
                       mistakes=fold_mistakes(gain, weight, b), **tolerance(dtype))
    if (folded_bias is None) != (b is None):
        got = "None" if folded_bias is None else "a tensor"
        raise CheckFailed(f"folded_bias {case} is {got}.\n  Where: the folded bias is None "
                          "exactly where bias is")
    if b is not None:
        assert_tensor(folded_bias, b, f"folded_bias {case}")
        if not torch.equal(folded_bias, b):
            scaled = gain is not None and e == f and torch.allclose(folded_bias, b * gain)
            raise CheckFailed(f"folded_bias {case} is not bias.\n  " + (
                "Likely cause: the bias was scaled by g too: the bias is added after the "
                "matmul, and g never reaches it" if scaled else "Where: the folded bias: "
                "the fold moves g into the weight alone; the bias stays as it is"))
    gen = torch.Generator().manual_seed(seed + 100)
    x = (2 * torch.randn(*lead, e, generator=gen, dtype=torch.float64) + 0.5).to(dtype)
    with torch.no_grad():
        y = F.linear(F.rms_norm(x, (e,), None, eps), folded, folded_bias)  # (*B, F)
        original = F.linear(F.rms_norm(x.double(), (e,), None if gain is None else
                                       gain.double(), eps), weight.double(),
                            None if b is None else b.double())  # (*B, F)
        hidden = F.rms_norm(x.double(), (e,), None, eps)  # (*B, E)
        terms = hidden.abs() @ exact.abs().T  # (*B, F): the dot products' terms
    cond = float(terms.max() / original.abs().max().clamp_min(1e-30))
    torch_tensor_close(y, original.to(dtype), f"the folded pair's output {case}",
                       **tolerance(dtype, length=e, depth=4, cond=cond))


def check_refuses_bad_tensors():
    """A weight of the wrong rank, a gain of the wrong size and a bias of another dtype
    raise (the provided check_fold_args)."""
    from normlib.fold import fold_rms_gain

    w = torch.ones(2, 4)
    for args, what in (((torch.ones(4), torch.ones(4)), "a weight (4,)"),
                       ((torch.ones(2), w), "a gain (2,) for a weight (2, 4)"),
                       ((torch.ones(4), w, torch.ones(2, dtype=torch.float64)),
                        "a float64 bias for a float32 weight")):
        try:
            fold_rms_gain(*args)
        except (TypeError, ValueError):
            continue
        raise CheckFailed(f"{what} raised no TypeError or ValueError.\n  Where: keep the "
                          "provided check_fold_args(gain, weight, bias) as your function's "
                          "first line")


@exercise("9.4", "fold.fold_rms_gain")
def visible_9_4():
    check_fold(6, 6, lead=(2, 3))  # square first: rows and columns can be confused
    check_fold(8, 5, seed=1)
    check_fold(12, 5, dtype=torch.float64, seed=2, bias=False, eps=1e-5)
    check_fold(4, 4, seed=3, affine=False)  # a norm without a gain
    check_refuses_bad_tensors()


# Exercise 9.5: fused_add_rms_norm (Numba) ------------------------------------------------


def fused_kernel():
    """Your fused_add_rms_norm of normlib/fused_add_norm.py; where Numba is not installed, a
    Skipped that says so (the exercise is skipped, not failed)."""
    from normkit.kernel_code import NUMBA_INSTALL, numba_installed

    if not numba_installed():
        raise Skipped("Numba is not installed here, so Exercise 9.5 is skipped: "
                      f"{NUMBA_INSTALL}.")
    import normlib.fused_add_norm as fused

    return fused.fused_add_rms_norm


def exact_fused(x, residual, weight, eps):
    """(y, stream) as the kernel must return them: the stream x + residual rounded once to
    its dtype, and its RMSNorm times weight computed in float64 from that stored stream,
    rounded to x's dtype."""
    stream = x + residual  # (R, H): one rounding, as NumPy's addition of two such arrays
    y = F.rms_norm(torch.from_numpy(stream.astype(np.float64)), (x.shape[1],),
                   torch.from_numpy(weight.astype(np.float64)), eps)  # (R, H)
    return y.numpy().astype(x.dtype), stream


def fused_mistakes(x, residual, weight, eps):
    """{likely cause: y as that mistake gives it}, each computed exactly (float64) and
    rounded to x's dtype."""
    h = x.shape[1]
    x64, r64, w64 = (a.astype(np.float64) for a in (x, residual, weight))
    stream = (x + residual).astype(np.float64)  # (R, H)

    def rms(v, eps_inside=True, gain=True):
        ms = (v * v).mean(axis=1, keepdims=True)  # (R, 1)
        scale = 1 / np.sqrt(ms + eps) if eps_inside else 1 / (np.sqrt(ms) + eps)
        return v * scale * (w64 if gain else 1)

    found = {
        "the norm reads x alone, not the stream residual + x: the next sublayer reads the "
        "stream": rms(x64),
        "the norm reads the residual stream before x was added to it": rms(r64),
        "the mean was subtracted: this is RMSNorm, which scales by 1 / sqrt(mean(s^2) + "
        "eps) and subtracts nothing":
            (stream - stream.mean(axis=1, keepdims=True)) / np.sqrt(
                stream.var(axis=1, keepdims=True) + eps) * w64,
        "eps was added outside the square root: RMSNorm divides by sqrt(mean(s^2) + eps)":
            rms(stream, eps_inside=False),
        "the weight is missing: the normalized row is multiplied by weight (H,)":
            rms(stream, gain=False),
        f"the mean of the squares divides by the number of rows, not by H = {h}":
            stream / np.sqrt((stream * stream).sum(axis=1, keepdims=True) / x.shape[0]
                             + eps) * w64,
    }
    return {cause: v.astype(x.dtype) for cause, v in found.items()}


def check_fused(x, residual, weight, eps=1e-6):
    """Your fused_add_rms_norm(x, residual, weight, eps): (y, stream) against the exact ones
    in value, shape and dtype, no argument modified; its code free of races and of
    fastmath=True, with a parallel loop; for an x of 8 MiB or more, nothing allocated but
    the two outputs (and small arrays)."""
    from normkit.checks.unit7 import check_compiled_memory, check_dtype, code_problems

    kernel = fused_kernel()
    code_problems(kernel)
    case = f"for x {x.shape} {x.dtype}, eps {eps:g}"
    want_y, want_stream = exact_fused(x, residual, weight, eps)
    untouched = guard_inputs(x=x, residual=residual, weight=weight)
    result = kernel(x, residual, weight, eps)
    untouched(case)
    if not (isinstance(result, tuple) and len(result) == 2):
        raise CheckFailed(f"fused_add_rms_norm {case}: return (y, stream), got "
                          f"{type(result).__name__}.\n  Where: the kernel's return")
    y, stream = result
    if all(isinstance(a, np.ndarray) and a.shape == x.shape for a in result) and \
            np.allclose(y, want_stream, rtol=1e-3, atol=1e-3) and \
            np.allclose(stream, want_y, rtol=1e-3, atol=1e-3):
        raise CheckFailed(f"y and stream {case} hold each other's values.\n  Likely cause: "
                          "the two outputs were swapped: return (y, stream), the norm first")
    for name, actual in (("y", y), ("stream", stream)):
        check_dtype(actual, f"{name} {case}", x)
    assert_close(stream, want_stream, f"stream {case}",
                 mistakes={"the stream is the residual as it was: x was never added": residual,
                           "the stream is x alone: the residual was never added": x},
                 **tolerance(x.dtype))
    assert_close(y, want_y, f"y {case}", mistakes=fused_mistakes(x, residual, weight, eps),
                 **tolerance(x.dtype, length=x.shape[1], depth=4))
    check_compiled_memory(kernel, (x, residual, weight, eps), x, "y and stream", outputs=2)


def _fused_rows(dtype):
    """(x (2, 3), residual (2, 3), weight (3,), eps) of dtype: the compile step's call."""
    rng = np.random.default_rng(0)
    x, r, w = (np.ascontiguousarray(rng.standard_normal(s).astype(dtype))
               for s in ((2, 3), (2, 3), (3,)))
    return x, r, w, 1e-6


def compile_9_5(hidden):
    from normkit.checks.unit7 import compile_rows

    compile_rows(fused_kernel(), _fused_rows, hidden)


@exercise("9.5", "fused_add_norm.fused_add_rms_norm", compile=compile_9_5)
def visible_9_5():
    rng = np.random.default_rng(0)
    f32 = np.float32
    check_fused(rng.standard_normal((2048, 1024)).astype(f32),  # 8 MiB: memory measured
                (3 * rng.standard_normal((2048, 1024))).astype(f32),
                (1 + 0.5 * rng.standard_normal(1024)).astype(f32))
    check_fused(rng.standard_normal((7, 7)).astype(f32), rng.standard_normal((7, 7)).astype(f32),
                rng.standard_normal(7).astype(f32), eps=1e-5)  # R == H
    check_fused((1e-3 * rng.standard_normal((8, 64))).astype(f32),  # mean square < eps
                (1e-3 * rng.standard_normal((8, 64))).astype(f32), np.ones(64, f32), eps=1e-5)
    check_fused(rng.standard_normal((33, 257)), rng.standard_normal((33, 257)),
                rng.standard_normal(257))  # float64, H odd
