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
