"""Collect: the LMS's download in downloaded/<assignment>/archive/ into
submitted/<student>/<assignment>/ (or, with --exchange, nbgrader's exchange).

    python -m tools.instructor collect ROOT [ASSIGNMENT ...] [--exchange]

archive/ holds one entry per submission: a zip, or a folder holding one zip or the files
(Moodle's "submissions in folders", unzipped once). Who and when come from what the LMS
wrote, never from what the student wrote (tools/lms.py, tools/roster.py; docs/security.md):

- who: the entry's name, read from the end the LMS writes, mapped through the roster
  (c.Grading.roster) and Moodle's grading worksheet; an id the allow-list refuses, a name
  that reads as two students, or ids of one collect that differ only in case or Unicode
  normalization are refused;
- when: Moodle's grading worksheet or an instructor's export (the one CSV beside archive/,
  in downloaded/<assignment>/), Blackboard's and Brightspace's names, read in
  c.Grading.lms_timezone. Canvas's "_LATE" says late without a time, and its attachment
  ids order two uploads. Nothing else: not a timestamp.txt in the zip, nor a file's date
  (Moodle and Canvas date every entry with the moment the zip is made; an extracted
  folder has the extraction's). Without an LMS date, collect says so loudly and marks no
  one late by a date it cannot trust.

Every entry ends in exactly one of two places:

- collected: its notebooks and normlib/*.py files (tools/unpack.py, within tools/bounds.py)
  in submitted/<student>/<assignment>/, with nbgrader's timestamp.txt where the LMS gave
  its time (autograde puts it in the gradebook); what collect read of it in
  downloaded/<assignment>/collected.json (its entry, LMS, time and where the time came
  from, Canvas's late marker). Of two entries of one student, the later by the LMS's date
  (or Canvas's order) is kept, the other rejected saying so; where nothing the LMS wrote
  tells them apart, both are rejected. A collected submission is replaced by a newer
  entry, never by one the LMS dates earlier; an identical one leaves it as it was;
- rejected: moved to downloaded/<assignment>/rejected/, its reason printed.

A Blackboard receipt (".._attempt_<time>.txt") is read as such, and left in archive/.
"""

import datetime
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tools import lms, roster, unpack
from tools.course import assignment_names, run, submissions
from tools.gradebook import digest
from tools.grading import files_of
from tools.settings import config, read

TIMESTAMP = "timestamp.txt"  # nbgrader's: "2026-10-05 21:14:03.123456 UTC"
RECORD = "collected.json"  # downloaded/<assignment>/: what collect read of each submission


@dataclass(frozen=True)
class Rejected:
    entry: str
    reason: str


@dataclass(frozen=True)
class Found:
    """An entry that names a student and holds a submission: who, what the LMS says of
    its time (when: aware or None, and where it came from; late: Canvas's marker; order:
    Canvas's attachment id), and its files."""
    entry: str
    student: str
    name: lms.Name
    when: datetime.datetime | None
    source: str | None
    files: dict

    def record(self):
        return {"entry": self.entry, "lms": self.name.lms,
                "time": self.when.isoformat() if self.when else None, "time_from": self.source,
                "late_marker": self.name.late}


def _utc(text):
    """The aware datetime of a timestamp.txt's text ("2026-10-05 21:14:03.123456 UTC"; no
    zone: UTC); ValueError if it is not one."""
    when = datetime.datetime.fromisoformat(text.strip().removesuffix(" UTC"))
    return when.replace(tzinfo=when.tzinfo or datetime.timezone.utc)


def recorded_at(folder):
    """The submission time recorded in a collected submission's timestamp.txt (written by
    collect from the LMS's date, or by the exchange's collect from its files), or None."""
    path = Path(folder) / TIMESTAMP
    return _utc(path.read_text()) if path.is_file() else None


def _time(name, student, times):
    """(when, where it came from) of an entry, from what the LMS wrote: its name, or the
    worksheet or export beside the download; (None, None) if nothing gives it."""
    if name.when is not None:
        return name.when, f"{name.lms.capitalize()}'s name"
    if times is None:
        return None, None
    if times.kind == lms.WORKSHEET:
        row = times.rows.get(name.key) if name.lms == "moodle" else None
    else:
        row = times.rows.get(student) or times.rows.get(name.key)
    if row is None or row[1] is None:
        return None, None
    return row[1], f"{times.kind} {times.path.name}"


