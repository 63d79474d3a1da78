"""`make collect` from an LMS's download (tools/collect.py): every entry of archive/ is
collected, with its student id, files and submission time, or rejected with its reason,
and the instructor is told which and why; none vanishes."""

import contextlib
import io
import os
import zipfile

import pytest

from tools.collect import collect, student_of
from tools.course import build_course, submissions

NOTEBOOK = "01_layernorm_forward.ipynb"
GOOD = {NOTEBOOK: "{}", "normlib/layer_norm.py": "x = 1\n"}
DAY = 86400


def write_zip(path, files, mtime=None):
    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    if mtime is not None:
        os.utime(path, (mtime, mtime))


def invalid_utf8_name(path):
    """A zip whose entry name is flagged UTF-8 but is not (bytes replaced in place)."""
    write_zip(path, {"normlib/\u00e9.py": "x = 1\n"})
    path.write_bytes(path.read_bytes().replace("\u00e9".encode(), b"\xff\xfe"))


def run(root, *names):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        collect(root, list(names))
    return out.getvalue()


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    root = build_course(tmp_path_factory.mktemp("collect"), layout="unit")
    archive = root / "downloaded" / "unit1" / "archive"
    archive.mkdir(parents=True)
    write_zip(archive / "alice_unit1.zip", GOOD)
    write_zip(archive / "bob_unit1.zip", {"../../escape.py": "x = 1\n", **GOOD})
    (archive / "carol_unit1.zip").write_bytes(b"PK\x03\x04 truncated")
    invalid_utf8_name(archive / "dave_unit1.zip")
    write_zip(archive / "erin_unit1.zip", GOOD, mtime=1_700_000_000)
    write_zip(archive / "erin_unit1_v2.zip", {**GOOD, NOTEBOOK: '{"v": 2}'},
              mtime=1_700_000_000 + DAY)
    # one extra folder level, and junk beside it
    write_zip(archive / "frank_unit1.zip", {f"frank_unit1/unit1/{k}": v for k, v in GOOD.items()}
              | {"__MACOSX/frank_unit1/._x": "", "frank_unit1/unit1/.ipynb_checkpoints/a": ""})
    write_zip(archive / "Grace Hopper_1234567_assignsubmission_file_.zip", GOOD)  # Moodle
    write_zip(archive / "hoppergrace_LATE_12345_67890_unit1.zip", GOOD)  # Canvas
    write_zip(archive / "van_der_berg_unit1.zip", {"unit1/" + k: v for k, v in GOOD.items()})
    write_zip(archive / "ivan_unit1.zip", {"notes.txt": "I could not do it"})
    write_zip(archive / "judy_unit1.zip", {**GOOD, "timestamp.txt": "2026-10-05 21:14:03 UTC"})
    return root, run(root, "unit1")


def test_every_entry_is_collected_or_rejected_and_none_vanishes(collected):
    root, out = collected
    assert submissions(root, ["unit1"]) == {"unit1": [
        "alice", "erin", "frank", "grace-hopper", "hoppergrace", "judy", "van_der_berg"]}
    rejected = sorted(p.name for p in (root / "downloaded" / "unit1" / "rejected").iterdir())
    assert rejected == ["bob_unit1.zip", "carol_unit1.zip", "dave_unit1.zip",
                        "erin_unit1.zip", "ivan_unit1.zip"]
    assert len(list((root / "downloaded" / "unit1" / "archive").iterdir())) == 7
    assert "collected unit1: 12 entries in archive/, 7 collected (7 new, 0 replacing an " \
           "older submission, 0 unchanged), 5 rejected" in out
    assert not list(root.rglob("escape.py"))


@pytest.mark.parametrize("entry,reason", [
    ("bob_unit1.zip", "an entry outside its folder ('../../escape.py')"),
    ("carol_unit1.zip", "not a readable zip (BadZipFile"),
    ("dave_unit1.zip", "not a readable zip (UnicodeDecodeError"),
    ("erin_unit1.zip", "an older submission of erin: erin_unit1_v2.zip replaces it"),
    ("ivan_unit1.zip", "no notebook and no normlib/ file in it"),
])
def test_each_rejection_is_printed_with_its_reason(collected, entry, reason):
    _, out = collected
    lines = [line for line in out.splitlines() if line.strip().startswith(f"REJECTED {entry}:")]
    assert len(lines) == 1 and reason in lines[0], out


def test_the_files_are_found_however_deep_and_junk_is_left(collected):
    root, _ = collected
    for student in ("frank", "van_der_berg", "alice"):
        folder = root / "submitted" / student / "unit1"
        assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*")
                      if p.is_file()) == [NOTEBOOK, "normlib/layer_norm.py", "timestamp.txt"]
    newest = root / "submitted" / "erin" / "unit1" / NOTEBOOK
    assert newest.read_text() == '{"v": 2}'  # the newer of erin's two zips


