"""A network trained by hand (Exercises 4.1 and 4.2): an MLP wired from your kernels, no autograd.

The network: L hidden layers, each linear -> norm -> ReLU, then a linear output layer giving
the logits. Its parameters are a list of one dict per layer, named as torch names the
modules of one layer (torch.nn.Linear's weight is (out_features, in_features)):

    hidden layer l: "linear.weight" (H_l, H_{l-1}), "linear.bias" (H_l,), and with a norm
                    "norm.weight", "norm.bias" (H_l,) (gamma and beta); BatchNorm's also
                    "norm.running_mean" and "norm.running_var" (H_l,)
    output layer:   "linear.weight" (K, H_L), "linear.bias" (K,)

norm: "batch" (your batch_norm_forward / batch_norm_backward, Exercises 3.3 and 3.8), "layer"
(your layer_norm_forward / layer_norm_backward over the H_l features, Exercises 1.2 and 2.2),
or "none". normkit.network makes the data and the parameters, computes the loss, and trains.
"""

import numpy as np

from .batch_norm import batch_norm_backward, batch_norm_forward
from .layer_norm import layer_norm_backward, layer_norm_forward


def mlp_forward(x, params, norm, training=True, momentum=0.1, eps=1e-5):
    """Exercise 4.1: the network's forward, from your kernels.

    For each hidden layer: z = x W^T + b (its linear layer), then the norm of z over the
    features with the layer's "norm.weight" and "norm.bias" (BatchNorm: in training mode
    with the batch's statistics, updating "norm.running_mean" and "norm.running_var" in
    place; in evaluation mode with them), then the ReLU, which is the next layer's input.
    The output layer is linear alone: its z are the logits.

    Args:
        x: (N, D) float array, the inputs.
        params: the list of layer dicts (module docstring), the output layer last.
        norm: "batch", "layer" or "none".
        training: BatchNorm's mode (LayerNorm has one mode).
        momentum, eps: the norms' (torch's defaults).
    Returns:
        logits: (N, K), x's dtype.
        cache: whatever your mlp_backward needs (any nesting of lists, tuples, dicts and
            arrays); BatchNorm's mode goes in it too.
    Saved for backward: each layer's input and what its norm's backward needs.
    """
    raise NotImplementedError("Exercise 4.1: implement mlp_forward")


def mlp_backward(grad_logits, params, cache, norm):
    """Exercise 4.2: the network's backward, from your kernels: the gradient of the loss
    with respect to every parameter, given its gradient with respect to the logits.

    Go through the layers from the last: a linear layer z = x W^T + b gives dW, db and dx
    from dz; the ReLU passes dy where its input was positive; the norm's backward (your
    batch_norm_backward in the forward's mode, or layer_norm_backward) gives dz and the
    gradients of "norm.weight" and "norm.bias".

    Args:
        grad_logits: (N, K), dLoss/dlogits (normkit.network.cross_entropy gives it).
        params: the list of layer dicts the forward ran with.
        cache: what your mlp_forward returned.
        norm: "batch", "layer" or "none", as in the forward.
    Returns:
        grads: a list of one dict per layer, with a key for each parameter the layer
            learns ("linear.weight", "linear.bias", and with a norm "norm.weight" and
            "norm.bias"; not the running statistics), each of its parameter's shape and
            dtype.
    """
    raise NotImplementedError("Exercise 4.2: implement mlp_backward")
