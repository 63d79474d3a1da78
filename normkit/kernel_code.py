"""Reads a Numba kernel's code for Exercises 7.3 and 7.4's checks: races, fastmath, prange.

What it finds: a data race, fastmath flags that compile NaN and inf away, no parallel loop
(and numba_installed: whether Numba is there). It reads the code, since none of the three
shows reliably in one run's numbers. A race: two iterations of a `prange` loop, on two
threads, may write one element (`dweight[j] += ...` in a loop over rows), and one of the
two writes is lost, more or less often by machine, load and thread count (on one thread,
never). An element belongs to its iteration when its index involves the loop's variable, a
name computed from it, or the thread's id, or when its array is made in the loop's body. A
reduction into a scalar or a whole array is one Numba makes private to each thread. Two
writes of one array must not meet either: out[r] and out[r + 1] are each an iteration's
own row, yet iteration r + 1 writes the row that iteration r writes second. What the reader
cannot prove an iteration's own, it reads as shared (_owned, _disjoint). At grading the
judge reads the submission's file and runs none of it (docs/security.md, section 4).
"""

import ast
import builtins
import copy
import inspect
import itertools
from pathlib import Path
from typing import NamedTuple

NUMBA_INSTALL = "`make lab` installs it (or pip install numba==0.68.1)"  # (pyproject's pin)
THREAD_IDS = ("get_thread_id", "_get_thread_id")  # numba's (and its internal name)
SOURCE_BYTES = 256 * 1024  # the largest source read (a student's module is a few KB)


def numba_installed():
    """Whether Numba imports here (Unit 7's compiled kernels, notebook 07's cells and the
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


# -- The rows of an inner loop that only one iteration runs: proofs, not guesses ------------
# An inner loop `for r in range(start, stop)` gives its variable to its iteration alone
# where the ranges of two iterations cannot meet. The reader accepts two forms it can prove,
# and nothing else (an inner loop of another form owns nothing: its writes are races unless
# indexed by the iteration's own names otherwise):
# - consecutive blocks: start is f(o) for an owned name o (values no two iterations share)
#   and a function f monotone in o (o once, through + - * // by values the loop cannot
#   change, min or max), and stop is f(o + 1), or min(anything, f(o + 1)): then the ranges
#   [f(o), f(o + 1)) of two values of o never overlap (p * rows // parts: a part's rows;
#   16 * b, min(rows, 16 * b + 16): a block's). f(o + 1) is compared as a polynomial, so
#   (p + 1) * n and p * n + n are one; r * 0 is monotone, but range(r * 0, h) stops at h,
#   not at (r + 1) * 0: a race.
# - strides: range(p, stop, n) in `for p in prange(n)`: each p its residue modulo n.

INVARIANT_CALLS = {"min", "max", "len", "int", "abs"}  # (calls whose value the loop cannot vary)


def _invariant(expr, variant):
    """Whether expr has one value for the whole prange loop: constants, names the loop does
    not bind (variant: those it does, and the iteration's own), arrays' shapes, sizes and
    dimensions (x.shape[0]: no other element or attribute, which the loop may write),
    arithmetic on them and INVARIANT_CALLS (no other call: np.random varies)."""
    for node in ast.walk(expr):
        if isinstance(node, ast.Name) and node.id in variant:
            return False
        if isinstance(node, ast.Subscript) and not (
                isinstance(node.value, ast.Attribute) and node.value.attr == "shape"):
            return False  # (an element of an array the loop may write: out[0])
        if isinstance(node, ast.Attribute) and node.attr not in ("shape", "size", "ndim"):
            return False
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and
                                               node.func.id in INVARIANT_CALLS):
            return False
        if not isinstance(node, (ast.Name, ast.Constant, ast.Attribute, ast.Subscript,
                                 ast.BinOp, ast.UnaryOp, ast.Call, ast.Tuple, ast.Slice,
                                 ast.expr_context, ast.operator, ast.unaryop)):
            return False
    return True


def _monotone(expr, o, variant):
    """Whether expr is a monotone function of the name o (which appears in it once): o,
    or one of these of a monotone expression m and values v the loop cannot change (v
    without o): m + v, v + m, m - v, v - m, -m, m * v, v * m, m // v, min(m, v...), max."""
    if isinstance(expr, ast.Name):
        return expr.id == o
    if sum(isinstance(n, ast.Name) and n.id == o for n in ast.walk(expr)) != 1:
        return False
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)):
        return _monotone(expr.operand, o, variant)
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Sub, ast.Mult,
                                                            ast.FloorDiv)):
        inner, other = (expr.left, expr.right) if o in _names(expr.left) else \
            (expr.right, expr.left)
        if isinstance(expr.op, ast.FloorDiv) and inner is not expr.left:
            return False  # (v // m is not monotone where m changes sign)
        return _monotone(inner, o, variant) and _invariant(other, variant)
    if _is_call_to(expr, ("min", "max")) and isinstance(expr.func, ast.Name) and \
            not expr.keywords:
        inner = [a for a in expr.args if o in _names(a)]
        return len(inner) == 1 and _monotone(inner[0], o, variant) and all(
            _invariant(a, variant) for a in expr.args if a is not inner[0])
    return False


