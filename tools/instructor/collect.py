"""Collect: an LMS's download, each entry collected into submitted/ or rejected with why.

    python -m tools.instructor collect ROOT [ASSIGNMENT ...] [--exchange] [--dry-run]

Reads downloaded/<assignment>/archive/ (the LMS's download, extracted once) and the one CSV
beside it (Moodle's grading worksheet, or an instructor's export of the times). Writes each
student's notebooks and exercise files, with nbgrader's timestamp.txt where the LMS gave a
time, to submitted/<student>/<assignment>/; a provenance per student to
downloaded/<assignment>/collected.json (Found.collected); each rejected entry is moved to
downloaded/<assignment>/rejected/. --exchange reads nbgrader's inbound folders instead
(tools/instructor/inbound.py); --dry-run decides and prints it all, and writes nothing.
Who and when come from what the LMS wrote, never from the student (no timestamp.txt of
theirs, no file's date); without an LMS date, no one is marked late. Each LMS's layout,
collected.json and every rejection: docs/instructors.md, step 3; the trust: docs/security.md.
"""

import contextlib
import datetime
import filecmp
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import NamedTuple

from tools.course import confusables
from tools.course.bounds import BOUNDS, fold
from tools.course.folder import (
    TIMESTAMP,
    Course,
    assignment_names,
    files_of,
    submission_folder,
)
from tools.course.late import late_words
from tools.course.settings import read
from tools.instructor import gradebook, inbound, roster, unpack
from tools.lms import downloads

RECEIPT_BYTES = 64 << 10  # a Blackboard receipt read for its zone: a few lines
COLLECTED = "collected.json"  # downloaded/<assignment>/: what collect read of each submission
DATED = ("blackboard", "brightspace")  # whose names date each upload
PEOPLE = ("moodle", "canvas", "brightspace")  # whose keys are the LMS's: two are two people


@dataclass(frozen=True)
class Rejected:
    entry: str
    reason: str


@dataclass(frozen=True)
class Piece:
    """An entry of archive/, read: whose (student, the Name read), what (a zip or a folder,
    or a loose file and its place in the submission) and its size on disk (0: a folder,
    bounded by its walk)."""
    entry: str
    path: Path
    student: str
    name: downloads.Name
    place: str | None  # a loose file's path in the submission; None: a zip or a folder
    size: int

    def upload(self):
        """What tells one upload of the student from another: the LMS's id of them (and
        Blackboard's and Brightspace's time); a plain entry is an upload of its own."""
        if self.name.lms == "plain":
            return "plain", self.entry
        when = self.name.when if self.name.lms in DATED else None
        return self.name.lms, self.name.key, when and downloads.utc(when)


@dataclass(frozen=True)
class Found:
    """An upload that names a student and holds a submission: its entries (entry: the
    latest), who, what the LMS says of its time (when: aware or None, and where it came
    from; the Name's late marker), its files and the entries whose files lost their place
    to a later upload's (superseded: {place: {"by": the entry kept, "entries": [those
    superseded]}})."""
    entry: str
    entries: tuple
    student: str
    name: downloads.Name
    when: datetime.datetime | None
    source: str | None
    files: dict
    superseded: dict
    extension: datetime.datetime | None = None  # (Moodle's worksheet's: Times.extensions)

    def collected(self, assignment):
        """What collect read of it (collected.json: docs/instructors.md, step 3)."""
        key = roster.plain_id(self.name.key, assignment) if self.name.lms == "plain" \
            else self.name.key
        return {"entry": self.entry, "entries": sorted(self.entries), "lms": self.name.lms,
                "key": key, "name": self.name.name,
                "time": self.when.isoformat() if self.when else None, "time_from": self.source,
                "late_marker": self.name.late, "superseded": self.superseded,
                "extension": self.extension.isoformat() if self.extension else None}


@dataclass(frozen=True)
class Receipt:
    """A Blackboard receipt of an attempt the download holds no file of (a text-only
    attempt, or one whose files were left out of the download): its usernames (its
    readings'), its student or why none, and its time (or None)."""
    entry: str
    usernames: tuple
    student: str | None
    why: str | None
    when: datetime.datetime | None


class Collected(NamedTuple):
    """What collect_archive did (or, dry, would do) to an assignment's archive/."""
    outcome: dict  # {student: "new" | "replaced" | "unchanged"}
    rejected: list  # [Rejected]
    kept: dict  # {student: Found} of those collected
    times: object  # the Times beside the download, or None
    receipts: list  # Blackboard's receipts read
    entries: int  # entries of archive/ read (receipts aside)
    alone: list  # [Receipt] of those whose attempt has no file in the download


