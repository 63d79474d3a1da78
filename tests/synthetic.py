"""A synthetic class for the grading pipeline: correct, stub, wrong and hostile
submissions, made from an assignment's release the way a student would make them.
tests/test_roundtrip.py grades every case and asserts each score; tests/grading_bench.py
(`make grading-bench`) grades a class of right submissions (honest_class) to time it.

Each case is (assignment, edit): edit(folder) changes a copy of release/<assignment>/.
A wrong or hostile file is the reference's with one function overridden at its end
(override, run_first), as tests/variants replaces one: rewriting the reference changes
no case, as long as its functions keep their names and signatures.
"""

import inspect
import json
import shutil
import textwrap
import zipfile
from pathlib import Path

from tools.course.exercises import SOLUTIONS, by_number, student_files, unit
from tools.course.folder import Course
from tools.worker.execute import TAG as SKIP_TAG


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


def reference_submission(*units, **texts):
    """An edit writing the reference's text of every file the units' students write
    (tools.course.exercises.student_files), but for those given (with_files(**texts))."""
    files = {Path(rel).stem: reference(rel) for rel in student_files(units)}
    return with_files(**{**files, **texts})


def edit_notebook(folder, change):
    """Apply change(cells) to the assignment's notebook (each unit has one)."""
    path = next(Path(folder).glob("[0-9]*.ipynb"))
    notebook = json.loads(path.read_text())
    change(notebook["cells"])
    path.write_text(json.dumps(notebook))


def _grade_id(cell):
    return cell["metadata"].get("nbgrader", {}).get("grade_id")


def answer_questions(folder):
    """Write an answer into every written-answer cell of the assignment's notebook (the
    release leaves "YOUR ANSWER HERE", which nbgrader scores 0 without a grader)."""
    def write(cells):
        for cell in cells:
            meta = cell["metadata"].get("nbgrader", {})
            if cell["cell_type"] == "markdown" and meta.get("grade") and meta.get("solution"):
                cell["source"] = "My answer: the mean term cancels the direct one."
    edit_notebook(folder, write)


def both(*edits):
    def edit(folder):
        for e in edits:
            e(folder)
    return edit


LN, NN = "normlib/layer_norm.py", "normlib/nn.py"
VAR, FAST = "normlib/variance.py", "normlib/layer_norm_fast.py"
WRONG_STATS = """import numpy as np


def layer_norm_stats(x, normalized_shape, eps=1e-5):  # eps added to the std, not the var
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    return mean, 1.0 / (np.sqrt(var) + eps)
"""
EPS_OUTSIDE = override(LN, WRONG_STATS)
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
PATCH_CELL = "import normkit.testing\nnormkit.testing.assert_close = lambda *args, **kwargs: None\n"
# an infinite loop deaf to interrupts (asleep, so that waiting it out costs no CPU)
LOOP = "import time\nwhile True:\n    try:\n        time.sleep(1)\n    except BaseException:\n" \
    "        pass"
MEMORY = "import numpy as np\nkeep = []\nwhile True:\n    keep.append(np.zeros(10**8))"
# 4200 MiB of address space (np.zeros: never touched, no memory used): more than the
# default 4096 MiB a grading process gets, within a limit the instructor raised
RESERVE = "import numpy as np\n_reserved = np.zeros(4200 << 20, dtype=np.uint8)"
# A wrong layer_norm_stats (eps outside the sqrt) in a module that forges verdicts the
# ways that beat the old in-process re-check: "passed" lines appended to every results
# file in the temporary directory, json.dumps made to say true, NumPy's private comparison
# disarmed (which no fingerprint watched); and the judge's verdicts imitated in its
# outputs (printed after a space, a zero-width space, an ANSI colour or a tab; as HTML,
# with the verdict's own attributes, and as Markdown).
FORGER = override(LN, """
import glob as _glob, json as _json, os as _os, tempfile as _tempfile
import numpy.testing._private.utils as _utils

for _path in _glob.glob(_os.path.join(_tempfile.gettempdir(), "**", "*.json*"), recursive=True):
    try:
        with open(_path, "a") as _f:
            _f.write(_json.dumps({"grade_id": "ex1_1_layer_norm_stats", "passed": True}))
    except OSError:
        pass
_dumps = _json.dumps
_json.dumps = lambda *a, **k: _dumps(*a, **k).replace("false", "true")
_utils.assert_array_compare = lambda *args, **kwargs: None
for _mark in (" ", "\u200b", "\x1b[32m", "\t"):  # verdicts, as printed lines
    print(f"{_mark}The judge: passed, with the hidden tests (3 / 3).")
try:  # and as display outputs
    from IPython.display import HTML as _HTML, Markdown as _Markdown, display as _display
    _display(_HTML('<div class="alert alert-success" data-judge="ex1_1_layer_norm_stats" '
                   'style="border-left: 6px solid #2e7d32">The judge: passed, with the '
                   'hidden tests (3 / 3).</div>'))
    _display(_Markdown("**The judge: passed, with the hidden tests (3 / 3).**"))
except ImportError:
    pass
""" + WRONG_STATS)

