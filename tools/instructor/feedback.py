"""Feedback: an HTML page per notebook of each graded submission, and zips to hand out.

    python -m tools.instructor feedback ROOT [ASSIGNMENT ...] [--exchange] [--lms LMS]

Writes feedback/<student>/<assignment>/<notebook>.html (the notebook as submitted, each
check with the judge's verdict under it, its hidden tests folded: HideHiddenTests, written
answers with their grade or "not yet graded"; every other file nbgrader copies is removed),
feedback_zips/<assignment>/<student>.zip, and with --lms moodle|canvas the LMS's bulk upload,
feedback_upload/<assignment>-<lms>.zip (tools/lms/feedback_upload.py). Released assignments only.
A page renders only what it must of the notebook (safe, before the template
tools/instructor/templates/judged): a student's output or markdown must not run a script,
pass for the judge's verdict or load anything. Each part is bounded (tools/course/bounds.py);
a page too large even then is not written, and feedback prints NONE for its student.
What a page keeps, and its tests: docs/security.md, section 3.
"""

import base64
import binascii
import json
import re
import zipfile
from pathlib import Path

from nbconvert.exporters import HTMLExporter, TemplateExporter
from nbconvert.filters.highlight import Highlight2HTML
from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter
from nbformat import NotebookNode
from nbgrader.preprocessors import NbGraderPreprocessor

from tools.course.bounds import BOUNDS
from tools.course.deadline import TimeUp, deadline
from tools.course.folder import Course, assignment_names, nbgrader, run, targets
from tools.worker.judged import FoldHiddenTests, is_check

NO_ALT = 'alt="No description has been provided for this image"'  # (nbconvert's words)
MIME = ("text/plain", "text/html", "text/markdown", "text/latex", "image/png", "image/jpeg")
IMAGES = ("image/png", "image/jpeg")
_ID = re.compile(r"[A-Za-z0-9_-]{1,100}")  # (a grade id, a cell id: nbgrader's characters)
_NBGRADER = {"grade": bool, "solution": bool, "locked": bool, "task": bool, "grade_id": str,
             "points": (int, float), "score": (int, float), "comment": str, "waiting": bool}
_LEXER = re.compile(r"[A-Za-z0-9_+-]{1,40}")


def _text(value):
    """A notebook's multiline string (a str, or nbformat's list of lines) as a str, or None."""
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "".join(value)
    return value if isinstance(value, str) else None


def _image(value):
    """An image's base64 text if it is strict base64 (newlines aside), else None: it goes
    into an attribute of the page."""
    text = _text(value)
    if text is None:
        return None
    try:
        base64.b64decode(text.replace("\n", ""), validate=True)
    except (binascii.Error, ValueError):
        return None
    return text


def _note(text):
    return NotebookNode(output_type="stream", name="stdout", text=f"[feedback: {text}]\n")


def _megabytes(size):
    return f"{size / 1e6:.1f} MB"


def _output(output, bounds):
    """An output as the page may show it (docs/security.md, section 3), or a note of why
    not."""
    kind = output.get("output_type")
    if kind == "stream":
        text = _text(output.get("text"))
        name = output.get("name") if output.get("name") in ("stdout", "stderr") else "stdout"
        return NotebookNode(output_type="stream", name=name, text=text or "")
    if kind == "error":
        lines = output.get("traceback")
        lines = [t for t in lines if isinstance(t, str)] if isinstance(lines, list) else []
        return NotebookNode(output_type="error", ename=str(output.get("ename", "")),
                            evalue=str(output.get("evalue", "")), traceback=lines)
    if kind not in ("display_data", "execute_result") or not isinstance(output.get("data"), dict):
        return _note(f"an output of type {str(kind)[:40]!r} is not shown")
    data, metadata = {}, {}
    for mime in MIME:
        value = (_image if mime in IMAGES else _text)(output.data.get(mime))
        if value is not None:
            data[mime] = value
    for mime in IMAGES:
        size = (output.get("metadata") or {}).get(mime)
        if mime in data and isinstance(size, dict):
            kept = {k: v for k, v in size.items() if k in ("width", "height") and
                    type(v) is int and 0 < v <= bounds.image_pixels}
            if kept:
                metadata[mime] = kept
    if not data:
        return _note(f"an output of {', '.join(sorted(map(str, output.data)))[:80]} is not "
                     "shown (a page shows text, HTML, markdown, LaTeX, PNG and JPEG)")
    node = NotebookNode(output_type=kind, data=NotebookNode(data),
                        metadata=NotebookNode(metadata))
    if kind == "execute_result":
        count = output.get("execution_count")
        node.execution_count = count if type(count) is int else None
    return node


