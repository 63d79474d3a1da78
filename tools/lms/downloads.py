"""What an LMS writes into its download: each entry's name (who, and for some LMSs when),
and the times an LMS export beside the download gives. Only these are trusted: never a
file inside the student's zip (a timestamp.txt), nor a zip entry's or a file's date.

    names(entry_name, folder) -> [Name]          the ways the LMS could have written it
    titles(entry_names) -> {title} or None       the Blackboard titles a download allows
    attempt(entry_name) -> the Blackboard attempt it is of (a receipt's, a file's), or None
    read_times(folder, tz, formats) -> Times or None   a worksheet or export beside it
    patterns(overrides) -> {lms: compiled pattern}   Blackboard's and Brightspace's names

Each LMS's names, what is read of them and why: docs/instructors.md, step 3, and
docs/security.md, section 1 (the LMSs' own sources: tests/test_downloads.py). A name that
reads two ways gives a Name each, and the roster decides. Dates are the downloading
account's local times (c.Grading.lms_timezone, lms_formats); lms_patterns overrides patterns.
"""

import csv
import dataclasses
import datetime
import re
import unicodedata
import zoneinfo
from dataclasses import dataclass
from pathlib import Path

from tools.lms import phpcsv

# (Python's strptime reads English month and day names: a worksheet in another language
# needs its own format, or the English download)
FORMATS = {
    "moodle": "%A, %d %B %Y, %I:%M %p",  # strftimedaydatetime: Friday, 5 April 2024, 3:07 PM
    "blackboard": "%Y-%m-%d-%H-%M-%S",  # in the name: 2026-10-05-21-14-03
    "brightspace": "%b %d, %Y %I:%M %p",  # Oct 5, 2026 9:14 PM (its "914 PM" given a colon)
    "export": "%Y-%m-%d %H:%M",  # an instructor's export: ISO 8601 also read as it is
}
MOODLE_FOLDER = re.compile(r"(?P<name>.+)_(?P<key>\d+)_assignsubmission_(?P<plugin>[a-z]+)_?")
MOODLE_FILE = re.compile(r"(?P<name>[^_]+)_(?P<key>\d+)_assignsubmission_(?P<plugin>[a-z]+)_"
                         r"(?P<rest>.*)", re.S)
CANVAS_IDS = re.compile(r"_(?P<key>\d+)_(?P<order>\d+)_")
CANVAS_NAME = re.compile(r"(?P<name>.+?)(?P<late>_LATE)?", re.S)  # (name: word characters)
# (their first "_attempt_<time>", their first date: the LMS writes those before the name the
# student chose)
BLACKBOARD = re.compile(r"(?P<assignment>.+?)_(?P<key>[^_]+)_attempt_(?P<time>\d{4}(?:-\d\d){5})"
                        r"(?P<receipt>\.txt)?(?:_(?P<rest>.*))?", re.S)
# (Brightspace's date is the last " - <date>" of a folder's name, and before the file's
# name in a file's: the display name before it may hold one too: names() refuses a file's
# name whose date cannot be told from the display name's or the file's)
BRIGHTSPACE = re.compile(r"(?P<key>\d+(?:-\d+)?) - (?P<name>.+) - (?P<time>[A-Z][a-z]{2} "
                         r"\d{1,2}, \d{4} \d{3,4} [AP]M)(?: - (?P<rest>.*))?", re.S)
PATTERNS = {"blackboard": BLACKBOARD, "brightspace": BRIGHTSPACE}
NEEDED = {"blackboard": {"key", "time"}, "brightspace": {"key", "name", "time"}}
BLIND = "Participant"  # the name Moodle writes under blind marking (get_string participant)


WORKSHEET, EXPORT = "Moodle's grading worksheet", "an export"  # (Times.kind)
WORKSHEET_ROW = re.compile(r'"Participant (\d+)",')  # (how each row of it starts: phpcsv.anchored)


class TimeError(ValueError):
    """A date an LMS wrote that cannot be read as configured (collect stops with it)."""


