"""Who the students are: the roster, and the student of each name an LMS wrote.

    read_roster(path, encoding=None) -> [row]
    student_of(names, assignment, roster, times) -> (student id, Name) or a reason (str)
    exchange_problem(student_id, roster) -> why an id from nbgrader's exchange is refused

The roster (c.Grading.roster) is a CSV with the columns lms_id, student_id and name, and
optionally email, the ids grade_sheet.py matches (sis_id, username), and first_name and
last_name (split_name: docs/instructors.md, step 3, "Names in formgrader"). A student id is
a folder's name and a column of grades.csv, so it keeps tools.course.bounds.id_problem's
allow-list (no path, no option, no spreadsheet formula). Two ids of one collect that differ
only in case, normalization or look-alike characters are refused (collect._collisions). How
each LMS's name maps to a student (Moodle's number only through its grading worksheet), and
what each trusts: docs/security.md, section 1; docs/instructors.md, step 3.
"""

import contextlib
import csv
import io
import re
import unicodedata
from pathlib import Path

from tools.course import confusables
from tools.course.bounds import fold, id_problem
from tools.instructor.grade_sheet import bom_encoding
from tools.lms import downloads

NEEDED = {"lms_id", "student_id", "name"}
KEYS = {"canvas": r"\d+", "brightspace": r"\d+-\d+"}  # the shape of the LMS's ids in names
TWO_WAYS = ("; Blackboard writes <Assignment>_<username>, either may hold '_', and the "
            "download's other names do not say where the title ends: a roster "
            "(c.Grading.roster) that lists one of them, or c.Grading.lms_patterns with the "
            "title written out, says which")
TEAM = ("; if the assignment takes team submissions, Moodle names a team's by its group's "
        "name and id: list it in c.Grading.group_assignments, and each student's group in "
        "the roster's group column")
OPTIONAL = {"email", "sis_id", "username"}  # sis_id: the institution's (Canvas's SIS User
# ID, Moodle's ID number, Blackboard's Student ID, Brightspace's OrgDefinedId); username:
# the LMS login (Canvas's SIS Login ID, Moodle's, Blackboard's and Brightspace's Username)
# a CSV's delimiter, Excel's where the decimal mark is a comma, its "Unicode text"'s
DELIMITERS = (",", ";", "\t")


def roster_text(path, encoding=None):
    """The roster's text, decoded as encoding (given: c.Grading.roster_encoding or
    ROSTER_ENCODING), else as what wrote it: UTF-8 (its byte-order mark dropped), UTF-16
    with its byte-order mark (Excel's "Unicode text"), else Windows-1252 (Excel's "CSV" on
    Windows), said so. SystemExit, one line, naming the first byte it cannot decode."""
    data, bom = Path(path).read_bytes(), b""
    given = encoding is not None
    if not given:
        bom, found = bom_encoding(data)
        with contextlib.suppress(UnicodeDecodeError):
            return data[len(bom):].decode(found or "utf-8")
        bom, encoding = b"", "cp1252"
        print(f"{path}: read as Windows-1252 (not UTF-8): give its encoding if it is another "
              "(ROSTER_ENCODING=..., or c.Grading.roster_encoding)")
    try:
        return data[len(bom):].decode(encoding)
    except LookupError:
        raise SystemExit(f"the roster's encoding {encoding!r} is no encoding Python knows "
                         "(utf-8, utf-16, cp1252, iso-8859-2, ...)") from None
    except UnicodeDecodeError as error:
        name = encoding if given else "Windows-1252 (detected: not UTF-8)"
        raise SystemExit(f"{path}: byte {error.start} (0x{data[error.start]:02x}) is not "
                         f"{name}: save the roster as UTF-8, or give its encoding "
                         "(ROSTER_ENCODING=..., or c.Grading.roster_encoding)") from None


def _delimiter(header):
    """The delimiter whose fields of the header line hold every NEEDED column (","
    where none does)."""
    for delimiter in DELIMITERS:
        if NEEDED <= {f.strip() for f in next(csv.reader([header], delimiter=delimiter))}:
            return delimiter
    return ","




def slug(name):
    """A display name as a student id: "John Smith" -> "john-smith" (its word characters,
    marks included: tools.lms.downloads.word)."""
    name = unicodedata.normalize("NFC", name).strip().lower()
    kept = "".join(c if downloads.word(c) or c in ".-" else " " for c in name)
    return re.sub(r" +", "-", kept).strip("-._")


def letters(name):
    """A name's letters, marks and digits alone, lowercased: how two spellings of it
    compare."""
    return "".join(c for c in unicodedata.normalize("NFKC", name).casefold()
                   if downloads.word(c) and c != "_")


