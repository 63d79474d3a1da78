"""Feedback ready to upload: for Moodle and Canvas, one zip per assignment that the LMS's
own bulk feedback upload reads, each page named as its importer finds the student, from
the download's names in each provenance (tools.instructor.collect.read_collected).

    feedback_upload/<assignment>-moodle.zip   Moodle: "Upload multiple feedback files in a zip"
    feedback_upload/<assignment>-canvas.zip   Canvas: "Re-Upload Submissions"

Moodle's importer (importziplib.php) names the participant by the first part of a path that
splits at "_" into four or more pieces, the second a number: each page goes into the folder
the download gave the student, "<Full Name>_<n>_assignsubmission_file/<notebook>.html".
Canvas's (assignment.rb) reads the first two all-digit pieces of a base name split at "_" as
the user id and an attachment id: a page is "<lastfirst>[_LATE]_<user id>_<attachment id>_
<notebook>.html", the student's last upload of it (else their last). A student no such
download named, or whose names an importer would misread, is left out (docs/security.md, section 7).
"""

import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

from tools.lms.downloads import MOODLE_FILE, MOODLE_FOLDER
from tools.lms.downloads import names as lms_names

LMSS = ("moodle", "canvas", "blackboard", "brightspace")
BULK = {"moodle": "Moodle's \"Upload multiple feedback files in a zip\"",
        "canvas": "Canvas's \"Re-Upload Submissions\""}
NAME_BYTES = 255  # (a file name, on both LMSs' file systems)
_DIGITS = re.compile(r"[0-9]+")  # (Ruby's \d: ASCII digits alone)


class Unfit(ValueError):
    """A student whose feedback the LMS's importer would not find (the reason)."""


@dataclass(frozen=True)
class Left:
    """A student left out of the upload, and why."""
    student: str
    reason: str


def _entries(provenance):
    """The original names of the download entries that made a submission (collect's
    provenance: "entries", or its one "entry")."""
    entries = provenance.get("entries") or [provenance.get("entry")]
    return [e for e in entries if isinstance(e, str) and e]


def _listed(provenance):
    """The provenance's entries, as a reason quotes them (each as Python writes a str: no
    control character reaches the terminal; at most 300 characters)."""
    text = ", ".join(map(repr, _entries(provenance))) or "none"
    return text if len(text) <= 300 else text[:297] + "..."


def _canvas(provenance):
    """[(tools.lms.downloads.Name, entry)] of the provenance's entries as Canvas wrote them,
    naming its key (any, if it has none)."""
    key = provenance.get("key")
    return [(name, entry) for entry in _entries(provenance)
            for name in lms_names(entry, False)
            if name.lms == "canvas" and (key is None or name.key == str(key))]


def moodle_folder(provenance):
    """The folder of a student's pages in Moodle's upload: the download's
    "<Full Name>_<n>_assignsubmission_<plugin>" (a folder's name, or a file's start), from
    the provenance's entries; Unfit if none names the participant, or if Moodle's importer
    would read it as another."""
    key = provenance.get("key")
    for entry in _entries(provenance):
        found = MOODLE_FOLDER.fullmatch(entry) or MOODLE_FILE.fullmatch(entry)
        if found and (key is None or found["key"] == str(key)):
            folder = f"{found['name']}_{found['key']}_assignsubmission_{found['plugin']}"
            if "_" in found["name"] or not _DIGITS.fullmatch(found["key"]):
                raise Unfit(f"Moodle's importer would not read participant {found['key']} "
                            f"in {folder!r} (it splits the name at each \"_\")")
            return folder
    raise Unfit(f"no entry of a Moodle download names them ({_listed(provenance)})")


def canvas_prefix(name):
    """The start Canvas gave a student's file: "<lastfirst>[_LATE]_<user id>_<attachment
    id>_", of a tools.lms.downloads.Name of Canvas's."""
    return f"{name.name}{'_LATE' * name.late}_{name.key}_{name.order}_"


