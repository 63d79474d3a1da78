"""What the exercise checks compare against: exact references and the error model's tolerances.

The references (torch_layer_norm, ...) compute in float64 with torch and round to the input's
dtype, so that only the kernel's own rounding counts. assert_close's tolerance comes from one
error model: a result of `depth` chained stages, each reducing up to `length` terms, errs by

    bound = u * depth * (ROUNDINGS + LAMBDA * sqrt(length)) * cond

u is the unit roundoff of the dtype computed in (float64 results: sqrt(u32 * u64)), cond the
largest mean(|x|) * rstd of a group (condition()). A tolerance is MARGIN times the bound,
rtol = atol, atol in units of the result's largest magnitude; notebook 06, section 4, derives
each term. tests/test_graders.py holds it to both sides: correct code passes at a tenth of
it, every mistake fails at ten times it. Not an exercise: at grading the judge uses the
course's copy of this file, not the student's (docs/instructors.md, step 5).
"""

import collections
import contextlib
import copy
import math
import tracemalloc

import numpy as np
import torch

from normkit import diagnosis

ROUNDINGS = 8  # elementwise roundings of one stage
LAMBDA = 4  # a sum of n terms errs by up to LAMBDA * sqrt(n) roundings
MARGIN = 10  # a tolerance is MARGIN times the error bound
UNIT_ROUNDOFF = {  # u of the dtype a result is computed in (see the error model above)
    np.dtype(np.float32): 2.0**-24,
    np.dtype(np.float64): 2.0**-38.5,  # sqrt(2**-24 * 2**-53)
}


def _numpy_dtype(dtype):
    """NumPy's dtype for a NumPy or torch dtype."""
    if isinstance(dtype, torch.dtype):
        dtype = torch.empty((), dtype=dtype).numpy().dtype
    return np.dtype(dtype)


def tolerance(dtype, length=1, depth=1, cond=1.0):
    """{"rtol", "atol"} for a result of `dtype` computed by `depth` chained stages with
    reductions of up to `length` terms, inputs amplifying rounding by `cond`: MARGIN times
    the error model's bound (module docstring)."""
    u = UNIT_ROUNDOFF[_numpy_dtype(dtype)]
    bound = u * depth * (ROUNDINGS + LAMBDA * math.sqrt(length)) * max(1.0, cond)
    return {"rtol": MARGIN * bound, "atol": MARGIN * bound}


# The default of assert_close: one stage, reductions of up to 16 terms, cond 1
# (float32: 1.4e-5; float64: 6.2e-10).
TOLERANCES = {dtype: tolerance(dtype, length=16) for dtype in UNIT_ROUNDOFF}


def _group_axes(x, axes):
    """axes (an int or a sequence, negative ones counted from the end) as a tuple of
    non-negative ints."""
    return tuple(int(a) % x.ndim for a in np.atleast_1d(axes))


def condition(x, axes, eps=1e-5):
    """How much normalizing x (NumPy or torch) over `axes` amplifies one rounding: the
    largest mean(|x|) * rstd of a group, at least 1, computed in float64 (eps=None: the
    dtype's eps)."""
    x = x.detach().numpy() if isinstance(x, torch.Tensor) else x
    axes = _group_axes(x, axes)
    eps = np.finfo(x.dtype).eps if eps is None else eps
    x64 = x.astype(np.float64)  # (*x.shape)
    rstd = 1 / np.sqrt(x64.var(axis=axes) + eps)  # (groups)
    return float(np.max(np.abs(x64).mean(axis=axes) * rstd, initial=1.0))


def norm_tolerance(x, axes, eps=1e-5, depth=1, length=None, spread=False):
    """tolerance() for normalizing x (NumPy or torch) over `axes`, or for a result `depth`
    stages after it: length = the number of values in a group (or `length`, if a longer
    reduction follows), cond = condition(x, axes, eps). spread: for a sum of squared
    deviations (m2, the variance, rstd), from which the mean's rounding, the reduction's,
    cancels to first order (the deviations sum to 0): cond amplifies only the elementwise
    roundings, u * depth * (ROUNDINGS * cond + LAMBDA * sqrt(length))."""
    cond = condition(x, axes, eps)
    length = max(length or 1, math.prod(x.shape[a] for a in _group_axes(x, axes)))
    if spread:  # ROUNDINGS * cond + LAMBDA * sqrt(length), as a factor of the usual sum
        reduction = LAMBDA * math.sqrt(length)
        cond = (ROUNDINGS * cond + reduction) / (ROUNDINGS + reduction)
    return tolerance(x.dtype, length, depth, cond)


