"""Autograde: each new or changed submission graded once, by the judge, on a Dask cluster.

    python -m tools.instructor autograde ROOT [ASSIGNMENT ...] [--student ID ...] [--force]
        [--execute] [--jobs N] [--scheduler tcp://HOST:8786] [--timeout S] [--no-sandbox]

pending() picks what to grade: collected since its last grading, or its files changed
(--student: these students'; --force: all). Each is one task carrying its files
(tools/worker/task.py) to a worker of the cluster (tools/instructor/cluster.py). The judge
grades its normlib files: student code runs only in the judge's sandboxed runner, and the
verdicts are the grade. nbgrader's autograde then records its notebooks as submitted, each
check with its verdict (--execute runs them first, in the OS sandbox). This process alone
writes the course (save: the autograded folder, the gradebook), each result once. Prints
each submission's score and status; docs/instructors.md, step 4, has the details.
"""

import datetime
import hashlib
import json
import os
import pickle
import sys
from pathlib import Path

from tools.course.exercises import maximum, of_notebooks, questions_of
from tools.course.folder import (
    SECRET,
    TIMESTAMP,
    Course,
    files_of,
    put,
    submission_folder,
    submissions,
)
from tools.course.settings import BUSY, config, read
from tools.instructor import gradebook
from tools.instructor.cluster import client
from tools.instructor.collect import submitted_at_of
from tools.worker import task
from tools.worker.stage import answers

JOBS = os.cpu_count() or 1
NBGRADER = (TIMESTAMP, SECRET)  # nbgrader's files of a submission
MiB = 1 << 20


def pending(root, course, names=(), students=(), force=False):
    """({assignment: [student]} of the submissions to grade, how many are left as graded):
    those never graded, whose files changed since (a resubmission), or whose grading a busy
    machine cut short (BUSY in its status); every one of these students' (all if force)."""
    done = gradebook.graded(root)
    todo, unchanged = {}, 0
    for assignment, group in submissions(root, course, names).items():
        for student in group:
            if students and student not in students:
                continue
            known = done.get((assignment, student))
            if force or students or known is None or BUSY in known.status or \
                    known.digest != gradebook.digest(submission_folder(root, student,
                                                                       assignment)):
                todo.setdefault(assignment, []).append(student)
            else:
                unchanged += 1
    return todo, unchanged


def make_kit(root, course, names):
    """The course as a grading worker needs it for these assignments (tools.worker.task.Kit)."""
    files = {f"source/{name}/{rel}": data for name in names
             for rel, data in files_of(Path(root) / "source" / name).items()}
    definitions = gradebook.definitions(root)
    nbgrader_config = config(root)
    nbgrader_config.CourseDirectory.pop("db_url", None)  # (which may hold a password)
    code = task.code_digest()
    sha = hashlib.sha256(json.dumps(course.to_json(), sort_keys=True).encode() + definitions +
                         pickle.dumps(nbgrader_config) + code.encode())
    for rel, data in files.items():
        sha.update(rel.encode() + hashlib.sha256(data).digest())
    return task.Kit(course, files, definitions, nbgrader_config, code, sha.hexdigest())


def tasks(root, todo, limits, execute, sandboxed):
    """(one Task (tools/worker/task.py) per submission of todo, [(assignment, student, why
    not)]). A task carries the submission's files, read once here, with their digest and
    submission time: what save records with their scores, whatever collect puts in the
    folder meanwhile (graded by the next run)."""
    found, refused = [], []
    for assignment, students in sorted(todo.items()):
        for student in students:
            files = files_of(submission_folder(root, student, assignment))
            try:
                when = submitted_at_of(files)
            except ValueError as error:
                refused.append((assignment, student, str(error)))
                continue
            found.append(task.Task(assignment, student, files, gradebook.digest_of(files),
                                   limits, execute, sandboxed, when))
    return found, refused


