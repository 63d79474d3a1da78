"""Unit 4's checks: Exercises 4.1 (add_norm), 4.2 (TransformerEncoderLayer), 4.3
(TransformerEncoder), 4.4 (final_norm_gain) and 4.5 (linear2_grad_norms).

4.1 compares your add_norm with its two formulas; 4.2, 4.3 and 4.5 load the weights of
torch's TransformerEncoderLayer / TransformerEncoder into yours (torch's norms inside,
normkit.testing.torch_norms) and compare outputs and gradients within the error model's
tolerance (normkit.testing.encoder_tolerance); 4.4 compares your gains with the spectral
norm of the Jacobian torch computes. Your classes and functions are imported when a check
runs, so they are always your file as it is now.
"""

import numpy as np
import torch
import torch.nn.functional as F

from normkit.checks import exercise
from normkit.testing import (
    assert_close,
    assert_same_computation,
    encoder_tolerance,
    norm_tolerance,
    perturb_,
    torch_layer_norm_jacobian,
    torch_norms,
    torch_tensor_close,
)

# Exercise 4.1: add_norm ---------------------------------------------------------------------


def counted(fn, calls, name):
    """fn, recording its name in calls at every call."""
    def wrapper(x):
        calls.append(name)
        return fn(x)
    return wrapper


