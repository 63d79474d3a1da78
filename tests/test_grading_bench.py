"""`make grading-bench`'s measure (tests/grading_bench.py): wall time, the CPU time the
machine spent meanwhile, and its load, on short commands (the bench itself takes minutes
and is not run here)."""

import os
import subprocess
import sys
import time

import pytest

from tests.grading_bench import (
    _FLOOR,
    STEPS,
    Usage,
    floor,
    machine_cpu,
    measure,
    print_pipeline,
    profile,
    report,
)
from tools.course.exercises import REPO
from tools.sandbox import bubblewrap

BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < {}: pass\n"
# machine_cpu reads the kernel's counts in clock ticks, where BURN times itself in
# nanoseconds: each of a difference's two reads may lag by up to a tick per core.
TICK = 1 / os.sysconf("SC_CLK_TCK")
SLACK = 2 * TICK * os.cpu_count()


def test_a_process_that_ends_unreaped_by_the_measurer_counts():
    """What the bench's first measure missed (it summed this process tree's own and reaped
    children's times): a grandchild orphaned by its parent, as a sandbox's processes are
    when bubblewrap is killed, burns 0.4 s that no process of the tree ever reaps."""
    orphaner = ("import subprocess, sys\n"
                f"subprocess.Popen([sys.executable, '-c', {BURN.format(0.4)!r} + "
                "'import sys\\nopen(sys.argv[1], \"w\").close()', sys.argv[1]])\n")  # exits at once

    def grade(done):
        subprocess.run([sys.executable, "-c", orphaner, done], check=True)
        deadline = time.monotonic() + 60
        while not os.path.exists(done) and time.monotonic() < deadline:
            time.sleep(0.01)
        return os.path.exists(done)  # the grandchild burnt its 0.4 s

    done = f"/tmp/grading-bench-{os.getpid()}"
    try:
        result, usage = measure(grade, done)
    finally:
        if os.path.exists(done):
            os.unlink(done)
    assert result is True
    # at least the grandchild's burn; at most every core busy the whole time (the other
    # test worker and the rest of the machine count too: this is the machine's CPU)
    assert 0.4 - SLACK <= usage.cpu <= usage.wall * os.cpu_count() + SLACK
    assert 0 <= usage.load_before and 0 <= usage.load_after


def test_the_busy_time_is_read_from_proc_stat(tmp_path):
    """user + nice + system + irq + softirq, in ticks; not idle, iowait, steal, guest."""
    stat = tmp_path / "stat"
    ticks = os.sysconf("SC_CLK_TCK")
    stat.write_text(f"cpu  {100 * ticks} {2 * ticks} {30 * ticks} {900 * ticks} "
                    f"{50 * ticks} {ticks} {ticks} {ticks} {7 * ticks} 0\n"
                    "cpu0 1 2 3 4 5 6 7 8 9 0\nintr 12345\n")
    assert machine_cpu(stat) == 100 + 2 + 30 + 1 + 1
    assert 0 < machine_cpu() < 10 ** 12


def test_a_usage_reads_as_one_line():
    assert str(Usage(71.4, 140.2, 0.52, 1.93)) == (
        f"71 s; CPU 140 s, 2.0 cores busy; load 0.5 -> 1.9 on {os.cpu_count()} cores")


def test_the_floor_is_each_checks_own_cpu_on_the_reference():
    """floor() runs the check cells asked for, visible and hidden, on the reference in a
    fresh process with one thread: each gets its CPU seconds, and a check that fails (a
    stub in place of the reference) stops it rather than being counted."""
    found = floor(("1.1", "2.2"))
    assert set(found) == {"1.1", "2.2"}
    assert all(isinstance(cpu, float) and 0 < cpu < 60 for cpu in found.values()), found
    with pytest.raises(subprocess.CalledProcessError):
        _floor_on_the_stubs()


def _floor_on_the_stubs():
    """The floor's script run in the repository's root, where normlib/ is the student
    edition's stubs: Exercise 1.1's check raises there."""
    env = {**os.environ, **bubblewrap.threads(1), "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, "-c", _FLOOR, "1.1"], cwd=REPO, env=env,
                   capture_output=True, text=True, check=True)


def test_a_runs_line_gives_its_cpu_a_submission_against_the_floor(capsys):
    report("judge-only", "2 jobs", 7.9, Usage(76.0, 125.0, 0.1, 1.9), 0, 10, 10.0)
    line = capsys.readouterr().out
    assert line.startswith("BENCH judge-only")
    assert "7.9 submissions/min" in line and "12.5 s of CPU a submission" in line
    assert "1.2x the floor of 10.0 s" in line


def test_the_profile_times_each_check_as_the_judge_runs_it():
    """profile() judges the reference's checks asked for (sandboxed where bubblewrap is,
    grading's limits) and times each: the first includes the judge's start."""
    rows = profile(("1.1", "3.1"))
    assert [number for number, _, _ in rows] == ["1.1", "3.1"]
    assert all(wall > 0 and cpu >= 0 for _, wall, cpu in rows), rows


def test_the_pipelines_table_gives_each_steps_cpu_and_its_share_of_the_last(capsys):
    first = {step: (1.0, 1.0) for step in STEPS} | {"the judge": (30.0, 20.0)}
    later = {step: (1.0, 0.5) for step in STEPS if step != "the head's plan"} | {
        "the judge": (25.0, 17.5)}
    print_pipeline([first, later])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["step", "first", "2"]
    assert lines[1].split() == ["the", "head's", "plan", "1.00", "0.00", "0%"]
    assert lines[2].split() == ["the", "judge", "20.00", "17.50", "90%"]  # 17.5 of 19.5
    assert [line.split()[-3:] for line in lines[3:7]] == [["1.00", "0.50", "3%"]] * 4
    assert lines[-1] == ("PIPELINE 25.0 s of CPU for the first submission, 19.5 s for the "
                         "last")
