"""normlib: normalization layers written in NumPy, wrapped as torch modules.

- ``normlib.layer_norm``  the LayerNorm kernels (Exercises 1.1, 1.2, 2.1)
- ``normlib.functional``  ``torch.nn.functional``-style functions, NumPy in, NumPy out
- ``normlib.nn``          ``torch.nn.Module`` twins whose forward and backward run the kernels
- ``normlib.gradcheck``   a central-difference gradient checker for NumPy functions
"""

from . import functional, gradcheck, layer_norm, nn

__all__ = ["functional", "gradcheck", "layer_norm", "nn"]
