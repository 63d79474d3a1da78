"""What a submission's code may do while it is graded: the second wall, inside the OS
sandbox (tools/sandbox/bubblewrap.py), which is the first.

`install` runs first in every grading kernel (tools.worker.execute.GradingExecute) and in
the judge's runner (tools/sandboxed/runner.py), before any student code. It copies the
submission into the working folder, then sets resource limits (`limit`: address space,
file size, CPU time, no core dumps; the course's, tools/sandboxed/limits.py), imports normlib
from the submission's folder only, and adds an audit hook (PEP 578) that raises
PermissionError, naming what it refused: reading a protected folder (the course,
solutions/) outside the submission's own; writing outside the submission's folder and the
temporary directory; starting or signalling a process; opening an SQLite database (the
gradebook); adding an audit hook (one would run unseen during a compile step:
compile_step.py). Code that leaves Python (ctypes, an extension) is not seen by audit
hooks: that is the OS sandbox's part. With --no-sandbox this hook is the only wall.
"""

import os
import resource
import sys
import tempfile

MiB = 1 << 20
# where a sandbox mounts the course's tools/ (tools.sandbox.bubblewrap.command)
GRADER = "/opt/grader"
TASKS = 256  # threads and processes in a sandbox (a kernel has about 10, a runner 1 to 3)
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_PATH_EVENTS = {  # audit events whose arguments name paths the call changes
    "os.remove": 1, "os.rmdir": 1, "os.mkdir": 1, "os.chmod": 1, "os.chown": 1,
    "os.truncate": 1, "os.utime": 1, "os.rename": 2, "os.link": 2, "os.symlink": 2,
    "shutil.rmtree": 1, "shutil.move": 2, "shutil.copyfile": 2,
}
_PROCESS_EVENTS = {"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn",
                   "os.fork", "os.forkpty", "pty.spawn", "os.killpg", "sqlite3.connect"}


def _real(path):
    if isinstance(path, bytes):
        path = path.decode(errors="replace")
    return os.path.realpath(os.fspath(path))


def _under(path, folder):
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def limit(memory_mb, file_mb, cpu_s=None, tasks=None):
    """This process's resource limits (inherited by what it starts): memory_mb MiB of address
    space, files of file_mb MiB, cpu_s seconds of CPU time (all threads together; past it
    the kernel kills the process), no core dumps; tasks: at most that many processes and
    threads of its user (only in the OS sandbox, whose user namespace is its own: outside
    it, they would be counted with all of the grader's)."""
    resource.setrlimit(resource.RLIMIT_AS, (memory_mb * MiB, memory_mb * MiB))
    if tasks is not None:
        resource.setrlimit(resource.RLIMIT_NPROC, (tasks, tasks))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_mb * MiB, file_mb * MiB))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if cpu_s is not None:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s))


def cpu_seconds(notebook_timeout):
    """The CPU time of a grading process: its notebook's time limit on every core (the
    wall-clock limits stop it first; this one holds even if they fail)."""
    return notebook_timeout * (os.cpu_count() or 1)


def install(workdir, protected, memory_mb, file_mb, source=None, cpu_s=None,
            readonly=(), tasks=None, chunk=None):
    """Limit this process (and what it starts) to grading one submission in workdir:
    no reading the protected folders, memory_mb MiB of address space, files of file_mb MiB.
    source: a folder copied into workdir first (in the OS sandbox of tools/sandbox/bubblewrap.py,
    the submission's read-only copy, bubblewrap.SOURCE); cpu_s: seconds of CPU time (`limit`);
    readonly: folders under the temporary directory it may not write (a kernel's
    sockets). If any of it fails (a submission too large for its folder), the process
    ends (exit status 70) rather than run student code unguarded. In the OS sandbox (source
    given, or tasks true), it may run at most TASKS processes and threads (`limit`).
    chunk: in a grading kernel, the characters of its stdout's and stderr's messages
    (chunk_streams)."""
    if chunk:
        chunk_streams(chunk)
    try:
        boxed = source is not None if tasks is None else tasks
        limit(memory_mb, file_mb, cpu_s, TASKS if boxed else None)
        if source is not None:
            import shutil
            shutil.copytree(source, workdir, dirs_exist_ok=True, symlinks=True)
        _guard(workdir, protected, readonly)
    except BaseException:
        os._exit(70)


