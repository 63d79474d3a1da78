"""Markdown as the pages the course writes (feedback, the rubric) show it: sanitized HTML,
its math (TeX: $...$, $$...$$) rendered ahead of time as MathML, which every current
browser renders itself, so that no page loads a script (MathJax, from a CDN) to show it.

    tex_out(markdown)  the math spans as tokens that markdown and the sanitizer leave as
                       they are
    sanitize(html)     the HTML of markdown, with only the elements and attributes markdown
                       makes, and no class, id, style, data: link or image source (nh3:
                       ammonia's parser); the feedback page also cleans HTML outputs with it, in
                       place of nbconvert's clean_html (bleach, which keeps any class and
                       id: a student's box could pass for the judge's)
    tex_in(html)       each token as MathML (or, where the TeX cannot be converted to
                       MathML made only of MathML's own elements, as the TeX, escaped)

A feedback page renders a markdown cell as `source | tex_out | markdown2html | sanitize |
tex_in` (tools/instructor/templates/judged): the student's markdown is sanitized, and what comes in
after is MathML that latex2mathml made and this module checked element by element.
"""

import html
import re

import nh3
from latex2mathml.converter import convert
from markupsafe import Markup

_TAGS = {"a", "abbr", "b", "blockquote", "br", "code", "dd", "del", "details", "div", "dl",
         "dt", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "kbd", "li",
         "ol", "p", "pre", "s", "span", "strong", "sub", "summary", "sup", "table", "tbody",
         "td", "th", "thead", "tr", "ul"}
# no class, id or style anywhere: a student's markup must not look like the page's own (the
# judge's verdicts, nbgrader's answer boxes) nor become a target of its links
_HTML_ATTRIBUTES = {"a": {"href", "title"}, "img": {"src", "alt", "title"},
                    "td": {"align"}, "th": {"align"}}
_SCHEMES = {"http", "https", "mailto"}  # (no data:, no javascript:)

_MATH = re.compile(r"(?<!\\)\$\$(.+?)\$\$|(?<![\\$])\$(?![\s$])([^$\n]+?)(?<![\s\\])\$", re.S)
_TOKEN = re.compile(r"MATHTOKEN([bi])([0-9a-f]+)X")
# MathML's presentation elements and the attributes latex2mathml writes: nothing else
# (it copies \text{...} through unescaped: "<img onerror=...>" must not reach a page)
_ELEMENTS = {"math", "mi", "mn", "mo", "ms", "mtext", "mrow", "msup", "msub", "msubsup",
             "mfrac", "msqrt", "mroot", "mover", "munder", "munderover", "mtable", "mtr",
             "mtd", "mstyle", "mspace", "mpadded", "menclose", "mphantom", "merror"}
_ATTRIBUTES = {"xmlns", "display", "mathvariant", "stretchy", "fence", "separator",
               "lspace", "rspace", "accent", "accentunder", "columnalign", "rowspacing",
               "columnspacing", "displaystyle", "scriptlevel", "width", "height", "depth",
               "linethickness", "minsize", "maxsize", "movablelimits", "notation", "form",
               "symmetric", "largeop", "mathsize", "linebreak", "columnlines", "rowlines",
               "frame", "framespacing", "equalrows", "equalcolumns", "align", "rowalign"}
_TAG = re.compile(r"<\s*/?\s*([A-Za-z][\w:-]*)([^>]*)>")
_ATTRIBUTE = re.compile(r'([A-Za-z][\w:-]*)\s*=\s*"[^"<>]*"')


def tex_out(markdown):
    """markdown with each math span as a token of letters and digits."""
    def token(match):
        display, tex = ("b", match.group(1)) if match.group(1) is not None else \
            ("i", match.group(2))
        return f"MATHTOKEN{display}{tex.encode().hex()}X"
    return _MATH.sub(token, markdown)


def mathml(tex, display=False):
    """The MathML of a TeX formula, or None if it is not MathML alone."""
    try:
        found = convert(tex, display="block" if display else "inline")
    except Exception:  # (latex2mathml's errors have no common base)
        return None
    for match in _TAG.finditer(found):
        rest = _ATTRIBUTE.sub("", match.group(2)).replace("/", "").strip()
        names = {m.group(1) for m in _ATTRIBUTE.finditer(match.group(2))}
        if match.group(1) not in _ELEMENTS or rest or not names <= _ATTRIBUTES:
            return None
    if re.search(r"<(?![/A-Za-z])|<!|<\?", found):
        return None
    return found


def sanitize(page):
    """The HTML of rendered markdown (or an HTML output) with markdown's own elements alone,
    without class, id or style, links only to http(s) and mailto: anything else (a script,
    an event handler, a style, a form) removed, its text kept."""
    return nh3.clean(str(page), tags=_TAGS, attributes=_HTML_ATTRIBUTES, url_schemes=_SCHEMES,
                     link_rel=None, attribute_filter=_no_source)


def _no_source(tag, attribute, value):
    """An image keeps no src: a page loads nothing (a student's image from the web would
    tell its server who opened the page, and when)."""
    return None if (tag, attribute) == ("img", "src") else value


def tex_in(page):
    """page (HTML, already sanitized) with each token of tex_out as MathML (or its TeX,
    escaped): markup the template inserts as it is."""
    def formula(match):
        display, tex = match.group(1) == "b", bytes.fromhex(match.group(2)).decode()
        fence = "$$" if display else "$"
        return mathml(tex, display) or html.escape(f"{fence}{tex}{fence}")
    return Markup(_TOKEN.sub(formula, str(page)))
