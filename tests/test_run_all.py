"""Run All goes on past unfinished work, and says what is unfinished (tests/test_browser.py
watches it in JupyterLab; the round trip checks the stub submissions' graded notebooks).

- Every check cell carries the `raises-exception` tag: JupyterLab's Run All stops at the
  first error of an untagged cell.
- The tag does not hide a broken reference: under nbval a tagged solution cell may raise
  only where its stored output shows the error (conftest.py), and no solution cell stores
  one (a broken reference re-run by `make outputs` stores its error; a demonstration of
  torch's refusals prints their one line).
- normkit.notebook turns a stub's NotImplementedError into one line that names the
  exercise and the file, and leaves every other error's traceback alone.
"""

import ast
import json
import re
import subprocess
import sys

import pytest

from normkit.notebook import not_yet_implemented
from tests.conftest import REPO
from tools.course.exercises import SOLUTIONS, exercises, names, notebooks, of_notebooks

PACKAGES = ("normlib", "normkit")  # the student's code, and the course's that calls it



def cells(path):
    return json.loads(path.read_text())["cells"]


def tagged(cell):
    return "raises-exception" in cell["metadata"].get("tags", [])


def test_no_solution_cell_stores_an_error():
    """Run All on the reference prints no traceback: a demonstration of torch's refusals
    (BatchNorm on one value per channel, d_model not divisible by nhead) catches it and
    prints its one line, as the checks print theirs."""
    stored = {(path.stem, c["id"]) for path in notebooks() for c in cells(path)
              if any(o["output_type"] == "error" for o in c.get("outputs", []))}
    assert stored == set()


def catches_not_implemented(node):
    return any(isinstance(n, ast.ExceptHandler) and "NotImplementedError" in names(n.type)
               for n in ast.walk(node) if getattr(n, "type", None) is not None)


def stub_names():
    """The names of normlib and normkit that reach a stub when called in the student
    edition: each exercise's function or class, and every function or class of either whose code names
    one of those (a fixed point: `last_layer_grad_norms` calls `grad_norms_at_init`, which
    calls Exercise 5.5's `linear2_grad_norms`), but for code that catches the
    NotImplementedError itself (`make bench` leaves an unwritten kernel out)."""
    defs = {node.name: node for path in [*(SOLUTIONS / "normlib").glob("*.py"),
                                         *(REPO / "normkit").rglob("*.py")]
            for node in ast.parse(path.read_text()).body
            if isinstance(node, (ast.FunctionDef, ast.ClassDef))
            and not catches_not_implemented(node)}
    reaching = {e.name for e in exercises()}
    while True:
        more = {name for name, node in defs.items() if names(node) & reaching} - reaching
        if not more:
            return reaching
        reaching |= more


def normlib_uses(node, imported, modules):
    """The names of normlib that node's code uses: a name imported from normlib
    (imported: {local name: normlib name}), or an attribute of a normlib module (modules:
    the local names of normlib's modules, `T` for `import normlib.transformer as T`)."""
    names = {imported[n.id] for n in ast.walk(node)
             if isinstance(n, ast.Name) and n.id in imported}
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute):
            root = n.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in modules:
                names.add(n.attr)
    return names


def cells_reaching_stubs(notebook_cells, reaching):
    """The indexes of the code cells that, run in order on the stubs, name normlib code that
    reaches a stub outside a def or class (a cell's own functions and classes that name it
    become such code, and so do the functions of a "your turn" cell, stubs in the student
    edition). Names, not calls: a cell that only builds a module whose forward is
    an exercise is found too (NAMES_ONLY)."""
    imported, modules, tainted, found = {}, set(PACKAGES), set(), []
    for i, c in enumerate(notebook_cells):
        if c["cell_type"] != "code":
            continue
        source = "\n".join(line for line in "".join(c["source"]).splitlines()
                           if not line.lstrip().startswith(("%", "!")))
        calls = False
        if c["metadata"].get("nbgrader", {}).get("solution"):  # a "your turn" cell: a stub
            tainted |= {stmt.name for stmt in ast.parse(source).body
                        if isinstance(stmt, ast.FunctionDef)}
            continue
        for stmt in ast.parse(source).body:
            if isinstance(stmt, ast.ImportFrom) and (stmt.module or "").startswith(PACKAGES):
                for alias in stmt.names:
                    local = alias.asname or alias.name
                    if stmt.module in PACKAGES:  # from normlib import variance as V
                        modules.add(local)
                    else:
                        imported[local] = alias.name
                continue
            if isinstance(stmt, ast.Import):
                modules |= {a.asname for a in stmt.names
                            if a.asname and a.name.startswith(PACKAGES)}
                continue
            reaches = bool(normlib_uses(stmt, imported, modules) & reaching or
                           {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)} & tainted)
            if isinstance(stmt, (ast.FunctionDef, ast.ClassDef)):
                if reaches:
                    tainted.add(stmt.name)
            elif reaches:
                calls = True
        if calls:
            found.append(i)
    return found


