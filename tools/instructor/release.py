"""Release: what students get, in release/<assignment>/ (and, with --exchange, nbgrader's
exchange), scanned for solutions first.

    python -m tools.instructor release ROOT [ASSIGNMENT ...] [--exchange]

nbgrader generates each assignment (its .py files stripped of their solution blocks by
tools.course.markers.strip_release); any file of the release that holds a solution, a hidden
test or a stored output stops the release (tools.course.leaks.leaks).
"""

from pathlib import Path

from tools.course.folder import Course, assignment_names, run, targets
from tools.course.leaks import leaks


def release(root, names=(), exchange=False):
    course = Course.load(root)
    names = assignment_names(root, course, names)
    for target in targets(course, names):
        run(root, "generate_assignment", target, "--force")
    for name in names:
        problems = leaks(Path(root) / "release" / name, folders=(".",))
        if problems:
            raise SystemExit(f"release/{name} leaks the solutions:\n" + "\n".join(problems))
        if exchange:
            run(root, "release_assignment", name, "--force")
        print(f"released {name}: release/{name}/" + (" and the exchange" if exchange else ""))


def released(root, course):
    """The assignments released so far (release/<assignment>/ exists), in course order."""
    return [name for name in course.assignments
            if (Path(root) / "release" / name).is_dir()]
