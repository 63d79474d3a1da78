"""The compiled, fused LayerNorm of Exercises 7.3 and 7.4 (Numba): what the checks read in a
kernel's code (normkit/kernel_code.py), the judge's compile step and its measure of a
compiled kernel's memory (tools/judge/judge.py), and the course where Numba is missing.

(Every wrong and right variant of tests/variants/wrong_compiled.py and right_compiled.py
runs through the checks in tests/test_graders.py and tests/test_diagnosis.py.)
"""

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from normkit.kernel_code import code_cause, races, resolve_source
from tests.test_judge import IN_PROCESS, judge_in_process, needs_bwrap, submission
from tools.course.exercises import REPO, SOLUTIONS, by_number
from tools.sandboxed.limits import Limits

REFERENCE = (SOLUTIONS / "normlib" / "layer_norm_compiled.py").read_text()
WRONG = (REPO / "tests" / "variants" / "wrong_compiled.py").read_text()
RIGHT = (REPO / "tests" / "variants" / "right_compiled.py").read_text()


def kernel(body, decorator="@njit(parallel=True, fastmath=FAST)"):
    """A module's source with one kernel, `k`, of this body."""
    return (f'FAST = {{"reassoc", "contract"}}\n\n\n{decorator}\ndef k(x, out, parts):\n'
            + textwrap.indent(textwrap.dedent(body), "    "))


RACES = {  # a write two iterations may both make
    "an element indexed by the inner loop alone": """
        for r in prange(x.shape[0]):
            for j in range(x.shape[1]):
                out[j] += x[r, j]
        """,
    "a plain assignment of a sum": """
        for r in prange(x.shape[0]):
            for j in range(x.shape[1]):
                out[j] = out[j] + x[r, j]
        """,
    "one cell for every iteration": """
        for r in prange(x.shape[0]):
            out[0] += x[r, 0]
        """,
    "an inner loop as long as the row (len)": """
        for r in prange(x.shape[0]):
            xr = x[r]
            for j in range(len(xr)):
                out[j] += xr[j]
        """,
    "an inner loop over enumerate": """
        for r in prange(x.shape[0]):
            for j, v in enumerate(x[r]):
                out[j] += v
        """,
    "a part chosen by r % parts": """
        for r in prange(x.shape[0]):
            out[r % parts, 0] += x[r, 0]
        """,
    "a chained subscript": """
        for r in prange(x.shape[0]):
            out[0][r % 2] += x[r, 0]
        """,
    "an alias of a shared row": """
        for r in prange(x.shape[0]):
            row = out[0]
            row[1] += x[r, 0]
        """,
    "windows that overlap": """
        for r in prange(x.shape[0]):
            for j in range(3):
                out[r + j] += x[r, j]
        """,
    "an inner loop that starts at r * 0 (issue 58's attack)": """
        for r in prange(x.shape[0]):
            for j in range(r * 0, x.shape[1]):
                out[j] += x[r, j]
        """,
    "blocks that overlap": """
        for b in prange(parts):
            for r in range(8 * b, 8 * b + 16):
                out[r, 0] += x[r, 0]
        """,
    "blocks whose start is no monotone function of the part": """
        for b in prange(parts):
            for r in range(b % 2 * 8, (b + 1) % 2 * 8):
                out[r, 0] += x[r, 0]
        """,
    "blocks of a size the loop changes": """
        for b in prange(parts):
            n = b
            for r in range(b * n, (b + 1) * n):
                out[r, 0] += x[r, 0]
        """,
    "a stride other than the count of parts": """
        for p in prange(parts):
            for r in range(p, x.shape[0], 2):
                out[r, 0] += x[r, 0]
        """,
    "the loop's variable bound again": """
        for r in prange(x.shape[0]):
            r = 0
            out[r] += x[r, 0]
        """,
    "a row bound again after its exact value": """
        for r in prange(x.shape[0]):
            q = r
            if x[r, 0] > 0:
                q = 0
            out[q] += x[r, 0]
        """,
    "the row and the next row written (issue 58's residual)": """
        for r in prange(x.shape[0] - 1):
            out[r, 0] = x[r, 0]
            out[r + 1, 0] += x[r, 1]
        """,
    "a row and the thread's row of one array": """
        for r in prange(x.shape[0]):
            t = numba.get_thread_id()
            out[r, 0] = x[r, 0]
            out[t, 0] += x[r, 1]
        """,
    "a row bound by a tuple": """
        for r in prange(x.shape[0]):
            q, s = r * 0, r
            out[q] += x[s, 0]
        """,
}
OWNED = {  # writes that belong to their iteration
    "indexed by the loop's variable": """
        for r in prange(x.shape[0]):
            out[r] = x[r, 0]
        """,
    "indexed by a row computed from the part": """
        for p in prange(parts):
            for r in range(p * x.shape[0] // parts, (p + 1) * x.shape[0] // parts):
                out[p, 0] += x[r, 0]
                x2 = r
                out[x2, 1] = 0.0
        """,
    "indexed by the thread's id": """
        for r in prange(x.shape[0]):
            t = numba.get_thread_id()
            out[t, 0] += x[r, 0]
        """,
    "a scratch row made in the iteration": """
        for r in prange(x.shape[0]):
            row = np.empty(x.shape[1])
            for j in range(x.shape[1]):
                row[j] = x[r, j]
        """,
    "a whole-array reduction, which Numba makes private": """
        for r in prange(x.shape[0]):
            out += x[r]
        """,
    "a view of the iteration's own row": """
        for r in prange(x.shape[0]):
            out_row = out[r]
            for j in range(x.shape[1]):
                out_row[j] = x[r, j]
        """,
    "the next element, r + 1": """
        for r in prange(x.shape[0] - 1):
            out[r + 1] = x[r, 0]
        """,
    "a part's rows by stride": """
        for p in prange(parts):
            for r in range(p, x.shape[0], parts):
                out[p, 0] += x[r, 0]
                out[r, 1] = x[r, 0]
        """,
    "a part's rows, the next part's first row written out": """
        for p in prange(parts):
            for r in range(p * x.shape[0] // parts, (p * x.shape[0] + x.shape[0]) // parts):
                out[r, 1] = x[r, 0]
        """,
    "a row written at two columns, and through its alias": """
        for r in prange(x.shape[0]):
            out[r, 0] = x[r, 0]
            out[r, 1] = x[r, 1]
            q = r
            out[q, 1] += x[r, 0]
        """,
    "blocks of 16, the last one cut": """
        for b in prange(parts):
            for r in range(16 * b, min(x.shape[0], 16 + b * 16)):
                for c in range(2 * r, 2 * r + 2):
                    out[c, 0] = x[r, 0]
        """,
}


