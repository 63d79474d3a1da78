"""The instructor's pipeline end to end (tools/instructor/__main__.py) on the synthetic class
of tests/synthetic.py: build (one assignment per unit), release, collect from LMS zips,
autograde (the judge grades every check, the student's code in a sandboxed runner), feedback
and the CSV, with every score checked.

Graded as a large course grades: the gradebook on a PostgreSQL server (tests/postgres.py),
on a Dask cluster of 2 workers, one killed by its process id while it grades (each
submission is written once). The cases whose notebooks matter are then graded with
--execute. A second course (SQLite, a local cluster, judge-only) grades COMPARED: the same
grades, cell for cell. Limits come from nbgrader_config_local.py, as an instructor sets
them (one right submission needs 8192 MiB: tests/test_limits.py). Each hardening case (a
loop, a forger, a leaker, an escaper, ...) is one submission in the same run: the honest
students keep their scores, the others get what their code deserves (docs/instructors.md,
"What grading guarantees, and by what").
"""

import contextlib
import csv
import html
import io
import json
import os
import re
import signal
import tempfile
import threading
import time
import zipfile
from pathlib import Path

import pytest

from normkit.checks import namespace
from tests.conftest import exercise_param, processes_naming
from tests.synthetic import CASES, LEAK_LAST, leak_record, zip_class
from tools.course.exercises import SOLUTIONS, by_number, exercises, notebooks, questions, unit
from tools.course.folder import Course
from tools.course.leaks import secret_lines
from tools.course.markers import BEGIN_HIDDEN, fold_hidden, has_marker, split_check
from tools.course.settings import gradebook_url
from tools.instructor import cluster, gradebook
from tools.instructor.autograde import autograde
from tools.instructor.build import build_course
from tools.instructor.collect import collect, read_collected
from tools.instructor.feedback import feedback
from tools.instructor.grades import export
from tools.instructor.release import release
from tools.judge.client import graded_folder
from tools.worker.execute import SKIPPED
from tools.worker.execute import TAG as SKIP_TAG

TIMEOUT = 10  # seconds per check here (30 by default), from the course's config: the loop case
# waits it out in the PostgreSQL course, while a grading process sits idle (20 s made the
# judge-only passes take 12 s and 8 s longer). A right submission's longest check (2.5's) took 1.9 s
# beside the other tests on a 2-core AMD EPYC, and 5.8 s with this file, test_machines.py
# and test_browser.py all on one of its cores (a machine half as fast); a worker's start
# has a limit of its own (startup_timeout)
EXECUTE_TIMEOUT = 20  # per cell with --execute, given on the command line: a loaded 2-core
# machine took over 10 s for a kernel's first cell (importing torch and matplotlib)
MEMORY_MB = 8192  # per grading process here (4096 by default): the "big" case needs it
JOBS = 2  # grading processes of the local cluster: as many as the 2 cores (each costs seconds
# of CPU to start, which a third, filling the time they wait, did not repay beside the other
# tests; one alone sat out the loop's 20 s while the machine idled)
UNITS = [f"unit{unit(path)}" for path in notebooks()]  # the unit layout's assignments
POINTS = {a: {e.grade_id: e.points for e in exercises() if f"unit{e.unit}" == a} for a in UNITS}
NOTEBOOK = {e.grade_id: e.notebook for e in exercises()}
# the written answers of each assignment, graded by hand: {grade_id: points}
WRITTEN = {a: {q.grade_id: q.points for q in questions() if f"unit{q.unit}" == a} for a in UNITS}


def scores(assignment, *zeroed):
    """Full points for the assignment, but 0 for the exercises named ("3.4")."""
    points = dict(POINTS[assignment])
    for number in zeroed:
        points[by_number()[number].grade_id] = 0
    return points


def nothing(assignment):
    return dict.fromkeys(POINTS[assignment], 0)


