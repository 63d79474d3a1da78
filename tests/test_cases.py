"""The case rules (docs/mistakes.md, "The case rules"): each exercise's visible cases vary
every argument and mode of its contract, so that code ignoring one fails.

Shown for every exercise at once with generic mutants of the reference, each ignoring one
argument or mode of the contract (a function's signature, a module's constructor and
train/eval, an autograd Function's forward), which the exercise's visible check must fail:
"p at its default", "p never at its default", "p frozen" (an argument without a default),
"float64 computed in float32", "eval() ignored" and "train() ignored". Where a mutant cannot
fail, EXEMPT says why. The large-offset rule and the block rule read the cases' inputs
(OFFSET, BLOCKED).
"""

import functools
import importlib
import inspect

import numpy as np
import pytest
import torch

from normkit.checks import namespace
from normkit.testing import CheckFailed
from normlib.layer_norm_fast import BLOCK_BYTES
from tests.conftest import exercise_param
from tools.course.exercises import by_number

EXERCISES = by_number()
COMPILED = {"7.3", "7.4", "9.5"}  # Numba kernels: a Python wrapper is no kernel (the code reader
# refuses it), so their arguments are read from the cases instead (test_compiled_cases)
CPU = "one device here, the CPU"
PROVIDED = ("5.2 grades the layer's forward: its constructor, which takes this, is provided "
            "(5.3's cases pass layer_norm_eps and bias through your stack; batch_first=False "
            "raises there)")
SIXTEEN = ("the contract: a 16-bit x computed in float32 (a float64 x is outside it; a float32 "
           "step is what the exercise asks)")
NO_DROPOUT = ("adaLN-Zero's block has no dropout (DiT's has none: drop=0), nor anything else "
              "that depends on the mode: both modes compute the same")
EXEMPT = {  # (number, mutant): why it cannot fail
    **{(n, "device at its default"): CPU for n in ("5.2", "5.3", "8.1")},
    **{("5.2", f"{p} at its default"): PROVIDED for p in ("layer_norm_eps", "bias",
                                                          "batch_first")},
    **{(n, "float64 computed in float32"): SIXTEEN for n in ("6.3", "6.4", "6.5")},
    **{("8.5", f"{mode}() ignored"): NO_DROPOUT for mode in ("eval", "train")},
    **{("9.2", f"{mode}() ignored"): "ReZero's block has no dropout here, nor anything "
       "else that depends on the mode: both modes compute the same" for mode in ("eval",
                                                                                "train")},
}
OFFSET = {"1.1", "1.2", "3.1", "3.3", "3.4", "3.5", "6.1", "6.3", "7.1", "7.3"}  # kernels
# whose naive formula (the one-pass variance) cancels far from 0
BLOCKED = {"7.1": BLOCK_BYTES, "7.2": BLOCK_BYTES}  # bytes of rows per block of the
# reference (solutions/normlib/layer_norm_fast.py), whose edges the cases must cover


def target(number):
    exercise = EXERCISES[number]
    return importlib.import_module(exercise.module), exercise.name


def run_visible(number, implementation):
    """Exercise `number`'s visible check with implementation in place of its function or
    class: None if it passes, else the exception it raised."""
    module, name = target(number)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(module, name, implementation)
        try:
            exec(compile(EXERCISES[number].visible, f"<check {number}>", "exec"), namespace())
        except Exception as error:  # (a failed check; a stub's NotImplementedError too)
            return error
    return None


def is_function_class(obj):
    return inspect.isclass(obj) and issubclass(obj, torch.autograd.Function)


def signature(reference):
    """The contract's parameters: a function's, a module's constructor's (without self), an
    autograd Function's forward's (without ctx)."""
    if is_function_class(reference):
        return list(inspect.signature(reference.forward).parameters.values())[1:]
    if inspect.isclass(reference):
        return list(inspect.signature(reference.__init__).parameters.values())[1:]
    return list(inspect.signature(reference).parameters.values())


