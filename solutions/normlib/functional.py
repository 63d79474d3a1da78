"""torch.nn.functional's normalization functions in NumPy: same signatures, same
defaults, same results; NumPy arrays in, a NumPy array of the input's dtype out.
Running statistics, where given, are updated in place, as torch does. An empty input
never reaches a kernel: empty_forward gives torch's result (see normlib/_validation.py). Each
function imports its kernel when called, so a broken kernel file breaks only its own."""

from normlib._validation import (
    check_batch_norm_args,
    check_group_norm_args,
    check_instance_norm_args,
    check_layer_norm_args,
    check_rms_norm_args,
    empty_forward,
    forget_running_stats,
)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Like torch.nn.functional.layer_norm.

    Args:
        input: float32 or float64 array of shape (*B, *S).
        normalized_shape: int or tuple of ints S, the trailing dims to normalize over.
        weight, bias: arrays of shape S (the input's dtype) or None.
        eps: added to the variance inside the square root.
    Returns:
        (*B, *S) array, the input's dtype.
    """
    normalized_shape = check_layer_norm_args(input, normalized_shape, weight, bias)
    if input.size == 0:
        return empty_forward(input)[0]
    from .layer_norm import layer_norm_forward

    return layer_norm_forward(input, normalized_shape, weight, bias, eps)[0]


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """Like torch.nn.functional.rms_norm: input (*B, *S), weight S or None; eps=None
    means the machine epsilon of the input's dtype."""
    normalized_shape = check_rms_norm_args(input, normalized_shape, weight)
    if input.size == 0:
        return empty_forward(input)[0]
    from .rms_norm import rms_norm_forward

    return rms_norm_forward(input, normalized_shape, weight, eps)[0]


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """Like torch.nn.functional.batch_norm: input (N, C, *) or an empty (0,);
    running_mean, running_var, weight, bias (C,) or None. training=True normalizes with
    the batch statistics and updates the running ones in place (not on an empty input);
    training=False uses the running statistics."""
    check_batch_norm_args(input, running_mean, running_var, weight, bias, training)
    if input.size == 0:
        return empty_forward(input)[0]
    from .batch_norm import batch_norm_forward

    return batch_norm_forward(input, running_mean, running_var, weight, bias, training,
                              momentum, eps)[0]


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-5):
    """Like torch.nn.functional.instance_norm: input (N, C, *spatial), the statistics of
    each sample and channel (use_input_stats=True, updating the running ones in place if
    given) or the running statistics."""
    check_instance_norm_args(input, running_mean, running_var, weight, bias, use_input_stats)
    if input.size == 0:
        forget_running_stats(input, running_mean, running_var, use_input_stats)
        return empty_forward(input)[0]
    from .instance_norm import instance_norm_forward

    return instance_norm_forward(input, running_mean, running_var, weight, bias,
                                 use_input_stats, momentum, eps)[0]


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Like torch.nn.functional.group_norm: input (N, C, *), C divisible by num_groups;
    weight, bias (C,) or None."""
    check_group_norm_args(input, num_groups, weight, bias)
    if input.size == 0:
        return empty_forward(input)[0]
    from .group_norm import group_norm_forward

    return group_norm_forward(input, num_groups, weight, bias, eps)[0]
