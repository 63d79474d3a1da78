"""An entry of an LMS's download as the files of a submission, or the reason it is refused.

    files(entry, bounds, places) -> {path in the submission: bytes} or a reason (str)
    place(name, places, canvas) -> (a loose file's path in the submission, None) or (None, why)
    loose(path, bounds) -> a loose file's bytes, or a reason
    walk(folder, bounds, owner) -> Walked(files: {path: size}, changed: ctime) or a reason
    kept_files(folder, names, bounds, places) -> {path in the submission: bytes} or a reason
    read_regular(folder, name, limit) -> a file's bytes (OSError, ValueError)

Each bound of tools/course/bounds.py is checked before the work it bounds: a zip's listings
before anything is inflated; a folder is walked without following any link, to its bound.
Kept: the notebooks and the assignment's exercise files (Places) of the shallowest folder
holding a notebook or normlib/; never the course's own files, nor a timestamp.txt (the time
is the LMS's). Each refusal and its test: docs/security.md, section 2.
"""

import os
import pwd
import re
import stat
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import NamedTuple

from tools.course.bounds import BOUNDS

JUNK = {"__MACOSX", ".ipynb_checkpoints", "__pycache__", ".DS_Store"}
_HEADER = 30  # bytes of a zip's local file header before its name
NOTHING = "no notebook and no normlib/ file in it"
# Canvas's "-1" ... "-7", then "-<uuid>", before a re-uploaded file's extension
# (app/models/attachment.rb, make_unique_filename)
CANVAS_SUFFIX = re.compile(r"(?P<stem>.+)-(?:[1-9]\d*|[0-9a-f]{8}-(?:[0-9a-f]{4}-){3}[0-9a-f]{12})"
                           r"(?P<suffix>\.[A-Za-z0-9]+)")


@dataclass(frozen=True)
class Places:
    """The files an assignment is made of, where a loose file goes: its notebooks' names
    (at the top) and its exercise files' (in normlib/: the files the student writes)."""
    notebooks: frozenset = frozenset()
    modules: frozenset = frozenset()


def files(entry, bounds=BOUNDS, places=Places()):
    """{path in the submission: bytes} of an archive entry (a zip, a folder of files, or a
    folder holding the student's zip and maybe files beside it), or the reason it is
    refused."""
    entry = Path(entry)
    if entry.is_symlink():
        return f"a link ({entry.name} -> {os.readlink(entry)}): links are not followed"
    if entry.is_dir():
        walked = walk(entry, bounds)
        if isinstance(walked, str):
            return walked
        found = walked.files
        beside = readers(entry, found, bounds)
        zips = sorted(n for n in found if n.lower().endswith(".zip") and "/" not in n)
        if len(zips) > 1:
            return f"{len(zips)} zips in the folder ({', '.join(zips)}): which holds the " \
                   "submission? (unzip them into the folder, or keep one, then collect again)"
        if zips:  # Moodle's folder of the student's zip (and maybe files beside)
            return _with_zip(entry / zips[0], beside, bounds, places)
        return _kept(beside, bounds, places)
    if not entry.is_file():
        return "not a file or a folder"
    return _zip(entry, bounds, places)


def _with_zip(path, beside, bounds, places):
    """The files of a folder's one zip and the kept files beside it (either may have
    none), or why refused."""
    kept = kept_names(beside, places)
    if isinstance(kept, str):
        return kept
    if not kept:
        return _zip(path, bounds, places)
    inner = _zip(path, bounds, places)
    if inner == NOTHING:  # (a zip of data beside the notebook)
        return _kept(beside, bounds, places)
    if isinstance(inner, str):
        return f"{path.name}: {inner}"
    twice = sorted(set(kept) & set(inner))
    if twice:
        return f"{twice[0]} both in {path.name} and beside it: which is the submission's?"
    outer = _kept(beside, bounds, places)
    if isinstance(outer, str):
        return outer
    if len(inner) + len(outer) > bounds.kept:
        return f"more than {bounds.kept} notebooks and normlib/ files"
    return {**inner, **outer}


