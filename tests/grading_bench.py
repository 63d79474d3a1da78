"""`make grading-bench`: whole-course submissions graded per minute, with 1 job and with
2 (or --jobs), judge-only and with --execute, each in a fresh course, in one run.

    python -m tests.grading_bench [--students N] [--jobs N] [--no-execute]

The class is honest (tests/synthetic.honest_class: the reference's text in every file a
student writes, the notebooks as released), the course layout (every notebook in one
assignment), the default limits, the OS sandbox on. The README's figures come from it.
"""

import argparse
import contextlib
import io
import os
import tempfile
import time

from tests.synthetic import honest_class
from tools.autograde import autograde
from tools.collect import collect
from tools.course import COURSE, build_course
from tools.release import release


def rate(students, jobs, execute):
    """Submissions per minute of one autograde of a fresh class, and how many failed."""
    with tempfile.TemporaryDirectory() as tmp:
        root = build_course(tmp, layout="course")
        with contextlib.redirect_stdout(io.StringIO()):
            release(root)
            honest_class(root, COURSE, students)
            collect(root)
        start = time.monotonic()
        with contextlib.redirect_stdout(io.StringIO()) as out:
            failed = autograde(root, jobs=jobs, execute=execute)
        seconds = time.monotonic() - start
        if failed:
            print(out.getvalue())
        return students * 60 / seconds, seconds, failed


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--no-execute", action="store_true", help="judge-only alone")
    args = parser.parse_args(argv)
    modes = [False] if args.no_execute else [False, True]
    print(f"{os.cpu_count()} cores; {args.students} honest whole-course submissions a run")
    for execute in modes:
        for jobs in sorted({1, args.jobs}):
            per_minute, seconds, failed = rate(args.students, jobs, execute)
            mode = "with --execute" if execute else "judge-only"
            print(f"BENCH {mode:15} {jobs} job{'s' * (jobs > 1)}: {per_minute:5.1f} "
                  f"submissions/min ({seconds:.0f} s{f', {failed} FAILED' if failed else ''})",
                  flush=True)


if __name__ == "__main__":
    main()
