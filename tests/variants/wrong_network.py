"""Realistic wrong implementations of Unit 4's exercises (normlib/mlp.py): every one must
fail its graded check (tests/test_graders.py) and its visible check must name its cause
(tests/test_diagnosis.py). Keyed by exercise number, then by the mistake's name. Each is
the reference with one wiring changed, calling the reference's kernels (at grading, the
student's own)."""

import numpy as np

from normlib.batch_norm import batch_norm_backward, batch_norm_forward
from normlib.layer_norm import layer_norm_backward, layer_norm_forward
from tests.variants.mistake import Mistake

# Exercise 4.1: mlp_forward -------------------------------------------------------------------


def forward_with(x, params, norm, training=True, momentum=0.1, eps=1e-5, *, relu_first=False,
                 mode=None, norm_logits=False, last_relu=True, keep_running=False,
                 layer_as_batch=False, hidden_bias=True, relu_logits=False):
    """The forward, wired as the keyword arguments say (each one classic mistake)."""
    cache, last = [], len(params) - 2
    for k, layer in enumerate(params[:-1]):
        z = x @ layer["linear.weight"].T + (layer["linear.bias"] if hidden_bias else 0)
        if relu_first:
            z = np.maximum(z, 0)
        saved = {"x": x}
        if norm == "batch" or (norm == "layer" and layer_as_batch):
            running = [layer.get("norm.running_mean"), layer.get("norm.running_var")]
            if keep_running and running[0] is not None:
                running = [r.copy() for r in running]
            use = training if mode is None else mode
            y, x_hat, rstd = batch_norm_forward(z, *running, layer["norm.weight"],
                                                layer["norm.bias"], use or norm == "layer",
                                                momentum, eps)
            saved.update(x_hat=x_hat, rstd=rstd, training=use)
        elif norm == "layer":
            y, mean, rstd = layer_norm_forward(z, (z.shape[1],), layer["norm.weight"],
                                               layer["norm.bias"], eps)
            saved.update(z=z, mean=mean, rstd=rstd)
        else:
            y = z
        saved["mask"] = y > 0
        cache.append(saved)
        x = y if relu_first or (not last_relu and k == last) else np.maximum(y, 0)
    cache.append({"x": x})
    logits = x @ params[-1]["linear.weight"].T + params[-1]["linear.bias"]
    if norm_logits:
        logits = layer_norm_forward(logits, (logits.shape[1],), eps=eps)[0]
    if relu_logits:
        logits = np.maximum(logits, 0)
    return logits, cache


def forward_relu_before_norm(x, params, norm, training=True, momentum=0.1, eps=1e-5):
    """Each hidden layer as linear, ReLU, then norm."""
    return forward_with(x, params, norm, training, momentum, eps, relu_first=True)


def forward_always_eval(x, params, norm, training=True, momentum=0.1, eps=1e-5):
    """BatchNorm always in evaluation mode: training ignored."""
    return forward_with(x, params, norm, training, momentum, eps, mode=False)


def forward_always_training(x, params, norm, training=True, momentum=0.1, eps=1e-5):
    """BatchNorm always in training mode: the batch's statistics at evaluation too."""
    return forward_with(x, params, norm, training, momentum, eps, mode=True)


def forward_norm_on_logits(x, params, norm, training=True, momentum=0.1, eps=1e-5):
    """The logits normalized too, as if the output layer were one more block."""
    return forward_with(x, params, norm, training, momentum, eps, norm_logits=True)


def forward_no_last_relu(x, params, norm, training=True, momentum=0.1, eps=1e-5):
    """The ReLU of the last hidden layer left out (the loop stops one short)."""
    return forward_with(x, params, norm, training, momentum, eps, last_relu=False)


def forward_running_copied(x, params, norm, training=True, momentum=0.1, eps=1e-5):
    """BatchNorm given copies of its running statistics: they are never updated."""
    return forward_with(x, params, norm, training, momentum, eps, keep_running=True)


