"""nbgrader preprocessors of the course (registered in nbgrader_config.py).

GradingExecute: nbgrader's Execute, hardened for a class. Each kernel runs in the OS
sandbox (BoxedKernelManager: bubblewrap, tools/judge/box.py) and starts with
tools/sandbox.py (resource limits, an audit hook as a second wall). A cell that runs over
the time limit, kills its kernel (sys.exit is an ordinary error, os._exit or a crash is
not) or runs out of memory gets an error output saying so, and the kernel is restarted
for the next cell: the rest of the notebook still runs (every check cell imports what it
uses); a notebook has a time limit of its own too. nbgrader alone would interrupt and
hope, and on a dead kernel drop the student's whole submission. The notebook's scores
decide nothing: the judge's are the grade (tools/recheck.py). Its settings are the
course's grading limits (see LIMITS): the judge reads the same ones, through
tools.course.grading_limits.

SkipAtGrading: at autograde, cells tagged `skip-at-grading` (the long experiments, such
as Unit 4's training runs) are replaced by a comment instead of being run: the graded
cells import what they use and never depend on them, and running them for every
submission would cost the class minutes. Cells with nbgrader grade or solution metadata
are always run, whatever their tags (a student could tag a check cell to skip it).

FoldHiddenTests: at autograde, the check cells run without their hidden tests (the judge
runs them). HideHiddenTests: feedback without the hidden tests' code.
"""

import math
import os
import shutil
import tempfile
import time
from pathlib import Path

from jupyter_client.manager import AsyncKernelManager
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbclient.util import run_sync
from nbformat import NotebookNode
from nbgrader.preprocessors import Execute, NbGraderPreprocessor
from traitlets import Bool, Integer, List, Unicode

from tools.judge import box
from tools.markers import fold_hidden
from tools.sandbox import cpu_seconds

TAG = "skip-at-grading"
SKIPPED = "# (an experiment: not run at grading; run it in the notebook)"
SANDBOX = Path(__file__).resolve().parent / "sandbox.py"
_EXEC_LINES = "--IPKernelApp.exec_lines="
# The grading limits: GradingExecute's settings that both runs of a submission use (the
# notebook run here, the judge's in tools/recheck.py). Their defaults are defined
# below, once; an instructor sets them in the course's nbgrader_config_local.py
# (c.GradingExecute.memory_mb = 8192), and tools.course.grading_limits reads them.
LIMITS = ("timeout", "notebook_timeout", "startup_timeout", "memory_mb", "file_mb",
          "protected")


def font_cache():
    """{path in the sandbox: host file} of matplotlib's font list (built here if missing),
    which a sandboxed kernel reads instead of building its own (2 s per kernel)."""
    import matplotlib
    import matplotlib.font_manager as fm

    name = f"fontlist-v{fm.FontManager.__version__}.json"
    path = Path(matplotlib.get_cachedir()) / name
    return {f"/tmp/{name}": path} if path.is_file() else {}


class BoxedKernelManager(AsyncKernelManager):
    """A grading kernel in the OS sandbox of tools/judge/box.py (bubblewrap: its own PID,
    network and user namespaces, no processes, nothing of the course): its working folder
    is a private copy of the notebook's folder, and it talks to nbgrader over IPC sockets
    on a file system of its own (box.SOCKETS_MB), which nbgrader's end reaches through
    /proc (with no network, TCP on the host's loopback is out of its reach). Killing it (a
    restart, a shutdown) kills bubblewrap, and with it every process of the sandbox."""

    memory_mb = 4096  # (GradingExecute's, set as it makes this manager)
    reached = None  # the kernel's sockets' path, as nbgrader's end reaches them (box.reach)

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.sockets = tempfile.mkdtemp(prefix="kernel-")  # (short: a socket path < 108)
        self.transport = "ipc"
        self.ip = os.path.join(self.sockets, "ipc")  # the kernel's, in its connection file
        self.connection_file = os.path.join(self.sockets, box.CONNECTION)

    async def _async_launch_kernel(self, kernel_cmd, **kw):
        folder = kw.pop("cwd")  # the notebook's folder, its path inside the sandbox too
        # JPY_PARENT_PID=1: the kernel's parent in its PID namespace, which it must not poll
        env = {**box.thread_env(), "JPY_PARENT_PID": 1}
        self.reached = None
        command, fd = box.command(folder, kernel_cmd[1:], env, self.memory_mb, inside=folder,
                                  sockets=self.sockets, files=font_cache())
        try:
            await super()._async_launch_kernel(command, **kw,
                                               pass_fds=() if fd is None else (fd,))
        finally:
            if fd is not None:
                os.close(fd)
        # the kernel's sockets are on its own file system: nbgrader's end reaches them there
        self.reached = os.path.join(box.reach(self.provisioner.pid, self.sockets), "ipc")

    def client(self, **kwargs):  # (the kernel's connection file keeps its own path)
        client = super().client(**kwargs)
        client.ip = self.reached or self.ip
        return client

    def _make_url(self, channel):  # (for the manager's own sockets)
        return super()._make_url(channel).replace(self.ip, self.reached or self.ip, 1)

    async def _async_cleanup_resources(self, restart=False):
        await super()._async_cleanup_resources(restart)
        if not restart:
            shutil.rmtree(self.sockets, ignore_errors=True)


