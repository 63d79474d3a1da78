"""Collect: the LMS's download in downloaded/<assignment>/archive/ into
submitted/<student>/<assignment>/ (or, with --exchange, nbgrader's exchange).

    python -m tools.instructor collect ROOT [ASSIGNMENT ...] [--exchange]

archive/ holds one entry per submission: a zip, or a folder holding one zip or the files
(Moodle's download, unzipped once). Every entry ends in exactly one of two places:

- collected: its notebooks and normlib/ files in submitted/<student>/<assignment>/, with
  its submission time in timestamp.txt (nbgrader's; autograde puts it in the gradebook):
  the time of a timestamp.txt in the zip, else the zip file's own date (an LMS's download
  dates each file with its submission). A newer entry replaces an older submission of
  the same student; an unchanged one is left as it is;
- rejected: moved to downloaded/<assignment>/rejected/, its reason printed: unreadable or
  unsafe, too large, nothing to grade in it, no student for its name, or older than the
  student's submission collected.

The student id of a name ("...zip"; a folder's name, likewise):
- with a roster (c.Grading.roster: a CSV with columns lms_id, student_id, name): the row
  whose LMS id, name or student id the name gives; a name that matches no row is rejected,
  never guessed;
- without one: Moodle's "Full Name_1234567_assignsubmission_file_" and Canvas's
  "lastfirst[_LATE]_12345_67890_anything" give the name as the LMS writes it ("full-name",
  "lastfirst": Moodle's number is per assignment); any other name is
  "<student_id>[_<assignment>anything]" ("van_der_berg_unit1.zip" is van_der_berg).

The files of a submission are found however deep the zip holds them: in the shallowest
folder that holds a notebook or normlib/.
"""

import csv
import datetime
import os
import re
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from tools.course import assignment_names, run, submissions
from tools.gradebook import digest
from tools.sandbox import DISK_MB
from tools.settings import read

MOODLE = re.compile(r"(?P<name>.+?)_(?P<lms>\d+)_assignsubmission_[a-z]*_?.*")
CANVAS = re.compile(r"(?P<name>[a-z0-9-]+?)(?P<late>_LATE)?_(?P<lms>\d+)_\d+(?:_.*)?")
JUNK = {"__MACOSX", ".ipynb_checkpoints", "__pycache__", ".DS_Store"}
TIMESTAMP = "timestamp.txt"  # nbgrader's: "2026-10-05 21:14:03.123456 UTC"


@dataclass(frozen=True)
class Rejected:
    entry: str
    reason: str


def slug(name):
    """A name as a student id: "John Smith" -> "john-smith"."""
    return re.sub(r"[^\w.-]+", "-", name.strip().lower()).strip("-")


def letters(name):
    return re.sub(r"[^a-z0-9]", "", name.lower())


def read_roster(path):
    """The roster's rows: [{"lms_id", "student_id", "name"}]."""
    with open(path, newline="", encoding="utf-8-sig") as f:
        rows = list(csv.DictReader(f))
    need = {"lms_id", "student_id", "name"}
    if rows and not need <= set(rows[0]):
        raise SystemExit(f"{path}: the roster's columns must be {', '.join(sorted(need))} "
                         f"(it has {', '.join(rows[0])})")
    return rows


def student_of(name, assignment, roster=None):
    """The student id of an archive entry's name (see the module's docstring), or None if
    a roster is given and no row matches."""
    stem = name[:-4] if name.lower().endswith(".zip") else name
    lms = MOODLE.fullmatch(stem) or CANVAS.fullmatch(stem)
    plain = re.split(rf"_{re.escape(assignment)}", stem, maxsplit=1)[0]
    if roster is None:
        return slug(lms.group("name")) if lms else plain
    for row in roster:
        if lms and row["lms_id"].strip() == lms.group("lms"):
            return row["student_id"].strip()
    for row in roster:
        whole, parts = letters(row["name"]), row["name"].split()
        either = {whole, letters("".join(parts[-1:] + parts[:-1]))}
        if lms and (letters(lms.group("name")) in either):
            return row["student_id"].strip()
        if not lms and plain.strip() in (row["student_id"].strip(), row["lms_id"].strip()):
            return row["student_id"].strip()
    return None


def _members(entry):
    """{path in the entry: bytes reader} of an archive entry (a zip, a folder holding one
    zip, or a folder of files), or a reason it cannot be read."""
    if entry.is_dir():
        zips = [p for p in entry.iterdir() if p.suffix.lower() == ".zip"]
        files = [p for p in entry.rglob("*") if p.is_file()]
        if len(zips) == 1 and len(files) == 1:
            entry = zips[0]
        else:
            return {p.relative_to(entry).as_posix(): p.read_bytes for p in files}
    try:
        z = zipfile.ZipFile(entry)
        names = z.namelist()
        bad = z.testzip()
    except (zipfile.BadZipFile, OSError, UnicodeDecodeError, ValueError) as error:
        return f"not a readable zip ({type(error).__name__}: {error})"
    if bad is not None:
        return f"a corrupt entry ({bad})"
    if sum(i.file_size for i in z.infolist()) > DISK_MB << 20:
        return f"more than {DISK_MB} MiB unzipped (a grading folder holds {DISK_MB} MiB)"
    for name in names:
        parts = PurePosixPath(name.replace("\\", "/")).parts
        if name.startswith(("/", "\\")) or ".." in parts or (parts and ":" in parts[0]):
            return f"an entry outside its folder ({name!r})"
    return {n: (lambda n=n: z.read(n)) for n in names if not n.endswith("/")}