EXPECTED = {  # (assignment, student) -> {grade_id: points}, after the clean re-check
    ("unit1", "reference"): scores("unit1"),
    ("unit1", "stubs"): nothing("unit1"),
    ("unit1", "tampered"): nothing("unit1"),  # eps outside the sqrt; cells restored
    ("unit1", "deleted"): scores("unit1"),  # the deleted check is put back, and passes
    ("unit1", "loop"): scores("unit1", "1.2"),
    ("unit1", "memory"): scores("unit1", "1.2"),
    ("unit1", "exits"): scores("unit1", "1.2"),
    ("unit1", "osexit"): scores("unit1", "1.2"),
    ("unit1", "renamed"): scores("unit1", "1.2"),  # layer_norm_forward renamed
    # right code that tries to leak the hidden tests into its feedback (and the hidden
    # cases' values, raised from its worker: costing it 1.2), and to escape
    ("unit1", "leaker"): scores("unit1", "1.2"),
    ("unit1", "escaper"): scores("unit1"),
    # wrong code that forges its verdicts and disarms NumPy's private comparison
    ("unit1", "forger"): nothing("unit1"),
    # right code; a notebook nbgrader cannot run whole, or at all: the judge grades the files
    ("unit1", "duplicated"): scores("unit1"),
    ("unit1", "renamed-notebook"): scores("unit1"),
    ("unit1", "truncated"): scores("unit1"),
    ("unit2", "reference"): scores("unit2"),
    # the autograd Function (2.5) runs the wrong backward (2.2) too; 2.1, 2.3 and 2.4 are right
    ("unit2", "wrong-backward"): scores("unit2", "2.2", "2.5"),
    # eps outside the sqrt breaks 2.5's forward; the patched check passed it in the
    # notebook, the judge did not
    ("unit2", "tampered"): scores("unit2", "2.5"),
    ("unit2", "killed"): scores("unit2", "2.5"),
    ("unit2", "missing"): scores("unit2", "2.5"),  # no nn.py
    ("unit2", "big"): scores("unit2"),  # within the memory the local config raised
    ("unit3", "reference"): scores("unit3"),
    ("unit3", "broken"): scores("unit3", "3.5"),  # syntax error in instance_norm.py
    # group_norm.py is wrong and disarms numpy's assert_allclose: in the notebook every
    # check from 3.4 on was void; the judge's numpy is out of its reach, so only 3.4 fails
    ("unit3", "patcher"): scores("unit3", "3.4"),
    ("unit4", "reference"): scores("unit4"),
    ("unit5", "reference"): scores("unit5"),
    ("unit5", "stubs"): nothing("unit5"),
    # the reference but a one-pass welford
    ("unit6", "mixed"): scores("unit6", "6.1"),
    # the reference but the naive backward under the fast name (right values, 4x the
    # memory): the fast forward passes the memory check inside the sandbox
    ("unit7", "mixed"): scores("unit7", "7.2"),
    ("unit8", "reference"): scores("unit8"),
    ("unit9", "reference"): scores("unit9"),
}
# the submissions whose status says more than "graded", and what
STATUS = {
    ("unit1", "renamed-notebook"): "graded; 01_layernorm_forward-Copy1.ipynb graded as "
                                   "01_layernorm_forward.ipynb",
    ("unit1", "truncated"): "graded; 01_layernorm_forward.ipynb: not a readable notebook "
                            "(NotJSONError: Notebook does not appear to be JSON; file ",
    ("unit2", "missing"): "graded; missing normlib/nn.py",
    ("unit1", "duplicated"): "graded; 01_layernorm_forward.ipynb: a graded cell appears twice "
                             "(ex1_1_layer_norm_stats): the later copy is read as an ordinary "
                             "cell",
}
# the cases graded with --execute in the PostgreSQL course (those whose notebooks or kernels
# matter; the loop's, which would wait out every cell that calls it, is
# tests/test_preprocessors.py's); the others are graded there judge-only, first
EXECUTED = {
    "unit1": ["reference", "stubs", "tampered", "osexit", "leaker", "escaper", "forger"],
    "unit2": ["reference"],
    "unit3": ["reference"],
    "unit4": ["reference"],
    "unit5": ["reference", "stubs"],
    "unit6": ["mixed"],
    "unit7": ["mixed"],
    "unit8": ["reference"],
    "unit9": ["reference"],
}


# the cases the SQLite course grades, judge-only, beside the PostgreSQL course's grades: those
# graded there with --execute (judge-only here: the same scores, comments and statuses) and
# those whose status says more than "graded"; every assignment among them. The others are
# graded judge-only in both courses, by the same code: they would compare the gradebooks'
# servers again, at 17 s of CPU
COMPARED = sorted({(a, s) for a, students in EXECUTED.items() for s in students} | set(STATUS))


def test_expectations_cover_every_case():
    assert set(EXPECTED) == {(a, s) for a, cases in CASES.items() for s in cases}
    assert set(COMPARED) <= set(EXPECTED) and {a for a, _ in COMPARED} == set(UNITS)


LMS_NAMES = {"escaper": "Escaper_1234567_assignsubmission_file_.zip",  # Moodle
             "leaker": "leaker_LATE_12345_67890_unit1.zip"}  # Canvas


def grade_class(tmp, executed=None, db_url=None, scheduler=None, cases=None):
    """The synthetic class (or its cases listed: [(assignment, student)]) in a course graded
    as an instructor grades it: (its root, what the steps printed). Its gradebook is SQLite
    in the course folder, or the db_url its local config names. It is graded on the
    scheduler's cluster, or, without one, by a local cluster (autograde's default):
    judge-only, but for the cases of executed ({assignment: [student]}), graded after the
    others with --execute, as a plain re-run grades what is new."""
    root = build_course(tmp / "course", layout="unit")
    (root / "nbgrader_config_local.py").write_text(
        f"c.Grading.timeout = {TIMEOUT}\nc.Grading.memory_mb = {MEMORY_MB}\n" +
        (f"c.CourseDirectory.db_url = {db_url!r}\n" if db_url else ""))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        release(root)
        for assignment, students in CASES.items():  # each case's student id is its name
            zip_class(root, assignment, {case: case for case in students
                                         if cases is None or (assignment, case) in cases},
                      tmp / "staging")
        # as an LMS names them: Moodle's (the student id is the name), Canvas's; and an
        # upload cut short, which is rejected with its reason
        archive = root / "downloaded" / "unit1" / "archive"
        for case, name in LMS_NAMES.items():
            (archive / f"{case}_unit1.zip").rename(archive / name)
        (archive / "Eve Upload_999_assignsubmission_file_.zip").write_bytes(b"PK\x03\x04 cut")
        collect(root)
        if executed is None:
            failed = autograde(root, jobs=JOBS, scheduler=scheduler)
        else:
            apart = {s for students in executed.values() for s in students}
            failed = autograde(root, jobs=JOBS, scheduler=scheduler, students=sorted(
                {s for students in CASES.values() for s in students} - apart))
            failed += autograde(root, jobs=JOBS, scheduler=scheduler, execute=True,
                                timeout=EXECUTE_TIMEOUT)  # (what is new: executed)
        feedback(root)
        export(root, root / "grades.csv")
    assert failed == 0, out.getvalue()
    assert f"{TIMEOUT} s per check, {MEMORY_MB} MiB per process" in out.getvalue()
    assert (f"{EXECUTE_TIMEOUT} s per check" in out.getvalue()) == (executed is not None)
    return root, out.getvalue()


def executing(dask_worker):
    """The keys of the tasks a Dask worker is running (for Client.run)."""
    return [str(task.key) for task in dask_worker.state.executing]