def _read(entry, assignment, settings, rows, times):
    """A Found of an entry of archive/, or a Rejected."""
    names = lms.names(entry.name, entry.is_dir() and not entry.is_symlink(),
                      settings.lms_timezone, settings.lms_formats)
    who = roster.student_of(names, assignment, rows, times)
    if isinstance(who, str):
        return Rejected(entry.name, who)
    student, name = who
    if name.problem:
        return Rejected(entry.name, name.problem)
    files = unpack.files(entry)
    if isinstance(files, str):
        return Rejected(entry.name, files)
    when, source = _time(name, student, times)
    return Found(entry.name, student, name, when, source, files)


def _newest(student, found):
    """(the Found of a student's entries to keep, or None, [Rejected]): the one the LMS
    dates (or Canvas orders) last; none if nothing the LMS wrote tells them apart, or if
    the LMS says they are two people (two participant numbers, user ids of one name)."""
    if len(found) == 1:
        return found[0], []
    names = ", ".join(f.entry for f in found)
    people = {(f.name.lms, f.name.key) for f in found if f.name.lms in ("moodle", "canvas")}
    if len(people) > 1:
        return None, [Rejected(f.entry, f"{len(found)} entries named {student} ({names}) are "
                               f"{len(people)} people to the LMS (its numbers differ): all "
                               "refused (a roster tells them apart)") for f in found]
    orders = (  # what the LMS wrote that orders them, and how a rejection says it
        (lambda f: f.when, lambda f, last: f"an older submission of {student} "
         f"({f.when:%Y-%m-%d %H:%M} by the {f.source}): {last.entry} "
         f"({last.when:%Y-%m-%d %H:%M}) replaces it"),
        (lambda f: f.name.order, lambda f, last: f"an earlier upload of {student} (Canvas's "
         f"attachment {f.name.order}): {last.entry} (attachment {last.name.order}) replaces "
         "it"))  # (Canvas numbers uploads in order)
    for key, says in orders:
        if all(key(f) is not None for f in found):
            found = sorted(found, key=key)
            if key(found[-1]) != key(found[-2]):
                return found[-1], [Rejected(f.entry, says(f, found[-1])) for f in found[:-1]]
            break
    return None, [Rejected(f.entry, f"{len(found)} entries of {student} ({names}), and no date "
                           "from the LMS tells which is the later: all refused (keep the one "
                           "to grade in archive/, then collect again)") for f in found]


def _collisions(found, root, assignment):
    """[Rejected] of the entries whose student ids differ only in case or Unicode
    normalization from another's of this collect, or from a submission collected before."""
    by_fold = {}
    for f in found:
        by_fold.setdefault(roster.fold(f.student), set()).add(f.student)
    for folder in Path(root).glob(f"submitted/*/{assignment}"):
        if roster.fold(folder.parent.name) in by_fold:
            by_fold[roster.fold(folder.parent.name)].add(folder.parent.name)
    clashing = {k: ids for k, ids in by_fold.items() if len(ids) > 1}
    return [Rejected(f.entry, f"its student id {f.student!r} differs only in case or Unicode "
                              "normalization from "
                              f"{', '.join(sorted(clashing[roster.fold(f.student)] - {f.student}))}"
                              ": refused (give them distinct ids in the roster)")
            for f in found if roster.fold(f.student) in clashing]