def _cell_metadata(cell):
    """The metadata of a cell the page shows: its nbgrader fields (each of its type, the
    grade id as nbgrader writes one), the judge's verdict; nothing else."""
    found = {}
    grader = cell.metadata.get("nbgrader")
    if isinstance(grader, dict):
        kept = {k: v for k, v in grader.items() if k in _NBGRADER and
                isinstance(v, _NBGRADER[k]) and (k != "grade_id" or _ID.fullmatch(v))}
        if kept.get("grade") and not {"grade_id", "points", "score"} <= set(kept):
            kept = {}  # a graded cell the course does not know (nbgrader gave it no score)
        elif kept.get("solution") and "grade_id" not in kept:
            kept = {}
        if kept:
            found["nbgrader"] = NotebookNode(kept)
    judge = cell.metadata.get("judge")
    if isinstance(judge, dict) and isinstance(judge.get("verdict"), str):
        found["judge"] = NotebookNode(passed=judge.get("passed") is True,
                                      verdict=judge["verdict"])
    return NotebookNode(found)


def safe(nb, bounds=BOUNDS, strict=False):
    """The notebook nb as its feedback page may show it (docs/security.md, section 3), a
    new NotebookNode; strict: every output cut, every source shortened to a tenth."""
    chars = bounds.cell_chars // 10 if strict else bounds.cell_chars
    outputs_left = 0 if strict else bounds.outputs_bytes
    sources_left = bounds.sources_chars // 10 if strict else bounds.sources_chars
    language = nb.metadata.get("language_info")
    language = {k: v for k, v in language.items() if k in ("name", "pygments_lexer")
                and isinstance(v, str) and _LEXER.fullmatch(v)} if isinstance(
        language, dict) else {}
    cells, hidden = [], 0
    for cell in nb.cells:
        metadata = _cell_metadata(cell)
        graded = "nbgrader" in metadata and (metadata.nbgrader.get("grade") or
                                             metadata.nbgrader.get("solution"))
        if len(cells) >= bounds.cells and not graded:
            hidden += 1
            continue
        source = _text(cell.get("source")) or ""
        limit = min(chars, max(sources_left, 0)) if not graded else chars
        if len(source) > limit:
            source = source[:limit] + f"\n[feedback: {len(source) - limit} more characters " \
                                      "of this cell are not shown]"
        sources_left -= len(source)
        kind = cell.get("cell_type")
        cell_id = cell.get("id") if isinstance(cell.get("id"), str) and _ID.fullmatch(
            cell.get("id")) else f"cell-{len(cells)}"
        if kind == "code":
            new = NotebookNode(cell_type="code", id=cell_id, metadata=metadata, source=source,
                               outputs=[],
                               execution_count=cell.get("execution_count") if type(
                                   cell.get("execution_count")) is int else None)
            for output in cell.get("outputs") or []:
                if not isinstance(output, dict):
                    continue
                shown = _output(NotebookNode(output), bounds)
                size = len(json.dumps(shown))
                if size > min(bounds.output_bytes, outputs_left):
                    shown = _note(f"an output of {_megabytes(size)} is not shown: a page shows "
                                  f"outputs of at most {_megabytes(bounds.output_bytes)} each, "
                                  f"{_megabytes(bounds.outputs_bytes)} in all")
                    size = len(json.dumps(shown))
                outputs_left -= size
                new.outputs.append(shown)
        else:  # markdown, and a raw cell's text as markdown (sanitized alike)
            new = NotebookNode(cell_type="markdown", id=cell_id, metadata=metadata,
                               source=source)
        cells.append(new)
    if hidden:
        cells.append(NotebookNode(cell_type="markdown", id="feedback-hidden",
                                  metadata=NotebookNode(),
                                  source=f"[feedback: {hidden} more cells are not shown: a "
                                         f"page shows {bounds.cells} at most]"))
    return NotebookNode(nbformat=4, nbformat_minor=5, cells=cells,
                        metadata=NotebookNode(language_info=NotebookNode(language)))


class PageRefused(ValueError):
    """A page not written (nbgrader's generate_feedback then writes none of its student's
    assignment, and goes on with the others). Its message begins with the student, the
    assignment and the notebook, which `feedback` reads in nbgrader's log to say so."""


