"""The instructor's commands, one per step, from the repository to grades and feedback.
Each step is its make target, its command and tools/instructor/<step>.py (its flags there):

    python -m tools.instructor build     ROOT [--layout unit|course]
    python -m tools.instructor release   ROOT [ASSIGNMENT ...] [--exchange]
    python -m tools.instructor collect   ROOT [ASSIGNMENT ...] [--exchange] [--dry-run]
    python -m tools.instructor autograde ROOT [ASSIGNMENT ...] [--student ID ...] [--force] ...
    python -m tools.instructor feedback  ROOT [ASSIGNMENT ...] [--exchange] [--lms LMS]
    python -m tools.instructor grades    ROOT [ASSIGNMENT ...] [--out FILE] [--lms LMS ...]
    python -m tools.instructor rubric    ROOT
    python -m tools.instructor score     ROOT --assignment A --student ID --question GRADE_ID ...

No ASSIGNMENT means every assignment of the course. The course's settings (limits, due
dates, roster) are c.Grading's in ROOT/nbgrader_config_local.py (tools/course/settings.py).
"""

import argparse
import sys
from pathlib import Path

from tools.course.folder import Course
from tools.course.settings import gradebook_url
from tools.instructor import grade_sheet
from tools.instructor.autograde import JOBS, autograde
from tools.instructor.build import LAYOUTS, build_course
from tools.instructor.collect import collect
from tools.instructor.feedback import feedback
from tools.instructor.gradebook import check_reachable
from tools.instructor.grades import export
from tools.instructor.release import release
from tools.instructor.rubric import rubric
from tools.instructor.score import score
from tools.lms.feedback_upload import LMSS


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    steps = parser.add_subparsers(dest="step", required=True)
    for step in ("build", "release", "collect", "autograde", "feedback", "grades", "rubric",
                 "score"):
        sub = steps.add_parser(step)
        sub.add_argument("root", help="the course folder, e.g. build/course")
        if step == "build":
            sub.add_argument("--layout", choices=LAYOUTS, default="unit")
        elif step not in ("rubric", "score"):
            sub.add_argument("assignments", nargs="*", help="default: all")
        if step == "grades":
            sub.add_argument("--out", help="default: ROOT/grades.csv")
            sub.add_argument("--lms", choices=grade_sheet.LMSS, help="also fill in that LMS's "
                             "gradebook export (--template) as ROOT/grades-<lms>.csv")
            sub.add_argument("--template", help="the LMS's gradebook export (never written; "
                             "a relative path is read from ROOT; tools/instructor/grade_sheet.py)")
        if step in ("release", "collect", "feedback"):
            sub.add_argument("--exchange", action="store_true", help="use the nbgrader exchange")
        if step == "collect":
            sub.add_argument("--dry-run", action="store_true", help="print what would be "
                             "collected and rejected, and touch nothing")
        if step == "feedback":
            sub.add_argument("--lms", choices=LMSS, help="also the zip of that LMS's bulk "
                             "feedback upload (moodle, canvas; tools/lms/feedback_upload.py)")
        if step == "score":  # (checked by tools.instructor.score, each with one message)
            for flag in ("assignment", "student", "question", "points"):
                sub.add_argument(f"--{flag}", default="")
            sub.add_argument("--comment", help="the grader's comment, shown in the feedback")
        if step == "autograde":
            sub.add_argument("--student", action="append", default=[], help="grade this "
                             "student's submissions (again), and no one else's")
            sub.add_argument("--force", action="store_true", help="grade every submission "
                             "again, not only new and changed ones")
            sub.add_argument("--execute", action="store_true", help="also run the notebooks "
                             "(in the OS sandbox) for fresh outputs; the scores are the same")
            sub.add_argument("--jobs", type=int, default=JOBS, help=f"worker processes of "
                             f"the local cluster (default {JOBS}: the cores)")
            sub.add_argument("--scheduler", help="a Dask scheduler's address "
                             "(tcp://host:8786): grade on its workers instead")
            sub.add_argument("--timeout", type=int, help="seconds per check (default: the "
                             "course's c.Grading.timeout)")
            sub.add_argument("--no-sandbox", action="store_true", help="run student code "
                             "without bubblewrap (only where it may reach everything this "
                             "user can)")
    args = parser.parse_args(argv)

    root = Path(args.root).resolve()
    if args.step not in ("build", "rubric"):  # every other step reads or writes it
        check_reachable(gradebook_url(root))
    if args.step == "build":
        build_course(root, args.layout)
        names = ", ".join(Course.load(root).assignments)
        print(f"course at {root} ({args.layout} layout): {names}")
    elif args.step == "release":
        release(root, args.assignments, args.exchange)
    elif args.step == "collect":
        collect(root, args.assignments, args.exchange, args.dry_run)
    elif args.step == "autograde":
        return 1 if autograde(root, args.assignments, args.jobs, args.timeout, args.force,
                              args.student, args.execute, not args.no_sandbox,
                              args.scheduler) else 0
    elif args.step == "feedback":
        feedback(root, args.assignments, args.exchange, args.lms)
    elif args.step == "grades":
        export(root, args.out or root / "grades.csv", args.assignments, args.lms,
               args.template)
    elif args.step == "rubric":
        rubric(root)
    elif args.step == "score":
        score(root, args.assignment, args.student, args.question, args.points, args.comment)
    return 0


if __name__ == "__main__":
    sys.exit(main())
