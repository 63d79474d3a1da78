"""The transformer's Add & Norm, Post-LN and Pre-LN (Unit 5: Exercises 5.1 to 5.5).

A transformer layer wraps each sublayer F (self-attention, feed-forward) in a residual
connection and a norm. Post-LN, the original Transformer's, normalizes after the addition:
x -> norm(x + F(x)), so each layer's output has unit scale. Pre-LN normalizes only the
sublayer's input: x -> x + F(norm(x)); the residual stream x grows with depth (one more
summand per sublayer) and a final norm after the last layer rescales it. At
initialization the gradient of the last layer's weights is then about constant in the
depth L for Post-LN but shrinks like 1/sqrt(L) for Pre-LN (Xiong et al. 2020, "On Layer
Normalization in the Transformer Architecture"): why Post-LN needs a learning-rate warm-up.

Shapes: N batch, S sequence length, E = d_model, F = dim_feedforward, H heads, D = E / H.
Inputs are batch first, (N, S, E). The norms are the course's own (normlib.nn), so
everything runs on CPU tensors.
"""

import numpy as np
import torch
import torch.nn.functional as F

ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}


def norm_classes():
    """{"layer": LayerNorm, "rms": RMSNorm}, normlib.nn's: imported when a norm is built, so
    that importing this module imports no kernel (normkit.testing.torch_norms replaces
    this function to build torch's)."""
    from .nn import LayerNorm, RMSNorm

    return {"layer": LayerNorm, "rms": RMSNorm}


def make_norm(kind, d_model, eps=1e-5, bias=True, device=None, dtype=None):
    """The norm of a transformer layer: "layer" -> LayerNorm(d_model), "rms" -> RMSNorm."""
    factory = {"device": device, "dtype": dtype}
    if kind == "layer":
        return norm_classes()["layer"](d_model, eps=eps, bias=bias, **factory)
    if kind == "rms":
        return norm_classes()["rms"](d_model, eps=eps, **factory)
    raise ValueError(f'norm must be "layer" or "rms", got {kind!r}')


