"""nbgrader settings of the course (used by every course built with `make course`,
which writes a course-root nbgrader_config.py that loads this file)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # for `tools`

from nbgrader.converters import Autograde, GenerateFeedback  # noqa: E402

from tools.course import ASSIGNMENT, student_files  # noqa: E402
from tools.grading import HideHiddenTests, SkipAtGrading  # noqa: E402

c = get_config()  # noqa: F821 (defined by traitlets when it loads this file)

c.CourseDirectory.course_id = "normalization-layers"

# nbgrader copies .py files verbatim: strip their solution blocks in the release.
# (A failing hook is only logged by nbgrader, so `make test` greps the release.)
c.GenerateAssignment.post_convert_hook = "tools.strip.strip_release"

# At autograde nbgrader would overwrite the student's .py files with the source's
# (the reference!): keep the files that hold exercises, so the student's code is graded.
c.Autograde.exclude_overwriting = {ASSIGNMENT: student_files()}

# Collect the student's normlib/*.py from an LMS zip download, not only notebooks.
c.FileNameCollectorPlugin.valid_ext = [".ipynb", ".py"]

# Every check cell runs in a second or two; 30 s (nbgrader's default) stops an
# infinite loop without failing a slow but correct kernel.
c.ExecutePreprocessor.timeout = 30

# Long experiments (cells tagged skip-at-grading) are not run at autograde: see
# tools/grading.py. Added after nbgrader's own sanitizing, which restores the check cells.
c.Autograde.sanitize_preprocessors = [
    *Autograde.class_traits()["sanitize_preprocessors"].default(), SkipAtGrading
]

# Feedback shows which checks failed and why, not the hidden tests' code (tools/grading.py;
# c.HideHiddenTests.enabled = False shows them, as nbgrader does by default).
c.GenerateFeedback.preprocessors = [
    *GenerateFeedback.class_traits()["preprocessors"].default(), HideHiddenTests
]
