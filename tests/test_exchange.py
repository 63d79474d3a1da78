"""The nbgrader exchange route (instead of LMS zips): release to the exchange, a student
fetches and submits (with their normlib/ files), the instructor collects."""

import contextlib
import ctypes
import dataclasses
import datetime
import getpass
import io
import os
import resource
import shutil
import signal
import time

import pytest
from nbgrader.auth import Authenticator
from nbgrader.coursedir import CourseDirectory
from nbgrader.exchange import ExchangeFactory
from traitlets.config import Config

from tools.course.bounds import BOUNDS
from tools.instructor.autograde import autograde
from tools.instructor.build import build_course
from tools.instructor.collect import collect, submitted_at
from tools.instructor.feedback import feedback
from tools.instructor.release import release
from tools.instructor.unpack import read_regular


def as_student(home, exchange, step):
    """nbgrader's `fetch_assignment unit1` or `submit unit1` (step: "FetchAssignment" or
    "Submit") in the student's folder home, with only the course and the exchange given,
    run in this process through the classes nbgrader's commands use (each command would
    start a Python of its own)."""
    c = Config()
    c.CourseDirectory.course_id = "normalization-layers"
    c.CourseDirectory.assignment_id = "unit1"
    c.CourseDirectory.root = str(home)
    c.Exchange.root = str(exchange)
    c.Exchange.assignment_dir = str(home)
    action = getattr(ExchangeFactory(config=c), step)
    action(coursedir=CourseDirectory(config=c), authenticator=Authenticator(config=c),
           config=c).start()


def test_release_fetch_submit_collect_through_the_exchange(tmp_path, capsys):
    root = build_course(tmp_path / "course", layout="unit")
    exchange = tmp_path / "exchange"
    exchange.mkdir()
    (root / "nbgrader_config_local.py").write_text(f"c.Exchange.root = {str(exchange)!r}\n")
    release(root, ["unit1"], exchange=True)

    home = tmp_path / "student"  # the student's machine: no course config
    home.mkdir()
    as_student(home, exchange, "FetchAssignment")
    kernel = home / "unit1" / "normlib" / "layer_norm.py"
    kernel.write_text(kernel.read_text() + "\n# the student's work\n")
    as_student(home, exchange, "Submit")

    collect(root, ["unit1"], exchange=True)
    submitted = root / "submitted" / getpass.getuser() / "unit1"
    assert (submitted / "normlib" / "layer_norm.py").read_text() == kernel.read_text()
    # its notebook and exercise file alone (and nbgrader's files): not normkit/ nor
    # normlib/'s other files, which the released folder held and nbgrader's collect copied
    assert sorted(p.relative_to(submitted).as_posix() for p in submitted.rglob("*")) == [
        "01_layernorm_forward.ipynb", "normlib", "normlib/layer_norm.py",
        "submission_secret.txt", "timestamp.txt"]
    released = sum(1 for p in (root / "release" / "unit1").rglob("*") if p.is_file()) - 2
    assert "collected unit1 from the exchange: 1 submission " \
           f"({released} files left out: only notebooks and the assignment's exercise files " \
           "are collected, grading takes the rest from the course)\n" in capsys.readouterr().out

    # graded, and its feedback released to the exchange, which the student fetches: the
    # release reads nbgrader's timestamp.txt and submission_secret.txt beside each page
    assert autograde(root, ["unit1"], jobs=1) == 0
    feedback(root, ["unit1"], exchange=True)
    as_student(home, exchange, "FetchFeedback")
    fetched = sorted(home.glob("unit1/feedback/*/*.html"))
    assert [p.name for p in fetched] == ["01_layernorm_forward.html"], fetched
    assert "The judge: " in fetched[0].read_text()


