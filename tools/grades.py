"""Grades: ROOT/grades.csv, one row per student and released assignment; the late policy's
decisions in ROOT/logs/late.csv; and, from the LMS's own gradebook export, the file its
import reads (ROOT/grades-<lms>.csv, tools/lms_grades.py).

    python -m tools.instructor export ROOT [ASSIGNMENT ...] [--out FILE]
        [--lms canvas|moodle|blackboard|brightspace --template EXPORT.csv]

Columns: whether it was submitted, when (UTC, as the LMS dated it: blank where it did not)
and how late (against c.Grading.due; "time unknown" where the LMS gave no time, "late by
Canvas's _LATE marker; no time" where it said late without when), its status (graded;
graded; why: a missing file, a notebook graded under its own name ...; failed: why;
missing: not submitted; and how many written answers still wait to be graded by hand),
the total (score: the raw score, before any late penalty) and maximum, the late policy's
penalty, the final score and the penalty's reason (tools/late.py; blank without a graded
submission), each check's points (blank where the check is not part of the assignment; the
judge's score, or one set by hand), each written answer's points (blank until graded by
hand: never a 0 it did not earn; 0 where the answer cell was left as released), and the
checks whose score was set by hand (formgrader's manual score).
Only released assignments (release/<assignment>/) are listed: a unit not yet given out
is not "missing".

A spreadsheet runs a cell that starts with "=", "+", "-" or "@" as a formula (and some, a
tab or a carriage return first): every text cell that starts so gets a "'" before it
(OWASP's rule for CSV injection); numbers stay numbers. Student ids cannot start so
(tools/roster.py), but a status quotes what a submission held (a notebook's name).
"""

import csv
import dataclasses
import datetime
from pathlib import Path

from tools import gradebook, late, lms_grades
from tools.collect import late_words, read_record
from tools.course import assignment_names, load_course
from tools.exercises import of_notebooks, questions_of
from tools.release import released
from tools.roster import read_roster
from tools.settings import read

FORMULA = ("=", "+", "-", "@", "\t", "\r")


def cell(value):
    """A value as grades.csv writes it: a text that a spreadsheet would run as a formula
    prefixed with "'"; numbers (scores, points) as they are."""
    if isinstance(value, str) and value.startswith(FORMULA):
        return "'" + value
    return value


def late_column(submission, when, record):
    """The late column of a submission (nbgrader's, or None), its time (naive UTC, or None)
    and what collect read of it (tools.collect.read_record's, or None)."""
    if submission is None:
        return ""
    if when is None:
        return "late by Canvas's _LATE marker; no time" if record and \
            record.get("late_marker") else "time unknown"
    return late_words(submission.total_seconds_late) if submission.duedate else ""


@dataclasses.dataclass(frozen=True)
class Row:
    """One student's assignment: its status, grades.csv's cells, the late policy's Decision
    (None without a graded submission), and how many written answers wait for a grader."""
    assignment: str
    student: str
    status: str
    cells: list
    decision: late.Decision | None
    waiting: int


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


def _status(root, name, student, submission, known, waiting):
    """The status column of a student's assignment (see the module's docstring)."""
    folder = Path(root) / "submitted" / student / name
    status = known.status if known and submission else \
        "collected, not graded yet (make autograde)" if folder.is_dir() else "missing"
    if known and submission and folder.is_dir() and gradebook.digest(folder) != known.digest:
        status += "; a newer submission, collected since, waits for make autograde"
    if waiting:
        status += f"; {waiting} written answer{'s' * (waiting > 1)} to grade by hand"
    return status


def table(root, names, settings, students):
    """(grades.csv's header, [Row]) of these assignments, for these students."""
    from nbgrader.api import MissingEntry

    plan = load_course(root)["assignments"]
    checks = {name: of_notebooks(plan[name]["notebooks"]) for name in names}
    written = {name: questions_of(plan[name]["notebooks"]) for name in names}
    columns = [e.grade_id for name in names for e in checks[name]]
    answers = [q.grade_id for name in names for q in written[name]]
    statuses = gradebook.graded(root)
    rows = []
    with gradebook.connect(root) as gb:
        for name in names:
            records = read_record(root, name)
            maximum = sum(e.points for e in checks[name]) + sum(q.points for q in written[name])
            for student in students:
                try:
                    submission = gb.find_submission(name, student)
                except MissingEntry:
                    submission = None
                points, overridden, waiting = _points(
                    gb, name, student, checks[name] if submission else [],
                    written[name] if submission else [])
                status = _status(root, name, student, submission,
                                 statuses.get((name, student)), waiting)
                when = submission.timestamp if submission else None
                record = records.get(student) or {}
                decision = late.decide(
                    settings.late, name, student, settings.due.get(name),
                    when and when.replace(tzinfo=datetime.timezone.utc),
                    bool(record.get("late_marker")),
                    sum(points.get(e.grade_id) or 0 for e in checks[name]),
                    sum(points.get(q.grade_id) or 0 for q in written[name])
                ) if submission else None
                rows.append(Row(name, student, status, [
                    name, student, "yes" if submission else "no",
                    f"{when:%Y-%m-%d %H:%M:%S}" if when else "",
                    late_column(submission, when, record), status,
                    sum(points.values()), maximum,
                    *((decision.penalty, decision.final, decision.reason) if decision
                      else ("", "", "")),
                    *(points.get(c, "") for c in columns + answers),
                    " ".join(overridden)], decision, waiting))
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


def export(root, out, names=(), lms=None, template=None):
    """grades.csv at out and logs/late.csv of these assignments (those released), and with
    lms and template, ROOT/grades-<lms>.csv: the template filled in (tools/lms_grades.py)."""
    root = Path(root)
    settings = read(root)
    names = [n for n in assignment_names(root, names) if n in released(root)]
    roster = read_roster(settings.roster) if settings.roster else []
    filling = lms_grades.prepare(root, lms, template, names, settings.lms_columns) \
        if lms or template else None  # (the template's problems stop everything first)
    with gradebook.connect(root) as gb:
        students = sorted({s.id for s in gb.students} | {r["student_id"] for r in roster})
    header, rows = table(root, names, settings, students)
    write_csv(Path(out), header, [row.cells for row in rows])
    print(f"grades: {out} ({', '.join(names) or 'no assignment released yet'})")
    log = root / "logs" / "late.csv"
    write_csv(log, late.LOG, [late.log_row(r.assignment, r.student, r.decision,
                                           settings.late.zone) for r in rows])
    penalized = sum(1 for r in rows if r.decision and r.decision.penalty)
    print(f"late policy: {log} ({penalized} penalt{'y' if penalized == 1 else 'ies'} "
          "applied)")
    if filling is not None:
        lms_grades.fill(root, filling, rows, roster, {n: read_record(root, n) for n in names})
