"""The reference normlib's Unit 3 family (BatchNorm, InstanceNorm, GroupNorm, RMSNorm and
the axes-generic normalize) against torch: values, shapes, dtypes, in-place running
statistics, gradients under random upstream gradients, training loops, state_dict round
trips, gradcheck, identities between the layers, and bad input."""

import inspect

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import normlib.functional
import normlib.nn
from normkit.gradcheck import numerical_gradient, relative_error
from normkit.testing import assert_close
from normlib.batch_norm import batch_norm_backward, batch_norm_forward
from normlib.functional import batch_norm, group_norm, instance_norm, layer_norm, rms_norm
from normlib.group_norm import group_norm_backward, group_norm_forward
from normlib.instance_norm import instance_norm_backward, instance_norm_forward
from normlib.norm import normalize_backward, normalize_forward
from normlib.rms_norm import rms_norm_backward, rms_norm_forward
from tests.conftest import exercise, exercise_marks

DTYPES = [np.float32, np.float64]
AFFINE = ["both", "weight", "bias", "none"]


def randn(shape, dtype, seed, scale=3.0, shift=2.0):
    """Random values off-centre and not of unit scale, so that a missing centring or
    scaling shows; per-channel offsets make channels (and so groups) differ."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * scale + shift
    if len(shape) >= 2:
        x = x + np.arange(shape[1]).reshape((1, -1) + (1,) * (len(shape) - 2))
    return x.astype(dtype)


def params(c, dtype, affine, seed=10):
    """weight, bias (c,) random (weight away from 1, bias away from 0) or None."""
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal(c) + 1.5).astype(dtype)
    b = rng.standard_normal(c).astype(dtype)
    return (w if affine in ("both", "weight") else None,
            b if affine in ("both", "bias") else None)


def running(c, dtype, seed=20):
    """running_mean, running_var (c,): random, the variance positive."""
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(c).astype(dtype),
            rng.uniform(0.5, 2.0, c).astype(dtype))


def grad_like(a, seed=30):
    """A random upstream gradient (never ones: see test_layer_norm.py)."""
    return np.random.default_rng(seed).standard_normal(a.shape).astype(a.dtype)


def t(a, requires_grad=False):
    """A NumPy array as a fresh torch tensor (a copy: torch never touches our arrays)."""
    return None if a is None else torch.tensor(a, requires_grad=requires_grad)


def grads(*tensors):
    return tuple(None if x is None else x.grad.numpy() for x in tensors)


def assert_grads(actual, expected, names, **tol):
    assert len(actual) == len(expected)
    for a, e, name in zip(actual, expected, names):
        if e is None:
            assert a is None, f"{name}: expected None (no such parameter), got {type(a)}"
        else:
            assert_close(a, e, name, **tol)


# 1. normlib.functional against torch.nn.functional ---------------------------------------

BATCH_SHAPES = [(6, 3), (4, 3, 5), (3, 3, 4, 5)]
BATCH_MODES = [  # (training, momentum, running stats given)
    (True, 0.1, True),
    (True, 0.5, True),
    (True, 0.1, False),
    (False, 0.1, True),
    (False, 0.5, True),
]


@exercise("3.3")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", BATCH_SHAPES)
@pytest.mark.parametrize("affine", AFFINE)
@pytest.mark.parametrize("training,momentum,with_running", BATCH_MODES)
def test_batch_norm_matches_torch(shape, dtype, affine, training, momentum, with_running):
    x = randn(shape, dtype, 0)
    x0 = x.copy()
    w, b = params(shape[1], dtype, affine)
    rm, rv = running(shape[1], dtype) if with_running else (None, None)
    rm_t, rv_t = t(rm), t(rv)
    rm0 = None if rm is None else rm.copy()
    rv0 = None if rv is None else rv.copy()

    y = batch_norm(x, rm, rv, w, b, training, momentum, 1e-5)
    expected = F.batch_norm(t(x), rm_t, rv_t, t(w), t(b), training, momentum, 1e-5)

    assert_close(y, expected.numpy(), "batch_norm")
    np.testing.assert_array_equal(x, x0, err_msg="the input was modified")
    if with_running:
        # torch updated rm_t, rv_t in place; ours must have updated the very arrays given
        # (rm, rv here): an implementation that rebinds them leaves the originals unchanged
        assert rm.dtype == dtype and rv.dtype == dtype
        assert_close(rm, rm_t.numpy(), "running_mean")
        assert_close(rv, rv_t.numpy(), "running_var")
        if training:
            assert not np.allclose(rm, rm0) and not np.allclose(rv, rv0)
        else:
            np.testing.assert_array_equal(rm, rm0, err_msg="eval changed running_mean")
            np.testing.assert_array_equal(rv, rv0, err_msg="eval changed running_var")


@exercise("3.3", "3.5")
@pytest.mark.parametrize("eps", [1e-3, 0.5])
@pytest.mark.parametrize("training", [True, False])
def test_batch_and_instance_norm_use_eps(eps, training):
    """eps is used, inside the square root, in training and in eval (the grid above uses
    torch's default 1e-5, at which eps on the std would go unnoticed)."""
    x = randn((4, 3, 5), np.float64, 2, scale=0.1)  # variances ~0.01: eps matters
    w, b = params(3, np.float64, "both")
    rm, rv = running(3, np.float64)
    rm_t, rv_t = t(rm), t(rv)
    y = batch_norm(x, rm, rv, w, b, training, 0.1, eps)
    expected = F.batch_norm(t(x), rm_t, rv_t, t(w), t(b), training, 0.1, eps)
    assert_close(y, expected.numpy(), f"batch_norm eps={eps}")
    assert_close(rv, rv_t.numpy(), f"running_var eps={eps}")
    y = instance_norm(x, rm, rv, w, b, training, 0.1, eps)
    expected = F.instance_norm(t(x), rm_t, rv_t, t(w), t(b), training, 0.1, eps)
    assert_close(y, expected.numpy(), f"instance_norm eps={eps}")
    assert_close(rm, rm_t.numpy(), f"running_mean eps={eps}")


@pytest.mark.parametrize("name", ["layer_norm", "rms_norm", "batch_norm", "instance_norm",
                                  "group_norm"])
def test_functional_signatures_are_torchs(name):
    """Same parameter names, order, kinds and defaults as torch.nn.functional."""
    def params_of(fn):
        return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]

    assert params_of(getattr(normlib.functional, name)) == params_of(getattr(F, name))


