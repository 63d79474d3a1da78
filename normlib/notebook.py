"""What the notebooks' first cell loads (`%load_ext normlib.notebook`): an exercise that is
not yet written shows as one line saying so, not as a traceback.

A stub (`raise NotImplementedError("Exercise N.M: implement layer_norm_stats")`, or the
bare `raise NotImplementedError()` of a "your turn" cell) reached from a cell prints

    NotImplementedError: Exercise N.M is not yet implemented: layer_norm_stats in
    normlib/layer_norm.py still raises NotImplementedError. Write it, then run this cell again.

A check that finds a wrong value (normlib.testing.CheckFailed) prints its message alone,
which says the quantity, the case, the worst element and the likely cause, then where to
look: the exercise's function in your normlib/ file, with its line, and the check's line
that failed, instead of a traceback through NumPy.

A cell whose output would give away what an exercise asks you to predict runs only once that
exercise's check has passed in this kernel: it starts with `if revealed("2.4"):`, which
otherwise prints why it waits. The extension records which check cells passed.

A normlib/ file that you changed and that no longer imports (a syntax error, a name
error at its top level) stops the next cell before it runs, with one message naming the
file, the line and the error (NotReloaded): autoreload would print its traceback and then
run the code from before your change, as if nothing were wrong. The notebooks load
`%autoreload 2 --full --hide-errors`: --full reloads whole modules, so that tracebacks
point at the right lines (IPython 9's default reloads only the changed functions and
gives them wrong line numbers), and --hide-errors leaves the message to this extension.
Any other exception keeps its usual traceback. The cell still ends in an error, so a check
of an unfinished exercise still fails (nbgrader scores it 0, Validate reports it), and its
`raises-exception` tag lets JupyterLab's Run All go on to the next cell. Not an exercise: at
grading the course's copy of this file is used, not the student's.
"""

import ast
import inspect
import linecache
import re
import traceback
from pathlib import Path

STUB = re.compile(r"Exercise (\d+\.\d+): implement ([\w.]+)")  # a stub's message
CHECK = re.compile(r"# Exercise (\d+\.\d+): (\w+) \(")  # a check cell's first line


def _shown(filename):
    """normlib/layer_norm.py for a file of a normlib/ folder, else the file's name."""
    path = Path(filename)
    return f"normlib/{path.name}" if path.parent.name == "normlib" else path.name


def not_yet_implemented(error):
    """The one-line message for a stub's NotImplementedError, or None for any other."""
    frames = traceback.extract_tb(error.__traceback__)
    if not frames:
        return None
    where = frames[-1]  # the frame that raised
    stub = STUB.fullmatch(str(error))
    if stub:
        file = _shown(where.filename)
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


def check_failed(error, namespace):
    """The message of a failed check (CheckFailed) raised in a check cell: its own words,
    then where to look: the exercise's function or class (found in namespace, the cell's
    globals) in its file, and the check's line that failed."""
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if "ipykernel" in f.filename or f.filename.startswith("<")]
    lines = [f"{error}"]
    title = CHECK.match(linecache.getline(frames[0].filename, 1)) if frames else None
    target = namespace.get(title[2]) if title else None
    if target is not None:
        try:  # (a function or class written in a file: a normlib/ exercise)
            where = f"{_shown(inspect.getsourcefile(target))}, line " \
                f"{inspect.getsourcelines(target)[1]}"
            lines.append(f"Exercise {title[1]}: your {title[2]} is in {where}.")
        except (TypeError, OSError):
            pass
    if frames:
        line = frames[0].line or ""
        lines.append(f"The case is the check's line {frames[0].lineno}: {line.strip()}")
    return "\n".join(lines)


def _show_check(shell, etype, value, tb, tb_offset=None):
    """IPython's handler for a failed check: its message, no traceback."""
    text = check_failed(value, shell.user_ns)
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
        return (f"SyntaxError in {_shown(path)}, line {e.lineno}: {e.msg}\n"
                f"    {(e.text or '').strip()}")
    name = f"normlib.{Path(path).stem}" if Path(path).parent.name == "normlib" else "__main__"
    try:  # (the student's own module, run again as its package's, to see what it raises)
        exec(code, {"__name__": name, "__package__": name.rpartition(".")[0],
                    "__file__": path})
    except Exception as e:
        lines = [f.lineno for f in traceback.extract_tb(e.__traceback__) if f.filename == path]
        return f"{type(e).__name__} in {_shown(path)}, line {lines[-1] if lines else '?'}: {e}"
    return f"{_shown(path)} failed to reload"


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
        stop = ast.parse("raise __import__('normlib.notebook', fromlist=['NotReloaded'])"
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
    from normlib.testing import CheckFailed  # (torch: imported when a check first fails)

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
