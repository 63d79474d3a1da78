"""The instructor's commands, one per step, from the repository to grades and feedback
(the Makefile's course, release, collect, autograde, feedback and grades targets).

    python -m tools.instructor build     ROOT [--layout unit|course]
    python -m tools.instructor release   ROOT [ASSIGNMENT ...] [--exchange]
    python -m tools.instructor collect   ROOT [ASSIGNMENT ...] [--exchange]
    python -m tools.instructor autograde ROOT [ASSIGNMENT ...] [--jobs N] [--timeout S] [--force]
                                         [--no-sandbox]
    python -m tools.instructor feedback  ROOT [ASSIGNMENT ...] [--exchange]
    python -m tools.instructor export    ROOT [--out FILE]
    python -m tools.instructor bench     [--students N] [--jobs N]  (whole-course layout)

No ASSIGNMENT means every assignment of the course. nbgrader does the work; this adds
the course's checks around it (the release scanned for solutions, each submission graded
in its own process and graded by the judge, per-exercise points in the CSV).
Grading limits (c.GradingExecute.timeout, memory_mb, ... in ROOT/nbgrader_config_local.py,
--timeout over it) hold in the notebook run and the judge's worker alike.
"""

import argparse
import contextlib
import csv
import io
import json
import os
import re
import shutil
import sys
import tempfile
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePosixPath

from tools.course import (
    COURSE,
    LAYOUTS,
    build_course,
    gradebook_url,
    grading_limits,
    load_course,
    nbgrader,
    threads,
)
from tools.exercises import of_notebooks, questions_of
from tools.judge import box
from tools.recheck import recheck
from tools.student import leaks
from tools.synthetic import honest_class

JOBS = os.cpu_count() or 1
STATUS = "grading_status.json"  # {assignment: {student: status}}, written by autograde


def _assignments(root, names):
    known = list(load_course(root)["assignments"])
    unknown = [name for name in names if name not in known]
    if unknown:
        sys.exit(f"no assignment {', '.join(unknown)} in {root} (it has {', '.join(known)})")
    return names or known


def _run(root, *args):
    """An nbgrader command that must succeed: its log on failure, and exit."""
    result = nbgrader(root, *args, check=False)
    if result.returncode != 0:
        sys.exit(f"nbgrader {' '.join(args)} failed:\n{result.stdout}{result.stderr}")
    return result


def _each(step, names, jobs=JOBS):
    """step(name) for every assignment, `jobs` at a time (nbgrader processes; SQLite waits
    for its lock), in order of the names for what they print."""
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for message in list(pool.map(step, names)):
            print(message)


def _targets(root, names):
    """The assignment arguments of nbgrader commands over these assignments: ["*"] (one
    process for all of them) when they are all the course's, else one per assignment."""
    return ["*"] if set(names) == set(load_course(root)["assignments"]) else list(names)


def release(root, names=(), exchange=False):
    """Generate each assignment's release (release/<assignment>/, what students get), fail
    if any file there holds a solution, hidden test or stored output, and with exchange
    copy it to the nbgrader exchange (c.Exchange.root in nbgrader_config_local.py)."""
    names = _assignments(root, names)
    for target in _targets(root, names):
        _run(root, "generate_assignment", target, "--force")
    for name in names:
        problems = leaks(Path(root) / "release" / name, folders=(".",))
        if problems:
            sys.exit(f"release/{name} leaks the solutions:\n" + "\n".join(problems))
        if exchange:
            _run(root, "release_assignment", name, "--force")
        print(f"released {name}: release/{name}/" + (" and the exchange" if exchange else ""))


def collect(root, names=(), exchange=False):
    """Submissions into submitted/<student>/<assignment>/: from the LMS zips in
    downloaded/<assignment>/archive/ (see nbgrader_config.py for the naming), or from
    the nbgrader exchange."""
    def step(name):
        archive, rejected = Path(root) / "downloaded" / name / "archive", []
        if exchange:
            _run(root, "collect", name, "--update")
        elif archive.is_dir():
            rejected = [f"{name}: {zip_name} (student {student}) not collected: {reason}; "
                        f"moved to downloaded/{name}/rejected/"
                        for zip_name, student, reason in screen_archive(root, name)]
            if any(archive.iterdir()):
                _run(root, "zip_collect", name, "--force")
        else:
            return f"{name}: nothing to collect (no downloaded/{name}/archive/)"
        students = submissions(root, [name])[name]
        plural = "" if len(students) == 1 else "s"
        return "\n".join([*rejected, f"collected {name}: {len(students)} submission{plural} "
                                      f"({', '.join(students)})"])
    _each(step, _assignments(root, names))