@pytest.mark.parametrize("body", RACES.values(), ids=list(RACES))
def test_a_write_two_iterations_may_make_is_a_race(body):
    assert races(kernel(body), "k")
    assert "a data race" in code_cause(kernel(body), "k")


@pytest.mark.parametrize("body", OWNED.values(), ids=list(OWNED))
def test_a_write_of_the_iterations_own_is_no_race(body):
    assert races(kernel(body), "k") == []
    assert code_cause(kernel(body), "k") == ""


def test_the_reference_and_every_right_variant_read_clean_and_the_race_does_not():
    for name in ("layer_norm_forward_compiled", "layer_norm_backward_compiled"):
        assert code_cause(REFERENCE, name) == ""
    for name in ("forward_welford", "forward_blocks_with_scratch", "backward_thread_partials",
                 "backward_by_columns"):  # (their helpers read in compiled_rows.py)
        assert code_cause(RIGHT, name, resolve_source) == "", name
    lines = WRONG.splitlines()
    loop = next(n for n, line in enumerate(lines, 1) if line.startswith("def backward_race(")) + 5
    assert lines[loop - 1].strip() == "for r in prange(rows):"
    assert [(race.array, race.loop) for race in races(WRONG, "backward_race",
                                                     resolve_source)] == \
        [("dweight", loop), ("dbias", loop)]


HELPERS = '''
@njit
def add_row(total, x, r):
    for j in range(x.shape[1]):
        total[j] += x[r, j]


@njit
def add_into_part(parts, x, p, r):
    for j in range(x.shape[1]):
        parts[p, j] += x[r, j]


@njit
def through(total, x, r):
    add_row(total, x, r)


@njit
def fill(row, x, r):
    for j in range(x.shape[1]):
        row[j] = x[r, j]
'''


@pytest.mark.parametrize("body, words", [
    ("for r in prange(x.shape[0]):\n    add_row(out, x, r)\n",
     "line 29 calls add_row, whose line 5 writes out[...]"),
    ("for r in prange(x.shape[0]):\n    through(out, x, r)\n",
     "line 29 calls through, whose line 16 calls add_row, whose line 5 writes out[...]"),
    ("for r in prange(x.shape[0]):\n    add_into_part(parts, x, r * 0, r)\n",
     "line 29 calls add_into_part, whose line 11 writes parts[...]"),
    ("for r in prange(x.shape[0]):\n    imported(out, x, r)\n",
     "the check cannot read imported, which line 29 calls from the prange loop (line 28) "
     "with out"),
])
def test_a_write_in_a_function_the_loop_calls_is_read_as_if_inlined(body, words):
    """Through any depth of calls in the file, with the caller's arrays and the loop's
    ownership passed to the parameters; a call the reader cannot follow, given an array
    the iterations share, is said to be unreadable."""
    source = HELPERS + kernel(body)
    assert words in code_cause(source, "k"), code_cause(source, "k")


