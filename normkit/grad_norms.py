"""Unit 5's experiment after Xiong et al. 2020 ("On Layer Normalization in the Transformer
Architecture"): the gradient norm of each layer's linear2.weight at initialization, a
Post-LN stack against a Pre-LN one, measured on your TransformerEncoder (Exercise 5.3)
with your linear2_grad_norms (Exercise 5.5). Notebook 05, section 5, plots it;
tests/test_transformer.py asserts its trend. Your transformer.py is imported when a
measure runs, not with this module: a stub or a broken file stops only the cells that
measure.
"""

import numpy as np
import torch

from normkit.training import one_thread, xavier_init_


def grad_norms_at_init(num_layers, norm_first, seed=0, d_model=64, nhead=4,
                       dim_feedforward=256, batch=8, seq=16, dtype=torch.float32):
    """||dLoss/d linear2.weight||_F of every layer, at initialization.

    The model: TransformerEncoder(num_layers, d_model, nhead, dim_feedforward,
    norm_first=norm_first) with xavier_init_, after torch.manual_seed(seed); the loss: the
    mean squared error between its output on a standard normal input (batch, seq, d_model)
    and a standard normal target. Returns a NumPy array (num_layers,), layer 1 first.
    """
    from normlib.transformer import TransformerEncoder, linear2_grad_norms  # (the docstring)

    torch.manual_seed(seed)
    encoder = TransformerEncoder(num_layers, d_model, nhead, dim_feedforward,
                                 norm_first=norm_first, dtype=dtype)
    xavier_init_(encoder)
    x = torch.randn(batch, seq, d_model, dtype=dtype)  # (N, S, E)
    target = torch.randn(batch, seq, d_model, dtype=dtype)  # (N, S, E)
    with one_thread():
        return linear2_grad_norms(encoder, x, target)


def grad_norm_profile(num_layers, norm_first, seeds=(0, 1, 2), **sizes):
    """grad_norms_at_init averaged over seeds: (num_layers,), layer 1 first."""
    return np.mean([grad_norms_at_init(num_layers, norm_first, s, **sizes) for s in seeds], 0)


def last_layer_grad_norms(num_layers, norm_first, seeds=(0, 1, 2), **sizes):
    """The gradient norm of the last layer's linear2.weight (W^{2,L} in the paper) at
    initialization, averaged over seeds; **sizes go to grad_norms_at_init. About constant
    in num_layers for Post-LN, about proportional to 1 / sqrt(num_layers) for Pre-LN."""
    return float(grad_norm_profile(num_layers, norm_first, seeds, **sizes)[-1])