def zip_student(zip_name):
    """The student id of an LMS zip's name, "<student_id>_<anything>.zip" (as
    nbgrader_config.py's collector reads it from the extracted folder)."""
    return re.match(r"[^_]*", Path(zip_name).stem).group(0)


def zip_problem(path):
    """Why a zip cannot be collected (None if it can): unreadable, or an entry whose path
    would leave the extraction folder."""
    try:
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
            bad = z.testzip()
    except (zipfile.BadZipFile, OSError, UnicodeDecodeError, ValueError) as error:
        return f"not a readable zip ({type(error).__name__}: {error})"
    if bad is not None:
        return f"a corrupt entry ({bad})"
    for entry in names:
        parts = PurePosixPath(entry.replace("\\", "/")).parts
        if entry.startswith(("/", "\\")) or ".." in parts or (parts and ":" in parts[0]):
            return f"an entry outside its folder ({entry!r})"
    return None


def screen_archive(root, name):
    """Move the zips of downloaded/<name>/archive/ that cannot be collected to
    downloaded/<name>/rejected/, so that nbgrader's zip_collect (which stops at the first
    bad one) collects every other student: unreadable or unsafe zips, and every zip of a
    student who has more than one (which one counts is the instructor's call). Returns
    (zip name, student, reason) of each one moved."""
    archive = Path(root) / "downloaded" / name / "archive"
    zips = sorted(p for p in archive.iterdir() if p.is_file())
    by_student = {}
    for path in zips:
        by_student.setdefault(zip_student(path.name), []).append(path)
    rejected = []
    for path in zips:
        student = zip_student(path.name)
        others = [p.name for p in by_student[student] if p != path]
        reason = zip_problem(path) or (others and f"{len(others) + 1} zips for this student "
                                       f"(also {', '.join(others)}): keep one")
        if reason:
            rejected.append((path.name, student, reason))
    for zip_name, _, _ in rejected:
        (archive.parent / "rejected").mkdir(exist_ok=True)
        shutil.move(archive / zip_name, archive.parent / "rejected" / zip_name)
    return rejected


def submissions(root, names=()):
    """{assignment: [student, ...]} of every collected submission."""
    return {name: sorted(p.parent.name for p in Path(root).glob(f"submitted/*/{name}")
                         if p.is_dir()) for name in _assignments(root, names)}


def shards(todo, jobs):
    """The students in up to `jobs` groups with about as many submissions each: each group
    is graded by one nbgrader process (whose start, about 3 s, is then paid once per group
    rather than once per submission)."""
    count = {}
    for students in todo.values():
        for student in students:
            count[student] = count.get(student, 0) + 1
    groups = [[] for _ in range(max(1, min(jobs, len(count))))]
    for student in sorted(count, key=lambda s: (-count[s], s)):
        min(groups, key=lambda g: sum(count[s] for s in g)).append(student)
    return [sorted(g) for g in groups if g]


