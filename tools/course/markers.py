"""The course's block markers, in one place: solution blocks (`### BEGIN SOLUTION` ...
`### END SOLUTION`, in notebooks and in the reference normlib's .py files), hidden-test
blocks (`### BEGIN HIDDEN TESTS` ... `### END HIDDEN TESTS`, in check cells) and the
"Exercise N.M" tags. Every tool and test that reads them uses this module: splitting a
check cell, folding its hidden tests, stripping solutions, the leak scan
(tools/course/leaks.py), the list of exercises (tools/course/exercises.py).

nbgrader clears solution blocks in notebooks but copies every other file verbatim, so the
release's .py files are stripped here, by nbgrader's post-convert hook (strip_release, set
in nbgrader_config.py). Each block becomes

    raise NotImplementedError("Exercise 1.1: implement layer_norm_stats")

with the nearest "Exercise N.M" and `def` or `class` name above it: a stub names its exercise.
"""

import re
from pathlib import Path

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
BEGIN_HIDDEN, END_HIDDEN = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
MARKERS = (BEGIN, END, BEGIN_HIDDEN, END_HIDDEN)
EXERCISE = re.compile(r"Exercise (\d+\.\d+)")  # the tag, wherever it stands
TITLE = re.compile(r"#\s*Exercise (\d+\.\d+): (\w+) \((\d+) points?\)")  # a check's line 1
# what a stub raises (normkit/notebook.py has its own copy: an nbgrader release has no tools/)
STUB_MESSAGE = re.compile(r"Exercise (\d+\.\d+): implement ([\w.]+)")
STUB = re.compile(rf'NotImplementedError\("{STUB_MESSAGE.pattern}"\)')  # a stub, in the code
_DEF = re.compile(r"^\s*(?:def|class) (\w+)")


def split_check(source):
    """(visible, hidden) of a check cell's source: the hidden-test block's lines (without
    its markers), and every other line; hidden is "" where the cell has no block."""
    visible, hidden, inside = [], [], False
    for line in source.splitlines(keepends=True):
        if line.strip() in (BEGIN_HIDDEN, END_HIDDEN):
            inside = line.strip() == BEGIN_HIDDEN
        else:
            (hidden if inside else visible).append(line)
    return "".join(visible), "".join(hidden)


def hidden_line_numbers(source):
    """The numbers (from 1) of a check cell's lines in its hidden-test block, the markers
    included."""
    numbers, inside = set(), False
    for number, line in enumerate(source.splitlines(), 1):
        if line.strip() == BEGIN_HIDDEN:
            inside = True
        if inside:
            numbers.add(number)
        if line.strip() == END_HIDDEN:
            inside = False
    return numbers


def fold_hidden(source):
    """A check cell's source with its hidden-test block folded into one comment line
    (what feedback shows)."""
    kept, hidden = [], None
    for line in source.splitlines():
        if line.strip() == BEGIN_HIDDEN:
            hidden = 0
        elif line.strip() == END_HIDDEN:
            kept.append(f"# ... {hidden} lines of hidden tests, not shown ...")
            hidden = None
        elif hidden is None:
            kept.append(line)
        else:
            hidden += 1
    return "\n".join(kept)


def block_lines(text):
    """(line, inside) for every non-blank line of text, stripped, markers left out:
    inside is True within a solution or hidden-test block."""
    depth = 0
    for line in text.splitlines():
        stripped = line.strip()
        if stripped in (BEGIN, BEGIN_HIDDEN):
            depth += 1
        elif stripped in (END, END_HIDDEN):
            depth -= 1
        elif stripped:
            yield stripped, depth > 0


def has_marker(line):
    """Whether a line holds any of the markers (a leak, in the student edition)."""
    return any(marker in line for marker in MARKERS)


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
            if match := EXERCISE.search(line):
                exercise = match.group(1)
            if match := _DEF.match(line):
                # a class, then its methods: "LayerNormFunction.forward"
                names = names[:1] + [match.group(1)] if line.startswith(" ") else [match.group(1)]
    if inside:
        raise ValueError(f"{filename}: {BEGIN} without {END}")
    return "".join(out)


def stubs(text, filename="<source>"):
    """(exercise, name) of each solution block of a .py file's text, in order: ("2.5",
    "LayerNormFunction.forward"), what its stub will say."""
    return STUB.findall(strip_solutions(text, filename))


def release_dir(notebooks):
    """The release folder of the assignment whose source notebooks are given
    (nbgrader's default layout: <root>/source/<assignment> -> <root>/release/<assignment>)."""
    source = Path(notebooks[0]).resolve().parent
    return source.parent.parent / "release" / source.name


def strip_release(assignment, student, notebooks):
    """nbgrader post-convert hook: strip every .py file of the freshly generated release."""
    for path in sorted(release_dir(notebooks).rglob("*.py")):
        path.write_text(strip_solutions(path.read_text(), str(path)))
