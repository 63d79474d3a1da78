"""Every exercise and question number in the course's text means what the registry says.

A number left with an old meaning ("Exercise 4.1", `add_norm`) reads as right to everyone
but a student. Every text in TEXTS (the READMEs, docs/, the notebooks and normlib/ of both
editions, normkit/, tools/, the Makefile) is checked against tools/course/exercises.py:
- every exercise number named ("Exercise 5.3", `check("5.3")`, `@exercise("5.3", ...)`)
  exists, and every (number, name) pair ("5.1 `add_norm`", "add_norm of 5.1") is the
  registry's; a name is one of the exercises' functions or classes;
- every question number ("Q4.1"), grade id (`ex5_1_...`, `q4_1_...`), cell id ("ex5_4-text")
  and visible check (`visible_5_4`) names an exercise or a question, with its number;
- every notebook, unit module, assignment and section ("notebook 06, section 4") named
  exists;
- each "Exercise N.M" and "Question N.M" heading stands in unit N's notebook, a question's
  just before its answer cell (grade id q<N>_<M>_...).
"""

import json
import re

import pytest

from tools.course.exercises import REPO, SOLUTIONS, by_number, exercises, notebooks, questions, unit

TEXTS = ["README.md", "data/README.md", "Makefile", "docs/*.md", "solutions/*.ipynb",
         "notebooks/*.ipynb", "solutions/normlib/*.py", "normlib/*.py", "normkit/**/*.py",
         "tools/**/*.py"]
# Numbers a text names on purpose although no exercise has them: {(file, number): why}
HYPOTHETICAL = {
    ("README.md", "3.9"): "the README's worked example of adding an exercise",
    ("tools/course/exercises.py", "3.9"): "the registry's docstring: a check without its block",
}

NUMBER = r"[1-9]\.[1-9]"
LIST = rf"{NUMBER}(?:(?:,\s| and\s| to\s|-|–| or\s|/|, and\s){NUMBER})*"  # a line may break
EXERCISE_LIST = re.compile(rf"\bExercises? ({LIST})(?![\d.]*\d)")
QUESTION_LIST = re.compile(rf"\b(?:Questions? |Q)({LIST})(?![\d.]*\d)")
CALL = re.compile(rf"""(?:check|exercise)\(\\?["']({NUMBER})\\?["'](?:, \\?["']([\w.]+)\\?["'])?""")
GRADE_ID = re.compile(r"\b(ex|q)([1-9])_([1-9])_(\w+)")
CELL_ID = re.compile(r"\b(ex|q)([1-9])_([1-9])-")  # a notebook cell's id: "ex5_4-text"
VISIBLE = re.compile(rf"@exercise\(\"({NUMBER})\".*\)\ndef visible_(\d+)_(\d+)\(")
NOTEBOOK = re.compile(r"\b(0[1-9]_[a-z]+(?:_[a-z]+)+)\b")
UNIT_NAME = re.compile(r"\bunit([0-9]+)\b")
# a notebook's section by number or title: "notebook 06, section 4", "Unit 4, section 3",
# 'notebook 04, "Near the largest learning rate that trains"'
SECTION = re.compile(r"\b(?:[Nn]otebook 0|[Uu]nit )([1-9]),? (?:section (\d+)\b|\"([^\"]+)\")")


def texts():
    """(path relative to the repository, text) of every file the test reads; a notebook's
    text is its cells' sources, one after the other."""
    for pattern in TEXTS:
        for path in sorted(REPO.glob(pattern)):
            if "__pycache__" in path.parts:
                continue
            text = path.read_text(encoding="utf-8")
            if path.suffix == ".ipynb":
                text = "\n".join("".join(c["source"]) for c in json.loads(text)["cells"])
            yield path.relative_to(REPO).as_posix(), text


def names():
    """{name: number} of the names a text may pair with a number: each exercise's function
    or class, and the methods its stubs name ("TransformerEncoderLayer.forward")."""
    found = {}
    for e in exercises():
        for name in (e.name, *e.stubs):
            found[name] = e.number
    return found


NAMES = names()
NAME = "|".join(sorted(map(re.escape, NAMES), key=len, reverse=True))
# a number, then its name: "5.1 `add_norm`", "Exercise 5.1: add_norm", "5.1 (add_norm)",
# "Exercise 7.1: implement layer_norm_forward_fast"
NUMBER_NAME = re.compile(rf"(?<![\w.])({NUMBER}):? \(?(?:implement )?`?({NAME})\b(?![.\w])")
# a name, then its number or numbers: "`TransformerEncoder` (Exercise 5.3", "add_norm of
# 5.1", "TransformerEncoder (Exercises 5.2 and 5.3"
NAME_NUMBER = re.compile(rf"\b({NAME})`? (?:\((?:Exercises? )?|of (?:Exercise )?)({LIST})\b")


