"""The judge's verdicts on a submission: every check of its assignment (hidden tests
included, as solutions/ has them) run by the judge (tools/judge), which never runs student
code; the submission's normlib files run in a runner process in the OS sandbox, which only
computes the values the checks ask for. No cell of the student's notebooks runs: a
verdict depends on the submission's normlib files alone, and it is the grade.

    verdicts(root, assignment, plan, student, limits, env=None, sandboxed=True, chosen=None)
        -> ({grade_id: Verdict(passed, text)}, the student files the submission lacks)

A check that runs over the time limit, or whose runner dies, fails; a new runner grades the
checks after it. A check that fails while an exercise it builds on fails says so ("It needs
Exercise 1.1 (...), which fails"), and still loses its points: the judge grades the code,
not its causes.
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
from typing import NamedTuple

from tools.course.exercises import REPO, SOLUTIONS, by_number, needs, of_notebooks, student_files
from tools.course.folder import NORMKIT, NORMKIT_IGNORE, submission_folder
from tools.sandboxed.limits import BUSY

JUDGE = "The judge:"  # how every verdict begins


class Verdict(NamedTuple):
    """The judge's verdict on one check, made once here: the grade's one source (the head
    scores the check from `passed` alone), and `text`, what the student reads under the check
    (the autograded notebook's copy, the feedback page's)."""
    passed: bool
    text: str


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

    def grade(self, job, limits):
        """The judge's {grade_id: (passed, detail)} of a job; RuntimeError if the judge
        ended, or gave no answer by its deadline (then it is killed)."""
        self.process.stdin.write(json.dumps(job) + "\n")
        self.process.stdin.flush()
        seconds = deadline(limits)
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
    the check running at its end (timeout, startup_timeout for a new runner), and a minute
    to stop."""
    return limits.notebook_timeout + limits.timeout + limits.startup_timeout + 60


def run_checks(folder, cells, limits, env=None, files=None, sandboxed=True, judge_dir=None):
    """{grade_id: (passed, detail)} of check cells [(grade_id, source)], judged by
    tools.judge: the student's files of folder/normlib/ (files: their paths relative to
    folder, default every student file of the course) run in a runner under these Limits,
    with these extra environment variables, in the OS sandbox of tools/sandbox/bubblewrap.py
    (sandboxed=False: without it); the checks run in the judge, with the course's other
    normlib files and its normkit/: judge_dir's (judge_folder), else folder's."""
    folder = Path(folder)
    files = student_files() if files is None else files
    if judge_dir is None:
        with tempfile.TemporaryDirectory() as tmp:
            judge_dir = judge_folder(folder / "normlib", folder / "normkit", files,
                                     Path(tmp) / "judge")
            return run_checks(folder, cells, limits, env, files, sandboxed, judge_dir)
    job = {"judge_dir": str(judge_dir), "runner_dir": str(folder), "cells": cells,
           "student_modules": [rel[:-3].replace("/", ".") for rel in files],
           "limits": limits.to_json(), "sandboxed": sandboxed}
    return JudgeProcess.get(env or {}).grade(job, limits)


def private_modules(normlib):
    """normlib's provided private modules (_validation.py, ...: no exercise in them) put in
    the normlib folder as the repository has them, as normkit/ is (which imports them):
    a course whose source/ was built before they existed (2026-12-07) lacks them."""
    for path in sorted((SOLUTIONS / "normlib").glob("_[!_]*.py")):
        shutil.copy2(path, Path(normlib) / path.name)


def judge_folder(normlib, normkit, files, judge_dir):
    """judge_dir made the judge's folder: these normlib/ and normkit/ without the student's
    files (the judge never has student code). Returns judge_dir."""
    for source, package in ((normlib, "normlib"), (normkit, "normkit")):
        shutil.copytree(source, Path(judge_dir) / package, ignore=NORMKIT_IGNORE)
    private_modules(Path(judge_dir) / "normlib")
    for rel in files:
        (Path(judge_dir) / rel).unlink(missing_ok=True)
    return Path(judge_dir)


