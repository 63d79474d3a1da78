"""The course's exercises, read from solutions/ once: what every tool and test knows of them.

    python -m tools.course.exercises            the authors' table: number, points, file,
                                                function, the exercises its reference calls
    python -m tools.course.exercises --readme   the README's table of exercises (tested)

An exercise is its check cell, in a numbered notebook (nbgrader `grade: true`, a `grade_id`
and `points`; visible lines `# Exercise N.M: name (P points)` and `check("N.M")`, hidden
tests between the markers of tools/course/markers.py), and its solution blocks, in one
top-level function or class of solutions/normlib/ whose docstring says `Exercise N.M`.
`exercises()` fails, naming the exercise, where the two do not match. A written question
(`questions()`) is a graded markdown cell, `grade_id` `q<unit>_<n>_<name>`, graded by hand.
`make check`, the course builder, the judge, the grades CSV and the tests all read
`exercises()`: adding an exercise adds it everywhere (README, "For authors").
"""

import argparse
import ast
import dataclasses
import functools
import itertools
import json
import re
import sys
from pathlib import Path

from tools.course.markers import TITLE, split_check, stubs

REPO = Path(__file__).resolve().parents[2]
SOLUTIONS = REPO / "solutions"


@dataclasses.dataclass(frozen=True)
class Question:
    number: str  # "2.1": Question 2.1
    grade_id: str  # the answer cell's nbgrader id: "q2_2_sum_hides"
    points: int
    notebook: str  # the notebook's stem

    @property
    def unit(self):
        return int(self.number.split(".")[0])


@dataclasses.dataclass(frozen=True)
class Exercise:
    number: str  # "3.4"
    name: str  # the function or class it implements (a variant replaces it), as the
    # check's title says: "group_norm_forward", "TransformerEncoder"
    grade_id: str  # the check cell's nbgrader id: "ex3_4_group_norm_forward"
    points: int
    notebook: str  # the notebook's stem: "03_normalization_family"
    file: str  # the student's file, relative to the repository: "normlib/group_norm.py"
    stubs: tuple  # the names its stubs give: ("TransformerEncoder.__init__", ...)
    source: str  # the check cell, hidden tests included
    visible: str  # the check cell without its hidden tests (what students see: its title
    # and check("N.M"))
    hidden: str  # the hidden tests' lines
    uses: tuple = ()  # the exercises whose functions its reference calls: ("3.1",) for 3.3

    @property
    def unit(self):
        return int(self.number.split(".")[0])

    @property
    def module(self):
        """The normlib module holding it: "normlib.group_norm"."""
        return self.file.removesuffix(".py").replace("/", ".")

    @property
    def marker(self):
        """Its pytest marker: `pytest -m ex3_4` runs every test about Exercise 3.4."""
        return "ex" + self.number.replace(".", "_")

    @property
    def shown(self):
        """Its name in the README: the one method a student writes, or the function/class."""
        return self.stubs[0] if len(self.stubs) == 1 else self.name


def notebooks(folder=SOLUTIONS):
    """The course's numbered notebooks in folder, in unit order."""
    return sorted(Path(folder).glob("[0-9]*.ipynb"))


def unit(notebook):
    """The unit number of a notebook (path or stem): 3 for 03_normalization_family."""
    return int(Path(notebook).stem.split("_")[0])


def _graded_cells(folder, cell_type):
    """(notebook stem, cell metadata, source) of every graded cell of cell_type ("code":
    the checks; "markdown": the written answers), in unit order."""
    for path in notebooks(folder):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            meta = cell["metadata"].get("nbgrader", {})
            if meta.get("grade") and cell["cell_type"] == cell_type:
                yield path.stem, meta, "".join(cell["source"])