def _utc(text):
    """The aware datetime of a timestamp.txt's text ("2026-10-05 21:14:03.123456 UTC"; no
    zone: UTC); ValueError if it is not one."""
    when = datetime.datetime.fromisoformat(text.strip().removesuffix(" UTC"))
    return when.replace(tzinfo=when.tzinfo or datetime.timezone.utc)


def submitted_at(folder):
    """The submission time recorded in a collected submission's timestamp.txt (written by
    collect from the LMS's date, or by the exchange's collect from its files), or None."""
    path = Path(folder) / TIMESTAMP
    return submitted_at_of({TIMESTAMP: path.read_bytes()}) if path.is_file() else None


def submitted_at_of(files):
    """The submission time of a submission's files as read ({path: bytes}: files_of), or
    None; ValueError naming timestamp.txt if it holds no time."""
    if TIMESTAMP not in files:
        return None
    try:
        return _utc(files[TIMESTAMP].decode())
    except (UnicodeDecodeError, ValueError) as error:
        raise ValueError(f"its {TIMESTAMP} holds no time ({error})") from None


def places(plan):
    """The Places of an assignment (an Assignment of the Course): its notebooks and its
    exercise files."""
    return unpack.Places(frozenset(f"{stem}.ipynb" for stem in plan.notebooks),
                         frozenset(Path(rel).name for rel in plan.student_files))


def _time(name, student, times):
    """(when, where it came from) of an entry, from what the LMS wrote: its name, or the
    worksheet or export beside the download; (None, None) if nothing gives it."""
    if name.when is not None and name.key.startswith("group "):
        return name.when, f"{times.kind} {times.path.name}, a member's row"
    if name.when is not None:
        return name.when, f"{name.lms.capitalize()}'s name"
    if times is None:
        return None, None
    if times.kind == downloads.WORKSHEET:
        row = times.rows.get(name.key) if name.lms == "moodle" else None
    else:
        row = times.rows.get(student) or times.rows.get(name.key)
    if row is None or row[1] is None:
        return None, None
    return row[1], f"{times.kind} {times.path.name}"


def _unknown(entry):
    """Why a file that is no zip and whose name no LMS writes for a file is refused."""
    why = ("no format reads it: not a zip (a plain entry is <student id>[_<assignment>"
           "...].zip, or a folder), and not a file's name as an LMS writes it (Canvas's "
           "<lastfirst>_<user id>_<attachment id>_<name>, Moodle's <Full Name>_<n>_"
           "assignsubmission_file_<name>, Blackboard's <Assignment>_<username>_attempt_"
           "<time>_<name>, Brightspace's <n>-<n> - <Name> - <date> - <name>)")
    if entry.startswith(("anon_", "LATE_anon_")):
        why += "; Canvas's anonymous grading names no student (anon_<id>): download " \
               "the submissions with the students' names shown"
    return why


def _piece(entry, assignment, settings, rows, times, where, titles=None):
    """The Pieces of an entry of archive/, one per student it is (a group's entry: each
    member's, _members), or a Rejected (where: the assignment's Places; titles: the
    Blackboard titles its names allow, tools.lms.downloads.titles)."""
    folder = entry.is_dir() and not entry.is_symlink()
    readings = downloads.names(entry.name, folder, settings.lms_timezone, settings.lms_formats,
                         patterns=settings.lms_patterns, titles=titles)
    zipped = folder or entry.name.lower().endswith(".zip") or entry.is_symlink()
    if not zipped and not any(n.rest for n in readings):
        return Rejected(entry.name, _unknown(entry.name))
    who = _members(readings, assignment, rows, times) \
        if assignment in settings.group_assignments else \
        roster.student_of(readings, assignment, rows, times)
    if isinstance(who, str):
        return Rejected(entry.name, who)
    students, name = ([who[0]], who[1]) if isinstance(who[0], str) else who
    if name.problem:
        return Rejected(entry.name, name.problem)
    at = None
    if not zipped:
        if name.rest is None:  # (another reading of the name had a file's name: not this one)
            return Rejected(entry.name, _unknown(entry.name))
        at, why = unpack.place(name.rest, where, canvas=name.lms == "canvas")
        if why:
            return Rejected(entry.name, why)
    size = 0 if folder else entry.lstat().st_size
    return [Piece(entry.name, entry, s, name, at, size) for s in students]


