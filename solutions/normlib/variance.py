"""The variance three ways (Unit 6): one pass, two passes, and Welford's streaming update
(Exercise 6.1) with the merge of two partial results (Exercise 6.2).

Every function reduces over the last axis of x (*B, N) and computes in x's dtype, so
that float32 shows float32's rounding. A Welford state is a tuple (count, mean, m2):

    count   int, how many elements were seen (the same for every row)
    mean    (*B,)  their mean
    m2      (*B,)  the sum of their squared deviations from that mean, so var = m2 / count

Two states of disjoint parts of a row merge into the state of the whole row: this is
how a reduction split across threads, SIMD lanes or GPU blocks combines its partial
statistics (torch's CPU LayerNorm does it across vector lanes).
"""

import numpy as np


def var_one_pass(x):
    """The textbook shortcut E[x^2] - E[x]^2 (biased): one pass over x, and catastrophic
    cancellation when the mean is large against the spread. x (*B, N) -> (*B,)."""
    mean = x.mean(axis=-1)  # (*B,)
    return (x * x).mean(axis=-1) - mean * mean  # (*B,)


def var_two_pass(x):
    """The mean first, then the mean squared deviation from it (biased): two passes over
    x, and accurate. x (*B, N) -> (*B,)."""
    xc = x - x.mean(axis=-1, keepdims=True)  # (*B, N)
    return (xc * xc).mean(axis=-1)  # (*B,)


def welford(x):
    """Exercise 6.1: Welford's one-pass algorithm over the last axis.

    Visit the elements x[..., 0], x[..., 1], ... once each, in order, and update after
    each the running count, mean and m2 (vectorized over the rows *B):
        count += 1
        delta = x_k - mean
        mean += delta / count
        m2 += delta * (x_k - mean)      (the new mean: one delta before, one after)

    Args:
        x: float32 or float64 array (*B, N), N >= 1.
    Returns:
        (count, mean, m2): count the int N; mean and m2 (*B,) in x's dtype.
    """
    ### BEGIN SOLUTION
    mean = np.zeros(x.shape[:-1], x.dtype)  # (*B,)
    m2 = np.zeros(x.shape[:-1], x.dtype)  # (*B,)
    for count in range(1, x.shape[-1] + 1):
        x_k = x[..., count - 1]  # (*B,)
        delta = x_k - mean  # (*B,)
        mean += delta / count
        m2 += delta * (x_k - mean)
    return x.shape[-1], mean, m2
    ### END SOLUTION


def welford_merge(a, b):
    """Exercise 6.2: the Welford state of the union of two disjoint parts, from theirs
    alone (notebook 06 asks you to derive it).

    Args:
        a, b: states (count, mean, m2) as welford returns them; count an int >= 0 (a
            part may be empty: count 0, mean 0, m2 0), count_a + count_b >= 1; means
            and m2 of the same shape and dtype.
    Returns:
        (count, mean, m2) of the union, the means' dtype kept.
    """
    ### BEGIN SOLUTION
    count_a, mean_a, m2_a = a
    count_b, mean_b, m2_b = b
    count = count_a + count_b
    delta = mean_b - mean_a  # (*B,)
    mean = mean_a + delta * (count_b / count)  # (*B,)
    m2 = m2_a + m2_b + delta * delta * (count_a * count_b / count)  # (*B,)
    return count, mean, m2
    ### END SOLUTION


def var_welford(x, block=None):
    """The biased variance by Welford's algorithm, x (*B, N) -> (*B,).

    block=None: one sequential pass (welford). block=k: as a parallel reduction does it,
    the last axis cut into parts of k elements, each part's state computed on its own
    (as by one thread), and the states merged pairwise in a tree (welford_merge)."""
    if block is None:
        count, _, m2 = welford(x)
        return m2 / count
    states = [welford(x[..., i:i + block]) for i in range(0, x.shape[-1], block)]
    while len(states) > 1:  # one level of the tree: neighbours merge
        pairs = [states[i:i + 2] for i in range(0, len(states), 2)]
        states = [welford_merge(*p) if len(p) == 2 else p[0] for p in pairs]
    count, _, m2 = states[0]
    return m2 / count
