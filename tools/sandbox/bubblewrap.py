"""The OS sandbox of the runner and grading kernels: bubblewrap with a seccomp filter, in
its own user, PID, IPC, network, UTS and cgroup namespaces (docs/security.md, section 4).

- read-only: /usr, Python, the course's environment and, of tools/, INSIDE alone
  (tools/sandboxed/, which imports nothing else of tools/: tests/test_layout.py);
- read-write: its working folder, holding a copy of the submission (read-only at SOURCE),
  fresh /tmp and /dev/shm of DISK_MB MiB each, and a kernel's sockets' folder (SOCKETS_MB,
  which the host reaches through `reach`); a measuring runner writes nowhere at all;
- its own /proc, read-only (the memory peak the judge reads cannot be reset), a minimal
  /dev; nothing else: not the course, the gradebook, solutions/, other submissions, network.

No host environment reaches it: `env -i` runs right before bwrap, whose pid 1 in the
sandbox keeps bwrap's environment whatever --clearenv does (its launcher gets LAUNCH_ENV).
seccomp refuses fork, vfork and any clone but a thread; all of it dies with bwrap.
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

from tools.course.exercises import REPO
from tools.sandbox import cgroup
from tools.sandboxed.guard import GRADER

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
                                      "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS")}


# the environment variables the runner keeps: its number of threads
THREADS = tuple(threads(1))
# what a sandbox mounts of the repository, at the same path under GRADER: the package's
# __init__ (a docstring) and the folder of the code that runs inside
INSIDE = ("tools/__init__.py", "tools/sandboxed")
# the caller's variables that what starts bubblewrap gets (a cgroup's shell, systemd-run):
# a PATH, and what a user's systemd-run needs to reach that user's systemd; bubblewrap
# itself gets none (`env -i`)
LAUNCH_ENV = ("PATH", "XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS")
# seccomp: struct seccomp_data {int nr; u32 arch; u64 ip; u64 args[6];}
_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}  # audit arch
_CALLS = {  # machine: {system call: number} (aarch64 has no fork, vfork or pipe)
    "x86_64": {"fork": 57, "vfork": 58, "clone": 56, "clone3": 435, "madvise": 28,
               "memfd_create": 319, "memfd_secret": 447, "shmget": 29, "shmat": 30,
               "msgget": 68, "mq_open": 240, "pipe": 22, "pipe2": 293, "socket": 41,
               "socketpair": 53, "process_madvise": 440, "userfaultfd": 323, "bpf": 321,
               "io_uring_setup": 425, "add_key": 248, "request_key": 249, "keyctl": 250,
               "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311},
    "aarch64": {"clone": 220, "clone3": 435, "madvise": 233, "memfd_create": 279,
                "memfd_secret": 447, "shmget": 194, "shmat": 196, "msgget": 186,
                "mq_open": 180, "pipe2": 59, "socket": 198, "socketpair": 199,
                "process_madvise": 440, "userfaultfd": 282, "bpf": 280, "io_uring_setup": 425,
                "add_key": 217, "request_key": 218, "keyctl": 219, "ptrace": 117,
                "process_vm_readv": 270, "process_vm_writev": 271},
}
# what a measuring runner may not call (Judge.measure): every way to keep memory where its
# process's resident memory and its cgroup's do not count it, or to reach another
# process's: memory files, shared memory and message queues, pipes and sockets (their
# kernel buffers), keyrings, BPF maps, io_uring, userfaultfd, another process's memory;
# and every madvise that takes pages out of the resident set while their data stays (in a
# file's page cache, shared memory or swap) or comes back clean (an argument's pages written
# into, read again from its file): MADV_DONTNEED, MADV_FREE, MADV_REMOVE, MADV_COLD,
# MADV_PAGEOUT, MADV_DONTNEED_LOCKED. (The C library frees with munmap; the measuring
# runner maps every block of 64 KiB or more on its own: tools/sandboxed/runner.MEASURED_ENV)
HIDING = ("memfd_create", "memfd_secret", "shmget", "shmat", "msgget", "mq_open", "pipe",
          "pipe2", "socket", "socketpair", "process_madvise", "userfaultfd", "bpf",
          "io_uring_setup", "add_key", "request_key", "keyctl", "ptrace", "process_vm_readv",
          "process_vm_writev")
_DROPS = (4, 8, 9, 20, 21, 24)  # MADV_DONTNEED, _FREE, _REMOVE, _COLD, _PAGEOUT, _DONTNEED_LOCKED
_CLONE_THREAD = 0x00010000
_ALLOW, _EPERM, _ENOSYS = 0x7FFF0000, 0x00050000 | 1, 0x00050000 | 38
_LD, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06  # BPF_LD|W|ABS, BPF_JMP|..|K, BPF_RET


def _assemble(program):
    """Classic BPF bytes of [(label or None, op, k, jump if true, jump if false)], the
    jumps given as labels (None: the next instruction)."""
    where = {label: i for i, (label, *_) in enumerate(program) if label}
    code = []
    for i, (_, op, k, yes, no) in enumerate(program):
        jt, jf = ((where[j] - i - 1) if j else 0 for j in (yes, no))
        code.append(struct.pack("<HBBI", op, jt, jf, k))
    return b"".join(code)


def seccomp_filter(machine=None, measuring=False):
    """The BPF program, as bytes, that bubblewrap's --seccomp loads: EPERM for fork, vfork
    and a clone without CLONE_THREAD (threads stay allowed: NumPy and torch use them),
    ENOSYS for clone3 (so that the C library falls back to clone); measuring: EPERM for
    HIDING's calls too, and for the madvise advice of _DROPS. None on a machine
    whose system calls it does not know."""
    machine = machine or os.uname().machine
    if machine not in _CALLS:
        return None
    calls = _CALLS[machine]
    denied = [calls[c] for c in ("fork", "vfork", *(HIDING if measuring else ())) if c in calls]
    program = [(None, _LD, 4, None, None),  # the architecture: this machine's, or refuse
               (None, _JEQ, _ARCH[machine], "number", "refuse"),  # (32-bit calls)
               ("number", _LD, 0, None, None),  # the system call's number
               (None, _JGE, 0x40000000, "refuse", None)]  # (the x32 ABI's numbers)
    program += [(None, _JEQ, n, "refuse", None) for n in denied]
    program += [(None, _JEQ, calls["clone3"], "enosys", None),
                (None, _JEQ, calls["clone"], "clone", None)]
    if measuring:
        program.append((None, _JEQ, calls["madvise"], "madvise", None))
    program += [(None, _RET, _ALLOW, None, None),
                ("clone", _LD, 16, None, None),  # clone's flags (the low 32 bits of args[0])
                (None, _JSET, _CLONE_THREAD, "allow", "refuse")]  # a thread, or refuse
    if measuring:
        program += [("madvise", _LD, 32, None, None),  # its advice (args[2])
                    *((None, _JEQ, advice, "refuse", None) for advice in _DROPS),
                    (None, _JEQ, 0xFFFFFFFF, "refuse", "allow")]  # (never: then allow)
    program += [("refuse", _RET, _EPERM, None, None), ("allow", _RET, _ALLOW, None, None),
                ("enosys", _RET, _ENOSYS, None, None)]
    return _assemble(program)


def stat_fields(pid):
    """The fields of /proc/<pid>/stat after the process's name ("pid (comm) state ppid
    ...": [0] its state, [1] its parent's id, [11] and [12] its user and system CPU in
    clock ticks). OSError where it is gone."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()


