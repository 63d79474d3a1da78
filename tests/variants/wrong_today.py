"""Realistic wrong implementations of Unit 8's exercises: every one must fail its graded
check (tests/test_graders.py). Keyed by exercise number, then by the mistake's name.

Targets: 8.1 replaces normlib.qk_norm.QKNormSelfAttention (subclasses of the reference
overriding forward, or __init__), 8.2 normlib.dyt.dyt_forward, 8.3 dyt_backward, 8.4 the
class DyTFunction (the provided DyT module calls whichever is in normlib.dyt), 8.5
normlib.adaln.AdaLNZeroBlock (subclasses of the reference overriding forward, or __init__).
"""

import math

import numpy as np
import torch
import torch.nn.functional as F

import normlib.adaln as adaln
import normlib.dyt as dyt
import normlib.qk_norm as reference
from tests.variants.mistake import Mistake

# Exercise 8.1: QKNormSelfAttention ----------------------------------------------------------


class _Attention(reference.QKNormSelfAttention):
    """The attention written out (as a student writes it without scaled_dot_product_
    attention), with hooks for each mistake: norm_q, norm_k, norm_v, logits, weights."""

    def heads(self, x):
        qkv = F.linear(x, self.in_proj_weight, self.in_proj_bias)  # (N, S, 3E)
        return [self.split_heads(t) for t in qkv.chunk(3, dim=-1)]  # (N, H, S, D) each

    def norm_q(self, q):
        return self.q_norm(q)

    def norm_k(self, k):
        return self.k_norm(k)

    def norm_v(self, v):
        return v

    def logits(self, q, k):
        return q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])  # (N, H, S, S)

    def forward(self, x):
        reference.check_input(x, self.d_model)
        n, s, e = x.shape
        q, k, v = self.heads(x)
        scores = self.logits(self.norm_q(q), self.norm_k(k))  # (N, H, S, S)
        if self.is_causal:
            scores = scores.masked_fill(torch.ones(s, s, dtype=torch.bool).triu(1), -math.inf)
        heads = self.weights(scores) @ self.norm_v(v)  # (N, H, S, D)
        return self.out_proj(heads.transpose(1, 2).reshape(n, s, e))

    def weights(self, scores):
        return scores.softmax(-1)  # (N, H, S, S): no dropout (DropoutIgnored)


class ValuesToo(_Attention):
    def norm_v(self, v):  # the values normalized as well
        return F.rms_norm(v, v.shape[-1:], eps=self.eps)


class NoGain(_Attention):
    def norm_q(self, q):  # normalized, the gain left out
        return F.rms_norm(q, q.shape[-1:], eps=self.eps)

    def norm_k(self, k):
        return F.rms_norm(k, k.shape[-1:], eps=self.eps)


class QueriesOnly(_Attention):
    def norm_k(self, k):
        return k


class AfterTheDotProduct(_Attention):
    def forward(self, x):  # the logits normalized, q and k left as they are
        reference.check_input(x, self.d_model)
        n, s, e = x.shape
        q, k, v = self.heads(x)
        scores = F.rms_norm(self.logits(q, k), (s,), eps=self.eps)  # (N, H, S, S)
        if self.is_causal:
            scores = scores.masked_fill(torch.ones(s, s, dtype=torch.bool).triu(1), -math.inf)
        heads = scores.softmax(-1) @ v
        return self.out_proj(heads.transpose(1, 2).reshape(n, s, e))


class NoScale(_Attention):
    def logits(self, q, k):  # "the norms make it unnecessary"
        return q @ k.transpose(-1, -2)


class OverTheModelDimension(reference.QKNormSelfAttention):
    """OLMo 2's convention: q and k normalized over E, before the heads are split."""

    def __init__(self, d_model, nhead, dropout=0.0, bias=True, eps=1e-6, device=None,
                 dtype=None):
        super().__init__(d_model, nhead, dropout, bias, eps, device, dtype)
        self.q_norm = reference.make_norm("rms", d_model, eps, dtype=dtype)
        self.k_norm = reference.make_norm("rms", d_model, eps, dtype=dtype)

    def forward(self, x):
        reference.check_input(x, self.d_model)
        n, s, e = x.shape
        q, k, v = F.linear(x, self.in_proj_weight, self.in_proj_bias).chunk(3, dim=-1)
        q, k, v = (self.split_heads(t) for t in (self.q_norm(q), self.k_norm(k), v))
        heads = F.scaled_dot_product_attention(q, k, v, is_causal=self.is_causal)
        return self.out_proj(heads.transpose(1, 2).reshape(n, s, e))


