"""Realistic wrong implementations of Unit 5's exercises: every one must fail its graded
check (tests/test_graders.py). Keyed by exercise number, then by the mistake's name.

Targets: 5.1 replaces normlib.transformer.add_norm, 5.2 the class TransformerEncoderLayer
(subclasses of the reference overriding forward, or __init__), 5.3 the class
TransformerEncoder (subclasses whose __init__ replaces the reference's).

What a check needs to see them: norm parameters away from weight 1 and bias 0 (else a
misplaced or shared norm is invisible), and layers with different weights (torch's
TransformerEncoder deep-copies one layer, so "one layer repeated" matches it until its
layers are made to differ). "norm over the wrong axis" replaces the norms the provided
__init__ builds: a student cannot choose the axis inside these exercises, so this variant
shows that the check would see it (the axis mistake is graded in Units 1 and 3).
"""

import numpy as np
import torch
import torch.nn.functional as F

import normlib.transformer as reference
from tests.variants.mistake import Mistake

# Exercise 5.1: add_norm ---------------------------------------------------------------------


def add_norm_post_ln_norms_the_sublayer(x, sublayer, norm, norm_first=False):
    """Post-LN as x + norm(sublayer(x)): the residual stream is never normalized."""
    if norm_first:
        return x + sublayer(norm(x))
    return x + norm(sublayer(x))


def add_norm_pre_ln_residual_normalized(x, sublayer, norm, norm_first=False):
    """Pre-LN as norm(x) + sublayer(norm(x)): the residual carries norm(x), not x."""
    if norm_first:
        h = norm(x)
        return h + sublayer(h)
    return norm(x + sublayer(x))


def add_norm_swapped(x, sublayer, norm, norm_first=False):
    """norm_first read backwards: Pre-LN when asked for Post-LN and vice versa."""
    if norm_first:
        return norm(x + sublayer(x))
    return x + sublayer(norm(x))


def add_norm_without_residual(x, sublayer, norm, norm_first=False):
    """The residual connection forgotten: the sublayer's output alone."""
    if norm_first:
        return sublayer(norm(x))
    return norm(sublayer(x))


def add_norm_always_post_ln(x, sublayer, norm, norm_first=False):
    """norm_first ignored: Post-LN whatever it says."""
    return norm(x + sublayer(x))


def add_norm_pre_ln_normalizes_sum(x, sublayer, norm, norm_first=False):
    """Pre-LN normalizing the sum too, as Post-LN does: two norms on one path."""
    if norm_first:
        return norm(x + sublayer(norm(x)))
    return norm(x + sublayer(x))


def add_norm_residual_twice(x, sublayer, norm, norm_first=False):
    """x added twice: once as the residual, once more "to be safe"."""
    if norm_first:
        return x + x + sublayer(norm(x))
    return norm(x + x + sublayer(x))


def add_norm_sublayer_of_the_norm_in_post_ln(x, sublayer, norm, norm_first=False):
    """Post-LN with the sublayer fed norm(x), as in Pre-LN: norm(x + sublayer(norm(x))),
    which calls the norm twice."""
    if norm_first:
        return x + sublayer(norm(x))
    return norm(x + sublayer(norm(x)))


# Exercise 5.2: TransformerEncoderLayer.forward ----------------------------------------------


class _WholeSequenceNorm(torch.nn.Module):
    """Normalizes each sample over (S, E) together, as LayerNorm over (C, H, W) for images,
    with the replaced norm's parameters (E,) (so that state_dicts still load)."""

    def __init__(self, norm):
        super().__init__()
        self.weight, self.bias = norm.weight, getattr(norm, "bias", None)
        self.eps = 1e-5 if norm.eps is None else norm.eps

    def forward(self, x):
        y = F.layer_norm(x, x.shape[-2:], eps=self.eps)  # (N, S, E), over (S, E)
        y = y * self.weight
        return y if self.bias is None else y + self.bias


class LayerNormOverSequence(reference.TransformerEncoderLayer):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.norm1 = _WholeSequenceNorm(self.norm1)
        self.norm2 = _WholeSequenceNorm(self.norm2)


