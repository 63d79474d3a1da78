"""Correct implementations of Unit 5's exercises written differently from the reference:
every one must pass its graded check (tests/test_graders.py) at a tenth of the
tolerances. Targets as in wrong_transformer.py."""

import copy

import numpy as np
import torch
import torch.nn.functional as F

import normlib.transformer as reference

# Exercise 5.1: add_norm ---------------------------------------------------------------------


def add_norm_if_else(x, sublayer, norm, norm_first=False):
    """Explicit branches, one intermediate each."""
    if norm_first:
        h = norm(x)  # (N, S, E)
        return x + sublayer(h)
    else:
        s = x + sublayer(x)  # (N, S, E)
        return norm(s)


def add_norm_one_path(x, sublayer, norm, norm_first=False):
    """One residual line, the norm placed by conditional expressions (called once)."""
    h = norm(x) if norm_first else x  # (N, S, E), the sublayer's input
    y = x + sublayer(h)  # (N, S, E)
    return y if norm_first else norm(y)


# Exercise 5.2: TransformerEncoderLayer.forward ----------------------------------------------


class LayerThroughAddNorm(reference.TransformerEncoderLayer):
    """Torch's _sa_block / _ff_block methods, each through an AddNorm module."""

    def _sa_block(self, x):
        return self.dropout1(self.self_attn(x))

    def _ff_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def forward(self, src):
        reference.check_input(src, self.d_model)
        x = reference.AddNorm(self._sa_block, self.norm1, self.norm_first)(src)
        return reference.AddNorm(self._ff_block, self.norm2, self.norm_first)(x)


class LayerInline(reference.TransformerEncoderLayer):
    """Torch's own forward, written out without add_norm."""

    def forward(self, src):
        reference.check_input(src, self.d_model)
        x = src
        if self.norm_first:
            x = x + self.dropout1(self.self_attn(self.norm1(x)))
            h = self.activation(self.linear1(self.norm2(x)))
            x = x + self.dropout2(self.linear2(self.dropout(h)))
        else:
            x = self.norm1(x + self.dropout1(self.self_attn(x)))
            h = self.activation(self.linear1(x))
            x = self.norm2(x + self.dropout2(self.linear2(self.dropout(h))))
        return x


class LayerFunctionalDropout(reference.TransformerEncoderLayer):
    """F.dropout with the modules' probabilities and training=self.training: off in eval."""

    def forward(self, src):
        reference.check_input(src, self.d_model)

        def drop(h, module):  # (N, S, *)
            return F.dropout(h, module.p, training=self.training)

        def attention(x):
            return drop(self.self_attn(x), self.dropout1)

        def feed_forward(x):
            h = drop(self.activation(self.linear1(x)), self.dropout)  # (N, S, F)
            return drop(self.linear2(h), self.dropout2)

        x = reference.add_norm(src, attention, self.norm1, self.norm_first)
        return reference.add_norm(x, feed_forward, self.norm2, self.norm_first)


# Exercise 5.3: TransformerEncoder -----------------------------------------------------------


class StackOfDeepCopies(reference.TransformerEncoder):
    """torch's way: one layer built, deep-copied num_layers times (equal initial weights,
    no shared tensors); forward through torch.nn.Sequential."""

    def __init__(self, num_layers, d_model, nhead, dim_feedforward=2048, dropout=0.0,
                 activation="relu", layer_norm_eps=1e-5, norm_first=False, bias=True,
                 norm="layer", device=None, dtype=None):
        torch.nn.Module.__init__(self)
        self.d_model, self.norm_first = d_model, norm_first
        factory = {"device": device, "dtype": dtype}
        layer = reference.TransformerEncoderLayer(
            d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
            norm_first=norm_first, bias=bias, norm=norm, **factory)
        self.layers = torch.nn.ModuleList([copy.deepcopy(layer) for _ in range(num_layers)])
        self.norm = None
        if norm_first:
            self.norm = reference.make_norm(norm, d_model, layer_norm_eps, bias, **factory)

    def forward(self, src):
        reference.check_input(src, self.d_model)
        x = torch.nn.Sequential(*self.layers)(src)  # (N, S, E)
        return self.norm(x) if self.norm_first else x


