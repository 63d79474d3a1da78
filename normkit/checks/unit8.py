"""Unit 8's checks: Exercises 8.1 (QKNormSelfAttention), 8.2 (dyt_forward), 8.3
(dyt_backward), 8.4 (DyTFunction) and 8.5 (AdaLNZeroBlock).

8.1 loads your attention's weights into a reference written with torch's own operations
(torch's RMSNorm inside yours too, normkit.testing.torch_norms, so that only the wiring is
graded) and compares the output and every gradient under a random upstream gradient within
the error model's tolerance; 8.2 and 8.3 compare your kernels with torch's DyT computed
exactly (float64, rounded to x's dtype); 8.4 runs the provided DyT module over your
Function against torch's, and torch's gradcheck; 8.5 asserts your block's exact identity
at initialization and its gradient path there, then loads the weights of a reference block
made random into yours and compares the output and every gradient (x, c, each parameter).
A wrong result is matched against what each
classic mistake gives, computed exactly, to name its likely cause. Your code is imported
when a check runs, so it is always your file as it is now.
"""

import copy
import math

import numpy as np
import torch
import torch.nn.functional as F

from normkit.checks import exercise
from normkit.checks.unit5 import assert_dropout_off, given
from normkit.conditioning import EPS, AdaLNBlock  # EPS: DiT's norms' eps, 1e-6
from normkit.testing import (
    CheckFailed,
    assert_close,
    assert_computed_with,
    assert_same_computation,
    counted_calls,
    encoder_tolerance,
    guard_inputs,
    norm_tolerance,
    perturb_,
    tolerance,
    torch_norms,
    torch_tensor_close,
)

# Exercise 8.1: QKNormSelfAttention ---------------------------------------------------------


class ReferenceAttention(torch.nn.Module):
    """QK-norm self-attention written with torch's operations, with QKNormSelfAttention's
    parameter names (in_proj_weight, in_proj_bias, out_proj, q_norm, k_norm), so that the
    state_dict of yours loads into it. forward(x, mistake=None): (N, S, E); mistake, one of
    MISTAKES' keys, computes what that classic mistake gives instead. dropout: on the
    attention weights in training mode."""

    def __init__(self, d_model, nhead, eps, bias=True, is_causal=False, dropout=0.0):
        super().__init__()
        d = d_model // nhead  # D
        self.nhead, self.eps, self.is_causal, self.dropout = nhead, eps, is_causal, dropout
        self.in_proj_weight = torch.nn.Parameter(torch.empty(3 * d_model, d_model))
        self.in_proj_bias = torch.nn.Parameter(torch.empty(3 * d_model)) if bias else None
        self.out_proj = torch.nn.Linear(d_model, d_model, bias=bias)
        self.q_norm = torch.nn.RMSNorm(d, eps=eps)
        self.k_norm = torch.nn.RMSNorm(d, eps=eps)

    def forward(self, x, mistake=None):
        n, s, e = x.shape
        d = e // self.nhead
        qkv = F.linear(x, self.in_proj_weight, self.in_proj_bias)  # (N, S, 3E)
        q, k, v = (t.reshape(n, s, self.nhead, d).transpose(1, 2)
                   for t in qkv.chunk(3, dim=-1))  # (N, H, S, D) each
        if mistake == "no gain":
            q, k = (F.rms_norm(t, (d,), None, self.eps) for t in (q, k))
        else:  # (through the modules: a wrong attention's check compares their calls)
            k = k if mistake == "unnormalized keys" else self.k_norm(k)
            q = self.q_norm(q)
        if mistake == "values too":
            v = F.rms_norm(v, (d,), None, self.eps)
        scores = q @ k.transpose(-1, -2)  # (N, H, S, S)
        if mistake != "no scale":
            scores = scores / math.sqrt(d)
        if mistake == "after the dot product":  # the unnormalized logits, normalized
            raw = F.linear(x, self.in_proj_weight, self.in_proj_bias).chunk(3, dim=-1)
            qr, kr = (t.reshape(n, s, self.nhead, d).transpose(1, 2) for t in raw[:2])
            scores = F.rms_norm(qr @ kr.transpose(-1, -2) / math.sqrt(d), (s,), None,
                                self.eps)  # (N, H, S, S)
        if self.is_causal and mistake != "no mask":
            future = torch.ones(s, s, dtype=torch.bool).triu(1)  # (S, S)
            scores = scores.masked_fill(future, float("-inf"))
        weights = F.dropout(scores.softmax(dim=-1), self.dropout, self.training)  # (N, H, S, S)
        heads = weights @ v  # (N, H, S, D)
        return self.out_proj(heads.transpose(1, 2).reshape(n, s, e))  # (N, S, E)


MISTAKES = {
    "values too": "the values were normalized too: QK-norm normalizes the queries and the "
                  "keys, the two sides of the dot product, and leaves the values as they are",
    "no gain": "the gains are missing: q_norm and k_norm each scale the normalized vectors by "
               "their weight (D,); normalizing alone bounds every logit by sqrt(D), a "
               "temperature the model could not learn",
    "unnormalized keys": "the keys are not normalized: QK-norm normalizes both sides of the dot "
                         "product, the queries with q_norm and the keys with k_norm",
    "after the dot product": "the logits were normalized after the dot product: QK-norm "
                             "normalizes each query and key before it",
    "no scale": "the logits lack the 1 / sqrt(D) scale: normalized or not, q . k is divided by "
                "sqrt(D) before the softmax",
    "no mask": "the causal mask is missing: with is_causal, each position attends to itself "
               "and the positions before it only",
}


