"""Unit 4, section 9: a small ConvNet with BatchNorm, GroupNorm or LayerNorm, at batch 2 and 32.

`runs` trains it; `convnet_claims` are what notebook 04 asserts. The images are made here
from a seed, nothing downloaded: 12x12, one channel, a short blurred bar at one of 4
orientations (the class) near the centre, in pixel noise, each image with its own contrast
and brightness. The network, after LeNet-5: three 3x3 convolutions, each followed by the
norm and a ReLU, max pooling after the first two, and a linear layer on the last one's 1x1
map. So the last norm sees one value per channel and sample: at batch size 2, BatchNorm
there maps every value to -1 or +1 (section 1's case). Each run sees the same 4096 images
once, in the same order, from the same initial weights, by SGD with momentum and the
learning rate scaled linearly with the batch size (Goyal et al. 2017); accuracy is that of
evaluation mode on 1000 held-out images. tests/test_convnet.py asserts the claims under a
`jitter` (as in normkit/training.py), here and on torch's generic kernels.
"""

import copy
import math

import torch
import torch.nn.functional as F

from normkit.training import jitter_, outcome

NORMS = ("BatchNorm", "GroupNorm", "LayerNorm")
BATCHES = (2, 32)
CLASSES = 4
SIZE = 12
SAMPLES = 4096  # training images, each seen once by every run
TESTS = 1000  # held-out images
LR = 0.02  # at batch size 32; batch size B trains at LR * B / 32
MOMENTUM = 0.9
LAST = 512  # the training loss at the end: over the last LAST samples seen
CHANCE = math.log(CLASSES)  # the loss of a uniform guess (an accuracy of 1 / CLASSES)
GROUPS = 4  # GroupNorm's groups (LayerNorm's statistics over (C, H, W): GroupNorm with one)


def bars(n, seed=0, noise=0.2, contrast=0.5, brightness=1.0):
    """n images (n, 1, SIZE, SIZE) of a bar at one of CLASSES orientations, and their labels
    (n,): the bar's profile across is exp(-d^2) (d in pixels), its half-length 4 pixels;
    then pixel noise of std `noise`, and per image a contrast exp(contrast * z) and a
    brightness offset brightness * z', z and z' standard normal."""
    gen = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, CLASSES, (n,), generator=gen)  # (n,)
    angle = labels * math.pi / CLASSES + 0.15 * torch.randn(n, generator=gen)  # (n,)
    centre = (SIZE - 1) / 2 + 2 * (2 * torch.rand(n, 2, generator=gen) - 1)  # (n, 2): row, col
    grid = torch.arange(SIZE, dtype=torch.float32)  # (SIZE,)
    dr = grid[None, :, None] - centre[:, 0, None, None]  # (n, SIZE, 1): rows from the centre
    dc = grid[None, None, :] - centre[:, 1, None, None]  # (n, 1, SIZE): columns
    sin, cos = torch.sin(angle)[:, None, None], torch.cos(angle)[:, None, None]  # (n, 1, 1)
    along, across = dr * sin + dc * cos, dc * sin - dr * cos  # (n, SIZE, SIZE) each
    bar = torch.exp(-across**2) * (along.abs() < 4)  # (n, SIZE, SIZE)
    scale = torch.exp(contrast * torch.randn(n, 1, 1, generator=gen))  # (n, 1, 1)
    offset = brightness * torch.randn(n, 1, 1, generator=gen)  # (n, 1, 1)
    pixels = scale * (bar + noise * torch.randn(n, SIZE, SIZE, generator=gen)) + offset
    return pixels[:, None], labels  # (n, 1, SIZE, SIZE), (n,)


