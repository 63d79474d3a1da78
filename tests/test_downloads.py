"""Every LMS's download, as the LMS writes it (issue 40, point 1): a sample per format, built
here from the LMS's own naming (its source, or its documentation and the third-party tools
that read it, each cited), collected by tools/instructor/collect.py, and checked whole: the files of
each submission, the provenance each gets (tools.instructor.collect.Found.collected) and each rejection.
Then `make collect DRY_RUN=1` (nothing touched) and the roster's names in nbgrader's
student table."""

import datetime
import io
import os
import re
import shutil
import subprocess
import unicodedata
import zipfile
import zoneinfo

import pytest

from tests.conftest import REPO
from tests.test_collect import NOTEBOOK, course, run, snapshot, worksheet
from tools.course.folder import Course, submissions
from tools.course.settings import read
from tools.instructor.collect import read_collected
from tools.lms import downloads

PY = "x = 1\n"  # a student's normlib/layer_norm.py
NB = '{"cells": []}'  # a student's notebook


def zipped(files):
    """The bytes of a zip of files ({name: text})."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return out.getvalue()


def download(archive, entries):
    """The LMS's "download all" zip of entries ({name in the zip: text or bytes}), extracted
    into archive/ as the instructor does."""
    path = archive.parent / "download.zip"
    with zipfile.ZipFile(path, "w") as z:
        for name, data in entries.items():
            z.writestr(name, data)
    with zipfile.ZipFile(path) as z:
        z.extractall(archive)
    path.unlink()


def held(root, student, assignment="unit1"):
    """{path: text} of a collected submission."""
    folder = root / "submitted" / student / assignment
    return {p.relative_to(folder).as_posix(): p.read_text()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def reasons(out):
    """{entry: reason} of the rejections printed."""
    return dict(re.findall(r"^  REJECTED (.+?): (.+); moved to downloaded/", out, re.M))


def provenance(entries, lms, key, name, time=None, time_from=None, late=False, superseded=None,
               entry=None, extension=None):
    """A provenance of collected.json, as tools.instructor.collect.Found.collected writes it."""
    return {"entry": entry or max(entries), "entries": sorted(entries), "lms": lms,
            "key": key, "name": name, "time": time, "time_from": time_from,
            "late_marker": late, "superseded": superseded or {}, "extension": extension}


# --- Canvas -------------------------------------------------------------------------------
# instructure/canvas-lms lib/content_zipper.rb: add_upload_submission names each uploaded
# file "#{filename}_#{file.id}_#{sanitize_attachment_filename(file.display_name)}", where
# get_filename joins [users_name, ("LATE" if late), user_id] with "_" and removes every
# character that is not a word character, and sanitize_user_name collapses "_<digits>_"
# and lowercases the sortable name ("Lovelace, Ada"). A display name of a file uploaded
# before into the student's submissions folder gets "-1", "-2" before its extension
# (app/models/attachment.rb: handle_duplicates renames in a folder for_submissions?, with
# make_unique_filename).

def canvas_prefix(sortable_name, user_id, late=False):
    """content_zipper.rb's get_user_name and get_filename: its sanitize_file_name keeps
    Onigmo's [[:word:]] alone (a letter, a mark, a decimal digit or a connector)."""
    name = re.sub(r"_(\d+)_", r"\1", sortable_name).lower()
    return "".join(c for c in "_".join([name, *["LATE"] * late, str(user_id)])
                   if unicodedata.category(c)[0] in "LM" or unicodedata.category(c) in ("Nd", "Pc"))


def canvas_entry(prefix, attachment_id, display_name):
    """content_zipper.rb's add_upload_submission, sanitize_attachment_filename."""
    return f"{prefix}_{attachment_id}_" + re.sub(r'[\x00/\\:*?"<>|]+', "_", display_name)


def canvas_display_name(name, existing):
    """attachment.rb's make_unique_filename: the name, or "<base>-<n><extension>" for the
    first n from 1 not in existing (the extension: its trailing ".x[.y]" parts)."""
    if name not in existing:
        return name
    ext = re.search(r"(\.[A-Za-z][A-Za-z0-9]*)*(\.[A-Za-z0-9]*)$", name)
    ext = ext.group(0) if ext else ""
    base, n = name[:len(name) - len(ext)], 1
    while f"{base}-{n}{ext}" in existing:
        n += 1
    return f"{base}-{n}{ext}"


def canvas_class():
    """{entry: bytes or text} of a Canvas download: each student's uploads, loose."""
    ada = canvas_prefix("Lovelace, Ada", 50001)
    alan = canvas_prefix("Turing, Alan", 50002, late=True)
    grace = canvas_prefix("Hopper, Grace", 50003)
    barbara = canvas_prefix("Liskov, Barbara", 50004)
    kath = canvas_prefix("Johnson, Katherine", 50007)
    # alan uploaded layer_norm.py in an earlier submission: this one's is "-1"
    alans = canvas_display_name("layer_norm.py", {"layer_norm.py"})
    # katherine uploaded two files named layer_norm.py in one submission
    kaths = ["layer_norm.py", canvas_display_name("layer_norm.py", {"layer_norm.py"})]
    return {
        canvas_entry(ada, 7201, NOTEBOOK): NB, canvas_entry(ada, 7202, "layer_norm.py"): PY,
        canvas_entry(alan, 7301, NOTEBOOK): NB, canvas_entry(alan, 7302, alans): PY,
        canvas_entry(grace, 7401, "unit1.zip"): zipped({
            f"unit1/{NOTEBOOK}": NB, "unit1/normlib/layer_norm.py": "x = 'zipped'\n"}),
        canvas_entry(grace, 7402, "layer_norm.py"): PY,
        canvas_entry(barbara, 7501, "report.pdf"): "%PDF-1.4",
        canvas_entry(barbara, 7502, NOTEBOOK): NB,
        canvas_entry(kath, 7601, kaths[0]): "x = 'first'\n",
        canvas_entry(kath, 7602, kaths[1]): "x = 'second'\n",
        canvas_entry(canvas_prefix("Dijkstra, Edsger", 50006), 7701, "helper-1.py"): PY,
        "anon_x7Kq2_7801_layer_norm.py": PY,  # anonymous grading: no student named
        "notes.txt": "the instructor's notes",
    }


def test_the_name_builders_write_what_canvas_writes():
    """(So that the sample below is Canvas's: content_zipper.rb's own cases.)"""
    assert canvas_prefix("Lovelace, Ada", 50001, late=True) == "lovelaceada_LATE_50001"
    assert canvas_prefix("O'Brien_12_, Pat", 5) == "obrien12pat_5"
    assert canvas_entry("x_5", 9, 'a:b?.py') == "x_5_9_a_b_.py"
    assert canvas_display_name("layer_norm.py", {"layer_norm.py", "layer_norm-1.py"}) == \
        "layer_norm-2.py"
    assert canvas_display_name("data.tar.gz", {"data.tar.gz"}) == "data-1.tar.gz"


NO_FORMAT = ("no format reads it: not a zip (a plain entry is <student id>[_<assignment>...]"
             ".zip, or a folder), and not a file's name as an LMS writes it (Canvas's "
             "<lastfirst>_<user id>_<attachment id>_<name>, Moodle's <Full Name>_<n>_"
             "assignsubmission_file_<name>, Blackboard's <Assignment>_<username>_attempt_"
             "<time>_<name>, Brightspace's <n>-<n> - <Name> - <date> - <name>)")


