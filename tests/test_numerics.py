"""Units 6 and 7's NumPy references: Welford and its merge against float64, the 16-bit norms
against float64 and torch's own 16-bit results, the fast LayerNorm against the naive one on a grid
of shapes, and the benchmark's table (its layout, never its times)."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import normlib.layer_norm_fast as fast
from normkit import benchmark
from normkit.testing import (
    assert_close,
    exact_welford_state,
    guard_inputs,
    peak_memory,
    randn_tensor,
)
from normlib.layer_norm import layer_norm_backward, layer_norm_forward
from normlib.mixed_precision import layer_norm_mixed, rms_norm_mixed
from normlib.variance import var_one_pass, var_two_pass, var_welford, welford, welford_merge
from tests.conftest import exercise

# Welford -------------------------------------------------------------------------------------


@exercise("6.1", "6.2")
@pytest.mark.parametrize("block", [None, 1, 7, 64, 1000])
def test_welford_and_its_merge_tree_equal_float64(block):
    x = np.random.default_rng(0).standard_normal((3, 4, 1000)) * 2 + 3  # (*B, N) float64
    exact = x.var(axis=-1)
    var = var_welford(x, block)
    assert var.shape == (3, 4) and var.dtype == np.float64
    np.testing.assert_allclose(var, exact, rtol=1e-12)  # float64: ~1e-15 expected


@exercise("6.1")
def test_float32_at_offset_1e4_welford_stays_accurate_where_one_pass_fails():
    x = (1e4 + np.random.default_rng(1).standard_normal((16, 1024))).astype(np.float32)
    exact = var_two_pass(x.astype(np.float64))

    def error(var):
        assert var.dtype == np.float32  # computed in float32, not silently in float64
        return np.max(np.abs(var - exact) / exact)

    assert error(var_one_pass(x)) > 1.0  # the course's claim: meaningless at 1e4
    assert error(var_two_pass(x)) < 1e-5
    assert error(var_welford(x)) < 2e-3  # measured ~5e-4
    assert error(var_welford(x, block=64)) < error(var_welford(x))  # merged blocks: better


@exercise("6.2")
def test_merge_of_uneven_parts_in_any_order_is_the_whole():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((5, 30)) + np.linspace(-4, 4, 30)  # the parts' means differ
    a, b, c = (exact_welford_state(p) for p in (x[:, :3], x[:, 3:20], x[:, 20:]))
    whole = exact_welford_state(x)
    for merged in (welford_merge(welford_merge(a, b), c), welford_merge(a, welford_merge(b, c)),
                   welford_merge(c, welford_merge(b, a))):
        assert merged[0] == 30
        np.testing.assert_allclose(merged[1], whole[1], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(merged[2], whole[2], rtol=1e-12)
    empty = (0, np.zeros(5), np.zeros(5))
    assert welford_merge(empty, a)[0] == 3
    np.testing.assert_allclose(welford_merge(empty, a)[2], a[2], rtol=1e-15)


@exercise("6.1")
def test_welford_keeps_float32():
    count, mean, m2 = welford(np.ones((2, 3), np.float32))
    assert (count, mean.dtype, m2.dtype, mean.shape) == (3, np.float32, np.float32, (2,))


# 16 bits ---------------------------------------------------------------------------------------

DTYPES16 = [torch.float16, torch.bfloat16]


def ulps(y, exact):
    """max |y - exact| / max(1, |exact|), in units of eps of y's dtype."""
    return ((y.double() - exact).abs() / exact.abs().clamp_min(1)).max().item() \
        / torch.finfo(y.dtype).eps


@exercise("6.3")
@pytest.mark.parametrize("dtype", DTYPES16)
@pytest.mark.parametrize("scale,offset,h", [(1, 0, 64), (300, 0, 256), (3, 20, 4096),
                                            (1, 100, 512)])
