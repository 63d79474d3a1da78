"""Strip solutions from the reference normlib's .py files.

nbgrader clears `### BEGIN SOLUTION` blocks in notebooks but copies every other
file verbatim, so the .py files of the release are stripped here, by nbgrader's
post-convert hook (see nbgrader_config.py). Each block becomes

    raise NotImplementedError("Exercise 1.1: implement layer_norm_stats")

with the exercise number taken from the nearest "Exercise N.M" above the block
(the docstring of the function or class) and the name from the nearest `def` or
`class` above it, so a stub says which exercise it belongs to.
"""

import re
from pathlib import Path

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
MARKERS = (BEGIN, END, "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")
_EXERCISE = re.compile(r"Exercise (\d+\.\d+)")
_DEF = re.compile(r"^\s*(?:def|class) (\w+)")


def strip_solutions(text, filename="<source>"):
    """text with each solution block replaced by a NotImplementedError stub."""
    out, exercise, names, inside = [], None, [], False
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        stripped = line.strip()
        if stripped == BEGIN:
            if inside or exercise is None:
                raise ValueError(f"{filename}:{number}: nested {BEGIN}, or no 'Exercise N.M' above")
            indent = line[: len(line) - len(line.lstrip())]
            stub = f"Exercise {exercise}: implement {'.'.join(names)}"
            out.append(f'{indent}raise NotImplementedError("{stub}")\n')
            inside = True
        elif stripped == END:
            if not inside:
                raise ValueError(f"{filename}:{number}: {END} without {BEGIN}")
            inside = False
        elif not inside:
            out.append(line)
            if match := _EXERCISE.search(line):
                exercise = match.group(1)
            if match := _DEF.match(line):
                # a class, then its methods: "LayerNormFunction.forward"
                names = names[:1] + [match.group(1)] if line.startswith(" ") else [match.group(1)]
    if inside:
        raise ValueError(f"{filename}: {BEGIN} without {END}")
    return "".join(out)


def release_dir(notebooks):
    """The release folder of the assignment whose source notebooks are given
    (nbgrader's default layout: <root>/source/<assignment> -> <root>/release/<assignment>)."""
    source = Path(notebooks[0]).resolve().parent
    return source.parent.parent / "release" / source.name


def strip_release(assignment, student, notebooks):
    """nbgrader post-convert hook: strip every .py file of the freshly generated release."""
    for path in sorted(release_dir(notebooks).rglob("*.py")):
        path.write_text(strip_solutions(path.read_text(), str(path)))
