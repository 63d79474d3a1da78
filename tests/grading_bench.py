"""`make grading-bench`: whole-course submissions graded per minute, with 1 job and with
2 (or --jobs), judge-only and with --execute, each in a fresh course, in one run; and
judge-only on a Dask cluster started beforehand as an instructor starts one (`dask
scheduler`, then `dask worker` processes as `make worker` starts them), with 1 and 2 (or
--jobs) workers: what a cluster's workers give, next to the jobs of one machine.

    python -m tests.grading_bench [--students N] [--jobs N] [--no-execute] [--no-dask]

The class is honest (tests/synthetic.honest_class: the reference's text in every file a
student writes, the notebooks as released), the course layout (every notebook in one
assignment), the default limits, the OS sandbox on. A run with jobs starts its local
cluster and stops it (as make autograde does); a run on a cluster does not count its
start. The README's figures come from it.

Each run prints its wall time beside the CPU time the machine spent meanwhile (every
process's, from /proc/stat: the grading processes and the sandboxes, which end unreaped
by this process's tree, are counted only there) and the machine's load average before and
after. Run it on a machine doing nothing else: a run that is slow with its cores busy was
slow (measure); one with idle cores waited (for a lock, a disk, the network).
"""

import argparse
import contextlib
import dataclasses
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.synthetic import honest_class
from tools.course.exercises import REPO
from tools.instructor.autograde import autograde
from tools.instructor.build import COURSE, build_course
from tools.instructor.collect import collect
from tools.instructor.release import release


@dataclasses.dataclass(frozen=True)
class Usage:
    """What a measured call took: wall seconds, the machine's busy CPU seconds meanwhile,
    and its 1-minute load average before and after."""
    wall: float
    cpu: float
    load_before: float
    load_after: float

    def __str__(self):
        return (f"{self.wall:.0f} s; CPU {self.cpu:.0f} s, {self.cpu / self.wall:.1f} cores "
                f"busy; load {self.load_before:.1f} -> {self.load_after:.1f} on "
                f"{os.cpu_count()} cores")


def machine_cpu(stat="/proc/stat"):
    """CPU seconds the machine has spent busy since it started, over all its cores: the
    first line of /proc/stat (user, nice, system, irq, softirq; not idle nor iowait, not
    steal, the time a virtual machine's host kept for others, and not guest, which user
    already counts)."""
    fields = Path(stat).read_text().splitlines()[0].split()
    assert fields[0] == "cpu", fields[:1]
    user, nice, system, _idle, _iowait, irq, softirq = map(int, fields[1:8])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def measure(function, *args, **kwargs):
    """function(*args, **kwargs)'s result and its Usage."""
    load, cpu, start = os.getloadavg()[0], machine_cpu(), time.monotonic()
    result = function(*args, **kwargs)
    wall = time.monotonic() - start
    return result, Usage(wall, machine_cpu() - cpu, load, os.getloadavg()[0])


def rate(students, jobs, execute, scheduler=None):
    """Submissions per minute of one autograde of a fresh class (by a local cluster of
    `jobs` processes, or on the scheduler's cluster), its Usage and how many failed."""
    with tempfile.TemporaryDirectory() as tmp:
        root = build_course(tmp, layout="course")
        with contextlib.redirect_stdout(io.StringIO()):
            release(root)
            honest_class(root, COURSE, students)
            collect(root)
        with contextlib.redirect_stdout(io.StringIO()) as out:
            failed, usage = measure(autograde, root, jobs=jobs, execute=execute,
                                    scheduler=scheduler)
        if failed:
            print(out.getvalue())
        return students * 60 / usage.wall, usage, failed


STARTUP_SECONDS = 120  # for the scheduler, then its workers, to start


@contextlib.contextmanager
def dask_cluster(workers):
    """The address of a Dask scheduler with this many worker processes of one thread each,
    started by Dask's command line (make worker's), and stopped after."""
    bin_ = Path(sys.executable).parent
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with tempfile.TemporaryDirectory() as tmp:
        address = Path(tmp) / "scheduler.json"
        started = [subprocess.Popen([bin_ / "dask", "scheduler", "--scheduler-file", address,
                                     "--port", "0", "--no-dashboard"], cwd=REPO, env=env,
                                    stderr=subprocess.DEVNULL)]
        try:
            deadline = time.monotonic() + STARTUP_SECONDS
            while not address.exists() or not address.read_text().endswith("}"):
                if time.monotonic() > deadline or started[0].poll() is not None:
                    raise RuntimeError("dask scheduler did not start")
                time.sleep(0.1)
            started.append(subprocess.Popen(
                [bin_ / "dask", "worker", "--scheduler-file", address, "--nthreads", "1",
                 "--nworkers", str(workers), "--memory-limit", "0", "--no-dashboard"],
                cwd=REPO, env=env, stderr=subprocess.DEVNULL))
            scheduler = json.loads(address.read_text())["address"]
            from distributed import Client

            with Client(scheduler) as dask:
                dask.wait_for_workers(workers, timeout=STARTUP_SECONDS)
            yield scheduler
        finally:
            for process in reversed(started):
                process.terminate()
                process.wait(60)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--no-execute", action="store_true", help="judge-only alone")
    parser.add_argument("--no-dask", action="store_true", help="no run on a Dask cluster")
    args = parser.parse_args(argv)
    modes = [False] if args.no_execute else [False, True]
    print(f"{os.cpu_count()} cores; {args.students} honest whole-course submissions a run")
    for execute in modes:
        for jobs in sorted({1, args.jobs}):
            report("with --execute" if execute else "judge-only",
                   f"{jobs} job{'s' * (jobs > 1)}", *rate(args.students, jobs, execute))
    for workers in [] if args.no_dask else sorted({1, args.jobs}):
        with dask_cluster(workers) as scheduler:
            report("judge-only", f"Dask, {workers} worker{'s' * (workers > 1)}",
                   *rate(args.students, workers, False, scheduler))


def report(mode, how, per_minute, usage, failed):
    print(f"BENCH {mode:15} {how:17}: {per_minute:5.1f} submissions/min ({usage}"
          f"{f'; {failed} FAILED' if failed else ''})", flush=True)


if __name__ == "__main__":
    main()
