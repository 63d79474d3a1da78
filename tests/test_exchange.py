"""The nbgrader exchange route (instead of LMS zips): release to the exchange, a student
fetches and submits (with their normlib/ files), the instructor collects."""

import datetime
import getpass

from nbgrader.auth import Authenticator
from nbgrader.coursedir import CourseDirectory
from nbgrader.exchange import ExchangeFactory
from traitlets.config import Config

from tools.instructor.build import build_course
from tools.instructor.collect import collect, submitted_at
from tools.instructor.release import release


def as_student(home, exchange, step):
    """nbgrader's `fetch_assignment unit1` or `submit unit1` (step: "FetchAssignment" or
    "Submit") in the student's folder home, with only the course and the exchange given,
    run in this process through the classes nbgrader's commands use (each command would
    start a Python of its own)."""
    c = Config()
    c.CourseDirectory.course_id = "normalization-layers"
    c.CourseDirectory.assignment_id = "unit1"
    c.CourseDirectory.root = str(home)
    c.Exchange.root = str(exchange)
    c.Exchange.assignment_dir = str(home)
    action = getattr(ExchangeFactory(config=c), step)
    action(coursedir=CourseDirectory(config=c), authenticator=Authenticator(config=c),
           config=c).start()


def test_release_fetch_submit_collect_through_the_exchange(tmp_path, capsys):
    root = build_course(tmp_path / "course", layout="unit")
    exchange = tmp_path / "exchange"
    exchange.mkdir()
    (root / "nbgrader_config_local.py").write_text(f"c.Exchange.root = {str(exchange)!r}\n")
    release(root, ["unit1"], exchange=True)

    home = tmp_path / "student"  # the student's machine: no course config
    home.mkdir()
    as_student(home, exchange, "FetchAssignment")
    kernel = home / "unit1" / "normlib" / "layer_norm.py"
    kernel.write_text(kernel.read_text() + "\n# the student's work\n")
    as_student(home, exchange, "Submit")

    collect(root, ["unit1"], exchange=True)
    submitted = root / "submitted" / getpass.getuser() / "unit1"
    assert (submitted / "normlib" / "layer_norm.py").read_text() == kernel.read_text()
    # its notebook and exercise file alone (and nbgrader's files): not normkit/ nor
    # normlib/'s other files, which the released folder held and nbgrader's collect copied
    assert sorted(p.relative_to(submitted).as_posix() for p in submitted.rglob("*")) == [
        "01_layernorm_forward.ipynb", "normlib", "normlib/layer_norm.py",
        "submission_secret.txt", "timestamp.txt"]
    released = sum(1 for p in (root / "release" / "unit1").rglob("*") if p.is_file()) - 2
    assert "collected unit1 from the exchange: 1 submission " \
           f"({released} files left out: only notebooks and the assignment's exercise files " \
           "are collected, grading takes the rest from the course)\n" in capsys.readouterr().out


def test_the_exchanges_time_is_when_its_files_last_changed_not_what_submit_wrote(
        tmp_path, capsys):
    """Case 5 on the exchange: `nbgrader submit` runs as the student, who writes the
    inbound folder's name and its timestamp.txt; an early date written there dodged the
    late mark. The time collected is the last change (ctime, which no user sets back) of
    anything in the inbound folder. And a link in it is refused, as in a zip."""
    root = build_course(tmp_path / "course", layout="unit")
    exchange = tmp_path / "exchange"
    exchange.mkdir()
    (root / "nbgrader_config_local.py").write_text(f"c.Exchange.root = {str(exchange)!r}\n")
    release(root, ["unit1"], exchange=True)
    home = tmp_path / "student"
    home.mkdir()
    as_student(home, exchange, "FetchAssignment")
    as_student(home, exchange, "Submit")
    [inbound] = (exchange / "normalization-layers" / "inbound").iterdir()
    (inbound / "timestamp.txt").write_text("2020-01-01 00:00:00.000000 UTC")
    forged = inbound.with_name(inbound.name.replace(inbound.name.split("+")[2],
                                                    "2020-01-01 00:00:00.000000 UTC"))
    inbound.rename(forged)
    before = datetime.datetime.now(datetime.timezone.utc)
    collect(root, ["unit1"], exchange=True)
    when = submitted_at(root / "submitted" / getpass.getuser() / "unit1")
    assert before - datetime.timedelta(minutes=5) < when <= datetime.datetime.now(
        datetime.timezone.utc), when
    (forged / "normlib" / "layer_norm.py").unlink()
    (forged / "normlib" / "layer_norm.py").symlink_to(root / "source/unit1/normlib/layer_norm.py")
    collect(root, ["unit1"], exchange=True)
    assert "REJECTED" in capsys.readouterr().out
    assert not (root / "submitted" / getpass.getuser() / "unit1").exists()
