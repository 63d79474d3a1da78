"""nbgrader preprocessors of the course (registered in nbgrader_config.py).

At autograde, no student code runs in nbgrader's process or in a kernel by default: the
judge has graded the submission's normlib files first (tools/verdicts.py, run by the
grading task of tools/grading.py before it runs nbgrader's autograde), and

- Judged writes each check's verdict into its cell's metadata ("judge"), where the
  feedback page shows it (tools/templates/judged) and no output of the notebook can
  stand; the check cells keep their hidden tests folded (FoldHiddenTests);
- JudgedAutoGrades is nbgrader's SaveAutoGrades for the written answers only: a check's
  score is the judge's, which tools/autograde.py writes, and nothing the notebook holds
  (its outputs are the student's, as submitted) can change it.

With `--execute`, GradingExecute runs each notebook first, as before the judge graded
alone: each kernel in the OS sandbox (BoxedKernelManager: bubblewrap, tools/sandbox.py),
started with tools/sandboxed/guard.py (resource limits, an audit hook as a second wall), under the
course's Limits. A cell that runs over the time limit, kills its kernel (sys.exit is an
ordinary error, os._exit or a crash is not) or runs out of memory gets an error output
saying so, and the kernel is restarted for the next cell; a notebook has a time limit of
its own too. Cells tagged `skip-at-grading` (the long experiments, such as Unit 5's
training runs) are replaced by a comment instead of being run, unless they are graded
cells. The outputs are fresh; the scores are the judge's all the same.

HideHiddenTests: feedback without the hidden tests' code. WaitingAnswers: the written
answers no grader has scored yet, marked for the feedback page ("not yet graded").
"""

import json
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
from nbgrader.preprocessors import Execute, NbGraderPreprocessor, SaveAutoGrades
from traitlets import Bool, Unicode

from tools import sandbox
from tools.markers import fold_hidden
from tools.sandboxed.guard import GRADER, cpu_seconds
from tools.settings import Grading

TAG = "skip-at-grading"
SKIPPED = "# (an experiment: not run at grading; run it in the notebook)"
GUARD = Path(__file__).resolve().parent / "sandboxed" / "guard.py"
_EXEC_LINES = "--IPKernelApp.exec_lines="
JUDGE = "The judge:"  # how every verdict begins (tools/verdicts.py)


def font_cache():
    """{path in the sandbox: host file} of matplotlib's font list (built here if missing),
    which a sandboxed kernel reads instead of building its own (2 s per kernel)."""
    import matplotlib
    import matplotlib.font_manager as fm

    name = f"fontlist-v{fm.FontManager.__version__}.json"
    path = Path(matplotlib.get_cachedir()) / name
    return {f"/tmp/{name}": path} if path.is_file() else {}


class BoxedKernelManager(AsyncKernelManager):
    """A grading kernel in the OS sandbox of tools/sandbox.py (bubblewrap: its own PID,
    network and user namespaces, no processes, nothing of the course): its working folder
    is a private copy of the notebook's folder, and it talks to nbgrader over IPC sockets
    on a file system of its own (sandbox.SOCKETS_MB), which nbgrader's end reaches through
    /proc (with no network, TCP on the host's loopback is out of its reach). Killing it (a
    restart, a shutdown) kills bubblewrap, and with it every process of the sandbox."""

    memory_mb = 4096  # (GradingExecute's, set as it makes this manager)
    reached = None  # the kernel's sockets' path, as nbgrader's end reaches them (sandbox.reach)

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.sockets = tempfile.mkdtemp(prefix="kernel-")  # (short: a socket path < 108)
        self.transport = "ipc"
        self.ip = os.path.join(self.sockets, "ipc")  # the kernel's, in its connection file
        self.connection_file = os.path.join(self.sockets, sandbox.CONNECTION)

    async def _async_launch_kernel(self, kernel_cmd, **kw):
        folder = kw.pop("cwd")  # the notebook's folder, its path inside the sandbox too
        # JPY_PARENT_PID=1: the kernel's parent in its PID namespace, which it must not poll
        env = {**sandbox.thread_env(), "JPY_PARENT_PID": 1}
        self.reached = None
        command, fd = sandbox.command(folder, kernel_cmd[1:], env, self.memory_mb, inside=folder,
                                  sockets=self.sockets, files=font_cache())
        kw["env"] = sandbox.launch_env()  # (and bubblewrap none: sandbox.command)
        try:
            await super()._async_launch_kernel(command, **kw,
                                               pass_fds=() if fd is None else (fd,))
        finally:
            if fd is not None:
                os.close(fd)
        # the kernel's sockets are on its own file system: nbgrader's end reaches them there
        self.reached = os.path.join(sandbox.reach(self.provisioner.pid, self.sockets), "ipc")

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
        script, source = (f"{GRADER}/tools/sandboxed/{GUARD.name}", sandbox.SOURCE) \
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