def check_add_norm(sublayer, norm, shape, norm_first, dtype=torch.float32, seed=0):
    """Your add_norm against its formula (value, shape, dtype), with sublayer and norm
    called once each."""
    from normlib.transformer import add_norm

    x = torch.randn(shape, dtype=dtype, generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        expected = x + sublayer(norm(x)) if norm_first else norm(x + sublayer(x))
        calls = []
        y = add_norm(x, counted(sublayer, calls, "sublayer"), counted(norm, calls, "norm"),
                     norm_first)
    kind = "Pre-LN" if norm_first else "Post-LN"
    case = f"{kind}, x {tuple(shape)} {dtype}"
    torch_tensor_close(y, expected, f"add_norm output, {case}")
    assert sorted(calls) == ["norm", "sublayer"], f"{case}: called {calls}; call each once"


@exercise("4.1", "transformer.add_norm")
def visible_4_1():
    torch.manual_seed(0)
    linear = torch.nn.Linear(8, 8)
    norm = torch.nn.LayerNorm(8)
    with torch.no_grad():  # random affine: a norm misplaced or skipped shows
        norm.weight.normal_(1.0, 0.5)
        norm.bias.normal_(0.0, 0.5)
    check_add_norm(linear, norm, (2, 5, 8), norm_first=False)
    check_add_norm(linear, norm, (2, 5, 8), norm_first=True)


# Exercise 4.2: TransformerEncoderLayer ------------------------------------------------------


def check_layer(norm_first, shape=(2, 5, 8), nhead=2, dim_feedforward=16, activation="relu",
                norm="layer", dtype=torch.float32, dropout=0.0, seed=0):
    """Your layer (torch's norms inside) against torch.nn.TransformerEncoderLayer with the
    same weights, random norm parameters and biases included, computed exactly (float64):
    output and every gradient under a random upstream gradient, within the error model's
    tolerance for one layer (normkit.testing.encoder_tolerance). Both in training mode, or
    both in evaluation mode with dropout > 0 (with an input that requires grad, torch skips
    its fused path)."""
    from normlib.transformer import TransformerEncoderLayer

    n, s, e = shape
    torch.manual_seed(seed)
    theirs = torch.nn.TransformerEncoderLayer(e, nhead, dim_feedforward, dropout, activation,
                                              batch_first=True, norm_first=norm_first,
                                              dtype=dtype)
    if norm == "rms":
        theirs.norm1 = torch.nn.RMSNorm(e, eps=1e-5, dtype=dtype)
        theirs.norm2 = torch.nn.RMSNorm(e, eps=1e-5, dtype=dtype)
    perturb_(theirs, seed + 1)
    with torch_norms():
        ours = TransformerEncoderLayer(e, nhead, dim_feedforward, dropout, activation,
                                       norm_first=norm_first, norm=norm, dtype=dtype)
    ours.load_state_dict(theirs.state_dict())
    if dropout:
        ours.eval()
        theirs.eval()
    x = 2 * torch.randn(shape, dtype=dtype) + 1  # (N, S, E)
    kind = "Pre-LN" if norm_first else "Post-LN"
    mode = f", dropout {dropout} in eval mode" if dropout else ""
    case = f"for {kind}, x {shape} {dtype}, {activation}, norm={norm!r}{mode}"
    assert_same_computation(ours, theirs, x, case, seed,
                            encoder_tolerance(x, 1, dim_feedforward))


@exercise("4.2", "transformer.TransformerEncoderLayer")
def visible_4_2():
    check_layer(norm_first=False)


# Exercise 4.3: TransformerEncoder -----------------------------------------------------------


def check_encoder(num_layers, norm_first, shape=(2, 5, 8), nhead=2, dim_feedforward=16,
                  norm="layer", dtype=torch.float32, seed=0, scale=2.0, **options):
    """Your stack (torch's norms inside) against torch.nn.TransformerEncoder with the same
    weights, every parameter of every layer different: state_dict keys, independent
    layers, output and every gradient under a random upstream gradient, computed exactly
    (float64), within the error model's tolerance for num_layers layers
    (normkit.testing.encoder_tolerance). options: the layers' activation, layer_norm_eps,
    bias; scale: the input's."""
    from normlib.transformer import TransformerEncoder

    n, s, e = shape
    eps, bias = options.get("layer_norm_eps", 1e-5), options.get("bias", True)
    torch.manual_seed(seed)
    layer = torch.nn.TransformerEncoderLayer(e, nhead, dim_feedforward, 0.0, batch_first=True,
                                             norm_first=norm_first, dtype=dtype, **options)
    if norm == "rms":
        layer.norm1 = torch.nn.RMSNorm(e, eps=eps, dtype=dtype)
        layer.norm2 = torch.nn.RMSNorm(e, eps=eps, dtype=dtype)
    final = None
    if norm_first:
        final = (torch.nn.RMSNorm(e, eps=eps, dtype=dtype) if norm == "rms"
                 else torch.nn.LayerNorm(e, eps=eps, bias=bias, dtype=dtype))
    theirs = torch.nn.TransformerEncoder(layer, num_layers, final, enable_nested_tensor=False)
    perturb_(theirs, seed + 1, weight_scale=0.3)  # torch's layers start as copies of one
    with torch_norms():
        ours = TransformerEncoder(num_layers, e, nhead, dim_feedforward, norm_first=norm_first,
                                  norm=norm, dtype=dtype, **options)
    kind = "Pre-LN" if norm_first else "Post-LN"
    case = f"for {kind}, {num_layers} layers, x {shape} {dtype}, norm={norm!r}, {options}"
    keys, expected_keys = set(ours.state_dict()), set(theirs.state_dict())
    assert keys == expected_keys, (
        f"state_dict keys {case}: missing {sorted(expected_keys - keys)[:4]}, "
        f"unexpected {sorted(keys - expected_keys)[:4]}")
    params = list(ours.parameters())
    assert len({p.data_ptr() for p in params}) == len(params) == len(list(theirs.parameters())), (
        f"parameters shared between layers {case}: build a new layer for each")
    ours.load_state_dict(theirs.state_dict())
    x = scale * torch.randn(shape, dtype=dtype) + 1  # (N, S, E)
    assert_same_computation(ours, theirs, x, case, seed,
                            encoder_tolerance(x, num_layers, dim_feedforward, eps))


@exercise("4.3", "transformer.TransformerEncoder")
def visible_4_3():
    check_encoder(num_layers=3, norm_first=False)
    check_encoder(num_layers=3, norm_first=True)


# Exercise 4.4: final_norm_gain --------------------------------------------------------------


def torch_gains(stream, eps):
    """The spectral norm of torch's Jacobian of layer_norm (no weight or bias) at each token
    of stream (*B, E), computed in float64 and rounded to stream's dtype: (*B,)."""
    J = torch_layer_norm_jacobian(stream, eps)  # (*B, E, E)
    return torch.linalg.matrix_norm(J, ord=2).to(stream.dtype)  # (*B,)


def check_gain(stream, eps=1e-5):
    """Your gains against torch's, in value, shape and dtype; tolerance: two stages of the
    error model (normkit.testing)."""
    from normlib.transformer import final_norm_gain

    case = f"for a stream {tuple(stream.shape)} {stream.dtype}, eps={eps}"
    tol = norm_tolerance(stream, (-1,), eps, depth=2)
    torch_tensor_close(final_norm_gain(stream, eps), torch_gains(stream, eps), f"gain {case}",
                       **tol)


@exercise("4.4", "transformer.final_norm_gain")
def visible_4_4():
    torch.manual_seed(0)
    check_gain(3.8 * torch.randn(2, 5, 16))  # (N, S, E): a stream grown to RMS 3.8
    check_gain(torch.randn(4, 8, dtype=torch.float64) + 2)  # tokens with a nonzero mean


# Exercise 4.5: linear2_grad_norms -----------------------------------------------------------


def check_profile(num_layers, norm_first, shape=(2, 5, 8), nhead=2, dim_feedforward=16,
                  seed=0):
    """Your profile of your stack (torch's norms inside, float64), called twice, against the
    gradient norms of torch.nn.TransformerEncoder with the same weights, in value, shape and
    dtype, within the error model's tolerance for num_layers layers."""
    from normlib.transformer import TransformerEncoder, linear2_grad_norms

    n, s, e = shape
    torch.manual_seed(seed)
    layer = torch.nn.TransformerEncoderLayer(e, nhead, dim_feedforward, 0.0, batch_first=True,
                                             norm_first=norm_first, dtype=torch.float64)
    final = torch.nn.LayerNorm(e, dtype=torch.float64) if norm_first else None
    theirs = torch.nn.TransformerEncoder(layer, num_layers, final, enable_nested_tensor=False)
    perturb_(theirs, seed + 1, weight_scale=0.3)  # every layer different
    with torch_norms():
        ours = TransformerEncoder(num_layers, e, nhead, dim_feedforward, norm_first=norm_first,
                                  dtype=torch.float64)
    ours.load_state_dict(theirs.state_dict())
    x, target = torch.randn(shape, dtype=torch.float64), torch.randn(shape, dtype=torch.float64)
    F.mse_loss(theirs(x), target).backward()
    expected = np.array([layer.linear2.weight.grad.norm().item() for layer in theirs.layers])
    case = f"for {'Pre' if norm_first else 'Post'}-LN, {num_layers} layers, x {shape}"
    tol = encoder_tolerance(x, num_layers, dim_feedforward)
    for call in ("first", "second"):
        assert_close(linear2_grad_norms(ours, x, target), expected, f"{call} call {case}", **tol)


@exercise("4.5", "transformer.linear2_grad_norms")
def visible_4_5():
    check_profile(3, norm_first=False)
    check_profile(3, norm_first=True)
