"""autograde's `--execute` (registered in nbgrader_config.py): GradingExecute runs each
notebook before nbgrader records it, each kernel in the OS sandbox (BoxedKernelManager,
tools/sandbox/bubblewrap.py) and started with tools/sandboxed/guard.py, under the course's
Limits. A cell that runs over its time limit, kills its kernel or runs out of memory gets
an error output saying so, and the kernel restarts for the next cell; a notebook has a time
limit too. Cells tagged `skip-at-grading` are replaced by a comment unless graded. The
scores are the judge's all the same (tools/worker/judged.py).

Outputs are bounded where this process (the grading worker, outside the sandbox) receives
them, never in the kernel, which runs student code: each socket refuses a message over
max_message (ZMQ_MAXMSGSIZE, BoundedKernelClient), and GradingExecute keeps at most
Limits.output_bytes an output, cell_output_bytes a cell and notebook_output_bytes a
notebook, dropping the rest as it arrives; the cell then ends with an error output
(OutputDropped; OutputLost where a socket refused a message). docs/security.md, section 4.
"""

import json
import math
import os
import shutil
import tempfile
import time
from pathlib import Path

import nbformat
import zmq
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.manager import AsyncKernelManager
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbclient.util import run_sync
from nbformat import NotebookNode
from nbformat.v4 import output_from_msg
from nbformat.v4.rwbase import split_lines
from nbgrader.preprocessors import Execute
from traitlets import Bool, Integer

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


QUEUED = 8  # messages a socket to a kernel holds before they are read (zmq's RCVHWM: its
# default, 1,000, held 100 MiB of a printing loop waiting here); past it zmq reads no more
# and the kernel's end drops what it cannot send (a cell that floods loses its last
# messages: OutputLost)


def max_message(limits):
    """The largest message (one zmq frame) the worker takes from a kernel: an output at
    its bound as JSON writes it (at most 6 bytes a character: a control character's
    \\u00XX), and room for the message's own fields."""
    return 6 * limits.output_bytes + (64 << 10)


class BoundedKernelClient(AsyncKernelClient):
    """A kernel client whose sockets refuse a message over max_message bytes as it arrives
    (ZMQ_MAXMSGSIZE, set on its own zmq context before any socket is made): zmq drops
    the connection, reading none of it past its size, and makes it again."""

    max_message = Integer(0, help="The largest message taken, bytes (0: any)")

    def _context_default(self):
        context = super()._context_default()
        if self.max_message:
            context.setsockopt(zmq.MAXMSGSIZE, self.max_message)
            context.setsockopt(zmq.RCVHWM, QUEUED)
        return context


class LimitedKernelManager(AsyncKernelManager):
    """A kernel manager whose clients are BoundedKernelClient, refusing messages over
    max_message (GradingExecute sets it as it makes this manager)."""

    max_message = 0

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.client_factory = BoundedKernelClient

    def client(self, **kwargs):
        return super().client(**{"max_message": self.max_message, **kwargs})