class OneNormForBoth(reference.QKNormSelfAttention):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.k_norm = self.q_norm  # one gain for queries and keys


class DropoutIgnored(_Attention):
    """No dropout at all: right in evaluation mode and with dropout=0.0 alone."""


class DropoutAlwaysOn(_Attention):
    """Dropout on the attention weights with training=True: on in evaluation mode too."""

    def weights(self, scores):
        return F.dropout(scores.softmax(-1), self.dropout, training=True)


class CausalIgnored(reference.QKNormSelfAttention):
    """is_causal never passed to the attention: every position sees the future."""

    def forward(self, x):
        causal = self.is_causal
        self.is_causal = False
        try:
            return super().forward(x)
        finally:
            self.is_causal = causal


# Exercise 8.2: dyt_forward ------------------------------------------------------------------


def dyt_alpha_outside(x, alpha, weight, bias):
    return weight * alpha * np.tanh(x) + bias


def dyt_no_alpha(x, alpha, weight, bias):
    return weight * np.tanh(x) + bias


def dyt_bias_inside(x, alpha, weight, bias):
    return weight * np.tanh(alpha * x + bias)


def dyt_channels_first(x, alpha, weight, bias):
    """The authors' code for images (channels_last=False): weight[:, None, None]."""
    return weight[:, None] * np.tanh(alpha * x) + bias[:, None]


def dyt_float64(x, alpha, weight, bias):
    return weight * np.tanh(float(alpha[0]) * x.astype(np.float64)) + bias


def dyt_without_weight(x, alpha, weight, bias):
    """The weight never applied."""
    return (np.tanh(alpha * x) + bias).astype(x.dtype)


def dyt_in_float32(x, alpha, weight, bias):
    """Computed in float32 whatever x's dtype, then cast back."""
    x32, a, w, b = (np.asarray(v, np.float32) for v in (x, alpha, weight, bias))
    return (w * np.tanh(a * x32) + b).astype(x.dtype)


# Exercise 8.3: dyt_backward -----------------------------------------------------------------


def _parts(x, alpha, weight, grad_output):
    t = np.tanh(alpha * x)  # (*B, C)
    return t, grad_output * weight * (1 - t * t), tuple(range(x.ndim - 1))


def dyt_backward_no_alpha_in_dx(grad_output, x, alpha, weight):
    t, inner, lead = _parts(x, alpha, weight, grad_output)
    return (inner, (inner * x).sum(keepdims=True).reshape(1), (grad_output * t).sum(axis=lead),
            grad_output.sum(axis=lead))


def dyt_backward_one_minus_tanh(grad_output, x, alpha, weight):
    t, _, lead = _parts(x, alpha, weight, grad_output)
    inner = grad_output * weight * (1 - t)
    return (alpha * inner, (inner * x).sum(keepdims=True).reshape(1),
            (grad_output * t).sum(axis=lead), grad_output.sum(axis=lead))


def dyt_backward_dalpha_not_summed(grad_output, x, alpha, weight):
    t, inner, lead = _parts(x, alpha, weight, grad_output)
    return alpha * inner, inner * x, (grad_output * t).sum(axis=lead), grad_output.sum(axis=lead)


def dyt_backward_dalpha_without_x(grad_output, x, alpha, weight):
    t, inner, lead = _parts(x, alpha, weight, grad_output)
    return (alpha * inner, inner.sum(keepdims=True).reshape(1), (grad_output * t).sum(axis=lead),
            grad_output.sum(axis=lead))


def dyt_backward_dweight_from_x(grad_output, x, alpha, weight):
    _, inner, lead = _parts(x, alpha, weight, grad_output)
    return (alpha * inner, (inner * x).sum(keepdims=True).reshape(1),
            (grad_output * x).sum(axis=lead), grad_output.sum(axis=lead))


def dyt_backward_means(grad_output, x, alpha, weight):
    t, inner, lead = _parts(x, alpha, weight, grad_output)
    return (alpha * inner, (inner * x).sum(keepdims=True).reshape(1),
            (grad_output * t).mean(axis=lead), grad_output.mean(axis=lead))


