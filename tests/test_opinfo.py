"""normlib.functional and normlib.nn against torch on torch's own sample inputs and on
empty inputs (issue 11): the same output (shape, dtype, values within normkit.testing's
tolerances), every tensor argument the same after the call (the running statistics are
updated in place, or not, as torch updates them), and a clear ValueError wherever torch
raises.

The samples are those of torch's test suite: the OpInfo entries of the five operations in
torch.testing._internal.common_methods_invocations.op_db. Importing it needs the
`expecttest` package (pinned in pyproject.toml) and takes about 5 s, so a module-scoped
fixture imports it once, and only when these tests run. The import also switches off the
setters of torch.backends' flags (torch.backends.disable_global_flags) for the process:
nothing in the course sets them.
"""

import inspect
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import normkit.testing
import normlib.functional
import normlib.nn
from normkit.testing import assert_close
from tests.conftest import REPO, exercise_marks

EXERCISES = {"layer_norm": ("1.2",), "rms_norm": ("3.6",), "batch_norm": ("3.3",),
             "instance_norm": ("3.5",), "group_norm": ("3.4",)}  # each function's kernel
OPS = [pytest.param(name, marks=exercise_marks(*numbers), id=name)
       for name, numbers in EXERCISES.items()]
DTYPES = [torch.float32, torch.float64]
# torch 2.13's samples include an empty input for these four; not for instance_norm, whose
# empty inputs EMPTY_CASES below cover (as they cover the other four's).
OPINFO_HAS_EMPTY = {"layer_norm", "rms_norm", "batch_norm", "group_norm"}


@pytest.fixture(scope="module")
def op_db():
    from torch.testing._internal.common_methods_invocations import op_db

    return op_db


def to_numpy(value):
    """A tensor as a NumPy copy (so that torch and normlib each mutate their own); any other
    argument as it is."""
    return value.detach().clone().numpy() if isinstance(value, torch.Tensor) else value


def to_torch(value):
    """A tensor as a clone (the sample stays as it was); any other argument as it is."""
    return value.detach().clone() if isinstance(value, torch.Tensor) else value


def describe(value):
    return f"tensor{tuple(value.shape)}" if isinstance(value, torch.Tensor) else repr(value)


def assert_same(name, input, args, kwargs, case, match=None):
    """normlib.functional.<name> on NumPy copies of (input, *args, **kwargs) does what
    torch.nn.functional.<name> does on clones: the same output and the same tensor
    arguments after the call, or, where torch raises, a ValueError matching `match`."""
    ours = getattr(normlib.functional, name)
    try:  # every argument of torch's call must be one of ours, by position or by name
        bound = inspect.signature(ours).bind(input, *args, **kwargs)
    except TypeError as error:
        raise AssertionError(f"{case}: normlib.functional.{name} does not take the "
                             f"arguments torch's call has ({error})") from None
    theirs = {k: to_torch(v) for k, v in bound.arguments.items()}  # by parameter name
    mine = {k: to_numpy(v) for k, v in bound.arguments.items()}
    try:
        expected = getattr(torch.nn.functional, name)(**theirs)
    except Exception as error:  # torch rejects the call: so must we, clearly
        with pytest.raises(ValueError, match=match) as raised:
            ours(**mine)
        return f"torch raised {type(error).__name__}, normlib ValueError: {raised.value}"
    assert match is None, f"{case}: torch accepted a call expected to raise ({match})"
    with warnings.catch_warnings():
        if input.numel() == 0:  # an empty input reaches no kernel, so NumPy has no warning
            warnings.simplefilter("error", RuntimeWarning)
        actual = ours(**mine)
    assert_close(actual, expected.numpy(), f"output {case}")
    for key, value in theirs.items():
        if isinstance(value, torch.Tensor):
            assert_close(mine[key], value.numpy(), f"{key} after the call {case}")
    return None


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", OPS)
def test_opinfo_samples(op_db, name, dtype):
    """Every OpInfo sample of the operation (each variant of its entry), empty inputs
    included and counted. None is skipped: a sample torch rejects must be rejected by ours
    too (a ValueError; torch 2.13 has none), and one with an argument our signature does not
    take fails (the course promises torch's signatures)."""
    entries = [op for op in op_db if op.name == f"nn.functional.{name}"]
    assert entries, f"torch's op_db has no entry nn.functional.{name}"
    failures, ran, empty = [], 0, 0
    for op in entries:
        torch.manual_seed(0)  # the samples' values are random: the same ones every run
        for i, sample in enumerate(op.sample_inputs("cpu", dtype, requires_grad=False)):
            case = (f"for {op.name}{'.' + op.variant_test_name if op.variant_test_name else ''}"
                    f" sample {i}: input {describe(sample.input)} {dtype}, args "
                    f"{[describe(a) for a in sample.args]}, kwargs "
                    f"{ {k: describe(v) for k, v in sample.kwargs.items()} }")
            try:
                assert_same(name, sample.input, sample.args, sample.kwargs, case)
            except Exception as error:  # report every sample that differs, not the first
                failures.append(str(error) if isinstance(error, AssertionError)
                                else f"{case}: {type(error).__name__}: {error}")
                continue
            ran += 1
            empty += sample.input.numel() == 0
    assert not failures, f"{len(failures)} of {ran + len(failures)} samples differ:\n" + (
        "\n".join(failures))
    assert ran > 0
    if name in OPINFO_HAS_EMPTY:
        assert empty >= 1, f"torch's samples of {name} include no empty input any more"


