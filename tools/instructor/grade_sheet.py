"""The LMS's gradebook import: its own gradebook export, filled in with the final scores.

    make grades LMS=canvas|moodle|blackboard|brightspace TEMPLATE=that.csv

An LMS's import needs ids that no download carries (Canvas's assignment id, Blackboard's
column id, Brightspace's OrgDefinedId), so the instructor exports its gradebook once. This
writes ROOT/grades-<lms>.csv: that export, byte for byte, with each assignment's final score
(after the late policy, tools/course/late.py) in its column for each student whose
submission is graded. The template is never written; a relative TEMPLATE is read from ROOT.
Columns match by item title (c.Grading.lms_columns), rows by the roster's and collect's ids
(IDS); points possible that differ from the course's maximum stop it before any write. No
cell written can start a formula (tools.instructor.grades.cell). Only Moodle's import takes
more than the score (the late policy's reason, in its feedback column). Each LMS's format:
docs/instructors.md, "Grades ready to import into the LMS"; docs/security.md, section 6.
"""

import codecs
import dataclasses
import re
from pathlib import Path

from tools.course import late
from tools.lms import phpcsv

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
LATE_NOTE = "Late policy: "  # the paragraph added to Moodle's feedback, after the grader's
OURS = re.compile(rf"(?:\A|(?:\r?\n){{2}}){re.escape(LATE_NOTE)}[^\r\n]*\Z")  # (its place)
# an item's points possible where the export gives them in its header (Canvas's: in its
# "Points Possible" row; Moodle's: nowhere)
MAXIMUM = {"blackboard": re.compile(r"\[Total Pts: (?:up to )?(?P<points>[\d.,]+) "),
           "brightspace": re.compile(r"<Numeric MaxPoints:(?P<points>[\d.,]+)[ >]")}
POINTS = re.compile(r"\d+(?:[.,]\d+)?")  # ("8.00"; "8,00": Canvas's decimal-comma locales)
NUMBER = re.compile(r"[+-]?\d+(?:[.,]\d+)?")  # (a cell starting with "-" that is no formula)
FORMULA = ("=", "+", "-", "@", "\t", "\r")  # what a spreadsheet runs (OWASP: CSV injection)
BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"),
        (codecs.BOM_UTF16_BE, "utf-16-be"))
END = re.compile(r"\r\n|\n|\r")
DELIMITERS = (",", ";", "\t", ":")  # (Canvas's ";" for a decimal-comma locale; Moodle's
# comma, semicolon, tab or colon; Blackboard's tab in its ".xls")


@dataclasses.dataclass
class Template:
    """An LMS's export as it was written: its bytes' encoding and byte-order mark, its
    delimiter, and its lines, each [fields as written (quotes kept)], its line end and
    the line it starts on."""
    path: Path
    lms: str
    encoding: str
    bom: bytes
    delimiter: str
    lines: list
    unread: dict = dataclasses.field(default_factory=dict)  # {index of a line: why it
    # cannot be read (Moodle's, read as PHP writes them: tools/lms/phpcsv.py)}

    def header(self):
        return [self.value(f) for f in self.lines[0][0]]

    def value(self, field):
        """A field's value, read as its LMS writes it."""
        return phpcsv.value(field) if self.lms == "moodle" else value(field)

    def written(self, text, like):
        """text as a field in place of like (a field as written), as its LMS reads it: for
        Moodle, a text holding a backslash as PHP's fputcsv writes it (a '"' after a
        backslash left alone, as PHP's fgetcsv reads it back; quoted too where like was),
        any other as RFC 4180 writes it (which PHP reads alike)."""
        if self.lms != "moodle" or "\\" not in text:
            return written(text, like, self.delimiter)
        out = phpcsv.field(text, self.delimiter)
        return f'"{out}"' if like.startswith('"') and not out.startswith('"') else out

    def text(self):
        return "".join(self.delimiter.join(fields) + end for fields, end, _ in self.lines)


def value(field):
    """A field's value (a quoted field unquoted)."""
    return field[1:-1].replace('""', '"') if field.startswith('"') else field


def written(text, like, delimiter):
    """text as a field, quoted where the field it replaces was, or where it must be."""
    if like.startswith('"') or any(c in text for c in (delimiter, '"', "\r", "\n")) or \
            text != text.strip():
        return '"' + text.replace('"', '""') + '"'
    return text


def lines(text, delimiter, path):
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


def bom_encoding(data):
    """(the byte-order mark a file's bytes start with, or b"", the encoding it names, or
    None): what a spreadsheet's or an LMS's export says of itself."""
    return next(((b, e) for b, e in BOMS if data.startswith(b)), (b"", None))


