"""Build an nbgrader course directory from solutions/ (`make course`).

    <root>/nbgrader_config.py       loads the repository's nbgrader_config.py
    <root>/source/<assignment>/     the solution notebooks and the reference normlib/

The whole course is one assignment for now: every unit's notebooks share normlib/.
Run nbgrader from <root> (its working directory is the course root).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOLUTIONS = REPO / "solutions"
ASSIGNMENT = "normalization"


def solution_notebooks():
    """The solution notebooks, in unit order."""
    return sorted(SOLUTIONS.glob("[0-9]*.ipynb"))


def graded_cells(notebook_dir=SOLUTIONS):
    """(notebook, grade_id, points, source) of every graded (check) cell of the numbered
    notebooks in notebook_dir, in unit order; notebook is the file's stem."""
    found = []
    for path in sorted(Path(notebook_dir).glob("[0-9]*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            meta = cell["metadata"].get("nbgrader", {})
            if meta.get("grade"):
                found.append((path.stem, meta["grade_id"], meta["points"],
                              "".join(cell["source"])))
    return found


def package_files():
    """The reference normlib's .py files, relative to solutions/ (e.g. normlib/nn.py)."""
    return sorted(p.relative_to(SOLUTIONS) for p in (SOLUTIONS / "normlib").rglob("*.py"))


def student_files():
    """The normlib files holding exercises: the student's own, collected and graded
    (nbgrader's exclude_overwriting); the others are replaced by the course's copy."""
    return [str(p) for p in package_files() if "### BEGIN SOLUTION" in (SOLUTIONS / p).read_text()]


def build_course(root, assignment=ASSIGNMENT):
    """Create (or refresh) the nbgrader course at root with the source assignment."""
    root = Path(root).resolve()
    source = root / "source" / assignment
    if source.exists():
        shutil.rmtree(source)
    source.mkdir(parents=True)
    for path in solution_notebooks():
        shutil.copy2(path, source / path.name)
    for rel in package_files():
        (source / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(SOLUTIONS / rel, source / rel)
    (root / "nbgrader_config.py").write_text(
        "# Written by `make course`: the course's settings are the repository's.\n"
        f"load_subconfig({str(REPO / 'nbgrader_config.py')!r})\n"
    )
    return root


def nbgrader(root, *args, check=True):
    """Run an nbgrader command in the course at root with this Python's nbgrader."""
    cmd = [sys.executable, "-m", "nbgrader", *args]
    # nbgrader runs the `alembic` command from PATH: put this environment's bin/ first,
    # so that an unactivated virtual environment works.
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    env = {**os.environ, "PATH": path}
    return subprocess.run(cmd, cwd=root, check=check, capture_output=True, text=True, env=env)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", default=str(REPO / "build" / "course"))
    args = parser.parse_args()
    root = build_course(args.root)
    print(f"nbgrader course at {root}: source/{ASSIGNMENT}/ from solutions/")
    print(f"next: cd {root} && nbgrader generate_assignment {ASSIGNMENT}")


if __name__ == "__main__":
    main()