def layer_norm_tolerances(x, normalized_shape, eps=1e-5):
    """{"y", "mean", "rstd"}: the tolerances of LayerNorm's forward on x (*B, *S), S =
    normalized_shape (Exercises 1.1, 1.2, 7.1). The mean's from the row length alone;
    rstd's, a variance's, also from the condition of x (spread); y's one stage (scale and
    shift) after x_hat, which carries the mean's rounding times the condition."""
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    return {"y": norm_tolerance(x, axes, eps, depth=2),
            "mean": tolerance(x.dtype, math.prod(normalized_shape)),
            "rstd": norm_tolerance(x, axes, eps, spread=True)}


def layer_norm_backward_tolerances(x, normalized_shape, eps=1e-5):
    """{"dx", "dweight", "dbias"}: the tolerances of LayerNorm's backward on x (*B, *S)
    (Exercises 2.2, 7.2): two stages, forward and backward. dweight and dbias sum over the
    rows, so their length is the number of rows; dbias, the sum of grad_output, does not
    depend on x, so not on its condition either."""
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    rows = x.size // max(1, math.prod(normalized_shape))
    return {"dx": norm_tolerance(x, axes, eps, depth=2),
            "dweight": norm_tolerance(x, axes, eps, depth=2, length=rows),
            "dbias": tolerance(x.dtype, rows)}


def encoder_tolerance(x, num_layers, dim_feedforward, eps=1e-5):
    """tolerance() for num_layers transformer encoder layers on x (N, S, E), output and
    gradients: 9 stages a layer (2 norms; the attention's input projection, scores, softmax,
    weighted sum and output projection; 2 linear layers), forward and backward; reductions
    up to the longest of E, dim_feedforward and N * S (a weight gradient sums over every
    position); cond from normalizing x over E."""
    n, s, e = x.shape
    return norm_tolerance(x, (-1,), eps, depth=2 * 9 * num_layers,
                          length=max(e, dim_feedforward, n * s))


class CheckFailed(AssertionError):
    """A check's comparison failed: its message says which quantity, which case, the worst
    element, expected vs got, and the likely cause where the error has a known signature
    (normkit.diagnosis). The notebooks show it as that message alone, not a traceback."""


def assert_close(actual, expected, name, rtol=None, atol=None, over=None, mistakes=None,
                 reduced=None):
    """Assert that actual is a NumPy array of exactly expected's shape and dtype, and
    equal to it within rtol and atol (default: TOLERANCES of that dtype), atol in units of
    expected's largest magnitude (at least 1): an entry near 0 computed from larger terms,
    a difference or a sum of many, carries their rounding. A NaN passes only where expected
    holds one (torch's statistics of an empty input). Raises CheckFailed. over: the axes of
    one normalization group, to recognize errors with a pattern over a group; mistakes:
    {likely cause: what that mistake computes here} (normkit.diagnosis); reduced: for a
    result that reduces an input, (its shape, the axes reduced, what names them:
    "normalized_shape=(3, 4)"[, False where the result drops those axes]), so that a wrong
    shape says which axes it went over (diagnosis.axes_cause)."""
    if not isinstance(actual, np.ndarray):
        raise CheckFailed(f"{name}: expected a numpy.ndarray, got {type(actual).__name__}")
    if actual.shape != expected.shape:
        cause = (reduced and diagnosis.axes_cause(actual.shape, *reduced)) or \
            diagnosis.shape_cause(actual, expected)
        raise CheckFailed(f"{name}: expected shape {expected.shape}, got "
                          f"{diagnosis.shape_words(actual.shape, expected.shape)}"
                          + (f".\n  Likely cause: {cause}." if cause else
                             f".\n  Where: {diagnosis.shape_where(actual.shape, expected.shape)}."))
    if actual.dtype != expected.dtype:
        cause = diagnosis.dtype_cause(actual, expected)
        raise CheckFailed(f"{name}: expected dtype {expected.dtype}, got {actual.dtype}"
                          + (f".\n  Likely cause: {cause}." if cause else
                             f".\n  Where: {name}'s dtype: a result keeps its input's "
                             "precision; look for an array made or cast with another dtype."))
    tol = dict(TOLERANCES[expected.dtype])
    tol.update({k: v for k, v in (("rtol", rtol), ("atol", atol)) if v is not None})
    tol["atol"] *= max(1.0, float(np.abs(expected[np.isfinite(expected)]).max(initial=0.0)))
    message = diagnosis.mismatch(actual, expected, over=over, mistakes=mistakes, **tol)
    if message:
        raise CheckFailed(f"{name}: {message}")


