"""Grades: ROOT/grades.csv, one row per student and released assignment.

    python -m tools.instructor export ROOT [ASSIGNMENT ...] [--out FILE]

Columns: whether it was submitted, when (UTC) and how late (against c.Grading.due), its
status (graded; graded; why: a missing file, a notebook graded under its own name ...;
failed: why; missing: not submitted; and how many written answers still wait to be graded
by hand), the total, each check's points (blank where the check is not part of the
assignment; the judge's score, or one set by hand), each written answer's points (blank
until graded by hand: never a 0 it did not earn; 0 where the answer cell was left as
released), and the checks whose score was set by hand (formgrader's manual score).
Only released assignments (release/<assignment>/) are listed: a unit not yet given out
is not "missing".
"""

import csv
from pathlib import Path

from tools import gradebook
from tools.collect import read_roster
from tools.course import assignment_names, load_course
from tools.exercises import of_notebooks, questions_of
from tools.release import released
from tools.settings import read


def lateness(seconds):
    """'2 h 5 min late' of a number of seconds late ('' if on time)."""
    if seconds <= 0:
        return ""
    minutes = int(seconds + 59) // 60
    days, hours, minutes = minutes // 1440, minutes // 60 % 24, minutes % 60
    parts = [f"{days} d" * bool(days), f"{hours} h" * bool(hours), f"{minutes} min" * bool(
        minutes)]
    return " ".join(p for p in parts if p) + " late"


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
                late = lateness(submission.total_seconds_late) if submission and when and \
                    submission.duedate else ""
                maximum = sum(e.points for e in checks[name]) + sum(
                    q.points for q in written[name])
                writer.writerow([name, student, "yes" if submission else "no",
                                 f"{when:%Y-%m-%d %H:%M:%S}" if when else "", late, status,
                                 sum(points.values()), maximum,
                                 *(points.get(c, "") for c in columns + answers),
                                 " ".join(overridden)])
    print(f"grades: {out} ({', '.join(names) or 'no assignment released yet'})")