def attention_mistakes(theirs, x):
    """mistakes(grad_output) for assert_same_computation: {"output": {likely cause: what
    the attention gives under that mistake}}, theirs (a ReferenceAttention) computed
    exactly (float64)."""
    exact, h = copy.deepcopy(theirs).double(), x.double()  # float64 copies
    with torch.no_grad():
        found = {cause: exact(h, mistake) for mistake, cause in MISTAKES.items()
                 if mistake != "no mask" or theirs.is_causal}
    return lambda _: {"output": found}


def check_norms(ours, d_model, nhead, case):
    """ours.q_norm and ours.k_norm are two norms, each with a gain of shape (D,)."""
    d = d_model // nhead
    norms = [getattr(ours, name, None) for name in ("q_norm", "k_norm")]
    for name, norm in zip(("q_norm", "k_norm"), norms):
        if not isinstance(norm, torch.nn.Module):
            raise CheckFailed(f"{name} {case}: expected a module (an RMSNorm built with "
                              f"make_norm), got {type(norm).__name__}")
        weight = getattr(norm, "weight", None)
        if weight is None:
            raise CheckFailed(f"{name} {case} has no weight.\n  Likely cause: {name} has no "
                              "gain: QK-norm's RMSNorms scale each normalized head by a "
                              "learned weight (D,) (elementwise_affine=True).")
        if tuple(weight.shape) == (d_model,) and d_model != d:
            raise CheckFailed(
                f"{name}.weight {case} has shape ({d_model},), expected ({d},).\n  Likely "
                f"cause: {name} normalizes over the whole model dimension E = {d_model}, before "
                "the heads are split. That is the other convention, OLMo 2's (and a sound "
                f"one); this exercise asks for Gemma 3's and ViT-22B's: an RMSNorm over each "
                f"head's dimension D = {d}, after the split.")
        if tuple(weight.shape) != (d,):
            raise CheckFailed(f"{name}.weight {case} has shape {tuple(weight.shape)}, "
                              f"expected ({d},): one gain per dimension of a head")
    if norms[0] is norms[1]:
        raise CheckFailed(f"q_norm is k_norm {case}.\n  Likely cause: one norm serves queries "
                          "and keys: each has its own gain, so build two.")


def check_qk_attention(shape=(2, 5, 8), nhead=2, is_causal=False, bias=True, eps=1e-6,
                       dtype=torch.float32, seed=0, scale=3.0, dropout=0.0, training=True):
    """Your QKNormSelfAttention (torch's RMSNorm inside) against ReferenceAttention with the
    same weights, the gains and biases made random, on an input of standard deviation
    `scale` (so that a norm left out shows): output and every gradient under a random
    upstream gradient, within the error model's tolerance for one layer (normkit.testing.
    encoder_tolerance); a wrong output is matched against MISTAKES. With dropout: in
    evaluation mode (not training), where two calls must agree, or in training mode with a
    dropout of 1.0 alone, which zeroes every attention weight whatever the random draws (at
    grading your attention draws them in another process)."""
    from normlib.qk_norm import QKNormSelfAttention

    n, s, e = shape
    torch.manual_seed(seed)
    case = (f"for x {shape} {dtype}, nhead={nhead}, is_causal={is_causal}, bias={bias}, "
            f"eps={eps}" + (f", dropout {dropout} in {'training' if training else 'eval'} "
                            "mode" if dropout else ""))
    assert not training or dropout in (0.0, 1.0), "random draws are not compared"
    with torch_norms():
        ours = QKNormSelfAttention(e, nhead, dropout=dropout, bias=bias, eps=eps,
                                   dtype=given(dtype))
    check_norms(ours, e, nhead, case)
    ours.is_causal = is_causal
    perturb_(ours, seed + 1)  # gains away from 1, biases away from 0
    theirs = ReferenceAttention(e, nhead, eps, bias, is_causal, dropout).to(dtype)
    mine, wanted = set(ours.state_dict()), set(theirs.state_dict())
    if mine != wanted:
        raise CheckFailed(f"parameters {case}: missing {sorted(wanted - mine)}, unexpected "
                          f"{sorted(mine - wanted)}: QK-norm adds q_norm and k_norm alone")
    theirs.load_state_dict(ours.state_dict())
    x = scale * torch.randn(shape, dtype=dtype) + 1  # (N, S, E)
    if not training:
        ours.eval()
        theirs.eval()
        assert_dropout_off(ours, x, case)
    assert_same_computation(ours, theirs, x, case, seed, encoder_tolerance(x, 1, e),
                            attention_mistakes(theirs, x))


@exercise("8.1", "qk_norm.QKNormSelfAttention")
def visible_8_1():
    check_qk_attention()
    check_qk_attention(is_causal=True, seed=1)
    check_qk_attention((2, 6, 12), nhead=3, bias=False, eps=1e-5, seed=2)
    check_qk_attention(dropout=0.5, training=False, seed=3)  # dropout off in eval mode
    check_qk_attention(dropout=1.0, seed=4)  # on the attention weights in training mode
    # float64 (its precision, to the last digits), an eps on the scale of the heads' RMS
    check_qk_attention(eps=0.5, dtype=torch.float64, seed=5, scale=0.5)


# Exercise 8.2: dyt_forward ------------------------------------------------------------------


def dyt_parameters(x, seed):
    """(alpha (1,), weight (C,), bias (C,)) in x's dtype, random: alpha about 0.5 (as DyT
    starts), weight and bias away from 1 and 0, so that a misplaced one shows."""
    rng = np.random.default_rng(seed)
    c = x.shape[-1]
    alpha = (0.5 + 0.3 * rng.random(1)).astype(x.dtype)  # (1,)
    weight = (1 + 0.5 * rng.standard_normal(c)).astype(x.dtype)  # (C,)
    bias = rng.standard_normal(c).astype(x.dtype)  # (C,)
    return alpha, weight, bias


