"""normlib: normalization layers in NumPy, wrapped as torch modules: the code you write.

- Units 1 to 3: ``normlib.layer_norm`` (Exercises 1.1, 1.2, 2.1-2.4), ``normlib.norm``, the
  axes-generic normalization (3.1, 3.2), ``normlib.batch_norm`` (3.3, 3.8),
  ``normlib.group_norm`` (3.4), ``normlib.instance_norm`` (3.5), ``normlib.rms_norm`` (3.6, 3.7)
- Units 4 to 7: ``normlib.mlp`` (4.1, 4.2); ``normlib.transformer``, Add & Norm (5.1-5.5);
  ``normlib.variance`` (6.1, 6.2), ``normlib.mixed_precision`` (6.3-6.5),
  ``normlib.layer_norm_fast`` (7.1, 7.2), ``normlib.layer_norm_compiled``, Numba (7.3, 7.4)
- Units 8, 9: ``normlib.qk_norm`` (8.1), ``normlib.dyt`` (8.2-8.4), ``normlib.adaln`` (8.5),
  ``normlib.rotation`` (9.1), ``normlib.rezero`` (9.2), ``normlib.z_loss`` (9.3),
  ``normlib.fold`` (9.4), ``normlib.fused_add_norm``, Numba (9.5)
- the API: ``normlib.functional`` (NumPy) and ``normlib.nn`` (torch modules, Exercise 2.5)
- provided: _validation: argument checks; _channels: what BatchNorm, InstanceNorm, GroupNorm
  share; _blocks: Units 8-9's attention. It imports NumPy, torch and Numba only.
"""

import importlib

__all__ = ["adaln", "batch_norm", "dyt", "fold", "functional", "fused_add_norm", "group_norm",
           "instance_norm", "layer_norm", "layer_norm_compiled", "layer_norm_fast",
           "mixed_precision", "mlp", "nn", "norm", "qk_norm", "rezero", "rms_norm", "rotation",
           "transformer", "variance", "z_loss"]


def __getattr__(name):
    """`normlib.nn` and `from normlib import nn` import the module on first use, so one
    module that fails to import (a syntax error in an exercise) breaks only what uses it."""
    if name in __all__:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