GROUPS = ("a group assignment (c.Grading.group_assignments) is collected for every member "
          "of the group its entry names, and the roster lists none: give it a group column "
          "(each student's group, as the LMS names it: docs/instructors.md, step 3)")


def _members(readings, assignment, rows, times):
    """([student id, ...], the Name read) of a group assignment's entry: the members of the
    roster's group it names (Moodle writes the group's name and id for a team's
    submission: the Name's key becomes "group <id>", never a participant's number), or of
    the group of the student it names (Canvas names one member); or why it is refused."""
    teams = roster.groups(rows)
    if not teams:
        return GROUPS
    for name in readings:
        group = roster.group_named(rows, name.name) if name.lms == "moodle" and name.name \
            else None
        if group:
            return teams[group], replace(name, key=f"group {name.key}",
                                         when=_member_time(teams[group], rows, times))
    who = roster.student_of(readings, assignment, rows, times)
    if isinstance(who, str):
        return who
    student, name = who
    group = roster.group_of(rows, student)
    return (teams[group] if group else [student]), name


def _member_time(members, rows, times):
    """The time Moodle's worksheet gives a team's submission (each member's row, found as
    collect finds any worksheet row's student: roster.rows_of, holds it), or None."""
    if times is None or times.kind != downloads.WORKSHEET:
        return None
    found = [when for full, when, email in times.rows.values() if when is not None and
             {r["student_id"] for r in roster.rows_of(rows, full, email)} & set(members)]
    return max(found, key=downloads.utc) if found else None


def _refuse(entries, reason):
    """[Rejected] of entries, each for reason."""
    return [Rejected(e, reason) for e in sorted(entries)]


def _order(piece):
    """How the pieces of an upload are ordered: by Canvas's attachment id, then name."""
    return piece.name.order if piece.name.order is not None else -1, piece.entry


def _read(pieces, student, where, bounds):
    """({place: [(piece, bytes)]} of an upload's pieces, [Rejected] of those refused), or
    (None, [Rejected] of all) where the upload is over the bounds."""
    names = ", ".join(p.entry for p in pieces)
    if len(pieces) > bounds.kept or sum(p.size for p in pieces) > bounds.entry_bytes:
        return None, _refuse([p.entry for p in pieces], (
            f"{len(pieces)} entries of one upload of {student} ({names[:200]}): more than "
            f"{bounds.kept} files or {bounds.entry_bytes >> 20} MiB in all"))
    by_place, refused, total = {}, [], 0
    for piece in pieces:
        files = unpack.loose(piece.path, bounds) if piece.place else \
            unpack.files(piece.path, bounds, where)
        if isinstance(files, str):
            refused.append(Rejected(piece.entry, files))
            continue
        files = {piece.place: files} if piece.place else files
        total += sum(map(len, files.values()))
        if total > bounds.entry_bytes:
            return None, _refuse([p.entry for p in pieces], (
                f"the files of one upload of {student} ({names[:200]}) are more than "
                f"{bounds.entry_bytes >> 20} MiB in all"))
        for at, data in files.items():
            by_place.setdefault(at, []).append((piece, data))
    return by_place, refused


def _submission(pieces, student, times, where, bounds=BOUNDS):
    """(the Found of one upload's pieces, or None, [Rejected]): their files, each place
    given once, or by the latest of Canvas's attachments (docs/instructors.md, step 3)."""
    pieces = sorted(pieces, key=_order)
    by_place, refused = _read(pieces, student, where, bounds)
    if by_place is None or not by_place:
        return None, refused
    files, superseded, winners = {}, {}, {}
    read = {p.entry for options in by_place.values() for p, _ in options}
    for at, options in sorted(by_place.items()):
        if len(options) > 1 and any(p.name.order is None for p, _ in options):
            return None, refused + _refuse(read, (
                f"{at} is given by {len(options)} entries of {student} "
                f"({', '.join(p.entry for p, _ in options)}), and nothing the LMS wrote "
                "says which is the later: the upload is refused"))
        files[at], winners[at] = options[-1][1], options[-1][0]
        if len(options) > 1:
            superseded[at] = {"by": options[-1][0].entry,
                              "entries": sorted(p.entry for p, _ in options[:-1])}
    if len(files) > bounds.kept:
        return None, refused + _refuse(read, f"more than {bounds.kept} notebooks and "
                                             f"normlib/ files in one upload of {student}")
    used = {p.entry for p in winners.values()}
    for piece in pieces:
        lost = sorted(at for at, s in superseded.items() if piece.entry in s["entries"])
        if piece.entry not in used and lost:
            refused.append(Rejected(piece.entry, f"an earlier upload of {student} (Canvas's "
                                    f"attachment {piece.name.order}): " + "; ".join(
                f"{at} is attachment {winners[at].name.order}'s ({winners[at].entry})"
                for at in lost)))
    last = max((p for p in pieces if p.entry in used), key=_order)
    when, source = _time(last.name, student, times)
    extension = times.extensions.get(last.name.key) if times and last.name.lms == "moodle" \
        else None
    return Found(last.entry, tuple(sorted(used)), student, last.name, when, source, files,
                 superseded, extension), refused