def _polynomial(expr):
    """{monomial: coefficient} of expr, for comparing f(o + 1) with a stop as written:
    +, -, * and numbers expanded, anything else an opaque factor (its own children
    compared the same way)."""
    if isinstance(expr, ast.Constant) and type(expr.value) in (int, float):
        return {(): expr.value}
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)):
        sign = -1 if isinstance(expr.op, ast.USub) else 1
        return {m: sign * c for m, c in _polynomial(expr.operand).items()}
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Sub, ast.Mult)):
        left, right = _polynomial(expr.left), _polynomial(expr.right)
        if isinstance(expr.op, ast.Mult):
            found = {}
            for (a, x), (b, y) in itertools.product(left.items(), right.items()):
                key = tuple(sorted(a + b))
                found[key] = found.get(key, 0) + x * y
            return found
        sign = -1 if isinstance(expr.op, ast.Sub) else 1
        found = dict(left)
        for m, c in right.items():
            found[m] = found.get(m, 0) + sign * c
        return found
    return {(_factor(expr),): 1}


def _factor(expr):
    """An opaque factor's text: a name, or its node with its children's _canon."""
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.BinOp):
        return f"({_canon(expr.left)} {type(expr.op).__name__} {_canon(expr.right)})"
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and not expr.keywords:
        args = [_canon(a) for a in expr.args]
        return f"{expr.func.id}({sorted(args) if expr.func.id in ('min', 'max') else args})"
    return ast.dump(expr, annotate_fields=False)


def _canon(expr):
    """A form of expr that two ways of writing one polynomial share."""
    return repr(sorted((m, c) for m, c in _polynomial(expr).items() if c != 0))


def _next(expr, o):
    """expr with o + 1 for the name o."""
    class Next(ast.NodeTransformer):
        def visit_Name(self, node):
            return ast.BinOp(ast.Name(o, ast.Load()), ast.Add(), ast.Constant(1)) \
                if node.id == o else node
    return Next().visit(copy.deepcopy(expr))


def _disjoint(call, owned, variant, stride=None):
    """Whether a range(...) call (its arguments in the kernel's terms) gives each iteration
    of the prange loop values no other iteration's range gives (the forms above). stride:
    (the prange loop's variable, its count) where the loop is `for p in prange(count)`."""
    if not (_is_call_to(call, ("range",)) and isinstance(call.func, ast.Name)) or \
            call.keywords:
        return False
    if len(call.args) == 3 and stride:
        var, count = stride
        return isinstance(call.args[0], ast.Name) and call.args[0].id == var and \
            _invariant(count, variant) and _canon(call.args[2]) == _canon(count)
    if len(call.args) != 2:
        return False
    start, stop = call.args
    stops = stop.args if _is_call_to(stop, ("min",)) and isinstance(stop.func, ast.Name) \
        and not stop.keywords else [stop]
    for o in sorted(_names(start) & owned):
        if _monotone(start, o, variant | (owned - {o})):
            after = _canon(_next(start, o))
            if any(_canon(s) == after for s in stops):
                return True
    return False


