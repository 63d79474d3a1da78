"""What the notebooks' first cell loads (`%load_ext normlib.notebook`): an exercise that is
not yet written shows as one line saying so, not as a traceback.

A stub (`raise NotImplementedError("Exercise N.M: implement layer_norm_stats")`, or the
bare `raise NotImplementedError()` of a "your turn" cell) reached from a cell prints

    NotImplementedError: Exercise N.M is not yet implemented: layer_norm_stats in
    normlib/layer_norm.py still raises NotImplementedError. Write it, then run this cell again.

Any other exception keeps its usual traceback. The cell still ends in an error, so a check
of an unfinished exercise still fails (nbgrader scores it 0, Validate reports it), and its
`raises-exception` tag lets JupyterLab's Run All go on to the next cell. Not an exercise: at
grading the course's copy of this file is used, not the student's.
"""

import re
import traceback
from pathlib import Path

STUB = re.compile(r"Exercise (\d+\.\d+): implement ([\w.]+)")  # a stub's message


def not_yet_implemented(error):
    """The one-line message for a stub's NotImplementedError, or None for any other."""
    frames = traceback.extract_tb(error.__traceback__)
    if not frames:
        return None
    where = frames[-1]  # the frame that raised
    stub = STUB.fullmatch(str(error))
    if stub:
        path = Path(where.filename)
        file = f"normlib/{path.name}" if path.parent.name == "normlib" else path.name
        return (f"Exercise {stub[1]} is not yet implemented: {stub[2]} in {file} still raises "
                "NotImplementedError. Write it, then run this cell again.")
    if not str(error) and "ipykernel" in where.filename and where.name != "<module>":
        # a function of a cell raising a bare NotImplementedError: a "your turn" stub
        return (f"{where.name} is not yet implemented: write it in its cell above (YOUR CODE "
                "HERE) and run that cell, then this one again.")
    return None


def _show(shell, etype, value, tb, tb_offset=None):
    """IPython's handler for NotImplementedError: one line for a stub, else the usual."""
    message = not_yet_implemented(value)
    if message is None:
        shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
        return None
    stb = [f"\x1b[0;31mNotImplementedError\x1b[0m: {message}"]  # (red, like a traceback's)
    shell._showtraceback(etype, value, stb)  # the cell's error output, with this text
    return stb


def load_ipython_extension(ipython):
    ipython.set_custom_exc((NotImplementedError,), _show)
