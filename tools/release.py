"""Release: what students get, in release/<assignment>/ (and, with --exchange, nbgrader's
exchange), scanned for solutions first.

    python -m tools.instructor release ROOT [ASSIGNMENT ...] [--exchange]

nbgrader generates each assignment (its .py files stripped of their solution blocks by
tools.markers.strip_release); any file of the release that holds a solution, a hidden
test or a stored output stops the release (tools.student.leaks).
"""

from pathlib import Path

from tools.course import assignment_names, load_course, nbgrader
from tools.student import leaks


def targets(root, names):
    """The assignment arguments of nbgrader commands over these assignments: ["*"] (one
    process for all of them) when they are all the course's, else one per assignment."""
    return ["*"] if set(names) == set(load_course(root)["assignments"]) else list(names)


def run(root, *args):
    """An nbgrader command that must succeed: its log on failure, and exit."""
    result = nbgrader(root, *args, check=False)
    if result.returncode != 0:
        raise SystemExit(f"nbgrader {' '.join(args)} failed:\n{result.stdout}{result.stderr}")
    return result


def release(root, names=(), exchange=False):
    names = assignment_names(root, names)
    for target in targets(root, names):
        run(root, "generate_assignment", target, "--force")
    for name in names:
        problems = leaks(Path(root) / "release" / name, folders=(".",))
        if problems:
            raise SystemExit(f"release/{name} leaks the solutions:\n" + "\n".join(problems))
        if exchange:
            run(root, "release_assignment", name, "--force")
        print(f"released {name}: release/{name}/" + (" and the exchange" if exchange else ""))


def released(root):
    """The assignments released so far (release/<assignment>/ exists), in course order."""
    return [name for name in load_course(root)["assignments"]
            if (Path(root) / "release" / name).is_dir()]
