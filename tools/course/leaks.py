"""What must never leave the instructor's machine, and a folder scanned for it: the lines of
solutions/ that stand only in solution or hidden-test blocks (secret_lines), and any such
line, marker or stored output in a folder (leaks). The student edition
(tools/maintainer/edition.py) and every release (tools/instructor/release.py) are scanned
with it.
"""

import json
from pathlib import Path

from tools.course.exercises import SOLUTIONS, exercises
from tools.course.folder import NORMKIT
from tools.course.markers import block_lines, has_marker

EDITION = ("notebooks", "normlib")  # the folders of the student edition


def files_in(top, folders=EDITION):
    return {
        p.relative_to(top)
        for folder in folders
        for p in (Path(top) / folder).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and ".ipynb_checkpoints" not in p.parts
    }


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
    provided = {line.strip() for path in NORMKIT.rglob("*.py")
                for line in path.read_text().splitlines()}
    hidden = {line.strip() for e in exercises() for line in e.hidden.splitlines()
              if line.strip() and not line.strip().startswith(("import ", "from "))}
    return (inside - outside - provided) | (hidden - outside - SETUP)


def leaks(top, folders=EDITION):
    """Solution or hidden-test markers, secret lines, or stored outputs in the edition
    (in these folders of top; (".",) for all of it, as in an nbgrader release)."""
    secret, problems = secret_lines(), []
    for rel in sorted(files_in(top, folders)):
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