def collect_archive(root, assignment, settings, rows=None):
    """Collect downloaded/<assignment>/archive/ (see the module's docstring). Returns
    ({student: "new" | "replaced" | "unchanged"}, [Rejected], {student: Found} of those
    collected, the Times beside the download or None, [receipts read])."""
    download = Path(root) / "downloaded" / assignment
    archive = download / "archive"
    try:
        times = lms.read_times(download, settings.lms_timezone, settings.lms_formats)
    except lms.TimeError as error:
        raise SystemExit(f"collect {assignment}: {error}") from None
    found, rejected, receipts = [], [], []
    for entry in sorted(archive.iterdir()):
        if lms.is_receipt(entry.name) and entry.is_file() and not entry.is_symlink():
            receipts.append(entry.name)
            continue
        item = _read(entry, assignment, settings, rows, times)
        (rejected if isinstance(item, Rejected) else found).append(item)
    clashes = _collisions(found, root, assignment)
    rejected += clashes
    found = [f for f in found if f.entry not in {c.entry for c in clashes}]
    by_student = {}
    for f in found:
        by_student.setdefault(f.student, []).append(f)
    outcome, kept = {}, {}
    for student, entries in sorted(by_student.items()):
        newest, older = _newest(student, entries)
        rejected += older
        if newest is None:
            continue
        folder = Path(root) / "submitted" / student / assignment
        before = recorded_at(folder) if folder.is_dir() else None
        if before is not None and newest.when is not None and before > newest.when:
            rejected.append(Rejected(newest.entry, f"older than the submission of {student} "
                                     f"collected ({before:%Y-%m-%d %H:%M} UTC)"))
            continue
        if before is not None and newest.when is None:
            held = files_of(folder)
            held.pop(TIMESTAMP)
            if held == newest.files:  # (its time, and what collect read of it, kept)
                outcome[student] = "unchanged"
                continue
            rejected.append(Rejected(newest.entry, f"the submission of {student} collected has "
                                     f"the LMS's time ({before:%Y-%m-%d %H:%M} UTC) and this "
                                     "entry none: which is the later? (add the LMS's times "
                                     "beside archive/)"))
            continue
        try:
            outcome[student] = _place(folder, newest.files, newest.when)
        except OSError as error:  # (a name the file system refuses: nothing half-written)
            rejected.append(Rejected(newest.entry, f"its files cannot be written here "
                                                   f"({type(error).__name__}: {error.strerror})"))
            continue
        kept[student] = newest
    for item in rejected:
        (download / "rejected").mkdir(exist_ok=True)
        shutil.move(archive / item.entry, download / "rejected" / item.entry)
    _write_record(download, kept)
    return outcome, rejected, kept, times, receipts


def _write_record(download, kept):
    """downloaded/<assignment>/collected.json: what collect read of each collected
    submission (Found.record), those of earlier collects kept."""
    path = download / RECORD
    record = json.loads(path.read_text()) if path.is_file() else {}
    record.update({student: f.record() for student, f in kept.items()})
    path.write_text(json.dumps(record, indent=1, sort_keys=True))


def read_record(root, assignment):
    """{student: what collect read of their submission} (downloaded/<assignment>/
    collected.json; {} if none)."""
    path = Path(root) / "downloaded" / assignment / RECORD
    return json.loads(path.read_text()) if path.is_file() else {}


def _place(folder, files, when):
    """Write a submission's files into folder (replacing what was there), with its
    timestamp.txt if its time is known; "new", "replaced" or "unchanged"."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    new = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".collecting-"))
    try:
        for rel, data in files.items():
            (new / rel).parent.mkdir(parents=True, exist_ok=True)
            (new / rel).write_bytes(data)
    except OSError:
        shutil.rmtree(new)
        raise
    if when is not None:
        (new / TIMESTAMP).write_text(when.astimezone(datetime.timezone.utc).strftime(
            "%Y-%m-%d %H:%M:%S.%f UTC"))
    if folder.is_dir() and digest(folder) == digest(new):
        shutil.rmtree(new)
        return "unchanged"
    state = "replaced" if folder.is_dir() else "new"
    if folder.is_dir():
        shutil.rmtree(folder)
    os.rename(new, folder)
    return state


def late_words(seconds):
    """'2 h 5 min late' of a number of seconds late ('' if on time)."""
    if seconds <= 0:
        return ""
    minutes = int(seconds + 59) // 60
    days, hours, minutes = minutes // 1440, minutes // 60 % 24, minutes % 60
    parts = [f"{days} d" * bool(days), f"{hours} h" * bool(hours), f"{minutes} min" * bool(
        minutes)]
    return " ".join(p for p in parts if p) + " late"


def late_by(when, late_marker, due):
    """How late a submission is, in words ('' if it is not, or nothing says so), from its
    time (aware, or None), Canvas's late marker and its due date (aware, or None)."""
    if when is None:
        return "late by Canvas's _LATE marker; no time" if late_marker else ""
    return late_words((when - due).total_seconds()) if due is not None else ""


