"""tools/worker/execute.py on its own (autograde --execute): a grading kernel in the OS sandbox (BoxedKernelManager), the
notebook's time limit, the outputs bounded as the worker receives them, and the check cells
run without their hidden tests.

One notebook is run by GradingExecute as nbgrader runs it at autograde. Its cells report
what the kernel sees, then spend the notebook's time limit: the cells after it are not
run, and say so.
"""

import json
import os
import tempfile
import time

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook
from traitlets.config import Config

from tests.conftest import processes_naming
from tools.course.markers import BEGIN_HIDDEN, END_HIDDEN
from tools.sandbox import bubblewrap
from tools.sandboxed.guard import cpu_seconds
from tools.sandboxed.limits import Limits
from tools.worker.execute import GradingExecute
from tools.worker.judged import FoldHiddenTests

PROBE = r"""
import json, os, resource, socket
found = {"pid": os.getpid(), "cwd": os.getcwd(), "files": sorted(os.listdir(".")),
         "cpu": resource.getrlimit(resource.RLIMIT_CPU)[0]}
open("written.txt", "w").write("x")
found["processes"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
found["host's /tmp"] = os.path.exists(SECRET) or os.path.exists(os.path.dirname(SECRET))
try:
    socket.create_connection(("127.0.0.1", int(PORT)), 2)
    found["network"] = "reached"
except OSError as error:
    found["network"] = type(error).__name__
import ctypes
try:
    found["fork"] = ctypes.CDLL(None).fork()  # past the audit hook: seccomp's -1
except Exception as error:
    found["fork"] = type(error).__name__
# its sockets' folder: Python may not write there, and what native code writes stays on
# the folder's own file system, of 1 MiB
from ipykernel.connect import get_connection_file
sockets = os.path.dirname(get_connection_file())
try:
    open(os.path.join(sockets, "python.txt"), "w")
    found["write beside the sockets"] = "allowed"
except OSError as error:
    found["write beside the sockets"] = type(error).__name__
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.open(os.path.join(sockets, "native.txt").encode(), os.O_CREAT | os.O_WRONLY, 0o644)
block, written = b"x" * 65536, 0
while written < 4 << 20 and libc.write(fd, block, len(block)) == len(block):
    written += len(block)
found["native write"] = written
print(json.dumps(found))
"""
SOCKETS = "import os\nfrom ipykernel.connect import get_connection_file\n" \
    "print(sorted(os.listdir(os.path.dirname(get_connection_file()))))"


def run(tmp_path, cells, **limits):
    return run_notebook(tmp_path, cells, **limits).cells


def run_notebook(tmp_path, cells, **limits):
    notebook = new_notebook(cells=[new_code_cell(c) for c in cells])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}
    execute = GradingExecute(config=Config({"Grading": limits}), enabled=True,
                             sandboxed=bubblewrap.bwrap() is not None)
    out, _ = execute.preprocess(notebook, {"metadata": {"path": str(tmp_path)}})
    return out


@pytest.mark.skipif(bubblewrap.bwrap() is None, reason="bubblewrap is not installed: "
                    "apt-get install bubblewrap (make test installs it)")
def test_a_grading_kernel_runs_in_the_sandbox(tmp_path):
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    (tmp_path / "mine.txt").write_text("the submission's")
    secret = tempfile.mkdtemp(prefix="host-")  # (in the host's /tmp, as a kernel's sockets)
    probe = PROBE.replace("PORT", str(server.getsockname()[1])).replace(
        "SECRET", repr(os.path.join(secret, "secret")))
    try:
        cells = run(tmp_path, [probe, SOCKETS, "import os\nos._exit(0)", "print('restarted')"])
    finally:
        server.close()
        os.rmdir(secret)
    found = json.loads(cells[0].outputs[0].text)
    # its own PID namespace (bubblewrap's init and the kernel), the notebook's path as
    # its working folder, holding a private copy of the submission; its own /tmp
    assert found["processes"] == [1, 2] and found["pid"] == 2
    assert found["cwd"] == str(tmp_path) and found["files"] == ["mine.txt"]
    assert not (tmp_path / "written.txt").exists()
    assert found["host's /tmp"] is False
    assert found["network"] != "reached" and found["fork"] == -1
    assert found["cpu"] == cpu_seconds(Limits().notebook_timeout)
    assert found["write beside the sockets"] == "PermissionError"
    assert 0 < found["native write"] <= 1 << 20  # (native code passes the audit hook, but)
    assert cells[1].outputs[0].text == str(["ipc-1", "ipc-2", "ipc-3", "ipc-4", "ipc-5",
                                            "kernel.json", "native.txt"]) + "\n"
    # the kernel that died was restarted, in a sandbox again
    assert [o.ename for o in cells[2].outputs] == ["DeadKernelError"]
    assert cells[3].outputs[0].text == "restarted\n"
    # nothing of it is left: no process names its folder
    time.sleep(0.2)
    assert processes_naming(str(tmp_path)) == []


