"""Correct implementations of Unit 8's exercises written differently from the reference:
every one must pass its graded check (tests/test_graders.py) at a tenth of the
tolerances. Targets as in wrong_today.py."""

import math

import numpy as np
import torch
import torch.nn.functional as F

import normlib.adaln as adaln
import normlib.dyt as dyt
import normlib.qk_norm as reference

# Exercise 8.1: QKNormSelfAttention ----------------------------------------------------------


class WrittenOut(reference.QKNormSelfAttention):
    """The softmax attention written out, the norms applied to the (N, S, H, D) view
    before the heads are moved forward."""

    def forward(self, x):
        reference.check_input(x, self.d_model)
        n, s, e = x.shape
        h = self.nhead
        q, k, v = F.linear(x, self.in_proj_weight, self.in_proj_bias).split(e, dim=-1)
        q = self.q_norm(q.reshape(n, s, h, -1)).transpose(1, 2)  # (N, H, S, D)
        k = self.k_norm(k.reshape(n, s, h, -1)).transpose(1, 2)  # (N, H, S, D)
        v = v.reshape(n, s, h, -1).transpose(1, 2)  # (N, H, S, D)
        scores = torch.einsum("nhsd,nhtd->nhst", q, k) / math.sqrt(q.shape[-1])
        if self.is_causal:
            scores = scores + torch.full((s, s), -math.inf, dtype=x.dtype).triu(1)
        weights = F.dropout(scores.softmax(-1), self.dropout, self.training)  # (N, H, S, S)
        heads = torch.einsum("nhst,nhtd->nhsd", weights, v)  # (N, H, S, D)
        return self.out_proj(heads.transpose(1, 2).reshape(n, s, e))


class NormsByHand(reference.QKNormSelfAttention):
    """The RMS computed by hand with the norms' own weight and eps, the scale folded into
    the queries (as some implementations pass scale= to the attention)."""

    def forward(self, x):
        reference.check_input(x, self.d_model)
        n, s, e = x.shape
        qkv = F.linear(x, self.in_proj_weight, self.in_proj_bias)
        q, k, v = (self.split_heads(t) for t in qkv.chunk(3, dim=-1))

        def rms(t, norm):  # (N, H, S, D)
            return t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + norm.eps) * norm.weight

        q = rms(q, self.q_norm) / math.sqrt(q.shape[-1])
        heads = F.scaled_dot_product_attention(q, rms(k, self.k_norm), v, scale=1.0,
                                               dropout_p=self.dropout * self.training,
                                               is_causal=self.is_causal)
        return self.out_proj(heads.transpose(1, 2).reshape(n, s, e))


# Exercise 8.2: dyt_forward ------------------------------------------------------------------


def dyt_through_exp(x, alpha, weight, bias):
    """tanh(z) = 1 - 2 / (exp(2z) + 1), which saturates cleanly at both ends."""
    z = alpha * x  # (*B, C)
    t = 1 - 2 / (np.exp(2 * z) + 1)  # (*B, C)
    return (t * weight + bias).astype(x.dtype)


def dyt_in_place(x, alpha, weight, bias):
    """One buffer, updated in place."""
    y = np.multiply(x, alpha)  # (*B, C)
    np.tanh(y, out=y)
    y *= weight
    y += bias
    return y


# Exercise 8.3: dyt_backward -----------------------------------------------------------------


def dyt_backward_cosh(grad_output, x, alpha, weight):
    """1 - tanh^2 = 1 / cosh^2; the sums through einsum-free reshapes."""
    c = x.shape[-1]
    z = alpha * x  # (*B, C)
    with np.errstate(over="ignore"):  # cosh overflows where the tanh saturates: sech^2 = 0
        sech2 = 1 / np.cosh(z) ** 2  # (*B, C)
    g = (grad_output * weight * sech2).astype(x.dtype)  # (*B, C)
    rows_g = grad_output.reshape(-1, c)  # (rows, C)
    dweight = (rows_g * np.tanh(z).reshape(-1, c)).sum(axis=0)  # (C,)
    dalpha = np.array([(g * x).sum()], dtype=x.dtype)  # (1,)
    return (alpha * g).astype(x.dtype), dalpha, dweight.astype(x.dtype), rows_g.sum(axis=0)


def dyt_backward_float64(grad_output, x, alpha, weight):
    """Everything in float64, rounded once at the end."""
    g64, x64 = grad_output.astype(np.float64), x.astype(np.float64)
    t = np.tanh(alpha.astype(np.float64) * x64)  # (*B, C)
    inner = g64 * weight * (1 - t * t)  # (*B, C)
    lead = tuple(range(x.ndim - 1))
    out = (alpha * inner, np.atleast_1d((inner * x64).sum()), (g64 * t).sum(axis=lead),
           g64.sum(axis=lead))
    return tuple(o.astype(x.dtype) for o in out)


