"""A sandbox's cgroup (tools/sandbox/cgroup.py): each way of making one, forced on a file system
that stands in for the machine's (cgroup v2 delegated, cgroup v1, systemd-run, none), and
the one this machine has, for real: a sandbox that starts more threads than TASKS gets
no more, even for a grader running as root, whom RLIMIT_NPROC does not bind."""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tools.sandbox import bubblewrap, cgroup
from tools.sandboxed.guard import TASKS

NO_SYSTEMD = staticmethod(lambda: None)


def _run(argv):
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout


def test_v2_delegated_each_sandbox_gets_a_cgroup_of_its_own(tmp_path):
    (tmp_path / "cgroup.controllers").write_text("cpu io memory pids\n")
    grader = tmp_path / "grader"
    grader.mkdir()
    (grader / "cgroup.subtree_control").write_text("memory pids\n")
    where = cgroup.place(tmp_path, "0::/grader\n", NO_SYSTEMD)
    assert where == cgroup.Place("v2", {"pids": grader, "memory": grader})
    argv = cgroup.wrap(["/bin/sh", "-c", "echo $$"], 100, where)
    [made] = grader.glob(cgroup.PREFIX + "*")
    assert (made / "pids.max").read_text() == f"{TASKS}\n"
    assert (made / "memory.max").read_text() == f"{100 << 20}\n"
    pid = _run(argv)  # the shell wrote its id, then became the command, with that id
    assert (made / "main" / "cgroup.procs").read_text() == pid  # (in a child: its own
    assert (made / "cgroup.subtree_control").read_text() == "+memory +pids\n"  # controllers


def test_v2_without_the_controllers_for_its_children_is_not_used(tmp_path):
    (tmp_path / "cgroup.controllers").write_text("cpu io memory pids\n")
    (tmp_path / "grader").mkdir()
    (tmp_path / "grader" / "cgroup.subtree_control").write_text("cpu\n")
    assert cgroup.place(tmp_path, "0::/grader\n", NO_SYSTEMD) is None


def test_v1_the_pids_and_memory_hierarchies_each_get_the_sandbox(tmp_path):
    pids, memory = tmp_path / "pids", tmp_path / "memory" / "job"
    pids.mkdir()
    memory.mkdir(parents=True)
    where = cgroup.place(tmp_path, "8:pids:/\n4:memory:/job\n0::/\n", NO_SYSTEMD)
    assert where == cgroup.Place("v1", {"pids": pids, "memory": memory})
    argv = cgroup.wrap(["/bin/sh", "-c", "echo $$"], 100, where)
    [in_pids], [in_memory] = pids.glob(cgroup.PREFIX + "*"), memory.glob(cgroup.PREFIX + "*")
    assert (in_pids / "pids.max").read_text() == f"{TASKS}\n"
    assert (in_memory / "memory.limit_in_bytes").read_text() == f"{100 << 20}\n"
    pid = _run(argv)
    assert (in_pids / "cgroup.procs").read_text() == pid == \
        (in_memory / "cgroup.procs").read_text()