@exercise("3.3")
def test_batch_norm_updates_views_in_place():
    """Running statistics that are views into a larger buffer (as a module's buffers are
    views of its tensors) are written through, not rebound."""
    x = randn((5, 3, 4), np.float64, 1)
    buffer = np.stack(running(3, np.float64))  # (2, 3): row 0 mean, row 1 var
    rm, rv = buffer[0], buffer[1]
    rm_t, rv_t = t(buffer[0]), t(buffer[1])
    batch_norm(x, rm, rv, training=True, momentum=0.3)
    F.batch_norm(t(x), rm_t, rv_t, training=True, momentum=0.3)
    assert np.shares_memory(rm, buffer) and np.shares_memory(rv, buffer)
    assert_close(buffer[0], rm_t.numpy(), "running_mean (through the buffer)")
    assert_close(buffer[1], rv_t.numpy(), "running_var (through the buffer)")


INSTANCE_SHAPES = [(3, 4, 5), (2, 3, 4, 5)]
INSTANCE_MODES = [  # (use_input_stats, momentum, running stats given)
    (True, 0.1, False),
    (True, 0.1, True),
    (True, 0.5, True),
    (False, 0.1, True),
]


@exercise("3.5")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", INSTANCE_SHAPES)
@pytest.mark.parametrize("affine", AFFINE)
@pytest.mark.parametrize("use_input_stats,momentum,with_running", INSTANCE_MODES)
def test_instance_norm_matches_torch(shape, dtype, affine, use_input_stats, momentum,
                                     with_running):
    x = randn(shape, dtype, 2)
    x0 = x.copy()
    w, b = params(shape[1], dtype, affine)
    rm, rv = running(shape[1], dtype) if with_running else (None, None)
    rm_t, rv_t = t(rm), t(rv)
    rm0 = None if rm is None else rm.copy()
    rv0 = None if rv is None else rv.copy()

    y = instance_norm(x, rm, rv, w, b, use_input_stats, momentum, 1e-5)
    expected = F.instance_norm(t(x), rm_t, rv_t, t(w), t(b), use_input_stats, momentum, 1e-5)

    assert_close(y, expected.numpy(), "instance_norm")
    np.testing.assert_array_equal(x, x0, err_msg="the input was modified")
    if with_running:  # the arrays given, updated in place (or untouched)
        assert_close(rm, rm_t.numpy(), "running_mean")
        assert_close(rv, rv_t.numpy(), "running_var")
        if use_input_stats:
            assert not np.allclose(rm, rm0) and not np.allclose(rv, rv0)
        else:
            np.testing.assert_array_equal(rm, rm0, err_msg="running_mean changed")
            np.testing.assert_array_equal(rv, rv0, err_msg="running_var changed")


