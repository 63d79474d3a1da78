"""tools/instructor/markdown.py: the markdown of the course's pages (feedback, the rubric), sanitized,
with its math as MathML rendered ahead of time (no MathJax from a CDN)."""

from tools.instructor.markdown import mathml, sanitize, tex_in, tex_out


def render(markdown):
    from nbconvert.filters import markdown2html

    return str(tex_in(sanitize(markdown2html(tex_out(markdown)))))


def test_math_becomes_mathml_inline_and_displayed():
    page = render("The mean $\\mu = \\frac{1}{N}\\sum_i x_i$ and\n\n$$\\hat x = (x - \\mu)\\,r$$\n")
    assert page.count("<math") == 2 and 'display="inline"' in page and 'display="block"' in page
    assert "<mfrac>" in page and "$" not in page and "MATHTOKEN" not in page


def test_what_is_not_math_stays_text():
    page = render("It costs \\$5, and `$ make test` runs it; so does $ make.\n")
    assert "<math" not in page and "$ make test" in page and "5" in page


def test_a_formula_whose_mathml_would_carry_html_is_shown_as_its_tex():
    assert mathml("\\text{<img src=x onerror=alert(1)>}") is None
    page = render("$\\text{<img src=x onerror=alert(1)>}$")
    assert "<img" not in page and "&lt;img" in page


def test_the_sanitizer_keeps_markdown_and_removes_the_rest():
    page = render("## A title\n\nSome *text*.\n\n```python\nx = 1\n```\n\n| a | b |\n|---|---|\n"
                  "| 1 | 2 |\n\n<script>alert(1)</script><img src=x onerror=alert(1)>"
                  '<p style="color: red" onclick="x()">styled</p>')
    for kept in ("<h2", "<em>text</em>", "<pre", "<table>", "<td>1</td>", "styled"):
        assert kept in page, kept
    for removed in ("<script", "onerror", "onclick", "style="):
        assert removed not in page, removed
    assert sanitize('<a href="javascript:alert(1)">x</a>') == "<a>x</a>"
    # an image keeps its alt text, not its source: a page loads nothing from anywhere
    assert sanitize('<img src="https://evil.example/x.png" alt="a plot">') == '<img alt="a plot">'