def with_arguments(reference, change):
    """reference, its contract's arguments passed through change(dict of name: value) first
    (a function, a module class whose constructor, an autograd Function whose forward)."""
    params = signature(reference)
    names = [p.name for p in params]

    def bound(args, kwargs):
        values = {p.name: p.default for p in params if p.default is not p.empty}
        values.update(zip(names, args))
        values.update(kwargs)
        return change(values)

    if is_function_class(reference):
        class Mutant(reference):
            @staticmethod
            def forward(ctx, *args, **kwargs):
                return reference.forward(ctx, **bound(args, kwargs))
        return Mutant
    if inspect.isclass(reference):
        class Mutant(reference):
            def __init__(self, *args, **kwargs):
                super().__init__(**bound(args, kwargs))
        Mutant.__name__ = reference.__name__
        return Mutant

    @functools.wraps(reference)
    def mutant(*args, **kwargs):
        return reference(**bound(args, kwargs))
    return mutant


def recorded(number):
    """[{name: value}]: the contract's arguments of each call the visible check makes of the
    reference (a module's constructions, a Function's forwards)."""
    module, name = target(number)
    reference = getattr(module, name)
    calls = []

    def record(values):
        calls.append(dict(values))
        return values

    assert run_visible(number, with_arguments(reference, record)) is None
    return calls


def plain(value):
    """Whether an argument is a setting (a number, a string, a tuple of numbers, a bool,
    None), not data: the kind a "frozen" mutant holds fixed."""
    return value is None or isinstance(value, (bool, int, float, str)) or (
        isinstance(value, tuple) and all(isinstance(v, int) for v in value))


def at_default(value, default):
    return value is default if default is None else (type(value) is type(default)
                                                    and value == default)


def in_float32(value):
    """A float64 array or tensor as float32 (what a float32 computation sees), in tuples
    too; else as it is."""
    if isinstance(value, np.ndarray) and value.dtype == np.float64:
        return value.astype(np.float32)
    if isinstance(value, torch.Tensor) and value.dtype == torch.float64:
        return value.float()
    if isinstance(value, tuple):
        return tuple(in_float32(v) for v in value)
    return value


def float64_in(value):
    """Whether a float64 array or tensor is among value (in tuples too)."""
    if isinstance(value, tuple):
        return any(float64_in(v) for v in value)
    return getattr(value, "dtype", None) in (np.float64, torch.float64)


def back_to_float64(result):
    """A result's float32 arrays and tensors (in tuples, lists and dicts too) as float64."""
    if isinstance(result, np.ndarray) and result.dtype == np.float32:
        return result.astype(np.float64)
    if isinstance(result, torch.Tensor) and result.dtype == torch.float32:
        return result.double()
    if isinstance(result, (tuple, list)):
        return type(result)(back_to_float64(r) for r in result)
    if isinstance(result, dict):
        return {k: back_to_float64(v) for k, v in result.items()}
    return result


def in_float32_inside(reference):
    """reference computing a float64 call in float32, its results cast back to float64 (an
    autograd Function: its forward and its backward)."""
    if is_function_class(reference):
        class Mutant(reference):
            @staticmethod
            def forward(ctx, *args):
                ctx.float64 = any(float64_in(a) for a in args)
                result = reference.forward(ctx, *map(in_float32, args))
                return back_to_float64(result) if ctx.float64 else result

            @staticmethod
            def backward(ctx, *grads):
                result = reference.backward(ctx, *map(in_float32, grads))
                return back_to_float64(result) if ctx.float64 else result
        return Mutant

    @functools.wraps(reference)
    def mutant(*args, **kwargs):
        float64 = any(float64_in(a) for a in list(args) + list(kwargs.values()))
        result = reference(*map(in_float32, args), **{k: in_float32(v)
                                                       for k, v in kwargs.items()})
        return back_to_float64(result) if float64 else result
    return mutant


def mode_ignored(reference, mode):
    """A module class whose train() always sets `mode` (True: eval() ignored; False: every
    module in evaluation mode from its construction on)."""
    class Mutant(reference):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.train()

        def train(self, _=True):
            return super().train(mode)
    Mutant.__name__ = reference.__name__
    return Mutant