@exercise("3.5")
def test_instance_norm_default_arguments_match_torch():
    x = randn((2, 3, 6), np.float32, 3)
    assert_close(instance_norm(x), F.instance_norm(t(x)).numpy(), "instance_norm(x)")


GROUP_SHAPES = [(4, 6), (3, 6, 5), (2, 6, 3, 4)]
# num_groups 1, middle divisors, C. Not C groups of (N, C): one value per group, variance
# 0 up to rounding, and torch's output is that rounding noise times 1/sqrt(eps).
GROUP_CASES = [(shape, g) for shape in GROUP_SHAPES for g in (1, 2, 3, 6)
               if len(shape) > 2 or g < shape[1]]


@exercise("3.4")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,num_groups", GROUP_CASES)
@pytest.mark.parametrize("affine", AFFINE)
def test_group_norm_matches_torch(shape, dtype, num_groups, affine):
    x = randn(shape, dtype, 4)
    x0 = x.copy()
    w, b = params(shape[1], dtype, affine)
    y = group_norm(x, num_groups, w, b, 1e-5)
    expected = F.group_norm(t(x), num_groups, t(w), t(b), 1e-5)
    assert_close(y, expected.numpy(), "group_norm")
    np.testing.assert_array_equal(x, x0, err_msg="the input was modified")


@exercise("3.4")
def test_group_norm_eps_and_defaults_match_torch():
    x = randn((2, 4, 3), np.float64, 5, scale=0.05)  # small variance: eps matters
    assert_close(group_norm(x, 2, eps=1e-2), F.group_norm(t(x), 2, eps=1e-2).numpy(), "eps=1e-2")
    assert_close(group_norm(x, 2), F.group_norm(t(x), 2).numpy(), "defaults")


RMS_SHAPES = [  # (input shape, normalized_shape in the forms torch's module accepts)
    ((2, 3, 4), 4),
    ((2, 3, 4), (4,)),
    ((2, 3, 4), [3, 4]),
    ((2, 3, 4), (2, 3, 4)),
    ((2, 2, 3, 5), (3, 5)),
    ((7,), 7),
    ((5, 1), 1),
]


@exercise("3.6")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,normalized_shape", RMS_SHAPES)
@pytest.mark.parametrize("eps", [None, 1e-5])
@pytest.mark.parametrize("with_weight", [True, False])
@pytest.mark.parametrize("scale", [3.0, 1e-3])  # 1e-3: mean(x^2) ~ 1e-6, eps shows
def test_rms_norm_matches_torch(shape, normalized_shape, dtype, eps, with_weight, scale):
    x = randn(shape, dtype, 6, scale=scale, shift=scale / 2)
    x0 = x.copy()
    s = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    w = (np.random.default_rng(7).standard_normal(s) + 1.5).astype(dtype) if with_weight else None
    y = rms_norm(x, normalized_shape, w, eps)
    expected = F.rms_norm(t(x), s, t(w), eps)  # torch's functional takes no int
    assert_close(y, expected.numpy(), "rms_norm")
    np.testing.assert_array_equal(x, x0, err_msg="the input was modified")


# 2. Backward kernels against torch autograd ------------------------------------------------


@exercise("3.3", "3.8")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", BATCH_SHAPES)
@pytest.mark.parametrize("affine", AFFINE)
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_backward_matches_torch(shape, dtype, affine, training):
    x = randn(shape, dtype, 8)
    w, b = params(shape[1], dtype, affine)
    rm, rv = running(shape[1], dtype)
    y, x_hat, rstd = batch_norm_forward(x, rm.copy(), rv.copy(), w, b, training, 0.1, 1e-5)
    dy = grad_like(y)
    xt, wt, bt = t(x, True), t(w, True), t(b, True)
    F.batch_norm(xt, t(rm), t(rv), wt, bt, training, 0.1, 1e-5).backward(t(dy))
    actual = batch_norm_backward(dy, x_hat, rstd, w, b, training)
    assert_grads(actual, grads(xt, wt, bt), ("dx", "dweight", "dbias"))


@exercise("3.2", "3.5", "3.8")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", INSTANCE_SHAPES)
@pytest.mark.parametrize("affine", ["both", "none"])
@pytest.mark.parametrize("use_input_stats", [True, False])
def test_instance_norm_backward_matches_torch(shape, dtype, affine, use_input_stats):
    x = randn(shape, dtype, 9)
    w, b = params(shape[1], dtype, affine)
    rm, rv = running(shape[1], dtype)
    y, x_hat, rstd = instance_norm_forward(x, rm.copy(), rv.copy(), w, b, use_input_stats,
                                           0.1, 1e-5)
    dy = grad_like(y)
    xt, wt, bt = t(x, True), t(w, True), t(b, True)
    F.instance_norm(xt, t(rm), t(rv), wt, bt, use_input_stats, 0.1, 1e-5).backward(t(dy))
    actual = instance_norm_backward(dy, x_hat, rstd, w, b, use_input_stats)
    assert_grads(actual, grads(xt, wt, bt), ("dx", "dweight", "dbias"))


