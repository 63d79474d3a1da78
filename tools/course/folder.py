"""The course folder that `make build` made (tools/instructor/build.py), as every step reads
it, and nbgrader run in it:

    <root>/nbgrader_config.py        the repository's settings + this course's (write_config)
    <root>/nbgrader_config_local.py  the instructor's (grading limits, an exchange, a
                                     PostgreSQL db_url): never overwritten
    <root>/course.json               the layout: each assignment's notebooks and student
                                     files (Course.load: every step's one reading of it)
    <root>/submitted/<student>/<assignment>/   what collect accepted (submissions)

and a folder's files as {relative path: bytes} and back (files_of, put), which is how a
grading task carries a submission and its results between the head and a worker.
"""

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path, PurePosixPath

from tools.course.exercises import REPO

NORMKIT = REPO / "normkit"  # the course's package, released and graded as it is
NORMKIT_IGNORE = shutil.ignore_patterns("__pycache__", ".*", "*.pyc")  # (not released)
# nbgrader's files of a submission, beside its notebooks
TIMESTAMP = "timestamp.txt"  # its time: "2026-10-05 21:14:03.123456 UTC" (collect writes it)
SECRET = "submission_secret.txt"  # nbgrader submit's: 128 hex digits


def write_config(root, layout, exclude):
    """The course's nbgrader_config.py: the repository's settings (found where NORMLIB_REPO
    says, which every step sets, else where the course was built), a SQLite gradebook in
    the course folder unless nbgrader_config_local.py or NBGRADER_DB_URL (which wins) names
    another, each assignment's student files (exclude), and what student code may not
    read. No path in it is this machine's but the fallback: the folder can move."""
    Path(root, "nbgrader_config.py").write_text(
        f"# Written by tools.course.folder (layout {layout!r}); rebuilding rewrites it. Your own\n"
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
        "tools/course/settings.py)\n"
        "c.Grading.protected = [here, os.path.join(repo, 'solutions')]\n"
        "load_subconfig('nbgrader_config_local.py')\n"
        "if os.environ.get('NBGRADER_DB_URL'):\n"
        "    c.CourseDirectory.db_url = os.environ['NBGRADER_DB_URL']\n"
    )


def submission_folder(root, student, assignment, step="submitted"):
    """A submission's folder in one of the course's steps (submitted, autograded, feedback,
    and a worker's staging): <root>/<step>/<student>/<assignment>, nbgrader's layout
    (its CourseDirectory.directory_structure, "{nbgrader_step}/{student_id}/{assignment_id}").
    Every such path of tools/ is made here."""
    return step_folder(root, step) / student / assignment


def step_folder(root, step):
    """The folder of one of the course's steps, every submission's: <root>/<step>."""
    return Path(root) / step


@dataclasses.dataclass(frozen=True)
class Assignment:
    """One assignment: its notebooks (their stems, in order) and the student's files it
    grades (paths in a submission: normlib/layer_norm.py, ...)."""
    notebooks: list
    student_files: list


@dataclasses.dataclass(frozen=True)
class Course:
    """A course that make build made: its layout ("unit" or "course") and its assignments
    ({name: Assignment}, in order), as its course.json holds them."""
    layout: str
    assignments: dict

    @classmethod
    def load(cls, root):
        """The course at root (its course.json); exits saying so where there is none. Each
        command reads it once, here, and hands the one Course to every step it calls."""
        path = Path(root) / "course.json"
        if not path.is_file():
            sys.exit(f"{root} is not a course built by make build (no course.json): build it "
                     "first")
        return cls.from_json(json.loads(path.read_text()))

    @classmethod
    def from_json(cls, data):
        return cls(data["layout"], {name: Assignment(a["notebooks"], a["student_files"])
                                    for name, a in data["assignments"].items()})

    def to_json(self):
        """course.json's content: {"layout", "assignments": {name: {"notebooks",
        "student_files"}}}."""
        return {"layout": self.layout, "assignments": {
            name: dataclasses.asdict(a) for name, a in self.assignments.items()}}

    def write(self, root):
        (Path(root) / "course.json").write_text(json.dumps(self.to_json(), indent=1) + "\n")


def bin_first():
    """PATH with this Python's bin/ first: nbgrader runs the `alembic` command from PATH to
    stamp a new gradebook ("FileNotFoundError: 'alembic'" otherwise), so that an
    environment that is not activated works."""
    here, path = str(Path(sys.executable).parent), os.environ.get("PATH", "")
    return path if path.split(os.pathsep)[0] == here else os.pathsep.join([here, path])


def nbgrader_in_process():
    """Ready this process for nbgrader's Python API (its Gradebook, its converters): its
    `alembic`, which a new gradebook runs from PATH, found (bin_first), and the noise of
    nbgrader 0.9.6 under SQLAlchemy 2 filtered (add_submission warns at each new submission
    that its autoflush skips objects it adds a moment later). Idempotent."""
    from sqlalchemy.exc import SAWarning

    os.environ["PATH"] = bin_first()
    warnings.filterwarnings("ignore", category=SAWarning, module="nbgrader.api")


def nbgrader(root, *args, check=True, env=None):
    """Run an nbgrader command in the course at root with this Python's nbgrader (and
    these extra environment variables), its alembic first on PATH (bin_first); the
    course's config finds the repository through NORMLIB_REPO (write_config)."""
    cmd = [sys.executable, "-m", "nbgrader", *args]
    env = {**os.environ, "PATH": bin_first(), "NORMLIB_REPO": str(REPO), **(env or {})}
    return subprocess.run(cmd, cwd=root, check=check, capture_output=True, text=True, env=env)


def assignment_names(root, course, names=()):
    """These assignments of the course (all of them if none is named); exits naming any it
    does not have."""
    known = list(course.assignments)
    unknown = [name for name in names if name not in known]
    if unknown:
        sys.exit(f"no assignment {', '.join(unknown)} in {root} (it has {', '.join(known)})")
    return list(names) or known


def submissions(root, course, names=()):
    """{assignment: [student, ...]} of every collected submission of these assignments."""
    return {name: sorted(p.parent.name for p in Path(root).glob(f"submitted/*/{name}")
                         if p.is_dir()) for name in assignment_names(root, course, names)}


def targets(course, names):
    """The assignment arguments of nbgrader commands over these assignments: ["*"] (one
    process for all of them) when they are all the course's, else one per assignment."""
    return ["*"] if set(names) == set(course.assignments) else list(names)


def run(root, *args):
    """An nbgrader command that must succeed: its log on failure, and exit."""
    result = nbgrader(root, *args, check=False)
    if result.returncode != 0:
        raise SystemExit(f"nbgrader {' '.join(args)} failed:\n{result.stdout}{result.stderr}")
    return result

def files_of(folder):
    """{path relative to folder: bytes} of every file under it ({} if it is not there): what
    a task, a kit or an outcome carries."""
    folder = Path(folder)
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()} if folder.is_dir() else {}


def put(folder, files, replace=False):
    """Write files ({path relative to folder: bytes}) under folder (replace: in place of
    all it held). A path that would leave the folder (what crosses between the head and a
    worker is trusted no further) raises ValueError before anything is written."""
    for rel in files:
        if PurePosixPath(rel).is_absolute() or ".." in PurePosixPath(rel).parts:
            raise ValueError(f"a path outside its folder: {rel!r}")
    if replace:
        shutil.rmtree(folder, ignore_errors=True)
    for rel, data in files.items():
        (Path(folder) / rel).parent.mkdir(parents=True, exist_ok=True)
        (Path(folder) / rel).write_bytes(data)
