"""autograde's `--execute` (registered in nbgrader_config.py): GradingExecute runs each
notebook before nbgrader records it, as before the judge graded alone: each kernel in the
OS sandbox (BoxedKernelManager: bubblewrap, tools/sandbox/bubblewrap.py), started with
tools/sandboxed/guard.py (resource limits, an audit hook as a second wall), under the
course's Limits. A cell that runs over the time limit, kills its kernel (sys.exit is an
ordinary error, os._exit or a crash is not) or runs out of memory gets an error output
saying so, and the kernel is restarted for the next cell; a notebook has a time limit of
its own too. Cells tagged `skip-at-grading` (the long experiments, such as Unit 5's
training runs) are replaced by a comment instead of being run, unless they are graded
cells. The outputs are fresh; the scores are the judge's all the same
(tools/worker/judged.py).
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
from nbgrader.preprocessors import Execute
from traitlets import Bool

from tools.course.settings import Grading
from tools.sandbox import bubblewrap
from tools.sandboxed.guard import GRADER, cpu_seconds

TAG = "skip-at-grading"
SKIPPED = "# (an experiment: not run at grading; run it in the notebook)"
GUARD = Path(__file__).resolve().parents[1] / "sandboxed" / "guard.py"
_EXEC_LINES = "--IPKernelApp.exec_lines="


def font_cache():
    """{path in the sandbox: host file} of matplotlib's font list (built here if missing),
    which a sandboxed kernel reads instead of building its own (2 s per kernel)."""
    import matplotlib
    import matplotlib.font_manager as fm

    name = f"fontlist-v{fm.FontManager.__version__}.json"
    path = Path(matplotlib.get_cachedir()) / name
    return {f"/tmp/{name}": path} if path.is_file() else {}


class BoxedKernelManager(AsyncKernelManager):
    """A grading kernel in the OS sandbox of tools/sandbox/bubblewrap.py (bubblewrap: its own PID,
    network and user namespaces, no processes, nothing of the course): its working folder
    is a private copy of the notebook's folder, and it talks to nbgrader over IPC sockets
    on a file system of its own (bubblewrap.SOCKETS_MB), which nbgrader's end reaches through
    /proc (with no network, TCP on the host's loopback is out of its reach). Killing it (a
    restart, a shutdown) kills bubblewrap, and with it every process of the sandbox."""

    memory_mb = 4096  # (GradingExecute's, set as it makes this manager)
    reached = None  # the kernel's sockets' path, as nbgrader's end reaches them (bubblewrap.reach)

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.sockets = tempfile.mkdtemp(prefix="kernel-")  # (short: a socket path < 108)
        self.transport = "ipc"
        self.ip = os.path.join(self.sockets, "ipc")  # the kernel's, in its connection file
        self.connection_file = os.path.join(self.sockets, bubblewrap.CONNECTION)

    async def _async_launch_kernel(self, kernel_cmd, **kw):
        folder = kw.pop("cwd")  # the notebook's folder, its path inside the sandbox too
        # JPY_PARENT_PID=1: the kernel's parent in its PID namespace, which it must not poll
        env = {**bubblewrap.thread_env(), "JPY_PARENT_PID": 1}
        self.reached = None
        command, fd = bubblewrap.command(folder, kernel_cmd[1:], env, self.memory_mb, inside=folder,
                                  sockets=self.sockets, files=font_cache())
        kw["env"] = bubblewrap.launch_env()  # (and bubblewrap none: bubblewrap.command)
        try:
            await super()._async_launch_kernel(command, **kw,
                                               pass_fds=() if fd is None else (fd,))
        finally:
            if fd is not None:
                os.close(fd)
        # the kernel's sockets are on its own file system: nbgrader's end reaches them there
        self.reached = os.path.join(bubblewrap.reach(self.provisioner.pid, self.sockets), "ipc")

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
    """nbgrader's Execute, sandboxed and limited (see the module's docstring); off unless
    autograde's --execute turns it on (c.GradingExecute.enabled)."""

    enabled = Bool(False).tag(config=True)
    interrupt_on_timeout = Bool(False)  # we restart instead: an interrupt can be caught
    sandboxed = Bool(True, help="Start each kernel in the OS sandbox (BoxedKernelManager: "
                     "bubblewrap); False only where student code may reach all this user "
                     "can").tag(config=True)

    def preprocess(self, nb, resources=None, km=None):
        self.limits = limits = Grading(config=self.config).limits()
        self.startup_timeout = limits.startup_timeout
        self._deadline = None
        if self.sandboxed:
            self.kernel_manager_class = BoxedKernelManager
        workdir = resources["metadata"]["path"]
        script, source = (f"{GRADER}/tools/sandboxed/{GUARD.name}", bubblewrap.SOURCE) \
            if self.sandboxed else (str(GUARD), None)
        # (jupyter_client fills in {connection_file}: the kernel may not write beside it)
        line = (f"__import__('runpy').run_path({script!r})['install']"
                f"({str(workdir)!r}, {list(limits.protected)!r}, {limits.memory_mb}, "
                f"{limits.file_mb}, {source!r}, {cpu_seconds(limits.notebook_timeout)}, "
                "[__import__('os').path.dirname('{connection_file}')])")
        others = [a for a in self.extra_arguments if not a.startswith(_EXEC_LINES)]
        self.extra_arguments = [*others, _EXEC_LINES + line]
        return super().preprocess(nb, resources, km)

    def create_kernel_manager(self):
        km = super().create_kernel_manager()
        if isinstance(km, BoxedKernelManager):
            km.memory_mb = self.limits.memory_mb
        return km

    def _remaining(self):  # of the notebook's time, counted from its first cell
        if self._deadline is None:
            self._deadline = time.monotonic() + self.limits.notebook_timeout
        return self._deadline - time.monotonic()

    def _get_timeout(self, cell):  # the cell's limit, or what is left of the notebook's
        return max(1, min(self.limits.timeout, math.ceil(self._remaining())))

    def preprocess_cell(self, cell, resources, index):
        if skipped(cell):
            cell.source, cell.outputs = SKIPPED, []
            return cell, resources
        if cell.cell_type == "code" and self._remaining() <= 0:
            self._error(cell, "NotebookTimeoutError", f"the notebook ran over its "
                        f"{self.limits.notebook_timeout} s limit: this cell was not run")
            return cell, resources
        try:
            cell, resources = super().preprocess_cell(cell, resources, index)
        except (CellTimeoutError, DeadKernelError) as error:
            reason = ("the cell ran over the notebook's "
                      f"{self.limits.notebook_timeout} s limit" if self._remaining() <= 0
                      else f"the cell ran over the {self.limits.timeout} s limit" if
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


def skipped(cell):
    """Whether --execute skips a cell: a code cell tagged skip-at-grading that is not a
    graded cell (a student could tag a check cell to skip it)."""
    nbgrader = cell.metadata.get("nbgrader", {})
    graded = nbgrader.get("grade") or nbgrader.get("solution") or nbgrader.get("locked")
    return cell.cell_type == "code" and TAG in cell.metadata.get("tags", []) and not graded