def processes():
    """{pid: (its parent's id, the CPU it has used, in clock ticks)} of every process /proc
    shows (one gone meanwhile left out)."""
    found = {}
    for entry in os.listdir("/proc"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat_fields(entry)
            found[int(entry)] = int(fields[1]), int(fields[11]) + int(fields[12])
    return found


def descendants(pid, table):
    """The ids of the processes under pid (its children, theirs, ...) in table
    (processes())."""
    found = set()
    while True:
        more = {p for p, (parent, _) in table.items() if parent in found | {pid}} - found
        if not more:
            return found
        found |= more


def innermost(pid):
    """The process id of the last of process pid's chain of children: the process that a
    sandbox runs, two levels under bubblewrap (a sandbox starts no process of its own)."""
    table = processes()
    while True:
        children = [p for p, (parent, _) in table.items() if parent == pid]
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
            files=None, measuring=False):
    """(the command that runs argv, a Python command line, in the sandbox; the file
    descriptor of its seccomp filter, to pass to it). folder: the private copy of the
    submission, seen read-only at SOURCE; inside: the working folder, a fresh file system of
    size_mb MiB that the program fills from SOURCE before any student code
    (tools.sandboxed.guard.install's source). memory_mb: its memory, besides its file systems, in
    its cgroup where the machine allows one (tools/sandbox/cgroup.py: also at most TASKS tasks).
    env: the variables it gets (nothing else of the caller's environment); sockets: a host
    folder (a kernel's), where the program finds a private file system of SOCKETS_MB MiB for
    its IPC sockets, which the host reaches through `reach`, and the folder's connection
    file (CONNECTION), read-only; files: {path inside: host file} it may read (matplotlib's
    font cache). measuring: a measuring runner's sandbox
    (tools.judge.judge.Judge.measure), where nothing is writable: the folder itself at
    inside, read-only (no copy, no SOURCE), and /tmp, /dev/shm and /dev read-only; its
    seccomp filter refuses HIDING's calls too."""
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
    for path in INSIDE:  # the code that runs inside, and nothing else of tools/
        args += ["--ro-bind", str(REPO / path), f"{GRADER}/{path}"]
    if measuring:  # nowhere to keep memory out of the process's sight: no writable file
        args += ["--ro-bind", str(folder), str(inside), "--remount-ro", "/tmp",
                 "--remount-ro", "/dev/shm"]
    else:
        args += ["--ro-bind", str(folder), SOURCE, "--size", size, "--tmpfs", str(inside)]
    # the sandbox's root (bubblewrap's own file system, unbounded) read-only: only the
    # file systems above are written
    args += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", str(inside), "--clearenv"]
    for name, value in {**env, "PYTHONPATH": GRADER, "HOME": "/tmp",
                        "MPLCONFIGDIR": "/tmp", "PATH": "/usr/bin:/bin"}.items():
        args += ["--setenv", name, str(value)]
    program = seccomp_filter(measuring=measuring)
    fd = None
    if program is not None:
        with tempfile.TemporaryFile() as f:  # bwrap reads the filter from a descriptor
            f.write(program)
            f.seek(0)
            fd = os.dup(f.fileno())
        args += ["--seccomp", str(fd)]
    memory = memory_mb + 3 * size_mb  # (its working folder, /tmp and /dev/shm)
    return cgroup.wrap([*args, "--", str(python), *argv], memory, cgroup.here()), fd
