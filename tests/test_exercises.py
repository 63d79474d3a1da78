"""The exercise registry (tools/course/exercises.py): what it reads from solutions/, that it
refuses a course whose check cells and solution blocks disagree, and that the README and
the other tools agree with it."""

import json
import re
import shutil
import subprocess
import sys

import pytest

from normkit.checks import CHECKS, target
from tools.course.exercises import (
    REPO,
    SOLUTIONS,
    Question,
    by_number,
    exercises,
    notebooks,
    questions,
    readme_table,
    student_files,
    unit,
)
from tools.instructor.build import assignments

NEW_FILE = '''"""A new exercise (tests/test_exercises.py)."""


def layer_scale(x, gamma):
    """Exercise 3.9: x scaled by gamma."""
    ### BEGIN SOLUTION
    return x * gamma
    ### END SOLUTION
'''
NEW_CHECK = ("# Exercise 3.9: layer_scale (2 points)\n"
             'check("3.9")\n'
             "### BEGIN HIDDEN TESTS\n"
             "assert layer_scale(1, 0) == 0\n"
             "### END HIDDEN TESTS\n")
OLD_FORM = NEW_CHECK.replace('check("3.9")\n', "from normlib.layer_scale import layer_scale\n"
                             "assert layer_scale(2, 3) == 6\n")


def test_every_exercise_is_read_with_its_check_file_and_function():
    found = by_number()
    assert list(found) == ["1.1", "1.2", "2.1", "2.2", "2.3", "2.4", "2.5", "3.1", "3.2",
                           "3.3", "3.4", "3.5", "3.6", "3.7", "3.8", "4.1", "4.2", "5.1", "5.2",
                           "5.3", "5.4", "5.5", "6.1", "6.2", "6.3", "6.4", "6.5", "7.1", "7.2",
                           "7.3", "7.4", "8.1", "8.2", "8.3", "8.4", "8.5", "9.1", "9.2",
                           "9.3", "9.4", "9.5"]
    e = found["3.4"]
    assert (e.name, e.grade_id, e.points, e.notebook, e.file, e.module, e.unit, e.marker) == (
        "group_norm_forward", "ex3_4_group_norm_forward", 3, "03_normalization_family",
        "normlib/group_norm.py", "normlib.group_norm", 3, "ex3_4")
    assert found["5.3"].stubs == ("TransformerEncoder.__init__", "TransformerEncoder.forward")
    assert found["2.5"].module == "normlib.nn" and found["2.5"].uses == ("1.2", "2.2")
    for e in found.values():
        assert e.source.startswith(f"# Exercise {e.number}: {e.name} ({e.points} point")
        assert e.hidden and e.hidden not in e.visible and "HIDDEN" not in e.visible
        assert e.visible == f'# Exercise {e.number}: {e.name} ({e.points} point' \
            f'{"s" * (e.points != 1)})\ncheck("{e.number}")\n'
    assert sum(e.points for e in found.values()) == 119


def test_each_check_cell_of_the_student_edition_is_its_title_and_one_call():
    cells = [(path.stem, cell) for path in notebooks(REPO / "notebooks")
             for cell in json.loads(path.read_text())["cells"]
             if cell["metadata"].get("nbgrader", {}).get("grade") and cell["cell_type"] == "code"]
    assert [(stem, "".join(cell["source"]) + "\n") for stem, cell in cells] == [
        (e.notebook, e.visible) for e in exercises()]


def test_each_exercise_s_visible_cases_are_registered_in_normkit_for_its_function():
    """check("N.M") runs the cases registered for N.M in normkit/checks/unitN.py, which
    name the function the registry has for it (where make check and the notebooks say
    the student's function is)."""
    for e in exercises():
        assert target(e.number) == (e.module, e.name), e.number
    assert set(CHECKS) == {e.number for e in exercises()}
    with pytest.raises(ValueError, match=r'check: no exercise \'9.9\' \(give its number as a '
                       r'string, e.g. check\("1.1"\)\)'):
        target("9.9")


def test_the_readme_table_is_the_registrys():
    readme = (REPO / "README.md").read_text()
    assert readme_table() in readme
    result = subprocess.run([sys.executable, "-m", "tools.course.exercises", "--readme"], cwd=REPO,
                            capture_output=True, text=True, check=True)
    assert result.stdout.strip() == readme_table()