@dataclass(frozen=True)
class Name:
    """One reading of an entry's name: which LMS wrote it, who (key: Moodle's participant
    number, Canvas's user id, Blackboard's username, Brightspace's ids, or the plain
    name's student id), the name the LMS shows (or None), and what it says of the time:
    when (aware, or None), late (Canvas's marker), order (Canvas's attachment id),
    problem: why its date cannot be trusted (a date that cannot be read, or in the
    future), or why it is no submission (Moodle's online text), and rest: the file's own
    name, as the LMS kept it (None for a folder or a plain name)."""
    lms: str
    key: str
    name: str | None = None
    when: datetime.datetime | None = None
    late: bool = False
    order: int | None = None
    problem: str | None = None  # why the reading's date cannot be trusted
    rest: str | None = None  # the file's own name, as the LMS kept it (None: a folder)


def word(c):
    """Whether character c is a word character as Ruby's Onigmo reads [[:word:]] (what
    Canvas keeps of a name: content_zipper.rb, sanitize_file_name): a letter, a mark, a
    digit or a connector ("_"). Python's \\w lacks the marks, which Thai, Devanagari and a
    decomposed Vietnamese name hold."""
    return c.isalnum() or unicodedata.category(c)[0] == "M" or unicodedata.category(c) == "Pc"


def zone(name):
    """The ZoneInfo of an IANA time zone name; TimeError if there is none of that name."""
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise TimeError(f"c.Grading.lms_timezone = {name!r} is not a time zone (write it as "
                        "IANA names it: 'Europe/Berlin', 'America/New_York', 'UTC')") from None


def local_time(text, fmt, tz):
    """The aware datetime of a date an LMS wrote (text, strptime's fmt) in time zone tz (a
    ZoneInfo, or None: then TimeError, since the LMS's zone is not known)."""
    try:
        when = datetime.datetime.strptime(text.strip(), fmt)
    except ValueError:
        raise TimeError(f"{text.strip()!r} is not a date written as {fmt!r}") from None
    return _zoned(when, tz)


def _zoned(when, tz):
    """A naive datetime the LMS wrote, in time zone tz (a ZoneInfo; None: TimeError, the
    LMS's zone is not known). Decision (issue 58): a local time that happens twice, in the
    hour when summer time ends, is read as its LATER occurrence (Python's fold=1), the one
    that never makes a submission less late (collect's report says which times were so
    read: ambiguous()); one that never happens, in the hour skipped when summer time
    starts, is no time the LMS writes (its own clock never shows it): TimeError (the
    zone set may not be the LMS's)."""
    if tz is None:
        raise TimeError("c.Grading.lms_timezone is not set: the LMS writes local times, in "
                        "the time zone of the account that downloaded them")
    later = when.replace(tzinfo=tz, fold=1)
    if later.astimezone(datetime.timezone.utc).astimezone(tz).replace(tzinfo=None) != when:
        raise TimeError(f"{when:%Y-%m-%d %H:%M} never happens in {tz.key} (the hour skipped "
                        "when summer time starts): not a time the LMS writes; is "
                        "c.Grading.lms_timezone the zone of the account that downloaded it?")
    return later


def ambiguous(when):
    """Whether an aware time's local time happens twice in its zone (the hour when summer
    time ends): read as its later occurrence (_zoned)."""
    return when is not None and when.tzinfo is not None and \
        when.replace(fold=0).utcoffset() != when.replace(fold=1).utcoffset()


def utc(when):
    """An aware time in UTC: what every comparison and lateness of LMS times is made in
    (Python compares two times of one zone by their local clocks, the repeated hour's
    two occurrences as one)."""
    return when.astimezone(datetime.timezone.utc)


# a Blackboard receipt's time: "Date Submitted: Sunday, November 1, 2026 1:30:00 AM EDT"
RECEIPT_ZONE = re.compile(r"^Date Submitted:.*\b([A-Z]{3,5})[ \t]*$", re.M)


def receipt_zone(text):
    """The zone abbreviation after a Blackboard receipt's time (EDT, CET, AEDT), or None."""
    found = RECEIPT_ZONE.search(text)
    return found[1] if found else None


def resolved(when, abbreviation):
    """An ambiguous local time (ambiguous()) as its occurrence whose zone the LMS names by
    abbreviation, at that fixed offset (so no longer ambiguous); when itself where neither
    occurrence has that name."""
    for fold in (0, 1):
        occurrence = when.replace(fold=fold)
        if occurrence.tzname() == abbreviation:
            return occurrence.astimezone(datetime.timezone(occurrence.utcoffset(), abbreviation))
    return when