def test_mixed_layer_norm_is_float64_rounded_once(dtype, scale, offset, h):
    x = randn_tensor(dtype, 4, h, scale=scale, offset=offset)
    w, b = randn_tensor(dtype, h, seed=1), randn_tensor(dtype, h, seed=2)
    exact = F.layer_norm(x.double(), (h,), w.double(), b.double())
    y = layer_norm_mixed(x, (h,), w, b)
    assert y.dtype == dtype and y.shape == x.shape and bool(y.isfinite().all())
    assert ulps(y, exact) <= 0.5 + 1e-3  # rounding once is half a unit: nothing is lost
    # and it is torch's own 16-bit result, but where float32 lands near a rounding boundary
    theirs = F.layer_norm(x, (h,), w, b)
    assert (y == theirs).double().mean().item() > 0.95
    assert ulps(y, theirs.double()) <= 1.0


@exercise("6.4")
@pytest.mark.parametrize("dtype", DTYPES16)
def test_mixed_rms_norm_matches_float64_and_torch(dtype):
    for scale, h in [(1, 64), (300, 256), (1e-2, 64)]:
        x, w = randn_tensor(dtype, 4, h, scale=scale), randn_tensor(dtype, h, seed=1)
        exact = F.rms_norm(x.double(), (h,), w.double(), eps=torch.finfo(torch.float32).eps)
        y = rms_norm_mixed(x, (h,), w)
        assert y.dtype == dtype and bool(y.isfinite().all())
        assert ulps(y, exact) <= 0.5 + 1e-3
        # torch multiplies by the weight after rounding to 16 bits: up to one more rounding
        assert ulps(y, F.rms_norm(x, (h,), w).double()) <= 1.0 + 1e-3


@exercise("6.3", "6.4")
def test_computing_in_float16_overflows_where_mixed_does_not():
    x = randn_tensor(torch.float16, 2, 256, scale=300)
    assert bool((x * x).isinf().any())  # the overflow the unit is about
    assert bool(layer_norm_mixed(x, (256,)).isfinite().all())
    assert bool(rms_norm_mixed(x, (256,)).isfinite().all())


# the fast LayerNorm -----------------------------------------------------------------------------

SHAPES = [((1, 1), (1,)), ((3, 5), (5,)), ((2, 3, 4), (3, 4)), ((0, 8), (8,)), ((7,), (7,)),
          ((1031, 300), (300,)), ((64, 1024), (1024,)), ((4, 3, 50), (3, 50))]


@exercise("7.1", "7.2")
@pytest.mark.parametrize("block_bytes", [64, 4096, fast.BLOCK_BYTES])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,normalized_shape", SHAPES)
def test_fast_kernels_equal_the_naive_ones(monkeypatch, shape, normalized_shape, dtype,
                                           block_bytes):
    """Blocks of one row (64 bytes), of a few rows, and the default, with and without the
    affine parameters: the naive kernels' results in value, shape and dtype; no input
    written."""
    monkeypatch.setattr(fast, "BLOCK_BYTES", block_bytes)
    rng = np.random.default_rng(len(shape) + shape[-1])
    x, dy = (rng.standard_normal(shape).astype(dtype) + 1 for _ in range(2))
    w, b = (rng.standard_normal(normalized_shape).astype(dtype) for _ in range(2))
    for weight, bias in [(w, b), (None, None), (w, None)]:
        untouched = guard_inputs(x=x, dy=dy, weight=weight, bias=bias)
        expected = layer_norm_forward(x, normalized_shape, weight, bias)
        result = fast.layer_norm_forward_fast(x, normalized_shape, weight, bias)
        for name, a, e in zip(("y", "mean", "rstd"), result, expected):
            assert_close(a, e, name)
        grads = layer_norm_backward(dy, x, normalized_shape, *expected[1:], weight, bias)
        fast_grads = fast.layer_norm_backward_fast(dy, x, normalized_shape, *result[1:],
                                                   weight, bias)
        for name, a, e in zip(("dx", "dweight", "dbias"), fast_grads, grads):
            if e is None:
                assert a is None, name
            else:  # dweight and dbias: sums over up to 1031 rows, in another order
                assert_close(a, e, name, atol=1e-5 * max(1.0, float(np.abs(e).max(initial=0)))
                             if dtype == np.float32 else None)
        untouched(f"for {shape} {dtype.__name__}")