@pytest.mark.parametrize("body", [
    "for p in prange(parts.shape[0]):\n    for r in range(p, x.shape[0], parts.shape[0]):\n"
    "        add_into_part(parts, x, p, r)\n",
    "for r in prange(x.shape[0]):\n    fill(out[r], x, r)\n",  # a view of its own row
    "for r in prange(x.shape[0]):\n    row = np.empty(x.shape[1])\n    fill(row, x, r)\n",
    "for r in prange(x.shape[0]):\n    out[r] = np.dot(x[r], x[r])\n",
])
def test_a_function_given_the_iterations_own_arrays_is_no_race(body):
    source = HELPERS + kernel(body)
    assert races(source, "k") == [] and code_cause(source, "k") == ""


@pytest.mark.parametrize("body, words", [
    ("for r in prange(x.shape[0]):\n    add_row(out[0], x, r)\n",  # a row of a shared array
     "line 30 calls add_row, whose line 6 writes out[...]"),
    ("for r in prange(x.shape[0]):\n    hm.acc(out, x, r)\n",  # a function of a module
     "the check cannot read hm.acc, which line 30 calls"),
])
def test_a_shared_row_or_a_modules_function_is_followed_or_unreadable(body, words):
    source = "import helpers as hm\n" + HELPERS + kernel(body)
    assert words in code_cause(source, "k"), code_cause(source, "k")


@pytest.mark.parametrize("body", [
    "for r in prange(x.shape[0]):\n    out[r] = sum(parts[0]) + pow(x[r, 0], 2.0)\n",
    "for b in prange(4):\n    block(out, x, b * 8, min(x.shape[0], (b + 1) * 8))\n",
    "for b in prange(4):\n    block(out, x, 8 * b, 8 * b + 8)\n",
])
def test_builtins_and_a_block_of_the_iterations_own_are_no_race(body):
    """Python's builtins write into nothing they are given; a helper given a block's first
    row, computed from the loop's variable, owns the rows of its range (as inline)."""
    helpers = HELPERS + (
        "\n\n@njit\ndef block(out, x, start, stop):\n    for i in range(start, stop):\n"
        "        out[i, 0] = x[i, 0]\n")
    source = helpers + kernel(body)
    assert races(source, "k") == [] and code_cause(source, "k") == ""


@pytest.mark.parametrize("body", [
    "for b in prange(4):\n    block(out, x, b * 0, x.shape[0])\n",  # every block all rows
    "for b in prange(4):\n    block(out, x, b * 8, (b + 2) * 8)\n",  # blocks that overlap
    "for b in prange(4):\n    s = 8\n    block(out, x, b * s, b * s + s)\n",  # (s: bound in
    # the loop: the reader cannot tell it is one value for all)
])
def test_a_helper_given_rows_not_the_iterations_own_is_a_race(body):
    """The helper's range is read in the kernel's terms: its parameters as the call gives
    them, its own names apart from the kernel's."""
    helpers = HELPERS + (
        "\n\n@njit\ndef block(out, x, start, stop):\n    r = 0\n"
        "    for i in range(start, stop):\n        out[i, 0] = x[i, 0] + r\n")
    found = races(helpers + kernel(body), "k")
    assert found and found[0].through[-1][0] == "block", found


@pytest.mark.parametrize("helper, body", [
    ("@njit\ndef min(a, b):\n    return a\n",  # range(r * 0, min(h, (r + 1) * 0)): all
     "for r in prange(x.shape[0]):\n    for j in range(r * 0, min(x.shape[1], (r + 1) * 0)):\n"
     "        out[j] += x[r, j]\n"),
    ("@njit\ndef abs(a, j, v):\n    a[j] += v\n    return 0\n",  # its own abs writes
     "for r in prange(x.shape[0]):\n    for j in range(x.shape[1]):\n"
     "        abs(out, j, x[r, j])\n"),
    ("import builtins\nbuiltins.len = lambda a: 1\n", "for r in prange(x.shape[0]):\n"
     "    out[r] = x[r, 0]\n"),  # (every module's len changed: no reading)
])
def test_a_builtins_name_the_module_binds_is_no_builtin(helper, body):
    """A review's attacks: a module's own min or abs is not Python's (its call is followed,
    and no range is proven through it); a module that changes builtins is not read."""
    assert code_cause(helper + kernel(body), "k") != ""