def test_canvas_loose_files_are_one_submission_each_file_in_its_place(tmp_path):
    root, archive = course(tmp_path)
    download(archive, canvas_class())
    out = run(root, "unit1")
    assert submissions(root, Course.load(root), ["unit1"]) == {"unit1": [
        "hoppergrace", "johnsonkatherine", "liskovbarbara", "lovelaceada", "turingalan"]}
    assert held(root, "lovelaceada") == {NOTEBOOK: NB, "normlib/layer_norm.py": PY}
    assert held(root, "turingalan") == {NOTEBOOK: NB, "normlib/layer_norm.py": PY}  # "-1" gone
    # the zip's notebook, and the loose file uploaded after the zip (the larger attachment id)
    assert held(root, "hoppergrace") == {NOTEBOOK: NB, "normlib/layer_norm.py": PY}
    assert held(root, "johnsonkatherine") == {"normlib/layer_norm.py": "x = 'second'\n"}
    assert held(root, "liskovbarbara") == {NOTEBOOK: NB}
    assert reasons(out) == {
        "dijkstraedsger_50006_7701_helper-1.py": "'helper-1.py' is neither a notebook nor one "
        "of the assignment's exercise files (layer_norm.py)",
        "johnsonkatherine_50007_7601_layer_norm.py": "an earlier upload of johnsonkatherine "
        "(Canvas's attachment 7601): normlib/layer_norm.py is attachment 7602's "
        "(johnsonkatherine_50007_7602_layer_norm-1.py)",
        "liskovbarbara_50004_7501_report.pdf": "'report.pdf' is neither a notebook nor one "
        "of the assignment's exercise files (layer_norm.py)",
        "anon_x7Kq2_7801_layer_norm.py": NO_FORMAT + "; Canvas's anonymous grading names no "
        "student (anon_<id>): download the submissions with the students' names shown",
        "notes.txt": NO_FORMAT}
    assert "collected unit1: 13 entries in archive/, 5 collected (5 new, 0 replacing an older " \
           "submission, 0 unchanged), 5 rejected" in out
    assert "  hoppergrace's normlib/layer_norm.py is hoppergrace_50003_7402_layer_norm.py's " \
           "(the later Canvas attachment), not hoppergrace_50003_7401_unit1.zip's" in out
    assert "late: turingalan (late by Canvas's _LATE marker; no time)" in out
    assert read_collected(root, "unit1") == {
        "hoppergrace": provenance(["hoppergrace_50003_7401_unit1.zip",
                               "hoppergrace_50003_7402_layer_norm.py"], "canvas", "50003",
                              "hoppergrace", superseded={"normlib/layer_norm.py": {
                                  "by": "hoppergrace_50003_7402_layer_norm.py",
                                  "entries": ["hoppergrace_50003_7401_unit1.zip"]}}),
        "johnsonkatherine": provenance(["johnsonkatherine_50007_7602_layer_norm-1.py"], "canvas",
                                   "50007", "johnsonkatherine", superseded={
                                       "normlib/layer_norm.py": {
                                           "by": "johnsonkatherine_50007_7602_layer_norm-1.py",
                                           "entries": [
                                               "johnsonkatherine_50007_7601_layer_norm.py"]}}),
        "liskovbarbara": provenance([f"liskovbarbara_50004_7502_{NOTEBOOK}"], "canvas", "50004",
                                "liskovbarbara"),
        "lovelaceada": provenance([f"lovelaceada_50001_7201_{NOTEBOOK}",
                               "lovelaceada_50001_7202_layer_norm.py"], "canvas", "50001",
                              "lovelaceada", entry="lovelaceada_50001_7202_layer_norm.py"),
        "turingalan": provenance([f"turingalan_LATE_50002_7301_{NOTEBOOK}",
                              "turingalan_LATE_50002_7302_layer_norm-1.py"], "canvas", "50002",
                             "turingalan", late=True,
                             entry="turingalan_LATE_50002_7302_layer_norm-1.py")}
    assert sorted(p.name for p in archive.iterdir()) == sorted(
        e for r in read_collected(root, "unit1").values() for e in r["entries"])


def test_a_canvas_upload_over_the_bounds_is_refused_before_it_is_read(tmp_path):
    """The bounds hold for a student's loose files together: 65 of them (BOUNDS.kept 64)
    are refused on their count, each listed."""
    root, archive = course(tmp_path)
    ada = canvas_prefix("Lovelace, Ada", 50001)
    download(archive, {canvas_entry(ada, 9000 + i, f"n{i}.ipynb"): NB for i in range(65)})
    out = run(root, "unit1")
    found = reasons(out)
    assert len(found) == 65 and all("65 entries of one upload of lovelaceada" in r and
                                    "more than 64 files or 64 MiB in all" in r
                                    for r in found.values())
    assert not (root / "submitted").exists()


# --- Moodle -------------------------------------------------------------------------------
# moodle/moodle mod/assign/classes/downloader.php: get_student_prefix is
# clean_filename(str_replace('_', ' ', fullname) . '_' . get_uniqueid_for_user(userid))
# (fullname is get_string('participant') under blind marking); load_submissionplugin_filelist
# names a file "<prefix>_<subtype>_<type>_<file name>" ("submissions in folders" off) or
# puts it in the folder "<prefix>_<subtype>_<type>" with its file path (on). The grading
# worksheet (mod/assign/gradingtable.php) has "Identifier" ("Participant <n>") and, where
# the teacher may see identities or marking is not blind, "Full name" and the email.

def moodle_prefix(fullname, number):
    return f"{fullname.replace('_', ' ')}_{number}"


def test_moodle_files_not_in_folders_zip_and_loose_and_online_text(tmp_path):
    root, archive = course(tmp_path, 'c.Grading.lms_timezone = "Europe/Berlin"\n')
    ada, alan = moodle_prefix("Ada Lovelace", 11), moodle_prefix("Alan Turing", 12)
    grace = moodle_prefix("Grace Hopper", 13)
    download(archive, {
        f"{ada}_assignsubmission_file_{NOTEBOOK}": NB,
        f"{ada}_assignsubmission_file_layer_norm.py": PY,
        f"{alan}_assignsubmission_file_work.zip": zipped({NOTEBOOK: NB, "layer_norm.py": PY}),
        f"{alan}_assignsubmission_onlinetext_onlinetext.html": "<p>see my zip</p>",
        # one place given twice, and no Canvas ids to say which is the later
        f"{grace}_assignsubmission_file_work.zip": zipped({"normlib/layer_norm.py": PY}),
        f"{grace}_assignsubmission_file_layer_norm.py": "x = 'loose'\n",
    })
    (archive.parent / "Grades-unit1.csv").write_text(worksheet([
        (11, "Ada Lovelace", "ada@example.edu", "Monday, 5 October 2026, 9:14 PM"),
        (12, "Alan Turing", "alan@example.edu", "Monday, 5 October 2026, 9:20 PM"),
        (13, "Grace Hopper", "grace@example.edu", "Monday, 5 October 2026, 9:30 PM")]))
    out = run(root, "unit1")
    assert held(root, "ada-lovelace") == {NOTEBOOK: NB, "normlib/layer_norm.py": PY,
                                          "timestamp.txt": "2026-10-05 19:14:00.000000 UTC"}
    assert held(root, "alan-turing") == {NOTEBOOK: NB, "normlib/layer_norm.py": PY,
                                         "timestamp.txt": "2026-10-05 19:20:00.000000 UTC"}
    twice = ("normlib/layer_norm.py is given by 2 entries of grace-hopper (Grace Hopper_13_"
             "assignsubmission_file_layer_norm.py, Grace Hopper_13_assignsubmission_file_"
             "work.zip), and nothing the LMS wrote says which is the later: the upload is "
             "refused")
    assert reasons(out) == {f"{alan}_assignsubmission_onlinetext_onlinetext.html":
                            "Moodle's onlinetext plugin's, not an uploaded file: nothing of "
                            "it is collected",
                            f"{grace}_assignsubmission_file_layer_norm.py": twice,
                            f"{grace}_assignsubmission_file_work.zip": twice}
    source = "Moodle's grading worksheet Grades-unit1.csv"
    assert read_collected(root, "unit1") == {
        "ada-lovelace": provenance([f"{ada}_assignsubmission_file_{NOTEBOOK}",
                                f"{ada}_assignsubmission_file_layer_norm.py"], "moodle", "11",
                               "Ada Lovelace", "2026-10-05T21:14:00+02:00", source),
        "alan-turing": provenance([f"{alan}_assignsubmission_file_work.zip"], "moodle", "12",
                              "Alan Turing", "2026-10-05T21:20:00+02:00", source)}