def _newest(student, found):
    """(the Found of a student's uploads to keep, or None, [Rejected]): the one the LMS
    dates last; none if nothing the LMS wrote tells them apart, or if the LMS says they
    are two people (two participant numbers, user ids or Brightspace ids of one name: a
    display name never makes two people one, issue 58)."""
    if len(found) == 1:
        return found[0], []
    names = ", ".join(e for f in found for e in f.entries)
    people = {(f.name.lms, f.name.key) for f in found if f.name.lms in PEOPLE}
    if len(people) > 1:
        return None, _refuse([e for f in found for e in f.entries], (
            f"{len(found)} entries named {student} ({names}) are {len(people)} people to the "
            "LMS (its numbers differ): all refused (a roster tells them apart)"))
    twice = [f for f in found if downloads.ambiguous(f.when)]
    if len(twice) > 1:  # (which of the repeated hour's two occurrences each is: unknown)
        return None, _refuse([e for f in found for e in f.entries], (
            f"{len(found)} uploads of {student} ({names}), {len(twice)} of them in the hour "
            "when summer time ends, which happens twice and which the LMS wrote without its "
            "zone: their order cannot be told (refused, never guessed)"))
    if all(f.when is not None for f in found):
        found = sorted(found, key=lambda f: downloads.utc(f.when))
        last = found[-1]
        if downloads.utc(last.when) != downloads.utc(found[-2].when):
            return last, [r for f in found[:-1] for r in _refuse(f.entries, (
                f"an older submission of {student} ({f.when:%Y-%m-%d %H:%M} by the "
                f"{f.source}): {last.entry} ({last.when:%Y-%m-%d %H:%M}) replaces it"))]
    return None, _refuse([e for f in found for e in f.entries], (
        f"{len(found)} entries of {student} ({names}), and no date from the LMS tells which "
        "is the later: all refused (keep the one to grade in archive/, then collect again)"))


def _other(provenance, newest):
    """[Rejected] of newest's entries where the submission collected before for its
    student (provenance: collected.json's, or None) is another person's to the LMS (another
    participant number, user id or Brightspace id): a display name never replaces another
    student's submission; else None."""
    if provenance is None or newest.name.lms not in PEOPLE or provenance.get("lms") != \
            newest.name.lms or provenance.get("key") == newest.name.key:
        return None
    return _refuse(newest.entries, (
        f"the submission of {newest.student} collected before is {newest.name.lms} id "
        f"{provenance.get('key')}'s, this entry is id {newest.name.key}'s: two people to the LMS "
        "of one name, refused (a roster tells them apart)"))


def _collisions(pieces, root, assignment, rows=None):
    """[Rejected] of the entries whose student ids differ only in case, Unicode
    normalization or look-alike characters (tools.course.confusables.key: UTS #39's
    skeletons) from another's of this collect, or from a student of the class collected
    before (submitted/<student>/, any assignment). Ids that differ in look-alike characters
    alone and that the roster (rows) lists both are two students: the roster tells them
    apart (`user1`, `userl`)."""
    listed = {r["student_id"] for r in rows or ()}
    by_key = {}
    for p in pieces:
        by_key.setdefault(confusables.key(p.student), set()).add(p.student)
    for folder in Path(root).glob("submitted/*/"):
        if confusables.key(folder.name) in by_key:
            by_key[confusables.key(folder.name)].add(folder.name)
    clashing = {k: ids for k, ids in by_key.items() if len(ids) > 1 and not (
        ids <= listed and len({fold(i) for i in ids}) == len(ids))}
    others = {p.student: ", ".join(sorted(clashing[confusables.key(p.student)] - {p.student}))
              for p in pieces if confusables.key(p.student) in clashing}
    return [Rejected(p.entry, f"its student id {p.student!r} differs from {others[p.student]}"
                              " only in case, Unicode normalization or look-alike characters "
                              "(Unicode's confusable skeletons, UTS #39): refused (if they "
                              "are two students, list both ids in the roster, "
                              "c.Grading.roster)")
            for p in pieces if p.student in others]