@exercise("7.1", "7.2")
def test_fast_kernels_allocate_no_full_size_temporary():
    rng = np.random.default_rng(0)
    x, dy = (rng.standard_normal((2048, 1024)).astype(np.float32) for _ in range(2))
    w, b = (rng.standard_normal(1024).astype(np.float32) for _ in range(2))
    (_, mean, rstd), fast_forward = peak_memory(fast.layer_norm_forward_fast, x, (1024,), w, b)
    _, fast_backward = peak_memory(fast.layer_norm_backward_fast, dy, x, (1024,), mean, rstd,
                                   w, b)
    _, naive_forward = peak_memory(layer_norm_forward, x, (1024,), w, b)
    _, naive_backward = peak_memory(layer_norm_backward, dy, x, (1024,), mean, rstd, w, b)
    one_block = fast.BLOCK_BYTES + 2**16
    assert x.nbytes <= fast_forward <= x.nbytes + one_block  # y, and a little
    assert x.nbytes <= fast_backward <= x.nbytes + 2 * one_block  # dx, x_hat's block
    assert naive_forward >= 2 * x.nbytes and naive_backward >= 3 * x.nbytes


# the benchmark (its layout; its times are never asserted) -----------------------------------


def test_benchmark_table_has_every_kernel_ratio_and_bandwidth(capsys):
    benchmark.main(["--sizes", "16", "32", "--rows", "8", "--rounds", "1"])
    out, rms_out = capsys.readouterr().out.split("RMSNorm against LayerNorm")
    assert "float32" in out and "threads" in out and "memory copy:" in out
    rows = [line.split() for line in out.splitlines() if line.strip()[:2] in ("16", "32")]
    assert [(r[0], r[1], r[2]) for r in rows] == [
        (h, p, k) for h in ("16", "32") for p in ("forward", "forward+backward")
        for k in ("naive", "fast", "compiled", "torch")]
    for r in rows:  # median ms, ratio to torch (torch's own is 1.00), MB, GB/s, of copy
        assert float(r[3]) > 0 and float(r[6]) >= 0 and r[7].endswith("%")
        # torch's own ratio is 1.00; another kernel's is positive (it may tie torch's)
        assert r[4] == "1.00" if r[2] == "torch" else float(r[4]) > 0
        h, passes = int(r[0]), 2 if r[1] == "forward" else 5  # |x| = 8 rows * h * 4 bytes
        assert float(r[5]) == round(passes * 8 * h * 4 / 1e6, 1)
    assert "not timed" not in out
    # then RMSNorm against LayerNorm: both times, and their ratio, per implementation
    rms_out, add_out = rms_out.split("the residual add and RMSNorm")
    rows = [line.split() for line in rms_out.splitlines() if line.strip()[:2] in ("16", "32")]
    assert [(r[0], r[1], r[2]) for r in rows] == [
        (h, p, k) for h in ("16", "32") for k in ("naive", "torch")
        for p in ("forward", "forward+backward")]
    for r in rows:  # RMSNorm ms, LayerNorm ms (to 1 us), their ratio (to 0.01)
        rms, layer, ratio = float(r[3]), float(r[4]), float(r[5])
        assert ratio > 0 and abs(rms - ratio * layer) <= 0.0005 * (1 + ratio) + 0.005 * layer
    # last the fused add and RMSNorm (9.5, the reference's here) against torch's two steps:
    # each median, its ratio to the two steps' (theirs 1.00), and the bytes of 4 or 5 passes
    rows = [line.split() for line in add_out.splitlines() if line.strip()[:2] in ("16", "32")]
    names = [n.split() for n in benchmark.ADD_NORM]
    assert [r[:1 + len(n)] for r, n in zip(rows, names * 2)] == [
        [h, *n] for h in ("16", "32") for n in names]
    for r, name in zip(rows, benchmark.ADD_NORM * 2):
        ms, ratio, mb = (float(v) for v in r[-4:-1])
        assert ms > 0 and ratio > 0 and (ratio == 1.0) == (name == "torch, two steps")
        assert mb == round(benchmark.ADD_NORM_TRAFFIC[name] * 8 * int(r[0]) * 4 / 1e6, 1)
    assert "not timed: yours" not in add_out