class GradingExecute(Execute):
    timeout = Integer(30, help="Seconds a cell (a check, in the judge) may run "
                      "before it is stopped and scored as an error (the checks take a "
                      "second or two)").tag(config=True)
    notebook_timeout = Integer(300, help="Seconds a whole notebook may run (its cells "
                               "together; the judge's run of a whole submission, too): past "
                               "it, the cells left are not run, and say so").tag(config=True)
    # startup_timeout (nbclient's, 60 s): for a kernel to start; the judge gives a
    # worker's first check that much more than `timeout` (it imports normlib)
    interrupt_on_timeout = Bool(False)  # we restart instead: an interrupt can be caught
    protected = List(Unicode(), help="Folders the student's code may not read (outside "
                     "its own folder): the course directory, solutions/ (the course's "
                     "nbgrader_config.py sets them)").tag(config=True)
    memory_mb = Integer(4096, help="Address space of each grading process (a kernel, a "
                        "judge's worker), MiB").tag(config=True)
    file_mb = Integer(64, help="Largest file a grading process may write, MiB").tag(config=True)
    sandbox = Bool(True, help="Start each kernel in tools/sandbox.py (always, with "
                   "box: it fills the sandbox's working folder)").tag(config=True)
    box = Bool(True, help="Start each kernel in the OS sandbox (BoxedKernelManager: "
               "bubblewrap); False only where student code may reach all this user "
               "can").tag(config=True)

    def preprocess(self, nb, resources=None, km=None):
        self._deadline = None
        if self.box:
            self.kernel_manager_class = BoxedKernelManager
        if self.sandbox or self.box:
            workdir = resources["metadata"]["path"]
            script, source = (f"/opt/grader/tools/{SANDBOX.name}", box.SOURCE) if self.box \
                else (str(SANDBOX), None)
            # (jupyter_client fills in {connection_file}: the kernel may not write beside it)
            line = (f"__import__('runpy').run_path({script!r})['install']"
                    f"({str(workdir)!r}, {list(self.protected)!r}, {self.memory_mb}, "
                    f"{self.file_mb}, {source!r}, {cpu_seconds(self.notebook_timeout)}, "
                    "[__import__('os').path.dirname('{connection_file}')])")
            others = [a for a in self.extra_arguments if not a.startswith(_EXEC_LINES)]
            self.extra_arguments = [*others, _EXEC_LINES + line]
        return super().preprocess(nb, resources, km)

    def create_kernel_manager(self):
        km = super().create_kernel_manager()
        if isinstance(km, BoxedKernelManager):
            km.memory_mb = self.memory_mb
        return km

    def _remaining(self):  # of the notebook's time, counted from its first cell
        if self._deadline is None:
            self._deadline = time.monotonic() + self.notebook_timeout
        return self._deadline - time.monotonic()

    def _get_timeout(self, cell):  # the cell's limit, or what is left of the notebook's
        return max(1, min(self.timeout, math.ceil(self._remaining())))

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code" and self._remaining() <= 0:
            self._error(cell, "NotebookTimeoutError", f"the notebook ran over its "
                        f"{self.notebook_timeout} s limit: this cell was not run")
            return cell, resources
        try:
            cell, resources = super().preprocess_cell(cell, resources, index)
        except (CellTimeoutError, DeadKernelError) as error:
            reason = ("the cell ran over the notebook's "
                      f"{self.notebook_timeout} s limit" if self._remaining() <= 0 else
                      f"the cell ran over the {self.timeout} s limit" if
                      isinstance(error, CellTimeoutError) else
                      "the kernel died while running this cell (os._exit, a crash, a kill)")
            self._error(cell, type(error).__name__, f"{reason}; restarted for the next cells")
            self._restart()
            return cell, self.resources
        errors = [o.ename for o in cell.get("outputs", []) if o.output_type == "error"]
        if "MemoryError" in errors:
            self._restart()  # free whatever the failed cell still holds
        return cell, resources

    @staticmethod
    def _error(cell, ename, evalue):
        cell.outputs.append(NotebookNode(output_type="error", ename=ename, evalue=evalue,
                                         traceback=[f"{ename}: {evalue}"]))

    def _restart(self):
        self.kc.stop_channels()
        run_sync(self.km.restart_kernel)(now=True)
        self.start_new_kernel_client()


class SkipAtGrading(NbGraderPreprocessor):  # (nbconvert's base class is disabled by default)
    def preprocess_cell(self, cell, resources, index):
        nbgrader = cell.metadata.get("nbgrader", {})
        graded = nbgrader.get("grade") or nbgrader.get("solution") or nbgrader.get("locked")
        if cell.cell_type == "code" and TAG in cell.metadata.get("tags", []) and not graded:
            cell.source = SKIPPED
            cell.outputs = []
        return cell, resources


def is_check(cell):
    """Whether a notebook cell is a check (nbgrader's autograder tests)."""
    return cell.cell_type == "code" and bool(cell.metadata.get("nbgrader", {}).get("grade"))


class FoldHiddenTests(NbGraderPreprocessor):
    """At autograde, before the notebook runs: in every check cell (as nbgrader restored
    it, hidden tests included) the hidden-test block becomes one comment line. The
    student's kernel runs the visible checks alone, so the hidden tests never exist in a
    process that runs student code (no `In`, frame, profiler or /proc read can show them);
    the judge runs them all (tools/recheck.py), and its score is the grade."""

    def preprocess_cell(self, cell, resources, index):
        if is_check(cell):
            cell.source = fold_hidden(cell.source)
        return cell, resources


class HideHiddenTests(FoldHiddenTests):
    """At generate_feedback, in every check cell: the hidden-test block folded (as it ran
    at autograde), and an error keeps its type and message but loses its traceback (whose
    context lines would quote the check). The student still reads which check failed and
    why: the checks' messages name the case (shape, dtype, arguments) and the difference,
    and the judge's verdict, written under each check (tools/recheck.py), says whether the
    hidden tests passed."""

    def preprocess_cell(self, cell, resources, index):
        cell, resources = super().preprocess_cell(cell, resources, index)
        if is_check(cell):
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    output.traceback = [f"{output.ename}: {output.evalue}"]
        return cell, resources
