"""A compiled kernel's compile step in a measuring runner (peer.py, Peer._op_compile), when
no code of the student's may run: the judge leaves the step out of the kernel's memory, so
student code running then (a profile hook while Numba compiles) could keep memory unseen.

    before = state()        once Numba is loaded, before any student code
    why = refusal(before)   after the student's module is imported: what it installed
    why = foreign(kernel, dispatcher_class, before)   a value the kernel names
    why = compile_quietly(compile, function, signature, before)   the step itself

Three walls, each a key of REFUSED (None: passed): what the module installed to run during
the step (a hook, gc callback, signal or timer, import hook, extension of Numba's compiler);
a value the kernel names whose class or code the student's code made ("global"); and,
the step run under cProfile, Python code that ran in it and existed before the step but not
before the student's code ("ran"). The judge words each key; docs/security.md, section 4.
"""

import cProfile
import gc
import signal
import sys
import threading
import types
from typing import NamedTuple

HEAP_TYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made at run time (a class statement's)
REFUSED = ("hook", "callback", "signal", "import", "extension", "global", "ran")


class State(NamedTuple):
    """What runs during a compile step, taken before any student code runs."""

    codes: dict  # {id: code object} of every code object alive (functions' and the code
    # they nest), kept alive here so that no later object takes one's id
    callbacks: tuple  # gc.callbacks
    signals: tuple  # every signal's handler
    finders: tuple  # sys.meta_path, then sys.path_hooks
    extensions: tuple  # the sizes of Numba's registries of extensions
    types: dict  # {id: class} of every class alive, kept alive here too


def _alive():
    """Every object the garbage collector tracks (frozen ones too, gc.freeze(): thawed for
    the listing, frozen again after)."""
    gc.unfreeze()
    found = gc.get_objects()
    gc.freeze()
    return found


def _codes(objects):
    """{id: code object} of every code object that a function of objects holds, and of the
    code objects they nest (a def's code in its module's: _nested)."""
    return {id(c): c for f in objects if type(f) is types.FunctionType
            for c in _nested(f.__code__)}


def _trusted(cls, before):
    """Whether a class existed before the student's code ran: one of Python's static types
    (built in C, never the student's), or a class alive then."""
    return not cls.__flags__ & HEAP_TYPE or id(cls) in before.types


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
    objects = _alive()
    classes = {id(o): o for o in objects if issubclass(type(o), type)}
    return State(_codes(objects), tuple(gc.callbacks), _signals(),
                 (*sys.meta_path, None, *sys.path_hooks), _extensions(), classes)


def foreign(function, dispatcher, before):
    """"global" if a Numba kernel (function, of class dispatcher) names a value whose type
    Numba could only learn by running code of the student's (typeof asks an object of a
    class of the student's for its _numba_type_, a property), else None: every value its
    code names (its globals, its closure's and its defaults, the attributes of the modules
    it names, and the same of each kernel of the dispatcher's class it calls) must be of a
    class that existed before the student's code ran, a function of trusted code (Numba's,
    NumPy's), or such a kernel."""
    todo, seen = [function], set()
    while todo:
        kernel = todo.pop()
        if id(kernel) in seen:
            continue
        seen.add(id(kernel))
        python = kernel.py_func
        code, names = python.__code__, set()
        for nested in _nested(code):
            names.update(nested.co_names)
        scope = python.__globals__
        values = [scope[n] for n in names if n in scope]
        values += [c.cell_contents for c in python.__closure__ or ()]
        values += list(python.__defaults__ or ())
        modules = [v for v in values if type(v) is types.ModuleType]
        values += [vars(m)[n] for m in modules for n in names if n in vars(m)]
        for value in values:
            if type(value) is dispatcher:
                todo.append(value)
            elif not _trusted(type(value), before) or (
                    issubclass(type(value), type) and not _trusted(value, before)) or (
                    type(value) is types.FunctionType and
                    id(value.__code__) not in before.codes):
                return "global"
    return None


def _nested(code):
    """code and the code objects it nests (a comprehension's, a lambda's)."""
    found, todo = [], [code]
    while todo:
        found.append(todo.pop())
        todo.extend(c for c in found[-1].co_consts if isinstance(c, types.CodeType))
    return found


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
    alive = _codes(_alive())  # (the student's code included: made before the step)
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
