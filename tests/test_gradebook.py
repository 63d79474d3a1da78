"""The gradebook's URL is checked before a step uses it (tools/instructor/gradebook.py,
check_reachable): a PostgreSQL URL whose driver is missing, or whose server does not
answer, stops the step with one message naming what is wrong and where, its password
hidden; a SQLite file passes. Every step finds the gradebook where nbgrader does. Two
graders scoring written answers at once on a real PostgreSQL server (tests/postgres.py)
lose no grade."""

import json
import os
import shutil
import subprocess
import sys

import nbgrader.api as nbgrader_api
import pytest

from tests.conftest import free_port
from tools.course.folder import nbgrader, nbgrader_in_process
from tools.course.settings import gradebook_url
from tools.instructor.__main__ import main
from tools.instructor.build import build_course
from tools.instructor.gradebook import check_reachable


def test_a_sqlite_gradebook_needs_no_server(tmp_path):
    check_reachable(f"sqlite:///{tmp_path / 'gradebook.db'}")


def test_an_unreachable_server_is_named_without_the_password():
    port = free_port()
    with pytest.raises(SystemExit) as stopped:
        check_reachable(f"postgresql://grader:s3cret@127.0.0.1:{port}/course")
    message = str(stopped.value)
    assert message.startswith(f"cannot reach the gradebook's server at 127.0.0.1:{port} "
                              f"(postgresql://grader:***@127.0.0.1:{port}/course)"), message
    assert "Connection refused" in message and "NBGRADER_DB_URL" in message
    assert "s3cret" not in message


def test_a_missing_driver_is_named(monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)  # (import psycopg fails)
    with pytest.raises(SystemExit, match="needs the Python driver 'psycopg', which is not "
                                         "installed"):
        check_reachable(f"postgresql://grader@127.0.0.1:{free_port()}/course")


def test_the_driver_is_in_the_environment():
    import psycopg

    assert psycopg.pq.__impl__ in ("binary", "c")  # (no system libpq needed)


def test_a_step_finds_a_postgresql_gradebook_in_the_config_or_the_environment(
        monkeypatch, tmp_path):
    """The course's config names the gradebook for every step (tools.course.folder.write_config):
    SQLite in the course folder (wherever the folder moves), else nbgrader_config_local.py's
    db_url, else NBGRADER_DB_URL, which wins."""
    root = build_course(tmp_path / "course")
    monkeypatch.delenv("NBGRADER_DB_URL", raising=False)
    assert gradebook_url(root) == f"sqlite:///{root / 'gradebook.db'}?timeout=60"
    (root / "nbgrader_config_local.py").write_text(
        "c.CourseDirectory.db_url = 'postgresql://ta@db.example/course'\n")
    assert gradebook_url(root) == "postgresql://ta@db.example/course"
    monkeypatch.setenv("NBGRADER_DB_URL", f"postgresql://grader@127.0.0.1:{free_port()}/c")
    assert gradebook_url(root) == os.environ["NBGRADER_DB_URL"]
    moved = tmp_path / "elsewhere"  # no path of the machine that built it: it can move
    (root / "nbgrader_config_local.py").unlink()
    shutil.move(root, moved)
    monkeypatch.delenv("NBGRADER_DB_URL")
    assert gradebook_url(moved) == f"sqlite:///{moved / 'gradebook.db'}?timeout=60"
    assert str(tmp_path / "course") not in (moved / "nbgrader_config.py").read_text()
    monkeypatch.setenv("NBGRADER_DB_URL", f"postgresql://grader@127.0.0.1:{free_port()}/c")
    root = moved
    for step in ("release", "collect", "autograde", "feedback", "grades"):
        with pytest.raises(SystemExit, match="cannot reach the gradebook's server"):
            main([step, str(root)])


# Two teaching assistants grade the written answers of one class at the same time, each in
# a formgrader of their own: each saves a score (and a comment) as formgrader's API does
# (PUT /formgrader/api/grade/<id>: the score, needs_manual_grade cleared, one commit per
# answer), on one PostgreSQL gradebook. Each session is a process of its own, which opens
# the gradebook, says so, and grades once both are open: the scores to give come on its
# stdin, {student: {question: points}}.
STUDENTS = [f"s{i:03}" for i in range(40)]
QUESTIONS = ("q1", "q2", "q3", "q4")  # the first TA grades q1 and q2, the second q3 and q4
SESSION = """
import json, sys
from nbgrader.api import Gradebook

with Gradebook(sys.argv[1]) as gb:
    print("open", flush=True)
    for student, scores in json.loads(sys.stdin.readline()).items():
        for question, points in scores.items():
            grade = gb.find_grade_by_id(gb.find_grade(question, "answers", "hw", student).id)
            grade.manual_score, grade.needs_manual_grade = points, False
            gb.find_comment(question, "answers", "hw", student).manual_comment = \\
                f"{question} of {student}"
            gb.db.commit()
"""


