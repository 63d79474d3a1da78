"""Unit 8's conditioning section (normkit/conditioning.py): the two texts and their windows;
adaLN-Zero's block is its formula and, at init, exactly the identity (several seeds, shapes,
both conditions, jittered too) with every modulation zero; the model's shapes, its
refusal of a bad condition, its causal mask; each claim can fail; and the training claims
hold, perturbed (normkit.training's jitter), in tests/test_machines.py's configurations
(COURSE_CONFIGURATION set: torch's generic kernels).

The runs use Settings.light() (conftest.py sets NORMLIB_LIGHT=1), what nbval runs; the
notebook's Settings() were measured the same way (claims' docstring gives the values)."""

import dataclasses
import math
import os
import re

import pytest
import torch
import torch.nn.functional as F

from normkit import conditioning as C
from normkit.language_model import Corpus, text_windows
from normkit.training import jitter_
from tests.conftest import failed

TEXTS = C.Texts.load()
SMALL = C.Settings(d_model=16, num_layers=2, nhead=4, context=8, batch=4, steps=3, length=20)
VOCAB = len(TEXTS.chars)


def model_of(seed=0, s=SMALL):
    torch.manual_seed(seed)
    return C.ConditionalLM(VOCAB, s)


def test_the_settings_here_are_the_light_ones():
    assert C.settings() == C.Settings.light() != C.Settings()
    assert C.Settings.light().lrs == C.Settings().lrs == (3e-3,)


# Perturbed, on another CPU configuration: defined where tests/test_machines.py runs it
# (COURSE_CONFIGURATION set), as the run costs seconds; the unperturbed run is the
# notebook's, which nbval runs on this machine and which asserts the same claims.
if os.environ.get("COURSE_CONFIGURATION"):
    @pytest.mark.parametrize("jitter", (1,), ids=("jitter1",))
    def test_the_claims_hold(jitter):
        run = C.train(C.settings(), TEXTS, jitter=jitter)
        values = (run.val_loss, run.swapped_loss, [C.upper_fraction(t) for t in run.samples],
                  C.gates(run.model).abs().mean(dim=-1).min().item())
        assert failed(C.claims(run, TEXTS)) == [], values
        assert failed(C.init_claims(C.ConditionalLM(VOCAB, C.settings()))) == []


# The two texts ----------------------------------------------------------------------------


def test_the_texts_are_the_play_and_the_play_upper_cased_over_one_vocabulary():
    play = Corpus.load()
    assert TEXTS.train.shape[0] == TEXTS.val.shape[0] == 2
    assert TEXTS.train.shape[1] == len(play.train) and TEXTS.val.shape[1] == len(play.val)
    assert TEXTS.decode(TEXTS.train[0].tolist()) == play.decode(play.train.tolist())
    assert TEXTS.decode(TEXTS.val[1].tolist()) == play.decode(play.val.tolist()).upper()
    assert set(TEXTS.chars) == set(play.chars) | set(play.chars.upper())
    assert 3 < TEXTS.unigram_loss() < math.log(VOCAB)


def test_each_window_comes_from_its_conditions_text():
    starts, conds = torch.tensor([0, 5, 100, 7]), torch.tensor([0, 1, 1, 0])
    x, y = C.windows(TEXTS.train, 8, starts, conds)
    assert x.shape == y.shape == (4, 8)
    for i in range(4):
        xi, yi = text_windows(TEXTS.train[conds[i]], 8, starts[i:i + 1])
        assert torch.equal(x[i], xi[0]) and torch.equal(y[i], yi[0])


# adaLN-Zero -------------------------------------------------------------------------------


@pytest.mark.parametrize("seed, shape", [(0, (1, 1)), (1, (3, 8)), (2, (5, 4)), (3, (2, 7))])
def test_every_block_is_exactly_the_identity_at_init(seed, shape):
    model = model_of(seed)
    jitter_(model.parameters(), seed)  # (the zeros stay zero)
    x = 10 * torch.randn(*shape, SMALL.d_model)
    for k in range(2):
        c = model.condition(torch.full(shape[:1], k))  # (N, E)
        for block in model.blocks:
            assert torch.equal(block(x, c), x)
    assert failed(C.init_claims(model, shape, seed)) == []
    tokens = torch.randint(0, VOCAB, shape)
    assert torch.equal(model(tokens, torch.zeros(shape[0], dtype=torch.int64)),
                       model(tokens, torch.ones(shape[0], dtype=torch.int64)))


