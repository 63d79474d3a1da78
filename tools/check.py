"""`make check`: run each exercise's visible checks against your normlib/ and say
which exercises pass, fail, or are not yet implemented.

    python -m tools.check            every exercise
    python -m tools.check 1.2 2.1    only these

The checks are the graded cells of the notebooks (without the hidden tests the
grader adds). A stub that still raises NotImplementedError is reported as not yet
implemented, without a traceback; a failure is reported with its message and the
line of normlib it came from.
"""

import argparse
import re
import sys
import traceback
from pathlib import Path

from tools.course import graded_cells

REPO = Path(__file__).resolve().parents[1]
_TITLE = re.compile(r"#\s*Exercise (\d+\.\d+): (\w+)")


def exercises(notebook_dir):
    """(number, name, source) of every graded cell, in notebook order."""
    found = []
    for _, _, _, source in graded_cells(notebook_dir):
        if match := _TITLE.match(source):
            found.append((match.group(1), match.group(2), source))
    return found


def run(source, filename):
    """Run one check cell in a fresh namespace: ("pass" | "todo" | "FAIL", detail)."""
    try:
        exec(compile(source, filename, "exec"), {"__name__": "__check__"})
    except NotImplementedError as e:
        return "todo", str(e)
    except Exception as e:
        frames = [f for f in traceback.extract_tb(e.__traceback__) if "normlib" in f.filename]
        where = f"  ({Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
        message = str(e).strip().splitlines() or [""]
        return "FAIL", f"{type(e).__name__}: " + "\n      ".join(message[:6]) + where
    return "pass", ""


def main(argv=None):
    parser = argparse.ArgumentParser(description="Check your normlib exercises.")
    parser.add_argument("only", nargs="*", help="exercise numbers, e.g. 1.1 2.2")
    parser.add_argument("--notebooks", default="notebooks", help="where the notebooks are")
    args = parser.parse_args(argv)
    todo = [ex for ex in exercises(args.notebooks) if not args.only or ex[0] in args.only]
    if not todo:
        print(f"no exercise matches {args.only} in {args.notebooks}/")
        return 2
    labels = {"pass": "pass", "todo": "not yet implemented", "FAIL": "FAIL"}
    counts = {"pass": 0, "todo": 0, "FAIL": 0}
    for number, name, source in todo:
        status, detail = run(source, f"<Exercise {number}>")
        counts[status] += 1
        needs = re.match(r"Exercise (\d+\.\d+)", detail) if status == "todo" else None
        note = f" (needs Exercise {needs.group(1)})" if needs and needs.group(1) != number else ""
        print(f"Exercise {number}  {name:<24} {labels[status]}{note}")
        if status == "FAIL":
            print(f"      {detail}")
    print(
        f"\n{counts['pass']} passed, {counts['FAIL']} failed, "
        f"{counts['todo']} not yet implemented (the visible checks; grading adds hidden ones)"
    )
    return 0 if counts["pass"] == len(todo) else 1


if __name__ == "__main__":
    sys.exit(main())