def assignment_judge_folder(root, assignment, student_files):
    """The judge's folder of an assignment of the course at root (a grading worker's
    scratch course), made at its first submission and the same for every other: the
    source's normlib/ without the student's files, and the course's normkit/. A stable
    folder, so that the judge process compiles the course's modules once (their
    __pycache__), not at every submission."""
    judge_dir = Path(root) / "judge" / assignment
    if not judge_dir.is_dir():
        with tempfile.TemporaryDirectory(dir=root) as tmp:
            judge_folder(Path(root) / "source" / assignment / "normlib", NORMKIT, student_files,
                         Path(tmp) / "judge")
            judge_dir.parent.mkdir(exist_ok=True)
            (Path(tmp) / "judge").rename(judge_dir)
    return judge_dir


def graded_folder(root, assignment, student_files, student, folder):
    """Fill folder with the normlib/ a submission is graded with: the student's files of
    the assignment, and the source's copy of every other file (as released: no reference
    of another assignment's: tools/instructor/build.py), beside the course's normkit/. A student
    file missing from the submission (or a link) is missing there too: its checks fail.
    Returns the missing files."""
    root, folder = Path(root), Path(folder)
    submission = submission_folder(root, student, assignment)
    shutil.copytree(root / "source" / assignment / "normlib", folder / "normlib")
    private_modules(folder / "normlib")
    # normkit/ as the repository has it now, like the hidden tests (exercises(), from
    # solutions/), which import its check functions: the two always agree, and a worker's
    # are the head's (tools.worker.task.code_digest covers both)
    shutil.copytree(NORMKIT, folder / NORMKIT.name, ignore=NORMKIT_IGNORE)
    missing = []
    for rel in student_files:
        if (submission / rel).is_file() and not (submission / rel).is_symlink():
            shutil.copy2(submission / rel, folder / rel)
        else:
            (folder / rel).unlink()
            missing.append(rel)
    return missing


def verdicts(root, assignment, plan, student, limits, env=None, sandboxed=True, chosen=None):
    """{grade_id: Verdict} of every check of a submission of the course at root (plan: its
    assignment's Assignment; chosen: of those of its exercises for which chosen(exercise) is
    true), and the student files it lacks: see the module's docstring."""
    checks = [e for e in of_notebooks(plan.notebooks) if chosen is None or chosen(e)]
    with tempfile.TemporaryDirectory() as tmp:
        missing = graded_folder(root, assignment, plan.student_files, student, tmp)
        found = run_checks(tmp, [(e.grade_id, e.source) for e in checks], limits, env,
                           plan.student_files, sandboxed,
                           assignment_judge_folder(root, assignment, plan.student_files))
    failed = {e.number for e in checks if not found[e.grade_id][0]}
    return {e.grade_id: Verdict(found[e.grade_id][0],
                                verdict(*found[e.grade_id], e.points, needs(e.number, failed)))
            for e in checks}, missing


def verdict(passed, detail, points, needed=()):
    """The judge's verdict on a check: passed, or failed with why (the judge's words,
    whole: the feedback wraps them), and the failed exercises it builds on."""
    if passed:
        return f"{JUDGE} passed, with the hidden tests ({points:g} / {points:g})."
    detail = "\n".join(line.rstrip() for line in str(detail).splitlines() if line.strip())
    verb = "could not finish it" if detail.startswith(BUSY) else "failed"
    text = f"{JUDGE} {verb} ({0:g} / {points:g}): {detail}"
    if needed:
        names = ", ".join(f"Exercise {n} ({by_number()[n].name})" for n in needed)
        text += (f"\nIt needs {names}, which fail{'s' * (len(needed) == 1)}: fix "
                 f"{'that' if len(needed) == 1 else 'those'} first, then this check again.")
    return text

