"""Grades: ROOT/grades.csv, one row per student and released assignment.

    python -m tools.instructor export ROOT [ASSIGNMENT ...] [--out FILE]

Columns: whether it was submitted, when (UTC, as the LMS dated it: blank where it did not)
and how late (against c.Grading.due; "time unknown" where the LMS gave no time, "late by
Canvas's _LATE marker; no time" where it said late without when), its status (graded;
graded; why: a missing file, a notebook graded under its own name ...; failed: why;
missing: not submitted; and how many written answers still wait to be graded by hand),
the total, each check's points (blank where the check is not part of the assignment; the
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
from pathlib import Path

from tools import gradebook
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


def late(submission, when, record):
    """The late column of a submission (nbgrader's, or None), its time (naive UTC, or None)
    and what collect read of it (tools.collect.read_record's, or None)."""
    if submission is None:
        return ""
    if when is None:
        return "late by Canvas's _LATE marker; no time" if record and \
            record.get("late_marker") else "time unknown"
    return late_words(submission.total_seconds_late) if submission.duedate else ""


def export(root, out, names=()):
    from nbgrader.api import MissingEntry

    root = Path(root)
    settings = read(root)
    names = [n for n in assignment_names(root, names) if n in released(root)]
    plan = load_course(root)["assignments"]
    checks = {name: of_notebooks(plan[name]["notebooks"]) for name in names}
    written = {name: questions_of(plan[name]["notebooks"]) for name in names}
    columns = [e.grade_id for name in names for e in checks[name]]
    answers = [q.grade_id for name in names for q in written[name]]
    statuses = gradebook.graded(root)
    roster = read_roster(settings.roster) if settings.roster else []
    records = {name: read_record(root, name) for name in names}
    with gradebook.connect(root) as gb, open(out, "w", newline="") as f:
        students = sorted({s.id for s in gb.students} | {r["student_id"] for r in roster})
        writer = csv.writer(f)
        writer.writerow(["assignment", "student_id", "submitted", "submitted_at", "late",
                         "status", "score", "max_score", *columns, *answers, "overridden"])
        for name in names:
            for student in students:
                try:
                    submission = gb.find_submission(name, student)
                except MissingEntry:
                    submission = None
                points, overridden, waiting = {}, [], 0
                for e in checks[name] if submission else []:
                    grade = gb.find_grade(e.grade_id, e.notebook, name, student)
                    points[e.grade_id] = grade.score
                    if grade.manual_score is not None:
                        overridden.append(e.grade_id)
                for q in written[name] if submission else []:
                    grade = gb.find_grade(q.grade_id, q.notebook, name, student)
                    if grade.manual_score is not None:
                        points[q.grade_id] = grade.manual_score
                    elif grade.needs_manual_grade:  # answered: a grader's to score
                        waiting += 1
                    else:  # left as released ("YOUR ANSWER HERE"), or no notebook: 0
                        points[q.grade_id] = grade.auto_score
                known = statuses.get((name, student))
                folder = root / "submitted" / student / name
                status = known.status if known and submission else \
                    "collected, not graded yet (make autograde)" if folder.is_dir() else "missing"
                if known and submission and folder.is_dir() and \
                        gradebook.digest(folder) != known.digest:
                    status += "; a newer submission, collected since, waits for make autograde"
                if waiting:
                    status += f"; {waiting} written answer{'s' * (waiting > 1)} to grade by hand"
                when = submission.timestamp if submission else None
                maximum = sum(e.points for e in checks[name]) + sum(
                    q.points for q in written[name])
                writer.writerow(map(cell, [
                    name, student, "yes" if submission else "no",
                    f"{when:%Y-%m-%d %H:%M:%S}" if when else "",
                    late(submission, when, records[name].get(student)), status,
                    sum(points.values()), maximum, *(points.get(c, "") for c in columns + answers),
                    " ".join(overridden)]))
    print(f"grades: {out} ({', '.join(names) or 'no assignment released yet'})")
