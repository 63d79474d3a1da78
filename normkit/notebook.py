"""The notebooks' IPython extension (`%load_ext normkit.notebook`): messages, not tracebacks.

- A stub reached from a cell (its NotImplementedError) prints one line: which exercise is
  not yet written, and in which normlib/ file.
- A failed check (normkit.testing.CheckFailed) prints its message alone: the quantity, the
  case, the worst element, the likely cause, then the lines of your function and of the case.
- A cell that starts with `if revealed("2.4"):` runs only once that exercise's check has
  passed in this kernel: its output would give away what the exercise asks you to predict.
- A changed normlib/ file that no longer imports stops the next cell with one message
  (NotReloaded), where autoreload would print a traceback and then run the old code. The
  notebooks load `%autoreload 2 --full --hide-errors` for it.
Any other exception keeps its traceback. The cell still ends in an error, so an unfinished
exercise's check still fails (nbgrader scores it 0); its `raises-exception` tag lets Run All
go on. Not an exercise: at grading the course's copy of this file is used, not the student's.
"""

import ast
import importlib
import inspect
import linecache
import re
import traceback
from pathlib import Path

from normkit import checks

CHECK = re.compile(r"# Exercise (\d+\.\d+): (\w+) \(")  # a check cell's first line


def not_yet_implemented(error):
    """The one-line message for a stub's NotImplementedError, or None for any other."""
    frames = traceback.extract_tb(error.__traceback__)
    if not frames:
        return None
    where = frames[-1]  # the frame that raised
    stub = checks.STUB.fullmatch(str(error))
    if stub:
        file = checks.shown(where.filename)
        return (f"Exercise {stub[1]} is not yet implemented: {stub[2]} in {file} still raises "
                "NotImplementedError. Write it, then run this cell again.")
    if not str(error) and "ipykernel" in where.filename and where.name != "<module>":
        # a function of a cell raising a bare NotImplementedError: a "your turn" stub
        return (f"{where.name} is not yet implemented: write it in its cell above (YOUR CODE "
                "HERE) and run that cell, then this one again.")
    return None


PASSED = set()  # the exercises whose check cell passed in this kernel, last time it ran


def _record(result):
    """IPython's post_run_cell: remember whether a check cell ("# Exercise N.M: ...") passed."""
    title = CHECK.match(getattr(result.info, "raw_cell", None) or "")
    if title:
        (PASSED.add if result.success else PASSED.discard)(title[1])


def revealed(number):
    """Whether Exercise `number`'s check passed in this kernel. If not, print that the cell
    shows what that exercise asks for, and waits for its check."""
    if number in PASSED:
        return True
    print(f"This cell shows what Exercise {number} asks you to find, so it waits for that "
          "exercise: run its check cell above until it passes, then this cell again.")
    return False


def numba_here():
    """Whether Numba is installed (a cell of notebook 07 compiles a kernel). If not, print
    that the cell is skipped, in one line, and how to install it."""
    from normkit.kernel_code import NUMBA_INSTALL, numba_installed

    if not numba_installed():
        print(f"Numba is not installed here, so this cell is skipped: {NUMBA_INSTALL}.")
        return False
    return True


def check_failed(error):
    """The message of a failed check (CheckFailed) raised by a check cell: its own words,
    then where to look: the exercise's function or class in your file, and the check's
    case that failed (normkit/checks/unitN.py, or the cell's own line)."""
    lines, found = [f"{error}"], checks.case(error)
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if "ipykernel" in f.filename or f.filename.startswith("<")]
    title = CHECK.match(linecache.getline(frames[0].filename, 1)) if frames else None
    number = found[0] if found else title[1] if title else None
    try:  # (a function or class written in a file: a normlib/ exercise)
        module, name = checks.target(number)
        target = getattr(importlib.import_module(module), name)
        where = f"{checks.shown(inspect.getsourcefile(target))}, line " \
            f"{inspect.getsourcelines(target)[1]}"
        lines.append(f"Exercise {number}: your {name} is in {where}.")
    except Exception:  # (no exercise, or its module does not import: the error says more)
        pass
    if found:
        lines.append(f"The case is {found[1]}, line {found[2]}: {found[3]}")
    elif frames:
        lines.append(f"The case is the check's line {frames[0].lineno}: "
                     f"{(frames[0].line or '').strip()}")
    return "\n".join(lines)


