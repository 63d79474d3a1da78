"""QK-norm (Unit 8: Exercise 8.1): self-attention whose queries and keys are normalized, per head.

In a plain transformer an attention logit q . k / sqrt(D) has no bound: when the weights
that make q and k grow in training, the logits grow, the softmax saturates to one-hot and
training can diverge (Dehghani et al. 2023, "Scaling Vision Transformers to 22 Billion
Parameters"; Wortsman et al. 2023, "Small-scale proxies for large-scale Transformer
training instabilities"). QK-norm normalizes each head's query and key before the dot
product: ViT-22B and Wortsman et al. with a LayerNorm ("qk-layernorm"), Gemma 3 and Qwen3
with an RMSNorm over the head's dimension D, as here; OLMo 2 with an RMSNorm over the whole
projection (all heads at once), before splitting the heads.

Shapes: N batch, S sequence length, E = d_model, H heads, D = E / H. Inputs are batch
first, (N, S, E). The norms are the course's own (normlib.nn.RMSNorm, Exercises 3.6 and
3.7), built through normlib.transformer.make_norm.
"""

import torch.nn.functional as F

from .transformer import MultiheadSelfAttention, check_input, make_norm


class QKNormSelfAttention(MultiheadSelfAttention):
    """Exercise 8.1: self-attention with QK-norm.

    MultiheadSelfAttention's parameters and forward contract (x (N, S, E) -> (N, S, E);
    is_causal; dropout on the attention weights in training mode), and two more modules:

        q_norm: the queries' RMSNorm, over each head's dimension D = d_model // nhead,
            with a gain (its weight, (D,)) and this eps; built with make_norm, so that
            it is normlib.nn.RMSNorm;
        k_norm: the keys' RMSNorm, the same with a gain of its own.

    The values are not normalized. The attention then runs as usual on the normalized
    queries and keys: logits q . k / sqrt(D), the causal mask if is_causal, a softmax over
    the keys, the weighted sum of the values, the heads merged, out_proj.
    """

    def __init__(self, d_model, nhead, dropout=0.0, bias=True, eps=1e-6, device=None,
                 dtype=None):
        super().__init__(d_model, nhead, dropout, bias, device, dtype)
        self.eps = eps
        ### BEGIN SOLUTION
        head_dim = d_model // nhead  # D
        self.q_norm = make_norm("rms", head_dim, eps, device=device, dtype=dtype)
        self.k_norm = make_norm("rms", head_dim, eps, device=device, dtype=dtype)
        ### END SOLUTION

    def forward(self, x):
        """Exercise 8.1 (continued): x (N, S, E) -> (N, S, E), queries and keys normalized
        per head (see the class's docstring)."""
        check_input(x, self.d_model)
        ### BEGIN SOLUTION
        n, s, e = x.shape
        qkv = F.linear(x, self.in_proj_weight, self.in_proj_bias)  # (N, S, 3E)
        q, k, v = (self.split_heads(t) for t in qkv.chunk(3, dim=-1))  # (N, H, S, D) each
        q, k = self.q_norm(q), self.k_norm(k)  # (N, H, S, D): each head's RMS is 1
        p = self.dropout if self.training else 0.0
        heads = F.scaled_dot_product_attention(q, k, v, dropout_p=p,
                                               is_causal=self.is_causal)  # (N, H, S, D)
        return self.out_proj(heads.transpose(1, 2).reshape(n, s, e))  # (N, S, E)
        ### END SOLUTION

    def extra_repr(self):
        return f"{super().extra_repr()}, eps={self.eps}"
