"""The judge (tools/judge): verdicts computed where student code never runs, and the runner
that runs it in the OS sandbox (tools/sandbox/bubblewrap.py).

- Forgers get what their code deserves: a stub that writes "passed" results and exits, one
  that replaces json.dumps, wrong code that disarms NumPy's private comparison, a runner
  that writes garbage on its channel.
- The runner never sees a check's source: a submission that dumps everything it can reach
  (the interpreter's state, its callers' frames, /proc) finds no hidden-test line.
- From inside the sandbox, every escape is refused: the course's files, another process's
  /proc, the judge's temporary files, the network, starting a process, writing outside its
  folder; and nothing survives the judge killing it.
That the reference passes every check through the runner is shown by tests/test_isolation.py
and the round trip. docs/security.md, sections 4 and 5, lists what the judge trusts.
"""

import contextlib
import inspect
import io
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import processes_naming
from tests.synthetic import override
from tools.course.exercises import SOLUTIONS, exercises
from tools.course.folder import NORMKIT
from tools.judge.client import run_checks
from tools.judge.judge import Judge
from tools.sandbox import bubblewrap, cgroup
from tools.sandboxed.limits import BUSY, Limits
from tools.sandboxed.peer import ENDED, Peer, RunnerGone

LIMITS_HERE = Limits(timeout=20)
SANDBOX = bubblewrap.bwrap() is not None
needs_bwrap = pytest.mark.skipif(not SANDBOX, reason="bubblewrap is not installed: "
                                 "apt-get install bubblewrap (make test installs it)")
PACKAGES = ("normlib", "normkit")  # the modules a judge takes out of sys.modules
UNIT1 = [(e.grade_id, e.source) for e in exercises() if e.unit == 1]


IN_PROCESS = Limits(timeout=60)


@contextlib.contextmanager
def judge_state():
    """A judge run in this process, then its modules, finder and path taken out again: a
    judge puts the submission's normlib and the course's normkit in their place."""
    saved = sys.meta_path[:], sys.path[:], {n: m for n, m in sys.modules.items()
                                            if n.split(".")[0] in PACKAGES}
    try:
        yield
    finally:
        sys.meta_path[:], sys.path[:] = saved[0], saved[1]
        for name in [n for n in sys.modules if n.split(".")[0] in PACKAGES]:
            del sys.modules[name]
        sys.modules.update(saved[2])


def judge_in_process(folder, cells, sandboxed, modules=("normlib.layer_norm",),
                     limits=IN_PROCESS, judge=Judge):
    """{grade_id: (passed, detail)}: the judge (the class judge) run in this process (so
    that a test can force where it makes cgroups), its modules and finder taken out again
    after."""
    with judge_state():
        return judge(folder, folder, set(modules), limits, sandboxed=sandboxed).run(cells)


def submission(tmp_path, **files):
    """A folder with the reference normlib/, but these files (layer_norm=text), and the
    course's normkit/."""
    shutil.copytree(SOLUTIONS / "normlib", tmp_path / "normlib")
    shutil.copytree(NORMKIT, tmp_path / "normkit")
    for name, text in files.items():
        (tmp_path / "normlib" / f"{name}.py").write_text(text)
    return tmp_path


def judged(folder, cells=UNIT1, sandboxed=SANDBOX):
    """{number: (passed, detail)}."""
    numbers = {e.grade_id: e.number for e in exercises()}
    results = run_checks(folder, cells, LIMITS_HERE, sandboxed=sandboxed)
    return {numbers[g]: r for g, r in results.items()}


STUB = "def layer_norm_stats(*args, **kwargs):\n    raise NotImplementedError('Exercise 1.1')\n"
FORGERS = {
    # writes results files where the old re-check kept them, then ends its process
    "writes passed results, exits": STUB + """
import glob, json, os, tempfile
for path in glob.glob(os.path.join(tempfile.gettempdir(), "**", "*.jsonl"), recursive=True):
    with open(path, "a") as f:
        f.write(json.dumps({"grade_id": "ex1_1_layer_norm_stats", "passed": True}) + "\\n")
os._exit(0)
""",
    "replaces json.dumps": STUB + """
import json
_dumps = json.dumps
json.dumps = lambda *a, **k: _dumps(*a, **k).replace("false", "true")
""",
    # wrong (eps outside the square root) and NumPy's comparison disarmed
    "disarms numpy's private comparison": """
import numpy as np
import numpy.testing._private.utils as _utils
_utils.assert_array_compare = lambda *args, **kwargs: None


def layer_norm_stats(x, normalized_shape, eps=1e-5):
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    return mean, 1 / (np.sqrt(x.var(axis=axes, keepdims=True)) + eps)
""",
    # garbage on every descriptor that could be the channel, then a hang
    "writes on the channel": STUB + """
import os
for fd in range(3, 64):
    try:
        os.write(fd, b"\\x05\\x00\\x00\\x00\\x00\\x00\\x00\\x00junk!")
    except OSError:
        pass
""",
}


@pytest.mark.parametrize("case", FORGERS)
def test_a_forger_gets_what_its_code_deserves(tmp_path, case):
    folder = submission(tmp_path, layer_norm=override("normlib/layer_norm.py", FORGERS[case]))
    results = judged(folder)
    assert not results["1.1"][0], results["1.1"]
    # 1.2 calls 1.1 in the reference: it fails with it; the judge went on to grade it
    assert set(results) == {"1.1", "1.2"}