def _wanted(files, when):
    """The files of a submission's folder: its files, and timestamp.txt if its time is
    known."""
    if when is None:
        return dict(files)
    return {**files, TIMESTAMP: when.astimezone(datetime.timezone.utc).strftime(
        "%Y-%m-%d %H:%M:%S.%f UTC").encode()}


def _keep(folder, newest):
    """(what collecting newest into folder is: "new", "replaced" or "unchanged"; the Found
    whose provenance collected.json takes, or None: the earlier one's stays), or [Rejected]:
    never an upload the LMS dates earlier than the one collected, nor an undated one over
    a dated one."""
    before = submitted_at(folder) if folder.is_dir() else None
    if before is not None and newest.when is not None and before > newest.when:
        return _refuse(newest.entries, f"older than the submission of {newest.student} "
                                       f"collected ({before:%Y-%m-%d %H:%M} UTC)")
    if before is not None and newest.when is None:
        held = files_of(folder)
        held.pop(TIMESTAMP)
        if held == newest.files:  # (its time, and what collect read of it, kept)
            return "unchanged", None
        return _refuse(newest.entries, f"the submission of {newest.student} collected has "
                                       f"the LMS's time ({before:%Y-%m-%d %H:%M} UTC) and this "
                                       "entry none: which is the later? (add the LMS's times "
                                       "beside archive/)")
    if not folder.is_dir():
        return "new", newest
    return ("unchanged" if files_of(folder) == _wanted(newest.files, newest.when)
            else "replaced"), newest


def collect_archive(root, assignment, where, settings, rows=None, dry_run=False):
    """Collect downloaded/<assignment>/archive/ (docs/instructors.md, step 3) into where (its
    Places); dry_run: decide all of it, and write, move and create nothing. Returns
    Collected."""
    download = Path(root) / "downloaded" / assignment
    archive = download / "archive"
    try:
        times = downloads.read_times(download, settings.lms_timezone, settings.lms_formats)
    except downloads.TimeError as error:
        raise SystemExit(f"collect {assignment}: {error}") from None
    listed = sorted(archive.iterdir())
    titles = downloads.titles([e.name for e in listed], settings.lms_patterns)
    pieces, rejected, receipts = [], [], []
    for entry in listed:
        if downloads.is_receipt(entry.name, settings.lms_patterns) and entry.is_file() and \
                not entry.is_symlink():
            receipts.append(entry.name)
            continue
        item = _piece(entry, assignment, settings, rows, times, where, titles)
        if isinstance(item, Rejected):
            rejected.append(item)
        else:
            pieces += item
    pieces = _zoned_by_receipts(pieces, archive, receipts, settings.lms_patterns)
    entries = len({p.entry for p in pieces}) + len(rejected)
    clashes = _collisions(pieces, root, assignment, rows)
    rejected += clashes
    pieces = [p for p in pieces if p.entry not in {c.entry for c in clashes}]
    before, by_student = read_collected(root, assignment), {}
    for p in pieces:
        by_student.setdefault(p.student, {}).setdefault(p.upload(), []).append(p)
    outcome, kept, fresh = {}, {}, {}
    for student, uploads in sorted(by_student.items()):
        found = []
        for group in uploads.values():
            item, refused = _submission(group, student, times, where)
            rejected += refused
            found += [item] if item else []
        newest, older = _newest(student, found) if found else (None, [])
        rejected += older
        if newest is None:
            continue
        folder = submission_folder(root, student, assignment)
        state = _other(before.get(student), newest) or _keep(folder, newest)
        if isinstance(state, list):
            rejected += state
            continue
        state, taken = state
        if not dry_run and state != "unchanged":
            try:
                _place(folder, _wanted(newest.files, newest.when))
            except OSError as error:  # (a name the file system refuses: nothing half-written)
                rejected += _refuse(newest.entries, f"its files cannot be written here "
                                                    f"({type(error).__name__}: {error.strerror})")
                continue
        outcome[student] = state
        kept[student] = newest if taken else replace(
            newest, when=submitted_at(folder), source="submission collected before")
        if taken:
            fresh[student] = newest
    if not dry_run:  # (the provenances first: what was placed keeps its own, come what may)
        _write_collected(download, assignment, fresh)
        for entry, why in _move(archive, download / "rejected", rejected).items():
            print(f"  NOT MOVED {entry}: it stays in archive/ ({why}); move it to rejected/ "
                  "by hand")
    alone = _alone(receipts, [e.name for e in listed], assignment, settings, rows, titles)
    return Collected(outcome, rejected, kept, times, receipts, entries, alone)