class _Terms(ast.NodeTransformer):
    """A function's expressions in the kernel's terms: its parameters as the caller gave
    them (env: the caller's expressions, in the kernel's terms already), its own names
    renamed apart (prefix: a callee's local r is not the kernel's r), the module's other
    names as they are. The kernel's own Terms changes nothing."""

    def __init__(self, env=None, local=(), prefix=""):
        self.env, self.local, self.prefix = env or {}, set(local), prefix

    def visit_Name(self, node):
        if node.id in self.env:
            return copy.deepcopy(self.env[node.id])
        if node.id in self.local:
            return ast.Name(self.prefix + node.id, node.ctx)
        return node

    def of(self, expr):
        return self.visit(copy.deepcopy(expr)) if self.env or self.local else expr

    def name(self, name):
        return self.prefix + name if name in self.local else name


def _bindings(node):
    """{name: [(binding node, its value or loop)]} of every binding in a loop or a
    function's body: `name = value` (value), `for name in ...:` (the For), and any other
    (an augmented assignment, a tuple, a walrus, with, import, def, except ... as): None,
    which proves nothing."""
    found = {}
    parents = {}
    for parent in _walk_body(node):
        for child in ast.iter_child_nodes(parent):
            parents[child] = parent
    for child in _walk_body(node):
        if isinstance(child, ast.Name) and not isinstance(child.ctx, ast.Load):
            parent = parents.get(child)
            if isinstance(parent, ast.Assign) and parent.targets == [child]:
                found.setdefault(child.id, []).append((parent, parent.value))
            elif isinstance(parent, ast.For) and parent.target is child:
                found.setdefault(child.id, []).append((parent, parent))
            else:
                found.setdefault(child.id, []).append((parent, None))
        elif isinstance(child, (ast.Import, ast.ImportFrom)):
            for alias in child.names:
                found.setdefault(alias.asname or alias.name.split(".")[0], []).append(
                    (child, None))
        elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and \
                child is not node:
            found.setdefault(child.name, []).append((child, None))
        elif isinstance(child, (ast.Global, ast.Nonlocal)):
            for name in child.names:
                found.setdefault(name, []).append((child, None))
        elif isinstance(child, ast.ExceptHandler) and child.name:
            found.setdefault(child.name, []).append((child, None))
        elif isinstance(child, (ast.MatchAs, ast.MatchStar)) and child.name:
            found.setdefault(child.name, []).append((child, None))
    return found


def _owned(node, seed, proof):
    """The names that belong to one iteration of a prange loop, in node (the loop, or a
    function it calls): seed (its variable, or the parameters given an owned value), and a
    name each of whose bindings in node gives it a value of the iteration's own: `name =`
    an owned name plus or minus a constant (_exactly), or the thread's id, or
    `for name in range(...)` where proof(the For, owned) holds (_disjoint). A name bound
    in any other way too (r = 0 after the loop's r, r += 1, a tuple) is not owned.
    Propagated along a worklist (each binding looked at again only when a name it reads
    becomes owned)."""
    found = _bindings(node)
    owned = {name for name in seed if all(b is node for b, _ in found.get(name, []))}
    left, readers, todo = {}, {}, []
    for name, steps in found.items():
        if name in seed or any(value is None for _, value in steps):
            continue  # (a seed bound again, or bound in a way that proves nothing)
        left[name] = len(steps)
        for step in steps:
            i = len(todo)
            todo.append((name, *step))
            for read in _names(step[1].iter if isinstance(step[1], ast.For) else step[1]):
                readers.setdefault(read, []).append(i)
    done, queue = set(), list(range(len(todo)))
    while queue:
        i = queue.pop()
        name, binding, value = todo[i]
        if i in done or name in owned:
            continue
        if (proof(value, owned) if isinstance(value, ast.For) else
                _exactly(value, owned) or _is_call_to(value, THREAD_IDS)):
            done.add(i)
            left[name] -= 1
            if left[name] == 0:
                owned.add(name)
                queue.extend(readers.get(name, ()))
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


def _owner(indices, owned, terms, defs):
    """A write's index (its subscripts' indices) as the reader compares two writes of one
    array: {(subscript, position): ("own", _canon) for an element that is the iteration's
    own, in the kernel's terms (a name owned as another plus or minus a number read as that:
    defs), or ("int", value) for a number}. Two writes of one array may meet in two
    iterations unless they share an element of the iteration's own, or hold two different
    numbers at one position (out[r] and out[r + 1] meet; out[p, 0] and out[r, 1] never)."""
    found = {}
    for level, index in enumerate(indices):
        elements = index.elts if isinstance(index, ast.Tuple) else [index]
        for k, e in enumerate(elements):
            if _exactly(e, owned):
                for _ in range(8):  # (a chain of aliases, q = r, x2 = q, read through)
                    e = _Terms(defs).of(e)
                found[level, k] = ("own", _canon(terms.of(e)))
            elif isinstance(e, ast.Constant) and type(e.value) is int:
                found[level, k] = ("int", e.value)
    return found