def test_moodle_in_folders_loose_files_and_a_zip_beside_them(tmp_path):
    """A folder per student, its files as uploaded: loose files placed (layer_norm.py in
    normlib/), and a zip beside them read with them (of its files, only the notebooks and
    the assignment's exercise files: not Unit 2's nn.py); one place given twice refused."""
    root, archive = course(tmp_path)
    grace, barbara = moodle_prefix("Grace Hopper", 13), moodle_prefix("Barbara Liskov", 14)
    download(archive, {
        f"{grace}_assignsubmission_file/layer_norm.py": PY,
        f"{grace}_assignsubmission_file/work.zip": zipped({NOTEBOOK: NB,
                                                           "normlib/nn.py": "y = 2\n"}),
        f"{barbara}_assignsubmission_file/layer_norm.py": PY,
        f"{barbara}_assignsubmission_file/all.zip": zipped({NOTEBOOK: NB,
                                                            "normlib/layer_norm.py": PY}),
    })
    out = run(root, "unit1")
    assert held(root, "grace-hopper") == {NOTEBOOK: NB, "normlib/layer_norm.py": PY}
    assert reasons(out) == {f"{barbara}_assignsubmission_file": "normlib/layer_norm.py both "
                            "in all.zip and beside it: which is the submission's?"}
    assert read_collected(root, "unit1")["grace-hopper"] == provenance(
        [f"{grace}_assignsubmission_file"], "moodle", "13", "Grace Hopper")


BLIND_HEADER = ('"Identifier","Status","Grade","Maximum Grade","Grade can be changed",'
                '"Last modified (submission)","Last modified (grade)","Feedback comments"\n')


def test_moodle_blind_marking_is_resolved_through_the_worksheet_alone(tmp_path):
    """"Participant_<n>" names no one: the worksheet's "Participant <n>" row does (as a
    teacher who may see identities downloads it: Full name and email). Without a
    worksheet, or with one that hides the names (blind, gradingtable.php's recordid
    alone), each entry is refused, saying what to download."""
    root, archive = course(tmp_path, 'c.Grading.lms_timezone = "Europe/Berlin"\n')
    entries = {f"Participant_{n}_assignsubmission_file/{NOTEBOOK}": NB for n in (21, 22)}
    download(archive, entries)
    out = run(root, "unit1")
    for n in (21, 22):
        assert reasons(out)[f"Participant_{n}_assignsubmission_file"] == (
            f"blind marking: Moodle names participant {n}, not a student; the assignment's "
            "grading worksheet says who (Download grading worksheet, as a teacher who may "
            "see identities): put it beside archive/")
    rejected_folder = archive.parent / "rejected"
    for name in os.listdir(rejected_folder):  # (back, with the worksheet beside them)
        os.rename(rejected_folder / name, archive / name)
    (archive.parent / "Grades-unit1.csv").write_text(BLIND_HEADER + "".join(
        f'"Participant {n}","Submitted for grading","","100.00","Yes",'
        f'"Monday, 5 October 2026, 9:1{n - 20} PM","-",""\n' for n in (21, 22)))
    out = run(root, "unit1")
    assert reasons(out)["Participant_21_assignsubmission_file"] == (
        "blind marking: Grades-unit1.csv gives no name for participant 21 (download the "
        "grading worksheet as a teacher who may see identities, or after revealing them)")
    for name in os.listdir(rejected_folder):
        os.rename(rejected_folder / name, archive / name)
    (archive.parent / "Grades-unit1.csv").write_text(worksheet([
        (21, "Ada Lovelace", "ada@example.edu", "Monday, 5 October 2026, 9:11 PM"),
        (22, "Alan Turing", "alan@example.edu", "Monday, 5 October 2026, 9:12 PM")]))
    out = run(root, "unit1")
    assert submissions(root, Course.load(root), ["unit1"]) == {"unit1": ["ada-lovelace", "alan-turing"]}
    assert read_collected(root, "unit1")["ada-lovelace"] == provenance(
        ["Participant_21_assignsubmission_file"], "moodle", "21", "Participant",
        "2026-10-05T21:11:00+02:00", "Moodle's grading worksheet Grades-unit1.csv")


# --- Blackboard Learn ---------------------------------------------------------------------
# Built from documentation and third-party tools, not yet checked against a real download:
# Blackboard Learn's Grade Center "Assignment File Download" (help.blackboard.com,
# Learn/Instructor/Original: download assignments) renames each file
# "assignmentname_username_attempt_datetime_filename.ext" and writes a receipt
# "assignmentname_username_attempt_datetime.txt" per attempt (kwurst/bb-file-cleanup's
# README; vangef/BBGradebookOrganiser utils/organiser.py splits the name at "_attempt_",
# the username before it, the file's own name after the date's "_").

def blackboard_entry(assignment, username, when, name=None):
    stem = f"{assignment}_{username}_attempt_{when:%Y-%m-%d-%H-%M-%S}"
    return f"{stem}_{name}" if name else f"{stem}.txt"


def test_blackboard_attempts_loose_files_and_receipts(tmp_path):
    root, archive = course(tmp_path, 'c.Grading.lms_timezone = "America/New_York"\n'
                                     'c.Grading.due = {"unit1": "2026-10-05 23:59 -04:00"}\n')
    first, second = datetime.datetime(2026, 10, 5, 20, 0), datetime.datetime(2026, 10, 6, 9, 30)
    download(archive, {
        blackboard_entry("Unit 1", "s1001", first, NOTEBOOK): NB,
        blackboard_entry("Unit 1", "s1001", first, "layer_norm.py"): "x = 'first'\n",
        blackboard_entry("Unit 1", "s1001", first): "Name: Ada Lovelace (s1001)\n",
        blackboard_entry("Unit 1", "s1001", second, NOTEBOOK): NB,
        blackboard_entry("Unit 1", "s1001", second, "layer_norm.py"): PY,
        blackboard_entry("Unit 1", "s1001", second): "Name: Ada Lovelace (s1001)\n",
        blackboard_entry("Unit 1", "s1002", first, "unit1.zip"): zipped({NOTEBOOK: NB}),
    })
    out = run(root, "unit1")
    assert held(root, "s1001") == {NOTEBOOK: NB, "normlib/layer_norm.py": PY,
                                   "timestamp.txt": "2026-10-06 13:30:00.000000 UTC"}
    old = [blackboard_entry("Unit 1", "s1001", first, n) for n in (NOTEBOOK, "layer_norm.py")]
    assert reasons(out) == {e: "an older submission of s1001 (2026-10-05 20:00 by the "
                               "Blackboard's name): Unit 1_s1001_attempt_2026-10-06-09-30-00"
                               "_layer_norm.py (2026-10-06 09:30) replaces it" for e in old}
    assert "late: s1001 (9 h 31 min late)" in out and "2 Blackboard receipts read" in out
    assert read_collected(root, "unit1")["s1001"] == provenance(
        [blackboard_entry("Unit 1", "s1001", second, n) for n in (NOTEBOOK, "layer_norm.py")],
        "blackboard", "s1001", None, "2026-10-06T09:30:00-04:00", "Blackboard's name")
    assert held(root, "s1002") == {NOTEBOOK: NB, "timestamp.txt":
                                   "2026-10-06 00:00:00.000000 UTC"}


# Blackboard's usernames may hold "_" ("explicitly permitted and supported in usernames:
# _ - . @": help.blackboard.com, Learn/Administrator/SaaS/User_Management/Create_Users), and
# so may its assignments' titles (Blackboard's own advice is "Week_3_Quiz": tech.rochester.edu
# quoting Blackboard's naming best practice): "<title>_<username>" may split at any "_".
TWO_WAYS = ("; Blackboard writes <Assignment>_<username>, either may hold '_', and the "
            "download's other names do not say where the title ends: a roster "
            "(c.Grading.roster) that lists one of them, or c.Grading.lms_patterns with the "
            "title written out, says which")