def close(actual, expected, rtol, atol):
    """Whether actual equals expected within rtol and atol as assert_close reads them: atol in
    units of expected's largest finite magnitude (at least 1), NaN equal to NaN."""
    scale = max(1.0, float(np.abs(expected[np.isfinite(expected)]).max(initial=0.0)))
    return bool(np.allclose(actual, expected, rtol=rtol, atol=atol * scale, equal_nan=True))


def _exact(a, requires_grad=False):
    """a (NumPy) as a float64 tensor: the exact computation's input (None stays None)."""
    if a is None:
        return None
    return torch.tensor(a, dtype=torch.float64, requires_grad=requires_grad)


def _rounded(t, dtype):
    """A float64 tensor's values as a NumPy array of dtype (None stays None)."""
    return None if t is None else t.detach().numpy().astype(dtype)


def torch_layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """torch's LayerNorm forward, computed exactly (float64) and rounded to x's dtype: y
    (*B, *S) and the saved mean and rstd (*B, 1, .., 1), from torch.native_layer_norm."""
    y, mean, rstd = torch.native_layer_norm(
        _exact(x), list(normalized_shape), _exact(weight), _exact(bias), eps
    )
    return tuple(_rounded(t, x.dtype) for t in (y, mean, rstd))


def torch_layer_norm_backward(grad_output, x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """torch autograd's dx (*B, *S), dweight (*S) and dbias (*S) of LayerNorm, computed
    exactly (float64) and rounded to x's dtype (None for an absent weight or bias)."""
    xt, wt, bt = _exact(x, True), _exact(weight, True), _exact(bias, True)
    y = torch.nn.functional.layer_norm(xt, list(normalized_shape), wt, bt, eps)
    y.backward(_exact(grad_output))
    return tuple(None if t is None else _rounded(t.grad, x.dtype) for t in (xt, wt, bt))


def torch_layer_norm_nodes(grad_output, x, eps=1e-5, cut=None, ddof=0):
    """torch autograd's gradient at each node of notebook 02's LayerNorm graph (rows x
    (B, N), no weight or bias) under grad_output = dL/dx_hat: the `.grad` of each
    intermediate, computed exactly (float64) and rounded to x's dtype, in the order
    backprop reaches them: {"drstd", "dvar", "dxc", "dmu", "dx"} (Exercise 2.1). For the
    mistakes of a staged backward: cut="mean" or "variance" detaches that node (its path
    is missing; its own gradient is then 0); ddof=1 divides the variance by N - 1."""
    xt = _exact(x, requires_grad=True)  # (B, N)
    mu = xt.mean(dim=-1, keepdim=True)  # (B, 1)
    xc = xt - (mu.detach() if cut == "mean" else mu)  # (B, N)
    var = (xc * xc).sum(dim=-1, keepdim=True) / (x.shape[-1] - ddof)  # (B, 1)
    rstd = ((var.detach() if cut == "variance" else var) + eps) ** -0.5  # (B, 1)
    nodes = {"drstd": rstd, "dvar": var, "dxc": xc, "dmu": mu}
    for t in nodes.values():
        if t.requires_grad:  # (not a cut node's constant)
            t.retain_grad()
    (xc * rstd).backward(_exact(grad_output))
    return {name: _rounded(torch.zeros_like(t) if t.grad is None else t.grad, x.dtype)
            for name, t in {**nodes, "dx": xt}.items()}


def torch_layer_norm_jacobian(x, eps=1e-5):
    """torch.autograd.functional.jacobian of LayerNorm without weight or bias, row by row,
    over the last axis of x (NumPy or torch, (*B, N)), computed in float64: a float64
    tensor (*B, N, N) (Exercises 2.3 and 5.4)."""
    x = x.detach() if isinstance(x, torch.Tensor) else torch.from_numpy(np.asarray(x))
    n = x.shape[-1]
    rows = x.double().reshape(-1, n)  # (rows, N)
    layer_norm = lambda row: torch.nn.functional.layer_norm(row, (n,), eps=eps)  # noqa: E731
    J = torch.stack([torch.autograd.functional.jacobian(layer_norm, row) for row in rows])
    return J.reshape(*x.shape, n)  # (*B, N, N)


def x_hat_detached_variance(x, eps=1e-5):
    """x_hat over the last axis of the tensor x, with a bug: the variance is detached from
    the graph, so backward treats it as a constant (notebook 02, Exercise 2.4)."""
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True).detach()  # the bug
    return (x - mean) * torch.rsqrt(var + eps)