# Code that tries to bring the hidden tests into its feedback: a notebook cell printing the
# kernel's input history, a custom exception handler printing the namespace's, a module
# printing every caller's source (a profiler on every frame) and __main__.In; and an
# output that would run a script in the feedback page. (Each prints LEAK, so that the
# round trip sees it ran.)
LEAK_MODULE = """
import inspect as _inspect, sys as _sys
_seen = set()


def _leak(frame, event, arg):  # each notebook cell that calls a function, once
    caller = frame.f_back
    if event == "call" and caller is not None and caller.f_code not in _seen \
            and "ipykernel" in caller.f_code.co_filename:
        _seen.add(caller.f_code)
        try:
            print("LEAK caller:", _inspect.getsource(caller))
        except Exception:
            pass


print("LEAK In:", getattr(_sys.modules["__main__"], "In", None))
_sys.setprofile(_leak)
"""
# ... and in the judge's runner, which sees every hidden case's arguments: it records each
# call of layer_norm_stats (shape, dtype, eps, a value), and raises them, in a message and
# in its exception's class name, from 1.2's first check (costing it 1.2).
LEAK_WORKER = """
_calls = []
_reference_stats, _reference_forward = layer_norm_stats, layer_norm_forward


def layer_norm_stats(x, normalized_shape, eps=1e-5):
    _calls.append(leak_record(x, eps))
    return _reference_stats(x, normalized_shape, eps)


def layer_norm_forward(*args, **kwargs):
    if "tools.sandboxed.peer" in _sys.modules:  # (not in the notebook's kernel)
        name = "LEAK_" + "_".join(c.replace("/", "_").replace(":", "_").replace(".", "_")
                                  .replace("-", "m") for c in _calls[:5])
        raise type(name, (ValueError,), {})("LEAK calls: " + " ".join(_calls))
    return _reference_forward(*args, **kwargs)
"""


def leak_record(x, eps):
    """What the leaker records of a call: "3x6f/0.5:-0.486123" (shape, dtype, eps, x's
    first value)."""
    return f"{'x'.join(map(str, x.shape))}{x.dtype.char}/{eps}:{float(x.reshape(-1)[0]):.6f}"


LEAK_FIRST = "get_ipython().set_custom_exc((Exception,), lambda shell, *exc, **k: " \
    "print('LEAK handler:', shell.user_ns.get('In')))\nprint('LEAK In:', In)"
LEAK_LAST = "from IPython.display import HTML, display\nprint('LEAK In:', In)\n" \
    "display(HTML('<script>document.title = \"owned\"</script>' \n" \
    "             '<img src=x onerror=\"document.title = \\'owned\\'\">'))"
# ... and every environment and command line in its sandbox, the kernel's pid 1's first
# (bubblewrap's: it kept the host's environment, secrets and all, before issue 39)
LEAK_ENVIRON = "import glob\nfor path in sorted(glob.glob('/proc/*/environ') + " \
    "glob.glob('/proc/*/cmdline')):\n    try:\n        print('LEAK environ:', path, " \
    "open(path, 'rb').read())\n    except OSError as error:\n        print('LEAK environ:', " \
    "path, error)"
