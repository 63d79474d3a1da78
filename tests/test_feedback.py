"""tools/feedback.py's exporter: the page nbconvert's HTMLExporter makes with the course's
settings (nbgrader_config.py), element for element, without its slow last pass; an image
without alt text gets nbconvert's."""

import base64

import nbformat
from bs4 import BeautifulSoup
from nbconvert.exporters import HTMLExporter
from nbgrader.converters import GenerateFeedback
from nbgrader.coursedir import CourseDirectory
from traitlets.config.loader import PyFileConfigLoader

from tests.conftest import REPO
from tools.feedback import NO_ALT, FeedbackExporter

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
    assert feedback_app().exporter_class is FeedbackExporter
    nb = notebook()
    ours, theirs = page(FeedbackExporter, nb), page(HTMLExporter, nb)
    normal = str(BeautifulSoup(ours, "html.parser"))  # (the pass serializes it anew)
    assert normal == str(BeautifulSoup(theirs, "html.parser"))
    assert 'class="k">def</span>' in ours  # highlighted as Python
    assert ours.count("<img") == 2 and ours.count(NO_ALT) == 1 and 'alt="a plot"' in ours
    assert "<script>" not in ours and "onclick" not in ours  # (sanitized, as before)
