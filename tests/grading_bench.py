"""Time grading: honest whole-course submissions graded per minute, in several set-ups.

    python -m tests.grading_bench [--students N] [--jobs N] [--no-execute] [--no-dask]
    python -m tests.grading_bench --floor | --profile | --pipeline

Run by `make grading-bench`; the README's grading figures come from it. Each run grades
tests/synthetic.honest_class in a fresh course (course layout, default limits, sandbox on):
1 and --jobs jobs, judge-only and with --execute, then judge-only on a Dask cluster of 1 and
--jobs workers started beforehand (its start not counted). Each prints its wall time, the
machine's CPU time meanwhile (from /proc/stat: the sandboxes' processes end unreaped by this
process) and the load average: run it on an idle machine. The floor is every check run once
on the reference in one process, with no judge or sandbox; each run's CPU a submission is
printed as a multiple of it. --floor prints the floor check by check; --profile, one
submission's checks beside it; --pipeline, each step of two submissions graded end to end.
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
from tools.course.exercises import REPO, SOLUTIONS
from tools.course.folder import Course
from tools.course.settings import read
from tools.instructor.autograde import autograde
from tools.instructor.build import COURSE, build_course
from tools.instructor.collect import collect
from tools.instructor.release import release
from tools.sandbox import bubblewrap

# run in solutions/ (its normlib/ first on sys.path: the reference's), one thread as a
# grading worker's runner has: each check's CPU, the imports every check needs paid before
_FLOOR = """
import json, sys, time
import numpy, torch
import normkit.checks, normkit.testing
from normkit.checks import namespace
from tools.course.exercises import exercises
torch.set_num_threads(1)
wanted = set(sys.argv[1:])
found = {}
for e in exercises():
    if wanted and e.number not in wanted:
        continue
    start = time.process_time()
    exec(compile(e.source, f"<check {e.number}>", "exec"), namespace())
    found[e.number] = time.process_time() - start