def save(root, course, outcome, sent):
    """An Outcome of the Task sent into the course, by this process alone: its autograded
    folder replaced, nbgrader's record of it and the judge's scores into the gradebook (a
    changed written answer's hand grade dropped, an unreadable notebook's answers scored 0
    with why: written_answer), its status, and the digest and submission time of the files
    the task carried. Returns (the status, "score / max")."""
    a, s = sent.assignment, sent.student
    if (outcome.assignment, outcome.student, outcome.digest) != (a, s, sent.digest):
        raise ValueError(f"the worker {outcome.worker} answered for another submission or "
                         f"other files ({outcome.assignment} {outcome.student}, files "
                         f"{outcome.digest[:12]}; sent: {a} {s}, files {sent.digest[:12]})")
    root = Path(root)
    plan = course.assignments[a]
    graded = submission_folder(root, s, a, "autograded")
    before = answers(graded, plan.notebooks)
    write_autograded(root, outcome, sent)
    now = answers(graded, plan.notebooks)
    why = list(outcome.notes)
    with gradebook.connect(root) as gb:
        checks = of_notebooks(plan.notebooks)
        submission = save_to_nbgrader(gb, outcome, sent.submitted_at,
                                      {e.grade_id for e in checks})
        for e in checks:  # each check's row, written once: the judge's verdict is its score
            verdict = outcome.verdicts.get(e.grade_id)  # (none: the judge failed)
            grade = gb.find_grade(e.grade_id, e.notebook, a, s)
            grade.auto_score = e.points if verdict is not None and verdict.passed else 0
            grade.needs_manual_grade = grade.manual_score is not None
        for q in questions_of(plan.notebooks):
            grade = gb.find_grade(q.grade_id, q.notebook, a, s)
            comment = gb.find_comment(q.grade_id, q.notebook, a, s)
            if written_answer(grade, comment, outcome.unreadable.get(q.notebook),
                              before.get(q.grade_id), now.get(q.grade_id)):
                why.append(f"answer {q.number} changed: its hand grade was dropped")
        gb.db.commit()
        score = f"{submission.score:g} / {maximum(plan.notebooks):g}"
    if outcome.missing:
        why.append("missing " + ", ".join(outcome.missing))
    busy = [e.number for e in checks if BUSY in getattr(outcome.verdicts.get(e.grade_id),
                                                         "text", "")]
    if busy:  # (0 points until graded again: the next make autograde does)
        why.append(f"{BUSY} (Exercise {', '.join(busy)}: make autograde grades it again)")
    status = f"failed: {outcome.error}" if outcome.error else \
        "; ".join(["graded", *why]) if why else "graded"
    gradebook.set_graded(root, {(a, s): (status, sent.digest)})
    return status, score


UNREADABLE = "0 points: "  # how autograde's comment on an unreadable notebook's answer begins


def written_answer(grade, comment, unreadable, before, now):
    """A written answer's grade and comment (nbgrader's) after its notebook is graded
    again; before, now: its text in the autograded notebook (None: none). Returns whether
    a hand grade was dropped because the answer changed.

    - its notebook could not be read (unreadable: why): 0 points, final (a manual score,
      which formgrader shows and a grader may change), and a comment saying why; a score
      given to the same unreadable file before (its text, which names the file's digest,
      as it was) is kept: a grader's override survives grading again;
    - it was such an answer, and is read now: its 0 and comment are gone (a grader's
      override of them too: the answer is new);
    - its text changed since a grader scored it: the hand grade is dropped."""
    ours = (comment.manual_comment or "").startswith(UNREADABLE)
    if unreadable is not None:
        if before != now or grade.manual_score is None:
            grade.manual_score = 0
            comment.manual_comment = f"{UNREADABLE}{unreadable}. A grader may change this score."
        grade.needs_manual_grade = False
    elif ours:
        grade.manual_score, grade.needs_manual_grade = None, grade.auto_score is None
        comment.manual_comment = None
    elif before is not None and before != now and grade.manual_score is not None:
        grade.manual_score, grade.needs_manual_grade = None, True
        return True
    return False


def write_autograded(root, outcome, sent):
    """The outcome's autograded/<student>/<assignment>/ in place of the one before: its
    notebooks, beside nbgrader's files of the submission that the task sent (NBGRADER:
    feedback through the exchange reads them), and nbgrader's log of it in logs/autograde/.
    A file that is not a notebook at the folder's top, or a path that would leave it (a
    worker's result is trusted no further), stops it."""
    strays = sorted(rel for rel in outcome.autograded if "/" in rel or not rel.endswith(".ipynb"))
    if strays:
        raise ValueError(f"the worker {outcome.worker} returned files that are not notebooks: "
                         f"{', '.join(map(repr, strays[:3]))}")
    put(submission_folder(root, outcome.student, outcome.assignment, "autograded"),
        {**outcome.autograded, **{n: sent.files[n] for n in NBGRADER if n in sent.files}},
        replace=True)
    logs = root / "logs" / "autograde"
    logs.mkdir(parents=True, exist_ok=True)
    (logs / f"{outcome.assignment}-{outcome.student}.log").write_text(
        f"graded by {outcome.worker}\n{outcome.log}")


