"""Folding an RMSNorm's gain into the next linear layer (Unit 9: Exercise 9.4).

An RMSNorm ends with its gain g, a per-channel multiplication, and in a Pre-LN model the
next thing its output meets is a linear layer. Quantization pipelines move g into that
layer's weight and leave a norm without a gain (QuaRot, Ashkboos et al. 2024; code:
spcl/QuaRot, fake_quant/rotation_utils.py, fuse_ln_linear): the model computes the same
thing, and the activations between the two no longer carry g's large channels. Notebook 09,
section 4, measures why that matters for int8.

Shapes: the norm normalizes over E, its gain g (E,); the linear maps E -> F, its weight
(F, E) and its bias (F,) or None. torch tensors in, new torch tensors out.
"""

import torch


def fold_rms_gain(gain, weight, bias=None):
    """Exercise 9.4: fold a norm's gain into the linear layer after it.

    Args:
        gain: (E,), the RMSNorm's weight g, or None (a norm without one).
        weight: (F, E), the next torch.nn.Linear's weight W, gain's dtype.
        bias: (F,), that Linear's bias, or None.
    Returns:
        (folded_weight, folded_bias): new tensors, (F, E) and (F,) or None, of weight's
        dtype, such that the linear layer with them after the norm without its gain,
        F.linear(F.rms_norm(x, (E,), None, eps), folded_weight, folded_bias), equals the
        original pair, F.linear(F.rms_norm(x, (E,), gain, eps), weight, bias), for every
        x (*B, E) and eps, up to rounding. gain, weight and bias are left as they were
        (the model you fold from may still be in use).
    Raises:
        TypeError or ValueError (check_fold_args, provided): not tensors, or sizes and
        dtypes that do not chain.
    """
    check_fold_args(gain, weight, bias)
    ### BEGIN SOLUTION
    with torch.no_grad():
        folded = weight * gain if gain is not None else weight.clone()  # (F, E): W[:, j] g_j
        return folded, None if bias is None else bias.clone()  # b: after the matmul
    ### END SOLUTION


def check_fold_args(gain, weight, bias):
    """Provided: weight a float matrix (F, E); gain (E,) or None and bias (F,) or None, of
    weight's dtype."""
    if not isinstance(weight, torch.Tensor) or weight.dim() != 2 or \
            not weight.dtype.is_floating_point:
        raise TypeError("weight must be a float torch.Tensor (F, E), got "
                        + (f"shape {tuple(weight.shape)} {weight.dtype}"
                           if isinstance(weight, torch.Tensor) else type(weight).__name__))
    f, e = weight.shape
    for name, t, size in (("gain", gain, e), ("bias", bias, f)):
        if t is None:
            continue
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor or None, got {type(t).__name__}")
        if tuple(t.shape) != (size,) or t.dtype != weight.dtype:
            raise ValueError(f"{name} must be ({size},) {weight.dtype} for a weight "
                             f"({f}, {e}), got {tuple(t.shape)} {t.dtype}")