def forward_layer_as_batch(x, params, norm, training=True, momentum=0.1, eps=1e-5):
    """"layer" normalized with batch_norm_forward (copied from the BatchNorm branch)."""
    return forward_with(x, params, norm, training, momentum, eps, layer_as_batch=True)


def forward_default_settings(x, params, norm, training=True, momentum=0.1, eps=1e-5):
    """momentum and eps not passed on: the norms run with their defaults."""
    return forward_with(x, params, norm, training)


def forward_default_momentum(x, params, norm, training=True, momentum=0.1, eps=1e-5):
    """eps passed on, momentum forgotten: the running statistics move at 0.1."""
    return forward_with(x, params, norm, training, eps=eps)


def forward_hidden_bias_dropped(x, params, norm, training=True, momentum=0.1, eps=1e-5):
    """The hidden layers' linear bias left out ("the norm's shift makes it redundant", but the
    network is torch's, which adds it)."""
    return forward_with(x, params, norm, training, momentum, eps, hidden_bias=False)


def forward_relu_on_logits(x, params, norm, training=True, momentum=0.1, eps=1e-5):
    """The output layer ends with a ReLU too (the loop's body run once more)."""
    return forward_with(x, params, norm, training, momentum, eps, relu_logits=True)


# Exercise 4.2: mlp_backward ------------------------------------------------------------------


def backward_with(grad_logits, params, cache, norm, *, mask_from_z=False, eval_backward=False,
                  skip_norm=False, skip_relu=False, scale=1.0, swap=False, transpose=False,
                  bias_mean=False, skip_norm_below=False):
    """The backward, wired as the keyword arguments say (each one classic mistake)."""
    def linear_grads(dz, x):
        dw = x.T @ dz if transpose else dz.T @ x
        db = dz.mean(axis=0) if bias_mean else dz.sum(axis=0)
        return {"linear.weight": dw * scale, "linear.bias": db * scale}

    grads = [linear_grads(grad_logits, cache[-1]["x"])]
    dx = grad_logits @ params[-1]["linear.weight"]
    for layer, saved in zip(params[-2::-1], cache[-2::-1]):
        if skip_relu:
            dy = dx
        elif mask_from_z:  # z recomputed from the layer's input
            z = saved["x"] @ layer["linear.weight"].T + layer["linear.bias"]
            dy = dx * (z > 0)
        else:
            dy = dx * saved["mask"]
        grad = {}
        if norm == "none":
            dz = dy
        else:
            if norm == "batch":
                dz, dw, db = batch_norm_backward(dy, saved["x_hat"], saved["rstd"],
                                                 layer["norm.weight"], layer["norm.bias"],
                                                 saved["training"] and not eval_backward)
            else:
                dz, dw, db = layer_norm_backward(dy, saved["z"], (dy.shape[1],), saved["mean"],
                                                 saved["rstd"], layer["norm.weight"],
                                                 layer["norm.bias"])
            if skip_norm:
                dz = dy
            grad["norm.weight"], grad["norm.bias"] = (db, dw) if swap else (dw, db)
            grad = {name: g * scale for name, g in grad.items()}
        grad.update(linear_grads(dz, saved["x"]))
        grads.append(grad)
        dx = (dy if skip_norm_below else dz) @ layer["linear.weight"]
    return grads[::-1]


def backward_mask_from_z(grad_logits, params, cache, norm):
    """The ReLU's mask taken from z, the linear layer's output, not the norm's."""
    return backward_with(grad_logits, params, cache, norm, mask_from_z=True)


def backward_eval_mode(grad_logits, params, cache, norm):
    """batch_norm_backward always in evaluation mode (training=False)."""
    return backward_with(grad_logits, params, cache, norm, eval_backward=True)


def backward_skips_the_norm(grad_logits, params, cache, norm):
    """The norm's input gradient taken as its output gradient: its backward left out."""
    return backward_with(grad_logits, params, cache, norm, skip_norm=True)