def test_systemd_run_scopes_a_sandbox_where_systemd_runs_the_machine(tmp_path, monkeypatch):
    """A systemd-run that records how it was called, then runs the command, stands in for
    systemd's: the probe finds it, and the sandbox's command goes through it."""
    bin_, record = tmp_path / "bin", tmp_path / "record"
    bin_.mkdir()
    fake = bin_ / "systemd-run"
    fake.write_text(f'#!/bin/sh\necho "$@" >> {record}\n'
                    'while [ "$1" != -- ] && [ "$1" != true ]; do shift; done\n'
                    '[ "$1" = true ] && exit 0\nshift\nexec "$@"\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_}:{os.environ['PATH']}")
    where = cgroup.place(tmp_path, "0::/\n")
    assert where == cgroup.Place("systemd", user=os.geteuid() != 0)
    assert _run(cgroup.wrap(["/bin/echo", "graded"], 100, where)) == "graded\n"
    calls = record.read_text().splitlines()
    assert calls[0].endswith("--scope --quiet true")  # the probe
    assert f"-p TasksMax={TASKS} -p MemoryMax={100 << 20} -- /bin/echo graded" in calls[1]


def test_without_a_cgroup_a_command_runs_as_it_is(tmp_path):
    assert cgroup.place(tmp_path, "0::/\n", NO_SYSTEMD) is None
    assert cgroup.wrap(["/bin/true"], 100, None) == ["/bin/true"]


def test_the_empty_cgroups_of_ended_graders_are_swept(tmp_path):
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True).stdout.strip()
    gone, kept = tmp_path / f"{cgroup.PREFIX}{ended}-0", tmp_path / f"{cgroup.PREFIX}1-0"
    gone.mkdir()
    kept.mkdir()  # (pid 1 runs: a grader that may still use it)
    cgroup.sweep(tmp_path)
    assert not gone.exists() and kept.exists()


THREADS = """
import threading, time
started = 0
try:
    for _ in range(2 * TASKS):
        threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
        started += 1
except RuntimeError:
    pass
print(started, flush=True)
"""


@pytest.mark.skipif(bubblewrap.bwrap() is None, reason="bubblewrap is not installed: apt-get "
                    "install bubblewrap (make test installs it)")
def test_a_sandbox_starts_at_most_TASKS_tasks_here():
    """For real, with what this machine has: its cgroup (pids.max), or RLIMIT_NPROC. Root
    without a cgroup has no bound (the kernel exempts root from RLIMIT_NPROC): the README
    says so, and this test says which of these it ran."""
    where = cgroup.here()
    if where is None and os.geteuid() == 0:
        pytest.skip("no cgroup here, and root is exempt from RLIMIT_NPROC: no task bound")
    with tempfile.TemporaryDirectory() as folder:
        command, fd = bubblewrap.command(folder, ["-c", f"TASKS = {TASKS}\n" + THREADS], {}, 256)
        process = subprocess.Popen(command, pass_fds=() if fd is None else (fd,),
                                   stdout=subprocess.PIPE, text=True,
                                   preexec_fn=lambda: _nproc(where))
        os.close(fd)
        try:
            started = int(process.stdout.readline())
        finally:
            process.kill()
            process.wait()
    assert TASKS - 10 < started < TASKS, (where, started)


def _nproc(where):
    if where is None:  # (a user's: the bound is RLIMIT_NPROC, as the judge sets it)
        import resource
        resource.setrlimit(resource.RLIMIT_NPROC, (TASKS, TASKS))


def test_the_cgroup_of_a_sandbox_here_holds_its_limits():
    """Where this machine makes one: the limits read back from the kernel's own files."""
    where = cgroup.here()
    if where is None or where.kind == "systemd":
        pytest.skip(f"no cgroup folder here ({where})")
    argv = cgroup.wrap(["/bin/sh", "-c", "cat /proc/self/cgroup"], 100, where)
    own = cgroup.own_cgroups(_run(argv))
    for controller, parent in where.folders.items():
        path = Path(own["" if where.kind == "v2" else controller])
        folder = parent / (path.parent.name if path.name == "main" else path.name)
        limit = (folder / cgroup.LIMIT_FILES[where.kind][controller]).read_text().strip()
        assert limit == str(TASKS if controller == "pids" else 100 << 20)


FILES = """
import os
made = 0
while made < 2_000_000:  # empty files: no bytes, an inode and a directory entry each
    os.close(os.open(f"/tmp/{made}", os.O_CREAT | os.O_WRONLY))
    made += 1
    if made % 1000 == 0:
        print(made, flush=True)
"""


@pytest.mark.skipif(bubblewrap.bwrap() is None, reason="bubblewrap is not installed: apt-get "
                    "install bubblewrap (make test installs it)")