class LayerWithoutActivation(reference.TransformerEncoderLayer):
    def forward(self, src):
        reference.check_input(src, self.d_model)

        def attention(x):
            return self.dropout1(self.self_attn(x))

        def feed_forward(x):  # linear2(linear1(x)): one linear map
            return self.dropout2(self.linear2(self.dropout(self.linear1(x))))

        x = reference.add_norm(src, attention, self.norm1, self.norm_first)
        return reference.add_norm(x, feed_forward, self.norm2, self.norm_first)


class LayerNorm1Twice(reference.TransformerEncoderLayer):
    def forward(self, src):
        reference.check_input(src, self.d_model)

        def attention(x):
            return self.dropout1(self.self_attn(x))

        def feed_forward(x):
            h = self.dropout(self.activation(self.linear1(x)))
            return self.dropout2(self.linear2(h))

        x = reference.add_norm(src, attention, self.norm1, self.norm_first)
        return reference.add_norm(x, feed_forward, self.norm1, self.norm_first)  # not norm2


class LayerDropoutAlwaysOn(reference.TransformerEncoderLayer):
    """F.dropout without training=self.training: dropout stays on in evaluation mode."""

    def forward(self, src):
        reference.check_input(src, self.d_model)
        p = self.dropout.p

        def attention(x):
            return F.dropout(self.self_attn(x), p)

        def feed_forward(x):
            return F.dropout(self.linear2(F.dropout(self.activation(self.linear1(x)), p)), p)

        x = reference.add_norm(src, attention, self.norm1, self.norm_first)
        return reference.add_norm(x, feed_forward, self.norm2, self.norm_first)


class _Layer(reference.TransformerEncoderLayer):
    """The reference's forward through self.mistake(x, attention, feed_forward), the
    mistaken wiring of the two sublayers; feed_forward uses self.act."""

    def act(self, h):
        return self.activation(h)

    def mistake(self, src, attention, feed_forward):
        x = reference.add_norm(src, attention, self.norm1, self.norm_first)
        return reference.add_norm(x, feed_forward, self.norm2, self.norm_first)

    def forward(self, src):
        reference.check_input(src, self.d_model)

        def attention(x):
            return self.dropout1(self.self_attn(x))

        def feed_forward(x):
            return self.dropout2(self.linear2(self.dropout(self.act(self.linear1(x)))))

        return self.mistake(src, attention, feed_forward)


class LayerIgnoringNormFirst(_Layer):
    def mistake(self, src, attention, feed_forward):
        x = reference.add_norm(src, attention, self.norm1)  # norm_first not passed on
        return reference.add_norm(x, feed_forward, self.norm2)


class LayerNormsSwapped(_Layer):
    def mistake(self, src, attention, feed_forward):
        x = reference.add_norm(src, attention, self.norm2, self.norm_first)
        return reference.add_norm(x, feed_forward, self.norm1, self.norm_first)


class LayerReluHardCoded(_Layer):
    def act(self, h):
        return F.relu(h)  # not self.activation


class LayerResidualTwice(_Layer):
    def mistake(self, src, attention, feed_forward):
        x = reference.add_norm(src, lambda h: h + attention(h), self.norm1, self.norm_first)
        return reference.add_norm(x, lambda h: h + feed_forward(h), self.norm2,
                                  self.norm_first)  # add_norm adds h already


class LayerFeedForwardOnSrc(_Layer):
    """The feed-forward given src, the layer's input, not the attention's Add & Norm."""

    def mistake(self, src, attention, feed_forward):
        x = reference.add_norm(src, attention, self.norm1, self.norm_first)
        return reference.add_norm(x, lambda h: feed_forward(src), self.norm2,
                                  self.norm_first)


class LayerHalfAttention(_Layer):
    """The attention's output halved (an average of the residual and the sublayer, where
    the two are added)."""

    def mistake(self, src, attention, feed_forward):
        x = reference.add_norm(src, lambda h: 0.5 * attention(h), self.norm1, self.norm_first)
        return reference.add_norm(x, feed_forward, self.norm2, self.norm_first)


# Exercise 5.3: TransformerEncoder -----------------------------------------------------------