def dyt_backward_dx_without_weight(grad_output, x, alpha, weight):
    """dx without the weight's factor (dweight and the rest right)."""
    t, inner, lead = _parts(x, alpha, weight, grad_output)
    dx = alpha * grad_output * (1 - t * t)
    return (dx, (inner * x).sum(keepdims=True).reshape(1), (grad_output * t).sum(axis=lead),
            grad_output.sum(axis=lead))


def dyt_backward_dalpha_negated(grad_output, x, alpha, weight):
    """dalpha with the wrong sign (1 - tanh^2 written tanh^2 - 1)."""
    t, inner, lead = _parts(x, alpha, weight, grad_output)
    return (alpha * inner, -(inner * x).sum(keepdims=True).reshape(1),
            (grad_output * t).sum(axis=lead), grad_output.sum(axis=lead))


# Exercise 8.4: DyTFunction ------------------------------------------------------------------


def _forward(ctx, input, alpha, weight, bias):
    """The right forward (the mistakes below are in what is saved or returned)."""
    ctx.save_for_backward(input, alpha, weight)
    return torch.from_numpy(dyt.dyt_forward(*(t.detach().numpy() for t in (
        input, alpha, weight, bias))))


class DyTFunctionThreeGradients(torch.autograd.Function):
    forward = staticmethod(_forward)

    @staticmethod
    def backward(ctx, grad_output):  # dalpha forgotten
        input, alpha, weight = ctx.saved_tensors
        dx, _, dweight, dbias = dyt.dyt_backward(*(t.numpy() for t in (
            grad_output, input, alpha, weight)))
        return torch.from_numpy(dx), torch.from_numpy(dweight), torch.from_numpy(dbias)


class DyTFunctionSavesOutput(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, alpha, weight, bias):
        y = torch.from_numpy(dyt.dyt_forward(*(t.detach().numpy() for t in (
            input, alpha, weight, bias))))
        ctx.save_for_backward(y, alpha, weight)  # the output, where the input is needed
        return y

    @staticmethod
    def backward(ctx, grad_output):
        y, alpha, weight = ctx.saved_tensors
        return tuple(torch.from_numpy(g) for g in dyt.dyt_backward(*(t.numpy() for t in (
            grad_output, y, alpha, weight))))


class DyTFunctionSwapped(torch.autograd.Function):
    forward = staticmethod(_forward)

    @staticmethod
    def backward(ctx, grad_output):  # dweight and dbias swapped
        input, alpha, weight = ctx.saved_tensors
        dx, dalpha, dweight, dbias = dyt.dyt_backward(*(t.numpy() for t in (
            grad_output, input, alpha, weight)))
        return tuple(torch.from_numpy(g) for g in (dx, dalpha, dbias, dweight))


class DyTFunctionOnTheClass(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, alpha, weight, bias):
        DyTFunctionOnTheClass.saved = (input, alpha, weight)  # shared by every call
        return torch.from_numpy(dyt.dyt_forward(*(t.detach().numpy() for t in (
            input, alpha, weight, bias))))

    @staticmethod
    def backward(ctx, grad_output):
        input, alpha, weight = DyTFunctionOnTheClass.saved
        return tuple(torch.from_numpy(g) for g in dyt.dyt_backward(*(t.detach().numpy() for t in (
            grad_output, input, alpha, weight))))


class DyTFunctionInTorch(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, alpha, weight, bias):  # torch's operations, not the kernels
        ctx.save_for_backward(input, alpha, weight)
        return weight * torch.tanh(alpha * input) + bias

    @staticmethod
    def backward(ctx, grad_output):
        input, alpha, weight = ctx.saved_tensors
        t = torch.tanh(alpha * input)
        inner = grad_output * weight * (1 - t * t)
        lead = tuple(range(input.dim() - 1))
        return (alpha * inner, (inner * input).sum().reshape(1), (grad_output * t).sum(lead),
                grad_output.sum(lead))


class DyTFunctionNoBiasGradient(torch.autograd.Function):
    forward = staticmethod(_forward)

    @staticmethod
    def backward(ctx, grad_output):  # the bias's gradient never returned
        input, alpha, weight = ctx.saved_tensors
        dx, dalpha, dweight, _ = dyt.dyt_backward(*(t.numpy() for t in (
            grad_output, input, alpha, weight)))
        return torch.from_numpy(dx), torch.from_numpy(dalpha), torch.from_numpy(dweight), None