def test_rms_comparison_leaves_out_a_pair_not_implemented(monkeypatch):
    def stub(*args, **kwargs):
        raise NotImplementedError("Exercise 3.7: implement rms_norm_backward")

    monkeypatch.setattr(benchmark.rms_norm, "rms_norm_backward", stub)
    results = benchmark.rms_versus_layer_norm(sizes=(16,), rows=4, rounds=1)
    assert [(r["implementation"], r["pass"]) for r in results] == [
        ("naive", "forward"), ("torch", "forward"), ("torch", "forward+backward")]


def test_benchmark_leaves_out_kernels_not_implemented(monkeypatch, capsys):
    def stub(*args, **kwargs):
        raise NotImplementedError("Exercise 7.1: implement layer_norm_forward_fast")

    monkeypatch.setattr(fast, "layer_norm_forward_fast", stub)
    benchmark.main(["--sizes", "16", "--rows", "4", "--rounds", "1"])
    out = capsys.readouterr().out
    assert "not timed: the fast forward (its exercise" in out
    assert "not timed: the fast forward+backward" in out
    assert " fast " not in out.split("not timed")[0]


def test_fused_table_runs_on_the_cpu_without_compiling():
    """The GPU section's harness (the copy bandwidth, the timer, the equality check, the
    table), on the CPU with the unfused operations: torch.compile takes ~20 s here."""
    text = benchmark.fused_table("cpu", sizes=(64,), rows=32, compile=False)
    lines = text.splitlines()
    assert lines[0].startswith("cpu: copy") and "32 rows, float32" in lines[0]
    assert [line.split()[1] for line in lines[2:]] == ["eager", "F.layer_norm"]


@pytest.mark.parametrize("seed", range(8))
def test_the_means_rounding_reaches_the_variance_at_second_order(seed):
    """Q6.1's model answer: in float32 at an offset of 1e5, the two-pass variance's relative
    error is (delta / sigma)^2, delta the float32 mean's error, to within the sums' own
    roundings (float32's u times a few): second order, far below the first-order
    |delta| / sigma."""
    rng = np.random.default_rng(seed)
    x = (1e5 + rng.standard_normal(4096)).astype(np.float32)  # (N,)
    exact = x.astype(np.float64)  # the same numbers, exactly
    var = ((exact - exact.mean()) ** 2).mean()
    mean32 = x.mean(dtype=np.float32)
    var32 = ((x - mean32) ** 2).mean(dtype=np.float32)
    delta = float(mean32) - exact.mean()
    error = abs(float(var32) - var) / var
    second = delta * delta / var
    assert abs(error - second) <= 0.2 * second + 16 * np.finfo(np.float32).eps, (error, second)
    assert error <= 0.05 * abs(delta) / np.sqrt(var) + 16 * np.finfo(np.float32).eps


def test_a_constant_group_without_eps_is_nan_or_all_minus_one_in_float32():
    """Q1.1's model answer: without eps a constant group gives 0/0 (NaN), or in float32,
    where the mean's rounding leaves deviations of a few ulps, noise blown up to unit
    variance (all -1 here)."""
    x = np.full((1, 7), 0.1, np.float32)  # (1, 7)
    mean = x.mean(-1, keepdims=True)  # (1, 1), rounded: 0.10000001
    var = ((x - mean) ** 2).mean(-1, keepdims=True)  # (1, 1), tiny but not 0
    assert var[0, 0] > 0 and np.all((x - mean) / np.sqrt(var) == -1)
    ones = np.ones((1, 8), np.float32)  # a mean without rounding: 0/0
    with np.errstate(invalid="ignore"):
        assert np.all(np.isnan((ones - ones.mean()) / np.sqrt(((ones - ones.mean()) ** 2).mean())))
