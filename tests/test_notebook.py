"""What the notebooks' setup cell gives a student who edits normlib/ with the kernel
running (normkit/notebook.py), through a real kernel with the pinned IPython: after an
edit, a traceback points at the right line; a file that no longer imports stops the next
cell with one message naming the file and line, and the code from before the edit does not
run; once fixed, the new code runs."""

import json
import os
import re

import nbformat
from nbclient import NotebookClient

from normkit.notebook import import_error
from tests.conftest import REPO
from tools.course.exercises import notebooks

FIRST = '''def shifted(x):
    """A docstring of
    three lines."""
    return x + 1
'''
# an edit that adds lines above the bug, and a bug
EDITED = '''def shifted(x):
    """A docstring of
    three lines."""
    a = 1
    b = 2
    raise ValueError("the bug, on line 6")
'''
BROKEN = FIRST.replace("def shifted(x):", "def shifted(x:")  # line 1: a syntax error
OLD_RAN = '''def shifted(x):
    print("the code from before the edit ran")
    return x
'''


def setup_cell():
    """The autoreload and extension lines of the notebooks' setup cell (all alike)."""
    found = set()
    for path in notebooks():
        for cell in json.loads(path.read_text())["cells"]:
            lines = [line for line in "".join(cell["source"]).splitlines() if line.startswith("%")]
            if any("autoreload" in line for line in lines):
                found.add("\n".join(lines))
    assert len(found) == 1, found
    return found.pop()


def ansi_free(text):
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def run(tmp_path, *steps):
    """Run steps in one kernel: ("code", source) runs a cell; ("write", text) writes
    tmp_path's normlib/student.py (importable as normlib.student) from here, as an editor
    would, between two cells. The code cells' outputs, as text."""
    folder = tmp_path / "normlib"
    folder.mkdir(exist_ok=True)
    path = folder / "student.py"
    path.write_text(FIRST)
    prelude = (f"import sys; sys.path.insert(0, {str(REPO / 'solutions')!r})\n"
               f"import normlib; normlib.__path__.insert(0, {str(folder)!r})\n" + setup_cell())
    notebook = nbformat.v4.new_notebook()
    client = NotebookClient(notebook, kernel_name="python3", timeout=120, allow_errors=True,
                            resources={"metadata": {"path": str(tmp_path)}})
    outputs = []
    with client.setup_kernel():
        for kind, source in [("code", prelude), *steps]:
            if kind == "write":
                mtime = path.stat().st_mtime
                path.write_text(source)
                os.utime(path, (mtime + 2, mtime + 2))  # (newer, whatever the clock's step)
                continue
            cell = nbformat.v4.new_code_cell(source)
            notebook.cells.append(cell)
            client.execute_cell(cell, len(notebook.cells) - 1, execution_count=None)
            outputs.append(ansi_free("\n".join(text(o) for o in cell.outputs)))
    return outputs


def text(output):
    """An output as text: a stream's, a result's text/plain, an error's traceback."""
    return output.get("text") or output.get("data", {}).get("text/plain") or \
        "\n".join(output.get("traceback", []))


def test_a_module_that_fails_at_its_top_level_is_named_with_its_line(tmp_path):
    """As a file of the package (its relative imports resolve): the error of its own line."""
    folder = tmp_path / "normlib"
    folder.mkdir()
    path = folder / "broken.py"
    path.write_text("from .norm import normalize_forward\n\nx = undefined_name\n")
    assert import_error(str(path)) == ("NameError in normlib/broken.py, line 3: name "
                                       "'undefined_name' is not defined")
    path.write_text("def f(:\n")
    assert import_error(str(path)).startswith("SyntaxError in normlib/broken.py, line 1:")


def test_the_setup_cell_reloads_whole_modules_and_leaves_errors_to_the_extension():
    assert "%autoreload 2 --full --hide-errors" in setup_cell()
    assert setup_cell().index("autoreload") < setup_cell().index("normkit.notebook")


def test_after_an_edit_the_traceback_points_at_the_edited_line(tmp_path):
    out = run(tmp_path, ("code", "from normlib.student import shifted\nshifted(1)"),
              ("write", EDITED), ("code", "shifted(1)"))
    assert out[1].strip() == "2", out
    assert re.search(r"student\.py:6, in shifted", out[2]), out[2]
    assert 'raise ValueError("the bug, on line 6")' in out[2], out[2]


def test_a_file_that_no_longer_imports_stops_the_cell_once_and_the_old_code_does_not_run(
        tmp_path):
    out = run(tmp_path, ("code", "from normlib.student import shifted\nshifted(1)"),
              ("write", OLD_RAN), ("code", "shifted(1)"),  # a good edit: it runs
              ("write", BROKEN), ("code", "print('cell ran'); shifted(1)"),
              ("write", EDITED), ("code", "shifted(1)"))
    assert out[2].strip().startswith("the code from before the edit ran"), out[2]
    broken = out[3]
    assert broken.startswith("NotReloaded: SyntaxError in normlib/student.py, line 1"), broken
    assert "This cell did not run" in broken and "cell ran" not in broken
    assert "the code from before the edit ran" not in broken
    assert broken.count("SyntaxError") == 1 and "autoreload of" not in broken, broken
    assert "Traceback" not in broken
    assert 'raise ValueError("the bug, on line 6")' in out[4], out[4]  # fixed: it reloads