def x_hat_detached_mean(x, eps=1e-5):
    """x_hat over the last axis of the tensor x, with a bug: the mean is detached from the
    graph, so backward treats it as a constant (notebook 02, Exercise 2.4)."""
    mean = x.mean(dim=-1, keepdim=True).detach()  # the bug
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) * torch.rsqrt(var + eps)


def x_hat_correct(x, eps=1e-5):
    """x_hat over the last axis of the tensor x: torch's LayerNorm without weight or bias."""
    return torch.nn.functional.layer_norm(x, x.shape[-1:], eps=eps)


X_HAT = {"correct": x_hat_correct, "detached variance": x_hat_detached_variance,
         "detached mean": x_hat_detached_mean}  # Exercise 2.4's three implementations


def torch_normalize(x, axes, eps=1e-5):
    """x_hat, mean, var (biased) and rstd of x over `axes` (kept as size 1), computed
    exactly (float64) and rounded to x's dtype: what normlib.norm.normalize_forward
    returns."""
    t = _exact(x)
    mean = t.mean(dim=axes, keepdim=True)
    var = t.var(dim=axes, unbiased=False, keepdim=True)
    rstd = torch.rsqrt(var + eps)
    return tuple(_rounded(r, x.dtype) for r in ((t - mean) * rstd, mean, var, rstd))


def stats_mistakes(x, axes, eps=1e-5):
    """{quantity: {likely cause: what that mistake gives}} for normalizing x over `axes`:
    x_hat, var and rstd (kept as size 1) under Unit 1's classic mistakes, computed exactly
    (float64) and rounded to x's dtype: assert_close's `mistakes`, for errors that no
    signature of their own shows."""
    t = _exact(x)
    n = math.prod(x.shape[a] for a in _group_axes(x, axes))
    centred = t - t.mean(dim=axes, keepdim=True)  # (*x.shape)
    var = t.var(dim=axes, unbiased=False, keepdim=True)  # (groups, kept as 1)
    eps_on_std = ("eps is added to the std; torch's contract, which this course's kernels "
                  "follow, adds it to the variance, under the square root (Unit 1, section 1)")
    found = {"x_hat": {eps_on_std: centred / (var.sqrt() + eps)},
             "var": {}, "rstd": {eps_on_std: 1 / (var.sqrt() + eps),
                                 "this is the std, not its reciprocal": (var + eps).sqrt()}}
    if n > 1:
        unbiased = (f"the unbiased variance: dividing by N - 1 = {n - 1} (ddof=1, or torch's "
                    f"unbiased=True) where normalization divides by N = {n}, which leaves rstd "
                    f"off by the factor sqrt((N-1)/N) = {math.sqrt((n - 1) / n):.4g}")
        var_n1 = t.var(dim=axes, unbiased=True, keepdim=True)  # (groups, kept as 1)
        found["x_hat"][unbiased] = centred * torch.rsqrt(var_n1 + eps)
        found["var"][unbiased] = var_n1
        found["rstd"][unbiased] = torch.rsqrt(var_n1 + eps)
    return {q: {cause: _rounded(v, x.dtype) for cause, v in causes.items()}
            for q, causes in found.items()}


