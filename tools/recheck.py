"""Re-grade a submission in a clean process; where nbgrader's score disagrees, the clean
score counts (written to the gradebook as the cell's manual score).

nbgrader runs a student's notebook top to bottom, so a student's cell that runs before a
check can patch what the check calls (normlib.testing.assert_close, numpy, torch) and
earn points for wrong code. Here every check cell of the assignment (hidden tests
included, as solutions/ has them) runs on the submission's normlib exercise files beside
the course's copies of the other normlib files, in a fresh process that runs no cell
of the student's notebooks (forked from a Zygote), inside tools/sandbox.py. Module-level
code of the exercise files still runs (as at autograde): a check after which a public
attribute of numpy, torch or normlib.testing is no longer what it was fails, naming it.

A check that runs over the time limit, or kills the process, fails; the process is
started again for the checks after it (as tools.grading.GradingExecute restarts the
kernel), so the rest of the submission is still graded. The limits (time per check,
memory, file size, protected folders) are the notebook run's: GradingExecute's settings
in the course's nbgrader config (tools.course.grading_limits).
"""

import contextlib
import importlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from tools.course import REPO, gradebook_url, grading_limits, load_course
from tools.exercises import of_notebooks

WATCHED = ("numpy", "numpy.linalg", "numpy.testing", "torch", "torch.nn.functional",
           "torch.autograd", "torch.testing", "normlib.testing")


def _fingerprint():
    """{name: id} of the public attributes of the modules the checks rely on, and of the
    methods of torch.Tensor (a Python class a patch could reach)."""
    import importlib

    import torch

    found = {}
    for name in WATCHED:
        module = importlib.import_module(name)
        found.update({f"{name}.{k}": id(v) for k, v in vars(module).items()
                      if not k.startswith("_")})
    found.update({f"torch.Tensor.{k}": id(v) for k, v in vars(torch.Tensor).items()})
    return found


def child(checks_file, results_file):
    """In the clean process (cwd: a folder holding normlib/, forked by Zygote): run the
    checks listed in checks_file in the sandbox, under the grading limits it gives,
    appending {"grade_id", "passed", "detail"} lines to results_file."""
    from tools import sandbox
    from tools.check import run

    checks = json.loads(Path(checks_file).read_text())
    before = _fingerprint()  # imports the course's normlib.testing, not student code
    limits = checks["limits"]
    sandbox.install(os.getcwd(), limits["protected"], limits["memory_mb"], limits["file_mb"])
    with open(results_file, "a") as out:
        for grade_id, source in checks["cells"]:
            try:
                status, detail = run(source, f"<{grade_id}>")
            except BaseException as error:  # sys.exit(), KeyboardInterrupt: not Exceptions
                status, detail = "FAIL", f"{type(error).__name__}: {error}"
            after = _fingerprint()  # (new names appear as numpy imports submodules lazily)
            changed = sorted(k for k, v in before.items() if after.get(k) != v)
            if changed:
                status, detail = "FAIL", f"the submission changed {', '.join(changed[:5])}"
            out.write(json.dumps({"grade_id": grade_id, "passed": status == "pass",
                                  "detail": detail}) + "\n")
            out.flush()


