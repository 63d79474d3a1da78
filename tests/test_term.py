"""A term, as an instructor runs it (tools/instructor/__main__.py's steps): a due date, submissions
on time and late, written answers graded by hand, then resubmissions collected and graded
again without --force (the others left as graded), one student graded again by name, and
feedback, gradebook and grades.csv describing the same run at each step."""

import contextlib
import csv
import html
import io
import re
import shutil
from unittest import mock

import pytest

from tests.synthetic import (
    answer_questions,
    both,
    reference_submission,
    with_files,
    write_submission,
    zip_folder,
)
from tools.course.exercises import exercises, questions
from tools.course.folder import Course
from tools.instructor import cluster, gradebook
from tools.instructor.autograde import autograde
from tools.instructor.build import build_course
from tools.instructor.collect import collect
from tools.instructor.feedback import feedback
from tools.instructor.grades import export
from tools.instructor.release import release

CHECKS = {e.grade_id: e.points for e in exercises() if e.unit == 1}
ANSWERS = [q for q in questions() if q.unit == 1]
DUE = "2026-10-05 23:59 +02:00"  # 21:59 UTC
RIGHT = both(reference_submission(1), answer_questions)


def changed_answer(folder):
    """The right submission, one written answer rewritten (the others as before)."""
    import json
    from pathlib import Path

    RIGHT(folder)
    path = next(Path(folder).glob("[0-9]*.ipynb"))
    nb = json.loads(path.read_text())
    cell = next(c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get(
        "grade_id") == ANSWERS[0].grade_id)
    cell["source"] = "A better answer: the mean's gradient cancels."
    path.write_text(json.dumps(nb))


CASES = {"right": RIGHT, "stubs": with_files(), "changed": changed_answer}


def submit(root, tmp, student, case, when):
    """A zip of the case in the archive, submitted at `when` as the LMS's export beside
    the download says (downloaded/unit1/times.csv: the student's row, replaced)."""
    folder = tmp / "staging" / f"{student}-{when}"
    write_submission(root, "unit1", case, folder, CASES)
    archive = root / "downloaded" / "unit1" / "archive"
    archive.mkdir(parents=True, exist_ok=True)
    zip_folder(folder, archive / f"{student}_unit1_{when[:10]}.zip", enclosing="unit1")
    export = archive.parent / "times.csv"
    times = dict(csv.reader(export.open())) if export.is_file() else {
        "student_id": "submitted_at"}
    times[student] = when.replace(" UTC", "+00:00")
    with export.open("w", newline="") as f:
        csv.writer(f).writerows(times.items())


def step(function, *args, **kwargs):
    """A command's result and what it printed. Each command reads course.json once and
    hands that one Course to every step it calls (issue 61), so that it acts on one plan
    even if make build rewrites the file meanwhile."""
    out, reads, load = io.StringIO(), [], Course.load

    def counted(root):
        reads.append(root)
        return load(root)

    with contextlib.redirect_stdout(out), mock.patch.object(Course, "load", counted):
        result = function(*args, **kwargs)
    assert len(reads) == 1, f"{function.__name__} read course.json {len(reads)} times"
    return result, out.getvalue()


def rows(root):
    export(root, root / "grades.csv")
    return {r["student_id"]: r for r in csv.DictReader((root / "grades.csv").open())}


def scores(root):
    with gradebook.connect(root) as gb:
        return {s.student.id: s.score for s in gb.find_assignment("unit1").submissions}


def feedback_passed(root, student):
    """How many checks the student's feedback page says passed, and its text."""
    page = next((root / "feedback" / student / "unit1").glob("*.html")).read_text()
    text = html.unescape(re.sub(r"<[^>]+>", "", page))
    return len(re.findall(r'<div data-judge="ex[^"]+"[^>]*>The judge: passed', page)), text


def recorded(root):
    """Each submission's grading record: {(assignment, student): (status, digest, when)}."""
    return {k: (g.status, g.digest, g.graded_at) for k, g in gradebook.graded(root).items()}


def agree(root, student):
    """Feedback, gradebook and grades.csv say the same of a student's checks."""
    passed, _ = feedback_passed(root, student)
    with gradebook.connect(root) as gb:
        grades = {g: gb.find_grade(g, e.notebook, "unit1", student).score
                  for e in exercises() if e.unit == 1 for g in [e.grade_id]}
    row = rows(root)[student]
    assert passed == sum(score > 0 for score in grades.values()), student
    assert {g: float(row[g]) for g in CHECKS} == grades, student
    return grades


@pytest.fixture(scope="module")
def workers():
    """The address of a Dask cluster standing for the whole term, as a department's would
    (make autograde SCHEDULER=...): each run of autograde reuses its worker's judge and
    scratch course. One worker process: a term grades a few submissions at a time here,
    and each worker costs seconds of CPU to start (the round trip's cluster has 2, one of
    which it kills)."""
    with cluster.local(1, secure=False) as standing:
        yield standing.scheduler_address