def backward_mistakes(grad_x_hat, x, axes, eps=1e-5):
    """{likely cause: the dx that mistake gives} for a normalization of x over `axes` whose
    output x_hat receives grad_x_hat (dL/dx_hat: dy times the weight), computed exactly
    (float64) and rounded to x's dtype: the compact backward without its mean term or
    without its variance term (assert_close's `mistakes` for dx)."""
    t, g = _exact(x), _exact(grad_x_hat)
    rstd = torch.rsqrt(t.var(dim=axes, unbiased=False, keepdim=True) + eps)  # (groups, 1s)
    x_hat = (t - t.mean(dim=axes, keepdim=True)) * rstd  # (*x.shape)
    g_mean = g.mean(dim=axes, keepdim=True)  # (groups, 1s): the mean's path
    gx_mean = (g * x_hat).mean(dim=axes, keepdim=True)  # (groups, 1s): the variance's
    found = {"the mean's term is missing (the path through the mean: minus the group's mean "
             "of the upstream gradient)": rstd * (g - x_hat * gx_mean),
             "the variance's term is missing (the path through the variance: minus x_hat "
             "times the group's mean of the upstream gradient times x_hat)":
                 rstd * (g - g_mean)}
    return {cause: _rounded(v, x.dtype) for cause, v in found.items()}


def torch_grads(fn, grad_output, *arrays):
    """torch autograd's gradients of fn(*arrays) under the upstream gradient grad_output,
    computed exactly (float64), one NumPy array per array given, of its dtype (None for a
    None argument)."""
    tensors = [_exact(a, requires_grad=True) for a in arrays]
    fn(*tensors).backward(_exact(grad_output))
    return tuple(None if t is None else _rounded(t.grad, a.dtype)
                 for a, t in zip(arrays, tensors))


def call_updating(fn, *args, updates):
    """fn(*args) for a kernel that updates some of its arguments in place (running
    statistics): `updates` are those arguments (None ones are left out). In your notebook
    this is fn(*args). At grading, fn runs in another process (the judge's runner, on
    copies of args): what it wrote into these arrays is copied back into them, and only
    into them; a kernel that writes into any other argument fails its check."""
    if hasattr(fn, "remote_call_updating"):
        return fn.remote_call_updating(args, [a for a in updates if a is not None])
    return fn(*args)


def counted(fn, calls, name, values=None):
    """fn, appending name to the list calls at every call (which functions a check's case
    reached: the sublayer and the norm of 5.1, the NumPy kernels of 2.5), and (name, its
    arguments, its result) to the list values if one is given."""
    def wrapper(*args, **kwargs):
        calls.append(name)
        result = fn(*args, **kwargs)
        if values is not None:
            values.append((name, args, result))
        return result
    return wrapper


@contextlib.contextmanager
def counted_calls(modules, names, values=None):
    """Inside the block, each call of the functions `names` of these modules (wherever one
    of them holds one: a kernel and the module that imported it) appends its name to the
    list it yields (and (name, arguments, result) to values, if given); they are put back
    after (2.5's and 8.4's checks: which kernels the autograd Function called, on what)."""
    calls = []
    found = [(module, name, getattr(module, name)) for module in modules for name in names
             if hasattr(module, name)]
    try:
        for module, name, function in found:
            setattr(module, name, counted(function, calls, name, values))
        yield calls
    finally:
        for module, name, function in found:
            setattr(module, name, function)


def assert_computed_with(function, exercises, kernels, calls, values, x, y, g):
    """An autograd Function's run (the class's name `function`: x in, y out, then
    backward(g): x.grad) computed with its NumPy kernels (forward, backward: Exercises
    `exercises`, "1.2 and 2.2"), from the kernels' calls (counted_calls: calls, their names,
    and values, (name, arguments, result)): each called, the forward kernel on x's values
    with y its result, the backward kernel on g's with x.grad its first result. Raises
    CheckFailed saying which is not."""
    missing = [name for name in kernels if name not in calls]
    if missing:
        raise CheckFailed(f"{function} never called {' nor '.join(missing)} for x "
                          f"{tuple(x.shape)}: it must compute with your NumPy kernels "
                          f"(Exercises {exercises}), not with torch's operations.\n  Likely "
                          "cause: the Function computes with torch's operations, which "
                          "autograd differentiates itself.")
    where = _computed_with(values, kernels, x, y, g)
    if where:
        raise CheckFailed(f"{function} for x {tuple(x.shape)} does not return your kernels' "
                          f"results.\n  Where: {where}.")