def brightspace_time(text, fmt, tz):
    """Brightspace's "Oct 5, 2026 914 PM" (no colon, the hour unpadded) as an aware datetime:
    the colon put back before its two digits of minutes, then read with fmt."""
    text = re.sub(r"(\d{1,2})(\d\d) ([AP]M)$", r"\1:\2 \3", text.strip())
    return local_time(text, fmt, tz)


def patterns(overrides):
    """PATTERNS with a course's overrides ({lms: a regular expression's text}), compiled;
    ValueError naming the one that names no such LMS, does not compile, or lacks a named
    group of NEEDED."""
    found = dict(PATTERNS)
    for lms, text in overrides.items():
        if lms not in PATTERNS:
            raise ValueError(f"no LMS named {lms!r} (they are {', '.join(PATTERNS)})")
        try:
            found[lms] = re.compile(text, re.S)
        except re.error as error:
            raise ValueError(f"[{lms!r}] does not compile: {error}") from None
        missing = sorted(NEEDED[lms] - set(found[lms].groupindex))
        if missing:
            raise ValueError(f"[{lms!r}] lacks the named group{'s' * (len(missing) > 1)} "
                             f"{', '.join(f'(?P<{g}>...)' for g in missing)} (it needs "
                             f"{', '.join(sorted(NEEDED[lms]))}; 'rest' for a file's name)")
    return found


def names(entry, folder, tz=None, formats=FORMATS, now=None, patterns=PATTERNS, titles=None):
    """Every Name the LMSs could have written as entry (a file's or folder's name: every
    LMS's reading of it, each from the part that LMS writes; tools.instructor.roster.student_of
    refuses a name whose readings are two students), or a plain name if none. A reading
    whose date cannot be read, or lies in the future (after now), carries why (problem).
    titles: the Blackboard titles the download allows (titles()): a Blackboard reading of
    another title is none."""
    entry = unicodedata.normalize("NFC", entry)  # (as an LMS stores it; a Mac extracts NFD)
    stem = entry[:-4] if entry.lower().endswith(".zip") and not folder else entry
    found = []
    moodle = (MOODLE_FOLDER if folder else MOODLE_FILE).fullmatch(stem if folder else entry)
    if moodle:
        found.append(Name("moodle", moodle["key"], moodle["name"], rest=_rest(moodle), problem=(
            None if moodle["plugin"] == "file" else f"Moodle's {moodle['plugin']} plugin's, "
            "not an uploaded file: nothing of it is collected")))
    board = patterns["blackboard"].fullmatch(entry)
    if board:
        readings = [key for title, key in _splits(board) if not titles or title in titles]
        for key in readings or [key for _, key in _splits(board)]:
            found.append(_dated(Name("blackboard", key, rest=_rest(board)), local_time,
                                board["time"], formats["blackboard"], tz, now))
    bright = patterns["brightspace"].fullmatch(entry)
    if bright:
        name = _dated(Name("brightspace", bright["key"], bright["name"], rest=_rest(bright)),
                      brightspace_time, bright["time"], formats["brightspace"], tz, now)
        problem = _brightspace_dates(entry, bright, folder, formats["brightspace"])
        found.append(dataclasses.replace(name, problem=problem) if problem else name)
    for ids in CANVAS_IDS.finditer(entry):
        head = CANVAS_NAME.fullmatch(entry[:ids.start()])
        if head and all(map(word, head["name"])) and \
                not re.search(r"_\d+_", head["name"] + "_"):  # (Canvas collapses those)
            found.append(Name("canvas", ids["key"], head["name"], late=bool(head["late"]),
                              order=int(ids["order"]), rest=entry[ids.end():] or None))
    return found or [Name("plain", stem)]


def _brightspace_dates(entry, match, folder, fmt):
    """Why a Brightspace name's date cannot be told for Brightspace's own (None: it can).
    Brightspace writes "<ids> - <Name> - <date>[ - <file's name>]", and the display name
    and the file's name are the student's: either may hold " - <a date>". A folder's name
    ends with Brightspace's date (read there, whatever its display name holds); a file's
    name holding two dates between its ids and its file's name reads two ways."""
    parts = entry.split(" - ")
    dates = [i for i, part in enumerate(parts) if i >= 2 and _is_date(part, fmt)]
    if not dates or match["time"] not in (parts[i] for i in dates):
        return None  # (a course's own pattern, not written with " - ": read as it says)
    if folder and match.end("time") != len(entry):
        return (f"Brightspace writes its own date last, and this name's last part, "
                f"{parts[-1]!r}, is not the date read ({match['time']!r}), which may be the "
                "display name's (refused, never guessed)")
    inner = [parts[i] for i in dates if i <= len(parts) - 2]
    if not folder and len(inner) > 1:
        return (f"its name holds {len(inner)} dates written as Brightspace writes its own "
                f"({'; '.join(inner)}), and a display name or a file's name may hold one: "
                "which is Brightspace's cannot be told (refused, never guessed)")
    return None


