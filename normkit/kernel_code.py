"""What a Numba kernel's code shows (Exercises 6.7 and 6.8's checks): a data race, fastmath
flags that compile NaN and inf away, no parallel loop. Read from the code, since none of
the three shows reliably in one run's numbers.

Races.
Two iterations of a `prange` loop run on different threads at the same time. A write in
the loop's body to an element that another iteration may write too is a data race: both
threads read the old value, both add their share, and one of the two writes is lost. How
often that happens depends on the machine, the load and the number of threads (on one
thread, never), so a race is found from the loop's structure, not from one run's numbers:

    for r in prange(rows):
        for j in range(h):
            dweight[j] += grad_output[r, j] * x_hat     # every row writes dweight[j]: a race

An element written in the body belongs to its iteration when its index involves the loop's
variable (dweight_parts[p, j] in a loop over parts p), a name computed from it (a row r of
part p), or the thread's id (numba.get_thread_id()); or when the array itself is made in
the body (a scratch row of the iteration's own). A reduction into a scalar (total += ...)
or a whole array (dbias += row) is one that Numba itself makes private to each thread.
"""

import ast
import inspect
from pathlib import Path

THREAD_IDS = ("get_thread_id", "_get_thread_id")  # numba's (and its internal name)
SOURCE_BYTES = 256 * 1024  # the largest source read (a student's module is a few KB)


def module_source(function):
    """(the source text of the module that defines function, the function's name there): a
    Numba kernel (its py_func's file), a plain function, or at grading the judge's proxy
    of the student's function (the judge reads the submission's file, and the name is the
    exercise's; no student code runs for it). (None, None) where there is none to read."""
    if hasattr(function, "remote_source"):
        return function.remote_source()
    python = getattr(function, "py_func", function)
    try:
        path = inspect.getsourcefile(python)
        text = Path(path).read_text(encoding="utf-8", errors="replace")
        return text[:SOURCE_BYTES], python.__name__
    except (TypeError, OSError, AttributeError):
        return None, None


def _names(node):
    """The names a piece of code reads or binds."""
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _bound(target):
    """The names an assignment's target binds: a name, or the names of a tuple of them (a
    subscript or an attribute binds none: it writes into an object)."""
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, (ast.Tuple, ast.List)):
        return set().union(*map(_bound, target.elts))
    return set()


def _is_call_to(node, names):
    """Whether node is a call of a function or method of one of these names."""
    return isinstance(node, ast.Call) and (
        getattr(node.func, "id", None) in names or getattr(node.func, "attr", None) in names)


def _owned(loop):
    """The names that belong to one iteration of a prange loop: its variable, and every
    name the body computes from an owned name or the thread's id (to a fixed point)."""
    owned = _names(loop.target)
    steps = []  # (the names bound, the expression they come from)
    for node in ast.walk(loop):
        if node is loop:
            continue
        if isinstance(node, ast.Assign):
            steps.append((set().union(*map(_bound, node.targets)), node.value))
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.value is not None:
            steps.append((_bound(node.target), node.value))
        elif isinstance(node, ast.For):
            steps.append((_bound(node.target), node.iter))
    changed = True
    while changed:
        changed = False
        for bound, value in steps:
            thread = any(_is_call_to(n, THREAD_IDS) for n in ast.walk(value))
            if (thread or _names(value) & owned) and not bound <= owned:
                owned |= bound
                changed = True
    return owned


def _made_in(loop):
    """The names the loop's body binds by assignment to a name (its own arrays, scalars)."""
    made = set()
    for node in ast.walk(loop):
        if isinstance(node, ast.Assign):
            made |= set().union(*map(_bound, node.targets))
    return made


def _function(source, name):
    """(the module's tree, the top-level def of `name`) of a module's source, or None."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    function = next((n for n in tree.body if isinstance(n, ast.FunctionDef)
                     and n.name == name), None)
    return None if function is None else (tree, function)


def races(source, name):
    """[(line, array, loop's line)]: the writes, in function `name` of a module's source, to
    an element of an array that two iterations of one of its prange loops may both write.
    [] where there is none, or where the source or function cannot be read."""
    parsed = _function(source, name)
    if parsed is None:
        return []
    found, function = [], parsed[1]
    for loop in ast.walk(function):
        if not (isinstance(loop, ast.For) and _is_call_to(loop.iter, ("prange",))):
            continue
        owned, made = _owned(loop), _made_in(loop)
        for node in ast.walk(loop):
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, ast.AugAssign) else []
            for target in targets:
                if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) \
                        and target.value.id not in made and not _names(target.slice) & owned:
                    found.append((node.lineno, target.value.id, loop.lineno))
    return sorted(set(found))


def _options(tree, function):
    """{keyword: value node} of the function's @njit(...) / @jit(...) decorator (a name
    given as a value resolved to its module-level assignment), or None if it has none."""
    for decorator in function.decorator_list:
        call = decorator if isinstance(decorator, ast.Call) else None
        target = call.func if call else decorator
        if getattr(target, "id", getattr(target, "attr", None)) in ("njit", "jit"):
            assigned = {t.id: n.value for n in tree.body if isinstance(n, ast.Assign)
                        for t in n.targets if isinstance(t, ast.Name)}
            return {k.arg: assigned.get(getattr(k.value, "id", None), k.value)
                    for k in (call.keywords if call else [])}
    return None


UNSAFE_FAST = {"nnan", "ninf", "fast"}  # LLVM's flags that assume no NaN or inf


def code_cause(source, name):
    """The likely cause of what kernel `name`'s code shows, in a module's source, or "":
    no @njit, fastmath flags assuming no NaN or inf, no parallel loop, a race."""
    parsed = _function(source, name)
    if parsed is None:
        return ""
    tree, function = parsed
    options = _options(tree, function)
    if options is None:
        return ("it is not compiled: decorate it with @njit(parallel=True, fastmath=FAST) "
                "(from numba import njit), or it runs as Python, one element at a time")
    fastmath = options.get("fastmath")
    flags = {getattr(e, "value", None) for e in getattr(fastmath, "elts", [])}
    if getattr(fastmath, "value", None) is True or flags & UNSAFE_FAST:
        return ("fastmath=True (or its nnan, ninf flags) lets LLVM assume that no NaN or inf "
                "ever occurs, and compile their handling away: a NaN in x need not come out "
                "as NaN. Allow only what a sum needs, reassociation and contraction: "
                "fastmath=FAST, the set at the top of the file")
    loops = [n for n in ast.walk(function)
             if isinstance(n, ast.For) and _is_call_to(n.iter, ("prange",))]
    if getattr(options.get("parallel"), "value", None) is not True or not loops:
        return ("it runs on one thread: the rows are shared among the cores by "
                "@njit(parallel=True) and a loop `for r in prange(rows):` (prange from "
                "numba), both needed")
    found = races(source, name)
    if found:
        line, array, loop = found[0]
        return (f"a data race: line {line} writes {array}[...] at an index that does not "
                f"involve the prange loop's variable (line {loop}), so two threads can add to "
                "the same element at once and one addition is lost (more often, the more "
                "threads). Reduce in two stages: each iteration of the parallel loop sums "
                "into a partial array of its own, indexed by the loop's variable, then add "
                "the partial sums")
    return ""
