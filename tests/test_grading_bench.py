"""`make grading-bench`'s measure (tests/grading_bench.py): wall time, the CPU time of the
whole process tree, and the machine's load, on short commands (the bench itself takes
minutes and is not run here)."""

import os
import subprocess
import sys

from tests.grading_bench import Usage, measure, tree_cpu

BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < {}: pass\n"
# tree_cpu reads the kernel's counts in clock ticks (psutil, /proc/<pid>/stat), where BURN
# times itself in nanoseconds: each of a difference's two reads may lag by up to a tick, and
# each process counted adds its own rounding.
TICK = 1 / os.sysconf("SC_CLK_TCK")


def test_the_cpu_of_children_grandchildren_and_a_worker_started_before_counts():
    """A grandchild that ends (counted through its parent's reaped children) and a child
    started before the measure that works during it and outlives it (a cluster's worker:
    counted while it runs) both count; the measuring process itself barely works."""
    worker = subprocess.Popen(
        [sys.executable, "-c", "import sys\nsys.stdin.readline()\n" + BURN.format(0.4) +
         "print('done', flush=True)\nsys.stdin.readline()\n"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        def grade():
            worker.stdin.write("go\n")
            worker.stdin.flush()
            subprocess.run([sys.executable, "-c", "import subprocess, sys\nsubprocess.run("
                            f"[sys.executable, '-c', {BURN.format(0.3)!r}], check=True)"],
                           check=True)
            assert worker.stdout.readline() == "done\n"
            return "graded"

        result, usage = measure(grade)
    finally:
        worker.stdin.close()
        worker.wait(30)
    assert result == "graded"
    assert 0.7 - 6 * TICK <= usage.cpu <= 0.7 + 1.0  # 0.4 + 0.3, and three interpreters' starts
    assert usage.wall >= usage.cpu / os.cpu_count() and usage.wall < 60
    assert 0 <= usage.load_before and 0 <= usage.load_after


def test_the_cpu_of_this_process_counts_and_nothing_twice():
    before = tree_cpu()
    exec(BURN.format(0.3))
    assert 0.3 - 2 * TICK <= tree_cpu() - before < 0.6


def test_a_usage_reads_as_one_line():
    assert str(Usage(71.4, 140.2, 0.52, 1.93)) == (
        f"71 s; CPU 140 s, 2.0 cores busy; load 0.5 -> 1.9 on {os.cpu_count()} cores")
