"""LayerNorm in NumPy, forward and backward (Exercises 1.1, 1.2 and 2.1 to 2.4).

The statistics (1.1) and the forward (1.2); the backward node by node (2.1) and as one
kernel (2.2); the Jacobian (2.3); what `.sum().backward()` sees (2.4). The input x has shape
(*B, *S): S = normalized_shape, the k trailing dims normalized together, and B the leading
dims, one normalization each. The statistics keep k singleton dims so that they broadcast
against x, as torch.native_layer_norm returns them:

    x            (*B, *S)       e.g. (2, 3, 4) with S = (3, 4)
    mean, rstd   (*B, 1, .., 1)      (2, 1, 1)
    weight, bias (*S)                (3, 4)

Every array returned has the dtype of x. The kernels trust their arguments:
normlib.functional.layer_norm checks them first.
"""

import numpy as np


def layer_norm_stats(x, normalized_shape, eps=1e-5):
    """Exercise 1.1: the mean and reciprocal standard deviation LayerNorm normalizes with.

    Args:
        x: float32 or float64 array of shape (*B, *S).
        normalized_shape: tuple of ints S, the trailing dims of x to normalize over.
        eps: added to the variance, inside the square root.
    Returns:
        mean: (*B, 1, .., 1), the mean of x over the dims of S.
        rstd: (*B, 1, .., 1), 1 / sqrt(var + eps), where var is the biased variance
            (divide by the number of elements, not that minus one) over the dims of S.
        Both have the dtype of x and len(S) trailing singleton dims.
    """
    ### BEGIN SOLUTION
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))  # the dims of S
    mean = x.mean(axis=axes, keepdims=True)  # (*B, 1..1)
    xc = x - mean  # (*B, *S)
    var = (xc * xc).mean(axis=axes, keepdims=True)  # (*B, 1..1), biased
    rstd = 1.0 / np.sqrt(var + eps)  # (*B, 1..1)
    return mean, rstd
    ### END SOLUTION


