"""normlib: normalization layers written in NumPy, wrapped as torch modules.

- ``normlib.layer_norm``     LayerNorm kernels (Exercises 1.1, 1.2, 2.1)
- ``normlib.norm``           the axes-generic normalization of Unit 3 (Exercises 3.1, 3.2)
- ``normlib.batch_norm``     BatchNorm kernels (Exercise 3.3)
- ``normlib.group_norm``     GroupNorm kernels (Exercise 3.4)
- ``normlib.instance_norm``  InstanceNorm kernels (Exercise 3.5)
- ``normlib.rms_norm``       RMSNorm kernels (Exercises 3.6, 3.7)
- ``normlib.transformer``    the transformer's Add & Norm, Post-LN and Pre-LN (Exercises 4.1-4.3)
- ``normlib.functional``     ``torch.nn.functional``-style functions, NumPy in, NumPy out
- ``normlib.nn``             ``torch.nn.Module`` twins whose forward and backward run the
                             kernels (Exercise 2.2)
- ``normlib.gradcheck``      a central-difference gradient checker for NumPy functions
- ``normlib.testing``        what the exercise checks compare against
"""

from . import (
    batch_norm,
    functional,
    gradcheck,
    group_norm,
    instance_norm,
    layer_norm,
    nn,
    norm,
    rms_norm,
    transformer,
)

__all__ = ["batch_norm", "functional", "gradcheck", "group_norm", "instance_norm",
           "layer_norm", "nn", "norm", "rms_norm", "transformer"]
