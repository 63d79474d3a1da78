"""Grade a submission with the judge: its score of each check is the grade (the check's
auto score in the gradebook), and its verdict is written under the check in the
autograded notebook, so that formgrader, feedback and the CSV show it.

nbgrader runs a student's notebook top to bottom in one kernel (in the OS sandbox), with
the check cells' visible tests: a student's code there can patch what a check calls, or
forge its output, so that run decides nothing. Here every check cell of the assignment
(hidden tests included, as solutions/ has them) runs in the judge (tools/judge), which
never runs student code: the submission's normlib files run in a worker process, which
only computes the values the checks ask for. No notebook cell of the student's runs at
all: the judge needs only the submission's normlib files.

A check that runs over the time limit, or whose worker dies, fails; the worker is
started again for the checks after it, so the rest of the submission is still graded.
The limits (time per check, memory, file size, protected folders) are the notebook
run's: GradingExecute's settings in the course's nbgrader config
(tools.course.grading_limits).
"""

import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from tools.course import REPO, gradebook_url, grading_limits, load_course
from tools.exercises import of_notebooks, student_files


class JudgeProcess:
    """A `python -m tools.judge` process serving this thread's grading jobs (one per thread
    and environment, for the life of this process: torch is imported once, not once per
    submission)."""

    _started = {}
    _lock = threading.Lock()

    def __init__(self, env):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tools.judge"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, env={**os.environ, **env, "PYTHONPATH": str(REPO)},
            text=True)

    @classmethod
    def get(cls, env):
        with cls._lock:
            key = (threading.get_ident(), tuple(sorted(env.items())))
            if key not in cls._started or cls._started[key].process.poll() is not None:
                cls._started[key] = cls(env)
            return cls._started[key]

    def grade(self, job):
        """The judge's {grade_id: (passed, detail)} of a job; RuntimeError if the judge
        ended, or gave no answer by its deadline (then it is killed)."""
        self.process.stdin.write(json.dumps(job) + "\n")
        self.process.stdin.flush()
        seconds = deadline(job["limits"])
        if not select.select([self.process.stdout], [], [], seconds)[0]:
            self.process.kill()
            self.process.wait()
            raise RuntimeError(f"the judge gave no answer in {seconds} s: it was stopped")
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError("the judge process ended (its error is above)")
        return {grade_id: tuple(result) for grade_id, result in json.loads(line).items()}


def deadline(limits):
    """Seconds a judge may take to grade one submission: its whole run (notebook_timeout),
    the check running at its end (timeout, startup_timeout for a new worker), and a minute
    to stop."""
    return limits["notebook_timeout"] + limits["timeout"] + limits["startup_timeout"] + 60


def run_checks(folder, cells, limits, env=None, files=None, sandbox=True):
    """{grade_id: (passed, detail)} of check cells [(grade_id, source)], judged by
    tools.judge: the student's files of folder/normlib/ (files: their paths relative to
    folder, default every student file of the course) run in a worker, under these grading
    limits (a dict like tools.course.grading_limits'), with these extra environment
    variables, in the OS sandbox of tools/judge/box.py (sandbox=False: without it); the
    checks run in the judge, with the course's other normlib files of folder."""
    folder = Path(folder)
    files = student_files() if files is None else files
    with tempfile.TemporaryDirectory() as tmp:
        judge_dir = Path(tmp) / "judge"
        shutil.copytree(folder / "normlib", judge_dir / "normlib")
        for rel in files:
            (judge_dir / rel).unlink(missing_ok=True)  # the judge never has student code
        job = {"judge_dir": str(judge_dir), "worker_dir": str(folder), "cells": cells,
               "student_modules": [rel[:-3].replace("/", ".") for rel in files],
               "limits": limits, "sandbox": sandbox}
        return JudgeProcess.get(env or {}).grade(job)