def place(name, places, canvas=False):
    """(where a loose file of this name goes in the submission, None), or (None, why it
    goes nowhere): a notebook at the top, an exercise file of the assignment in normlib/.
    canvas: Canvas's "-1" before the extension is dropped where that gives the name of one
    of the assignment's files."""
    if canvas and name not in places.notebooks | places.modules:
        plain = CANVAS_SUFFIX.fullmatch(name)
        if plain and plain["stem"] + plain["suffix"] in places.notebooks | places.modules:
            name = plain["stem"] + plain["suffix"]
    if "/" in name or "\\" in name or name.startswith("."):
        return None, f"not a file's name ({name!r})"
    if name.endswith(".ipynb"):
        return name, None
    if name in places.modules:
        return f"normlib/{name}", None
    return None, (f"{name!r} is neither a notebook nor one of the assignment's exercise files "
                  f"({', '.join(sorted(places.modules)) or 'none'})")


def loose(path, bounds=BOUNDS):
    """The bytes of a loose file of the download, or why it is refused (a link, not a
    file, more than bounds.file_bytes): its size is checked before it is read."""
    path = Path(path)
    if path.is_symlink():
        return f"a link ({path.name} -> {os.readlink(path)}): links are not followed"
    info = path.stat()
    if not stat.S_ISREG(info.st_mode):
        return "not a file or a folder"
    if info.st_size > bounds.file_bytes:
        return f"a file of more than {bounds.file_bytes >> 20} MiB"
    with open(path, "rb") as f:
        data = f.read(bounds.file_bytes + 1)
    return data if len(data) <= bounds.file_bytes else \
        f"a file of more than {bounds.file_bytes >> 20} MiB"


class Walked(NamedTuple):
    """What walk found in a folder: {path: apparent size} of its files, and the latest
    status change (ctime, which no user sets back) of the folder or anything in it."""
    files: dict
    changed: float


def walk(folder, bounds=BOUNDS, owner=None):
    """Walked of the files under folder, walked without following links; or why it is
    refused: a link, a special file (FIFO, device, socket), too many, too deep, a name too
    long, too large (a file or all of them, as their sizes say and on disk: st_blocks,
    which a preallocated file has beyond its size), or (owner: a uid) a file or folder
    that another user owns."""
    try:
        return _walk(folder, bounds, owner)
    except OSError as error:  # (a folder its owner made unreadable, one gone since)
        return f"a file or folder that cannot be read ({type(error).__name__}: " \
               f"{error.strerror})"


def _walk(folder, bounds, owner):
    """walk's (OSError where a folder cannot be listed)."""
    itself = os.lstat(folder)
    if owner is not None and itself.st_uid != owner:
        return f"the folder is owned by {_user(itself.st_uid)}"
    found, total, real, listed, stack = {}, 0, 0, 0, [(folder, ())]
    changed = itself.st_ctime
    while stack:
        top, parts = stack.pop()
        with os.scandir(top) as listing:
            for item in listing:
                rel = (*parts, item.name)
                name = "/".join(rel)
                if len(rel) > bounds.depth:
                    return f"deeper than {bounds.depth} folders ({name})"
                if item.is_symlink():
                    return f"a link ({name} -> {os.readlink(item.path)}): links are not followed"
                info = item.stat(follow_symlinks=False)
                listed += 1  # (folders too: a million empty ones cost a walk as long)
                if listed > bounds.listings:
                    return f"more than {bounds.listings} files and folders"
                if len(item.name.encode(errors="surrogateescape")) > bounds.name_bytes:
                    return f"a name longer than {bounds.name_bytes} bytes ({name[:60]!r}...)"
                if owner is not None and info.st_uid != owner:
                    return f"{name} is owned by {_user(info.st_uid)}"
                changed = max(changed, info.st_ctime)
                if stat.S_ISDIR(info.st_mode):
                    stack.append((item.path, rel))
                    continue
                if not stat.S_ISREG(info.st_mode):
                    return f"a special file ({name}: {_kind(info.st_mode)}), not a file or a folder"
                size, disk = info.st_size, info.st_blocks * 512
                if max(size, disk) > bounds.file_bytes:
                    return f"a file of more than {bounds.file_bytes >> 20} MiB " \
                           f"({name}{'' if size > bounds.file_bytes else ', on disk'})"
                total, real = total + size, real + disk
                if max(total, real) > bounds.entry_bytes:
                    return f"more than {bounds.entry_bytes >> 20} MiB in all" + \
                        ("" if total > bounds.entry_bytes else " on disk")
                found[name] = size
    return Walked(found, changed)


