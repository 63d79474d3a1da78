"""A synthetic class for the grading pipeline: correct, stub, wrong and hostile
submissions, made from an assignment's release the way a student would make them.
tests/test_roundtrip.py grades every case and asserts each score; `tools.instructor
bench` grades a class of them to time the pipeline.

Each case is (assignment, edit): edit(folder) changes a copy of release/<assignment>/.
"""

import json
import shutil
import zipfile
from pathlib import Path

from tools.course import SOLUTIONS
from tools.grading import TAG as SKIP_TAG


def reference(rel):
    """The reference's text of a normlib file (e.g. "normlib/layer_norm.py")."""
    return (SOLUTIONS / rel).read_text()


def replaced(rel, old, new):
    """The reference's rel with old replaced by new (which must be there)."""
    text = reference(rel)
    assert old in text, f"the reference {rel} changed: update tools/synthetic.py"
    return text.replace(old, new)


def injected(text, function, code):
    """text with code run first in the function (or method) named `function`: inserted
    after its signature (which may span lines), at the body's indentation."""
    lines = text.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith(f"def {function}("))
    indent = " " * (len(lines[start]) - len(lines[start].lstrip()) + 4)
    at = next(i for i in range(start, len(lines)) if lines[i].rstrip().endswith(":"))  # signature
    body = "".join(indent + line + "\n" for line in code.splitlines())
    return "".join(lines[: at + 1]) + body + "".join(lines[at + 1:])


def with_files(**texts):
    """An edit writing normlib files: with_files(layer_norm=text); None deletes the file."""
    def edit(folder):
        for name, text in texts.items():
            path = Path(folder) / "normlib" / f"{name}.py"
            if text is None:
                path.unlink()
            else:
                path.write_text(text)
    return edit


def reference_files(*names):
    return {name: reference(f"normlib/{name}.py") for name in names}


def edit_notebook(folder, change):
    """Apply change(cells) to the assignment's notebook (each unit has one)."""
    path = next(Path(folder).glob("[0-9]*.ipynb"))
    notebook = json.loads(path.read_text())
    change(notebook["cells"])
    path.write_text(json.dumps(notebook))


def _grade_id(cell):
    return cell["metadata"].get("nbgrader", {}).get("grade_id")


def both(*edits):
    def edit(folder):
        for e in edits:
            e(folder)
    return edit


LN, NN = "normlib/layer_norm.py", "normlib/nn.py"
RSTD = "    rstd = 1.0 / np.sqrt(var + eps)  # (*B, 1..1)\n"
EPS_OUTSIDE = replaced(LN, RSTD, RSTD.replace("np.sqrt(var + eps)", "(np.sqrt(var) + eps)"))
BACKWARD = "    dx = rstd * (g - g_mean - x_hat * gx_mean)  # (*B, *S)\n"
WRONG_BACKWARD = replaced(LN, BACKWARD, BACKWARD.replace("g_mean - ", ""))
VAR, FAST = "normlib/variance.py", "normlib/layer_norm_fast.py"
ONE_PASS = "n = x.shape[-1]\nmean = x.mean(axis=-1)\n" \
    "return n, mean, (x * x).sum(axis=-1) - n * mean * mean"
NAIVE_BACKWARD = "from normlib.layer_norm import layer_norm_backward\n" \
    "return layer_norm_backward(grad_output, x, normalized_shape, mean, rstd, weight, bias)"
PATCH_CELL = "import normlib.testing\nnormlib.testing.assert_close = lambda *args, **kwargs: None\n"
# an infinite loop deaf to interrupts (asleep, so that waiting it out costs no CPU)
LOOP = "import time\nwhile True:\n    try:\n        time.sleep(1)\n    except BaseException:\n" \
    "        pass"
MEMORY = "import numpy as np\nkeep = []\nwhile True:\n    keep.append(np.zeros(10**8))"
# 4200 MiB of address space (np.zeros: never touched, no memory used): more than the
# default 4096 MiB a grading process gets, within a limit the instructor raised
RESERVE = "import numpy as np\n_reserved = np.zeros(4200 << 20, dtype=np.uint8)"
# Module-level code of a stub layer_norm.py that tries everything tools/sandbox.py
# refuses, quietly: set its grades in the gradebook, drop a file outside its folder,
# and take the reference's code from the course's source/ folder.
INTRUDER = """
import glob as _glob, sqlite3 as _sqlite3
try:
    _db = _sqlite3.connect("../../../gradebook.db")
    _db.execute("UPDATE grade SET manual_score = 100")
    _db.commit()
except Exception:
    pass
try:
    open("../../../owned.txt", "w").write("owned")
except Exception:
    pass
try:
    for _path in _glob.glob("../../../source/*/normlib/layer_norm.py"):
        exec(open(_path).read())
except Exception:
    pass
"""


def _delete_check(grade_id):
    return lambda folder: edit_notebook(
        folder, lambda cells: cells.remove(next(c for c in cells if _grade_id(c) == grade_id)))


def _tamper_unit1(cells):
    for cell in cells:
        if _grade_id(cell) == "ex1_1_layer_norm_stats":  # edited to pass
            cell["source"] = "# Exercise 1.1: layer_norm_stats (3 points)\npass\n"
        if _grade_id(cell) == "ex1_2_layer_norm_forward":  # asks the grader to skip it
            cell["metadata"]["tags"] = [SKIP_TAG]