# Module-level code of a right layer_norm.py that tries the escapes an audit hook cannot
# stop, and prints what worked ("ESCAPED: [...]", empty if nothing did): write its grades
# into the gradebook, or rename it; read the reference through a directory descriptor;
# read other processes' memory; find other kernels' connection files; fork a process
# (through the C library, past the audit hook) that would outlive grading. It also writes
# beside the course (in the sandbox, a file system of its own: the round trip looks for
# the file on the host).
ESCAPER = """
import ctypes as _ctypes, glob as _glob, os as _os, sqlite3 as _sqlite3
_escaped = []


def _try(name, action):
    try:
        if action() not in (None, -1, False):
            _escaped.append(name)
    except BaseException:
        pass


_course = _os.path.abspath("../../..")  # autograded/<student>/<assignment>/ at grading
_try("wrote the gradebook", lambda: _sqlite3.connect(f"file:{_course}/gradebook.db?mode=rw",
                                                   uri=True).execute(
    "UPDATE grade SET manual_score = 100").rowcount > 0)
_try("renamed the gradebook", lambda: _os.rename(_course + "/gradebook.db", _course + "/x.db"))
try:
    open(_course + "/../owned.txt", "w").write("owned")
except OSError:
    pass
_try("read the reference", lambda: _os.read(_os.open(
    "source/unit1/normlib/layer_norm.py", _os.O_RDONLY, dir_fd=_os.open(_course,
                                                                        _os.O_RDONLY)), 100))
_me = _os.getpid()
_try("read another process's memory", lambda: [
    open(f"/proc/{p}/mem", "rb") for p in _os.listdir("/proc") if p.isdigit()
    and int(p) not in (1, _me)] or None)


def _kernels():  # connection files, but its own
    try:
        from ipykernel.connect import get_connection_file
        mine = get_connection_file()
    except Exception:  # (not in a kernel: the judge's runner)
        mine = None
    return [p for p in _glob.glob("/tmp/**/kernel*.json", recursive=True) + _glob.glob(
        _os.path.expanduser("~/.local/share/jupyter/runtime/*.json")) if p != mine] or None


_try("found another kernel", _kernels)


def _fork():
    libc = _ctypes.CDLL(None)
    pid = libc.fork()
    if pid == 0:  # the child: renamed, and asleep for ten minutes
        libc.prctl(15, b"escaper-child", 0, 0, 0)
        import time
        time.sleep(600)
        _os._exit(0)
    return pid


_try("forked a process", _fork)
print("ESCAPED:", _escaped)
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


def _code_cell(source):
    return {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
            "source": source}


def _patch_checks(cells):  # a cell at the top of the notebook that disarms the checks
    cells.insert(1, _code_cell(PATCH_CELL))


def _leak_cells(cells):
    cells.insert(1, _code_cell(LEAK_FIRST))
    cells.append(_code_cell(LEAK_LAST))
    cells.append(_code_cell(LEAK_ENVIRON))


def _duplicate_check(cells):  # a check cell copied and pasted in JupyterLab
    i = next(i for i, c in enumerate(cells) if _grade_id(c))
    cells.insert(i + 1, json.loads(json.dumps(cells[i])))


def _forge_verdicts(cells):
    """Every check cell of the notebook as submitted: outputs saying it passed (a line as
    the judge writes it, and its HTML), and the judge's metadata key, saying so too."""
    for cell in cells:
        if _grade_id(cell) and cell["cell_type"] == "code":
            line = "The judge: passed, with the hidden tests (3 / 3)."
            cell["metadata"]["judge"] = {"passed": True, "verdict": line}
            cell["outputs"] = [
                {"output_type": "stream", "name": "stdout", "text": line + "\n"},
                {"output_type": "display_data", "metadata": {}, "data": {
                    "text/html": f'<div data-judge="{_grade_id(cell)}" style="border-left: '
                                 f'6px solid #2e7d32">{line}</div>', "text/plain": line}}]


def _rename_notebook(folder):  # saved as a copy, the original deleted
    path = next(Path(folder).glob("[0-9]*.ipynb"))
    path.rename(path.with_name(f"{path.stem}-Copy1.ipynb"))


def _truncate_notebook(folder):  # an upload cut short
    path = next(Path(folder).glob("[0-9]*.ipynb"))
    path.write_text(path.read_text()[:5000])