def _zoned_by_receipts(pieces, archive, receipts, patterns):
    """pieces, each Blackboard attempt's time that happens twice (the hour when summer time
    ends) resolved by the zone its receipt names after its time ("... 1:30:00 AM EDT"), where
    it has one (downloads.resolved)."""
    zones = {}
    for entry in receipts:
        with contextlib.suppress(OSError, ValueError):
            text = unpack.read_regular(archive, entry, RECEIPT_BYTES).decode(errors="replace")
            zones[downloads.attempt(entry, patterns)] = downloads.receipt_zone(text)
    out = []
    for p in pieces:
        zone = zones.get(downloads.attempt(p.entry, patterns)) if p.name.lms == "blackboard" \
            else None
        if zone and downloads.ambiguous(p.name.when):
            p = replace(p, name=replace(p.name, when=downloads.resolved(p.name.when, zone)))
        out.append(p)
    return out


def _alone(receipts, listed, assignment, settings, rows, titles):
    """[Receipt] of the Blackboard receipts (names) of an attempt that no other entry of
    the download (listed: their names) is a file of."""
    attempts = {downloads.attempt(e, settings.lms_patterns) for e in set(listed) - set(receipts)}
    found = []
    for entry in receipts:
        if downloads.attempt(entry, settings.lms_patterns) in attempts:
            continue
        readings = [n for n in downloads.names(entry, False, settings.lms_timezone,
                                         settings.lms_formats, patterns=settings.lms_patterns,
                                         titles=titles) if n.lms == "blackboard"]
        who = roster.student_of(readings, assignment, rows)
        found.append(Receipt(entry, tuple(n.key for n in readings), None, who, readings[0].when)
                     if isinstance(who, str) else Receipt(entry, (who[1].key,), who[0], None,
                                                          who[1].when))
    return found


def _move(archive, rejected_folder, rejected):
    """Move each rejected entry out of archive/ into rejected_folder, once. Where the same
    entry is there already (the download extracted again), archive/'s copy is removed;
    where another of its name is, it goes beside it as <entry>.2 (.3, ...). Returns {entry:
    why it stays in archive/} of each that could not be moved."""
    stuck = {}
    for entry in dict.fromkeys(r.entry for r in rejected):
        source, target, n = archive / entry, rejected_folder / entry, 1
        try:
            rejected_folder.mkdir(exist_ok=True)
            while os.path.lexists(target) and not _same(source, target):
                n += 1
                target = rejected_folder / f"{entry}.{n}"
            if not os.path.lexists(target):
                shutil.move(source, target)
            elif source.is_dir() and not source.is_symlink():
                shutil.rmtree(source)
            else:
                source.unlink()
        except OSError as error:
            stuck[entry] = f"{type(error).__name__}: {error.strerror or error}"
    return stuck


def _same(a, b):
    """Whether a and b are the same entry: a file of the same bytes, a link to the same
    place, or a folder of the same names, each the same (no link followed)."""
    if a.is_symlink() or b.is_symlink():
        return a.is_symlink() and b.is_symlink() and os.readlink(a) == os.readlink(b)
    if a.is_file() and b.is_file():
        return filecmp.cmp(a, b, shallow=False)
    if not (a.is_dir() and b.is_dir()):
        return False
    names = sorted(p.name for p in a.iterdir())
    return names == sorted(p.name for p in b.iterdir()) and \
        all(_same(a / name, b / name) for name in names)


def _write_collected(download, assignment, kept):
    """downloaded/<assignment>/collected.json: what collect read of each collected
    submission (Found.collected), those of earlier collects kept."""
    path = download / COLLECTED
    provenance = json.loads(path.read_text()) if path.is_file() else {}
    provenance.update({student: f.collected(assignment) for student, f in kept.items()})
    path.write_text(json.dumps(provenance, indent=1, sort_keys=True))


def read_collected(root, assignment):
    """{student: what collect read of their submission} (downloaded/<assignment>/
    collected.json; {} if none)."""
    path = Path(root) / "downloaded" / assignment / COLLECTED
    return json.loads(path.read_text()) if path.is_file() else {}