def headings():
    """{unit: [each markdown heading's text]} of the notebooks in solutions/."""
    found = {}
    for path in notebooks():
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        found[unit(path)] = [m.group(1) for c in cells if c["cell_type"] == "markdown"
                             for m in re.finditer(r"^#+ (.+)$", "".join(c["source"]), re.M)]
    return found


HEADINGS = headings()


def numbers(listed):
    return re.findall(NUMBER, listed)


def stale(path, text):
    """What in one text contradicts the registry: a list of 'where: what' lines."""
    exercise, question = by_number(), {q.number: q for q in questions()}
    ids = {e.grade_id: e.number for e in exercises()} | {q.grade_id: q.number
                                                          for q in questions()}
    stems = {p.stem for p in notebooks()}
    units = {unit(stem) for stem in stems}
    found = []

    def bad(match, why):
        line = text.count("\n", 0, match.start()) + 1
        found.append(f"{path}:{line}: {match.group(0)!r}: {why}")

    for m in EXERCISE_LIST.finditer(text):
        for n in numbers(m.group(1)):
            if n not in exercise and (path, n) not in HYPOTHETICAL:
                bad(m, f"no Exercise {n}")
    for m in CALL.finditer(text):
        n, target = m.group(1), m.group(2)
        if n not in exercise:
            if (path, n) not in HYPOTHETICAL:
                bad(m, f"no Exercise {n}")
        elif target and target.split(".")[-1] != exercise[n].name:
            bad(m, f"Exercise {n} is {exercise[n].name}")
    for pattern, number_first in ((NUMBER_NAME, True), (NAME_NUMBER, False)):
        for m in pattern.finditer(text):
            listed, name = m.groups() if number_first else m.groups()[::-1]
            if NAMES[name] not in numbers(listed):
                bad(m, f"{name} is Exercise {NAMES[name]}")
    for m in QUESTION_LIST.finditer(text):
        for n in numbers(m.group(1)):
            if n not in question:
                bad(m, f"no Question {n}")
    for m in GRADE_ID.finditer(text):
        grade_id, n = m.group(0), f"{m.group(2)}.{m.group(3)}"
        if grade_id in ids or (path, n) in HYPOTHETICAL:
            continue
        if m.group(1) == "ex" and n in exercise:
            bad(m, f"Exercise {n}'s grade id is {exercise[n].grade_id}")
        elif m.group(1) == "q" and n in question:
            bad(m, f"Question {n}'s grade id is {question[n].grade_id}")
        else:
            bad(m, f"no {'Exercise' if m.group(1) == 'ex' else 'Question'} {n}")
    for m in CELL_ID.finditer(text):
        n = f"{m.group(2)}.{m.group(3)}"
        if n not in (exercise if m.group(1) == "ex" else question):
            bad(m, f"no {'Exercise' if m.group(1) == 'ex' else 'Question'} {n}")
    for m in VISIBLE.finditer(text):
        if m.group(1) != f"{m.group(2)}.{m.group(3)}":
            bad(m, f"Exercise {m.group(1)}'s visible cases are named visible_"
                   f"{m.group(1).replace('.', '_')}")
    for m in NOTEBOOK.finditer(text):
        if m.group(1) not in stems:
            bad(m, "no such notebook: " + ", ".join(sorted(stems)))
    for m in SECTION.finditer(text):
        titles = HEADINGS.get(int(m.group(1)), [])
        if m.group(2) and not any(t.startswith(f"{m.group(2)}. ") for t in titles):
            bad(m, f"Unit {m.group(1)}'s notebook has no section {m.group(2)}")
        if m.group(3) and not any(m.group(3) in t for t in titles):
            bad(m, f"Unit {m.group(1)}'s notebook has no heading {m.group(3)!r}")
    for m in UNIT_NAME.finditer(text):
        if int(m.group(1)) not in units:
            bad(m, f"no Unit {m.group(1)}")
    return found


def test_every_number_of_every_text_means_what_the_registry_says():
    found = [line for path, text in texts() for line in stale(path, text)]
    assert not found, "\n".join(found)


