"""nbgrader settings of the course. A course built by tools.course has a course-root
nbgrader_config.py that loads this file, then adds what depends on the course (the
gradebook, each assignment's student files, the protected folders)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # for `tools`

import nbgrader  # noqa: E402
from nbgrader.converters import Autograde, GenerateFeedback  # noqa: E402

from tools.grading import (  # noqa: E402
    FoldHiddenTests,
    GradingExecute,
    HideHiddenTests,
    SkipAtGrading,
)

c = get_config()  # noqa: F821 (defined by traitlets when it loads this file)

c.CourseDirectory.course_id = "normalization-layers"

# nbgrader copies .py files verbatim: strip their solution blocks in the release.
# (A failing hook is only logged by nbgrader, so the release step scans the release.)
c.GenerateAssignment.post_convert_hook = "tools.markers.strip_release"

# zip_collect: one zip per student in downloaded/<assignment>/archive/, named
# "<student_id>_<anything>.zip" (an LMS's bulk download, unzipped once), holding the
# assignment's files with or without one enclosing folder. Its .py files are collected too.
c.FileNameCollectorPlugin.named_regexp = (
    r".*/extracted/(?P<student_id>[^/_]+)[^/]*/(?:[^/]+/)??(?P<file_id>(?:normlib/)?[^/]+)$"
)
c.FileNameCollectorPlugin.valid_ext = [".ipynb", ".py"]

# A check cell the student deleted is put back (and run), never simply scored 0.
c.OverwriteCells.add_missing_cells = True

# Each cell has a time limit: past it, or if the kernel dies or runs out of memory, that
# cell is an error, the kernel restarts and grading goes on. Each kernel starts in
# tools/sandbox.py. Both are tools/grading.GradingExecute, whose settings are the grading
# limits (timeout, startup_timeout, memory_mb, file_mb, protected; their defaults are in
# tools/grading.py). Set yours in the course's nbgrader_config_local.py, e.g.
# c.GradingExecute.memory_mb = 8192: the clean re-check (tools/recheck.py) reads the same.
c.Autograde.autograde_preprocessors = [
    GradingExecute if p.__name__ == "Execute" else p
    for p in Autograde.class_traits()["autograde_preprocessors"].default()
]

# Long experiments (cells tagged skip-at-grading) are not run at autograde, and the check
# cells run without their hidden tests, which only the judge runs (tools/grading.py;
# tools/recheck.py). Added after nbgrader's own sanitizing, which restores the check cells.
c.Autograde.sanitize_preprocessors = [
    *Autograde.class_traits()["sanitize_preprocessors"].default(), SkipAtGrading,
    FoldHiddenTests,
]

# Feedback shows which checks failed and why, not the hidden tests' code (tools/grading.py),
# and its HTML is sanitized: a student's <script> or onerror output is not run there.
c.GenerateFeedback.preprocessors = [
    *GenerateFeedback.class_traits()["preprocessors"].default(), HideHiddenTests
]
c.HTMLExporter.sanitize_html = True
# The judge's verdicts stand where no output can (tools/templates/judged: nbgrader's
# feedback page, with the verdicts in the check cells' metadata; tools/recheck.annotate).
c.HTMLExporter.template_name = "judged"
c.HTMLExporter.template_file = "judged.html.j2"  # (it extends nbgrader's index.html.j2)
c.HTMLExporter.extra_template_basedirs = [
    str(Path(nbgrader.__file__).parent / "server_extensions" / "formgrader" / "templates"),
    str(Path(__file__).resolve().parent / "tools" / "templates"),
]
