"""The nbgrader course built from solutions/: its assignments and the files they grade.

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
only the student's files holding *its* exercises (tools.exercises.student_files, given
to nbgrader's exclude_overwriting). Its source holds the reference of those files only;
every other normlib file is there as released (solution blocks stripped: the stubs), and
at autograde nbgrader puts that copy in place of the student's. So a mistake in Unit 1
costs no points in Unit 3, and the reference of
another unit is nowhere the submission's code runs (the grading kernel, the judge's
worker) nor in its feedback. (No exercise calls another unit's file: tests/test_isolation.)
The course's normkit/ (checks, experiments, provided helpers) is released beside normlib/,
so that a release runs on its own, and is never the student's: collect keeps none of it,
and at autograde nbgrader puts the source's copy in place, so tampering with it gains
nothing.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tools.exercises import REPO, SOLUTIONS, notebooks, student_files, unit
from tools.markers import strip_solutions

KIT = REPO / "normkit"  # the course's package, released and graded as it is
KIT_JUNK = shutil.ignore_patterns("__pycache__", ".*", "*.pyc")  # (not released)
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
        plan[name] = {"notebooks": stems, "student_files": graded}
    (root / "course.json").write_text(json.dumps({"layout": layout, "assignments": plan},
                                                 indent=1) + "\n")
    write_config(root, layout, {name: a["student_files"] for name, a in plan.items()})
    return root


def write_config(root, layout, exclude):
    """The course's nbgrader_config.py: the repository's settings (found where NORMLIB_REPO
    says, which every step sets, else where the course was built), a SQLite gradebook in
    the course folder unless nbgrader_config_local.py or NBGRADER_DB_URL (which wins) names
    another, each assignment's student files (exclude), and what student code may not
    read. No path in it is this machine's but the fallback: the folder can move."""
    Path(root, "nbgrader_config.py").write_text(
        f"# Written by tools.course (layout {layout!r}); rebuilding rewrites it. Your own\n"
        "# settings go in nbgrader_config_local.py, loaded last (NBGRADER_DB_URL, if set,\n"
        "# is the gradebook whatever the files say).\n"
        "import os\n"
        "here = os.path.dirname(os.path.abspath(__file__))\n"
        f"repo = os.environ.get('NORMLIB_REPO', {str(REPO)!r})\n"
        "load_subconfig(os.path.join(repo, 'nbgrader_config.py'))\n"
        "c.CourseDirectory.db_url = 'sqlite:///' + os.path.join(here, 'gradebook.db') + "
        "'?timeout=60'\n"
        "# grade the student's files holding each assignment's exercises, not the reference\n"
        f"c.Autograde.exclude_overwriting = {exclude!r}\n"
        "# what student code may not read at grading (tools/sandboxed/guard.py; "
        "tools/settings.py)\n"
        "c.Grading.protected = [here, os.path.join(repo, 'solutions')]\n"
        "load_subconfig('nbgrader_config_local.py')\n"
        "if os.environ.get('NBGRADER_DB_URL'):\n"
        "    c.CourseDirectory.db_url = os.environ['NBGRADER_DB_URL']\n"
    )


def load_course(root):
    """The course.json that build_course wrote: {"layout", "assignments": {name: {...}}}."""
    path = Path(root) / "course.json"
    if not path.is_file():
        sys.exit(f"{root} is not a course built by tools.course (no course.json): build it first")
    return json.loads(path.read_text())


def bin_first():
    """PATH with this Python's bin/ first: nbgrader runs the `alembic` command from PATH to
    stamp a new gradebook ("FileNotFoundError: 'alembic'" otherwise), so that an
    environment that is not activated works."""
    here, path = str(Path(sys.executable).parent), os.environ.get("PATH", "")
    return path if path.split(os.pathsep)[0] == here else os.pathsep.join([here, path])


def nbgrader(root, *args, check=True, env=None):
    """Run an nbgrader command in the course at root with this Python's nbgrader (and
    these extra environment variables), its alembic first on PATH (bin_first); the
    course's config finds the repository through NORMLIB_REPO (write_config)."""
    cmd = [sys.executable, "-m", "nbgrader", *args]
    env = {**os.environ, "PATH": bin_first(), "NORMLIB_REPO": str(REPO), **(env or {})}
    return subprocess.run(cmd, cwd=root, check=check, capture_output=True, text=True, env=env)


def assignment_names(root, names=()):
    """These assignments of the course at root (all of them if none is named); exits
    naming any the course does not have."""
    known = list(load_course(root)["assignments"])
    unknown = [name for name in names if name not in known]
    if unknown:
        sys.exit(f"no assignment {', '.join(unknown)} in {root} (it has {', '.join(known)})")
    return list(names) or known


def submissions(root, names=()):
    """{assignment: [student, ...]} of every collected submission."""
    return {name: sorted(p.parent.name for p in Path(root).glob(f"submitted/*/{name}")
                         if p.is_dir()) for name in assignment_names(root, names)}


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