def test_a_request_to_a_runner_that_is_gone_is_runner_gone():
    """Writing to a runner whose end of the channel is closed (it ended) raises RunnerGone,
    which the judge handles, as reading its EOF does; never a BrokenPipeError, which once
    ended the judge in the middle of a submission."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    writer = os.fdopen(write_end, "wb", buffering=0)  # (buffered, close would flush again)
    with open(os.devnull, "rb") as reader, writer, pytest.raises(RunnerGone):
        Peer(reader, writer, ()).request("reset")


class LostRunner:
    """A runner process that has ended but is not reaped yet: poll() says it runs until
    someone waits for it (the race: a forger's os._exit, bubblewrap not yet gone)."""

    def __init__(self):
        self.reaped = False
        self.stdin = self.stdout = io.BytesIO()

    def poll(self):
        return 0 if self.reaped else None

    def kill(self):
        pass

    def wait(self):
        self.reaped = True


def test_the_judge_starts_a_new_runner_after_losing_one(monkeypatch):
    """A check whose runner is gone fails, and the next check gets a new runner: before,
    the next check wrote to the lost one."""
    starts = []

    class Channel:  # a Peer whose runner ended (EOF), or one that answers
        def __init__(self, gone):
            self.gone, self.broken, self.deadline = gone, None, None

        def request(self, op):
            if self.gone:
                self.broken = ENDED
                raise RunnerGone(ENDED)

    def start(judge):
        starts.append(1)
        judge.process, judge.peer = LostRunner(), Channel(gone=len(starts) == 1)

    monkeypatch.setattr(Judge, "start", start)
    limits = Limits(notebook_timeout=60, timeout=30, startup_timeout=30)
    judge = Judge("/nonexistent", "/nonexistent", [], limits, sandboxed=False)
    found = judge.run([("first", "pass"), ("second", "pass")])
    assert len(starts) == 2
    assert found["first"] == (False, "the submission's code ended its process")
    assert found["second"] == (True, "")


NO_TORCH = """
import sys

_reference_stats = layer_norm_stats


def layer_norm_stats(*args, **kwargs):
    assert "torch" not in sys.modules, "the runner imported torch"
    return _reference_stats(*args, **kwargs)
"""


def test_the_runner_of_a_numpy_submission_never_imports_torch(tmp_path):
    """(2.5 s of CPU a runner: tools/sandboxed/wire.py imports torch only for a tensor.)"""
    reference = (SOLUTIONS / "normlib" / "layer_norm.py").read_text()
    results = judged(submission(tmp_path, layer_norm=reference + NO_TORCH))
    assert set(results) == {"1.1", "1.2"}
    assert all(passed for passed, _ in results.values()), results


LEAK = """
import gc, os, sys


def _dump(what):
    with open("/submission/leak.txt" if os.path.isdir("/submission") else "leak.txt",
              "a") as f:
        f.write(repr(what)[:200000] + "\\n")


def _everything():
    _dump(sys.argv)
    _dump(dict(os.environ))
    _dump({name: vars(m) for name, m in list(sys.modules.items())
           if name == "__main__" or "check" in name})
    for obj in gc.get_objects():
        if isinstance(obj, str) and len(obj) > 20:
            _dump(obj)
    frame = sys._getframe()
    while frame:
        _dump((frame.f_code.co_filename, frame.f_locals))
        frame = frame.f_back
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                _dump(open(f"/proc/{pid}/cmdline", "rb").read())
            except OSError:
                pass


_reference_stats = layer_norm_stats


def layer_norm_stats(*args, **kwargs):
    _everything()
    return _reference_stats(*args, **kwargs)


_everything()
"""


def test_the_runner_never_sees_a_check_or_its_hidden_tests(tmp_path):
    # what crosses the channel, without the OS sandbox, so that the dump lands in the
    # submission's folder (in the sandbox it is a private file system that vanishes, and
    # /proc shows the runner alone: see test_the_sandbox_refuses_every_escape)
    folder = submission(tmp_path, layer_norm=override("normlib/layer_norm.py", LEAK))
    results = judged(folder, sandboxed=False)
    assert results["1.1"][0], results["1.1"]  # it was graded, and its values were right
    leak = (folder / "leak.txt").read_text()
    assert len(leak) > 10_000  # it did dump the runner's state
    hidden = [line.strip() for e in exercises() if e.unit == 1
              for line in e.hidden.splitlines() if len(line.strip()) > 30]
    visible = [line.strip() for line in (NORMKIT / "checks" / "unit1.py").read_text().splitlines()
               if "assert" in line]  # (the check's code runs in the judge alone)
    assert hidden and visible
    assert [line for line in hidden + visible if line in leak] == []


PROBE = r"""
import json, os, socket, subprocess, sys, threading
found = {"uid": os.getuid()}


def attempt(name, action):
    try:
        found[name] = ("allowed", repr(action())[:200])
    except Exception as error:
        found[name] = ("refused", type(error).__name__, str(error))


course, judge_pid, secret, port = sys.argv[1:5]
attempt("read the course", lambda: open(course).read())
attempt("list the course's folder", lambda: os.listdir(os.path.dirname(course)))
attempt("read the judge's temporary file", lambda: open(secret).read())
attempt("the judge's /proc", lambda: open(f"/proc/{judge_pid}/cmdline").read())
attempt("the judge's memory", lambda: open(f"/proc/{judge_pid}/mem", "rb").read(1))
attempt("read the judge's code", lambda: open("/opt/grader/tools/judge/judge.py").read())
attempt("list the grader's tools", lambda: sorted(os.listdir("/opt/grader/tools")))
found["processes"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
attempt("connect to the host", lambda: socket.create_connection(("127.0.0.1", int(port)), 2))
attempt("fork", lambda: os.fork())
attempt("run a program", lambda: subprocess.run(["/usr/bin/true"]))
attempt("write the environment", lambda: open(sys.executable, "ab"))
attempt("write /usr", lambda: open("/usr/x", "w"))
attempt("write its folder", lambda: open("/submission/mine.txt", "w").write("x"))
attempt("write its folder's source", lambda: open("/opt/submission/mine.txt", "w"))
def fill():  # five files of 60 MiB each (no file-size limit here): 300 MiB
    try:
        for i in range(5):
            with open(f"/submission/big{i}", "wb") as f:
                f.write(bytes(60 << 20))
    except OSError as error:
        raise OSError(f"errno {error.errno}") from None


attempt("fill its folder", fill)
attempt("write /tmp", lambda: open("/tmp/mine.txt", "w").write("x"))
attempt("write /dev/shm", lambda: open("/dev/shm/mine.txt", "w").write("x"))
t = threading.Thread(target=lambda: found.setdefault("thread", "ran"))
t.start(); t.join()
print(json.dumps(found), flush=True)
import time
time.sleep(600)  # until the judge kills it
"""


@needs_bwrap
def test_the_sandbox_refuses_every_escape(tmp_path):
    secret = Path(os.environ.get("TMPDIR", "/tmp")) / f"judge-secret-{os.getpid()}"
    secret.write_text("the judge's")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    folder = tmp_path / "submission"
    folder.mkdir()
    marker = f"probe-{os.getpid()}-{time.time_ns()}"
    course = str(SOLUTIONS / "normlib" / "layer_norm.py")
    command, fd = bubblewrap.command(folder, ["-c", PROBE, course, str(os.getpid()), str(secret),
                                       str(server.getsockname()[1]), marker], {}, 1024)
    process = subprocess.Popen(command, pass_fds=(fd,), stdout=subprocess.PIPE, text=True)
    os.close(fd)
    try:
        found = json.loads(process.stdout.readline())
    finally:
        process.kill()
        process.wait()
        server.close()
        secret.unlink()
    refused = {name for name, value in found.items()
               if isinstance(value, list) and value[0] == "refused"}
    assert refused == {"read the course", "list the course's folder", "read the judge's code",
                       "read the judge's temporary file", "the judge's /proc",
                       "the judge's memory", "connect to the host", "fork", "run a program",
                       "write the environment", "write /usr", "write its folder's source",
                       "fill its folder"}, found
    assert found["fill its folder"][1:] == ["OSError", "errno 28"]  # ENOSPC: bubblewrap.DISK_MB
    # of tools/, what runs inside and nothing else (bubblewrap.INSIDE)
    assert found["list the grader's tools"] == ["allowed", repr(["__init__.py", "sandboxed"])]
    assert found["fork"][1] == found["run a program"][1] == "PermissionError"
    assert found["uid"] == 65534 and found["thread"] == "ran"
    assert len(found["processes"]) <= 2  # bwrap's init and the runner: no other process
    assert found["write its folder"] == ["allowed", "1"]  # its own private copy:
    assert not (folder / "mine.txt").exists()  # it vanished with the sandbox
    assert not Path("/tmp/mine.txt").exists() and not Path("/dev/shm/mine.txt").exists()
    # nothing survives: no process anywhere still has the marker in its command line
    time.sleep(0.2)
    assert processes_naming(marker) == []


def test_bwrap_filter_is_a_whole_bpf_program():
    """Each instruction 8 bytes, every jump within the program; a measuring runner's
    refuses one more call for each of HIDING's this machine has, and looks at madvise's
    advice (one more for each of _DROPS)."""
    for machine in ("x86_64", "aarch64"):
        plain = bubblewrap.seccomp_filter(machine)
        measuring = bubblewrap.seccomp_filter(machine, measuring=True)
        for program in (plain, measuring):
            code = [struct.unpack("<HBBI", program[i:i + 8]) for i in range(0, len(program), 8)]
            assert len(program) % 8 == 0 and code[-1][0] == 0x06 and all(  # (BPF_RET last)
                op & 0x07 != 0x05 or i + 1 + max(jt, jf) < len(code)  # (BPF_JMP's targets)
                for i, (op, jt, jf, _) in enumerate(code))
        hiding = [c for c in bubblewrap.HIDING if c in bubblewrap._CALLS[machine]]
        assert len(measuring) // 8 == len(plain) // 8 + len(hiding) + 1 + len(bubblewrap._DROPS) + 2
    assert bubblewrap.seccomp_filter("riscv64") is None


# --- a hostile class: each attack that broke grading, graded beside what it deserves ----

ZERO_D = """
_reference_stats = layer_norm_stats


def layer_norm_stats(x, normalized_shape, eps=1e-5):  # right, but 0-d statistics for 1-d x
    mean, rstd = _reference_stats(x, normalized_shape, eps)
    return (mean.reshape(()), rstd.reshape(())) if x.ndim == 1 else (mean, rstd)
"""


def test_a_0d_result_fails_where_the_contract_says_1d(tmp_path):
    """It crossed as (1,) and took 3 points; the same code run in-process fails."""
    folder = submission(tmp_path, layer_norm=override("normlib/layer_norm.py", ZERO_D))
    results = judged(folder)
    assert not results["1.1"][0]
    assert results["1.1"][1].startswith("a hidden test failed: mean for x (7,) float32, "
                                        "normalized_shape=(7,), eps=1e-05: expected shape "
                                        "(1,), got ()"), results["1.1"]


# The channel, as a forger reaches it: the runner's Peer, found in the frame that serves
# the current request; a reply written on it by hand, then the runner waits to be killed.
FORGE = """
import sys as _sys, time as _time


def _forge(head, buffers=()):
    from tools.sandboxed.wire import dumps
    frame = _sys._getframe()
    while frame.f_code.co_name != "_serve":
        frame = frame.f_back
    peer, seq = frame.f_locals["self"], frame.f_locals["seq"]
    head = head.replace(b"SEQ", str(seq).encode())
    data = dumps({}, list(buffers))
    peer.writer.write(len(head).to_bytes(8, "little") + head + data[8 + 2:])
    peer.writer.flush()
    _time.sleep(600)


def layer_norm_stats(x, normalized_shape, eps=1e-5):
    _forge(REPLY)
"""
REPLIES = {  # what each forged reply holds, and why the judge refuses it
    # int keys hashing alike (130,000 took 12 s of the judge's CPU per check, before);
    # 30,000 fit in the 1 MiB head: refused for their keys
    "hash-collision dict": ('b\'{"re": SEQ, "value": {"$": "dict", "items": [\' + b", ".join('
                            'b"[%d, 0]" % (k * (2**61 - 1)) for k in range(30000)) + b"]}}"',
                            "the runner broke the protocol: a dict's keys must be str"),
    # a 64 MiB head of empty lists: 1.9 GB of the judge's memory, before
    "JSON bomb": ('b\'{"re": SEQ, "value": [\' + b"[], " * (16 << 20) + b"[]]}"',
                  "the runner broke the protocol: a message over 1048576 bytes"),
}


@pytest.mark.parametrize("case", REPLIES)
def test_a_forged_reply_fails_its_check_and_the_judge_goes_on(tmp_path, case):
    reply, why = REPLIES[case]
    code = STUB + FORGE.replace("REPLY", reply)
    folder = submission(tmp_path, layer_norm=override("normlib/layer_norm.py", code))
    results = judged(folder)
    assert results["1.1"][0] is False and results["1.1"][1].startswith(why), results["1.1"]
    assert "0.486" not in results["1.1"][1]
    assert set(results) == {"1.1", "1.2"}  # the judge went on


RAISER = """
class Hidden_3x6f_0486(Exception):  # data in a class name
    pass


def layer_norm_stats(x, normalized_shape, eps=1e-5):
    if x.shape == (5, 8):  # the first hidden case: its values in the message
        raise KIND(f"hidden {x.shape} {x.dtype} eps={eps} x[0, 0]={x[0, 0]!r}")
    return _reference_stats(x, normalized_shape, eps)
"""


@pytest.mark.parametrize("kind, name", [("ValueError", "an error"),
                                        ("Hidden_3x6f_0486", "an error")])
def test_no_message_nor_class_name_of_the_submissions_errors_reaches_a_verdict(
        tmp_path, kind, name):
    """In a hidden test, not even the builtin type of the error (case 11: 21 builtin names
    carried 4.4 bits a check): only that the submission's code raised one."""
    reference = (SOLUTIONS / "normlib" / "layer_norm.py").read_text()
    folder = submission(tmp_path, layer_norm=reference + "\n_reference_stats = "
                        "layer_norm_stats\n" + RAISER.replace("KIND", kind))
    results = judged(folder)
    assert results["1.1"] == (False, f"{name} raised by the submission's code, in a "
                                     "hidden test"), results["1.1"]


RESET_REFUSED = """
import tools.sandboxed.peer as _peer


def _refuse(self):
    raise RuntimeError("no")


_peer.Peer._op_reset = _refuse  # (patched when the module is imported: by the first check)
"""


def test_an_error_reply_to_reset_fails_that_check_and_the_class_goes_on(tmp_path):
    """It ended the judge: "10 of 11 graded", autograde exited 1."""
    reference = (SOLUTIONS / "normlib" / "layer_norm.py").read_text()
    results = judged(submission(tmp_path, layer_norm=reference + RESET_REFUSED))
    assert results == {"1.1": (True, ""),  # a new runner: reset answered before the import
                       "1.2": (False, "the runner failed to start the check (RuntimeError)")}


POISON = """
import torch as _torch

_load = _torch.nn.Module.load_state_dict


def _poisoned(self, state_dict, *args, **kwargs):
    with _torch.no_grad():  # the judge's copies of torch's own parameters, and its own
        for value in state_dict.values():
            value.fill_(float("nan"))
    return _load(self, state_dict, *args, **kwargs)


TransformerEncoderLayer.load_state_dict = _poisoned
TransformerEncoder.load_state_dict = _poisoned
"""
UNIT5 = [(e.grade_id, e.source) for e in exercises() if e.number in ("5.1", "5.2")]


def test_nan_written_into_the_judges_state_dict_stays_in_the_runner(tmp_path):
    """Copy-back filled torch's parameters in the judge with NaN: the expected values were
    NaN, like the submission's, and NaN equalled NaN. Now only a call's declared updates
    receive what it wrote (a load_state_dict has none): the expected values hold no NaN,
    and a NaN passes no comparison where they hold none."""
    reference = (SOLUTIONS / "normlib" / "transformer.py").read_text()
    results = judged(submission(tmp_path, transformer=reference + POISON), UNIT5)
    assert results["5.1"] == (True, "")  # (add_norm loads no state_dict)
    assert results["5.2"][0] is False
    assert results["5.2"][1].startswith("AssertionError: the call wrote into one of its "
                                        "arguments (a (24, 8) torch.float32 tensor)")


TASKS_SET = """
import resource as _resource

_reference_stats = layer_norm_stats


def layer_norm_stats(*args, **kwargs):
    from tools.sandboxed.guard import TASKS
    assert _resource.getrlimit(_resource.RLIMIT_NPROC) == (TASKS, TASKS), "no task limit"
    return _reference_stats(*args, **kwargs)
"""


@needs_bwrap
def test_a_sandboxed_runner_may_start_a_bounded_number_of_tasks(tmp_path):
    """RLIMIT_NPROC, in the sandbox's own user namespace (tools.sandboxed.guard.TASKS); the 96,365
    it inherited were more than the host's pid_max. (The kernel exempts a grader running
    as root, as this test may be: it shows the limit is set where it applies.)"""
    reference = (SOLUTIONS / "normlib" / "layer_norm.py").read_text()
    results = judged(submission(tmp_path, layer_norm=reference + TASKS_SET))
    assert results["1.1"] == (True, ""), results["1.1"]


def test_a_judge_that_gives_no_answer_by_its_deadline_is_stopped(tmp_path, monkeypatch):
    """A judge stuck (here in a check that sleeps; before, in decoding a reply) held its
    grading thread forever: tools.judge.client waits on it until its deadline, then kills it
    and fails that submission alone."""
    from tools.judge import client

    monkeypatch.setattr(client, "deadline", lambda limits: 3)
    folder = submission(tmp_path)
    judge = client.JudgeProcess({})
    job = {"judge_dir": str(folder), "runner_dir": str(folder), "student_modules": [],
           "cells": [["stuck", "import time\ntime.sleep(600)"]], "limits": LIMITS_HERE.to_json(),
           "sandboxed": False}
    start = time.monotonic()
    with pytest.raises(RuntimeError, match="no answer in 3 s"):
        judge.grade(job, LIMITS_HERE)
    assert time.monotonic() - start < 60 and judge.process.poll() is not None


# Rule 5: a measurement from outside. The checks of 7.1 and 7.2 measured memory with
# tracemalloc, in the runner, where the submission could reset it. Now the judge reads the
# peak of a fresh runner's resident memory from /proc (tools.judge.judge.Judge.measure).
UNIT7 = [(e.grade_id, e.source) for e in exercises() if e.number in ("7.1", "7.2")]
NAIVE_FAST = """
import numpy as _np
from normlib.layer_norm import layer_norm_backward as _backward
from normlib.layer_norm import layer_norm_forward as _forward
"""
TRICKS = {  # what each kernel does after computing naively (2 and 4 times x's size)
    "reset_peak": "import tracemalloc\ndef _trick():\n    tracemalloc.reset_peak()\n",
    "clear_refs": "def _trick():  # the peak of its resident memory, reset from inside\n"
                  "    with open('/proc/self/clear_refs', 'w') as f:\n        f.write('5')\n",
    "reserve": "_reserve = [_np.ones(64 << 20, _np.uint8)]  # resident at import\n"
               "def _trick():  # freed before the temporaries, taken again after\n"
               "    _reserve.append(_np.ones(64 << 20, _np.uint8))\n",
    "none": "def _trick():\n    pass\n",
}


def _naive_with(trick):
    return NAIVE_FAST + TRICKS[trick] + """
def _run(kernel, *args):
    if '_reserve' in globals():
        _reserve.clear()
    result = kernel(*args)
    try:
        _trick()
    except OSError:  # (a read-only /proc)
        pass
    return result


def layer_norm_forward_fast(*args):
    return _run(_forward, *args)


def layer_norm_backward_fast(*args):
    return _run(_backward, *args)
"""


@needs_bwrap
@pytest.mark.parametrize("trick", ["none", "reset_peak", "clear_refs", "reserve"])
def test_a_kernel_cannot_hide_its_memory_from_the_judge(tmp_path, trick):
    """Case 5: naive kernels that called tracemalloc.reset_peak() scored 8 points more than
    without it. Now the same naive kernels fail both memory checks whatever they do: reset
    the peak that tracemalloc keeps, or the one the kernel keeps (/proc/self/clear_refs,
    read-only in the sandbox), or hold memory from import on to free it for their
    temporaries (the import is measured too). (The reference passes: test_isolation.)"""
    results = judged(submission(tmp_path, layer_norm_fast=_naive_with(trick)), UNIT7)
    for number, times in (("7.1", 2), ("7.2", 4)):
        passed, detail = results[number]
        assert not passed and detail.startswith("CheckFailed: memory for x (2048, 1024) "
                                                "float32"), (number, detail)
        found = re.search(r": ([\d.]+) times x's size", detail)
        assert trick == "reserve" or times <= float(found.group(1)) <= times + 0.2, detail


# Case 2: the inputs as scratch. A kernel that kept x where no resident memory counts it
# (/dev/shm: page cache), computed its temporaries in x's own buffer and restored x before
# it returned passed 7.1; the same code with its temporaries in arrays of its own failed.
# Each stash below is tried in turn, the last a copy in memory, which is counted.
SCRATCH = """
import ctypes as _ctypes, mmap as _mmap, os as _os
import numpy as _np
from normlib.layer_norm import layer_norm_backward as _backward


def _shm(x):
    f = open("/dev/shm/stash", "w+b")
    x.tofile(f)
    return f


def _memfd(x):
    f = _os.fdopen(_os.memfd_create("stash"), "w+b")
    x.tofile(f)
    return f


def _remap(x):  # no stash: x's pages mapped clean again from the file they came from,
    # opened by its path or through /proc/self/map_files (before x is written into)
    for line in open("/proc/self/maps"):
        start, end = (int(a, 16) for a in line.split()[0].split("-"))
        if start <= x.ctypes.data < end and len(line.split()) > 5:
            for path in (line.split()[5], f"/proc/self/map_files/{line.split()[0]}"):
                try:
                    return ("remap", _os.open(path, _os.O_RDONLY), start, end,
                            int(line.split()[2], 16))
                except OSError:
                    pass
    raise OSError("x's file cannot be opened")


def _revert(x):  # no stash: x's pages, once written into, dropped, to be read again clean
    # from its file (madvise on the mapping NumPy's array holds)
    x.base.madvise(_mmap.MADV_DONTNEED, 0, _mmap.PAGESIZE)  # (allowed here?)
    return ("revert",)


def _shared(x):  # shared memory of its own, each chunk's pages dropped from the resident
    # set once written (the data stays in shared memory)
    kept = _mmap.mmap(-1, max(x.nbytes, 1))
    view, step = memoryview(x).cast("B"), 1 << 20
    for i in range(0, x.nbytes, step):
        kept[i:i + step] = view[i:i + step]
        kept.madvise(_mmap.MADV_DONTNEED, i, min(step, x.nbytes - i))
    return kept


def _stash(x):
    for way in STASHES:
        try:
            return way(x)
        except OSError:
            pass
    return x.copy()  # (in memory: counted)


def _restore(x, kept):
    if isinstance(kept, tuple) and kept[0] == "revert":
        x.base.madvise(_mmap.MADV_DONTNEED)
    elif isinstance(kept, _mmap.mmap):
        memoryview(x).cast("B")[:] = kept[:x.nbytes]
    elif isinstance(kept, tuple):  # mapped again, where x was, from its file: clean pages
        _, fd, start, end, offset = kept
        libc = _ctypes.CDLL(None)
        libc.mmap.restype = _ctypes.c_void_p
        libc.mmap.argtypes = [_ctypes.c_void_p, _ctypes.c_size_t, _ctypes.c_int,
                              _ctypes.c_int, _ctypes.c_int, _ctypes.c_long]
        if libc.mmap(start, end - start, 3, 0x02 | 0x10, fd, offset) != start:
            raise OSError("not mapped again")
    elif isinstance(kept, _np.ndarray):
        _np.copyto(x, kept)
    else:
        kept.seek(0)
        kept.readinto(memoryview(x).cast("B"))


def layer_norm_forward_fast(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    if SCRATCH_IN_X:  # its temporaries in x's buffer, x kept elsewhere meanwhile
        kept = _stash(x)
        _np.subtract(x, mean, out=x)  # x - mean
        y = _np.multiply(x, x)  # (its one allocation, x's size)
        var = y.mean(axis=axes, keepdims=True)
        rstd = 1 / _np.sqrt(var + eps)
        _np.multiply(x, rstd, out=y)
        _restore(x, kept)
    else:  # ... or in arrays of its own: x - mean, its square, y
        centred = x - mean
        var = (centred * centred).mean(axis=axes, keepdims=True)
        rstd = 1 / _np.sqrt(var + eps)
        y = centred * rstd
    if weight is not None:
        y *= weight
    if bias is not None:
        y += bias
    return y, mean.astype(x.dtype), rstd.astype(x.dtype)


def layer_norm_backward_fast(*args):
    return _backward(*args)
"""


def scratch(stashes):
    """A fast forward whose temporaries are in x's own buffer, x kept by the first of
    stashes that works (None: the same code with temporaries of its own)."""
    return SCRATCH.replace("SCRATCH_IN_X", str(stashes is not None)).replace(
        "STASHES", f"[{', '.join(stashes or ())}]")


@pytest.fixture(scope="module")
def own_arrays(tmp_path_factory):
    """The verdicts of 7.1 and 7.2 on the scratch kernel with temporaries of its own."""
    folder = submission(tmp_path_factory.mktemp("own-arrays"), layer_norm_fast=scratch(None))
    return judged(folder, UNIT7)


STASHES = ["_shm", "_memfd", "_remap", "_revert", "_shared"]


@needs_bwrap
@pytest.mark.parametrize("stash", STASHES)
def test_the_inputs_are_no_room_for_a_kernels_temporaries(tmp_path, own_arrays, stash):
    """Case 2 (x kept in /dev/shm) and own cases (a memory file; no stash at all: x mapped
    clean again from its file, or its written pages dropped to be read again clean; shared
    memory whose pages leave the resident set): each fails 5.5's memory check as the same
    code with its temporaries in arrays of its own fails it. (In the measuring runner
    nothing is writable, its filter refuses memfd_create and every madvise that drops
    pages, and the arguments' file is reached through a descriptor closed before the
    call: each stash fails, and the copy it falls back to, with the pages of x it wrote
    into, is counted.)"""
    found = judged(submission(tmp_path, layer_norm_fast=scratch([stash])), UNIT7)
    for name, results in (("trick", found), ("own arrays", own_arrays)):
        passed, detail = results["7.1"]
        assert not passed and detail.startswith("CheckFailed: memory for x (2048, 1024) "
                                                "float32"), (name, detail)
        assert not results["7.2"][0]


DROPPER = NAIVE_FAST + """
import ctypes as _ctypes


def _drop():  # the resident pages of its libraries' code dropped (read again when used):
    # room that a measure of resident memory alone does not see taken again
    libc = _ctypes.CDLL(None)
    libc.madvise.argtypes = [_ctypes.c_void_p, _ctypes.c_size_t, _ctypes.c_int]
    for line in open("/proc/self/maps"):
        parts = line.split()
        if len(parts) > 5 and parts[1] == "r-xp" and parts[5].startswith("/"):
            start, end = (int(a, 16) for a in parts[0].split("-"))
            libc.madvise(start, end - start, 4)  # MADV_DONTNEED


def layer_norm_forward_fast(*args):
    _drop()
    return _forward(*args)


def layer_norm_backward_fast(*args):
    _drop()
    return _backward(*args)
"""


@needs_bwrap
def test_a_kernel_cannot_make_room_by_dropping_pages_it_held(tmp_path):
    """Own case (rule 3): the naive kernels, each first dropping the resident pages of its
    libraries' code. Measured by resident memory alone, without the sandbox's filter, they
    pass 5.5; in the sandbox they fail both (its filter refuses the madvise, and its call's
    cgroup charges all they allocate whatever they freed)."""
    where = cgroup.here()
    if where is None or where.kind == "systemd":
        pytest.skip(f"no cgroup of the grader's here ({where}): a measure of resident memory "
                    "alone misses this, as docs/security.md says")
    folder = submission(tmp_path, layer_norm_fast=DROPPER)
    results = judged(folder, UNIT7)
    for number in ("7.1", "7.2"):
        passed, detail = results[number]
        assert not passed and detail.startswith("CheckFailed: memory for x (2048, 1024) "
                                                "float32"), (number, detail)
    # without the sandbox (no filter, no cgroup): the resident memory alone is beaten
    assert judged(folder, UNIT7, sandboxed=False)["7.1"] == (True, "")


@needs_bwrap
@pytest.mark.parametrize("kernel", ["_remap", "_revert", "dropper"])
def test_without_the_graders_cgroup_the_measure_still_sees_them(tmp_path, monkeypatch, kernel):
    """The branch of a machine whose sandboxes get no cgroup of the grader's (a systemd
    scope, none), forced here: the measure is the runner's resident memory and the pages of
    its arguments it wrote into, and still the kernels that drop or remap pages fail 5.5's
    memory check (the filter refuses the madvise; no path leads back to the arguments'
    file). What it cannot see (docs/security.md): room freed by unmapping a mapping the
    call does not need."""
    monkeypatch.setattr(cgroup, "measure", lambda pid, *a, **k: None)
    code = DROPPER if kernel == "dropper" else scratch([kernel])
    folder = submission(tmp_path, layer_norm_fast=code)
    cells = [(e.grade_id, e.source) for e in exercises() if e.number == "7.1"]
    [(passed, detail)] = judge_in_process(folder, cells, True,
                                          ("normlib.layer_norm_fast",)).values()
    assert not passed and detail.startswith("CheckFailed: memory for x (2048, 1024) "
                                            "float32"), detail


def test_a_measured_calls_arrays_are_written_to_a_file_but_an_empty_one(tmp_path):
    """Each array at a page's start of a read-only file, synced; an empty one (nothing to
    map: past the file's end, it would not map) crosses as it is."""
    import mmap

    from tools.judge.judge import arguments_file

    empty, x = np.zeros((0, 3), np.float32), np.arange(5.0)
    refs, path = arguments_file([empty, x, (5,), None], tmp_path)
    assert refs[0] is empty and refs[2:] == [(5,), None]
    assert refs[1] == {"$offset": mmap.PAGESIZE, "shape": [5], "dtype": "<f8"}
    assert path.read_bytes()[mmap.PAGESIZE:] == x.tobytes()
    assert path.stat().st_mode & 0o777 == 0o444


def test_a_measurement_counts_the_call_not_its_arguments(tmp_path):
    """The judge's order, with the measuring runner's memory seen at each step: the
    arguments (32 MiB here) are in before the reset, the call's growth after it."""
    folder = submission(tmp_path)
    judge = Judge(folder, folder, {"normlib.layer_norm_fast"}, LIMITS_HERE, sandboxed=False)
    saved = sys.meta_path[:], sys.path[:], {n: m for n, m in sys.modules.items()
                                            if n.split(".")[0] in PACKAGES}
    judge.start()  # (in this process: its finder and modules go again after the test)
    try:
        import numpy as np

        import normlib.layer_norm_fast as fast

        x = np.ones((4096, 2048), np.float32)  # (R, H) 32 MiB
        w = np.ones(2048, np.float32)  # (H,)
        (y, mean, rstd), peak = fast.layer_norm_forward_fast.remote_peak_memory(
            x, (2048,), w, w, 1e-5)
        assert y.shape == x.shape and y.dtype == x.dtype
        assert x.nbytes <= peak <= 1.1 * x.nbytes, peak / x.nbytes  # y, and a few blocks
    finally:
        judge.stop()
        sys.meta_path[:], sys.path[:] = saved[0], saved[1]
        for name in [n for n in sys.modules if n.split(".")[0] in PACKAGES]:
            del sys.modules[name]
        sys.modules.update(saved[2])


# --- what a verdict carries out of the runner: bounded (issue 39, cases 10 to 13) -------

ZERO_SIZE = """
_reference_stats = layer_norm_stats


def layer_norm_stats(x, normalized_shape, eps=1e-5):  # data in a zero-size array's shape
    mean, rstd = _reference_stats(x, normalized_shape, eps)
    if x.shape == (5, 8):  # the first hidden case
        return np.empty((0, 1024200119, 16302, 5, 8), mean.dtype), rstd
    return mean, rstd
"""


def test_a_zero_size_results_shape_is_not_quoted(tmp_path):
    """Case 10: "expected shape (5, 1), got (0, 1024200119, 16302, 5, 8)": about 60 bits a
    failed check. A shape is quoted only where each dimension is the expected one's (or
    1): here "a zero-size array"."""
    folder = submission(tmp_path, layer_norm=override("normlib/layer_norm.py", ZERO_SIZE))
    passed, detail = judged(folder)["1.1"]
    assert not passed and "expected shape (5, 1), got a zero-size array" in detail, detail
    assert "1024200119" not in detail and "16302" not in detail


PERSISTENT = """
_seen = []
_reference_welford = welford


def welford(x):  # right, but from its fourth call on, the first call's x[0] as the count
    _seen.append(float(x.reshape(-1)[0]))
    n, mean, m2 = _reference_welford(x)
    return (int(abs(_seen[0]) * 10 ** 9) if len(_seen) > 3 else n), mean, m2
"""
WELFORD = [(e.grade_id, e.source) for e in exercises() if e.number == "6.1"]


def test_what_a_runner_remembers_leaves_only_through_coarse_numbers(tmp_path):
    """Case 12: the runner persists across checks, so what it saw in one call (here the
    first x's first value) can come out in a later verdict, there as an integer it returns
    ("expected the int 3, got 486123456"). A verdict quotes a number the check does not
    hold only coarsely: an integer over 99 as its power of ten ("100000000+")."""
    folder = submission(tmp_path, variance=override("normlib/variance.py", PERSISTENT))
    passed, detail = judged(folder, WELFORD)["6.1"]
    assert not passed and re.search(r"got 10+\+", detail), detail
    assert not re.search(r"got \d{3,}(?!\d*\+)", detail), detail


@pytest.mark.parametrize("text, shown", [
    ("8 of 309300 values are wrong.\n  Worst at index (1030, 7): expected 0.4472136, "
     "got 0.3872983 (tolerance 1.4e-05).", "8 of 100000+ values are wrong.\n  Worst: "
                                            "expected 0.45, got … (tolerance …)."),
    ("got [0.1, 0.2, 0.3, 0.4, 0.5]", "got [0.1, 0.2, 0.3, …, …]"),
    ("got 1e+300 and -3e-200", "got >1e+06 and -<1e-06"),
    ("got 'a secret' for x (1031, 300)", "got '…' for x (1031, 300)"),
    ("2 times x's size; m2's digits, 'a secret'", "2 times x's size; m2's digits, '…'"),
    ("expected the int 1, got 486123456.", "expected the int 1, got 100000000+."),
    # a number the source holds is quoted as it is, but eight numbers at most in all: the
    # runner cannot have its guesses at the hidden source's numbers told apart by the dozen
    ("got " + str([1031, 300] * 5), "got [1031, 300, 1031, 300, 1031, 300, 1031, 300, …, …]"),
])
def test_a_message_quotes_few_and_coarse_numbers_it_does_not_hold(text, shown):
    """Own case (rule 9): of the numbers the check's source does not hold, the first three,
    coarsely; a number the source holds (a hidden case's shape, its eps) as it is; eight
    in all."""
    from tools.judge.judge import _sanitized

    assert _sanitized(text, "check(randn(1031, 300), eps=1e-5)") == shown


def test_a_message_quotes_only_strings_of_its_own_cell_and_unit():
    """The strings a verdict may quote are the cell's and its unit's visible checks'
    (normkit/checks/unitN.py), not every unit's: a runner choosing a string to return
    picks from one file, as it did from one cell."""
    from tools.judge.judge import explain

    other = "the running statistics are updated in place"  # (unit 3's words)
    assert other in (NORMKIT / "checks" / "unit3.py").read_text()
    assert other not in (NORMKIT / "checks" / "unit1.py").read_text()
    error = AssertionError(f"count: expected 3, got '{other}'")
    unit1 = next(e.source for e in exercises() if e.number == "1.1")
    unit3 = next(e.source for e in exercises() if e.number == "3.3")
    assert "got '…'" in explain(error, unit1, "<ex1_1>")
    assert f"got '{other}'" in explain(error, unit3, "<ex3_3>")


SLEEPER = """
import time as _time
_calls, _forwarded = [], []
_reference_stats, _reference_forward = layer_norm_stats, layer_norm_forward


def layer_norm_stats(x, normalized_shape, eps=1e-5):  # one bit: over the limit, or not
    _calls.append(1)
    if x.shape == (5, 8) and not _forwarded:  # 1.1's hidden case
        _time.sleep(60)
    return _reference_stats(x, normalized_shape, eps)


def layer_norm_forward(*args, **kwargs):  # right, unless its runner remembers 1.1's calls
    assert _forwarded or not _calls, "remembered"
    _forwarded.append(1)
    return _reference_forward(*args, **kwargs)
"""


def test_a_check_over_its_limit_says_so_and_the_next_check_starts_afresh(tmp_path):
    """Case 13 (a residual of one bit a check, docs/security.md): a sleep past the limit is
    a failure that says so; its runner is killed, so the next check's remembers nothing
    (1.2 passes: its runner saw no call of 1.1's)."""
    folder = submission(tmp_path, layer_norm=override("normlib/layer_norm.py", SLEEPER))
    numbers = {e.grade_id: e.number for e in exercises()}
    results = run_checks(folder, UNIT1, Limits(timeout=3, startup_timeout=5),
                         sandboxed=SANDBOX)  # (a new runner: 8 s, then killed; a runner of
    # unit 1's NumPy files starts in under a second, 3 s on a loaded 2-core machine)
    found = {numbers[g]: r for g, r in results.items()}
    assert found == {"1.1": (False, "ran over the 3 s limit"), "1.2": (True, "")}, found


# Issue 58's attack on 8.4: torch computes the Function, and the student's kernels are
# called once each on a 1x1 array, only for a call counter to see (it scored 2/2). The
# check now compares the Function's results with what the kernels returned on its own
# input and upstream gradient, through the judge's callbacks as in the notebook.
def kernels_for_show():
    """A dyt.py: the reference's, and after it the attack's DyTFunction, the variant of
    tests/variants/wrong_today.py (written into the file, which imports nothing of tests/)."""
    from tests.variants import wrong_today

    classes = (wrong_today.DyTFunctionInTorch, wrong_today.DyTFunctionKernelsForShow)
    return ((SOLUTIONS / "normlib" / "dyt.py").read_text()
            + "\n\nimport normlib.dyt as dyt  # (this file, as the variant calls it)\n\n\n"
            + "\n\n".join(inspect.getsource(c) for c in classes)
            + "\n\nDyTFunction = DyTFunctionKernelsForShow\n")


@needs_bwrap
def test_a_function_that_calls_its_kernels_for_show_fails(tmp_path):
    cells = [(e.grade_id, e.source) for e in exercises() if e.number == "8.4"]
    passed, detail = judged(submission(tmp_path, dyt=kernels_for_show()), cells)["8.4"]
    assert not passed and "the Function's output is not what your dyt_forward returned" \
        in detail, detail


def test_an_exercise_file_importing_the_helpers_from_normkit_still_grades(tmp_path):
    """The provided helpers moved into normlib (_channels.py, _validation.py, _blocks.py) on
    2026-12-07; an exercise file written before imports them from normkit (channels,
    validation, conditioning and modern), which still hold them: the reference so written
    passes."""
    old = {"batch_norm": ("from normlib._channels import", "from normkit.channels import"),
           "dyt": ("from normlib._validation import", "from normkit.validation import"),
           "adaln": ("from normlib._blocks import EPS, Attention, check_block_inputs",
                     "from normkit.conditioning import EPS, check_block_inputs\n"
                     "from normkit.modern import Attention")}
    files = {}
    for name, (new, before) in old.items():
        text = (SOLUTIONS / "normlib" / f"{name}.py").read_text()
        assert text.count(new) == 1, name
        files[name] = text.replace(new, before)
    folder = submission(tmp_path, **files)
    cells = [(e.grade_id, e.source) for e in exercises()
             if e.number in ("3.3", "3.8", "8.2", "8.5")]
    results = run_checks(folder, cells, LIMITS_HERE, sandboxed=SANDBOX)
    assert {g: passed for g, (passed, _) in results.items()} == dict.fromkeys(
        (g for g, _ in cells), True), results


# --- a busy machine (issue 62, point 7) ---------------------------------------------------
BURNER = """
import time as _time
_burnt = []
_reference_stats = layer_norm_stats


def layer_norm_stats(x, normalized_shape, eps=1e-5):  # right, after 0.8 s of CPU at first
    if not _burnt:
        _burnt.append(1)
        end = _time.process_time() + 0.8
        while _time.process_time() < end:
            pass
    return _reference_stats(x, normalized_shape, eps)
"""
HOGS = 6  # busy loops on the runner's CPU: it gets about a seventh of it


@pytest.mark.parametrize("busy", ["through both runs", "through the first run"])
def test_a_check_out_of_time_on_a_busy_machine_runs_again_and_never_fails_silently(
        tmp_path, busy):
    """Issue 62: an honest check that a loaded machine kept from its CPU past the limit (its
    runner waited for a CPU more than half the time) runs once more; given the CPU then, it
    passes (full marks), and still starved it says BUSY, which grades.csv and the next make
    autograde act on, never a plain failure. The load: busy loops pinned, with the runner,
    to one CPU (the test's own affinity, which the runner inherits). Code that sleeps past
    the limit waits for no CPU: it fails as over the limit (the test above)."""
    folder = submission(tmp_path, layer_norm=override("normlib/layer_norm.py", BURNER))
    cells = [(e.grade_id, e.source) for e in exercises() if e.number == "1.1"]
    cpu, saved = min(os.sched_getaffinity(0)), os.sched_getaffinity(0)
    loop = f"import os\nos.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"
    hogs, runs = [], []

    class Watched(Judge):
        def _grade(self, grade_id, source, deadline, again=True):
            runs.append(again)
            if again:  # (each its own session, as a sandbox is: the kernel shares a CPU
                # between sessions first)
                hogs.extend(subprocess.Popen([sys.executable, "-c", loop],
                                             start_new_session=True) for _ in range(HOGS))
            elif busy == "through the first run":
                for hog in hogs:
                    hog.kill()
            return super()._grade(grade_id, source, deadline, again)

    os.sched_setaffinity(0, {cpu})
    try:
        found = judge_in_process(folder, cells, SANDBOX, limits=Limits(
            timeout=3, startup_timeout=1), judge=Watched)
    finally:
        os.sched_setaffinity(0, saved)
        for hog in hogs:
            hog.kill()
            hog.wait()
    [(passed, detail)] = found.values()
    assert runs == [True, False], runs
    if busy == "through the first run":
        assert (passed, detail) == (True, ""), detail
    else:
        assert not passed and detail.startswith(f"{BUSY} (its runner waited for a CPU half "
                                                "its time or more, twice"), detail


THREADER = """
import threading as _threading, time as _time
import numpy as _np
_reference_stats = layer_norm_stats


def _spin():  # (NumPy's sums let go of the GIL: the threads compete for the CPU)
    a = _np.ones(1 << 22)
    while True:
        a.sum()


def layer_norm_stats(x, normalized_shape, eps=1e-5):  # its own threads, taking its CPU
    for _ in range(4):
        _threading.Thread(target=_spin, daemon=True).start()
    end = _time.monotonic() + 60
    while _time.monotonic() < end:
        _np.ones(1 << 20).sum()
    return _reference_stats(x, normalized_shape, eps)
"""


def test_a_check_that_takes_its_own_cpu_is_over_its_limit_not_busy(tmp_path):
    """Issue 62's busy machine is not the submission's to claim: threads of its own,
    pinned with it to one CPU, make its runner wait for a CPU, but they use that CPU: over
    the limit, failed, never "needs regrading". (A process of its own it cannot start.)"""
    folder = submission(tmp_path, layer_norm=override("normlib/layer_norm.py", THREADER))
    cells = [(e.grade_id, e.source) for e in exercises() if e.number == "1.1"]
    saved = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(saved)})
    try:
        found = judge_in_process(folder, cells, SANDBOX, limits=Limits(
            timeout=2, startup_timeout=1))
    finally:
        os.sched_setaffinity(0, saved)
    assert list(found.values()) == [(False, "ran over the 2 s limit")], found