def test_the_authors_tables_list_the_exercises_and_count_the_variants():
    result = subprocess.run([sys.executable, "-m", "tools.course.exercises"], cwd=REPO,
                            capture_output=True, text=True, check=True)
    rows = {line.split()[0]: line.split() for line in result.stdout.splitlines()[1:] if line}
    counted = subprocess.run([sys.executable, "-m", "tests.variants"], cwd=REPO,
                             capture_output=True, text=True, check=True)
    counts = {line.split()[0]: line.split() for line in counted.stdout.splitlines()[1:]}
    from tests.variants import RIGHT, WRONG

    for number, e in by_number().items():
        assert rows[number][:4] == [number, str(e.points), e.file, e.name]
        assert counts[number] == [number, e.name, str(len(WRONG[number])),
                                  str(len(RIGHT[number]))]
    assert rows["3.3"][4:] == ["3.1"]
    assert "41 exercises, 119 points" in result.stdout
    assert "13 written questions graded by hand, 26 points: 1.1, 2.1, 2.2, 3.1, 3.2, 4.1, " \
        "4.2, 5.1, 6.1, 7.1, 8.1, 9.1, 9.2" in result.stdout


def files_matching(pattern):
    return [str(p.relative_to(REPO)) for folder in ("tools", "tests")
            for p in sorted((REPO / folder).rglob("*.py"))
            if re.search(pattern, p.read_text()) and p.name != "test_exercises.py"]


def test_the_exercise_patterns_are_written_in_one_module():
    """The pattern of 'Exercise N.M' is tools/course/markers.py's; the names built from an
    exercise's number (its grade_id's ex1_2_ prefix, its pytest marker) the registry's."""
    assert files_matching(r"Exercise \(\\d") == ["tools/course/markers.py"]
    assert files_matching(r"ex\{|\"ex\" \+|startswith\(f?\"ex") == ["tools/course/exercises.py"]


def test_the_course_layouts_grade_the_registrys_files():
    assert student_files() == sorted({e.file for e in exercises()})
    assert list(assignments("unit")) == [f"unit{unit(path)}" for path in notebooks()]
    assert {f"unit{e.unit}" for e in exercises()} == set(assignments("unit"))
    assert student_files([2]) == ["normlib/layer_norm.py", "normlib/nn.py"]