def torch_dyt(x, alpha, weight, bias):
    """DyT computed by torch, as float64 tensors (autograd on whichever require grad)."""
    return weight * torch.tanh(alpha * x) + bias  # (*B, C)


def exact(*arrays):
    """The arrays as float64 tensors requiring grad (the exact reference's inputs)."""
    return [torch.tensor(np.asarray(a), dtype=torch.float64, requires_grad=True) for a in arrays]


def forward_mistakes(x, alpha, weight, bias):
    """{likely cause: the y that mistake gives}, exactly (float64), rounded to x's dtype."""
    x64, a, w, b = (np.asarray(v, dtype=np.float64) for v in (x, alpha, weight, bias))
    found = {
        "alpha scales the tanh's output, not its input: DyT is weight * tanh(alpha * x) + "
        "bias": w * a * np.tanh(x64) + b,
        "alpha is missing: the tanh's input is alpha * x, its learned scale":
            w * np.tanh(x64) + b,
        "the bias is inside the tanh: DyT adds it after, as a norm's affine does":
            w * np.tanh(a * x64 + b),
        "the tanh is missing: DyT squashes alpha * x elementwise": w * a * x64 + b}
    if x.ndim > 1 and x.shape[-2] == x.shape[-1]:
        found["the weight and bias were applied along the second-to-last axis (channels "
              "first, as the authors' code for images does): here the channels are the last "
              "axis, x (*B, C)"] = w[:, None] * np.tanh(a * x64) + b[:, None]
    return {cause: v.astype(x.dtype) for cause, v in found.items()}


def check_dyt_forward(x, seed=0):
    """Your y against torch's DyT computed exactly (float64, rounded to x's dtype), in value,
    shape and dtype, within the error model's tolerance for three stages (alpha * x, the
    tanh, the affine); x and the parameters must be left as they were."""
    from normlib.dyt import dyt_forward

    alpha, weight, bias = dyt_parameters(x, seed)
    expected = torch_dyt(*exact(x, alpha, weight, bias)).detach().numpy().astype(x.dtype)
    untouched = guard_inputs(x=x, alpha=alpha, weight=weight, bias=bias)
    y = dyt_forward(x, alpha, weight, bias)
    case = f"for x {x.shape} {x.dtype}, alpha={alpha[0]:.3g}"
    assert_close(y, expected, f"y {case}", mistakes=forward_mistakes(x, alpha, weight, bias),
                 **tolerance(x.dtype, depth=3))
    untouched(case)


@exercise("8.2", "dyt.dyt_forward")
def visible_8_2():
    rng = np.random.default_rng(0)
    check_dyt_forward(4 * rng.standard_normal((2, 4, 4)).astype(np.float32))  # saturated
    check_dyt_forward(rng.standard_normal((3, 5)).astype(np.float32), seed=1)
    check_dyt_forward(rng.standard_normal((2, 3, 6)), seed=2)  # float64


# Exercise 8.3: dyt_backward -----------------------------------------------------------------


def backward_mistakes(g, x, alpha, weight):
    """{name: {likely cause: the gradient that mistake gives}} for dyt_backward, exactly
    (float64), rounded to x's dtype ({} for an empty x: nothing to tell apart)."""
    if x.size == 0:
        return {}
    g64, x64, a, w = (np.asarray(v, dtype=np.float64) for v in (g, x, alpha, weight))
    lead = tuple(range(x.ndim - 1))
    t = np.tanh(a * x64)  # (*B, C)
    inner = g64 * w * (1 - t * t)  # (*B, C): dL/d(alpha x)
    found = {
        "dx": {"dx lacks the factor alpha: d tanh(alpha x) / dx = alpha (1 - tanh^2)":
               inner,
               "the tanh's derivative is 1 - tanh, not 1 - tanh^2": g64 * w * (1 - t) * a,
               "dx ignores the weight: the upstream gradient reaches the tanh multiplied by "
               "it": g64 * (1 - t * t) * a},
        "dalpha": {"dalpha lacks the factor x: d tanh(alpha x) / d alpha = x (1 - tanh^2)":
                   inner.sum(keepdims=True).reshape(1),
                   "dalpha ignores the weight: the upstream gradient reaches the tanh "
                   "multiplied by it": (g64 * (1 - t * t) * x64).sum(keepdims=True).reshape(1),
                   "dalpha is a mean, not a sum: alpha scales every element, and each one's "
                   "gradient adds": (inner * x64).mean(keepdims=True).reshape(1)},
        "dweight": {"dweight sums grad * x, not grad * tanh(alpha x): the weight multiplies "
                    "the tanh's output": (g64 * x64).sum(axis=lead),
                    "dweight is a mean over the rows, not a sum": (g64 * t).mean(axis=lead)},
        "dbias": {"dbias is a mean over the rows, not a sum": g64.mean(axis=lead)}}
    return {name: {cause: v.astype(x.dtype) for cause, v in causes.items()}
            for name, causes in found.items()}