@exercise("3.2", "3.4")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", GROUP_SHAPES[1:])
@pytest.mark.parametrize("num_groups", [1, 2, 3, 6])
@pytest.mark.parametrize("affine", ["both", "weight", "none"])
def test_group_norm_backward_matches_torch(shape, dtype, num_groups, affine):
    x = randn(shape, dtype, 11)
    w, b = params(shape[1], dtype, affine)
    y, x_hat, rstd = group_norm_forward(x, num_groups, w, b, 1e-5)
    dy = grad_like(y)
    xt, wt, bt = t(x, True), t(w, True), t(b, True)
    F.group_norm(xt, num_groups, wt, bt, 1e-5).backward(t(dy))
    actual = group_norm_backward(dy, x_hat, rstd, w, b)
    assert_grads(actual, grads(xt, wt, bt), ("dx", "dweight", "dbias"))


@exercise("3.7")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,normalized_shape", RMS_SHAPES[:5])
@pytest.mark.parametrize("eps", [None, 1e-5])
@pytest.mark.parametrize("with_weight", [True, False])
def test_rms_norm_backward_matches_torch(shape, normalized_shape, dtype, eps, with_weight):
    x = randn(shape, dtype, 12)
    s = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    w = (np.random.default_rng(13).standard_normal(s) + 1.5).astype(dtype) if with_weight else None
    y, rrms = rms_norm_forward(x, s, w, eps)
    assert rrms.dtype == dtype
    assert rrms.shape == shape[:len(shape) - len(s)] + (1,) * len(s)
    dy = grad_like(y)
    xt, wt = t(x, True), t(w, True)
    F.rms_norm(xt, s, wt, eps).backward(t(dy))
    actual = rms_norm_backward(dy, x, s, rrms, w)
    assert_grads(actual, grads(xt, wt), ("dx", "dweight"))


NORMALIZE_AXES = [(0,), (1,), (3,), (2, 3), (0, 2, 3), (1, 2, 3), (3, 1), (0, 1, 2, 3)]


def torch_normalize(xt, axes, eps):
    mean = xt.mean(dim=axes, keepdim=True)
    var = xt.var(dim=axes, unbiased=False, keepdim=True)
    rstd = torch.rsqrt(var + eps)
    return (xt - mean) * rstd, mean, var, rstd


@exercise("3.1", "3.2")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("axes", NORMALIZE_AXES)
def test_normalize_forward_and_backward_match_torch(axes, dtype):
    x = randn((2, 3, 4, 5), dtype, 14)
    xt = t(x, True)
    expected = torch_normalize(xt, axes, 1e-5)
    actual = normalize_forward(x, axes, 1e-5)
    for a, e, name in zip(actual, expected, ("x_hat", "mean", "var", "rstd")):
        assert_close(a, e.detach().numpy(), name)
    x_hat, _, _, rstd = actual
    g = grad_like(x_hat)
    expected[0].backward(t(g))
    assert_close(normalize_backward(g, x_hat, rstd, axes), xt.grad.numpy(), "dx")


@exercise("3.2")
@pytest.mark.parametrize("axes", [(1,), (0, 2), (2, 0), (0, 1, 2)])
def test_normalize_backward_matches_finite_differences(axes):
    """Independent of torch: central differences of normalize_forward in float64."""
    x = randn((3, 4, 2), np.float64, 15)
    g = grad_like(x, 16)
    x_hat, _, _, rstd = normalize_forward(x, axes, 1e-5)
    dx = normalize_backward(g, x_hat, rstd, axes)
    numeric = numerical_gradient(lambda z: normalize_forward(z, axes, 1e-5)[0], x, g)
    assert relative_error(dx, numeric) < 1e-8  # central differences at h=1e-6: ~1e-10
    assert np.abs(dx).max() > 1e-2  # a random upstream gradient: a non-trivial dx


@exercise("3.7")
def test_rms_norm_backward_matches_finite_differences():
    x = randn((3, 2, 4), np.float64, 17)
    w = np.random.default_rng(18).standard_normal((2, 4)) + 1.5
    g = grad_like(x, 19)
    _, rrms = rms_norm_forward(x, (2, 4), w, None)
    dx, _ = rms_norm_backward(g, x, (2, 4), rrms, w)
    numeric = numerical_gradient(lambda z: rms_norm_forward(z, (2, 4), w, None)[0], x, g)
    assert relative_error(dx, numeric) < 1e-8


