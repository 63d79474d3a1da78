"""The feedback upload (tools/lms/feedback_upload.py) of a small class, checked with each LMS's own
rule for finding a file's student, re-implemented here from its source:

- Moodle's "Upload multiple feedback files in a zip": moodle/moodle
  mod/assign/feedback/file/importziplib.php, is_valid_filename_for_import and
  import_zip_files (the participants keyed by get_uniqueid_for_user);
- Canvas's "Re-Upload Submissions": instructure/canvas-lms app/models/assignment.rb,
  infer_comment_context_from_filename and generate_comments_from_files.

The class's download names follow each LMS's naming (tests/test_downloads.py cites it:
Moodle's downloader.php, Canvas's content_zipper.rb; a name uploaded again gets "-1" before
its extension, Canvas's attachment.rb, make_unique_filename). The pages are real feedback
pages (tests/test_feedback.py's exporter), each naming its student. What the upload trusts:
docs/security.md, section 7.
"""

import contextlib
import io
import re
import zipfile

import nbformat
import pytest

from tests.test_feedback import page
from tools.instructor.feedback import FeedbackExporter
from tools.lms import feedback_upload

STEMS = ("01_layernorm_forward", "02_layernorm_backward")


def pages_of(root, students):
    """feedback/<student>/unit1/<stem>.html of each student, each page saying whose it is;
    {student: [Path]}."""
    found = {}
    for student in students:
        folder = root / "feedback" / student / "unit1"
        folder.mkdir(parents=True)
        for stem in STEMS:
            nb = nbformat.v4.new_notebook(metadata={"language_info": {"name": "python"}})
            nb.cells = [nbformat.v4.new_markdown_cell(f"The feedback of {student} on {stem}")]
            (folder / f"{stem}.html").write_text(page(FeedbackExporter, nb))
        found[student] = sorted(folder.glob("*.html"))
    return found


def provenance(lms, key, entries, name=None):
    """What collect writes of a submission (downloaded/<assignment>/collected.json)."""
    return {"entry": entries[-1], "entries": sorted(entries), "lms": lms, "key": key,
            "name": name, "time": None, "time_from": None, "late_marker": False}


# --- Moodle: importziplib.php, re-implemented ---------------------------------------------

PLUGINS = {("assignsubmission", "file"), ("assignsubmission", "onlinetext"),
           ("assignfeedback", "file"), ("assignfeedback", "comments")}  # (a site's enabled)


def php_is_numeric(text):
    """PHP 8's is_numeric of a string: a decimal number, optionally signed, with an
    exponent, leading and trailing whitespace allowed."""
    return re.fullmatch(r"\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*", text) is not None


def moodle_import(path, participants):
    """(the participant's user, the file name Moodle stores) of a file of the zip at path
    (its name in the zip), or None where Moodle ignores it: is_valid_filename_for_import,
    the zip extracted under "/import/" (extract_files_from_zip)."""
    name = path.rsplit("/", 1)[-1]
    if path.endswith("/") or name.startswith((".", "~")):
        return None
    parts = ("/import/" + path).split("/")
    while parts:
        info = parts.pop(0).split("_", 4)  # (PHP's explode('_', $part, 5))
        if len(info) < 4 or not php_is_numeric(info[1]):
            continue
        number = float(info[1]) if re.search(r"[.eE]", info[1]) else int(info[1])
        user = participants.get(number)
        if user is None or (info[2], info[3]) not in PLUGINS:
            continue
        return user, "/".join([info[4] if len(info) == 5 else "", *parts])
    return None


MOODLE = {  # student: (participant number, the download's entries), as Moodle names them
    "s1001": (101, ["Ada Lovelace_101_assignsubmission_file"]),  # 4.1+: a folder
    "s1002": (102, ["Alan Turing_102_assignsubmission_file_"]),  # before 4.1: a folder
    "s1003": (103, ["Grace Hopper_103_assignsubmission_file_unit1.zip"]),  # files
    "s1004": (104, ["Participant_104_assignsubmission_file"]),  # blind marking
}