def test_every_modulation_starts_at_zero_and_the_norms_have_no_affine():
    model = model_of()
    linears = [b.modulation[1] for b in model.blocks] + [model.final_modulation[1]]
    assert [lin.out_features for lin in linears] == [6 * 16, 6 * 16, 2 * 16]
    for lin in linears:
        assert not lin.weight.any() and not lin.bias.any()
    norms = [m for m in model.modules() if isinstance(m, torch.nn.LayerNorm)]
    assert len(norms) == 2 * SMALL.num_layers + 1
    assert all(n.weight is None and n.bias is None and n.eps == C.EPS for n in norms)
    assert not C.gates(model).any()


def test_the_block_is_adaln_zeros_formula():
    """Modulations of random values: x + gate * F(LayerNorm(x) * (1 + scale) + shift) for
    the attention, then for the MLP, each (shift, scale, gate) per sequence."""
    torch.manual_seed(0)
    block = C.AdaLNBlock(16, 4).double()
    with torch.no_grad():
        block.modulation[1].weight.normal_()
        block.modulation[1].bias.normal_()
    x, c = torch.randn(3, 5, 16, dtype=torch.float64), torch.randn(3, 16, dtype=torch.float64)
    shift_a, scale_a, gate_a, shift_m, scale_m, gate_m = \
        (v[:, None] for v in block.modulation[1](F.silu(c)).split(16, dim=-1))
    ln = lambda v: F.layer_norm(v, (16,), eps=C.EPS)  # noqa: E731
    h = x + gate_a * block.attn(ln(x) * (1 + scale_a) + shift_a)
    expected = h + gate_m * block.mlp(ln(h) * (1 + scale_m) + shift_m)
    assert torch.allclose(block(x, c), expected, rtol=1e-12, atol=1e-12)
    assert not torch.allclose(block(x, c), x)


@pytest.mark.parametrize("shape, message", [
    ((16,), r"c must be \(N, E\) = \(3, 16\).*got shape \(16,\)"),  # one for all
    ((3, 5, 16), r"got shape \(3, 5, 16\)"),  # one per token: broadcasts where N == T
    ((5, 16), r"got shape \(5, 16\)"), ((3, 8), r"got shape \(3, 8\)")])
def test_the_block_refuses_a_condition_that_is_not_one_per_sequence(shape, message):
    block = C.AdaLNBlock(16, 4)
    with pytest.raises(ValueError, match=message):
        block(torch.zeros(3, 5, 16), torch.zeros(shape))
    with pytest.raises(ValueError, match=r"x must be \(N, T, 16\), got shape \(3, 16\)"):
        block(torch.zeros(3, 16), torch.zeros(3, 16))


def test_the_model_takes_the_blocks_class():
    """ConditionalLM(..., block=cls) builds its blocks from cls (the notebook passes the
    student's AdaLNZeroBlock); by default the reference's."""
    class Counted(C.AdaLNBlock):
        built = 0

        def __init__(self, d_model, nhead):
            super().__init__(d_model, nhead)
            Counted.built += 1

    torch.manual_seed(0)
    model = C.ConditionalLM(VOCAB, SMALL, block=Counted)
    assert Counted.built == SMALL.num_layers
    assert all(type(b) is Counted for b in model.blocks)
    assert all(type(b) is C.AdaLNBlock for b in model_of().blocks)
    assert failed(C.init_claims(model, shape=(2, 8))) == []


def test_the_model_maps_tokens_and_a_condition_to_logits():
    model = model_of()
    logits = model(torch.randint(0, VOCAB, (3, 8)), torch.tensor([0, 1, 1]))
    assert logits.shape == (3, 8, VOCAB) and logits.dtype == torch.float32
    assert C.gates(model).shape == (2, SMALL.num_layers, 2, SMALL.d_model)
    assert C.gates(model).dtype == torch.float64


def test_the_model_is_causal_and_the_condition_reaches_it_once_trained():
    model = model_of().double()
    with torch.no_grad():
        for p in model.parameters():
            if not p.any():
                p.normal_(0, 0.3)
    a = torch.randint(0, VOCAB, (1, 8))
    b = a.clone()
    b[0, 5:] = (b[0, 5:] + 1) % VOCAB
    zero = torch.zeros(1, dtype=torch.int64)
    assert torch.equal(model(a, zero)[0, :5], model(b, zero)[0, :5])
    assert not torch.allclose(model(a, zero), model(a, 1 - zero))
    assert failed(C.init_claims(model.float())) == [
        "every block returns its input exactly, under either condition",
        "the logits are the same under both conditions"]


