"""The instructor's settings of a course, read once per command from its nbgrader config
into one typed object (Settings); of these, grading's processes get the limits (below).

An instructor sets them in the course's nbgrader_config_local.py (docs/instructors.md,
step 4, "The course's settings", lists each):

    c.Grading.timeout = 30                  # seconds a check may run (a cell, with --execute)
    c.Grading.memory_mb = 8192              # memory of each grading process
    c.Grading.due = {"unit1": "2026-10-05 23:59 +02:00"}   # late after this

The limits (Limits, tools/sandboxed/limits.py) go to each grading task as they are, and to
the judge and its runner as JSON (Limits.to_json). nbgrader's autograde gets them as config:
the task sets them back into c.Grading (tools/worker/task.py), and GradingExecute rebuilds a
Limits from it (Grading.limits) for each kernel's start-up line (tools/worker/execute.py).
"""

import copy
import dataclasses
import functools
import os
import sys
from pathlib import Path

from traitlets import Bool, Dict, Enum, Float, Integer, List, TraitError, Unicode
from traitlets.config import Configurable

from tools.course.late import UNITS, Policy, course_date, course_zone, policy
from tools.lms.downloads import FORMATS, PATTERNS, TimeError, patterns, zone
from tools.sandboxed.limits import BUSY, Limits  # noqa: F401 (BUSY: a status the head reads)

_DEFAULT = Limits()


