"""Argument checks shared by normlib.functional and normlib.nn, and results for empty inputs.

Not an exercise. Each check raises a TypeError or ValueError that names the argument, what
was expected and what came, so that a bad call fails here and not deep inside NumPy.
An input with no elements is checked like any other, then given empty_forward and
empty_backward's results instead of the layer's kernels', so that no kernel (a student's
included) ever sees an empty array. These follow torch:
- an empty output of the input's shape and dtype; in the backward, an empty dx and zero
  gradients for weight and bias (torch's GroupNorm gives NaN for weight on an empty spatial
  dim; zero is the gradient of an output with no elements);
- the running statistics left as they were, in training too, except that instance_norm
  with input statistics and N = 0 sets them to NaN (forget_running_stats);
- an error where an empty input does not fit the layer's layout, and where torch cannot
  apply a weight or bias to no channel (check_empty_affine).
"""

import math

import numpy as np

FLOAT_DTYPES = (np.float32, np.float64)


def as_normalized_shape(normalized_shape):
    """An int or a sequence of ints (torch.Size included) as a tuple of non-negative ints."""
    if isinstance(normalized_shape, (int, np.integer)):
        normalized_shape = (normalized_shape,)
    try:
        if isinstance(normalized_shape, str):
            raise TypeError
        shape = tuple(int(d) for d in normalized_shape)
    except (TypeError, ValueError):
        raise TypeError(
            f"normalized_shape must be an int or a tuple of ints, got {normalized_shape!r}"
        ) from None
    if len(shape) == 0 or any(d < 0 for d in shape):  # a 0 makes the input empty
        raise ValueError(f"normalized_shape must be non-empty and non-negative, got {shape}")
    return shape


def check_float_array(x, name):
    """x must be a float32 or float64 NumPy array."""
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name} must be a numpy.ndarray, got {type(x).__name__}")
    if x.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{name} must have dtype float32 or float64, got {x.dtype}")


def check_layer_norm_args(input, normalized_shape, weight=None, bias=None):
    """Check the arguments of layer_norm; return normalized_shape as a tuple."""
    check_float_array(input, "input")
    shape = as_normalized_shape(normalized_shape)
    expected = "(*, " + ", ".join(map(str, shape)) + ")"
    if input.ndim < len(shape) or input.shape[input.ndim - len(shape):] != shape:
        raise ValueError(
            f"Given normalized_shape={shape}, expected input with shape {expected}, "
            f"but got input of shape {input.shape}"
        )
    for name, param in (("weight", weight), ("bias", bias)):
        if param is None:
            continue
        check_float_array(param, name)
        if param.shape != shape:
            raise ValueError(
                f"{name} must have shape {shape} (= normalized_shape), got {param.shape}"
            )
        if param.dtype != input.dtype:
            raise TypeError(
                f"{name} has dtype {param.dtype} but input has dtype {input.dtype}; "
                "they must match"
            )
    return shape


def _check_like_input(param, name, shape, input):
    """param must be None or a float array of `shape` (None: any 1-D shape) and input's dtype."""
    if param is None:
        return
    check_float_array(param, name)
    if param.shape != shape and (shape is not None or param.ndim != 1):
        expected = "1-D" if shape is None else f"shape {shape}"
        raise ValueError(f"{name} must have {expected}, got {param.shape}")
    if param.dtype != input.dtype:
        raise TypeError(
            f"{name} has dtype {param.dtype} but input has dtype {input.dtype}; they must match"
        )


def check_channel_args(input, min_ndim, empty_1d=False, **params):
    """input (N, C, *) with at least min_ndim dims, or (0,) if empty_1d; every param None
    or (C,) like input (1-D of any length for an input (0,), which has no C)."""
    check_float_array(input, "input")
    if input.ndim < min_ndim and not (empty_1d and input.shape == (0,)):
        layout = "(N, C)" if min_ndim == 2 else "(N, C, *spatial)"
        raise ValueError(
            f"input must have shape {layout} with at least {min_ndim} dims, "
            f"got shape {input.shape}" + (" (a 1-D input must be empty)" if empty_1d else "")
        )
    channels = (input.shape[1],) if input.ndim > 1 else None  # (C,); None: any 1-D
    for name, param in params.items():
        _check_like_input(param, name, channels, input)


def check_empty_affine(input, copies, **params):
    """torch computes batch_norm of an empty input as input * weight[0] + bias[0], and
    instance_norm as a batch_norm whose weight and bias are theirs repeated `copies` = N
    times: with no element to index there, torch raises (IndexError), and so do we."""
    for name, param in params.items():
        if param is not None and copies * param.size == 0:
            raise ValueError(
                f"{name} must be None for an input of shape {input.shape}, which has no "
                f"channel to scale or shift, got {name} of shape {param.shape}"
            )


