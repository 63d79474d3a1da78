"""ReZero (Unit 9: Exercise 9.2): a transformer block without a norm, its residual branches
scaled by one learned scalar that starts at zero.

Bachlechner, Majumder, Mao, Cottrell and McAuley 2020, "ReZero is All You Need"; code:
majumderb/rezero, rezero/transformer/rztx.py (class RZTXEncoderLayer, whose parameter is
named resweight). A deep Post-LN model fails to train at a high learning rate (notebook
08, section 3); ReZero drops the norms and multiplies each sublayer's output by a scalar
initialized to 0, so that every block starts as the identity. Notebook 09, section 2,
states the block and trains it at depth.

Shapes: N batch, T sequence length, E = d_model. x (N, T, E), the residual stream.
Provided (normlib/_blocks.py): the causal attention, check_stream; and the MLP below.
"""

import torch

from normlib._blocks import Attention, check_stream


class ReZeroBlock(torch.nn.Module):
    """Exercise 9.2: a transformer block with ReZero's residual scaling, and no norm.

    ReZeroBlock(d_model, nhead): x (N, T, E) -> (N, T, E), x's shape and dtype. Its
    submodules and parameter, by these names (so that the state_dict of the checks'
    reference loads into yours and back):

        attn, mlp: the two sublayers F (provided), run one after the other;
        resweight: a trainable torch.nn.Parameter of shape (1,), ReZero's alpha, one
            scalar for the whole block (both sublayers), as in the official code.

    Each sublayer's output is multiplied by alpha and added to the residual stream;
    nothing else touches the stream. Notebook 09's section 2 says what alpha starts at
    (and why), and asks you to derive the gradients at that start.
    """

    def __init__(self, d_model, nhead):
        super().__init__()
        self.attn = Attention(d_model, nhead)  # (N, T, E) -> (N, T, E), causal
        self.mlp = torch.nn.Sequential(torch.nn.Linear(d_model, 4 * d_model),
                                       torch.nn.GELU(),
                                       torch.nn.Linear(4 * d_model, d_model))
        raise NotImplementedError("Exercise 9.2: implement ReZeroBlock.__init__")

    def forward(self, x):
        """Exercise 9.2 (continued): x (N, T, E) -> (N, T, E)."""
        check_stream(x, self.attn.out.out_features)
        raise NotImplementedError("Exercise 9.2: implement ReZeroBlock.forward")
