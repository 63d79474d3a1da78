"""torch.nn.Module twins of torch's normalization layers, computed by the NumPy kernels.

Each module has its torch twin's constructor signature and parameter names (so
state_dicts load both ways), and runs forward and backward through a
torch.autograd.Function that converts tensors to NumPy, calls the kernels and
converts back. CPU tensors only.
"""

import torch

from ._validation import as_normalized_shape, check_layer_norm_args
from .layer_norm import layer_norm_backward, layer_norm_forward


def to_numpy(t):
    """A tensor as a NumPy array sharing its memory (None stays None)."""
    return None if t is None else t.detach().cpu().numpy()


def to_tensor(a):
    """A NumPy array as a tensor sharing its memory (None stays None)."""
    return None if a is None else torch.from_numpy(a)


class LayerNormFunction(torch.autograd.Function):
    """Exercise 2.2: LayerNorm as a torch.autograd.Function over the NumPy kernels.

    Usage: LayerNormFunction.apply(input, normalized_shape, weight, bias, eps), where
    input is (*B, *S), normalized_shape the tuple S, weight and bias (*S) or None.

    forward: calls layer_norm_forward on NumPy views and returns y (*B, *S) as a tensor.
        Saved for backward: input, weight and bias (the tensors themselves, with
        ctx.save_for_backward) and mean, rstd (*B, 1, .., 1); normalized_shape on ctx.
    backward: calls layer_norm_backward and returns one gradient per forward argument:
        (dx, None, dweight, dbias, None); None for the non-tensor arguments.
    """

    @staticmethod
    def forward(ctx, input, normalized_shape, weight, bias, eps):
        raise NotImplementedError("Exercise 2.2: implement LayerNormFunction.forward")

    @staticmethod
    def backward(ctx, grad_output):
        raise NotImplementedError("Exercise 2.2: implement LayerNormFunction.backward")


class LayerNorm(torch.nn.Module):
    """Like torch.nn.LayerNorm: parameters ``weight`` and ``bias`` of shape normalized_shape."""

    def __init__(
        self,
        normalized_shape,
        eps=1e-5,
        elementwise_affine=True,
        bias=True,
        device=None,
        dtype=None,
    ):
        super().__init__()
        self.normalized_shape = as_normalized_shape(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        factory = {"device": device, "dtype": dtype}
        if elementwise_affine:
            self.weight = torch.nn.Parameter(torch.empty(self.normalized_shape, **factory))
            if bias:
                self.bias = torch.nn.Parameter(torch.empty(self.normalized_shape, **factory))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.weight is not None:
            torch.nn.init.ones_(self.weight)
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)

    def forward(self, input):
        if not isinstance(input, torch.Tensor):
            raise TypeError(f"input must be a torch.Tensor, got {type(input).__name__}")
        check_layer_norm_args(
            to_numpy(input), self.normalized_shape, to_numpy(self.weight), to_numpy(self.bias)
        )
        return LayerNormFunction.apply(
            input, self.normalized_shape, self.weight, self.bias, self.eps
        )

    def extra_repr(self):
        return (
            f"{self.normalized_shape}, eps={self.eps}, "
            f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}"
        )