class _Stack(reference.TransformerEncoder):
    """A TransformerEncoder whose __init__ replaces the reference's: it sets what the
    reference's provided lines set, then calls self.build (the mistake) with factories of
    fresh layers and of fresh final norms."""

    def __init__(self, num_layers, d_model, nhead, dim_feedforward=2048, dropout=0.0,
                 activation="relu", layer_norm_eps=1e-5, norm_first=False, bias=True,
                 norm="layer", device=None, dtype=None):
        torch.nn.Module.__init__(self)  # not the reference's __init__ (the solution)
        self.d_model, self.norm_first = d_model, norm_first
        factory = {"device": device, "dtype": dtype}

        def layer():
            return reference.TransformerEncoderLayer(
                d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, True,
                norm_first, bias, norm, **factory)

        def final():
            return reference.make_norm(norm, d_model, layer_norm_eps, bias, **factory)

        self.build(num_layers, layer, final)


class StackDroppingOptions(reference.TransformerEncoder):
    """Layers and final norm built with the defaults: activation, dropout, layer_norm_eps
    and bias never reach them."""

    def __init__(self, num_layers, d_model, nhead, dim_feedforward=2048, dropout=0.0,
                 activation="relu", layer_norm_eps=1e-5, norm_first=False, bias=True,
                 norm="layer", device=None, dtype=None):
        torch.nn.Module.__init__(self)
        self.d_model, self.norm_first = d_model, norm_first
        self.layers = torch.nn.ModuleList(
            reference.TransformerEncoderLayer(d_model, nhead, dim_feedforward,
                                              norm_first=norm_first, norm=norm, dtype=dtype)
            for _ in range(num_layers))
        self.norm = reference.make_norm(norm, d_model, dtype=dtype) if norm_first else None


class StackWithoutFinalNorm(_Stack):
    def build(self, num_layers, layer, final):
        self.layers = torch.nn.ModuleList(layer() for _ in range(num_layers))
        self.norm = None  # Pre-LN too: its residual stream leaves unnormalized


class StackSharingOneNorm(_Stack):
    def build(self, num_layers, layer, final):
        self.layers = torch.nn.ModuleList(layer() for _ in range(num_layers))
        shared1, shared2 = self.layers[0].norm1, self.layers[0].norm2
        for block in self.layers:  # every layer's norms are layer 0's
            block.norm1, block.norm2 = shared1, shared2
        self.norm = final() if self.norm_first else None


class StackOfOneLayer(_Stack):
    def build(self, num_layers, layer, final):
        self.layers = torch.nn.ModuleList([layer()] * num_layers)  # one module, L times
        self.norm = final() if self.norm_first else None


class StackWithFinalNormAlways(_Stack):
    def build(self, num_layers, layer, final):
        self.layers = torch.nn.ModuleList(layer() for _ in range(num_layers))
        self.norm = final()  # Post-LN too: a second norm after the last layer's own


class StackFinalNormWithDefaults(_Stack):
    def build(self, num_layers, layer, final):
        self.layers = torch.nn.ModuleList(layer() for _ in range(num_layers))
        norm = "rms" if isinstance(final(), reference.norm_classes()["rms"]) else "layer"
        dtype = self.layers[0].linear1.weight.dtype
        self.norm = reference.make_norm(norm, self.d_model, dtype=dtype) \
            if self.norm_first else None  # layer_norm_eps and bias not passed on


class StackFinalNormNotApplied(reference.TransformerEncoder):
    """The final norm built, but forward returns the last layer's output."""

    def forward(self, src):
        reference.check_input(src, self.d_model)
        for layer in self.layers:
            src = layer(src)
        return src


class StackFeedingSrcToEachLayer(reference.TransformerEncoder):
    """Every layer applied to src: the loop never chains them."""

    def forward(self, src):
        reference.check_input(src, self.d_model)
        for layer in self.layers:
            x = layer(src)
        return x if self.norm is None else self.norm(x)


class StackInReverse(reference.TransformerEncoder):
    """The layers run last to first."""

    def forward(self, src):
        reference.check_input(src, self.d_model)
        for layer in reversed(self.layers):
            src = layer(src)
        return src if self.norm is None else self.norm(src)


class StackSkippingTheLastLayer(reference.TransformerEncoder):
    """The loop stops one layer short (range(len(self.layers) - 1))."""

    def forward(self, src):
        reference.check_input(src, self.d_model)
        for k in range(len(self.layers) - 1):
            src = self.layers[k](src)
        return src if self.norm is None else self.norm(src)


# Exercise 5.4: final_norm_gain ---------------------------------------------------------------


def gain_inverse_norm(stream, eps=1e-5):
    """1 / ||x - mean||: the sqrt(E) forgotten."""
    xc = stream - stream.mean(dim=-1, keepdim=True)
    return 1 / torch.sqrt((xc * xc).sum(dim=-1) + eps)