def test_the_texts_read_are_the_courses():
    """The globs find every text they should: a moved folder fails here, not silently."""
    read = dict(texts())
    assert {f"solutions/{p.name}" for p in notebooks()} <= set(read)
    assert {f"notebooks/{p.name}" for p in notebooks()} <= set(read)
    assert {"README.md", "docs/instructors.md", "docs/mistakes.md", "normlib/transformer.py",
            "solutions/normlib/transformer.py", "normkit/checks/unit5.py",
            "tools/course/exercises.py", "Makefile"} <= set(read)


@pytest.mark.parametrize("text,why", [
    ("Exercises 4.3 to 4.5 build the block.", "no Exercise 4.3"),
    ("| 4 | `notebooks/04_add_and_norm.ipynb` | 5.1 `add_norm` |", "no such notebook"),
    ("the fast kernels (5.5 `layer_norm_forward_fast`)", "layer_norm_forward_fast is Exercise 7.1"),
    ("Exercise 5.3: welford_merge", "welford_merge is Exercise 6.2"),
    ("your `TransformerEncoder` (Exercise 4.3; torch's norms)", "no Exercise 4.3"),
    ("around your add_norm of 4.1", "add_norm is Exercise 5.1"),
    ("Unit 6's checks: 6.1 (welford), 5.2 (welford_merge)", "welford_merge is Exercise 6.2"),
    ("### Question 3.3 (2 points, graded by hand)", "no Question 3.3"),
    ("Q6.2's model answer", "no Question 6.2"),
    ('check("4.4")', "no Exercise 4.4"),
    ('@exercise("5.1", "variance.welford")', "Exercise 5.1 is add_norm"),
    ("grade_id ex4_3_encoder", "no Exercise 4.3"),
    ("grade_id ex5_1_welford", "Exercise 5.1's grade id is ex5_1_add_norm"),
    ("grade_id q3_3_gamma_beta_undo", "no Question 3.3"),
    ("make score A=unit10", "no Unit 10"),
    ('"id": "ex4_4-text"', "no Exercise 4.4"),
    ("the capstone (notebook 05, section 9)", "has no section 9"),
    ('spread is asserted (notebook 03, "Near the largest learning rate that trains")', "has no heading"),
    ('@exercise("5.4", "transformer.final_norm_gain")\ndef visible_4_4():', "named visible_5_4"),
])
def test_an_old_number_is_found(text, why):
    """Each way a number survives a renumbering with its old meaning is reported."""
    found = stale("example.md", text)
    assert any(why in line for line in found), found


@pytest.mark.parametrize("text", [
    "Exercises 5.1 to 5.3 build the block; 7.1 `layer_norm_forward_fast`.",
    "Exercise 5.3: TransformerEncoder; your `TransformerEncoder` (Exercise 5.3; ...)",
    "Exercise 7.1: implement layer_norm_forward_fast",
    "| 5 | `notebooks/05_add_and_norm.ipynb` | 5.1 `add_norm`, 5.2 "
    "`TransformerEncoderLayer.forward` |",
    '@exercise("6.2", "variance.welford_merge") and check("6.2")',
    "Questions 4.1 and 4.2, Q5.1, q4_1_gamma_beta_undo, ex6_2_welford_merge, unit6",
    "float16 at 5.5 and 2.5 hours for Unit 4; Moodle 4.1+",
    'notebook 06, section 4; Unit 4, section 3; notebook 04, "Near the largest learning rate that trains"',
    '"ex5_4-text", "q5_1-answer"; @exercise("7.1", "layer_norm_fast.layer_norm_forward_fast")\ndef visible_7_1():',
])
def test_a_right_number_is_not(text):
    assert stale("example.md", text) == []


def test_each_heading_stands_in_its_units_notebook_and_each_question_before_its_answer():
    found = []
    for path in notebooks(SOLUTIONS):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        for i, cell in enumerate(cells):
            source = "".join(cell["source"])
            for m in re.finditer(rf"^#+ (Exercise|Question) ({NUMBER})\b", source, re.M):
                if int(m.group(2)[0]) != unit(path.stem):
                    found.append(f"{path.name} cell {i}: {m.group(0)!r} in Unit {unit(path)}")
                if m.group(1) == "Question":
                    answer = cells[i + 1]["metadata"].get("nbgrader", {}).get("grade_id", "")
                    if not answer.startswith("q" + m.group(2).replace(".", "_") + "_"):
                        found.append(f"{path.name} cell {i}: {m.group(0)!r} is followed by "
                                     f"the answer cell {answer!r}")
    assert not found, "\n".join(found)
    for e in exercises():
        assert e.grade_id.startswith(e.marker + "_"), e  # ex5_1_...
        assert unit(e.notebook) == e.unit, e
