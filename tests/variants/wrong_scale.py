"""Realistic wrong implementations of Unit 9's exercises: every one must fail its graded
check (tests/test_graders.py). Keyed by exercise number, then by the mistake's name.

Targets: 9.1 normlib.rotation.angular_update, 9.2 normlib.rezero.ReZeroBlock (subclasses
of the reference overriding forward, or __init__), 9.3 normlib.z_loss.z_loss, 9.4
normlib.fold.fold_rms_gain.
"""

import numpy as np
import torch
import torch.nn.functional as F

import normlib.rezero as rezero
from tests.variants.mistake import Mistake

# Exercise 9.1: angular_update ---------------------------------------------------------------


def _unit(w, dtype=np.float64):
    v = w.astype(dtype).ravel()  # (n,)
    return v / np.linalg.norm(v)


def angle_arccos(before, after):  # the textbook formula, in float64
    return float(np.arccos(np.clip(_unit(before) @ _unit(after), -1, 1)))


def angle_arccos_float32(before, after):  # the textbook formula, in the inputs' float32
    a, b = _unit(before, np.float32), _unit(after, np.float32)
    return float(np.arccos(np.clip(a @ b, -1, 1)))


def angle_stable_float32(before, after):  # the right formula, in float32
    a, b = _unit(before, np.float32), _unit(after, np.float32)
    return float(2 * np.arctan2(np.linalg.norm(a - b), np.linalg.norm(a + b)))


def angle_degrees(before, after):
    a, b = _unit(before), _unit(after)
    return float(np.degrees(2 * np.arctan2(np.linalg.norm(a - b), np.linalg.norm(a + b))))


def relative_update(before, after):  # the size of the update, relative to the weight
    a, b = before.astype(np.float64), after.astype(np.float64)
    return float(np.linalg.norm(b - a) / np.linalg.norm(a))


def angle_arcsin(before, after):
    cos = _unit(before) @ _unit(after)
    return float(np.arcsin(np.sqrt(max(0.0, 1 - cos * cos))))


def angle_per_row(before, after):  # one angle per row of a matrix
    a = before.reshape(before.shape[0], -1).astype(np.float64)  # (F, n)
    b = after.reshape(after.shape[0], -1).astype(np.float64)  # (F, n)
    a /= np.linalg.norm(a, axis=1, keepdims=True)
    b /= np.linalg.norm(b, axis=1, keepdims=True)
    return 2 * np.arctan2(np.linalg.norm(a - b, axis=1), np.linalg.norm(a + b, axis=1))


def angle_unnormalized(before, after):
    a, b = before.astype(np.float64).ravel(), after.astype(np.float64).ravel()
    return float(np.arccos(np.clip(a @ b, -1, 1)))


# Exercise 9.2: ReZeroBlock ------------------------------------------------------------------


class AlphaOne(rezero.ReZeroBlock):
    def __init__(self, d_model, nhead):
        super().__init__(d_model, nhead)
        self.resweight = torch.nn.Parameter(torch.ones(1))  # starts at 1


class AlphaBuffer(rezero.ReZeroBlock):
    def __init__(self, d_model, nhead):
        super().__init__(d_model, nhead)
        del self.resweight
        self.register_buffer("resweight", torch.zeros(1))  # never trains


class TwoAlphas(rezero.ReZeroBlock):
    def __init__(self, d_model, nhead):
        super().__init__(d_model, nhead)
        del self.resweight
        self.alpha_attn = torch.nn.Parameter(torch.zeros(1))
        self.alpha_mlp = torch.nn.Parameter(torch.zeros(1))

    def forward(self, x):
        x = x + self.alpha_attn * self.attn(x)
        return x + self.alpha_mlp * self.mlp(x)


class AlphaOnX(rezero.ReZeroBlock):
    def forward(self, x):
        rezero.check_stream(x, self.attn.out.out_features)
        x = self.resweight * x + self.attn(x)
        return self.resweight * x + self.mlp(x)


class WholeResidual(rezero.ReZeroBlock):
    def forward(self, x):
        x = self.resweight * (x + self.attn(x))
        return self.resweight * (x + self.mlp(x))


class MLPUngated(rezero.ReZeroBlock):
    def forward(self, x):
        x = x + self.resweight * self.attn(x)
        return x + self.mlp(x)


class AttentionUngated(rezero.ReZeroBlock):
    def forward(self, x):
        x = x + self.attn(x)
        return x + self.resweight * self.mlp(x)


class Parallel(rezero.ReZeroBlock):
    def forward(self, x):  # both sublayers read the block's input
        return x + self.resweight * self.attn(x) + self.resweight * self.mlp(x)