def norm_layer(norm, channels):
    """The norm after a convolution of `channels` outputs: BatchNorm2d, GroupNorm with
    GROUPS groups, or LayerNorm over (C, H, W), run as GroupNorm with one group: the
    statistics of nn.LayerNorm((C, H, W)), with a per-channel affine (C gammas and betas)
    where nn.LayerNorm((C, H, W)) has one per element, tied to one map size."""
    if norm not in NORMS:
        raise ValueError(f"norm_layer: norm must be one of {NORMS}, got {norm!r}")
    return {"BatchNorm": lambda: torch.nn.BatchNorm2d(channels),
            "GroupNorm": lambda: torch.nn.GroupNorm(GROUPS, channels),
            "LayerNorm": lambda: torch.nn.GroupNorm(1, channels)}[norm]()


def convnet(norm, width=16):
    """The network, images (N, 1, 12, 12) -> logits (N, CLASSES): conv, norm, ReLU, pool
    (width channels, 6x6); again (2 width, 3x3); a 3x3 convolution without padding (2 width,
    1x1), norm, ReLU; a linear layer. Its weights come from torch's global generator."""
    c = 2 * width
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, width, 3, padding=1), norm_layer(norm, width), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),  # (N, width, 6, 6)
        torch.nn.Conv2d(width, c, 3, padding=1), norm_layer(norm, c), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),  # (N, c, 3, 3)
        torch.nn.Conv2d(c, c, 3), norm_layer(norm, c), torch.nn.ReLU(),  # (N, c, 1, 1)
        torch.nn.Flatten(), torch.nn.Linear(c, CLASSES))  # (N, CLASSES)


