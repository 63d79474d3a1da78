"""Argument checks shared by normlib.functional and normlib.nn (not an exercise).

Each check raises a TypeError or ValueError that names the argument, what was
expected and what came, so that a bad call fails here and not deep inside NumPy.
"""

import numpy as np

FLOAT_DTYPES = (np.float32, np.float64)


def as_normalized_shape(normalized_shape):
    """An int or a sequence of ints (torch.Size included) as a tuple of positive ints."""
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
    if len(shape) == 0 or any(d <= 0 for d in shape):
        raise ValueError(f"normalized_shape must be non-empty and positive, got {shape}")
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
    """param must be None or a float array of `shape` and input's dtype."""
    if param is None:
        return
    check_float_array(param, name)
    if param.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {param.shape}")
    if param.dtype != input.dtype:
        raise TypeError(
            f"{name} has dtype {param.dtype} but input has dtype {input.dtype}; they must match"
        )


def check_channel_args(input, min_ndim, **params):
    """input (N, C, *) with at least min_ndim dims; every param None or (C,) like input."""
    check_float_array(input, "input")
    if input.ndim < min_ndim:
        layout = "(N, C)" if min_ndim == 2 else "(N, C, *spatial)"
        raise ValueError(
            f"input must have shape {layout} with at least {min_ndim} dims, "
            f"got shape {input.shape}"
        )
    for name, param in params.items():
        _check_like_input(param, name, (input.shape[1],), input)


def check_batch_norm_args(input, running_mean, running_var, weight, bias, training):
    check_channel_args(input, 2, running_mean=running_mean, running_var=running_var,
                       weight=weight, bias=bias)
    if (running_mean is None) != (running_var is None):
        raise ValueError("running_mean and running_var must be both given or both None")
    if not training and running_mean is None:
        raise ValueError("running_mean and running_var are required when training=False")
    if training and input.size // input.shape[1] <= 1:
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
    if use_input_stats and input[0, 0].size <= 1:
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