class Zygote:
    """A process that imports numpy and torch once, then forks one clean child per run
    (a fresh `python` per run would import them again: about 1.5 s of CPU each). Each
    child starts in the run's folder, with no output, and reports through its files."""

    _started = {}  # one per environment, for the life of this process
    _lock = threading.Lock()

    def __init__(self, env):
        code = "import tools.recheck as r; r.Zygote.serve()"
        self.process = subprocess.Popen(
            [sys.executable, "-c", code], env={**os.environ, **env, "PYTHONPATH": str(REPO)},
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)

    @classmethod
    def get(cls, env):
        with cls._lock:
            key = tuple(sorted(env.items()))
            if key not in cls._started or cls._started[key].process.poll() is not None:
                cls._started[key] = cls(env)
            return cls._started[key]

    def fork(self, *args):
        """A child running child(*args) in args[0]'s folder: its pid."""
        with self._lock:
            self.process.stdin.write(json.dumps([str(a) for a in args]) + "\n")
            self.process.stdin.flush()
            return int(self.process.stdout.readline())

    @staticmethod
    def serve():
        """In the zygote: fork a child per request line, answer its pid."""
        import numpy  # noqa: F401 (imported once, for every child)
        import torch  # noqa: F401

        signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the system
        for line in sys.stdin:
            checks, results = json.loads(line)
            pid = os.fork()
            if pid == 0:  # the child: silent, in the run's folder (first on sys.path)
                try:
                    devnull = os.open(os.devnull, os.O_RDWR)
                    for fd in (0, 1, 2):
                        os.dup2(devnull, fd)
                    os.chdir(Path(checks).parent)
                    importlib.invalidate_caches()
                    child(checks, results)
                finally:
                    os._exit(0)
            print(pid, flush=True)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _run_until_stuck(folder, cells, limits, env):
    """Run cells in one clean process; return its results, up to where it stopped."""
    checks, results = Path(folder) / "checks.json", Path(folder) / "results.jsonl"
    checks.write_text(json.dumps({"cells": cells, "limits": limits}))
    results.write_text("")
    pid = Zygote.get(env).fork(checks, results)
    timeout = limits["timeout"]
    done, deadline = [], time.monotonic() + timeout + limits["startup_timeout"]
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
        lines = results.read_text().splitlines()
        if len(lines) > len(done):
            done = [json.loads(line) for line in lines]
            deadline = time.monotonic() + timeout
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    return [json.loads(line) for line in results.read_text().splitlines()]


def run_checks(folder, cells, limits, env=None):
    """{grade_id: (passed, detail)} of check cells [(grade_id, source)] run in clean
    processes (with these extra environment variables) in folder, whose normlib/ they
    import, under these grading limits (a dict like tools.course.grading_limits')."""
    found = {}
    while len(found) < len(cells):
        todo = cells[len(found):]
        for result in _run_until_stuck(folder, todo, limits, env or {}):
            found[result["grade_id"]] = (result["passed"], result["detail"])
        if len(found) < len(cells):  # the next check hung or killed the process
            stuck = cells[len(found)][0]
            found[stuck] = (False, f"ran over {limits['timeout']} s or ended the process")
    return found


def clean_results(root, assignment, student, limits=None, env=None):
    """{grade_id: (passed, detail)} of one submission, from clean processes (with these
    extra environment variables) under the course's grading limits (or these, from
    tools.course.grading_limits)."""
    root = Path(root)
    limits = limits or grading_limits(root)
    info = load_course(root)["assignments"][assignment]
    cells = [(e.grade_id, e.source) for e in of_notebooks(info["notebooks"])]
    submission = root / "submitted" / student / assignment
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(root / "source" / assignment / "normlib", Path(tmp) / "normlib")
        for rel in info["student_files"]:
            if (submission / rel).is_file():
                shutil.copy2(submission / rel, Path(tmp) / rel)
            else:  # a missing file: its checks fail, as at autograde
                (Path(tmp) / rel).unlink()
        return run_checks(tmp, cells, limits, env)


def recheck(root, assignment, student, limits=None, env=None):
    """Compare the gradebook with the clean results of one submission (under the course's
    grading limits, or these: tools.course.grading_limits); where the notebook's
    (auto) score differs, set the clean score as the cell's manual score. Returns
    (grade_id, notebook score, clean score, detail) of each disagreement, and of each
    manual score differing from the clean one (set in formgrader, or by tampering)."""
    from nbgrader.api import Gradebook

    info = load_course(root)["assignments"][assignment]
    clean = clean_results(root, assignment, student, limits, env)
    rows = []
    with Gradebook(gradebook_url(root)) as gb:
        for e in of_notebooks(info["notebooks"]):
            grade = gb.find_grade(e.grade_id, e.notebook, assignment, student)
            passed, detail = clean[e.grade_id]
            score = e.points if passed else 0
            if grade.auto_score != score:
                rows.append((e.grade_id, grade.auto_score, score, detail))
                grade.manual_score = score
            elif grade.manual_score is not None and grade.manual_score != score:
                rows.append((e.grade_id, grade.manual_score, score, "a manual score was set"))
        gb.db.commit()
    return rows