def _meet(one, other):
    """Whether two writes' _owner may be one element in two iterations."""
    shared = set(one) & set(other)
    return not any(one[k] == other[k] and one[k][0] == "own" for k in shared) and \
        not any(one[k] != other[k] and one[k][0] == other[k][0] == "int" for k in shared)


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
    builtins_changed = any(  # (builtins.min = ... changes min for every module)
        (isinstance(n, ast.Name) and n.id == "__builtins__") or
        (isinstance(n, ast.Import) and any(a.name == "builtins" for a in n.names)) or
        (isinstance(n, ast.ImportFrom) and n.module == "builtins") for n in nodes)
    return (tree, top[0]) if len(top) == len(named) == 1 and not rebound and \
        not builtins_changed else None


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


def _module_names(tree):
    """The names a module binds for all its functions: by its own statements (not those of
    its functions' bodies), and those a function declares global."""
    found, todo = set(), list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
            todo.extend(n for n in ast.walk(node) if isinstance(n, ast.Global))
            continue
        if isinstance(node, ast.Global):
            found.update(node.names)
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            found.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            found.update(a.asname or a.name.split(".")[0] for a in node.names)
        todo.extend(ast.iter_child_nodes(node))
    return found


class _Module:
    """A module's top-level functions and imported names, for following a kernel's calls;
    resolve(module name) gives an imported module's source, or None. shadowed: the
    builtins' names it binds (its own min is no builtin: followed, and no proof)."""

    def __init__(self, tree, resolve=None):
        self.tree, self.resolve = tree, resolve
        self.shadowed = frozenset(_module_names(tree) & SAFE_CALLS)
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
        return func.id, (func.id in SAFE_CALLS and func.id not in module.shadowed) or \
            module.library(func.id)
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and \
            func.value.id in module.modules:
        root = module.modules[func.value.id].split(".")[0]
        return f"{func.value.id}.{func.attr}", root in LIBRARIES
    return None, True


class _Scope(NamedTuple):
    """Where a prange loop's body is read, for proving an inner loop's rows its own
    (_disjoint): the loop itself, or a function it calls read as if inlined. terms: the
    scope's expressions in the kernel's terms; owned, variant: the kernel's names (and the
    callers' own, renamed apart) that belong to the iteration, and that the loop binds;
    bound: the names the scope binds (its own names); stride: (the prange loop's variable,
    its count) for `for p in prange(count)`, else None."""

    terms: _Terms
    owned: frozenset
    variant: frozenset
    bound: frozenset
    stride: tuple | None
    shadowed: frozenset = frozenset()  # the builtins' names the module binds (_Module)

    def proof(self, loop, owned):
        """Whether an inner loop of the scope gives its variable to one iteration alone."""
        if any(getattr(n.func, "id", None) in self.shadowed for n in ast.walk(loop.iter)
               if isinstance(n, ast.Call)):
            return False  # (its own range, min or len: nothing is proven of it)
        mine = {self.terms.name(n) for n in owned}
        return _disjoint(self.terms.of(loop.iter), self.owned | mine,
                         self.variant | ({self.terms.name(n) for n in self.bound} - mine),
                         self.stride)

    def inside(self, function, given, owned, prefix):
        """The scope of a function this one calls (given: {parameter: this scope's
        expression}; owned: this scope's owned names)."""
        params = [a.arg for a in function.args.args + function.args.kwonlyargs]
        bound = frozenset(_bindings(function))
        terms = _Terms({p: self.terms.of(v) for p, v in given.items() if p not in bound},
                       set(params) | bound, prefix)
        mine = frozenset(self.terms.name(n) for n in owned)
        return _Scope(terms, self.owned | mine, self.variant | frozenset(
            self.terms.name(n) for n in self.bound if self.terms.name(n) not in mine),
            bound, self.stride, self.shadowed)


def _stride(loop):
    """(variable, count) of `for p in prange(count)`, or None."""
    if isinstance(loop.target, ast.Name) and len(loop.iter.args) == 1 and \
            not loop.iter.keywords:
        return loop.target.id, loop.iter.args[0]
    return None