print(json.dumps(found))
"""


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


def floor(numbers=()):
    """{exercise number: CPU seconds} of each exercise's check cell (visible and hidden
    cases) run on the reference in one fresh process, one after the other, with one thread,
    the checks' imports paid before the first (numbers: these exercises only; all if none).
    Their sum is what grading a whole-course submission costs with no overhead."""
    env = {**os.environ, **bubblewrap.threads(1), "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", _FLOOR, *numbers], cwd=SOLUTIONS, env=env,
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def profile(numbers=()):
    """[(exercise number, wall seconds, the machine's CPU seconds)] of each check of one
    whole-course submission of the reference (numbers: these exercises only), judged in
    this process as a grading worker's judge judges it: sandboxed, the grading limits, one
    runner for the checks (started by the first), a fresh one for each measured call."""
    from tests.test_judge import judge_in_process, submission  # (a test module's helpers)
    from tools.course.exercises import exercises
    from tools.judge.judge import Judge
    from tools.sandboxed.limits import Limits

    chosen = [e for e in exercises() if not numbers or e.number in numbers]
    number = {e.grade_id: e.number for e in chosen}
    found = []

    class Timed(Judge):
        def _grade(self, grade_id, source, deadline):  # (it catches what a check raises)
            result, usage = measure(super()._grade, grade_id, source, deadline)
            found.append((number[grade_id], usage.wall, usage.cpu))
            return result

    with tempfile.TemporaryDirectory() as tmp:
        folder = submission(Path(tmp))
        verdicts = judge_in_process(folder, [(e.grade_id, e.source) for e in chosen],
                                    bubblewrap.bwrap() is not None,
                                    {e.module for e in chosen}, Limits(), judge=Timed)
    failed = [number[g] for g, (passed, _) in verdicts.items() if not passed]
    if failed:
        raise RuntimeError(f"the reference failed {', '.join(failed)} in the profile")
    return found


def honest_course(folder, students):
    """A fresh course in folder (the course layout), released, with `students` honest
    whole-course submissions collected (tests/synthetic.honest_class): its root."""
    root = build_course(folder, layout="course")
    with contextlib.redirect_stdout(io.StringIO()):
        release(root)
        honest_class(root, COURSE, students)
        collect(root)
    return root


# the steps of a submission's grading, end to end (pipeline), each timed where it runs: the
# head's plan (the submissions pending, the kit a worker needs, the tasks), then, for each
# submission, in the worker: the judge (client.verdicts: its process started by the first
# submission, each check in its sandboxed runners), the notebooks staged, nbgrader's
# autograde and the record read back (_autograde, _nbgrader_record), the rest of the task
# (its files put in the scratch course and taken out, the outcome's files read), and the
# head's save (the autograded folder, the gradebook)
INSIDE = ("the judge", "the notebooks staged", "nbgrader's record")  # (a worker's task's)
STEPS = ("the head's plan", *INSIDE, "the rest of the worker's task", "the head's save")


def pipeline(students=2):
    """[{step: (wall seconds, the machine's CPU seconds)}] of each of `students` honest
    whole-course submissions graded judge-only end to end in this process, as a grading
    worker (tools/worker/task.grade) and the head (tools/instructor/autograde: pending, kit,
    tasks, save) grade them, sandboxed, the course's limits: the first pays the judge
    process's start (its imports, once per worker thread), the others not. The head's plan
    is counted with the first."""
    from tools.instructor import autograde as head
    from tools.judge import client
    from tools.worker import task as worker

    with tempfile.TemporaryDirectory() as tmp:
        root = honest_course(tmp, students)
        found, now = [], {}

        def timed(step, function):
            def run(*args, **kwargs):
                result, usage = measure(function, *args, **kwargs)
                wall, cpu = now.get(step, (0.0, 0.0))
                now[step] = (wall + usage.wall, cpu + usage.cpu)
                return result
            return run

        saved = (client.verdicts, worker.stage, worker._autograde, worker._nbgrader_record)
        client.verdicts = timed("the judge", client.verdicts)
        worker.stage = timed("the notebooks staged", worker.stage)
        worker._autograde = timed("nbgrader's record", worker._autograde)
        worker._nbgrader_record = timed("nbgrader's record", worker._nbgrader_record)
        try:
            settings = read(root)
            course = timed("the head's plan", Course.load)(root)
            todo, _ = timed("the head's plan", head.pending)(root, course)
            timed("the head's plan", head.due_dates)(root, settings)
            kit = timed("the head's plan", head.make_kit)(root, course, sorted(todo))
            listed, _ = timed("the head's plan", head.tasks)(
                root, todo, settings.limits, False, bubblewrap.bwrap() is not None)
            for one in listed:
                outcome = timed("the worker's task", worker.grade)(kit, one)
                failed = [g for g, (passed, _) in outcome.verdicts.items() if not passed]
                if outcome.error or failed:
                    raise RuntimeError("the reference failed in the pipeline: "
                                       f"{outcome.error or ', '.join(failed)}")
                timed("the head's save", head.save)(root, course, outcome, one)
                task_wall, task_cpu = now.pop("the worker's task")
                inside = [now.get(s, (0.0, 0.0)) for s in INSIDE]
                now["the rest of the worker's task"] = (
                    task_wall - sum(w for w, _ in inside), task_cpu - sum(c for _, c in inside))
                found.append(dict(now))
                now.clear()
        finally:
            client.verdicts, worker.stage, worker._autograde, worker._nbgrader_record = saved
    return found


def rate(students, jobs, execute, scheduler=None):
    """Submissions per minute of one autograde of a fresh class (by a local cluster of
    `jobs` processes, or on the scheduler's cluster), its Usage and how many failed."""
    with tempfile.TemporaryDirectory() as tmp:
        root = honest_course(tmp, students)
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
    parser.add_argument("--floor", action="store_true", help="the floor alone, check by check")
    parser.add_argument("--profile", action="store_true",
                        help="one submission judged, check by check, beside the floor")
    parser.add_argument("--pipeline", action="store_true",
                        help="two submissions graded end to end, step by step")
    args = parser.parse_args(argv)
    if args.pipeline:
        print_pipeline(pipeline())
        return
    checks = floor()
    least = sum(checks.values())
    if args.floor:
        for number, cpu in sorted(checks.items(), key=lambda item: -item[1]):
            print(f"{number:5} {cpu:6.2f} s  {cpu / least:4.0%}")
        print(f"FLOOR {least:.1f} s of CPU: every check once, no overhead")
        return
    if args.profile:
        with contextlib.redirect_stdout(io.StringIO()):  # (each check's line)
            rows = profile()
        total = sum(cpu for _, _, cpu in rows)
        print("check  wall s  CPU s  share  floor s")
        for number, wall, cpu in sorted(rows, key=lambda row: -row[2]):
            print(f"{number:5} {wall:7.2f} {cpu:6.2f} {cpu / total:5.0%} {checks[number]:8.2f}")
        print(f"PROFILE {total:.1f} s of CPU judged, {total / least:.1f}x the floor of "
              f"{least:.1f} s (the first check's includes the judge's start)")
        return
    modes = [False] if args.no_execute else [False, True]
    print(f"{os.cpu_count()} cores; {args.students} honest whole-course submissions a run; "
          f"the floor: {least:.1f} s of CPU a submission (every check once, no overhead)")
    for execute in modes:
        for jobs in sorted({1, args.jobs}):
            report("with --execute" if execute else "judge-only",
                   f"{jobs} job{'s' * (jobs > 1)}", *rate(args.students, jobs, execute),
                   args.students, least)
    for workers in [] if args.no_dask else sorted({1, args.jobs}):
        with dask_cluster(workers) as scheduler:
            report("judge-only", f"Dask, {workers} worker{'s' * (workers > 1)}",
                   *rate(args.students, workers, False, scheduler), args.students, least)


def print_pipeline(rows):
    """The pipeline's table: each step's CPU for the first submission (the judge's start
    in it) and for each later one, and its share of the last."""
    last = rows[-1]
    total = sum(cpu for _, cpu in last.values())
    later = "  ".join(f"{n + 2:>6}" for n in range(len(rows) - 1))
    print(f"{'step':31} {'first':>6}  {later}  share of the last (CPU s)")
    for step in STEPS:
        cpus = [row.get(step, (0.0, 0.0))[1] for row in rows]
        print(f"{step:31} {cpus[0]:6.2f}  " + "  ".join(f"{c:6.2f}" for c in cpus[1:]) +
              f"  {last.get(step, (0.0, 0.0))[1] / total:5.0%}")
    print(f"PIPELINE {sum(c for _, c in rows[0].values()):.1f} s of CPU for the first "
          f"submission, {total:.1f} s for the last")


def report(mode, how, per_minute, usage, failed, students, least):
    """One run's line: submissions a minute, its Usage, its CPU per submission against the
    floor (least: the checks' own CPU a submission)."""
    each = usage.cpu / students
    print(f"BENCH {mode:15} {how:17}: {per_minute:5.1f} submissions/min ({usage}; "
          f"{each:.1f} s of CPU a submission, {each / least:.1f}x the floor of {least:.1f} s"
          f"{f'; {failed} FAILED' if failed else ''})", flush=True)


if __name__ == "__main__":
    main()