def read_template(path, lms):
    """The Template of an LMS's export at path; SystemExit if it is not one."""
    path = Path(path)
    if not path.is_file():
        raise SystemExit(f"TEMPLATE={path}: no such file (export the LMS's gradebook, "
                         "docs/instructors.md, section 6)")
    data = path.read_bytes()
    bom, encoding = bom_encoding(data)
    encoding = encoding or "utf-8"
    try:
        text = data[len(bom):].decode(encoding)
    except UnicodeDecodeError as error:
        raise SystemExit(f"{path}: not {encoding} text (byte {error.start}): export it again, "
                         "or save it as UTF-8") from None
    first = END.split(text, maxsplit=1)[0]
    for delimiter in DELIMITERS:
        try:
            header = [value(f) for f in lines(first, delimiter, path)[0][0]] if first else []
        except SystemExit:  # (not this delimiter)
            continue
        if set(header) & set(IDS[lms]):
            if lms == "moodle":  # (csv_export_writer: PHP's fputcsv)
                read = phpcsv.rows(text, delimiter)
                return Template(path, lms, encoding, bom, delimiter,
                                [(list(r.raw), r.end, r.line) for r in read],
                                {i: r.problem for i, r in enumerate(read) if r.problem})
            return Template(path, lms, encoding, bom, delimiter, lines(text, delimiter, path))
    raise SystemExit(f"{path}: not an export of {lms.capitalize()}'s gradebook: its first line "
                     f"has none of the id columns {', '.join(IDS[lms])}")


@dataclasses.dataclass(frozen=True)
class Filling:
    """A template read, where its output goes, each assignment's columns: {assignment:
    (its score column's index, its feedback column's index or None)}, and what to print
    of the maxima the export does not give."""
    template: Template
    out: Path
    columns: dict
    notes: tuple = ()


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


def template_path(root, template):
    """Where TEMPLATE is: an absolute path as it is, a relative one in the course folder
    (root); SystemExit naming where it was looked for if no file is there."""
    path = Path(template).expanduser()
    if not path.is_absolute():
        path = Path(root) / path
    if not path.is_file():
        relative = "" if Path(template).expanduser().is_absolute() else \
            " (a relative TEMPLATE is read from the course folder)"
        raise SystemExit(f"TEMPLATE={template}: no such file: {path}{relative}. Export the "
                         "LMS's gradebook there: docs/instructors.md, section 6")
    return path


def points_possible(table, index):
    """The points possible of the item in column index as the export gives them (a
    number), or None where it gives none: Canvas's in its "Points Possible" row (as
    lib/gradebook_exporter.rb writes it, I18n.n(points, precision: 2)), Blackboard's and
    Brightspace's in the header (MAXIMUM), Moodle's nowhere."""
    if table.lms == "canvas":
        row = next((values for values in ([table.value(f) for f in fields]
                                          for fields, _, _ in table.lines[1:])
                    if values and "Points Possible" in values[0]), None)
        text = row[index].strip() if row and index < len(row) else ""
    elif table.lms in MAXIMUM:
        match = MAXIMUM[table.lms].search(table.header()[index])
        text = match["points"] if match else ""
    else:
        return None
    return float(text.replace(",", ".")) if POINTS.fullmatch(text) else None


def _maxima(table, columns, maxima):
    """(notes on the assignments whose maximum the export does not give); SystemExit
    naming each column whose points possible are not the course's maximum (maxima:
    {assignment: points})."""
    lms, header = table.lms.capitalize(), table.header()
    wrong, notes = [], []
    for name, (score, _) in columns.items():
        points, most = points_possible(table, score), late.number(maxima[name])
        if points is None:
            notes.append(f"{name}: {lms}'s export gives no item's maximum: check that its "
                         f"maximum grade in {lms} is {most} (scores are written out of {most})")
        elif abs(points - maxima[name]) > 0.005:
            wrong.append(f"{name}: its column {header[score]!r} is out of "
                         f"{late.number(points)} points in {lms}, the course's {name} out of "
                         f"{most}: set the item's points to {most} in {lms} and export the "
                         "gradebook again")
    if wrong:
        raise SystemExit(f"{table.path}: {'; '.join(wrong)} (nothing written)")
    return tuple(notes)


