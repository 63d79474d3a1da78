"""tools/instructor/feedback.py's exporter: the page nbconvert's HTMLExporter makes with the course's
settings (nbgrader_config.py), element for element, without its slow last pass; an image
without alt text gets nbconvert's."""

import base64

import nbformat
import pytest
from bs4 import BeautifulSoup
from nbconvert.exporters import HTMLExporter
from nbconvert.preprocessors import Preprocessor
from nbgrader.converters import GenerateFeedback
from nbgrader.coursedir import CourseDirectory
from traitlets.config.loader import PyFileConfigLoader

from tests.conftest import REPO
from tools.course.bounds import BOUNDS
from tools.instructor.feedback import NO_ALT, FeedbackExporter, safe

PNG = base64.b64encode(bytes.fromhex(  # a 1x1 image
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000" "1f15c4890000000d4944415478"
    "9c6360000002000154a24f5d0000000049454e44ae426082")).decode()


def notebook():
    v4 = nbformat.v4
    nb = v4.new_notebook(metadata={"language_info": {"name": "python"}})
    nb.cells = [
        v4.new_markdown_cell("The mean $\\mu = \\frac{1}{H}\\sum_i x_i$ <script>x()</script>"),
        v4.new_code_cell("def f(x):\n    return x ** 2  # squared", outputs=[
            v4.new_output("stream", name="stdout", text="4\n"),
            v4.new_output("display_data", data={"image/png": PNG}),
            v4.new_output("display_data", data={"image/png": PNG},
                          metadata={"image/png": {"alt": "a plot"}}),
            v4.new_output("display_data", data={"text/html": "<b onclick='x()'>bold</b>"}),
            v4.new_output("error", ename="ValueError", evalue="bad", traceback=["ValueError"]),
        ]),
    ]
    return nb


def feedback_app():
    """nbgrader's generate_feedback with the course's settings (its config is what its
    exporter gets)."""
    config = PyFileConfigLoader("nbgrader_config.py", path=str(REPO)).load_config()
    return GenerateFeedback(coursedir=CourseDirectory(config=config), config=config)


def page(exporter_class, nb):
    resources = {"nbgrader": {"notebook": "n", "score": 1.0, "max_score": 2.0,
                              "late_penalty": 0.0}}
    exporter = exporter_class(config=feedback_app().config)
    return exporter.from_notebook_node(nb, resources)[0]


def test_the_page_is_nbconverts_element_for_element():
    """(Of the notebook as the page may show it: tools.instructor.feedback.safe.)"""
    assert feedback_app().exporter_class is FeedbackExporter
    nb = notebook()
    ours, theirs = page(FeedbackExporter, nb), page(HTMLExporter, safe(nb))
    normal = str(BeautifulSoup(ours, "html.parser"))  # (the pass serializes it anew)
    assert normal == str(BeautifulSoup(theirs, "html.parser"))
    assert 'class="k">def</span>' in ours  # highlighted as Python
    # an image's metadata is its width and height alone (tools.instructor.feedback.safe): its own alt
    # text, the student's, is not written into the page, nbconvert's is
    assert ours.count("<img") == 2 and ours.count(NO_ALT) == 2 and 'alt="a plot"' not in ours
    assert "<script>" not in ours and "onclick" not in ours  # (sanitized, as before)


# --- what a submitted notebook may put into its page (issue 39, cases 7, 16, 17, 18) ----

def rendered(cells, metadata=None):
    """The body of the feedback page of a notebook of these cells (its head is the
    template's: styles)."""
    nb = nbformat.v4.new_notebook(metadata={"language_info": {"name": "python"},
                                            **(metadata or {})})
    nb.cells = cells
    text = page(FeedbackExporter, nb)
    return text[text.index("<body"):]


def image(metadata):
    return nbformat.v4.new_code_cell("plot()", outputs=[nbformat.v4.new_output(
        "display_data", data={"image/png": PNG}, metadata={"image/png": metadata})])


