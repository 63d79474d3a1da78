"""The ConvNet experiment's claims (normkit/convnet.py, notebook 04's section on convolutions
and small batches) hold under a perturbation: the runs again, with every initial weight
multiplied by (1 + 1e-6 * noise), from the notebook's seed and two others, and every claim
must hold in each. As in tests/test_training.py, jitter 0 runs here and jitter 1 on torch's
generic kernels and NumPy's baseline, one thread (tests/test_machines.py's EXPERIMENTS);
the notebook's own run asserts them unperturbed. The thresholds were chosen from 42 runs on
two CPU configurations, far from every one (normkit/convnet.py gives the numbers)."""

import os

import pytest
import torch
import torch.nn.functional as F

from normkit import convnet, training
from tests.conftest import failed

# jitter 0 on this machine; jitter 1 in tests/test_machines.py's configuration
TESTED = training.JITTERS[1 if os.environ.get("COURSE_CONFIGURATION") else 0]
# the notebook's seed and two others on this machine; in a configuration the notebook's alone,
# perturbed: other kernels change the last bits as the jitter does, and the other seeds'
# margins are shown here (their 24 s there were a tenth of the configuration's run)
SEEDS = (0,) if os.environ.get("COURSE_CONFIGURATION") else (0, 1, 2)


@pytest.mark.parametrize("jitter", (TESTED,), ids=lambda j: f"jitter{j}")
def test_the_convnet_claims_hold(jitter):
    for seed in SEEDS:
        results = convnet.runs(seed=seed, jitter=jitter)
        assert failed(convnet.convnet_claims(results)) == [], (seed, results)


GOOD = {**{(norm, batch): 0.95 for norm in convnet.NORMS for batch in convnet.BATCHES},
        **{(norm, batch, "loss"): 0.2 for norm in convnet.NORMS for batch in convnet.BATCHES},
        ("BatchNorm", 2): 0.27, ("BatchNorm", 2, "loss"): 1.39, ("BatchNorm", 32, "pairs"): 0.6}


@pytest.mark.parametrize("changes, refuted", [
    ({("BatchNorm", 2): 0.66, ("BatchNorm", 32): 1.0}, "at least 0.3 below GroupNorm's"),
    ({("BatchNorm", 2): 0.6, ("GroupNorm", 2): 0.85, ("GroupNorm", 32): 0.85},
     "at least 0.3 below GroupNorm's"),
    ({("BatchNorm", 2): 0.45, ("BatchNorm", 32): 0.72, ("BatchNorm", 32, "pairs"): 0.5},
     "below its own at batch 32"),
    ({("BatchNorm", 32): 0.68, ("BatchNorm", 32, "pairs"): 0.4}, "every other run: accuracy"),
    ({("LayerNorm", 2): 0.65, ("LayerNorm", 32): 0.65}, "every other run: accuracy"),
    ({("GroupNorm", 2): 0.79}, "at most 0.15 below"),  # GroupNorm at 32: 0.95
    ({("LayerNorm", 2): 0.75}, "at most 0.15 below"),
    ({("BatchNorm", 2, "loss"): 0.6}, "BatchNorm at batch 2 does not learn"),
    ({("GroupNorm", 32, "loss"): 0.8}, "every other run learns"),
    ({("BatchNorm", 32, "loss"): 1.3}, "every other run learns"),
    ({("BatchNorm", 32, "pairs"): 0.9}, "in training mode on pairs"),
])
def test_each_convnet_claim_can_fail(changes, refuted):
    assert failed(convnet.convnet_claims(GOOD)) == []
    assert [refuted in claim for claim in failed(convnet.convnet_claims({**GOOD, **changes}))
            ] == [True]