def _place(folder, files):
    """Write a submission's files into folder, in place of what was there (written beside
    it first, then renamed: nothing half-written)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    new = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".collecting-"))
    try:
        for rel, data in files.items():
            (new / rel).parent.mkdir(parents=True, exist_ok=True)
            (new / rel).write_bytes(data)
    except OSError:
        shutil.rmtree(new)
        raise
    if folder.is_dir():
        shutil.rmtree(folder)
    os.rename(new, folder)


def late_by(when, late_marker, due):
    """How late a submission is, in words ('' if it is not, or nothing says so), from its
    time (aware, or None), Canvas's late marker and its due date (aware, or None)."""
    if when is None:
        return "late by Canvas's _LATE marker; no time" if late_marker else ""
    return late_words((downloads.utc(when) - downloads.utc(due)).total_seconds()) \
        if due is not None else ""


def report(name, collected, due, dry_run=False):
    """Print what became of each entry of an assignment's archive/ (dry_run: what would,
    student by student)."""
    outcome, rejected, kept, times, receipts, entries, alone = collected
    would = "would be " if dry_run else ""
    count = {state: sorted(s for s, v in outcome.items() if v == state)
             for state in ("new", "replaced", "unchanged")}
    print(f"{'DRY RUN (nothing written or moved): ' if dry_run else ''}collected {name}: "
          f"{entries} entr{'y' if entries == 1 else 'ies'} in archive/, {len(outcome)} "
          f"{would}collected ({len(count['new'])} new, {len(count['replaced'])} "
          f"replacing an older submission, {len(count['unchanged'])} unchanged), "
          f"{len(rejected)} {would}rejected")
    for state, students in count.items():
        if students and state != "unchanged" and not dry_run:
            print(f"  {state}: {', '.join(students)}")
    if dry_run:
        for student, state in sorted(outcome.items()):
            print(f"  would collect {student} ({state}) from "
                  f"{', '.join(map(inbound.shown, kept[student].entries))}"
                  f"; {_when(kept[student])}")
    if times is not None:
        print(f"  times: {times.kind} {times.path.name}")
    twice = sorted(s for s, f in kept.items() if downloads.ambiguous(f.when))
    if twice:
        print("  times in the hour when summer time ends, which happens twice, read as its "
              "later occurrence (never less late): " + ", ".join(
                  f"{s} ({kept[s].when:%Y-%m-%d %H:%M %Z})" for s in twice))
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
    for student, found in sorted(kept.items()):
        for at, lost in sorted(found.superseded.items()):
            print(f"  {student}'s {at} is {lost['by']}'s (the later Canvas attachment), not "
                  f"{', '.join(map(inbound.shown, lost['entries']))}'s")
    if receipts:
        print(f"  {len(receipts)} Blackboard receipt{'s' * (len(receipts) != 1)} read "
              "(the times are their names')")
    for receipt in alone:
        print(f"  RECEIPT WITHOUT FILES {inbound.shown(receipt.entry)}: no file of this "
              "attempt is in the download (a text-only attempt, or one whose files were left "
              f"out of the download); {_receipt_words(receipt, kept)}")
    for item in rejected:
        print(f"  REJECTED {inbound.shown(item.entry)}: {inbound.shown(item.reason)}; "
              f"{'would move' if dry_run else 'moved'} "
              f"to downloaded/{name}/rejected/")


def _receipt_words(receipt, kept):
    """Whose a Receipt is, and what was collected of its student (see report)."""
    users = " or ".join(receipt.usernames)
    if receipt.student is None:
        return f"Blackboard username {users}, no student: {receipt.why}"
    who, found = f"Blackboard username {users}, student {receipt.student}", \
        kept.get(receipt.student)
    if found is None:
        return f"{who}: nothing collected for {receipt.student} (grade the attempt in " \
               "Blackboard, or download its files and collect again)"
    dated = found.when is not None and receipt.when is not None
    if dated and downloads.utc(receipt.when) > downloads.utc(found.when):
        return f"{who}: collected from an earlier attempt ({found.entry}), and this one is " \
               "later: check it in Blackboard"
    return f"{who}: collected from {'a later' if dated else 'another'} attempt ({found.entry})"


def _when(found):
    """'2026-10-05 21:14 UTC by <source>' of a Found's time, or 'time unknown'."""
    if found.when is None:
        return "time unknown" + (" (Canvas's _LATE marker: late)" if found.name.late else "")
    return f"{found.when.astimezone(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC by the " \
           f"{found.source}"