def test_the_exchanges_time_is_when_its_files_last_changed_not_what_submit_wrote(
        tmp_path, capsys):
    """Case 5 on the exchange: `nbgrader submit` runs as the student, who writes the
    inbound folder's name and its timestamp.txt; an early date written there dodged the
    late mark. The time collected is the last change (ctime, which no user sets back) of
    anything in the inbound folder. And a link in it is refused, as in a zip: the folder
    is refused before anything of it is read, and what was collected of it before stays."""
    root = build_course(tmp_path / "course", layout="unit")
    exchange = tmp_path / "exchange"
    exchange.mkdir()
    (root / "nbgrader_config_local.py").write_text(f"c.Exchange.root = {str(exchange)!r}\n")
    release(root, ["unit1"], exchange=True)
    home = tmp_path / "student"
    home.mkdir()
    as_student(home, exchange, "FetchAssignment")
    as_student(home, exchange, "Submit")
    [inbound] = (exchange / "normalization-layers" / "inbound").iterdir()
    (inbound / "timestamp.txt").write_text("2020-01-01 00:00:00.000000 UTC")
    forged = inbound.with_name(inbound.name.replace(inbound.name.split("+")[2],
                                                    "2020-01-01 00:00:00.000000 UTC"))
    inbound.rename(forged)
    before = datetime.datetime.now(datetime.timezone.utc)
    collect(root, ["unit1"], exchange=True)
    when = submitted_at(root / "submitted" / getpass.getuser() / "unit1")
    assert before - datetime.timedelta(minutes=5) < when <= datetime.datetime.now(
        datetime.timezone.utc), when
    (forged / "normlib" / "layer_norm.py").unlink()
    (forged / "normlib" / "layer_norm.py").symlink_to(root / "source/unit1/normlib/layer_norm.py")
    capsys.readouterr()
    collect(root, ["unit1"], exchange=True)
    out = capsys.readouterr().out
    assert f"  REJECTED {forged.name}: a link (normlib/layer_norm.py -> " in out, out
    submitted = root / "submitted" / getpass.getuser() / "unit1"
    assert submitted_at(submitted) == when
    assert (submitted / "normlib" / "layer_norm.py").read_text() != \
        (root / "source/unit1/normlib/layer_norm.py").read_text()


# --- the exchange is a border (issue 58): every inbound folder checked before any of it
# is read, a bad one refused alone, the class collected beside it -------------------------

COURSE = "normalization-layers"
STAMP = "2026-12-07 10:00:00.000000 UTC"


@pytest.fixture(scope="module")
def submitted_once(tmp_path_factory):
    """A course released to an exchange, and one honest `nbgrader submit` of unit1 there:
    (the course's root, the inbound folder nbgrader wrote)."""
    tmp = tmp_path_factory.mktemp("border")
    root = build_course(tmp / "course", layout="unit")
    exchange = tmp / "exchange"
    exchange.mkdir()
    (root / "nbgrader_config_local.py").write_text(f"c.Exchange.root = {str(exchange)!r}\n")
    release(root, ["unit1"], exchange=True)
    home = tmp / "student"
    home.mkdir()
    as_student(home, exchange, "FetchAssignment")
    as_student(home, exchange, "Submit")
    [folder] = (exchange / COURSE / "inbound").iterdir()
    return root, folder


class Inbound:
    """An exchange of a test's own for the course (its submitted/ emptied): put(student)
    copies nbgrader's honest submission in under the student's id."""

    def __init__(self, root, folder, honest):
        self.root, self.folder, self.honest = root, folder, honest

    def put(self, student, stamp=STAMP, tail="+AbCdEf_-1234"):
        path = self.folder / f"{student}+unit1+{stamp}{tail}"
        shutil.copytree(self.honest, path, symlinks=True)
        return path

    def collect(self, **kwargs):
        """What collect printed."""
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            collect(self.root, ["unit1"], exchange=True, **kwargs)
        return out.getvalue()

    def submitted(self, student):
        return self.root / "submitted" / student / "unit1"

    def collected_right(self, student, before):
        """The honest submission collected: its notebook and exercise file as submitted,
        its time the inbound folder's (after before)."""
        folder = self.submitted(student)
        for rel in ("01_layernorm_forward.ipynb", "normlib/layer_norm.py"):
            assert (folder / rel).read_bytes() == (self.honest / rel).read_bytes(), rel
        assert before - datetime.timedelta(seconds=5) < submitted_at(folder) <= \
            datetime.datetime.now(datetime.timezone.utc)
        return True