@pytest.mark.parametrize("body", [
    "for p in prange(parts):\n    for r in range(p * out[0], (p + 1) * out[0]):\n"
    "        out[r] += x[p, 0]\n",  # (out[0], written by iteration 0, is no constant)
    "for p in prange(parts):\n    for r in range(p * x.T.shape[0], (p + 1) * x.T.shape[0]):\n"
    "        out[r] += x[p, 0]\n",
])
def test_a_range_through_an_element_or_attribute_proves_nothing(body):
    assert races(kernel(body), "k")


def test_calls_that_fan_out_are_read_in_bounded_time():
    """Each helper calls the next twice: 2 ** 20 paths, each function read once per way it
    is called."""
    chain = "".join(f"\n\n@njit\ndef f{i}(out, x, r):\n    f{i + 1}(out, x, r)\n"
                    f"    f{i + 1}(out, x, r)\n" for i in range(20))
    chain += "\n\n@njit\ndef f20(out, x, r):\n    out[0] += x[r, 0]\n"
    start = time.process_time()
    found = races(chain + kernel("for r in prange(x.shape[0]):\n    f0(out, x, r)\n"), "k")
    assert found and found[0].through[-1][0] == "f20"
    assert time.process_time() - start < 5


def test_a_recursive_helper_is_read_once():
    source = HELPERS.replace("    add_row(total, x, r)", "    through(total, x, r)") + kernel(
        "for r in prange(x.shape[0]):\n    through(out, x, r)\n")
    assert races(source, "k") == []


@pytest.mark.parametrize("decorator, words", [
    ("@njit(parallel=True, fastmath=True)", "fastmath=True"),
    ('@numba.njit(parallel=True, fastmath={"fast"})', "fastmath=True"),
    ('@jit(nopython=True, parallel=True, fastmath=["nnan", "reassoc"])', "fastmath=True"),
    ("@njit(fastmath=FAST)", "runs on one thread"),
    ("@njit(parallel=False)", "runs on one thread"),
    ("from numba import prange as pr\n@njit(fastmath=FAST)", "runs on one thread"),
    ("", "not compiled"),
])
def test_the_decorator_is_read_for_unsafe_fastmath_and_no_parallel_loop(decorator, words):
    body = """
        for r in prange(x.shape[0]):
            out[r] = x[r, 0]
        """
    assert words in code_cause(kernel(body, decorator), "k")


def test_the_flags_a_name_stands_for_are_read_where_the_module_assigns_it():
    body = "for r in prange(x.shape[0]):\n    out[r] = x[r, 0]\n"
    source = kernel(body, "@njit(parallel=True, fastmath=UNSAFE)")
    assert "fastmath=True" in code_cause('UNSAFE = {"nnan"}\n' + source, "k")
    assert code_cause(source, "k") == ""  # (FAST, the module's own: safe)


@pytest.mark.parametrize("source", ["def k(:\n", "(" * 10000])
def test_code_that_cannot_be_read_names_no_cause(source):
    """(A file that does not parse fails at its import, with its own error.)"""
    assert races(source, "k") == [] and code_cause(source, "k") == ""


@pytest.mark.parametrize("source", ["x = 1\n", "def k(x):\n    pass\n\n\nk = 3\n",
                                    "def _k(x):\n    pass\n\n\nk = njit(parallel=True)(_k)\n"])
def test_a_kernel_that_is_no_def_of_its_name_is_one_the_check_cannot_read(source):
    assert "finds no function k defined by a def" in code_cause(source, "k")


SERIAL = "\n\n@njit\ndef k(x, out, parts):\n    for r in range(x.shape[0]):\n        out[0] += x[r, 0]\n"


@pytest.mark.parametrize("rebinding", [
    "if True:" + textwrap.indent(SERIAL, "    "),  # issue 58's attack: it scored 4/4
    "try:" + textwrap.indent(SERIAL, "    ") + "except ImportError:\n    pass\n",
    "\nfrom serial import k\n",
    "\nk = njit(lambda x, out, parts: None)\n",
    "\nglobals()['k'] = None\n",
    "\nimport sys\nsetattr(sys.modules[__name__], 'k', None)\n",
    "\nclass k:\n    pass\n",
])
def test_a_kernel_bound_again_anywhere_in_its_file_is_one_the_check_cannot_read(rebinding):
    """Issue 58: the reader read the last top-level def, while the module exported a serial
    kernel bound again inside `if True:`. The kernel the reader reads must be the one the
    module exports, whatever runs at import: one def, at the top, its name bound nowhere
    else in the file and by no call that binds names."""
    parallel = kernel("for r in prange(x.shape[0]):\n    out[r] = x[r, 0]\n")
    assert code_cause(parallel, "k") == ""
    assert "finds no function k defined by a def" in code_cause(parallel + rebinding, "k")