NAMES_ONLY = {  # cells found that name such code but do not call it on the stubs
    ("02_layernorm_backward", "cell-20"): "builds normlib.nn.LayerNorm, never runs it",
    ("07_kernels_and_speed", "u7-45"): "fused_table: torch's kernels (a CUDA device only)",
    ("07_kernels_and_speed", "u7-triton"): "triton_layer_norm.report: its own Triton kernels "
                                            "(a CUDA device only)",
    # torch.nn.GroupNorm and BatchNorm2d share their names with normlib.nn's classes, so
    # normkit.convnet's norm_layer, and every name reaching it (convnet, train, runs, and
    # training.py's own `runs`, a variable), reads as reaching a stub: all are torch's
    ("04_why_normalization_helps", "training-run-code"): "training.sweep: torch's layers",
    ("04_why_normalization_helps", "training-edge-code"): "training.sweep_edge: torch's layers",
    ("04_why_normalization_helps", "convnet-code"): "convnet.runs: torch's layers",
    # normkit.modern's make_norm and DyT share their names with normlib's (transformer.
    # make_norm builds your RMSNorm; dyt.DyT runs your Function), and so does every name
    # reaching them, as unit8's ReferenceAttention builds torch's RMSNorm: all are torch's
    ("08_normalization_today", "u8-bound"): "ReferenceAttention: the checks' torch reference",
    ("08_normalization_today", "u8-qk-run"): "modern.qk_runs: torch's layers",
    ("08_normalization_today", "u8-qk-plot"): "plots qk_runs",
    ("08_normalization_today", "u8-qk-claims"): "modern.qk_claims of qk_runs",
    ("08_normalization_today", "u8-dyt-curve"): "modern.norm_points: torch's layers",
    ("08_normalization_today", "u8-dyt-run"): "modern.dyt_runs: torch's layers",
    ("08_normalization_today", "u8-dyt-plot"): "plots dyt_runs",
    ("08_normalization_today", "u8-dyt-saturation"): "modern's DyT runs",
    ("08_normalization_today", "u8-dyt-claims"): "modern.dyt_claims of dyt_runs",
    ("08_normalization_today", "u8-place-profile"): "modern.grad_profiles: torch's layers",
    ("08_normalization_today", "u8-place-run"): "modern.placement_runs: torch's layers",
    ("08_normalization_today", "u8-place-plot"): "plots place_runs",
    ("08_normalization_today", "u8-place-claims"): "modern.placement_claims of place_runs",
    # normkit.conditioning builds its blocks from modern.Attention (torch's layers)
    ("08_normalization_today", "u8-adaln-identity"): "conditioning.ConditionalLM: torch's",
    ("08_normalization_today", "u8-adaln-train"): "conditioning.train: torch's layers",
    ("08_normalization_today", "u8-adaln-claims"): "conditioning.claims of its run",
    # Unit 9's experiments share names with the exercises' and other modules' (logit_growth's
    # z_loss, the runs, claims and curves of every experiment): all are torch's
    ("09_norms_at_scale", "u9-eq-run"): "equilibrium.runs: torch's layers",
    ("09_norms_at_scale", "u9-eq-plot"): "plots eq_runs",
    ("09_norms_at_scale", "u9-eq-claims"): "equilibrium.claims of eq_runs",
    ("09_norms_at_scale", "u9-depth-run"): "depth.growths: torch's layers",
    ("09_norms_at_scale", "u9-depth-claims"): "depth.claims of its growths",
    ("09_norms_at_scale", "u9-rezero-deep-run"): "depth.rezero_runs: modern's torch layers",
    ("09_norms_at_scale", "u9-rezero-deep-claims"): "depth.rezero_claims of deep_runs",
    ("09_norms_at_scale", "u9-logit-run"): "logit_growth.runs: torch's layers",
    ("09_norms_at_scale", "u9-logit-claims"): "logit_growth.claims of logit_runs",
    ("09_norms_at_scale", "u9-quant-run"): "quantization.errors: torch's operations",
    ("09_norms_at_scale", "u9-quant-claims"): "quantization.claims of its errors",
}


def test_every_cell_that_runs_an_exercise_lets_run_all_go_on():
    """In the student edition such a cell raises (a stub): without the tag, Run All stops
    there (tests/test_browser.py watches notebook 01 in JupyterLab)."""
    reaching = stub_names()
    assert {"linear2_grad_norms", "last_layer_grad_norms", "var_welford"} <= reaching
    names_only = set()
    for path in notebooks():
        notebook_cells = cells(path)
        found = cells_reaching_stubs(notebook_cells, reaching)
        assert found or not of_notebooks([path.stem]), path.name  # each runs its exercises
        untagged = [(path.stem, notebook_cells[i]["id"]) for i in found
                    if not tagged(notebook_cells[i])]
        names_only |= set(untagged)
        assert set(untagged) <= set(NAMES_ONLY), f"cells {untagged} run an exercise, untagged"
    assert names_only == set(NAMES_ONLY)  # (none stale)


