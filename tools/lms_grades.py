"""The LMS's gradebook import: its own export, filled in. An LMS's import needs ids that no
download carries (Canvas's assignment id in a column's header, Blackboard's column id,
Brightspace's OrgDefinedId), so the instructor exports the LMS's gradebook once, and

    make grades LMS=canvas|moodle|blackboard|brightspace TEMPLATE=that.csv

writes ROOT/grades-<lms>.csv: that export with each assignment's final score (after the
late policy, tools/late.py) in the assignment's column, for each student whose submission
is graded. Everything else stays as the export wrote it, byte for byte (its encoding and
byte-order mark, delimiter, quoting, line ends, every other column and row, Canvas's
"Points Possible" row); the template itself is never written.

Which column: the one whose item title is the assignment's name, or the title
c.Grading.lms_columns gives it ({"unit1": "Unit 1: LayerNorm forward"}, or a whole
header), matched exactly; none, or two, stops with one message naming them.
Which row: the roster's ids (c.Grading.roster's optional columns sis_id, username, email,
beside lms_id) and the LMS ids collect read (collected.json's "key": Canvas's user id,
Blackboard's username) against the template's id columns (IDS); a row that names no
student of the course, or two, is left as it was and listed, and so is every student of
the course no row names. Numbers are written as every LMS reads them: a "." and at most
two decimals ("7.6"); every text written goes through tools.grades.cell (CSV injection).

What each LMS's import can take besides the score, without creating a new item:
- Moodle (grade/export/lib.php: "<Module>: <item> (Real)", "(Feedback)" with "Export
  feedback"; grade/import/csv maps each column to an item or to "Feedback for <item>"):
  the late policy's reason goes into the item's "(Feedback)" column where the export has one.
- Canvas (lib/gradebook_exporter.rb, app/models/gradebook_importer.rb): the importer reads
  scores and existing custom columns; any other column becomes a new assignment. Score only.
- Blackboard Learn (Grade Center "Work Offline": a column without its "|<column id>"
  becomes a new column) and Brightspace ("Importing grades": a column it does not know
  becomes a new grade item): score only. Both built from documentation, not yet checked
  against a real export.
The raw score, penalty and reason are in grades.csv and logs/late.csv for every LMS.
"""

import codecs
import dataclasses
import re
from pathlib import Path

from tools import late

LMSS = ("canvas", "moodle", "blackboard", "brightspace")
# each LMS's id columns: {header: what of a student it holds (the roster's columns)}
IDS = {
    "canvas": {"ID": ("lms_id",), "SIS User ID": ("sis_id",), "SIS Login ID": ("username",)},
    "moodle": {"Email address": ("email",), "ID number": ("sis_id",),
               "Username": ("username",)},
    "blackboard": {"Username": ("username", "lms_id"), "Student ID": ("sis_id",)},
    "brightspace": {"OrgDefinedId": ("sis_id",), "Username": ("username",),
                    "Email": ("email",)},
}
# a header of an item's score column, and its title
SCORE = {
    "canvas": re.compile(r"(?P<title>.+) \((?P<id>\d+)\)"),  # "unit1 (4521)"
    "moodle": re.compile(r"(?P<title>.+) \(Real\)"),  # "Assignment: unit1 (Real)"
    "blackboard": re.compile(r"(?P<title>.+) \[[^\]]*\] \|(?P<id>\d+)"),  # "unit1 [Total
    # Pts: 10 Score] |12345"
    "brightspace": re.compile(r"(?P<title>.+) Points Grade(?: <[^>]*>)?"),  # "unit1 Points
    # Grade <Numeric MaxPoints:10>"
}
FEEDBACK = {"moodle": re.compile(r"(?P<title>.+) \(Feedback\)")}
BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"),
        (codecs.BOM_UTF16_BE, "utf-16-be"))
END = re.compile(r"\r\n|\n|\r")
DELIMITERS = (",", ";", "\t", ":")  # (Canvas's ";" for a decimal-comma locale; Moodle's
# comma, semicolon, tab or colon; Blackboard's tab in its ".xls")


@dataclasses.dataclass
class Template:
    """An LMS's export as it was written: its bytes' encoding and byte-order mark, its
    delimiter, and its records, each [fields as written (quotes kept)], its line end and
    the line it starts on."""
    path: Path
    lms: str
    encoding: str
    bom: bytes
    delimiter: str
    records: list

    def header(self):
        return [value(f) for f in self.records[0][0]]

    def text(self):
        return "".join(self.delimiter.join(fields) + end for fields, end, _ in self.records)


def value(field):
    """A field's value (a quoted field unquoted)."""
    return field[1:-1].replace('""', '"') if field.startswith('"') else field


def written(text, like, delimiter):
    """text as a field, quoted where the field it replaces was, or where it must be."""
    if like.startswith('"') or any(c in text for c in (delimiter, '"', "\r", "\n")) or \
            text != text.strip():
        return '"' + text.replace('"', '""') + '"'
    return text