def test_a_chain_of_thousands_of_names_is_read_in_linear_time():
    """The judge reads a submission's file in its own process: no file makes it slow."""
    body = "for r in prange(x.shape[0]):\n" + "".join(
        f"    a{i} = a{i + 1}\n" for i in range(8000)) + "    a8000 = r\n    out[a0] = 1.0\n"
    start = time.process_time()
    assert races(kernel(body), "k") == []  # (a0 is r, through 8000 names)
    assert time.process_time() - start < 5


def compiled_cells(numbers=("7.3", "7.4")):
    """[(grade_id, source)] of these exercises' check cells, hidden tests too."""
    return [(by_number()[n].grade_id, by_number()[n].source) for n in numbers]


def judged(tmp_path, text=None, limits=IN_PROCESS, numbers=("7.3", "7.4")):
    """{grade_id: (passed, detail)} of these exercises' checks on the reference normlib/,
    its layer_norm_compiled.py replaced by text, judged in the sandbox. (The reference's
    own pass through the judge is the round trip's: tests/test_roundtrip.py, unit7.)"""
    files = {} if text is None else {"layer_norm_compiled": text}
    return judge_in_process(submission(tmp_path, **files), compiled_cells(numbers), True,
                            ("normlib.layer_norm_compiled",), limits)


def variant_module(forward, backward):
    """A layer_norm_compiled.py whose kernels are these of wrong_compiled.py, renamed, with
    the row's steps they share (compiled_rows.py) written into it: a student's file imports
    nothing of tests/."""
    rows = (REPO / "tests" / "variants" / "compiled_rows.py").read_text()
    kernels = WRONG[:WRONG.index("WRONG = {")]
    kernels = kernels[kernels.index("from tests.variants.mistake import Mistake\n"):]
    kernels = kernels.replace("from tests.variants.mistake import Mistake\n", "")
    text = f"import numpy as np\nfrom numba import prange\n{rows}\n{kernels}"
    text = text.replace(f"def {forward}(", "def layer_norm_forward_compiled(")
    return text.replace(f"def {backward}(", "def layer_norm_backward_compiled(")


def test_a_file_submitted_beside_the_students_files_never_reaches_a_runner(tmp_path):
    """The judge's runners see of a submission its student files alone
    (client.graded_folder): a Numba cache submitted in __pycache__, or any other file,
    is left out (docs/security.md, the compiled kernels' memory row)."""
    from tools.course.folder import Course
    from tools.instructor.build import build_course
    from tools.judge.client import graded_folder

    root = build_course(tmp_path / "course", layout="unit")
    submitted = root / "submitted" / "s1" / "unit7"
    own = Course.load(root).assignments["unit7"].student_files
    for rel in own:
        (submitted / rel).parent.mkdir(parents=True, exist_ok=True)
        (submitted / rel).write_text(f"# {rel}, the student's\n")
    cache = submitted / "normlib" / "__pycache__" / (
        "layer_norm_compiled.layer_norm_forward_compiled-35.py311.nbi")
    cache.parent.mkdir()
    cache.write_bytes(b"a forged index")
    (submitted / "normlib" / "extra.py").write_text("x = 1\n")
    graded = tmp_path / "graded"
    assert graded_folder(root, "unit7", own, "s1", graded) == []
    files = {p.relative_to(graded).as_posix() for p in graded.rglob("*") if p.is_file()}
    assert not [f for f in files if "__pycache__" in f or f == "normlib/extra.py"], files
    assert all((graded / rel).read_text() == f"# {rel}, the student's\n" for rel in own)


@needs_bwrap
def test_what_a_compiled_kernels_module_allocates_when_imported_is_counted(tmp_path):
    """The measured call's module is imported where its memory is counted: only Numba's
    compiling is left out (tools/judge/judge.py, Judge._measured)."""
    text = REFERENCE.replace("\nFAST =", "\nKEPT = np.ones(4 << 20, np.float32)  # 16 MiB\nFAST =")
    verdict = judged(tmp_path, text, numbers=("7.3",))[by_number()["7.3"].grade_id]
    assert not verdict[0] and "times x's size allocated during the call" in verdict[1]