class BoxedKernelManager(LimitedKernelManager):
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
    raise_on_iopub_timeout = Bool(False)  # (nbgrader's True): a cell whose last messages
    # did not arrive (a message refused for its size) is said so, its kernel kept
    sandboxed = Bool(True, help="Start each kernel in the OS sandbox (BoxedKernelManager: "
                     "bubblewrap); False only where student code may reach all this user "
                     "can").tag(config=True)

    def preprocess(self, nb, resources=None, km=None):
        self.limits = limits = Grading(config=self.config).limits()
        self._sizes, self._notebook_bytes = {}, 0  # {id(output): its bytes} of those kept
        self.startup_timeout = limits.startup_timeout
        self._deadline = None
        self.kernel_manager_class = BoxedKernelManager if self.sandboxed else \
            LimitedKernelManager
        workdir = resources["metadata"]["path"]
        script, source = (f"{GRADER}/tools/sandboxed/{GUARD.name}", bubblewrap.SOURCE) \
            if self.sandboxed else (str(GUARD), None)
        # (jupyter_client fills in {connection_file}: the kernel may not write beside it)
        line = (f"__import__('runpy').run_path({script!r})['install']"
                f"({str(workdir)!r}, {list(limits.protected)!r}, {limits.memory_mb}, "
                f"{limits.file_mb}, {source!r}, {cpu_seconds(limits.notebook_timeout)}, "
                "[__import__('os').path.dirname('{connection_file}')], "
                f"chunk={limits.output_bytes})")
        others = [a for a in self.extra_arguments if not a.startswith(_EXEC_LINES)]
        self.extra_arguments = [*others, _EXEC_LINES + line]
        return super().preprocess(nb, resources, km)

    def create_kernel_manager(self):
        km = super().create_kernel_manager()
        if isinstance(km, BoxedKernelManager):
            km.memory_mb = self.limits.memory_mb
        km.max_message = max_message(self.limits)
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
        self._cell_bytes, self._stream_bytes, self._dropped = 0, {}, Dropped()
        self._idle = False  # whether the kernel's last message of the cell arrived
        launched = self.code_cells_executed  # (nbclient counts the cells it sends)
        cell, resources = self._run_cell(cell, resources, index)
        run = self.code_cells_executed > launched
        if self._dropped.bytes or self._dropped.updates:
            self._error(cell, "OutputDropped", self._dropped.say(self.limits))
        if run and not self._idle and not any(o.output_type == "error" and o.ename in (
                "CellTimeoutError", "DeadKernelError", "NotebookTimeoutError")
                for o in cell.outputs):
            self._error(cell, "OutputLost", "this cell's outputs did not all arrive: a "
                        f"message over {_megabytes(max_message(self.limits))} is refused as it "
                        "arrives, and the kernel's messages after it are lost")
        return cell, resources

    def _run_cell(self, cell, resources, index):
        """preprocess_cell's run of one cell (nbclient's), its time limits and restarts."""
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

    # --- the outputs, bounded as they arrive (see the module's docstring) ---------------

    def process_message(self, msg, cell, cell_index):
        """nbclient's, but a widget's comm message is dropped (no widget is kept), and the
        cell's last message (the kernel idle) is noted."""
        kind, content = msg.get("msg_type"), msg.get("content")
        if not isinstance(kind, str) or not isinstance(content, dict):
            return None  # (a message no kernel of ipykernel's sends)
        if kind == "status" and content.get("execution_state") == "idle":
            self._idle = True
        if kind.startswith("comm"):
            return None
        return super().process_message(msg, cell, cell_index)

    def output(self, outs, msg, display_id, cell_index):
        """An output message into the cell's outputs outs, within the bounds: a stream's
        text cut to what fits, any other output dropped whole if it does not fit; what
        is dropped is counted for the cell's note."""
        if self.clear_before_next_output:  # (clear_output(wait=True) before)
            self._clear(outs, cell_index)
            self.clear_before_next_output = False
        try:
            out = output_from_msg(msg)
            size = stored_size(out)
        except (ValueError, KeyError, TypeError, AttributeError):
            return None  # (not an output nbformat can store: nothing to keep)
        stream = out.get("name") if out.output_type == "stream" else None
        room = self._room(stream)
        kept, kept_size = (cut_stream(out, room) if stream and size > room else (out, size))
        if kept is None or kept_size > room:
            self._dropped.bytes += size
            return None
        if kept is not out:
            self._dropped.bytes += size - kept_size
        if display_id:  # (nbclient's: where a later update of this display goes)
            self._display_id_map.setdefault(display_id, {}).setdefault(
                cell_index, []).append(len(outs))
        outs.append(kept)
        self._sizes[id(kept)] = kept_size
        self._cell_bytes += kept_size
        self._notebook_bytes += kept_size
        if stream:
            self._stream_bytes[stream] = self._stream_bytes.get(stream, 0) + kept_size
        return kept

    def _room(self, stream=None):
        """Bytes an output may still take: the least of what is left of the output's
        bound (a stream's: what its earlier pieces in the cell left), the cell's and the
        notebook's."""
        limits = self.limits
        return min(limits.output_bytes - self._stream_bytes.get(stream, 0),
                   limits.cell_output_bytes - self._cell_bytes,
                   limits.notebook_output_bytes - self._notebook_bytes)

    def clear_output(self, outs, msg, cell_index):
        """nbclient's (no widget hooks here): what it clears is given back to the bounds."""
        if (msg.get("content") or {}).get("wait"):
            self.clear_before_next_output = True
        else:
            self._clear(outs, cell_index)

    def _clear(self, outs, cell_index):
        for out in outs:
            size = self._sizes.pop(id(out), 0)
            self._cell_bytes -= size
            self._notebook_bytes -= size
        outs[:] = []
        self._stream_bytes = {}
        self.clear_display_id_mapping(cell_index)

    def _update_display_id(self, display_id, msg):
        """nbclient's update of the outputs shown under a display id, only where the new
        output is no larger than each it replaces (what is kept never grows); a larger
        update is dropped and counted for the cell's note."""
        try:
            out = output_from_msg({**msg, "msg_type": "display_data",
                                   "header": {**msg["header"], "msg_type": "display_data"}})
            size = stored_size(out)
        except (ValueError, KeyError, TypeError, AttributeError):
            return
        for cell_idx, indices in self._display_id_map.get(display_id, {}).items():
            outputs = self.nb["cells"][cell_idx]["outputs"]
            for i in indices:
                if i < len(outputs) and size <= self._sizes.get(id(outputs[i]), 0):
                    outputs[i]["data"], outputs[i]["metadata"] = out["data"], out["metadata"]
                elif i < len(outputs):
                    self._dropped.updates += 1

    @staticmethod
    def _error(cell, ename, evalue):
        cell.outputs.append(NotebookNode(output_type="error", ename=ename, evalue=evalue,
                                         traceback=[f"{ename}: {evalue}"]))

    def _restart(self):
        self.kc.stop_channels()
        run_sync(self.km.restart_kernel)(now=True)
        self.start_new_kernel_client()


