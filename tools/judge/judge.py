"""The judge: runs the check cells, hidden tests included, where no student code runs: the
student's modules are proxies (tools.sandboxed.peer) of the runner's, out of whose reach
what comes back is compared.

    Judge(judge_dir, runner_dir, student_modules, limits).run([(grade_id, source)])

judge_dir holds the course's normlib/ (no student file) and normkit/; runner_dir the same
with the submission's files. A check whose runner runs over its time, dies, falls silent,
breaks the protocol or raises fails; a new runner runs the next. A verdict (`explain`)
quotes no text from the runner, which has seen every hidden case's arguments: an error's
builtin type, never its message (for a hidden test, not even that). A message (`_sanitized`)
loses NumPy's dump, the worst index and quoted strings the check's source lacks; of the
numbers it lacks, the first NUMBERS are quoted coarsely (2 significant digits; an integer
over 99 as its power of ten, "100+"; past 1e6 or under 1e-6, that bound), ALL_NUMBERS in
all (docs/security.md, section 5)."""

import contextlib
import importlib.abc
import importlib.machinery
import mmap
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import types
from pathlib import Path

import numpy as np

from tools.course.markers import TITLE, hidden_line_numbers
from tools.sandbox import bubblewrap, cgroup
from tools.sandboxed import guard
from tools.sandboxed.limits import BUSY, STARVED
from tools.sandboxed.peer import ENDED, SILENT, Peer, Remote, RemoteError, RunnerGone
from tools.sandboxed.runner import MEASURED_ENV
from tools.sandboxed.wire import NUMPY_KINDS, raw_bytes

JUDGE_OPS = ("call", "backward")  # the runner may only call back what it was handed
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_DUMP = re.compile(r"^\s*(ACTUAL|DESIRED|x|y):", re.MULTILINE)  # NumPy's arrays, in a message
# 3, 0.12, 1e+30, and 3 before a full stop: the sentence's, not a decimal point
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:e[-+]?\d+)?(?!\w|\.\d)")
_QUOTED = re.compile(r"(?<!\w)'[^']*'|\"[^\"]*\"")  # (an apostrophe, as in x's, opens none)
_INDEX = re.compile(r"Worst at index \([\d, ]*\)")  # (normkit.diagnosis.mismatch's words)
SOURCE_BYTES = 256 * 1024  # the most of a student's file the judge reads (Judge.source)
NUMBERS = 3  # numbers a verdict quotes that the check's source does not hold
ALL_NUMBERS = 8  # numbers a verdict quotes in all (a number the source holds is quoted as
# it is: how many could the runner make it quote, to learn which of its guesses are there?)