# 3. Modules against their torch twins -------------------------------------------------------

MODULES = [  # (id, class name, constructor args, kwargs, input shape)
    ("bn1d-2d", "BatchNorm1d", (3,), {}, (6, 3)),
    ("bn1d-3d", "BatchNorm1d", (3,), {}, (4, 3, 5)),
    ("bn1d-momentum-none", "BatchNorm1d", (3,), {"momentum": None}, (4, 3, 5)),
    ("bn1d-no-running", "BatchNorm1d", (3,), {"track_running_stats": False}, (6, 3)),
    ("bn1d-no-affine", "BatchNorm1d", (3,), {"affine": False}, (4, 3, 2)),
    ("bn1d-no-bias", "BatchNorm1d", (3,), {"bias": False}, (4, 3, 2)),
    ("bn2d", "BatchNorm2d", (3,), {}, (3, 3, 4, 2)),
    ("bn2d-momentum-eps", "BatchNorm2d", (3,), {"momentum": 0.5, "eps": 1e-3}, (3, 3, 2, 2)),
    ("bn2d-momentum-none", "BatchNorm2d", (3,), {"momentum": None}, (3, 3, 2, 2)),
    ("bn2d-no-running", "BatchNorm2d", (3,), {"track_running_stats": False, "affine": False},
     (2, 3, 2, 3)),
    ("in1d", "InstanceNorm1d", (3,), {}, (4, 3, 5)),
    ("in1d-affine-running", "InstanceNorm1d", (3,),
     {"affine": True, "track_running_stats": True}, (4, 3, 5)),
    ("in1d-unbatched", "InstanceNorm1d", (3,), {"affine": True, "track_running_stats": True},
     (3, 5)),
    ("in2d-affine", "InstanceNorm2d", (3,), {"affine": True}, (2, 3, 4, 3)),
    ("in2d-running", "InstanceNorm2d", (3,), {"track_running_stats": True, "momentum": 0.3},
     (2, 3, 3, 3)),
    ("in2d-momentum-none", "InstanceNorm2d", (3,), {"track_running_stats": True, "momentum": None},
     (2, 3, 3, 3)),
    ("in2d-unbatched", "InstanceNorm2d", (3,), {"affine": True, "track_running_stats": True},
     (3, 4, 3)),
    ("gn-2-of-6", "GroupNorm", (2, 6), {}, (4, 6, 5)),
    ("gn-3-of-6-no-affine", "GroupNorm", (3, 6), {"affine": False}, (2, 6, 3, 2)),
    ("gn-1", "GroupNorm", (1, 4), {}, (3, 4, 2)),
    ("gn-per-channel", "GroupNorm", (4, 4), {"bias": False}, (3, 4, 3)),
    ("rms-int", "RMSNorm", (5,), {}, (4, 5)),
    ("rms-tuple-eps-none", "RMSNorm", ((3, 5),), {"eps": None}, (2, 3, 5)),
    ("rms-list-eps", "RMSNorm", ([3, 5],), {"eps": 1e-5}, (2, 4, 3, 5)),
    ("rms-no-affine", "RMSNorm", (5,), {"elementwise_affine": False}, (3, 5)),
]
EXERCISES = {"BatchNorm1d": ("3.3", "3.8"), "BatchNorm2d": ("3.3", "3.8"), "InstanceNorm1d": ("3.5", "3.8"),
             "InstanceNorm2d": ("3.5", "3.8"), "GroupNorm": ("3.4",), "RMSNorm": ("3.6", "3.7")}
MODULE_PARAMS = [pytest.param(*m[1:], id=m[0], marks=exercise_marks(*EXERCISES[m[1]]))
                 for m in MODULES]


def module_pair(name, args, kwargs, dtype=torch.float32, seed=0):
    """(ours, torch's), torch's parameters and buffers randomized and copied into ours."""
    ours = getattr(normlib.nn, name)(*args, **kwargs, dtype=dtype)
    theirs = getattr(torch.nn, name)(*args, **kwargs, dtype=dtype)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in theirs.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=dtype) + 1.0)
        if getattr(theirs, "running_mean", None) is not None:
            theirs.running_mean.copy_(torch.randn(theirs.running_mean.shape, generator=gen))
            theirs.running_var.copy_(torch.rand(theirs.running_var.shape, generator=gen) + 0.5)
            theirs.num_batches_tracked.fill_(3)
    ours.load_state_dict(theirs.state_dict())  # torch -> normlib
    return ours, theirs