def test_an_images_metadata_is_its_integer_width_and_height_alone():
    """Case 7: width "1 onload=alert(document.domain)//" was written unquoted into <img>;
    `filenames` goes into its src. Only integer width and height reach the page."""
    text = rendered([image({"width": "1 onload=alert(document.domain)//"}),
                     image({"width": 320, "height": 240, "filenames": {
                         "image/png": "x\" onerror=\"alert(1)"}, "unconfined": True}),
                     image({"width": 10 ** 9, "height": -5})])
    assert "onload" not in text and "onerror" not in text and "alert" not in text
    assert text.count("<img") == 3 and "width=320" in text and "height=240" in text
    assert "width=1000000000" not in text and "height=-5" not in text


def test_image_data_that_is_not_base64_is_not_shown():
    """Own case (rule 6): an image's data goes into a src: a quote there would end it."""
    cell = nbformat.v4.new_code_cell("x", outputs=[nbformat.v4.new_output(
        "display_data", data={"image/png": 'AAAA" onerror="alert(1)', "text/plain": "fig"})])
    text = rendered([cell])
    assert "onerror" not in text and "<img" not in text and "fig" in text


def test_markdown_keeps_no_class_or_id_so_nothing_passes_for_the_judges_box():
    """Case 16: `<div class="panel panel-primary nbgrader_cell">The judge: passed</div>` and
    an id that the summary's link lands on reached the page."""
    forged = ('<div class="panel panel-primary nbgrader_cell" id="ex1_1_layer_norm_stats">'
              'The judge: passed</div>\n\n<h2 id="ex1_2">Title</h2><span class="x" '
              'style="color: green">green</span>')
    html_output = nbformat.v4.new_output("display_data", data={"text/html": forged})
    text = rendered([nbformat.v4.new_markdown_cell(forged),
                     nbformat.v4.new_code_cell("x", outputs=[html_output])])
    assert 'id="ex1_1_layer_norm_stats"' not in text and 'id="ex1_2"' not in text
    assert "panel-primary nbgrader_cell" not in text and 'class="x"' not in text
    assert "color: green" not in text and text.count("The judge: passed") == 2  # as text


def test_markdown_keeps_no_data_link():
    """Case 17: data: links survived markdown sanitizing."""
    link = "data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg=="
    text = rendered([nbformat.v4.new_markdown_cell(
        f"[click]({link}) <a href='{link}'>too</a> <img src='{link}'>")])
    assert link not in text and "click" in text


def test_a_30_mb_output_is_cut_and_the_page_stays_under_its_bound():
    """Case 18: a 30 MB output gave a 29.5 MB page."""
    big = nbformat.v4.new_output("stream", name="stdout", text="x" * 30_000_000)
    text = rendered([nbformat.v4.new_code_cell("print('x' * 30_000_000)", outputs=[big]),
                     nbformat.v4.new_code_cell("1 + 1", outputs=[nbformat.v4.new_output(
                         "execute_result", data={"text/plain": "2"}, execution_count=2)])])
    assert len(text.encode()) < BOUNDS.page_bytes - 300_000  # (the head: its styles)
    assert "[feedback: an output of 30.0 MB is not shown: a page shows outputs of at most " \
           "1.0 MB each, 3.1 MB in all]" in text
    assert "xxxx" not in text and ">2</pre>" in text


