"""How long each unit takes a student, estimated from what its notebook holds today: the
README's table of times (tested against it, tests/test_exercises.py).

    python -m tools.maintainer.study_time

A unit's time is the sum of reading its markdown (model answers left out), its exercises'
points, its written questions and its other code cells, each at a rate of PACE (a low and a
high end); the method and where its rates come from: the README, "How long". Each unit's
range is rounded to the half hour and the course's total is the sum of the rounded ranges,
so that the table adds up. No unit may be over MOST hours at the high end: a longer one is
split.
"""

import dataclasses
import json
import math
import sys

from tools.course.exercises import notebooks, of_notebooks, questions_of, unit

MOST = 6  # hours: the most a unit may take at the high end of its range


@dataclasses.dataclass(frozen=True)
class Pace:
    """The method's rates, each (fast, slow): the low and the high end of a range."""

    words_per_minute: tuple = (150, 100)
    minutes_per_point: tuple = (7, 10)
    minutes_per_question: tuple = (10, 15)
    minutes_per_cell: tuple = (1.5, 2.5)


PACE = Pace()


@dataclasses.dataclass(frozen=True)
class Unit:
    number: int
    notebook: str  # its stem
    words: int  # of its markdown cells, model answers left out
    exercises: int
    points: int
    questions: int
    cells: int  # code cells that are not an exercise's check

    def hours(self, pace=PACE):
        """(low, high): the method's range, each end to the nearest half hour."""
        ends = []
        for i in (0, 1):
            minutes = (self.words / pace.words_per_minute[i]
                       + self.points * pace.minutes_per_point[i]
                       + self.questions * pace.minutes_per_question[i]
                       + self.cells * pace.minutes_per_cell[i])
            ends.append(math.floor(minutes / 30 + 0.5) / 2)  # (half up)
        return tuple(ends)


def units():
    """Every unit of solutions/, counted."""
    found = []
    for path in notebooks():
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        graded = [c["metadata"].get("nbgrader", {}) for c in cells]
        words = sum(len("".join(c["source"]).split()) for c, g in zip(cells, graded)
                    if c["cell_type"] == "markdown" and not g.get("solution"))
        cells_run = sum(c["cell_type"] == "code" and not g.get("grade")
                        for c, g in zip(cells, graded))
        own = of_notebooks([path.stem])
        found.append(Unit(unit(path), path.stem, words, len(own), sum(e.points for e in own),
                          len(questions_of([path.stem])), cells_run))
    return found


def hours_text(low, high):
    return f"{low:g} to {high:g}"


def readme_table():
    """The README's table: each unit's counts and hours, and the course's total (the sum of
    the units' rounded ranges)."""
    rows = ["| unit | notebook | words | exercises (points) | questions | other code cells "
            "| hours |",
            "|---|---|---:|---:|---:|---:|---:|"]
    total = [0.0, 0.0]
    for u in units():
        low, high = u.hours()
        total = [total[0] + low, total[1] + high]
        rows.append(f"| {u.number} | `{u.notebook}` | {u.words:,} | {u.exercises} ({u.points}) "
                    f"| {u.questions} | {u.cells} | {hours_text(low, high)} |")
    rows.append(f"| all | | | | | | {hours_text(*total)} |")
    return "\n".join(rows)


def main():
    print(readme_table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
