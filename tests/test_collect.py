"""`make collect` from LMS zips: a zip that cannot be collected costs only its student,
and the instructor is told which student and why (issue 13, point 3)."""

import contextlib
import io
import zipfile

import pytest

from tools.course import build_course
from tools.instructor import collect, submissions, zip_problem


def write_zip(path, files):
    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)


def invalid_utf8_name(path):
    """A zip whose entry name is flagged UTF-8 but is not (bytes replaced in place)."""
    write_zip(path, {"normlib/\u00e9.py": "x = 1\n"})
    path.write_bytes(path.read_bytes().replace("\u00e9".encode(), b"\xff\xfe"))


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    root = build_course(tmp_path_factory.mktemp("collect"), layout="unit")
    good = {"01_layernorm_forward.ipynb": "{}", "normlib/layer_norm.py": "x = 1\n"}  # (what
    # zip_collect copies; grading would look inside)
    archive = root / "downloaded" / "unit1" / "archive"
    archive.mkdir(parents=True)
    write_zip(archive / "alice_1001_unit1.zip", good)
    write_zip(archive / "bob_1002_unit1.zip", {"../../escape.py": "x = 1\n", **good})
    (archive / "carol_1003_unit1.zip").write_bytes(b"PK\x03\x04 truncated")
    invalid_utf8_name(archive / "dave_1004_unit1.zip")
    write_zip(archive / "erin_1005_unit1.zip", good)
    write_zip(archive / "erin_1006_unit1.zip", good)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        collect(root, ["unit1"])
    return root, out.getvalue()


def test_the_good_submission_is_collected_despite_the_bad_ones(collected):
    root, out = collected
    assert submissions(root, ["unit1"]) == {"unit1": ["alice"]}
    assert "collected unit1: 1 submission (alice)" in out
    assert not list(root.rglob("escape.py"))


@pytest.mark.parametrize("student,reason", [
    ("bob", "an entry outside its folder ('../../escape.py')"),
    ("carol", "not a readable zip (BadZipFile"),
    ("dave", "not a readable zip (UnicodeDecodeError"),
    ("erin", "2 zips for this student"),
])
def test_each_bad_zip_is_reported_with_its_student_and_reason(collected, student, reason):
    root, out = collected
    lines = [line for line in out.splitlines() if f"(student {student})" in line]
    assert lines and all(reason in line for line in lines), out
    rejected = {p.name for p in (root / "downloaded" / "unit1" / "rejected").iterdir()}
    assert {line.split()[1] for line in lines} <= rejected


def test_a_good_zip_has_no_problem(tmp_path):
    write_zip(tmp_path / "a.zip", {"unit1/normlib/layer_norm.py": "x = 1\n"})
    assert zip_problem(tmp_path / "a.zip") is None
    write_zip(tmp_path / "b.zip", {"/etc/passwd": ""})
    assert "outside its folder" in zip_problem(tmp_path / "b.zip")
