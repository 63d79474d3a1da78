"""The nbgrader exchange route (instead of LMS zips): release to the exchange, a student
fetches and submits (with their normlib/ files), the instructor collects."""

import getpass

from nbgrader.auth import Authenticator
from nbgrader.coursedir import CourseDirectory
from nbgrader.exchange import ExchangeFactory
from traitlets.config import Config

from tools.collect import collect
from tools.course import build_course
from tools.release import release


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
    assert (submitted / "01_layernorm_forward.ipynb").is_file()
    assert "collected unit1 from the exchange: 1 submission\n" in capsys.readouterr().out