@pytest.fixture(scope="module")
def term(tmp_path_factory, workers):
    tmp = tmp_path_factory.mktemp("term")
    root = build_course(tmp / "course", layout="unit")
    (root / "nbgrader_config_local.py").write_text(f"c.Grading.due = {{'unit1': {DUE!r}}}\n")
    step(release, root, ["unit1"])
    submit(root, tmp, "s1", "right", "2026-10-05 20:00:00 UTC")
    submit(root, tmp, "s2", "stubs", "2026-10-05 21:00:00 UTC")
    submit(root, tmp, "s3", "right", "2026-10-06 09:30:00 UTC")  # 11 h 31 min late
    _, collected = step(collect, root)
    failed, graded = step(autograde, root, scheduler=workers)
    assert failed == 0, graded
    step(feedback, root)
    return root, tmp, collected, graded


def test_the_first_grading_marks_the_late_one_and_agrees_everywhere(term):
    root, _, collected, graded = term
    assert "3 collected (3 new" in collected and "3 submissions to grade" in graded
    # its one worker graded them in the order listed, as printed
    assert re.findall(r"^unit1 (s\d): ", graded, re.MULTILINE) == ["s1", "s2", "s3"], graded
    table = rows(root)
    assert set(table) == {"s1", "s2", "s3"}  # unit1 alone: the other units are not released
    assert [table[s]["late"] for s in ("s1", "s2", "s3")] == ["", "", "11 h 31 min late"]
    assert table["s3"]["submitted_at"] == "2026-10-06 09:30:00"
    assert agree(root, "s1") == agree(root, "s3") == {g: float(p) for g, p in CHECKS.items()}
    assert set(agree(root, "s2").values()) == {0}


def test_a_resubmission_is_graded_again_alone_and_a_changed_answer_waits_again(term, workers):
    root, tmp, _, _ = term
    # s1's answers graded by hand
    with gradebook.connect(root) as gb:
        for q in ANSWERS:
            gb.find_grade(q.grade_id, q.notebook, "unit1", "s1").manual_score = 1
        gb.db.commit()
    assert rows(root)["s1"]["status"] == "graded"
    before = gradebook.graded(root)
    # s1 rewrites one answer; s2 finishes the code; both on time
    submit(root, tmp, "s1", "changed", "2026-10-05 21:30:00 UTC")
    submit(root, tmp, "s2", "right", "2026-10-05 21:45:00 UTC")
    _, collected = step(collect, root)
    assert "3 collected (0 new, 2 replacing an older submission, 1 unchanged)" in collected
    assert rows(root)["s2"]["status"].endswith(
        "; a newer submission, collected since, waits for make autograde")
    _, out = step(autograde, root, scheduler=workers)  # no --force
    assert "2 submissions to grade; 1 unchanged since graded" in out
    after = gradebook.graded(root)
    assert after["unit1", "s3"].graded_at == before["unit1", "s3"].graded_at
    assert after["unit1", "s2"].graded_at > before["unit1", "s2"].graded_at
    step(feedback, root)
    assert set(agree(root, "s2").values()) == set(CHECKS.values()) - {0}
    _, text = feedback_passed(root, "s2")
    assert "The judge: passed" in text and "The judge: failed" not in text  # the new run
    # the changed answer waits for a grader again; the others keep their hand grade
    row = rows(root)["s1"]
    assert row[ANSWERS[0].grade_id] == "" and row["status"].startswith(
        f"graded; answer {ANSWERS[0].number} changed: its hand grade was dropped")
    assert row["status"].endswith("; 1 written answer to grade by hand")
    assert [float(row[q.grade_id]) for q in ANSWERS[1:]] == [1.0] * (len(ANSWERS) - 1)
    # ... and the feedback says so: not yet graded, never "0.0 / 2.0"
    page = next((root / "feedback" / "s1" / "unit1").glob("*.html")).read_text()
    summary = page[page.index('data-judge="summary"'):page.index('class="cell ')]
    waiting = html.unescape(re.sub(r"<[^>]+>", "", summary))
    assert f"{ANSWERS[0].grade_id}:\nnot yet graded ({ANSWERS[0].points:.1f} points)" in waiting
    assert "1 written answer not yet graded" in waiting
    assert page.count("not yet graded (") == 2  # in the list, and over the answer itself


def test_one_student_is_graded_again_by_name(term, workers):
    root, _, _, _ = term
    before = gradebook.graded(root)
    _, out = step(autograde, root, students=["s3"], scheduler=workers)
    assert "1 submission to grade" in out and "unit1 s3:" in out and "unit1 s1:" not in out
    after = gradebook.graded(root)
    assert after["unit1", "s3"].graded_at > before["unit1", "s3"].graded_at
    assert after["unit1", "s1"].graded_at == before["unit1", "s1"].graded_at
    with pytest.raises(SystemExit, match="no submission of nobody"):
        step(autograde, root, students=["nobody"], scheduler=workers)


