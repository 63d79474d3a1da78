"""The residual stream at initialization, block after block (notebook 09, section 2): why a
deep stack without a norm needs its branches scaled down at the start.

Each block adds its sublayers' outputs to the stream, x <- x + F(x). Without a norm, every
addition grows the stream's size by a factor, and the factors multiply with depth; Pre-LN
feeds each F a normalized input, so each adds a bounded amount and the growth is about a
square root; ReZero (alpha = 0) and LayerScale (a per-channel scale of 1e-6, ConvNeXt's)
make every block start at the identity, or next to it. `growth` measures the stream's size
relative to its input after each block of a random stack (torch's default initialization,
the attention and MLP of normlib/_blocks.py's models); a forward pass, no training.
"""

import torch
import torch.nn.functional as F

from normkit import language_model, modern
from normkit.training import jitter_
from normlib._blocks import Attention

MODES = ("no norm", "Pre-LN", "ReZero", "LayerScale 1e-6")
LAYER_SCALE = 1e-6  # ConvNeXt's layer_scale_init_value (facebookresearch/ConvNeXt, convnext.py)


def _branch(mode, f, x):
    """The block's update of x by sublayer f under mode: (N, T, E) -> (N, T, E)."""
    if mode == "no norm":
        return x + f(x)
    if mode == "Pre-LN":
        return x + f(F.layer_norm(x, x.shape[-1:]))
    if mode == "ReZero":
        return x + 0.0 * f(x)  # alpha at its initial 0
    return x + LAYER_SCALE * f(x)  # diag(1e-6) on the branch


def growth(mode, depth=48, d_model=64, nhead=4, shape=(4, 16), seed=0, jitter=None):
    """[|x_l| / |x_0| for l = 1..depth]: the stream's Frobenius norm after each block,
    relative to the input's, for a stack of random blocks (attention then MLP) under mode;
    jitter (a seed): every weight and x multiplied by (1 + 1e-6 noise) (training.jitter_)."""
    torch.manual_seed(seed)
    x = torch.randn(*shape, d_model)  # (N, T, E)
    jitter_([x], jitter)
    size, found = x.norm(), []
    with torch.no_grad():
        for _ in range(depth):
            attn = Attention(d_model, nhead)
            mlp = torch.nn.Sequential(torch.nn.Linear(d_model, 4 * d_model), torch.nn.GELU(),
                                      torch.nn.Linear(4 * d_model, d_model))
            jitter_([*attn.parameters(), *mlp.parameters()], jitter)
            x = _branch(mode, mlp, _branch(mode, attn, x))  # (N, T, E)
            found.append((x.norm() / size).item())
    return found


def growths(depth=48, seeds=(0,), jitter=None):
    """{(mode, seed): growth(mode, depth, seed=seed, jitter=jitter)} for every mode."""
    return {(mode, seed): growth(mode, depth, seed=seed, jitter=jitter)
            for mode in MODES for seed in seeds}


def claims(found):
    """{claim: whether it holds} for growths(48): what notebook 09 asserts. Observed for
    seeds 0 to 4 on this machine: without a norm the stream ends 38 to 57 times its input's
    size, Pre-LN 2.3 to 2.7 times, ReZero exactly 1, LayerScale within 1e-5 of 1."""
    last = {key: g[-1] for key, g in found.items()}
    seeds = sorted({seed for _, seed in found})
    holds = {}
    for s in seeds:
        holds[f"seed {s}: without a norm the stream grows over 10 times its size in 48 "
              "blocks"] = last["no norm", s] > 10
        holds[f"seed {s}: with Pre-LN it grows, but less than 5 times"] = \
            1 < last["Pre-LN", s] < 5
        holds[f"seed {s}: ReZero's blocks are the identity: the size is exactly kept"] = \
            all(r == 1.0 for r in found["ReZero", s])
        holds[f"seed {s}: LayerScale's blocks nearly so (within 1e-4)"] = \
            all(abs(r - 1) < 1e-4 for r in found["LayerScale 1e-6", s])
    return holds


# Training at depth: Unit 8's deep Post-LN, and ReZero ------------------------------------

REZERO = (modern.Config("layer", placement="post"), modern.Config("layer", placement="rezero"))


def rezero_runs(s, corpus, jitter=None, report=None):
    """Post-LN and ReZero (REZERO) trained as Unit 8's placements are (modern.train_all,
    modern.deep_settings(): 12 blocks, a high rate, no warm-up): {(config, lr): Run}."""
    return modern.train_all(REZERO, s, corpus, jitter, report)


def alphas(run):
    """ReZero's learned alpha of each block, after training: (num_layers,)."""
    return torch.cat([block.alpha.detach() for block in run.model.blocks])


def rezero_claims(runs, corpus):
    """{claim: whether it holds} for rezero_runs(modern.deep_settings()): what notebook 09
    asserts, with Unit 8's thresholds (modern.LEARNS, modern.NOTHING). Observed with
    Settings.deep() and deep_light() for seeds 0 to 4 and for seed 0 under jitters 1 and 2
    on this machine's kernels (AVX-512), and for seeds 0 (plain and jitter 1) and 1 on
    torch's generic and AVX2 kernels (26 sets; unigram 3.228): ReZero ends at 2.62 to 2.69,
    0.54 or more below the unigram's loss; Post-LN at 3.218 to 3.236, as in notebook 08;
    every alpha between 0.01 and 0.07 in absolute value."""
    (lr,) = {lr for _, lr in runs}
    unigram = language_model.unigram_loss(corpus)
    val = {c.placement: r.val_loss for (c, _), r in runs.items()}
    rezero = next(r for (c, _), r in runs.items() if c.placement == "rezero")
    return {
        f"lr {lr:g}: Post-LN learns next to nothing from the context (less than "
        f"{modern.NOTHING} below the unigram's loss)": val["post"] > unigram - modern.NOTHING,
        f"lr {lr:g}: ReZero, with no norm at all, learns ({modern.LEARNS} or more below the "
        "unigram's loss)": val["rezero"] < unigram - modern.LEARNS,
        "every block's alpha, 0 at the start, has moved": bool((alphas(rezero) != 0).all()),
    }
