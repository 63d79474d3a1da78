"""One set of grading limits, one typed object (tools/sandboxed/limits.py): c.Grading's settings in
the course's nbgrader config, nbgrader_config_local.py included, read by
tools.course.settings.read, the command line's --timeout over them; the judge's runner gets them
whole.

The "big" submission of tests/synthetic.py (right, but its layer_norm_forward reserves
4200 MiB of address space) shows both sides of a raised limit:
- here, under the defaults (4096 MiB), the judge fails Exercise 2.5 with a MemoryError, so
  the submission does need the raised limit;
- tests/test_roundtrip.py grades it in a course whose nbgrader_config_local.py raises the
  memory to 8192 MiB (and sets the time limit): full points.
"""

import contextlib
import datetime
import io

import pytest

from tests.synthetic import write_submission
from tools.course.folder import Course
from tools.course.settings import read
from tools.instructor.autograde import JOBS
from tools.instructor.build import build_course
from tools.instructor.release import release
from tools.judge.client import verdicts
from tools.sandbox.bubblewrap import threads
from tools.sandboxed.limits import Limits

CHECK = "ex2_5_layer_norm_function"  # the check that calls layer_norm_forward


def test_limits_are_read_from_the_course_config_and_the_default_is_too_small(tmp_path):
    root = build_course(tmp_path / "course", layout="unit")
    limits = read(root).limits  # the defaults, tools/sandboxed/limits.py's
    assert (limits.memory_mb, limits.timeout) == (4096, 30)
    assert limits.protected[0] == str(root)  # (and solutions/: build_course writes them)
    with contextlib.redirect_stdout(io.StringIO()):
        release(root, ["unit2"])
    write_submission(root, "unit2", "big", root / "submitted" / "big" / "unit2")
    found, missing = verdicts(root, "unit2", Course.load(root).assignments["unit2"], "big",
                              limits, env=threads(JOBS))
    assert not found[CHECK][0] and "MemoryError" in found[CHECK][1], found[CHECK]
    assert all(passed for g, (passed, _) in found.items() if g != CHECK), found
    assert missing == []

    # the instructor's values, then a command line's --timeout over them
    (root / "nbgrader_config_local.py").write_text(
        "c.Grading.memory_mb = 16384\nc.Grading.timeout = 45\n"
        "c.Grading.due = {'unit1': '2026-10-05 23:59 +02:00'}\n")
    settings = read(root)
    assert settings.limits == Limits(**{**limits.__dict__, "memory_mb": 16384, "timeout": 45})
    assert read(root, timeout=60).limits.timeout == 60
    assert settings.due == {"unit1": datetime.datetime(2026, 10, 5, 21, 59,
                                                       tzinfo=datetime.timezone.utc)}
    assert Limits.from_json(settings.limits.to_json()) == settings.limits


@pytest.mark.parametrize("due,why", [("next week", "is not a date"),
                                     ("2026-10-05 23:59", "has no time zone")])
def test_a_due_date_that_is_not_one_is_refused_by_name(tmp_path, due, why):
    root = build_course(tmp_path / "course", layout="unit")
    (root / "nbgrader_config_local.py").write_text(f"c.Grading.due = {{'unit1': {due!r}}}\n")
    with pytest.raises(SystemExit, match=f"c.Grading.due\\['unit1'\\] = '{due}' {why}"):
        read(root)
