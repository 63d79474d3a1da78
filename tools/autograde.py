"""Autograde: every new or changed submission graded once, by the judge.

    python -m tools.instructor autograde ROOT [ASSIGNMENT ...] [--student ID ...] [--force]
                                         [--execute] [--jobs N] [--timeout S] [--no-sandbox]

For each submission to grade (collected since its last grading, or whose files changed:
a resubmission; --student: these students'; --force: every one):

1. the judge grades its normlib files (tools/verdicts.py): student code runs only in the
   judge's sandboxed worker, and the verdicts are the grade;
2. nbgrader's autograde records its notebooks as submitted, with each check's verdict in
   its cell (tools/preprocessors.Judged) and its written answers for hand grading; it
   reads them from a staging copy where a notebook saved under another name is put back
   under its own (its cells say which it is) and an unreadable one is left out, each
   noted in the status (with --execute, the notebooks run first, in the OS sandbox: fresh
   outputs, the same scores);
3. the gradebook gets the judge's scores, the status and the digest of the files graded,
   in one place (tools/gradebook.py); a written answer whose text changed since it was
   graded by hand loses that grade and waits for a grader again.

Submissions are graded `jobs` at a time, in shards: one nbgrader process and one judge
process per shard. Prints each submission's score and status; returns how many the judge
could not grade.
"""

import datetime
import json
import os
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tools import gradebook, sandbox
from tools.collect import recorded_at
from tools.course import gradebook_url, load_course, nbgrader, submissions
from tools.exercises import of_notebooks, questions_of
from tools.settings import read
from tools.verdicts import verdicts

JOBS = os.cpu_count() or 1


def pending(root, names=(), students=(), force=False):
    """({assignment: [student]} of the submissions to grade, {(assignment, student): the
    digest of its files now}, how many are left as graded): those never graded, or whose
    files changed since (a resubmission); every one of these students' (all if force)."""
    done = gradebook.graded(root)
    todo, digests, unchanged = {}, {}, 0
    for assignment, group in submissions(root, names).items():
        for student in group:
            if students and student not in students:
                continue
            sha = gradebook.digest(Path(root) / "submitted" / student / assignment)
            known = done.get((assignment, student))
            if force or students or known is None or known.digest != sha:
                todo.setdefault(assignment, []).append(student)
                digests[assignment, student] = sha
            else:
                unchanged += 1
    return todo, digests, unchanged


def shards(todo, jobs):
    """The students in up to `jobs` groups with about as many submissions each: each group
    is graded by one nbgrader process and one judge (whose start, a few seconds, is then
    paid once per group rather than once per submission)."""
    count = {}
    for students in todo.values():
        for student in students:
            count[student] = count.get(student, 0) + 1
    groups = [[] for _ in range(max(1, min(jobs, len(count))))]
    for student in sorted(count, key=lambda s: (-count[s], s)):
        min(groups, key=lambda g: sum(count[s] for s in g)).append(student)
    return [sorted(g) for g in groups if g]


def answers(folder, stems):
    """{grade_id: text} of the written answers in a submission's notebooks (folder), as
    nbgrader last recorded them ({} if none)."""
    import nbformat

    found = {}
    for stem in stems:
        path = Path(folder) / f"{stem}.ipynb"
        if path.is_file():
            for cell in nbformat.read(path, as_version=4).cells:
                meta = cell.metadata.get("nbgrader", {})
                if cell.cell_type == "markdown" and meta.get("solution") and meta.get("grade"):
                    found[meta["grade_id"]] = cell.source
    return found


