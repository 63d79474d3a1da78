"""Unit 8's layers (normlib/qk_norm.py, normlib/dyt.py, normlib/adaln.py, the reference's):
bad input gets a specific error, the attention's norms are the student's own RMSNorm, whose
kernels give torch's results there, and the adaLN-Zero block's state_dict loads both ways
with the section's reference block (normkit.conditioning), which it then computes."""

import numpy as np
import pytest
import torch

from normkit import conditioning
from normkit.checks.unit8 import ReferenceAttention, ReferenceBlock
from normkit.testing import encoder_tolerance, torch_norms, torch_tensor_close
from normlib import nn
from normlib.adaln import AdaLNZeroBlock
from normlib.dyt import DyT, dyt_backward, dyt_forward
from normlib.qk_norm import QKNormSelfAttention
from tests.conftest import exercise


@exercise("8.1")
def test_the_attentions_norms_are_your_rmsnorm_and_give_torchs_results():
    torch.manual_seed(0)
    ours = QKNormSelfAttention(16, 4, dtype=torch.float64)
    assert isinstance(ours.q_norm, nn.RMSNorm) and isinstance(ours.k_norm, nn.RMSNorm)
    assert ours.q_norm.weight.shape == ours.k_norm.weight.shape == (4,)
    assert ours.q_norm.eps == ours.k_norm.eps == 1e-6
    with torch_norms():
        theirs = QKNormSelfAttention(16, 4, dtype=torch.float64)
    assert isinstance(theirs.q_norm, torch.nn.RMSNorm)
    with torch.no_grad():
        ours.q_norm.weight.uniform_(0.5, 2)
        ours.k_norm.weight.uniform_(-2, 2)
    theirs.load_state_dict(ours.state_dict())
    ours.is_causal = theirs.is_causal = True
    x = 3 * torch.randn(2, 7, 16, dtype=torch.float64)  # (N, S, E)
    torch_tensor_close(ours(x), theirs(x).detach(), "output", **encoder_tolerance(x, 1, 16))
    exact = ReferenceAttention(16, 4, 1e-6, is_causal=True).double()
    exact.load_state_dict(ours.state_dict())
    torch_tensor_close(ours(x), exact(x).detach(), "output", **encoder_tolerance(x, 1, 16))


def test_qk_norm_attention_refuses_heads_that_do_not_divide_the_model():
    with pytest.raises(ValueError, match=r"d_model \(10\) must be divisible by nhead \(3\)"):
        QKNormSelfAttention(10, 3)
    with pytest.raises(ValueError, match=r"expected input of shape \(N, S, 8\).*got shape "
                                         r"\(2, 5, 6\)"):
        QKNormSelfAttention(8, 2)(torch.randn(2, 5, 6))


@pytest.mark.parametrize("shape, message", [
    (0, "normalized_shape must be the number of channels C"),
    ((2, 3), "normalized_shape must be the number of channels C"),
    ("8", "got '8'"),
])
def test_dyt_refuses_a_shape_that_is_not_one_channel_count(shape, message):
    with pytest.raises(ValueError, match=message):
        DyT(shape)


@exercise("8.4")
def test_dyt_refuses_input_it_cannot_map():
    layer = DyT(4)
    assert layer.normalized_shape == DyT((4,)).normalized_shape == (4,)
    assert [name for name, _ in layer.named_parameters()] == ["alpha", "weight", "bias"]
    assert layer.alpha.shape == (1,) and layer.alpha.item() == 0.5
    with pytest.raises(TypeError, match="input must be a torch.Tensor, got ndarray"):
        layer(np.zeros((2, 4), dtype=np.float32))
    with pytest.raises(ValueError, match=r"\(4,\)"):
        layer(torch.zeros(2, 5))
    with pytest.raises(TypeError, match="float32 or float64"):
        layer(torch.zeros(2, 4, dtype=torch.int64))


@exercise("8.2")
def test_dyt_kernels_keep_float32():
    x = np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4)
    alpha, weight, bias = (np.array([0.5], np.float32), np.ones(4, np.float32),
                           np.zeros(4, np.float32))
    assert dyt_forward(x, alpha, weight, bias).dtype == np.float32


@exercise("8.3")
def test_dyt_backward_shapes_and_dtypes():
    x = np.linspace(-3, 3, 24, dtype=np.float32).reshape(2, 3, 4)
    grads = dyt_backward(np.ones_like(x), x, np.array([0.5], np.float32), np.ones(4, np.float32))
    assert [(g.shape, g.dtype) for g in grads] == [((2, 3, 4), np.float32), ((1,), np.float32),
                                                   ((4,), np.float32), ((4,), np.float32)]


@exercise("8.5")
def test_the_adaln_zero_block_loads_both_ways_and_computes_the_references():
    """The student's block and normkit.conditioning.AdaLNBlock: the same parameter names
    and shapes, each state_dict loading into the other; with random weights (the modulation
    too) the same output, and the checks' ReferenceBlock (torch's functions) the same."""
    torch.manual_seed(0)
    ours, theirs = AdaLNZeroBlock(16, 4).double(), conditioning.AdaLNBlock(16, 4).double()
    assert {k: v.shape for k, v in ours.state_dict().items()} == \
        {k: v.shape for k, v in theirs.state_dict().items()}
    assert not ours.modulation[1].weight.any() and not ours.modulation[1].bias.any()
    with torch.no_grad():
        for p in theirs.parameters():
            p.normal_(0, 0.5)
    ours.load_state_dict(theirs.state_dict())
    theirs.load_state_dict(ours.state_dict())
    x, c = torch.randn(3, 5, 16, dtype=torch.float64), torch.randn(3, 16, dtype=torch.float64)
    torch_tensor_close(ours(x, c), theirs(x, c).detach(), "output", rtol=1e-12, atol=1e-12)
    exact = ReferenceBlock(16, 4).double()
    exact.load_state_dict(ours.state_dict())
    torch_tensor_close(ours(x, c), exact(x, c).detach(), "output", rtol=1e-12, atol=1e-12)


@exercise("8.5")
def test_the_adaln_zero_block_refuses_a_condition_per_token():
    with pytest.raises(ValueError, match=r"c must be \(N, E\) = \(4, 8\), one condition "
                                         r"embedding per sequence"):
        AdaLNZeroBlock(8, 2)(torch.zeros(4, 4, 8), torch.zeros(4, 4, 8))
