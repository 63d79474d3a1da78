"""Hand grading from the command line: a written answer's points (or a check's, over the
judge's score) and a comment into the gradebook, as formgrader saves them.

    make score A=unit1 STUDENT=alice QUESTION=q1_1_why_eps POINTS=1.5 COMMENT="..."
    python -m tools.instructor score ROOT --assignment A --student ID --question GRADE_ID
        --points P [--comment TEXT]

It runs from the repository (`make -C /path/to/repo score COURSE_DIR=/abs/course ...` from
any other folder: `tools` is not an installed package), on the course's gradebook
wherever it is (SQLite in the course folder, or PostgreSQL: tools.course.settings.gradebook_url).
Every argument is checked before anything is written, and a wrong one stops it with one
message naming it, what was expected and what came (the assignment's questions, the
students it has submissions of). `make grades` then writes the points into grades.csv.
"""

import math

from nbgrader.api import MissingEntry

from tools.course.bounds import id_problem
from tools.course.exercises import of_notebooks, questions_of
from tools.course.folder import Course, assignment_names
from tools.instructor import gradebook

SHOWN = 12  # students named in a message, at most


def score(root, assignment, student, question, points, comment=None):
    """Give `points` to the answer (or check) `question` of a student's submission of an
    assignment, as formgrader does (manual_score set, needs_manual_grade cleared), with
    an optional comment; SystemExit naming the first wrong argument."""
    assignment = one("A", assignment)
    cell = graded_cell(root, assignment, question)
    points = checked_points(points, cell)
    student = one("STUDENT", student)
    problem = id_problem(student)
    if problem:
        raise SystemExit(f"score: STUDENT={student!r}: {problem}")
    with gradebook.connect(root) as gb:
        submission_of(gb, assignment, student)
        grade = gb.find_grade(cell.grade_id, cell.notebook, assignment, student)
        before = "not graded" if grade.manual_score is None else f"{grade.manual_score:g}"
        grade.manual_score, grade.needs_manual_grade = points, False
        if comment is not None:
            gb.find_comment(cell.grade_id, cell.notebook, assignment, student) \
                .manual_comment = comment
        gb.db.commit()
    print(f"{assignment} {student} {cell.grade_id}: {points:g} / {cell.points:g} by hand "
          f"(before: {before}){'; comment saved' if comment is not None else ''}. "
          "make grades writes it into grades.csv")


def one(name, value):
    """The one word a make variable (A, STUDENT) holds; SystemExit if none or several."""
    words = (value or "").split()
    if len(words) != 1:
        raise SystemExit(f"score: {name} names one, not {len(words)} ({value!r}): e.g. "
                         "make score A=unit1 STUDENT=alice QUESTION=q1_1_why_eps POINTS=1.5")
    return words[0]


def graded_cell(root, assignment, question):
    """The written question (or check) whose grade_id is `question` in the assignment of
    the course at root; SystemExit naming the assignment's own."""
    course = Course.load(root)
    [assignment] = assignment_names(root, course, [assignment])  # (exits naming the course's)
    stems = course.assignments[assignment].notebooks
    written, checks = questions_of(stems), of_notebooks(stems)
    for cell in [*written, *checks]:
        if cell.grade_id == question:
            return cell
    raise SystemExit(
        f"score: {assignment} has no question {question!r}: its written questions are "
        f"{', '.join(q.grade_id for q in written) or 'none'}; its checks "
        f"{', '.join(e.grade_id for e in checks)} (python -m tools.course.exercises lists them)")


def checked_points(text, cell):
    """POINTS as a number from 0 to the cell's points; SystemExit otherwise."""
    try:
        points = float(text)
    except (TypeError, ValueError):
        points = math.nan
    if not 0 <= points <= cell.points:  # (NaN too)
        raise SystemExit(f"score: POINTS={text!r} is not a number from 0 to {cell.points:g} "
                         f"({cell.grade_id} is worth {cell.points:g} points)")
    return points


def submission_of(gb, assignment, student):
    """The student's submission of the assignment in the gradebook gb; SystemExit naming
    the students it has submissions of."""
    try:
        return gb.find_submission(assignment, student)
    except MissingEntry:
        pass
    try:
        names = sorted(s.student.id for s in gb.find_assignment(assignment).submissions)
    except MissingEntry:
        raise SystemExit(f"score: {assignment} is not in the gradebook: make release, "
                         "collect and autograde come first") from None
    shown = ", ".join(names[:SHOWN]) + (f" and {len(names) - SHOWN} more"
                                        if len(names) > SHOWN else "")
    raise SystemExit(f"score: no submission of {student!r} for {assignment} in the gradebook "
                     f"(make autograde records one; it has {len(names)}: {shown or 'none'})")
