"""Feedback: one HTML page per notebook of each graded submission, and one zip per
student and assignment to upload to an LMS.

    python -m tools.instructor feedback ROOT [ASSIGNMENT ...] [--exchange]

feedback/<student>/<assignment>/<notebook>.html: the notebook as submitted, each check
with the judge's verdict under it (tools/templates/judged), its hidden tests folded
(tools.preprocessors.HideHiddenTests), written answers with their grade or "not yet
graded". Nothing else: nbgrader would copy every file of the graded folder beside the
pages (the course's normlib/ files among them), so every other file is removed.
feedback_zips/<assignment>/<student>.zip: that student's pages of the assignment.
"""

import re
import zipfile
from pathlib import Path

from nbconvert.exporters import HTMLExporter, TemplateExporter
from nbconvert.filters.highlight import Highlight2HTML
from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter

from tools.course import assignment_names, run, targets

NO_ALT = 'alt="No description has been provided for this image"'  # (nbconvert's words)


class FeedbackExporter(HTMLExporter):
    """The feedback page's exporter (nbgrader_config.py): nbconvert's HTML exporter without
    its last pass, which parses the whole page again (BeautifulSoup) to give the cells of
    JupyterLab's template a tabindex and images without one an alt text. That pass was
    over half of a page's time (0.65 s of CPU; a class of 300 has 1,800 pages), and the
    feedback template (nbconvert's classic, through nbgrader's) has no such cell: the alt
    text is added here, where an image has none."""

    def from_notebook_node(self, nb, resources=None, **kw):
        """(html, resources) of the notebook nb, with the filters HTMLExporter sets for
        it: code highlighted in the notebook's language, outputs by display priority."""
        language = nb.metadata.get("language_info", {})
        lexer = language.get("pygments_lexer", language.get("name"))
        self.register_filter("highlight_code", self.filters.get(
            "highlight_code", Highlight2HTML(pygments_lexer=lexer, parent=self)))
        resources = self._init_resources(resources)
        self.register_filter("filter_data_type", WidgetsDataTypeFilter(
            notebook_metadata=self._nb_metadata, parent=self, resources=resources))
        page, resources = TemplateExporter.from_notebook_node(self, nb, resources, **kw)
        return re.sub(r"<img\b(?![^>]*\balt=)", f"<img {NO_ALT}", page), resources


def feedback(root, names=(), exchange=False):
    root = Path(root)
    names = assignment_names(root, names)
    for target in targets(root, names):
        run(root, "generate_feedback", target, "--force")
    for name in names:
        for path in root.glob(f"feedback/*/{name}/**/*"):
            if path.is_file() and path.suffix != ".html":
                path.unlink()
        for path in sorted(root.glob(f"feedback/*/{name}/**/"), reverse=True):
            if path.is_dir() and not any(path.iterdir()):
                path.rmdir()
        zips = root / "feedback_zips" / name
        zips.mkdir(parents=True, exist_ok=True)
        students = sorted(p.parent.name for p in root.glob(f"feedback/*/{name}") if p.is_dir())
        for student in students:
            pages = sorted((root / "feedback" / student / name).glob("*.html"))
            with zipfile.ZipFile(zips / f"{student}.zip", "w", zipfile.ZIP_DEFLATED) as z:
                for page in pages:
                    z.write(page, f"{name}/{page.name}")
        if exchange:
            run(root, "release_feedback", name)
        print(f"feedback for {name}: feedback/*/{name}/, one zip per student in "
              f"feedback_zips/{name}/ ({len(students)})")
