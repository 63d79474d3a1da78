"""Grades: ROOT/grades.csv, a row per student and released assignment, and the late log.

    python -m tools.instructor grades ROOT [ASSIGNMENT ...] [--out FILE]
        [--lms canvas|moodle|blackboard|brightspace --template EXPORT.csv]

Writes grades.csv from the gradebook and the late policy (tools/course/late.py): when it was
submitted and how late, its status, the raw score, penalty and final score, and each
check's and written answer's points (blank until graded by hand: never an unearned 0);
the late policy's decisions in ROOT/logs/late.csv (other assignments' rows kept); with
--lms, the LMS's filled-in export (tools/instructor/grade_sheet.py). A unit not yet
released is not listed, so never "missing". An extension that names no student stops it:
its student would be penalized. A text cell a spreadsheet would run as a formula gets a "'"
first (cell; docs/security.md, section 6). Columns and statuses: docs/instructors.md, step 6.
"""

import csv
import dataclasses
import datetime
from pathlib import Path

from tools.course import late
from tools.course.exercises import maximum, of_notebooks, questions_of
from tools.course.folder import Course, assignment_names, submission_folder
from tools.course.settings import read
from tools.instructor import grade_sheet, gradebook
from tools.instructor.collect import read_collected
from tools.instructor.release import released
from tools.instructor.roster import read_roster

FORMULA = grade_sheet.FORMULA


def cell(value):
    """A value as grades.csv writes it: a text that a spreadsheet would run as a formula
    prefixed with "'"; numbers (scores, points) as they are."""
    if isinstance(value, str) and value.startswith(FORMULA):
        return "'" + value
    return value


def lms_extension(provenance):
    """The extension the LMS granted a submission (its provenance's, Moodle's worksheet's:
    an aware time), or None."""
    text = provenance.get("extension")
    return datetime.datetime.fromisoformat(text) if text else None


def late_column(decision, provenance, zone):
    """The late column of a submission: the late policy's Decision of it (None: none
    graded) and what collect read of it (tools.instructor.collect.read_collected's, or None).
    Counted as
    the penalty is, from the student's own due date: their extension, said so, where they
    have one (zone: the course's, to show it in)."""
    if decision is None:
        return ""
    if decision.submitted is None:
        words = "late by Canvas's _LATE marker; no time" if provenance and \
            provenance.get("late_marker") else "time unknown"
    elif decision.late is None:  # (no due date)
        return ""
    else:
        words = late.late_words(decision.late) or "on time" * bool(decision.extension)
    if decision.extension:
        words += f" (extension to {late.shown(decision.extension, zone)})"
    return words


@dataclasses.dataclass(frozen=True)
class Row:
    """One student's assignment: its status, grades.csv's cells, the late policy's Decision
    (None without a graded submission), how many written answers wait for a grader, and
    whether a newer submission, collected since it was graded, waits for make autograde."""
    assignment: str
    student: str
    status: str
    cells: list
    decision: late.Decision | None
    waiting: int
    newer: bool = False


def _points(gb, name, student, checks, written):
    """({grade id: points}, [checks overridden], written answers waiting) of a submission."""
    points, overridden, waiting = {}, [], 0
    for e in checks:
        grade = gb.find_grade(e.grade_id, e.notebook, name, student)
        points[e.grade_id] = grade.score
        if grade.manual_score is not None:
            overridden.append(e.grade_id)
    for q in written:
        grade = gb.find_grade(q.grade_id, q.notebook, name, student)
        if grade.manual_score is not None:
            points[q.grade_id] = grade.manual_score
        elif grade.needs_manual_grade:  # answered: a grader's to score
            waiting += 1
        else:  # left as released ("YOUR ANSWER HERE"), or no notebook: 0
            points[q.grade_id] = grade.auto_score
    return points, overridden, waiting


def _newer(root, name, student, submission, known):
    """Whether a submission graded (known: its gradebook.graded status) has a newer one,
    collected since, in submitted/ (its digest is not the one graded)."""
    folder = submission_folder(root, student, name)
    return bool(known and submission and folder.is_dir()
                and gradebook.digest(folder) != known.digest)


