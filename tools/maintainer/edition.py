"""Generate the student edition from solutions/ (`make student`), or check it (`--check`).

The student edition is nbgrader's release of the course: notebooks/ (outputs
cleared, solution cells stubbed, hidden tests removed) and normlib/ (solution
blocks replaced by NotImplementedError stubs). Both are committed; nobody edits
them by hand.

    python -m tools.maintainer.edition           regenerate notebooks/ and normlib/
    python -m tools.maintainer.edition --check   regenerate into a temporary folder and fail on any
                                      difference from the committed edition or any leak
"""

import argparse
import filecmp
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tools.course.exercises import REPO
from tools.course.folder import NORMKIT, nbgrader
from tools.course.leaks import EDITION, files_in, leaks
from tools.instructor.build import COURSE, build_course

IGNORE = shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints")
# notebooks/Makefile: JupyterLab opens a terminal in the folder it shows, notebooks/, where
# `make check` (and every other target) is the course's Makefile's, one folder up
FORWARD = """# Written by tools/maintainer/edition.py: `make check` here is the course's
# (one folder up).
Makefile: ;
%:
	@$(MAKE) --no-print-directory -C .. $@
.DEFAULT_GOAL := check
"""


def generate(out):
    """Write the student edition's folders under out (replacing them)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = build_course(tmp, layout="course")
        result = nbgrader(root, "generate_assignment", COURSE, "--force", check=False)
        release = root / "release" / COURSE
        if result.returncode != 0 or not release.is_dir():
            sys.exit(f"nbgrader generate_assignment failed:\n{result.stdout}{result.stderr}")
        for folder in EDITION:
            if (Path(out) / folder).exists():
                shutil.rmtree(Path(out) / folder)
        shutil.copytree(release / "normlib", Path(out) / "normlib", ignore=IGNORE)
        (Path(out) / "notebooks").mkdir()
        for notebook in sorted(release.glob("*.ipynb")):
            shutil.copy2(notebook, Path(out) / "notebooks" / notebook.name)
        (Path(out) / "notebooks" / "Makefile").write_text(FORWARD)


def differences(generated, committed):
    """Files that differ between two copies of the student edition."""
    a, b = files_in(generated), files_in(committed)
    problems = [f"only in the regenerated edition: {p}" for p in sorted(a - b)]
    problems += [f"not generated (stale?): {p}" for p in sorted(b - a)]
    problems += [
        f"differs from a fresh generation: {p}"
        for p in sorted(a & b)
        if not filecmp.cmp(Path(generated) / p, Path(committed) / p, shallow=False)
    ]
    return problems


def problems():
    """What `--check` reports: every difference between a fresh generation and the
    committed edition, and every leak in either (an empty list when all is well)."""
    with tempfile.TemporaryDirectory() as tmp:
        generate(tmp)
        return differences(tmp, REPO) + leaks(tmp) + leaks(REPO, EDITION + (NORMKIT.name,))


def has_student_work():
    """True if git shows uncommitted changes in the student edition (someone's work)."""
    status = subprocess.run(
        ["git", "status", "--porcelain", "--", *EDITION], cwd=REPO, capture_output=True, text=True
    )
    return bool(status.stdout.strip())


def main(argv=None):
    parser = argparse.ArgumentParser(description="Generate or check the student edition.")
    parser.add_argument("--check", action="store_true", help="check, write nothing")
    parser.add_argument("--force", action="store_true", help="overwrite uncommitted changes")
    args = parser.parse_args(argv)
    if args.check:
        found = problems()
        for problem in found:
            print(problem)
        print("student edition: " + ("FAILED" if found else "in sync with solutions/, no leaks"))
        return 1 if found else 0
    if has_student_work() and not args.force:
        print("notebooks/ or normlib/ has uncommitted changes (your exercises?); "
              "commit them or pass --force to overwrite them")
        return 1
    generate(REPO)
    print("student edition regenerated: notebooks/, normlib/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