def _kind(mode):
    """What a special file is, in words."""
    return "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else \
        "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "of no known kind"


def _user(uid):
    """A uid's user name, or the uid."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def readers(folder, names, bounds=BOUNDS):
    """{name: a function that reads the file at name (a path in folder) within bounds}
    (read_regular)."""
    return {n: (lambda n=n: read_regular(folder, n, bounds.file_bytes)) for n in names}


def kept_files(folder, names, bounds=BOUNDS, places=Places()):
    """{path in the submission: bytes} of the files kept of a walked folder (names: its
    files, walk's), or why it is refused (none kept, too many, one changed since)."""
    return _kept(readers(folder, names, bounds), bounds, places)


def read_regular(folder, name, limit):
    """The bytes of the file at name (a path in folder, "/"-separated), opened without
    following a link at any step (O_NOFOLLOW, each folder from the one before), read only
    where the open file is a regular file of at most limit bytes (as its size says and on
    disk): what was walked may have changed since (a student can still write a folder of
    nbgrader's exchange). OSError or ValueError otherwise."""
    *folders, last = PurePosixPath(name).parts
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for part in folders:
            inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = inner
        file = os.open(last, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY,
                       dir_fd=fd)
    finally:
        os.close(fd)
    with os.fdopen(file, "rb") as f:
        info = os.fstat(f.fileno())
        disk = info.st_blocks * 512 - info.st_blksize  # (a small file takes a block)
        if not stat.S_ISREG(info.st_mode) or max(info.st_size, disk) > limit:
            raise ValueError(f"{name} changed since it was checked: no file of at most "
                             f"{limit} bytes")
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"{name} grew past {limit} bytes as it was read")
    return data


def _zip(path, bounds, places=Places()):
    """{path: bytes} of the kept files of a zip, or why it is refused (see the module's
    docstring): every listing checked before any is inflated."""
    try:
        if path.stat().st_size > bounds.entry_bytes:
            return f"a zip of more than {bounds.entry_bytes >> 20} MiB"
        with open(path, "rb") as f:  # the listing's count and size, before zipfile reads it
            end = zipfile._EndRecData(f)
        if end is None:
            return "not a readable zip (BadZipFile: no end of its listing)"
        if end[zipfile._ECD_ENTRIES_TOTAL] > bounds.listings:
            return f"more than {bounds.listings} listings in the zip"
        if end[zipfile._ECD_SIZE] > bounds.directory_bytes:  # (its count may lie)
            return f"a listing of more than {bounds.directory_bytes >> 10} KiB"
        z = zipfile.ZipFile(path)
        infos = z.infolist()
    except (zipfile.BadZipFile, OSError, UnicodeDecodeError, ValueError, EOFError) as error:
        return f"not a readable zip ({type(error).__name__}: {error})"
    if len(infos) > bounds.listings:
        return f"more than {bounds.listings} listings in the zip"
    reason = _listings(infos, bounds)
    if reason:
        return reason
    readers = {_normal(i.filename): (lambda i=i: z.read(i)) for i in infos if not i.is_dir()}
    return _kept(readers, bounds, places)


def _normal(name):
    """A zip listing's name as a path: "/" for "\\", no "." or empty parts ("a//./x" is
    "a/x")."""
    return PurePosixPath(name.replace("\\", "/")).as_posix()