def chunk_streams(chunk):
    """In a kernel (ipykernel's OutStream): sys.stdout and sys.stderr send their text in
    messages of at most chunk characters, so that the grading worker, which refuses a
    message past its bound as it arrives (tools/worker/execute.py: max_message, six bytes
    a character and more), keeps the first of a long print and counts what it drops
    (else one flush of a print loop can be a message of 30 MB). It is a hook of each
    stream's (its IO thread's: ipykernel keeps hooks per thread), which splits a message
    as it is sent. A courtesy, not a wall: student code may undo it, and then its message
    is refused whole."""
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "register_hook") and hasattr(stream, "pub_thread"):
            hook = _splitter(stream, chunk)
            stream.pub_thread.schedule(lambda stream=stream, hook=hook:
                                       stream.register_hook(hook))


def _splitter(stream, chunk):
    """A stream's hook (chunk_streams): a message of more than chunk characters is sent
    as pieces of chunk characters, the last returned to be sent as ipykernel sends it."""

    def split(msg):
        text = msg.get("content", {}).get("text")
        if not isinstance(text, str) or len(text) <= chunk:
            return msg
        for start in range(0, len(text) - chunk, chunk):
            piece = {**msg["content"], "text": text[start:start + chunk]}
            stream.session.send(stream.pub_thread, stream.session.msg(
                "stream", piece, parent=msg["parent_header"]), ident=stream.topic)
        msg["content"] = {**msg["content"], "text": text[(len(text) - 1) // chunk * chunk:]}
        return msg

    return split


def _guard(workdir, protected, readonly):
    """The audit hook, and normlib from the submission's folder only (see install)."""
    workdir = _real(workdir)
    protected = [_real(p) for p in protected]
    try:
        temporary = _real(tempfile.gettempdir())
    except FileNotFoundError:  # (a measuring runner's sandbox: nothing is writable there)
        temporary = "/tmp"
    writable = [workdir, temporary, "/dev"]
    me = os.getpid()

    def refuse(what):
        raise PermissionError(f"refused at grading: {what} (see tools/sandboxed/guard.py)")

    def check_read(path):
        if any(_under(path, p) for p in protected) and not _under(path, workdir):
            refuse(f"reading {path}")

    readonly = [_real(p) for p in readonly]

    def check_write(path):
        if not any(_under(path, w) for w in writable) or any(_under(path, r) for r in readonly):
            refuse(f"writing {path} (outside the submission's folder)")

    def hook(event, args):
        if event == "open":
            path, mode, flags = args
            if path is None or isinstance(path, int):  # an open file descriptor
                return
            path = _real(path)
            check_read(path)
            if (isinstance(flags, int) and flags & _WRITE_FLAGS) or \
                    (isinstance(mode, str) and any(c in mode for c in "wax+")):
                check_write(path)
        elif event in _PATH_EVENTS:
            for path in args[: _PATH_EVENTS[event]]:
                if path is not None and not isinstance(path, int):
                    check_write(_real(path))
        elif event in ("os.listdir", "os.scandir", "glob.glob") and args and args[0]:
            if not isinstance(args[0], int):
                check_read(_real(args[0]))
        elif event == "sys.addaudithook":
            refuse("adding an audit hook")
        elif event == "os.kill" and args[0] != me:
            refuse(f"signalling process {args[0]}")
        elif event in _PROCESS_EVENTS and not (event == "sqlite3.connect"
                                               and args and args[0] == ":memory:"):
            refuse(f"{event}")

    sys.addaudithook(hook)
    # normlib is the submission's folder only: a module it lacks must not be found in an
    # editable install of the course (pip install -e), which would stand in for it
    sys.meta_path[:] = [f for f in sys.meta_path
                        if not getattr(f, "__module__", "").startswith("__editable__")]