def records(text, delimiter, path):
    """[(fields as written, line end, line)] of a CSV text; SystemExit naming the line of a
    field it cannot read."""
    field = re.compile(rf'"(?:[^"]|"")*"|[^{re.escape(delimiter)}"\r\n]*')
    found, pos, line = [], 0, 1
    while pos < len(text):
        fields, start = [], line
        while True:
            match = field.match(text, pos)
            fields.append(match.group())
            line += len(END.findall(match.group()))
            pos = match.end()
            if text.startswith(delimiter, pos):
                pos += len(delimiter)
                continue
            break
        end = END.match(text, pos)
        if end is None and pos < len(text):
            raise SystemExit(f"{path}, line {line}: a quote that does not close, or one inside "
                             "a field that does not start with one: not a CSV its LMS writes")
        found.append((fields, end.group() if end else "", start))
        pos, line = (end.end(), line + 1) if end else (pos, line)
    return found


def read_template(path, lms):
    """The Template of an LMS's export at path; SystemExit if it is not one."""
    path = Path(path)
    if not path.is_file():
        raise SystemExit(f"TEMPLATE={path}: no such file (export the LMS's gradebook, "
                         "docs/instructors.md, section 6)")
    data = path.read_bytes()
    bom, encoding = next(((b, e) for b, e in BOMS if data.startswith(b)), (b"", "utf-8"))
    try:
        text = data[len(bom):].decode(encoding)
    except UnicodeDecodeError as error:
        raise SystemExit(f"{path}: not {encoding} text (byte {error.start}): export it again, "
                         "or save it as UTF-8") from None
    first = END.split(text, maxsplit=1)[0]
    for delimiter in DELIMITERS:
        try:
            header = [value(f) for f in records(first, delimiter, path)[0][0]] if first else []
        except SystemExit:  # (not this delimiter)
            continue
        if set(header) & set(IDS[lms]):
            return Template(path, lms, encoding, bom, delimiter, records(text, delimiter, path))
    raise SystemExit(f"{path}: not an export of {lms.capitalize()}'s gradebook: its first line "
                     f"has none of the id columns {', '.join(IDS[lms])}")


@dataclasses.dataclass(frozen=True)
class Filling:
    """A template read, where its output goes, and each assignment's columns: {assignment:
    (its score column's index, its feedback column's index or None)}."""
    template: Template
    out: Path
    columns: dict


def _title_is(lms, header, title, want):
    """Whether a column (its header, its item's title) is the one titled want."""
    return want in (header, title) or (lms == "moodle" and title.partition(": ")[2] == want)


def _column(header, pattern, lms, want):
    """[index] of the columns pattern reads as items titled want."""
    found = []
    for i, text in enumerate(header):
        match = pattern.fullmatch(text)
        if match and _title_is(lms, text, match["title"], want):
            found.append(i)
    return found


def prepare(root, lms, template, names, titles):
    """The Filling of a template for these assignments (titles: c.Grading.lms_columns), or
    None, saying so, for an LMS without a template; SystemExit with every problem at once:
    a template without its LMS, an LMS not known, an output that is the template, an
    assignment with no column, or two."""
    if lms not in LMSS:
        raise SystemExit(f"make grades: TEMPLATE={template} needs LMS= ({'|'.join(LMSS)}): "
                         f"which LMS exported it (got LMS={lms or ''})")
    if not template:
        print(f"grades: no grades-{lms}.csv without TEMPLATE= (the export of {lms.capitalize()}"
              "'s gradebook that it fills in: docs/instructors.md, section 6)")
        return None
    out = Path(root) / f"grades-{lms}.csv"
    if Path(template).resolve() == out.resolve():
        raise SystemExit(f"TEMPLATE={template} is where grades-{lms}.csv goes: keep the export "
                         "elsewhere (it is never written)")
    table = read_template(template, lms)
    header = table.header()
    items = [h for h in header if SCORE[lms].fullmatch(h)]
    problems, columns = [], {}
    for name in names:
        want = titles.get(name, name)
        found = _column(header, SCORE[lms], lms, want)
        if len(found) != 1:
            problems.append(f"{name}: {len(found) or 'no'} columns titled {want!r}"
                            + (f" ({', '.join(repr(header[i]) for i in found)})" if found else ""))
            continue
        feedback = _column(header, FEEDBACK[lms], lms, want) if lms in FEEDBACK else []
        columns[name] = (found[0], feedback[0] if len(feedback) == 1 else None)
    if problems:
        raise SystemExit(f"{template}: {'; '.join(problems)}. Its item columns: "
                         f"{', '.join(map(repr, items)) or 'none'}. Name each assignment's "
                         "column in c.Grading.lms_columns ({'unit1': '<its title, or whole "
                         "header>'}), or leave the assignment out (A=...)")
    return Filling(table, out, columns)


