"""Folding an RMSNorm's gain into the next linear layer (Unit 9: Exercise 9.4).

An RMSNorm ends with its gain g, a per-channel multiplication, and in a Pre-LN model the
next thing its output meets is a linear layer. Quantization pipelines move g into that
layer's weight and leave a norm without a gain (QuaRot, Ashkboos et al. 2024; code:
spcl/QuaRot, fake_quant/rotation_utils.py, fuse_ln_linear): the model computes the same
thing, and the activations between the two no longer carry g's large channels. Notebook 09,
section 4, measures why that matters for int8.

Shapes: the norm normalizes over E (normalized_shape (E,)); the linear maps E -> F, its
weight (F, E) and its bias (F,) or None. Modules in, new modules out.
"""

import torch


def fold_rms_gain(norm, linear):
    """Exercise 9.4: fold norm's gain into linear.

    Args:
        norm: a torch.nn.RMSNorm over (E,), with a gain (norm.weight (E,)) or without one.
        linear: a torch.nn.Linear(E, F), with or without a bias, of norm's dtype.
    Returns:
        (folded_norm, folded_linear), two new modules such that
        folded_linear(folded_norm(x)) equals linear(norm(x)) for every x (*B, E), up to
        rounding: folded_norm a torch.nn.RMSNorm over (E,) without a gain
        (elementwise_affine=False) and with norm's eps; folded_linear a torch.nn.Linear(E,
        F) of linear's dtype, with a bias where linear has one. norm and linear are left
        as they were (the model you fold from may still be in use).
    Raises:
        TypeError or ValueError (check_fold_args, provided): other modules, or sizes that
        do not chain.
    """
    check_fold_args(norm, linear)
    raise NotImplementedError("Exercise 9.4: implement fold_rms_gain")


def check_fold_args(norm, linear):
    """Provided: norm an RMSNorm over one axis, linear a Linear reading its output."""
    if not isinstance(norm, torch.nn.RMSNorm):
        raise TypeError(f"norm must be a torch.nn.RMSNorm, got {type(norm).__name__}")
    if not isinstance(linear, torch.nn.Linear):
        raise TypeError(f"linear must be a torch.nn.Linear, got {type(linear).__name__}")
    if len(norm.normalized_shape) != 1 or norm.normalized_shape[0] != linear.in_features:
        raise ValueError(f"norm must normalize over linear's in_features ({linear.in_features}"
                         f",), got normalized_shape {tuple(norm.normalized_shape)}")
    if norm.weight is not None and norm.weight.dtype != linear.weight.dtype:
        raise ValueError(f"norm and linear must share one dtype, got {norm.weight.dtype} and "
                         f"{linear.weight.dtype}")