def gain_inverse_rms(stream, eps=1e-5):
    """1 / RMS(x): the mean not subtracted (right only for tokens of mean 0)."""
    return torch.rsqrt(stream.pow(2).mean(dim=-1) + eps)


def gain_unbiased(stream, eps=1e-5):
    return torch.rsqrt(stream.var(dim=-1) + eps)


def gain_squared(stream, eps=1e-5):
    """rstd squared: the gain of the variance, not of the normalized values."""
    return 1 / (stream.var(dim=-1, unbiased=False) + eps)


def gain_keepdim(stream, eps=1e-5):
    return torch.rsqrt(stream.var(dim=-1, unbiased=False, keepdim=True) + eps)


def gain_without_eps(stream, eps=1e-5):
    return torch.rsqrt(stream.var(dim=-1, unbiased=False))


def gain_eps_on_std(stream, eps=1e-5):
    return 1 / (stream.var(dim=-1, unbiased=False).sqrt() + eps)


def gain_over_the_batch(stream, eps=1e-5):
    """The variance over axis 0, the batch, not over E."""
    return torch.rsqrt(stream.var(dim=0, unbiased=False) + eps)


def gain_sqrt(stream, eps=1e-5):
    """The square root of the gain: the variance's fourth root."""
    return torch.rsqrt(stream.var(dim=-1, unbiased=False) + eps).sqrt()


def gain_in_float32(stream, eps=1e-5):
    """Computed in float32 whatever the stream's dtype, then cast back."""
    return torch.rsqrt(stream.float().var(dim=-1, unbiased=False) + eps).to(stream.dtype)


# Exercise 5.5: linear2_grad_norms ------------------------------------------------------------


def _profile(encoder, x, target, mistake):
    if mistake != "accumulates":
        encoder.zero_grad()
    reduction = "sum" if mistake == "sum_loss" else "mean"
    F.mse_loss(encoder(x), target, reduction=reduction).backward()
    layers = list(encoder.layers)
    if mistake == "reversed":
        layers = layers[::-1]
    if mistake == "last_only":
        layers = layers[-1:]
    name = "linear1" if mistake == "linear1" else "linear2"
    tensors = [getattr(layer, name).weight for layer in layers]
    if mistake != "weights":
        tensors = [t.grad for t in tensors]
    return np.array([t.norm().item() for t in tensors])


def _profile_with(mistake):
    def linear2_grad_norms(encoder, x, target):
        return _profile(encoder, x, target, mistake)

    return linear2_grad_norms


def profile_as_list(encoder, x, target):
    return list(_profile(encoder, x, target, None))


def profile_of_the_bias(encoder, x, target):
    """The norms of linear2's bias gradients, not its weight's."""
    encoder.zero_grad()
    F.mse_loss(encoder(x), target).backward()
    return np.array([layer.linear2.bias.grad.norm().item() for layer in encoder.layers])


def profile_squared(encoder, x, target):
    """The squared norms (a sum of squares, its root never taken)."""
    return _profile(encoder, x, target, None) ** 2


