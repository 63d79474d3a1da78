"""The graders' page: ROOT/rubric.html, each written question of the course's assignments
with its model answer, rubric and sources (from solutions/), to read beside the
formgrader's hand-grading view, which shows neither. Its math is MathML
(tools/instructor/markdown.py): no script is fetched from anywhere.

    python -m tools.instructor rubric ROOT      (make rubric)

It holds the model answers: it stays in the course folder, with the gradebook; it is
never released, collected or part of any feedback.
"""

import html
import json
from pathlib import Path

from nbconvert.filters import markdown2html

from tools.course.exercises import SOLUTIONS, questions_of
from tools.course.folder import Course
from tools.course.markers import BEGIN, END
from tools.instructor.markdown import sanitize, tex_in, tex_out

STYLE = ("body{font-family:sans-serif;max-width:60em;margin:2em auto;line-height:1.45}"
         ".question{border-left:4px solid #37474f;padding-left:1em;margin:1em 0}"
         ".answer{background:#f5f5f5;padding:0.5em 1em;margin-bottom:2em}")


def question_cells(stem):
    """{grade_id: (the question's text, the model answer's)} of a notebook of solutions/:
    the markdown cell before each answer cell, and the answer cell without its markers."""
    cells = json.loads((SOLUTIONS / f"{stem}.ipynb").read_text(encoding="utf-8"))["cells"]
    found = {}
    for before, cell in zip(cells, cells[1:]):
        grade_id = cell["metadata"].get("nbgrader", {}).get("grade_id")
        if grade_id:
            answer = "".join(line for line in cell["source"] if line.strip() not in (BEGIN, END))
            found[grade_id] = ("".join(before["source"]), answer)
    return found


def rendered(markdown):
    """Markdown as HTML, sanitized, its math as MathML."""
    return tex_in(sanitize(markdown2html(tex_out(markdown))))


def rubric(root):
    root = Path(root)
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>Rubric</title>"
             f"<style>{STYLE}</style></head><body><h1>Written questions: model "
             "answers and rubrics</h1><p>For graders only: never hand this page out.</p>"]
    for assignment, info in Course.load(root).assignments.items():
        parts.append(f"<h2>{html.escape(assignment)}</h2>")
        for q in questions_of(info.notebooks):
            question, answer = question_cells(q.notebook)[q.grade_id]
            parts.append(f"<h3 id='{q.grade_id}'>Question {q.number} ({q.points} points): "
                         f"<code>{q.grade_id}</code></h3>"
                         f"<div class='question'>{rendered(question)}</div>"
                         f"<div class='answer'>{rendered(answer)}</div>")
    (root / "rubric.html").write_text("".join(parts) + "</body></html>\n")
    print(f"rubric: {root / 'rubric.html'} (model answers: for graders only)")