@functools.cache
def questions(folder=SOLUTIONS):
    """Every written question of the course in folder, in notebook order."""
    found = []
    for notebook, meta, _ in _graded_cells(folder, "markdown"):
        match = re.fullmatch(r"q(\d+)_(\d+)_\w+", meta.get("grade_id", ""))
        if not (match and meta.get("solution") and meta.get("points")):
            raise ValueError(f"{notebook}: the graded markdown cell {meta.get('grade_id')!r} "
                             "is not a written answer: solution, points and a grade_id "
                             "q<unit>_<n>_<name>")
        number = f"{match.group(1)}.{match.group(2)}"
        if int(match.group(1)) != unit(notebook):
            raise ValueError(f"{notebook}: Question {number} belongs to another unit")
        found.append(Question(number, meta["grade_id"], meta["points"], notebook))
    return tuple(found)


def questions_of(stems, folder=SOLUTIONS):
    """The written questions of these notebooks (stems), in order."""
    return [q for q in questions(folder) if q.notebook in stems]


def _solution_blocks(folder):
    """{number: (file, [stub names])} of every solution block of folder/normlib/*.py."""
    found = {}
    for path in sorted((Path(folder) / "normlib").rglob("*.py")):
        rel = path.relative_to(folder).as_posix()
        for number, name in stubs(path.read_text(encoding="utf-8"), rel):
            file, names = found.setdefault(number, (rel, []))
            if file != rel:
                raise ValueError(f"Exercise {number} has solution blocks in {file} and {rel}: "
                                 "an exercise lives in one file")
            names.append(name)
    return found


@functools.cache
def exercises(folder=SOLUTIONS):
    """Every exercise of the course in folder (default solutions/), in notebook order."""
    blocks, found = _solution_blocks(folder), []
    for notebook, meta, source in _graded_cells(folder, "code"):
        title = TITLE.match(source)
        if not title:
            raise ValueError(f"{notebook}: check {meta['grade_id']} does not start with "
                             "'# Exercise N.M: name (P points)'")
        number, name, points = title.group(1), title.group(2), int(title.group(3))
        if number not in blocks:
            raise ValueError(f"Exercise {number} ({notebook}) has no solution block in normlib/")
        file, names = blocks.pop(number)
        if {n.split(".")[0] for n in names} != {name} or points != meta["points"]:
            raise ValueError(f"Exercise {number}: the check says {name} ({points} points), the "
                             f"nbgrader metadata {meta['points']} points, {file}'s blocks "
                             f"{', '.join(names)}")
        visible, hidden = split_check(source)
        call = f'check("{number}")'
        if [line.strip() for line in visible.splitlines() if line.strip()][1:] != [call]:
            raise ValueError(f"{notebook}: check {meta['grade_id']} is not its title and "
                             f"{call} alone, besides its hidden tests (its visible cases go "
                             f"in normkit/checks/unit{number.split('.')[0]}.py)")
        found.append(Exercise(number, name, meta["grade_id"], points, notebook, file,
                              tuple(names), source, visible, hidden))
    if blocks:
        raise ValueError(f"solution blocks without a check cell: Exercise {', '.join(blocks)}")
    return tuple(_with_uses(found, folder))


# Exercises whose check runs another exercise's function besides its own, where the
# reference's code does not call it: 4.2's check runs the student's mlp_forward first, since
# the backward reads the cache that forward returns, in the student's own format.
CHECK_RUNS = {"4.2": ("4.1",)}


def names(node):
    """Every name and attribute name in the code of an ast node."""
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | \
        {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}


def _order(number):
    """An exercise number's sort key: "3.10" after "3.9"."""
    return tuple(int(part) for part in number.split("."))


def _with_uses(found, folder):
    """The exercises with `uses` filled in: the other exercises whose function or class
    the reference's code of each names (its def or class, in its file), and those its
    check runs (CHECK_RUNS)."""
    numbers = {e.name: e.number for e in found}
    trees = {}
    for e in found:
        tree = trees.setdefault(e.file, ast.parse((Path(folder) / e.file).read_text()))
        node = next(n for n in tree.body if getattr(n, "name", None) == e.name)
        uses = {numbers[n] for n in names(node) & set(numbers) if n != e.name}
        uses |= set(CHECK_RUNS.get(e.number, ()))
        yield dataclasses.replace(e, uses=tuple(sorted(uses, key=_order)))


