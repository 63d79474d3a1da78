"""torch.nn.Module twins of torch's normalization layers, computed by the NumPy kernels.

Each module has its torch twin's constructor signature and parameter names (so
state_dicts load both ways), and runs forward and backward through a
torch.autograd.Function that converts tensors to NumPy, calls the kernels and
converts back. CPU tensors only. An empty input never reaches a kernel: KernelFunction
runs empty_forward and empty_backward instead, torch's result (see normlib/_validation.py).

Each of Unit 3's modules imports its kernels when it runs, not when this module is
imported: a broken batch_norm.py breaks BatchNorm1d, not LayerNorm (Exercise 2.5).
"""

import torch

from normlib._validation import (
    as_normalized_shape,
    check_batch_norm_args,
    check_group_norm_args,
    check_instance_norm_args,
    check_layer_norm_args,
    check_rms_norm_args,
    empty_backward,
    empty_forward,
    forget_running_stats,
)

from .layer_norm import layer_norm_backward, layer_norm_forward


def to_numpy(t):
    """A tensor as a NumPy array sharing its memory (None stays None)."""
    return None if t is None else t.detach().cpu().numpy()


def to_tensor(a):
    """A NumPy array as a tensor sharing its memory (None stays None)."""
    return None if a is None else torch.from_numpy(a)


class LayerNormFunction(torch.autograd.Function):
    """Exercise 2.5: LayerNorm as a torch.autograd.Function over the NumPy kernels.

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
        ### BEGIN SOLUTION
        y, mean, rstd = layer_norm_forward(
            to_numpy(input), normalized_shape, to_numpy(weight), to_numpy(bias), eps
        )
        ctx.save_for_backward(input, weight, bias, to_tensor(mean), to_tensor(rstd))
        ctx.normalized_shape = normalized_shape
        return to_tensor(y)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION
        input, weight, bias, mean, rstd = ctx.saved_tensors
        dx, dweight, dbias = layer_norm_backward(
            to_numpy(grad_output),
            to_numpy(input),
            ctx.normalized_shape,
            to_numpy(mean),
            to_numpy(rstd),
            to_numpy(weight),
            to_numpy(bias),
        )
        return to_tensor(dx), None, to_tensor(dweight), to_tensor(dbias), None
        ### END SOLUTION


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
        if input.numel() == 0:  # torch's result, without Exercise 2.5's function
            return KernelFunction.apply(empty_forward, empty_backward, input, self.weight,
                                        self.bias)
        return LayerNormFunction.apply(
            input, self.normalized_shape, self.weight, self.bias, self.eps
        )

    def extra_repr(self):
        return (
            f"{self.normalized_shape}, eps={self.eps}, "
            f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}"
        )


# The family of Unit 3 ---------------------------------------------------------------------


class KernelFunction(torch.autograd.Function):
    """Any layer of Unit 3 under autograd (provided; Exercise 2.5 wrote LayerNorm's).

    Usage: KernelFunction.apply(forward, backward, input, weight, bias), where
        forward(x, weight, bias) -> (y, *saved)      NumPy arrays in and out
        backward(grad_output, *saved, weight, bias) -> (dx, dweight, dbias)
    are a layer's kernels with its settings bound (see the modules below). The saved
    arrays stay on ctx as NumPy arrays; weight and bias go through save_for_backward.
    An empty input runs empty_forward and empty_backward instead: the kernels never see one.
    """

    @staticmethod
    def forward(ctx, forward, backward, input, weight, bias):
        if input.numel() == 0:
            forward, backward = empty_forward, empty_backward
        y, *saved = forward(to_numpy(input), to_numpy(weight), to_numpy(bias))
        ctx.backward, ctx.saved = backward, saved
        ctx.save_for_backward(weight, bias)
        return to_tensor(y)

    @staticmethod
    def backward(ctx, grad_output):
        weight, bias = ctx.saved_tensors
        dx, dweight, dbias = ctx.backward(
            to_numpy(grad_output), *ctx.saved, to_numpy(weight), to_numpy(bias)
        )
        return None, None, to_tensor(dx), to_tensor(dweight), to_tensor(dbias)


def _affine_parameters(module, shape, affine, bias, factory):
    """weight (ones) and bias (zeros) of `shape`, or None, as torch's layers register them."""
    module.weight = torch.nn.Parameter(torch.ones(shape, **factory)) if affine else None
    module.bias = torch.nn.Parameter(torch.zeros(shape, **factory)) if affine and bias else None


class _NormBase(torch.nn.Module):
    """What BatchNorm and InstanceNorm share with torch's _NormBase: parameters weight and
    bias (C,), buffers running_mean, running_var (C,) and num_batches_tracked."""

    _min_ndim = 2  # the fewest dims of a batched input

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None, *, bias=True):
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        _affine_parameters(self, (num_features,), affine, bias, factory)
        if track_running_stats:
            self.register_buffer("running_mean", torch.zeros(num_features, **factory))
            self.register_buffer("running_var", torch.ones(num_features, **factory))
            self.register_buffer("num_batches_tracked", torch.tensor(0, dtype=torch.long))
        else:
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(name, None)

    def reset_running_stats(self):
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def _check_ndim(self, input):
        if not isinstance(input, torch.Tensor):
            raise TypeError(f"input must be a torch.Tensor, got {type(input).__name__}")
        if input.dim() not in self._ndims:
            dims = " or ".join(f"{d}D" for d in self._ndims)
            raise ValueError(f"expected {dims} input (got {input.dim()}D input)")

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, track_running_stats={self.track_running_stats}")