def prepare(root, lms, template, names, titles, maxima):
    """The Filling of a template for these assignments (titles: c.Grading.lms_columns;
    maxima: {assignment: the course's maximum}), or None, saying so, for an LMS without a
    template; SystemExit with every problem at once: a template without its LMS, an LMS
    not known, no template there, an output that is the template, an assignment with no
    column, or two; then each column whose points possible are not the course's."""
    if lms not in LMSS:
        raise SystemExit(f"make grades: TEMPLATE={template} needs LMS= ({'|'.join(LMSS)}): "
                         f"which LMS exported it (got LMS={lms or ''})")
    if not template:
        print(f"grades: no grades-{lms}.csv without TEMPLATE= (the export of {lms.capitalize()}"
              "'s gradebook that it fills in: docs/instructors.md, section 6)")
        return None
    out = Path(root) / f"grades-{lms}.csv"
    path = template_path(root, template)
    if path.resolve() == out.resolve():
        raise SystemExit(f"TEMPLATE={template} is where grades-{lms}.csv goes: keep the export "
                         "elsewhere (it is never written)")
    table = read_template(path, lms)
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
        raise SystemExit(f"{path}: {'; '.join(problems)}. Its item columns: "
                         f"{', '.join(map(repr, items)) or 'none'}. Name each assignment's "
                         "column in c.Grading.lms_columns ({'unit1': '<its title, or whole "
                         "header>'}), or leave the assignment out (A=...)")
    return Filling(table, out, columns, _maxima(table, columns, maxima))


