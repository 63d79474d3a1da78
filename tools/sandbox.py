"""The OS sandbox of the worker: bubblewrap (Debian's `bubblewrap`), with a seccomp filter.

The worker runs in its own user, PID, IPC, network, UTS and cgroup namespaces. It sees:

- read-only: /usr (and its /bin, /lib links), the Python installation and the course's
  virtual environment, and the course's tools/ at /opt/grader/tools (the worker's code);
- read-write: its working folder (/submission for the judge's worker, the notebook's own
  path for a grading kernel), filled with a copy of the submission (read-only at
  /opt/submission), and a fresh /tmp and /dev/shm: file systems of DISK_MB MiB each that
  vanish with it; a kernel, its sockets' folder, a file system of SOCKETS_MB MiB of its
  own (the host connects through /proc/PID/root: `reach`);
- /proc of its own PID namespace (no other process exists there), read-only (no resetting
  the peak of its memory that the judge measures: /proc/self/clear_refs), a minimal /dev;
- nothing else: not the course folder, the gradebook, solutions/, other submissions or
  their temporary files, nor the judge's. No network (not even the host's loopback).

Nothing of the host's environment is in reach: bubblewrap itself starts with an empty
environment (`env -i` right before it, after any cgroup shell or systemd scope, which hand
their own environment on), because its first process, pid 1 of the sandbox, keeps the
environment bwrap started with (/proc/1/environ), whatever --clearenv does for the program
it runs; the program gets only the variables named here (`command`'s env, and PYTHONPATH,
HOME, MPLCONFIGDIR, PATH). What starts the sandbox (a cgroup's shell, systemd-run) gets
only LAUNCH_ENV's variables of the caller's (`launch_env`).

seccomp refuses fork, vfork, clone3 and any clone that is not a new thread: the worker
starts no process. Resource limits (memory, file size, no core dumps) are set by the
judge before bubblewrap starts. The namespace's first process dies with bubblewrap
(--die-with-parent), and with it every process of the namespace: the judge kills
bubblewrap when a check runs over its time or grading ends, so nothing outlives it.

What it does not protect against: a bug in the Linux kernel (namespaces and seccomp are
kernel features). For a class you do not trust, also run grading on a host of its own:
a container or a VM per grading host.
"""

import contextlib
import os
import shutil
import struct
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

from tools import cgroup
from tools.exercises import REPO

INSTALL = "Install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install " \
    "bubblewrap), or grade with --no-sandbox on a machine you do not mind student code reaching"

# where the sandbox sees the submission's private copy (read-only), and the working folder
# it copies it to: a fresh file system of DISK_MB MiB, as are /tmp and /dev/shm, so that
# what student code writes is bounded in total and vanishes with the sandbox
SOURCE, SUBMISSION, DISK_MB = "/opt/submission", "/submission", 256
# a kernel's IPC sockets: a file system of its own, and the connection file it reads there
SOCKETS_MB, CONNECTION = 1, "kernel.json"


def threads(n):
    """Environment variables limiting NumPy's and torch's threads to n per process: with
    several processes grading at once, more threads than cores slow every one of them."""
    return {name: str(n) for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS",
                                      "OPENBLAS_NUM_THREADS")}


# the environment variables the worker keeps: its number of threads
THREADS = tuple(threads(1))
# the caller's variables that what starts bubblewrap gets (a cgroup's shell, systemd-run):
# a PATH, and what a user's systemd-run needs to reach that user's systemd; bubblewrap
# itself gets none (`env -i`)
LAUNCH_ENV = ("PATH", "XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS")
# seccomp: struct seccomp_data {int nr; u32 arch; u64 ip; u64 args[6];}
_ARCH_X86_64, _ARCH_AARCH64 = 0xC000003E, 0xC00000B7
_SYSCALLS = {  # machine: (audit arch, fork, vfork, clone, clone3); -1: no such call there
    "x86_64": (_ARCH_X86_64, 57, 58, 56, 435),
    "aarch64": (_ARCH_AARCH64, -1, -1, 220, 435),
}
_CLONE_THREAD = 0x00010000
_ALLOW, _EPERM, _ENOSYS = 0x7FFF0000, 0x00050000 | 1, 0x00050000 | 38


def _bpf(code, jt, jf, k):
    return struct.pack("<HBBI", code, jt, jf, k)


def seccomp_filter(machine=None):
    """The BPF program, as bytes, that bubblewrap's --seccomp loads: EPERM for fork, vfork
    and a clone without CLONE_THREAD (threads stay allowed: NumPy and torch use them),
    ENOSYS for clone3 (so that the C library falls back to clone). None on a machine
    whose system calls it does not know."""
    machine = machine or os.uname().machine
    if machine not in _SYSCALLS:
        return None
    arch, fork, vfork, clone, clone3 = _SYSCALLS[machine]
    LD, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06  # BPF_LD|W|ABS, BPF_JMP|..|K, BPF_RET
    never = 0xFFFFFFFF  # (a call the machine does not have: no number matches)
    return b"".join([
        _bpf(LD, 0, 0, 4),  # 0: the architecture
        _bpf(JEQ, 1, 0, arch),  # 1: this machine's: go to 3
        _bpf(RET, 0, 0, _EPERM),  # 2: another ABI (32-bit calls): refuse
        _bpf(LD, 0, 0, 0),  # 3: the system call's number
        _bpf(JGE, 7, 0, 0x40000000),  # 4: the x32 ABI's numbers: refuse (12)
        _bpf(JEQ, 6, 0, fork & never),  # 5: refuse (12)
        _bpf(JEQ, 5, 0, vfork & never),  # 6: refuse (12)
        _bpf(JEQ, 6, 0, clone3),  # 7: ENOSYS (14)
        _bpf(JEQ, 1, 0, clone),  # 8: look at its flags (10)
        _bpf(RET, 0, 0, _ALLOW),  # 9: any other call
        _bpf(LD, 0, 0, 16),  # 10: clone's flags (the low 32 bits of args[0])
        _bpf(JSET, 1, 0, _CLONE_THREAD),  # 11: a thread: allow (13)
        _bpf(RET, 0, 0, _EPERM),  # 12
        _bpf(RET, 0, 0, _ALLOW),  # 13
        _bpf(RET, 0, 0, _ENOSYS),  # 14
    ])