def grade_shard(root, todo, students, limits, force=False, env=None, sandbox=True):
    """Autograde these students' submissions of the assignments in todo ({assignment:
    [student]}) in one nbgrader process per assignment, or one in all (excluding everyone
    else), then grade each with the judge (tools/judge), both under these grading limits (from
    tools.course.grading_limits). Returns {(assignment, student): (status, the notebook's
    disagreements with the judge, or None if the judge could not grade it)}: status is
    "graded", "partly graded: why" (a notebook that nbgrader could not run: its checks
    are graded all the same) or "failed: why". nbgrader's log is in logs/."""
    everyone = {s for group in todo.values() for s in group}
    others = sorted(everyone - set(students))
    # the limits as read (the course's config, the command line's --timeout), given to
    # nbgrader too, so that both runs have the same (protected: from the same config)
    given = [f"--GradingExecute.{name}={value}" for name, value in limits.items()
             if name != "protected"] + ([] if sandbox else ["--GradingExecute.box=False"])
    log = []
    for target in _targets(root, todo):
        args = ["autograde", target, *given,
                *(["--CourseDirectory.student_id_exclude=" + ",".join(others)] if others else []),
                *(["--force"] if force else [])]
        result = nbgrader(root, *args, check=False, env=env)
        log.append(result.stdout + result.stderr)
    path = Path(root) / "logs" / f"autograde-{students[0]}.log"
    path.parent.mkdir(exist_ok=True)
    path.write_text("".join(log))
    graded = {}
    for a, group in todo.items():
        for s in (s for s in group if s in students):
            try:  # the judge needs only the submission's normlib files
                rows = recheck(root, a, s, limits, env, sandbox)
                problems = notebook_problems(root, a, s)
            except Exception as error:  # (one submission's failure is its own)
                zero_scores(root, a, s)  # not the notebook's: its run decides nothing
                graded[a, s] = (f"failed: {type(error).__name__}: {error}", None)
                continue
            graded[a, s] = ("graded" if not problems else "partly graded: " + "; ".join(
                problems) + " (every check graded from normlib/ by the judge)", rows)
    return graded


def notebook_problems(root, assignment, student):
    """Why nbgrader's run of a submission's notebooks is incomplete, one reason per
    notebook (empty if every notebook ran): missing (renamed?), unreadable, or not run."""
    import nbformat

    submitted = Path(root) / "submitted" / student / assignment
    autograded = Path(root) / "autograded" / student / assignment
    stems = load_course(root)["assignments"][assignment]["notebooks"]
    problems = []
    for stem in stems:
        if not (submitted / f"{stem}.ipynb").is_file():
            others = sorted(p.name for p in submitted.glob("*.ipynb") if p.stem not in stems)
            problems.append(f"no {stem}.ipynb" + (f" (found {', '.join(others)})" if others
                                                  else ""))
        elif not (autograded / f"{stem}.ipynb").is_file():
            try:
                nb = nbformat.read(submitted / f"{stem}.ipynb", as_version=4)
            except Exception as error:
                problems.append(f"{stem}.ipynb: not a readable notebook "
                                f"({type(error).__name__})")
                continue
            marks = [c.metadata.get("nbgrader") for c in nb.cells]
            ids = [m.get("grade_id") for m in marks if isinstance(m, dict)]
            twice = sorted({i for i in ids if i and ids.count(i) > 1})
            why = (f"a graded cell appears twice ({', '.join(twice)})" if twice else
                   "nbgrader could not run it (logs/autograde-*.log)")
            problems.append(f"{stem}.ipynb: {why}")
    return problems