@pytest.mark.parametrize("title,usernames,roster,collected,refused", [
    # the others' names show where the title ends ("Unit 1"): each username as written
    ("Unit 1", ["a_smith", "b_smith", "smith"], None,
     {"a_smith": "a_smith", "b_smith": "b_smith", "smith": "smith"}, {}),
    # nothing shows it: two students, refused, never guessed
    ("Unit 1", ["a_smith"], None, {},
     {"a_smith": "its name reads as 2 students (a_smith, smith): refused" + TWO_WAYS}),
    # the roster decides; where it holds both readings, refused (never smith's, s1)
    ("Unit 1", ["a_smith"], {"smith": "s1", "a_smith": "s2"}, {},
     {"a_smith": "its name reads as 2 students (s1, s2): refused" + TWO_WAYS}),
    ("Unit 1", ["a_smith", "b_smith", "smith"], {"smith": "s1", "a_smith": "s2"},
     {"a_smith": "s2", "smith": "s1"},
     {"b_smith": "no student of the roster has this blackboard id 'b_smith' (add a row for "
                 "it)"}),
    # a title with "_": its every "_" may begin the username, the roster decides
    ("Week_3_Quiz", ["j_doe", "s1"], {"j_doe": "s4", "s1": "s1"}, {"j_doe": "s4", "s1": "s1"},
     {}),
])
def test_blackboard_usernames_and_titles_with_underscores(tmp_path, title, usernames, roster,
                                                          collected, refused):
    """"Unit 1_a_smith_attempt_..." was username smith: a_smith's work became smith's."""
    config = 'c.Grading.lms_timezone = "UTC"\n'
    root, archive = course(tmp_path, config + 'c.Grading.roster = "roster.csv"\n' * bool(roster))
    if roster:
        (root / "roster.csv").write_text("lms_id,student_id,name\n" + "".join(
            f"{user},{student},{user}\n" for user, student in roster.items()))
    when = {user: datetime.datetime(2026, 10, 5, 20, i) for i, user in enumerate(usernames)}
    download(archive, {blackboard_entry(title, user, when[user], name): NB if name else "receipt"
                       for user in usernames for name in (NOTEBOOK, None)})
    out = run(root, "unit1")
    assert reasons(out) == {blackboard_entry(title, u, when[u], NOTEBOOK): why
                            for u, why in refused.items()}
    assert {s: r["key"] for s, r in read_collected(root, "unit1").items()} == {
        student: user for user, student in collected.items()}
    for user, student in collected.items():
        assert held(root, student) == {
            NOTEBOOK: NB, "timestamp.txt": f"{when[user]:%Y-%m-%d %H:%M:%S}.000000 UTC"}


def test_blackboard_patterns_of_the_course_read_underscore_usernames_too(tmp_path):
    """A localized pattern (its key "[^_]+") splits as the default does; a pattern with the
    title written out and no group "assignment" reads the username it matches, one way."""
    german = ('c.Grading.lms_patterns = {"blackboard": r"(?P<assignment>.+?)_(?P<key>[^_]+)_'
              r'Versuch_(?P<time>\d{4}(?:-\d\d){5})(?:_(?P<rest>.*))?"}' "\n")
    written = ('c.Grading.lms_patterns = {"blackboard": r"Unit 1_(?P<key>.+?)_attempt_'
               r'(?P<time>\d{4}(?:-\d\d){5})(?P<receipt>\.txt)?(?:_(?P<rest>.*))?"}' "\n")
    for i, (config, entries) in enumerate((
            (german, ["Einheit 1_a_smith_Versuch_2026-10-05-21-14-03_" + NOTEBOOK,
                      "Einheit 1_s1001_Versuch_2026-10-05-21-15-00_" + NOTEBOOK]),
            (written, ["Unit 1_a_smith_attempt_2026-10-05-21-14-03_" + NOTEBOOK]))):
        (tmp_path / str(i)).mkdir()
        root, archive = course(tmp_path / str(i),
                               'c.Grading.lms_timezone = "UTC"\n' + config)
        download(archive, {entry: NB for entry in entries})
        out = run(root, "unit1")
        assert reasons(out) == {}
        assert held(root, "a_smith") == {NOTEBOOK: NB,
                                         "timestamp.txt": "2026-10-05 21:14:03.000000 UTC"}
        assert read_collected(root, "unit1")["a_smith"]["key"] == "a_smith"


def test_a_receipt_without_files_names_its_student(tmp_path):
    """A text-only attempt (or one whose files were left out of the download) is a receipt
    alone: its student is named, and why nothing of it is collected."""
    root, archive = course(tmp_path, 'c.Grading.lms_timezone = "UTC"\n'
                                     'c.Grading.roster = "roster.csv"\n')
    (root / "roster.csv").write_text("lms_id,student_id,name\ns1001,s1,Ada Lovelace\n"
                                     "s1002,s2,Alan Turing\ns1003,s3,Grace Hopper\n")
    first, second = datetime.datetime(2026, 10, 5, 20, 0), datetime.datetime(2026, 10, 6, 9, 30)
    download(archive, {
        blackboard_entry("Unit 1", "s1001", first, NOTEBOOK): NB,  # then a text-only attempt
        blackboard_entry("Unit 1", "s1001", first): "receipt",
        blackboard_entry("Unit 1", "s1001", second): "receipt",
        blackboard_entry("Unit 1", "s1002", first): "receipt",  # a text-only attempt alone
        blackboard_entry("Unit 1", "s1003", second, NOTEBOOK): NB,  # a later attempt
        blackboard_entry("Unit 1", "s1003", second): "receipt",  # collected, and an
        blackboard_entry("Unit 1", "s1003", first): "receipt",  # earlier one of no file
        blackboard_entry("Unit 1", "mallory", first): "receipt",  # no student of the roster
    })
    out = run(root, "unit1")
    why = ("no file of this attempt is in the download (a text-only attempt, or one whose "
           "files were left out of the download)")
    assert [line for line in out.splitlines() if "RECEIPT" in line] == [
        f"  RECEIPT WITHOUT FILES Unit 1_mallory_attempt_2026-10-05-20-00-00.txt: {why}; "
        "Blackboard username mallory, no student: no student of the roster has this "
        "blackboard id 'mallory' (add a row for it)",
        f"  RECEIPT WITHOUT FILES Unit 1_s1001_attempt_2026-10-06-09-30-00.txt: {why}; "
        "Blackboard username s1001, student s1: collected from an earlier attempt (Unit "
        f"1_s1001_attempt_2026-10-05-20-00-00_{NOTEBOOK}), and this one is later: check it "
        "in Blackboard",
        f"  RECEIPT WITHOUT FILES Unit 1_s1002_attempt_2026-10-05-20-00-00.txt: {why}; "
        "Blackboard username s1002, student s2: nothing collected for s2 (grade the attempt "
        "in Blackboard, or download its files and collect again)",
        f"  RECEIPT WITHOUT FILES Unit 1_s1003_attempt_2026-10-05-20-00-00.txt: {why}; "
        "Blackboard username s1003, student s3: collected from a later attempt (Unit "
        f"1_s1003_attempt_2026-10-06-09-30-00_{NOTEBOOK})"]
    assert "6 Blackboard receipts read (the times are their names')" in out
    assert submissions(root, Course.load(root), ["unit1"]) == {"unit1": ["s1", "s3"]}
    assert reasons(out) == {}


# --- Brightspace (D2L) --------------------------------------------------------------------
# Built from documentation and third-party tools, not yet checked against a real download:
# Brightspace's "Download" of an assignment's submissions holds a folder per submission,
# "<n>-<n> - <First Last> - <Mon D, YYYY HMM AM>/<file>" (older downloads: the file loose,
# "... - <file>"), and an index.html (gitchrisqueen/cpcc_task_automation's test of
# "BrightSpace's actual format": "39786-640693 - Aiden Rodriguez - Oct 10, 2025 1022 AM/").

def brightspace_entry(ids, name, when, file=None):
    """A submission's folder, "<n>-<n> - <First Last> - <Mon D, YYYY HMM AM>", or with file
    a loose file's name in it (older downloads)."""
    stem = f"{ids} - {name} - {when:%b} {when.day}, {when.year} " \
           f"{when.hour % 12 or 12}{when:%M} {'AP'[when.hour >= 12]}M"
    return f"{stem} - {file}" if file else stem


def test_brightspace_folders_and_loose_files(tmp_path):
    root, archive = course(tmp_path, 'c.Grading.lms_timezone = "America/Chicago"\n')
    ada = brightspace_entry("39786-640693", "Ada Lovelace", datetime.datetime(2026, 10, 5, 21, 14))
    alan = brightspace_entry("39787-640694", "Alan Turing", datetime.datetime(2026, 10, 6, 10, 5))
    assert (ada, alan) == ("39786-640693 - Ada Lovelace - Oct 5, 2026 914 PM",
                           "39787-640694 - Alan Turing - Oct 6, 2026 1005 AM")
    download(archive, {f"{ada}/{NOTEBOOK}": NB, f"{ada}/layer_norm.py": PY,
                       f"{alan} - {NOTEBOOK}": NB, f"{alan} - layer_norm.py": PY,
                       "index.html": "<html>the download's index</html>"})
    out = run(root, "unit1")
    assert held(root, "ada-lovelace") == {NOTEBOOK: NB, "normlib/layer_norm.py": PY,
                                          "timestamp.txt": "2026-10-06 02:14:00.000000 UTC"}
    assert held(root, "alan-turing") == {NOTEBOOK: NB, "normlib/layer_norm.py": PY,
                                         "timestamp.txt": "2026-10-06 15:05:00.000000 UTC"}
    assert list(reasons(out)) == ["index.html"]
    assert read_collected(root, "unit1") == {
        "ada-lovelace": provenance([ada], "brightspace", "39786-640693", "Ada Lovelace",
                               "2026-10-05T21:14:00-05:00", "Brightspace's name"),
        "alan-turing": provenance([f"{alan} - {NOTEBOOK}", f"{alan} - layer_norm.py"],
                              "brightspace", "39787-640694", "Alan Turing",
                              "2026-10-06T10:05:00-05:00", "Brightspace's name")}