def test_a_demonstration_without_its_tag_is_found():
    notebook_cells = cells(SOLUTIONS / "05_add_and_norm.ipynb")
    found = cells_reaching_stubs(notebook_cells, stub_names())
    demo = next(i for i in found if not notebook_cells[i]["metadata"].get("nbgrader")
                and "T.TransformerEncoder(" in "".join(notebook_cells[i]["source"]))
    del notebook_cells[demo]["metadata"]["tags"]
    assert demo in cells_reaching_stubs(notebook_cells, stub_names())
    assert [i for i in found if not tagged(notebook_cells[i])] == [demo]


def test_every_check_cell_lets_run_all_go_on():
    for path in notebooks():
        for c in json.loads(path.read_text())["cells"]:
            if c["metadata"].get("nbgrader", {}).get("grade") and c["cell_type"] == "code":
                assert "raises-exception" in c["metadata"].get("tags", []), \
                    f"{path.name}: {c['metadata']['nbgrader']['grade_id']}"
        first = next(c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code")
        assert "%load_ext normkit.notebook" in "".join(first["source"]), path.name


NOTEBOOK = {
    "cells": [{"cell_type": "code", "execution_count": 1, "id": "c1",
               "metadata": {"tags": ["raises-exception"]},
               "outputs": [{"name": "stdout", "output_type": "stream", "text": "ok\n"}],
               "source": "print('ok')\nraise NotImplementedError('Exercise 1.1: implement f')"}],
    "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                "language": "python"}},
    "nbformat": 4, "nbformat_minor": 5,
}


def test_nbval_fails_a_tagged_cell_that_raises_unless_its_reference_did(tmp_path):
    """Two references of one tagged cell that raises: the one whose stored output shows
    the error passes, the one whose output does not fails (one nbval run for both)."""
    demonstrated = json.loads(json.dumps(NOTEBOOK))
    demonstrated["cells"][0]["outputs"].append({
        "output_type": "error", "ename": "NotImplementedError",
        "evalue": "Exercise 1.1: implement f", "traceback": []})
    (tmp_path / "broken.ipynb").write_text(json.dumps(NOTEBOOK))
    (tmp_path / "demonstrated.ipynb").write_text(json.dumps(demonstrated))
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "conftest", "--nbval",
         "--nbval-current-env", "-rA", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
         str(tmp_path)], cwd=REPO, capture_output=True, text=True)
    out = result.stdout + result.stderr
    assert result.returncode == 1 and "Cell execution caused an exception" in out, out
    assert re.search(r"^PASSED .*demonstrated\.ipynb::Cell 0$", out, re.M), out
    assert re.search(r"^FAILED .*broken\.ipynb::Cell 0", out, re.M), out


def raised(source, filename):
    """The exception that source, compiled as filename, raises."""
    try:
        exec(compile(source, filename, "exec"), {})
    except Exception as e:
        return e
    raise AssertionError("it did not raise")


STUB = 'def layer_norm_stats():\n    raise NotImplementedError("Exercise 1.1: implement layer_norm_stats")\nlayer_norm_stats()'
CELL_STUB = "def max_error():\n    raise NotImplementedError()\nmax_error()"


def test_a_stub_says_which_exercise_and_file():
    message = not_yet_implemented(raised(STUB, str(REPO / "normlib" / "layer_norm.py")))
    assert message == ("Exercise 1.1 is not yet implemented: layer_norm_stats in "
                       "normlib/layer_norm.py still raises NotImplementedError. Write it, "
                       "then run this cell again.")


def test_a_your_turn_function_says_where_to_write_it():
    message = not_yet_implemented(raised(CELL_STUB, "/tmp/ipykernel_7/123.py"))
    assert message.startswith("max_error is not yet implemented: write it in its cell above")


@pytest.mark.parametrize("source, filename", [
    (STUB.replace("Exercise 1.1: implement", "not done:"), "normlib/layer_norm.py"),
    (CELL_STUB, "/home/student/normlib/layer_norm.py"),  # bare, but not from a cell
    ("raise NotImplementedError()", "/tmp/ipykernel_7/1.py"),  # bare, not from a function
    ("import numpy\nnumpy.ones(2) @ 'x'", "/tmp/ipykernel_7/1.py"),  # another error
])
def test_any_other_error_keeps_its_traceback(source, filename):
    assert not_yet_implemented(raised(source, filename)) is None