def identities(lms, roster, records):
    """{(what, id): {student}} of the course's students: the roster's ids (lms_id, sis_id,
    username, email) and the LMS's ids that collect read (records: {assignment: {student:
    record}}; Canvas's user id and Blackboard's username, as lms_id)."""
    found = {}
    for row in roster:
        for what in ("lms_id", "sis_id", "username", "email"):
            if row.get(what):
                found.setdefault((what, _id(lms, what, row[what])), set()).add(
                    row["student_id"])
    for by_student in records.values():
        for student, record in by_student.items():
            if record.get("lms") == lms and record.get("key") and lms in ("canvas",
                                                                            "blackboard"):
                found.setdefault(("lms_id", _id(lms, "lms_id", record["key"])), set()).add(
                    student)
    return found


def _id(lms, what, text):
    """An id as two spellings of it compare: stripped, Brightspace's "#" before it gone, an
    email in lower case."""
    text = text.strip()
    if lms == "brightspace":
        text = text.removeprefix("#")
    return text.lower() if what == "email" else text


def _special(lms, values):
    """Whether a row is one of Canvas's that are no student's ("Points Possible", and the
    "Manual Posting" or "Muted" row: gradebook_importer.rb's check_for_non_student_row)."""
    return lms == "canvas" and bool(values) and ("Points Possible" in values[0] or all(
        re.fullmatch(r"\s*(Muted|Manual Posting.*)?\s*", v, re.I) for v in values))


def _who(lms, header, values, known):
    """({students} a row's ids name, [its ids in words])."""
    students, said = set(), []
    for column, whats in IDS[lms].items():
        if column in header and header.index(column) < len(values):
            text = values[header.index(column)]
            if text.strip().removeprefix("#" if lms == "brightspace" else ""):
                said.append(f"{column} {text.strip()[:40]!r}")
                for what in whats:
                    students |= known.get((what, _id(lms, what, text)), set())
    return students, said


def _feedback(decision):
    """The text of the late policy's decision for the LMS's feedback column."""
    score = f"score {late.number(decision.raw)}"
    if decision.penalty:
        score += f" - {late.number(decision.penalty)} = {late.number(decision.final)}"
    return f"{decision.reason}; {score}"


def fill(root, filling, rows, roster, records):
    """Write filling.out: the template with each graded submission's final score (rows:
    tools.grades.Row) in its assignment's column, and print what was left as it was."""
    from tools.grades import cell

    table, lms = filling.template, filling.template.lms
    header = table.header()
    known = identities(lms, roster, records)
    results = {(r.assignment, r.student): r for r in rows}
    lines, strangers, filled = {}, [], 0
    for index, (fields, _, line) in enumerate(table.records[1:], start=1):
        values = [value(f) for f in fields]
        if _special(lms, values):
            continue
        students, said = _who(lms, header, values, known)
        if len(students) != 1:
            strangers.append(f"line {line} ({', '.join(said) or 'no id'}"
                             + (f": {', '.join(sorted(students))}" if students else "") + ")")
            continue
        lines.setdefault(students.pop(), []).append(index)
    matched = {s: found[0] for s, found in lines.items() if len(found) == 1}
    twice = [f"{s} (lines {', '.join(str(table.records[i][2]) for i in found)})"
             for s, found in sorted(lines.items()) if len(found) > 1]
    left, unknown = [], []
    for (name, student), row in results.items():
        if student not in matched or name not in filling.columns:
            continue
        if row.decision is None or not row.status.startswith("graded"):
            left.append(f"{name} {student} ({row.status})")
            continue
        fields = table.records[matched[student]][0]
        score, feedback = filling.columns[name]
        fields.extend([""] * (max(score, feedback or 0) + 1 - len(fields)))
        fields[score] = written(late.number(row.decision.final), fields[score], table.delimiter)
        if feedback is not None:
            fields[feedback] = written(cell(_feedback(row.decision)), fields[feedback],
                                       table.delimiter)
        filled += 1
        if row.decision.late is None and row.decision.rule.startswith("late marker"):
            unknown.append(f"{name} {student}")
        if row.waiting:
            left.append(f"{name} {student} (filled, but {row.waiting} written answer"
                        f"{'s' * (row.waiting > 1)} wait{'s' * (row.waiting == 1)} for a "
                        "grader)")
    filling.out.write_bytes(table.bom + table.text().encode(table.encoding))
    _report(filling, filled, strangers, twice,
            sorted({r.student for r in rows} - set(lines)), left, unknown)


def _report(filling, filled, strangers, twice, missing, left, unknown):
    """Print what grades-<lms>.csv holds, and every row and student left as they were."""
    lms = filling.template.lms
    columns = ", ".join(f"{n} -> {filling.template.header()[s]!r}"
                        + (" (and its feedback)" if f is not None else "")
                        for n, (s, f) in filling.columns.items())
    print(f"{lms}: {filling.out} from {filling.template.path} ({columns or 'no assignment'}): "
          f"{filled} score{'s' * (filled != 1)} filled in")
    for what, items in (
            ("rows of no student of the course (or of two), left as they were", strangers),
            ("students with two rows, left as they were", twice),
            ("students of the course with no row in the template (add them in the LMS, "
             "or their ids to the roster)", missing),
            ("not filled, or partly", left),
            ("late, time unknown (Canvas's _LATE marker; grades.csv says what was applied)",
             unknown)):
        if items:
            print(f"  {what}: {len(items)}: {'; '.join(items)}")