def layer_norm_forward(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Exercise 1.2: LayerNorm forward, y = (x - mean) * rstd * weight + bias.

    Args:
        x: float array of shape (*B, *S).
        normalized_shape: tuple of ints S.
        weight: (*S) or None (no scaling).
        bias: (*S) or None (no shift).
        eps: as in layer_norm_stats.
    Returns:
        y: (*B, *S), same dtype as x.
        mean, rstd: (*B, 1, .., 1), as layer_norm_stats returns them. They are what
            the backward needs besides x and weight: save them, don't recompute them.
    """
    ### BEGIN SOLUTION
    mean, rstd = layer_norm_stats(x, normalized_shape, eps)  # (*B, 1..1) each
    y = (x - mean) * rstd  # (*B, *S), x_hat
    if weight is not None:
        y = y * weight  # (*S) broadcasts over *B
    if bias is not None:
        y = y + bias
    return y, mean, rstd
    ### END SOLUTION


def layer_norm_backward_staged(grad_output, x, eps=1e-5):
    """Exercise 2.1: LayerNorm's backward, node by node through the graph of notebook 02.

    The graph, for rows x (B, N) normalized over their last axis, without weight and bias:

        mu = mean(x)   xc = x - mu   var = mean(xc ** 2)   rstd = (var + eps) ** -0.5
        x_hat = xc * rstd

    Args:
        grad_output: (B, N), dL/dx_hat.
        x: (B, N), float32 or float64.
        eps: as in layer_norm_stats.
    Returns:
        A dict of the gradient of L with respect to each node, through every path from
        that node to the loss (what autograd's `.grad` of that intermediate would hold):
            "drstd": (B, 1)   "dvar": (B, 1)   "dxc": (B, N)   "dmu": (B, 1)   "dx": (B, N)
        each with the dtype of x.
    """
    ### BEGIN SOLUTION
    n = x.shape[-1]
    mu = x.mean(axis=-1, keepdims=True)  # (B, 1)
    xc = x - mu  # (B, N)
    var = (xc * xc).mean(axis=-1, keepdims=True)  # (B, 1)
    rstd = 1.0 / np.sqrt(var + eps)  # (B, 1)
    drstd = (grad_output * xc).sum(axis=-1, keepdims=True)  # (B, 1), x_hat = xc * rstd
    dvar = -0.5 * rstd**3 * drstd  # (B, 1), rstd = (var + eps) ** -0.5
    dxc = grad_output * rstd + (2.0 / n) * xc * dvar  # (B, N): via x_hat and via var
    dmu = -dxc.sum(axis=-1, keepdims=True)  # (B, 1), xc = x - mu
    dx = dxc + dmu / n  # (B, N): via xc and via mu = mean(x)
    return {"drstd": drstd, "dvar": dvar, "dxc": dxc, "dmu": dmu, "dx": dx}
    ### END SOLUTION


def layer_norm_backward(grad_output, x, normalized_shape, mean, rstd, weight=None, bias=None):
    """Exercise 2.2: LayerNorm backward, the compact formula.

    Args:
        grad_output: (*B, *S), dL/dy.
        x: (*B, *S), the forward's input.
        normalized_shape: tuple of ints S.
        mean, rstd: (*B, 1, .., 1), saved by layer_norm_forward.
        weight: (*S) or None, as given to the forward.
        bias: (*S) or None, as given to the forward (only whether it is None matters).
    Returns:
        dx: (*B, *S), dL/dx.
        dweight: (*S), dL/dweight summed over every leading dim; None if weight is None.
        dbias: (*S), dL/dbias summed over every leading dim; None if bias is None.
        All with the dtype of x.
    """
    ### BEGIN SOLUTION
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))  # the dims of S
    lead = tuple(range(x.ndim - len(normalized_shape)))  # the dims of B
    x_hat = (x - mean) * rstd  # (*B, *S), recomputed from what was saved
    dweight = None if weight is None else (grad_output * x_hat).sum(axis=lead)  # (*S)
    dbias = None if bias is None else grad_output.sum(axis=lead)  # (*S)
    g = grad_output if weight is None else grad_output * weight  # (*B, *S), dL/dx_hat
    g_mean = g.mean(axis=axes, keepdims=True)  # (*B, 1..1)
    gx_mean = (g * x_hat).mean(axis=axes, keepdims=True)  # (*B, 1..1)
    dx = rstd * (g - g_mean - x_hat * gx_mean)  # (*B, *S)
    return dx, dweight, dbias
    ### END SOLUTION


def layer_norm_jacobian(x, eps=1e-5):
    """Exercise 2.3: the Jacobian of x_hat = (x - mean) * rstd with respect to x, per row.

    Args:
        x: (*B, N), float32 or float64, each row normalized over its N values (the last
            axis), without weight and bias.
        eps: as in layer_norm_stats.
    Returns:
        J: (*B, N, N) with J[..., i, j] = d x_hat[..., i] / d x[..., j], the dtype of x.
    """
    ### BEGIN SOLUTION
    n = x.shape[-1]
    mean = x.mean(axis=-1, keepdims=True)  # (*B, 1)
    xc = x - mean  # (*B, N)
    rstd = 1.0 / np.sqrt((xc * xc).mean(axis=-1, keepdims=True) + eps)  # (*B, 1)
    x_hat = xc * rstd  # (*B, N)
    eye = np.eye(n, dtype=x.dtype)  # (N, N)
    outer = x_hat[..., :, None] * x_hat[..., None, :]  # (*B, N, N)
    return rstd[..., None] * (eye - 1.0 / n - outer / n)  # (*B, N, N)
    ### END SOLUTION


def predicted_sum_gradients(x, eps=1e-5):
    """Exercise 2.4: your prediction of dL/dx for L = x_hat.sum() (the upstream gradient
    of `.sum().backward()`: all ones), for three implementations of x_hat over the last
    axis of x, as notebook 02 defines them: the correct one, one whose variance is detached
    from the graph, and one whose mean is detached (no weight or bias).

    Args:
        x: (*B, N), float32 or float64.
        eps: as in layer_norm_stats.
    Returns:
        A dict {"correct": dx, "detached variance": dx, "detached mean": dx}, each dx of
        shape (*B, N) and the dtype of x.
    """
    ### BEGIN SOLUTION
    xc = x - x.mean(axis=-1, keepdims=True)  # (*B, N)
    rstd = 1.0 / np.sqrt((xc * xc).mean(axis=-1, keepdims=True) + eps)  # (*B, 1)
    zeros = np.zeros_like(x)  # (*B, N): both other paths cancel the direct one
    return {"correct": zeros, "detached variance": zeros.copy(),
            "detached mean": np.broadcast_to(rstd, x.shape).copy()}  # (*B, N)
    ### END SOLUTION