def save_to_nbgrader(gb, outcome, when, checks):
    """nbgrader's record of an outcome into the gradebook gb, as its autograde leaves it:
    the submission and its time (when: its files' time, or None), each cell's auto score
    (needing a grader's look where it has none, or had a hand grade: SaveAutoGrades's
    rule) but the checks' (their grade_ids: save writes those from the verdicts alone) and
    auto comment, each notebook's late penalty. Returns the submission."""
    a, s = outcome.assignment, outcome.student
    gb.update_or_create_student(s)
    submission = gb.update_or_create_submission(a, s, **({} if when is None else {
        "timestamp": when.astimezone(datetime.timezone.utc).replace(tzinfo=None)}))
    for notebook in submission.notebooks:
        if notebook.name in outcome.penalties:
            notebook.late_submission_penalty = outcome.penalties[notebook.name]
        for c in notebook.comments:
            if (notebook.name, c.name) in outcome.comments:
                c.auto_comment = outcome.comments[notebook.name, c.name]
        for g in notebook.grades:
            if g.name not in checks and (notebook.name, g.name) in outcome.scores:
                g.auto_score = outcome.scores[notebook.name, g.name]
                g.needs_manual_grade = g.manual_score is not None or g.auto_score is None
    return submission


def not_graded(assignment, student, why):
    print(f"{assignment} {student}: NOT GRADED ({why})", flush=True)


def due_dates(root, settings):
    """The course's due dates (c.Grading.due) into the gradebook, where nbgrader reads
    them (a submission's lateness, formgrader)."""
    with gradebook.connect(root) as gb:
        for assignment, when in settings.due.items():
            utc = when.astimezone(datetime.timezone.utc).replace(tzinfo=None)
            gb.update_or_create_assignment(assignment, duedate=utc)


def autograde(root, names=(), jobs=JOBS, timeout=None, force=False, students=(),
              execute=False, sandboxed=True, scheduler=None):
    """Grade what is new (see the module's docstring); returns how many submissions could
    not be graded (the judge failed, or no worker would grade them)."""
    from distributed import as_completed

    if not sandboxed and scheduler:
        sys.exit("autograde: --no-sandbox grades on this machine only (without a scheduler): "
                 "a cluster's workers always grade in the OS sandbox")
    problem = task.sandbox_problem() if sandboxed and not scheduler else None
    if problem:
        sys.exit(f"autograde: no sandbox here, so nothing was graded: {problem}")
    settings, course = read(root, timeout), Course.load(root)
    known = {s for group in submissions(root, course, names).values() for s in group}
    unknown = sorted(set(students) - known)
    if unknown:
        sys.exit(f"autograde: no submission of {', '.join(unknown)} (collected: "
                 f"{', '.join(sorted(known)) or 'none'})")
    todo, unchanged = pending(root, course, names, students, force)
    limits = settings.limits
    print(f"limits: {limits.timeout} s per check, {limits.memory_mb} MiB per process, "
          f"files up to {limits.file_mb} MiB, nbgrader's record {limits.record_timeout} s" + (
              f"; outputs kept up to {limits.output_bytes / MiB:g} MiB each, "
              f"{limits.cell_output_bytes / MiB:g} MiB a cell, "
              f"{limits.notebook_output_bytes / MiB:g} MiB a notebook" if execute else ""))
    total = sum(map(len, todo.values()))
    print(f"{total} submission{'s' * (total != 1)} to grade" + (
        f"; {unchanged} unchanged since graded (--force grades them again)" if unchanged
        else ""), flush=True)
    if not total:
        return 0
    if execute:  # matplotlib's font cache, which the sandboxed kernels read
        import matplotlib.font_manager  # noqa: F401
    due_dates(root, settings)
    statuses = {}
    with client(scheduler, jobs) as dask:
        # the kit as a task's result, not scattered data: Dask makes it again if every
        # worker holding it is lost
        kit = make_kit(root, course, sorted(todo))
        shared = dask.submit(task.kept, kit, key=f"kit-{kit.digest}")
        # started in the order listed (each assignment's students, sorted): without a
        # priority, Dask's workers start theirs in an order of their own
        listed, refused = tasks(root, todo, limits, execute, sandboxed)
        for assignment, student, why in refused:
            not_graded(assignment, student, why)
        futures = {dask.submit(task.grade, shared, one, pure=False,
                               priority=len(listed) - i,  # (Dask: the highest first)
                               key=f"grade-{one.assignment}-{one.student}-"
                                   f"{one.digest[:12]}-{kit.digest[:8]}"):
                   one for i, one in enumerate(listed)}
        for future in as_completed(futures):
            sent = futures[future]
            assignment, student = sent.assignment, sent.student
            try:  # refused, its workers died again and again, or a result out of bounds
                outcome = future.result()
                status, score = save(root, course, outcome, sent)
            except Exception as error:
                refused.append((assignment, student, f"{type(error).__name__}: {error}"))
                not_graded(*refused[-1])
                continue
            statuses[assignment, student] = status
            print(f"{assignment} {student}: {score} ({status})", flush=True)
    failed = sum(status.startswith("failed") for status in statuses.values()) + len(refused)
    print(f"{total - failed} of {total} submissions graded" + (
        f" on the cluster at {scheduler}" if scheduler else f" with {jobs} jobs"))
    if refused:
        print(f"{len(refused)} not graded (above), left for the next make autograde")
    return failed
