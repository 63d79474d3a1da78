"""nbgrader's exchange as `collect --exchange` reads it: a border, as an LMS's download is.

    inbound_folder(root) -> <Exchange.root>/<course id>/inbound/
    check_owner(root) -> whether the course keeps nbgrader's owner check
    read(inbound, assignment, rows, where, bounds, owners, stamp)
        -> ({student: the Folder to collect}, [(a folder's name, why it is refused)])

`nbgrader submit` writes <student id>+<assignment>+<time>[+<random>], a folder the student
may go on changing. Each is checked before any file of it is read (its name, its id, its
owner, what it holds: unpack.walk); one that fails is refused alone and left there. Of a
student's folders that pass, the one changed last is collected, at its files' ctime (never
the name's time nor timestamp.txt, which the student writes). nbgrader's own collect is not
run (it globs the id, follows links, and copies what changed after a check): collect.py
reads the kept files itself (unpack.read_regular). Rules and tests: docs/security.md, section 1.
"""

import datetime
import pwd
import re
from dataclasses import dataclass
from pathlib import Path

from tools.course.bounds import BOUNDS
from tools.course.folder import SECRET, TIMESTAMP
from tools.course.settings import config
from tools.instructor import roster, unpack

SECRET_BYTES = 1024
RANDOM = re.compile(r"[A-Za-z0-9_=-]{1,64}")  # base64.urlsafe_b64encode(os.urandom(9))
SOURCE = "exchange's inbound folder (its files' last change)"
TIME = re.compile(r"(?P<when>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,6})?) [A-Za-z0-9:_-]{1,32}")


@dataclass(frozen=True)
class Folder:
    """An inbound folder that passed: whose, when its files last changed (aware), its
    kept files and how many it left out."""
    entry: str
    student: str
    when: datetime.datetime
    files: dict
    left: int


def inbound_folder(root):
    """<Exchange.root>/<course id>/inbound/ of the course at root; SystemExit if the course
    names none, or it is not there."""
    from nbgrader.exchange.default import Exchange  # (its default root: nbgrader's)

    nbgrader_config = config(root)
    exchange = Path(nbgrader_config.Exchange.get(
        "root", Exchange.class_traits()["root"].default_value))
    course_id = nbgrader_config.CourseDirectory.get("course_id", "")
    if not course_id:
        raise SystemExit("collect --exchange: no course id (c.CourseDirectory.course_id)")
    inbound = exchange / course_id / "inbound"
    if not inbound.is_dir():
        raise SystemExit(f"collect --exchange: no inbound folder {inbound} (c.Exchange.root: "
                         "release an assignment to the exchange first)")
    return inbound


def shown(text):
    """A name (or a reason naming a file) as printed: each character that no line shows (a
    control character, a line's end, bytes that are no UTF-8) escaped as Python writes it,
    so that a name neither stops the printing nor makes a line of its own."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _name_problem(parts, assignment, stamp=None):
    """Why a folder's name (split at "+") is not one nbgrader submit writes, or None. stamp:
    the course's own c.Exchange.timestamp_format (None: nbgrader's default)."""
    if len(parts) not in (3, 4) or parts[1] != assignment or \
            (len(parts) == 4 and not RANDOM.fullmatch(parts[3])):
        return "not a folder's name as nbgrader submit writes it (<student id>+" \
               f"{assignment}+<time>[+<random>])"
    if stamp is not None:
        try:
            datetime.datetime.strptime(parts[2], stamp)
        except ValueError:
            return f"not a folder's name as nbgrader submit writes it: its time " \
                   f"{parts[2]!r} is no date written as {stamp!r} (c.Exchange.timestamp_format)"
        return None
    time = TIME.fullmatch(parts[2])
    try:
        datetime.datetime.fromisoformat(time["when"] if time else "")
    except ValueError:
        return f"not a folder's name as nbgrader submit writes it: its time {parts[2]!r} is " \
               "no date (nbgrader writes 2026-12-07 10:00:00.000000 UTC)"
    return None


def _owner(student):
    """(the uid of the user student names, None) or (None, why refused)."""
    try:
        return pwd.getpwnam(student).pw_uid, None
    except KeyError:
        return None, f"no user {student} on this machine, and nbgrader submit names the " \
                     "folder after the submitting user (c.ExchangeCollect.check_owner = False " \
                     "where the exchange's users are not the students' ids)"


def _folder(path, student, where, owner, bounds):
    """The Folder of an inbound folder whose name passed, or why it is refused."""
    if path.is_symlink() or not path.is_dir():
        return "not a folder" + (" (a link: links are not followed)" if path.is_symlink() else "")
    walked = unpack.walk(path, bounds, owner)
    if isinstance(walked, str):
        return walked + (f", not {student}: another user wrote it" if " owned by " in walked
                         else "")
    files = unpack.kept_files(path, walked.files, bounds, where)
    if isinstance(files, str):
        return files
    ours = [n for n in (TIMESTAMP, SECRET) if n in walked.files]
    if SECRET in walked.files:
        try:
            files[SECRET] = unpack.read_regular(path, SECRET, SECRET_BYTES)
        except (OSError, ValueError) as error:
            return f"its {SECRET} is no file of at most {SECRET_BYTES} bytes ({error})"
    when = datetime.datetime.fromtimestamp(walked.changed, datetime.timezone.utc)
    return Folder(path.name, student, when, files,
                  len(walked.files) - len(files) - len(ours) + (SECRET in files))


def check_owner(root):
    """Whether the course keeps nbgrader's owner check (ExchangeCollect.check_owner, or its
    old name CollectApp's; on by default)."""
    nbgrader_config = config(root)
    return nbgrader_config.ExchangeCollect.get(
        "check_owner", nbgrader_config.CollectApp.get("check_owner", True))


def timestamp_format(root):
    """The course's c.Exchange.timestamp_format where it sets one, else None (nbgrader's
    default, read by TIME: any zone's name)."""
    return config(root).Exchange.get("timestamp_format")


def read(inbound, assignment, rows, where, bounds=BOUNDS, owners=True, stamp=None):
    """({student: the Folder of theirs to collect: the one whose files changed last},
    [(a folder's name, why it is refused)]) of the assignment's folders in inbound (rows:
    the roster, or None; where: the assignment's unpack.Places; owners: check_owner's;
    stamp: timestamp_format's)."""
    by_student, rejected = {}, []
    for path in sorted(inbound.iterdir()):
        parts = path.name.split("+")
        if assignment not in parts[1:]:
            continue  # (another assignment's)
        why = _name_problem(parts, assignment, stamp) or roster.exchange_problem(parts[0], rows)
        if why:
            rejected.append((path.name, why))
        else:
            by_student.setdefault(parts[0], []).append(path)
    passed = []
    for student, paths in sorted(by_student.items()):
        if len(paths) > bounds.submits:
            rejected += [(p.name, f"{len(paths)} folders of {student}: more than "
                                  f"{bounds.submits} submissions of one assignment (delete "
                                  "the older ones in the exchange)") for p in paths]
            continue
        owner, why = _owner(student) if owners else (None, None)
        for path in paths:
            item = why or _folder(path, student, where, owner, bounds)
            (rejected.append((path.name, item)) if isinstance(item, str)
             else passed.append(item))
    return _last(passed), rejected


def _last(folders):
    """{student: the Folder of theirs whose files changed last}."""
    kept = {}
    for folder in sorted(folders, key=lambda f: (f.when, f.entry)):
        kept[folder.student] = folder
    return kept