class KillOne(threading.Thread):
    """Kills one worker process of the cluster at scheduler, by its own process id, once it
    has been running a grading task for KILL_AFTER seconds (the judge has started): once,
    and only within KILL_WITHIN seconds. killed: (pid, the task's key), or None."""

    def __init__(self, scheduler):
        super().__init__(daemon=True)
        self.scheduler, self.killed, self.done = scheduler, None, threading.Event()

    def run(self):
        from distributed import Client

        with Client(self.scheduler) as dask:
            pids = dask.run(os.getpid)  # {worker's address: its process id}
            deadline = time.monotonic() + KILL_WITHIN
            while self.killed is None and not self.done.is_set() and \
                    time.monotonic() < deadline:
                for address, keys in dask.run(executing).items():
                    if any(k.startswith("grade-") for k in keys):
                        time.sleep(KILL_AFTER)
                        now = dask.run(executing, workers=[address]).get(address, [])
                        if set(keys) & set(now):  # still grading it: mid-task
                            os.kill(pids[address], signal.SIGKILL)
                            self.killed = (pids[address], next(iter(set(keys) & set(now))))
                        break
                time.sleep(0.2)


KILL_AFTER, KILL_WITHIN = 1, 120  # seconds


# the secrets of a grading host: in the environment of the head (and so of the Dask
# workers it starts) and in the gradebook's URL (the test server trusts any password)
SECRET = "PLANTED-SECRET-roundtrip-7d4c1b"
SECRETS = {"PGPASSWORD": SECRET, "AWS_SECRET_ACCESS_KEY": SECRET}


@pytest.fixture(scope="module")
def graded(tmp_path_factory, postgres):
    """The class on a PostgreSQL gradebook (a real server, tests/postgres.py), graded by a
    cluster of 2 worker processes (autograde's SCHEDULER), one of which is killed
    mid-task: judge-only, then the cases whose notebooks matter with --execute (EXECUTED):
    (root, output, the KillOne). The head's environment and the gradebook's URL hold
    SECRET while it grades."""
    url = postgres.database("roundtrip").replace("postgres@", f"postgres:{SECRET}@", 1)
    saved = {name: os.environ.get(name) for name in SECRETS}
    os.environ.update(SECRETS)
    try:
        yield _graded(tmp_path_factory, url)
    finally:
        for name, value in saved.items():
            os.environ.pop(name) if value is None else os.environ.__setitem__(name, value)


def _graded(tmp_path_factory, url):
    with cluster.local(2, secure=False) as workers:
        killer = KillOne(workers.scheduler_address)
        killer.start()
        try:
            root, out = grade_class(tmp_path_factory.mktemp("pipeline"), EXECUTED,
                                    db_url=url, scheduler=workers.scheduler_address)
        finally:
            killer.done.set()
            killer.join()
    return root, out, killer


@pytest.fixture(scope="module")
def sqlite(tmp_path_factory):
    """The cases COMPARED on SQLite (the default), graded judge-only by a local cluster (no
    scheduler): (root, output)."""
    return grade_class(tmp_path_factory.mktemp("sqlite"), cases=COMPARED)


def test_a_worker_killed_mid_task_loses_nothing_and_nothing_is_written_twice(graded):
    """One of the 2 workers was killed while it graded a submission: that task ran again,
    every submission was written to the gradebook once (one line each, printed as it is
    written), with its expected scores (test_every_check_scores_as_expected), and the
    killed process is gone."""
    root, out, killer = graded
    assert killer.killed is not None, "no worker was killed: no task ran long enough"
    pid, key = killer.killed
    written = re.findall(r"^(unit\d) (\S+): [\d.]+ / [\d.]+ \(", out, re.MULTILINE)
    assert sorted(written) == sorted(EXPECTED)  # each exactly once
    assert not Path(f"/proc/{pid}").exists()
    [(assignment, student)] = [(a, s) for a, s in EXPECTED
                               if re.fullmatch(rf"grade-{a}-{s}-[0-9a-f]{{12}}-[0-9a-f]{{8}}", key)]
    with gradebook.connect(root) as gb:
        grades = {g.name: g.score for nb in gb.find_submission(assignment, student).notebooks
                  for g in nb.grades if g.name in EXPECTED[assignment, student]}
    assert grades == EXPECTED[assignment, student]
    assert gradebook_url(root).startswith("postgresql://")


def test_every_zip_is_collected_or_rejected_with_its_reason(graded):
    """The class's zips: flat, in a folder, two folders deep (tests/synthetic.zip_class),
    two named by an LMS, and one cut short: every one accounted for."""
    root, log, _ = graded
    students = sum(1 for a, s in EXPECTED if a == "unit1")
    assert f"collected unit1: {students + 1} entries in archive/, {students} collected " \
           f"({students} new, 0 replacing an older submission, 0 unchanged), 1 rejected" in log
    assert "REJECTED Eve Upload_999_assignsubmission_file_.zip: not a readable zip " \
           "(BadZipFile" in log
    assert (root / "downloaded/unit1/rejected/Eve Upload_999_assignsubmission_file_.zip").is_file()
    provenance = read_collected(root, "unit1")  # graded as their own ids (EXPECTED: scores)
    assert {case: provenance[case]["lms"] for case in LMS_NAMES} == {"escaper": "moodle",
                                                                      "leaker": "canvas"}
    # no LMS date in these downloads (no worksheet beside them): collect says so
    assert f"TIMES UNKNOWN for {students} of {students}" in log
    assert not list((root / "submitted").rglob("timestamp.txt"))


def test_postgresql_and_sqlite_give_the_same_grades_cell_for_cell(graded, sqlite):
    """The class graded twice: on PostgreSQL by the scheduler's cluster (a worker killed),
    judge-only but for EXECUTED, graded with --execute; and its cases COMPARED on SQLite by
    a local cluster, judge-only. Every graded cell's scores, every comment and every status
    are the same, cell for cell, and SQLite's course graded those alone."""
    found = {}
    for (root, *_), name in ((graded, "postgresql"), (sqlite, "sqlite")):
        statuses = gradebook.graded(root)
        with gradebook.connect(root) as gb:
            for assignment, student in COMPARED:
                submission = gb.find_submission(assignment, student)
                found.setdefault(name, {})[assignment, student] = (
                    sorted((nb.name, g.name, g.auto_score, g.manual_score,
                            g.needs_manual_grade) for nb in submission.notebooks
                           for g in nb.grades),
                    sorted((nb.name, c.name, c.auto_comment) for nb in submission.notebooks
                           for c in nb.comments),
                    statuses[assignment, student].status)
    assert found["postgresql"] == found["sqlite"]
    assert gradebook_url(graded[0]).startswith("postgresql://")
    assert gradebook_url(sqlite[0]).startswith("sqlite:///")
    assert sorted(gradebook.graded(sqlite[0])) == COMPARED
    assert len(COMPARED) >= 18 and sum(map(len, EXECUTED.values())) >= 12