WRONG = {
    "5.1": {
        "norm in the wrong place": Mistake(add_norm_post_ln_norms_the_sublayer,
                                           "the norm was applied to the sublayer's output"),
        "residual added after the norm in Pre-LN": Mistake(add_norm_pre_ln_residual_normalized,
                                                           "the residual carries norm(x)"),
        "post and pre swapped": Mistake(add_norm_swapped, "this is Pre-LN"),
        "residual connection forgotten": Mistake(add_norm_without_residual,
                                                 "the residual connection is missing"),
        "norm_first ignored (always Post-LN)": Mistake(add_norm_always_post_ln,
                                                       "this is Post-LN"),
        "x added twice": Mistake(add_norm_residual_twice,
                                   "First to differ: the input your add_norm gives norm"),
        "Post-LN's sublayer given norm(x)": Mistake(
            add_norm_sublayer_of_the_norm_in_post_ln,
            "First to differ: the input your add_norm gives sublayer"),
        "Pre-LN normalizes the sum too": Mistake(add_norm_pre_ln_normalizes_sum,
                                                 "the sum was normalized too"),
    },
    "5.2": {
        "norm over the wrong axis": Mistake(LayerNormOverSequence, "over (S, E) together"),
        "the feed-forward given src": Mistake(LayerFeedForwardOnSrc,
                                              "First to differ: linear1's input"),
        "the attention's output halved": Mistake(LayerHalfAttention,
                                                 "First to differ: norm1's input"),
        "feed-forward without its activation": Mistake(LayerWithoutActivation,
                                                       "the feed-forward has no activation"),
        "same norm for both sublayers": Mistake(LayerNorm1Twice, "norm1 serves both sublayers"),
        "dropout left on in evaluation mode": Mistake(LayerDropoutAlwaysOn,
                                                      "dropout is still on in evaluation mode"),
        "norm_first not passed to add_norm": Mistake(LayerIgnoringNormFirst,
                                                     "self.norm_first must reach add_norm"),
        "norm1 and norm2 swapped": Mistake(LayerNormsSwapped, "norm1 and norm2 are swapped"),
        "ReLU hard-coded, activation ignored": Mistake(LayerReluHardCoded,
                                                       "use self.activation"),
        "residual added inside the sublayer too": Mistake(LayerResidualTwice,
                                                          "the residual is added twice"),
    },
    "5.3": {
        "layers run last to first": Mistake(StackInReverse,
                                           "First to differ: layers.2's input"),
        "the last layer skipped": Mistake(
            StackSkippingTheLastLayer, "layers.2 is never called, where torch's module calls it"),
        "missing final norm in a Pre-LN stack": Mistake(StackWithoutFinalNorm,
                                                        "a Pre-LN stack ends with a final norm"),
        "one norm module shared across layers": Mistake(StackSharingOneNorm,
                                                        "one module is used by several layers"),
        "one layer repeated": Mistake(StackOfOneLayer, "one layer module stands several times"),
        "final norm in Post-LN too": Mistake(StackWithFinalNormAlways,
                                             "a Post-LN stack has no final norm"),
        "layer options not passed on": Mistake(StackDroppingOptions,
                                               "did not reach every layer and the final norm"),
        "final norm built with the defaults": Mistake(
            StackFinalNormWithDefaults, "did not reach every layer and the final norm"),
        "final norm built but not applied": Mistake(StackFinalNormNotApplied,
                                                    "the final norm was built but not applied"),
        "every layer given src": Mistake(StackFeedingSrcToEachLayer,
                                         "each layer was given src"),
    },
    "5.4": {
        "1 / ||x - mean||, sqrt(E) forgotten": Mistake(gain_inverse_norm,
                                                       "the inverse length of the centred token"),
        "1 / RMS without centring": Mistake(gain_inverse_rms, "the token's mean was not subtracted"),
        "the gain's square root": Mistake(gain_sqrt, "gain for a stream (2, 5, 16)"),
        "computed in float32": Mistake(gain_in_float32, "float32's precision"),
        "unbiased variance": Mistake(gain_unbiased, "dividing by E - 1 = 15"),
        "rstd squared": Mistake(gain_squared, "scales like 1 / variance, not like 1 / std"),
        "keepdim: (*B, 1)": Mistake(gain_keepdim, "keeps size-1 axes that it should not have"),
        "eps left out": Mistake(gain_without_eps, "eps is left out"),
        "eps added to the std": Mistake(gain_eps_on_std, "eps is added to the std"),
        "variance over the batch axis": Mistake(gain_over_the_batch,
                                                "the result was reduced over axes (0,)"),
    },
    "5.5": {
        "gradients accumulate over calls (no zero_grad)": Mistake(
            _profile_with("accumulates"), "the first call's gradients are still in .grad"),
        "summed loss, not mean": Mistake(_profile_with("sum_loss"),
                                         "the loss was summed, not averaged"),
        "linear1 instead of linear2": Mistake(_profile_with("linear1"),
                                              "these are the gradients of linear1.weight"),
        "norms of the weights, not their gradients": Mistake(
            _profile_with("weights"), "the norms of the weights, not of their gradients"),
        "last layer first": Mistake(_profile_with("reversed"), "the layers are in reverse order"),
        "the last layer only": Mistake(_profile_with("last_only"), "one value per layer"),
        "a list, not a NumPy array": Mistake(profile_as_list, "return them as a NumPy array"),
        "the bias's gradient": Mistake(profile_of_the_bias, "Where: all 3 values"),
        "squared norms": Mistake(profile_squared, "got is the exact value squared"),
    },
}