def _status(root, name, student, submission, known, waiting, newer):
    """The status column of a student's assignment (docs/instructors.md, step 6)."""
    folder = submission_folder(root, student, name)
    status = known.status if known and submission else \
        "collected, not graded yet (make autograde)" if folder.is_dir() else "missing"
    if newer:
        status += "; a newer submission, collected since, waits for make autograde"
    if waiting:
        status += f"; {waiting} written answer{'s' * (waiting > 1)} to grade by hand"
    return status


def table(root, gb, names, settings, students, plan, provenances, maxima):
    """(grades.csv's header, [Row]) of these assignments, for these students, from the
    gradebook gb, the course's plan (course.json's assignments), what collect read of each
    submission ({assignment: tools.instructor.collect.read_collected's}) and each assignment's
    maximum."""
    from nbgrader.api import MissingEntry

    checks = {name: of_notebooks(plan[name].notebooks) for name in names}
    written = {name: questions_of(plan[name].notebooks) for name in names}
    columns = [e.grade_id for name in names for e in checks[name]]
    answers = [q.grade_id for name in names for q in written[name]]
    statuses = gradebook.graded(root)
    rows = []
    for name in names:
        most = maxima[name]
        for student in students:
            try:
                submission = gb.find_submission(name, student)
            except MissingEntry:
                submission = None
            points, overridden, waiting = _points(
                gb, name, student, checks[name] if submission else [],
                written[name] if submission else [])
            known = statuses.get((name, student))
            newer = _newer(root, name, student, submission, known)
            status = _status(root, name, student, submission, known, waiting, newer)
            when = submission.timestamp if submission else None
            provenance = provenances[name].get(student) or {}
            decision = late.decide(
                settings.late, name, student, settings.due.get(name),
                when and when.replace(tzinfo=datetime.timezone.utc),
                bool(provenance.get("late_marker")),
                sum(points.get(e.grade_id) or 0 for e in checks[name]),
                sum(points.get(q.grade_id) or 0 for q in written[name]),
                lms_extension(provenance)) if submission else None
            rows.append(Row(name, student, status, [
                name, student, "yes" if submission else "no",
                f"{when:%Y-%m-%d %H:%M:%S}" if when else "",
                late_column(decision, provenance, settings.late.zone), status,
                sum(points.values()), most,
                *((decision.penalty, decision.final, decision.reason) if decision
                  else ("", "", "")),
                *(points.get(c, "") for c in columns + answers),
                " ".join(overridden)], decision, waiting, newer))
    header = ["assignment", "student_id", "submitted", "submitted_at", "late", "status",
              "score", "max_score", "penalty", "final", "penalty_reason", *columns, *answers,
              "overridden"]
    return header, rows