def train(norm, batch, images, labels, seed=0, jitter=None):
    """convnet(norm) from seed's initial weights (the jitter, if any, applied), trained by
    SGD on images (SAMPLES, 1, 12, 12) and labels (SAMPLES,), each seen once in seed's
    order, `batch` at a time: the model (left in training mode) and its training loss at
    the end, the mean of its batches' losses over the last LAST samples seen."""
    with torch.random.fork_rng():  # (the caller's global generator left as it was)
        torch.manual_seed(seed)
        model = convnet(norm)
    jitter_(model.parameters(), jitter)
    opt = torch.optim.SGD(model.parameters(), lr=LR * batch / 32, momentum=MOMENTUM,
                          foreach=True)
    order = torch.randperm(len(images), generator=torch.Generator().manual_seed(seed))
    losses = []
    for idx in order.view(-1, batch):  # (batch,) each
        loss = F.cross_entropy(model(images[idx]), labels[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return model, sum(losses[-LAST // batch:]) / (LAST // batch)


@torch.no_grad()
def accuracy(model, images, labels, batch=None):
    """The fraction of images (N, 1, 12, 12) whose label (N,) the model predicts: in
    evaluation mode if batch is None, else in training mode on consecutive batches of
    `batch` images (BatchNorm normalizing with each batch's statistics; on a copy, so that
    the model's running statistics stay as they are)."""
    if batch is None:
        model.eval()
        return (model(images).argmax(dim=1) == labels).float().mean().item()
    model = copy.deepcopy(model).train()
    logits = torch.cat([model(x) for x in images.split(batch)])  # (N, CLASSES)
    return (logits.argmax(dim=1) == labels).float().mean().item()


def runs(seed=0, jitter=None, report=None):
    """Every norm of NORMS trained at every batch size of BATCHES on bars(seed)'s first
    SAMPLES images, from seed's initial weights: {(norm, batch): accuracy in evaluation
    mode on the TESTS images after them, (norm, batch, "loss"): the training loss at the
    end}, and under ("BatchNorm", 32, "pairs") BatchNorm's batch-32 network's accuracy on
    the TESTS images in training mode, two at a time. report(norm, batch), if given, is
    called before each run (a progress line)."""
    images, labels = bars(SAMPLES + TESTS, seed)  # (SAMPLES + TESTS, 1, 12, 12), (..,)
    train_x, test_x = images.split([SAMPLES, TESTS])  # (SAMPLES, ..), (TESTS, ..)
    train_y, test_y = labels.split([SAMPLES, TESTS])  # (SAMPLES,), (TESTS,)
    results = {}
    for norm in NORMS:
        for batch in BATCHES:
            if report is not None:
                report(norm, batch)
            model, results[norm, batch, "loss"] = train(norm, batch, train_x, train_y, seed,
                                                        jitter)
            if (norm, batch) == ("BatchNorm", 32):
                results[norm, batch, "pairs"] = accuracy(model, test_x, test_y, batch=2)
            results[norm, batch] = accuracy(model, test_x, test_y)
    return results


# The claims' thresholds, far from every run of runs() measured, one thread each: seeds 0 to
# 5, under no jitter and jitters 0 to 11 (seeds 0 to 2) or 5 to 11 (3 to 5), on torch's
# AVX-512 and generic (ATEN_CPU_CAPABILITY=default) kernels: 63 runs of each on each, and
# 99 more of BatchNorm at batch 2 alone (jitters 12 to 24; 141 on each); 6 on its AVX2
# kernels (two threads; seeds 0 to 2, unjittered and jitter 1). Their accuracies in
# evaluation mode: BatchNorm at batch 2 0.24 to 0.375 (AVX2: 0.441, once), 0.516 or more
# below GroupNorm at batch 2 and 0.480 or more below BatchNorm at 32; every other run 0.841
# or more; GroupNorm and LayerNorm at batch 2 at most 0.062 below their accuracy at 32
# (0.050 without AVX2's run). Training losses at the end: BatchNorm at batch 2 1.348 or more
# (ln 4 = 1.386), every other run 0.427 or less. BatchNorm's batch-32 network, in training
# mode on pairs, 0.208 or more below its accuracy in evaluation mode.
GAP = 0.3  # BatchNorm at batch 2 is at least this far below GroupNorm at 2, and itself at 32
LEARNS = 0.7  # every other run's accuracy is above (chance: 0.25)
DROP = 0.15  # GroupNorm's and LayerNorm's accuracy at batch 2 is at most this below 32's
PAIRS = 0.1  # BatchNorm's batch-32 network loses more in training mode on pairs


def convnet_claims(results):
    """{claim: whether it holds} for runs(): BatchNorm at batch 2 fails where GroupNorm
    and LayerNorm, and BatchNorm at batch 32, learn; the thresholds are above. A training
    loss "learns" below half of ln 4, a uniform guess's (training.outcome)."""
    acc = {(norm, batch): results[norm, batch] for norm in NORMS for batch in BATCHES}
    learns = {run: outcome(results[(*run, "loss")], CHANCE) == "learns" for run in acc}
    others = [run for run in acc if run != ("BatchNorm", 2)]
    return {
        f"BatchNorm at batch 2: accuracy at least {GAP:g} below GroupNorm's at batch 2":
            acc["GroupNorm", 2] - acc["BatchNorm", 2] >= GAP,
        f"BatchNorm at batch 2: accuracy at least {GAP:g} below its own at batch 32":
            acc["BatchNorm", 32] - acc["BatchNorm", 2] >= GAP,
        f"every other run: accuracy above {LEARNS:g} (chance: {1 / CLASSES:g})":
            all(acc[run] > LEARNS for run in others),
        f"GroupNorm and LayerNorm: accuracy at batch 2 at most {DROP:g} below batch 32's":
            all(acc[norm, 32] - acc[norm, 2] <= DROP for norm in ("GroupNorm", "LayerNorm")),
        "BatchNorm at batch 2 does not learn: its training loss ends above ln 4 / 2":
            not learns["BatchNorm", 2],
        "every other run learns: its training loss ends below ln 4 / 2":
            all(learns[run] for run in others),
        f"BatchNorm at batch 32, in training mode on pairs: accuracy more than {PAIRS:g} "
        "below its own in evaluation mode":
            acc["BatchNorm", 32] - results["BatchNorm", 32, "pairs"] > PAIRS,
    }