def _computed_with(values, kernels, x, y, g):
    """Why a Function's run was not computed by its kernels (assert_computed_with), in
    words, or ""."""
    def same(a, t):  # (the same numbers, whatever the shapes: a kernel may take rows)
        a = a[0] if isinstance(a, (tuple, list)) else a
        return isinstance(a, np.ndarray) and t is not None and a.size == t.numel() and \
            np.array_equal(a.astype(np.float64).ravel(), t.detach().double().numpy().ravel())

    forward, backward = kernels
    if not any(n == forward and args and same(args[0], x) and same(result, y)
               for n, args, result in values):
        return (f"the Function's output is not what your {forward} returned for its input "
                f"x: the forward must return the kernel's result on x itself")
    if not any(n == backward and args and same(args[0], g) and same(result, x.grad)
               for n, args, result in values):
        return (f"x's gradient is not the dx your {backward} returned for the upstream "
                f"gradient: the backward must return the kernel's result on it")
    return ""


def guard_inputs(**arrays):
    """Remember the arrays given (name=array); the function returned asserts, after a
    kernel ran, that it wrote into none of them. Kernels must not modify their inputs:
    autograd hands them memory it still uses."""
    copies = {name: None if a is None else a.copy() for name, a in arrays.items()}

    def assert_untouched(case):
        for name, saved in copies.items():
            if saved is not None and not np.array_equal(arrays[name], saved, equal_nan=True):
                changed = ~np.isclose(arrays[name], saved, rtol=0, atol=0, equal_nan=True)
                raise CheckFailed(f"{name} was modified in place {case}: a kernel must "
                                  "not write into its inputs.\n  Where: "
                                  f"{diagnosis.located(changed) or 'its one value'} of "
                                  f"{name} changed during the call (an out= or an in-place "
                                  "operator, -= or *=, on it?)")

    return assert_untouched


@contextlib.contextmanager
def torch_norms():
    """Inside the block, normlib.transformer builds its norms with torch.nn.LayerNorm and
    torch.nn.RMSNorm instead of normlib.nn's: Unit 5's checks grade the Add & Norm wiring
    alone, whatever the state of Exercises 2.5, 3.6 and 3.7."""
    import normlib.transformer as transformer

    saved = transformer.norm_classes
    transformer.norm_classes = lambda: {"layer": torch.nn.LayerNorm, "rms": torch.nn.RMSNorm}
    try:
        yield
    finally:
        transformer.norm_classes = saved


def torch_tensor_close(actual, expected, name, **tol):
    """assert_close for torch tensors: actual must be a tensor of expected's shape and
    dtype."""
    if not isinstance(actual, torch.Tensor):
        raise CheckFailed(f"{name}: expected a torch.Tensor, got {type(actual).__name__}")
    assert_close(actual.detach().numpy(), expected.detach().numpy(), name, **tol)


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


def _run(module, x, grad_output):
    """[(name, tensor)]: module(x), the input's gradient and each parameter's (sorted by
    name) under the upstream gradient grad_output."""
    input = x.detach().clone().requires_grad_()
    y = module(input)
    if not isinstance(y, torch.Tensor):
        raise CheckFailed(f"expected the output to be a torch.Tensor, got {type(y).__name__}"
                          ".\n  Where: the forward's result, which must be a tensor (what "
                          "autograd and the layers after it work with)")
    y.backward(grad_output.to(y.dtype))
    params = sorted(module.named_parameters()) if isinstance(module, torch.nn.Module) else []
    return ([("output", y), ("input.grad", input.grad)]
            + [(f"{name}.grad", p.grad) for name, p in params])