def write_csv(path, header, rows):
    """A CSV of header and rows, every cell through cell()."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows([cell(value) for value in row] for row in rows)


def check_extensions(settings, assignments, students):
    """Stop on an extension that would apply to no one (tools.course.late.unused_extensions: its
    student would be penalized as if they had none), naming each: an assignment that is
    not the course's, or a student in neither the roster nor the gradebook (students).
    Without a roster the gradebook knows only who submitted, so a student it does not know
    may yet submit: printed loudly as UNUSED EXTENSION, and the export goes on."""
    stop = []
    for assignment, student, what in late.unused_extensions(settings.late, assignments,
                                                           students):
        where = f"c.Grading.extensions[{assignment!r}][{student!r}]"
        if what == "assignment":
            stop.append(f"{where}: the course has no assignment {assignment!r} (course.json: "
                        f"{', '.join(assignments)})")
        elif settings.roster:
            stop.append(f"{where}: no student {student!r} in the roster ({settings.roster}) "
                        "or the gradebook")
        else:
            print(f"UNUSED EXTENSION {where}: no student {student!r} in the gradebook (and "
                  "c.Grading.roster is not set): it applies to no one yet")
    if stop:
        raise SystemExit("make grades: an extension that applies to no one (its student "
                         f"would be penalized as if they had none): {'; '.join(stop)}. "
                         "Correct it in nbgrader_config_local.py")


def kept_log(root, names):
    """The rows of logs/late.csv of every assignment but these, as an earlier export wrote
    them ([] without a log); SystemExit where the file there is not that log (rewriting it
    would lose what it holds)."""
    log = Path(root) / "logs" / "late.csv"
    if not log.is_file():
        return []
    aside = "move it aside (make grades writes it again, for the assignments it exports)"
    try:
        with open(log, newline="", encoding="utf-8") as f:
            found = list(csv.reader(f))
    except (UnicodeDecodeError, csv.Error) as error:
        raise SystemExit(f"{log}: not the late policy's log ({error}): {aside}") from None
    if not found or found[0] != late.LOG:
        raise SystemExit(f"{log}: its first line is not the late policy's log's columns "
                         f"({','.join(late.LOG)}): {aside}")
    return [row for row in found[1:] if row and row[0] not in names]


def write_log(root, course, names, rows, kept, zone):
    """logs/late.csv: these assignments' decisions (rows: Row), the other assignments' rows
    kept (kept_log), in the course's order of assignments; and say so."""
    log = Path(root) / "logs" / "late.csv"
    order = {name: i for i, name in enumerate(course.assignments)}
    new = [late.log_row(r.assignment, r.student, r.decision, zone) for r in rows]
    write_csv(log, late.LOG, sorted(kept + new, key=lambda r: order.get(r[0], len(order))))
    penalized = sum(1 for r in rows if r.decision and r.decision.penalty)
    others = list(dict.fromkeys(r[0] for r in kept))
    print(f"late policy: {log} ({', '.join(names) or 'no assignment'}: {penalized} "
          f"penalt{'y' if penalized == 1 else 'ies'} applied"
          + (f"; {', '.join(others)}'s rows kept as an earlier make grades wrote them"
             if others else "") + ")")


def export(root, out, names=(), lms=None, template=None):
    """grades.csv at out and logs/late.csv of these assignments (those released; the log
    keeps the others' rows), and with lms and template, ROOT/grades-<lms>.csv: the template
    filled in (tools/instructor/grade_sheet.py). Every check that can stop it runs before
    anything is written: the template's, the extensions', the log's."""
    root = Path(root)
    settings = read(root)
    course = Course.load(root)
    names = [n for n in assignment_names(root, course, names) if n in released(root, course)]
    roster = read_roster(settings.roster, settings.roster_encoding) if settings.roster \
        else []
    plan = course.assignments
    maxima = {n: maximum(plan[n].notebooks) for n in names}
    provenances = {n: read_collected(root, n) for n in names}
    filling = grade_sheet.prepare(root, lms, template, names, settings.lms_columns,
                                 maxima) if lms or template else None
    with gradebook.connect(root) as gb:
        students = sorted({s.id for s in gb.students} | {r["student_id"] for r in roster})
        check_extensions(settings, list(plan), set(students))
        kept = kept_log(root, names)
        header, rows = table(root, gb, names, settings, students, plan, provenances, maxima)
    write_csv(Path(out), header, [row.cells for row in rows])
    print(f"grades: {out} ({', '.join(names) or 'no assignment released yet'})")
    zone = settings.late.zone
    from_lms = [f"{r.student} ({r.assignment}, to {late.shown(r.decision.extension, zone)})"
                for r in rows if r.decision and r.decision.extension and r.student not in
                settings.late.extensions.get(r.assignment, {})]
    if from_lms:
        print(f"extensions the LMS granted (Moodle's worksheet; c.Grading.extensions wins): "
              f"{', '.join(from_lms)}")
    write_log(root, course, names, rows, kept, settings.late.zone)
    if filling is not None:
        grade_sheet.fill(root, filling, rows, roster, provenances, Path(out))
