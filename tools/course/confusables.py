"""Look-alike ids and names: Unicode's confusable skeletons (UTS #39, section 4).

    skeleton(text) -> str    the same for two strings a reader cannot tell apart
    key(student_id) -> str   what two ids of one class must not share (fold, then skeleton)

Two strings are confusable where their skeletons are equal: "Ada Lov\u0435lace" (a Cyrillic
"\u0435") and "Ada Lovelace", "s1001" and "sl00l". UTS #39 (revision 31, Unicode 17.0.0):
skeleton(X) is X in NFD, its default-ignorable code points removed, each code point replaced
by its prototype in confusables.txt, and the result in NFD again.

The data: tools/course/confusables.txt, Unicode's confusables.txt 17.0.0 trimmed to its
mappings (source and prototype; its header says where the whole file is). Decision (issue
58): no maintained, small PyPI package computes this skeleton. `confusables` (1.2.0, 2021)
matches words through its own symmetric table and has no skeleton; `confusable-homoglyphs`
lists a character's homoglyphs without their prototype; `disarm` (a 2 MB Rust extension)
builds a key of its own that leaves out TR39 mappings on purpose (m -> rn, 1 -> l in lower
case); PyICU's SpoofChecker needs ICU built from source. So the skeleton, six lines, is
here, on Unicode's own data.

Default_Ignorable_Code_Point is not in Python's unicodedata: read here as the format
characters (Cf: soft hyphen, zero-width joiners, bidi controls, tags) and DEFAULT_IGNORABLE
below (variation selectors, the combining grapheme joiner, Hangul fillers, Mongolian
free variation selectors), which is that property's list less unassigned code points.
"""

import functools
import unicodedata
from pathlib import Path

from tools.course.bounds import fold

DATA = Path(__file__).with_name("confusables.txt")
DEFAULT_IGNORABLE = frozenset(
    [0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x3164, 0xFFA0, *range(0x180B, 0x1810),
     *range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0)])


@functools.cache
def prototypes():
    """{source character: its prototype} of tools/course/confusables.txt."""
    found = {}
    for line in DATA.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            source, target = line.split(" ; ")
            found[chr(int(source, 16))] = "".join(chr(int(c, 16)) for c in target.split())
    return found


def _ignorable(c):
    """Whether c is a default-ignorable code point (see the module's docstring)."""
    return unicodedata.category(c) == "Cf" or ord(c) in DEFAULT_IGNORABLE


def skeleton(text):
    """UTS #39's skeleton of text."""
    table = prototypes()
    text = unicodedata.normalize("NFD", text)
    return unicodedata.normalize("NFD", "".join(table.get(c, c) for c in text
                                                if not _ignorable(c)))


def key(student_id):
    """What two ids that differ only in case, normalization or look-alike characters have
    in common: the skeleton of the id folded (tools.course.bounds.fold)."""
    return skeleton(fold(student_id))