@pytest.fixture
def inbound(submitted_once, tmp_path):
    """Inbound of the test's own, with nbgrader's owner check off (every folder here is the
    test's user's, whatever its name): the border tests of the owner check turn it on."""
    root, honest = submitted_once
    shutil.rmtree(root / "submitted", ignore_errors=True)
    folder = tmp_path / "exchange" / COURSE / "inbound"
    folder.mkdir(parents=True)
    (root / "nbgrader_config_local.py").write_text(
        f"c.Exchange.root = {str(tmp_path / 'exchange')!r}\n"
        "c.ExchangeCollect.check_owner = False\n")
    return Inbound(root, folder, honest)


@pytest.fixture
def guarded():
    """Nothing a test collects may hang or fill the disk: 60 s at most, and no file written
    past 256 MiB (the write fails, EFBIG, where it would have gone on)."""
    def late(*_):
        raise TimeoutError("collect did not end in 60 s")
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)
    handlers = signal.signal(signal.SIGALRM, late), signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (256 << 20, limit[1]))
    signal.alarm(60)
    yield
    signal.alarm(0)
    resource.setrlimit(resource.RLIMIT_FSIZE, limit)
    signal.signal(signal.SIGALRM, handlers[0])
    signal.signal(signal.SIGXFSZ, handlers[1])


def rejected(out, folder, why):
    """The line that refuses folder (a Path in inbound), saying why."""
    lines = [line for line in out.splitlines() if line.startswith(f"  REJECTED {folder.name}: ")]
    assert len(lines) == 1 and why in lines[0], out
    return True


@pytest.mark.parametrize("pattern, why", [
    ("[z]", "a student id must start with a letter or a digit ('[z]')"),
    ("s1*", "a student id may hold only letters, marks, digits, '_', '.' and '-' ('s1*' holds '*')")])
def test_an_id_that_is_a_glob_pattern_is_refused_never_globbed(inbound, pattern, why):
    """Attack: a folder named `[z]+unit1+...` whose exercise file is a link to the course's
    reference, and whose timestamp.txt is early: nbgrader's glob took its id as a pattern
    (so the link check and the time, which looked for `z+unit1+*`, never saw it), and its
    copy followed the link: the reference, on time, for no work. An exchange id passes the
    allow-list LMS ids pass, and is never a pattern."""
    before = datetime.datetime.now(datetime.timezone.utc)
    honest = inbound.put("s1001")
    attack = inbound.put(pattern)
    (attack / "normlib" / "layer_norm.py").unlink()
    (attack / "normlib" / "layer_norm.py").symlink_to(
        inbound.root / "source" / "unit1" / "normlib" / "layer_norm.py")
    (attack / "timestamp.txt").write_text("2020-01-01 00:00:00.000000 UTC")
    out = inbound.collect()
    assert rejected(out, attack, why)
    assert sorted(p.name for p in (inbound.root / "submitted").iterdir()) == ["s1001"]
    assert inbound.collected_right("s1001", before)
    assert honest.is_dir() and attack.is_dir()  # (the exchange is left as it was)


def test_with_a_roster_an_exchange_id_is_one_of_its_students(inbound):
    """With a roster, an id from the exchange is one of its student ids, as an LMS's is."""
    (inbound.root / "roster.csv").write_text(
        "lms_id,student_id,name\n1,s1001,Ada Lovelace\n3,s1003,Alan Turing\n")
    with (inbound.root / "nbgrader_config_local.py").open("a") as f:
        f.write('c.Grading.roster = "roster.csv"\n')
    before = datetime.datetime.now(datetime.timezone.utc)
    inbound.put("s1001")
    stranger = inbound.put("s1002")
    out = inbound.collect()
    assert rejected(out, stranger, "student id 's1002' is not in the roster")
    assert inbound.collected_right("s1001", before)
    assert sorted(p.name for p in (inbound.root / "submitted").iterdir()) == ["s1001"]


def test_exchange_ids_that_differ_only_in_case_are_both_refused(inbound):
    """Two ids of one collect that differ only in case: both refused, as from an LMS."""
    before = datetime.datetime.now(datetime.timezone.utc)
    inbound.put("s1001")
    upper, lower = inbound.put("Ada"), inbound.put("ada")
    out = inbound.collect()
    assert rejected(out, upper, "only in case")
    assert rejected(out, lower, "only in case")
    assert inbound.collected_right("s1001", before)
    assert sorted(p.name for p in (inbound.root / "submitted").iterdir()) == ["s1001"]