class DyTFunctionAlphaGradientHalved(torch.autograd.Function):
    forward = staticmethod(_forward)

    @staticmethod
    def backward(ctx, grad_output):  # dalpha halved ("the mean of the two directions")
        input, alpha, weight = ctx.saved_tensors
        dx, dalpha, dweight, dbias = dyt.dyt_backward(*(t.numpy() for t in (
            grad_output, input, alpha, weight)))
        return tuple(torch.from_numpy(g) for g in (dx, dalpha / 2, dweight, dbias))


class DyTFunctionKernelsForShow(DyTFunctionInTorch):
    """torch computes it; the NumPy kernels are called once each, on a 1x1 array, for a
    counter to see (issue 58's attack)."""

    @staticmethod
    def forward(ctx, input, alpha, weight, bias):
        one = np.ones((1, 1))
        dyt.dyt_forward(one, np.ones(1), np.ones(1), np.zeros(1))
        dyt.dyt_backward(one, one, np.ones(1), np.ones(1))
        return DyTFunctionInTorch.forward(ctx, input, alpha, weight, bias)


# Exercise 8.5: AdaLNZeroBlock ---------------------------------------------------------------


class _Block(adaln.AdaLNZeroBlock):
    """DiT's forward written out (its modulate, its unsqueeze(1)), with hooks for each
    mistake: chunks, adaln, residual."""

    def chunks(self, c):
        return self.modulation(c).chunk(6, dim=-1)  # six (N, E)

    def adaln(self, norm, x, shift, scale):
        return norm(x) * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)

    def residual(self, x, gate, branch):
        return x + gate.unsqueeze(1) * branch

    def forward(self, x, c):
        adaln.check_block_inputs(x, c, self.attn.out.out_features)
        shift_a, scale_a, gate_a, shift_m, scale_m, gate_m = self.chunks(c)
        x = self.residual(x, gate_a, self.attn(self.adaln(self.attn_norm, x, shift_a, scale_a)))
        return self.residual(x, gate_m, self.mlp(self.adaln(self.mlp_norm, x, shift_m, scale_m)))


class ScaleWithoutOne(_Block):
    def adaln(self, norm, x, shift, scale):  # "scale(c) is the norm's gamma"
        return norm(x) * scale.unsqueeze(1) + shift.unsqueeze(1)


class ShiftScaleSwapped(_Block):
    def chunks(self, c):  # (scale, shift) where DiT has (shift, scale)
        scale_a, shift_a, gate_a, scale_m, shift_m, gate_m = self.modulation(c).chunk(6, -1)
        return shift_a, scale_a, gate_a, shift_m, scale_m, gate_m


class ChunksByKind(_Block):
    def chunks(self, c):  # the three shifts, then scales, then gates: not DiT's order
        shift_a, shift_m, scale_a, scale_m, gate_a, gate_m = self.modulation(c).chunk(6, -1)
        return shift_a, scale_a, gate_a, shift_m, scale_m, gate_m


class GateOnTheWholeResidual(_Block):
    def residual(self, x, gate, branch):  # the gate "on the residual": gate * (x + F)
        return gate.unsqueeze(1) * (x + branch)


class MLPUngated(_Block):
    def forward(self, x, c):  # the attention gated, the MLP added as it is
        shift_a, scale_a, gate_a, shift_m, scale_m, _ = self.chunks(c)
        x = self.residual(x, gate_a, self.attn(self.adaln(self.attn_norm, x, shift_a, scale_a)))
        return x + self.mlp(self.adaln(self.mlp_norm, x, shift_m, scale_m))


class NotZeroInitialized(adaln.AdaLNZeroBlock):
    """adaLN without the Zero: the modulation's Linear keeps torch's initialization."""

    def __init__(self, d_model, nhead):
        super().__init__(d_model, nhead)
        self.modulation[1].reset_parameters()


class OnlyWeightZeroed(adaln.AdaLNZeroBlock):
    """torch.nn.init.zeros_ on the weight alone; the bias keeps torch's initialization."""

    def __init__(self, d_model, nhead):
        super().__init__(d_model, nhead)
        bound = 1 / math.sqrt(d_model)
        with torch.no_grad():
            self.modulation[1].bias.uniform_(-bound, bound)