BRIGHT = "c.Grading.lms_timezone = \"America/Chicago\"\n" \
         "c.Grading.due = {\"unit1\": \"2026-10-05 23:59 -05:00\"}\n"


@pytest.mark.parametrize("roster", [None, "lms_id,student_id,name\n39786-640693,s1001,Ada "
                                          "Lovelace\n39787-640694,s1002,Alan Turing\n"])
def test_a_brightspace_display_name_never_makes_one_student_another(tmp_path, roster):
    """Issue 58: Mallory renames herself "Ada Lovelace" and submits later: her entry
    replaced Ada's, whose own was refused as "an older submission". Brightspace's ids
    decide: without a roster, two ids of one display name are two people, both refused
    with the reason; with a roster that gives Ada her id, Mallory's entry alone is refused
    and Ada's collected. Alan is collected either way."""
    root, archive = course(tmp_path, BRIGHT + ('c.Grading.roster = "roster.csv"\n'
                                               if roster else ""))
    if roster:
        (root / "roster.csv").write_text(roster)
    ada = brightspace_entry("39786-640693", "Ada Lovelace", datetime.datetime(2026, 10, 5, 21, 14))
    alan = brightspace_entry("39787-640694", "Alan Turing", datetime.datetime(2026, 10, 5, 22, 5))
    mallory = brightspace_entry("39790-640700", "Ada Lovelace",
                                datetime.datetime(2026, 10, 5, 23, 0))
    download(archive, {f"{ada}/{NOTEBOOK}": NB, f"{ada}/layer_norm.py": PY,
                       f"{alan}/{NOTEBOOK}": NB, f"{mallory}/{NOTEBOOK}": NB,
                       f"{mallory}/layer_norm.py": "x = 'mallory'\n"})
    out = run(root, "unit1")
    found = reasons(out)
    ada_id, alan_id = ("s1001", "s1002") if roster else ("ada-lovelace", "alan-turing")
    if roster:
        assert list(found) == [mallory]
        assert found[mallory] == (
            "its display name 'Ada Lovelace' is the roster's s1001, whose brightspace id is "
            "39786-640693, not this entry's 39790-640700: the LMS's id decides, never a "
            "display name (refused)")
        assert held(root, ada_id)["normlib/layer_norm.py"] == PY
    else:
        assert sorted(found) == sorted([ada, mallory])
        assert found[ada] == found[mallory] == (
            f"2 entries named ada-lovelace ({ada}, {mallory}) are 2 people to the LMS (its "
            "numbers differ): all refused (a roster tells them apart)")
        assert not (root / "submitted" / ada_id).exists()
    assert held(root, alan_id) == {NOTEBOOK: NB, "timestamp.txt": "2026-10-06 03:05:00.000000 UTC"}


def test_a_later_download_never_replaces_a_submission_by_a_display_name(tmp_path):
    """Issue 58: Ada's submission was collected; a later download holds Mallory's, renamed
    "Ada Lovelace", alone: it would replace Ada's. collected.json says whose id Ada's is:
    Mallory's entry is refused, Ada's submission stays."""
    root, archive = course(tmp_path, BRIGHT)
    ada = brightspace_entry("39786-640693", "Ada Lovelace", datetime.datetime(2026, 10, 5, 21, 14))
    download(archive, {f"{ada}/{NOTEBOOK}": NB, f"{ada}/layer_norm.py": PY})
    assert reasons(run(root, "unit1")) == {}
    mallory = brightspace_entry("39790-640700", "Ada Lovelace",
                                datetime.datetime(2026, 10, 5, 23, 0))
    shutil.rmtree(archive)  # (the next download, extracted in its place)
    download(archive, {f"{mallory}/{NOTEBOOK}": NB, f"{mallory}/layer_norm.py": "x = 'm'\n"})
    assert reasons(run(root, "unit1")) == {mallory: (
        "the submission of ada-lovelace collected before is brightspace id 39786-640693's, "
        "this entry is id 39790-640700's: two people to the LMS of one name, refused (a "
        "roster tells them apart)")}
    assert held(root, "ada-lovelace")["normlib/layer_norm.py"] == PY


def test_a_date_in_a_brightspace_display_name_is_never_the_lmss(tmp_path):
    """Issue 58: Eve writes " - Oct 5, 2026 914 PM" into her display name and submits on
    the 9th: the name was read at its first date, hers, and she was on time. Brightspace
    writes its own date last (a folder's name ends with it): read there, she is late. A
    loose file's name, where a file's own name follows the date, cannot tell which date
    is Brightspace's when it holds two: refused, saying why. Ada, on time, beside her."""
    root, archive = course(tmp_path, BRIGHT)
    ada = brightspace_entry("39786-640693", "Ada Lovelace", datetime.datetime(2026, 10, 5, 21, 14))
    eve = brightspace_entry("39788-640695", "Eve - Oct 5, 2026 914 PM",
                            datetime.datetime(2026, 10, 9, 10, 0))
    loose = brightspace_entry("39789-640696", "Oscar - Oct 5, 2026 914 PM",
                              datetime.datetime(2026, 10, 9, 10, 0), NOTEBOOK)
    assert eve == "39788-640695 - Eve - Oct 5, 2026 914 PM - Oct 9, 2026 1000 AM"
    download(archive, {f"{ada}/{NOTEBOOK}": NB, f"{eve}/{NOTEBOOK}": NB, loose: NB})
    out = run(root, "unit1")
    assert reasons(out) == {loose: (
        "its name holds 2 dates written as Brightspace writes its own (Oct 5, 2026 914 PM; "
        "Oct 9, 2026 1000 AM), and a display name or a file's name may hold one: which is "
        "Brightspace's cannot be told (refused, never guessed)")}
    assert held(root, "eve---oct-5-2026-914-pm") == {
        NOTEBOOK: NB, "timestamp.txt": "2026-10-09 15:00:00.000000 UTC"}
    assert "late: eve---oct-5-2026-914-pm (3 d 10 h 1 min late)" in out
    assert held(root, "ada-lovelace")["timestamp.txt"] == "2026-10-06 02:14:00.000000 UTC"


def test_local_times_that_happen_twice_or_never_are_never_read_in_the_students_favour(
        tmp_path):
    """Issue 58: 02:30 on 25 October 2026 happens twice in Berlin (summer time ends at
    03:00 CEST); read as its first occurrence (CEST, 00:30 UTC) Eve was on time for a due
    date of 01:00 UTC, read as the later (CET, 01:30 UTC) she is 30 minutes late, and the
    report says so. 02:30 on 29 March 2026 never happens there (summer time starts at
    02:00): no date the LMS writes, Mallory's entry is refused, saying why. Ada, on time,
    beside them."""
    root, archive = course(tmp_path, 'c.Grading.lms_timezone = "Europe/Berlin"\n'
                                     'c.Grading.due = {"unit1": "2026-10-25 01:00 +00:00"}\n')
    ada = brightspace_entry("39786-640693", "Ada Lovelace", datetime.datetime(2026, 10, 24, 22, 0))
    eve = brightspace_entry("39788-640695", "Eve Other", datetime.datetime(2026, 10, 25, 2, 30))
    mallory = brightspace_entry("39789-640696", "Mallory Other",
                                datetime.datetime(2026, 3, 29, 2, 30))
    download(archive, {f"{e}/{NOTEBOOK}": NB for e in (ada, eve, mallory)})
    out = run(root, "unit1")
    assert reasons(out) == {mallory: (
        "its date cannot be read: 2026-03-29 02:30 never happens in Europe/Berlin (the hour "
        "skipped when summer time starts): not a time the LMS writes; is "
        "c.Grading.lms_timezone the zone of the account that downloaded it?")}
    assert held(root, "eve-other")["timestamp.txt"] == "2026-10-25 01:30:00.000000 UTC"
    assert "late: eve-other (30 min late)" in out
    assert "  times in the hour when summer time ends, which happens twice, read as its later " \
           "occurrence (never less late): eve-other (2026-10-25 02:30 CET)" in out.splitlines()
    assert held(root, "ada-lovelace")["timestamp.txt"] == "2026-10-24 20:00:00.000000 UTC"