@pytest.mark.parametrize("number", [exercise_param(n) for n in by_number()])
def test_every_check_scores_as_expected(graded, number):
    root, *_ = graded
    grade_id = by_number()[number].grade_id
    cases = [(a, s) for (a, s), expected in EXPECTED.items() if grade_id in expected]
    assert cases, f"no synthetic submission of Exercise {number}'s unit"
    with gradebook.connect(root) as gb:
        for assignment, student in cases:
            expected = EXPECTED[assignment, student]
            grade = gb.find_grade(grade_id, NOTEBOOK[grade_id], assignment, student)
            assert grade.max_score == POINTS[assignment][grade_id]
            assert grade.score == expected[grade_id], f"{assignment} {student} {grade_id}: " \
                f"{grade.score} != {expected[grade_id]}"


def test_the_judges_score_is_the_grade_whatever_the_notebook_holds(graded):
    """Each check's auto score is the judge's, none set by hand. The forger's notebook, as
    submitted, holds check cells whose outputs and metadata say they passed: they score 0."""
    root, *_ = graded
    with gradebook.connect(root) as gb:
        for (assignment, student), expected in EXPECTED.items():
            for g in expected:
                grade = gb.find_grade(g, NOTEBOOK[g], assignment, student)
                assert (grade.auto_score, grade.manual_score) == (expected[g], None), student
    submitted = json.loads(next((root / "submitted" / "forger" / "unit1").glob(
        "[0-9]*.ipynb")).read_text())
    forged = [c for c in submitted["cells"] if c["metadata"].get("judge")
              and c["metadata"]["nbgrader"].get("grade")]
    assert len(forged) == len(POINTS["unit1"]) and all(c["outputs"] for c in forged)
    cells = json.loads(autograded(root, "unit1", "forger").read_text())["cells"]
    assert [c["metadata"]["judge"]["passed"] for c in cells if c["metadata"].get("judge")] \
        == [False] * len(POINTS["unit1"])


def test_each_check_in_the_feedback_says_the_judges_verdict(graded):
    root, *_ = graded
    text = feedback_text(root, "unit3", "patcher")
    assert re.search(r"The judge: failed \(0 / 3\): CheckFailed: .*: \d+ of \d+ values are wrong",
                     text), text
    # each verdict twice: in the list at the top, and under its check
    assert text.count("The judge: passed, with the hidden tests") == 2 * (
        len(POINTS["unit3"]) - 1)
    assert feedback_text(root, "unit1", "reference").count("The judge: passed") == 4
    # a check that fails with the exercise it builds on says so (eps outside the sqrt: 1.1)
    assert "It needs Exercise 1.1 (layer_norm_stats), which fails: fix that first" in \
        feedback_text(root, "unit1", "tampered")


def test_grades_csv_has_a_row_per_student_and_assignment_with_each_check(graded):
    root, *_ = graded
    rows = {(r["assignment"], r["student_id"]): r for r in csv.DictReader(
        (root / "grades.csv").open())}
    students = {s for _, s in EXPECTED}
    assert set(rows) == {(a, s) for a in UNITS for s in students}
    for (assignment, student), row in rows.items():
        expected = EXPECTED.get((assignment, student))
        assert float(row["max_score"]) == sum(POINTS[assignment].values()) + sum(
            WRITTEN[assignment].values())
        if expected is None:  # this student submitted no work for the assignment
            assert (row["submitted"], row["status"], float(row["score"])) == ("no", "missing", 0)
            continue
        assert row["submitted"] == "yes"
        assert row["status"].startswith(STATUS.get((assignment, student), "graded")), row
        # no LMS date: no time, and none late but by Canvas's marker (the leaker's name)
        assert row["submitted_at"] == "" and row["late"] == (
            "late by Canvas's _LATE marker; no time" if student == "leaker" else "time unknown")
        assert float(row["score"]) == sum(expected.values())
        for other, points in POINTS.items():  # per-check points; blank for other units'
            for g in points:
                want = expected[g] if other == assignment else None
                assert (float(row[g]) if row[g] else None) == want, (student, g)
        assert row["overridden"] == ""  # no score was set by hand
        # the reference students (and the renamed notebook's) answered the written
        # questions: blank until a grader scores them, never 0, and the status says so;
        # the others left them as released ("YOUR ANSWER HERE"), which nbgrader scores 0,
        # or sent a notebook that cannot be read, whose answers score 0 (a grader may
        # change that): none waits
        waiting = sum(row[q] == "" for q in WRITTEN[assignment])
        answered = student in ("reference", "renamed-notebook")
        assert waiting == (len(WRITTEN[assignment]) if answered else 0), row
        assert all(row[q] in ("", "0.0") for q in WRITTEN[assignment]), row
        if waiting:
            assert row["status"].endswith(f"; {waiting} written answer{'s' * (waiting > 1)} "
                                          "to grade by hand"), row["status"]
        else:
            assert "by hand" not in row["status"], row["status"]