def test_a_notebook_has_a_time_limit_of_its_own(tmp_path):
    start = time.monotonic()
    cells = run(tmp_path, ["import time\ntime.sleep(10)"] * 2 + ["print('ran')"],
                timeout=30, notebook_timeout=3)
    errors = [[o.ename for o in c.outputs if o.output_type == "error"] for c in cells]
    # the first cell is stopped at the notebook's 3 s (with its own 30 s, its 10 s sleep
    # would end without an error)
    assert errors == [["CellTimeoutError"], ["NotebookTimeoutError"],
                      ["NotebookTimeoutError"]], errors
    assert "the notebook's 3 s limit" in cells[0].outputs[-1].evalue
    assert all("not run" in c.outputs[-1].evalue for c in cells[1:])
    assert time.monotonic() - start < 30


KiB = 1 << 10
BOUNDS = {"output_bytes": 64 * KiB, "cell_output_bytes": 128 * KiB,
          "notebook_output_bytes": 256 * KiB}
HONEST = ["print('honest')",
          "from IPython.display import HTML, display\ndisplay(HTML('<b>' + 'h' * 20000 + '</b>'))"]
FLOOD = ["for i in range(16 * KiB):\n    print('x' * 1023)\n"  # 16 MiB, a line at a time
         "import sys\nsys.stderr.write('y' * (8 << 20))"] * 2 + [  # and 8 MiB in one write
    "print('late')",  # past the notebook's bound: dropped
    # a message past the worker's bound, sent around the kernel's chunking of its streams
    "get_ipython().display_pub.publish({'text/plain': 'w' * (8 << 20)})"]


def resident(reset=False):
    """(peak, now) of this process's resident memory, bytes (/proc/self/status: VmHWM,
    VmRSS); reset: the peak reset to now first (/proc/self/clear_refs)."""
    import re

    if reset:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    status = open("/proc/self/status").read()
    return tuple(int(re.search(rf"{key}:\s+(\d+) kB", status)[1]) << 10
                 for key in ("VmHWM", "VmRSS"))


def test_outputs_are_bounded_as_the_worker_receives_them(tmp_path):
    """Two cells printing 24 MiB each: the first keeps its cell's bound of outputs (each
    stream at the output's bound), the second what the notebook's bound leaves, the one
    after them nothing, each with a note saying what was dropped and why; a message past
    the worker's bound is refused as it arrives, said so. The honest outputs are whole.
    The notebook stores the bound and the notes, and the worker's memory grows by no more
    than the bounds allow: in Python (tracemalloc's peak, against an honest run of the
    honest cells), the notebook's outputs and a few copies of one message (its frame, its
    decoded text, the output made of it, its measure: six at most); resident (its peak,
    /proc/self/status), zmq's queue too (before the bounds: 88 MiB and 76 MiB)."""
    import tracemalloc

    from tools.worker.execute import QUEUED, max_message, stored_size

    tracemalloc.start()
    try:
        honest = run_notebook(tmp_path, HONEST, **BOUNDS)
        quiet = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        before = resident(reset=True)
        out = run_notebook(tmp_path, HONEST + [f"KiB = {KiB}\n" + c for c in FLOOD], **BOUNDS)
        grown = resident()[0] - before[1]
        loud = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    cells, limits = out.cells, Limits(**BOUNDS)
    assert [c.outputs for c in cells[:2]] == [c.outputs for c in honest.cells]
    assert cells[0].outputs[0].text == "honest\n" and len(cells[1].outputs) == 1
    notes = [[o for o in c.outputs if o.output_type == "error" and
              o.ename in ("OutputDropped", "OutputLost")] for c in cells]
    kept = [sum(stored_size(o) for o in c.outputs if o not in n) for c, n in zip(cells, notes)]
    streams = [{name: sum(stored_size(o) for o in c.outputs if o.get("name") == name and
                          o not in n) for name in ("stdout", "stderr")}
               for c, n in zip(cells, notes)]
    # the first flood: each stream at the output's bound, both the cell's
    assert cells[2].outputs[0].text.startswith("x" * 1023 + "\n")
    assert all(0.95 * limits.output_bytes < size <= limits.output_bytes
               for size in streams[2].values()), streams[2]
    assert 0.95 * limits.cell_output_bytes < kept[2] <= limits.cell_output_bytes
    assert len(notes[2]) == 1 and "of this cell's output dropped as it arrived: grading " \
        "keeps 0.1 MiB per output, 0.1 MiB per cell, 0.2 MiB per notebook" in notes[2][0].evalue
    # the second: what the notebook's bound leaves; the cell after them: nothing, said so
    assert 0.95 * limits.notebook_output_bytes < sum(kept[:4]) <= limits.notebook_output_bytes
    assert kept[4] == 0 and len(notes[4]) == 1 and len(cells[4].outputs) == 1
    # the message past the worker's bound: refused as it arrived, and said so
    assert kept[5] == 0 and [n.evalue for n in notes[5]] == [
        "this cell's outputs did not all arrive: a message over "
        f"{max_message(limits) / (1 << 20):.1f} MiB is refused as it arrives, and the "
        "kernel's messages after it are lost"]
    # what is stored: the bound and the notes; the worker's memory: the bounds' worth
    stored = len(nbformat.writes(out).encode())
    for c in out.cells:
        c.outputs = []
    said = sum(stored_size(n) for ns in notes for n in ns)
    assert stored - len(nbformat.writes(out).encode()) <= sum(kept) + said + KiB
    assert loud - quiet < limits.notebook_output_bytes + 6 * max_message(limits), \
        (loud - quiet) / (1 << 20)
    # resident: what the worker keeps, zmq's queue of messages not yet read (QUEUED at
    # most, each within the worker's bound), the copies of the one being read, and a
    # kernel client's own (its threads, zmq's buffers: 4 MiB)
    held = limits.notebook_output_bytes + (QUEUED + 6) * max_message(limits) + (4 << 20)
    assert grown < held, (grown / (1 << 20), held / (1 << 20))


