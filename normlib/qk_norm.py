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
        raise NotImplementedError("Exercise 8.1: implement QKNormSelfAttention.__init__")

    def forward(self, x):
        """Exercise 8.1 (continued): x (N, S, E) -> (N, S, E), queries and keys normalized
        per head (see the class's docstring)."""
        check_input(x, self.d_model)
        raise NotImplementedError("Exercise 8.1: implement QKNormSelfAttention.forward")

    def extra_repr(self):
        return f"{super().extra_repr()}, eps={self.eps}"