def points(student, question):
    return (int(student[1:]) + QUESTIONS.index(question)) % 5 / 2  # 0 .. 2 by halves


def test_two_graders_at_once_lose_no_grade(postgres):
    from nbgrader.api import Gradebook

    nbgrader_in_process()  # (a new gradebook runs alembic from PATH)
    url = postgres.database("two_graders")
    with Gradebook(url) as gb:  # one assignment, its answers waiting for a grader
        gb.update_or_create_assignment("hw")
        gb.update_or_create_notebook("answers", "hw")
        for question in QUESTIONS:
            gb.update_or_create_grade_cell(question, "answers", "hw", max_score=2,
                                           cell_type="markdown")
            gb.update_or_create_solution_cell(question, "answers", "hw")
        for student in STUDENTS:
            gb.update_or_create_student(student)
            gb.add_submission("hw", student)
        for grade in gb.db.query(nbgrader_api.Grade):
            grade.needs_manual_grade = True
        gb.db.commit()
    tas = [subprocess.Popen([sys.executable, "-c", SESSION, url], text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE) for _ in range(2)]
    assert [ta.stdout.readline() for ta in tas] == ["open\n"] * 2
    for ta, questions in zip(tas, (QUESTIONS[:2], QUESTIONS[2:])):  # both at once
        ta.stdin.write(json.dumps({s: {q: points(s, q) for q in questions}
                                   for s in STUDENTS}) + "\n")
        ta.stdin.flush()
    assert [ta.wait(120) for ta in tas] == [0, 0]
    with Gradebook(url) as gb:
        for student in STUDENTS:
            submission = gb.find_submission("hw", student)
            assert not submission.needs_manual_grade, student
            assert submission.score == sum(points(student, q) for q in QUESTIONS)
            for question in QUESTIONS:
                assert gb.find_comment(question, "answers", "hw", student).manual_comment \
                    == f"{question} of {student}"


def test_the_config_is_read_once_per_command_and_again_when_it_changes(tmp_path, monkeypatch):
    """Every step asks for the course's config many times (the gradebook's URL at each
    access, the settings): it is read once, each caller gets a copy of its own, and a
    changed file or NBGRADER_DB_URL is read again."""
    from tools.course import settings

    def reads():
        return settings._config.cache_info().misses

    monkeypatch.delenv("NBGRADER_DB_URL", raising=False)
    root = build_course(tmp_path / "course")
    settings._config.cache_clear()
    url = gradebook_url(root)
    assert url.startswith("sqlite:///") and gradebook_url(root) == url
    settings.config(root).CourseDirectory.db_url = "sqlite:///elsewhere.db"  # (a copy's)
    assert gradebook_url(root) == url and settings.read(root).limits.timeout != 77
    assert reads() == 1
    (root / "nbgrader_config_local.py").write_text("c.Grading.timeout = 77\n")
    assert settings.read(root).limits.timeout == 77 and reads() == 2
    monkeypatch.setenv("NBGRADER_DB_URL", "sqlite:////tmp/other.db")
    assert gradebook_url(root) == "sqlite:////tmp/other.db" and reads() == 3


def test_one_engine_per_gradebook_and_command(tmp_path, monkeypatch):
    """The course's table is reached through one engine per command, not one per access,
    and a gradebook made anew (the course rebuilt) gets the table too."""
    from tools.instructor import gradebook

    made = []
    create = gradebook.create_engine
    monkeypatch.setattr(gradebook, "create_engine", lambda *a, **k: made.append(a) or
                        create(*a, **k))
    root = build_course(tmp_path / "course")
    nbgrader(root, "db", "assignment", "add", "unit1")  # (the gradebook's file)
    for student in ("s1", "s2", "s3"):
        gradebook.set_graded(root, {("unit1", student): ("graded", "0" * 64)})
    assert set(gradebook.graded(root)) == {("unit1", s) for s in ("s1", "s2", "s3")}
    assert len(made) == 1
    (root / "gradebook.db").unlink()
    nbgrader(root, "db", "assignment", "add", "unit1")
    assert gradebook.graded(root) == {} and len(made) == 1
    gradebook.set_graded(root, {("unit1", "s4"): ("graded", "0" * 64)})
    assert set(gradebook.graded(root)) == {("unit1", "s4")}
