"""`make build`: the nbgrader course, built from solutions/: its assignments and graded files.

    python -m tools.instructor build ROOT [--layout unit|course]

Writes ROOT/nbgrader_config.py (the repository's settings and this course's; the
instructor's ROOT/nbgrader_config_local.py is never overwritten), ROOT/course.json (each
assignment's notebooks and student files) and ROOT/source/<assignment>/. Layouts: "unit"
(unit1 ... unitN, a notebook each) or "course" (one assignment, `normalization`).
Every assignment carries the whole normlib/ (its modules import each other) and normkit/,
but grades only the student's files that hold its exercises (exercises.student_files, as
nbgrader's exclude_overwriting). Its other normlib files are there as released (the stubs),
and at autograde nbgrader puts that copy in place of the student's: another unit's reference
is nowhere the submission's code runs, and tampering with normkit/ gains nothing.
docs/instructors.md, step 1, and "What grading guarantees, and by what".
"""

import shutil
from pathlib import Path

from tools.course.exercises import SOLUTIONS, notebooks, student_files, unit
from tools.course.folder import NORMKIT, NORMKIT_IGNORE, Assignment, Course, write_config
from tools.course.markers import strip_solutions

COURSE = "normalization"  # the single assignment of the "course" layout
LAYOUTS = ("unit", "course")


def package_files():
    """The reference normlib's .py files, relative to solutions/ (e.g. normlib/nn.py)."""
    return sorted(p.relative_to(SOLUTIONS) for p in (SOLUTIONS / "normlib").rglob("*.py"))


def assignments(layout):
    """{assignment: [notebook stems]} of a layout."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    stems = [path.stem for path in notebooks()]
    if layout == "course":
        return {COURSE: stems}
    return {f"unit{unit(stem)}": [stem] for stem in stems}


def build_course(root, layout="unit"):
    """Create (or refresh) the nbgrader course at root: source/, course.json, the config."""
    root = Path(root).resolve()
    plan = {}
    for name, stems in assignments(layout).items():
        source = root / "source" / name
        if source.exists():
            shutil.rmtree(source)
        source.mkdir(parents=True)
        for stem in stems:
            shutil.copy2(SOLUTIONS / f"{stem}.ipynb", source)
        graded = student_files(map(unit, stems))
        for rel in package_files():
            (source / rel).parent.mkdir(parents=True, exist_ok=True)
            text = (SOLUTIONS / rel).read_text()
            (source / rel).write_text(text if rel.as_posix() in graded else
                                      strip_solutions(text, rel.as_posix()))
        shutil.copytree(NORMKIT, source / NORMKIT.name, ignore=NORMKIT_IGNORE)
        plan[name] = Assignment(stems, graded)
    Course(layout, plan).write(root)
    write_config(root, layout, {name: a.student_files for name, a in plan.items()})
    return root