def stage(submitted, stems, staging):
    """Copy a submission (submitted/<student>/<assignment>/) to staging for nbgrader: a
    notebook saved under another name put back under its own, an unreadable one left
    out, a graded cell pasted twice read once. Returns (notes for the status, stems of the
    notebooks left out unreadable)."""
    import nbformat

    notes, unreadable, ids = [], [], {}
    staging.mkdir(parents=True)
    for path in sorted(Path(submitted).rglob("*")):
        if path.is_file() and path.suffix != ".ipynb":
            (staging / path.relative_to(submitted)).parent.mkdir(parents=True, exist_ok=True)
            (staging / path.relative_to(submitted)).write_bytes(path.read_bytes())
    for path in sorted(Path(submitted).glob("*.ipynb")):
        try:
            nb = nbformat.read(path, as_version=4)
        except Exception as error:
            if path.stem in stems:
                unreadable.append(path.stem)
                notes.append(f"{path.name}: not a readable notebook ({type(error).__name__}): "
                             "its written answers wait for a grader")
            continue
        ids[path] = {c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells} - {None}
        if path.stem in stems:
            twice = dedupe(nb)
            if twice:
                notes.append(f"{path.name}: a graded cell appears twice ({', '.join(twice)}): "
                             "the later copy is read as an ordinary cell")
            nbformat.write(nb, staging / path.name)
    reference = {stem: set(ids_of(stem)) for stem in stems}
    for stem in stems:
        if (Path(submitted) / f"{stem}.ipynb").exists():
            continue
        found = [p for p, have in ids.items() if p.stem not in stems and have & reference[stem]]
        if len(found) == 1:
            (staging / f"{stem}.ipynb").write_bytes(found[0].read_bytes())
            notes.append(f"{found[0].name} graded as {stem}.ipynb")
        else:
            others = sorted(p.name for p in ids if p.stem not in stems)
            notes.append(f"no {stem}.ipynb" + (f" (found {', '.join(others)})" if others else ""))
    return notes, unreadable


def dedupe(nb):
    """Strip the nbgrader metadata of every graded cell after the first with its grade id
    (a cell copied and pasted in JupyterLab), which nbgrader cannot grade; their ids."""
    seen, twice = set(), []
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id is not None and grade_id in seen:
            del cell.metadata["nbgrader"]
            twice.append(grade_id)
        seen.add(grade_id)
    return sorted(set(twice))


def ids_of(stem):
    """The grade ids of a course notebook's graded cells (checks and written answers)."""
    return [e.grade_id for e in of_notebooks([stem])] + [q.grade_id for q in questions_of([stem])]