def check_dyt_backward(x, seed=0):
    """Your dx, dalpha, dweight and dbias against torch autograd's for DyT under a random
    upstream gradient, computed exactly (float64, rounded to x's dtype), in value, shape and
    dtype, within the error model's tolerances (forward and backward; dalpha sums every
    element, dweight and dbias every row)."""
    from normlib.dyt import dyt_backward

    alpha, weight, bias = dyt_parameters(x, seed)
    g = np.random.default_rng(seed + 100).standard_normal(x.shape).astype(x.dtype)
    inputs = exact(x, alpha, weight, bias)
    torch_dyt(*inputs).backward(torch.tensor(g, dtype=torch.float64))
    wanted = [t.grad.numpy().astype(x.dtype) for t in inputs]  # dx, dalpha, dweight, dbias
    untouched = guard_inputs(grad_output=g, x=x, alpha=alpha, weight=weight)
    result = dyt_backward(g, x, alpha, weight)
    case = f"for x {x.shape} {x.dtype}, alpha={alpha[0]:.3g}"
    if not (isinstance(result, tuple) and len(result) == 4):
        raise CheckFailed(f"dyt_backward {case}: return (dx, dalpha, dweight, dbias).")
    dalpha = np.asarray(result[1])
    if dalpha.shape != (1,) and dalpha.size != 1:
        raise CheckFailed(f"dalpha {case} has shape {dalpha.shape}, expected (1,).\n  Likely "
                          "cause: dalpha was not summed over the elements: alpha is one "
                          "number for the whole layer, so its gradient sums every element's.")
    rows = x.size // x.shape[-1]
    tols = {"dx": tolerance(x.dtype, depth=5), "dalpha": tolerance(x.dtype, x.size, depth=5),
            "dweight": tolerance(x.dtype, rows, depth=4), "dbias": tolerance(x.dtype, rows)}
    mistakes = backward_mistakes(g, x, alpha, weight)
    for name, actual, expected in zip(("dx", "dalpha", "dweight", "dbias"), result, wanted):
        assert_close(actual, expected, f"{name} {case}", mistakes=mistakes.get(name),
                     **tols[name])
    untouched(case)


@exercise("8.3", "dyt.dyt_backward")
def visible_8_3():
    rng = np.random.default_rng(0)
    check_dyt_backward(rng.standard_normal((3, 5)).astype(np.float32))
    check_dyt_backward(3 * rng.standard_normal((2, 4, 6)).astype(np.float32), seed=1)
    check_dyt_backward(rng.standard_normal((4, 3)), seed=2)  # float64


# Exercise 8.4: DyTFunction ------------------------------------------------------------------


class TorchDyT(torch.nn.Module):
    """DyT in torch's operations, with the provided DyT's parameter names."""

    def __init__(self, c):
        super().__init__()
        self.alpha = torch.nn.Parameter(torch.full((1,), 0.5))
        self.weight = torch.nn.Parameter(torch.ones(c))
        self.bias = torch.nn.Parameter(torch.zeros(c))

    def forward(self, x):
        return torch_dyt(x, self.alpha, self.weight, self.bias)  # (*B, C)


def function_mistakes(theirs, x):
    """mistakes(grad_output) for assert_same_computation: the backward given the forward's
    output y in place of its input x; dweight and dbias swapped."""
    t, h = copy.deepcopy(theirs).double(), x.double()  # float64 copies

    def mistakes(grad_output):
        g = grad_output.double()  # (*B, C)
        with torch.no_grad():
            y = t(h)  # (*B, C)
        alpha, weight = t.alpha.detach(), t.weight.detach()
        s = torch.tanh(alpha * y)  # (*B, C): the tanh of the wrong input
        inner = g * weight * (1 - s * s)  # (*B, C)
        lead = tuple(range(x.dim() - 1))
        on_y = ("the backward was given the forward's output y where dyt_backward needs its "
                "input x: save the input (ctx.save_for_backward(input, ...))")
        real = torch.tanh(alpha * h)  # (*B, C)
        swapped = ("weight.grad and bias.grad are swapped: backward returns one gradient per "
                   "argument of forward, in its order (input, alpha, weight, bias)")
        return {"input.grad": {on_y: alpha * inner},
                "alpha.grad": {on_y: (inner * y).sum().reshape(1)},
                "weight.grad": {on_y: (g * s).sum(lead), swapped: g.sum(lead)},
                "bias.grad": {swapped: (g * real).sum(lead)}}

    return mistakes


WRONG_COUNT = ("backward returned the wrong number of gradients {case}.\n  Likely cause: "
               "backward returns one gradient per argument of forward: (dx, dalpha, dweight, "
               "dbias).")


def check_dyt_module(shape, dtype=torch.float32, seed=0, scale=2.0):
    """The provided DyT module (which calls your DyTFunction) against TorchDyT with the same
    random parameters, computed exactly (float64): output, input gradient and parameter
    gradients under a random upstream gradient, in value, shape and dtype, within the error
    model's tolerances; a wrong one named where it is what a classic mistake gives."""
    from normlib.dyt import DyT

    torch.manual_seed(seed)
    c = shape[-1]
    ours = DyT(c, dtype=dtype)
    theirs = TorchDyT(c).to(dtype)
    with torch.no_grad():
        ours.alpha.uniform_(0.4, 0.9)
        ours.weight.normal_(1.0, 0.5)
        ours.bias.normal_()
    theirs.load_state_dict(ours.state_dict())
    x = scale * torch.randn(shape, dtype=dtype)  # (*B, C)
    case = f"for x {tuple(shape)} {dtype}"
    tol = tolerance(dtype, math.prod(shape), depth=5)
    try:
        assert_same_computation(ours, theirs, x, case, seed, tol,
                                function_mistakes(theirs, x))
    except RuntimeError as error:
        if "incorrect number of gradients" not in str(error):
            raise
        raise CheckFailed(WRONG_COUNT.format(case=case)) from None


KERNELS = ("dyt_forward", "dyt_backward")  # what DyTFunction computes with


def counted_kernels(values=None):
    """Inside the block, each call of the NumPy kernels (KERNELS, in normlib.dyt) appends its
    name to the list it yields (and its arguments and result to values, if given)."""
    import normlib.dyt

    return counted_calls((normlib.dyt,), KERNELS, values)