def test_a_written_answer_graded_by_hand_reaches_the_csv(graded, tmp_path):
    """Autograde leaves each written answer to a grader (formgrader lists the submission as
    needing manual grading); a score set by hand, here through the gradebook API as
    formgrader sets it, is the answer's points in the CSV and counts in the total."""
    root, *_ = graded
    written = WRITTEN["unit2"]  # {grade_id: points}: unit 2 has two
    assert len(written) == 2
    notebook = next(q.notebook for q in questions() if q.grade_id in written)
    with gradebook.connect(root) as gb:
        submission = gb.find_submission("unit2", "reference")
        assert submission.needs_manual_grade
        for grade_id, points in written.items():
            grade = gb.find_grade(grade_id, notebook, "unit2", "reference")
            assert grade.needs_manual_grade
            assert (grade.auto_score, grade.manual_score, grade.max_score) == (None, None, points)
            grade.manual_score = 1.5
        gb.db.commit()
    try:
        export(root, tmp_path / "grades.csv")
    finally:
        with gradebook.connect(root) as gb:
            for grade_id in written:
                gb.find_grade(grade_id, notebook, "unit2", "reference").manual_score = None
            gb.db.commit()
    rows = {(r["assignment"], r["student_id"]): r for r in csv.DictReader(
        (tmp_path / "grades.csv").open())}
    row = rows["unit2", "reference"]
    assert all(float(row[grade_id]) == 1.5 for grade_id in written) and row["overridden"] == ""
    assert float(row["score"]) == sum(EXPECTED["unit2", "reference"].values()) + 1.5 * 2
    assert row["status"] == "graded", row["status"]  # nothing left to grade by hand
    assert rows["unit3", "reference"]["status"].endswith("to grade by hand")  # still waits


def cell(path, grade_id):
    cells = json.loads(Path(path).read_text())["cells"]
    return next(c for c in cells if c["metadata"].get("nbgrader", {}).get("grade_id") == grade_id)


def autograded(root, assignment, student):
    return next((root / "autograded" / student / assignment).glob("[0-9]*.ipynb"))


def test_no_cell_but_a_check_fails_at_grading(graded):
    # cells tagged skip-at-grading are emptied at grading: a cell that uses what one of
    # them defines would fail in every student's feedback. Each unit's reference (unit6's
    # and unit7's one submission each, right but for one check): no error outside the check cells and the
    # NotImplementedError of a "your turn" function the submission left unwritten (a
    # demonstration of torch's refusals prints its one line: tests/test_run_all.py).
    root, *_ = graded
    for assignment in UNITS:
        student = "reference" if (assignment, "reference") in EXPECTED else "mixed"
        path = autograded(root, assignment, student)
        cells = json.loads(path.read_text())["cells"]
        errors = [(c.get("id"), o["ename"]) for c in cells for o in c.get("outputs", [])
                  if o["output_type"] == "error" and o["ename"] != "NotImplementedError"
                  and not c["metadata"].get("nbgrader", {}).get("grade")]
        assert errors == [], f"{assignment}, {student}: errors in cells {errors}"


def test_unfinished_work_says_so_and_run_all_would_go_on(graded):
    # the stub submissions, as graded: every error is a stub's,
    # shown as one line saying which exercise is not yet implemented (normkit.notebook, the
    # course's copy), in a cell tagged raises-exception (JupyterLab's Run All goes on past it)
    root, *_ = graded
    for assignment in ("unit1", "unit5"):
        path = autograded(root, assignment, "stubs")
        cells = json.loads(path.read_text())["cells"]
        failed = [c for c in cells
                  if any(o["output_type"] == "error" for o in c.get("outputs", []))]
        assert len(failed) >= 3, assignment
        for c in failed:
            (error,) = [o for o in c["outputs"] if o["output_type"] == "error"]
            assert error["ename"] == "NotImplementedError", (assignment, c["id"], error)
            assert len(error["traceback"]) == 1 and "is not yet implemented" in \
                error["traceback"][0], (assignment, c["id"], error["traceback"])
            assert "raises-exception" in c["metadata"].get("tags", []), (assignment, c["id"])


def test_edited_and_deleted_check_cells_run_as_the_course_wrote_them(graded):
    # with their visible tests alone: the hidden tests never reach the student's kernel
    root, *_ = graded
    source = next(SOLUTIONS.glob("01_*.ipynb"))
    for student in ("tampered", "deleted"):
        restored = "".join(cell(autograded(root, "unit1", student), "ex1_1_layer_norm_stats")
                           ["source"])
        written = "".join(cell(source, "ex1_1_layer_norm_stats")["source"])
        assert BEGIN_HIDDEN in written and BEGIN_HIDDEN not in restored
        assert restored.endswith(fold_hidden(written))


ERRORS = {  # (assignment, student, check) -> what the kernel said, with --execute (the
    # kernel's restarts are tests/test_preprocessors.py's)
    ("unit1", "osexit", "ex1_2_layer_norm_forward"): "DeadKernelError: the kernel died",
}
VERDICTS = {  # (assignment, student, check) -> what the judge's verdict says
    ("unit1", "loop", "ex1_2_layer_norm_forward"): f"ran over the {TIMEOUT} s limit",
    ("unit1", "memory", "ex1_2_layer_norm_forward"): "MemoryError raised by the submission's code",
    ("unit1", "exits", "ex1_2_layer_norm_forward"): "an exception of its own class raised by "
                                                    "the submission's code",
    ("unit1", "osexit", "ex1_2_layer_norm_forward"): "the submission's code ended its process",
    ("unit2", "killed", "ex2_5_layer_norm_function"): "the submission's code ended its process",
    ("unit3", "broken", "ex3_5_instance_norm_forward"): "SyntaxError raised by the "
                                                        "submission's code",
    ("unit2", "missing", "ex2_5_layer_norm_function"): "ModuleNotFoundError raised by the "
                                                       "submission's code",
    ("unit1", "renamed", "ex1_2_layer_norm_forward"): "ImportError at the check's case "
                                                      "normkit/checks/unit1.py:",
}


def feedback_text(root, assignment, student):
    page = next((root / "feedback" / student / assignment).glob("[0-9]*.html"))
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text()))  # what a reader sees


def test_each_hardening_case_says_what_happened_in_its_verdict(graded):
    root, *_ = graded
    for (assignment, student, grade_id), message in VERDICTS.items():
        verdict = cell(autograded(root, assignment, student), grade_id)["metadata"]["judge"]
        assert not verdict["passed"] and message in verdict["verdict"], (student, verdict)
        assert message in feedback_text(root, assignment, student), student