def report(name, outcome, rejected, kept, times, receipts, due):
    """Print what became of each entry of an assignment's archive/."""
    count = {state: sorted(s for s, v in outcome.items() if v == state)
             for state in ("new", "replaced", "unchanged")}
    entries = len(outcome) + len(rejected)
    print(f"collected {name}: {entries} entr{'y' if entries == 1 else 'ies'} in archive/, "
          f"{len(outcome)} collected ({len(count['new'])} new, {len(count['replaced'])} "
          f"replacing an older submission, {len(count['unchanged'])} unchanged), "
          f"{len(rejected)} rejected")
    for state, students in count.items():
        if students and state != "unchanged":
            print(f"  {state}: {', '.join(students)}")
    if times is not None:
        print(f"  times: {times.kind} {times.path.name}")
    unknown = sorted(s for s, f in kept.items() if f.when is None)
    if unknown:
        print(f"  TIMES UNKNOWN for {len(unknown)} of {len(kept)}: {', '.join(unknown)}. No "
              "date the LMS wrote gives their submission time (not the zip's dates, nor a "
              "file of the student's): none of them is marked late by a date. Add the LMS's "
              "times beside archive/ (Moodle's grading worksheet, or an export: "
              "docs/instructors.md, step 3)")
    late = {s: late_by(f.when, f.name.late, due) for s, f in kept.items()}
    late = {s: words for s, words in late.items() if words}
    if late:
        print(f"  late: {', '.join(f'{s} ({v})' for s, v in sorted(late.items()))}")
    if receipts:
        print(f"  {len(receipts)} Blackboard receipt{'s' * (len(receipts) != 1)} read "
              "(the times are their names')")
    for item in rejected:
        print(f"  REJECTED {item.entry}: {item.reason}; moved to downloaded/{name}/rejected/")


def collect(root, names=(), exchange=False):
    """Collect every assignment named (all if none), printing what became of each entry."""
    settings = read(root)
    rows = roster.read_roster(settings.roster) if settings.roster else None
    for name in assignment_names(root, names):
        archive = Path(root) / "downloaded" / name / "archive"
        if exchange:
            run(root, "collect", name, "--update")
            refused = exchange_times(root, name)
            students = submissions(root, [name])[name]
            print(f"collected {name} from the exchange: {len(students)} submission"
                  f"{'s' * (len(students) != 1)}")
            for student, reason in refused:
                print(f"  REJECTED {student}'s submission: {reason}; removed from submitted/")
            continue
        if not archive.is_dir():
            print(f"{name}: nothing to collect (no downloaded/{name}/archive/)")
            continue
        found = collect_archive(root, name, settings, rows)
        report(name, *found, settings.due.get(name))


def exchange_times(root, assignment):
    """After nbgrader's collect from the exchange: each submission's timestamp.txt is the
    last time anything the student put in the exchange's inbound folder for the
    assignment changed (the latest status change, ctime, of every file and folder of every
    one of their submissions there, which no user can set back), never the time the
    student's own `nbgrader submit` wrote into a folder's name and its timestamp.txt
    (which nbgrader uses to choose the one it copies). A submission whose inbound folders
    hold a link is removed (nbgrader copies what a link points to). Returns [(student, why
    removed)]."""
    settings = config(root)
    exchange = Path(settings.Exchange.get("root", "/srv/nbgrader/exchange"))
    inbound = exchange / settings.CourseDirectory.get("course_id", "") / "inbound"
    refused = []
    for student in submissions(root, [assignment])[assignment]:
        folders = list(inbound.glob(f"{student}+{assignment}+*"))
        if not folders:
            continue
        folder, latest, link = Path(root) / "submitted" / student / assignment, 0.0, None
        for source in folders:
            latest = max(latest, os.lstat(source).st_ctime)
            for top, dirs, files in os.walk(source, followlinks=False):
                for item in dirs + files:
                    path = os.path.join(top, item)
                    latest = max(latest, os.lstat(path).st_ctime)
                    if os.path.islink(path):
                        link = os.path.relpath(path, inbound)
        if link is not None:
            shutil.rmtree(folder, ignore_errors=True)
            refused.append((student, f"a link in its inbound folder ({link}): links are not "
                                     "followed"))
            continue
        when = datetime.datetime.fromtimestamp(latest, datetime.timezone.utc)
        (folder / TIMESTAMP).write_text(when.strftime("%Y-%m-%d %H:%M:%S.%f UTC"))
    return refused
