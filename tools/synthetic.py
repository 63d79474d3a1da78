"""A synthetic class for the grading pipeline: correct, stub, wrong and hostile
submissions, made from an assignment's release the way a student would make them.
tests/test_roundtrip.py grades every case and asserts each score; `tools.instructor
bench` grades a class of them to time the pipeline.

Each case is (assignment, edit): edit(folder) changes a copy of release/<assignment>/.
A wrong or hostile file is the reference's with one function overridden at its end
(override, run_first), as tests/variants replaces one: rewriting the reference changes
no case, as long as its functions keep their names and signatures.
"""

import json
import shutil
import textwrap
import zipfile
from pathlib import Path

from tools.exercises import SOLUTIONS, by_number, student_files
from tools.grading import TAG as SKIP_TAG


def reference(rel):
    """The reference's text of a normlib file (e.g. "normlib/layer_norm.py")."""
    return (SOLUTIONS / rel).read_text()


def override(rel, code):
    """The reference's rel with code appended: a name code defines replaces the
    reference's (the later definition wins), as a variant of tests/variants replaces one
    function. Nothing here depends on the reference's text, only on its names."""
    return f"{reference(rel)}\n\n# --- the submission's own version ---\n{code}"


def run_first(rel, name, code):
    """override: `name` (a function, or a staticmethod Class.method, such as an autograd
    Function's) runs code, then the reference's."""
    owner, _, attr = name.rpartition(".")
    wrapper = f"""
def _submission_code():
{textwrap.indent(code, "    ")}


_reference = {name}


def _run_first(*args, **kwargs):
    _submission_code()
    return _reference(*args, **kwargs)


"""
    wrapper += f"{owner}.{attr} = staticmethod(_run_first)\n" if owner else f"{attr} = _run_first\n"
    return override(rel, wrapper)


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


def reference_submission(unit, **texts):
    """An edit writing the reference's text of every file the unit's students write
    (tools.exercises.student_files), but for those given (with_files(**texts))."""
    files = {Path(rel).stem: reference(rel) for rel in student_files([unit])}
    return with_files(**{**files, **texts})


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
VAR, FAST = "normlib/variance.py", "normlib/layer_norm_fast.py"
EPS_OUTSIDE = override(LN, """import numpy as np


def layer_norm_stats(x, normalized_shape, eps=1e-5):  # eps added to the std, not the var
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    return mean, 1.0 / (np.sqrt(var) + eps)
""")
WRONG_BACKWARD = override(LN, """
def layer_norm_backward(grad_output, x, normalized_shape, mean, rstd, weight=None, bias=None):
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    lead = tuple(range(x.ndim - len(normalized_shape)))
    x_hat = (x - mean) * rstd
    dweight = None if weight is None else (grad_output * x_hat).sum(axis=lead)
    dbias = None if bias is None else grad_output.sum(axis=lead)
    g = grad_output if weight is None else grad_output * weight
    dx = rstd * (g - x_hat * (g * x_hat).mean(axis=axes, keepdims=True))  # no mean(g) term
    return dx, dweight, dbias
""")
RENAMED = override(LN, "layer_norm_fwd = layer_norm_forward\ndel layer_norm_forward\n")
ONE_PASS = override(VAR, """
def welford(x):  # right values, but a one-pass sum of squares, not Welford's updates
    n = x.shape[-1]
    mean = x.mean(axis=-1)
    return n, mean, (x * x).sum(axis=-1) - n * mean * mean
""")
NAIVE_BACKWARD = override(FAST, """
def layer_norm_backward_fast(grad_output, x, normalized_shape, mean, rstd, weight=None,
                             bias=None):  # right values, with the naive kernel's temporaries
    from normlib.layer_norm import layer_norm_backward
    return layer_norm_backward(grad_output, x, normalized_shape, mean, rstd, weight, bias)
""")
# a wrong group_norm (the input doubled) that disarms numpy's assert_allclose when imported
PATCHER = override("normlib/group_norm.py", """
_reference_group_norm_forward = group_norm_forward


def group_norm_forward(x, num_groups, weight=None, bias=None, eps=1e-5):
    return _reference_group_norm_forward(x * 2, num_groups, weight, bias, eps)


import numpy.testing  # noqa: E402
numpy.testing.assert_allclose = lambda *a, **k: None
""")
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
        if _grade_id(cell) == by_number()["1.1"].grade_id:  # edited to pass
            cell["source"] = "# Exercise 1.1: layer_norm_stats (3 points)\npass\n"
        if _grade_id(cell) == by_number()["1.2"].grade_id:  # asks the grader to skip it
            cell["metadata"]["tags"] = [SKIP_TAG]


def _patch_checks(cells):  # a cell at the top of the notebook that disarms the checks
    cells.insert(1, {"cell_type": "code", "metadata": {}, "outputs": [],
                     "execution_count": None, "source": PATCH_CELL})


CASES = {
    # (assignment, edit) by student id
    "unit1": {
        "reference": reference_submission(1),
        "stubs": with_files(),
        "tampered": both(reference_submission(1, layer_norm=EPS_OUTSIDE),
                         lambda f: edit_notebook(f, _tamper_unit1)),
        "deleted": both(reference_submission(1), _delete_check(by_number()["1.1"].grade_id)),
        "loop": reference_submission(1, layer_norm=run_first(LN, "layer_norm_forward", LOOP)),
        "memory": reference_submission(1, layer_norm=run_first(LN, "layer_norm_forward", MEMORY)),
        "exits": reference_submission(1, layer_norm=run_first(LN, "layer_norm_forward",
                                                              "import sys\nsys.exit()")),
        "osexit": reference_submission(1, layer_norm=run_first(LN, "layer_norm_forward",
                                                               "import os\nos._exit(0)")),
        "renamed": reference_submission(1, layer_norm=RENAMED),
        "intruder": lambda f: (Path(f) / LN).write_text((Path(f) / LN).read_text() + INTRUDER),
    },
    "unit2": {
        "reference": reference_submission(2),
        "wrong-backward": reference_submission(2, layer_norm=WRONG_BACKWARD),
        "tampered": both(reference_submission(2, layer_norm=EPS_OUTSIDE),
                         lambda f: edit_notebook(f, _patch_checks)),
        "killed": reference_submission(2, nn=run_first(
            NN, "LayerNormFunction.forward",
            "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")),
        "missing": reference_submission(2, nn=None),
        # right, but its forward needs more memory than the default (2.2 calls it)
        "big": reference_submission(2, layer_norm=run_first(LN, "layer_norm_forward", RESERVE)),
    },
    "unit3": {
        "reference": reference_submission(3),
        "broken": reference_submission(3, instance_norm=override("normlib/instance_norm.py",
                                                                 "def (:\n")),
        "patcher": reference_submission(3, group_norm=PATCHER),
    },
    "unit4": {
        "reference": reference_submission(4),
        "stubs": with_files(),
    },
    "unit5": {  # one submission (grading time): half right, half shortcuts with right values
        "mixed": reference_submission(5, variance=ONE_PASS, layer_norm_fast=NAIVE_BACKWARD),
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
