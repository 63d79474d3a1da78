"""The training experiments' claims (normkit/training.py) hold by a wide margin: each
experiment runs again with every initial weight multiplied by (1 + 1e-6 * noise), and every
claim its notebook asserts must hold in every run. A run costs seconds, so each runs once,
in one of three settings:

- unperturbed, on this machine: the notebooks' own runs (nbval);
- perturbed by jitter 0 (training.JITTERS), on this machine: here;
- perturbed by jitter 1, on torch's generic kernels and NumPy's baseline, one thread:
  tests/test_machines.py runs this file there (COURSE_CONFIGURATION set). The runs near the
  largest learning rate that trains (sweep_edge) run in both, with all their jitters.

Near that learning rate training is chaotic (README.md, "For authors"). The claims were
chosen far from their thresholds over many seeds, jitters and CPU configurations
(normkit/training.py gives the numbers); the chaotic case asserts only its spread.
"""

import os

import pytest
import torch

from normkit import training
from tests.conftest import exercise, failed

# jitter 0 on this machine; jitter 1 in tests/test_machines.py's configuration
TESTED = training.JITTERS[1 if os.environ.get("COURSE_CONFIGURATION") else 0]
JITTERS = pytest.mark.parametrize("jitter", (TESTED,), ids=lambda j: f"jitter{j}")
SWEEP = (len(training.LRS), len(training.SCALES), len(training.SEEDS))


@JITTERS
def test_the_sweep_claims_hold(jitter):
    final = training.sweep(jitter=jitter)  # {kind: (lrs, scales, seeds)}
    assert failed(training.sweep_claims(final)) == [], training.outcomes(final)


def test_the_edge_of_training_is_chaotic_and_only_there():
    finals = training.sweep_edge()  # (1 + jitters, lrs 0.3 1 3, seeds)
    assert finals.shape == (1 + len(training.JITTERS), len(training.EDGE_LRS), SWEEP[2])
    assert failed(training.edge_claims(finals)) == [], finals


@exercise("5.3")
@JITTERS
def test_the_warmup_claims_hold(jitter):
    runs = training.warmup_runs(jitter=jitter)
    assert failed(training.warmup_claims(runs)) == [], {
        run: [round(v, 2) for v in training.windows(losses)[::20].tolist()]
        for run, losses in runs.items()}


@pytest.mark.parametrize("loss, refuted", [
    (0.05, "fails"),  # every run learned, even where one must fail
    (training.CHANCE, "learns"),  # every run stayed at chance
    (torch.inf, "learns"),  # every run diverged
])
def test_each_sweep_claim_can_fail(loss, refuted):
    claims = training.sweep_claims({kind: torch.full(SWEEP, loss) for kind in training.KINDS})
    expected = [c for c in claims if f"seed {refuted} at" in c]
    if loss == torch.inf:
        expected.append("BatchNorm: no run diverges")
    assert failed(claims) == expected and len(expected) >= 4


def test_each_warmup_claim_can_fail():
    learned = torch.full((200,), 0.3)  # learned from the start to the end
    at_chance = torch.full((200,), training.TINY_CHANCE)
    relapsed = torch.cat([learned[:100], at_chance[100:]])  # learned, then back at chance
    good = {(False, 0): at_chance, (False, 66): learned, (True, 0): learned, (True, 66): learned}
    assert failed(training.warmup_claims(good)) == []
    for run, losses, refuted in [
            ((False, 0), learned, ["Post-LN without warm-up fails (ends near chance)"]),
            ((False, 66), at_chance, ["Post-LN with the warm-up learns (its loss falls below "
                                      "half of chance's)", "Post-LN with the warm-up ends "
                                      "away from chance"]),
            ((False, 66), relapsed, ["Post-LN with the warm-up ends away from chance"]),
            ((True, 0), at_chance, ["Pre-LN learns with and without it"]),
            ((True, 66), relapsed, ["Pre-LN learns with and without it"])]:
        assert failed(training.warmup_claims({**good, run: losses})) == refuted, run


def test_each_edge_claim_can_fail():
    inf = torch.inf
    chaotic = torch.tensor([[0.01, 0.01, 0.01], [0.5, 0.02, inf], [1.39, inf, inf]])
    good = torch.stack([chaotic, chaotic * torch.tensor([[1.0], [20.0], [1.0]])])
    assert failed(training.edge_claims(good)) == []
    calm = good.clone()
    calm[:, 1] = 0.05  # at lr 1 every jitter ends where the plain run ended
    assert failed(training.edge_claims(calm)) == [
        "lr 1: the jitter changes a seed's final loss more than tenfold"]
    for lr, value, refuted in [(0, 0.9, "lr 0.3: every run learns"),
                               (2, 0.3, "lr 3: every run fails")]:
        wrong = good.clone()
        wrong[1, lr, 0] = value
        assert failed(training.edge_claims(wrong)) == [refuted]


def test_outcome_thresholds():
    chance = training.CHANCE
    assert [training.outcome(v, chance) for v in (0.0, 0.69, 0.7, 1.24, 1.25, torch.inf)] == \
        ["learns", "learns", "between", "between", "fails", "fails"]


def test_a_jitter_changes_every_weight_by_about_a_millionth():
    weights = [torch.ones(100, 100), torch.full((1000,), 2.0, dtype=torch.float64)]
    training.jitter_(weights, None)
    assert all((w == w.flatten()[0]).all() for w in weights)  # None: untouched
    training.jitter_(weights, 0)
    change = (weights[1] / 2 - 1).abs()  # float64: the jitter itself, 1e-6 * |noise|
    assert 0.5e-6 < change.mean() < 1e-6 and change.max() < 5e-6
    assert weights[0].dtype == torch.float32 and (weights[0] != 1).float().mean() > 0.9