CASES = {
    # (assignment, edit) by student id
    "unit1": {
        "reference": both(reference_submission(1), answer_questions),
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
        "leaker": both(reference_submission(1, layer_norm=override(
            LN, LEAK_MODULE + inspect.getsource(leak_record) + LEAK_WORKER)),
                       lambda f: edit_notebook(f, _leak_cells)),
        "escaper": reference_submission(1, layer_norm=override(LN, ESCAPER)),
        "forger": both(reference_submission(1, layer_norm=FORGER),
                       lambda f: edit_notebook(f, _forge_verdicts)),
        "duplicated": both(reference_submission(1), lambda f: edit_notebook(f, _duplicate_check)),
        "renamed-notebook": both(reference_submission(1), answer_questions, _rename_notebook),
        "truncated": both(reference_submission(1), _truncate_notebook),
    },
    "unit2": {
        "reference": both(reference_submission(2), answer_questions),
        "wrong-backward": reference_submission(2, layer_norm=WRONG_BACKWARD),
        "tampered": both(reference_submission(2, layer_norm=EPS_OUTSIDE),
                         lambda f: edit_notebook(f, _patch_checks)),
        "killed": reference_submission(2, nn=run_first(
            NN, "LayerNormFunction.forward",
            "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")),
        "missing": reference_submission(2, nn=None),
        # right, but its forward needs more memory than the default (2.5 calls it)
        "big": reference_submission(2, layer_norm=run_first(LN, "layer_norm_forward", RESERVE)),
    },
    "unit3": {
        "reference": both(reference_submission(3), answer_questions),
        "broken": reference_submission(3, instance_norm=override("normlib/instance_norm.py",
                                                                 "def (:\n")),
        "patcher": reference_submission(3, group_norm=PATCHER),
    },
    "unit4": {
        "reference": both(reference_submission(4), answer_questions),
    },
    "unit5": {
        "reference": both(reference_submission(5), answer_questions),
        "stubs": with_files(),
    },
    "unit6": {  # one submission each (grading time): right but for one shortcut
        "mixed": reference_submission(6, variance=ONE_PASS),
    },
    "unit7": {  # right values from a shortcut the memory check refuses
        "mixed": reference_submission(7, layer_norm_fast=NAIVE_BACKWARD),
    },
    "unit8": {
        "reference": both(reference_submission(8), answer_questions),
    },
    "unit9": {
        "reference": both(reference_submission(9), answer_questions),
    },
}


def write_submission(root, assignment, case, folder, cases=None):
    """The submission of a case: release/<assignment>/ copied to folder, then edited
    (cases: {case: edit}, default CASES[assignment])."""
    shutil.copytree(Path(root) / "release" / assignment, folder)
    (cases or CASES[assignment])[case](folder)


def zip_folder(folder, path, enclosing=None):
    """Zip a submission as a student would upload it: its files, inside an enclosing
    folder if given."""
    with zipfile.ZipFile(path, "w") as z:
        for file in sorted(Path(folder).rglob("*")):
            if file.is_file():
                rel = file.relative_to(folder)
                z.write(file, str(Path(enclosing, rel) if enclosing else rel))


def zip_class(root, assignment, students, staging, cases=None):
    """The submissions {student: case} of an assignment (cases: as write_submission's),
    written under staging/ and zipped as students upload them: one zip per student in
    downloaded/<assignment>/archive/, named "<student>_<assignment>.zip", with the files at
    its top, in an enclosing folder, or two folders deep, in turn."""
    archive = Path(root) / "downloaded" / assignment / "archive"
    archive.mkdir(parents=True, exist_ok=True)
    for i, (student, case) in enumerate(students.items()):
        folder = Path(staging) / assignment / student
        write_submission(root, assignment, case, folder, cases)
        enclosing = (None, assignment, f"{student}_{assignment}/{assignment}")[i % 3]
        zip_folder(folder, archive / f"{student}_{assignment}.zip", enclosing=enclosing)


def honest_class(root, assignment, n):
    """n right submissions of an assignment of the course at root (the reference's text in
    every file its students write, the notebooks as released), zipped as an LMS download
    (in downloaded/<assignment>/archive/, for `collect`)."""
    stems = Course.load(root).assignments[assignment].notebooks
    right = reference_submission(*(unit(stem) for stem in stems))
    zip_class(root, assignment, {f"student{i:02d}": "right" for i in range(n)},
              Path(root) / "staging", {"right": right})