def submission_files(members):
    """{path in the submission: reader} of the files that are graded or recorded (its
    notebooks, normlib/'s .py files, timestamp.txt), from the shallowest folder of the
    entry that holds a notebook or normlib/."""
    kept = {n: r for n, r in members.items() if not JUNK & set(PurePosixPath(n).parts)}
    roots = set()
    for name in kept:
        parts = PurePosixPath(name).parts
        if name.endswith(".ipynb"):
            roots.add(parts[:-1])
        if "normlib" in parts:
            roots.add(parts[:parts.index("normlib")])
    if not roots:
        return {}
    top = min(roots, key=len)
    found = {}
    for name, reader in kept.items():
        parts = PurePosixPath(name).parts
        if parts[:len(top)] != top:
            continue
        rel = PurePosixPath(*parts[len(top):])
        if (len(rel.parts) == 1 and rel.suffix == ".ipynb") or rel.name == TIMESTAMP and \
                len(rel.parts) == 1 or (rel.parts[0] == "normlib" and rel.suffix == ".py"):
            found[rel.as_posix()] = reader
    return found


def _utc(text):
    """The aware datetime of a timestamp.txt's text ("2026-10-05 21:14:03.123456 UTC"; no
    zone: UTC); ValueError if it is not one."""
    when = datetime.datetime.fromisoformat(text.strip().removesuffix(" UTC"))
    return when.replace(tzinfo=when.tzinfo or datetime.timezone.utc)


def submitted_at(entry, files):
    """When an entry was submitted (aware, UTC): its timestamp.txt, else its file's date."""
    if TIMESTAMP in files:
        try:
            return _utc(files[TIMESTAMP]().decode(errors="replace"))
        except ValueError:
            pass
    return datetime.datetime.fromtimestamp(entry.stat().st_mtime, datetime.timezone.utc)


def recorded_at(folder):
    """The submission time recorded in a collected submission's timestamp.txt."""
    path = Path(folder) / TIMESTAMP
    return _utc(path.read_text()) if path.is_file() else None


def collect_archive(root, assignment, roster=None):
    """Collect downloaded/<assignment>/archive/ (see the module's docstring). Returns
    ({student: "new" | "replaced" | "unchanged"}, [Rejected])."""
    archive = Path(root) / "downloaded" / assignment / "archive"
    entries, rejected = {}, []
    for entry in sorted(archive.iterdir()):
        student = student_of(entry.name, assignment, roster)
        members = _members(entry)
        files = submission_files(members) if isinstance(members, dict) else {}
        reason = members if isinstance(members, str) else \
            "no student of the roster has this name (add a row for it)" if not student else \
            None if files else "no notebook and no normlib/ file in it"
        if reason:
            rejected.append(Rejected(entry.name, reason))
            continue
        when = submitted_at(entry, files)
        entries.setdefault(student, []).append((when, entry, files))
    outcome = {}
    for student, found in sorted(entries.items()):
        found.sort(key=lambda item: (item[0], item[1].name))
        when, entry, files = found[-1]
        for _, older, _ in found[:-1]:
            rejected.append(Rejected(older.name, f"an older submission of {student}: "
                                                 f"{entry.name} replaces it"))
        folder = Path(root) / "submitted" / student / assignment
        before = recorded_at(folder) if folder.is_dir() else None
        if before is not None and before > when:
            rejected.append(Rejected(entry.name, f"older than the submission of {student} "
                                                 f"collected ({before:%Y-%m-%d %H:%M} UTC)"))
            continue
        outcome[student] = _place(folder, files, when)
    for item in rejected:
        (archive.parent / "rejected").mkdir(exist_ok=True)
        shutil.move(archive / item.entry, archive.parent / "rejected" / item.entry)
    return outcome, rejected


def _place(folder, files, when):
    """Write a submission's files into folder (replacing what was there); "new",
    "replaced" or "unchanged"."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    new = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".collecting-"))
    for rel, reader in files.items():
        if rel != TIMESTAMP:
            (new / rel).parent.mkdir(parents=True, exist_ok=True)
            (new / rel).write_bytes(reader())
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


def collect(root, names=(), exchange=False):
    """Collect every assignment named (all if none), printing what became of each entry."""
    settings = read(root)
    roster = read_roster(settings.roster) if settings.roster else None
    for name in assignment_names(root, names):
        archive = Path(root) / "downloaded" / name / "archive"
        if exchange:
            run(root, "collect", name, "--update")
            students = submissions(root, [name])[name]
            print(f"collected {name} from the exchange: {len(students)} submission"
                  f"{'s' * (len(students) != 1)}")
            continue
        if not archive.is_dir():
            print(f"{name}: nothing to collect (no downloaded/{name}/archive/)")
            continue
        outcome, rejected = collect_archive(root, name, roster)
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
        for item in rejected:
            print(f"  REJECTED {item.entry}: {item.reason}; moved to downloaded/{name}/rejected/")