def clean_results(root, assignment, student, limits=None, env=None, sandbox=True):
    """{grade_id: (passed, detail)} of one submission, from the judge (with these
    extra environment variables) under the course's grading limits (or these, from
    tools.course.grading_limits)."""
    limits = limits or grading_limits(root)
    info = load_course(root)["assignments"][assignment]
    cells = [(e.grade_id, e.source) for e in of_notebooks(info["notebooks"])]
    with tempfile.TemporaryDirectory() as tmp:
        graded_folder(root, assignment, student, tmp)
        return run_checks(tmp, cells, limits, env, info["student_files"], sandbox)


def graded_folder(root, assignment, student, folder):
    """Fill folder with the normlib/ a submission is graded with: the student's files of
    the assignment, and the source's copy of every other file (as released: no reference
    of another assignment's; see tools.course). A student file missing from the submission
    (or a link) is missing there too: its checks fail, as at autograde."""
    root, folder = Path(root), Path(folder)
    submission = root / "submitted" / student / assignment
    shutil.copytree(root / "source" / assignment / "normlib", folder / "normlib")
    for rel in load_course(root)["assignments"][assignment]["student_files"]:
        if (submission / rel).is_file() and not (submission / rel).is_symlink():
            shutil.copy2(submission / rel, folder / rel)
        else:
            (folder / rel).unlink()


JUDGE = "The judge:"
DETAIL_CHARS = 500  # of a failed check's reason, in its verdict


def verdict(passed, points, detail):
    """The judge's verdict on a check: one line (detail folded onto it)."""
    if passed:
        return f"{JUDGE} passed, with the hidden tests ({points:g} / {points:g})."
    detail = " | ".join(line.strip() for line in str(detail).splitlines() if line.strip())
    return f"{JUDGE} failed ({0:g} / {points:g}): {detail[:DETAIL_CHARS]}"


def annotate(notebook, verdicts):
    """Write each check cell's verdict {grade_id: (passed, text)} into its metadata
    ("judge") in the autograded notebook, and remove that key from every other cell (a
    submission's notebook may carry one). The feedback page shows it where no output of
    the submission's code can stand (tools/templates/judged): the notebook's outputs are
    the student's kernel's, and a line printed to look like a verdict stays among them."""
    import nbformat

    nb = nbformat.read(notebook, as_version=4)
    for cell in nb.cells:
        cell.metadata.pop("judge", None)
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if cell.cell_type == "code" and grade_id in verdicts:
            passed, text = verdicts[grade_id]
            cell.metadata["judge"] = {"passed": bool(passed), "verdict": text}
    nbformat.write(nb, notebook)


def recheck(root, assignment, student, limits=None, env=None, sandbox=True):
    """Grade one submission with the judge (under the course's grading limits, or these:
    tools.course.grading_limits): the judge's score of each check is its auto score in the
    gradebook (the grade), and its verdict is written under the check in the autograded
    notebook (the feedback). Returns (grade_id, notebook score, judge's score, detail) of
    each check where the notebook's run (visible checks only, in the student's kernel)
    gave another score, and of each manual score differing from the judge's (set in
    formgrader)."""
    from nbgrader.api import Gradebook

    info = load_course(root)["assignments"][assignment]
    clean = clean_results(root, assignment, student, limits, env, sandbox)
    rows, verdicts = [], {}
    with Gradebook(gradebook_url(root)) as gb:
        # (made by nbgrader, unless it could not even start: no notebook it knows)
        gb.update_or_create_submission(assignment, student)
        for e in of_notebooks(info["notebooks"]):
            grade = gb.find_grade(e.grade_id, e.notebook, assignment, student)
            passed, detail = clean[e.grade_id]
            score = e.points if passed else 0
            if grade.auto_score != score:
                rows.append((e.grade_id, grade.auto_score, score, detail))
                grade.auto_score = score
            if grade.manual_score is not None and grade.manual_score != score:
                rows.append((e.grade_id, grade.manual_score, score, "a manual score was set"))
            verdicts.setdefault(e.notebook, {})[e.grade_id] = \
                (passed, verdict(passed, e.points, detail))
        gb.db.commit()
    folder = Path(root) / "autograded" / student / assignment
    for stem, found in verdicts.items():
        if (folder / f"{stem}.ipynb").is_file():
            annotate(folder / f"{stem}.ipynb", found)
    return rows
