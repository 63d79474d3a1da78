"""Each exercise's visible checks: its check cell is its title line and one call,

    # Exercise 1.1: layer_norm_stats (3 points)
    check("1.1")

which runs the exercise's visible cases against your normlib/ and prints that they pass, or
raises the first failure: a CheckFailed (which quantity and case, how far off, the likely
cause; normkit.testing.assert_close), or what your code raised (a stub's
NotImplementedError). The notebooks' extension (normkit.notebook) shows either as one short
message, with where your function is and which case failed.

The cases of Exercise N.M are the function registered with @exercise("N.M", ...) in this
package's unitN.py, beside the check functions they call (check_stats, ...). The hidden
tests are not here: they stand in the instructor's source alone (solutions/, between the
hidden-test markers of the check cell), call the same check functions on other cases, and
reach the judge from there; the release and the student edition never hold them.
"""

import importlib
import linecache
import traceback
from pathlib import Path

CHECKS = {}  # {"1.1": (the function running its visible cases, what it checks)}
KIT = Path(__file__).resolve().parents[1]  # normkit/


def exercise(number, target):
    """Register a function as Exercise `number`'s visible cases. target: what the student
    writes, as "module.name" of normlib ("layer_norm.layer_norm_stats")."""

    def register(function):
        CHECKS[number] = (function, target)
        return function

    return register


def _registered(number):
    """(function, target) of Exercise `number`, its unit's module imported."""
    unit = str(number).split(".")[0]
    if unit.isdigit() and (KIT / "checks" / f"unit{unit}.py").is_file():
        importlib.import_module(f"{__name__}.unit{unit}")
    if number not in CHECKS:
        raise ValueError(f"check: no exercise {number!r} (give its number as a string, e.g. "
                         "check(\"1.1\"))")
    return CHECKS[number]


def check(number):
    """Run Exercise `number`'s visible cases ("1.1"): print that they pass, or raise the
    first failure."""
    function, _ = _registered(number)
    function()
    print(f"Exercise {number}: the visible checks pass")


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
    if KIT in path.resolve().parents:
        return path.resolve().relative_to(KIT.parent).as_posix()
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
