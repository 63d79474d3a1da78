"""nbgrader settings of the course. A course built by tools.course.folder has a course-root
nbgrader_config.py that loads this file, then adds what depends on the course (the
gradebook, each assignment's student files, the protected folders).

Every nbgrader command loads it, a grading worker's Autograde too: it imports the worker's
classes (tools.worker) and names the head's feedback classes (tools.instructor.feedback)
as strings, which traitlets and nbconvert import only in the command that uses them, so a
worker never imports the head's code (tests/test_layout.py reads this file as the worker's).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # for `tools`

import nbgrader  # noqa: E402
from nbgrader.converters import Autograde, GenerateFeedback  # noqa: E402
from nbgrader.preprocessors import ClearOutput, Execute, SaveAutoGrades  # noqa: E402

from tools.worker.execute import GradingExecute  # noqa: E402
from tools.worker.judged import FoldHiddenTests, Judged, JudgedAutoGrades  # noqa: E402

c = get_config()  # noqa: F821 (defined by traitlets when it loads this file)

c.CourseDirectory.course_id = "normalization-layers"

# A course without an exchange (it collects from an LMS) is not an error: formgrader lists
# the exchange at every request, and nbgrader logs a missing one as CRITICAL each time
# (tools/instructor/exchange.py; a configured c.Exchange.root is checked as nbgrader does).
c.ExchangeFactory.list = "tools.instructor.exchange.Listing"

# nbgrader copies .py files verbatim: strip their solution blocks in the release.
# (A failing hook is only logged by nbgrader, so the release step scans the release.)
c.GenerateAssignment.post_convert_hook = "tools.course.markers.strip_release"

# A check cell the student deleted is put back (and run), never simply scored 0.
c.OverwriteCells.add_missing_cells = True

# Autograde: the judge has graded the submission's code first (tools/judge/client.py, run by
# the grading task of tools/worker/task.py, which then runs this autograde); nbgrader
# records the notebooks as submitted (their outputs kept: no ClearOutput), with each
# check's verdict (Judged) and the written answers for hand grading (JudgedAutoGrades:
# nbgrader's SaveAutoGrades, but a check's score is the judge's). The check cells keep
# their hidden tests folded (FoldHiddenTests: no hidden test in anything that leaves).
# GradingExecute runs the notebooks first, in the OS sandbox, only with autograde's
# --execute (tools/worker/execute.py); its limits are the course's (c.Grading, in
# nbgrader_config_local.py: tools/course/settings.py).
# nbgrader's own lists, changed by class: a class an upgrade renamed or dropped stops here
# with its name, instead of leaving nbgrader's step in place unseen.
_REPLACED = {Execute: GradingExecute, SaveAutoGrades: JudgedAutoGrades}
_SANITIZE = Autograde.class_traits()["sanitize_preprocessors"].default()
_AUTOGRADE = Autograde.class_traits()["autograde_preprocessors"].default()
for _wanted, _found in (([ClearOutput], _SANITIZE), (list(_REPLACED), _AUTOGRADE)):
    for _cls in _wanted:
        if _cls not in _found:
            raise RuntimeError(f"nbgrader_config.py: nbgrader {nbgrader.__version__}'s "
                               f"Autograde no longer runs {_cls.__name__}; the course's "
                               "grading replaces it (see the comment above)")
c.Autograde.sanitize_preprocessors = [p for p in _SANITIZE if p is not ClearOutput] + \
    [FoldHiddenTests]
c.Autograde.autograde_preprocessors = [
    q for p in _AUTOGRADE
    for q in ([Judged, JudgedAutoGrades] if p is SaveAutoGrades else [_REPLACED.get(p, p)])
]

# Feedback shows which checks failed and why, not the hidden tests' code, and which written
# answers wait for a grader (HideHiddenTests, WaitingAnswers: tools/instructor/feedback.py),
# and its HTML is sanitized: a student's <script> or onerror output is not run there.
FEEDBACK = "tools.instructor.feedback"  # (the head's: named, not imported; see above)
c.GenerateFeedback.preprocessors = [
    *GenerateFeedback.class_traits()["preprocessors"].default(), f"{FEEDBACK}.HideHiddenTests",
    f"{FEEDBACK}.WaitingAnswers",
]
c.HTMLExporter.sanitize_html = True
# (nbconvert's, faster: tools/instructor/feedback.py)
c.GenerateFeedback.exporter_class = f"{FEEDBACK}.FeedbackExporter"
# The judge's verdicts stand where no output can (tools/instructor/templates/judged: nbgrader's
# feedback page, with the verdicts in the check cells' metadata: Judged).
c.HTMLExporter.template_name = "judged"
c.HTMLExporter.template_file = "judged.html.j2"  # (it extends nbgrader's index.html.j2)
# its markdown sanitized, its math as MathML rendered ahead of time: no MathJax from a CDN
# (tools/instructor/markdown.py)
c.HTMLExporter.filters = {name: f"tools.instructor.markdown.{function}" for name, function in (
    ("tex_out", "tex_out"), ("sanitize_markdown", "sanitize"), ("tex_in", "tex_in"))}
c.HTMLExporter.extra_template_basedirs = [
    str(Path(nbgrader.__file__).parent / "server_extensions" / "formgrader" / "templates"),
    str(Path(__file__).resolve().parent / "tools" / "instructor" / "templates"),
]