def check_uses_kernels(shape, seed=0):
    """DyTFunction's forward and backward compute with your NumPy kernels, dyt_forward and
    dyt_backward: called on the input and the upstream gradient, their results are what the
    Function returns."""
    from normlib.dyt import DyTFunction

    gen = torch.Generator().manual_seed(seed)
    x, g = (torch.randn(shape, generator=gen, dtype=torch.float64) for _ in range(2))
    params = [torch.full((1,), 0.5, dtype=torch.float64), torch.ones(shape[-1], dtype=x.dtype),
              torch.zeros(shape[-1], dtype=x.dtype)]
    values = []
    with counted_kernels(values) as calls:
        y = DyTFunction.apply(x.requires_grad_(), *params)
        y.backward(g)
    assert_computed_with("DyTFunction", "8.2 and 8.3", KERNELS, calls, values, x, y, g)


def check_two_calls(shape, seed=0):
    """Two DyTFunction calls in one graph, y = f(x1) + 2 f(x2), the same parameters
    (float64): each input's gradient is its own call's, against torch's, exactly."""
    from normlib.dyt import DyTFunction

    gen = torch.Generator().manual_seed(seed)
    x1, x2, g = (torch.randn(shape, generator=gen, dtype=torch.float64) for _ in range(3))
    alpha = torch.full((1,), 0.7, dtype=torch.float64)
    weight, bias = 1 + torch.randn(shape[-1], generator=gen, dtype=torch.float64), \
        torch.randn(shape[-1], generator=gen, dtype=torch.float64)
    inputs = [x1.clone().requires_grad_(), x2.clone().requires_grad_()]
    y = DyTFunction.apply(inputs[0], alpha, weight, bias) + \
        2 * DyTFunction.apply(inputs[1], alpha, weight, bias)
    grads = torch.autograd.grad(y, inputs, g)

    def dx(grad, x):  # (*shape): DyT's input gradient, exactly
        t = torch.tanh(alpha * x)
        return grad * weight * (1 - t * t) * alpha

    shared = {"x1.grad is what backward gives with the second call's saved tensors: the two "
              "calls share what forward saved: keep it on ctx (ctx.save_for_backward), not "
              "on the class or in a global": dx(g, x2).numpy()}
    for name, actual, exact_dx in zip(("x1.grad", "x2.grad"), grads, (dx(g, x1), dx(2 * g, x2))):
        torch_tensor_close(actual, exact_dx, f"{name} for y = f(x1) + 2 f(x2), x1 and x2 "
                           f"{shape}", mistakes=shared if name == "x1.grad" else None,
                           **tolerance(torch.float64, depth=5))