def test_check_cells_run_without_their_hidden_tests():
    check = new_code_cell(f"assert True\n{BEGIN_HIDDEN}\nassert secret\n{END_HIDDEN}\n",
                          metadata={"nbgrader": {"grade": True, "grade_id": "ex1_1"}})
    other = new_code_cell(f"{BEGIN_HIDDEN}\nkept\n{END_HIDDEN}\n")  # not a check: as it is
    notebook = nbformat.v4.new_notebook(cells=[check, other])
    out, _ = FoldHiddenTests().preprocess(notebook, {})
    assert out.cells[0].source == "assert True\n# ... 1 lines of hidden tests, not shown ..."
    assert out.cells[1].source == other.source


def test_the_course_config_replaces_nbgraders_steps_by_class():
    """nbgrader_config.py: autograde keeps outputs (no ClearOutput), folds the hidden tests,
    runs the notebooks only through GradingExecute, and records the judge's verdicts
    (Judged) before its own SaveAutoGrades (JudgedAutoGrades); nbgrader's other steps stay,
    in their order."""
    from nbgrader.converters import Autograde
    from nbgrader.preprocessors import ClearOutput, Execute, SaveAutoGrades
    from traitlets.config.loader import PyFileConfigLoader

    from tests.conftest import REPO
    from tools.worker.judged import Judged, JudgedAutoGrades

    config = PyFileConfigLoader("nbgrader_config.py", path=str(REPO)).load_config()
    sanitize = config.Autograde.sanitize_preprocessors
    autograde = config.Autograde.autograde_preprocessors
    theirs = Autograde.class_traits()
    assert sanitize == [p for p in theirs["sanitize_preprocessors"].default()
                        if p is not ClearOutput] + [FoldHiddenTests]
    replaced = {Execute: [GradingExecute], SaveAutoGrades: [Judged, JudgedAutoGrades]}
    assert autograde == [q for p in theirs["autograde_preprocessors"].default()
                         for q in replaced.get(p, [p])]
    assert ClearOutput not in sanitize and not {Execute, SaveAutoGrades} & set(autograde)
    assert len(autograde) == len(theirs["autograde_preprocessors"].default()) + 1


def test_a_step_nbgrader_no_longer_runs_stops_the_config_with_its_name(tmp_path, monkeypatch):
    from nbgrader.converters import Autograde
    from nbgrader.preprocessors import Execute
    from traitlets.config.loader import PyFileConfigLoader

    from tests.conftest import REPO

    trait = Autograde.class_traits()["autograde_preprocessors"]
    without = [p for p in trait.default() if p is not Execute]
    monkeypatch.setattr(trait, "default", lambda: list(without))
    with pytest.raises(RuntimeError, match="Autograde no longer runs Execute"):
        PyFileConfigLoader("nbgrader_config.py", path=str(REPO)).load_config()