def mutants(number):
    """{description: the mutant} of exercise `number`'s reference (module docstring)."""
    module, name = target(number)
    reference = getattr(module, name)
    calls = recorded(number)
    found = {}
    for p in signature(reference):
        seen = [call[p.name] for call in calls if p.name in call]
        if p.default is not p.empty:
            found[f"{p.name} at its default"] = with_arguments(
                reference, lambda v, p=p: {**v, p.name: p.default})

            def refuse(v, p=p):
                if at_default(v[p.name], p.default):
                    raise ValueError(f"mutant: {p.name} at its default")
                return v
            found[f"{p.name} never at its default"] = with_arguments(reference, refuse)
        elif seen and all(plain(v) for v in seen):
            found[f"{p.name} frozen"] = with_arguments(
                reference, lambda v, p=p, first=seen[0]: {**v, p.name: first})
        elif seen and any(v is None for v in seen):  # (an optional parameter: affine off)
            def refuse_none(v, p=p):
                if v[p.name] is None:
                    raise ValueError(f"mutant: {p.name} is None")
                return v
            found[f"{p.name} never None"] = with_arguments(reference, refuse_none)
    if not inspect.isclass(reference) or is_function_class(reference):
        found["float64 computed in float32"] = in_float32_inside(reference)
    elif issubclass(reference, torch.nn.Module):
        found["eval() ignored"] = mode_ignored(reference, True)
        found["train() ignored"] = mode_ignored(reference, False)
    return found


CASES = [exercise_param(n) for n in EXERCISES if n not in COMPILED]


@pytest.mark.parametrize("number", CASES)
def test_every_argument_and_mode_of_the_contract_is_varied(number):
    """Each generic mutant of the reference fails the visible check (module docstring)."""
    survivors = []
    for description, mutant in mutants(number).items():
        if (number, description) in EXEMPT:
            continue
        if not fails_by_its_check(description, run_visible(number, mutant)):
            survivors.append(description)
    assert not survivors, (f"Exercise {number}: the visible check passes the reference with "
                           f"{survivors}, or fails it only by an error of the code: add a "
                           "case that varies it (docs/mistakes.md)")


def fails_by_its_check(description, error):
    """Whether a mutant's run failed as a student's would: a CheckFailed, the one short
    message a notebook shows (a comparison's, or an error of the code with its line), never
    an error raised past the check (a traceback). (A "never" mutant fails by raising: that
    the case is there is all it shows.)"""
    if " never " in f" {description} ":
        return error is not None
    return isinstance(error, CheckFailed)


def test_an_exemption_is_needed():
    """Every mutant EXEMPT names exists and passes the visible check (else the exemption
    hides nothing and goes)."""
    for number, description in EXEMPT:
        mutant = mutants(number)[description]
        assert run_visible(number, mutant) is None, (number, description)


def survives(number, description):
    """Whether exercise `number`'s mutant `description` passes its visible check."""
    return run_visible(number, mutants(number)[description]) is None


def offset_of(number):
    first = signature(getattr(*target(number)))[0].name
    return max(far_from_zero(call[first]) for call in recorded(number))


def has_dtype(arrays, dtype):
    return any(getattr(a, "dtype", None) == dtype for a in arrays)


@pytest.mark.parametrize("unit, check, number, drop, broken", [
    ("unit4", "check_forward", "4.1", lambda a, k: "eps" in k,  # the arguments' rule
     lambda: survives("4.1", "eps at its default")),
    ("unit5", "check_layer", "5.2", lambda a, k: k.get("dropout") and not k.get("training"),
     lambda: survives("5.2", "eval() ignored")),  # the modes' rule
    ("unit5", "check_layer", "5.2", lambda a, k: k.get("training"),
     lambda: survives("5.2", "train() ignored")),
    ("unit1", "check_stats", "1.1", lambda a, k: has_dtype(a, np.float64),  # float64's
     lambda: survives("1.1", "float64 computed in float32")),
    ("unit1", "check_stats", "1.1", lambda a, k: far_from_zero(a[0]) >= FAR,  # offsets'
     lambda: offset_of("1.1") < FAR),
    ("unit7", "check_fast_forward", "7.1", lambda a, k: a[0].shape == (601, 256),  # blocks'
     lambda: pytest.raises(AssertionError, test_a_blocked_kernel_has_cases_at_and_across_its_blocks,
                           "7.1")),
])
def test_a_rule_fails_when_its_case_is_removed(monkeypatch, unit, check, number, drop, broken):
    """Each rule holds by a case of its own: without it, a mutant survives, or the inputs
    lack what the rule asks."""
    module = importlib.import_module(f"normkit.checks.{unit}")
    function = getattr(module, check)

    def without(*args, **kwargs):
        if not drop(args, kwargs):
            function(*args, **kwargs)

    monkeypatch.setattr(module, check, without)
    assert broken()