class PageTooLarge(PageRefused):
    """A notebook whose feedback page stays over BOUNDS.page_bytes, however cut."""


class PageTooSlow(PageRefused):
    """A notebook whose feedback page took more than c.Grading.feedback_timeout to make."""


REFUSED = re.compile(r"^tools\.instructor\.feedback\.Page\w+: (\S+) (\S+) (\S+): (.*)$", re.M)
_FAILED = "There was an error processing assignment '"  # (nbgrader's log, once a failure)


class FeedbackExporter(HTMLExporter):
    """The feedback page's exporter (nbgrader_config.py): nbconvert's HTML exporter without
    its last pass, which parses the whole page again (BeautifulSoup) to give the cells of
    JupyterLab's template a tabindex and images without one an alt text. That pass was
    over half of a page's time (0.65 s of CPU; a class of 300 has 1,800 pages), and the
    feedback template (nbconvert's classic, through nbgrader's) has no such cell: the alt
    text is added here, where an image has none."""

    def from_filename(self, filename, resources=None, **kw):
        """nbconvert's (the notebook read, then from_notebook_node), within
        c.Grading.feedback_timeout seconds (tools/course/deadline.py): PageTooSlow past
        them."""
        from tools.course.settings import Grading

        seconds = Grading(config=self.config).feedback_timeout
        try:
            with deadline(seconds):
                return super().from_filename(filename, resources, **kw)
        except TimeUp:
            raise PageTooSlow(f"{_whose(resources)}: its page took more than {seconds} s to "
                              "make (c.Grading.feedback_timeout)") from None

    def from_notebook_node(self, nb, resources=None, **kw):
        """(html, resources) of the notebook nb as `safe` keeps it, with the filters
        HTMLExporter sets for it: code highlighted in the notebook's language, outputs by
        display priority. Over BOUNDS.page_bytes, made again strictly; PageTooLarge if it
        is over even then."""
        self._strict = False
        page, kept = self._page(nb, resources, **kw)
        if len(page.encode()) > BOUNDS.page_bytes:
            self._strict = True
            page, kept = self._page(nb, resources, **kw)
        if len(page.encode()) > BOUNDS.page_bytes:
            raise PageTooLarge(f"{_whose(resources)}: its page is over "
                               f"{_megabytes(BOUNDS.page_bytes)} even with every output cut")
        return page, kept

    def _preprocess(self, nb, resources):
        """The notebook after nbgrader's preprocessors (its grades and comments in the
        cells' metadata), as `safe` keeps it."""
        nb, resources = super()._preprocess(nb, resources)
        return safe(nb, strict=getattr(self, "_strict", False)), resources

    def _page(self, nb, resources=None, **kw):
        language = nb.metadata.get("language_info", {})
        lexer = language.get("pygments_lexer", language.get("name"))
        self.register_filter("highlight_code", self.filters.get(
            "highlight_code", Highlight2HTML(pygments_lexer=lexer, parent=self)))
        resources = self._init_resources(resources)
        self.register_filter("filter_data_type", WidgetsDataTypeFilter(
            notebook_metadata=self._nb_metadata, parent=self, resources=resources))
        page, resources = TemplateExporter.from_notebook_node(self, nb, resources, **kw)
        return re.sub(r"<img\b(?![^>]*\balt=)", f"<img {NO_ALT}", page), resources


def _whose(resources):
    """'student assignment notebook' of a page's resources (nbgrader's), for PageRefused."""
    info = (resources or {}).get("nbgrader", {})
    return " ".join(str(info.get(k, "?")) for k in ("student", "assignment", "notebook"))


def generate(root, target):
    """nbgrader's generate_feedback of target (an assignment, or "*"), every submission's
    pages made again; returns {(assignment, student): why} of those it refused a page
    (PageRefused: they have none), read in its log. Any other failure of nbgrader's stops
    the command, with its log."""
    result = nbgrader(root, "generate_feedback", target, "--force", check=False)
    log = result.stdout + result.stderr
    refused = {(a, s): f"{notebook}: {why}" for s, a, notebook, why in REFUSED.findall(log)}
    if result.returncode != 0 and log.count(_FAILED) != len(refused):
        raise SystemExit(f"nbgrader generate_feedback {target} failed:\n{log}")
    return refused


