"""The instructor's docs run as written: every command block of README.md's "For
instructors" section and of docs/instructors.md, unchanged, in order, on one temporary course.

A ```sh block runs with `bash -e` in the repository root, a ```python block with the
environment's Python; a ```python block that only sets `c.Class.trait = ...` is a config
excerpt, whose traits must exist and be configurable. What differs between machines comes
from the environment, as the docs say: this test's course, Dask scheduler and PostgreSQL
server (tests/postgres.py), and A=unit1, JOBS=1 to keep it short. A block that cannot run is
marked right before it (`<!-- not run by tests/test_docs.py: why -->`); a block neither run
nor marked fails, and so does a marker or a step whose block is gone.
STEPS gives a block's Step, keyed by its first command line: `before(run)` makes what the
block needs and returns its own environment variables (run.env[...]: every later block's);
`after(run, output)` asserts what it did; `serves(run, process)` waits until the server it
starts serves (all stop at the module's end). A block without a step must exit 0.
"""

import ast
import csv
import dataclasses
import html
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import REPO, free_port

DOCS = [("README.md", "For instructors and maintainers"), ("docs/instructors.md", None)]
RUN = {"sh", "bash", "python"}  # languages a block can be run in
COMMANDS = RUN | {"", "shell", "console", "zsh", "sql", "psql", "py", "pycon"}  # run or mark
MARKER = re.compile(r"^\s*<!-- not run by tests/test_docs\.py: (?P<why>.*?)\s*-->\s*$")
FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})(?P<language>[^`\s]*)\s*$")
HEADING = re.compile(r"^(#{1,2}) (.+)$")
BLOCK_SECONDS = 300  # one block (the term's autograde: about 20 s)
SERVE_SECONDS = 120  # a server to start
# what the caller's environment may set that the docs' commands read: the test sets its own
CLEARED = {"COURSE_DIR", "A", "STUDENT", "JOBS", "SCHEDULER", "ARGS", "LAYOUT", "PORT",
           "NBGRADER_DB_URL", "MAKEFLAGS", "MAKELEVEL", "MFLAGS", "LMS", "TEMPLATE",
           "QUESTION", "POINTS", "COMMENT", "LAB_ARGS", "DRY_RUN", "HEAD_PASSWORD",
           "TA_PASSWORD"}


# --- the markdown ---------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Block:
    file: str  # "docs/instructors.md"
    line: int  # its opening fence's line
    language: str
    text: str  # as the reader copies it (a list item's indent removed)
    section: str  # the level-1 or 2 heading above it
    not_run: str | None  # the marker's reason, if marked

    @property
    def key(self):
        """Its first command line, without a comment after it: STEPS's key."""
        comment = "--" if self.language in ("sql", "psql") else "#"
        line = next((line.strip() for line in self.text.splitlines()
                     if line.strip() and not line.strip().startswith(comment)), "")
        for end in re.finditer(rf"\s{re.escape(comment)}", line):  # (not one inside quotes)
            before = line[:end.start()]
            if before.count('"') % 2 == 0 and before.count("'") % 2 == 0:
                return before.rstrip()
        return line

    def __str__(self):
        return f"{self.file}:{self.line} ({self.key[:60]})"


def parse(file):
    """(every fenced block of a markdown file, the lines of markers no block follows)."""
    lines = (REPO / file).read_text().splitlines()
    blocks, stray, marker, section, i = [], [], None, "", 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if fence:
            indent, mark = len(fence["indent"]), fence["fence"]
            end = i + 1
            while end < len(lines) and not re.match(
                    rf"^ *{re.escape(mark[0])}{{{len(mark)},}}\s*$", lines[end]):
                end += 1
            body = [line[indent:] if not line[:indent].strip() else line
                    for line in lines[i + 1:end]]
            blocks.append(Block(file, i + 1, fence["language"], "\n".join(body) + "\n",
                                section, marker and marker[1]))
            marker, i = None, end + 1
            continue
        found = MARKER.match(lines[i])
        if found or lines[i].strip():
            if marker:
                stray.append(marker[0])
            marker = (i + 1, found["why"]) if found else None
            heading = HEADING.match(lines[i])
            if heading:
                section = heading[2].strip()
        i += 1
    if marker:
        stray.append(marker[0])
    return blocks, stray


def command_blocks():
    """The command blocks of the instructor's docs, in the order a reader runs them."""
    return [b for file, section in DOCS for b in parse(file)[0]
            if b.language in COMMANDS and section in (None, b.section)]


def config_excerpt(text):
    """Whether a python block only sets c.Class.trait (and imports): a config file's lines."""
    def setting(target):
        while isinstance(target, ast.Subscript):
            target = target.value
        return isinstance(target, ast.Attribute) and isinstance(target.value, ast.Attribute) \
            and isinstance(target.value.value, ast.Name) and target.value.value.id == "c"
    return all(isinstance(s, (ast.Import, ast.ImportFrom)) or isinstance(s, ast.Assign) and
               all(setting(t) for t in s.targets) for s in ast.parse(text).body)


def check_config(text):
    """Load a config excerpt as nbgrader loads a config file, and assert that each trait it
    sets exists and is configurable (c.Grading's are also validated, as every step reads
    them: tools/course/settings.py)."""
    from nbgrader.apps.nbgraderapp import NbGraderApp
    from traitlets.config import Config

    from tools.course.settings import Grading
    from tools.instructor.exchange import Listing

    c = Config()
    exec(compile(text, "<the docs' config>", "exec"), {"c": c, "get_config": lambda: c})
    classes = {cls.__name__: cls for cls in [
        *NbGraderApp().all_configurable_classes(), Grading, Listing, *Listing.__mro__]}
    for section, values in c.items():
        assert section in classes, f"c.{section}: no configurable class of that name"
        traits = classes[section].class_traits(config=True)
        unknown = sorted(set(values) - set(traits))
        assert not unknown, f"c.{section} has no setting {', '.join(unknown)}"
    Grading(config=c)  # (a TraitError where a value has the wrong type)


# --- running them ----------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Step:
    """What a block needs and does beyond its text (the module's docstring)."""
    before: Callable | None = None
    after: Callable | None = None
    serves: Callable | None = None


@dataclasses.dataclass
class Run:
    """The state the blocks share."""
    course: Path
    tmp: Path
    env: dict
    postgres: object
    outputs: dict = dataclasses.field(default_factory=dict)  # {key: stdout and stderr}
    logs: dict = dataclasses.field(default_factory=dict)  # {key: a server's log file}
    servers: dict = dataclasses.field(default_factory=dict)  # {key: a server's process}
    ports: dict = dataclasses.field(default_factory=dict)  # {what: a port a step chose}
    outcomes: dict = dataclasses.field(default_factory=dict)  # {block: None, or why not}
    seconds: dict = dataclasses.field(default_factory=dict)  # {block: how long it ran}

    def stop(self, key):
        """Stop the server a block started and every process of its group, the ones that
        outlive the block's own (make's jupyter lab outlived make once, for hours): SIGTERM,
        then SIGKILL to what is left (STOPPING)."""
        process = self.servers.pop(key, None)
        if process is None:
            return
        for sig, wait in STOPPING:
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                return
            until = time.monotonic() + wait
            while time.monotonic() < until:
                process.poll()  # (the block's own process, reaped)
                if not group_alive(process.pid):
                    return
                time.sleep(0.2)


STOPPING = ((signal.SIGTERM, 30), (signal.SIGKILL, 10))  # (signal, seconds to wait for it)


def group_alive(group):
    """The live processes (not zombies) of a process group: their pids."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # (it ended meanwhile)
            continue
        if fields[0] != "Z" and int(fields[2]) == group:
            found.append(int(pid))
    return found


def run_block(run, block):
    """Run one block (its step's set-up, the block, its step's checks); raises on failure."""
    step = STEPS.get(block.key, Step())
    extra = (step.before(run) if step.before else None) or {}  # (it may change run.env)
    env = {**run.env, **extra}
    if block.language == "python" and config_excerpt(block.text):
        check_config(block.text)
        return
    command = ["bash", "-e", "-c", block.text] if block.language != "python" else \
        [str(REPO / ".venv" / "bin" / "python"), "-c", block.text]
    if step.serves:
        log = run.tmp / f"server-{len(run.servers)}.log"
        run.logs[block.key] = log
        with open(log, "wb") as out:
            run.servers[block.key] = subprocess.Popen(
                command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True)
        step.serves(run, run.servers[block.key])
        output = log.read_text(errors="replace")
    else:
        done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=BLOCK_SECONDS)
        output = done.stdout + done.stderr
        run.outputs[block.key] = output
        assert done.returncode == 0, f"{block} exited {done.returncode}:\n{output[-6000:]}"
    if step.after:
        step.after(run, output)


def clean_environment():
    """This process's environment without what the docs' commands read (CLEARED, PG*)."""
    return {k: v for k, v in os.environ.items() if k not in CLEARED and not k.startswith("PG")}


@pytest.fixture(scope="module")
def ran(tmp_path_factory, postgres):
    """The Run of every command block, in order, on one course: its outcomes say for each
    block None where it ran and passed its checks, else why not ("not run: why" where
    marked)."""
    tmp = tmp_path_factory.mktemp("docs")
    env = clean_environment()
    env.update(COURSE_DIR=str(tmp / "course"), A="unit1", JOBS="1",
               JUPYTER_RUNTIME_DIR=str(tmp / "jupyter-runtime"))
    run = Run(tmp / "course", tmp, env, postgres)
    try:
        for block in command_blocks():
            if block.not_run:
                run.outcomes[block] = f"not run: {block.not_run}"
                continue
            start = time.monotonic()
            try:
                run_block(run, block)
                run.outcomes[block] = None
            except Exception as error:  # (every block gets its own verdict)
                run.outcomes[block] = f"{type(error).__name__}: {error}"
            run.seconds[block] = time.monotonic() - start
        yield run
    finally:
        for key in list(run.servers):
            run.stop(key)


# --- the steps: the term of README's blocks ---------------------------------------------

STUDENTS = {"alice": ("Alice Smith", 1001, "right"), "bob": ("Bob Jones", 1002, "stubs")}


def the_course(run, output):
    from tools.course.folder import Course

    assert list(Course.load(run.course).assignments) == [f"unit{n}" for n in range(1, 10)]
    assert (run.course / "release" / "unit1").is_dir()
    assert not (run.course / "release" / "unit2").exists()  # (A=unit1)


def a_moodle_download(run):
    """Two students' submissions as Moodle 4.1+'s "Download all submissions" writes them
    with "Download submissions in folders", unzipped: a folder per submission named
    "<Full Name>_<participant number>_assignsubmission_file" (moodle/moodle,
    mod/assign/classes/downloader.php), holding what the student uploaded (a zip of the
    assignment's folder), and the roster that names them."""
    from tests.synthetic import (
        answer_questions,
        both,
        reference_submission,
        with_files,
        write_submission,
        zip_folder,
    )

    cases = {"right": both(reference_submission(1), answer_questions), "stubs": with_files()}
    archive = run.course / "downloaded" / "unit1" / "archive"
    for student, (name, number, case) in STUDENTS.items():
        staging = run.tmp / "staging" / student
        write_submission(run.course, "unit1", case, staging, cases)
        folder = archive / f"{name}_{number}_assignsubmission_file"
        folder.mkdir(parents=True)
        zip_folder(staging, folder / "unit1.zip", enclosing="unit1")
    (run.course / "roster.csv").write_text("lms_id,student_id,name\n" + "".join(
        f"{number},{student},{name}\n" for student, (name, number, _) in STUDENTS.items()))
    with open(run.course / "nbgrader_config_local.py", "a") as config:
        config.write('c.Grading.roster = "roster.csv"\n')


def grades(run):
    return {r["student_id"]: r for r in csv.DictReader((run.course / "grades.csv").open())}


def the_term(run, output):
    """Both collected, graded judge-only (every check of the right one passes, none of
    the stubs'), with feedback pages, and grades.csv saying so."""
    from tools.course.exercises import exercises, questions

    assert "2 of 2 submissions graded with 1 job" in output, output
    checks = {e.grade_id: e.points for e in exercises() if e.unit == 1}
    [answer] = [q.grade_id for q in questions() if q.unit == 1]
    table = grades(run)
    assert set(table) == set(STUDENTS)
    assert {g: float(table["alice"][g]) for g in checks} == checks
    assert {float(table["bob"][g]) for g in checks} == {0}
    assert table["alice"][answer] == ""  # waits for a grader: never an unearned 0
    assert table["alice"]["status"] == "graded; 1 written answer to grade by hand"
    for student in STUDENTS:
        assert list((run.course / "feedback" / student / "unit1").glob("*.html")), student


# --- docs/instructors.md: collect's dry run, the LMS's feedback upload and grades ----------

def the_dry_run(run, output):
    """The dry run says what it would do to the term's download: both students unchanged
    (collected before), nothing rejected; the real collect then does just that."""
    dry, real = output.split("\n.venv/bin/python -m tools.instructor collect ", 1)
    assert "DRY RUN (nothing written or moved): collected unit1: 2 entries in archive/, 2 " \
           "would be collected (0 new, 0 replacing an older submission, 2 unchanged), 0 " \
           "would be rejected" in dry, output
    for student, (name, number, _) in STUDENTS.items():
        assert f"would collect {student} (unchanged) from {name}_{number}_assignsubmission_" \
               "file; time unknown" in dry, output
    assert "2 collected (0 new, 0 replacing an older submission, 2 unchanged), 0 rejected" \
        in real, output


def the_moodle_upload(run, output):
    """Moodle's zip holds each student's pages in the folder the download gave them (the
    term's download is Moodle's); Canvas's has no one, each student listed with why."""
    import zipfile

    with zipfile.ZipFile(run.course / "feedback_upload" / "unit1-moodle.zip") as upload:
        names = sorted(upload.namelist())
    pages = sorted(p.name for p in (run.course / "feedback" / "alice" / "unit1").glob("*.html"))
    assert pages and names == sorted(
        f"{name}_{number}_assignsubmission_file/{page}"
        for name, number, _ in STUDENTS.values() for page in pages)
    for student in STUDENTS:
        assert re.search(rf"NOT IN THE UPLOAD {student}: ", output), output


CANVAS_EXPORT = ("Student,ID,SIS User ID,SIS Login ID,Section,unit1 (4521),Current Score\n"
                 "    Points Possible,,,,,{points},(read only)\n"
                 '"Smith, Alice",1001,,asmith,Normalization,,0.00\n'
                 '"Jones, Bob",1002,,bjones,Normalization,,0.00\n'
                 '"Student, Test",99999,,aaa-test,Normalization,,0.00\n')


def canvas_export(run):
    """CANVAS_EXPORT with unit1's points possible the course's maximum (make grades stops
    on another: tools/instructor/grade_sheet.py)."""
    from tools.course.exercises import maximum
    from tools.course.folder import Course

    notebooks = Course.load(run.course).assignments["unit1"].notebooks
    return CANVAS_EXPORT.format(points=f"{maximum(notebooks):.2f}")


def a_canvas_export(run):
    """Canvas's gradebook export of the class (tests/test_lms_grades.py has its format,
    cited), as the instructor saved it in the course folder, where the block's relative
    TEMPLATE is read from: the roster's lms_id is the ID column; Canvas's test student is
    no one of the course."""
    (run.course / "canvas-export.csv").write_text(canvas_export(run))


def the_canvas_grades(run, output):
    """grades-canvas.csv: the export with each student's final score in unit1's column,
    and nothing else changed (the test student's row, the points row, the template)."""
    from tools.course.late import number

    finals = {s: number(float(grades(run)[s]["final"])) for s in STUDENTS}  # ("6", as Canvas)
    assert finals["alice"] != "0" and finals["bob"] == "0"
    lines = canvas_export(run).splitlines(keepends=True)
    for i, student in ((2, "alice"), (3, "bob")):
        lines[i] = lines[i].replace("Normalization,,", f"Normalization,{finals[student]},")
    assert (run.course / "grades-canvas.csv").read_text() == "".join(lines)
    assert (run.course / "canvas-export.csv").read_text() == canvas_export(run)
    assert "2 scores filled in" in output, output


# --- docs/instructors.md: hand grading, the formgrader ---------------------------------

def scored_by_hand(run, output):
    """The block's score, comment and grades.csv: alice's answer 1.5, the comment on her
    feedback page, her status no longer waiting."""
    block = next(b for b in command_blocks() if b.key.startswith("make score"))
    command = next(line for line in block.text.replace("\\\n", " ").splitlines()
                   if line.startswith("make score"))
    said = dict(re.findall(r'(\w+)=("[^"]*"|\S+)', command))
    table = grades(run)[said["STUDENT"]]
    assert float(table[said["QUESTION"]]) == float(said["POINTS"])
    assert table["status"] == "graded"
    page = "".join(p.read_text() for p in
                   (run.course / "feedback" / said["STUDENT"] / said["A"]).glob("*.html"))
    assert html.escape(said["COMMENT"].strip('"'), quote=False) in page


TOKEN = "docs-test-token"


def formgrader_args(run):
    run.ports["formgrader"] = free_port()
    return {"LAB_ARGS": f"--no-browser --port={run.ports['formgrader']} "
                        f"--ServerApp.port_retries=0 --IdentityProvider.token={TOKEN}"}


def formgrader_get(run, path):
    url = f"http://127.0.0.1:{run.ports['formgrader']}/formgrader/{path}?token={TOKEN}"
    with urllib.request.urlopen(url, timeout=30) as answer:
        return answer.read().decode()


def serves_formgrader(run, process):
    until = time.monotonic() + SERVE_SECONDS
    while True:
        assert process.poll() is None, "make formgrader ended"
        try:
            formgrader_get(run, "api/assignments")
            return
        except OSError:
            assert time.monotonic() < until, "make formgrader did not answer"
            time.sleep(0.5)


def the_formgrader(run, output):
    """It lists the course's assignment and submissions, says on its page that release
    and collect through the exchange are off (the course has none), and logs nothing
    CRITICAL (nbgrader's "Unwritable directory" at each request, before tools/instructor/exchange.py)."""
    assignments = json.loads(formgrader_get(run, "api/assignments"))
    assert [(a["name"], a["num_submissions"]) for a in assignments
            if a["num_submissions"]] == [("unit1", 2)]
    assert 'id="warning-exchange"' in formgrader_get(run, "manage_assignments")
    formgrader_get(run, "api/assignments")  # (each request lists the exchange)
    key = next(k for k in run.logs if k.startswith("make formgrader"))
    log = run.logs[key].read_text(errors="replace")
    assert "nbgrader.server_extensions.formgrader | extension was successfully loaded" in log
    assert not re.search(r"^\[C ", log, re.MULTILINE) and "Unwritable" not in log, log
    run.stop(key)


def test_a_server_is_stopped_with_every_process_it_started(tmp_path, monkeypatch):
    """A block's server whose own process has ended, leaving a child that ignores SIGTERM:
    stop kills the child too (the docs test once left `make formgrader`'s jupyter lab
    running for hours)."""
    monkeypatch.setattr(sys.modules[__name__], "STOPPING",
                        ((signal.SIGTERM, 1), (signal.SIGKILL, 5)))
    run = Run(tmp_path, tmp_path, {}, None)
    process = subprocess.Popen(["bash", "-c", "(trap '' TERM; exec sleep 300) & sleep 0.5"],
                               start_new_session=True)
    process.wait(10)  # the block's own process has ended; its child lives on
    assert len(group_alive(process.pid)) == 1
    run.servers["a block"] = process
    run.stop("a block")
    assert group_alive(process.pid) == [] and run.servers == {}


def test_the_exchange_is_quiet_only_where_the_course_has_none(tmp_path, caplog):
    """tools/instructor/exchange.py: nbgrader's default root, missing, is no exchange (an
    ExchangeError for formgrader, a debug line); a configured root that is missing is
    still nbgrader's CRITICAL; an existing one is used."""
    import logging

    from nbgrader.coursedir import CourseDirectory
    from nbgrader.exchange import ExchangeError
    from traitlets.config import Config

    from tools.instructor.exchange import Listing

    log = logging.getLogger("test_docs.exchange")
    (tmp_path / "there").mkdir()
    for root, fails, critical in ((None, True, False), (tmp_path / "missing", True, True),
                                  (tmp_path / "there", False, False)):
        config = Config()
        if root:
            config.Exchange.root = str(root)
        lister = Listing(coursedir=CourseDirectory(config=config), config=config, log=log)
        if root is None and os.path.exists(lister.root):
            continue  # (this machine has nbgrader's default exchange)
        caplog.clear()
        with caplog.at_level(logging.DEBUG, logger=log.name):
            try:
                lister.ensure_root()
                failed = False
            except ExchangeError:
                failed = True
        assert failed == fails, root
        criticals = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert criticals == ([f"Unwritable directory, please contact your instructor: {root}"]
                             if critical else []), root


# --- PostgreSQL and the Dask path -------------------------------------------------------

PASSWORDS = {"HEAD_PASSWORD": "head's secret", "TA_PASSWORD": "ta:secret"}


def superuser(run):
    """psql's variables for the test's server and its superuser, from now on."""
    run.env.update(PGHOST="127.0.0.1", PGPORT=str(run.postgres.port), PGUSER="postgres",
                   **PASSWORDS)


def database(run, user="postgres"):
    import psycopg

    return psycopg.connect(f"postgresql://{user}@127.0.0.1:{run.postgres.port}/normalization",
                           autocommit=True)


def as_head(run):
    """The course's gradebook from now on: the docs' URL, on the test's server (the
    environment's NBGRADER_DB_URL, which the docs give as the config line's equal)."""
    run.env["NBGRADER_DB_URL"] = f"postgresql://head@127.0.0.1:{run.postgres.port}/normalization"


def tables_are_courses(run, output):
    with database(run) as db:
        owners = dict(db.execute(
            "SELECT tablename, tableowner FROM pg_tables WHERE schemaname = 'public'"))
    assert {"grade", "comment", "submitted_notebook", "alembic_version"} <= set(owners)
    assert set(owners.values()) == {"course"}, owners


def scheduler_port(run):
    port = free_port()
    run.env.update(PORT=str(port), SCHEDULER=f"tcp://127.0.0.1:{port}")


def serves_scheduler(run, process):
    until = time.monotonic() + SERVE_SECONDS
    while True:
        assert process.poll() is None, "make scheduler ended"
        try:
            socket.create_connection(("127.0.0.1", int(run.env["PORT"])), timeout=2).close()
            return
        except OSError:
            assert time.monotonic() < until, "make scheduler did not listen"
            time.sleep(0.5)


def serves_worker(run, process):
    from distributed import Client

    with Client(run.env["SCHEDULER"], timeout=SERVE_SECONDS) as dask:
        dask.wait_for_workers(1, timeout=SERVE_SECONDS)
    assert process.poll() is None, "make worker ended"


def one_student(run):
    return {"STUDENT": "alice"}  # (the gradebook is new: one submission is enough)


def graded_on_the_cluster(run, output):
    """alice graded by the worker that `make worker` started, into the PostgreSQL
    gradebook; then `ta` grades there as formgrader does, and can change nothing else."""
    assert f"1 of 1 submissions graded on the cluster at {run.env['SCHEDULER']}" in output, output
    import psutil  # (distributed's dependency)

    log = (run.course / "logs" / "autograde" / "unit1-alice.log").read_text()
    by = re.match(rf"graded by {re.escape(socket.gethostname())}:(\d+)\n", log)
    assert by, log[:200]
    started = psutil.Process(run.servers["make worker"].pid).children(recursive=True)
    assert int(by[1]) in {p.pid for p in started}  # (a process of make worker's)
    with database(run) as db:
        assert db.execute("SELECT count(*) FROM course_grading").fetchone() == (1,)
    ta_grades(run)


def ta_grades(run):
    """`ta` scores alice's written answer with make score (nbgrader's Gradebook, as
    formgrader), writes a comment and flags her notebook; and is refused ALTER, DROP and
    writing the course's own table."""
    import psycopg

    from tools.course.exercises import questions

    [answer] = [q for q in questions() if q.unit == 1]
    url = f"postgresql://ta@127.0.0.1:{run.postgres.port}/normalization"
    done = subprocess.run(
        ["make", "score", "A=unit1", "STUDENT=alice", f"QUESTION={answer.grade_id}",
         "POINTS=2", "COMMENT=ta was here"], cwd=REPO, capture_output=True, text=True,
        env={**run.env, "NBGRADER_DB_URL": url}, timeout=BLOCK_SECONDS)
    assert done.returncode == 0, done.stdout + done.stderr
    with database(run, "ta") as db:
        assert db.execute("UPDATE submitted_notebook SET flagged = true").rowcount == 1
        for table, column, value in (("grade", "manual_score", 2),
                                     ("comment", "manual_comment", "ta was here")):
            assert db.execute(f"SELECT t.{column} FROM {table} t JOIN base_cell c ON c.id = "
                              "t.cell_id WHERE c.name = %s", [answer.grade_id]
                              ).fetchall() == [(value,)]
        for sql in ("ALTER TABLE grade ADD COLUMN forged integer", "DROP TABLE grade",
                    "UPDATE course_grading SET status = 'graded'"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                db.execute(sql)


STEPS = {
    # README.md, "For instructors and maintainers"
    "make build": Step(after=the_course),
    "make collect": Step(before=a_moodle_download, after=the_term),
    # docs/instructors.md
    "make collect DRY_RUN=1": Step(after=the_dry_run),
    "make feedback LMS=moodle": Step(after=the_moodle_upload),
    "make grades LMS=canvas TEMPLATE=canvas-export.csv":
        Step(before=a_canvas_export, after=the_canvas_grades),
    "make score A=unit1 STUDENT=alice QUESTION=q1_1_why_eps POINTS=1.5 \\":
        Step(after=scored_by_hand),
    "make formgrader": Step(before=formgrader_args, serves=serves_formgrader,
                            after=the_formgrader),
    "psql -v ON_ERROR_STOP=1 -v head_password=\"$HEAD_PASSWORD\" -v "
    "ta_password=\"$TA_PASSWORD\" <<'SQL'": Step(before=superuser),
    "make release": Step(before=as_head, after=tables_are_courses),
    "make scheduler": Step(before=scheduler_port, serves=serves_scheduler),
    "make worker": Step(serves=serves_worker),
    "make autograde": Step(before=one_student, after=graded_on_the_cluster),
}


# --- the tests --------------------------------------------------------------------------

def test_every_command_block_is_run_or_marked_and_every_marker_and_step_has_its_block():
    blocks = command_blocks()
    for file, _ in DOCS:
        found, stray = parse(file)
        assert not stray, f"{file}, lines {stray}: a not-run marker with no block after it"
        for block in found:
            assert block.not_run is None or block.not_run.strip(), f"{block}: say why not run"
    unrunnable = [str(b) for b in blocks if b.language not in RUN and not b.not_run]
    assert not unrunnable, f"blocks in a language this test cannot run, not marked: {unrunnable}"
    keys = [b.key for b in blocks if not b.not_run]
    assert not set(STEPS) - set(keys), f"steps whose block is gone: {sorted(set(STEPS) - set(keys))}"
    shared = sorted(k for k in STEPS if keys.count(k) > 1)
    assert not shared, f"a step's key is the first line of several blocks: {shared}"


def test_the_parser_reads_fences_markers_and_list_items(tmp_path, monkeypatch):
    text = ("# Top\n\n## For instructors\n\n<!-- not run by tests/test_docs.py: no Slurm -->\n"
            "- item:\n  ```python\n  import x\n\n  x.go()\n  ```\n\n```sh\n# a comment\n"
            "make a 'x # y'  # b\n```\n\n<!-- not run by tests/test_docs.py: gone -->\n\ntext\n"
            "```csv\na,b\n```\n## Next\n```\nplain\n```\n")
    (tmp_path / "x.md").write_text(text)
    monkeypatch.setitem(globals(), "REPO", tmp_path)
    blocks, stray = parse("x.md")
    assert [(b.line, b.language, b.text, b.section, b.not_run, b.key) for b in blocks] == [
        (7, "python", "import x\n\nx.go()\n", "For instructors", None, "import x"),
        (13, "sh", "# a comment\nmake a 'x # y'  # b\n", "For instructors", None, "make a 'x # y'"),
        (21, "csv", "a,b\n", "For instructors", None, "a,b"),
        (25, "", "plain\n", "Next", None, "plain")]
    assert stray == [5, 18]  # (a list item's line before the fence: not "right before")


def test_config_excerpts_are_checked():
    assert config_excerpt('import os\nc.CourseDirectory.db_url = "x"\nc.Grading.due["a"] = "b"\n')
    assert not config_excerpt("from nbgrader.api import Gradebook\nprint(1)\n")
    check_config('c.CourseDirectory.db_url = "postgresql://head@db/normalization"\n'
                 'c.Grading.timeout = 60\n')
    with pytest.raises(AssertionError, match="c.CourseDirectory has no setting dburl"):
        check_config('c.CourseDirectory.dburl = "x"\n')
    with pytest.raises(AssertionError, match="c.Grader: no configurable class"):
        check_config("c.Grader.timeout = 60\n")
    with pytest.raises(Exception, match="timeout"):
        check_config('c.Grading.timeout = "a minute"\n')


@pytest.mark.parametrize("block", [b for b in command_blocks() if not b.not_run], ids=str)
def test_the_block_runs_as_written(ran, block):
    """(A marked block is not run; the first test holds it to its marker's reason.)"""
    outcome = ran.outcomes[block]
    assert outcome is None, f"{block} ({ran.seconds[block]:.0f} s): {outcome}"
    print(f"{block}: {ran.seconds[block]:.1f} s")


def test_score_runs_from_another_folder_and_refuses_each_wrong_argument(
        ran, tmp_path, monkeypatch):
    """make -C the repository, from elsewhere, on the course's SQLite gradebook (the
    docs' term graded alice and bob there); and each wrong argument stops it with one
    message naming it, nothing written."""
    from tools.instructor import gradebook
    from tools.instructor.score import score

    monkeypatch.delenv("NBGRADER_DB_URL", raising=False)
    course, env = ran.course, clean_environment()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = subprocess.run(["make", "-C", str(REPO), "score", f"COURSE_DIR={course}", "A=unit1",
                           "STUDENT=bob", "QUESTION=q1_1_why_eps", "POINTS=0.5"],
                          cwd=elsewhere, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "unit1 bob q1_1_why_eps: 0.5 / 2 by hand (before: not graded)" in done.stdout
    with gradebook.connect(course) as gb:
        before = gb.find_grade("q1_1_why_eps", "01_layernorm_forward", "unit1", "bob")
        assert (before.manual_score, before.needs_manual_grade) == (0.5, False)
    wrong = [
        (("unit10", "bob", "q1_1_why_eps", "1"), "no assignment unit10 in"),
        (("unit1 unit2", "bob", "q1_1_why_eps", "1"), "score: A names one, not 2"),
        (("unit1", "", "q1_1_why_eps", "1"), "score: STUDENT names one, not 0"),
        (("unit1", "../bob", "q1_1_why_eps", "1"), "score: STUDENT='../bob': a student id"),
        (("unit1", "carol", "q1_1_why_eps", "1"),
         "score: no submission of 'carol' for unit1 in the gradebook (make autograde records "
         "one; it has 2: alice, bob)"),
        (("unit1", "bob", "q2_2_sum_hides", "1"),
         "score: unit1 has no question 'q2_2_sum_hides': its written questions are "
         "q1_1_why_eps; its checks ex1_1_layer_norm_stats, ex1_2_layer_norm_forward"),
        (("unit1", "bob", "q1_1_why_eps", "2.5"),
         "score: POINTS='2.5' is not a number from 0 to 2 (q1_1_why_eps is worth 2 points)"),
        (("unit1", "bob", "q1_1_why_eps", "nan"), "score: POINTS='nan' is not a number"),
        (("unit1", "bob", "q1_1_why_eps", "-1"), "score: POINTS='-1' is not a number"),
    ]
    for args, message in wrong:
        with pytest.raises(SystemExit, match=re.escape(message)):
            score(course, *args)
    with gradebook.connect(course) as gb:
        assert gb.find_grade("q1_1_why_eps", "01_layernorm_forward", "unit1",
                             "bob").manual_score == 0.5


def test_the_readmes_new_exercise_takes_a_number_and_a_file_the_registry_does_not_hold():
    """README's "Adding an exercise" example: its one exercise number is the next of its
    unit (so it reads as an addition), held by no exercise, and its file, grade_id and
    notebook agree with the registry's conventions and are free."""
    from tools.course.exercises import SOLUTIONS, by_number, exercises, notebooks, unit
    from tools.course.markers import EXERCISE

    readme = (REPO / "README.md").read_text()
    start = readme.index("**Adding an exercise**")
    example = readme[start:readme.index("\n- ", start)]
    numbers = set(EXERCISE.findall(example)) | set(
        re.findall(r'"(\d+\.\d+)"', example))
    [number] = numbers
    assert number not in by_number()
    unit_of = int(number.split(".")[0])
    held = [int(e.number.split(".")[1]) for e in exercises() if e.unit == unit_of]
    assert int(number.split(".")[1]) == max(held) + 1
    assert f"Say Unit {unit_of} gains Exercise {number}," in example
    [name] = set(re.findall(r"`(\w+)` in a new `normlib/", example))
    [file] = set(re.findall(r"a new `(normlib/\w+\.py)`", example))
    assert not (SOLUTIONS / file).exists() and not (REPO / file).exists()
    assert file not in {e.file for e in exercises()}
    marker = dataclasses.replace(exercises()[0], number=number).marker  # (the registry's rule)
    grade_id = f"{marker}_{name}"
    assert f"`{grade_id}`" in example and grade_id not in {e.grade_id for e in exercises()}
    [notebook] = re.findall(r"`solutions/(\w+)\.ipynb`", example)
    assert notebook in [n.stem for n in notebooks() if unit(n.stem) == unit_of]
