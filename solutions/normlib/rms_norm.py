"""RMSNorm in NumPy (Exercises 3.6 and 3.7): LayerNorm without the centring and without
a bias, y = x / sqrt(mean(x^2) + eps) * weight over the trailing dims normalized_shape.

Shapes: x (*B, *S), S = normalized_shape; weight (*S); the saved rrms (*B, 1, .., 1).
"""

import numpy as np


def rms_norm_forward(x, normalized_shape, weight=None, eps=None):
    """Exercise 3.6: RMSNorm forward, torch's semantics.

    Args:
        x: float32 or float64 array (*B, *S).
        normalized_shape: tuple of ints S.
        weight: (*S) or None.
        eps: added to the mean square inside the square root; None means the machine
            epsilon of x's dtype, np.finfo(x.dtype).eps: what the check expects, and what
            torch.nn.functional.rms_norm uses at eps=None for a float32 or float64 input
            (for a 16-bit one, float32's: Unit 6).
    Returns:
        y: (*B, *S), x's dtype.
        rrms: (*B, 1, .., 1), 1 / sqrt(mean(x^2) + eps) over the dims of S.
    Saved for backward: x and rrms.
    """
    ### BEGIN SOLUTION
    eps = np.finfo(x.dtype).eps if eps is None else eps
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))  # the dims of S
    rrms = 1.0 / np.sqrt((x * x).mean(axis=axes, keepdims=True) + eps)  # (*B, 1..1)
    y = x * rrms  # (*B, *S)
    return (y if weight is None else y * weight), rrms.astype(x.dtype)
    ### END SOLUTION


def rms_norm_backward(grad_output, x, normalized_shape, rrms, weight=None):
    """Exercise 3.7: RMSNorm backward, derived as notebook 03 asks.

    Args:
        grad_output: (*B, *S), dL/dy.
        x: (*B, *S), the forward's input.
        normalized_shape: tuple of ints S.
        rrms: (*B, 1, .., 1), saved by rms_norm_forward.
        weight: (*S) or None, as given to the forward.
    Returns:
        dx: (*B, *S), dL/dx.
        dweight: (*S), dL/dweight summed over every leading dim; None if weight is None.
        Both with the dtype of x.
    """
    ### BEGIN SOLUTION
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))  # the dims of S
    lead = tuple(range(x.ndim - len(normalized_shape)))  # the dims of B
    x_hat = x * rrms  # (*B, *S)
    dweight = None if weight is None else (grad_output * x_hat).sum(axis=lead)  # (*S)
    g = grad_output if weight is None else grad_output * weight  # (*B, *S)
    gx_mean = (g * x_hat).mean(axis=axes, keepdims=True)  # (*B, 1..1)
    return rrms * (g - x_hat * gx_mean), dweight
    ### END SOLUTION
