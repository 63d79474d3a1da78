"""`make notebook-times`: how long each notebook takes to run in full, as Run All runs it
(every cell, the long experiments included), on this machine: one notebook at a time, each
in a fresh kernel, its wall time (the kernel's start included) and its CPU time (the
kernel's process, all its threads, and the children it waited for), against the course's
rule of a minute at most (BUDGET). Run it on a quiet machine: what else runs slows the
wall time, not the CPU time.

    python -m tools.maintainer.notebook_times [--student] [NAME ...]

The reference's notebooks (solutions/) by default; --student: the student edition's
(notebooks/, on the stubs: its errors are the unfinished exercises'). NAME: notebooks whose
file name starts with it (06, 08_normalization_today); all if none.
"""

import argparse
import subprocess
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

REPO = Path(__file__).resolve().parents[2]
BUDGET = 60  # seconds of wall time a notebook may take in full (the course's rule)
_CPU = ("import resource as _r\n"  # (the kernel's own, run after the notebook's last cell)
        "print(sum(getattr(_r.getrusage(w), f) for w in (_r.RUSAGE_SELF, _r.RUSAGE_CHILDREN)"
        " for f in ('ru_utime', 'ru_stime')))")


def run(path):
    """(wall seconds, CPU seconds, cells that raised) of the notebook at path run in full in
    a fresh kernel, in its own folder."""
    notebook = nbformat.read(path, as_version=4)
    notebook.cells.append(nbformat.v4.new_code_cell(_CPU))
    client = NotebookClient(notebook, kernel_name="python3", timeout=1800, allow_errors=True,
                            resources={"metadata": {"path": str(path.parent)}})
    start = time.monotonic()
    client.execute(stderr=subprocess.DEVNULL)  # (the kernel's log: its TCP warning)
    wall = time.monotonic() - start
    cpu = float("".join(o.get("text", "") for o in notebook.cells[-1].outputs) or "nan")
    raised = sum(any(o.output_type == "error" for o in c.get("outputs", ()))
                 for c in notebook.cells[:-1] if c.cell_type == "code")
    return wall, cpu, raised


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--student", action="store_true",
                        help="the student edition's notebooks (notebooks/), not solutions/")
    parser.add_argument("names", nargs="*", help="notebooks whose file name starts so")
    args = parser.parse_args(argv)
    folder = REPO / ("notebooks" if args.student else "solutions")
    paths = [p for p in sorted(folder.glob("[0-9]*.ipynb"))
             if not args.names or any(p.name.startswith(n) for n in args.names)]
    if not paths:
        raise SystemExit(f"no notebook of {folder} starts with {' or '.join(args.names)}")
    print(f"{'notebook':<36} {'wall':>7} {'CPU':>7}  (each in full, in a fresh kernel; "
          f"the rule: {BUDGET} s of wall time)")
    over = []
    for path in paths:
        wall, cpu, raised = run(path)
        note = "" if wall <= BUDGET else f"  OVER {BUDGET} s"
        note += f"  ({raised} cell{'s' * (raised != 1)} raised)" if raised else ""
        print(f"{path.name:<36} {wall:6.1f}s {cpu:6.1f}s{note}", flush=True)
        over += [path.name] if wall > BUDGET else []
    if over:
        print(f"{len(over)} over the minute: {', '.join(over)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