def test_each_hardening_case_says_what_happened_in_its_cell_with_execute(graded):
    root, *_ = graded
    for (assignment, student, grade_id), message in ERRORS.items():
        errors = [f"{o['ename']}: {o['evalue']}" for o in
                  cell(autograded(root, assignment, student), grade_id)["outputs"]
                  if o["output_type"] == "error"]
        assert any(e.startswith(message) for e in errors), (student, errors)
        assert message in feedback_text(root, assignment, student), student


def test_release_has_no_solution_and_student_files_are_graded(graded):
    root, *_ = graded
    for path in (root / "release").rglob("*"):
        if path.is_file():
            assert not has_marker(path.read_text(errors="ignore")), path
    # what autograde ran (--execute: the notebook in the sandboxed kernel) is the student's
    # file, not the course's reference
    errors = [(o["ename"], o["evalue"] + "".join(o["traceback"]))
              for o in cell(autograded(root, "unit1", "stubs"), "ex1_1_layer_norm_stats")[
                  "outputs"] if o["output_type"] == "error"]
    assert [name for name, text in errors if "Exercise 1.1" in text] == \
        ["NotImplementedError"], errors
    # ... and only the notebooks came back from the workers (issue 61)
    assert {p.suffix for p in (root / "autograded").rglob("*") if p.is_file()} == {".ipynb"}


def test_experiments_are_skipped_at_grading_and_checks_never(graded):
    """Cells tagged skip-at-grading (Unit 4's training sweep, Unit 5's training runs) were
    not run at autograde; the check cells were, including the one the tampered submission
    tagged (it scores 0)."""
    root, *_ = graded
    for assignment in ("unit4", "unit5"):
        source = next(SOLUTIONS.glob(f"0{assignment[-1]}_*.ipynb"))
        tagged = [i for i, c in enumerate(json.loads(source.read_text())["cells"])
                  if SKIP_TAG in c["metadata"].get("tags", [])]
        assert tagged, f"the training experiments of {assignment} are tagged skip-at-grading"
        cells = json.loads(autograded(root, assignment, "reference").read_text())["cells"]
        for i in tagged:
            assert "".join(cells[i]["source"]) == SKIPPED and not cells[i]["outputs"]
    checks = [c for c in cells if c["cell_type"] == "code"
              and c["metadata"].get("nbgrader", {}).get("grade")]
    assert checks and all(c["outputs"] for c in checks)
    assert cell(autograded(root, "unit1", "tampered"), "ex1_2_layer_norm_forward")["outputs"]


def hidden_only_lines(grade_id):
    """The lines of a check's hidden-test block that are secret (tools.maintainer.edition's
    secret_lines: not an import, nor a line that stands outside the blocks too)."""
    source = "".join(cell(next(SOLUTIONS.glob("02_*.ipynb")), grade_id)["source"])
    _, hidden = split_check(source)
    return {line.strip() for line in hidden.splitlines()} & secret_lines()


def test_feedback_says_what_failed_without_the_hidden_tests(graded):
    root, *_ = graded
    text = feedback_text(root, "unit2", "wrong-backward")
    assert 'check("2.2")' in text  # the visible check is shown
    assert "dx for x (2, 4) float32" in text and "values are wrong" in text  # and why,
    assert re.search(r"The case: normkit/checks/unit2\.py:\d+: check_backward\(x, \(4,\)\)",
                     text)  # and which of its cases
    assert "lines of hidden tests, not shown" in text
    hidden = hidden_only_lines("ex2_2_layer_norm_backward")
    assert len(hidden) > 10
    assert not [line for line in hidden if line in text]


def test_no_feedback_page_shows_a_hidden_test_or_solution_line(graded):
    root, *_ = graded
    secret = secret_lines()
    pages = sorted((root / "feedback").rglob("*.html"))
    assert len(pages) == len(EXPECTED)  # (the truncated notebook's: its stand-in's)
    # the notebooks whose text has math ($...$): notebook 07's has none
    has_math = {p.stem for p in SOLUTIONS.glob("[0-9]*.ipynb")
                if any("$" in "".join(c["source"]) for c in json.loads(p.read_text())["cells"]
                       if c["cell_type"] == "markdown")}
    assert has_math and "01_layernorm_forward" in has_math
    for page in pages:  # nothing loaded from anywhere: the math is MathML already (the
        text = page.read_text()  # stand-in of a notebook that cannot be read has none)
        assert "<script" not in text, page
        assert "<math" in text or page.stem not in has_math or "truncated" in str(page), page
        assert not re.search(r"""src=["']?(?:https?:)?//""", text), page  # (links may)
    zips = sorted((root / "feedback_zips").rglob("*.zip"))
    assert len(zips) == len(pages)  # (one notebook an assignment)
    for path in zips:  # what an instructor uploads to the LMS
        with zipfile.ZipFile(path) as z:
            assert all(name.endswith(".html") for name in z.namelist())
            for name in z.namelist():
                lines = {line.strip() for line in html.unescape(re.sub(
                    r"<[^>]+>", "", z.read(name).decode())).splitlines()}
                assert not lines & secret, (path, name)
    for page in pages:
        lines = {line.strip() for line in feedback_text(
            root, page.parent.name, page.parent.parent.name).splitlines()}
        assert not lines & secret, page