class Judged(NbGraderPreprocessor):
    """Each check cell's verdict, from the judge's file (tools/grading.py writes it before
    nbgrader runs: {assignment: {student: {grade_id: [passed, text]}}}), into the
    cell's metadata ("judge"), and that key out of every other cell (a submission's
    notebook may carry one). The feedback page shows it (tools/templates/judged)."""

    verdicts = Unicode("", help="The judge's verdicts (a JSON file)").tag(config=True)

    def preprocess(self, nb, resources):
        found = json.loads(Path(self.verdicts).read_text()) if self.verdicts else {}
        info = resources["nbgrader"]
        self._found = found.get(info["assignment"], {}).get(info["student"], {})
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, index):
        cell.metadata.pop("judge", None)
        if is_check(cell):
            passed, text = self._found.get(cell.metadata.nbgrader.grade_id,
                                           (False, f"{JUDGE} no verdict (not graded)"))
            cell.metadata["judge"] = {"passed": bool(passed), "verdict": text}
        return cell, resources


class JudgedAutoGrades(SaveAutoGrades):
    """nbgrader's SaveAutoGrades for every graded cell but the checks, whose score is the
    judge's (written by tools/autograde.py, never read from the notebook's outputs)."""

    def _add_score(self, cell, resources):
        if not is_check(cell):
            super()._add_score(cell, resources)


def is_check(cell):
    """Whether a notebook cell is a check (nbgrader's autograder tests)."""
    return cell.cell_type == "code" and bool(cell.metadata.get("nbgrader", {}).get("grade"))


class FoldHiddenTests(NbGraderPreprocessor):
    """At autograde, before the notebook runs: in every check cell (as nbgrader restored
    it, hidden tests included) the hidden-test block becomes one comment line. The
    student's kernel runs the visible checks alone, so the hidden tests never exist in a
    process that runs student code (no `In`, frame, profiler or /proc read can show them);
    the judge runs them all (tools/verdicts.py, before nbgrader), and its score is the grade."""

    def preprocess_cell(self, cell, resources, index):
        if is_check(cell):
            cell.source = fold_hidden(cell.source)
        return cell, resources


class HideHiddenTests(FoldHiddenTests):
    """At generate_feedback, in every check cell: the hidden-test block folded (as it ran
    at autograde), and an error keeps its type and message but loses its traceback (whose
    context lines would quote the check). The student still reads which check failed and
    why: the checks' messages name the case (shape, dtype, arguments) and the difference,
    and the judge's verdict under each check (put in its metadata by Judged at autograde,
    shown by tools/templates/judged) says whether the hidden tests passed."""

    def preprocess_cell(self, cell, resources, index):
        cell, resources = super().preprocess_cell(cell, resources, index)
        if is_check(cell):
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    output.traceback = [f"{output.ename}: {output.evalue}"]
        return cell, resources


class WaitingAnswers(NbGraderPreprocessor):
    """At generate_feedback: each written answer that waits for a grader (no manual score,
    nbgrader's needs_manual_grade) is marked `waiting` in its nbgrader metadata, which the
    feedback page (tools/templates/judged) shows as "not yet graded" rather than 0."""

    def preprocess(self, nb, resources):
        from nbgrader.api import Gradebook

        info = resources["nbgrader"]
        with Gradebook(info["db_url"]) as gb:
            self._waiting = {
                g.name for g in gb.find_submission_notebook(
                    info["notebook"], info["assignment"], info["student"]).grades
                if g.manual_score is None and g.needs_manual_grade}
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, index):
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") and meta.get("grade"):
            meta.pop("waiting", None)
            if meta.get("grade_id") in self._waiting:
                meta["waiting"] = True
        return cell, resources