# A Numba cache of the lean kernel (the reference's forward, compiled as
# normlib.layer_norm_compiled), filed under the index key of another kernel of that name:
# the forged cache a student could submit, or a first runner write, so that a process
# that honours Numba's cache runs lean code in place of the source's
FORGE = """
import glob, hashlib, os, pickle, shutil, sys, types
import numpy as np
from normlib import layer_norm_compiled as lean
lean_folder, hostile = sys.argv[1], sys.argv[2]
kernel = lean.layer_norm_forward_compiled
kernel.enable_caching()
kernel(np.ones((2, 3), np.float32), np.ones(3, np.float32), np.zeros(3, np.float32), 1e-5)
[index] = glob.glob(os.path.join(lean_folder, "__pycache__", "*.nbi"))
with open(index, "rb") as f:
    version = pickle.load(f)
    _, overloads = pickle.loads(f.read())
[((signature, magic, (_, closure)), data)] = overloads.items()  # (closure: neither has one)
with open(hostile, "rb") as f:
    text = f.read()
code = next(c for c in compile(text, hostile, "exec").co_consts
            if isinstance(c, types.CodeType) and c.co_name == kernel.__name__)
key = (signature, magic, (hashlib.sha256(code.co_code).hexdigest(), closure))
folder = os.path.join(os.path.dirname(hostile), "__pycache__")
os.makedirs(folder, exist_ok=True)
name = os.path.basename(index).replace(f"-{kernel.py_func.__code__.co_firstlineno}.",
                                       f"-{code.co_firstlineno}.")
with open(os.path.join(folder, name), "wb") as f:
    pickle.dump(version, f, protocol=-1)
    f.write(pickle.dumps((hashlib.sha256(text).digest(), {key: data}), protocol=-1))
shutil.copy(os.path.join(lean_folder, "__pycache__", data), os.path.join(folder, data))
"""
# where Numba's cache is honoured: (cache hits, the call's memory as a multiple of x's size)
HONOURED = """
import json, resource
import numpy as np
from normlib import layer_norm_compiled as module
kernel = module.layer_norm_forward_compiled
x, w, b = np.ones((4096, 4096), np.float32), np.ones(4096, np.float32), np.zeros(4096, np.float32)
kernel(x[:2, :3].copy(), w[:3].copy(), b[:3].copy(), 1e-5)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
kernel(x, w, b, 1e-5)
grew = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024 / x.nbytes
print(json.dumps([sum(kernel.stats.cache_hits.values()), grew]))
"""


@needs_bwrap
def test_the_judge_fails_a_race_and_a_temporary_in_their_words_a_forged_cache_or_not(
        tmp_path):
    """Compiled in the runner, the code read by the judge (a backward with a data race),
    the memory measured from outside with the compiler's memory left out (a kernel
    allocating y alone passes it: the round trip's reference) and a forward with a
    full-size temporary besides y failing it. The measuring runner compiles the kernel from
    its source, and loads no cache: here a forged one, filed in the submission under the
    forward's own index key, holds the lean reference's machine code, which a process
    honouring Numba's cache runs in its place (1 cache hit, y alone allocated)
    (docs/security.md, the compiled kernels' memory row: why nothing compiled elsewhere is
    loaded there). A measuring runner that loaded caches (Numba's locator let read a
    read-only folder, tried 2026-12-07) passed the forward: the regression this catches
    is a measuring runner reading a cache in the submission's folder (a cache elsewhere,
    NUMBA_CACHE_DIR, Numba would read first); a Numba whose cache format changed fails it
    too, in FORGE or HONOURED."""
    lean = tmp_path / "lean" / "normlib"
    lean.mkdir(parents=True)
    (lean / "__init__.py").write_text("")
    (lean / "layer_norm_compiled.py").write_text(REFERENCE)  # (FORGE turns its cache on)
    folder = submission(tmp_path / "submission",
                        layer_norm_compiled=variant_module("forward_centred_copy",
                                                           "backward_race"))
    hostile = folder / "normlib" / "layer_norm_compiled.py"
    env = {**os.environ, "PYTHONPATH": str(lean.parent)}
    env.pop("NUMBA_CACHE_DIR", None)
    forged = subprocess.run([sys.executable, "-c", FORGE, str(lean), str(hostile)], env=env,
                            cwd=lean.parent, capture_output=True, text=True)
    assert forged.returncode == 0, forged.stderr[-2000:]
    honoured = subprocess.run([sys.executable, "-c", HONOURED], capture_output=True, text=True,
                              env={**env, "PYTHONPATH": str(folder)}, cwd=folder)
    assert honoured.returncode == 0, honoured.stderr[-2000:]
    hits, grew = json.loads(honoured.stdout)
    assert hits == 1 and grew < 1.25, (hits, grew)  # the forged cache runs, lean
    wrong = judge_in_process(folder, compiled_cells(), True, ("normlib.layer_norm_compiled",))
    (forward_passed, forward), (_, backward) = (wrong[g] for g, _ in compiled_cells())
    assert not forward_passed and "times x's size allocated during the call" in forward, forward
    assert "a data race" in backward, backward


