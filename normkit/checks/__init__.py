"""Each exercise's visible checks, run from its check cell by one call: ``check("N.M")``.

    # Exercise 1.1: layer_norm_stats (3 points)
    check("1.1")

check runs the exercise's visible cases against your normlib/ and prints that they pass, or
raises the first failure as a CheckFailed: the quantity and the case, how far off, the likely
cause (normkit.testing.assert_close); or what your code raised, with its line in your file.
Where your function calls another exercise's whose check fails too, the message says so. A
stub's NotImplementedError is raised as it is: not yet written is not a failure. The cases of
Exercise N.M are the function registered with @exercise("N.M", ...) in this package's
unitN.py, beside the check functions they call (check_stats, ...). The hidden tests are not
here: they stand in solutions/ alone, between the check cell's hidden-test markers, call the
same check functions on other cases, and never reach the release or the student edition.
"""

import ast
import importlib
import inspect
import linecache
import re
import traceback
from pathlib import Path

STUB = re.compile(r"Exercise (\d+\.\d+): implement ([\w.]+)")  # a stub's message
SAID = re.compile(r"^  (Likely cause|Where): \S", re.M)  # a message's line saying why or
# where (every failure has one: failed() adds a Where line to one that has not)
CHECKS = {}  # {"1.1": (the function running its visible cases, what it checks)}
COMPILE = {}  # {"7.3": the exercise's compile step, a function of the student's kernel}
NORMKIT = Path(__file__).resolve().parents[1]  # normkit/


class Skipped(Exception):
    """An exercise that cannot run here (Numba not installed): check() prints its message,
    one line, instead of a failure."""


def exercise(number, target, compile=None):
    """Register a function as Exercise `number`'s visible cases. target: what the student
    writes, as "module.name" of normlib ("layer_norm.layer_norm_stats"). compile: for a
    compiled kernel (Numba), its compile step: a function of `hidden` that calls the
    student's kernel once for each signature its visible cases use (hidden: its hidden
    tests' too), on tiny arrays. check() runs it first, and the judge, with hidden, before
    the check's clock starts (tools/judge/judge.py), so that a check times and measures the
    kernel's runs, not its compilation."""

    def register(function):
        CHECKS[number] = (function, target)
        if compile is not None:
            COMPILE[number] = compile
        return function

    return register


def has_compile_step(number):
    """Whether Exercise `number` has a compile step (False for a number of no exercise)."""
    try:
        _registered(number)
    except ValueError:
        return False
    return number in COMPILE


def compile_kernels(number, hidden=False):
    """Exercise `number`'s compile step, if it has one (see exercise): for the signatures
    of its visible cases, and with hidden, of its hidden tests too."""
    _registered(number)
    if number in COMPILE:
        COMPILE[number](hidden)


def _registered(number):
    """(function, target) of Exercise `number`, its unit's module imported."""
    unit = str(number).split(".")[0]
    if unit.isdigit() and (NORMKIT / "checks" / f"unit{unit}.py").is_file():
        importlib.import_module(f"{__name__}.unit{unit}")
    if number not in CHECKS:
        raise ValueError(f"check: no exercise {number!r} (give its number as a string, e.g. "
                         "check(\"1.1\"))")
    return CHECKS[number]


def check(number):
    """Run Exercise `number`'s visible cases ("1.1"): print that they pass, or raise the
    first failure as a CheckFailed (failed())."""
    function, _ = _registered(number)
    try:
        compile_kernels(number)
        function()
    except Skipped as skipped:
        print(f"Exercise {number}: skipped. {skipped}")
        return
    except Exception as error:
        raise failed(number, error) from None
    print(f"Exercise {number}: the visible checks pass")