def r(*shape):
    """A random tensor of float64 (cast to the case's dtype by run_case)."""
    return torch.randn(shape, dtype=torch.float64)


def var(*shape):
    """A random positive running variance."""
    return torch.rand(shape, dtype=torch.float64) + 0.5


# (operation, input shape, the other arguments as lambda: (args, kwargs)): every empty
# input torch accepts, by kind: an empty batch, batch_norm's 1-D (0,), an empty spatial dim,
# no channels, an empty normalized dim.
EMPTY_CASES = [
    ("layer_norm", (0, 4), lambda: ([(4,), r(4), r(4)], {})),
    ("layer_norm", (0, 3, 4), lambda: ([(3, 4), r(3, 4), r(3, 4)], {"eps": 0.1})),
    ("layer_norm", (2, 0, 4), lambda: ([(4,), r(4), r(4)], {})),
    ("layer_norm", (2, 0), lambda: ([(0,), r(0), r(0)], {})),  # nothing to normalize over
    ("layer_norm", (2, 3, 0), lambda: ([(3, 0)], {})),
    ("rms_norm", (0, 4), lambda: ([(4,), r(4)], {})),
    ("rms_norm", (0, 3, 4), lambda: ([(3, 4)], {"eps": 0.1})),
    ("rms_norm", (2, 3, 0), lambda: ([(3, 0), r(3, 0)], {})),
    ("batch_norm", (0,), lambda: ([r(0), var(0)], {"training": True})),  # OpInfo's sample
    ("batch_norm", (0,), lambda: ([r(3), var(3), r(3), r(3)], {"training": True})),
    ("batch_norm", (0,), lambda: ([r(3), var(3)], {"training": False})),
    ("batch_norm", (0,), lambda: ([None, None], {"training": True})),
    ("batch_norm", (0, 3), lambda: ([r(3), var(3), r(3), r(3)], {"training": True})),
    ("batch_norm", (0, 3), lambda: ([r(3), var(3), r(3), r(3)], {"training": False})),
    ("batch_norm", (0, 3, 5), lambda: ([r(3), var(3), r(3), r(3), True, 0.3], {})),
    ("batch_norm", (0, 3, 5), lambda: ([None, None, r(3)], {"training": True})),
    ("batch_norm", (2, 3, 0), lambda: ([r(3), var(3), r(3), r(3)], {"training": True})),
    ("batch_norm", (1, 3, 0), lambda: ([r(3), var(3)], {"training": True})),  # 0 values, not 1
    ("batch_norm", (2, 3, 0, 4), lambda: ([r(3), var(3)], {"training": False})),
    ("batch_norm", (2, 0, 4), lambda: ([r(0), var(0)], {"training": True})),  # no channels
    ("instance_norm", (0, 3, 5), lambda: ([], {})),
    ("instance_norm", (0, 3, 5), lambda: ([r(3), var(3)], {})),  # the stats become NaN
    ("instance_norm", (0, 3, 5), lambda: ([r(3), var(3)], {"momentum": 0.0})),  # NaN too
    ("instance_norm", (0, 3, 5), lambda: ([r(3), var(3)], {"use_input_stats": False})),
    ("instance_norm", (0, 3, 0), lambda: ([r(3), var(3)], {})),
    ("instance_norm", (2, 3, 0), lambda: ([r(3), var(3), r(3), r(3)], {})),
    ("instance_norm", (2, 3, 0), lambda: ([r(3), var(3), r(3), r(3), False], {})),
    ("instance_norm", (2, 3, 4, 0), lambda: ([None, None, r(3), r(3)], {})),
    ("instance_norm", (2, 0, 4), lambda: ([r(0), var(0)], {})),  # no channels
    ("group_norm", (0, 2), lambda: ([1, r(2), r(2)], {})),  # the case
    ("group_norm", (0, 2), lambda: ([2], {})),
    ("group_norm", (0, 6, 3), lambda: ([3, r(6), r(6)], {"eps": 0.1})),
    ("group_norm", (2, 6, 0), lambda: ([3, r(6), r(6)], {})),
    ("group_norm", (2, 6, 0, 3), lambda: ([2, r(6)], {})),
    ("group_norm", (2, 0), lambda: ([1], {})),  # no channels
]