def grade_shard(root, todo, digests, students, settings, execute=False, env=None,
                sandboxed=True):
    """Grade these students' submissions of todo ({assignment: [student]}, whose files had
    these digests when they were chosen): see the module's docstring. Returns
    {(assignment, student): status}."""
    plan = load_course(root)["assignments"]
    mine = [(a, s) for a, group in todo.items() for s in group if s in students]
    judged, notes, unreadable, before = {}, {}, {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        staging = Path(tmp) / "submitted"
        for a, s in mine:
            try:
                judged[a, s] = (*verdicts(root, a, s, settings.limits, env, sandboxed), None)
            except Exception as error:  # (one submission's failure is its own)
                judged[a, s] = ({}, None, f"{type(error).__name__}: {error}")
            stems = plan[a]["notebooks"]
            notes[a, s], unreadable[a, s] = stage(Path(root) / "submitted" / s / a, stems,
                                                  staging / s / a)
            before[a, s] = answers(Path(root) / "autograded" / s / a, stems)
        found = {a: {} for a, _ in mine}
        for (a, s), result in judged.items():
            found[a][s] = {g: list(v) for g, v in result[0].items()}
        (Path(tmp) / "verdicts.json").write_text(json.dumps(found))
        args = ["--force", f"--CourseDirectory.submitted_directory={staging}",
                f"--Judged.verdicts={Path(tmp) / 'verdicts.json'}",
                f"--Grading.timeout={settings.limits.timeout}"]
        if execute:
            args += ["--GradingExecute.enabled=True"] + \
                ([] if sandboxed else ["--GradingExecute.sandboxed=False"])
        log = [nbgrader(root, "autograde", a, *args, check=False, env=env)
               for a in sorted({a for a, _ in mine})]
    path = Path(root) / "logs" / f"autograde-{students[0]}.log"
    path.parent.mkdir(exist_ok=True)
    path.write_text("".join(r.stdout + r.stderr for r in log))
    for a, s in mine:  # (nbgrader's failures are its own: a submission's, in its status)
        if not (Path(root) / "autograded" / s / a).is_dir():
            notes[a, s].append(f"nbgrader recorded no notebook of it, so it has no feedback "
                               f"page (logs/{path.name})")
    return save(root, judged, notes, unreadable, before, digests)


def save(root, judged, notes, unreadable, before, digests):
    """The judge's scores, the statuses and the digests (of the files as they were chosen
    for grading) into the gradebook; a changed written answer's hand grade dropped; an
    unreadable notebook's answers left to a grader (nbgrader scored them 0). Returns
    {(assignment, student): status}."""
    from nbgrader.api import Gradebook

    plan = load_course(root)["assignments"]
    statuses = {}
    with Gradebook(gradebook_url(root)) as gb:
        for (a, s), result in judged.items():
            found, missing, error = result
            when = recorded_at(Path(root) / "submitted" / s / a)  # (nbgrader's, unless it
            gb.update_or_create_submission(a, s, **({} if when is None else {  # could not
                "timestamp": when.astimezone(datetime.timezone.utc).replace(tzinfo=None)}))
            why = list(notes[a, s])
            for e in of_notebooks(plan[a]["notebooks"]):
                grade = gb.find_grade(e.grade_id, e.notebook, a, s)
                grade.auto_score = e.points if found.get(e.grade_id, (False,))[0] else 0
                grade.needs_manual_grade = grade.manual_score is not None
            now = answers(Path(root) / "autograded" / s / a, plan[a]["notebooks"])
            for q in questions_of(plan[a]["notebooks"]):
                grade = gb.find_grade(q.grade_id, q.notebook, a, s)
                if q.notebook in unreadable[a, s]:
                    grade.auto_score, grade.needs_manual_grade = None, True
                elif q.grade_id in before[a, s] and before[a, s][q.grade_id] != now.get(
                        q.grade_id) and grade.manual_score is not None:
                    grade.manual_score, grade.needs_manual_grade = None, True
                    why.append(f"answer {q.number} changed: its hand grade was dropped")
            if missing:
                why.append("missing " + ", ".join(missing))
            statuses[a, s] = f"failed: {error}" if error else \
                "; ".join(["graded", *why]) if why else "graded"
        gb.db.commit()
    gradebook.record(root, {k: (status, digests[k]) for k, status in statuses.items()})
    return statuses


def due_dates(root, settings):
    """The course's due dates (c.Grading.due) into the gradebook, where nbgrader reads
    them (a submission's lateness, formgrader)."""
    from nbgrader.api import Gradebook

    with Gradebook(gradebook_url(root)) as gb:
        for assignment, when in settings.due.items():
            utc = when.astimezone(datetime.timezone.utc).replace(tzinfo=None)
            gb.update_or_create_assignment(assignment, duedate=utc)


def autograde(root, names=(), jobs=JOBS, timeout=None, force=False, students=(),
              execute=False, sandboxed=True):
    """Grade what is new (see the module's docstring); returns how many submissions the
    judge could not grade."""
    if sandboxed and not sandbox.bwrap():
        sys.exit(f"autograde: bubblewrap (bwrap) is not installed. {sandbox.INSTALL}.")
    from nbgrader.api import Gradebook

    settings = read(root, timeout)
    known = {s for group in submissions(root, names).values() for s in group}
    unknown = sorted(set(students) - known)
    if unknown:
        sys.exit(f"autograde: no submission of {', '.join(unknown)} (collected: "
                 f"{', '.join(sorted(known)) or 'none'})")
    todo, digests, unchanged = pending(root, names, students, force)
    limits = settings.limits
    print(f"limits: {limits.timeout} s per check, {limits.memory_mb} MiB per process, "
          f"files up to {limits.file_mb} MiB")
    total = sum(map(len, todo.values()))
    print(f"{total} submission{'s' * (total != 1)} to grade" + (
        f"; {unchanged} unchanged since graded (--force grades them again)" if unchanged
        else ""))
    if execute:  # matplotlib's font cache, which the sandboxed kernels read
        import matplotlib.font_manager  # noqa: F401
    with Gradebook(gradebook_url(root)) as gb:  # once, so that no two processes race
        for student in sorted({s for group in todo.values() for s in group}):
            gb.update_or_create_student(student)
    due_dates(root, settings)
    # one NumPy/torch thread each: a judge waits on its worker, which waits on the judge,
    # and an idle thread pool spins on a core the other one needs (measured: one job with
    # two threads spent over 3 s more a whole-course submission in torch's autograd)
    env = sandbox.threads(1)
    statuses = {}
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(grade_shard, root, todo, digests, group, settings, execute,
                               env, sandboxed) for group in shards(todo, jobs)]
        for future in futures:
            for (assignment, student), status in sorted(future.result().items()):
                statuses[assignment, student] = status
                with Gradebook(gradebook_url(root)) as gb:
                    s = gb.find_submission(assignment, student)
                    score = f"{s.score:g} / {s.max_score:g}"
                print(f"{assignment} {student}: {score} ({status})")
    failed = sum(status.startswith("failed") for status in statuses.values())
    print(f"{total - failed} of {total} submissions graded with {jobs} jobs")
    return failed