def failed(number, error):
    """error, raised by Exercise `number`'s visible cases, as the exception to raise: a
    check's own CheckFailed, or its plain assert as one; an exception raised in your
    normlib/ as a CheckFailed saying so, where, and its likely cause; either one ending, if
    your function calls other exercises' functions whose checks fail, with which. Anything
    else as it is: a stub's NotImplementedError (not yet written: no failure), or an error
    raised elsewhere (at grading, your code runs in another process and the judge words
    what it raised)."""
    from normkit import diagnosis
    from normkit.testing import CheckFailed

    frames = traceback.extract_tb(error.__traceback__)
    where = yours(frames, _file(number))
    if isinstance(error, CheckFailed) or (isinstance(error, AssertionError) and not where
                                          and frames and _in_checks(frames[-1].filename)):
        message = str(error)
    elif where and not STUB.fullmatch(str(error)):
        cause = diagnosis.error_cause(error)
        message = (f"your code raised {type(error).__name__}: {error}\n  at {where}"
                   + (f"\n  Likely cause: {cause}." if cause else
                      "\n  Where: the line above, in your file"))
    else:
        return error
    if not SAID.search(message):
        message += ("\n  Where: your result's type or items: what the docstring's Returns "
                    "says" if message.startswith("return") else
                    "\n  Where: the quantity named above, in the case below")
    for other in failing_calls(number):
        message += (f"\nYour {target(number)[1]} calls {target(other)[1]} (Exercise {other}), "
                    "which fails its check too: fix that first, then this check again.")
    return CheckFailed(message).with_traceback(error.__traceback__)


def _in_checks(filename):
    """Whether a file is one of this package's (a check's own code)."""
    return Path(__file__).parent in Path(filename).resolve().parents


def yours(frames, file=None):
    """The deepest line of normlib/ (or of `file`, where the exercise's function is) among a
    traceback's frames, as "normlib/x.py, line 22: its text", or ""."""
    found = [f for f in frames if Path(f.filename).parent.name == "normlib"
             or f.filename == file]
    return f"{shown(found[-1].filename)}, line {found[-1].lineno}: " \
        f"{(found[-1].line or '').strip()}" if found else ""


def _file(number):
    """The file of Exercise `number`'s function or class as it is now, or None."""
    try:
        module, name = target(number)
        return inspect.getsourcefile(getattr(importlib.import_module(module), name))
    except Exception:  # (a module that does not import, an object without a file)
        return None


def failing_calls(number):
    """The other exercises whose function or class your Exercise `number` names in its
    source (its calls), and whose visible checks fail (not a stub's: not yet written), in
    order."""
    for path in sorted((NORMKIT / "checks").glob("unit*.py")):
        importlib.import_module(f"{__name__}.{path.stem}")
    try:
        module, name = target(number)
        tree = ast.parse(inspect.getsource(getattr(importlib.import_module(module), name)))
    except Exception:  # (its source cannot be read: it names none)
        return []
    names = {getattr(node, "id", getattr(node, "attr", None)) for node in ast.walk(tree)}
    found = []
    for other, (function, what) in sorted(CHECKS.items(), key=lambda c: _order(c[0])):
        if other != number and what.rpartition(".")[2] in names:
            try:
                function()
            except Exception as error:  # (a stub is not yet written: it fails nothing)
                if not STUB.fullmatch(str(error)):
                    found.append(other)
    return found


def _order(number):
    """An exercise number's sort key: "3.10" after "3.9"."""
    return tuple(int(part) for part in number.split("."))


def target(number):
    """(module, name) of what Exercise `number` checks: ("normlib.layer_norm",
    "layer_norm_stats")."""
    module, _, name = _registered(number)[1].rpartition(".")
    return f"normlib.{module}", name


def namespace():
    """The globals a check cell runs in outside a notebook (make check, the judge, the
    tests): the notebooks' first cell imports `check` as well."""
    return {"__name__": "__check__", "check": check}


def shown(filename):
    """A file as the student finds it: "normkit/checks/unit1.py", "normlib/layer_norm.py"
    for files of those folders, else its name."""
    path = Path(filename)
    if NORMKIT in path.resolve().parents:
        return path.resolve().relative_to(NORMKIT.parent).as_posix()
    return f"{path.parent.name}/{path.name}" if path.parent.name == "normlib" else path.name


def case(error):
    """Where a check's visible case raised error: (the exercise's number, the file as shown,
    the line's number, its text) of the deepest frame in a registered function, or None (a
    hidden test's, or no check's)."""
    numbers = {function.__code__: number for number, (function, _) in CHECKS.items()}
    found = None
    for frame, line in traceback.walk_tb(error.__traceback__):
        if frame.f_code in numbers:
            found = numbers[frame.f_code], frame.f_code.co_filename, line
    if found is None:
        return None
    number, filename, line = found
    return number, shown(filename), line, linecache.getline(filename, line).strip()