def innermost(pid):
    """The process id of the last of process pid's chain of children: the process that a
    sandbox runs, two levels under bubblewrap (a sandbox starts no process of its own)."""
    while True:
        children = []
        for entry in os.listdir("/proc"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                with open(f"/proc/{entry}/stat") as f:  # pid (comm) state ppid ...
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        children.append(int(entry))
        if not children:
            return pid
        pid = min(children)


def reach(pid, folder, timeout=60):
    """The path by which the host reaches `folder` as the sandbox started by process pid
    sees it (command's sockets: its private file system there), through
    /proc/<the sandbox's process>/root; once the sandbox has mounted it."""
    host = os.stat(folder).st_dev
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        path = f"/proc/{innermost(pid)}/root{os.path.abspath(folder)}"
        with contextlib.suppress(OSError):
            if os.stat(path).st_dev != host:  # (before bubblewrap mounts it: the host's)
                return path
        time.sleep(0.01)
    raise RuntimeError(f"the sandbox of process {pid} did not mount {folder} in {timeout} s")


def thread_env():
    """The caller's variables of THREADS (the only ones a sandboxed process inherits)."""
    return {k: v for k, v in os.environ.items() if k in THREADS}


def launch_env():
    """The environment to start a sandbox's command with: the caller's LAUNCH_ENV variables
    alone (bubblewrap itself starts with none: `command`)."""
    return {k: v for k, v in os.environ.items() if k in LAUNCH_ENV}


def bwrap():
    """The path of bubblewrap, or None."""
    return shutil.which("bwrap")


def command(folder, argv, env, memory_mb, inside=SUBMISSION, size_mb=DISK_MB, sockets=None,
            files=None):
    """(the command that runs argv, a Python command line, in the sandbox; the file
    descriptor of its seccomp filter, to pass to it). folder: the private copy of the
    submission, seen read-only at SOURCE; inside: the working folder, a fresh file system of
    size_mb MiB that the program fills from SOURCE before any student code
    (tools.guard.install's source). memory_mb: its memory, besides its file systems, in
    its cgroup where the machine allows one (tools/cgroup.py: also at most TASKS tasks).
    env: the variables it gets (nothing else of the caller's environment); sockets: a host
    folder (a kernel's), where the program finds a private file system of SOCKETS_MB MiB for
    its IPC sockets, which the host reaches through `reach`, and the folder's connection
    file (CONNECTION), read-only; files: {path inside: host file} it may read (matplotlib's
    font cache)."""
    python = Path(sys.executable)
    venv = Path(sys.prefix)
    ro = {"/usr", sys.base_prefix, str(venv), sysconfig.get_paths()["purelib"]}
    size = str(size_mb << 20)
    # bubblewrap with an empty environment: its pid 1 in the sandbox keeps it
    args = ["/usr/bin/env", "-i", bwrap(), "--unshare-all", "--die-with-parent", "--new-session",
            "--cap-drop", "ALL", "--uid", "65534", "--gid", "65534", "--hostname", "grading",
            # first the fresh file systems, then the binds (the environment may be under
            # /tmp, as in a fresh clone's test run: a later mount would hide it)
            "--size", size, "--tmpfs", "/tmp", "--proc", "/proc", "--remount-ro", "/proc",
            "--dev", "/dev",
            "--size", size, "--tmpfs", "/dev/shm"]
    for path in sorted(ro):
        args += ["--ro-bind", path, path]
    for link in ("bin", "lib", "lib64", "sbin"):
        target = Path("/", link)
        if target.is_symlink():
            args += ["--symlink", os.readlink(target), f"/{link}"]
        elif target.is_dir():
            args += ["--ro-bind", str(target), str(target)]
    for inside_path, path in (files or {}).items():
        args += ["--ro-bind", str(path), str(inside_path)]
    if sockets is not None:
        connection = os.path.join(sockets, CONNECTION)
        args += ["--size", str(SOCKETS_MB << 20), "--tmpfs", str(sockets),
                 "--ro-bind", connection, connection]
    args += ["--ro-bind", str(REPO / "tools"), "/opt/grader/tools",
             "--ro-bind", str(folder), SOURCE, "--size", size, "--tmpfs", str(inside),
             "--chdir", str(inside), "--clearenv"]
    for name, value in {**env, "PYTHONPATH": "/opt/grader", "HOME": "/tmp",
                        "MPLCONFIGDIR": "/tmp", "PATH": "/usr/bin:/bin"}.items():
        args += ["--setenv", name, str(value)]
    program = seccomp_filter()
    fd = None
    if program is not None:
        with tempfile.TemporaryFile() as f:  # bwrap reads the filter from a descriptor
            f.write(program)
            f.seek(0)
            fd = os.dup(f.fileno())
        args += ["--seccomp", str(fd)]
    memory = memory_mb + 3 * size_mb  # (its working folder, /tmp and /dev/shm)
    return cgroup.wrap([*args, "--", str(python), *argv], memory, cgroup.here()), fd