# Empty inputs torch rejects, and the ValueError ours raise instead (a regex).
RAISING_CASES = [
    ("instance_norm", (0, 3, 1), lambda: ([], {}), "Expected more than 1 spatial element"),
    ("instance_norm", (0, 3), lambda: ([], {}), r"\(N, C, \*spatial\) with at least 3 dims"),
    ("group_norm", (0, 6, 3), lambda: ([4], {}), "divisible by num_groups"),
    ("group_norm", (0,), lambda: ([1], {}), r"\(N, C\) with at least 2 dims"),
    ("layer_norm", (0, 3), lambda: ([(4,)], {}), r"expected input with shape \(\*, 4\)"),
    ("rms_norm", (0, 3), lambda: ([(2, 3)], {}), r"expected input with shape \(\*, 2, 3\)"),
    # torch computes an empty batch norm as input * weight[0] + bias[0], and an instance
    # norm as a batch norm over N * C channels: with no channel to index, it raises.
    ("batch_norm", (0,), lambda: ([None, None, r(0)], {"training": True}),
     r"weight must be None .* input of shape \(0,\)"),
    ("batch_norm", (2, 0, 4), lambda: ([r(0), var(0), None, r(0)], {"training": True}),
     r"bias must be None .* input of shape \(2, 0, 4\)"),
    ("instance_norm", (0, 3, 5), lambda: ([None, None, r(3)], {}), "weight must be None"),
    ("instance_norm", (0, 3, 5), lambda: ([r(3), var(3), None, r(3), False], {}),
     "bias must be None"),
    ("instance_norm", (2, 0, 5), lambda: ([None, None, r(0)], {}), "weight must be None"),
]


def run_case(name, shape, arguments, dtype, match=None):
    torch.manual_seed(0)
    args, kwargs = arguments()
    cast = [a.to(dtype) if isinstance(a, torch.Tensor) else a for a in args]
    kwargs = {k: v.to(dtype) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
    case = (f"for {name} of an input {shape} {dtype}, args {[describe(a) for a in args]}, "
            f"kwargs { {k: describe(v) for k, v in kwargs.items()} }")
    return assert_same(name, torch.randn(shape, dtype=dtype), cast, kwargs, case, match)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name,shape,arguments", EMPTY_CASES,
                         ids=[f"{c[0]}{c[1]}-{i}" for i, c in enumerate(EMPTY_CASES)])