def read_roster(path, encoding=None):
    """The roster's rows: [{"lms_id", "student_id", "name", (OPTIONAL's)}], its text as
    roster_text reads it (encoding: given, or detected), its fields separated by ",", ";"
    or a tab; SystemExit naming the line of a missing column, a student id the allow-list
    refuses, or two rows of one student id (up to case and normalization). Two ids that
    differ only in look-alike characters (`user1`, `userl`) are the instructor's to list: a
    warning names both lines (collect then tells them apart: collect._collisions)."""
    text = roster_text(path, encoding)
    with io.StringIO(text, newline="") as f:
        reader = csv.DictReader(f, delimiter=_delimiter(text.partition("\n")[0]))
        if not NEEDED <= set(reader.fieldnames or ()):
            raise SystemExit(f"{path}: the roster's columns must be {', '.join(sorted(NEEDED))} "
                             f"(it has {', '.join(reader.fieldnames or ())})")
        rows, seen, looks = [], {}, {}
        for row in reader:
            row = {k: (v or "").strip() for k, v in row.items() if k is not None}
            problem = id_problem(row["student_id"])
            if problem:
                raise SystemExit(f"{path}, line {reader.line_num}: {problem}")
            key = fold(row["student_id"])
            if key in seen:
                raise SystemExit(f"{path}, line {reader.line_num}: student id "
                                 f"{row['student_id']!r} is also line {seen[key]}'s (up to "
                                 "case and Unicode normalization)")
            alike = looks.get(confusables.key(row["student_id"]))
            if alike:
                print(f"WARNING: {path}, line {reader.line_num}: student id "
                      f"{row['student_id']!r} looks like line {alike[0]}'s {alike[1]!r} "
                      "(Unicode's confusable skeletons, UTS #39): two students, as the "
                      "roster lists them? (collect tells listed ids apart, and refuses an "
                      "unlisted id that looks like one)")
            seen[key] = reader.line_num
            looks.setdefault(confusables.key(row["student_id"]),
                             (reader.line_num, row["student_id"]))
            rows.append(row)
    return rows


def rows_of(roster, full, email):
    """The roster's rows of a row of Moodle's grading worksheet (its full name and email):
    those of its email, else those of its name."""
    return [r for r in roster if email and r.get("email", "").lower() == email.lower()] or \
        _by_name(roster, full)


def _by_name(roster, name):
    """The roster's rows whose name is `name` (first last or last first, letters alone)."""
    want = letters(name)
    found = []
    for row in roster:
        parts = row["name"].split()
        if want in {letters(row["name"]), letters("".join(parts[-1:] + parts[:-1]))}:
            found.append(row)
    return found


class Refused(ValueError):
    """Why a name gives no student (its message: the reason collect prints)."""


def _one(rows, what):
    """The student id of rows if they are exactly one student; else Refused."""
    ids = sorted({r["student_id"] for r in rows})
    if len(ids) == 1:
        return ids[0]
    if not ids:
        raise Refused(f"no student of the roster has this {what} (add a row for it)")
    raise Refused(f"{what} matches {len(ids)} students of the roster ({', '.join(ids)}): "
                  "refused, never guessed")


def _moodle(name, roster, times):
    """The student of a Moodle name (docs/security.md, section 1); else Refused."""
    if "_" in name.name:
        raise Refused(f"the display name {name.name!r} holds '_', which Moodle never writes "
                      "(it writes a space): not a name Moodle wrote")
    blind = name.name == downloads.BLIND
    if times is not None and times.kind == downloads.WORKSHEET:
        if name.key in times.unread:
            raise Refused(f"participant {name.key}'s row: {times.unread[name.key]}")
        if name.key not in times.rows:
            unread = "; ".join(v for k, v in times.unread.items() if k.startswith("line "))
            raise Refused(f"participant {name.key} is not in {times.path.name}"
                          + (f" (rows it does not name are unread: {unread})" if unread else "")
                          + TEAM)
        full, _, email = times.rows[name.key]
        if blind and not full:
            raise Refused(f"blind marking: {times.path.name} gives no name for participant "
                          f"{name.key} (download the grading worksheet as a teacher who may "
                          "see identities, or after revealing them)")
        if not blind and letters(full) != letters(name.name):
            raise Refused(f"participant {name.key} is {full!r} in {times.path.name}, but the "
                          f"entry's name says {name.name!r}" + TEAM)
        if roster is None:
            return slug(full)
        return _one(rows_of(roster, full, email), f"name {full!r}")
    if blind:
        raise Refused(f"blind marking: Moodle names participant {name.key}, not a student; "
                      "the assignment's grading worksheet says who (Download grading "
                      "worksheet, as a teacher who may see identities): put it beside "
                      "archive/")
    if roster is None:
        return slug(name.name)
    return _one(_by_name(roster, name.name), f"name {name.name!r}")