def zero_scores(root, assignment, student):
    """Every check of a submission the judge could not grade scores 0 in the gradebook
    (where nbgrader's notebook run had put its own scores)."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(gradebook_url(root)) as gb:
        try:
            submission = gb.find_submission(assignment, student)
        except MissingEntry:
            return
        for notebook in submission.notebooks:
            for grade in notebook.grades:
                grade.auto_score = 0
        gb.db.commit()


def load_statuses(root):
    """{assignment: {student: status}} of ROOT/grading_status.json ({} before autograde)."""
    path = Path(root) / STATUS
    return json.loads(path.read_text()) if path.is_file() else {}


def save_statuses(root, statuses):
    """Merge {(assignment, student): status} into ROOT/grading_status.json (export reads
    it), written whole to a new file that then replaces the old one."""
    path = Path(root) / STATUS
    known = load_statuses(root)
    for (assignment, student), status in statuses.items():
        known.setdefault(assignment, {})[student] = status
    new = path.with_suffix(".new")
    new.write_text(json.dumps(known, indent=1, sort_keys=True) + "\n")
    os.replace(new, path)


def autograde(root, names=(), jobs=JOBS, timeout=None, force=False, sandbox=True):
    """Grade every submission, `jobs` processes at a time, under the course's grading
    limits (with this timeout per cell, if given), the kernels and the judge's workers in
    the OS sandbox (tools/judge/box.py; sandbox=False: without it). Prints each
    submission's score, or its status and why; returns how many could not be graded."""
    if sandbox and not box.bwrap():
        sys.exit(f"autograde: bubblewrap (bwrap) is not installed. {box.INSTALL}.")
    # matplotlib's font cache, built here if missing: the sandboxed kernels read it
    # (tools.grading.font_cache) rather than each building its own
    import matplotlib.font_manager  # noqa: F401
    from nbgrader.api import Gradebook

    todo = submissions(root, names)
    limits = grading_limits(root, timeout=timeout)
    print(f"limits: {limits['timeout']} s per cell, {limits['memory_mb']} MiB per process, "
          f"files up to {limits['file_mb']} MiB (nbgrader and the judge's worker)")
    with Gradebook(gradebook_url(root)) as gb:  # once, so that no two processes race
        for student in sorted({s for students in todo.values() for s in students}):
            gb.update_or_create_student(student)
    env = threads(max(1, JOBS // jobs))
    failed, statuses = 0, {}
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(grade_shard, root, todo, group, limits, force, env, sandbox)
                   for group in shards(todo, jobs)]
        for future in futures:
            for (assignment, student), (status, rows) in future.result().items():
                statuses[assignment, student] = status
                failed += rows is None
                line = status
                if rows is not None:
                    with Gradebook(gradebook_url(root)) as gb:
                        s = gb.find_submission(assignment, student)
                        line = f"{s.score:g} / {s.max_score:g}" + \
                            ("" if status == "graded" else f", {status}")
                print(f"{assignment} {student}: {line}")
                for grade_id, score, clean, detail in rows or []:
                    print(f"    {grade_id}: {score} in the notebook, {clean} by the judge "
                          f"(the judge's score counts): {detail}")
    save_statuses(root, statuses)
    total = sum(map(len, todo.values()))
    print(f"{total - failed} of {total} submissions graded with {jobs} jobs")
    return failed


def feedback(root, names=(), exchange=False):
    """feedback/<student>/<assignment>/*.html for every graded submission (without the
    hidden tests' code: tools/grading.HideHiddenTests), and nothing else there; with
    exchange, released to it."""
    names = _assignments(root, names)
    for target in _targets(root, names):
        _run(root, "generate_feedback", target, "--force")
    for name in names:
        # nbgrader copies every file of autograded/ beside the HTML: the normlib/ graded
        # there (the student's own files, the release copies of the others) is not feedback
        for path in Path(root).glob(f"feedback/*/{name}/**/*"):
            if path.is_file() and path.suffix != ".html":
                path.unlink()
        for path in sorted(Path(root).glob(f"feedback/*/{name}/**/"), reverse=True):
            if path.is_dir() and not any(path.iterdir()):
                path.rmdir()
        if exchange:
            _run(root, "release_feedback", name)
        print(f"feedback for {name}: feedback/*/{name}/")


def export(root, out):
    """One row per student and assignment: whether it was submitted, its status (graded;
    partly graded: why; failed: why; missing: not submitted; and how many written answers
    still wait to be graded by hand), the total, each check's points (blank where the check
    is not part of the assignment; the judge's score, or one set by hand), each written
    answer's points (blank until graded by hand: never a 0 it did not earn; 0 where the
    answer cell was left as released), and the checks whose score was set by hand
    (formgrader's manual score)."""
    from nbgrader.api import Gradebook, MissingEntry

    statuses = load_statuses(root)
    plan = load_course(root)["assignments"]
    checks = {name: of_notebooks(info["notebooks"]) for name, info in plan.items()}
    written = {name: questions_of(info["notebooks"]) for name, info in plan.items()}
    columns = [e.grade_id for cells in checks.values() for e in cells]
    answers = [q.grade_id for qs in written.values() for q in qs]
    with Gradebook(gradebook_url(root)) as gb, open(out, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["assignment", "student_id", "submitted", "status", "score",
                         "max_score", *columns, *answers, "overridden"])
        for name, cells in checks.items():
            for student in sorted(s.id for s in gb.students):
                points, overridden, waiting = {}, [], 0
                for e in cells:
                    try:
                        grade = gb.find_grade(e.grade_id, e.notebook, name, student)
                    except MissingEntry:  # not submitted
                        break
                    points[e.grade_id] = grade.score
                    if grade.manual_score is not None:
                        overridden.append(e.grade_id)
                submitted = bool(points)
                for q in written[name] if submitted else []:
                    try:
                        grade = gb.find_grade(q.grade_id, q.notebook, name, student)
                    except MissingEntry:  # the answer cell was deleted: nothing to grade
                        points[q.grade_id] = 0
                        continue
                    if grade.manual_score is not None:
                        points[q.grade_id] = grade.manual_score
                    elif grade.needs_manual_grade:  # answered: a grader's to score
                        waiting += 1
                    else:  # left as released ("YOUR ANSWER HERE"): nbgrader's 0
                        points[q.grade_id] = grade.auto_score
                status = statuses.get(name, {}).get(student) or \
                    ("graded" if submitted else "missing")
                if waiting:
                    status += f"; {waiting} written answer{'s' * (waiting > 1)} to grade by hand"
                maximum = sum(e.points for e in cells) + sum(q.points for q in written[name])
                writer.writerow([name, student, "yes" if submitted else "no", status,
                                 sum(points.values()), maximum,
                                 *(points.get(c, "") for c in columns + answers),
                                 " ".join(overridden)])
    print(f"grades: {out}")


def bench(students=4, jobs=JOBS):
    """Grade a class of right whole-course submissions (the course layout: every notebook,
    the reference's normlib/ files; tools.synthetic.honest_class) twice, with one job and
    with `jobs`, each in a fresh course, and print submissions per minute: the notebooks'
    runs and the judge's, each in its OS sandbox, under the default grading limits."""
    rates = {}
    for n in (1, jobs):
        with tempfile.TemporaryDirectory() as tmp:
            root = build_course(tmp, layout="course")
            with contextlib.redirect_stdout(io.StringIO()):
                release(root)
                honest_class(root, COURSE, students)
                collect(root)
            start = time.monotonic()
            failed = autograde(root, jobs=n)
            seconds = time.monotonic() - start
            rates[n] = students * 60 / seconds
            print(f"BENCH {students} whole-course submissions, {n} job(s): {seconds:.0f} s, "
                  f"{rates[n]:.2f} submissions/min ({failed} failed)\n")
    print(f"{os.cpu_count()} cores: {rates[1]:.2f} whole-course submissions/min serial, "
          f"{rates[jobs]:.2f} with {jobs} jobs ({rates[jobs] / rates[1]:.2f}x)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    steps = parser.add_subparsers(dest="step", required=True)
    for step in ("build", "release", "collect", "autograde", "feedback", "export"):
        sub = steps.add_parser(step)
        sub.add_argument("root", help="the course folder, e.g. build/course")
        if step == "build":
            sub.add_argument("--layout", choices=LAYOUTS, default="unit")
        elif step == "export":
            sub.add_argument("--out", help="default: ROOT/grades.csv")
        else:
            sub.add_argument("assignments", nargs="*", help="default: all")
        if step in ("release", "collect", "feedback"):
            sub.add_argument("--exchange", action="store_true", help="use the nbgrader exchange")
        if step == "autograde":
            sub.add_argument("--jobs", type=int, default=JOBS, help=f"default {JOBS} (cores)")
            sub.add_argument("--timeout", type=int, help="seconds per cell, in the notebook "
                             "and the judge's worker (default: the course's "
                             "c.GradingExecute.timeout)")
            sub.add_argument("--force", action="store_true", help="re-grade graded ones")
            sub.add_argument("--no-sandbox", action="store_true", help="run the kernels "
                             "and the judge's workers without bubblewrap (only where "
                             "student code may reach everything this user can)")
    sub = steps.add_parser("bench")
    sub.add_argument("--students", type=int, default=4)
    sub.add_argument("--jobs", type=int, default=JOBS)
    args = parser.parse_args(argv)

    if args.step == "bench":
        return bench(args.students, args.jobs)
    root = Path(args.root).resolve()
    if args.step == "build":
        build_course(root, args.layout)
        names = ", ".join(load_course(root)["assignments"])
        print(f"course at {root} ({args.layout} layout): {names}")
    elif args.step == "release":
        release(root, args.assignments, args.exchange)
    elif args.step == "collect":
        collect(root, args.assignments, args.exchange)
    elif args.step == "autograde":
        return 1 if autograde(root, args.assignments, args.jobs, args.timeout, args.force,
                              not args.no_sandbox) else 0
    elif args.step == "feedback":
        feedback(root, args.assignments, args.exchange)
    elif args.step == "export":
        export(root, args.out or root / "grades.csv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