def identities(lms, roster, provenances):
    """{(what, id): {student}} of the course's students: the roster's ids (lms_id, sis_id,
    username, email) and the LMS's ids that collect read (provenances: {assignment: {student:
    provenance}}; Canvas's user id and Blackboard's username, as lms_id)."""
    found = {}
    for row in roster:
        for what in ("lms_id", "sis_id", "username", "email"):
            if row.get(what):
                found.setdefault((what, _id(lms, what, row[what])), set()).add(
                    row["student_id"])
    for by_student in provenances.values():
        for student, provenance in by_student.items():
            if provenance.get("lms") == lms and provenance.get("key") and lms in ("canvas",
                                                                            "blackboard"):
                found.setdefault(("lms_id", _id(lms, "lms_id", provenance["key"])), set()).add(
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


def _feedback(text, decision):
    """Moodle's feedback cell of a graded submission (text: as the export has it): the
    grader's feedback kept as it is, and after it, where the submission was late (or
    marked late), a paragraph of the late policy's reason and the scores ("Late policy:
    2 h 31 min late: ...; score 7 - 1.65 = 5.35"). Such a paragraph at the end (OURS: an
    earlier make grades', in an export of a file imported) is replaced, not repeated."""
    found = OURS.search(text)
    grader = text[:found.start()] if found else text
    if not (decision.rule.startswith("late marker") or (decision.late or 0) > 0):
        return grader
    score = f"score {late.number(decision.raw)}"
    if decision.penalty:
        score += f" - {late.number(decision.penalty)} = {late.number(decision.final)}"
    return grader + "\n\n" * bool(grader) + f"{LATE_NOTE}{decision.reason}; {score}"


def fill(root, filling, rows, roster, provenances, grades_csv=None):
    """Write filling.out: the template with each graded submission's final score (rows:
    tools.instructor.grades.Row) in its assignment's column, and print what was left as it was, and
    how many of the scores are after a penalty (whose details are in grades_csv, the
    grades.csv written, and logs/late.csv)."""
    table, lms = filling.template, filling.template.lms
    header = table.header()
    known = identities(lms, roster, provenances)
    results = {(r.assignment, r.student): r for r in rows}
    by_student, strangers, filled, ours = {}, [], 0, set()
    for index, (fields, _, line) in enumerate(table.lines[1:], start=1):
        if index in table.unread:
            strangers.append(f"line {line} (it cannot be read: {table.unread[index]})")
            continue
        values = [table.value(f) for f in fields]
        if _special(lms, values):
            continue
        students, said = _who(lms, header, values, known)
        if len(students) != 1:
            strangers.append(f"line {line} ({', '.join(said) or 'no id'}"
                             + (f": {', '.join(sorted(students))}" if students else "") + ")")
            continue
        by_student.setdefault(students.pop(), []).append(index)
    matched = {s: found[0] for s, found in by_student.items() if len(found) == 1}
    twice = [f"{s} (lines {', '.join(str(table.lines[i][2]) for i in found)})"
             for s, found in sorted(by_student.items()) if len(found) > 1]
    left, unknown, penalized = [], [], []
    for (name, student), row in results.items():
        if student not in matched or name not in filling.columns:
            continue
        if row.decision is None or not row.status.startswith("graded"):
            left.append(f"{name} {student} ({row.status})")
            continue
        if row.newer:  # (the score is the older submission's: not the one that counts)
            left.append(f"{name} {student} ({row.status}: not filled, the score is the "
                        "older submission's)")
            continue
        fields = table.lines[matched[student]][0]
        score, feedback = filling.columns[name]
        fields.extend([""] * (max(score, feedback or 0) + 1 - len(fields)))
        fields[score] = table.written(late.number(row.decision.final), fields[score])
        ours.add((matched[student], score))
        if feedback is not None:  # (the grader's text is Moodle's own: written back as it is)
            was = table.value(fields[feedback])
            now = _feedback(was, row.decision)
            if now != was:
                fields[feedback] = table.written(now, fields[feedback])
                ours.add((matched[student], feedback))
        filled += 1
        if row.decision.penalty:
            penalized.append(f"{name} {student}")
        if row.decision.late is None and row.decision.rule.startswith("late marker"):
            unknown.append(f"{name} {student}")
        if row.waiting:
            left.append(f"{name} {student} (filled, but {row.waiting} written answer"
                        f"{'s' * (row.waiting > 1)} wait{'s' * (row.waiting == 1)} for a "
                        "grader)")
    filling.out.write_bytes(table.bom + table.text().encode(table.encoding))
    unmatched = sorted({r.student for r in rows} - set(by_student))
    _report(filling, filled, strangers, twice, unmatched, left, unknown, formulas(table, ours))
    _penalties(filling, filled, penalized, Path(grades_csv or Path(root) / "grades.csv"),
               Path(root) / "logs" / "late.csv")


def _penalties(filling, filled, penalized, grades_csv, log):
    """Print how many of the scores filled in are after a late penalty, and where the raw
    score, the penalty and the reason are: the LMS file holds the final score alone."""
    feedback = any(f is not None for _, f in filling.columns.values())
    print(f"  late policy: {len(penalized)} of the {filled} score{'s' * (filled != 1)} filled "
          f"in {'is' if len(penalized) == 1 else 'are'} after a penalty"
          + (f" ({'; '.join(penalized)})" if penalized else "")
          + f"; the raw score, penalty and reason of each: {grades_csv}, {log}"
          + (" (the reason also in the item's feedback)" if feedback else ""))


def formulas(table, ours=()):
    """["line <n> (<column> '<cell>')"] of the cells of a table that make grades did not
    write (ours: {(line index, column index)}) and a spreadsheet would run as a formula:
    a text starting with "=", "+", "-", "@", a tab or a CR (OWASP's CSV injection), not a
    number ("-1.5") nor "-" alone (Moodle's "no grade"). They stay as the LMS wrote them:
    its import reads its own cells back (a Canvas display name "=HYPERLINK(...)" is the
    student's name there), so make grades warns instead."""
    header, found = table.header(), []
    for i, (fields, _, line) in enumerate(table.lines):
        for j, field in enumerate(fields):
            text = table.value(field)
            if (i, j) in ours or not text.startswith(FORMULA) or text == "-" or \
                    NUMBER.fullmatch(text):
                continue
            column = header[j] if j < len(header) and i else f"column {j + 1}"
            found.append(f"line {line} ({column} {text[:60]!r})")
    return found


def _report(filling, filled, strangers, twice, missing, left, unknown, formulas=()):
    """Print what grades-<lms>.csv holds, and every row and student left as they were."""
    lms = filling.template.lms
    columns = ", ".join(f"{n} -> {filling.template.header()[s]!r}"
                        + (" (and the late policy's reason in its feedback, after the "
                           "grader's)" if f is not None else "")
                        for n, (s, f) in filling.columns.items())
    print(f"{lms}: {filling.out} from {filling.template.path} ({columns or 'no assignment'}): "
          f"{filled} score{'s' * (filled != 1)} filled in")
    for note in filling.notes:
        print(f"  {note}")
    for what, items in (
            ("rows of no student of the course (or of two), left as they were", strangers),
            ("students with two rows, left as they were", twice),
            ("students of the course with no row in the template (add them in the LMS, "
             "or their ids to the roster)", missing),
            ("not filled, or partly", left),
            ("late, time unknown (Canvas's _LATE marker; grades.csv says what was applied)",
             unknown),
            (f"WARNING: cells that a spreadsheet would run as a formula, left as {lms} wrote "
             f"them (its import needs them): import grades-{lms}.csv as it is, never open "
             "it in a spreadsheet", formulas)):
        if items:
            print(f"  {what}: {len(items)}: {'; '.join(items)}")