@pytest.mark.parametrize("condition, message", [
    (torch.tensor([0, 2]), r"range\(2\), got values 0 to 2"),
    (torch.tensor([-1, 0]), r"range\(2\), got values -1 to 0"),
    (torch.tensor([[0], [1]]), r"shape \(2,\).*got shape \(2, 1\)"),
    (torch.tensor([0, 1, 1]), r"shape \(2,\).*got shape \(3,\)"),
    (torch.tensor([0.0, 1.0]), r"int64.*got shape \(2,\), torch.float32"),
    (1, r"condition must be an int64 tensor.*got int"),
])
def test_a_bad_condition_is_refused_with_what_was_expected(condition, message):
    with pytest.raises(ValueError, match="condition must be") as error:
        model_of()(torch.zeros(2, 8, dtype=torch.int64), condition)
    assert error.match(message)


@pytest.mark.parametrize("shape", [(8,), (1, 9), (1, 2, 3)])
def test_tokens_of_the_wrong_shape_are_refused(shape):
    expected = f"tokens must be (N, T) with T at most the context, 8, got shape {shape}"
    with pytest.raises(ValueError, match=re.escape(expected)):
        model_of()(torch.zeros(shape, dtype=torch.int64), torch.tensor([0]))


# Training and sampling --------------------------------------------------------------------


def test_train_is_reproducible_and_the_jitter_moves_it():
    run = C.train(SMALL, TEXTS)
    assert run.losses.shape == (SMALL.steps,) and run.losses.dtype == torch.float64
    assert math.isfinite(run.val_loss) and math.isfinite(run.swapped_loss)
    assert [len(t) for t in run.samples] == [len(SMALL.prompt) + SMALL.length] * 2
    assert all(t.startswith(SMALL.prompt) for t in run.samples)
    assert torch.equal(C.train(SMALL, TEXTS).losses, run.losses)
    assert not torch.equal(C.train(SMALL, TEXTS, jitter=0).losses, run.losses)
    assert C.gates(run.model).abs().min() > 0  # (one Adam step moves every gate)


def test_validation_loss_swaps_the_conditions_and_is_condition_free_at_init():
    model = model_of()
    assert C.validation_loss(model, TEXTS, SMALL) == C.validation_loss(model, TEXTS, SMALL,
                                                                       swap=True)


def test_a_sample_at_init_depends_on_the_seed_not_on_the_condition():
    model = model_of()
    draw = lambda cond, seed=0: C.sample(model, TEXTS, "ab", 30, cond, seed)  # noqa: E731
    assert draw(0) == draw(1) == draw(0) and draw(0, seed=1) != draw(0)


def test_upper_fraction_counts_letters_only():
    assert C.upper_fraction("AB c, d!\n") == 0.5 and math.isnan(C.upper_fraction(":\n"))


# Each claim can fail ---------------------------------------------------------------------


def fake_run(val=2.6, swapped=6.0, samples=("\nHe said, So\n", "\nHE SAID, SO\n"), gate=0.3):
    """A run where every claim holds by default: a model whose every gate is `gate`."""
    model = model_of(s=dataclasses.replace(SMALL, num_layers=3))
    with torch.no_grad():
        for block in model.blocks:
            block.modulation[1].bias[2 * 16:3 * 16] = gate
            block.modulation[1].bias[5 * 16:] = gate
    return C.Run(None, val, swapped, samples, model)


@pytest.mark.parametrize("changed, refuted", [
    ({}, []),
    ({"val": 3.4, "swapped": 4.5}, ["learns"]),
    ({"swapped": 3.5}, ["condition is used"]),
    ({"samples": ("\nHE SAID, so\n", "\nHE SAID, SO\n")}, ["samples follow"]),
    ({"samples": ("\nHe said, So\n", "\nHe said, SO\n")}, ["samples follow"]),
    ({"gate": 0.04}, ["gate has grown"]),
])
def test_each_claim_can_fail(changed, refuted):
    found = failed(C.claims(fake_run(**changed), TEXTS))
    assert len(found) == len(refuted) and all(r in f for r, f in zip(refuted, found)), found


def test_one_closed_gate_refutes_the_gate_claim():
    run = fake_run()
    with torch.no_grad():
        run.model.blocks[2].modulation[1].bias[5 * 16:] = 0.0
    found = failed(C.claims(run, TEXTS))
    assert len(found) == 1 and "gate has grown" in found[0], found


def test_each_init_claim_can_fail_alone():
    model = model_of()
    with torch.no_grad():
        model.final_modulation[1].weight.normal_()
    found = failed(C.init_claims(model))
    assert found == ["the logits are the same under both conditions"]