def test_localized_names_are_read_through_the_courses_patterns(tmp_path):
    """A Blackboard in German ("Versuch") and a Brightspace writing dates day first, read
    through c.Grading.lms_patterns and c.Grading.lms_formats."""
    config = ('c.Grading.lms_timezone = "Europe/Berlin"\n'
              "c.Grading.lms_patterns = {"
              "'blackboard': r'(?P<assignment>.+?)_(?P<key>[^_]+)_Versuch_"
              r"(?P<time>\d{4}(?:-\d\d){5})(?:_(?P<rest>.*))?', "
              r"'brightspace': r'(?P<key>\d+-\d+) - (?P<name>.+?) - "
              r"(?P<time>\d\d\.\d\d\.\d{4} \d\d:\d\d)(?: - (?P<rest>.*))?'}" "\n"
              'c.Grading.lms_formats = {"brightspace": "%d.%m.%Y %H:%M"}\n')
    root, archive = course(tmp_path, config)
    download(archive, {"Einheit 1_s1001_Versuch_2026-10-05-21-14-03_layer_norm.py": PY,
                       f"1-2 - Ada Lovelace - 05.10.2026 21:15 - {NOTEBOOK}": NB})
    out = run(root, "unit1")
    assert reasons(out) == {}
    assert held(root, "s1001") == {"normlib/layer_norm.py": PY,
                                   "timestamp.txt": "2026-10-05 19:14:03.000000 UTC"}
    assert held(root, "ada-lovelace") == {NOTEBOOK: NB,
                                          "timestamp.txt": "2026-10-05 19:15:00.000000 UTC"}


@pytest.mark.parametrize("patterns,message", [
    ("{'blackboard': '(?P<key>'}", "c.Grading.lms_patterns['blackboard'] does not compile: "
                                   "missing ), unterminated subpattern at position 0"),
    ("{'brightspace': '(?P<key>.+) - (?P<time>.+)'}",
     "c.Grading.lms_patterns['brightspace'] lacks the named group (?P<name>...) (it needs "
     "key, name, time; 'rest' for a file's name)"),
    ("{'moodle': '.*'}", "c.Grading.lms_patterns: no LMS named 'moodle' (they are "
                         "blackboard, brightspace)"),
])
def test_a_pattern_that_cannot_read_a_name_stops_at_the_settings(tmp_path, patterns, message):
    root, _ = course(tmp_path, f"c.Grading.lms_patterns = {patterns}\n")
    with pytest.raises(SystemExit) as stopped:
        read(root)
    assert str(stopped.value) == message


# --- make collect DRY_RUN=1: what would be, nothing touched --------------------------------

def listing(root):
    """Every file and folder under root: {path: (mtime_ns, bytes, or None for a folder)}."""
    found = {}
    for top, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(top, name)
            info = os.lstat(path)
            found[os.path.relpath(path, root)] = (
                info.st_mtime_ns, None if name in dirs else open(path, "rb").read())
    return found