def _cell_line(error, filename):
    """The number of the check cell's top-level line that raised error (None if none)."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == filename]
    return frames[0].lineno if frames else None


def _coarse(token):
    """A number of a message as a verdict quotes it (see the module's docstring)."""
    value, sign = float(token), "-" * token.startswith("-")
    if re.fullmatch(r"-?\d+", token):
        return token if abs(value) < 100 else f"{sign}{10 ** (len(token) - len(sign) - 1)}+"
    if value != 0 and not 1e-6 <= abs(value) <= 1e6:
        return sign + ("<1e-06" if abs(value) < 1e-6 else ">1e+06")
    return f"{value:.2g}"


def _sanitized(text, source):
    """A message of the check's, without what the submission could have put there (see
    the module's docstring)."""
    text = _DUMP.split(text)[0].strip()
    text = _QUOTED.sub(lambda m: m.group() if m.group()[1:-1] in source else "'…'", text)
    text = _INDEX.sub("Worst", text)
    known = {float(t) for t in _NUMBER.findall(source)}
    quoted = [0, 0]  # (numbers the source does not hold, all numbers)

    def number(match):
        quoted[1] += 1
        if quoted[1] > ALL_NUMBERS:
            return "…"
        if float(match.group()) in known:
            return match.group()
        quoted[0] += 1
        return _coarse(match.group()) if quoted[0] <= NUMBERS else "…"
    return _NUMBER.sub(number, text)


def explain(error, source, filename):
    """The judge's words on a check cell (source, compiled as filename) that raised error:
    see the module's docstring."""
    from normkit.checks import case  # (the course's: the judge imports normkit afresh)

    line = _cell_line(error, filename)
    hidden = line in hidden_line_numbers(source)
    lines, found = source.splitlines(), None if hidden else case(error)
    where = "in a hidden test" if hidden else \
        f"at the check's case {found[1]}:{found[2]}: {found[3]}" if found else \
        f"at the check's line {line}: {lines[line - 1].strip()}" if line else "in the check"
    source = source + _visible_cases(source)  # (what the check may quote: all public)
    name = type(error).__name__
    if isinstance(error, RemoteError):
        name = "an error" if hidden else name if name != "RemoteError" else \
            "an exception of its own class"  # (in a hidden test: no type, no bits)
        shown = "" if hidden else " (the judge shows no message of the submission's: run " \
            "the check in the notebook to read it)"
        return f"{name} raised by the submission's code, {where}{shown}"
    message = _sanitized(str(error), source)
    if isinstance(error, AssertionError):  # the check's own words, and its case's line
        return f"a hidden test failed: {message}" if hidden else f"{name}: {message}" + \
            (f"\nThe case: {found[1]}:{found[2]}: {found[3]}" if found else "")
    if hidden:  # the check's code, on what the submission returned
        return f"a hidden test failed with an error: {message}"
    return f"{name} {where}: {message}"


def _visible_cases(source):
    """The text of the check cell's own visible cases: normkit/checks/unitN.py of the
    exercise its title names ("" without one). One unit's file, not the package: every
    string of it is one the runner may have a verdict quote."""
    import normkit.checks

    title = TITLE.match(source)
    path = Path(normkit.checks.__file__).parent / f"unit{title[1].split('.')[0]}.py" \
        if title else None
    return path.read_text() if path and path.is_file() else ""


def check(source, grade_id):
    """(passed, the judge's words) of one check cell, run in a fresh namespace."""
    from normkit.checks import namespace

    filename = f"<{grade_id}>"
    try:
        exec(compile(source, filename, "exec"), namespace())
    except Exception as error:
        return False, explain(error, source, filename)
    return True, ""


def _end(process):
    """Kill a runner and close its channel."""
    process.kill()
    process.wait()
    with contextlib.suppress(BrokenPipeError):  # what a lost runner did not read
        process.stdin.close()
    process.stdout.close()


_STEP = ("a compiled kernel's memory is measured with no code of yours running while Numba "
         "compiles it (that step is left out of the measure), but the kernel's module ")
COMPILE_REFUSED = {  # (tools/sandboxed/compile_step.py's keys, in the judge's words)
    "hook": _STEP + "set a profile or trace hook (sys.setprofile, sys.settrace)",
    "callback": _STEP + "added a garbage collector callback (gc.callbacks)",
    "signal": _STEP + "set a signal handler or a timer",
    "import": _STEP + "added an import hook (sys.meta_path, sys.path_hooks)",
    "extension": _STEP + "extends Numba's compiler (@overload, @intrinsic, @register_jitable, "
                         "a typeof or lowering of its own), whose typing runs code of yours: "
                         "a graded kernel is plain @njit code",
    "global": _STEP + "names a value Numba could only type by running code of yours (an "
                      "object of a class of your own, a function that is not Numba's or "
                      "NumPy's): a graded kernel uses NumPy, Numba, numbers and its own "
                      "@njit functions",
    "ran": _STEP + "made code of its own run while Numba compiled the kernel (a function of "
                   "Numba's or NumPy's replaced, a global whose type Numba asks your code "
                   "for): a graded kernel is plain @njit code",
}


def resident_peak(pid):
    """The peak of process pid's resident memory (VmHWM), in bytes."""
    with open(f"/proc/{pid}/status") as f:
        line = next(line for line in f if line.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024


def thread_count(pid):
    """The number of threads of process pid."""
    with open(f"/proc/{pid}/status") as f:
        return int(next(line for line in f if line.startswith("Threads:")).split()[1])


def written_pages(pid, file):
    """The bytes of process pid's mappings of a file (its os.stat: dev and inode) that it
    wrote into: copied on write, they are its own ("Anonymous" in /proc/PID/smaps)."""
    device = f"{os.major(file.st_dev):02x}:{os.minor(file.st_dev):02x}"
    total, mine = 0, False
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            head = line.split()
            if re.match(r"[0-9a-f]+-[0-9a-f]+$", head[0]):  # a mapping: its dev and inode
                mine = len(head) > 4 and head[3] == device and head[4] == str(file.st_ino)
            elif mine and head[0] == "Anonymous:":
                total += int(head[1]) * 1024
    return total


def arguments_file(args, folder):
    """(args with each NumPy array replaced by where its bytes are in a file of folder,
    {"$offset": offset, "shape", "dtype"}, the file's path), for a measuring runner, which
    maps them from the file's descriptor (Peer._op_map). Each at a page's start; the
    file synced, so that its pages in the page cache are clean."""
    path, refs = Path(folder) / "arguments", []
    with open(path, "wb") as f:
        f.write(b"\0")  # (a file to map is never empty)
        for a in args:
            if isinstance(a, np.ndarray) and a.dtype.kind in NUMPY_KINDS and a.dtype.isnative \
                    and a.size:  # (an empty one crosses as it is: nothing to map)
                offset = -(-f.tell() // mmap.PAGESIZE) * mmap.PAGESIZE
                f.seek(offset)
                f.write(np.ascontiguousarray(a))  # (its buffer: no copy)
                refs.append({"$offset": offset, "shape": list(a.shape), "dtype": a.dtype.str})
            else:
                refs.append(a)
        f.flush()
        os.fsync(f.fileno())
    path.chmod(0o444)
    return refs, path


def reset_resident_peak(pid):
    """Reset process pid's peak resident memory to its resident memory now; that, in bytes."""
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")
    return resident_peak(pid)


class StudentModule(types.ModuleType):
    """The judge's stand-in for a student module: attributes are the runner's."""

    def __init__(self, name, remote):
        super().__init__(name)
        self.__dict__["_remote"] = remote

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        value = getattr(self.__dict__["_remote"], name)
        if isinstance(value, Remote):  # where it came from, the judge's record
            object.__setattr__(value, "_origin", (self.__name__, name))
        return value

    def __setattr__(self, name, value):
        if name.startswith("__"):
            super().__setattr__(name, value)
        else:
            setattr(self.__dict__["_remote"], name, value)


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports of the student's modules give StudentModule proxies of the runner's."""

    def __init__(self, judge):
        self.judge = judge

    def find_spec(self, name, path=None, target=None):
        if name in self.judge.student_modules:
            return importlib.machinery.ModuleSpec(name, self)
        return None

    def create_module(self, spec):
        return StudentModule(spec.name, self.judge.peer.request("import", spec.name))

    def exec_module(self, module):
        pass


class Judge:
    def __init__(self, judge_dir, runner_dir, student_modules, limits, sandboxed=True):
        self.judge_dir, self.runner_dir = str(judge_dir), str(runner_dir)
        self.student_modules, self.limits = set(student_modules), limits  # (a Limits)
        if sandboxed and not bubblewrap.bwrap():
            raise RuntimeError(f"bubblewrap (bwrap) is not installed: {bubblewrap.INSTALL}")
        self.sandboxed = sandboxed
        self.process = self.peer = None
        self.runner_pid = None  # (the runner's launch's pid, its innermost process's pid)
        self.finder = _Finder(self)

    def start(self):
        self.process, self.peer = self._launch()
        self.peer.measurer, self.peer.sourcer = self.measure, self.source
        for name in [n for n in sys.modules if n.split(".")[0] in ("normlib", "normkit")]:
            del sys.modules[name]  # proxies of a runner that is gone; course modules again
            # (normkit's too, which may hold them)
        if self.finder not in sys.meta_path:
            sys.meta_path.insert(0, self.finder)
        if self.judge_dir not in sys.path:
            sys.path.insert(0, self.judge_dir)

    def _launch(self, *flags, env=None, fds=(), measuring=False):
        """(the process, the Peer) of a new runner (python -m tools.sandboxed.runner *flags ...),
        in its sandbox, with these extra environment variables and file descriptors;
        measuring: bubblewrap.command's (a measuring runner's submission is its folder,
        read-only, and it writes nowhere)."""
        argv = ["-m", "tools.sandboxed.runner", *flags, self.limits.to_json()]
        if self.sandboxed:
            command, fd = bubblewrap.command(self.runner_dir,
                                          argv if measuring else [*argv, bubblewrap.SOURCE],
                                          {**bubblewrap.thread_env(), **(env or {})},
                                          self.limits.memory_mb, measuring=measuring)
            fds, cwd = (*fds, *((fd,) if fd is not None else ())), None
            env = bubblewrap.launch_env()  # (and bubblewrap none: no secret of the judge's)
        else:
            command, fd = [sys.executable, *argv], None
            env, cwd = {**os.environ, "PYTHONPATH": REPO, **(env or {})}, self.runner_dir
        process = subprocess.Popen(  # (unbuffered: a read waits with select)
            command, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0,
            stderr=subprocess.DEVNULL, env=env, pass_fds=fds, preexec_fn=self._limit)
        if fd is not None:
            os.close(fd)
        return process, Peer(process.stdout, process.stdin, JUDGE_OPS, untrusted=True)

    def measure(self, function, args):
        """(function(*args), the bytes of memory the call used at its peak), for a function
        of a student module (a Remote the judge got from a StudentModule). Measured from
        outside, where the submission cannot reach (docs/security.md, "Memory"):

        - a fresh runner, in a sandbox where nothing is writable and its seccomp filter
          refuses every other place to keep memory (bubblewrap.HIDING: memory files, shared
          memory, pipes, sockets, keyrings, swap), receives the arguments: each array in a
          file (`arguments_file`) it gets as an open descriptor alone, maps copy-on-write, reads
          in and closes: no path leads back to the file, so a page it wrote into cannot
          be mapped clean again;
        - the judge resets the peak of the runner's resident memory (/proc/PID/clear_refs,
          which the sandbox's read-only /proc keeps from the runner) and, where its sandbox
          has a cgroup of the grader's, moves it into a fresh one (tools/sandbox/cgroup.measure);
        - the runner imports the student's module (no student code ran before) and calls it;
        - the call's memory: its resident memory's growth at its peak (VmHWM), plus the
          pages of the arguments it wrote into (copied on write: /proc/PID/smaps), or its
          cgroup's peak where one is larger: whatever it freed of what it held before, all
          it allocated is charged there.

        So what the code allocates, by NumPy, torch or C, is counted, and nothing it does
        can hide it or use its arguments as room. Within the check's deadline."""
        origin = getattr(function, "_origin", None)
        if origin is None:
            raise TypeError("only a function of a student module is measured")
        with tempfile.TemporaryDirectory(prefix="measured-") as folder:
            refs, path = arguments_file(args, folder)
            compiled = self._compiled(function)
            fd = os.open(path, os.O_RDONLY)
            try:
                refs = [{**a, "fd": fd} if isinstance(a, dict) and "$offset" in a else a
                        for a in refs]
                flags = ("--measure", "--numba") if compiled else ("--measure",)
                process, peer = self._launch(*flags, env=MEASURED_ENV, fds=(fd,),
                                             measuring=True)
            finally:
                os.close(fd)
            return self._measured(process, peer, origin, args, refs, os.stat(path),
                                  compiled)

    def _compiled(self, function):
        """Whether function, a student module's Remote, may be a compiled kernel: its file
        names Numba (measure then loads Numba before the call, and compiles it apart)."""
        with contextlib.suppress(Exception):
            return "numba" in self.source(function)[0]
        return False

    def source(self, function):
        """(the text of the submission's file that defines function, a student module's
        Remote, and its name there): read here from the runner's folder, its first
        SOURCE_BYTES, for a check that reads the kernel's code (normkit.kernel_code). No
        student code runs for it; a verdict quotes of it what explain allows."""
        origin = getattr(function, "_origin", None)
        if origin is None:
            raise TypeError("only a function of a student module has a source")
        module, name = origin
        path = Path(self.runner_dir, *module.split(".")).with_suffix(".py")
        with open(path, "rb") as f:
            return f.read(SOURCE_BYTES).decode("utf-8", errors="replace"), name

    def _measured(self, process, peer, origin, args, refs, file, compiled=False):
        """measure's call in its runner (see measure): refs, the arguments as arguments_file
        wrote them; file, that file's stat.
        compiled: a Numba kernel's call, in three steps, so that the compiler's memory is
        not counted and all the student's code's is: its module imported (measured), the
        kernel compiled for the arguments' types (Peer._op_compile: Numba's own code, not
        measured), then the call (measured)."""
        peer.deadline = self.peer.deadline or time.monotonic() + self.limits.timeout
        timer = threading.Timer(max(0.0, peer.deadline - time.monotonic()), process.kill)
        timer.start()
        try:
            peer.request("map", *refs)
            peer.request("reset")  # (the reply comes once the arguments' message is freed)
            pid = bubblewrap.innermost(process.pid)
            before, loaded = reset_resident_peak(pid), 0
            if compiled:
                threads = thread_count(pid)
                peer.request("load", origin[0])
                loaded = resident_peak(pid) - before
                refused = peer.request("compile", *origin)
                if refused is not None:
                    raise AssertionError(COMPILE_REFUSED.get(  # (the runner's value: any)
                        refused if isinstance(refused, str) else "ran", COMPILE_REFUSED["ran"]))
                if thread_count(pid) != threads:  # (one would run on, uncounted, meanwhile)
                    raise AssertionError("the kernel's module started threads of its own when "
                                         "imported: a compiled kernel's memory is measured "
                                         "with none")
                before = reset_resident_peak(pid)
            call = None
            if self.sandboxed:
                with contextlib.suppress(OSError):
                    call = cgroup.measure(pid)
            peer.request("run", *origin)
            peak = resident_peak(pid) - before + written_pages(pid, file)
            if call is not None:
                peak = max(peak, cgroup.peak(call))
            peak += loaded
            result, now = peer.request("fetch")
        except RunnerGone:
            self.peer.broken = self.peer.broken or peer.broken  # the check's verdict
            raise
        finally:
            timer.cancel()
            _end(process)
        for original, new in zip(args, now if isinstance(now, list) else []):
            if isinstance(original, np.ndarray) and (
                    not isinstance(new, np.ndarray) or raw_bytes(new) != raw_bytes(original)):
                raise AssertionError("the call wrote into one of its arguments, which it must "
                                     "not change: a kernel must not write into its inputs")
        return result, peak

    def _limit(self):
        """In the runner, before it starts: its memory, the size of a file it writes, its
        CPU time, no core dumps (the grading limits, as at autograde)."""
        guard.limit(self.limits.memory_mb, self.limits.file_mb,
                      guard.cpu_seconds(self.limits.notebook_timeout))

    def _compile(self, source, deadline, fresh):
        """The compile step of the check's exercise, if it has one
        (normkit.checks.compile_kernels: its Numba kernels compiled for the signatures of
        its visible and hidden cases), before the check's clock starts, within
        limits.compile_timeout (and startup_timeout for a fresh runner, which imports the
        student's module, torch and Numba in it): "" or, if the runner ran over it or was
        lost, the verdict. An error in it is the check's to report: the check calls the
        same kernels."""
        from normkit.checks import compile_kernels, has_compile_step

        title = TITLE.match(source)
        if not title or not has_compile_step(title[1]):
            return ""
        allowed = self.limits.compile_timeout + (self.limits.startup_timeout if fresh else 0)
        budget = max(0.0, min(allowed, deadline - time.monotonic()))
        start = time.monotonic()
        self.peer.deadline = start + budget
        timer = threading.Timer(budget, self.process.kill)
        timer.start()
        try:
            compile_kernels(title[1], hidden=True)
        except Exception:  # (the check meets it again, and words it)
            pass
        finally:
            timer.cancel()
        broken = self.peer.broken
        if not broken and self.process.poll() is None:
            return ""
        self.stop()
        if broken == SILENT or time.monotonic() - start >= budget:
            return (f"its kernels did not compile within the {self.limits.compile_timeout} s "
                    "compile budget")
        return broken or ENDED

    def stop(self):
        if self.process:
            _end(self.process)
        self.process = None

    def run(self, cells):
        """{grade_id: (passed, detail)} of check cells [(grade_id, source)]."""
        found = {}
        deadline = time.monotonic() + self.limits.notebook_timeout
        for grade_id, source in cells:
            if time.monotonic() >= deadline:
                found[grade_id] = (False, f"not run: the submission ran over its "
                                          f"{self.limits.notebook_timeout} s limit")
                continue
            found[grade_id] = self._grade(grade_id, source, deadline)
        self.stop()
        return found

    def _runner_pid(self):
        """The runner's process id: the sandbox's innermost process (None: no process),
        found once per runner (a scan of /proc)."""
        pid = getattr(self.process, "pid", None)
        if self.runner_pid is None or self.runner_pid[0] != pid:
            self.runner_pid = pid, bubblewrap.innermost(pid) if self.sandboxed and pid else pid
        return self.runner_pid[1]

    @staticmethod
    def _sched(pid):
        """(seconds process pid's threads (a runner) have waited, runnable, for a CPU,
        seconds of CPU they used), or None where it is gone: the kernel's run delay (the
        second field of /proc/<pid>/task/<tid>/schedstat) and /proc/<pid>/stat's utime and
        stime. A busy machine makes the first grow and not the second; code that sleeps,
        or a stopped process, neither; threads of the runner's that take the CPU from each
        other, both. A few small files: read at every check."""
        if pid is None:
            return None
        try:
            waited = sum(int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[1])
                         for tid in os.listdir(f"/proc/{pid}/task")) / 1e9
            fields = bubblewrap.stat_fields(pid)
        except (OSError, ValueError, IndexError):
            return None
        return waited, (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    @staticmethod
    def _offspring_cpu(pid):
        """The seconds of CPU every process under pid has used, all their lives: a runner
        that started processes (the sandbox refuses it; ctypes might not) had that CPU
        too. A scan of /proc: read only where a check ran over its time."""
        table = bubblewrap.processes()
        return sum(table[p][1] for p in bubblewrap.descendants(pid, table)) / \
            os.sysconf("SC_CLK_TCK")

    def _grade(self, grade_id, source, deadline, again=True):
        """(passed, detail) of one check, with a runner that is alive and in step: a new
        one if the last check lost it. A check over its time whose runner waited for a CPU
        STARVED of it or more, and used less (a busy machine: _sched), runs once more
        (again); starved twice, it is BUSY, never a plain failure."""
        fresh = self.process is None or self.process.poll() is not None or self.peer.broken
        if fresh:
            self.stop()
            self.start()
        over = self._compile(source, deadline, fresh)
        if over:
            return False, over
        budget = self.limits.timeout + (self.limits.startup_timeout if fresh else 0)
        start = time.monotonic()
        budget = min(budget, deadline - start)
        self.peer.deadline = start + budget  # every read from the runner
        # a fresh runner's waits and CPU count from its start, its startup included; those
        # of one that ran checks before, from now
        before = (0.0, 0.0) if fresh else self._sched(self._runner_pid()) or (0.0, 0.0)
        spent = {}

        def expire():  # (how long it waited for a CPU, then its end: a runner forever busy)
            pid = self._runner_pid()
            spent["sched"], spent["offspring"] = self._sched(pid), self._offspring_cpu(pid)
            self.process.kill()

        timer = threading.Timer(budget, expire)  # a write to a runner that reads nothing
        timer.start()
        try:
            self.peer.request("reset")
            if fresh:
                self._runner_pid()  # (it answers: it is there, and found now)
            passed, detail = check(source, grade_id)
        except Exception as error:  # an error reply to "reset", a lost runner
            passed, detail = False, f"the runner failed to start the check ({type(error).__name__})"
            self.peer.broken = self.peer.broken or detail
        finally:
            timer.cancel()
        if self.peer.broken or self.process.poll() is not None:
            if "sched" not in spent:  # (over by the channel's deadline, or lost)
                pid = self._runner_pid()
                spent["sched"], spent["offspring"] = self._sched(pid), self._offspring_cpu(pid)
            after = spent["sched"] or before
            waited = after[0] - before[0]
            used = after[1] - before[1] + spent["offspring"]
            self.process.kill()  # ended, ending, silent or out of step: never used again
            self.process.wait()  # (not yet reaped, poll() would say it still runs)
            wall = time.monotonic() - start
            over = self.peer.broken == SILENT or wall >= budget
            starved = over and waited >= STARVED * wall and used < STARVED * wall
            if starved and again and deadline - time.monotonic() > budget:
                return self._grade(grade_id, source, deadline, again=False)
            passed, detail = False, (
                f"{BUSY} (its runner waited for a CPU half its time or more, twice, "
                f"within the {self.limits.timeout} s limit)" if starved else
                f"ran over the {self.limits.timeout} s limit" if over else
                self.peer.broken or ENDED)
        return passed, detail
