"""A compiled kernel's compile step in a measuring runner (tools/sandboxed/peer.py,
Peer._op_compile), during which no code of the student's may run: the judge leaves the
step out of the kernel's memory (what Numba's compiler allocates is not the kernel's), so
code of the student's running then could keep memory for the kernel unseen (a scratch
buffer a profile hook allocates while Numba compiles, which the kernel then uses).

    before = state()        in the runner, once Numba is loaded, before any student code
    why = refusal(before)   after the student's module is imported: what it installed
                            that would run during the step (or None)
    why = compile_quietly(compile, function, signature, before)   the step itself

Two walls. First, what the module may have installed to run during the step is refused
(a key of REFUSED): a profile or trace hook (sys's, threading's), a garbage collector
callback, a signal handler or timer, an import hook (sys.meta_path, sys.path_hooks), or
an extension of Numba's compiler (@overload, @intrinsic, @register_jitable,
@overload_method, a typeof, lowering, boxing or data model of its own: a typing hook runs
while Numba compiles). (Numba 0.68 has no @generated_jit: test_compiled checks.) Second,
the step runs under cProfile, and any Python code that ran in it and that neither existed
before the student's code ran (Numba's, NumPy's, Python's) nor was made during the step
(Numba's generated wrappers, a module Numba first imports then) is refused ("ran"): that
catches a trigger nobody listed (a function of Numba's replaced by the student's, a global
whose _numba_type_ is a property, a finalizer). The judge words
each key itself (tools/judge/judge.py): nothing the runner says reaches the student.
"""

import cProfile
import gc
import signal
import sys
import threading
import types
from typing import NamedTuple

REFUSED = ("hook", "callback", "signal", "import", "extension", "ran")


class State(NamedTuple):
    """What runs during a compile step, taken before any student code runs."""

    codes: dict  # {id: code object} of every code object alive (functions' and the code
    # they nest), kept alive here so that no later object takes one's id
    callbacks: tuple  # gc.callbacks
    signals: tuple  # every signal's handler
    finders: tuple  # sys.meta_path, then sys.path_hooks
    extensions: tuple  # the sizes of Numba's registries of extensions


def _codes():
    """{id: code object} of every code object that a live function holds, and of the code
    objects they nest (a def's code in its module's). (Frozen objects, gc.freeze(), are
    left out of gc.get_objects(): thawed first, and frozen again after.)"""
    gc.unfreeze()
    found, todo = {}, [f.__code__ for f in gc.get_objects() if type(f) is types.FunctionType]
    while todo:
        code = todo.pop()
        if id(code) not in found:
            found[id(code)] = code
            todo.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    gc.freeze()
    return found


def _signals():
    return tuple(signal.getsignal(s) for s in sorted(signal.valid_signals())
                 if s not in (signal.SIGKILL, signal.SIGSTOP))


def _extensions():
    """The sizes of Numba's registries that @overload, @intrinsic, @register_jitable,
    @overload_method/attribute, typeof_impl.register, @lower_builtin, @box/@unbox and
    register_default (a data model) add to."""
    from numba.core import datamodel, imputils, pythonapi
    from numba.core.typing import templates
    from numba.core.typing.typeof import typeof_impl

    sizes = [len(typeof_impl.registry), len(datamodel.registry.default_manager._handlers)]
    for registry in (templates.builtin_registry, imputils.builtin_registry,
                     pythonapi._boxers, pythonapi._unboxers, pythonapi._reflectors):
        sizes += [len(v) for v in vars(registry).values() if isinstance(v, (list, dict))]
    return tuple(sizes)


def state():
    """The State of this process now (Numba loaded)."""
    return State(_codes(), tuple(gc.callbacks), _signals(),
                 (*sys.meta_path, None, *sys.path_hooks), _extensions())


def refusal(before):
    """The key (REFUSED) of what the student's code installed that would run during the
    compile step, or None; every profile and trace hook cleared either way."""
    hooks = (sys.getprofile(), sys.gettrace(), threading.getprofile(), threading.gettrace())
    sys.setprofile(None)
    sys.settrace(None)
    threading.setprofile(None)
    threading.settrace(None)
    if any(h is not None for h in hooks):
        return "hook"
    if tuple(gc.callbacks) != before.callbacks:
        return "callback"
    if _signals() != before.signals or any(
            signal.getitimer(t) != (0.0, 0.0) for t in (signal.ITIMER_REAL,
                                                        signal.ITIMER_VIRTUAL,
                                                        signal.ITIMER_PROF)):
        return "signal"
    if (*sys.meta_path, None, *sys.path_hooks) != before.finders:
        return "import"
    if _extensions() != before.extensions:
        return "extension"
    return None


def compile_quietly(compile_, function, signature, before):
    """compile_(function, signature) (Numba's own method, kept before any student code
    ran), profiled: "ran" if Python code of the student's ran during it (see the module's
    docstring), else None."""
    alive = _codes()  # (the student's code included: made before the step)
    profile = cProfile.Profile()
    profile.enable()
    try:
        compile_(function, signature)
    finally:
        stolen = sys.getprofile() is not profile
        profile.disable()
    if stolen:
        return "ran"  # (only code that ran during the step can take the profiler's place)
    for entry in profile.getstats():  # (code made during the step is not in alive)
        code = entry.code
        if isinstance(code, types.CodeType) and id(code) in alive and \
                id(code) not in before.codes:
            return "ran"
    return None