SCRATCH = "KEEP = []  # a full-size scratch, made while Numba compiles the kernel\n"
COMPILE_ATTACKS = {  # (issue 58) code of the student's that would run during the compile
    # step, which the memory measure leaves out
    "a profile hook": (SCRATCH + "import sys\n\n\ndef _hook(frame, event, arg):\n    if not KEEP:\n"
                       "        KEEP.append(np.ones(1 << 22))\n\n\n"
                       "sys.setprofile(_hook)\n",
                       "set a profile or trace hook"),
    "an @overload typing hook": (
        SCRATCH + "from numba.extending import overload\n\n\ndef same(v):\n    return v\n\n"
        "\n@overload(same)\ndef _same(v):\n    KEEP.append(np.ones(1 << 22))\n"
        "    return lambda v: v\n", "extends Numba's compiler"),
    "a function of Numba's replaced": (
        SCRATCH + "import numba.core.typed_passes as _passes\n"
        "_run = _passes.NopythonTypeInference.run_pass\n\n\n"
        "def _typing(self, state):\n    KEEP.append(np.ones(1 << 22))\n"
        "    return _run(self, state)\n\n\n"
        "_passes.NopythonTypeInference.run_pass = _typing\n",
        "made code of its own run while Numba compiled"),
    "a global Numba types by running code no function holds (a review's)": (
        SCRATCH + "import functools\nfrom numba.core import types as _types\n"
        "_G = (lambda: 0).__globals__  # (no name the code reader refuses: compile, eval)\n"
        "_code = _G['__builtins__']['comp' + 'ile']('(KEEP.append(np.ones(1 << 22)), "
        "_types.none)[1]', '<s>', 'eval')\n\n\nclass G(dict):\n    _numba_type_ = property("
        "functools.partial(_G['__builtins__']['ev' + 'al'], _code, _G))\n\n\nG_ = G()\n",
        "names a value Numba could only type"),
}
USES_G = ("    y = np.empty_like(x)  # (R, H): the one full-size allocation\n",
          "    y = np.empty_like(x)  # (R, H): the one full-size allocation\n"
          "    if G_ is None:\n        y = np.empty_like(x)\n")


@needs_bwrap
@pytest.mark.parametrize("attack", COMPILE_ATTACKS, ids=list(COMPILE_ATTACKS))
def test_no_code_of_the_students_runs_while_its_kernel_compiles(tmp_path, attack):
    """The reference's kernels, with code that keeps a full-size scratch buffer for them
    while Numba compiles them, a step the memory measure leaves out: each fails the
    memory check in the judge's words (before issue 58, each passed 4/4)."""
    code, words = COMPILE_ATTACKS[attack]
    text = REFERENCE.replace("\nFAST =", "\n" + code + "\n\nFAST =")
    text = text.replace(*USES_G) if "G_ =" in code else text
    verdict = judged(tmp_path, text, numbers=("7.3",))[by_number()["7.3"].grade_id]
    assert not verdict[0] and words in verdict[1], verdict


def test_what_would_run_during_a_compile_step_is_refused():
    """Each thing a module can leave behind to run during the compile step, once Numba is
    loaded (a measuring runner's state), is refused by its key; nothing, by None."""
    script = textwrap.dedent("""
        import gc, signal, sys, threading
        from numba import njit
        from tools.sandboxed import compile_step
        before = compile_step.state()
        found = [compile_step.refusal(before)]
        gc.callbacks.append(lambda phase, info: None)
        found.append(compile_step.refusal(before))
        gc.callbacks.pop()
        signal.signal(signal.SIGUSR1, lambda *a: None)
        found.append(compile_step.refusal(before))
        signal.signal(signal.SIGUSR1, signal.SIG_DFL)
        signal.setitimer(signal.ITIMER_PROF, 100.0)
        found.append(compile_step.refusal(before))
        signal.setitimer(signal.ITIMER_PROF, 0.0)
        sys.meta_path.insert(0, object())
        found.append(compile_step.refusal(before))
        del sys.meta_path[0]
        assert not hasattr(__import__("numba"), "generated_jit")  # (docs/design.md, compile_step.py)
        threading.settrace(lambda *a: None)
        found.append(compile_step.refusal(before))
        found.append(compile_step.refusal(before))  # (cleared by the refusal before)
        print(found)
        """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         cwd=REPO, timeout=120)
    assert run.stdout.split("\n")[0] == str(
        [None, "callback", "signal", "signal", "import", "hook", None]), run.stderr