# Exercise 8.4: DyTFunction ------------------------------------------------------------------


class DyTFunctionOnCtx(torch.autograd.Function):
    """The saved arrays kept on ctx as NumPy arrays, the gradients made tensors with
    torch.as_tensor."""

    @staticmethod
    def forward(ctx, input, alpha, weight, bias):
        ctx.arrays = [t.detach().numpy() for t in (input, alpha, weight)]
        y = dyt.dyt_forward(*ctx.arrays, bias.detach().numpy())
        return torch.as_tensor(y)

    @staticmethod
    def backward(ctx, grad_output):
        grads = dyt.dyt_backward(grad_output.numpy(), *ctx.arrays)
        return tuple(torch.as_tensor(np.array(g)) for g in grads)


class DyTFunctionNeedsInputGrad(torch.autograd.Function):
    """Only the gradients autograd asks for (ctx.needs_input_grad), None for the others."""

    @staticmethod
    def forward(ctx, input, alpha, weight, bias):
        ctx.save_for_backward(input, alpha, weight)
        return torch.as_tensor(dyt.dyt_forward(input.detach().numpy(), alpha.detach().numpy(),
                                               weight.detach().numpy(), bias.detach().numpy()))

    @staticmethod
    def backward(ctx, grad_output):
        arrays = [t.detach().numpy() for t in (grad_output, *ctx.saved_tensors)]
        grads = dyt.dyt_backward(*arrays)
        return tuple(torch.as_tensor(np.ascontiguousarray(g)) if needed else None
                     for g, needed in zip(grads, ctx.needs_input_grad))


# Exercise 8.5: AdaLNZeroBlock ---------------------------------------------------------------


class DiTsForm(adaln.AdaLNZeroBlock):
    """DiT's own code (facebookresearch/DiT, models.py): modulate(x, shift, scale) with
    unsqueeze(1), chunk(6, dim=1); the zeros set with torch.nn.init.constant_."""

    def __init__(self, d_model, nhead):
        super().__init__(d_model, nhead)
        self.attn_norm = torch.nn.LayerNorm(d_model, elementwise_affine=False, eps=1e-6)
        self.mlp_norm = torch.nn.LayerNorm(d_model, elementwise_affine=False, eps=1e-6)
        self.modulation = torch.nn.Sequential(torch.nn.SiLU(),
                                              torch.nn.Linear(d_model, 6 * d_model, bias=True))
        torch.nn.init.constant_(self.modulation[-1].weight, 0)
        torch.nn.init.constant_(self.modulation[-1].bias, 0)

    def forward(self, x, c):
        adaln.check_block_inputs(x, c, self.attn.out.out_features)

        def modulate(x, shift, scale):
            return x * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)

        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = \
            self.modulation(c).chunk(6, dim=1)
        x = x + gate_msa.unsqueeze(1) * self.attn(modulate(self.attn_norm(x), shift_msa,
                                                           scale_msa))
        return x + gate_mlp.unsqueeze(1) * self.mlp(modulate(self.mlp_norm(x), shift_mlp,
                                                             scale_mlp))


class PerSublayerLinears(adaln.AdaLNZeroBlock):
    """Each chunk through its own slice of the modulation's Linear (F.linear on rows
    k E to (k + 1) E), the norm written out with F.layer_norm and its eps."""

    def forward(self, x, c):
        adaln.check_block_inputs(x, c, self.attn.out.out_features)
        e = x.shape[-1]
        s, linear = F.silu(c), self.modulation[1]  # (N, E)
        shift_a, scale_a, gate_a, shift_m, scale_m, gate_m = (
            F.linear(s, linear.weight[k * e:(k + 1) * e], linear.bias[k * e:(k + 1) * e])
            .view(-1, 1, e) for k in range(6))  # (N, 1, E) each
        h = F.layer_norm(x, (e,), eps=self.attn_norm.eps)  # (N, T, E)
        x = x + self.attn(h + h * scale_a + shift_a) * gate_a
        h = F.layer_norm(x, (e,), eps=self.mlp_norm.eps)  # (N, T, E)
        return x + self.mlp(h + h * scale_m + shift_m) * gate_m


RIGHT = {
    "8.1": {"written out with einsum, norms before the transpose": WrittenOut,
            "RMS by hand, the scale folded into q": NormsByHand},
    "8.2": {"tanh through exp": dyt_through_exp, "in place in one buffer": dyt_in_place},
    "8.3": {"1 / cosh^2, sums over reshaped rows": dyt_backward_cosh,
            "float64 inside, rounded once": dyt_backward_float64},
    "8.4": {"NumPy arrays on ctx": DyTFunctionOnCtx,
            "only the gradients asked for": DyTFunctionNeedsInputGrad},
    "8.5": {"DiT's code: modulate with unsqueeze(1), constant_ zeros": DiTsForm,
            "a Linear slice per chunk, the norm through F.layer_norm": PerSublayerLinears},
}