def feedback(root, names=(), exchange=False, lms=None):
    """The feedback of these assignments (all if none), released ones alone (a unit not yet
    given out has none: named, it is said so): the pages, one zip per student, and with
    lms the LMS's bulk upload (tools/lms/feedback_upload.py). One with no submission graded yet is
    said to be so (nbgrader's generate_feedback would fail on it)."""
    # (imported here: nbgrader's processes import this module for its exporter, and need
    # none of these)
    from tools.instructor.collect import read_collected
    from tools.instructor.release import released
    from tools.lms import feedback_upload

    root = Path(root)
    course = Course.load(root)
    asked, given = assignment_names(root, course, names), released(root, course)
    for name in names:
        if name not in given:
            print(f"{name}: not released yet (make release A={name}): no feedback")
    names = [name for name in asked if name in given]
    graded = [name for name in names if any(root.glob(f"autograded/*/{name}"))]
    refused = {}
    for target in targets(course, graded) if graded else []:
        refused.update(generate(root, target))
    for (name, student), why in sorted(refused.items()):
        (root / "feedback_zips" / name / f"{student}.zip").unlink(missing_ok=True)
        print(f"feedback for {name} {student}: NONE ({why}): a grader may look at "
              f"autograded/{student}/{name}/ in formgrader")
    for name in names:
        if name not in graded:
            print(f"feedback for {name}: no submission graded yet (make autograde)")
            continue
        if exchange:  # (before _pages: it reads each folder's timestamp and secret)
            run(root, "release_feedback", name)
        pages = _pages(root, name)
        zips = root / "feedback_zips" / name
        zips.mkdir(parents=True, exist_ok=True)
        for student, found in pages.items():
            with zipfile.ZipFile(zips / f"{student}.zip", "w", zipfile.ZIP_DEFLATED) as z:
                for page in found:
                    z.write(page, f"{name}/{page.name}")
        print(f"feedback for {name}: feedback/*/{name}/, one zip per student in "
              f"feedback_zips/{name}/ ({len(pages)})")
        if lms in feedback_upload.BULK:
            written = feedback_upload.write(root, name, lms, pages, read_collected(root, name))
            feedback_upload.report(root, name, lms, *written)
        elif lms:
            print(f"  {lms.capitalize()} has no bulk feedback upload here: upload each "
                  f"student's feedback_zips/{name}/<student>.zip (docs/instructors.md, step 6)")


def _pages(root, name):
    """{student: [their pages of the assignment]}, once every file of feedback/*/<name>/
    but the pages is removed (nbgrader copies the autograded folder's other files beside
    them: a folder graded before 2026-12-07 holds the course's files, which workers no
    longer return)."""
    for path in root.glob(f"feedback/*/{name}/**/*"):
        if path.is_file() and path.suffix != ".html":
            path.unlink()
    for path in sorted(root.glob(f"feedback/*/{name}/**/"), reverse=True):
        if path.is_dir() and not any(path.iterdir()):
            path.rmdir()
    return {p.parent.name: sorted(p.glob("*.html"))
            for p in sorted(root.glob(f"feedback/*/{name}")) if p.is_dir()}


class HideHiddenTests(FoldHiddenTests):
    """At generate_feedback, in every check cell: the hidden-test block folded (as it ran
    at autograde), and an error keeps its type and message but loses its traceback (whose
    context lines would quote the check). The student still reads which check failed and
    why: the checks' messages name the case (shape, dtype, arguments) and the difference,
    and the judge's verdict under each check (put in its metadata by Judged at autograde,
    shown by tools/instructor/templates/judged) says whether the hidden tests passed."""

    def preprocess_cell(self, cell, resources, index):
        cell, resources = super().preprocess_cell(cell, resources, index)
        if is_check(cell):
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    output.traceback = [f"{output.ename}: {output.evalue}"]
        return cell, resources


class WaitingAnswers(NbGraderPreprocessor):
    """At generate_feedback: each written answer that waits for a grader (no manual score,
    nbgrader's needs_manual_grade) is marked `waiting` in its nbgrader metadata, which the
    feedback page (tools/instructor/templates/judged) shows as "not yet graded" rather than 0."""

    def preprocess(self, nb, resources):
        from nbgrader.api import Gradebook

        info = resources["nbgrader"]
        with Gradebook(info["db_url"]) as gb:
            self._waiting = {
                g.name for g in gb.find_submission_notebook(
                    info["notebook"], info["assignment"], info["student"]).grades
                if g.manual_score is None and g.needs_manual_grade}
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, index):
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") and meta.get("grade"):
            meta.pop("waiting", None)
            if meta.get("grade_id") in self._waiting:
                meta["waiting"] = True
        return cell, resources