def _is_date(text, fmt):
    """Whether text reads as a date Brightspace writes (fmt; its "914 PM" given a colon)."""
    try:
        brightspace_time(text, fmt, datetime.timezone.utc)
    except TimeError:
        return False
    return True


def _splits(match):
    """[(assignment title, username)] of a Blackboard name's match, the pattern's own
    reading first: Blackboard writes "<title>_<username>", and either may hold "_", so
    each "_" of the title the pattern read may begin the username instead. A pattern
    without a group "assignment", or whose "assignment" and "key" are not joined by one
    "_", reads one way."""
    title, key = match.groupdict().get("assignment"), match["key"]
    if title is None or match.string[match.end("assignment"):match.start("key")] != "_":
        return [(title, key)]
    cuts = [i for i in range(1, len(title) - 1) if title[i] == "_"]
    return [(title, key)] + [(title[:i], f"{title[i + 1:]}_{key}") for i in reversed(cuts)]


def titles(entries, patterns=PATTERNS):
    """The assignment titles that every Blackboard name of entries (a download's names)
    may begin with, or None if none is Blackboard's: Blackboard writes one assignment's
    title before every name of its download, so a reading of another title is wrong."""
    common = None
    for entry in entries:
        board = patterns["blackboard"].fullmatch(entry)
        if board:
            found = {title for title, _ in _splits(board)}
            common = found if common is None else common & found
    return common


def attempt(entry, patterns=PATTERNS):
    """The Blackboard attempt an entry is of (its name up to the attempt's time), or None:
    a receipt and the files of its attempt share it."""
    board = patterns["blackboard"].fullmatch(entry)
    return entry[:board.end("time")] if board else None


def _rest(match):
    """The file's own name of a match (its group "rest"), or None (none, or a folder's)."""
    return match.groupdict().get("rest") or None


def _dated(name, read, text, fmt, tz, now):
    """name with the time its LMS wrote (read(text, fmt, tz)), or with why not."""
    try:
        when = read(text, fmt, tz)
    except TimeError as error:
        return dataclasses.replace(name, problem=f"its date cannot be read: {error}")
    now = now or datetime.datetime.now(datetime.timezone.utc)
    if when > now:
        return dataclasses.replace(name, problem=f"its date, {when:%Y-%m-%d %H:%M %Z}, is in "
                                                 "the future")
    return dataclasses.replace(name, when=when)


def is_receipt(entry, patterns=PATTERNS):
    """Whether an entry is a Blackboard receipt (the time of an attempt, not a submission):
    its name, with no file's name after the time, ends in ".txt"."""
    board = patterns["blackboard"].fullmatch(entry)
    return bool(board and not _rest(board) and (board.groupdict().get("receipt") or
                                                entry.endswith(".txt")))


@dataclass(frozen=True)
class Times:
    """An LMS export beside the download: what it is (its file), and its rows by key:
    Moodle's worksheet by participant number ({number: (full name, when or None, email)};
    "" for the name and email where blind marking hides them),
    an instructor's export by student id or LMS id ({id: (None, when, None)})."""
    path: Path
    kind: str  # WORKSHEET or EXPORT
    rows: dict
    unread: dict = dataclasses.field(default_factory=dict)  # {participant number, or
    # "line <n>" where none can be read: why its row of the worksheet is not read}
    extensions: dict = dataclasses.field(default_factory=dict)  # {participant number: the
    # aware time Moodle's Status says an extension runs until}