def assert_tensor_close(actual, expected, name):
    assert isinstance(actual, torch.Tensor), f"{name}: expected a tensor, got {type(actual)}"
    if expected.dtype.is_floating_point:
        assert_close(actual.detach().numpy(), expected.detach().numpy(), name)
    else:
        assert actual.dtype == expected.dtype, f"{name}: {actual.dtype} != {expected.dtype}"
        assert torch.equal(actual, expected), f"{name}: {actual} != {expected}"


def assert_same_state(ours, theirs):
    a, b = ours.state_dict(), theirs.state_dict()
    assert list(a) == list(b)
    for key in b:
        assert_tensor_close(a[key], b[key], key)


def step(ours, theirs, x, seed):
    """One forward and backward of both on the same x and random upstream gradient."""
    xo, xt = x.clone().requires_grad_(), x.clone().requires_grad_()
    yo, yt = ours(xo), theirs(xt)
    assert_tensor_close(yo, yt, "output")
    g = torch.randn(yt.shape, generator=torch.Generator().manual_seed(seed), dtype=yt.dtype)
    yo.backward(g)
    yt.backward(g)
    assert_tensor_close(xo.grad, xt.grad, "input grad")
    for (n, p), (m, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert n == m
        assert_tensor_close(p.grad, q.grad, f"{n}.grad")


@pytest.mark.parametrize("name,args,kwargs,shape", MODULE_PARAMS)
def test_module_trains_like_torch(name, args, kwargs, shape):
    """A few SGD steps in train mode, then eval steps: same outputs, input and parameter
    gradients, parameters and buffers (running stats, num_batches_tracked) throughout."""
    ours, theirs = module_pair(name, args, kwargs)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]
    buffers = dict(ours.named_buffers())
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (ours, theirs)] \
        if list(theirs.parameters()) else []
    gen = torch.Generator().manual_seed(1)
    for i in range(3):
        for opt in opts:
            opt.zero_grad()
        x = torch.randn(shape, generator=gen) * (1 + i) + i
        step(ours, theirs, x, seed=100 + i)
        for opt in opts:
            opt.step()
        assert_same_state(ours, theirs)
    ours.eval()
    theirs.eval()
    before = {k: v.clone() for k, v in theirs.state_dict().items()}
    for i in range(2):
        for m in (ours, theirs):
            m.zero_grad()
        x = torch.randn(shape, generator=gen) * 2 - 1
        step(ours, theirs, x, seed=200 + i)
    assert_same_state(ours, theirs)
    for k, v in before.items():  # eval mode updates nothing
        assert torch.equal(theirs.state_dict()[k], v), k
    for k, v in ours.named_buffers():  # updated in place, never replaced
        assert v is buffers[k], f"buffer {k} was replaced, not updated in place"


@pytest.mark.parametrize("name,args,kwargs,shape", MODULE_PARAMS)
def test_module_state_dict_round_trips(name, args, kwargs, shape):
    ours, theirs = module_pair(name, args, kwargs, seed=5)  # torch -> normlib (strict)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert_same_state(ours, theirs)
    ours.eval()
    theirs.eval()
    x = torch.randn(shape, generator=torch.Generator().manual_seed(6))
    assert_tensor_close(ours(x), theirs(x), "eval output after loading torch's state")
    # normlib -> torch: change ours, load it into a fresh torch module (strict)
    with torch.no_grad():
        for p in ours.parameters():
            p.mul_(-0.5)
        if getattr(ours, "running_mean", None) is not None:
            ours.running_mean.add_(1.0)
            ours.running_var.mul_(2.0)
            ours.num_batches_tracked.fill_(11)
    fresh = getattr(torch.nn, name)(*args, **kwargs)
    fresh.load_state_dict(ours.state_dict())
    assert_same_state(ours, fresh)
    fresh.eval()
    assert_tensor_close(ours(x), fresh(x), "eval output after loading ours into torch")


@pytest.mark.parametrize("name,args,kwargs,shape", MODULE_PARAMS)
def test_module_keeps_float64(name, args, kwargs, shape):
    ours, theirs = module_pair(name, args, kwargs, dtype=torch.float64)
    x = torch.randn(shape, dtype=torch.float64, generator=torch.Generator().manual_seed(7))
    y = ours(x)
    assert y.dtype == torch.float64
    assert_tensor_close(y, theirs(x), "float64 output")
    assert_same_state(ours, theirs)


# 4. gradcheck in float64 ------------------------------------------------------------------