def test_a_link_to_dev_zero_is_refused_before_anything_is_copied(inbound, guarded):
    """Attack: a link to /dev/zero in a submission: nbgrader's copy followed it and wrote
    until the disk was full (collect checked links only after). Now the folder is checked
    first, and refused alone: nothing of it reaches submitted/."""
    before = datetime.datetime.now(datetime.timezone.utc)
    inbound.put("s1001")
    attack = inbound.put("s1002")
    (attack / "normlib" / "data.bin").symlink_to("/dev/zero")
    out = inbound.collect()
    assert rejected(out, attack, "a link (normlib/data.bin -> /dev/zero)")
    assert not inbound.submitted("s1002").exists()
    assert inbound.collected_right("s1001", before)


def test_a_fifo_is_refused_and_collect_goes_on(inbound, guarded):
    """Attack: a FIFO in a submission: nbgrader's copy opened it and waited for ever, for
    the whole class."""
    before = datetime.datetime.now(datetime.timezone.utc)
    inbound.put("s1001")
    attack = inbound.put("s1002")
    os.mkfifo(attack / "normlib" / "layer_norm.py.fifo")
    out = inbound.collect()
    assert rejected(out, attack, "a special file (normlib/layer_norm.py.fifo: a FIFO)")
    assert not inbound.submitted("s1002").exists()
    assert inbound.collected_right("s1001", before)


@pytest.mark.parametrize("name", [
    "s1002+unit1+not a date+AbCd", "s1002+unit1+2026-13-45 10:00:00.000000 UTC+AbCd",
    "s1002+unit1", "s1002+unit1+" + STAMP + "+AbCd+more", "s1002+unit1+" + STAMP + "+x y"])
def test_a_folder_name_nbgrader_submit_never_writes_is_refused_alone(inbound, name):
    """Attack: a folder whose name's time is no date: nbgrader's collect read every name's
    time first, and one that is no date stopped the collect of the whole class."""
    before = datetime.datetime.now(datetime.timezone.utc)
    inbound.put("s1001")
    attack = inbound.folder / name
    shutil.copytree(inbound.honest, attack)
    out = inbound.collect()
    assert rejected(out, attack, "not a folder's name as nbgrader submit writes it")
    assert not inbound.submitted("s1002").exists()
    assert inbound.collected_right("s1001", before)


def test_a_courses_own_timestamp_format_is_the_one_read(inbound):
    """A course that sets c.Exchange.timestamp_format (nbgrader submit writes its folders'
    times so) has its students' folders read, and a time of another form refused (a
    review's: every folder was refused)."""
    before = datetime.datetime.now(datetime.timezone.utc)
    config = inbound.root / "nbgrader_config_local.py"
    config.write_text(config.read_text() + "c.Exchange.timestamp_format = '%Y%m%d-%H%M%S'\n")
    inbound.put("s1001", stamp="20261207-100000")
    inbound.put("s1002")  # (nbgrader's default form: not this course's)
    out = inbound.collect()
    assert inbound.collected_right("s1001", before)
    assert rejected(out, inbound.folder / f"s1002+unit1+{STAMP}+AbCdEf_-1234",
                    "is no date written as '%Y%m%d-%H%M%S'")


def test_names_that_are_no_utf8_or_hold_a_lines_end_are_refused_and_shown(inbound):
    """A folder's name of bytes that are no UTF-8, and a file's name holding them and a
    line's end: refused, each name shown escaped on its line (printed as it is, the first
    stopped collect, the second wrote a line of its own)."""
    before = datetime.datetime.now(datetime.timezone.utc)
    inbound.put("s1001")
    attack = os.fsencode(inbound.folder) + b"/s\xff1002+unit1+" + STAMP.encode() + b"+AbCd"
    shutil.copytree(inbound.honest, os.fsdecode(attack))
    linked = inbound.put("s1003")
    os.symlink("/dev/zero", os.fsencode(linked) + b"/x\xff\n  REJECTED s1001")
    out = inbound.collect()
    assert "  REJECTED s\\udcff1002+unit1+" in out and "a student id may hold only" in out, out
    assert rejected(out, linked, "a link (x\\udcff\\n  REJECTED s1001 -> /dev/zero)")
    assert sum(line.startswith("  REJECTED") for line in out.splitlines()) == 2, out
    assert inbound.collected_right("s1001", before)