class NormsKept(rezero.ReZeroBlock):
    def __init__(self, d_model, nhead):
        super().__init__(d_model, nhead)
        self.norm1 = torch.nn.LayerNorm(d_model)  # Pre-LN's norms, left in
        self.norm2 = torch.nn.LayerNorm(d_model)

    def forward(self, x):
        x = x + self.resweight * self.attn(self.norm1(x))
        return x + self.resweight * self.mlp(self.norm2(x))


class FunctionalNorm(rezero.ReZeroBlock):
    def forward(self, x):
        e = x.shape[-1]
        x = x + self.resweight * self.attn(F.layer_norm(x, (e,)))
        return x + self.resweight * self.mlp(F.layer_norm(x, (e,)))


# Exercise 9.3: z_loss -----------------------------------------------------------------------


def _softmax(logits):
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _z(logits):
    top = logits.max(axis=-1, keepdims=True)
    return top + np.log(np.exp(logits - top).sum(axis=-1, keepdims=True))  # (*B, 1)


def _rows(logits):
    return logits.size // logits.shape[-1]


def z_loss_overflowing(logits, coefficient=1e-4):  # log(sum(exp)) without the shift
    e = np.exp(logits)
    z = np.log(e.sum(axis=-1, keepdims=True))
    m = _rows(logits)
    return (coefficient * (z * z).sum() / m).astype(logits.dtype), \
        (2 * coefficient / m * z * e / e.sum(axis=-1, keepdims=True)).astype(logits.dtype)


def z_loss_shift_lost(logits, coefficient=1e-4):  # the max subtracted, never added back
    z = np.log(np.exp(logits - logits.max(axis=-1, keepdims=True)).sum(-1, keepdims=True))
    m = _rows(logits)
    return (coefficient * (z * z).sum() / m).astype(logits.dtype), \
        (2 * coefficient / m * z * _softmax(logits)).astype(logits.dtype)


def z_loss_not_squared(logits, coefficient=1e-4):
    z, m = _z(logits), _rows(logits)
    return (coefficient * z.sum() / m).astype(logits.dtype), \
        (coefficient / m * _softmax(logits)).astype(logits.dtype)


def z_loss_summed(logits, coefficient=1e-4):
    z = _z(logits)
    return (coefficient * (z * z).sum()).astype(logits.dtype), \
        (2 * coefficient * z * _softmax(logits)).astype(logits.dtype)


def z_loss_first_axis(logits, coefficient=1e-4):  # M taken as the batch axis alone
    z, m = _z(logits), logits.shape[0]
    return (coefficient * (z * z).sum() / m).astype(logits.dtype), \
        (2 * coefficient / m * z * _softmax(logits)).astype(logits.dtype)


def z_loss_no_two(logits, coefficient=1e-4):
    z, m = _z(logits), _rows(logits)
    return (coefficient * (z * z).sum() / m).astype(logits.dtype), \
        (coefficient / m * z * _softmax(logits)).astype(logits.dtype)


def z_loss_exp_gradient(logits, coefficient=1e-4):
    z, m = _z(logits), _rows(logits)
    return (coefficient * (z * z).sum() / m).astype(logits.dtype), \
        (2 * coefficient / m * z * np.exp(logits)).astype(logits.dtype)


def z_loss_softmax_over_rows(logits, coefficient=1e-4):
    z, m = _z(logits), _rows(logits)
    e = np.exp(logits - logits.max(axis=0, keepdims=True))
    return (coefficient * (z * z).sum() / m).astype(logits.dtype), \
        (2 * coefficient / m * z * e / e.sum(axis=0, keepdims=True)).astype(logits.dtype)


def z_loss_python_float(logits, coefficient=1e-4):
    z, m = _z(logits), _rows(logits)
    return float(coefficient * (z * z).sum() / m), \
        (2 * coefficient / m * z * _softmax(logits)).astype(logits.dtype)


# Exercise 9.4: fold_rms_gain ----------------------------------------------------------------


def _folded(norm, linear, weight, bias="same", eps="same", affine=False):
    folded_norm = torch.nn.RMSNorm(norm.normalized_shape, elementwise_affine=affine,
                                   **({} if eps is None else {"eps": norm.eps}))
    if affine:
        with torch.no_grad():
            folded_norm.weight.copy_(norm.weight)
    folded_linear = torch.nn.Linear(linear.in_features, linear.out_features,
                                    bias=linear.bias is not None, dtype=linear.weight.dtype)
    with torch.no_grad():
        folded_linear.weight.copy_(weight)
        if linear.bias is not None:
            folded_linear.bias.copy_(linear.bias if isinstance(bias, str) else bias)
    return folded_norm, folded_linear


def _gain(norm, linear):
    return norm.weight if norm.weight is not None else torch.ones(linear.in_features)


