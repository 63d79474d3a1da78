"""A central-difference gradient checker for NumPy functions (a provided tool).

Notebook 02 derives it; the tests use it to check the backward kernels against
finite differences without trusting torch.
"""

import numpy as np


def numerical_gradient(f, x, grad_output, h=1e-6):
    """d/dx of sum(f(x) * grad_output), by central differences, one element at a time.

    Args:
        f: a function of one float64 array, returning an array of grad_output's shape.
        x: float64 array, the point (left unchanged).
        grad_output: the upstream gradient dL/df(x); random values test every direction.
        h: the step. The error is O(h^2) truncation plus O(machine eps / h) rounding,
            so about 1e-6 is right in float64 and nothing is right in float32.
    Returns:
        array of x's shape: dL/dx.
    """
    if x.dtype != np.float64:
        raise TypeError(f"x must be float64 for finite differences, got {x.dtype}")
    x = x.copy()
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        old = x[i]
        x[i] = old + h
        up = np.sum(f(x) * grad_output)
        x[i] = old - h
        down = np.sum(f(x) * grad_output)
        x[i] = old
        grad[i] = (up - down) / (2 * h)
    return grad


def relative_error(actual, expected):
    """||actual - expected|| / (||actual|| + ||expected||): 0 when equal, 1 when opposite."""
    num = np.linalg.norm(actual - expected)
    den = np.linalg.norm(actual) + np.linalg.norm(expected)
    return 0.0 if den == 0 else float(num / den)
