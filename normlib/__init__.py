"""normlib: normalization layers written in NumPy, wrapped as torch modules. Here is what
you write, the exercises, the public API around them (functional, nn), and the provided
private modules they use (_validation: the argument checks; _channels: what BatchNorm,
InstanceNorm and GroupNorm share; _blocks: Unit 8's attention and its blocks' checks). It
imports NumPy, torch and itself only (and Numba, for Unit 7). The course's code (checks,
experiments) is the package normkit, which you import but never edit.

- ``normlib.layer_norm``     LayerNorm kernels (Exercises 1.1, 1.2, 2.1-2.4)
- ``normlib.norm``           the axes-generic normalization of Unit 3 (Exercises 3.1, 3.2)
- ``normlib.batch_norm``     BatchNorm kernels (Exercises 3.3, 3.8)
- ``normlib.group_norm``     GroupNorm kernels (Exercise 3.4)
- ``normlib.instance_norm``  InstanceNorm kernels (Exercise 3.5)
- ``normlib.rms_norm``       RMSNorm kernels (Exercises 3.6, 3.7)
- ``normlib.mlp``            a network of your kernels, trained by hand (Exercises 4.1, 4.2)
- ``normlib.transformer``    the transformer's Add & Norm, Post-LN and Pre-LN (Exercises 5.1-5.5)
- ``normlib.variance``       one-pass, two-pass and Welford variance (Exercises 6.1, 6.2)
- ``normlib.mixed_precision`` float16/bfloat16 LayerNorm and RMSNorm, and LayerNorm's
                             parameter gradients in bfloat16 (Exercises 6.3, 6.4, 6.5)
- ``normlib.layer_norm_fast`` a fast LayerNorm forward and backward (Exercises 7.1, 7.2)
- ``normlib.layer_norm_compiled`` a compiled, fused LayerNorm, in Numba (Exercises 7.3, 7.4)
- ``normlib.qk_norm``        self-attention with QK-norm (Exercise 8.1)
- ``normlib.dyt``            Dynamic Tanh, normalization's stand-in (Exercises 8.2-8.4)
- ``normlib.adaln``          adaLN-Zero's conditioned transformer block (Exercise 8.5)
- ``normlib.functional``     ``torch.nn.functional``-style functions, NumPy in, NumPy out
- ``normlib.nn``             ``torch.nn.Module`` twins whose forward and backward run the
                             kernels (Exercise 2.5)
"""

import importlib

__all__ = ["adaln", "batch_norm", "dyt", "functional", "group_norm", "instance_norm",
           "layer_norm", "layer_norm_compiled", "layer_norm_fast", "mixed_precision", "mlp",
           "nn", "norm", "qk_norm", "rms_norm", "transformer", "variance"]


def __getattr__(name):
    """`normlib.nn` and `from normlib import nn` import the module on first use, so one
    module that fails to import (a syntax error in an exercise) breaks only what uses it."""
    if name in __all__:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
