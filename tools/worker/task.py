"""One submission graded wherever a Dask worker runs it (tools/instructor/cluster.py), from
what the task carries: no path of the head's, no shared file system, no course gradebook.

    grade(kit, task) -> Outcome

The kit is the course as a worker needs it, sent once: its plan, the assignments' source/
folders, nbgrader's definitions of them (tools.instructor.gradebook.definitions), the
nbgrader's config less the gradebook's URL, and the digest of the head's CODE (a worker whose own
differs refuses). The task is one submission's files, their digest and time, and the
limits. The worker gets the judge's verdicts (tools/judge/client.py), then nbgrader's
autograde of the staged notebooks (tools/worker/stage.py) into a scratch course of its own,
within record_seconds, and returns both in the Outcome with the autograded notebooks. Only
the head writes the course's gradebook (tools.instructor.autograde.save), so a task run
again is harmless. A worker grades one task at a time, only in the OS sandbox (else Refused).
"""

import atexit
import dataclasses
import datetime
import functools
import hashlib
import io
import json
import logging
import os
import shutil
import socket
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from tools.course.deadline import TimeUp, deadline
from tools.course.exercises import REPO
from tools.course.folder import Course, nbgrader_in_process, put, step_folder, submission_folder
from tools.sandboxed.limits import Limits
from tools.worker.stage import stage, stand_in


class Refused(RuntimeError):
    """A worker that cannot grade here (no working bubblewrap, other hidden tests than the
    course's): the task is not graded."""


@dataclass(frozen=True)
class Kit:
    course: Course  # its plan: the layout, each assignment's notebooks and student files
    files: dict  # {path relative to the course: bytes} of source/<assignment>/
    definitions: bytes  # a SQLite gradebook: the assignments, notebooks and cells, no student
    config: object  # nbgrader's config of the course (a traitlets Config), without db_url
    code: str  # code_digest() of the instructor's repository
    digest: str  # of all the above: which scratch course a worker keeps for it


@dataclass(frozen=True)
class Task:
    assignment: str
    student: str
    files: dict  # {path relative to the submission: bytes}: submitted/<student>/<assignment>/
    digest: str  # tools.instructor.gradebook.digest_of those files
    limits: Limits
    execute: bool = False  # also run the notebooks (autograde's --execute)
    sandboxed: bool = True
    submitted_at: datetime.datetime | None = None  # their timestamp.txt's time, which the
    # head saves with their scores (a resubmission collected meanwhile waits for the next run)


@dataclass(frozen=True)
class Outcome:
    assignment: str
    student: str
    digest: str
    verdicts: dict  # {grade_id: tools.judge.client.Verdict}; {} if the judge failed
    missing: list  # the student files the submission lacks
    error: str | None  # why the judge could not grade it, or nbgrader's autograde ran over
    # its time (record_seconds: nothing of it is recorded; the judge's scores stand): the
    # status "failed: ..."
    notes: list  # what the status says beside "graded" (a renamed notebook, ...)
    unreadable: dict  # {stem: why} of the notebooks that could not be read
    scores: dict  # {(notebook, grade_id): auto_score}: nbgrader's, for every graded cell
    comments: dict  # {(notebook, grade_id): auto_comment}
    penalties: dict  # {notebook: late_submission_penalty}
    autograded: dict  # {path: bytes}: the notebooks of autograded/<student>/<assignment>/,
    # as nbgrader wrote them
    log: str  # nbgrader's log of it
    worker: str  # host:pid of the worker that graded it


_ONE_AT_A_TIME = threading.Lock()  # a worker's scratch course serves one task at a time


def grade(kit, task):
    """The Outcome of a task: see the module's docstring."""
    where = f"{socket.gethostname()}:{os.getpid()}"
    if task.sandboxed and sandbox_problem():
        raise Refused(f"the worker {where} grades nothing without the OS sandbox: "
                      f"{sandbox_problem()}")
    if kit.code != code_digest():
        raise Refused(f"the worker {where} has other {_code_names()} than the course's "
                      "(another commit, other checks or hidden tests): update its repository")
    nbgrader_in_process()
    with _ONE_AT_A_TIME:
        root = _scratch(kit)
        _forget(root, task.assignment, task.student)
        try:
            return _grade(root, kit, task, where)
        finally:
            _forget(root, task.assignment, task.student)


