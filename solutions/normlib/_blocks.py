"""What Units 8 and 9's transformer blocks share, provided (no exercise here): the causal
self-attention (QK-norm optional) of notebook 08's models and of your adaLN-Zero and ReZero
blocks (normlib/adaln.py, normlib/rezero.py), DiT's eps for the adaLN block's norms, and
the checks of a block's inputs.
The course's models (normkit.modern, normkit.conditioning) build on the same code.
Shapes: N batch, T sequence length, E = d_model, H heads, D = E / H.
"""

import math

import torch
import torch.nn.functional as F

EPS = 1e-6  # the adaLN-Zero block's norms' eps, as DiT's code (facebookresearch/DiT, models.py)
QK_EPS = 1e-6  # QK-norm's eps: Exercise 8.1's default, as in Gemma 3's and OLMo 2's code


class Attention(torch.nn.Module):
    """Causal multi-head self-attention, written out: x (N, T, E) -> (N, T, E). With
    qk_norm, an RMSNorm over each head's dimension D, with gains g_q and g_k (D,), on the
    queries and keys. `max_logit`: the largest |q.k|/sqrt(D) of the last forward over every
    head and every pair of positions the mask lets through (a float)."""

    def __init__(self, d_model, nhead, qk_norm=False):
        super().__init__()
        self.nhead, self.head_dim = nhead, d_model // nhead
        self.qkv = torch.nn.Linear(d_model, 3 * d_model)
        self.out = torch.nn.Linear(d_model, d_model)
        self.qk_norm = qk_norm
        if qk_norm:
            self.g_q = torch.nn.Parameter(torch.ones(self.head_dim))
            self.g_k = torch.nn.Parameter(torch.ones(self.head_dim))
        self.max_logit = math.nan

    def heads(self, x):
        """(N, T, E) -> (N, H, T, D)"""
        n, t, _ = x.shape
        return x.view(n, t, self.nhead, self.head_dim).transpose(1, 2)

    def forward(self, x):
        n, t, e = x.shape
        q, k, v = map(self.heads, self.qkv(x).split(e, dim=-1))  # (N, H, T, D) each
        if self.qk_norm:
            q = F.rms_norm(q, (self.head_dim,), self.g_q, QK_EPS)  # (N, H, T, D)
            k = F.rms_norm(k, (self.head_dim,), self.g_k, QK_EPS)  # (N, H, T, D)
        logits = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)  # (N, H, T, T)
        seen = torch.ones(t, t, dtype=torch.bool).tril()  # (T, T): a query sees its past
        self.max_logit = logits.detach().masked_fill(~seen, 0).abs().max().item()
        weights = logits.masked_fill(~seen, -math.inf).softmax(dim=-1)  # (N, H, T, T)
        mixed = (weights @ v).transpose(1, 2).reshape(n, t, e)  # (N, T, E)
        return self.out(mixed)  # (N, T, E)

    def bound(self):
        """QK-norm's bound on every logit: sqrt(D) * max|g_q| * max|g_k| (inf without it).
        Each normalized head has length at most sqrt(D) times its largest gain (eps only
        shortens it), and Cauchy-Schwarz bounds the dot product by the lengths' product."""
        if not self.qk_norm:
            return math.inf
        return math.sqrt(self.head_dim) * self.g_q.abs().max().item() * \
            self.g_k.abs().max().item()


def check_stream(x, d_model):
    """A ValueError naming the shape where x is not a residual stream (N, T, d_model)
    (Unit 9's ReZero block calls it first)."""
    if not isinstance(x, torch.Tensor) or x.dim() != 3 or x.shape[-1] != d_model:
        raise ValueError(f"x must be (N, T, {d_model}), got "
                         + (f"shape {tuple(x.shape)}" if isinstance(x, torch.Tensor)
                            else type(x).__name__))


def check_block_inputs(x, c, d_model):
    """A ValueError naming what is wrong where x is not (N, T, d_model) or c not (N, d_model),
    one condition per sequence: a c of one sequence (E,), or one per token (N, T, E), would
    otherwise broadcast against x into a wrong result without an error wherever N == T
    (normkit.conditioning.AdaLNBlock, and normlib/adaln.py's block, call it first)."""
    check_stream(x, d_model)
    if c.dim() != 2 or c.shape != (x.shape[0], d_model):
        raise ValueError(f"c must be (N, E) = ({x.shape[0]}, {d_model}), one condition "
                         f"embedding per sequence of x {tuple(x.shape)}, got shape "
                         f"{tuple(c.shape)}")
