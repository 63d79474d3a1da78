"""Generate the student edition from solutions/ (`make student`), or check it (`--check`).

The student edition is nbgrader's release of the course: notebooks/ (outputs
cleared, solution cells stubbed, hidden tests removed) and normlib/ (solution
blocks replaced by NotImplementedError stubs). Both are committed; nobody edits
them by hand.

    python -m tools.student           regenerate notebooks/ and normlib/
    python -m tools.student --check   regenerate into a temporary folder and fail on any
                                      difference from the committed edition or any leak
"""

import argparse
import filecmp
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tools.course import COURSE, KIT, REPO, SOLUTIONS, build_course, nbgrader
from tools.exercises import exercises
from tools.markers import block_lines, has_marker

EDITION = ("notebooks", "normlib")  # the folders of the student edition
IGNORE = shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints")
# notebooks/Makefile: JupyterLab opens a terminal in the folder it shows, notebooks/, where
# `make check` (and every other target) is the course's Makefile's, one folder up
FORWARD = """# Written by tools/student.py: `make check` here is the course's (one folder up).
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


def _files(top, folders=EDITION):
    return {
        p.relative_to(top)
        for folder in folders
        for p in (Path(top) / folder).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and ".ipynb_checkpoints" not in p.parts
    }


def differences(generated, committed):
    """Files that differ between two copies of the student edition."""
    a, b = _files(generated), _files(committed)
    problems = [f"only in the regenerated edition: {p}" for p in sorted(a - b)]
    problems += [f"not generated (stale?): {p}" for p in sorted(b - a)]
    problems += [
        f"differs from a fresh generation: {p}"
        for p in sorted(a & b)
        if not filecmp.cmp(Path(generated) / p, Path(committed) / p, shallow=False)
    ]
    return problems


def _sources(path):
    """The code of a file as a list of texts: a notebook's cell sources, or the file."""
    if path.suffix == ".ipynb":
        return ["".join(cell["source"]) for cell in json.loads(path.read_text())["cells"]]
    return [path.read_text()]


# Lines of hidden tests that set a case up, not a case, and that normkit/ holds too; an
# import is never a case either. Any other hidden-test line in a released file is a leak:
# where a new one is reported, give the hidden test a line of its own, or list it here if
# it reveals no case.
SETUP = {"calls = []", "calls.append(name)", "return wrapper", "h = torch.float16",
         "ln = torch.nn.functional.layer_norm", "with torch_norms():"}


def secret_lines():
    """Lines that stand in solution or hidden-test blocks of solutions/ and nowhere else
    there: none of them may appear in the student edition or a release. normkit/ is
    released as it is, so a solution line that it holds too is no secret (a provided
    helper's `if weight is not None:`); a hidden test's line is, wherever else it stands,
    but for imports and SETUP."""
    inside, outside = set(), set()
    for path in [*SOLUTIONS.glob("*.ipynb"), *SOLUTIONS.joinpath("normlib").rglob("*.py")]:
        for text in _sources(path):
            for line, in_block in block_lines(text):
                (inside if in_block else outside).add(line)
    kit = {line.strip() for path in KIT.rglob("*.py") for line in path.read_text().splitlines()}
    hidden = {line.strip() for e in exercises() for line in e.hidden.splitlines()
              if line.strip() and not line.strip().startswith(("import ", "from "))}
    return (inside - outside - kit) | (hidden - outside - SETUP)


def leaks(top, folders=EDITION):
    """Solution or hidden-test markers, secret lines, or stored outputs in the edition
    (in these folders of top; (".",) for all of it, as in an nbgrader release)."""
    secret, problems = secret_lines(), []
    for rel in sorted(_files(top, folders)):
        path = Path(top) / rel
        for text in _sources(path):
            for line in text.splitlines():
                if has_marker(line):
                    problems.append(f"{rel}: marker {line.strip()!r}")
                elif line.strip() in secret:
                    problems.append(f"{rel}: solution line {line.strip()!r}")
        if path.suffix == ".ipynb":
            cells = json.loads(path.read_text())["cells"]
            if any(cell.get("outputs") for cell in cells):
                problems.append(f"{rel}: stored outputs (they could show solution results)")
    return problems


def problems():
    """What `--check` reports: every difference between a fresh generation and the
    committed edition, and every leak in either (an empty list when all is well)."""
    with tempfile.TemporaryDirectory() as tmp:
        generate(tmp)
        return differences(tmp, REPO) + leaks(tmp) + leaks(REPO, EDITION + (KIT.name,))


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