class Dropped:
    """What the bounds dropped of a cell's outputs as they arrived."""

    def __init__(self):
        self.bytes, self.updates = 0, 0

    def say(self, limits):
        """The cell's note: what was dropped, and the bounds."""
        parts = []
        if self.bytes:
            parts.append(f"{_megabytes(self.bytes)} of this cell's output dropped as it "
                         "arrived")
        if self.updates:
            parts.append(f"{self.updates} update{'s' * (self.updates != 1)} of a display "
                         "to a larger output not made")
        return ("; ".join(parts) + f": grading keeps {_megabytes(limits.output_bytes)} "
                f"per output, {_megabytes(limits.cell_output_bytes)} per cell, "
                f"{_megabytes(limits.notebook_output_bytes)} per notebook (c.Grading."
                "output_bytes, cell_output_bytes, notebook_output_bytes)")


def stored_size(output):
    """Bytes an output takes in its notebook's file as nbformat writes it (JSON indented
    by 1, each line of a text its own string, at an output's depth of 4)."""
    node = nbformat.from_dict({"cells": [{"cell_type": "code", "outputs": [output]}]})
    split_lines(node)
    text = json.dumps(node.cells[0].outputs[0], indent=1, sort_keys=True, ensure_ascii=False)
    return len(text.encode()) + 4 * text.count("\n") + 6  # (its indentation, ",\n" before it)


def cut_stream(output, room):
    """A stream output's text cut to fit room bytes as stored (stored_size), and its size;
    (None, 0) where not even a line's start fits."""
    text = output.text
    size = stored_size(output)
    while text and size > room:
        text = text[:int(len(text) * min(room / size, 1) * 0.98)]
        size = stored_size(NotebookNode(output_type="stream", name=output.name, text=text))
    if not text:
        return None, 0
    return NotebookNode(output_type="stream", name=output.name, text=text), size


def _megabytes(size):
    return f"{size / (1 << 20):.1f} MiB"


def skipped(cell):
    """Whether --execute skips a cell: a code cell tagged skip-at-grading that is not a
    graded cell (a student could tag a check cell to skip it)."""
    nbgrader = cell.metadata.get("nbgrader", {})
    graded = nbgrader.get("grade") or nbgrader.get("solution") or nbgrader.get("locked")
    return cell.cell_type == "code" and TAG in cell.metadata.get("tags", []) and not graded