class Grading(Configurable):
    """The course's grading settings, as the nbgrader config sets them (c.Grading.*)."""

    timeout = Integer(_DEFAULT.timeout, help="Seconds a check may run before it fails "
                      "(the checks take a second or two)").tag(config=True)
    notebook_timeout = Integer(_DEFAULT.notebook_timeout, help="Seconds all the checks of a "
                               "submission may run together (with --execute: a whole "
                               "notebook)").tag(config=True)
    startup_timeout = Integer(_DEFAULT.startup_timeout, help="Seconds a grading process may "
                              "take to start (torch's import), on top").tag(config=True)
    compile_timeout = Integer(_DEFAULT.compile_timeout, help="Seconds a check's compile "
                              "step may take (Numba compiling a kernel of Exercises 7.3 and "
                              "7.4), before its own time starts").tag(config=True)
    memory_mb = Integer(_DEFAULT.memory_mb, help="Address space of each grading process "
                        "(the judge's runner, a kernel), MiB").tag(config=True)
    file_mb = Integer(_DEFAULT.file_mb, help="Largest file a grading process may write, "
                      "MiB").tag(config=True)
    output_bytes = Integer(_DEFAULT.output_bytes, help="With --execute, bytes of one output "
                           "(a cell's stdout, an image) the grading worker keeps as they "
                           "arrive; the rest is dropped, with a note").tag(config=True)
    cell_output_bytes = Integer(_DEFAULT.cell_output_bytes, help="With --execute, bytes of "
                                "one cell's outputs kept").tag(config=True)
    notebook_output_bytes = Integer(_DEFAULT.notebook_output_bytes, help="With --execute, "
                                    "bytes of a notebook's outputs kept").tag(config=True)
    record_timeout = Integer(_DEFAULT.record_timeout, help="Seconds nbgrader's autograde may "
                             "take to record one submission (with --execute, its runs' "
                             "limits on top); past it, the submission is failed, saying "
                             "so").tag(config=True)
    feedback_timeout = Integer(_DEFAULT.feedback_timeout, help="Seconds generate_feedback "
                               "may take for one page; past it, the page is not written, "
                               "saying so").tag(config=True)
    protected = List(Unicode(), help="Folders student code may not read: the course "
                     "directory, solutions/ (the course's nbgrader_config.py sets them)"
                     ).tag(config=True)
    due = Dict(value_trait=Unicode(), help='Due date of each assignment, ISO 8601 with '
               'its time zone: {"unit1": "2026-10-05 23:59 +02:00"}; later submissions are '
               "marked late in grades.csv").tag(config=True)
    roster = Unicode("", help="A CSV of the class (lms_id, student_id, name; email), relative "
                     "to the course folder: LMS zips are matched to it, never guessed"
                     ).tag(config=True)
    group_assignments = List(Unicode(), help="Assignments a group submits once for all its "
                             "members (Moodle's team submissions, Canvas's group "
                             "assignments): each entry is collected for every member of its "
                             "group, as the roster's group column lists them").tag(config=True)
    roster_encoding = Unicode("", help="The roster's encoding (utf-8, utf-16, cp1252, "
                              "iso-8859-2, ...); empty: detected (UTF-8 with or without its "
                              "byte-order mark, UTF-16 with it, else Windows-1252). "
                              "ROSTER_ENCODING, if set, wins").tag(config=True)
    lms_timezone = Unicode("", help="The IANA time zone of the dates the LMS writes (Moodle's "
                           "grading worksheet, Blackboard's and Brightspace's names: the "
                           "downloading account's), e.g. 'Europe/Berlin'").tag(config=True)
    lms_formats = Dict(value_trait=Unicode(), help="strptime formats of the LMS's dates, "
                       "over tools.lms.downloads.FORMATS (moodle, blackboard, "
                       "brightspace, export): a worksheet in another language, say"
                       ).tag(config=True)
    lms_patterns = Dict(value_trait=Unicode(), help="Regular expressions of Blackboard's and "
                        "Brightspace's entry names, over tools.lms.downloads.PATTERNS (their named "
                        "groups: tools.lms.downloads.NEEDED, and rest for the file's name)"
                        ).tag(config=True)
    timezone = Unicode("", help="The course's IANA time zone, e.g. 'Europe/Berlin': due "
                       "dates and extensions written without an offset are read in it, "
                       "logs/late.csv shows times in it").tag(config=True)
    late_grace_minutes = Integer(0, help="Minutes late with no penalty").tag(config=True)
    late_penalty = Float(0.0, help="Percent of the autograded score taken per started "
                         "late_per of lateness (0: none)").tag(config=True)
    late_per = Enum(list(UNITS), "day", help="The unit of late_penalty: 'hour' or 'day' "
                    "(24 hours)").tag(config=True)
    late_floor = Float(0.0, help="Percent of its score a late submission keeps at least"
                       ).tag(config=True)
    late_written = Bool(False, help="Whether the penalty takes the written answers' "
                        "points too").tag(config=True)
    late_unknown_penalty = Float(None, allow_none=True, help="Flat percent taken where the "
                                 "LMS marked a submission late without its time (Canvas's "
                                 "_LATE); None: nothing").tag(config=True)
    extensions = Dict(value_trait=Dict(value_trait=Unicode()), help='A student\'s own due '
                      'date: {"unit1": {"s1004": "2026-10-08 23:59 +02:00"}}'
                      ).tag(config=True)
    lms_columns = Dict(value_trait=Unicode(), help='The title of each assignment\'s column '
                       'in the LMS\'s gradebook, where it is not the assignment\'s name: '
                       '{"unit1": "Unit 1: LayerNorm forward"} (tools/instructor/grade_sheet.py)'
                       ).tag(config=True)

    def limits(self):
        """The Limits these settings set (every field of Limits is a setting here)."""
        return Limits(**{f.name: getattr(self, f.name) for f in dataclasses.fields(Limits)
                         if f.name != "protected"}, protected=tuple(self.protected))


@dataclasses.dataclass(frozen=True)
class Settings:
    limits: Limits
    due: dict  # {assignment: an aware datetime}
    roster: Path | None  # the roster's CSV, if the course has one
    lms_timezone: object = None  # a ZoneInfo, or None (not set: no LMS date is read)
    lms_formats: dict = dataclasses.field(default_factory=lambda: dict(FORMATS))
    late: Policy = dataclasses.field(default_factory=Policy)  # tools/course/late.py
    lms_columns: dict = dataclasses.field(default_factory=dict)  # {assignment: its title}
    lms_patterns: dict = dataclasses.field(default_factory=lambda: dict(PATTERNS))  # compiled
    roster_encoding: str | None = None  # given (ROSTER_ENCODING, c.Grading's); None: detected
    group_assignments: tuple = ()  # whose entries are a group's (c.Grading.group_assignments)


