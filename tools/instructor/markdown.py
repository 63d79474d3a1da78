"""Markdown as the course's pages (feedback, the rubric) show it: sanitized, its math MathML.

    tex_out(markdown)  the math spans ($...$, $$...$$) as tokens markdown and sanitize keep
    sanitize(html)     only the elements and attributes markdown makes: no class, id, style,
                       data: link or image source (nh3); also for a page's HTML outputs
    tex_in(html)       each token as MathML (or as the TeX, escaped, where it cannot become
                       MathML of MathML's own elements alone)

A feedback page renders a markdown cell as `tex_out | markdown2html | sanitize | tex_in`
(tools/instructor/templates/judged; rubric.py alike): the student's markdown is sanitized,
and only MathML that this module checked comes in after. Math is rendered ahead of time so
that no page loads a script (MathJax from a CDN). nh3 replaces nbconvert's clean_html
(bleach), which keeps any class and id: a student's box could pass for the judge's.
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