class WithoutSiLU(adaln.AdaLNZeroBlock):
    """modulation a plain zero Linear(E, 6E): no SiLU before it."""

    def __init__(self, d_model, nhead):
        super().__init__(d_model, nhead)
        self.modulation = torch.nn.Linear(d_model, 6 * d_model)
        torch.nn.init.zeros_(self.modulation.weight)
        torch.nn.init.zeros_(self.modulation.bias)

    def forward(self, x, c):
        m = self.modulation(c).unsqueeze(1).chunk(6, dim=-1)  # six (N, 1, E)
        x = x + m[2] * self.attn(self.attn_norm(x) * (1 + m[1]) + m[0])
        return x + m[5] * self.mlp(self.mlp_norm(x) * (1 + m[4]) + m[3])


class SiLUSkipped(_Block):
    def chunks(self, c):  # the Sequential's Linear called alone
        return self.modulation[1](c).chunk(6, dim=-1)


class NormsWithAffine(adaln.AdaLNZeroBlock):
    """torch.nn.LayerNorm(E, eps=1e-6), its own weight and bias kept."""

    def __init__(self, d_model, nhead):
        super().__init__(d_model, nhead)
        self.attn_norm = torch.nn.LayerNorm(d_model, eps=1e-6)
        self.mlp_norm = torch.nn.LayerNorm(d_model, eps=1e-6)


class ModulatedBeforeNormalizing(_Block):
    def adaln(self, norm, x, shift, scale):  # modulate, then normalize
        return norm(x * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1))


class GateNotUnsqueezed(_Block):
    def residual(self, x, gate, branch):  # (N, E) against (N, T, E): the wrong axis
        return x + gate * branch


class ModulationNotUnsqueezed(_Block):
    def adaln(self, norm, x, shift, scale):  # (N, E) against (N, T, E): the wrong axis
        return norm(x) * (1 + scale) + shift


class MLPReadsTheBlockInput(_Block):
    def forward(self, x, c):  # both sublayers read the block's input, as in parallel
        adaln.check_block_inputs(x, c, self.attn.out.out_features)
        shift_a, scale_a, gate_a, shift_m, scale_m, gate_m = self.chunks(c)
        h = self.residual(x, gate_a, self.attn(self.adaln(self.attn_norm, x, shift_a, scale_a)))
        return self.residual(h, gate_m, self.mlp(self.adaln(self.mlp_norm, x, shift_m, scale_m)))


class TorchsEps(adaln.AdaLNZeroBlock):
    """The norms built with torch's default eps, 1e-5."""

    def __init__(self, d_model, nhead):
        super().__init__(d_model, nhead)
        self.attn_norm = torch.nn.LayerNorm(d_model, elementwise_affine=False)
        self.mlp_norm = torch.nn.LayerNorm(d_model, elementwise_affine=False)


class NoInputCheck(_Block):
    def forward(self, x, c):  # the provided check deleted
        shift_a, scale_a, gate_a, shift_m, scale_m, gate_m = self.chunks(c)
        x = self.residual(x, gate_a, self.attn(self.adaln(self.attn_norm, x, shift_a, scale_a)))
        return self.residual(x, gate_m, self.mlp(self.adaln(self.mlp_norm, x, shift_m, scale_m)))


