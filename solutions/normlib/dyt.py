"""Dynamic Tanh, DyT (Unit 8: Exercises 8.2, 8.3 and 8.4): a transformer without
normalization, DyT(x) = weight * tanh(alpha * x) + bias in place of each LayerNorm.

Zhu, Chen, He, LeCun and Liu, "Transformers without Normalization" (CVPR 2025), saw that a
trained transformer's LayerNorms map their inputs to their outputs along S-shaped, tanh-
like curves, and replaced each norm with an elementwise tanh whose input scale alpha is
learned: a scalar, one for the whole layer (their code initializes it to 0.5), then the
usual per-channel weight and bias. No statistic is computed: each element is mapped alone.

Shapes: x (*B, C), the channels last (as a transformer's tokens); alpha (1,); weight and
bias (C,). The kernels are NumPy in, NumPy out, and keep x's dtype (float32 or float64).
"""

import numpy as np
import torch

from normlib._validation import check_layer_norm_args


def dyt_forward(x, alpha, weight, bias):
    """Exercise 8.2: DyT's forward.

    Args:
        x: float32 or float64 array (*B, C).
        alpha: (1,), the learned input scale (one for every element).
        weight, bias: (C,), the per-channel gain and shift.
    Returns:
        y: (*B, C), x's dtype: weight * tanh(alpha * x) + bias.
    Saved for backward: nothing but the inputs (the backward recomputes the tanh).
    """
    ### BEGIN SOLUTION
    return weight * np.tanh(alpha * x) + bias  # (*B, C)
    ### END SOLUTION


def dyt_backward(grad_output, x, alpha, weight):
    """Exercise 8.3: DyT's backward, derived as notebook 08 asks.

    Args:
        grad_output: (*B, C), dL/dy.
        x: (*B, C), the forward's input.
        alpha: (1,); weight: (C,), as given to the forward.
    Returns:
        dx: (*B, C), dL/dx.
        dalpha: (1,), dL/dalpha: alpha touches every element of x.
        dweight, dbias: (C,), summed over every leading dim.
        All with x's dtype.
    """
    ### BEGIN SOLUTION
    lead = tuple(range(x.ndim - 1))  # the dims of B
    t = np.tanh(alpha * x)  # (*B, C)
    g = grad_output * weight * (1 - t * t)  # (*B, C): dL/d(alpha x)
    dalpha = (g * x).sum(keepdims=True).reshape(1)  # (1,)
    return alpha * g, dalpha, (grad_output * t).sum(axis=lead), grad_output.sum(axis=lead)
    ### END SOLUTION


class DyTFunction(torch.autograd.Function):
    """Exercise 8.4: DyT as a torch.autograd.Function over the NumPy kernels (as Exercise
    2.5 did for LayerNorm).

    Usage: DyTFunction.apply(input, alpha, weight, bias): input (*B, C), alpha (1,),
    weight and bias (C,), all tensors of one dtype.

    forward: calls dyt_forward on NumPy views and returns y (*B, C) as a tensor.
        Saved for backward: input, alpha and weight (ctx.save_for_backward).
    backward: calls dyt_backward and returns one gradient per forward argument:
        (dx, dalpha, dweight, dbias), tensors of the shapes of (input, alpha, weight, bias).
    """

    @staticmethod
    def forward(ctx, input, alpha, weight, bias):
        ### BEGIN SOLUTION
        arrays = [t.detach().numpy() for t in (input, alpha, weight, bias)]  # views
        ctx.save_for_backward(input, alpha, weight)
        return torch.from_numpy(dyt_forward(*arrays))
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        input, alpha, weight = ctx.saved_tensors
        arrays = [t.detach().numpy() for t in (grad_output, input, alpha, weight)]
        return tuple(torch.from_numpy(np.ascontiguousarray(g)) for g in dyt_backward(*arrays))
        ### END SOLUTION


class DyT(torch.nn.Module):
    """Dynamic Tanh in place of a LayerNorm over the last dim (provided): parameters alpha
    (1,), initialized to alpha_init_value, weight (C,) ones and bias (C,) zeros, named as in
    the authors' code (jiachenzhu/DyT, dynamic_tanh.py: DynamicTanh with channels_last=True);
    forward(input) (*B, C) -> (*B, C) through DyTFunction."""

    def __init__(self, normalized_shape, alpha_init_value=0.5, device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, (tuple, list)) and len(normalized_shape) == 1:
            normalized_shape = normalized_shape[0]
        if not isinstance(normalized_shape, int) or normalized_shape < 1:
            raise ValueError("normalized_shape must be the number of channels C (an int >= "
                             f"1, or a tuple of one), got {normalized_shape!r}")
        factory = {"device": device, "dtype": dtype}
        self.normalized_shape = (normalized_shape,)
        self.alpha_init_value = alpha_init_value
        self.alpha = torch.nn.Parameter(torch.full((1,), float(alpha_init_value), **factory))
        self.weight = torch.nn.Parameter(torch.ones(normalized_shape, **factory))
        self.bias = torch.nn.Parameter(torch.zeros(normalized_shape, **factory))

    def forward(self, input):
        if not isinstance(input, torch.Tensor):
            raise TypeError(f"input must be a torch.Tensor, got {type(input).__name__}")
        check_layer_norm_args(input.detach().numpy(), self.normalized_shape,
                              self.weight.detach().numpy(), self.bias.detach().numpy())
        return DyTFunction.apply(input, self.alpha, self.weight, self.bias)

    def extra_repr(self):
        return f"{self.normalized_shape}, alpha_init_value={self.alpha_init_value}"
