"""CSV as PHP's fputcsv writes it: Moodle's grading worksheet and grade export
(lib/csvlib.class.php calls fputcsv with PHP's default escape character, a backslash).

    field(text, delimiter) -> the field as fputcsv writes it
    rows(text, delimiter, columns) -> [Row]
    anchored(text, start, delimiter) -> [Row]   each row read alone (the worksheet)

php-src's php_fputcsv encloses a field holding the delimiter, '"', '\\', a newline, CR, tab
or space in '"', and doubles every '"' inside except one after a backslash. So '\\"' is a
quote of the value, never the field's end: Python's csv misreads it (a full name
'Eve \\",-,-' shifts the columns), and this module is php_fputcsv's exact inverse. A value
ending in a backslash reads two ways ('...\\"'): rows() tries PHP's reading, then a '\\"'
before a delimiter or line end as a field's end, the longest reading first. A row that
no reading gives the header's number of columns is refused alone (Row.problem).
"""

import dataclasses
import re
from dataclasses import dataclass

ENDS = ("\r\n", "\n", "\r")
SPECIAL = ('"', "\\", "\n", "\r", "\t", " ")
BREAK = re.compile(r"\r\n|\n|\r")
BUDGET = 4_000_000  # characters read (and fields copied) per row, every reading's


@dataclass(frozen=True)
class Row:
    """A row of the text: its fields as written (quotes kept) and their values, its line
    end, the line it starts on, and why it cannot be read (None: it can)."""
    raw: tuple
    values: tuple
    end: str
    line: int
    problem: str | None = None
    key: str | None = None  # (anchored's: the group 1 of its start)


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
    """([end positions] of the readings of the field at pos, the longest first, [] if none;
    how many characters were read)."""
    if not text.startswith('"', pos):
        end = pos
        while end < len(text) and not text.startswith(delimiter, end) and \
                not text.startswith(ENDS, end):
            if text[end] in '"\\':  # (never unenclosed in what fputcsv writes)
                return [], end - pos + 1
            end += 1
        return [end], end - pos + 1
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
    return found[::-1], i - pos + 1


def _readings(text, pos, delimiter, columns, stop=None, want=1):
    """([(raw fields as spans, end of the row)] of the row at pos, in PHP's order (a
    '\\"' read as a quote of the value first), up to the `want`-th with `columns` fields
    (None: any number) that ends at `stop` (None: anywhere); whether the step budget was
    spent first)."""
    found, read, stack, seen, right = [], 0, [(pos, (), False)], {}, 0
    while stack and read < BUDGET:
        at, fields, done = stack.pop()
        if done:
            found.append((fields, at))
            right += (columns is None or len(fields) == columns) and stop in (None, at)
            if right >= want:
                break
            continue
        if at not in seen:  # (a field's readings are the same on every path to it)
            seen[at], cost = _ends(text, at, delimiter)
            read += cost
        read += len(fields) + 1
        for end in reversed(seen[at]):  # (the stack pops the longest first)
            raw = fields + ((at, end),)
            if not text.startswith(delimiter, end):
                stack.append((end, raw, True))
            else:
                stack.append((end + len(delimiter), raw, False))
    return found, read >= BUDGET and right < want


def rows(text, delimiter=",", columns=None):
    """[Row] of a text fputcsv wrote; columns: how many fields a row has (None: the
    first row's, the header)."""
    out, pos, line = [], 0, 1
    while pos < len(text):
        readings, spent = _readings(text, pos, delimiter, columns)
        readings = [(tuple(text[a:b] for a, b in spans), end) for spans, end in readings]
        right = [(r, e) for r, e in readings if columns is None or len(r) == columns]
        problem = None
        if right:
            raw, end = right[0]
        else:
            raw, end = readings[0] if readings and not spent else (None, _next_line(text, pos))
            raw = raw or (text[pos:end],)  # (kept as written, in one piece)
            problem = _why(readings, spent, columns)
        stop = next((e for e in ENDS if text.startswith(e, end)), "")
        out.append(Row(raw, tuple(value(f) for f in raw), stop, line, problem))
        line += len(BREAK.findall(text, pos, end + len(stop)))
        pos = end + len(stop)
        if columns is None:
            columns = len(raw)
    return out


def anchored(text, start, delimiter=","):
    """[Row] of a text fputcsv wrote, its first line the header, whose every other
    row's first line, and no other line, starts as `start` matches (a compiled pattern
    whose group 1 is the row's key: Moodle's worksheet's '"Participant <n>",': a line
    of a value never starts with one '"' and a letter, since fputcsv doubles a quote that
    no backslash comes before). Each row is read alone, between its start and the
    next: read one way only with the header's columns, or refused (Row.problem, its
    key kept) without moving any other row."""
    end = _next_line(text, 0)
    stop = next((e for e in ENDS if text.startswith(e, end)), "")
    header = rows(text[:end], delimiter)[0]
    out = [dataclasses.replace(header, end=stop)]
    first = end + len(stop)
    cuts = [first] + [m.start() for m in re.finditer(r"(?<=[\r\n])", text)
                      if m.start() > first and start.match(text, m.start())] + [len(text)]
    line = 2
    for a, b in zip(cuts, cuts[1:]):
        if a < b:
            out.append(_alone(text[a:b], line, len(header.raw), start, delimiter))
            line += len(BREAK.findall(text, a, b))
    return out


def _alone(chunk, line, columns, start, delimiter):
    """The Row of one chunk of anchored's (its line end kept apart)."""
    stop = next((e for e in ENDS if chunk.endswith(e)), "")
    body = chunk[:len(chunk) - len(stop)]
    readings, spent = _readings(body, 0, delimiter, columns, stop=len(body), want=2)
    right = [r for r, e in readings if len(r) == columns and e == len(body)]
    match = start.match(chunk)
    key = match.group(1) if match and match.groups() else None
    if len(right) == 1 and not spent:
        raw = tuple(body[a:b] for a, b in right[0])
        return Row(raw, tuple(value(f) for f in raw), stop, line, None, key)
    why = "it reads more than one way as PHP's fputcsv writes (a value that ends in a " \
          "backslash): refused, never guessed" if len(right) > 1 or spent else \
        _why([(r, e) for r, e in readings if e == len(body)] or readings, False, columns)
    return Row((body,), (body,), stop, line, why, key)


def _next_line(text, pos):
    """Where the physical line at pos ends."""
    ends = [i for i in (text.find(e, pos) for e in ENDS) if i >= 0]
    return min(ends) if ends else len(text)


def _why(readings, spent, columns):
    """Why a row cannot be read."""
    if spent or not readings:
        return "a quote that does not close, or a quote or backslash outside quotes: not " \
               "what PHP's fputcsv writes"
    counts = sorted({len(r) for r, _ in readings})
    return f"{' or '.join(map(str, counts))} columns where the header has {columns}"
