"""nbgrader's exchange as collect reads it (`collect --exchange`): its inbound folder is a
border, as an LMS's download is (tools/instructor/unpack.py; docs/security.md).

    inbound_folder(root) -> <Exchange.root>/<course id>/inbound/
    check_owner(root) -> whether the course keeps nbgrader's owner check
    read(inbound, assignment, roster, places, bounds, owners)
        -> ({student: the Folder to collect}, [(a folder's name, why it is refused)])

tools/instructor/collect.py writes what read gives into submitted/ and prints it.

A student's `nbgrader submit` copies their whole assignment folder into the exchange,
<Exchange.root>/<course id>/inbound/<student id>+<assignment>+<time>[+<random>]: a folder
named by the submitting user, which they may go on changing (nbgrader makes its top
folder writable by every user). Every folder of the assignment there is checked before
any file of it is read, and one that fails is refused alone, its reason printed
("REJECTED <folder>: ..."), and left where it is (the exchange is nbgrader's: delete it
there); the rest of the class is collected:

- its name: nbgrader submit's, "<student id>+<assignment>+<time>" and its random string
  (URL-safe base64), the time a date as nbgrader writes it (Exchange.timestamp_format's
  default, in any zone: "2026-12-07 10:00:00.000000 UTC", or the course's own format);
  the name's time is not used;
- the student id: the allow-list every id keeps, and with a roster one of its student ids
  (tools.instructor.roster.exchange_problem); ids of one collect that differ only in
  case, Unicode normalization or look-alike characters (UTS #39) are refused
  (tools.instructor.collect._collisions). It
  is never a pattern: the folders are listed and their names compared, never globbed;
- its owner (nbgrader's ExchangeCollect.check_owner, on by default; False where the
  exchange's users are not the students' ids, as under a JupyterHub whose users share
  one uid): the folder and everything in it are the user's its name names (nbgrader
  only logs a warning; without the check another user may write a folder in a student's
  name, or a file into their folder);
- what it holds (tools.instructor.unpack.walk): files and folders only (no link, FIFO,
  device or socket), at most BOUNDS.listings of them, BOUNDS.depth deep, names of at
  most BOUNDS.name_bytes, a file at most BOUNDS.file_bytes and all at most
  BOUNDS.entry_bytes (as their sizes say and on disk); its notebooks and exercise files
  (the files an LMS's download gives: tools.instructor.unpack, at most BOUNDS.kept), and
  nbgrader's submission_secret.txt (which its feedback through the exchange needs; at
  most 1 KiB), are kept; the rest is left out and counted;
- a student's folders of the assignment: at most BOUNDS.submits (a walk each).

Of a student's folders that pass, the one whose files changed last is collected (their
last submission), and its time is that change: the latest status change (ctime, which no
user sets back) of the folder or anything in it, never the time in its name or in its
timestamp.txt, which the student writes (timestamp.txt is written from it). A collected
submission is replaced only by a later one (tools.instructor.collect._keep).

Why collect copies, not nbgrader's `collect`: nbgrader's ExchangeCollect globs
"{student}+{assignment}+*" (an id is a pattern there: "[z]" is "z"), reads every
folder's time from its name with dateutil (one that is no date stops the whole class),
and copies with shutil.copytree, which follows links (a link to /dev/zero writes until
the disk is full) before any bound is checked. Running it on the folders that passed
would still copy what a student changes between the check and its copy. So collect
reads the checked folder itself: the kept files alone, each opened without following a
link at any step and read only if it is still a file within its bound
(tools.instructor.unpack.read_regular), written into submitted/ as an LMS's download is
(beside, then renamed: tools.instructor.collect._place). nbgrader's collect writes
nothing else (no gradebook entry): autograde needs only submitted/.
"""

import datetime
import pwd
import re
from dataclasses import dataclass
from pathlib import Path

from tools.course.bounds import BOUNDS
from tools.course.settings import config
from tools.instructor import roster, unpack

TIMESTAMP = "timestamp.txt"  # nbgrader submit's (the student's time: never read)
SECRET = "submission_secret.txt"  # nbgrader submit's: 128 hex digits
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

    settings = config(root)
    exchange = Path(settings.Exchange.get("root", Exchange.class_traits()["root"].default_value))
    course = settings.CourseDirectory.get("course_id", "")
    if not course:
        raise SystemExit("collect --exchange: no course id (c.CourseDirectory.course_id)")
    inbound = exchange / course / "inbound"
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
    settings = config(root)
    return settings.ExchangeCollect.get("check_owner",
                                        settings.CollectApp.get("check_owner", True))


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
