"""The bounds on what a student sends: one typed object (Bounds), the numbers that
docs/security.md promises. Each is checked before the work it bounds (nothing is inflated,
walked further or rendered past its bound), and a submission over one is refused with its
reason, in seconds: collect (tools/instructor/unpack.py, tools/instructor/roster.py), grading
(tools/worker/stage.py: a notebook's bytes and cells) and the feedback page
(tools.instructor.feedback.safe) read them from BOUNDS. A student id keeps the rule of
id_problem (its reasons: docs/security.md, section 1, "the student id").

An honest submission is far inside each: a unit's notebook with its figures is about
1 MB, its normlib/ a dozen files of a few KB, its zip a few dozen listings.
"""

import dataclasses
import unicodedata

MiB = 1 << 20


@dataclasses.dataclass(frozen=True)
class Bounds:
    # an entry of the LMS's download (a zip, or a folder: tools/instructor/unpack.py)
    listings: int = 1000  # listings in a zip (folders and junk included), files and folders
    # in a folder
    directory_bytes: int = 1 << 20  # a zip's listing itself (its central directory)
    depth: int = 16  # folders deep, in a zip or a folder
    name_bytes: int = 255  # of one part of a path (a file system's bound, in UTF-8)
    entry_bytes: int = 64 * MiB  # a zip's or a folder's files in all (listed sizes)
    file_bytes: int = 32 * MiB  # one file (a notebook with its outputs)
    ratio: int = 2000  # a zip listing's size over its compressed size (DEFLATE's ceiling
    # is about 1032: only a listing that lies about its size is over it)
    kept: int = 64  # files kept of a submission (its notebooks and normlib/*.py)
    submits: int = 100  # a student's folders of one assignment in nbgrader's exchange
    # (one a `nbgrader submit`: tools/instructor/inbound.py)
    # a submitted notebook at grading (tools/worker/stage.py), read only within file_bytes
    notebook_cells: int = 1000  # its cells, counted before nbformat and nbgrader read them
    # (the course's largest notebook has 81; nbgrader's autograde took 13 minutes over
    # 100,000 cells, its feedback 5; a page shows `cells` of them)
    # who sent it (tools/instructor/roster.py)
    id_chars: int = 64  # of a student id (and at most name_bytes in UTF-8: a folder's name)
    # the feedback page (tools.instructor.feedback.safe)
    page_bytes: int = 5 * MiB  # a whole page, at most
    output_bytes: int = 1 * MiB  # one output shown; a larger one is cut, with a note
    outputs_bytes: int = 3 * MiB  # all the outputs of a notebook shown
    cell_chars: int = 50_000  # a cell's source shown; a longer one is cut, with a note
    sources_chars: int = 400_000  # the sources of a notebook's cells shown (unit 3's: 54,000)
    cells: int = 1000  # cells shown (every graded cell is, whatever its place)
    image_pixels: int = 10_000  # an image's width or height (metadata), at most


BOUNDS = Bounds()


def id_problem(student_id, bounds=BOUNDS):
    """Why a student id is refused (docs/security.md, section 1), or None."""
    if not isinstance(student_id, str) or not student_id:
        return "an empty student id"
    shown = repr(student_id[:40])
    size = len(student_id.encode(errors="surrogatepass"))  # (a name of no UTF-8's bytes)
    if len(student_id) > bounds.id_chars or size > bounds.name_bytes:
        return f"a student id of more than {bounds.id_chars} characters ({shown}...)"
    if unicodedata.normalize("NFC", student_id) != student_id:
        return f"a student id not in Unicode's normal form NFC ({shown})"
    if not student_id[0].isalnum():
        return f"a student id must start with a letter or a digit ({shown})"
    bad = sorted({c for c in student_id if not (c.isalnum() or c in "_.-" or
                                                unicodedata.category(c)[0] == "M")})
    if bad:
        return f"a student id may hold only letters, marks, digits, '_', '.' and '-' " \
               f"({shown} holds {''.join(bad)!r})"
    return None


def fold(student_id):
    """What two ids that differ only in case or Unicode normalization have in common."""
    return unicodedata.normalize("NFKC", student_id).casefold()
