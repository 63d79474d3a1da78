"""One set of grading limits: GradingExecute's settings in the course's nbgrader config,
nbgrader_config_local.py included, read by tools.course.grading_limits for both runs of
a submission (nbgrader's notebook run, tools/recheck.py's clean re-check).

The "big" submission of tools/synthetic.py (right, but its layer_norm_forward reserves
4200 MiB of address space) shows both sides of a raised limit:
- here, under the defaults (4096 MiB), the clean re-check fails Exercise 2.5 with a
  MemoryError, so the submission does need the raised limit;
- tests/test_roundtrip.py grades it in a course whose nbgrader_config_local.py raises the
  memory to 8192 MiB (and sets the time limit): full points in the notebook run, and the
  clean re-check overrides none of them.
"""

import contextlib
import io

from tools.course import build_course, grading_limits, threads
from tools.instructor import JOBS, release
from tools.recheck import clean_results
from tools.synthetic import write_submission

CHECK = "ex2_5_layer_norm_function"  # the check that calls layer_norm_forward


def test_limits_are_read_from_the_course_config_and_the_default_is_too_small(tmp_path):
    root = build_course(tmp_path / "course", layout="unit")
    limits = grading_limits(root)  # the defaults, tools/grading.GradingExecute's
    assert limits["memory_mb"] == 4096 and limits["timeout"] == 30
    with contextlib.redirect_stdout(io.StringIO()):
        release(root, ["unit2"])
    write_submission(root, "unit2", "big", root / "submitted" / "big" / "unit2")
    clean = clean_results(root, "unit2", "big", env=threads(JOBS))
    assert not clean[CHECK][0] and "MemoryError" in clean[CHECK][1], clean[CHECK]
    assert all(passed for g, (passed, _) in clean.items() if g != CHECK), clean

    # the instructor's values, then a command line's --timeout over them
    (root / "nbgrader_config_local.py").write_text(
        "c.GradingExecute.memory_mb = 16384\nc.GradingExecute.timeout = 45\n")
    assert grading_limits(root) == {**limits, "memory_mb": 16384, "timeout": 45}
    assert grading_limits(root, timeout=60)["timeout"] == 60
