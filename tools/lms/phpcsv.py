"""CSV as PHP's fputcsv writes it: Moodle's grading worksheet and grade export
(lib/csvlib.class.php, csv_export_writer::add_data calls fputcsv with PHP's default escape
character, a backslash).

    field(text, delimiter) -> the field as fputcsv writes it
    records(text, delimiter, columns) -> [Record]

php-src ext/standard/file.c, php_fputcsv: a field holding the delimiter, '"', '\\', a
newline, CR, tab or space is enclosed in '"'; inside, every '"' is doubled, except one that
follows a backslash (a run of them): that one is written alone. So '\\"' inside an enclosed
field is a quote of the value, never its end, which Python's csv cannot read: without an
escape character it ends the field there (the columns after it shift: a full name
'Eve \\",-,-,-' puts "-" in the time's column), and with escapechar='\\' it drops the
backslash and misreads '\\\\"'. This module is the exact inverse of php_fputcsv instead.
One case is ambiguous in what fputcsv writes (PHP's own fgetcsv misreads it): a value that
ends in a backslash is written '...\\"', whose closing quote reads like a quote of the
value. A record is read as PHP reads it (a '\\"' is a quote of the value) and, where that
does not give the header's number of columns, with a '\\"' followed by the delimiter or a
line end as a field's end, the longest reading first. A record that no reading gives the
header's number of columns is refused alone (Record.problem), never guessed; where a value
ending in a backslash made the record run into the next ones, those are refused with it
(each entry whose row is not read is refused, saying so: never misread).
"""

import re
from dataclasses import dataclass

ENDS = ("\r\n", "\n", "\r")
SPECIAL = ('"', "\\", "\n", "\r", "\t", " ")
BREAK = re.compile(r"\r\n|\n|\r")
BUDGET = 10_000  # reading steps per record


@dataclass(frozen=True)
class Record:
    """A record of the text: its fields as written (quotes kept) and their values, its line
    end, the line it starts on, and why it cannot be read (None: it can)."""
    raw: tuple
    values: tuple
    end: str
    line: int
    problem: str | None = None


def field(text, delimiter=","):
    """text as php_fputcsv writes it (see the module's docstring)."""
    if not any(c in text for c in (delimiter, *SPECIAL)):
        return text
    out, escaped = ['"'], False
    for c in text:
        if c == "\\":
            escaped = True
        elif c == '"' and not escaped:
            out.append('"')
        else:
            escaped = False
        out.append(c)
    return "".join(out) + '"'


def value(raw):
    """The value of a field as written (the inverse of field)."""
    if not raw.startswith('"'):
        return raw
    out, escaped, i, inner = [], False, 0, raw[1:-1]
    while i < len(inner):
        c = inner[i]
        if c == '"' and not escaped:
            i += 1  # (a doubled quote: its second is the value's)
        escaped = c == "\\"
        out.append(c)
        i += 1
    return "".join(out)


def _after(text, i, delimiter):
    """Whether a field may end at i: the delimiter, a line end or the text's end follows."""
    return i == len(text) or text.startswith(delimiter, i) or text.startswith(ENDS, i)


def _ends(text, pos, delimiter):
    """[end positions] of the readings of the field at pos, the longest first; [] if none."""
    if not text.startswith('"', pos):
        end = pos
        while end < len(text) and not text.startswith(delimiter, end) and \
                not text.startswith(ENDS, end):
            if text[end] in '"\\':  # (never unenclosed in what fputcsv writes)
                return []
            end += 1
        return [end]
    found, escaped, i = [], False, pos + 1
    while i < len(text):
        c = text[i]
        if c == '"' and escaped:
            if _after(text, i + 1, delimiter):
                found.append(i + 1)  # (a value that ends in a backslash)
            escaped = False
        elif c == '"' and text.startswith('"', i + 1):
            i += 1  # (a doubled quote)
        elif c == '"':
            if _after(text, i + 1, delimiter):
                found.append(i + 1)
            break
        else:
            escaped = c == "\\"
        i += 1
    return found[::-1]


def _readings(text, pos, delimiter, columns):
    """([(raw fields, end of the record)] of the record at pos, in PHP's order (a '\\"'
    read as a quote of the value first), up to the first with `columns` fields (None: any
    number); whether the step budget was spent first)."""
    found, steps, stack = [], 0, [(pos, (), False)]
    while stack and steps < BUDGET:
        steps += 1
        at, fields, done = stack.pop()
        if done:
            found.append((fields, at))
            if columns is None or len(fields) == columns:
                break
            continue
        for end in reversed(_ends(text, at, delimiter)):  # (the stack pops the longest first)
            raw = fields + (text[at:end],)
            if not text.startswith(delimiter, end):
                stack.append((end, raw, True))
            else:
                stack.append((end + len(delimiter), raw, False))
    return found, steps >= BUDGET


def records(text, delimiter=",", columns=None):
    """[Record] of a text fputcsv wrote; columns: how many fields a record has (None: the
    first record's, the header)."""
    out, pos, line = [], 0, 1
    while pos < len(text):
        readings, spent = _readings(text, pos, delimiter, columns)
        right = [(r, e) for r, e in readings if columns is None or len(r) == columns]
        problem = None
        if right:
            raw, end = right[0]
        else:
            raw, end = readings[0] if readings and not spent else (None, _next_line(text, pos))
            raw = raw or (text[pos:end],)  # (kept as written, in one piece)
            problem = _why(readings, spent, columns)
        stop = next((e for e in ENDS if text.startswith(e, end)), "")
        out.append(Record(raw, tuple(value(f) for f in raw), stop, line, problem))
        line += len(BREAK.findall(text, pos, end + len(stop)))
        pos = end + len(stop)
        if columns is None:
            columns = len(raw)
    return out


def _next_line(text, pos):
    """Where the physical line at pos ends."""
    ends = [i for i in (text.find(e, pos) for e in ENDS) if i >= 0]
    return min(ends) if ends else len(text)


def _why(readings, spent, columns):
    """Why a record cannot be read."""
    if spent or not readings:
        return "a quote that does not close, or a quote or backslash outside quotes: not " \
               "what PHP's fputcsv writes"
    counts = sorted({len(r) for r, _ in readings})
    return f"{' or '.join(map(str, counts))} columns where the header has {columns}"