def assert_same_computation(ours, theirs, x, case="", seed=0, tol=None, mistakes=None):
    """ours(x) (a module or function of one tensor) gives theirs(x)'s output, input gradient
    and gradient of every parameter (same names) under a random upstream gradient, in
    value, shape and dtype. theirs runs exactly: a float64 copy of it, on x and the upstream
    gradient in float64, rounded back to x's dtype (so theirs must not depend on its dtype
    otherwise: give an RMSNorm inside it an explicit eps, not None). tol: {"rtol", "atol"}
    from the error model (default TOLERANCES). mistakes(grad_output): {name: {likely cause:
    the tensor that mistake gives}} (assert_close's `mistakes`)."""
    gen = torch.Generator().manual_seed(seed)
    grad_output = torch.randn(x.shape, generator=gen, dtype=torch.float64).to(x.dtype)
    exact = copy.deepcopy(theirs)
    if isinstance(exact, torch.nn.Module):
        exact = exact.double()
    expected = _run(exact, x.double(), grad_output.double())
    try:
        actual = _run(ours, x, grad_output)
    except AssertionError as error:
        raise CheckFailed(f"{error} {case}") from None
    names = [[name for name, _ in r] for r in (actual, expected)]
    if names[0] != names[1]:
        raise CheckFailed(f"parameters {case}: {names[0][2:]}, expected {names[1][2:]}")
    tol = dict(TOLERANCES[_numpy_dtype(x.dtype)] if tol is None else tol)
    found = mistakes(grad_output) if mistakes else {}  # {name: {cause: tensor}}
    for (name, a), (_, e) in zip(actual, expected):
        if a is None:
            raise CheckFailed(f"{name} is None {case}: is every parameter used?\n  Where: "
                              f"{name}, no gradient after backward: the parameter is not "
                              "used by the forward, or its gradient is not returned")
        causes = {c: t.detach().to(x.dtype).numpy() for c, t in found.get(name, {}).items()}
        try:
            torch_tensor_close(a, e.to(x.dtype), f"{name} {case}", **tol, mistakes=causes)
        except CheckFailed as error:
            first = "" if "Likely cause" in str(error) else first_difference(ours, theirs, x,
                                                                             tol)
            if first:
                raise CheckFailed(f"{error}\n  First to differ: {first}.") from None
            raise


def first_difference(ours, theirs, x, tol):
    """Where the module ours departs from theirs (same submodule names, theirs computed
    exactly) on x: the first input or output of a submodule's call, in the order ours makes
    them, that differs from the same call of theirs beyond tol ({"rtol", "atol"}), in words;
    or "" where none does, or where ours lives in another process (at grading: its calls
    cannot be watched from here)."""
    if not (isinstance(ours, torch.nn.Module) and isinstance(theirs, torch.nn.Module)) or \
            hasattr(ours, "remote_call_updating"):
        return ""
    modes = dict(theirs.named_modules())
    mode = {True: "training", False: "evaluation"}
    for name, sub in ours.named_modules():
        if name in modes and sub.training != modes[name].training:
            return (f"{name or 'the module'} is in {mode[sub.training]} mode, where torch's is "
                    f"in {mode[modes[name].training]} mode: train() and eval() must reach "
                    "every submodule")
    if _random(ours):
        return ""  # (a dropout that draws: two runs differ whatever the code)
    reference = dict(_numbered(_calls(copy.deepcopy(theirs).double(), x.double())))
    called = {name for _, name, _ in reference}  # (torch's attention calls out_proj's
    # function, not the module: a call unseen there is not compared)
    before, mine = "the module's input", _numbered(_calls(ours, x))
    for (kind, name, n), got in mine:
        call = f"{name}'s {kind}" + (f" (call {n + 1})" if n else "")
        if name not in called:
            continue
        if (kind, name, n) not in reference:
            return f"{name} is called more often than in torch's module (call {n + 1})"
        want = reference[kind, name, n]
        if got is None or want is None:
            continue
        if got.shape != want.shape:  # (the same values in another layout: not compared)
            if got.numel() == want.numel():
                continue
            return f"{call} has shape {tuple(got.shape)}, expected {tuple(want.shape)}"
        if not close(got.detach().double().numpy(), want.detach().to(got.dtype).double().numpy(),
                     **tol):
            return (f"{call}, its input right: look at {name} itself, or how it is called"
                    if kind == "output" else
                    f"{call}, before {name} runs: the calls before it are right (up to "
                    f"{before}), so look at the code that makes what reaches {name}")
        if kind == "output":
            before = f"{name}'s output"
    made = {key for key, _ in mine}
    missing = [(name, n) for kind, name, n in reference if (kind, name, n) not in made]
    if missing:
        name, n = missing[0]
        return (f"{name} is never called" + (f" (call {n + 1})" if n else "")
                + ", where torch's module calls it")
    return ""


def _random(module):
    """Whether module, in training mode, has a dropout rate strictly between 0 and 1 (a
    Dropout's p, or a float attribute dropout, as attention modules keep theirs)."""
    return module.training and any(
        isinstance(rate, float) and 0 < rate < 1
        for sub in module.modules() for rate in (getattr(sub, "p", None),
                                                 getattr(sub, "dropout", None)))