def test_a_sparse_file_of_101_mb_is_refused_before_it_is_read(inbound, guarded):
    """Attack: a 101 MB sparse file (no block on disk): nbgrader's collect refused the
    whole class's ("Directory size is too big") after reading every size."""
    before = datetime.datetime.now(datetime.timezone.utc)
    inbound.put("s1001")
    attack = inbound.put("s1002")
    with open(attack / "weights.bin", "wb") as f:
        f.truncate(101 * 10**6)
    start = time.monotonic()
    out = inbound.collect()
    assert time.monotonic() - start < 20
    assert rejected(out, attack, "a file of more than 32 MiB (weights.bin)")
    assert not inbound.submitted("s1002").exists()
    assert inbound.collected_right("s1001", before)


def test_a_file_larger_on_disk_than_its_size_is_bounded_too(inbound):
    """A file preallocated past its size (fallocate's KEEP_SIZE: 2 MiB on disk, 0 bytes by
    its size) is bounded by its blocks, here with a bound of 1 MiB a file."""
    before = datetime.datetime.now(datetime.timezone.utc)
    inbound.put("s1001")
    attack = inbound.put("s1002")
    fd = os.open(attack / "normlib" / "scratch.bin", os.O_CREAT | os.O_WRONLY, 0o644)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.fallocate(fd, 1, ctypes.c_long(0), ctypes.c_long(2 << 20)) != 0:
            pytest.skip(f"no fallocate KEEP_SIZE here ({os.strerror(ctypes.get_errno())})")
    finally:
        os.close(fd)
    out = inbound.collect(bounds=dataclasses.replace(BOUNDS, file_bytes=1 << 20))
    assert rejected(out, attack, "a file of more than 1 MiB (normlib/scratch.bin, on disk)")
    assert not inbound.submitted("s1002").exists()
    assert inbound.collected_right("s1001", before)


def test_too_many_files_are_refused_at_the_bound(inbound):
    """Files past the bound of files and folders (here 200, with honest submissions of about
    60): refused at the bound, the class collected."""
    before = datetime.datetime.now(datetime.timezone.utc)
    inbound.put("s1001")
    attack = inbound.put("s1002")
    for i in range(200):
        (attack / f"empty{i}").touch()
    out = inbound.collect(bounds=dataclasses.replace(BOUNDS, listings=200))
    assert rejected(out, attack, "more than 200 files and folders")
    assert inbound.collected_right("s1001", before)


def test_thirty_thousand_empty_files_are_refused_in_seconds(inbound):
    """Attack: 30,000 empty files in a submission tripled the class's collect: refused at
    BOUNDS.listings (1,000) without walking the rest."""
    before = datetime.datetime.now(datetime.timezone.utc)
    inbound.put("s1001")
    attack = inbound.put("s1002")
    for i in range(30_000):
        (attack / f"e{i}").touch()
    start = time.monotonic()
    out = inbound.collect()
    assert time.monotonic() - start < 10
    assert rejected(out, attack, f"more than {BOUNDS.listings} files and folders")
    assert inbound.collected_right("s1001", before)


def test_of_a_students_folders_a_bad_one_is_refused_alone(inbound):
    """Two submissions of one student and a third, later one holding a link: the link's
    folder is refused alone, and the later of the two others (by its files' changes, not
    its name's time) is collected."""
    before = datetime.datetime.now(datetime.timezone.utc)
    inbound.put("s1001", stamp="2026-12-07 09:00:00.000000 UTC")
    time.sleep(0.02)
    later = inbound.put("s1001", stamp="2026-12-01 09:00:00.000000 UTC", tail="+second")
    (later / "normlib" / "layer_norm.py").write_text("# the second submission\n")
    linked = inbound.put("s1001", stamp="2026-12-08 09:00:00.000000 UTC", tail="+third")
    (linked / "normlib" / "layer_norm.py").unlink()
    (linked / "normlib" / "layer_norm.py").symlink_to(later / "normlib" / "layer_norm.py")
    out = inbound.collect()
    assert rejected(out, linked, "a link (normlib/layer_norm.py")
    assert (inbound.submitted("s1001") / "normlib" / "layer_norm.py").read_text() == \
        "# the second submission\n"
    assert before - datetime.timedelta(seconds=5) < submitted_at(inbound.submitted("s1001"))


