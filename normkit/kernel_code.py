"""What a Numba kernel's code shows (Exercises 6.7 and 6.8's checks): a data race, fastmath
flags that compile NaN and inf away, no parallel loop. Read from the code, since none of
the three shows reliably in one run's numbers. (And whether Numba is installed at all:
numba_installed, NUMBA_INSTALL.)

Races. Two iterations of a `prange` loop run on different threads at the same time. A write in
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

NUMBA_INSTALL = "`make lab` installs it (or pip install numba==0.68.1)"  # (pyproject's pin)
THREAD_IDS = ("get_thread_id", "_get_thread_id")  # numba's (and its internal name)
SOURCE_BYTES = 256 * 1024  # the largest source read (a student's module is a few KB)


def numba_installed():
    """Whether Numba imports here (Unit 6's compiled kernels, notebook 06's cells and the
    benchmark need it; the rest of the course does not)."""
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


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


def _exactly(expr, owned):
    """Whether expr takes one value per iteration that no other iteration takes: an owned
    name, or one plus or minus a constant. (Through %, //, a call, a subscript or the sum
    of two varying values, two iterations can meet: r % 2, r + j.)"""
    if isinstance(expr, ast.Name):
        return expr.id in owned
    return isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Sub)) and (
        (_exactly(expr.left, owned) and isinstance(expr.right, ast.Constant)) or
        (_exactly(expr.right, owned) and isinstance(expr.left, ast.Constant)))


def _starts_in(loop, owned):
    """Whether a for loop runs over a range whose start depends on an owned name (a part's
    rows: range(p * rows // parts, ...)), so that its variable is the iteration's own."""
    call = loop.iter
    return _is_call_to(call, ("range",)) and bool(call.args) and \
        bool(_names(call.args[0]) & owned) and len(call.args) <= 3


def _owned(loop):
    """The names that belong to one iteration of a prange loop: its variable; a name
    assigned exactly from an owned one (_exactly) or from the thread's id; the variable of
    an inner loop over a range that starts at an owned value. Propagated along a worklist
    (each assignment looked at again only when a name it reads becomes owned)."""
    owned, steps, readers = set(_names(loop.target)), [], {}
    for node in ast.walk(loop):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name):
            steps.append((node.targets[0].id, node, node.value))
        elif isinstance(node, ast.For) and node is not loop and \
                isinstance(node.target, ast.Name):
            steps.append((node.target.id, node, node.iter))
    for i, (_, _, value) in enumerate(steps):
        for name in _names(value):
            readers.setdefault(name, []).append(i)
    todo = list(range(len(steps)))  # (each step once at first: the thread id needs none)
    while todo:
        bound, node, value = steps[todo.pop()]
        if bound in owned:
            continue
        if (_starts_in(node, owned) if isinstance(node, ast.For) else
                _exactly(value, owned) or _is_call_to(value, THREAD_IDS)):
            owned.add(bound)
            todo.extend(readers.get(bound, ()))
    return owned


ALLOCATIONS = ("empty", "zeros", "ones", "full", "empty_like", "zeros_like", "ones_like",
               "full_like", "copy")


def _private(loop, owned):
    """The arrays of one iteration's own: made in the loop's body (np.empty(h), ...), or a
    view of an owned row (y_row = y[r])."""
    private = set()
    for node in ast.walk(loop):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name):
            value = node.value
            if _is_call_to(value, ALLOCATIONS) or (isinstance(value, ast.Subscript) and
                                                   _index_owned(value.slice, owned)):
                private.add(node.targets[0].id)
    return private


def _index_owned(index, owned):
    """Whether a subscript's index (one value or a tuple) has an element of one iteration's
    own (_exactly)."""
    elements = index.elts if isinstance(index, ast.Tuple) else [index]
    return any(_exactly(e, owned) for e in elements)


def _written(target):
    """(the root name, its subscripts' indices) of an assignment's target a[i][j], or None
    where the target is not an element of a named array."""
    indices = []
    while isinstance(target, ast.Subscript):
        indices.append(target.slice)
        target = target.value
    return (target.id, indices) if indices and isinstance(target, ast.Name) else None


def _prange_names(tree):
    """The names prange goes by in a module: its own, and an alias (from numba import
    prange as p)."""
    return {"prange"} | {a.asname for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                         for a in n.names if a.name == "prange" and a.asname}


def _function(source, name):
    """(the module's tree, the def of `name`) of a module's source: the last top-level def
    of that name, where nothing else at the top level binds it; or None."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
    rebound = any(name in set().union(*map(_bound, n.targets)) if isinstance(n, ast.Assign)
                  else isinstance(n, (ast.AugAssign, ast.AnnAssign)) and name in _bound(n.target)
                  for n in tree.body)
    return (tree, defs[-1]) if defs and not rebound else None


def races(source, name):
    """[(line, array, loop's line)]: the writes, in function `name` of a module's source, to
    an element of an array that two iterations of one of its prange loops may both write.
    [] where there is none, or where the source or function cannot be read."""
    parsed = _function(source, name)
    if parsed is None:
        return []
    tree, function = parsed
    found, prange = [], _prange_names(tree)
    for loop in ast.walk(function):
        if not (isinstance(loop, ast.For) and _is_call_to(loop.iter, prange)):
            continue
        owned = _owned(loop)
        private = _private(loop, owned)
        for node in ast.walk(loop):
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, ast.AugAssign) else []
            for written in filter(None, map(_written, targets)):
                array, indices = written
                if array not in private and not any(_index_owned(i, owned) for i in indices):
                    found.append((node.lineno, array[:40], loop.lineno))
    return sorted(set(found))


def _parses(source):
    """Whether a module's source parses (a file that does not is the import's error)."""
    try:
        ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


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
        readable = _parses(source)
        return ("the check reads your kernel's code and finds no function " + name[:40] +
                " defined by a def at the top of the file and bound to nothing else: keep "
                "it as the file gives it, a def with its @njit decorator") if readable else ""
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
             if isinstance(n, ast.For) and _is_call_to(n.iter, _prange_names(tree))]
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
