"""The judge: runs the check cells (hidden tests included) in its own process, where no
student code runs. The student's normlib modules are proxies (tools.judge.peer) of the
worker's: a check calls the student's function, the call crosses to the worker as values,
and the values that come back are compared here, with the course's normlib.testing,
torch and NumPy that the submission cannot reach. So the verdict, its message and the
hidden tests never exist where the student's code runs.

    Judge(judge_dir, worker_dir, student_modules, limits).run([(grade_id, source)])

judge_dir holds the course's normlib/ without the student's files; worker_dir the
course's normlib/ with the submission's files in their place. A check that runs over
the time limit, or whose worker dies, fails; the worker is started again for the next.
"""

import contextlib
import importlib.abc
import importlib.machinery
import json
import os
import subprocess
import sys
import threading
import time
import types

from tools import sandbox
from tools.judge import box
from tools.judge.peer import Peer, WorkerGone

JUDGE_OPS = ("call", "backward")  # the worker may only call back what it was handed
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class StudentModule(types.ModuleType):
    """The judge's stand-in for a student module: attributes are the worker's."""

    def __init__(self, name, remote):
        super().__init__(name)
        self.__dict__["_remote"] = remote

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.__dict__["_remote"], name)

    def __setattr__(self, name, value):
        if name.startswith("__"):
            super().__setattr__(name, value)
        else:
            setattr(self.__dict__["_remote"], name, value)


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports of the student's modules give StudentModule proxies of the worker's."""

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
    def __init__(self, judge_dir, worker_dir, student_modules, limits, sandbox=True):
        self.judge_dir, self.worker_dir = str(judge_dir), str(worker_dir)
        self.student_modules, self.limits = set(student_modules), limits
        if sandbox and not box.bwrap():
            raise RuntimeError(f"bubblewrap (bwrap) is not installed: {box.INSTALL}")
        self.sandbox = sandbox
        self.process = self.peer = None
        self.finder = _Finder(self)

    def start(self):
        argv = ["-m", "tools.judge.worker", json.dumps(self.limits)]
        if self.sandbox:
            command, fd = box.command(self.worker_dir, [*argv, box.SOURCE], box.thread_env())
            fds, env, cwd = (fd,) if fd is not None else (), None, None
        else:
            command, fds, fd = [sys.executable, *argv], (), None
            env, cwd = {**os.environ, "PYTHONPATH": REPO}, self.worker_dir
        self.process = subprocess.Popen(
            command, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, env=env, pass_fds=fds, preexec_fn=self._limit)
        if fd is not None:
            os.close(fd)
        self.peer = Peer(self.process.stdout, self.process.stdin, JUDGE_OPS)
        for name in [n for n in sys.modules if n == "normlib" or n.startswith("normlib.")]:
            del sys.modules[name]  # proxies of a worker that is gone; course modules again
        if self.finder not in sys.meta_path:
            sys.meta_path.insert(0, self.finder)
        if self.judge_dir not in sys.path:
            sys.path.insert(0, self.judge_dir)

    def _limit(self):
        """In the worker, before it starts: its memory, the size of a file it writes, its
        CPU time, no core dumps (the grading limits, as at autograde)."""
        sandbox.limit(self.limits["memory_mb"], self.limits["file_mb"],
                      sandbox.cpu_seconds(self.limits["notebook_timeout"]))

    def stop(self):
        if self.process:
            self.process.kill()
            self.process.wait()
            with contextlib.suppress(BrokenPipeError):  # what a lost worker did not read
                self.process.stdin.close()
            self.process.stdout.close()
        self.process = None

    def run(self, cells):
        """{grade_id: (passed, detail)} of check cells [(grade_id, source)]."""
        from tools.check import run

        found = {}
        deadline = time.monotonic() + self.limits["notebook_timeout"]
        for grade_id, source in cells:
            if time.monotonic() >= deadline:
                found[grade_id] = (False, f"not run: the submission ran over its "
                                          f"{self.limits['notebook_timeout']} s limit")
                continue
            if self.process is None or self.process.poll() is not None:
                self.stop()
                self.start()
                budget = self.limits["timeout"] + self.limits["startup_timeout"]
            else:
                budget = self.limits["timeout"]
            budget = min(budget, deadline - time.monotonic())
            timer = threading.Timer(budget, self.process.kill)
            timer.start()
            start = time.monotonic()
            try:
                self.peer.request("reset")
                status, detail = run(source, f"<{grade_id}>")
            except WorkerGone as error:
                status, detail = "FAIL", f"WorkerGone: {error}"
                self.process.kill()  # ended, or ending: the next check starts a new worker
                self.process.wait()  # (not yet reaped, poll() would say it still runs)
            finally:
                timer.cancel()
            if self.process.poll() is not None:  # killed by the timer, or it ended itself
                over = time.monotonic() - start >= budget
                detail = (f"ran over the {self.limits['timeout']} s limit" if over else
                          "the submission's code ended its process")
                status = "FAIL"
            found[grade_id] = (status == "pass", detail)
        self.stop()
        return found