def has_running_stats(name, kwargs):
    default = name.startswith("BatchNorm")  # InstanceNorm's default is False
    return name in ("BatchNorm1d", "BatchNorm2d", "InstanceNorm1d", "InstanceNorm2d") and \
        kwargs.get("track_running_stats", default)


GRADCHECK_CASES = [pytest.param(*m[1:], mode, id=f"{m[0]}-{mode}",
                                marks=exercise_marks(*EXERCISES[m[1]])) for m in MODULES
                   for mode in ("train", "eval") if mode == "train" or has_running_stats(m[1], m[3])]


@pytest.mark.parametrize("name,args,kwargs,shape,mode", GRADCHECK_CASES)
def test_module_gradcheck_float64(name, args, kwargs, shape, mode):
    """The input and the parameters as gradcheck's inputs; eval mode (running statistics,
    constants) where the module keeps them."""
    ours, _ = module_pair(name, args, kwargs, dtype=torch.float64, seed=8)
    if mode == "eval":
        ours.eval()
    names = [n for n, _ in ours.named_parameters()]
    x = torch.randn(shape, dtype=torch.float64, generator=torch.Generator().manual_seed(9))
    inputs = (x.requires_grad_(),) + tuple(p.detach().clone().requires_grad_()
                                           for _, p in ours.named_parameters())

    def f(x, *ps):
        return torch.func.functional_call(ours, dict(zip(names, ps)), (x,))

    assert torch.autograd.gradcheck(f, inputs)


# 5. Identities between the layers ---------------------------------------------------------


@exercise("1.2", "3.4")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 4, 5), (2, 4, 3, 2)])
def test_layer_norm_over_chw_is_group_norm_with_one_group(shape, dtype):
    x = randn(shape, dtype, 21)
    assert_close(group_norm(x, 1), layer_norm(x, shape[1:]), "GroupNorm(1) vs LayerNorm")


@exercise("3.4", "3.5")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 4, 5), (2, 4, 3, 2)])
def test_instance_norm_is_group_norm_with_c_groups(shape, dtype):
    x = randn(shape, dtype, 22)
    w, b = params(shape[1], dtype, "both")
    assert_close(group_norm(x, shape[1], w, b), instance_norm(x, weight=w, bias=b),
                 "GroupNorm(C) vs InstanceNorm")


@exercise("3.3", "3.5")
def test_instance_norm_is_batch_norm_of_one_sample_with_n_times_c_channels():
    x = randn((3, 4, 5), np.float64, 23)
    y = batch_norm(x.reshape(1, 12, 5), None, None, training=True).reshape(x.shape)
    assert_close(instance_norm(x), y, "InstanceNorm vs BatchNorm on (1, N*C, L)")


# 6. Bad input ----------------------------------------------------------------------------

X3 = np.ones((2, 3, 4))  # (N, C, L), C = 3
X6 = np.ones((2, 6, 4))  # C = 6


