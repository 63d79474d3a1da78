"""`make build`: the nbgrader course built from solutions/, its assignments and the files
they grade.

    <root>/nbgrader_config.py        written here: the repository's settings + this course's
    <root>/nbgrader_config_local.py  yours (grading limits, an exchange, a PostgreSQL
                                     db_url): never overwritten
    <root>/course.json               the layout: each assignment's notebooks and student files
    <root>/source/<assignment>/      solution notebooks + the whole reference normlib/ + the
                                     course's normkit/ (released as it is: no solution and
                                     no hidden test is in it)

Two layouts (the instructor's choice, `--layout`):
- "unit": one assignment per unit, unit1 ... unitN, each with its unit's notebook;
- "course": the whole course as one assignment, `normalization`.
Every assignment carries the whole normlib/ (its modules import each other), but grades
only the student's files holding *its* exercises (tools.course.exercises.student_files, given
to nbgrader's exclude_overwriting). Its source holds the reference of those files only;
every other normlib file is there as released (solution blocks stripped: the stubs), and
at autograde nbgrader puts that copy in place of the student's. So a mistake in Unit 1
costs no points in Unit 3, and the reference of
another unit is nowhere the submission's code runs (the grading kernel, the judge's
worker) nor in its feedback. (No exercise calls another unit's file: tests/test_isolation.)
The course's normkit/ (checks, experiments) is released beside normlib/,
so that a release runs on its own, and is never the student's: collect keeps none of it,
and at autograde nbgrader puts the source's copy in place, so tampering with it gains
nothing.
"""

import shutil
from pathlib import Path

from tools.course.exercises import SOLUTIONS, notebooks, student_files, unit
from tools.course.folder import KIT, KIT_JUNK, Assignment, Course, write_config
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
        shutil.copytree(KIT, source / KIT.name, ignore=KIT_JUNK)
        plan[name] = Assignment(stems, graded)
    Course(layout, plan).write(root)
    write_config(root, layout, {name: a.student_files for name, a in plan.items()})
    return root


