"""z-loss (Unit 9: Exercise 9.3): a penalty that keeps the output softmax's normalizer near 1.

The cross-entropy of a language model does not change when the same constant is added to
every logit of a row, so nothing stops the logits of a row from drifting together, and
at a high learning rate they do (the output-logit divergence of Wortsman et al. 2023).
z-loss adds coefficient * z^2 per row, z = log sum_v exp(logits_v), the log of the
softmax's normalizer, which pulls z towards 0 (PaLM, Chowdhery et al. 2022: coefficient
1e-4). Notebook 09, section 3, runs it; you derive its gradient.

Shapes: logits (*B, V), one row of V scores per position (the rows: every leading dim).
NumPy in, NumPy out, in the logits' dtype.
"""

import numpy as np

from normlib._validation import check_logits


def z_loss(logits, coefficient=1e-4):
    """Exercise 9.3: z-loss and its gradient.

    Args:
        logits: float32 or float64 array (*B, V), at least one row.
        coefficient: a number >= 0 (PaLM's 1e-4 by default).
    Returns:
        loss: coefficient * the mean over the rows of z^2, with z = log sum_v exp(logits)
            per row (the log of the softmax's normalizer), a NumPy scalar (or 0-d array)
            of the logits' dtype. It must stay finite for logits in the hundreds in
            float32, where exp overflows (a diverging model's logits reach that).
        dlogits: (*B, V), the logits' dtype: d loss / d logits.
    Raises:
        TypeError or ValueError (check_logits, provided): not a float array, no row or
        no class, or a coefficient that is not a finite number >= 0.
    """
    check_logits(logits, coefficient)
    ### BEGIN SOLUTION
    rows = logits.size // logits.shape[-1]  # M: every leading dim
    top = logits.max(axis=-1, keepdims=True)  # (*B, 1): exp of the rest is <= 1
    e = np.exp(logits - top)  # (*B, V)
    total = e.sum(axis=-1, keepdims=True)  # (*B, 1)
    z = top + np.log(total)  # (*B, 1): log sum exp, without overflow
    loss = coefficient * (z * z).sum() / rows  # ()
    dlogits = (2 * coefficient / rows) * z * (e / total)  # (*B, V): z times the softmax
    return loss.astype(logits.dtype), dlogits.astype(logits.dtype)
    ### END SOLUTION