def check_input(x, d_model):
    """x must be a batch-first tensor (N, S, d_model)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"input must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 3 or x.shape[-1] != d_model:
        raise ValueError(
            f"expected input of shape (N, S, {d_model}) (batch first, last dim d_model), "
            f"got shape {tuple(x.shape)}"
        )


def add_norm(x, sublayer, norm, norm_first=False):
    """Exercise 5.1: a sublayer with its residual connection and its norm.

    Post-LN (norm_first=False, the original Transformer):  norm(x + sublayer(x))
    Pre-LN  (norm_first=True):                             x + sublayer(norm(x))

    Args:
        x: (N, S, E) tensor.
        sublayer: a callable (N, S, E) -> (N, S, E), e.g. self-attention.
        norm: a callable (N, S, E) -> (N, S, E), e.g. normlib.nn.LayerNorm(E).
        norm_first: False for Post-LN, True for Pre-LN.
    Returns:
        (N, S, E) tensor. Call sublayer and norm once each.
    """
    ### BEGIN SOLUTION
    if norm_first:
        return x + sublayer(norm(x))  # (N, S, E)
    return norm(x + sublayer(x))  # (N, S, E)
    ### END SOLUTION


class AddNorm(torch.nn.Module):
    """add_norm as a module (as torch pairs F.layer_norm with nn.LayerNorm): registers
    sublayer and norm as submodules; forward(x) (N, S, E) -> (N, S, E)."""

    def __init__(self, sublayer, norm, norm_first=False):
        super().__init__()
        self.sublayer, self.norm, self.norm_first = sublayer, norm, norm_first

    def forward(self, x):
        return add_norm(x, self.sublayer, self.norm, self.norm_first)

    def extra_repr(self):
        return f"norm_first={self.norm_first}"


class MultiheadSelfAttention(torch.nn.Module):
    """Self-attention with torch.nn.MultiheadAttention's parameters (provided).

    Parameters, named and initialized as torch's (so that the state_dict of
    torch.nn.TransformerEncoderLayer(...).self_attn loads into it):
        in_proj_weight (3E, E): W_q, W_k, W_v stacked; in_proj_bias (3E,) or None;
        out_proj: Linear(E, E).
    forward(x): x (N, S, E) -> (N, S, E), the attention output only (torch's module
    returns a tuple (output, weights)); no masks, but is_causal (an attribute, False by
    default) makes each position attend to itself and the positions before it only, as a
    language model needs (normkit.language_model sets it). dropout applies to the
    attention weights in training mode, as torch's dropout argument does.
    """

    def __init__(self, d_model, nhead, dropout=0.0, bias=True, device=None, dtype=None):
        super().__init__()
        if d_model % nhead:
            raise ValueError(f"d_model ({d_model}) must be divisible by nhead ({nhead})")
        factory = {"device": device, "dtype": dtype}
        self.d_model, self.nhead, self.dropout = d_model, nhead, dropout
        self.is_causal = False
        self.in_proj_weight = torch.nn.Parameter(torch.empty(3 * d_model, d_model, **factory))
        if bias:
            self.in_proj_bias = torch.nn.Parameter(torch.empty(3 * d_model, **factory))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = torch.nn.Linear(d_model, d_model, bias=bias, **factory)
        self.reset_parameters()

    def reset_parameters(self):
        """torch.nn.MultiheadAttention's initialization (out_proj.weight keeps Linear's)."""
        torch.nn.init.xavier_uniform_(self.in_proj_weight)
        if self.in_proj_bias is not None:
            torch.nn.init.zeros_(self.in_proj_bias)
            torch.nn.init.zeros_(self.out_proj.bias)

    def split_heads(self, t):
        """(N, S, E) -> (N, H, S, D)."""
        n, s, _ = t.shape
        return t.reshape(n, s, self.nhead, -1).transpose(1, 2)

    def forward(self, x):
        check_input(x, self.d_model)
        n, s, e = x.shape
        qkv = F.linear(x, self.in_proj_weight, self.in_proj_bias)  # (N, S, 3E)
        q, k, v = (self.split_heads(t) for t in qkv.chunk(3, dim=-1))  # (N, H, S, D) each
        p = self.dropout if self.training else 0.0
        heads = F.scaled_dot_product_attention(q, k, v, dropout_p=p,
                                               is_causal=self.is_causal)  # (N, H, S, D)
        return self.out_proj(heads.transpose(1, 2).reshape(n, s, e))  # (N, S, E)

    def extra_repr(self):
        return f"d_model={self.d_model}, nhead={self.nhead}, dropout={self.dropout}"


class TransformerEncoderLayer(torch.nn.Module):
    """Like torch.nn.TransformerEncoderLayer(..., batch_first=True), with the course's norms.

    Same signature (dropout defaults to 0.0 here) and submodule names: self_attn, linear1
    (E -> F), dropout, linear2 (F -> E), norm1, norm2, dropout1, dropout2, so that
    state_dicts load both ways. norm: "layer" (normlib.nn.LayerNorm, eps=layer_norm_eps)
    or "rms" (normlib.nn.RMSNorm, eps=layer_norm_eps). activation: "relu", "gelu" or a
    callable. Inputs are (N, S, E) only: batch_first=False raises a ValueError (transpose
    your (S, N, E) input instead), and there is no src_mask.
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.0, activation="relu",
                 layer_norm_eps=1e-5, batch_first=True, norm_first=False, bias=True,
                 norm="layer", device=None, dtype=None):
        super().__init__()
        if not batch_first:
            raise ValueError("only batch_first=True is supported: inputs are (N, S, E); "
                             "transpose an (S, N, E) input with x.transpose(0, 1)")
        if isinstance(activation, str) and activation not in ACTIVATIONS:
            raise ValueError(f'activation must be "relu", "gelu" or a callable, '
                             f"got {activation!r}")
        factory = {"device": device, "dtype": dtype}
        self.d_model, self.batch_first, self.norm_first = d_model, batch_first, norm_first
        self.self_attn = MultiheadSelfAttention(d_model, nhead, dropout, bias, **factory)
        self.linear1 = torch.nn.Linear(d_model, dim_feedforward, bias=bias, **factory)
        self.dropout = torch.nn.Dropout(dropout)
        self.linear2 = torch.nn.Linear(dim_feedforward, d_model, bias=bias, **factory)
        self.norm1 = make_norm(norm, d_model, layer_norm_eps, bias, **factory)
        self.norm2 = make_norm(norm, d_model, layer_norm_eps, bias, **factory)
        self.dropout1 = torch.nn.Dropout(dropout)
        self.dropout2 = torch.nn.Dropout(dropout)
        self.activation = ACTIVATIONS.get(activation, activation)

    def forward(self, src):
        """Exercise 5.2: the layer's forward, both sublayers through add_norm.

        1. self-attention: x -> dropout1(self_attn(x)), through add_norm with norm1;
        2. feed-forward: x -> dropout2(linear2(dropout(activation(linear1(x))))), through
           add_norm with norm2;
        each with self.norm_first (Post-LN when False, Pre-LN when True).

        Args:
            src: (N, S, E) tensor (batch first; no mask).
        Returns:
            (N, S, E) tensor.
        """
        check_input(src, self.d_model)
        ### BEGIN SOLUTION
        def attention(x):
            return self.dropout1(self.self_attn(x))  # (N, S, E)

        def feed_forward(x):
            h = self.dropout(self.activation(self.linear1(x)))  # (N, S, F)
            return self.dropout2(self.linear2(h))  # (N, S, E)

        x = add_norm(src, attention, self.norm1, self.norm_first)  # (N, S, E)
        return add_norm(x, feed_forward, self.norm2, self.norm_first)  # (N, S, E)
        ### END SOLUTION


