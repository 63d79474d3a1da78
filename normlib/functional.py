"""torch.nn.functional's normalization functions in NumPy: same signatures, same
defaults, same results; NumPy arrays in, a NumPy array of the input's dtype out."""

from ._validation import check_layer_norm_args
from .layer_norm import layer_norm_forward


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
    return layer_norm_forward(input, normalized_shape, weight, bias, eps)[0]