@pytest.fixture
def course_copy(tmp_path):
    """solutions/ copied (notebooks and normlib/), to add or break an exercise in."""
    shutil.copytree(SOLUTIONS, tmp_path / "solutions",
                    ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
    return tmp_path / "solutions"


def add_check(folder, source, grade_id="ex3_9_layer_scale", points=2):
    path = next(folder.glob("03_*.ipynb"))
    notebook = json.loads(path.read_text())
    notebook["cells"].append({
        "cell_type": "code", "execution_count": None, "outputs": [], "source": source,
        "metadata": {"nbgrader": {"grade": True, "grade_id": grade_id, "points": points,
                                  "locked": True, "schema_version": 3, "solution": False}}})
    path.write_text(json.dumps(notebook))


def test_adding_an_exercise_is_a_solution_block_and_a_check_cell(course_copy):
    """The README's worked example: nothing else names the exercise."""
    (course_copy / "normlib" / "layer_scale.py").write_text(NEW_FILE)
    add_check(course_copy, NEW_CHECK)
    new = by_number(course_copy)["3.9"]
    assert (new.name, new.file, new.module, new.unit, new.points, new.stubs) == (
        "layer_scale", "normlib/layer_scale.py", "normlib.layer_scale", 3, 2, ("layer_scale",))
    assert new.hidden == "assert layer_scale(1, 0) == 0\n"
    assert len(exercises(course_copy)) == len(exercises()) + 1


@pytest.mark.parametrize("change,message", [
    ("check only", r"Exercise 3.9 \(03_normalization_family\) has no solution block"),
    ("block only", r"solution blocks without a check cell: Exercise 3.9"),
    ("other name", r"Exercise 3.9: the check says layer_scaling \(2 points\), .*layer_scale"),
    ("other points", r"the nbgrader metadata 5 points"),
    ("no title", r"check ex3_9_layer_scale does not start with"),
    ("cases in the cell", r'check ex3_9_layer_scale is not its title and check\("3.9"\) '
     r"alone, besides its hidden tests \(its visible cases go in normkit/checks/unit3.py\)"),
    ("another's call", r'is not its title and check\("3.9"\) alone'),
])
def test_a_course_whose_checks_and_solutions_disagree_is_refused(course_copy, change, message):
    if change != "check only":
        (course_copy / "normlib" / "layer_scale.py").write_text(NEW_FILE)
    if change != "block only":
        source = {"other name": NEW_CHECK.replace("layer_scale (", "layer_scaling ("),
                  "no title": NEW_CHECK.replace("# Exercise 3.9: ", "# "),
                  "cases in the cell": OLD_FORM,
                  "another's call": NEW_CHECK.replace('check("3.9")', 'check("3.8")'),
                  }.get(change, NEW_CHECK)
        add_check(course_copy, source, points=5 if change == "other points" else 2)
    with pytest.raises(ValueError, match=message):
        exercises(course_copy)


# written questions ---------------------------------------------------------------------------


def test_the_written_questions_are_read_with_their_points_and_units():
    found = questions()
    assert [q.number for q in found] == ["1.1", "2.1", "2.2", "3.1", "3.2", "4.1", "4.2", "5.1",
                                         "6.1", "7.1", "8.1", "9.1", "9.2"]
    assert {q.unit for q in found} == set(range(1, 10)) and sum(q.points for q in found) == 26
    assert found[2] == Question("2.2", "q2_2_sum_hides", 2, "02_layernorm_backward")


def answer_cells(folder):
    """{grade_id: source} of every written-answer cell of folder's notebooks."""
    return {c["metadata"]["nbgrader"]["grade_id"]: "".join(c["source"])
            for path in sorted(folder.glob("[0-9]*.ipynb"))
            for c in json.loads(path.read_text())["cells"]
            if c["cell_type"] == "markdown" and c["metadata"].get("nbgrader", {}).get("grade")}


def test_each_model_answer_has_a_rubric_and_sources_and_the_student_sees_none():
    model, student = answer_cells(SOLUTIONS), answer_cells(REPO / "notebooks")
    assert set(model) == set(student) == {q.grade_id for q in questions()}
    for grade_id, text in model.items():
        q = next(q for q in questions() if q.grade_id == grade_id)
        assert "**Model answer.**" in text and "**Sources.**" in text, grade_id
        assert f"**Rubric ({q.points} points).**" in text, grade_id
        assert student[grade_id] == "YOUR ANSWER HERE"


@pytest.mark.parametrize("change,message", [
    ("not a solution", "is not a written answer"),
    ("no points", "is not a written answer"),
    ("bad id", "is not a written answer"),
    ("other unit", "Question 5.9 belongs to another unit"),
])
def test_a_malformed_written_question_is_refused(course_copy, change, message):
    path = next(course_copy.glob("03_*.ipynb"))
    notebook = json.loads(path.read_text())
    meta = {"grade": True, "solution": change != "not a solution", "locked": False,
            "points": 0 if change == "no points" else 2, "schema_version": 3,
            "grade_id": {"bad id": "question_9", "other unit": "q5_9_x"}.get(change, "q3_9_x")}
    notebook["cells"].append({"cell_type": "markdown", "source": "answer",
                              "metadata": {"nbgrader": meta}})
    path.write_text(json.dumps(notebook))
    with pytest.raises(ValueError, match=message):
        questions(course_copy)


def test_question_7_1_grades_the_explanation_after_the_runs_not_the_prediction():
    """Issue 59, point 4: the student predicts before the placements' runs (not graded),
    and the graded question, after them, asks for the mechanism: its rubric gives the
    points for the explanation whatever the prediction was (before, it graded whether the
    prediction was right, which rewarded running the cells first)."""
    cells = json.loads((SOLUTIONS / "08_normalization_today.ipynb").read_text())["cells"]
    ids = [c.get("id") for c in cells]
    answer = next(i for i, c in enumerate(cells) if c["metadata"].get("nbgrader", {}).get(
        "grade_id") == "q8_1_placements_at_depth")
    runs = ids.index("u8-place-run")
    predict = "".join(cells[ids.index("u8-q8_1")]["source"])
    assert ids.index("u8-q8_1") < ids.index("u8-q8_1-prediction") < runs < answer
    assert "predict" in predict and "not graded" in predict
    assert "### Question 8.1" in "".join(cells[answer - 1]["source"])
    assert "the prediction before the runs earns no\npoint and costs none" in \
        "".join(cells[answer]["source"])


def test_question_7_1s_explanation_is_read_only_after_its_answer_cell():
    """A review's: the runs' reading explains the mechanism Question 8.1 grades, so in the
    student edition it stands after the answer cell, never before it."""
    from tools.course.exercises import REPO

    cells = json.loads((REPO / "notebooks" / "08_normalization_today.ipynb").read_text())["cells"]
    answer = next(i for i, c in enumerate(cells) if c["metadata"].get("nbgrader", {}).get(
        "grade_id") == "q8_1_placements_at_depth")
    before = "".join("".join(c["source"]) for c in cells[:answer])
    for phrase in ("update stays bounded", "depends heavily on its residual branches",
                   "What the profile does not show"):
        assert phrase not in before, phrase
        assert any(phrase in "".join(c["source"]) for c in cells[answer + 1:]), phrase


def test_normkit_says_nothing_of_the_weight_decay_equilibriums_form():
    """A review's: the docstring the notebook points to gave away the equilibrium's power
    and factor before the student derived them (notebook 04, section 7)."""
    from tools.course.exercises import REPO

    text = (REPO / "normkit" / "network.py").read_text()
    for phrase in ("1/4", "1 / 4", "1 / (4", "factor 2", "(19% off)", "fourth root"):
        assert phrase not in text, phrase


# study time ------------------------------------------------------------------------------


def test_the_readme_gives_each_units_time_by_its_stated_method_and_they_add_up():
    """The README's times are tools/maintainer/study_time.py's, from the notebooks as they
    are: its table, its rates as the text states them, a total that is the sum of the
    units' ranges, and no unit over MOST hours at the high end (a longer one is split)."""
    from tools.maintainer.study_time import MOST, PACE, readme_table, units

    readme = (REPO / "README.md").read_text()
    table = readme_table()
    assert table in readme
    result = subprocess.run([sys.executable, "-m", "tools.maintainer.study_time"], cwd=REPO,
                            capture_output=True, text=True, check=True)
    assert result.stdout.strip() == table
    ranges = [u.hours() for u in units()]
    low, high = sum(r[0] for r in ranges), sum(r[1] for r in ranges)
    assert table.splitlines()[-1] == f"| all | | | | | | {low:g} to {high:g} |"
    assert f"**How long:** {low:g} to {high:g} hours for the course" in readme
    said = " ".join(readme.split("**How long:**")[1].split("\n\n")[0].split())
    for fast, slow in (PACE.words_per_minute[::-1], PACE.minutes_per_point,
                       PACE.minutes_per_question, PACE.minutes_per_cell):
        assert f"{fast:g} to {slow:g}" in said, (fast, slow)
    over = {u.notebook: h for u, h in zip(units(), ranges) if h[1] > MOST}
    assert not over, f"over {MOST} hours at the high end: {over}"


def test_a_unit_is_counted_and_timed_by_the_method():
    """What the method counts in a notebook (words outside model answers, exercises,
    points, questions, the code cells that are not checks) and how its ends round."""
    from tools.maintainer.study_time import Pace, Unit, units

    found = {u.number: u for u in units()}
    first = found[1]
    assert (first.exercises, first.points, first.questions) == (2, 6, 1)
    assert first.cells == sum(1 for c in json.loads(
        (SOLUTIONS / "01_layernorm_forward.ipynb").read_text())["cells"]
        if c["cell_type"] == "code" and not c["metadata"].get("nbgrader", {}).get("grade"))
    pace = Pace(words_per_minute=(60, 30), minutes_per_point=(10, 20),
                minutes_per_question=(0, 0), minutes_per_cell=(0, 0))
    # 600 words: 10 or 20 minutes; 2 points: 20 or 40; to the nearest half hour
    assert Unit(9, "x", 600, 1, 2, 0, 0).hours(pace) == (0.5, 1.0)
    assert Unit(9, "x", 1800, 1, 8, 0, 0).hours(pace) == (2.0, 3.5)  # 110, 220 minutes
    half = Pace(words_per_minute=(60, 30), minutes_per_point=(15, 15),
                minutes_per_question=(0, 0), minutes_per_cell=(0, 0))
    assert Unit(9, "x", 0, 1, 5, 0, 0).hours(half) == (1.5, 1.5)  # 75 minutes: half up
