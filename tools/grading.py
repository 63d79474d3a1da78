"""nbgrader preprocessors of the course (registered in nbgrader_config.py).

GradingExecute: nbgrader's Execute, hardened for a class. Each kernel starts inside
tools/sandbox.py (memory limit, no reads of the course or writes outside the submission's
folder, no processes). A cell that runs over the time limit, kills its kernel (sys.exit is
an ordinary error, os._exit or a crash is not) or runs out of memory gets an error output
saying so, and the kernel is restarted for the next cell: that check scores 0 and the rest
of the notebook is still graded (every check cell imports what it uses). nbgrader alone
would interrupt and hope, and on a dead kernel drop the student's whole submission.
Its settings are the course's grading limits (see LIMITS): the clean re-check
(tools/recheck.py) reads the same ones, through tools.course.grading_limits.

SkipAtGrading: at autograde, cells tagged `skip-at-grading` (the long experiments, such
as Unit 4's training runs) are replaced by a comment instead of being run: the graded
cells import what they use and never depend on them, and running them for every
submission would cost the class minutes. Cells with nbgrader grade or solution metadata
are always run, whatever their tags (a student could tag a check cell to skip it).

HideHiddenTests: feedback without the hidden tests' code (see its docstring).
"""

from pathlib import Path

from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbclient.util import run_sync
from nbformat import NotebookNode
from nbgrader.preprocessors import Execute, NbGraderPreprocessor
from traitlets import Bool, Integer, List, Unicode

from tools.markers import fold_hidden

TAG = "skip-at-grading"
SKIPPED = "# (an experiment: not run at grading; run it in the notebook)"
SANDBOX = Path(__file__).resolve().parent / "sandbox.py"
_EXEC_LINES = "--IPKernelApp.exec_lines="
# The grading limits: GradingExecute's settings that both runs of a submission use (the
# notebook run here, the clean re-check in tools/recheck.py). Their defaults are defined
# below, once; an instructor sets them in the course's nbgrader_config_local.py
# (c.GradingExecute.memory_mb = 8192), and tools.course.grading_limits reads them.
LIMITS = ("timeout", "startup_timeout", "memory_mb", "file_mb", "protected")


class GradingExecute(Execute):
    timeout = Integer(30, help="Seconds a cell (a check, in the clean re-check) may run "
                      "before it is stopped and scored as an error (the checks take a "
                      "second or two)").tag(config=True)
    # startup_timeout (nbclient's, 60 s): for a kernel to start; the clean re-check gives
    # a process's first check that much more than `timeout` (it imports normlib)
    interrupt_on_timeout = Bool(False)  # we restart instead: an interrupt can be caught
    protected = List(Unicode(), help="Folders the student's code may not read (outside "
                     "its own folder): the course directory, solutions/ (the course's "
                     "nbgrader_config.py sets them)").tag(config=True)
    memory_mb = Integer(4096, help="Address space of each grading process (a kernel, a "
                        "clean re-check), MiB").tag(config=True)
    file_mb = Integer(64, help="Largest file a grading process may write, MiB").tag(config=True)
    sandbox = Bool(True, help="Start each kernel in tools/sandbox.py").tag(config=True)

    def preprocess(self, nb, resources=None, km=None):
        if self.sandbox:
            workdir = resources["metadata"]["path"]
            line = (f"__import__('runpy').run_path({str(SANDBOX)!r})['install']"
                    f"({str(workdir)!r}, {list(self.protected)!r}, {self.memory_mb}, "
                    f"{self.file_mb})")
            others = [a for a in self.extra_arguments if not a.startswith(_EXEC_LINES)]
            self.extra_arguments = [*others, _EXEC_LINES + line]
        return super().preprocess(nb, resources, km)

    def preprocess_cell(self, cell, resources, index):
        try:
            cell, resources = super().preprocess_cell(cell, resources, index)
        except (CellTimeoutError, DeadKernelError) as error:
            reason = (f"the cell ran over the {self.timeout} s limit" if
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


class HideHiddenTests(NbGraderPreprocessor):
    """At generate_feedback, in every check cell: the hidden-test block becomes one comment
    line, and an error keeps its type and message but loses its traceback (whose context
    lines would quote the hidden tests). The student still reads which check failed and
    why: the checks' messages name the case (shape, dtype, arguments) and the difference.
    To show the hidden tests, set `c.HideHiddenTests.enabled = False`."""

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code" or not cell.metadata.get("nbgrader", {}).get("grade"):
            return cell, resources
        cell.source = fold_hidden(cell.source)
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                output.traceback = [f"{output.ename}: {output.evalue}"]
        return cell, resources