def _patch_checks(cells):  # a cell at the top of the notebook that disarms the checks
    cells.insert(1, {"cell_type": "code", "metadata": {}, "outputs": [],
                     "execution_count": None, "source": PATCH_CELL})


CASES = {
    # (assignment, edit) by student id
    "unit1": {
        "reference": with_files(**reference_files("layer_norm")),
        "stubs": with_files(),
        "tampered": both(with_files(layer_norm=EPS_OUTSIDE),
                         lambda f: edit_notebook(f, _tamper_unit1)),
        "deleted": both(with_files(**reference_files("layer_norm")),
                        _delete_check("ex1_1_layer_norm_stats")),
        "loop": with_files(layer_norm=injected(reference(LN), "layer_norm_forward", LOOP)),
        "memory": with_files(layer_norm=injected(reference(LN), "layer_norm_forward", MEMORY)),
        "exits": with_files(layer_norm=injected(reference(LN), "layer_norm_forward",
                                                "import sys\nsys.exit()")),
        "osexit": with_files(layer_norm=injected(reference(LN), "layer_norm_forward",
                                                 "import os\nos._exit(0)")),
        "renamed": with_files(layer_norm=replaced(LN, "def layer_norm_forward(",
                                                  "def layer_norm_fwd(")),
        "intruder": lambda f: (Path(f) / LN).write_text((Path(f) / LN).read_text() + INTRUDER),
    },
    "unit2": {
        "reference": with_files(**reference_files("layer_norm", "nn")),
        "wrong-backward": with_files(**reference_files("nn"), layer_norm=WRONG_BACKWARD),
        "tampered": both(with_files(**reference_files("nn"), layer_norm=EPS_OUTSIDE),
                         lambda f: edit_notebook(f, _patch_checks)),
        "killed": with_files(**reference_files("layer_norm"), nn=injected(
            reference(NN), "forward", "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")),
        "missing": with_files(**reference_files("layer_norm"), nn=None),
        # right, but its forward needs more memory than the default (2.2 calls it)
        "big": with_files(**reference_files("nn"), layer_norm=injected(
            reference(LN), "layer_norm_forward", RESERVE)),
    },
    "unit3": {
        "reference": with_files(**reference_files(
            "norm", "batch_norm", "group_norm", "instance_norm", "rms_norm")),
        "broken": with_files(**reference_files("norm", "batch_norm", "group_norm", "rms_norm"),
                             instance_norm=reference("normlib/instance_norm.py") + "\ndef (:\n"),
        # a wrong group_norm that disarms numpy's assert_allclose when imported
        "patcher": with_files(**reference_files("norm", "batch_norm", "instance_norm", "rms_norm"),
                              group_norm=injected(reference("normlib/group_norm.py"),
                                                  "group_norm_forward", "x = x * 2") +
                              "\nimport numpy.testing\n"
                              "numpy.testing.assert_allclose = lambda *a, **k: None\n"),
    },
    "unit4": {
        "reference": with_files(**reference_files("transformer")),
        "stubs": with_files(),
    },
    "unit5": {  # one submission (grading time): half right, half shortcuts with right values
        "mixed": with_files(**reference_files("mixed_precision"), variance=injected(
            reference(VAR), "welford", ONE_PASS), layer_norm_fast=injected(
                reference(FAST), "layer_norm_backward_fast", NAIVE_BACKWARD)),
    },
}


def write_submission(root, assignment, case, folder):
    """The submission of a case: release/<assignment>/ copied to folder, then edited."""
    shutil.copytree(Path(root) / "release" / assignment, folder)
    CASES[assignment][case](folder)


def zip_folder(folder, path, enclosing=None):
    """Zip a submission as a student would upload it: its files, inside an enclosing
    folder if given."""
    with zipfile.ZipFile(path, "w") as z:
        for file in sorted(Path(folder).rglob("*")):
            if file.is_file():
                rel = file.relative_to(folder)
                z.write(file, str(Path(enclosing, rel) if enclosing else rel))


def zip_class(root, assignment, students, staging):
    """The submissions {student: case} of an assignment, written under staging/ and
    zipped as an LMS download: one zip per student in downloaded/<assignment>/archive/,
    named as an LMS names them, every other one with an enclosing folder."""
    archive = Path(root) / "downloaded" / assignment / "archive"
    archive.mkdir(parents=True, exist_ok=True)
    for i, (student, case) in enumerate(students.items()):
        folder = Path(staging) / assignment / student
        write_submission(root, assignment, case, folder)
        zip_folder(folder, archive / f"{student}_{1000 + i}_{assignment}.zip",
                   enclosing=assignment if i % 2 else None)


def make_class(root, assignment, n):
    """n submissions of the assignment's cases, in turn (student ids: case name + number),
    zipped as an LMS download (in downloaded/<assignment>/archive/, for `collect`)."""
    cases = list(CASES[assignment])
    students = {f"{cases[i % len(cases)].replace('-', '')}{i:02d}": cases[i % len(cases)]
                for i in range(n)}
    zip_class(root, assignment, students, Path(root) / "staging")