def test_empty_input(name, shape, arguments, dtype):
    assert run_case(name, shape, arguments, dtype) is None


@pytest.mark.parametrize("name,shape,arguments,match", RAISING_CASES,
                         ids=[f"{c[0]}{c[1]}-{i}" for i, c in enumerate(RAISING_CASES)])
def test_empty_input_torch_rejects(name, shape, arguments, match):
    assert run_case(name, shape, arguments, torch.float64, match) is not None


# Where torch skips its checks on an empty input, ours still check: an argument that would
# be wrong for a non-empty input of the same layout is wrong for an empty one too.
@pytest.mark.parametrize("call,error,message", [
    (lambda: normlib.functional.batch_norm(np.ones((0, 3)), np.zeros(5), np.ones(5), training=True),
     ValueError, r"running_mean must have shape \(3,\), got \(5,\)"),
    (lambda: normlib.functional.batch_norm(np.ones((0, 3)), None, None, np.ones(3, np.float32), training=True),
     TypeError, "weight has dtype float32 but input has dtype float64"),
    (lambda: normlib.functional.batch_norm(np.ones((0, 3)), None, None, training=False),
     ValueError, "running_mean and running_var are required when training=False"),
])
def test_empty_input_is_checked_like_any_other(call, error, message):
    with pytest.raises(error, match=message):
        call()


# (module, constructor arguments, input shape, training): the modules on empty inputs.
MODULE_CASES = [
    ("LayerNorm", (4,), (0, 4), True),
    ("LayerNorm", ((3, 4),), (0, 3, 4), True),
    ("LayerNorm", (0,), (2, 0), True),
    ("RMSNorm", (4,), (0, 4), True),
    ("RMSNorm", (4,), (2, 0, 4), True),
    ("BatchNorm1d", (3,), (0, 3), True),
    ("BatchNorm1d", (3,), (0, 3), False),
    ("BatchNorm1d", (3,), (0, 3, 5), True),
    ("BatchNorm1d", (3,), (2, 3, 0), True),
    ("BatchNorm1d", (3, 1e-5, None), (2, 3, 0), True),  # momentum=None: a cumulative average
    ("BatchNorm2d", (3,), (0, 3, 2, 2), True),
    ("BatchNorm2d", (3,), (2, 3, 0, 2), False),
    ("InstanceNorm1d", (3,), (0, 3, 4), True),
    ("InstanceNorm1d", (3,), (3, 0), True),  # unbatched (C, L)
    ("InstanceNorm1d", (3, 1e-5, 0.1, True), (2, 3, 0), True),
    ("InstanceNorm1d", (3, 1e-5, 0.1, False, True), (0, 3, 4), True),  # the stats become NaN
    ("InstanceNorm1d", (3, 1e-5, 0.1, False, True), (0, 3, 4), False),
    ("InstanceNorm2d", (3, 1e-5, 0.1, True, True), (2, 3, 0, 2), True),
    ("GroupNorm", (3, 6), (0, 6, 3), True),
    ("GroupNorm", (3, 6), (0, 6), True),
    ("GroupNorm", (3, 6), (2, 6, 0), True),
]
# torch's GroupNorm backward gives weight.grad = NaN on an empty spatial dim (it multiplies
# the zero sums by the mean and rstd of no values, NaN); ours gives zeros, the gradient of
# an output with no elements, and is compared with zeros there.
TORCH_NAN_GRAD = {("GroupNorm", (2, 6, 0)): "weight"}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("module,args,shape,training", MODULE_CASES,
                         ids=[f"{c[0]}{c[2]}-{i}" for i, c in enumerate(MODULE_CASES)])