def test_the_images_are_seeded_and_their_class_is_the_bars_orientation():
    images, labels = convnet.bars(400, seed=3)
    assert images.shape == (400, 1, 12, 12) and images.dtype == torch.float32
    assert torch.equal(images, convnet.bars(400, seed=3)[0])
    assert not torch.equal(images, convnet.bars(400, seed=4)[0])
    assert labels.bincount(minlength=convnet.CLASSES).min() > 60  # 100 expected per class
    # without noise, contrast or brightness: the bar's axis (its pixels' second moments)
    clean, same = convnet.bars(400, seed=3, noise=0.0, contrast=0.0, brightness=0.0)
    assert torch.equal(same, labels) and clean.min() >= 0 and clean.max() <= 1
    w = clean[:, 0] / clean.sum(dim=(1, 2, 3))[:, None, None]  # (400, 12, 12): weights
    grid = torch.arange(12.0)
    r, c = (w.sum(dim=2) * grid).sum(dim=1), (w.sum(dim=1) * grid).sum(dim=1)  # (400,) each
    dr, dc = grid[None, :, None] - r[:, None, None], grid[None, None, :] - c[:, None, None]
    rr, cc, rc = ((w * m).sum(dim=(1, 2)) for m in (dr * dr, dc * dc, dr * dc))  # (400,)
    angle = 0.5 * torch.atan2(2 * rc, cc - rr)  # (400,): the axis (row, col) = (sin, cos)
    off = (angle - labels * torch.pi / convnet.CLASSES + torch.pi / 2) % torch.pi - torch.pi / 2
    assert off.abs().max() < 0.7 and off.abs().mean() < 0.15  # the angle noise: 0.15


def test_the_norms_normalize_over_the_sets_they_name():
    x = torch.randn(3, 8, 5, 5) * 2 + 1  # (N, C, H, W)
    layer = convnet.norm_layer("LayerNorm", 8)  # over (C, H, W), per sample
    torch.testing.assert_close(layer(x), F.layer_norm(x, x.shape[1:]), atol=1e-5, rtol=0)
    group = convnet.norm_layer("GroupNorm", 8)  # 4 groups of 2 channels, per sample
    torch.testing.assert_close(group(x), F.layer_norm(x.view(3, 4, 2, 5, 5), (2, 5, 5)).view(
        x.shape), atol=1e-5, rtol=0)
    batch = convnet.norm_layer("BatchNorm", 8)  # per channel, over (N, H, W)
    torch.testing.assert_close(batch(x), F.batch_norm(x, None, None, training=True),
                               atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="norm must be one of"):
        convnet.norm_layer("InstanceNorm", 8)


def test_the_last_norm_sees_one_value_per_channel_and_image():
    """The design the claims rest on: after the third convolution the map is 1x1, so in
    training at batch 2 BatchNorm's output there is -1 or +1 before its affine."""
    model = convnet.convnet("BatchNorm")
    seen = []
    model[9].register_forward_hook(lambda layer, args, out: seen.append(args[0].shape))
    images, _ = convnet.bars(2, seed=0)
    assert model(images).shape == (2, convnet.CLASSES)
    assert isinstance(model[9], torch.nn.BatchNorm2d) and seen == [(2, 32, 1, 1)]
    with torch.no_grad():
        z = model[:9](images)  # (2, 32, 1, 1): the last norm's input
        out = F.batch_norm(z, None, None, training=True, eps=1e-12)
    torch.testing.assert_close(out.abs(), torch.ones_like(out), atol=1e-4, rtol=0)


def test_every_run_sees_the_same_samples_and_starts_from_the_seeds_weights():
    images, labels = convnet.bars(64, seed=0)

    def initial(norm, seed, jitter=None):  # trained on no image: the initial weights
        return convnet.train(norm, 2, images[:0], labels[:0], seed, jitter)[0][0].weight

    torch.manual_seed(123)  # the global generator decides nothing
    start = initial("BatchNorm", 0)
    assert torch.equal(start, initial("GroupNorm", 0))
    assert not torch.equal(start, initial("BatchNorm", 1))
    change = initial("BatchNorm", 0, jitter=0) / start - 1
    assert 0 < change.abs().max() < 1e-5
    # 64 samples seen at batch 2 and 32: 32 steps and 2 (BatchNorm counts its batches)
    seen = [convnet.train("BatchNorm", batch, images, labels)[0][1].num_batches_tracked
            for batch in convnet.BATCHES]
    assert seen == [32, 2]