WRONG = {
    "8.1": {
        "values normalized too": Mistake(ValuesToo, "the values were normalized too"),
        "no gain": Mistake(NoGain, "the gains are missing"),
        "queries only": Mistake(QueriesOnly, "the keys are not normalized"),
        "after the dot product": Mistake(AfterTheDotProduct,
                                         "the logits were normalized after the dot product"),
        "no 1/sqrt(D)": Mistake(NoScale, "the logits lack the 1 / sqrt(D) scale"),
        "over the model dimension (OLMo 2's)": Mistake(OverTheModelDimension,
                                                       "That is the other convention, OLMo 2's"),
        "one norm for both": Mistake(OneNormForBoth, "one norm serves queries and keys"),
        "dropout ignored": Mistake(DropoutIgnored, "First to differ: out_proj's input"),
        "dropout on in evaluation mode": Mistake(DropoutAlwaysOn,
                                                 "dropout is still on in evaluation mode"),
        "is_causal ignored": Mistake(CausalIgnored, "the causal mask is missing"),
    },
    "8.2": {
        "alpha outside the tanh": Mistake(dyt_alpha_outside, "alpha scales the tanh's output"),
        "alpha missing": Mistake(dyt_no_alpha, "alpha is missing"),
        "bias inside the tanh": Mistake(dyt_bias_inside, "the bias is inside the tanh"),
        "channels first": Mistake(dyt_channels_first, "channels first"),
        "float64 result": Mistake(dyt_float64, "float64"),
        "the weight left out": Mistake(dyt_without_weight, "y for x (2, 4, 4) float32"),
        "computed in float32": Mistake(dyt_in_float32, "float32's precision"),
    },
    "8.3": {
        "dx without alpha": Mistake(dyt_backward_no_alpha_in_dx, "dx lacks the factor alpha"),
        "1 - tanh": Mistake(dyt_backward_one_minus_tanh, "1 - tanh, not 1 - tanh^2"),
        "dalpha not summed": Mistake(dyt_backward_dalpha_not_summed,
                                     "dalpha was not summed over the elements"),
        "dalpha without x": Mistake(dyt_backward_dalpha_without_x, "dalpha lacks the factor x"),
        "dweight from x": Mistake(dyt_backward_dweight_from_x, "dweight sums grad * x"),
        "means, not sums": Mistake(dyt_backward_means, "a mean over the rows, not a sum"),
        "dx without the weight": Mistake(dyt_backward_dx_without_weight,
                                         "dx ignores the weight"),
        "dalpha's sign flipped": Mistake(dyt_backward_dalpha_negated,
                                         "every value has the wrong sign"),
    },
    "8.4": {
        "three gradients": Mistake(DyTFunctionThreeGradients, "wrong number of gradients"),
        "saves the output": Mistake(DyTFunctionSavesOutput, "the forward's output y"),
        "dweight and dbias swapped": Mistake(DyTFunctionSwapped, "are swapped"),
        "saved on the class": Mistake(DyTFunctionOnTheClass, "the two calls share"),
        "torch's operations": Mistake(DyTFunctionInTorch, "must compute with your NumPy kernels"),
        "no gradient for the bias": Mistake(DyTFunctionNoBiasGradient,
                                            "Where: bias.grad, no gradient after backward"),
        "the kernels called for show, on a 1x1 array": Mistake(
            DyTFunctionKernelsForShow, "the Function's output is not what your dyt_forward "
                                       "returned"),
        "dalpha halved": Mistake(DyTFunctionAlphaGradientHalved,
                                 "every value is 0.5 times the exact one"),
    },
    "8.5": {
        "scale without the 1 +": Mistake(ScaleWithoutOne, "without its 1 +"),
        "shift and scale swapped": Mistake(ShiftScaleSwapped, "shift and scale are swapped"),
        "the chunks grouped by kind": Mistake(ChunksByKind, "not in DiT's order"),
        "the gate on the whole residual": Mistake(GateOnTheWholeResidual,
                                                  "the gate multiplies the whole residual"),
        "the MLP not gated": Mistake(MLPUngated, "the MLP's branch is not gated"),
        "the modulation not zero-initialized": Mistake(NotZeroInitialized,
                                                       "the modulation is not zero-initialized"),
        "only the weight zeroed": Mistake(OnlyWeightZeroed, "only the modulation's weight is "
                                                            "zeroed, not its bias"),
        "no SiLU": Mistake(WithoutSiLU, "SiLU is missing"),
        "SiLU skipped in the forward": Mistake(SiLUSkipped, "SiLU is missing"),
        "the norms' affine kept": Mistake(NormsWithAffine, "the norms keep their own affine"),
        "modulated before normalizing": Mistake(ModulatedBeforeNormalizing,
                                                "the modulation is applied before the norm"),
        "the gate broadcast over the wrong axis": Mistake(
            GateNotUnsqueezed, "a gate (N, E) multiplies the branch (N, T, E) without "
                               "unsqueeze(1)"),
        "shift and scale broadcast over the wrong axis": Mistake(
            ModulationNotUnsqueezed, "shift and scale (N, E) are used without unsqueeze(1)"),
        "the MLP reads the block's input": Mistake(MLPReadsTheBlockInput,
                                                   "the MLP's branch reads the block's input"),
        "torch's eps": Mistake(TorchsEps, "not DiT's 1e-6"),
        "the input check deleted": Mistake(NoInputCheck, "expected a ValueError"),
    },
}