class _Reader:
    """Reads the writes of a prange loop and of the functions it calls (races' work)."""

    def __init__(self, prange):
        self.prange, self.found, self.seen = prange, [], set()
        self.owners = {}  # {(prange loop's line, array): [each way it is written, _owner]}

    def writes(self, module, node, scope, owned, private, aliases, loop, path):
        """Append to self.found each Race in node: the prange loop, or a function it calls
        (path: the calls that lead there, [(function, line of its call in the caller's
        file)]), read as if inlined (scope): its parameters owned, private, or standing for
        the caller's arrays (aliases: {parameter: the kernel's name}). A function is read
        once for each way it is called (its parameters' kinds and values)."""
        def race(line, array, unreadable=""):
            if not path:
                return Race(line, aliases.get(array, array)[:40], loop.lineno, (), unreadable)
            inner = tuple((f, at) for (f, _), (_, at) in zip(path, path[1:]))
            return Race(path[0][1], aliases.get(array, array)[:40], loop.lineno,
                        inner + ((path[-1][0], line),), unreadable)

        defs = {n: steps[0][1] for n, steps in _bindings(node).items()  # (q = r + 1)
                if n in owned and len(steps) == 1 and isinstance(steps[0][1], ast.expr)
                and _exactly(steps[0][1], owned)}
        for child in _walk_body(node):
            targets = child.targets if isinstance(child, ast.Assign) else \
                [child.target] if isinstance(child, ast.AugAssign) else []
            for written in filter(None, map(_written, targets)):
                array, indices = written
                if array in private:
                    continue
                owner = _owner(indices, owned, scope.terms, defs)
                earlier = self.owners.setdefault((loop.lineno, aliases.get(array, array)), [])
                if "own" not in {kind for kind, _ in owner.values()} or any(
                        _meet(owner, other) for other in earlier):
                    self.found.append(race(child.lineno, array))
                elif owner not in earlier:
                    earlier.append(owner)
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
            seed, mine, alias = set(), set(), {}
            for param, value in given.items():
                if _exactly(value, owned):
                    seed.add(param)
                elif (isinstance(value, ast.Name) and value.id in private) or (
                        isinstance(value, ast.Subscript) and _index_owned(value.slice, owned)):
                    mine.add(param)  # (the iteration's own array, or a view of its own row)
                elif _root(value):  # (a shared array, or an element or slice of one)
                    alias[param] = aliases.get(_root(value), _root(value))
            inner = scope.inside(function, given, owned, f"{name}@{len(path) + 1}.")
            values = frozenset((p, _canon(v)) for p, v in inner.terms.env.items())
            key = (id(function), frozenset(seed), frozenset(mine), frozenset(alias.items()),
                   values)
            if key in self.seen or any(name == f for f, _ in path):
                continue  # (read already this way, or a recursive call)
            self.seen.add(key)
            callee_owned = _owned(function, seed, inner.proof)
            self.writes(callee_module, function, inner, callee_owned,
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
        scope = _Scope(_Terms(), frozenset(), frozenset(), frozenset(_bindings(loop)),
                       _stride(loop), module.shadowed)
        owned = _owned(loop, set(_names(loop.target)), scope.proof)
        reader.writes(module, loop, scope, owned, _private(loop, owned), {}, loop, [])
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
        return (f"a data race: {where} {race.array}[...] at an index that is not the prange "
                f"loop's variable (line {race.loop}) or a row only its iteration runs, so two "
                "threads can add to the same element at once and one addition is lost (more "
                "often, the more threads). Reduce in two stages: each iteration of the "
                "parallel loop sums into a partial array of its own, indexed by the loop's "
                "variable, then add the partial sums. (The check proves an index the "
                "iteration's own only as the loop's variable, plus or minus a number, or an "
                "inner loop over range(f(p), f(p + 1)) or range(p, n, parts): write yours so)")
    if found:
        race = found[0]
        return (f"the check cannot read {race.unreadable}, which line {race.line} calls from "
                f"the prange loop (line {race.loop}) with {race.array}: it is not defined in "
                f"this file, so whether two iterations write the same element of "
                f"{race.array} cannot be told, and a race fails only some runs. Define it in "
                "this file, with @njit")
    return ""
