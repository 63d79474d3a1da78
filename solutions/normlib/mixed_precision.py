"""LayerNorm and RMSNorm for 16-bit tensors (Exercises 6.3, 6.4), and LayerNorm's parameter
gradients for them (Exercise 6.5): float16 or bfloat16 in, the same dtype out.

In float16 (largest value 65504) the square of any |x| >= 256 overflows to inf, and so does
the sum of 4096 values of 20; in bfloat16 (7 stored bits of mantissa) a sum of many terms
loses most of its digits. The standard fix, what torch's own kernels do: upcast the input to
float32, compute the statistics and the normalization (and the affine transform) there, and
round to the 16-bit dtype once, at the end.

Shapes as in torch.nn.functional: x (*B, *S), S = normalized_shape; weight, bias (*S) in
x's dtype. 6.3 and 6.4 are forward-only (no saved statistics): Unit 6 is about the
arithmetic. 6.5 is the backward's reduction over the rows, the sums over every position of
a batch that bfloat16 training gets wrong when it accumulates them in 16 bits.
"""

import torch


def layer_norm_mixed(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Exercise 6.3: LayerNorm of a 16-bit tensor, computed in float32.

    Args:
        x: torch tensor (*B, *S), float16 or bfloat16 (float32 works too).
        normalized_shape: tuple of ints S.
        weight, bias: (*S) tensors of x's dtype, or None.
        eps: added to the (biased) variance inside the square root.
    Returns:
        y: (*B, *S) tensor of x's dtype: the float32 result rounded once.
    """
    ### BEGIN SOLUTION
    dims = tuple(range(x.dim() - len(normalized_shape), x.dim()))  # the dims of S
    x32 = x.float()  # (*B, *S)
    mean = x32.mean(dim=dims, keepdim=True)  # (*B, 1..1)
    xc = x32 - mean  # (*B, *S)
    rstd = torch.rsqrt((xc * xc).mean(dim=dims, keepdim=True) + eps)  # (*B, 1..1)
    y = xc * rstd  # (*B, *S), float32
    if weight is not None:
        y = y * weight.float()
    if bias is not None:
        y = y + bias.float()
    return y.to(x.dtype)
    ### END SOLUTION


def rms_norm_mixed(x, normalized_shape, weight=None, eps=None):
    """Exercise 6.4: RMSNorm of a 16-bit tensor, computed in float32.

    Args:
        x: torch tensor (*B, *S), float16 or bfloat16 (float32 works too).
        normalized_shape: tuple of ints S.
        weight: (*S) tensor of x's dtype, or None.
        eps: added to the mean square inside the square root; None means float32's
            epsilon, torch.finfo(torch.float32).eps: the dtype the arithmetic runs in, and
            what torch.nn.functional.rms_norm computes for 16-bit inputs (its
            documentation says the input dtype's eps, 9.8e-4 for float16; torch 2.13's
            kernel uses float32's, and Unit 6 measures it).
    Returns:
        y: (*B, *S) tensor of x's dtype: the float32 result rounded once.
    """
    ### BEGIN SOLUTION
    eps = torch.finfo(torch.float32).eps if eps is None else eps
    dims = tuple(range(x.dim() - len(normalized_shape), x.dim()))  # the dims of S
    x32 = x.float()  # (*B, *S)
    rrms = torch.rsqrt((x32 * x32).mean(dim=dims, keepdim=True) + eps)  # (*B, 1..1)
    y = x32 * rrms  # (*B, *S), float32
    if weight is not None:
        y = y * weight.float()
    return y.to(x.dtype)
    ### END SOLUTION


def layer_norm_param_grads_mixed(grad_output, x, normalized_shape, mean, rstd):
    """Exercise 6.5: LayerNorm's parameter gradients for 16-bit tensors, summed in float32.

    dweight and dbias as layer_norm_backward (of 2.2) returns them, x_hat recomputed
    in float32 from the statistics the forward saved: each a sum over every row of the
    batch (10^6 rows and more in training). Accumulated in a 16-bit variable, such a sum
    stops growing once its terms fall below half a unit in its last place (bfloat16 keeps
    8 significant bits: from 256 to 512 times the term); accumulated in float32 and rounded
    once, it is right. (torch's own reductions of a 16-bit tensor, tensor.sum, accumulate
    in float32 inside: a 16-bit accumulator is a loop over rows adding into a 16-bit
    tensor.)

    Args:
        grad_output: torch tensor (*B, *S), dL/dy, of x's dtype.
        x: torch tensor (*B, *S), float16 or bfloat16 (float32 works too).
        normalized_shape: tuple of ints S.
        mean, rstd: (*B, 1, .., 1), as torch's LayerNorm saved them in the forward
            (torch.ops.aten.native_layer_norm). torch 2.13's CPU kernel saves them in x's
            dtype, rounded from float32, for a 16-bit x with no weight or a weight of x's
            dtype (in float32 for a float32 weight): use them as given, in float32.
    Returns:
        (dweight, dbias): tensors of shape S in x's dtype, the dtype of the parameters
        (weight and bias of x's dtype): the float32 sums rounded once.
    """
    ### BEGIN SOLUTION
    rows = (-1, *normalized_shape)  # (R, *S): the batch dims flattened
    g = grad_output.float().reshape(rows)  # (R, *S)
    x_hat = (x.float() - mean.float()) * rstd.float()  # (*B, *S), float32
    dweight = (g * x_hat.reshape(rows)).sum(dim=0)  # (*S), summed in float32
    dbias = g.sum(dim=0)  # (*S)
    return dweight.to(x.dtype), dbias.to(x.dtype)
    ### END SOLUTION