def _listings(infos, bounds):
    """Why a zip's listings are refused (docs/security.md, section 2), or None."""
    total, seen = 0, set()
    for info in infos:
        name = info.filename
        if _normal(name) in seen:
            return f"a name listed twice ({name!r}): which is the submission's?"
        seen.add(_normal(name))
        parts = PurePosixPath(name.replace("\\", "/")).parts
        if name.startswith(("/", "\\")) or ".." in parts or (parts and ":" in parts[0]):
            return f"an entry outside its folder ({name!r})"
        if len(parts) > bounds.depth:
            return f"deeper than {bounds.depth} folders ({name!r})"
        if any(len(p.encode()) > bounds.name_bytes for p in parts):
            return f"a name longer than {bounds.name_bytes} bytes ({name[:60]!r}...)"
        if stat.S_ISLNK(info.external_attr >> 16):
            return f"a link ({name!r}): links are not followed"
        if info.flag_bits & 1:
            return f"an encrypted entry ({name!r})"
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            return f"an entry compressed another way than DEFLATE ({name!r})"
        if info.file_size > bounds.file_bytes:
            return f"a file of more than {bounds.file_bytes >> 20} MiB ({name!r})"
        if info.file_size > bounds.ratio * max(info.compress_size, 1):
            return f"a listing {info.file_size // max(info.compress_size, 1)} times its " \
                   f"compressed size ({name!r}; at most {bounds.ratio})"
        total += info.file_size
        if total > bounds.entry_bytes:
            return f"more than {bounds.entry_bytes >> 20} MiB unzipped"
    ordered = sorted(infos, key=lambda i: i.header_offset)
    for before, after in zip(ordered, ordered[1:]):
        if after.header_offset < before.header_offset + _HEADER + before.compress_size:
            return f"listings that share compressed data ({before.filename!r}, " \
                   f"{after.filename!r})"
    return None


def is_kept(rel, places):
    """Whether a file at rel (a PurePosixPath in the submission's folder) is one collect
    keeps: a notebook at the top, or one of the assignment's exercise files in normlib/."""
    return (len(rel.parts) == 1 and rel.suffix == ".ipynb") or (
        len(rel.parts) == 2 and rel.parts[0] == "normlib" and rel.name in places.modules)


def kept_names(names, places=Places()):
    """{path in the submission: path in the entry} of the files kept of an entry's file
    names (docs/security.md, section 2), or why the entry is refused: a module of the
    assignment's normlib/ at the top while the notebooks or normlib/ are in a folder (which
    is the submission's is not for collect to guess)."""
    names = [n for n in names if not JUNK & set(PurePosixPath(n).parts)]
    roots = set()
    for name in names:
        parts = PurePosixPath(name).parts
        if name.endswith(".ipynb"):
            roots.add(parts[:-1])
        if "normlib" in parts[:-1]:
            roots.add(parts[:parts.index("normlib")])
    stray = sorted(n for n in names if "/" not in n and n in places.modules)
    top = min(roots, key=len) if roots else ()
    if stray and top:
        where, them = "/".join(top), "them" if len(stray) > 1 else "it"
        return f"{', '.join(stray)} at the top, and the notebooks or normlib/ in {where}/: " \
               f"which is the submission's? (put {them} in {where}/normlib/, or leave " \
               f"{them} out)"
    if not roots and not stray:
        return {}
    found = {}
    for name in names:
        parts = PurePosixPath(name).parts
        if parts[:len(top)] != top:
            continue
        rel = PurePosixPath(*parts[len(top):])
        if is_kept(rel, places):
            found[rel.as_posix()] = name
        elif len(rel.parts) == 1 and rel.name in places.modules:  # beside the notebooks
            found.setdefault(f"normlib/{rel.name}", name)  # (unless normlib/ holds it)
    return found


def _kept(readers, bounds, places=Places()):
    """{path in the submission: bytes} of the kept files ({name: reader} of the entry's),
    or why the entry is refused."""
    kept = kept_names(readers, places)
    if isinstance(kept, str):
        return kept
    if not kept:
        return NOTHING
    if len(kept) > bounds.kept:
        return f"more than {bounds.kept} notebooks and normlib/ files"
    found = {}
    for rel, name in sorted(kept.items()):
        try:
            found[rel] = readers[name]()
        except (zipfile.BadZipFile, OSError, EOFError, ValueError) as error:
            return f"a corrupt entry ({name}: {type(error).__name__})"
    return found