def plain_id(stem, assignment):
    """The id a plain name gives: "<student id>[_<assignment>anything]" ("s1004_unit1_v2" is
    s1004)."""
    return re.split(rf"_{re.escape(assignment)}", stem, maxsplit=1)[0]


def _resolve(name, assignment, roster, times):
    """The student id of one Name; else Refused."""
    if name.lms == "moodle":
        return _moodle(name, roster, times)
    if name.lms == "plain":
        plain = plain_id(name.key, assignment)
        if roster is None:
            return plain
        return _one([r for r in roster if plain in (r["student_id"], r["lms_id"])],
                    f"id {plain!r}")
    if roster is None:
        return {"canvas": name.name, "brightspace": slug(name.name or "")}.get(name.lms,
                                                                              name.key)
    rows = [r for r in roster if r["lms_id"] and r["lms_id"] == name.key]  # the LMS's id,
    if not rows and name.lms == "blackboard":  # (a Blackboard username: the student id?)
        rows = [r for r in roster if r["student_id"] == name.key]
    if not rows and name.name is not None:  # else the name the LMS shows
        rows = _by_name(roster, name.name)
        _not_anothers(name, rows)
    what = f"{name.lms} id {name.key!r}" + (f" (name {name.name!r})" if name.name else "")
    return _one(rows, what)


def _not_anothers(name, rows):
    """Refused where the roster gives a row that a Name's display name matches another id
    of its LMS than the Name's: the LMS's id decides, a display name never makes an entry
    another student's (a student renamed as a classmate). An lms_id not of the LMS's
    shape (KEYS: a roster that holds another id there) says nothing of it."""
    shape = KEYS.get(name.lms, r".+")
    ids = sorted({r["lms_id"] for r in rows if re.fullmatch(shape, r["lms_id"])} - {name.key})
    if ids:
        raise Refused(f"its display name {name.name!r} is the roster's "
                      f"{', '.join(sorted(r['student_id'] for r in rows))}, whose {name.lms} id "
                      f"is {', '.join(ids)}, not this entry's {name.key}: the LMS's id decides, "
                      "never a display name (refused)")


def student_of(names, assignment, roster=None, times=None):
    """(student id, the Name read) of an entry whose name reads as names
    (tools.lms.downloads.names),
    or why it is refused (str): no reading gives a student, two readings give two
    students, or the id is not one the allow-list keeps."""
    found, reasons = {}, []
    for name in names:
        try:
            who = _resolve(name, assignment, roster, times)
        except Refused as refused:
            reasons.append(str(refused))
            continue
        problem = id_problem(who)
        if problem:
            reasons.append(problem)
        else:
            found.setdefault(who, name)
    if len(found) == 1:
        return next(iter(found.items()))
    if len(found) > 1:
        why = f"its name reads as {len(found)} students ({', '.join(sorted(found))}): refused"
        return why + (TWO_WAYS if {n.lms for n in found.values()} == {"blackboard"} else "")
    return reasons[0]


def groups(roster):
    """{group: [student id, ...]} of the roster's group column (c.Grading.group_assignments:
    the groups as the LMS names them); a student with none is in no group."""
    found = {}
    for row in roster or []:
        if row.get("group"):
            found.setdefault(row["group"], []).append(row["student_id"])
    return found


def group_named(roster, name):
    """The roster's group whose name is name (its letters, as names compare), or None."""
    return next((g for g in groups(roster) if letters(g) == letters(name)), None)


def group_of(roster, student):
    """The roster's group of a student, or None."""
    return next((r.get("group") or None for r in roster or [] if r["student_id"] == student),
                None)


def exchange_problem(student_id, roster=None):
    """Why a student id that nbgrader's exchange gives (the first part of an inbound
    folder's name, which the submitting user writes) is refused, or None: it keeps the
    allow-list every id keeps, and with a roster it is one of its student ids."""
    problem = id_problem(student_id)
    if problem or roster is None:
        return problem
    if any(r["student_id"] == student_id for r in roster):
        return None
    return f"student id {student_id!r} is not in the roster (c.Grading.roster): the exchange " \
           "names a student by the submitting user's name, which must be a student_id there"


def split_name(row):
    """(first name, last name) of a roster row: its first_name and last_name columns, or
    its name ("Last, First", else the first word and the rest; see the module's
    docstring)."""
    if row.get("first_name") or row.get("last_name"):
        return row.get("first_name", ""), row.get("last_name", "")
    name = " ".join(row["name"].split())
    if "," in name:
        last, first = (part.strip() for part in name.split(",", 1))
        return first, last
    first, _, last = name.partition(" ")
    return (first, last) if last else ("", first)