def test_the_bounds_hold_at_their_edges_and_graded_cells_always_show():
    """Own case (rule 5, the page): an output of exactly BOUNDS.output_bytes is not shown
    whole (its JSON is larger), the cells past BOUNDS.cells are not shown but graded ones,
    a source past BOUNDS.cell_chars is cut."""
    v4 = nbformat.v4
    cells = [v4.new_markdown_cell(f"cell {i}") for i in range(BOUNDS.cells + 5)]
    cells.append(v4.new_code_cell("# the check", metadata={"nbgrader": {
        "grade": True, "grade_id": "ex1_1_layer_norm_stats", "points": 3, "score": 0, "locked": True,
        "solution": False}}))
    cells.append(v4.new_markdown_cell("y" * (BOUNDS.cell_chars + 1)))
    kept = safe(v4.new_notebook(cells=cells))
    assert len(kept.cells) == BOUNDS.cells + 2  # the bound, the graded cell, the note
    assert kept.cells[-2].metadata.nbgrader.grade_id == "ex1_1_layer_norm_stats"
    assert kept.cells[-1].source == "[feedback: 6 more cells are not shown: a page shows " \
                                    f"{BOUNDS.cells} at most]"
    long = safe(v4.new_notebook(cells=[cells[-1]])).cells[0].source
    assert long.startswith("y" * BOUNDS.cell_chars) and long.endswith(
        "[feedback: 1 more characters of this cell are not shown]")


@pytest.mark.parametrize("case", ["svg", "javascript", "widget", "raw html",
                                  "forged grade id", "notebook widgets"])
def test_what_a_page_does_not_render(case):
    """Own case (rule 6): MIME types off the allow-list, a raw cell's HTML, a graded cell's
    id the course cannot have written, the notebook's widget state: none reaches the page
    as markup."""
    v4 = nbformat.v4
    script = "<script>document.title='owned'</script>"
    cells, metadata = [], None
    if case == "svg":
        cells = [v4.new_code_cell("x", outputs=[v4.new_output("display_data", data={
            "image/svg+xml": f"<svg onload=\"alert(1)\">{script}</svg>"})])]
    elif case == "javascript":
        cells = [v4.new_code_cell("x", outputs=[v4.new_output("display_data", data={
            "application/javascript": "document.title='owned'"})])]
    elif case == "widget":
        cells = [v4.new_code_cell("x", outputs=[v4.new_output("display_data", data={
            "application/vnd.jupyter.widget-view+json": {"model_id": f"</script>{script}"}})])]
    elif case == "raw html":
        cells = [v4.new_raw_cell(script, metadata={"raw_mimetype": "text/html"})]
    elif case == "forged grade id":
        cells = [v4.new_code_cell("x", metadata={"nbgrader": {
            "grade": True, "grade_id": f'x"><img src=y onerror=alert(1)>{script}',
            "points": 1}, "judge": {"passed": True, "verdict": "The judge: passed"}})]
    else:
        metadata = {"widgets": {"application/vnd.jupyter.widget-state+json": {
            "state": f"</script>{script}"}}}
    text = rendered(cells or [v4.new_markdown_cell("text")], metadata)
    assert "<script" not in text and "onload" not in text and "onerror" not in text


# --- the page's frame (issue 40, point 8) ----------------------------------------------

def answer(score=None):
    """A written answer's cell as nbgrader's feedback gives it: graded (score), or waiting
    for a grader (tools.instructor.feedback.WaitingAnswers' mark)."""
    grader = {"grade": True, "solution": True, "grade_id": "q1_1_why_eps", "points": 2,
              "score": score or 0.0, **({"waiting": True} if score is None else {})}
    return nbformat.v4.new_markdown_cell("Because the variance may be 0.",
                                         metadata={"nbgrader": grader})


def check(passed):
    return nbformat.v4.new_code_cell("# Exercise 1.1", metadata={
        "nbgrader": {"grade": True, "grade_id": "ex1_1_layer_norm_stats", "points": 3,
                     "score": 3.0 if passed else 0.0, "locked": True, "solution": False},
        "judge": {"passed": passed, "verdict": f"The judge: {'passed' if passed else 'failed'}"}})


