"""Look-alike ids and names: Unicode's confusable skeletons (UTS #39, section 4).

    skeleton(text) -> str    the same for two strings a reader cannot tell apart
    key(student_id) -> str   what two ids of one class must not share (fold, then skeleton)

Two strings are confusable where their skeletons are equal: "Ada Lov\u0435lace" (a Cyrillic
"\u0435") and "Ada Lovelace", "s1001" and "sl00l". skeleton(X) is X in NFD, its
default-ignorable code points removed, each code point replaced by its prototype in
tools/course/confusables.txt (Unicode's confusables.txt 17.0.0, trimmed to its mappings),
and the result in NFD again. Python's unicodedata has no Default_Ignorable_Code_Point: it is
read here as the format characters (Cf) and DEFAULT_IGNORABLE (the rest of that property,
less unassigned code points). No small, maintained PyPI package computes this skeleton.
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