def by_number(folder=SOLUTIONS):
    """{number: Exercise}."""
    return {e.number: e for e in exercises(folder)}


def needs(number, failed):
    """The exercises that Exercise `number` builds on (its reference calls them, directly
    or not) among those that failed, in order."""
    found, todo = set(), list(by_number()[number].uses)
    while todo:
        other = todo.pop()
        if other not in found:
            found.add(other)
            todo.extend(by_number()[other].uses)
    return sorted(found & failed, key=_order)


def of_notebooks(stems, folder=SOLUTIONS):
    """The exercises of these notebooks (stems), in order."""
    return [e for e in exercises(folder) if e.notebook in stems]


def maximum(stems):
    """An assignment's maximum (its notebooks' stems: course.json's): its checks' points and
    its written answers', as solutions/ gives them (the one source: the gradebook's cells
    are built from the same notebooks)."""
    return sum(e.points for e in of_notebooks(stems)) + sum(q.points for q in questions_of(stems))


def imported(rel, folder=SOLUTIONS):
    """The student files that file rel imports when it is imported, and those they import:
    a relative import at its top level (normlib/qk_norm.py's `from .transformer import
    ...`). A file that does not import breaks each of them. Sorted."""
    found, todo = set(), [rel]
    while todo:
        tree = ast.parse((Path(folder) / todo.pop()).read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
                other = f"normlib/{node.module.replace('.', '/')}.py"
                if other not in found:
                    found.add(other)
                    todo.append(other)
    return sorted(found - {rel})


def student_files(units=None):
    """The files students write for these units (default all), sorted: those of their
    exercises, of the exercises these build on (Exercise.uses, transitively), whatever
    their unit (Unit 4's network runs the student's own kernels of Units 1 to 3, so its
    assignment grades those files too), and the files these import (imported: Unit 8's
    qk_norm.py subclasses Unit 5's attention). "normlib/layer_norm.py", ..."""
    units = None if units is None else set(units)
    chosen = [e.number for e in exercises() if units is None or e.unit in units]
    used = {n for number in chosen for n in needs(number, set(by_number()))}
    files = {by_number()[n].file for n in {*chosen, *used}}
    return sorted(files.union(*(imported(rel) for rel in files)))


def readme_table():
    """The README's table: one row per unit, its notebook, what the student writes and the
    written questions they answer."""
    rows = ["| unit | notebook | you implement (in `normlib/`) | you answer (graded by hand) |",
            "|---|---|---|---|"]
    for path in notebooks():
        runs = itertools.groupby(of_notebooks([path.stem]), key=lambda e: e.file)  # by file
        what = ", ".join(", ".join(f"{e.number} `{e.shown}`" for e in run) +
                         f" (`{Path(file).name}`)" for file, run in runs)
        answers = ", ".join(f"Q{q.number}" for q in questions_of([path.stem]))
        what = what or "nothing: every cell runs as it is"
        rows.append(f"| {unit(path)} | `notebooks/{path.name}` | {what} | {answers or '-'} |")
    return "\n".join(rows)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--readme", action="store_true", help="print the README's table")
    args = parser.parse_args(argv)
    if args.readme:
        print(readme_table())
        return 0
    print(f"{'exercise':<9}{'points':>6}  {'file':<32}{'function':<30}  uses")
    for e in exercises():
        print(f"{e.number:<9}{e.points:>6}  {e.file:<32}{e.name:<30}  " + " ".join(e.uses))
    total = sum(e.points for e in exercises())
    print(f"\n{len(exercises())} exercises, {total} points")
    written = sum(q.points for q in questions())
    print(f"{len(questions())} written questions graded by hand, {written} points: "
          + ", ".join(q.number for q in questions()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
