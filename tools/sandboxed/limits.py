"""What one submission may use at grading: one typed object (Limits), from the course's
config (tools/course/settings.py) to the judge's runner and the grading kernels, which get it as
JSON (to_json, from_json). Only the standard library: the runner imports it.
"""

import dataclasses
import json

# a check over its time limit whose runner waited for a CPU STARVED of that time or more,
# twice: the machine was busy, not the code slow (the judge, Judge._grade); grades.csv and
# the feedback say BUSY, and the next make autograde grades it again
STARVED = 0.5
BUSY = "needs regrading: ran out of time on a busy machine"


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one submission may use at grading, in the judge's runner and in a grading kernel."""

    timeout: int = 30  # seconds a check (a notebook cell, with --execute) may run
    notebook_timeout: int = 300  # seconds all checks of a submission (a notebook) may run
    startup_timeout: int = 60  # seconds for a runner (a kernel) to start, on top
    memory_mb: int = 4096  # address space of each grading process, MiB
    file_mb: int = 64  # largest file a grading process may write, MiB
    protected: tuple = ()  # folders student code may not read: the course, solutions/
    compile_timeout: int = 60  # seconds for a check's compile step (Numba's kernels), before
    # its own clock starts (tools/judge/judge.py, Judge._compile)
    # with --execute, the outputs the grading worker keeps as they arrive from a kernel
    # (tools/worker/execute.py); what is past them is dropped with a note. An honest
    # notebook is far inside: the largest output of the course's solutions is a figure of
    # 0.22 MB, its largest cell's outputs 0.22 MB, its largest notebook's 0.82 MB (unit 4's);
    # a feedback page shows 1 MiB per output and 3 MiB in all (tools/course/bounds.py)
    output_bytes: int = 1 << 20  # one output (a cell's stdout or stderr in all: one output)
    cell_output_bytes: int = 2 << 20  # one cell's outputs together
    notebook_output_bytes: int = 10 << 20  # a notebook's outputs together: ten times the
    # largest honest one's, and well under a file a submission may hold (32 MiB: bounds.py)
    record_timeout: int = 120  # seconds nbgrader's autograde may take to record a submission
    # (its notebooks' cells, beside the judge; with --execute, the runs' own limits on top)
    feedback_timeout: int = 60  # seconds nbgrader's generate_feedback may take for one page

    def to_json(self):
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text):
        found = json.loads(text)
        return cls(**{**found, "protected": tuple(found["protected"])})

    def replace(self, **changes):
        """These limits, with the changes that are not None (the command line's --timeout)."""
        return dataclasses.replace(self, **{k: v for k, v in changes.items() if v is not None})