def read_times(folder, tz=None, formats=FORMATS):
    """The Times of the one CSV beside an assignment's download (downloaded/<assignment>/
    *.csv), or None if there is none. TimeError (stopping collect) for two of them, a CSV
    that is neither a Moodle grading worksheet nor an export, or a date it cannot read
    (naming its line). Moodle's worksheet is read as PHP writes it: a row that cannot
    be read is left out alone (Times.unread), its entry refused with why."""
    found = sorted(Path(folder).glob("*.csv"))
    if not found:
        return None
    if len(found) > 1:
        raise TimeError(f"{len(found)} CSV files beside the download "
                        f"({', '.join(p.name for p in found)}): keep the one that gives the "
                        "submission times (Moodle's grading worksheet, or an export)")
    path = found[0]
    text = path.read_text(encoding="utf-8-sig")
    header = set(phpcsv.rows(text.split("\n", 1)[0])[0].values) if text else set()
    if {"Identifier", "Last modified (submission)"} <= header:  # (no "Full name" under
        return _worksheet(path, text, tz, formats)  # blind marking: gradingtable.php)
    if not ("submitted_at" in header and header & {"student_id", "lms_id"}):
        raise TimeError(f"{path.name}: neither Moodle's grading worksheet (Identifier, "
                        "Last modified (submission); Full name) nor an export (student_id "
                        "or lms_id, submitted_at)")
    with open(path, newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        return Times(path, EXPORT, _rows(path, ((reader.line_num, row) for row in
                                                       reader), _export_row, tz, formats))


def _rows(path, numbered, read, tz, formats):
    """{key: value} of the rows (numbered: [(line, {column: value})]) read by read; TimeError
    naming the line of a date it cannot read, or of a key listed twice."""
    rows = {}
    for line, row in numbered:
        try:
            key, value = read(row, tz, formats)
        except TimeError as error:
            raise TimeError(f"{path.name}, line {line}: {error}") from None
        if key in rows:
            raise TimeError(f"{path.name}, line {line}: {key} is listed twice")
        rows[key] = value
    return rows


def _worksheet(path, text, tz, formats):
    """The Times of Moodle's grading worksheet (text), read as PHP's fputcsv writes it
    (tools/lms/phpcsv.py), each row alone from its line '"Participant <n>",' to the next
    (phpcsv.anchored): a row that cannot be read one way only with the header's number of
    columns is left out and kept in Times.unread with why, by its participant number; its
    entry is refused, the others read. Each extension its Status grants: Times.extensions."""
    rows = phpcsv.anchored(text, WORKSHEET_ROW)
    header, good, unread = rows[0].values, [], {}
    for row in rows[1:]:
        if row.problem is None:
            good.append((row.line, dict(zip(header, row.values))))
            continue
        unread[row.key or f"line {row.line}"] = \
            f"line {row.line} of {path.name} cannot be read: {row.problem}"
    read = _rows(path, good, _worksheet_row, tz, formats)  # {number: (name, when, email, ext)}
    return Times(path, WORKSHEET, {k: v[:3] for k, v in read.items()}, unread,
                 {k: v[3] for k, v in read.items() if v[3]})


# Moodle's Status of a participant granted an extension (mod/assign/gradingtable.php,
# col_status: the parts joined by " - " in a download; lang/en's userextensiondate, with
# userdate's default format, strftimedaytime: FORMATS["moodle"])
EXTENSION = re.compile(r"Extension granted until: (.+?)(?: - |$)")


def _worksheet_row(row, tz, formats):
    """(participant number, (full name, when or None, email, the time the extension its
    Status grants runs until, or None)) of a worksheet row."""
    ident = re.fullmatch(r"Participant (\d+)", (row.get("Identifier") or "").strip())
    if ident is None:
        raise TimeError(f"the Identifier {row.get('Identifier')!r} is not 'Participant <n>'")
    text = (row.get("Last modified (submission)") or "").strip()
    when = None if text in ("", "-") else local_time(text, formats["moodle"], tz)
    granted = EXTENSION.search(row.get("Status") or "")
    return ident.group(1), ((row.get("Full name") or "").strip(), when,
                            (row.get("Email address") or "").strip(),
                            local_time(granted[1], formats["moodle"], tz) if granted else None)


def _export_row(row, tz, formats):
    """(student id or LMS id, (None, when, None)) of an export's row: ISO 8601 (its own zone, or
    the LMS's), or the export format."""
    key = (row.get("student_id") or row.get("lms_id") or "").strip()
    text = (row.get("submitted_at") or "").strip()
    if not key:
        raise TimeError("no student_id or lms_id")
    if not text:
        return key, (None, None, None)
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        return key, (None, local_time(text, formats["export"], tz), None)
    return key, (None, when if when.tzinfo else _zoned(when, tz), None)