def canvas_pick(found, stem):
    """Of a student's Canvas entries [(Name, entry)], the last uploaded of notebook stem
    (Canvas adds "-1", "-2" to a name uploaded again; collect keeps the last), else the
    last uploaded (a zip, a module)."""
    mine = [(n, e) for n, e in found if re.fullmatch(
        rf"{re.escape(stem)}(-[0-9]+)?\.ipynb", e[len(canvas_prefix(n)):])]
    return max(mine or found, key=lambda pair: pair[0].order)


def canvas_reads(filename):
    """(user id, attachment id) as Canvas's importer reads a file's base name: its first two
    all-digit pieces split at "_"; None where it reads no attachment (fewer than two, a
    last piece starting with "link", a "._" file)."""
    pieces = filename.split("_")
    while pieces and pieces[-1] == "":  # (Ruby's split drops trailing empty pieces)
        pieces.pop()
    ids = [p for p in pieces if _DIGITS.fullmatch(p)][:2]
    if len(ids) < 2 or pieces[-1].startswith("link") or filename.startswith("._"):
        return None
    return tuple(ids)


def names(lms, provenance, pages):
    """{page: its name in the LMS's upload} of a student's pages (Paths), from what collect
    read of their submission (provenance); Unfit where the LMS's importer would not find them."""
    if provenance is None:
        raise Unfit("no download of the LMS named them (collected from the exchange, or "
                    "before collect kept the LMS's names)")
    if provenance.get("lms") != lms:
        raise Unfit(f"collected from a {provenance.get('lms') or 'plain'} download, not "
                    f"{lms.capitalize()}'s")
    if lms == "moodle":
        folder = moodle_folder(provenance)
        found = {page: f"{folder}/{page.name}" for page in pages}
    else:
        readings = _canvas(provenance)
        if not readings:
            raise Unfit(f"no entry of a Canvas download names them ({_listed(provenance)})")
        found = {}
        for page in pages:
            name, _ = canvas_pick(readings, page.stem)
            found[page] = canvas_prefix(name) + page.name
            if canvas_reads(found[page]) != (name.key, str(name.order)):
                raise Unfit(f"Canvas's importer would not read user {name.key} in "
                            f"{found[page]!r}")
    for name in found.values():
        if len(Path(name).name.encode()) > NAME_BYTES:
            raise Unfit(f"the name {name!r} is over {NAME_BYTES} bytes")
        if re.search(r"[\x00-\x1f\x7f\\]", name):  # (an unzip may read a backslash as a folder's)
            raise Unfit(f"the name {name!r} holds a control character or a backslash")
    return found


def write(root, assignment, lms, pages, provenances):
    """feedback_upload/<assignment>-<lms>.zip of the pages ({student: [Path]}), named for
    the LMS's importer from collect's provenances ({student: provenance}). Returns (its path,
    the students in it, [Left]: every other student with pages or a provenance)."""
    path = Path(root) / "feedback_upload" / f"{assignment}-{lms}.zip"
    path.parent.mkdir(parents=True, exist_ok=True)
    taken, placed, left = {}, [], []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for student in sorted(set(pages) | set(provenances)):
            if not pages.get(student):
                left.append(Left(student, "no feedback page (grades.csv's status says why)"))
                continue
            try:
                found = names(lms, provenances.get(student), pages[student])
            except Unfit as error:
                left.append(Left(student, str(error)))
                continue
            clash = sorted({taken[n] for n in found.values() if n in taken})
            if clash:
                left.append(Left(student, f"their names in the upload are {clash[0]}'s too"))
                continue
            for page, name in sorted(found.items()):
                z.write(page, name)
                taken[name] = student
            placed.append(student)
    return path, placed, left


def report(root, assignment, lms, path, placed, left):
    """Print what the upload holds, and each student left out with why."""
    print(f"  {BULK[lms]}: {path.relative_to(root)} ({len(placed)} student"
          f"{'s' * (len(placed) != 1)})")
    for item in left:
        print(f"  NOT IN THE UPLOAD {item.student}: {item.reason}; their pages are "
              f"feedback_zips/{assignment}/{item.student}.zip")
