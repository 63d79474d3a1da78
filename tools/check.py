"""`make check`: run each exercise's visible checks against your normlib/ and say
which exercises pass, fail, or are not yet implemented.

    python -m tools.check            every exercise
    python -m tools.check 1.2 2.2    only these
    python -m tools.check --hidden   with the hidden tests too (authors, on the reference)
    python -m tools.check --all      exit 1 unless every exercise passes (CI, on the reference)

Exit status: 1 if a check failed, else 0: exercises not yet implemented are work to do, not
errors (with --all they count as failures too).

The checks are the graded cells of the notebooks, as solutions/ has them
(tools.exercises), without the hidden tests the grader adds: what your notebook's check
cells say, whatever you changed in them. They import `normlib` from the working
directory's normlib/ first (yours, in the repository). A stub that still raises
NotImplementedError is reported as not yet implemented, without a traceback; a failure
is reported with its message (for a wrong value: the quantity, the case, the worst element
and the likely cause, normlib.testing.assert_close) and where to look: the deepest line of
your own files (normlib/'s files that hold exercises); for a wrong value, your function's
file and line and the check's line; else the check's line (any other NotImplementedError
too: torch's "must implement backward" is a mistake, not a stub), and which failed
exercise it builds on ("It needs Exercise 1.1, which fails"). What the check cells print
("the visible checks pass") is not repeated: an exercise that passes has one line.
`make check` works from notebooks/ too (its Makefile forwards to this one).
"""

import argparse
import contextlib
import importlib
import inspect
import io
import sys
import traceback
from pathlib import Path

from tools.exercises import exercises, needs, student_files
from tools.markers import EXERCISE, STUB_MESSAGE


def run(source, filename, exercise=None):
    """Run one check cell in a fresh namespace: ("pass" | "todo" | "FAIL", detail)."""
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # (its "... pass" line: ours says it)
            exec(compile(source, filename, "exec"), {"__name__": "__check__"})
    except NotImplementedError as e:
        if STUB_MESSAGE.fullmatch(str(e)):  # a stub: not yet written
            return "todo", str(e)
        return _failure(e, source, filename, exercise)  # torch's "must implement backward"
    except Exception as e:
        return _failure(e, source, filename, exercise)
    return "pass", ""


def _defined(exercise):
    """Where the exercise's function or class is: "normlib/layer_norm.py:21" ("" if its
    module does not import)."""
    try:
        target = getattr(importlib.import_module(exercise.module), exercise.name)
        return f"{exercise.file}:{inspect.getsourcelines(target)[1]}"
    except Exception:  # (its module fails to import: that failure says more)
        return ""


def _failure(e, source, filename, exercise=None):
    """("FAIL", the exception's type and message, and where: the deepest line of the
    student's own files (normlib/layer_norm.py:55), else, for a wrong value that the check
    found (CheckFailed), the exercise's function, else the check's line)."""
    frames = traceback.extract_tb(e.__traceback__)
    if isinstance(e, SyntaxError) and e.filename:  # (the file that does not compile)
        frames.append(traceback.FrameSummary(e.filename, e.lineno or 0, "<module>"))
    mine = [f for f in frames if Path(f.filename).parent.name == "normlib"
            and f"normlib/{Path(f.filename).name}" in student_files()]
    check = [f for f in frames if f.filename == filename]
    lines = source.splitlines()
    defined = _defined(exercise) if exercise and type(e).__name__ == "CheckFailed" else ""
    where = f"(your normlib/{Path(mine[-1].filename).name}:{mine[-1].lineno})" if mine \
        else f"(your {exercise.name} is at {defined}; the case is the check's line " \
        f"{check[0].lineno}: {lines[check[0].lineno - 1].strip()})" if defined and check \
        else f"(the check's line {check[-1].lineno}: {lines[check[-1].lineno - 1].strip()})" \
        if check else ""
    message = str(e).strip().splitlines() or [""]
    return "FAIL", "\n".join([f"{type(e).__name__}: {message[0]}", *message[1:6], where])


def main(argv=None):
    parser = argparse.ArgumentParser(description="Check your normlib exercises.")
    parser.add_argument("only", nargs="*", help="exercise numbers, e.g. 1.1 2.5")
    parser.add_argument("--hidden", action="store_true", help="run the hidden tests too")
    parser.add_argument("--all", action="store_true",
                        help="exit 1 unless every exercise passes (not only when one fails)")
    args = parser.parse_args(argv)
    todo = [e for e in exercises() if not args.only or e.number in args.only]
    if not todo:
        print(f"no exercise {' '.join(args.only)}: the course has "
              f"{', '.join(e.number for e in exercises())}")
        return 2
    labels = {"pass": "pass", "todo": "not yet implemented", "FAIL": "FAIL"}
    width = max(len(e.name) for e in todo)  # (the longest name's column)
    counts = {"pass": 0, "todo": 0, "FAIL": 0}
    failed = set()  # the exercises that failed so far (a check builds on earlier ones)
    for e in todo:
        status, detail = run(e.source if args.hidden else e.visible, f"<Exercise {e.number}>", e)
        counts[status] += 1
        stub = EXERCISE.match(detail) if status == "todo" else None
        note = f" (needs Exercise {stub.group(1)})" if stub and stub.group(1) != e.number else ""
        print(f"Exercise {e.number}  {e.name:<{width}}  {labels[status]}{note}")
        if status == "FAIL":
            failed.add(e.number)
            before = needs(e.number, failed)
            if before:
                detail += (f"\nIt needs Exercise {', '.join(before)}, which "
                           f"fail{'s' * (len(before) == 1)}: fix that first, then this again.")
            print("\n".join(f"      {line.strip()}" for line in detail.splitlines() if line))
    which = "with the hidden tests" if args.hidden else \
        "the visible checks; grading adds hidden ones"
    print(f"\n{counts['pass']} passed, {counts['FAIL']} failed, "
          f"{counts['todo']} not yet implemented ({which})")
    if counts["FAIL"]:
        print("Fix the failures first: each message above says which case and where.")
    elif counts["todo"]:
        print("Nothing failed. The exercises not yet implemented are still stubs in normlib/: "
              "write them, then run make check (python -m tools.check) again.")
    return 1 if counts["FAIL"] or (args.all and counts["todo"]) else 0


if __name__ == "__main__":
    sys.exit(main())