class TransformerEncoder(torch.nn.Module):
    """A stack of num_layers TransformerEncoderLayer, and a final norm in Pre-LN.

    Its state_dict has the keys of torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(
    ..., batch_first=True, norm_first=norm_first), num_layers, norm=torch.nn.LayerNorm(d_model)
    if norm_first else None): layers.0.self_attn.in_proj_weight, ..., and norm.weight,
    norm.bias in Pre-LN only. The other arguments are TransformerEncoderLayer's.
    """

    def __init__(self, num_layers, d_model, nhead, dim_feedforward=2048, dropout=0.0,
                 activation="relu", layer_norm_eps=1e-5, norm_first=False, bias=True,
                 norm="layer", device=None, dtype=None):
        """Exercise 5.3: build the stack.

        Sets:
            self.layers: a torch.nn.ModuleList of num_layers independent
                TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout, activation,
                layer_norm_eps, batch_first=True, norm_first=norm_first, bias=bias,
                norm=norm, device=device, dtype=dtype): no module shared between layers.
            self.norm: in Pre-LN (norm_first=True), the final norm, make_norm(norm,
                d_model, layer_norm_eps, bias, device=device, dtype=dtype), applied to the
                last layer's output (the residual stream is never normalized otherwise);
                in Post-LN, None (each layer already ends with a norm).
        """
        super().__init__()
        self.d_model, self.norm_first = d_model, norm_first
        ### BEGIN SOLUTION
        factory = {"device": device, "dtype": dtype}
        self.layers = torch.nn.ModuleList(
            TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout, activation,
                                    layer_norm_eps, batch_first=True, norm_first=norm_first,
                                    bias=bias, norm=norm, **factory)
            for _ in range(num_layers)  # a new layer each time: nothing shared
        )
        self.norm = None  # Post-LN: each layer already ends with its norm
        if norm_first:  # Pre-LN: the residual stream still needs one
            self.norm = make_norm(norm, d_model, layer_norm_eps, bias, **factory)
        ### END SOLUTION

    def forward(self, src):
        """Exercise 5.3 (continued): src (N, S, E) through every layer in order, then
        through self.norm if it is not None. Returns (N, S, E)."""
        check_input(src, self.d_model)
        ### BEGIN SOLUTION
        x = src  # (N, S, E)
        for layer in self.layers:
            x = layer(x)  # (N, S, E)
        return x if self.norm is None else self.norm(x)  # (N, S, E)
        ### END SOLUTION


def final_norm_gain(stream, eps=1e-5):
    """Exercise 5.4: how much the final LayerNorm of a Pre-LN stack (weight 1, bias 0, as at
    initialization) can scale a gradient that flows back through it, token by token.

    Args:
        stream: (*B, E) tensor, E >= 3: the residual stream x_L entering the final norm.
        eps: the norm's eps.
    Returns:
        (*B,) tensor of stream's dtype: for each token, the largest ||J^T g|| / ||g|| over
        upstream gradients g, J the norm's Jacobian at that token (J's spectral norm).
    """
    ### BEGIN SOLUTION
    var = stream.var(dim=-1, unbiased=False)  # (*B,)
    return torch.rsqrt(var + eps)  # (*B,): J = rstd * (a projection, up to eps)
    ### END SOLUTION


def linear2_grad_norms(encoder, x, target):
    """Exercise 5.5: the gradient-norm profile of a stack, layer by layer.

    Args:
        encoder: a TransformerEncoder; its parameters' .grad may hold earlier gradients.
        x: (N, S, E) input; target: (N, S, E), what the output is compared with.
    Returns:
        NumPy float64 array (num_layers,), layer 1 first: the Frobenius norm of the
        gradient of F.mse_loss(encoder(x), target) with respect to each layer's
        linear2.weight, of this loss alone (not added to earlier gradients).
    """
    ### BEGIN SOLUTION
    encoder.zero_grad()
    F.mse_loss(encoder(x), target).backward()
    return np.array([layer.linear2.weight.grad.norm().item() for layer in encoder.layers])
    ### END SOLUTION