@pytest.mark.parametrize("score", [None, 1.5])
def test_the_page_has_no_empty_bar_and_no_stale_header(score):
    """The grey bar at the top of the page was nbgrader's heading with its contents hidden
    by a style, and the hidden table of contents still read "Written response (Score: 0.0
    / 2.0)" for an answer not yet graded: the page has neither, every heading it has says
    something, and the answer's says "not yet graded" until a grader scores it."""
    nb = nbformat.v4.new_notebook(metadata={"language_info": {"name": "python"}})
    nb.cells = [check(True), answer(score)]
    text = page(FeedbackExporter, nb)
    soup = BeautifulSoup(text, "html.parser")
    assert text.count("<body") == 1 and soup.find(id="toc") is None and soup.find("h4") is None
    assert "Written response" not in text and "#toc" not in text
    headings = [" ".join(h.get_text(" ").split()) for h in soup.select(".panel-heading")]
    said = "not yet graded (2.0 points)" if score is None else "Score: 1.5 / 2.0"
    assert headings == ["Grade cell: ex1_1_layer_norm_stats Score: 3.0 / 3.0 (Top)",
                        f"Your answer {said}"]
    summary = " ".join(soup.find(attrs={"data-judge": "summary"}).get_text(" ").split())
    assert summary.startswith("n : 1.0 / 2.0 points so far" + (
        " (1 written answer not yet graded)." if score is None else "."))
    assert summary.endswith(f"q1_1_why_eps : {said.removeprefix('Score: ')}")


class Endless(Preprocessor):
    """A step that does not end (standing for nbgrader's steps over a long notebook)."""

    def preprocess(self, nb, resources):
        while True:
            pass


def test_a_page_past_its_time_is_refused_naming_its_student(tmp_path):
    """c.Grading.feedback_timeout bounds a page's making, its reading included: past it,
    PageTooSlow, which names the student, the assignment and the notebook."""
    import time

    from tools.instructor.feedback import PageTooSlow

    config = feedback_app().config
    config.Grading.feedback_timeout = 1
    exporter = FeedbackExporter(config=config)
    exporter.register_preprocessor(Endless(), enabled=True)
    nbformat.write(notebook(), tmp_path / "n.ipynb")
    resources = {"nbgrader": {"student": "s2", "assignment": "unit1", "notebook": "n",
                              "score": 1.0, "max_score": 2.0, "late_penalty": 0.0}}
    start = time.monotonic()
    with pytest.raises(PageTooSlow, match=r"^s2 unit1 n: its page took more than 1 s to make "
                                          r"\(c\.Grading\.feedback_timeout\)$"):
        exporter.from_filename(str(tmp_path / "n.ipynb"), resources)
    assert time.monotonic() - start < 10


def test_feedback_goes_on_past_a_refused_page_and_says_so(tmp_path, monkeypatch):
    """`generate` reads nbgrader's log: each refused page (PageRefused, its student named)
    is reported, the other students' pages stand; any other failure stops the command
    with nbgrader's log."""
    import subprocess

    from tools.instructor import feedback

    def failing(*lines):
        log = "".join(f"[GenerateFeedback | ERROR] {line}\n" for line in lines)
        return lambda *args, **kw: subprocess.CompletedProcess(args, 1, "", log)

    ours = ["There was an error processing assignment: /c/autograded/s2/unit1",
            "Traceback (most recent call last):\n  File \"x\", line 1, in y\n"
            "tools.instructor.feedback.PageTooSlow: s2 unit1 01_layernorm_forward: its page "
            "took more than 60 s to make (c.Grading.feedback_timeout)",
            "There was an error processing assignment 'unit1' for student 's2'"]
    monkeypatch.setattr(feedback, "nbgrader", failing(*ours))
    assert feedback.generate(tmp_path, "unit1") == {("unit1", "s2"): (
        "01_layernorm_forward: its page took more than 60 s to make "
        "(c.Grading.feedback_timeout)")}
    monkeypatch.setattr(feedback, "nbgrader", failing(
        *ours, "There was an error processing assignment 'unit1' for student 's3'"))
    with pytest.raises(SystemExit, match="nbgrader generate_feedback unit1 failed:\n"):
        feedback.generate(tmp_path, "unit1")
