"""adaLN-Zero (Unit 8: Exercise 8.5): a transformer block conditioned through its norms, as DiT's.

DiT: Peebles & Xie 2023, "Scalable Diffusion Models with Transformers", section 3.2; code:
facebookresearch/DiT, models.py (class DiTBlock, function modulate). A condition c (here:
which text a window comes from) steers every block through its norms: they have no affine
parameters of their own, a scale and a shift computed from c take their place, and a gate
computed from c scales each residual branch. Notebook 08, section 4, states the block; the
section's model (normkit.conditioning.ConditionalLM) runs on it once your check passes.

Shapes: N batch, T sequence length, E = d_model. x (N, T, E), the residual stream; c (N, E),
one condition embedding per sequence.
Provided (normlib/_blocks.py): the attention, the MLP (Linear(E, 4E), GELU, Linear(4E, E))
and check_block_inputs, which refuses a c of the wrong shape. What you write makes the block
adaLN-Zero's: the norms, the modulation and its initialization, and the forward.
"""

import torch

from normlib._blocks import EPS, Attention, check_block_inputs


class AdaLNZeroBlock(torch.nn.Module):
    """Exercise 8.5: a Pre-LN transformer block with adaLN-Zero.

    AdaLNZeroBlock(d_model, nhead): (x (N, T, E), c (N, E)) -> (N, T, E), x's shape and
    dtype. Its submodules, by these names (so that the state_dict of the section's
    reference block, normkit.conditioning.AdaLNBlock, loads into yours and back):

        attn, mlp: the two sublayers (provided);
        attn_norm, mlp_norm: each sublayer's LayerNorm over E, without parameters of its
            own (no weight, no bias), eps = EPS (1e-6, DiT's);
        modulation: torch.nn.Sequential(SiLU, Linear(E, 6E)), whose output splits, in
            this order, into six (N, E) chunks: shift, scale and gate of the attention,
            then shift, scale and gate of the MLP (DiT's order).

    The modulation's Linear starts at zero, weight and bias (adaLN-Zero): notebook 08's
    section 4 says what that makes of the block. Each sublayer F then runs as section 4's
    formulas say: F reads its norm's output scaled by (1 + scale) and shifted by shift, and
    its output, times the gate, is added to the residual stream. Each (N, E) chunk holds one
    vector per sequence, for every position of that sequence.
    """

    def __init__(self, d_model, nhead):
        super().__init__()
        self.attn = Attention(d_model, nhead)  # (N, T, E) -> (N, T, E), causal
        self.mlp = torch.nn.Sequential(torch.nn.Linear(d_model, 4 * d_model),
                                       torch.nn.GELU(),
                                       torch.nn.Linear(4 * d_model, d_model))
        raise NotImplementedError("Exercise 8.5: implement AdaLNZeroBlock.__init__")

    def forward(self, x, c):
        """Exercise 8.5 (continued): x (N, T, E), c (N, E) -> (N, T, E)."""
        check_block_inputs(x, c, self.attn.out.out_features)
        raise NotImplementedError("Exercise 8.5: implement AdaLNZeroBlock.forward")
