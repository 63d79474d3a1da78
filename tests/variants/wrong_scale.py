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


def _g(gain, weight):
    return torch.ones(weight.shape[1], dtype=weight.dtype) if gain is None else gain


def fold_rows(gain, weight, bias=None):  # g on W's rows, the outputs
    return weight * _g(gain, weight)[:, None], bias


def fold_divided(gain, weight, bias=None):
    return weight / _g(gain, weight), bias


def fold_bias_scaled(gain, weight, bias=None):
    g = _g(gain, weight)
    return weight * g, None if bias is None else bias * g


def fold_in_place(gain, weight, bias=None):  # the original weight, scaled in place
    with torch.no_grad():
        return weight.mul_(_g(gain, weight)), bias


def fold_gain_ignored(gain, weight, bias=None):  # the norm loses its gain, W keeps its own
    return weight.clone(), bias


def fold_float32(gain, weight, bias=None):  # the product in float32, whatever the dtype
    g = _g(gain, weight)
    return (weight.float() * g.float()).to(weight.dtype), bias


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
        "the bias scaled": Mistake(fold_bias_scaled, "the bias was scaled by g too"),
        "in place": Mistake(fold_in_place, "wrote into the original"),
        "the gain ignored": Mistake(fold_gain_ignored, "the gain was left out"),
        "float32 for float64": Mistake(fold_float32, "float32"),
    },
}