@exercise("8.4", "dyt.DyTFunction")
def visible_8_4():
    from normlib.dyt import DyTFunction

    check_dyt_module((2, 3, 4))
    check_dyt_module((5, 6), dtype=torch.float64, seed=1)
    check_two_calls((3, 5))
    check_uses_kernels((2, 6))
    # gradcheck: your backward against finite differences of your forward, in float64
    gen = torch.Generator().manual_seed(0)
    x, w, b = (torch.randn(s, generator=gen, dtype=torch.float64, requires_grad=True)
               for s in ((3, 5), (5,), (5,)))
    alpha = torch.tensor([0.6], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(DyTFunction.apply, (x, alpha, w, b)), \
        "gradcheck: your backward disagrees with finite differences of your forward"


# Exercise 8.5: AdaLNZeroBlock -----------------------------------------------------------------


CHUNKS = ("shift of the attention", "scale of the attention", "gate of the attention",
          "shift of the MLP", "scale of the MLP", "gate of the MLP")  # DiT's order
GATES = (2, 5)  # the gates' chunks: at initialization the only rows with a gradient


class ReferenceBlock(torch.nn.Module):
    """adaLN-Zero's block written out with torch's functions, with AdaLNZeroBlock's parameter
    names (attn, mlp, modulation.1: the norms have none), so that the state_dict of yours
    loads into it. forward(x, c, mistake=None): (N, T, E); mistake, one of BLOCK_MISTAKES'
    keys, computes what that classic mistake gives instead."""

    def __init__(self, d_model, nhead):
        super().__init__()
        provided = AdaLNBlock(d_model, nhead)  # (its attention and MLP, and their names)
        self.attn, self.mlp, self.modulation = provided.attn, provided.mlp, provided.modulation
        self.eps = EPS

    def forward(self, x, c, mistake=None):
        e = x.shape[-1]
        linear = self.modulation[1]
        pre = c if mistake == "no SiLU" else F.silu(c)  # (N, E)
        m = F.linear(pre, linear.weight, linear.bias).reshape(-1, 6, e)  # (N, 6, E)
        order = {"order": (0, 2, 4, 1, 3, 5)}.get(mistake, range(6))  # shifts, scales, gates
        shift_a, scale_a, gate_a, shift_m, scale_m, gate_m = (m[:, k] for k in order)
        eps = 1e-5 if mistake == "eps" else self.eps

        def per_sequence(v, mistaken):  # (N, E) -> broadcastable against (N, T, E)
            return v[None] if mistake == mistaken else v.unsqueeze(1)

        def adaln(h, shift, scale):  # (N, T, E)
            one = 0 if mistake == "no 1 +" else 1
            shift, scale = (scale, shift) if mistake == "swapped" else (shift, scale)
            shift, scale = per_sequence(shift, "modulation"), per_sequence(scale, "modulation")
            if mistake == "modulate first":
                return F.layer_norm(h * (one + scale) + shift, (e,), eps=eps)
            return F.layer_norm(h, (e,), eps=eps) * (one + scale) + shift

        x0 = x
        branch = self.attn(adaln(x, shift_a, scale_a))  # (N, T, E)
        if mistake == "whole residual":
            x = per_sequence(gate_a, "gate") * (x + branch)
        else:
            x = x + per_sequence(gate_a, "gate") * branch
        branch = self.mlp(adaln(x0 if mistake == "block input" else x, shift_m, scale_m))
        if mistake == "MLP ungated":
            return x + branch
        if mistake == "whole residual":
            return per_sequence(gate_m, "gate") * (x + branch)
        return x + per_sequence(gate_m, "gate") * branch  # (N, T, E)


BLOCK_MISTAKES = {
    "no 1 +": "the scale is applied without its 1 +: adaLN multiplies the normalized x by "
              "(1 + scale), so that a zero modulation leaves it as it is",
    "swapped": "shift and scale are swapped: the first chunk of each sublayer is its shift, "
               "added; the second its scale, which multiplies (DiT's order)",
    "order": "the six chunks are not in DiT's order: shift, scale, gate of the attention, "
             "then shift, scale, gate of the MLP",
    "whole residual": "the gate multiplies the whole residual, gate * (x + F): it scales the "
                      "sublayer's output F alone, x + gate * F, so that x passes untouched",
    "MLP ungated": "the MLP's branch is not gated: each sublayer's output is multiplied by "
                   "its own gate before it is added",
    "no SiLU": "SiLU is missing: the modulation reads SiLU(c), then its Linear",
    "modulate first": "the modulation is applied before the norm: adaLN normalizes x, then "
                      "scales and shifts the result",
    "gate": "a gate (N, E) multiplies the branch (N, T, E) without unsqueeze(1): it "
            "broadcasts over the wrong axis, sequence n's gate applied at position n of "
            "every sequence; give it a length-1 sequence axis, (N, 1, E)",
    "modulation": "shift and scale (N, E) are used without unsqueeze(1): they broadcast over "
                  "the wrong axis, sequence n's applied at position n of every sequence; give "
                  "them a length-1 sequence axis, (N, 1, E)",
    "block input": "the MLP's branch reads the block's input x, not x after the attention's "
                   "residual step: the sublayers run one after the other",
    "eps": "the norms' eps is torch's default 1e-5, not DiT's 1e-6 (EPS)",
}


def block_mistakes(reference, x, c):
    """{likely cause: the output that mistake gives}, reference (a ReferenceBlock) computed
    exactly (float64); the broadcasting mistakes only where N == T (elsewhere they raise)."""
    exact = copy.deepcopy(reference).double()
    n, t, _ = x.shape
    with torch.no_grad():
        return {cause: exact(x.double(), c.double(), mistake)
                for mistake, cause in BLOCK_MISTAKES.items()
                if mistake not in ("gate", "modulation") or n == t}


def gradient_mistakes(reference, x, c, g):
    """{"modulation.1.weight.grad" and "...bias.grad": {likely cause: that gradient under
    that mistake, upstream gradient g}}, reference computed exactly (float64); the
    broadcasting mistakes only where N == T."""
    exact = copy.deepcopy(reference).double()
    n, t, _ = x.shape
    found = {"modulation.1.weight.grad": {}, "modulation.1.bias.grad": {}}
    for mistake, cause in BLOCK_MISTAKES.items():
        if mistake in ("gate", "modulation") and n != t:
            continue
        exact.zero_grad()
        exact(x.double(), c.double(), mistake).backward(g.double())
        for name in ("weight", "bias"):
            found[f"modulation.1.{name}.grad"][cause] = \
                getattr(exact.modulation[1], name).grad.clone()
    return found


def adaln_tolerance(x):
    """tolerance() for adaLN-Zero's block on x (N, T, E): its output and gradients, forward
    and backward through 12 stages (the modulation's SiLU and Linear, 2 norms and their
    modulation, the attention's 5, the MLP's 2, the gates), reductions up to the longest of
    6E (c's gradient), the MLP's 4E and N * T (a weight's gradient); cond from normalizing x
    over E, with DiT's eps."""
    n, t, e = x.shape
    return norm_tolerance(x, (-1,), EPS, depth=2 * 12, length=max(6 * e, n * t))


def check_adaln_structure(block, d_model, nhead, case):
    """Your block's parameters are the reference's, by name and shape (a norm's own affine,
    a modulation without SiLU, a wrong size named), and its norms have DiT's eps."""
    want = {k: tuple(v.shape) for k, v in ReferenceBlock(d_model, nhead).state_dict().items()}
    have = {k: tuple(v.shape) for k, v in block.state_dict().items()}
    extra, missing = sorted(set(have) - set(want)), sorted(set(want) - set(have))
    if any(k.startswith(("attn_norm.", "mlp_norm.")) for k in extra):
        raise CheckFailed(f"parameters {case}: unexpected {extra}.\n  Likely cause: the norms "
                          "keep their own affine: adaLN's norms have none "
                          "(elementwise_affine=False); the condition's scale and shift take "
                          "its place.")
    if "modulation.1.weight" in missing and {"modulation.weight", "modulation.0.weight"} & \
            set(have):
        raise CheckFailed(f"parameters {case}: the modulation's Linear is {extra[0]!r}, "
                          "expected 'modulation.1.weight'.\n  Likely cause: SiLU is missing: "
                          "modulation is torch.nn.Sequential(SiLU, Linear(E, 6E)), as DiT's "
                          "adaLN_modulation.")
    if extra or missing:
        raise CheckFailed(f"parameters {case}: missing {missing}, unexpected {extra}.\n  "
                          "Where: the names of your submodules: attn, mlp (provided), "
                          "attn_norm, mlp_norm and modulation, as the docstring says")
    wrong = [k for k in want if have[k] != want[k]]
    if wrong:
        raise CheckFailed(f"{wrong[0]} {case} has shape {have[wrong[0]]}, expected "
                          f"{want[wrong[0]]}.\n  Where: the sizes your __init__ builds from "
                          "d_model (E) and nhead")
    for name in ("attn_norm", "mlp_norm"):
        norm = getattr(block, name, None)
        if not isinstance(norm, torch.nn.Module):
            raise CheckFailed(f"{name} {case}: expected a module (a LayerNorm without affine), "
                              f"got {type(norm).__name__}.\n  Where: your __init__")
        if getattr(norm, "eps", EPS) != EPS:
            raise CheckFailed(f"{name}.eps {case} is {norm.eps:g}.\n  Likely cause: "
                              f"{BLOCK_MISTAKES['eps']}.")


def check_zero_init(block, case):
    """The modulation's Linear is zero at initialization, weight and bias (read through
    named_parameters: at grading your block lives in another process)."""
    params = dict(block.named_parameters())
    weight, bias = params["modulation.1.weight"], params["modulation.1.bias"]
    if weight.detach().abs().max() > 0:
        raise CheckFailed(f"modulation.1.weight {case} is not zero at initialization.\n  "
                          "Likely cause: the modulation is not zero-initialized: adaLN-Zero "
                          "starts its Linear's weight and bias at exactly zero (torch's default "
                          "initialization is random).")
    if bias.detach().abs().max() > 0:
        raise CheckFailed(f"modulation.1.bias {case} is not zero at initialization, its "
                          "weight is.\n  Likely cause: only the modulation's weight is zeroed, "
                          "not its bias: the bias alone makes every shift, scale and gate "
                          "non-zero.")


def build_block(d_model, nhead, dtype, seed):
    """Your AdaLNZeroBlock(d_model, nhead) in dtype, built after torch.manual_seed(seed)."""
    from normlib.adaln import AdaLNZeroBlock

    torch.manual_seed(seed)
    return AdaLNZeroBlock(d_model, nhead).to(dtype)


def block_inputs(shape, dtype, seed, scale=1.0, offset=0.0):
    """x (N, T, E) of standard deviation scale about offset, c (N, E) and an upstream
    gradient (N, T, E), random, in dtype."""
    n, t, e = shape
    gen = torch.Generator().manual_seed(seed + 100)
    x = scale * torch.randn(shape, generator=gen, dtype=torch.float64) + offset
    c = 1.5 * torch.randn(n, e, generator=gen, dtype=torch.float64)
    g = torch.randn(shape, generator=gen, dtype=torch.float64)
    return x.to(dtype), c.to(dtype), g.to(dtype)


def run_block(block, x, c, g):
    """[(name, tensor)]: block(x, c), the gradients of x, c and each parameter (sorted by
    name) under the upstream gradient g."""
    x, c = x.detach().clone().requires_grad_(), c.detach().clone().requires_grad_()
    y = block(x, c)
    if not isinstance(y, torch.Tensor):
        raise CheckFailed(f"expected the output to be a torch.Tensor, got {type(y).__name__}"
                          ".\n  Where: the forward's result")
    y.backward(g.to(y.dtype))
    return ([("output", y), ("x.grad", x.grad), ("c.grad", c.grad)]
            + [(f"{name}.grad", p.grad) for name, p in sorted(block.named_parameters())])


def assert_tensor(actual, like, name):
    """actual is a tensor of like's shape and dtype exactly (no broadcast, no cast)."""
    if not isinstance(actual, torch.Tensor):
        raise CheckFailed(f"{name}: expected a torch.Tensor, got {type(actual).__name__}")
    if actual.shape != like.shape or actual.dtype != like.dtype:
        raise CheckFailed(f"{name}: expected shape {tuple(like.shape)} and dtype {like.dtype}, "
                          f"got {tuple(actual.shape)} and {actual.dtype}.\n  Where: the "
                          "result keeps x's shape (N, T, E) and dtype; an (N, E) chunk "
                          "broadcast without unsqueeze(1), or a tensor made in another dtype")


def check_adaln_init(shape=(3, 3, 8), nhead=2, dtype=torch.float32, seed=0, scale=1.0,
                     offset=0.0):
    """Your block at initialization, for random x and c: its output against x (with
    torch.equal), and under a random upstream gradient g the gradients of x, c, every
    parameter and each of the modulation's 6E rows against what adaLN-Zero's
    initialization gives them (the exercise asks you to derive which are zero; the reading
    after section 4's runs explains it)."""
    n, t, e = shape
    case = f"at initialization, for x {shape} {dtype}, nhead={nhead}"
    block = build_block(e, nhead, dtype, seed)
    check_adaln_structure(block, e, nhead, case)
    check_zero_init(block, case)
    x, c, g = block_inputs(shape, dtype, seed, scale, offset)
    found = dict(run_block(block, x, c, g))
    y = found["output"]
    assert_tensor(y, x, f"output {case}")
    reference = ReferenceBlock(e, nhead)
    reference.load_state_dict(block.state_dict())  # (the names and shapes are checked)
    if not torch.equal(y, x):
        causes = {k: v.to(dtype).numpy() for k, v in block_mistakes(reference, x, c).items()}
        torch_tensor_close(y, x, f"output {case} (adaLN-Zero's block starts as the identity, "
                           "exactly)", **adaln_tolerance(x), mistakes=causes)
        raise CheckFailed(f"output {case}: not x exactly (torch.equal), though within rounding."
                          "\n  Where: with every gate zero the block returns x + 0 * F: "
                          "nothing else may touch x")
    assert_tensor(found["x.grad"], x, f"x.grad {case}")
    if not torch.equal(found["x.grad"], g):
        raise CheckFailed(f"x.grad {case} is not the upstream gradient exactly.\n  Where: at "
                          "initialization the block is the identity, so its gradient passes "
                          "through unchanged: only x + gate * F may reach x")
    for name, grad in found.items():
        if name.startswith(("attn.", "mlp.", "c.")) and grad is not None and \
                grad.abs().max() > 0:
            raise CheckFailed(f"{name} {case} is not zero.\n  Where: at initialization every "
                              "gate is zero, so no gradient reaches a sublayer's parameters, "
                              "nor c (through the zero Linear)")
    expected = dict(run_block(reference.double(), x.double(), c.double(), g.double()))
    tol, wrong = adaln_tolerance(x), gradient_mistakes(reference, x, c, g)
    for name in ("modulation.1.weight.grad", "modulation.1.bias.grad"):
        grad = found.get(name)
        if grad is None:
            raise CheckFailed(f"{name} is None {case}.\n  Where: no gradient reached the "
                              "modulation: is its output used in the forward, and not detached?")
        rows = grad.reshape(6, e, -1)  # (chunk, E, E or 1)
        for k, chunk in enumerate(CHUNKS):
            if k in GATES:
                causes = {cause: v.reshape(6, e, -1)[k].to(dtype).numpy()
                          for cause, v in wrong[name].items()}
                torch_tensor_close(rows[k], expected[name].reshape(6, e, -1)[k].to(dtype),
                                   f"{name}, rows of the {chunk}, {case}", **tol,
                                   mistakes=causes)
                if rows[k].abs().max() == 0:
                    raise CheckFailed(f"{name}, rows of the {chunk}, {case}: zero.\n  Where: "
                                      "the gate's gradient is its branch's output against "
                                      "the upstream gradient: the gate must multiply the "
                                      "branch, from the modulation's output")
            elif rows[k].abs().max() > 0:
                raise CheckFailed(f"{name}, rows of the {chunk}, {case}: not zero.\n  Where: "
                                  "with a zero gate the branch, so its shift and scale, "
                                  "cannot move the output: their gradient is exactly zero")


def check_adaln_block(shape=(3, 3, 8), nhead=2, dtype=torch.float32, seed=0, scale=1.0,
                      offset=0.0):
    """Your block with the weights of a reference block made random (the modulation's
    too, so that every shift, scale and gate counts), against that reference computed
    exactly (float64): the output and the gradients of x, c and every parameter under a
    random upstream gradient, in value, shape and dtype, within the error model's
    tolerance (adaln_tolerance); a wrong output matched against BLOCK_MISTAKES."""
    n, t, e = shape
    case = f"for x {shape} {dtype}, nhead={nhead}, random weights"
    block = build_block(e, nhead, dtype, seed)
    check_adaln_structure(block, e, nhead, case)
    torch.manual_seed(seed + 1)
    reference = perturb_(ReferenceBlock(e, nhead), seed + 1, scale=0.5, weight_scale=0.3)
    try:
        block.load_state_dict(reference.state_dict())
    except RuntimeError as error:
        raise CheckFailed(f"the reference's state_dict does not load into your block {case}: "
                          f"{str(error).splitlines()[-1].strip()}\n  Where: your parameters' "
                          "names and shapes") from None
    x, c, g = block_inputs(shape, dtype, seed, scale, offset)
    expected = run_block(reference.double(), x.double(), c.double(), g.double())
    actual = run_block(block, x, c, g)
    names = [[name for name, _ in r] for r in (actual, expected)]
    if names[0] != names[1]:
        raise CheckFailed(f"parameters {case}: {names[0][3:]}, expected {names[1][3:]}")
    tol = adaln_tolerance(x)
    causes = {k: v.to(dtype).numpy() for k, v in block_mistakes(reference, x, c).items()}
    for (name, a), (_, want) in zip(actual, expected):
        if a is None:
            raise CheckFailed(f"{name} is None {case}.\n  Where: {name}, no gradient after "
                              "backward: the parameter is not used by the forward, or is "
                              "detached")
        torch_tensor_close(a, want.to(dtype), f"{name} {case}", **tol,
                           mistakes=causes if name == "output" else None)


def check_adaln_refuses(shape=(2, 3, 8), nhead=2):
    """A c that is not (N, E), one embedding per sequence, raises a ValueError (the provided
    check_block_inputs, first in your forward)."""
    n, t, e = shape
    block = build_block(e, nhead, torch.float32, 0)
    x = torch.zeros(shape)
    for bad in ((e,), (n, t, e), (n + 1, e), (n, e + 1)):
        try:
            block(x, torch.zeros(bad))
        except ValueError:
            continue
        except Exception as error:
            raise CheckFailed(f"c of shape {bad} with x {shape} raised {type(error).__name__}, "
                              "expected a ValueError.\n  Where: keep the provided "
                              "check_block_inputs(x, c, ...) as your forward's first "
                              "line") from None
        raise CheckFailed(f"c of shape {bad} with x {shape} raised no error, expected a "
                          "ValueError.\n  Where: keep the provided check_block_inputs(x, c, "
                          "...) as your forward's first line")


@exercise("8.5", "adaln.AdaLNZeroBlock")
def visible_8_5():
    # N == T first: a chunk broadcast without unsqueeze(1) computes a wrong result, named
    check_adaln_init((3, 3, 8))
    check_adaln_block((3, 3, 8))
    check_adaln_init((2, 5, 12), nhead=3, dtype=torch.float64, seed=1, offset=3.0)
    check_adaln_block((2, 5, 12), nhead=3, seed=2)
    # float64, and x of small spread, where the norms' eps counts
    check_adaln_block((2, 4, 8), nhead=4, dtype=torch.float64, seed=3, scale=0.003)
    check_adaln_refuses()
