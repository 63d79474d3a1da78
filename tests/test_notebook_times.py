"""`make notebook-times` (tools/maintainer/notebook_times.py): a notebook's wall time, its
kernel's CPU time and the cells that raised, measured on a notebook made here."""

import nbformat
import pytest

from tools.maintainer import notebook_times


def test_a_notebooks_wall_and_cpu_time_and_its_errors(tmp_path):
    path = tmp_path / "01_made.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# made"),
                nbformat.v4.new_code_cell("import time\ntime.sleep(0.5)"),  # wall, no CPU
                nbformat.v4.new_code_cell("t = time.process_time()\n"
                                          "while time.process_time() - t < 1.0:\n    pass"),
                nbformat.v4.new_code_cell("raise ValueError('unfinished')"),
                nbformat.v4.new_code_cell("x = 1")]
    nbformat.write(nb, path)
    wall, cpu, raised = notebook_times.run(path)
    assert raised == 1
    assert 1.0 <= cpu < wall  # (the busy second, and the kernel's start; not the sleep)
    assert wall >= 1.5  # (the sleep and the busy second, at least)


def test_a_name_no_notebook_has_says_so():
    with pytest.raises(SystemExit, match="no notebook of .*solutions starts with 99"):
        notebook_times.main(["99"])
