"""The nbgrader exchange route (instead of LMS zips): release to the exchange, a student
fetches and submits (with their normlib/ files), the instructor collects."""

import getpass

from tools.course import build_course, nbgrader
from tools.instructor import collect, release


def test_release_fetch_submit_collect_through_the_exchange(tmp_path, capsys):
    root = build_course(tmp_path / "course", layout="unit")
    exchange = tmp_path / "exchange"
    exchange.mkdir()
    (root / "nbgrader_config_local.py").write_text(f"c.Exchange.root = {str(exchange)!r}\n")
    release(root, ["unit1"], exchange=True)

    home = tmp_path / "student"  # the student's machine: no course config, only flags
    home.mkdir()
    flags = ["--course=normalization-layers", f"--Exchange.root={exchange}"]
    nbgrader(home, "fetch_assignment", "unit1", *flags)
    kernel = home / "unit1" / "normlib" / "layer_norm.py"
    kernel.write_text(kernel.read_text() + "\n# the student's work\n")
    nbgrader(home, "submit", "unit1", *flags)

    collect(root, ["unit1"], exchange=True)
    submitted = root / "submitted" / getpass.getuser() / "unit1"
    assert (submitted / "normlib" / "layer_norm.py").read_text() == kernel.read_text()
    assert (submitted / "01_layernorm_forward.ipynb").is_file()
    assert "collected unit1: 1 submission (" in capsys.readouterr().out
