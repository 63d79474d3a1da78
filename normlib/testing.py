"""What the exercise checks compare against: torch's results as NumPy arrays, and one
assert_close with the course's tolerances (not an exercise; at grading time the
autograder uses the course's own copy of this file, not the student's).
"""

import contextlib
import tracemalloc

import numpy as np
import torch

# (rtol, atol) by dtype, for results of order 1 (normalized values, gradients under
# unit-scale upstream gradients); a case with a larger scale passes its own.
# float32: sums over up to a few hundred elements in any order (NumPy's pairwise sum,
#   torch's Welford, float64 accumulation, a plain loop), 1/np.sqrt or rsqrt, differ
#   from torch by at most ~1e-6 relative; 1e-5 leaves a 10x margin. A sequential float32
#   sum over 4096 elements errs by ~3e-6, so the checks' long-row cases pass 1e-4.
#   Every mistake the checks look for is off by more than 1e-3 on some case.
#   tests/test_graders.py shows both: correct variants pass at a tenth of these
#   tolerances, each mistake fails at ten times them.
# float64: correct implementations agree to ~1e-13; 1e-9 also rejects a float64 input
#   computed in float32 (errors ~1e-7).
TOLERANCES = {
    np.dtype(np.float32): {"rtol": 1e-5, "atol": 1e-5},
    np.dtype(np.float64): {"rtol": 1e-9, "atol": 1e-9},
}


def assert_close(actual, expected, name, rtol=None, atol=None):
    """Assert that actual is a NumPy array of exactly expected's shape and dtype, and
    equal to it within the tolerances of that dtype (or the rtol/atol given)."""
    if not isinstance(actual, np.ndarray):
        raise AssertionError(f"{name}: expected a numpy.ndarray, got {type(actual).__name__}")
    if actual.shape != expected.shape:
        raise AssertionError(f"{name}: expected shape {expected.shape}, got {actual.shape}")
    if actual.dtype != expected.dtype:
        raise AssertionError(f"{name}: expected dtype {expected.dtype}, got {actual.dtype}")
    tol = dict(TOLERANCES[expected.dtype])
    tol.update({k: v for k, v in (("rtol", rtol), ("atol", atol)) if v is not None})
    np.testing.assert_allclose(actual, expected, err_msg=name, **tol)


def _tensor(a, requires_grad=False):
    return None if a is None else torch.tensor(a, requires_grad=requires_grad)


def torch_layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """torch's LayerNorm forward as NumPy arrays: y (*B, *S) and the saved mean and
    rstd (*B, 1, .., 1), from torch.native_layer_norm."""
    y, mean, rstd = torch.native_layer_norm(
        _tensor(x), list(normalized_shape), _tensor(weight), _tensor(bias), eps
    )
    return y.numpy(), mean.numpy(), rstd.numpy()