def test_a_resubmission_collected_while_the_older_is_graded_waits_for_the_next_run(
        term, workers, monkeypatch):
    """autograde reads a submission's files once: its task carries them, their digest and
    their time. A resubmission that lands in the folder while the older files are graded
    does not take their scores: the gradebook records the older files' time and digest,
    and the next run grades the new ones (issue 61). A timestamp.txt that holds no time
    is refused by name, before anything is graded."""
    from tools.instructor import autograde as steps

    root, tmp, _, _ = term
    folder = root / "submitted" / "s3" / "unit1"
    kept = tmp / "s3-as-graded"
    shutil.copytree(folder, kept)
    saved = steps.save

    def resubmitted_meanwhile(*args):
        (folder / "timestamp.txt").write_text("2026-10-05 21:50:00 UTC\n")  # on time
        with (folder / "normlib" / "layer_norm.py").open("a") as f:
            f.write("# resubmitted\n")
        return saved(*args)

    monkeypatch.setattr(steps, "save", resubmitted_meanwhile)
    failed, out = step(autograde, root, students=["s3"], scheduler=workers)
    assert failed == 0 and "unit1 s3: " in out, out
    row = rows(root)["s3"]
    assert (row["submitted_at"], row["late"]) == ("2026-10-06 09:30:00", "11 h 31 min late")
    assert "; a newer submission, collected since, waits for make autograde" in row["status"]
    assert gradebook.graded(root)["unit1", "s3"].digest == gradebook.digest(kept)
    assert steps.pending(root, Course.load(root), ["unit1"]) == ({"unit1": ["s3"]}, 2)
    monkeypatch.setattr(steps, "save", saved)
    # a timestamp.txt an instructor's hand broke
    (folder / "timestamp.txt").write_text("yesterday")
    before = recorded(root)
    failed, out = step(autograde, root, students=["s3"], scheduler=workers)
    assert failed == 1 and re.search(r"^unit1 s3: NOT GRADED \(its timestamp.txt holds no "
                                     r"time \(Invalid isoformat string: 'yesterday'\)\)$", out,
                                     re.MULTILINE), out
    assert recorded(root) == before
    shutil.rmtree(folder)  # (as graded, for the tests below)
    shutil.copytree(kept, folder)


def test_a_worker_without_bubblewrap_grades_nothing_and_nothing_is_lost(term):
    """A cluster's worker whose machine has no bubblewrap (here: none on its PATH) refuses
    its task, naming itself; the submission is NOT GRADED, the gradebook keeps what it had,
    and autograde counts it. A scheduler's cluster never grades without the sandbox."""
    root, _, _, _ = term
    before = recorded(root)
    with cluster.local(1, env={"PATH": "/nonexistent"}, secure=False) as refusing:
        failed, out = step(autograde, root, students=["s3"],
                           scheduler=refusing.scheduler_address)
        with pytest.raises(SystemExit, match="--no-sandbox grades on this machine only"):
            step(autograde, root, sandboxed=False, scheduler=refusing.scheduler_address)
    assert failed == 1
    assert re.search(r"unit1 s3: NOT GRADED \(Refused: the worker \S+:\d+ grades nothing "
                     r"without the OS sandbox: Install bubblewrap", out), out
    assert "1 not graded (above), left for the next make autograde" in out
    assert recorded(root) == before


def test_grades_csv_honours_the_assignments_asked_for(term):
    root, _, _, _ = term
    step(export, root, root / "some.csv", ["unit1"])
    assert {r["assignment"] for r in csv.DictReader((root / "some.csv").open())} == {"unit1"}
    step(release, root, ["unit2"])  # released, nobody has submitted yet: missing
    export(root, root / "grades.csv")
    table = list(csv.DictReader((root / "grades.csv").open()))
    assert {(r["assignment"], r["status"]) for r in table if r["assignment"] == "unit2"} == \
        {("unit2", "missing")}
    step(export, root, root / "one.csv", ["unit1"])
    assert {r["assignment"] for r in csv.DictReader((root / "one.csv").open())} == {"unit1"}


def test_the_rubric_page_shows_graders_each_question_and_stays_in_the_course(term):
    from tools.instructor.rubric import rubric

    root, _, _, _ = term
    step(rubric, root)
    page = (root / "rubric.html").read_text()
    for q in questions():
        assert f"id='{q.grade_id}'" in page and f"Question {q.number} ({q.points} points)" in page
    assert page.count("Model answer.") == page.count("Rubric (") == len(questions())
    assert "BEGIN SOLUTION" not in page and "<script" not in page
    shared = [p for d in ("release", "feedback", "feedback_zips") for p in (root / d).rglob("*")]
    assert shared and not [p for p in shared if "rubric" in p.name]