def test_no_grading_folder_holds_a_reference_and_feedback_is_the_html_alone(graded, tmp_path):
    """What student code can reach at grading: the grading kernel's folder (autograded/)
    and the judge's runner's (tools.judge.client.graded_folder) hold the student's own graded
    files and the release copies of every other normlib file: no solution-block line
    outside the student's own files, no hidden-test line anywhere. Feedback holds the HTML
    pages alone (nbgrader would copy the graded normlib/ beside them)."""
    root, *_ = graded
    secret = secret_lines()
    hidden = {line.strip() for e in exercises() for line in e.hidden.splitlines()} & secret
    plan = Course.load(root).assignments
    scanned = 0
    for assignment, student in EXPECTED:
        own = plan[assignment].student_files
        worker = tmp_path / assignment / student
        graded_folder(root, assignment, own, student, worker)
        for folder in (root / "autograded" / student / assignment, worker):
            for path in sorted(p for p in folder.rglob("*") if p.is_file()):
                lines = {line.strip() for line in path.read_text(errors="ignore").splitlines()}
                mine = path.relative_to(folder).as_posix() in own
                found = lines & (hidden if mine or path.suffix != ".py" else secret)
                assert not found, (path, sorted(found)[:3])
                scanned += path.suffix == ".py"
    assert scanned > 100
    files = [p for p in (root / "feedback").rglob("*") if p.is_file()]
    assert files and {p.suffix for p in files} == {".html"}


def test_the_whole_course_layout_is_one_assignment_grading_every_exercise_file(tmp_path):
    root = build_course(tmp_path, layout="course")
    plan = Course.load(root)
    assert plan.layout == "course"
    assert list(plan.assignments) == ["normalization"]
    whole = plan.assignments["normalization"]
    assert whole.notebooks == [p.stem for p in sorted(SOLUTIONS.glob("[0-9]*.ipynb"))]
    assert whole.student_files == [
        "normlib/adaln.py", "normlib/batch_norm.py", "normlib/dyt.py", "normlib/fold.py",
        "normlib/fused_add_norm.py", "normlib/group_norm.py", "normlib/instance_norm.py",
        "normlib/layer_norm.py", "normlib/layer_norm_compiled.py", "normlib/layer_norm_fast.py",
        "normlib/mixed_precision.py", "normlib/mlp.py", "normlib/nn.py", "normlib/norm.py",
        "normlib/qk_norm.py", "normlib/rezero.py", "normlib/rms_norm.py", "normlib/rotation.py",
        "normlib/transformer.py", "normlib/variance.py", "normlib/z_loss.py"]
    assert sorted(p.name for p in (root / "source" / "normalization").glob("*.ipynb")) == \
        [f"{n}.ipynb" for n in whole.notebooks]
    config = (root / "nbgrader_config.py").read_text()
    assert f"'normalization': {whole.student_files!r}" in config


def test_per_unit_assignments_grade_only_their_units_files(tmp_path):
    plan = Course.load(build_course(tmp_path, layout="unit")).assignments
    assert {a: info.student_files for a, info in plan.items()} == {
        "unit1": ["normlib/layer_norm.py"],
        "unit2": ["normlib/layer_norm.py", "normlib/nn.py"],
        "unit3": ["normlib/batch_norm.py", "normlib/group_norm.py", "normlib/instance_norm.py",
                  "normlib/norm.py", "normlib/rms_norm.py"],
        "unit4": ["normlib/batch_norm.py", "normlib/layer_norm.py", "normlib/mlp.py",
                  "normlib/norm.py"],  # mlp.py and the kernels its network runs
        "unit5": ["normlib/transformer.py"],
        "unit6": ["normlib/mixed_precision.py", "normlib/variance.py"],
        "unit7": ["normlib/layer_norm_compiled.py", "normlib/layer_norm_fast.py"],
        # qk_norm.py subclasses Unit 5's attention: transformer.py is graded with it
        "unit8": ["normlib/adaln.py", "normlib/dyt.py", "normlib/qk_norm.py",
                  "normlib/transformer.py"],
        "unit9": ["normlib/fold.py", "normlib/fused_add_norm.py", "normlib/rezero.py",
                  "normlib/rotation.py", "normlib/z_loss.py"],
    }


def test_no_secret_of_the_grading_host_reaches_a_feedback_page_or_grades_csv(graded):
    """Issue 39, case 1 at autograde: the leaker's kernel printed every environment and
    command line in its sandbox (bubblewrap's pid 1's first) into its notebook, which the
    feedback shows; the host's secrets (its environment, its Dask workers', the gradebook's
    URL) are in none of it, nor in any page, zip or grades.csv."""
    root, *_ = graded
    assert f"postgres:{SECRET}@" in gradebook_url(root)  # (planted)
    text = feedback_text(root, "unit1", "leaker")
    # (each path's line, but not always after "LEAK environ:": the leaker's profile hook
    # prints the first call of ipykernel's own code it sees, whose flush can fall mid-line)
    assert "LEAK environ:" in text and " /proc/1/environ b" in text and \
        " /proc/1/cmdline b" in text
    scanned = [root / "grades.csv", *(root / "feedback").rglob("*.html")]
    for path in scanned:
        assert SECRET not in path.read_text(errors="replace"), path
    for path in (root / "feedback_zips").rglob("*.zip"):
        with zipfile.ZipFile(path) as z:
            assert not [n for n in z.namelist() if SECRET.encode() in z.read(n)], path
    assert len(scanned) > 20


def test_the_leaker_ran_and_its_feedback_shows_no_hidden_test_nor_its_script(graded):
    """Its notebook cells and its module printed the kernel's input history, every
    calling cell's source and the namespace's In: none of it held a hidden test, which
    never reached the kernel (test_no_feedback_page_shows_a_hidden_test_or_solution_line).
    Its HTML output is sanitized in the feedback."""
    root, *_ = graded
    text = feedback_text(root, "unit1", "leaker")
    assert "LEAK In:" in text and "LEAK caller:" in text and 'check("1.1")' in text
    page = next((root / "feedback" / "leaker" / "unit1").glob("*.html")).read_text()
    assert "<script>document.title" in LEAK_LAST  # (the source shows it, escaped)
    assert "<script>document.title" not in page and not re.search(r"<img[^>]*onerror", page)