def collect(root, names=(), exchange=False, dry_run=False, bounds=BOUNDS):
    """Collect every assignment named (all if none), printing what became of each entry
    (dry_run: what would, touching nothing); exchange: from nbgrader's exchange
    (tools/instructor/inbound.py), within bounds."""
    settings = read(root)
    rows = roster.read_roster(settings.roster, settings.roster_encoding) if settings.roster \
        else None
    course = Course.load(root)
    unknown = sorted(set(settings.group_assignments) - set(course.assignments))
    if unknown:
        raise SystemExit(f"c.Grading.group_assignments: no assignment {', '.join(unknown)} in "
                         f"the course (it has {', '.join(course.assignments)})")
    for name in assignment_names(root, course, names):
        archive = Path(root) / "downloaded" / name / "archive"
        where = places(course.assignments[name])
        if exchange:
            done = collect_exchange(root, name, where, rows, bounds, dry_run)
            report_exchange(name, done, settings.due.get(name), dry_run)
            if not dry_run:
                _name(root, rows, done.outcome)
            continue
        if not archive.is_dir():
            print(f"{name}: nothing to collect (no downloaded/{name}/archive/)")
            continue
        collected = collect_archive(root, name, where, settings, rows, dry_run)
        report(name, collected, settings.due.get(name), dry_run)
        if not dry_run:
            _name(root, rows, collected.outcome)


def _name(root, rows, students):
    """With a roster, the students' names and emails into nbgrader's student table."""
    if rows is None or not students:
        return
    gradebook.name_students(root, rows, students)
    listed = sorted(set(students) & {r["student_id"] for r in rows})
    print(f"  names of {len(listed)} student{'s' * (len(listed) != 1)} from the roster in the "
          "gradebook (formgrader shows them)")


class Exchanged(NamedTuple):
    """What collect_exchange did (or, dry, would do)."""
    outcome: dict  # {student: "new" | "replaced" | "unchanged"}
    rejected: list  # [Rejected]
    kept: dict  # {student: inbound.Folder}


def collect_exchange(root, assignment, where, rows=None, bounds=BOUNDS, dry_run=False):
    """Collect the exchange's inbound folders of an assignment that pass its border
    (tools/instructor/inbound.py) into submitted/ (where: its Places), as an LMS's download
    (dry_run: decide, and write nothing). Returns Exchanged."""
    found, refused = inbound.read(inbound.inbound_folder(root), assignment, rows,
                                  where, bounds, inbound.check_owner(root),
                                  inbound.timestamp_format(root))
    rejected = [Rejected(entry, why) for entry, why in refused]
    clashes = _collisions(found.values(), root, assignment, rows)
    rejected += clashes
    outcome, kept = {}, {}
    for student, folder in sorted(found.items()):
        if folder.entry in {c.entry for c in clashes}:
            continue
        target = submission_folder(root, student, assignment)
        state = _keep(target, Found(folder.entry, (folder.entry,), student,
                                    downloads.Name("exchange", student), folder.when,
                                    inbound.SOURCE, folder.files, {}))
        if isinstance(state, list):
            rejected += state
            continue
        if not dry_run and state[0] != "unchanged":
            try:
                _place(target, _wanted(folder.files, folder.when))
            except OSError as error:
                rejected.append(Rejected(folder.entry, "its files cannot be written here "
                                         f"({type(error).__name__}: {error.strerror})"))
                continue
        outcome[student], kept[student] = state[0], folder
    return Exchanged(outcome, rejected, kept)


def report_exchange(name, done, due, dry_run=False):
    """Print what became of an assignment's inbound folders (dry_run: what would)."""
    outcome, rejected, kept = done
    would, left = "would be " if dry_run else "", sum(f.left for f in kept.values())
    print(f"{'DRY RUN (nothing written): ' if dry_run else ''}collected {name} from the "
          f"exchange: {len(kept)} submission{'s' * (len(kept) != 1)}" + (
              f" ({left} file{'s' * (left != 1)} left out: only notebooks and the "
              "assignment's exercise files are collected, grading takes the rest from the "
              "course)" if left else ""))
    for state in ("new", "replaced", "unchanged"):
        students = sorted(s for s, v in outcome.items() if v == state)
        if students:
            print(f"  {would}{state}: {', '.join(students)}")
    late = {s: late_by(f.when, False, due) for s, f in kept.items()}
    late = {s: words for s, words in late.items() if words}
    if late:
        print(f"  late: {', '.join(f'{s} ({v})' for s, v in sorted(late.items()))}")
    for item in rejected:
        print(f"  REJECTED {inbound.shown(item.entry)}: {inbound.shown(item.reason)}; left in "
              "the exchange's inbound folder")
