"""The gradebook (tools.course.settings.gradebook_url): nbgrader's records (each check's and
written answer's score, submission times, due dates) and one table of the course's own,
`course_grading`: for each graded submission, its status, the digest of the files it was
graded from (so that a resubmission, and only a resubmission, is graded again) and when.
The head alone writes it: release (nbgrader's definitions of the assignments), collect
(the students' names), autograde (the records, due dates and statuses), score and the
formgrader (hand grades); grades reads it, and so does nbgrader's feedback step.
The rest of the course's state is in its folders (submitted/, autograded/, the
provenances of downloaded/<assignment>/collected.json).
"""

import datetime
import functools
import hashlib
import sys
import tempfile
from pathlib import Path, PurePosixPath

from sqlalchemy import Column, DateTime, String, Text, create_engine, make_url
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, declarative_base
from sqlalchemy.pool import NullPool

from tools.course.folder import files_of, nbgrader_in_process
from tools.course.settings import gradebook_url
from tools.instructor.roster import split_name

_Base = declarative_base()

class Graded(_Base):
    """One graded submission: its status ("graded", "graded; why", "failed: why") and the
    digest of submitted/<student>/<assignment>/ it was graded from."""

    __tablename__ = "course_grading"
    assignment = Column(String(128), primary_key=True)
    student = Column(String(128), primary_key=True)
    status = Column(Text, nullable=False)
    digest = Column(String(64), nullable=False)
    graded_at = Column(DateTime, nullable=False)


CONNECT_TIMEOUT = 5  # seconds a server may take to answer


def check_reachable(url):
    """Exit with one message where the gradebook at url (a SQLAlchemy URL) cannot be used:
    its database's Python driver is missing, or its server does not answer within
    CONNECT_TIMEOUT seconds. A SQLite file needs neither. The message shows the URL without
    its password."""
    address = make_url(url)
    if address.get_backend_name() == "sqlite":
        return
    shown = address.render_as_string(hide_password=True)
    try:
        engine = create_engine(url, connect_args={"connect_timeout": CONNECT_TIMEOUT})
    except ModuleNotFoundError as error:  # SQLAlchemy imports the driver here
        sys.exit(f"the gradebook {shown} needs the Python driver {error.name!r}, which is not "
                 "installed: `make` installs it (pyproject.toml pins psycopg for "
                 "postgresql://), or pip install it into this environment")
    try:
        with engine.connect():
            pass
    except OperationalError as error:
        reason = str(error.orig).strip().splitlines()[0] if error.orig else str(error)
        sys.exit(f"cannot reach the gradebook's server at {address.host}:{address.port or 5432}"
                 f" ({shown}): {reason}. Start the server, or correct the URL "
                 "(NBGRADER_DB_URL, and c.CourseDirectory.db_url in the course's "
                 "nbgrader_config_local.py)")
    finally:
        engine.dispose()


def connect(root):
    """nbgrader's Gradebook of the course at root (a `with` block closes it)."""
    from nbgrader.api import Gradebook

    nbgrader_in_process()
    return Gradebook(gradebook_url(root))


# nbgrader's tables that define a course (filled by generate_assignment), not its students
DEFINITIONS = ("course", "assignment", "notebook", "base_cell", "source_cell", "grade_cells",
               "solution_cells", "task_cells", "alembic_version")


def definitions(root):
    """The bytes of a SQLite gradebook holding the rows of DEFINITIONS of the course at
    root's gradebook, and no student: what a grading worker's scratch course starts from
    (tools/worker/task.py). nbgrader autograde needs them: its cells' sources and points."""
    from nbgrader.api import Base
    from sqlalchemy import MetaData, Table, insert, select

    source = create_engine(gradebook_url(root))
    with tempfile.TemporaryDirectory() as tmp:
        target = create_engine(f"sqlite:///{Path(tmp) / 'gradebook.db'}")
        Base.metadata.create_all(target)
        with source.connect() as read, target.begin() as write:
            for name in DEFINITIONS:
                table = Base.metadata.tables.get(name)
                if table is None:  # (alembic's own table: as the source has it)
                    table = Table(name, MetaData(), autoload_with=read)
                    table.create(write)
                rows = [dict(row) for row in read.execute(select(table)).mappings()]
                if rows:
                    write.execute(insert(table), rows)
        source.dispose()
        target.dispose()
        return (Path(tmp) / "gradebook.db").read_bytes()


def _session(root):
    engine = _engine(gradebook_url(root))
    _Base.metadata.create_all(engine)  # (beside nbgrader's tables, in a gradebook new or
    return Session(engine)  # made anew, as a rebuilt course's: one query where it is there)


@functools.cache
def _engine(url):
    """One engine per gradebook and command. (SQLite's connections are not pooled: none
    holds a file that a step replaces.)"""
    return create_engine(url, **({"poolclass": NullPool} if url.startswith("sqlite") else {}))


def digest(folder):
    """The SHA-256 of a submission folder: every file's path and bytes (digest_of its
    files). Read from the files as they are whenever a step asks (autograde.pending,
    grades._newer), never stored at collect: submitted/ has writers other than make
    collect (an instructor's hand, a plain `nbgrader collect`), and a stored digest would
    miss their change, so a changed submission would silently keep its old grade. It costs
    a read of the files: 4 ms for the seven solution notebooks and normlib/ (3.8 MB)."""
    return digest_of(files_of(folder))


def digest_of(files):
    """The SHA-256 of a submission's files as read ({path relative to its folder: bytes},
    tools.course.folder.files_of): what a grading task records of the files it carries."""
    sha = hashlib.sha256()
    for rel, data in sorted(files.items(), key=lambda item: PurePosixPath(item[0])):
        sha.update(len(rel.encode()).to_bytes(8, "big") + rel.encode())
        sha.update(len(data).to_bytes(8, "big") + data)
    return sha.hexdigest()


def graded(root):
    """{(assignment, student): Graded} of every submission graded so far."""
    with _session(root) as session:
        return {(g.assignment, g.student): g for g in session.query(Graded)}


def set_graded(root, found):
    """Set each submission's grading status: {(assignment, student): (status, digest)},
    replacing what was there."""
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    with _session(root) as session, session.begin():
        for (assignment, student), (status, sha) in found.items():
            session.merge(Graded(assignment=assignment, student=student, status=status,
                                 digest=sha, graded_at=now))


def name_students(root, roster, ids):
    """Create or update each student of ids in the course's gradebook (nbgrader's student
    table, which formgrader shows) with the roster's name and email; a student the roster
    does not list (collected without one) is left as it is."""
    rows = {r["student_id"]: r for r in roster}
    with connect(root) as gradebook:
        for student in sorted(set(ids) & set(rows)):
            first, last = split_name(rows[student])
            email = {"email": rows[student]["email"]} if rows[student].get("email") else {}
            gradebook.update_or_create_student(student, first_name=first, last_name=last,
                                               **email)  # (no email: the table's kept)