def test_a_dry_run_prints_the_collect_and_touches_nothing(tmp_path):
    root, archive = course(tmp_path, 'c.Grading.roster = "roster.csv"\n')
    (root / "roster.csv").write_text("lms_id,student_id,name\n50001,s1,Ada Lovelace\n"
                                     "50002,s2,Alan Turing\n50004,s4,Barbara Liskov\n")
    ada = canvas_prefix("Lovelace, Ada", 50001)
    download(archive, {canvas_entry(ada, 7201, NOTEBOOK): NB})
    run(root, "unit1")  # ada collected before
    download(archive, {
        canvas_entry(ada, 7202, "layer_norm.py"): PY,
        canvas_entry(canvas_prefix("Turing, Alan", 50002, late=True), 7301, NOTEBOOK): NB,
        canvas_entry(canvas_prefix("Liskov, Barbara", 50004), 7501, "report.pdf"): "%PDF",
    })
    before = listing(root)
    result = subprocess.run(["make", "-s", "collect", f"COURSE_DIR={root}",
                             "A=unit1", "DRY_RUN=1"], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert listing(root) == before
    assert result.stdout.splitlines() == [
        "DRY RUN (nothing written or moved): collected unit1: 4 entries in archive/, 2 would "
        "be collected (1 new, 1 replacing an older submission, 0 unchanged), 1 would be "
        "rejected",
        f"  would collect s1 (replaced) from {canvas_entry(ada, 7201, NOTEBOOK)}, "
        f"{canvas_entry(ada, 7202, 'layer_norm.py')}; time unknown",
        f"  would collect s2 (new) from turingalan_LATE_50002_7301_{NOTEBOOK}; time unknown "
        "(Canvas's _LATE marker: late)",
        "  TIMES UNKNOWN for 2 of 2: s1, s2. No date the LMS wrote gives their submission "
        "time (not the zip's dates, nor a file of the student's): none of them is marked "
        "late by a date. Add the LMS's times beside archive/ (Moodle's grading worksheet, or "
        "an export: docs/instructors.md, step 3)",
        "  late: s2 (late by Canvas's _LATE marker; no time)",
        "  REJECTED liskovbarbara_50004_7501_report.pdf: 'report.pdf' is neither a notebook "
        "nor one of the assignment's exercise files (layer_norm.py); would move to "
        "downloaded/unit1/rejected/"]
    out = run(root, "unit1")  # and the collect itself does what the dry run said
    assert "4 entries in archive/, 2 collected (1 new, 1 replacing an older submission, 0 " \
           "unchanged), 1 rejected" in out
    assert held(root, "s1") == {NOTEBOOK: NB, "normlib/layer_norm.py": PY}


# --- the roster's names in nbgrader's student table ---------------------------------------

def test_the_rosters_names_reach_the_gradebook(tmp_path):
    """formgrader showed no names: the roster never reached nbgrader's student table. Each
    student collected is created or updated there: first_name/last_name columns where the
    roster has them, else "Last, First", else the first word and the rest."""
    from tools.instructor.gradebook import connect

    root, archive = course(tmp_path, 'c.Grading.roster = "roster.csv"\n')
    (root / "roster.csv").write_text(
        "lms_id,student_id,name,email,first_name,last_name\n"
        '50001,s1,"Lovelace, Ada",ada@example.edu,,\n'
        "50002,s2,Guido van Rossum,,,\n"
        "50003,s3,Grace Hopper,grace@example.edu,Grace Brewster,Hopper\n"
        "50004,s4,Plato,,,\n"
        "50005,s5,Not Collected,,,\n")
    download(archive, {canvas_entry(canvas_prefix(sortable, uid), uid + 100, NOTEBOOK): NB
                       for sortable, uid in (("Lovelace, Ada", 50001),
                                             ("van Rossum, Guido", 50002),
                                             ("Hopper, Grace", 50003), ("Plato", 50004))})
    out = run(root, "unit1")
    assert "names of 4 students from the roster in the gradebook (formgrader shows them)" in out

    def table():
        with connect(root) as gradebook:
            return {s.id: (s.first_name, s.last_name, s.email) for s in gradebook.students}

    assert table() == {"s1": ("Ada", "Lovelace", "ada@example.edu"),
                       "s2": ("Guido", "van Rossum", None),
                       "s3": ("Grace Brewster", "Hopper", "grace@example.edu"),
                       "s4": ("", "Plato", None)}
    (root / "roster.csv").write_text(  # a name corrected in the roster: corrected there too
        "lms_id,student_id,name,email\n50001,s1,Ada King,ada@example.edu\n"
        "50002,s2,Guido van Rossum,\n50003,s3,Grace Hopper,\n50004,s4,Plato,\n")
    assert "4 unchanged" in run(root, "unit1")
    assert table()["s1"] == ("Ada", "King", "ada@example.edu")


# --- names in every script (issue 62, point 1) --------------------------------------------
# (first, last) of a student of each script family; the Vietnamese name as a Mac extracts
# it, decomposed (NFD): read in NFC, as the LMS stores it
SCRIPTS = {
    "Latin with accents": ("José", "Núñez"),
    "CJK": ("太郎", "山田"),
    "Thai": ("สมชาย", "ใจดี"),
    "Devanagari": ("अनिल", "कुमार"),
    "Arabic": ("محمد", "علي"),
    "decomposed Vietnamese": (unicodedata.normalize("NFD", "Văn An"),
                              unicodedata.normalize("NFD", "Nguyễn")),
}
WHEN = datetime.datetime(2026, 10, 5, 21, 14)


def nfc(text):
    return unicodedata.normalize("NFC", text)


def student_entry(lms, first, last, n, when=WHEN):
    """(the entry lms writes for a student's notebook, {its name: its text}, the student
    id collect must give them without a roster): n numbers them apart (Moodle's
    participant, Canvas's and Brightspace's ids), when is Blackboard's and Brightspace's
    time."""
    user = nfc(f"{first}{last}".replace(" ", ""))  # (a username, a plain id: no space)
    slugged = nfc(f"{first} {last}").lower().replace(" ", "-")
    if lms == "moodle":  # (a folder per student, Moodle's default)
        return {f"{moodle_prefix(f'{first} {last}', n)}_assignsubmission_file/{NOTEBOOK}": NB}, \
            slugged
    if lms == "canvas":
        prefix = canvas_prefix(f"{last}, {first}", 50000 + n)
        return {canvas_entry(prefix, 7000 + n, NOTEBOOK): NB}, nfc(prefix.rsplit("_", 1)[0])
    if lms == "blackboard":  # (a username in the student's script)
        return {blackboard_entry("Unit 1", user, when, NOTEBOOK): NB}, user
    if lms == "brightspace":
        ids = f"{39000 + n}-{64000 + n}"
        return {f"{brightspace_entry(ids, f'{first} {last}', when)}/{NOTEBOOK}": NB}, slugged
    return {f"{user}_unit1.zip": zipped({NOTEBOOK: NB})}, user  # plain: <id>_<assignment>.zip


def script_class(lms):
    """({entry: text} of a download of the class of SCRIPTS as lms names it, {student id
    collect must give each}), without a roster."""
    entries, ids = {}, {}
    for n, (first, last) in enumerate(SCRIPTS.values(), start=1):
        entry, student = student_entry(lms, first, last, n)
        entries |= entry
        ids[student] = n
    return entries, ids


def script_roster(lms):
    """The roster of SCRIPTS's class as an instructor types it (NFC), with the LMS's ids."""
    rows = ["lms_id,student_id,name"]
    for n, (first, last) in enumerate(SCRIPTS.values(), start=1):
        user = nfc(f"{first}{last}".replace(" ", ""))
        lms_id = {"canvas": f"{50000 + n}", "blackboard": user,
                  "brightspace": f"{39000 + n}-{64000 + n}"}.get(lms, "")
        rows.append(f"{lms_id},{user if lms == 'plain' else f's{n}'},{nfc(f'{first} {last}')}")
    return "\n".join(rows) + "\n"


@pytest.mark.parametrize("roster", [False, True], ids=["no roster", "a roster"])
@pytest.mark.parametrize("lms", ["moodle", "canvas", "blackboard", "brightspace", "plain"])
def test_names_in_every_script_are_read_as_each_lms_writes_them(tmp_path, lms, roster):
    """Each LMS's names of a class in six scripts, marks and a decomposed name included:
    every student collected, under an id in NFC that keeps the name's marks, or the
    roster's (its names compared with the LMS's in NFC)."""
    root, archive = course(tmp_path, 'c.Grading.lms_timezone = "UTC"\n' +
                           'c.Grading.roster = "roster.csv"\n' * roster)
    entries, ids = script_class(lms)
    if roster:
        (root / "roster.csv").write_text(script_roster(lms))
        ids = {row.split(",")[1]: 0 for row in script_roster(lms).splitlines()[1:]}
    download(archive, entries)
    out = run(root, "unit1")
    assert reasons(out) == {}, out
    assert submissions(root, Course.load(root), ["unit1"]) == {"unit1": sorted(ids)}, out
    assert all(unicodedata.normalize("NFC", s) == s for s in ids)


# --- time zones across summer time (issue 62, point 4) ------------------------------------
# (zone, due as the course writes it, in its own zone, the submission's local time in the
# LMS's name, the lateness in UTC): each across one change of summer time
CHANGES = {
    "New York, summer time ends": ("America/New_York", "2026-11-01 00:30",
                                   datetime.datetime(2026, 11, 1, 3, 0), "3 h 30 min late"),
    "New York, summer time starts": ("America/New_York", "2026-03-08 01:30",
                                     datetime.datetime(2026, 3, 8, 3, 30), "1 h late"),
    "Sydney, summer time ends": ("Australia/Sydney", "2026-04-05 01:30",
                                 datetime.datetime(2026, 4, 5, 3, 0), "2 h 30 min late"),
    "Sydney, summer time starts": ("Australia/Sydney", "2026-10-04 01:00",
                                   datetime.datetime(2026, 10, 4, 4, 0), "2 h late"),
}


@pytest.mark.parametrize("change", CHANGES, ids=list(CHANGES))
def test_lateness_across_a_change_of_summer_time_is_counted_in_utc(tmp_path, change):
    """A due date and a submission in one zone, on either side of a change: late by the
    time that passed, not by the clocks' difference (Python subtracts two times of one
    zone by their clocks), as grades.csv counts it (tests/test_late.py)."""
    tz, due, when, late = CHANGES[change]
    root, archive = course(tmp_path, f'c.Grading.lms_timezone = "{tz}"\n'
                                     f'c.Grading.timezone = "{tz}"\n'
                                     f'c.Grading.due = {{"unit1": "{due}"}}\n')
    download(archive, {blackboard_entry("Unit 1", "s1", when, NOTEBOOK): NB})
    out = run(root, "unit1")
    assert f"late: s1 ({late})" in out, out


def test_two_attempts_in_the_repeated_hour_are_ordered_by_the_zone_their_receipts_name(
        tmp_path):
    """01:30 EDT comes before 01:10 EST on 1 November 2026 in New York: the receipts'
    zones order the two attempts, the later kept. Without receipts the two cannot be
    ordered: both refused, saying why, never the first reading's order."""
    root, archive = course(tmp_path, 'c.Grading.lms_timezone = "America/New_York"\n')
    first, second = datetime.datetime(2026, 11, 1, 1, 30), datetime.datetime(2026, 11, 1, 1, 10)
    entries = {blackboard_entry("Unit 1", "s1", first, NOTEBOOK): '{"v": 1}',
               blackboard_entry("Unit 1", "s1", second, NOTEBOOK): '{"v": 2}'}
    receipts = {blackboard_entry("Unit 1", "s1", first):
                "Name: S One (s1)\nDate Submitted: Sunday, November 1, 2026 1:30:00 AM EDT\n",
                blackboard_entry("Unit 1", "s1", second):
                "Name: S One (s1)\nDate Submitted: Sunday, November 1, 2026 1:10:00 AM EST\n"}
    download(archive, {**entries, **receipts})
    out = run(root, "unit1")
    assert held(root, "s1")[NOTEBOOK] == '{"v": 2}', out
    assert held(root, "s1")["timestamp.txt"] == "2026-11-01 06:10:00.000000 UTC"
    assert "an older submission of s1" in reasons(out)[list(entries)[0]]
    shutil.rmtree(root / "submitted")
    (root / "downloaded" / "unit1").rename(tmp_path / "first-download")
    archive.mkdir(parents=True)
    download(archive, entries)
    out = run(root, "unit1")
    assert all("2 of them in the hour when summer time ends" in reasons(out)[e]
               for e in entries), out


# --- extensions the LMS granted (issue 62, point 6) ---------------------------------------

def test_moodles_extensions_reach_the_late_policy_and_the_courses_own_win(tmp_path):
    """Moodle's grading worksheet says an extension in its Status ("... - Extension
    granted until: <date>", gradingtable.php): collect keeps it in the student's
    provenance, the late policy applies it (the submission two days after the due date is
    on time), and an extension of the course's own (c.Grading.extensions) wins over it."""
    from tools.course.late import Policy, decide
    from tools.instructor.grades import lms_extension

    root, archive = course(tmp_path, 'c.Grading.lms_timezone = "Europe/Berlin"\n')
    ada, alan = moodle_prefix("Ada Lovelace", 11), moodle_prefix("Alan Turing", 12)
    download(archive, {f"{ada}_assignsubmission_file/{NOTEBOOK}": NB,
                       f"{alan}_assignsubmission_file/{NOTEBOOK}": NB})
    (archive.parent / "Grades-unit1.csv").write_text(worksheet([
        (11, "Ada Lovelace", "ada@example.edu", "Wednesday, 7 October 2026, 10:00 AM"),
        (12, "Alan Turing", "alan@example.edu", "Wednesday, 7 October 2026, 10:00 AM")],
        {11: "Submitted for grading - Extension granted until: Friday, 9 October 2026, "
             "11:59 PM"}))
    run(root, "unit1")
    found = read_collected(root, "unit1")
    assert found["ada-lovelace"]["extension"] == "2026-10-09T23:59:00+02:00"
    assert found["alan-turing"]["extension"] is None
    berlin = zoneinfo.ZoneInfo("Europe/Berlin")
    due = datetime.datetime(2026, 10, 5, 23, 59, tzinfo=berlin)
    when = datetime.datetime(2026, 10, 7, 10, 0, tzinfo=berlin)
    granted = lms_extension(found["ada-lovelace"])
    assert decide(Policy(zone=berlin), "unit1", "ada-lovelace", due, when, False, 7, 0,
                  granted).rule == "on time"
    assert decide(Policy(zone=berlin), "unit1", "alan-turing", due, when, False, 7, 0,
                  lms_extension(found["alan-turing"])).rule != "on time"
    ours = Policy(zone=berlin, extensions={"unit1": {"ada-lovelace": datetime.datetime(
        2026, 10, 6, 23, 59, tzinfo=berlin)}})
    assert decide(ours, "unit1", "ada-lovelace", due, when, False, 7, 0, granted).rule != \
        "on time"


# --- a large class in every script, collected three times (issue 62's "done when") --------

def class_of_300(lms):
    """({entry: text} of a 300-student download of lms, {student id: its UTC time or
    None}): names cycling through SCRIPTS, numbered apart; Blackboard's attempts 17
    minutes apart from a day before New York's summer time ends."""
    entries, expected = {}, {}
    tz = zoneinfo.ZoneInfo("America/New_York")
    for i in range(300):
        first, last = list(SCRIPTS.values())[i % len(SCRIPTS)]
        when = datetime.datetime(2026, 10, 31) + datetime.timedelta(minutes=17 * i)
        if downloads.ambiguous(when.replace(tzinfo=tz)):
            when += datetime.timedelta(hours=1)  # (the repeated hour: its own test)
        entry, student = student_entry(lms, f"{first}{i}", last, 100 + i, when)
        entries |= entry
        expected[student] = f"{downloads.utc(when.replace(tzinfo=tz)):%Y-%m-%d %H:%M:%S}" \
            if lms == "blackboard" else None
    return entries, expected


@pytest.mark.parametrize("lms", ["moodle", "canvas", "blackboard"])
def test_a_class_of_300_in_every_script_is_collected_alike_three_times(tmp_path, lms):
    root, archive = course(tmp_path, 'c.Grading.lms_timezone = "America/New_York"\n')
    entries, expected = class_of_300(lms)
    states = []
    for _ in range(3):  # (the download extracted again over archive/ each time)
        download(archive, entries)
        out = run(root, "unit1")
        assert reasons(out) == {}, out
        states.append(snapshot(root))
    assert states[0] == states[1] == states[2]
    assert sorted(states[0][1]) == sorted(expected), sorted(set(states[0][1]) ^ set(expected))
    for student, when in expected.items():
        stamp = root / "submitted" / student / "unit1" / "timestamp.txt"
        assert (stamp.read_text()[:19] if stamp.exists() else None) == when, student


# --- group submissions (issue 62, point 5) ------------------------------------------------
GROUPED = ("lms_id,student_id,name,email,group\n"
           "50001,s1001,Ada Lovelace,ada@example.edu,Team Babbage\n"
           "50002,s1002,Alan Turing,alan@example.edu,Team Babbage\n"
           "50003,s1003,Grace Hopper,grace@example.edu,Team COBOL\n"
           "50004,s1004,Barbara Liskov,barbara@example.edu,\n")


@pytest.mark.parametrize("lms", ["moodle", "canvas"])
def test_a_groups_submission_is_collected_for_every_member(tmp_path, lms):
    """Moodle names a team's submission by its group's name and id (downloader.php's
    get_student_prefix); Canvas by one member's (content_zipper.rb: the group's
    representative). In a group assignment each is collected for every member the roster's
    group column lists; a student in no group is collected alone. Moodle's time comes from
    a member's row of its worksheet."""
    root, archive = course(tmp_path, 'c.Grading.lms_timezone = "Europe/Berlin"\n'
                                     'c.Grading.roster = "roster.csv"\n'
                                     'c.Grading.group_assignments = ["unit1"]\n')
    (root / "roster.csv").write_text(GROUPED)
    if lms == "moodle":
        babbage = moodle_prefix("Team Babbage", 42)  # (42: the group's id, not a participant)
        cobol = moodle_prefix("Team COBOL", 43)
        download(archive, {f"{babbage}_assignsubmission_file/{NOTEBOOK}": NB,
                           f"{cobol}_assignsubmission_file/{NOTEBOOK}": '{"v": 3}'})
        (archive.parent / "Grades-unit1.csv").write_text(worksheet([
            (42, "Someone Else", "else@example.edu", "Monday, 5 October 2026, 1:00 PM"),
            (11, "Ada Lovelace", "ada@example.edu", "Monday, 5 October 2026, 9:14 PM"),
            (12, "Alan Turing", "alan@example.edu", "Monday, 5 October 2026, 9:14 PM")]))
    else:
        download(archive, {
            canvas_entry(canvas_prefix("Turing, Alan", 50002), 7001, NOTEBOOK): NB,
            canvas_entry(canvas_prefix("Hopper, Grace", 50003), 7002, NOTEBOOK): '{"v": 3}',
            canvas_entry(canvas_prefix("Liskov, Barbara", 50004), 7003, NOTEBOOK): PY})
    out = run(root, "unit1")
    assert reasons(out) == {}, out
    held_by = {s: held(root, s).get(NOTEBOOK) for s in ("s1001", "s1002", "s1003", "s1004")}
    assert held_by == {"s1001": NB, "s1002": NB, "s1003": '{"v": 3}',
                       "s1004": PY if lms == "canvas" else None}
    if lms == "moodle":  # (a member's row's time, never participant 42's)
        assert held(root, "s1001")["timestamp.txt"] == "2026-10-05 19:14:00.000000 UTC"
        assert read_collected(root, "unit1")["s1002"]["key"] == "group 42"


def test_a_group_assignment_without_groups_and_a_team_entry_in_an_individual_one_say_why(
        tmp_path):
    root, archive = course(tmp_path, 'c.Grading.roster = "roster.csv"\n'
                                     'c.Grading.lms_timezone = "Europe/Berlin"\n')
    (root / "roster.csv").write_text("lms_id,student_id,name\n,s1001,Ada Lovelace\n")
    team = f"{moodle_prefix('Team Babbage', 42)}_assignsubmission_file"
    download(archive, {f"{team}/{NOTEBOOK}": NB})
    (archive.parent / "Grades-unit1.csv").write_text(worksheet([
        (11, "Ada Lovelace", "ada@example.edu", "Monday, 5 October 2026, 9:14 PM")]))
    assert "participant 42 is not in Grades-unit1.csv; if the assignment takes team " \
           "submissions, Moodle names a team's by its group's name and id: list it in " \
           "c.Grading.group_assignments" in reasons(run(root, "unit1"))[team]
    (root / "nbgrader_config_local.py").write_text(
        'c.Grading.roster = "roster.csv"\nc.Grading.lms_timezone = "Europe/Berlin"\n'
        'c.Grading.group_assignments = ["unit1"]\n')
    shutil.move(archive.parent / "rejected" / team, archive / team)
    assert reasons(run(root, "unit1"))[team].startswith(
        "a group assignment (c.Grading.group_assignments) is collected for every member")
    (root / "nbgrader_config_local.py").write_text('c.Grading.group_assignments = ["unit10"]\n')
    with pytest.raises(SystemExit, match="c.Grading.group_assignments: no assignment unit10"):
        run(root, "unit1")