class _BatchNorm(_NormBase):
    def forward(self, input):
        from .batch_norm import batch_norm_backward, batch_norm_forward

        self._check_ndim(input)
        momentum = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:  # a cumulative average of every batch seen
                momentum = 1.0 / float(self.num_batches_tracked)
        training = self.training or self.running_mean is None  # no running stats: batch's
        track = not self.training or self.track_running_stats
        running_mean = to_numpy(self.running_mean) if track else None
        running_var = to_numpy(self.running_var) if track else None
        check_batch_norm_args(to_numpy(input), running_mean, running_var,
                              to_numpy(self.weight), to_numpy(self.bias), training)

        def forward(x, weight, bias):
            return batch_norm_forward(x, running_mean, running_var, weight, bias, training,
                                      momentum, self.eps)

        def backward(grad_output, x_hat, rstd, weight, bias):
            return batch_norm_backward(grad_output, x_hat, rstd, weight, bias, training)

        return KernelFunction.apply(forward, backward, input, self.weight, self.bias)


class BatchNorm1d(_BatchNorm):
    """Like torch.nn.BatchNorm1d: input (N, C) or (N, C, L)."""

    _ndims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Like torch.nn.BatchNorm2d: input (N, C, H, W)."""

    _ndims = (4,)


class _InstanceNorm(_NormBase):
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False,
                 track_running_stats=False, device=None, dtype=None, *, bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device,
                         dtype, bias=bias)

    def forward(self, input):
        from .instance_norm import instance_norm_backward, instance_norm_forward

        self._check_ndim(input)
        unbatched = input.dim() == self._ndims[0]
        if unbatched:  # (C, *spatial): one sample
            input = input.unsqueeze(0)
        use_input_stats = self.training or not self.track_running_stats
        momentum = 0.0 if self.momentum is None else self.momentum
        running_mean, running_var = to_numpy(self.running_mean), to_numpy(self.running_var)
        check_instance_norm_args(to_numpy(input), running_mean, running_var,
                                 to_numpy(self.weight), to_numpy(self.bias), use_input_stats)
        if input.numel() == 0:
            forget_running_stats(to_numpy(input), running_mean, running_var, use_input_stats)

        def forward(x, weight, bias):
            return instance_norm_forward(x, running_mean, running_var, weight, bias,
                                         use_input_stats, momentum, self.eps)

        def backward(grad_output, x_hat, rstd, weight, bias):
            return instance_norm_backward(grad_output, x_hat, rstd, weight, bias,
                                          use_input_stats)

        y = KernelFunction.apply(forward, backward, input, self.weight, self.bias)
        return y.squeeze(0) if unbatched else y


class InstanceNorm1d(_InstanceNorm):
    """Like torch.nn.InstanceNorm1d: input (N, C, L) or unbatched (C, L)."""

    _ndims = (2, 3)


class InstanceNorm2d(_InstanceNorm):
    """Like torch.nn.InstanceNorm2d: input (N, C, H, W) or unbatched (C, H, W)."""

    _ndims = (3, 4)


class GroupNorm(torch.nn.Module):
    """Like torch.nn.GroupNorm: input (N, C, *), C = num_channels divisible by num_groups;
    parameters weight and bias (C,)."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None,
                 dtype=None, *, bias=True):
        super().__init__()
        if num_channels % num_groups:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by "
                             f"num_groups ({num_groups})")
        self.num_groups, self.num_channels, self.eps, self.affine = (
            num_groups, num_channels, eps, affine)
        _affine_parameters(self, (num_channels,), affine, bias,
                           {"device": device, "dtype": dtype})

    def forward(self, input):
        from .group_norm import group_norm_backward, group_norm_forward

        if not isinstance(input, torch.Tensor):
            raise TypeError(f"input must be a torch.Tensor, got {type(input).__name__}")
        check_group_norm_args(to_numpy(input), self.num_groups, to_numpy(self.weight),
                              to_numpy(self.bias))

        def forward(x, weight, bias):
            return group_norm_forward(x, self.num_groups, weight, bias, self.eps)

        return KernelFunction.apply(forward, group_norm_backward, input, self.weight,
                                    self.bias)

    def extra_repr(self):
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


class RMSNorm(torch.nn.Module):
    """Like torch.nn.RMSNorm: parameter weight of shape normalized_shape (no bias);
    eps=None means the machine epsilon of the input's dtype."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None,
                 dtype=None):
        super().__init__()
        self.normalized_shape = as_normalized_shape(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        _affine_parameters(self, self.normalized_shape, elementwise_affine, False,
                           {"device": device, "dtype": dtype})

    def forward(self, input):
        from .rms_norm import rms_norm_backward, rms_norm_forward

        if not isinstance(input, torch.Tensor):
            raise TypeError(f"input must be a torch.Tensor, got {type(input).__name__}")
        shape = check_rms_norm_args(to_numpy(input), self.normalized_shape,
                                    to_numpy(self.weight))

        def forward(x, weight, bias):
            y, rrms = rms_norm_forward(x, shape, weight, self.eps)
            return y, x, rrms

        def backward(grad_output, x, rrms, weight, bias):
            return (*rms_norm_backward(grad_output, x, shape, rrms, weight), None)

        return KernelFunction.apply(forward, backward, input, self.weight, None)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")