@pytest.mark.parametrize(
    "call,error,message",
    [
        # group counts
        (lambda: group_norm(X6, 4), ValueError, r"divisible by num_groups.*C=6\) and num_groups=4"),
        (lambda: group_norm(X6, 0), ValueError, "divisible by num_groups"),
        (lambda: group_norm(X6, 2.0), TypeError, "num_groups must be an int, got 2.0"),
        (lambda: normlib.nn.GroupNorm(4, 6), ValueError, r"num_channels \(6\) must be divisible by num_groups \(4\)"),
        # wrong channel counts
        (lambda: batch_norm(X3, None, None, np.ones(4), training=True), ValueError, r"weight must have shape \(3,\), got \(4,\)"),
        (lambda: batch_norm(X3, None, None, bias=np.ones(2), training=True), ValueError, r"bias must have shape \(3,\), got \(2,\)"),
        (lambda: batch_norm(X3, np.zeros(4), np.ones(3)), ValueError, r"running_mean must have shape \(3,\), got \(4,\)"),
        (lambda: batch_norm(X3, np.zeros(3), np.ones((3, 1))), ValueError, r"running_var must have shape \(3,\), got \(3, 1\)"),
        (lambda: instance_norm(X3, np.zeros(2), np.ones(2)), ValueError, r"running_mean must have shape \(3,\), got \(2,\)"),
        (lambda: instance_norm(X3, weight=np.ones(6)), ValueError, r"weight must have shape \(3,\), got \(6,\)"),
        (lambda: group_norm(X6, 2, np.ones(3)), ValueError, r"weight must have shape \(6,\), got \(3,\)"),
        (lambda: group_norm(X6, 2, None, np.ones(2)), ValueError, r"bias must have shape \(6,\), got \(2,\)"),
        (lambda: batch_norm(X3, None, None, np.ones(3, np.float32), training=True), TypeError, "weight has dtype float32 but input has dtype float64"),
        # integer or non-array input
        (lambda: batch_norm(X3.astype(np.int64), None, None, training=True), TypeError, "input must have dtype float32 or float64, got int64"),
        (lambda: instance_norm(X3.astype(np.int32)), TypeError, "input must have dtype float32 or float64, got int32"),
        (lambda: group_norm(X6.astype(np.int64), 2), TypeError, "input must have dtype float32 or float64, got int64"),
        (lambda: rms_norm(X3.astype(np.int64), 4), TypeError, "input must have dtype float32 or float64, got int64"),
        (lambda: group_norm(X6.tolist(), 2), TypeError, "input must be a numpy.ndarray, got list"),
        (lambda: normlib.nn.BatchNorm1d(3)(torch.ones(2, 3, dtype=torch.int64)), TypeError, "got int64"),
        (lambda: normlib.nn.GroupNorm(2, 6)(X6), TypeError, "input must be a torch.Tensor, got ndarray"),
        # statistics that cannot be computed or are missing
        (lambda: batch_norm(np.ones((1, 3)), None, None, training=True), ValueError, "Expected more than 1 value per channel when training"),
        (lambda: batch_norm(np.ones((1, 3, 1)), np.zeros(3), np.ones(3), training=True), ValueError, "Expected more than 1 value per channel when training"),
        (lambda: batch_norm(X3, None, None, training=False), ValueError, "running_mean and running_var are required when training=False"),
        (lambda: batch_norm(X3, np.zeros(3), None, training=True), ValueError, "running_mean and running_var must be both given or both None"),
        (lambda: instance_norm(np.ones((2, 3, 1))), ValueError, "Expected more than 1 spatial element"),
        (lambda: instance_norm(X3, use_input_stats=False), ValueError, "required when use_input_stats=False"),
        (lambda: batch_norm(np.ones(3), None, None, training=True), ValueError, r"input must have shape \(N, C\) with at least 2 dims, got shape \(3,\)"),
        (lambda: instance_norm(np.ones((2, 3))), ValueError, r"input must have shape \(N, C, \*spatial\) with at least 3 dims"),
        (lambda: normlib.nn.BatchNorm1d(3)(torch.ones(1, 3)), ValueError, "Expected more than 1 value per channel"),
        (lambda: normlib.nn.InstanceNorm1d(3)(torch.ones(2, 3, 1)), ValueError, "Expected more than 1 spatial element"),
        # a module given the wrong number of dims
        (lambda: normlib.nn.BatchNorm1d(3)(torch.ones(2, 3, 4, 5)), ValueError, r"expected 2D or 3D input \(got 4D input\)"),
        (lambda: normlib.nn.BatchNorm2d(3)(torch.ones(2, 3, 4)), ValueError, r"expected 4D input \(got 3D input\)"),
        (lambda: normlib.nn.InstanceNorm2d(3)(torch.ones(2, 3, 4, 5, 6)), ValueError, r"expected 3D or 4D input \(got 5D input\)"),
        (lambda: normlib.nn.BatchNorm1d(4)(torch.ones(2, 3, 4)), ValueError, r"running_mean must have shape \(3,\), got \(4,\)"),
        # rms_norm's normalized_shape
        (lambda: rms_norm(X3, 3), ValueError, r"expected input with shape \(\*, 3\), but got input of shape \(2, 3, 4\)"),
        (lambda: rms_norm(X3, (4, 3)), ValueError, r"expected input with shape \(\*, 4, 3\)"),
        (lambda: rms_norm(X3, 4, np.ones(3)), ValueError, r"weight must have shape \(4,\) \(= normalized_shape\), got \(3,\)"),
        (lambda: normlib.nn.RMSNorm((3, 5))(torch.ones(2, 3, 4)), ValueError, r"expected input with shape \(\*, 3, 5\)"),
    ],
)
def test_bad_input_gets_a_clear_error(call, error, message):
    with pytest.raises(error, match=message):
        call()


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda: F.batch_norm(torch.ones(1, 3), None, None, training=True), "Expected more than 1 value per channel"),
        (lambda: F.instance_norm(torch.ones(2, 3, 1)), "Expected more than 1 spatial element"),
        (lambda: torch.nn.BatchNorm1d(3)(torch.ones(2, 3, 4, 5)), r"expected 2D or 3D input \(got 4D input\)"),
    ],
)
def test_torch_rejects_the_same_input(call, message):
    """The cases above that mirror torch: torch raises the same ValueError."""
    with pytest.raises(ValueError, match=message):
        call()