def test_the_inodes_of_a_sandboxs_files_count_in_its_cgroup_here():
    """Case 10: a million empty files in the sandbox's /tmp cost the host about 1 GB of
    kernel memory (tmpfs bounds bytes, and bubblewrap sets no nr_inodes). In a cgroup,
    that memory is the sandbox's: here 32 MiB, so it ends long before."""
    where = cgroup.here()
    if where is None:
        pytest.skip("no cgroup here: the README says what bounds a sandbox without one")
    with tempfile.TemporaryDirectory() as folder:
        command, fd = bubblewrap.command(folder, ["-c", FILES], {}, 32, size_mb=1)
        run = subprocess.run(command, pass_fds=() if fd is None else (fd,), timeout=120,
                             capture_output=True, text=True)
        os.close(fd)
    made = int(run.stdout.split()[-1]) if run.stdout.split() else 0
    assert run.returncode != 0 and made < 200_000, (run.returncode, made)


@pytest.mark.parametrize("kind", ["v1", "v2"])
def test_a_measured_call_gets_a_cgroup_of_its_own_in_a_graders_cgroup(tmp_path, kind):
    """tools.sandbox.cgroup.measure, forced on a file system standing in for the machine's: the
    process is moved into a fresh child ("call") of its sandbox's memory cgroup, whose peak
    is read from v1's or v2's file; in a cgroup the grader did not make, none."""
    sandbox_folder = (tmp_path / "memory" if kind == "v1" else tmp_path) / "job" / \
        f"{cgroup.PREFIX}1-0"
    sandbox_folder.mkdir(parents=True)
    (sandbox_folder / cgroup.PEAK_FILES[kind]).write_text("0\n")
    text = f"4:memory:/job/{cgroup.PREFIX}1-0\n" if kind == "v1" else \
        f"0::/job/{cgroup.PREFIX}1-0/main\n"
    measured = cgroup.measure(1234, tmp_path, text)
    assert measured == cgroup.Measured(sandbox_folder / "call", cgroup.PEAK_FILES[kind])
    assert (sandbox_folder / "call" / "cgroup.procs").read_text() == "1234\n"
    (sandbox_folder / "call" / cgroup.PEAK_FILES[kind]).write_text(f"{5 << 20}\n")
    assert cgroup.peak(measured) == 5 << 20
    assert cgroup.measure(1234, tmp_path, text.replace(cgroup.PREFIX, "other-")) is None


ALLOCATES = """
import sys
import numpy as np
held = np.ones(48 << 20, np.uint8)  # resident before the measure: 48 MiB
print("ready", flush=True)
sys.stdin.readline()
del held  # freed: room a measure of resident memory alone would not see taken again
again = np.ones(32 << 20, np.uint8)
print("done", flush=True)
sys.stdin.readline()
"""


@pytest.mark.skipif(bubblewrap.bwrap() is None, reason="bubblewrap is not installed: apt-get "
                    "install bubblewrap (make test installs it)")
def test_a_measured_calls_cgroup_counts_what_it_takes_whatever_it_freed_here():
    """For real, in this machine's cgroup (v1 or v2): a sandboxed process frees 48 MiB it
    held before the measure and takes 32 MiB: its resident memory never grew, its call's
    cgroup counts the 32 MiB."""
    where = cgroup.here()
    if where is None or where.kind == "systemd":
        pytest.skip(f"no cgroup of the grader's here ({where}): docs/security.md says what "
                    "a measure without one misses")
    with tempfile.TemporaryDirectory() as folder:
        command, fd = bubblewrap.command(folder, ["-c", ALLOCATES], {}, 256)
        process = subprocess.Popen(command, pass_fds=() if fd is None else (fd,), text=True,
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        os.close(fd)
        try:
            assert process.stdout.readline() == "ready\n"
            measured = cgroup.measure(bubblewrap.innermost(process.pid))
            process.stdin.write("\n")
            process.stdin.flush()
            assert process.stdout.readline() == "done\n"
            peak = cgroup.peak(measured)
        finally:
            process.kill()
            process.wait()
    assert 32 << 20 <= peak < 36 << 20, peak / 2 ** 20