def test_the_submission_time_is_the_zips_own_or_its_files(collected):
    root, _ = collected
    assert (root / "submitted/judy/unit1/timestamp.txt").read_text() == \
        "2026-10-05 21:14:03.000000 UTC"
    assert (root / "submitted/erin/unit1/timestamp.txt").read_text() == \
        "2023-11-15 22:13:20.000000 UTC"  # the newer zip's date: 1_700_000_000 + a day


def test_a_resubmission_replaces_an_older_one_and_an_older_zip_never_does(tmp_path):
    root = build_course(tmp_path, layout="unit")
    archive = root / "downloaded" / "unit1" / "archive"
    archive.mkdir(parents=True)
    write_zip(archive / "s1_unit1.zip", GOOD, mtime=1_700_000_000)
    assert "1 collected (1 new" in run(root, "unit1")
    assert "1 collected (0 new, 0 replacing an older submission, 1 unchanged)" in run(root)
    write_zip(archive / "s1_unit1_late.zip", {**GOOD, NOTEBOOK: '{"v": 2}'},
              mtime=1_700_000_000 + DAY)
    out = run(root, "unit1")
    assert "1 collected (0 new, 1 replacing an older submission, 0 unchanged)" in out
    assert "REJECTED s1_unit1.zip: an older submission of s1: s1_unit1_late.zip" in out
    assert (root / "submitted/s1/unit1" / NOTEBOOK).read_text() == '{"v": 2}'
    write_zip(archive / "s1_unit1_old.zip", GOOD, mtime=1_700_000_000 - DAY)
    out = run(root, "unit1")
    assert "REJECTED s1_unit1_old.zip: an older submission of s1" in out
    assert (root / "submitted/s1/unit1" / NOTEBOOK).read_text() == '{"v": 2}'


def test_a_roster_maps_lms_names_and_an_unknown_name_is_listed_not_guessed(tmp_path):
    root = build_course(tmp_path, layout="unit")
    (root / "roster.csv").write_text("lms_id,student_id,name\n1234567,s1001,Grace Hopper\n"
                                     "12345,s1002,Alan Turing\n,s1003,Ada Lovelace\n")
    (root / "nbgrader_config_local.py").write_text("c.Grading.roster = 'roster.csv'\n")
    archive = root / "downloaded" / "unit1" / "archive"
    archive.mkdir(parents=True)
    write_zip(archive / "Grace Hopper_1234567_assignsubmission_file_.zip", GOOD)
    write_zip(archive / "turingalan_12345_67890_unit1.zip", GOOD)
    write_zip(archive / "lovelaceada_555_67891_unit1.zip", GOOD)  # by name: id unknown
    write_zip(archive / "s1003_unit1.zip", GOOD)  # ... and by student id (the newer wins)
    write_zip(archive / "Mallory Unknown_999_assignsubmission_file_.zip", GOOD)
    out = run(root, "unit1")
    assert submissions(root, ["unit1"]) == {"unit1": ["s1001", "s1002", "s1003"]}
    assert "REJECTED Mallory Unknown_999_assignsubmission_file_.zip: no student of the " \
           "roster has this name" in out


@pytest.mark.parametrize("name,student", [
    ("s1004_unit1.zip", "s1004"),
    ("van_der_berg_unit1.zip", "van_der_berg"),
    ("van_der_berg.zip", "van_der_berg"),
    ("s1004_unit1_v2.zip", "s1004"),
    ("John Smith_1234567_assignsubmission_file_.zip", "john-smith"),
    ("John Smith_1234567_assignsubmission_file_", "john-smith"),  # (a folder)
    ("smithjohn_LATE_12345_67890_unit1.zip", "smithjohn"),
    ("smithjohn_12345_67890_normlib.zip", "smithjohn"),
])
def test_student_ids_of_zip_names_without_a_roster(name, student):
    assert student_of(name, "unit1") == student


def test_a_folder_of_the_download_is_an_entry_too(tmp_path):
    """Moodle's download, unzipped once: a folder per submission, holding the student's
    zip, or the files themselves."""
    root = build_course(tmp_path, layout="unit")
    archive = root / "downloaded" / "unit1" / "archive"
    (archive / "Ada Lovelace_111_assignsubmission_file_").mkdir(parents=True)
    write_zip(archive / "Ada Lovelace_111_assignsubmission_file_" / "mywork.zip", GOOD)
    files = archive / "Alan Turing_222_assignsubmission_file_"
    (files / "unit1" / "normlib").mkdir(parents=True)
    (files / "unit1" / NOTEBOOK).write_text("{}")
    (files / "unit1" / "normlib" / "layer_norm.py").write_text("x = 1\n")
    out = run(root, "unit1")
    assert "2 collected (2 new" in out, out
    assert submissions(root, ["unit1"]) == {"unit1": ["ada-lovelace", "alan-turing"]}
    assert (root / "submitted/alan-turing/unit1/normlib/layer_norm.py").read_text() == "x = 1\n"