def test_a_folder_in_another_users_name_is_refused(inbound):
    """With nbgrader's owner check (ExchangeCollect.check_owner, on by default): a folder is
    collected only where the user its name names owns it and all it holds (nbgrader only
    warned, and its inbound folder is anyone's to write in)."""
    (inbound.root / "nbgrader_config_local.py").write_text(
        f"c.Exchange.root = {str(inbound.folder.parent.parent)!r}\n")
    me = getpass.getuser()
    before = datetime.datetime.now(datetime.timezone.utc)
    inbound.put(me)
    forged = inbound.put("nobody")
    if os.geteuid() == 0:  # (root can give a file to another user, as a student can't)
        os.chown(forged, 65534, 65534)
        os.chown(forged / "normlib", 65534, 65534)
    no_user = inbound.put("no-such-user-here")
    out = inbound.collect()
    assert rejected(out, forged, "owned by")
    assert rejected(out, no_user, "no user no-such-user-here")
    assert inbound.collected_right(me, before)
    assert sorted(p.name for p in (inbound.root / "submitted").iterdir()) == [me]


def test_too_many_folders_of_one_student_are_refused_without_a_walk_each(inbound):
    """A student's folders of one assignment past BOUNDS.submits (here 2): all refused (a
    walk each would be the class's time), the class collected."""
    before = datetime.datetime.now(datetime.timezone.utc)
    inbound.put("s1001")
    many = [inbound.put("s1002", tail=f"+n{i}") for i in range(3)]
    out = inbound.collect(bounds=dataclasses.replace(BOUNDS, submits=2))
    for folder in many:
        assert rejected(out, folder, "3 folders of s1002: more than 2 submissions")
    assert inbound.collected_right("s1001", before)
    assert not inbound.submitted("s1002").exists()


def test_a_dry_run_from_the_exchange_decides_and_writes_nothing(inbound):
    """collect --exchange --dry-run says who would be collected and what refused, and
    writes nothing; the collect itself then does what it said."""
    inbound.put("s1001")
    attack = inbound.put("s1002")
    (attack / "normlib" / "data.bin").symlink_to("/dev/zero")
    out = inbound.collect(dry_run=True)
    assert out.startswith("DRY RUN (nothing written): collected unit1 from the exchange: 1 "
                          "submission"), out
    assert "  would be new: s1001\n" in out and rejected(out, attack, "a link")
    assert not (inbound.root / "submitted").exists()
    assert "  new: s1001\n" in inbound.collect()
    assert sorted(p.name for p in (inbound.root / "submitted").iterdir()) == ["s1001"]


def test_a_file_is_read_only_as_it_was_checked(tmp_path):
    """What was walked may change before it is read (a student can still write an inbound
    folder): read_regular follows no link at any step, opens no FIFO for a wait, and
    reads no file past its bound."""
    (tmp_path / "normlib").mkdir()
    (tmp_path / "normlib" / "layer_norm.py").write_text("x = 1\n")
    assert read_regular(tmp_path, "normlib/layer_norm.py", 100) == b"x = 1\n"
    with pytest.raises(ValueError, match="no file of at most 5 bytes"):
        read_regular(tmp_path, "normlib/layer_norm.py", 5)
    (tmp_path / "zero").symlink_to("/dev/zero")
    (tmp_path / "linked").symlink_to(tmp_path / "normlib")
    for name in ("zero", "linked/layer_norm.py"):
        with pytest.raises(OSError):
            read_regular(tmp_path, name, 100)
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(ValueError, match="no file"):
        read_regular(tmp_path, "fifo", 100)


def test_an_exchange_without_the_courses_inbound_folder_stops_collect_saying_so(inbound):
    shutil.rmtree(inbound.folder)
    with pytest.raises(SystemExit, match=f"collect --exchange: no inbound folder {inbound.folder} "):
        inbound.collect()
