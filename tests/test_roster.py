"""Issue 62, point 3: a roster in the encodings LMSs and spreadsheets write. UTF-8 with or
without its byte-order mark, UTF-16 (Excel's "Unicode text": tab-separated), Windows-1252
(Excel's "CSV" on Windows, with ";" where the decimal mark is a comma) read alike; another
encoding is given (c.Grading.roster_encoding, or ROSTER_ENCODING); an undecodable file
stops with one line naming the file and the byte, never a traceback."""

import codecs

import pytest

from tests.test_collect import GOOD, course, run, write_zip
from tools.course.folder import Course, submissions
from tools.instructor.roster import read_roster

ROWS = [["lms_id", "student_id", "name"], ["101", "s1001", "José Núñez"],
        ["102", "s1002", "Zoë Ångström"], ["103", "s1003", "François Œuvre"]]
EXPECTED = [{"lms_id": r[0], "student_id": r[1], "name": r[2]} for r in ROWS[1:]]


def text(delimiter=",", end="\r\n"):
    return "".join(delimiter.join(row) + end for row in ROWS)


# {what wrote it: its bytes}: each as that program saves the same class
WRITTEN = {
    "UTF-8": text(end="\n").encode("utf-8"),
    "UTF-8 with its BOM (Excel's CSV UTF-8)": codecs.BOM_UTF8 + text().encode("utf-8"),
    "UTF-16 (Excel's Unicode text, tab-separated)": text("\t").encode("utf-16"),
    "UTF-16 big-endian with its BOM": codecs.BOM_UTF16_BE + text().encode("utf-16-be"),
    "Windows-1252 (Excel's CSV on Windows)": text().encode("cp1252"),
    "Windows-1252 with ';' (Excel where the decimal mark is a comma)":
        text(";").encode("cp1252"),
}


@pytest.mark.parametrize("written", WRITTEN, ids=list(WRITTEN))
def test_a_roster_reads_alike_in_each_encoding_a_spreadsheet_writes(tmp_path, capsys, written):
    path = tmp_path / "roster.csv"
    path.write_bytes(WRITTEN[written])
    assert read_roster(path) == EXPECTED
    said = capsys.readouterr().out
    assert ("Windows-1252" in said) == written.startswith("Windows-1252"), said


def test_another_encoding_is_given_and_a_wrong_one_stops_naming_the_byte(tmp_path):
    """Latin-2 (Central European) reads as Windows-1252 too, wrongly ("Ł" as "£"): it is
    given, not guessed. A file that its encoding cannot decode stops at the byte."""
    path = tmp_path / "roster.csv"
    path.write_bytes("lms_id,student_id,name\n1,s1,Łukasz Żółw\n".encode("iso-8859-2"))
    assert read_roster(path, "iso-8859-2")[0]["name"] == "Łukasz Żółw"
    assert read_roster(path)[0]["name"] != "Łukasz Żółw"  # (why it must be given)
    path.write_bytes(b"lms_id,student_id,name\n1,s1,Ada\xff Lovelace\n")
    with pytest.raises(SystemExit) as stopped:
        read_roster(path, "utf-8")
    assert str(stopped.value) == (
        f"{path}: byte 31 (0xff) is not utf-8: save the roster as UTF-8, or give its encoding "
        "(ROSTER_ENCODING=..., or c.Grading.roster_encoding)")
    path.write_bytes(b"lms_id,student_id,name\n1,s1,Ada\x81 Lovelace\n")  # (no cp1252 byte)
    with pytest.raises(SystemExit, match=r"roster.csv: byte 31 \(0x81\) is not Windows-1252 "
                                         r"\(detected: not UTF-8\): save"):
        read_roster(path)
    with pytest.raises(SystemExit, match=r"^the roster's encoding 'klingon' is no encoding "
                                         r"Python knows"):
        read_roster(path, "klingon")


def test_a_header_of_another_delimiter_is_named(tmp_path):
    path = tmp_path / "roster.csv"
    path.write_text("lms_id|student_id|name\n1|s1|Ada\n")
    with pytest.raises(SystemExit, match=r"roster.csv: the roster's columns must be lms_id, "
                                         r"name, student_id \(it has lms_id\|student_id\|name\)"):
        read_roster(path)


def test_collect_reads_an_excel_roster_and_the_encoding_it_is_given(tmp_path, monkeypatch):
    """The Windows-1252 roster that stopped collect with a UnicodeDecodeError's traceback
    maps Moodle's display names; ROSTER_ENCODING wins over the course's setting."""
    root, archive = course(tmp_path, 'c.Grading.roster = "roster.csv"\n'
                                     'c.Grading.roster_encoding = "utf-8"\n')
    (root / "roster.csv").write_bytes(text().encode("cp1252"))
    write_zip(archive / "José Núñez_101_assignsubmission_file_.zip", GOOD)
    write_zip(archive / "Zoë Ångström_102_assignsubmission_file_.zip", GOOD)
    with pytest.raises(SystemExit, match=r"roster.csv: byte 37 \(0xe9\) is not utf-8"):
        run(root, "unit1")
    monkeypatch.setenv("ROSTER_ENCODING", "cp1252")
    out = run(root, "unit1")
    assert submissions(root, Course.load(root), ["unit1"]) == {"unit1": ["s1001", "s1002"]}, out