def _calls(module, x):
    """[(kind, name, tensor)]: module(x)'s submodule calls in order, kind "input" (the
    first argument) or "output" (the first result), with grad enabled (torch's layers take
    no fast path, which calls no submodule). A call that raises ends the list there (its own
    check reports it)."""
    events, handles = [], []

    def first(value):  # (a copy: an in-place operation after the call changes no record)
        value = value[0] if isinstance(value, (tuple, list)) and value else value
        return value.detach().clone() if isinstance(value, torch.Tensor) else None

    for name, sub in module.named_modules():
        if name:
            handles.append(sub.register_forward_pre_hook(
                lambda m, args, name=name: events.append(("input", name, first(args)))))
            handles.append(sub.register_forward_hook(
                lambda m, args, out, name=name: events.append(("output", name, first(out)))))
    try:
        module(x)
    except Exception:
        pass
    finally:
        for handle in handles:
            handle.remove()
    return events


def _numbered(events):
    """[((kind, name, n), tensor)]: events with n, how many calls of that kind and name came
    before."""
    counted = collections.Counter()
    found = []
    for kind, name, tensor in events:
        found.append(((kind, name, counted[kind, name]), tensor))
        counted[kind, name] += 1
    return found


MEASURED = 8 << 20  # bytes: the smallest x whose memory the checks of 7.1 and 7.2 measure


def peak_memory(fn, *args):
    """Call fn(*args); return (its result, the peak of the memory it allocated meanwhile,
    in bytes, the result included). NumPy reports every array it allocates to Python's
    tracemalloc, so this counts arrays exactly, whatever the machine: a kernel's
    temporaries are a property of its code, not of a timing. At grading, fn runs in
    another process, the runner (tools/sandboxed/runner.py), and the judge measures that process's
    resident memory from outside (tools.judge.judge.Judge.measure): there, what torch or
    C allocates counts too, and nothing the code does can reset the count."""
    if hasattr(fn, "remote_peak_memory"):
        return fn.remote_peak_memory(*args)
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


def no_measure(fn, *args):
    """(fn(*args), 0): peak_memory's result for a call whose memory is not measured."""
    return fn(*args), 0


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


def check_mixed(norm, exact, x, normalized_shape, *params, ulps=2, mistakes=None, **kwargs):
    """norm(x, normalized_shape, *params, **kwargs) is a tensor of x's shape and dtype, and
    close to exact(...) on the same numbers in float64: rtol = atol = ulps * eps, eps =
    torch.finfo(x.dtype).eps, so an error up to ulps * eps * (1 + |y|). Rounding the exact
    result to 16 bits once errs by at most eps * |y| / 2: 2 accepts every correct
    implementation. mistakes: {likely cause: a function like exact, computing in float64
    what that mistake gives} (assert_close's `mistakes`)."""
    params64 = [None if p is None else p.double() for p in params]
    expected = exact(x.double(), normalized_shape, *params64, **kwargs)
    y = norm(x, normalized_shape, *params, **kwargs)
    case = f"for x {tuple(x.shape)} {x.dtype}, normalized_shape={normalized_shape} {kwargs}"
    if not isinstance(y, torch.Tensor):
        raise CheckFailed(f"{case}: expected a torch.Tensor, got {type(y).__name__}")
    if y.shape != x.shape or y.dtype != x.dtype:
        shape = diagnosis.shape_words(y.shape, x.shape)  # (where it reveals nothing)
        cause = ("" if y.shape != x.shape or y.dtype.itemsize <= x.dtype.itemsize else
                 f".\n  Likely cause: the result stayed in {y.dtype}, where it was computed: "
                 "round it to x's dtype once, at the end.")
        raise CheckFailed(f"{case}: expected {tuple(x.shape)} {x.dtype}, got {shape} {y.dtype}"
                          + cause)
    tol = ulps * torch.finfo(x.dtype).eps
    found = {cause: f(x.double(), normalized_shape, *params64, **kwargs).numpy()
             for cause, f in (mistakes or {}).items()}  # {cause: float64 (*x.shape)}
    assert_close(y.double().numpy(), expected.numpy(), f"y {case}", rtol=tol, atol=tol,
                 mistakes=found)
