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
import builtins
import inspect
from pathlib import Path
from typing import NamedTuple

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


IMPORTS = None  # resolve(module) for races' helpers imported from another file: none in
# the course, in the notebook as at grading (the judge reads the kernel's file alone, so a
# helper the loop calls must stand in that file, or the check says it cannot read it); the
# graders' tests set resolve_source for their variants, which share their row steps from
# tests/variants/compiled_rows.py (tests/variants/__init__.py)


def resolve_source(module):
    """The source text of an importable module (a kernel's helpers imported from another
    file), or None."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(module)
        return Path(spec.origin).read_text(encoding="utf-8")[:SOURCE_BYTES]
    except (ImportError, ValueError, AttributeError, TypeError, OSError):
        return None


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


def _owned(loop, seed=None, derived=()):
    """The names that belong to one iteration of a prange loop: its variable (or, in a
    function the loop calls, `seed`: the parameters given an owned value); a name assigned
    exactly from an owned one (_exactly) or from the thread's id; the variable of an inner
    loop over a range that starts at an owned value (or at a parameter given a value
    computed from one, `derived`: a block's first row, b * B). Propagated along a worklist
    (each assignment looked at again only when a name it reads becomes owned)."""
    owned, steps, readers = set(_names(loop.target) if seed is None else seed), [], {}
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
        if (_starts_in(node, owned | set(derived)) if isinstance(node, ast.For) else
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


DYNAMIC = {"globals", "vars", "locals", "setattr", "exec", "eval", "compile", "__import__"}
# calls that can bind a module's names where no statement shows it


def _function(source, name):
    """(the module's tree, the def of `name`) of a module's source: its one def of that
    name, at the top level, where nothing else anywhere in the file binds the name (no
    other def or class, no assignment, import, global or del of it, even inside an if or
    a try) and no call could (globals(), setattr, exec, ..., sys.modules): the function
    the module exports is then the one read, whatever runs at import. Else None."""
    try:
        tree = ast.parse(source)
        nodes = list(ast.walk(tree))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    top = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
    named = [n for n in nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                   ast.ClassDef)) and n.name == name]
    rebound = any(
        (isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load)) or
        (isinstance(n, (ast.Import, ast.ImportFrom)) and any(
            (a.asname or a.name.split(".")[0]) == name for a in n.names)) or
        (isinstance(n, (ast.Global, ast.Nonlocal)) and name in n.names) or
        (isinstance(n, ast.Call) and getattr(n.func, "id", None) in DYNAMIC) or
        (isinstance(n, ast.Attribute) and n.attr in ("modules", "__setattr__", "__dict__"))
        for n in nodes)
    return (tree, top[0]) if len(top) == len(named) == 1 and not rebound else None


class Race(NamedTuple):
    """A write that two iterations of a prange loop may both make (or a call the reader
    cannot follow with an array the loop shares)."""

    line: int  # the kernel's line: the write, or the call that leads to it
    array: str  # the array written (the kernel's name for it)
    loop: int  # the prange loop's line
    through: tuple = ()  # the calls that lead to the write: ((function, line of the write
    # or of the next call, in that function's file), ...); () for a write in the loop itself
    unreadable: str = ""  # a function the reader cannot find, given that array


SAFE_CALLS = set(dir(builtins)) | set(THREAD_IDS)  # Python's builtins (sum, pow, range,
# ...) and the thread's id: none writes into an array it is given
DEPTH = 32  # calls followed at most (a chain of helpers is a few deep)
VISITS = 2000  # functions read at most for one kernel (each once per way it is called: a
# file whose calls fan out cannot make the reader slow); past it, the calls are unreadable
LIBRARIES = {"numpy", "numba", "math", "cmath"}  # functions imported from them write into
# no array they are given (np.dot(a, b)): not followed


class _Module:
    """A module's top-level functions and imported names, for following a kernel's calls;
    resolve(module name) gives an imported module's source, or None."""

    def __init__(self, tree, resolve=None):
        self.tree, self.resolve = tree, resolve
        self.defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        self.imports = {a.asname or a.name: (n.module, a.name) for n in tree.body
                        if isinstance(n, ast.ImportFrom) and n.module and not n.level
                        for a in n.names}
        self.modules = {a.asname or a.name.split(".")[0]: a.name for n in tree.body
                        if isinstance(n, ast.Import) for a in n.names}  # import x as y

    def library(self, name):
        """Whether name is a function imported from NumPy, Numba or math."""
        return self.imports.get(name, ("",))[0].split(".")[0] in LIBRARIES

    def callee(self, name, depth=0):
        """(module, def) of the function `name` stands for here, or None where it cannot be
        found (imported from a file that cannot be read, or bound at run time)."""
        if name in self.defs:
            return self, self.defs[name]
        if name not in self.imports or self.resolve is None or depth > 4:
            return None
        module, original = self.imports[name]
        source = self.resolve(module)
        try:
            other = _Module(ast.parse(source), self.resolve) if source else None
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            other = None
        return other.callee(original, depth + 1) if other else None


def _root(value):
    """The name an argument's array comes from (a, a[0], a[1:, j]), or None."""
    while isinstance(value, ast.Subscript):
        value = value.value
    return value.id if isinstance(value, ast.Name) else None


def _arrays_given(call, owned, private):
    """The names of what a call is given that the loop's iterations may share: an array,
    or an element or slice of one not indexed by the iteration's own names."""
    given = list(call.args) + [k.value for k in call.keywords]
    return [_root(a) for a in given if _root(a) and _root(a) not in owned
            and _root(a) not in private and not (isinstance(a, ast.Subscript)
                                                  and _index_owned(a.slice, owned))]


def _walk_body(node):
    """Every node of a loop, or of a function's body (not its decorators)."""
    for part in (node.body if isinstance(node, ast.FunctionDef) else [node]):
        yield from ast.walk(part)


def _callee_name(module, call):
    """(the name a call's function goes by, whether the reader may skip it): a name of the
    file, a builtin or a library function (skipped), or module.function of a module the
    file imports (never readable here, skipped where a library's); (None, True) for a
    method of an array or any other call on a value."""
    func = call.func
    if isinstance(func, ast.Name):
        return func.id, func.id in SAFE_CALLS or module.library(func.id)
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and \
            func.value.id in module.modules:
        root = module.modules[func.value.id].split(".")[0]
        return f"{func.value.id}.{func.attr}", root in LIBRARIES
    return None, True


class _Reader:
    """Reads the writes of a prange loop and of the functions it calls (races' work)."""

    def __init__(self, prange):
        self.prange, self.found, self.seen = prange, [], set()

    def writes(self, module, node, owned, private, aliases, loop, path):
        """Append to self.found each Race in node: the prange loop, or a function it calls
        (path: the calls that lead there, [(function, line of its call in the caller's
        file)]), read as if inlined: its parameters owned, private, or standing for the
        caller's arrays (aliases: {parameter: the kernel's name}). A function is read once
        for each way it is called (its parameters' kinds)."""
        def race(line, array, unreadable=""):
            if not path:
                return Race(line, aliases.get(array, array)[:40], loop.lineno, (), unreadable)
            inner = tuple((f, at) for (f, _), (_, at) in zip(path, path[1:]))
            return Race(path[0][1], aliases.get(array, array)[:40], loop.lineno,
                        inner + ((path[-1][0], line),), unreadable)

        for child in _walk_body(node):
            targets = child.targets if isinstance(child, ast.Assign) else \
                [child.target] if isinstance(child, ast.AugAssign) else []
            for written in filter(None, map(_written, targets)):
                array, indices = written
                if array not in private and not any(_index_owned(i, owned) for i in indices):
                    self.found.append(race(child.lineno, array))
            if not isinstance(child, ast.Call):
                continue
            name, skipped = _callee_name(module, child)
            shared = _arrays_given(child, owned, private)
            if skipped or name in self.prange or not shared:
                continue  # (nothing the iterations share reaches it, or it writes none)
            target = module.callee(name) if "." not in name else None
            if target is None or len(path) >= DEPTH or len(self.seen) >= VISITS:
                self.found.append(race(child.lineno, shared[0], name[:40]))
                continue
            callee_module, function = target
            params = [a.arg for a in function.args.args]
            given = dict(zip(params, child.args)) | {k.arg: k.value for k in child.keywords}
            seed, derived, mine, alias = set(), set(), set(), {}
            for param, value in given.items():
                if _exactly(value, owned):
                    seed.add(param)
                elif (isinstance(value, ast.Name) and value.id in private) or (
                        isinstance(value, ast.Subscript) and _index_owned(value.slice, owned)):
                    mine.add(param)  # (the iteration's own array, or a view of its own row)
                elif _root(value):  # (a shared array, or an element or slice of one)
                    alias[param] = aliases.get(_root(value), _root(value))
                if _names(value) & owned:
                    derived.add(param)  # (a block's first row: b * B)
            key = (id(function), frozenset(seed), frozenset(derived), frozenset(mine),
                   frozenset(alias.items()))
            if key in self.seen or any(name == f for f, _ in path):
                continue  # (read already this way, or a recursive call)
            self.seen.add(key)
            callee_owned = _owned(function, seed, derived)
            self.writes(callee_module, function, callee_owned,
                        mine | _private(function, callee_owned), alias, loop,
                        path + [(name, child.lineno)])


def races(source, name, resolve=None):
    """[Race]: the writes, in function `name` of a module's source and in the functions its
    prange loops call (followed through their calls, in this file, or in another where
    resolve(module name) gives its source), to an element of an array that two iterations
    of one prange loop may both write; and the calls it cannot follow that are given such
    an array (unreadable). [] where there is none, or where the source or function cannot
    be read."""
    parsed = _function(source, name)
    if parsed is None:
        return []
    tree, function = parsed
    module, reader = _Module(tree, resolve), _Reader(_prange_names(tree))
    for loop in ast.walk(function):
        if not (isinstance(loop, ast.For) and _is_call_to(loop.iter, reader.prange)):
            continue
        owned = _owned(loop)
        reader.writes(module, loop, owned, _private(loop, owned), {}, loop, [])
    return sorted(set(reader.found))


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


def code_cause(source, name, resolve=None):
    """The likely cause of what kernel `name`'s code shows, in a module's source, or "":
    no @njit, fastmath flags assuming no NaN or inf, no parallel loop, a race (in the
    kernel or in a function it calls: races' resolve), a call given a shared array that the
    reader cannot follow."""
    parsed = _function(source, name)
    if parsed is None:
        readable = _parses(source)
        return ("the check reads your kernel's code and finds no function " + name[:40] +
                " defined by a def at the top of the file and bound to nothing else (once, "
                "not again inside an if, nor by an import, a global or globals()): keep it as "
                "the file gives it, a def with its @njit decorator") if readable else ""
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
    found = races(source, name, resolve)
    written = [race for race in found if not race.unreadable]
    if written:
        race = written[0]
        where = f"line {race.line}"
        for function, at in race.through:
            where += f" calls {function}, whose line {at}"
        where += " writes"
        return (f"a data race: {where} {race.array}[...] at an index that does not involve "
                f"the prange loop's variable (line {race.loop}), so two threads can add to "
                "the same element at once and one addition is lost (more often, the more "
                "threads). Reduce in two stages: each iteration of the parallel loop sums "
                "into a partial array of its own, indexed by the loop's variable, then add "
                "the partial sums")
    if found:
        race = found[0]
        return (f"the check cannot read {race.unreadable}, which line {race.line} calls from "
                f"the prange loop (line {race.loop}) with {race.array}: it is not defined in "
                f"this file, so whether two iterations write the same element of "
                f"{race.array} cannot be told, and a race fails only some runs. Define it in "
                "this file, with @njit")
    return ""