def _grade(root, kit, task, where):
    """grade's work, in the scratch course at root."""
    from tools.judge import client
    from tools.sandbox import bubblewrap

    a, s = task.assignment, task.student
    submitted, staging = submission_folder(root, s, a), step_folder(root, "staging")
    put(submitted, task.files)
    limits = task.limits.replace(protected=(  # (the course's, if it is this machine's)
        *task.limits.protected, str(root), str(REPO / "solutions")))
    try:
        found, missing = client.verdicts(root, a, kit.course.assignments[a], s, limits,
                                         bubblewrap.threads(1), task.sandboxed)
        error = None
    except Exception as failure:  # (one submission's failure is its own)
        found, missing, error = {}, [], f"{type(failure).__name__}: {failure}"
    stems = kit.course.assignments[a].notebooks
    notes, unreadable = stage(submitted, stems, submission_folder(root, s, a, "staging"),
                              functools.partial(stand_in, root, a))
    (root / "verdicts.json").write_text(json.dumps(
        {a: {s: {g: list(v) for g, v in found.items()}}}))
    log, late = _autograde(root, kit, a, s, staging, limits, task.execute, task.sandboxed,
                           len(stems))
    if late:  # nothing half recorded: the judge's scores stand, said so
        _forget_record(root, a, s)
        error = "; ".join(filter(None, [error, late]))
    folder = submission_folder(root, s, a, "autograded")
    if not folder.is_dir():
        notes.append("nbgrader recorded no notebook of it, so it has no feedback page "
                     f"(logs/autograde/{a}-{s}.log)")
    return Outcome(a, s, task.digest, found, missing, error, notes, unreadable,
                   *_nbgrader_record(root, a, s), notebooks_of(folder), log, where)


def notebooks_of(folder):
    """{name: bytes} of the notebooks at the top of an autograded folder (what returns to
    the head: none of the files nbgrader copied beside them)."""
    return {p.name: p.read_bytes() for p in sorted(Path(folder).glob("*.ipynb")) if p.is_file()}


def kept(kit):
    """The kit, as a task's result (tools/instructor/autograde.py): Dask computes it again from the
    task if every worker holding it is lost."""
    return kit


@functools.cache
def sandbox_problem():
    """Why grading's sandbox cannot be made by this process's machine, or None (probed
    once: tools.sandbox.probe.sandbox_refusal)."""
    from tools.sandbox import bubblewrap
    from tools.sandbox.probe import sandbox_refusal

    return bubblewrap.INSTALL if not bubblewrap.bwrap() else sandbox_refusal()


CODE = ("tools", "normkit", "solutions", "nbgrader_config.py")  # what grades: the judge, the
# checks it runs (from this worker's own normkit/: tools.judge.client.graded_folder), the
# hidden tests, and the nbgrader config its Autograde loads (tools.course.folder.write_config)


def _code_names():
    """CODE as a worker's refusal names it: "tools/, normkit/, solutions/ or
    nbgrader_config.py"."""
    names = [f"{top}/" if (REPO / top).is_dir() else top for top in CODE]
    return f"{', '.join(names[:-1])} or {names[-1]}"


@functools.cache
def code_digest():
    """The SHA-256 of this repository's CODE (every file's path and bytes, caches and
    checkpoints left out): a worker whose digest is not the head's grades nothing."""
    sha = hashlib.sha256()
    for top in CODE:
        for path in sorted((REPO / top).rglob("*")) if (REPO / top).is_dir() else [REPO / top]:
            parts = set(path.relative_to(REPO).parts)
            if path.is_file() and not parts & {"__pycache__", ".ipynb_checkpoints"}:
                rel = path.relative_to(REPO).as_posix().encode()
                sha.update(len(rel).to_bytes(8, "big") + rel + path.read_bytes())
    return sha.hexdigest()


@functools.cache
def _courses():
    """{kit digest: scratch course folder} of this worker process, removed at its exit."""
    found = {}
    atexit.register(lambda: [shutil.rmtree(p, ignore_errors=True) for p in found.values()])
    return found


def _workspace():
    """Where this process keeps its scratch course: its Dask worker's own folder (which
    Dask removes with it), else the temporary folder."""
    try:
        from distributed import get_worker

        return get_worker().local_directory
    except (ImportError, ValueError):  # (not in a Dask worker)
        return tempfile.gettempdir()