@pytest.mark.parametrize("run", ["sqlite", "graded"])
def test_the_escaper_escaped_nothing_and_nothing_outlives_grading(run, request):
    """From the grading kernel, in the OS sandbox: no rename of the gradebook, no file
    beside the course, no read of the reference through a directory descriptor, no other
    process's memory, no other kernel's connection file, no process forked past the
    audit hook (it would have slept for ten minutes). Judge-only, its module ran in the
    judge's runner alone, which shows nothing (the SQLite run); with --execute, in a kernel
    too, whose outputs say what it escaped (the PostgreSQL run's)."""
    root, *_ = request.getfixturevalue(run)
    if run == "graded":
        outputs = json.dumps(json.loads(autograded(root, "unit1", "escaper").read_text()))
        escaped = re.findall(r"ESCAPED: [^\\]*", outputs)  # (up to the JSON's escaped newline)
        assert escaped and set(escaped) == {"ESCAPED: []"}, escaped
    else:  # (SQLite's; the other is the PostgreSQL server's)
        assert (root / "gradebook.db").is_file()
    # nothing beside the course, nor beside a worker's scratch course (tools/worker/task.py)
    assert not list(root.parent.rglob("owned.txt"))
    assert not Path(tempfile.gettempdir(), "owned.txt").exists()
    # no process of the grading is left: none renamed by the escaper, no bubblewrap or
    # kernel whose command line names the course or a worker's scratch course
    assert processes_naming("escaper-child") == processes_naming(str(root)) == \
        processes_naming("normlib-worker-") == []


def verdict_elements(page):
    """[(grade_id, text)] of the page's elements carrying data-judge (an attribute the
    page's sanitizer strips from every output: the template's own verdicts alone)."""
    return [(g, html.unescape(re.sub(r"<[^>]+>", "", text)).strip()) for g, text in re.findall(
        r'<(?:li|div) data-judge="(ex[^"]+)"[^>]*>(.*?)</(?:li|div)>', page, re.S)]


@pytest.mark.parametrize("run", ["sqlite", "graded"])
def test_the_judges_verdicts_stand_where_no_output_can(run, request):
    """The forger's notebook, as submitted, holds outputs imitating the judge's "passed"
    (a line, an HTML box with the verdict's own attributes: the SQLite run's page, graded
    judge-only); with --execute (the PostgreSQL run's), its module
    printed it every way that fooled the old feedback (a leading space, a zero-width space,
    an ANSI colour, a tab, HTML, Markdown). Its page still tells the verdicts apart. They
    are the template's (tools/instructor/templates/judged): a list above the first cell, and a box
    under each check's code, before its outputs; styled inline, and no output keeps a
    class, style or data-judge attribute."""
    root, *_ = request.getfixturevalue(run)
    page = next((root / "feedback" / "forger" / "unit1").glob("*.html")).read_text()
    text = feedback_text(root, "unit1", "forger")
    imitations = (" The judge: passed", "\u200bThe judge: passed", "\tThe judge: passed") \
        if run == "graded" else ("The judge: passed, with the hidden tests (3 / 3).",)
    for imitation in imitations:
        assert imitation in text
    if run == "graded":  # the HTML display, sanitized: its text, no class nor style
        assert "alert alert-success" not in page and "6px solid #2e7d32\">The judge: passed" \
            not in page
        assert "<strong>The judge: passed, with the hidden tests (3 / 3).</strong>" in page
    found = verdict_elements(page)
    assert sorted(g for g, _ in found) == sorted(2 * list(POINTS["unit1"]))
    assert all(v.startswith("The judge: failed (0 / 3)") for _, v in found), found
    summary, first_cell = page.index('data-judge="summary"'), page.index('class="cell ')
    assert summary < first_cell
    for grade_id in POINTS["unit1"]:  # under the check's code, before its outputs
        cell = page[page.index(f'<a name="{grade_id}">'):]
        box = cell.index(f'data-judge="{grade_id}"')
        assert box < cell.index('class="output_wrapper"')
    outputs = re.findall(r'<div class="output_wrapper">(.*?)</div>\s*</div>\s*</div>', page,
                         re.S)
    assert outputs and not any("style=" in o or "data-judge" in o for o in outputs)
    # and the reference's page says passed, in both places, for each check
    page = next((root / "feedback" / "reference" / "unit1").glob("*.html")).read_text()
    found = verdict_elements(page)
    assert len(found) == 4 and all(v.startswith(
        "The judge: passed, with the hidden tests (3 / 3).") for _, v in found), found


def hidden_calls():
    """leak_record of every call of layer_norm_stats that only 1.1's hidden tests make,
    made here by running the check with a recording layer_norm_stats."""
    import normlib.layer_norm as module

    reference, e = module.layer_norm_stats, by_number()["1.1"]

    def recorded(source):
        calls = []

        def recording(x, normalized_shape, eps=1e-5):
            calls.append(leak_record(x, eps))
            return reference(x, normalized_shape, eps)

        module.layer_norm_stats = recording
        try:
            exec(compile(source, "<1.1>", "exec"), namespace())
        finally:
            module.layer_norm_stats = reference
        return calls

    visible = recorded(e.visible)
    return recorded(e.source)[len(visible):]


def test_the_leakers_feedback_holds_no_hidden_cases_value(graded):
    """Its worker recorded every hidden case of 1.1 and raised them from 1.2 (in the message
    and in the class name): its feedback names only the builtin type it raised, and holds
    none of the values, however written."""
    root, *_ = graded
    text = feedback_text(root, "unit1", "leaker")
    grade_id = by_number()["1.2"].grade_id
    assert "failed (0 / 3): an exception of its own class raised by the submission's code, " \
           "at the check's case normkit/checks/unit1.py:" in text
    calls = hidden_calls()
    assert len(calls) > 15 and all(len(c) > 10 for c in calls)
    for call in calls:
        value = call.rsplit(":", 1)[1]
        tokens = {call, value, value.rstrip("0"), call.replace("/", "_").replace(":", "_")}
        assert not [t for t in tokens if len(t) > 5 and t in text], (call, grade_id)
    assert "LEAK calls" not in text and "LEAK_" not in text
