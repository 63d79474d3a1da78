"""`make check`: run each exercise's visible checks against your normlib/ and say
which exercises pass, fail, or are not yet implemented.

    python -m tools.student.check            every exercise
    python -m tools.student.check 1.2 2.2    only these
    python -m tools.student.check --hidden   with the hidden tests too (authors, on the reference)
    python -m tools.student.check --all      exit 1 unless every exercise passes (CI)

Exit status 1 if a check failed (with --all, or an exercise is a stub), else 0. The checks
are each exercise's check cell as solutions/ has it (tools.course.exercises), importing
`normlib` from the working directory's normlib/ first. A stub is "not yet implemented",
without a traceback; a failure shows its message and where to look: the deepest line of
your own files, and the case's line (normkit/checks/unit1.py:40). First comes the advice
for normlib/ itself: a provided module to restore, a file moved to normkit/ to delete.
"""

import argparse
import contextlib
import importlib
import inspect
import io
import re
import sys
import traceback
from pathlib import Path

from normkit.checks import case, namespace
from tools.course.exercises import exercises, student_files
from tools.course.markers import EXERCISE, STUB_MESSAGE

# The files normlib/ held before the course's code moved to normkit/ (its own package), and
# where each module is now (the per-channel helpers came back as normlib's provided
# _channels.py on 2026-12-07)
MOVED = {"benchmark.py": "normkit.benchmark", "channels.py": "normlib._channels",
         "diagnosis.py": "normkit.diagnosis", "gradcheck.py": "normkit.gradcheck",
         "language_model.py": "normkit.language_model", "notebook.py": "normkit.notebook",
         "testing.py": "normkit.testing", "training.py": "normkit.training"}
# normlib's provided modules: no exercise in them, every exercise file's helpers
PROVIDED = ("_blocks.py", "_channels.py", "_validation.py")


def run(source, filename, exercise=None):
    """Run one check cell in a fresh namespace: ("pass" | "todo" | "FAIL", detail)."""
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # (its "... pass" line: ours says it)
            exec(compile(source, filename, "exec"), namespace())
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
    found (CheckFailed), the exercise's function and the case (normkit/checks/unit1.py:40),
    else the case, else the check cell's line (a hidden test's)."""
    frames = traceback.extract_tb(e.__traceback__)
    if isinstance(e, SyntaxError) and e.filename:  # (the file that does not compile)
        frames.append(traceback.FrameSummary(e.filename, e.lineno or 0, "<module>"))
    mine = [f for f in frames if Path(f.filename).parent.name == "normlib"
            and f"normlib/{Path(f.filename).name}" in student_files()]
    cell = [f for f in frames if f.filename == filename]
    found = case(e)
    at = f"the case is {found[1]}:{found[2]}: {found[3]}" if found else \
        f"the case is the check's line {cell[0].lineno}: " \
        f"{source.splitlines()[cell[0].lineno - 1].strip()}" if cell else ""
    defined = _defined(exercise) if exercise and type(e).__name__ == "CheckFailed" else ""
    where = "" if str(e).startswith("your code raised") else \
        f"(your normlib/{Path(mine[-1].filename).name}:{mine[-1].lineno})" if mine \
        else f"(your {exercise.name} is at {defined}; {at})" if defined and at \
        else f"({at})" if at else ""
    message = str(e).strip().splitlines() or [""]
    return "FAIL", "\n".join([f"{type(e).__name__}: {message[0]}", *message[1:10], where])


# An exercise file's import of what moved, from before normkit/: "from .channels",
# "normlib.testing" (group 1: how, group 2: the module)
OLD_IMPORT = re.compile(rf"(from \.|normlib\.)({'|'.join(n[:-3] for n in MOVED)})\b")


def moved(folder):
    """The advice for a normlib/ folder that lacks a provided module (an older copy put in
    its place), still holds files moved to normkit/, or holds exercise files that import
    them ("" if none of these)."""
    folder, advice = Path(folder), []
    lost = [f"normlib/{name}" for name in PROVIDED if not (folder / name).is_file()]
    if lost:
        advice.append(f"Restore {', '.join(lost)} (git checkout -- {' '.join(lost)}): the "
                      "course provides them, your exercise files import them, and no "
                      "exercise is in them.")
    stale = [f"normlib/{name}" for name in MOVED if (folder / name).is_file()]
    if stale:
        advice.append(f"Delete {', '.join(stale)}: the course's code moved from normlib/ to "
                      "normkit/, its own package, which you import but never edit (your "
                      "exercise files stay in normlib/; the per-channel helpers are its "
                      "provided _channels.py). Stale copies there are never used, nor graded.")
    for path in sorted(folder.glob("*.py")):
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if path.name not in MOVED and OLD_IMPORT.search(line):
                new = OLD_IMPORT.sub(lambda m: ("from " if m[1] == "from ." else "") +
                                     MOVED[f"{m[2]}.py"], line)
                advice.append(f"In normlib/{path.name}, line {number}, write "
                              f"`{new.strip()}` for `{line.strip()}`: it imports what moved "
                              "(graded as it is, the old line fails).")
    return "\n".join(advice)


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
    advice = moved(Path(importlib.import_module("normlib").__file__).parent)
    if advice:
        print(advice + "\n")
    labels = {"pass": "pass", "todo": "not yet implemented", "FAIL": "FAIL"}
    width = max(len(e.name) for e in todo)  # (the longest name's column)
    counts = {"pass": 0, "todo": 0, "FAIL": 0}
    for e in todo:
        status, detail = run(e.source if args.hidden else e.visible, f"<Exercise {e.number}>", e)
        counts[status] += 1
        stub = EXERCISE.match(detail) if status == "todo" else None
        note = f" (needs Exercise {stub.group(1)})" if stub and stub.group(1) != e.number else ""
        print(f"Exercise {e.number}  {e.name:<{width}}  {labels[status]}{note}")
        if status == "FAIL":
            print("\n".join(f"      {line.strip()}" for line in detail.splitlines() if line))
    which = "with the hidden tests" if args.hidden else \
        "the visible checks; grading adds hidden ones"
    print(f"\n{counts['pass']} passed, {counts['FAIL']} failed, "
          f"{counts['todo']} not yet implemented ({which})")
    if counts["FAIL"]:
        print("Fix the failures first: each message above says which case and where.")
    elif counts["todo"]:
        print("Nothing failed. The exercises not yet implemented are still stubs in normlib/: "
              "write them, then run make check (python -m tools.student.check) again.")
    return 1 if counts["FAIL"] or (args.all and counts["todo"]) else 0


if __name__ == "__main__":
    sys.exit(main())
