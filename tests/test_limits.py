"""One set of grading limits: a limit the instructor raises in the course's
nbgrader_config_local.py holds in both runs of a submission (nbgrader's notebook run,
tools/recheck.py's clean re-check), so that the re-check never takes back what the
notebook run allowed.

The submission is the reference unit 1 whose layer_norm_forward first reserves 4200 MiB
(np.zeros: address space, never touched, so it costs no memory), more than the default
4096 MiB per grading process. Under the defaults, both runs get 4096 MiB and Exercise 1.2
scores 0 (shown on the clean re-check, the cheap run: an nbgrader round costs about 12 s);
with c.GradingExecute.memory_mb = 16384 in nbgrader_config_local.py, `autograde` (nbgrader
then the clean re-check) gives full points and the re-check overrides nothing.
"""

import contextlib
import io
import shutil

from nbgrader.api import Gradebook

from tests.test_roundtrip import NOTEBOOK, scores
from tools.course import build_course, gradebook_url, grading_limits, threads
from tools.instructor import JOBS, autograde, release
from tools.recheck import clean_results
from tools.synthetic import LN, injected, reference, with_files

RESERVE = "import numpy as np\n_reserved = np.zeros(4200 << 20, dtype=np.uint8)"
NEEDS_MEMORY = with_files(layer_norm=injected(reference(LN), "layer_norm_forward", RESERVE))
CHECK = "ex1_2_layer_norm_forward"


def test_a_limit_raised_in_the_local_config_holds_in_both_runs(tmp_path):
    root = build_course(tmp_path / "course", layout="unit")
    with contextlib.redirect_stdout(io.StringIO()):
        release(root, ["unit1"])
    submission = root / "submitted" / "big" / "unit1"
    shutil.copytree(root / "release" / "unit1", submission)
    NEEDS_MEMORY(submission)

    # the defaults, which both runs get: too little memory for the submission
    limits = grading_limits(root)
    assert limits["memory_mb"] == 4096 and limits["timeout"] == 30
    env = threads(JOBS)  # (autograde's with one job: its re-check reuses this process)
    clean = clean_results(root, "unit1", "big", env=env)
    assert not clean[CHECK][0] and "MemoryError" in clean[CHECK][1], clean[CHECK]
    assert all(passed for g, (passed, _) in clean.items() if g != CHECK)

    # raised by the instructor: both runs get it, and `--timeout` goes over the config's
    (root / "nbgrader_config_local.py").write_text(
        "c.GradingExecute.memory_mb = 16384\nc.GradingExecute.timeout = 45\n")
    assert grading_limits(root) == {**limits, "memory_mb": 16384, "timeout": 45}
    assert grading_limits(root, timeout=60)["timeout"] == 60
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        failed = autograde(root, ["unit1"], jobs=1)
    assert failed == 0, out.getvalue()
    assert "16384 MiB per process" in out.getvalue()
    with Gradebook(gradebook_url(root)) as gb:
        grades = {g: gb.find_grade(g, NOTEBOOK[g], "unit1", "big") for g in scores("unit1")}
        assert {g: grade.auto_score for g, grade in grades.items()} == scores("unit1")
        assert [g for g, grade in grades.items() if grade.manual_score is not None] == [], \
            out.getvalue()  # the clean re-check agreed with every notebook score