def far_from_zero(x):
    """How far x lies from 0 against its spread: |mean| / std over the whole array."""
    x = np.asarray(x, dtype=np.float64)
    return abs(float(x.mean())) / max(float(x.std()), 1e-300)


FAR = 50  # an offset of 50 spreads and more: one-pass E[x^2] - E[x]^2 loses 2 * log10(50),
# over 3, of float32's 7 digits, far beyond the error model's tolerance


@pytest.mark.parametrize("number", [exercise_param(n) for n in sorted(OFFSET - COMPILED)])
def test_a_kernel_whose_naive_formula_cancels_has_a_large_offset_case(number):
    first = signature(getattr(*target(number)))[0].name  # x, the data
    assert max(far_from_zero(call[first]) for call in recorded(number)) >= FAR, \
        f"Exercise {number}: no visible case lies {FAR} spreads from 0"


@pytest.mark.parametrize("number", [exercise_param(n) for n in sorted(BLOCKED)])
def test_a_blocked_kernel_has_cases_at_and_across_its_blocks(number):
    """Rows at a multiple of the block, more than a block with a remainder, fewer than a
    block, and a block of more rows than the row is long (H)."""
    found = set()
    for call in recorded(number):
        x = call["x"]
        h = int(np.prod(call["normalized_shape"]))
        rows, block = x.size // h, max(1, BLOCKED[number] // (h * x.itemsize))
        found |= {"a multiple" for _ in [0] if rows >= 2 * block and rows % block == 0}
        found |= {"a remainder" for _ in [0] if rows > block and rows % block}
        found |= {"fewer" for _ in [0] if rows < block}
        found |= {"rows > H" for _ in [0] if min(rows, block) > h}
    assert found == {"a multiple", "a remainder", "fewer", "rows > H"}, found


def compiled_cases(number, source):
    """[{name: value}]: the arguments of each call of the compiled exercise's check function
    (unit7.check_compiled_forward or _backward) that source makes: "visible" (the
    registered visible cases) or "hidden" (the check cell's hidden tests), recorded, not
    run (no kernel is compiled)."""
    from normkit.checks import CHECKS, unit7, unit9

    unit, name = {"7.3": (unit7, "check_compiled_forward"),
                  "7.4": (unit7, "check_compiled_backward"), "9.5": (unit9, "check_fused")}[number]
    function = getattr(unit, name)
    calls = []

    def record(*args, **kwargs):
        bound = inspect.signature(function).bind(*args, **kwargs)
        bound.apply_defaults()
        calls.append(dict(bound.arguments))

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(unit, name, record)
        if source == "visible":
            CHECKS[number][0]()
        else:
            exec(compile(EXERCISES[number].hidden, f"<hidden {number}>", "exec"), {})
    return calls


@pytest.mark.parametrize("source", ["visible", "hidden"])
def test_compiled_cases(source):
    """7.3 and 7.4, whose Numba kernels no Python mutant can stand in for (COMPILED), read
    from their cases: eps takes a value of its own (7.3), and the cases lie far from 0 and
    come in float32 and float64 (a float32 statistic or partial sum fails the latter)."""
    forward = compiled_cases("7.3", source)
    assert {call["eps"] for call in forward} - {1e-5}, "no eps of its own"
    for number in COMPILED:
        cases = compiled_cases(number, source)
        assert {call["x"].dtype for call in cases} == {np.dtype(np.float32),
                                                       np.dtype(np.float64)}, number
        assert max(far_from_zero(call["x"]) for call in cases) >= FAR or number in (
            "7.4", "9.5"), number  # (7.4's saved statistics make the offset the forward's
        # concern; 9.5's RMSNorm subtracts no mean, so an offset cancels nothing)