def _show_check(shell, etype, value, tb, tb_offset=None):
    """IPython's handler for a failed check: its message, no traceback."""
    text = check_failed(value)
    stb = [f"\x1b[0;31m{etype.__name__}\x1b[0m: {text}"]
    shell._showtraceback(etype, value, stb)
    return stb


class NotReloaded(Exception):
    """A file that changed since it was imported no longer imports: the cell did not run."""


def import_error(path):
    """Why the Python file at path does not import: "SyntaxError in normlib/x.py, line
    12: invalid syntax" and the line, or the error its top level raises, with its line."""
    source = Path(path).read_text()
    try:
        code = compile(source, path, "exec")
    except SyntaxError as e:
        return (f"SyntaxError in {checks.shown(path)}, line {e.lineno}: {e.msg}\n"
                f"    {(e.text or '').strip()}")
    name = f"normlib.{Path(path).stem}" if Path(path).parent.name == "normlib" else "__main__"
    try:  # (the student's own module, run again as its package's, to see what it raises)
        exec(code, {"__name__": name, "__package__": name.rpartition(".")[0],
                    "__file__": path})
    except Exception as e:
        lines = [f.lineno for f in traceback.extract_tb(e.__traceback__) if f.filename == path]
        line = lines[-1] if lines else "?"
        return f"{type(e).__name__} in {checks.shown(path)}, line {line}: {e}"
    return f"{checks.shown(path)} failed to reload"


class _StopIfNotReloaded(ast.NodeTransformer):
    """An AST transformer: IPython applies it after autoreload has run (pre_run_cell), just
    before the cell runs. If a reload failed, the cell becomes `raise NotReloaded(why)`."""

    def __init__(self, shell):
        self.shell = shell

    def visit_Module(self, node):
        magics = self.shell.magics_manager.registry.get("AutoreloadMagics")
        failed = sorted(getattr(getattr(magics, "_reloader", None), "failed", {}))
        if not failed:
            return node
        why = "\n".join(import_error(path) for path in failed)
        message = (f"{why}\nThis cell did not run: fix that, then run it again (the code from "
                   "before your change is still loaded).")
        stop = ast.parse("raise __import__('normkit.notebook', fromlist=['NotReloaded'])"
                         f".NotReloaded({message!r})")
        return ast.fix_missing_locations(stop)


def _show(shell, etype, value, tb, tb_offset=None):
    """IPython's handler for NotImplementedError: one line for a stub, else the usual."""
    message = not_yet_implemented(value)
    if message is None:
        shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
        return None
    stb = [f"\x1b[0;31mNotImplementedError\x1b[0m: {message}"]  # (red, like a traceback's)
    shell._showtraceback(etype, value, stb)  # the cell's error output, with this text
    return stb


def _handle(shell, etype, value, tb, tb_offset=None):
    """IPython's handler for the exceptions this extension shortens."""
    from normkit.testing import CheckFailed  # (torch: imported when a check first fails)

    if isinstance(value, CheckFailed):
        return _show_check(shell, etype, value, tb, tb_offset)
    if isinstance(value, NotReloaded):
        stb = [f"\x1b[0;31mNotReloaded\x1b[0m: {value}"]
        shell._showtraceback(etype, value, stb)
        return stb
    if isinstance(value, NotImplementedError):
        return _show(shell, etype, value, tb, tb_offset)
    shell.showtraceback((etype, value, tb), tb_offset=tb_offset)  # any other: as usual
    return None


def load_ipython_extension(ipython):
    ipython.set_custom_exc((NotImplementedError, AssertionError, NotReloaded), _handle)
    if _record not in ipython.events.callbacks["post_run_cell"]:
        ipython.events.register("post_run_cell", _record)
    if not any(isinstance(t, _StopIfNotReloaded) for t in ipython.ast_transformers):
        ipython.ast_transformers.append(_StopIfNotReloaded(ipython))
