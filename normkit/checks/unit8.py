"""Unit 8's checks: Exercises 8.1 (QKNormSelfAttention), 8.2 (dyt_forward), 8.3
(dyt_backward) and 8.4 (DyTFunction).

8.1 loads your attention's weights into a reference written with torch's own operations
(torch's RMSNorm inside yours too, normkit.testing.torch_norms, so that only the wiring is
graded) and compares the output and every gradient under a random upstream gradient within
the error model's tolerance; 8.2 and 8.3 compare your kernels with torch's DyT computed
exactly (float64, rounded to x's dtype); 8.4 runs the provided DyT module over your
Function against torch's, and torch's gradcheck. A wrong result is matched against what each
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
from normkit.testing import (
    CheckFailed,
    assert_close,
    assert_computed_with,
    assert_same_computation,
    counted_calls,
    encoder_tolerance,
    guard_inputs,
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
