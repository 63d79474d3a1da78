"""Correct implementations of Unit 9's exercises written differently from the reference:
every one must pass its graded check (tests/test_graders.py) at a tenth of the
tolerances. Targets as in wrong_scale.py."""

import math

import numpy as np
import torch

import normlib.fold as fold
import normlib.rezero as rezero
from normlib._validation import check_logits, check_weight_pair

# Exercise 9.1: angular_update ---------------------------------------------------------------


def angle_by_projection(before, after):
    """atan2 of the part of after orthogonal to before, and of the part along it."""
    check_weight_pair(before, after)
    a, b = before.astype(np.float64).ravel(), after.astype(np.float64).ravel()  # (n,)
    along = (a @ b) / (a @ a)
    return math.atan2(np.linalg.norm(b - along * a), along * np.linalg.norm(a))


def angle_half_chord(before, after):
    """2 arcsin(|a/|a| - b/|b|| / 2), the chord of the unit circle."""
    check_weight_pair(before, after)
    a, b = (w.astype(np.float64).ravel() for w in (before, after))
    chord = np.linalg.norm(a / np.linalg.norm(a) - b / np.linalg.norm(b))
    return float(2 * np.arcsin(min(1.0, chord / 2)))


# Exercise 9.2: ReZeroBlock ------------------------------------------------------------------


class ZerosInit(rezero.ReZeroBlock):
    """alpha made with empty and torch.nn.init.zeros_, the branch scaled after."""

    def __init__(self, d_model, nhead):
        super().__init__(d_model, nhead)
        self.resweight = torch.nn.Parameter(torch.empty(1))
        torch.nn.init.zeros_(self.resweight)

    def forward(self, x):
        rezero.check_stream(x, self.attn.out.out_features)
        x = torch.add(x, self.attn(x) * self.resweight)
        return torch.add(x, self.mlp(x) * self.resweight)


# Exercise 9.3: z_loss -----------------------------------------------------------------------


def z_loss_logaddexp(logits, coefficient=1e-4):
    """z by np.logaddexp.reduce, the softmax as exp(logits - z)."""
    check_logits(logits, coefficient)
    z = np.logaddexp.reduce(logits, axis=-1, keepdims=True)  # (*B, 1)
    rows = logits.size // logits.shape[-1]
    loss = np.mean(np.square(z)) * coefficient
    return np.asarray(loss, dtype=logits.dtype), \
        (coefficient * 2 / rows * z * np.exp(logits - z)).astype(logits.dtype)


def z_loss_float64(logits, coefficient=1e-4):
    """Everything in float64 on a (M, V) view, rounded once."""
    check_logits(logits, coefficient)
    x = logits.astype(np.float64).reshape(-1, logits.shape[-1])  # (M, V)
    top = x.max(axis=1, keepdims=True)  # (M, 1)
    p = np.exp(x - top)  # (M, V)
    s = p.sum(axis=1, keepdims=True)  # (M, 1)
    z = top + np.log(s)  # (M, 1)
    grad = 2 * coefficient * z * (p / s) / x.shape[0]  # (M, V)
    return np.float64(coefficient * np.mean(z ** 2)).astype(logits.dtype), \
        grad.reshape(logits.shape).astype(logits.dtype)


# Exercise 9.4: fold_rms_gain ----------------------------------------------------------------


def fold_by_diag(gain, weight, bias=None):
    """W diag(g) as a matmul (exact: one nonzero term per entry)."""
    fold.check_fold_args(gain, weight, bias)
    if gain is None:
        return weight.detach().clone(), None if bias is None else bias.detach().clone()
    return (weight @ torch.diag(gain)).detach(), None if bias is None else bias.clone()


def fold_in_float64(gain, weight, bias=None):
    """The product in float64, rounded once; einsum over the columns."""
    fold.check_fold_args(gain, weight, bias)
    g = torch.ones(weight.shape[1], dtype=torch.float64) if gain is None else gain.double()
    folded = torch.einsum("fe,e->fe", weight.double(), g).to(weight.dtype)
    return folded, None if bias is None else torch.empty_like(bias).copy_(bias)


RIGHT = {
    "9.1": {"atan2 of the projection": angle_by_projection,
            "2 arcsin of half the chord": angle_half_chord},
    "9.2": {"zeros_ and the branch scaled after": ZerosInit},
    "9.3": {"logaddexp.reduce": z_loss_logaddexp, "float64 inside, rounded once": z_loss_float64},
    "9.4": {"W @ diag(g)": fold_by_diag, "einsum in float64, rounded once": fold_in_float64},
}