def _scratch(kit):
    """This worker's scratch course of kit (made on its first task, an older kit's
    removed): the kit's files, its gradebook (the definitions), and a config of this
    machine's (tools.course.folder.write_config)."""
    from tools.course.folder import write_config

    courses = _courses()
    if kit.digest not in courses:
        for old in list(courses):
            shutil.rmtree(courses.pop(old), ignore_errors=True)
        root = Path(tempfile.mkdtemp(prefix="normlib-worker-", dir=_workspace()))
        put(root, kit.files)
        kit.course.write(root)
        (root / "gradebook.db").write_bytes(kit.definitions)
        write_config(root, kit.course.layout, {
            name: a.student_files for name, a in kit.course.assignments.items()})
        courses[kit.digest] = root
    return courses[kit.digest]


def record_seconds(limits, notebooks, execute):
    """Seconds nbgrader's autograde may take for a submission of this many notebooks:
    limits.record_timeout, and with --execute each notebook's runs on top (its time limit
    and two kernel starts: the first, and one restart under way as it ends)."""
    runs = limits.notebook_timeout + 2 * limits.startup_timeout if execute else 0
    return limits.record_timeout + notebooks * runs


def _autograde(root, kit, assignment, student, staging, limits, execute, sandboxed,
               notebooks=1):
    """nbgrader's autograde of one staged submission into the scratch gradebook, in this
    process (a command would import nbgrader again for every task: 2 s), with the course's
    config (kit.config), within record_seconds (tools/course/deadline.py); (its log, why
    it did not end in time or None)."""
    from nbgrader.converters import Autograde
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config import Config

    from tools.course.settings import config

    nbgrader_config = config(root)
    nbgrader_config.merge(kit.config)
    nbgrader_config.merge(Config({
        "CourseDirectory": {"root": str(root), "submitted_directory": str(staging),
                            "db_url": f"sqlite:///{root / 'gradebook.db'}",  # (whatever
                            "assignment_id": assignment, "student_id": student},  # the env)
        "Judged": {"verdicts": str(root / "verdicts.json")},
        "Grading": {**dataclasses.asdict(limits), "protected": list(limits.protected)},
        "GradingExecute": {"enabled": execute, "sandboxed": sandboxed}}))
    text = io.StringIO()
    log = logging.getLogger(f"normlib.grading.{assignment}.{student}")
    log.propagate, log.handlers = False, [logging.StreamHandler(text)]
    log.setLevel(logging.INFO)
    app = Autograde(coursedir=CourseDirectory(config=nbgrader_config), config=nbgrader_config,
                    log=log)
    app.force, app.create_student = True, True
    seconds, late = record_seconds(limits, notebooks, execute), None
    try:
        with deadline(seconds):
            app.start()
    except TimeUp:
        late = (f"nbgrader's autograde ran over its {seconds} s limit (c.Grading."
                "record_timeout): nothing of its notebooks was recorded")
        log.error("autograde stopped: %s", late)
    except Exception as error:  # (nbgrader's failures are its own: the submission's status)
        log.error("autograde failed: %s: %s", type(error).__name__, error)
    return text.getvalue(), late


def _nbgrader_record(root, assignment, student):
    """nbgrader's record of the submission in the scratch gradebook: ({(notebook, grade_id):
    auto_score}, {(notebook, grade_id): auto_comment}, {notebook: late_submission_penalty});
    all empty if it recorded none."""
    from nbgrader.api import Gradebook, MissingEntry

    grades, comments, penalties = {}, {}, {}
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        try:
            submission = gb.find_submission(assignment, student)
        except MissingEntry:
            return grades, comments, penalties
        for notebook in submission.notebooks:
            penalties[notebook.name] = notebook.late_submission_penalty
            for g in notebook.grades:
                grades[notebook.name, g.name] = g.auto_score
            for c in notebook.comments:
                comments[notebook.name, c.name] = c.auto_comment
    return grades, comments, penalties


def _forget_record(root, assignment, student):
    """What nbgrader's autograde recorded of the submission in the scratch course (its
    autograded folder, its gradebook record), as if it had recorded nothing."""
    from nbgrader.api import Gradebook, MissingEntry

    shutil.rmtree(submission_folder(root, student, assignment, "autograded"),
                  ignore_errors=True)
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        try:
            gb.remove_submission(assignment, student)
        except MissingEntry:
            pass


def _forget(root, assignment, student):
    """The submission out of the scratch course: its folders and its gradebook record."""

    for step in ("submitted", "staging"):
        shutil.rmtree(submission_folder(root, student, assignment, step), ignore_errors=True)
    (root / "verdicts.json").unlink(missing_ok=True)
    _forget_record(root, assignment, student)