def test_module_on_empty_input(module, args, shape, training, dtype):
    """Forward and backward of each normlib.nn module on an empty input: the output, the
    input's and every parameter's gradient, and every buffer afterwards, as torch's twin."""
    case = f"for {module}{args} on an input {shape} {dtype}, training={training}"
    results = []
    for namespace in (normlib.nn, torch.nn):
        layer = getattr(namespace, module)(*args, dtype=dtype).train(training)
        x = torch.randn(shape, dtype=dtype, requires_grad=True)
        y = layer(x)
        y.backward(torch.randn(y.shape, dtype=dtype))
        results.append([("output", y), ("input.grad", x.grad)]
                       + [(f"{n}.grad", p.grad) for n, p in layer.named_parameters()]
                       + list(layer.named_buffers()))
    names = [[name for name, _ in result] for result in results]
    assert names[0] == names[1], f"{case}: {names[0]}, torch {names[1]}"
    nan_grad = TORCH_NAN_GRAD.get((module, shape))
    for (name, actual), (_, expected) in zip(*results):
        expected = expected.detach().numpy()
        if name == f"{nan_grad}.grad":
            assert np.isnan(expected).all(), f"torch's {name} is no longer NaN {case}"
            expected = np.zeros_like(expected)
        if name == "num_batches_tracked":  # an int64 count
            assert actual.item() == expected.item(), f"{name} {case}"
        else:
            assert_close(actual.detach().numpy(), expected, f"{name} {case}")


@pytest.mark.parametrize("module,args,shape,torch_error", [
    ("InstanceNorm1d", (3, 1e-5, 0.1, True), (0, 3, 4), IndexError),  # weight[0] of nothing
    ("InstanceNorm1d", (3,), (0, 3, 1), ValueError),  # one spatial element
    ("BatchNorm1d", (3,), (0,), ValueError),  # the module takes no 1-D input
])
def test_module_on_empty_input_torch_rejects(module, args, shape, torch_error):
    x = torch.randn(shape, dtype=torch.float64)
    with pytest.raises(torch_error):
        getattr(torch.nn, module)(*args, dtype=torch.float64)(x)
    with pytest.raises(ValueError, match=r"must be None|more than 1 spatial|expected 2D or 3D"):
        getattr(normlib.nn, module)(*args, dtype=torch.float64)(x)


# every kernel, where the wrappers find it (normlib.functional and Unit 3's modules of
# normlib.nn import theirs when called; nn's LayerNorm holds its own names)
KERNELS = {normlib.layer_norm: ["layer_norm_forward", "layer_norm_backward"],
           normlib.nn: ["layer_norm_forward", "layer_norm_backward"],
           normlib.rms_norm: ["rms_norm_forward", "rms_norm_backward"],
           normlib.batch_norm: ["batch_norm_forward", "batch_norm_backward"],
           normlib.instance_norm: ["instance_norm_forward", "instance_norm_backward"],
           normlib.group_norm: ["group_norm_forward", "group_norm_backward"]}


def test_empty_input_never_reaches_a_kernel(monkeypatch):
    """The wrappers give torch's result on an empty input whatever the kernels do with
    one (the graded checks give students none): here every kernel raises."""
    def kernel(*args, **kwargs):
        raise AssertionError("a kernel was called on an empty input")

    for module, names in KERNELS.items():
        for name in names:
            monkeypatch.setattr(module, name, kernel)
    for name, shape, arguments in EMPTY_CASES:
        test_empty_input(name, shape, arguments, torch.float32)
    for case in MODULE_CASES:
        test_module_on_empty_input(*case, torch.float32)


def test_runs_against_the_reference():
    """What these tests call is the reference's, solutions/normlib: tests/conftest.py puts
    it first on sys.path; what they compare with (normkit.testing's tolerances) is the
    course's one normkit/."""
    for module in (normlib.functional, normlib.nn):
        assert Path(module.__file__).parts[-3:-1] == ("solutions", "normlib"), module.__file__
    assert Path(normkit.testing.__file__).parent == REPO / "normkit"