def backward_skips_the_relu(grad_logits, params, cache, norm):
    """The ReLU's backward left out: the gradient passes everywhere."""
    return backward_with(grad_logits, params, cache, norm, skip_relu=True)


def backward_averaged(grad_logits, params, cache, norm):
    """Every gradient divided by the batch size, as if grad_logits were a sum's."""
    return backward_with(grad_logits, params, cache, norm,
                         scale=1 / len(grad_logits))


def backward_swapped_affine(grad_logits, params, cache, norm):
    """gamma's and beta's gradients returned under each other's names."""
    return backward_with(grad_logits, params, cache, norm, swap=True)


def backward_transposed(grad_logits, params, cache, norm):
    """dW = x^T dz: (in, out), the transpose of torch's (out, in) weight."""
    return backward_with(grad_logits, params, cache, norm, transpose=True)


def backward_bias_averaged(grad_logits, params, cache, norm):
    """Each linear bias's gradient averaged over the batch, where it sums (the weights' are
    right)."""
    return backward_with(grad_logits, params, cache, norm, bias_mean=True)


def backward_passes_dy_down(grad_logits, params, cache, norm):
    """The gradient passed to the layer below taken from dy, the norm's output gradient, not
    dz: each layer's own gradients right, the norm's backward skipped on the way down."""
    return backward_with(grad_logits, params, cache, norm, skip_norm_below=True)


WRONG = {
    "4.1": {
        "ReLU before the norm": Mistake(forward_relu_before_norm, "the ReLU comes before the norm"),
        "BatchNorm always in evaluation mode": Mistake(
            forward_always_eval, "normalized with its running statistics in training mode"),
        "BatchNorm always in training mode": Mistake(
            forward_always_training, "normalized with the batch's statistics in evaluation"),
        "the logits normalized": Mistake(forward_norm_on_logits, "the logits are normalized"),
        "no ReLU after the last hidden layer": Mistake(forward_no_last_relu,
                                                       "the last hidden layer has no ReLU"),
        "running statistics never updated": Mistake(forward_running_copied,
                                                    "the running statistics were not updated"),
        "LayerNorm through the BatchNorm kernel": Mistake(
            forward_layer_as_batch, "LayerNorm's statistics were taken over the batch"),
        "momentum and eps not passed to the norms": Mistake(
            forward_default_settings, "the norms ran with their default momentum and eps"),
        "momentum not passed to the norms": Mistake(
            forward_default_momentum, "moved at the default momentum"),
        "the hidden layers' linear bias dropped": Mistake(
            forward_hidden_bias_dropped, "layer 1's norm.running_mean after the forward"),
        "a ReLU on the logits": Mistake(
            forward_relu_on_logits, "First to differ: the output layer"),
    },
    "4.2": {
        "ReLU mask from z": Mistake(backward_mask_from_z, "the ReLU's gradient was masked where z"),
        "BatchNorm's backward in evaluation mode": Mistake(
            backward_eval_mode, "BatchNorm's backward ran in evaluation mode"),
        "the norm's backward left out": Mistake(backward_skips_the_norm,
                                                "the norm's backward was left out"),
        "the ReLU's backward left out": Mistake(backward_skips_the_relu,
                                                "the ReLU's backward was left out"),
        "gradients averaged over the batch": Mistake(backward_averaged,
                                                     "divided by the batch size"),
        "gamma's and beta's gradients swapped": Mistake(backward_swapped_affine,
                                                        "are swapped"),
        "weight gradient transposed": Mistake(backward_transposed,
                                              "the weight gradient is transposed"),
        "linear bias gradient averaged, not summed": Mistake(
            backward_bias_averaged, "divided by the batch size"),
        "dy, not dz, passed to the layer below": Mistake(
            backward_passes_dy_down, "First to differ: layer 1, counting back from the output "
                                     "(the gradients of layers 2 to 3 are right)"),
    },
}