def fold_rows(norm, linear):  # g on W's rows, the outputs
    return _folded(norm, linear, linear.weight * _gain(norm, linear)[:, None])


def fold_divided(norm, linear):
    return _folded(norm, linear, linear.weight / _gain(norm, linear))


def fold_gain_kept(norm, linear):  # the norm keeps g, and W takes it too
    return _folded(norm, linear, linear.weight * _gain(norm, linear),
                   affine=norm.weight is not None)


def fold_bias_scaled(norm, linear):
    g = _gain(norm, linear)
    bias = None if linear.bias is None else linear.bias * g
    return _folded(norm, linear, linear.weight * g, bias=bias)


def fold_default_eps(norm, linear):  # RMSNorm(E) with torch's default eps
    return _folded(norm, linear, linear.weight * _gain(norm, linear), eps=None)


def fold_in_place(norm, linear):  # the original linear, its weight scaled in place
    with torch.no_grad():
        linear.weight.mul_(_gain(norm, linear))
    return torch.nn.RMSNorm(norm.normalized_shape, eps=norm.eps,
                            elementwise_affine=False), linear


def fold_shared_weight(norm, linear):  # a new Linear that shares the original's weight
    folded = torch.nn.Linear(linear.in_features, linear.out_features,
                             bias=linear.bias is not None, dtype=linear.weight.dtype)
    folded.weight = linear.weight
    folded.bias = linear.bias
    with torch.no_grad():
        folded.weight.mul_(_gain(norm, linear))
    return torch.nn.RMSNorm(norm.normalized_shape, eps=norm.eps,
                            elementwise_affine=False), folded


WRONG = {
    "9.1": {
        "arccos of the cosine": Mistake(angle_arccos, "arccos of the cosine"),
        "arccos in float32": Mistake(angle_arccos_float32, "computed in float32"),
        "the stable formula in float32": Mistake(angle_stable_float32, "computed in float32"),
        "degrees": Mistake(angle_degrees, "in degrees"),
        "the relative update": Mistake(relative_update, "relative size of the update"),
        "arcsin of the sine": Mistake(angle_arcsin, "arcsin of the sine"),
        "an angle per row": Mistake(angle_per_row, "row by row"),
        "not normalized": Mistake(angle_unnormalized, "were not normalized"),
    },
    "9.2": {
        "alpha starts at 1": Mistake(AlphaOne, "not zero-initialized"),
        "alpha a buffer": Mistake(AlphaBuffer, "not a trainable parameter"),
        "one alpha per sublayer": Mistake(TwoAlphas, "one alpha per sublayer"),
        "alpha on x": Mistake(AlphaOnX, "multiplies the residual stream x"),
        "alpha on the whole sum": Mistake(WholeResidual, "multiplies the whole sum"),
        "the MLP not scaled": Mistake(MLPUngated, "the MLP's branch is not scaled"),
        "the attention not scaled": Mistake(AttentionUngated,
                                            "the attention's branch is not scaled"),
        "the sublayers in parallel": Mistake(Parallel, "reads the block's input"),
        "Pre-LN's norms kept": Mistake(NormsKept, "a norm is kept"),
        "a functional norm kept": Mistake(FunctionalNorm, "a norm is kept"),
    },
    "9.3": {
        "exp overflows": Mistake(z_loss_overflowing, "exp overflowed"),
        "the max not added back": Mistake(z_loss_shift_lost, "not added back"),
        "z not squared": Mistake(z_loss_not_squared, "z is not squared"),
        "a sum over the rows": Mistake(z_loss_summed, "summed, not averaged"),
        "M the first axis": Mistake(z_loss_first_axis, "the first axis only"),
        "the factor 2 missing": Mistake(z_loss_no_two, "lacks the factor 2"),
        "exp for the softmax": Mistake(z_loss_exp_gradient, "exp(logits) where the softmax"),
        "the softmax over the rows": Mistake(z_loss_softmax_over_rows, "runs over the rows"),
        "a Python float": Mistake(z_loss_python_float, "a Python float loses the dtype"),
    },
    "9.4": {
        "g on the rows": Mistake(fold_rows, "scales the weight's rows"),
        "g divides": Mistake(fold_divided, "the gain divides the weight"),
        "the norm keeps g": Mistake(fold_gain_kept, "keeps elementwise_affine"),
        "the bias scaled": Mistake(fold_bias_scaled, "the bias was scaled by g too"),
        "torch's default eps": Mistake(fold_default_eps, "torch's default eps"),
        "in place": Mistake(fold_in_place, "wrote into the original"),
        "a shared weight": Mistake(fold_shared_weight, "wrote into the original"),
    },
}