def test_moodles_importer_finds_each_student_and_each_page_is_theirs(tmp_path):
    """Every page of every student with a Moodle provenance is in the zip, in the folder of
    their participant number, under its own name; nothing else is; those without one are
    listed, with why."""
    others = ["s2001", "s2002", "s2003", "s2004"]
    pages = pages_of(tmp_path, [*MOODLE, *others])
    provenances = {s: provenance("moodle", str(n), entries) for s, (n, entries) in MOODLE.items()}
    provenances["s2001"] = provenance("plain", "s2001", ["s2001_unit1.zip"])
    provenances["s2002"] = provenance("canvas", "50002", ["turingalan_50002_7002_unit1.zip"])
    # a name Moodle would not write (it writes "_" as a space): read as participant "Lee"
    provenances["s2004"] = provenance("moodle", "105", ["Ada_Lee_105_assignsubmission_file"])
    del pages["s2003"]  # (graded, but no page)
    provenances["s2003"] = provenance("moodle", "106", ["Bob Ross_106_assignsubmission_file"])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        path, placed, left = feedback_upload.write(tmp_path, "unit1", "moodle", pages,
                                                   provenances)
        feedback_upload.report(tmp_path, "unit1", "moodle", path, placed, left)
    assert path == tmp_path / "feedback_upload" / "unit1-moodle.zip"
    assert placed == list(MOODLE)
    participants = {n: s for s, (n, _) in MOODLE.items()}
    with zipfile.ZipFile(path) as z:
        found = {name: moodle_import(name, participants) for name in z.namelist()}
        assert sorted(found.values()) == sorted(
            (s, f"/{stem}.html") for s in MOODLE for stem in STEMS)
        for name, (student, stored) in found.items():
            assert z.read(name) == (tmp_path / "feedback" / student / "unit1" /
                                    stored.lstrip("/")).read_bytes()
    assert {item.student: item.reason for item in left} == {
        "s2001": "collected from a plain download, not Moodle's",
        "s2002": "collected from a canvas download, not Moodle's",
        "s2003": "no feedback page (grades.csv's status says why)",
        "s2004": "Moodle's importer would not read participant 105 in "
                 "'Ada_Lee_105_assignsubmission_file' (it splits the name at each \"_\")",
    }
    assert out.getvalue().splitlines() == [
        "  Moodle's \"Upload multiple feedback files in a zip\": "
        "feedback_upload/unit1-moodle.zip (4 students)",
        *(f"  NOT IN THE UPLOAD {item.student}: {item.reason}; their pages are "
          f"feedback_zips/unit1/{item.student}.zip" for item in left)]


def test_a_student_without_a_record_is_left_out_saying_so(tmp_path):
    """(The exchange, or a submission collected before collect kept the LMS's names.)"""
    pages = pages_of(tmp_path, ["s1001", "s2005"])
    provenances = {"s1001": provenance("moodle", "101", MOODLE["s1001"][1])}
    path, placed, left = feedback_upload.write(tmp_path, "unit1", "moodle", pages, provenances)
    assert placed == ["s1001"] and left == [feedback_upload.Left(
        "s2005", "no download of the LMS named them (collected from the exchange, or before "
                 "collect kept the LMS's names)")]
    with zipfile.ZipFile(path) as z:
        assert sorted(z.namelist()) == [
            f"Ada Lovelace_101_assignsubmission_file/{stem}.html" for stem in STEMS]


# --- Canvas: assignment.rb, re-implemented ------------------------------------------------

def canvas_import(path, submissions):
    """(user id, the attachment's display name) that Canvas gives a file of the zip at
    path, or None where it ignores it: infer_comment_context_from_filename (a submission
    of the user holding that attachment); submissions: {user id: {attachment id: display
    name}}."""
    filename = path.rsplit("/", 1)[-1]
    pieces = filename.split("_")
    while pieces and pieces[-1] == "":  # (Ruby's String#split drops trailing empty pieces)
        pieces.pop()
    user_id, attachment_id = ([p for p in pieces if re.fullmatch(r"[0-9]+", p)] + [None] * 2)[:2]
    if pieces and pieces[-1].startswith("link") or filename.startswith("._"):
        attachment_id = None
    attachments = submissions.get(user_id, {})
    if attachment_id not in attachments:
        return None
    return user_id, attachments[attachment_id]


CANVAS = {  # student: (user id, the download's entries), as Canvas names them
    # loose files: each notebook, a module, and one notebook uploaded again ("-1")
    "s1001": ("50001", ["lovelaceada_50001_7001_01_layernorm_forward.ipynb",
                        "lovelaceada_50001_7002_layer_norm.py",
                        "lovelaceada_50001_7003_02_layernorm_backward.ipynb",
                        "lovelaceada_50001_7007_02_layernorm_backward-1.ipynb"]),
    "s1002": ("50002", ["turingalan_LATE_50002_7004_unit1.zip"]),  # a zip, late
    "s1003": ("50003", ["de_la_cruz_juan_50003_7005_submission.zip"]),  # "_" in the name
}