class StackBuiltInALoop(reference.TransformerEncoder):
    """Layers appended one by one, keyword arguments; forward by index."""

    def __init__(self, num_layers, d_model, nhead, dim_feedforward=2048, dropout=0.0,
                 activation="relu", layer_norm_eps=1e-5, norm_first=False, bias=True,
                 norm="layer", device=None, dtype=None):
        torch.nn.Module.__init__(self)
        self.d_model, self.norm_first = d_model, norm_first
        self.layers = torch.nn.ModuleList()
        for _ in range(num_layers):
            self.layers.append(reference.TransformerEncoderLayer(
                d_model=d_model, nhead=nhead, dim_feedforward=dim_feedforward,
                dropout=dropout, activation=activation, layer_norm_eps=layer_norm_eps,
                batch_first=True, norm_first=norm_first, bias=bias, norm=norm,
                device=device, dtype=dtype))
        kind = reference.norm_classes()[norm]
        options = {"bias": bias} if norm == "layer" else {}
        final = kind(d_model, eps=layer_norm_eps, device=device, dtype=dtype, **options)
        self.norm = final if norm_first else None

    def forward(self, src):
        reference.check_input(src, self.d_model)
        x = src
        for i in range(len(self.layers)):
            x = self.layers[i](x)  # (N, S, E)
        if self.norm is not None:
            x = self.norm(x)
        return x


# Exercise 5.4: final_norm_gain ---------------------------------------------------------------


def gain_from_the_jacobian(stream, eps=1e-5):
    """The largest singular value of Unit 2's closed-form Jacobian, token by token."""
    e = stream.shape[-1]
    x = stream.double()
    rstd = torch.rsqrt(x.var(dim=-1, unbiased=False, keepdim=True) + eps)  # (*B, 1)
    x_hat = (x - x.mean(dim=-1, keepdim=True)) * rstd  # (*B, E)
    eye = torch.eye(e, dtype=x.dtype)
    J = rstd[..., None] * (eye - 1 / e - x_hat[..., :, None] * x_hat[..., None, :] / e)
    return torch.linalg.matrix_norm(J, ord=2).to(stream.dtype)  # (*B,)


def gain_float64_inside(stream, eps=1e-5):
    """1 / sqrt(var + eps), the variance as a mean of squared deviations, in float64."""
    x = stream.double()
    xc = x - x.mean(dim=-1, keepdim=True)
    return (1 / torch.sqrt(xc.pow(2).mean(dim=-1) + eps)).to(stream.dtype)


# Exercise 5.5: linear2_grad_norms ------------------------------------------------------------


def profile_autograd_grad(encoder, x, target):
    """torch.autograd.grad on the linear2 weights: no .grad read or written."""
    weights = [layer.linear2.weight for layer in encoder.layers]
    grads = torch.autograd.grad(F.mse_loss(encoder(x), target), weights)
    return np.array([float(torch.linalg.matrix_norm(g)) for g in grads], dtype=np.float64)


def profile_grads_set_to_none(encoder, x, target):
    """.grad set to None by hand, the loss written out, norms as sqrt(sum of squares)."""
    for p in encoder.parameters():
        p.grad = None
    ((encoder(x) - target) ** 2).mean().backward()
    return np.array([layer.linear2.weight.grad.pow(2).sum().sqrt().item()
                     for layer in encoder.layers])


RIGHT = {
    "5.1": {"explicit if/else": add_norm_if_else,
            "one residual line, norm placed by conditionals": add_norm_one_path},
    "5.2": {"through AddNorm modules": LayerThroughAddNorm,
            "torch's forward written inline": LayerInline,
            "F.dropout with training=self.training": LayerFunctionalDropout},
    "5.3": {"deep copies of one layer, torch.nn.Sequential": StackOfDeepCopies,
            "appended in a loop, forward by index": StackBuiltInALoop},
    "5.4": {"the spectral norm of the closed-form Jacobian": gain_from_the_jacobian,
            "float64 inside": gain_float64_inside},
    "5.5": {"torch.autograd.grad": profile_autograd_grad,
            "grads set to None, loss written out": profile_grads_set_to_none},
}
