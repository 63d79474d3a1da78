"""The angular update of a weight (Unit 9: Exercise 9.1): how far a step turned it.

A weight matrix W whose output feeds a norm is scale-invariant: the norm divides out |W|,
so the loss depends on W's direction alone, and what a step does to the model is the angle
it turns W through. Notebook 09, section 1, derives how that angle depends on the learning
rate, the weight decay and |W| (the effective learning rate), and measures it, matrix by
matrix, in a training run (Kosson, Messmer and Jaggi 2024, "Rotational Equilibrium").

Shapes: before and after, the same weight before and after a step, any shape (a matrix
(F, E), a convolution's (C_out, C_in, k, k)), float32 or float64, read as one flattened
vector each. NumPy in, a Python float out.
"""

import numpy as np

from normlib._validation import check_weight_pair


def angular_update(before, after):
    """Exercise 9.1: the angle between a weight before and after a step.

    Args:
        before, after: float32 or float64 arrays of one shape, neither all zeros; each is
            read as one vector (all its entries), not row by row.
    Returns:
        The angle between the two vectors, in radians, in [0, pi], as a float (a Python
        float or a NumPy float64). It must be accurate for the angles training produces,
        1e-7 rad and smaller included (an update of lr 1e-6 turns a matrix by about that
        much), whatever the inputs' dtype: the check compares with the exact angle within
        the float64 error model's tolerance.
    Raises:
        TypeError or ValueError (check_weight_pair, provided): not float arrays, different
        shapes, or a weight of zeros (no direction).
    """
    check_weight_pair(before, after)
    raise NotImplementedError("Exercise 9.1: implement angular_update")