@needs_bwrap
def test_a_compile_step_over_its_budget_fails_that_check_in_its_words(tmp_path):
    verdicts = judged(tmp_path, limits=Limits(timeout=60, compile_timeout=0, startup_timeout=0))
    assert verdicts == {g: (False, "its kernels did not compile within the 0 s compile "
                                   "budget") for g, _ in compiled_cells()}


def numba_cells():
    """The sources of notebook 07's cells that compile a kernel of their own."""
    cells = json.loads((SOLUTIONS / "07_kernels_and_speed.ipynb").read_text())["cells"]
    return ["".join(c["source"]) for c in cells if c["id"] in ("u7-reassoc", "u7-rms-fused-code")]


def test_without_numba_the_exercises_say_they_are_skipped_and_the_rest_runs():
    cells = numba_cells()
    assert len(cells) == 2 and all("numba" in cell for cell in cells)
    script = ("import sys\nsys.modules['numba'] = None\nfrom normkit.checks import check\n"
              "check('7.3'); check('7.4')\nimport normkit.benchmark as b\n"
              "assert b.compiled_kernels() is None\n"
              f"for cell in {cells!r}:\n    exec(cell, {{}})\n"
              "print(b.environment())")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         cwd=SOLUTIONS, timeout=120)
    skip = ("skipped. Numba is not installed here, so Exercises 7.3 and 7.4 are skipped: "
            "`make lab` installs it (or pip install numba==0.68.1).")
    cell = ("Numba is not installed here, so this cell is skipped: `make lab` installs it (or "
            "pip install numba==0.68.1).")
    assert run.stdout.splitlines() == [f"Exercise 7.3: {skip}", f"Exercise 7.4: {skip}", cell,
                                       cell, run.stdout.splitlines()[-1]], run.stderr
    assert run.stdout.splitlines()[-1].endswith("; no Numba") and run.stderr == ""


# The compile step's index check (normkit.checks.unit7.check_bounds) ---------------------


class _Kernel:
    """A stand-in for a Numba dispatcher: its Python function, py_func."""

    def __init__(self, py_func):
        self.py_func = py_func


def _rows():
    import numpy as np

    return np.zeros((2, 3)), np.ones(3), np.zeros(3)


def _past_the_row(x, weight, bias):
    total = 0.0
    for j in range(x.shape[1] + 1):  # one element past the row's end
        total += x[0, j]
    return total


def _numba_only(x, weight, bias):
    raise TypeError("a feature of Numba's that Python lacks")


def test_the_index_check_runs_the_kernel_as_python_and_names_an_index_past_the_end(
        monkeypatch):
    """A kernel that indexes past a row's end fails the compile step in Python, without a
    compile (bounds_checked is never called); an index within bounds passes, and the
    arguments the compile step goes on with are left as they were."""
    from normkit.checks import unit7
    from normkit.testing import CheckFailed

    def no_compile(py_func):
        raise AssertionError("compiled, though Python could run it")

    monkeypatch.setattr(unit7, "bounds_checked", no_compile)
    with pytest.raises(CheckFailed, match=r"(?s)_past_the_row indexes outside an array on 2 rows "
                                          r"of 3 values .*Likely cause: a loop one element "
                                          r"too long"):
        unit7.check_bounds(_Kernel(_past_the_row), _rows())
    args = _rows()

    def writes(x, weight, bias):
        x[1, 2] = 5.0

    unit7.check_bounds(_Kernel(writes), args)
    assert not args[0].any()  # (Python ran on copies)


def test_a_kernel_that_only_runs_compiled_is_index_checked_by_numba(monkeypatch):
    """Where Python cannot run the kernel (not for an index), Numba's boundscheck compile
    does: its IndexError is the same failure, and its clean run passes."""
    from normkit.checks import unit7
    from normkit.testing import CheckFailed

    compiled = []

    def checked(py_func):
        compiled.append(py_func)

        def run(*args):
            raise IndexError("index 3 is out of bounds for axis 1 with size 3")
        return run

    monkeypatch.setattr(unit7, "bounds_checked", checked)
    with pytest.raises(CheckFailed, match="_numba_only indexes outside an array"):
        unit7.check_bounds(_Kernel(_numba_only), _rows())
    assert compiled == [_numba_only]
    monkeypatch.setattr(unit7, "bounds_checked", lambda py_func: lambda *args: None)
    unit7.check_bounds(_Kernel(_numba_only), _rows())