def torch_layer_norm_backward(grad_output, x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """torch autograd's dx (*B, *S), dweight (*S) and dbias (*S) of LayerNorm, as NumPy
    arrays (None for an absent weight or bias)."""
    xt, wt, bt = _tensor(x, True), _tensor(weight, True), _tensor(bias, True)
    y = torch.nn.functional.layer_norm(xt, list(normalized_shape), wt, bt, eps)
    y.backward(torch.from_numpy(grad_output))
    return tuple(None if t is None else t.grad.numpy() for t in (xt, wt, bt))


def torch_normalize(x, axes, eps=1e-5):
    """torch's x_hat, mean, var (biased) and rstd of x over `axes` (kept as size 1), as
    NumPy arrays of x's dtype: what normlib.norm.normalize_forward returns."""
    t = torch.from_numpy(x)
    mean = t.mean(dim=axes, keepdim=True)
    var = t.var(dim=axes, unbiased=False, keepdim=True)
    rstd = torch.rsqrt(var + eps)
    return ((t - mean) * rstd).numpy(), mean.numpy(), var.numpy(), rstd.numpy()


def torch_grads(fn, grad_output, *arrays):
    """torch autograd's gradients of fn(*arrays) under the upstream gradient grad_output,
    one NumPy array per array given (None for a None argument)."""
    tensors = [_tensor(a, requires_grad=True) for a in arrays]
    fn(*tensors).backward(torch.from_numpy(grad_output))
    return tuple(None if t is None else t.grad.numpy() for t in tensors)


def guard_inputs(**arrays):
    """Remember the arrays given (name=array); the function returned asserts, after a
    kernel ran, that it wrote into none of them. Kernels must not modify their inputs:
    autograd hands them memory it still uses."""
    copies = {name: None if a is None else a.copy() for name, a in arrays.items()}

    def assert_untouched(case):
        for name, copy in copies.items():
            if copy is not None and not np.array_equal(arrays[name], copy, equal_nan=True):
                raise AssertionError(f"{name} was modified in place {case}: a kernel must "
                                     "not write into its inputs")

    return assert_untouched


@contextlib.contextmanager
def torch_norms():
    """Inside the block, normlib.transformer builds its norms with torch.nn.LayerNorm and
    torch.nn.RMSNorm instead of normlib.nn's: Unit 4's checks grade the Add & Norm wiring
    alone, whatever the state of Exercises 2.2, 3.6 and 3.7."""
    import normlib.transformer as transformer

    saved = transformer.LayerNorm, transformer.RMSNorm
    transformer.LayerNorm, transformer.RMSNorm = torch.nn.LayerNorm, torch.nn.RMSNorm
    try:
        yield
    finally:
        transformer.LayerNorm, transformer.RMSNorm = saved


def torch_tensor_close(actual, expected, name, scale_atol=False, **tol):
    """assert_close for torch tensors: actual must be a tensor of expected's shape and dtype.
    scale_atol: atol relative to max(1, max |expected|), for sums such as weight gradients
    (their rounding grows with their size)."""
    if not isinstance(actual, torch.Tensor):
        raise AssertionError(f"{name}: expected a torch.Tensor, got {type(actual).__name__}")
    expected = expected.detach().numpy()
    if scale_atol:
        base = tol.get("atol", TOLERANCES[expected.dtype]["atol"])
        tol["atol"] = base * max(1.0, float(np.abs(expected).max(initial=0.0)))
    assert_close(actual.detach().numpy(), expected, name, **tol)


def perturb_(module, seed, scale=0.5, weight_scale=0.0):
    """Add random offsets to module's parameters in place: `scale` on the vectors (norm
    weights away from 1, norm and linear biases away from 0, so that a misplaced, skipped
    or shared norm shows), `weight_scale` on the matrices. Returns module."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            s = scale if p.dim() == 1 else weight_scale
            p.add_(s * torch.randn(p.shape, generator=gen, dtype=p.dtype))
    return module


def assert_same_computation(ours, theirs, x, case="", seed=0, scale=1.0):
    """ours(x) and theirs(x) (modules or functions of one tensor) give the same output, input
    gradient and gradient of every parameter (same names) under a random upstream gradient,
    in value, shape and dtype: the course's tolerances times scale, atol relative to each
    result's size (a weight gradient is a sum over every position)."""
    results = []
    for module in (ours, theirs):
        input = x.detach().clone().requires_grad_()
        y = module(input)
        if not isinstance(y, torch.Tensor):
            raise AssertionError(f"output {case}: expected a torch.Tensor, got {type(y).__name__}")
        y.backward(torch.randn(y.shape, dtype=y.dtype,
                               generator=torch.Generator().manual_seed(seed)))
        params = sorted(module.named_parameters()) if isinstance(module, torch.nn.Module) else []
        results.append([("output", y), ("input.grad", input.grad)]
                       + [(f"{name}.grad", p.grad) for name, p in params])
    names = [[name for name, _ in r] for r in results]
    if names[0] != names[1]:
        raise AssertionError(f"parameters {case}: {names[0][2:]}, expected {names[1][2:]}")
    tol = {k: v * scale for k, v in TOLERANCES[x.detach().numpy().dtype].items()}
    for (name, actual), (_, expected) in zip(*results):
        if actual is None:
            raise AssertionError(f"{name} is None {case}: is every parameter used?")
        torch_tensor_close(actual, expected, f"{name} {case}", scale_atol=True, **tol)


def peak_memory(fn, *args):
    """Call fn(*args); return (its result, the peak of the memory it allocated meanwhile,
    in bytes, the result included). NumPy reports every array it allocates to Python's
    tracemalloc, so this counts arrays exactly, whatever the machine: a kernel's
    temporaries are a property of its code, not of a timing."""
    tracing = tracemalloc.is_tracing()
    if not tracing:
        tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        result = fn(*args)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        if not tracing:
            tracemalloc.stop()
    return result, peak


def exact_welford_state(x):
    """(N, mean, m2) of x's last axis as normlib.variance.welford returns them, computed in
    float64 by two passes and rounded to x's dtype: mean and m2 (*B,)."""
    x64 = x.astype(np.float64)  # (*B, N)
    mean = x64.mean(axis=-1)  # (*B,)
    m2 = ((x64 - mean[..., None]) ** 2).sum(axis=-1)  # (*B,)
    return x.shape[-1], mean.astype(x.dtype), m2.astype(x.dtype)


def randn_tensor(dtype, *shape, scale=1.0, offset=0.0, seed=0):
    """offset + scale * a standard normal sample (drawn in float64), rounded to dtype."""
    gen = torch.Generator().manual_seed(seed)
    return (offset + scale * torch.randn(shape, generator=gen, dtype=torch.float64)).to(dtype)


def check_mixed(norm, exact, x, normalized_shape, *params, ulps=2, **kwargs):
    """norm(x, normalized_shape, *params, **kwargs) is a tensor of x's shape and dtype, and
    close to exact(...) on the same numbers in float64: rtol = atol = ulps * eps, eps =
    torch.finfo(x.dtype).eps, so an error up to ulps * eps * (1 + |y|). Rounding the exact
    result to 16 bits once errs by at most eps * |y| / 2: 2 accepts every correct
    implementation."""
    expected = exact(x.double(), normalized_shape,
                     *(None if p is None else p.double() for p in params), **kwargs)
    y = norm(x, normalized_shape, *params, **kwargs)
    case = f"for x {tuple(x.shape)} {x.dtype}, normalized_shape={normalized_shape} {kwargs}"
    if not isinstance(y, torch.Tensor):
        raise AssertionError(f"{case}: expected a torch.Tensor, got {type(y).__name__}")
    if y.shape != x.shape or y.dtype != x.dtype:
        raise AssertionError(f"{case}: expected {tuple(x.shape)} {x.dtype}, got "
                             f"{tuple(y.shape)} {y.dtype}")
    tol = ulps * torch.finfo(x.dtype).eps
    assert_close(y.double().numpy(), expected.numpy(), f"y {case}", rtol=tol, atol=tol)