def test_canvass_importer_finds_each_student_and_each_page_is_theirs(tmp_path):
    """Every page of every student with a Canvas provenance is in the zip, under a name whose
    ids Canvas reads as that student and an attachment of their submission (their
    upload of that notebook, the last one where they sent it twice); nothing else is."""
    pages = pages_of(tmp_path, [*CANVAS, "s2001"])
    provenances = {s: provenance("canvas", key, entries) for s, (key, entries) in CANVAS.items()}
    provenances["s2001"] = provenance("moodle", "101", MOODLE["s1001"][1])
    path, placed, left = feedback_upload.write(tmp_path, "unit1", "canvas", pages, provenances)
    assert path == tmp_path / "feedback_upload" / "unit1-canvas.zip"
    assert placed == list(CANVAS) and left == [
        feedback_upload.Left("s2001", "collected from a moodle download, not Canvas's")]
    submissions = {key: {m["attachment"]: m["display"] for m in (re.fullmatch(
        r".+?_(?P<user>[0-9]+)_(?P<attachment>[0-9]+)_(?P<display>.+)", e) for e in entries)}
        for key, entries in CANVAS.values()}
    user = {key: s for s, (key, _) in CANVAS.items()}
    with zipfile.ZipFile(path) as z:
        found = {name: canvas_import(name, submissions) for name in z.namelist()}
        assert None not in found.values() and len(found) == len(CANVAS) * len(STEMS)
        for name, (key, _) in found.items():  # (the page's own name ends the file's)
            page_name = next(f"{s}.html" for s in STEMS if name.endswith(f"_{s}.html"))
            assert z.read(name) == (tmp_path / "feedback" / user[key] / "unit1" /
                                    page_name).read_bytes(), name
        shown = {(user[key], name.rsplit("_", 2)[-1]): display
                 for name, (key, display) in found.items()}
    # each page is attached under the name of the student's file Canvas matched it to
    assert {k: v for k, v in shown.items() if k[0] == "s1001"} == {
        ("s1001", "forward.html"): "01_layernorm_forward.ipynb",
        ("s1001", "backward.html"): "02_layernorm_backward-1.ipynb"}
    assert shown[("s1002", "forward.html")] == "unit1.zip"
    assert sorted(z.filename for z in zipfile.ZipFile(path).infolist()) == sorted([
        "lovelaceada_50001_7001_01_layernorm_forward.html",
        "lovelaceada_50001_7007_02_layernorm_backward.html",
        "turingalan_LATE_50002_7004_01_layernorm_forward.html",
        "turingalan_LATE_50002_7004_02_layernorm_backward.html",
        "de_la_cruz_juan_50003_7005_01_layernorm_forward.html",
        "de_la_cruz_juan_50003_7005_02_layernorm_backward.html"])


@pytest.mark.parametrize("stem, why", [
    ("results_link", "Canvas's importer would not read user 50001 in "
                     "'lovelaceada_50001_7001_results_link.html'"),
    ("x" * 250, "the name 'lovelaceada_50001_7001_" + "x" * 250 + ".html' is over 255 bytes"),
])
def test_a_name_canvas_would_misread_is_left_out_saying_why(tmp_path, stem, why):
    """A last piece starting with "link" is read as no attachment (a URL submission's);
    a name over 255 bytes no file system keeps."""
    folder = tmp_path / "feedback" / "s1001" / "unit1"
    folder.mkdir(parents=True)
    (folder / f"{stem}.html").write_text("<html></html>")
    provenances = {"s1001": provenance("canvas", "50001", CANVAS["s1001"][1][:1])}
    _, placed, left = feedback_upload.write(tmp_path, "unit1", "canvas",
                                   {"s1001": [folder / f"{stem}.html"]}, provenances)
    assert placed == [] and left == [feedback_upload.Left("s1001", why)]


@pytest.mark.parametrize("full_name, why", [
    ("Ada\\..\\Lee", "the name 'Ada\\\\..\\\\Lee_101_assignsubmission_file/01_layernorm_forward.html' "
                     "holds a control character or a backslash"),
    ("Ada\nLee", "no entry of a Moodle download names them ('Ada\\nLee_101_assignsubmission_file')"),
])
def test_a_name_an_unzip_could_misread_is_left_out(tmp_path, full_name, why):
    """A backslash (a folder, to some unzip tools) or a control character in a name the
    download gave: refused, not written into the zip, and quoted so that the terminal
    shows it as it is."""
    entry = f"{full_name}_101_assignsubmission_file"
    pages = pages_of(tmp_path, ["s1001"])
    _, placed, left = feedback_upload.write(tmp_path, "unit1", "moodle", pages,
                                   {"s1001": provenance("moodle", "101", [entry])})
    assert placed == [] and left == [feedback_upload.Left("s1001", why)]