def check_batch_norm_args(input, running_mean, running_var, weight, bias, training):
    check_channel_args(input, 2, empty_1d=True, running_mean=running_mean,
                       running_var=running_var, weight=weight, bias=bias)
    check_empty_affine(input, 1, weight=weight, bias=bias)
    if (running_mean is None) != (running_var is None):
        raise ValueError("running_mean and running_var must be both given or both None")
    if not training and running_mean is None:
        raise ValueError("running_mean and running_var are required when training=False")
    if training and math.prod(input.shape[:1] + input.shape[2:]) == 1:  # 0 values are fine
        raise ValueError(
            f"Expected more than 1 value per channel when training, got input of shape "
            f"{input.shape}"
        )


def check_instance_norm_args(input, running_mean, running_var, weight, bias, use_input_stats):
    check_channel_args(input, 3, running_mean=running_mean, running_var=running_var,
                       weight=weight, bias=bias)
    if (running_mean is None) != (running_var is None):
        raise ValueError("running_mean and running_var must be both given or both None")
    if not use_input_stats and running_mean is None:
        raise ValueError("running_mean and running_var are required when use_input_stats=False")
    check_empty_affine(input, input.shape[0], weight=weight, bias=bias)
    if use_input_stats and math.prod(input.shape[2:]) == 1:  # 0 positions are fine
        raise ValueError(
            f"Expected more than 1 spatial element when training, got input of shape "
            f"{input.shape}"
        )


def check_group_norm_args(input, num_groups, weight, bias):
    check_channel_args(input, 2, weight=weight, bias=bias)
    if isinstance(num_groups, bool) or not isinstance(num_groups, (int, np.integer)):
        raise TypeError(f"num_groups must be an int, got {num_groups!r}")
    if num_groups <= 0 or input.shape[1] % num_groups:
        raise ValueError(
            f"Expected the number of channels to be divisible by num_groups, but got input "
            f"of shape {input.shape} (C={input.shape[1]}) and num_groups={num_groups}"
        )


def check_rms_norm_args(input, normalized_shape, weight):
    """Check the arguments of rms_norm; return normalized_shape as a tuple."""
    return check_layer_norm_args(input, normalized_shape, weight, None)


def empty_forward(x, weight=None, bias=None):
    """Every layer's forward on an empty x, in place of its kernel (see the top of this
    file): (y,), an empty copy of x, with nothing saved for the backward."""
    return (x.copy(),)


def empty_backward(grad_output, weight=None, bias=None):
    """The backward of empty_forward: dx (empty, grad_output's shape), and dweight and
    dbias zeros of weight's and bias's shapes (None where they are None)."""
    dweight = None if weight is None else np.zeros_like(weight)  # weight's shape
    dbias = None if bias is None else np.zeros_like(bias)  # bias's shape
    return grad_output.copy(), dweight, dbias


def forget_running_stats(input, running_mean, running_var, use_input_stats):
    """instance_norm's running statistics after an empty input, in place: with input
    statistics and no sample, torch averages the statistics of no instance, NaN (whatever
    the momentum); otherwise they stay as they were."""
    if use_input_stats and running_mean is not None and input.shape[0] == 0:
        running_mean[...] = np.nan
        running_var[...] = np.nan


def check_weight_pair(before, after):
    """Unit 9's angular_update: two float arrays of one shape, neither all zeros (the angle
    to a zero vector is undefined)."""
    check_float_array(before, "before")
    check_float_array(after, "after")
    if before.shape != after.shape:
        raise ValueError(f"before and after must have one shape, got {before.shape} and "
                         f"{after.shape}")
    for name, w in (("before", before), ("after", after)):
        if not np.any(w):
            raise ValueError(f"{name} is all zeros (shape {w.shape}): a zero weight has no "
                             "direction, so no angle")


def check_logits(logits, coefficient):
    """Unit 9's z_loss: logits a float array (*B, V) with V >= 1 and at least one row; the
    coefficient a finite number >= 0."""
    check_float_array(logits, "logits")
    if logits.ndim < 1 or logits.shape[-1] == 0 or logits.size == 0:
        raise ValueError(f"logits must be (*B, V) with at least one row and V >= 1, got "
                         f"shape {logits.shape}")
    if not isinstance(coefficient, (int, float, np.integer, np.floating)) or \
            isinstance(coefficient, bool) or not math.isfinite(coefficient) or coefficient < 0:
        raise ValueError(f"coefficient must be a finite number >= 0, got {coefficient!r}")