def due_date(text, assignment="?", tz=None):
    """An aware datetime of a due date's text (ISO 8601 with its time zone, or without one
    in the course's time zone tz)."""
    return course_date(text, f"c.Grading.due[{assignment!r}]", tz)


def config(root):
    """The traitlets Config of the course at root, as nbgrader reads it: its
    nbgrader_config.py (the repository's settings, this course's, then
    nbgrader_config_local.py). Read once per command: a copy of the one read before,
    unless a file it reads or an environment variable it uses has changed since."""
    from tools.course.exercises import REPO

    os.environ.setdefault("NORMLIB_REPO", str(REPO))  # (as tools.course.folder.nbgrader sets it)
    root = Path(root).resolve()
    files = [root / "nbgrader_config.py", root / "nbgrader_config_local.py",
             Path(os.environ["NORMLIB_REPO"]) / "nbgrader_config.py"]
    stamps = tuple(_stamp(p) for p in files)
    env = tuple(os.environ.get(name) for name in ("NORMLIB_REPO", "NBGRADER_DB_URL"))
    return copy.deepcopy(_config(root, stamps, env))


def _stamp(path):
    """(mtime, size) of a file, one stat; None where there is none."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_mtime_ns, st.st_size


@functools.lru_cache(maxsize=8)
def _config(root, stamps, env):
    """config's reading (its cache key: the files' stamps and the variables)."""
    from traitlets.config.loader import PyFileConfigLoader

    path = sys.path[:]  # (the repository's nbgrader_config.py puts itself first on it)
    try:
        return PyFileConfigLoader("nbgrader_config.py", str(root)).load_config()
    finally:
        sys.path[:] = path


def gradebook_url(root):
    """The gradebook of the course at root, as every nbgrader command of it finds it: its
    config's c.CourseDirectory.db_url (tools.course.folder.write_config: SQLite in the course
    folder, unless nbgrader_config_local.py or NBGRADER_DB_URL names another)."""
    url = config(root).CourseDirectory.get("db_url")
    if not isinstance(url, str) or not url:
        sys.exit(f"{root}/nbgrader_config.py sets no c.CourseDirectory.db_url: build the "
                 "course again (make build)")
    return url


def read(root, timeout=None):
    """The Settings of the course at root: c.Grading as its nbgrader_config.py sets it,
    with this timeout if given (the command line's)."""
    try:
        grading = Grading(config=config(root))
    except TraitError as error:  # (its message names the setting)
        raise SystemExit(f"c.Grading in {root}/nbgrader_config_local.py: {error}") from None
    roster = Path(root, grading.roster) if grading.roster else None
    if roster is not None and not roster.is_file():
        raise SystemExit(f"c.Grading.roster: no file {roster}")
    unknown = sorted(set(grading.lms_formats) - set(FORMATS))
    if unknown:
        raise SystemExit(f"c.Grading.lms_formats: no format named {', '.join(unknown)} (they "
                         f"are {', '.join(FORMATS)})")
    try:
        tz = zone(grading.lms_timezone) if grading.lms_timezone else None
    except TimeError as error:
        raise SystemExit(str(error)) from None
    try:
        names = patterns(grading.lms_patterns)
    except ValueError as error:
        raise SystemExit(f"c.Grading.lms_patterns{'' if str(error)[0] == '[' else ': '}"
                         f"{error}") from None
    course_tz = course_zone(grading.timezone)
    return Settings(grading.limits().replace(timeout=timeout),
                    {a: due_date(t, a, course_tz) for a, t in grading.due.items()}, roster, tz,
                    {**FORMATS, **grading.lms_formats}, policy(grading, course_tz),
                    dict(grading.lms_columns), lms_patterns=names,
                    roster_encoding=os.environ.get("ROSTER_ENCODING") or grading.roster_encoding
                    or None, group_assignments=tuple(grading.group_assignments))
