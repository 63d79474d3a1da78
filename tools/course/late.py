"""The late policy: what lateness costs, decided for each submission graded
(tools/instructor/grades.py applies it to grades.csv, the LMS's grades file and
logs/late.csv). Its settings, in nbgrader_config_local.py: c.Grading.timezone, due,
extensions, late_grace_minutes, late_penalty, late_per, late_floor, late_written and
late_unknown_penalty (docs/instructors.md, "Late policies", says what each does).

The due dates are the course config's, never the LMS's; an extension replaces the
assignment's for its student. The submission that counts is the one graded, at the time
the LMS gave it (tools/instructor/collect.py). Past the grace period the penalty is
late_penalty percent per started hour (or day), at most 100 - late_floor, of the
autograded score. Where the LMS said "late" without a time (Canvas's _LATE), nothing is
taken unless late_unknown_penalty gives a flat percent; where nothing gives the time,
nothing is taken. Each decision says why in words (Decision.reason).
"""

import dataclasses
import datetime
import math
import zoneinfo

UNITS = {"hour": 3600, "day": 86400}  # seconds of a started unit of lateness


@dataclasses.dataclass(frozen=True)
class Policy:
    """The late policy of a course (tools.course.settings.read builds it from c.Grading)."""
    grace_minutes: int = 0
    penalty: float = 0.0  # percent per started unit
    per: str = "day"  # a key of UNITS
    floor: float = 0.0  # percent of its score a late submission keeps at least
    written: bool = False  # the penalty takes the written answers' points too
    unknown: float | None = None  # flat percent where the LMS said late without a time
    extensions: dict = dataclasses.field(default_factory=dict)  # {assignment: {student: when}}
    zone: object = None  # the course's ZoneInfo (None: times shown in UTC)


@dataclasses.dataclass(frozen=True)
class Decision:
    """What the policy decided of one graded submission: its due date and extension
    (aware, or None), when it was submitted (aware, or None), how many seconds late (None:
    not known), the rule applied, the raw score, the penalty, the final score, and why."""
    due: datetime.datetime | None
    extension: datetime.datetime | None
    submitted: datetime.datetime | None
    late: float | None
    rule: str
    raw: float
    penalty: float
    final: float
    reason: str


def course_date(text, setting, tz):
    """The aware datetime of a date the course config gives (ISO 8601; without an offset, in
    the course's time zone tz), or SystemExit naming the setting."""
    try:
        when = datetime.datetime.fromisoformat(text)
    except (TypeError, ValueError):
        raise SystemExit(f"{setting} = {text!r} is not a date (write it as 2026-10-05 23:59 "
                         "+02:00)") from None
    if when.tzinfo is None:
        if tz is None:
            raise SystemExit(f"{setting} = {text!r} has no time zone (write it as 2026-10-05 "
                             "23:59 +02:00, or Z for UTC, or set c.Grading.timezone)")
        when = when.replace(tzinfo=tz)
    return when


def course_zone(name):
    """The ZoneInfo of c.Grading.timezone (None if unset), or SystemExit naming it."""
    if not name:
        return None
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise SystemExit(f"c.Grading.timezone = {name!r} is not a time zone (write it as IANA "
                         "names it: 'Europe/Berlin', 'America/New_York', 'UTC')") from None


def policy(grading, tz):
    """The Policy of c.Grading (a tools.course.settings.Grading), its dates read in the course's
    time zone tz; SystemExit naming the first setting that is not one."""
    from tools.course.bounds import id_problem

    percents = {"late_penalty": grading.late_penalty, "late_floor": grading.late_floor,
                "late_unknown_penalty": grading.late_unknown_penalty}
    for name, value in percents.items():
        if value is not None and not 0 <= value <= 100:
            raise SystemExit(f"c.Grading.{name} = {value!r} is not a percentage (0 to 100)")
    if grading.late_grace_minutes < 0:
        raise SystemExit(f"c.Grading.late_grace_minutes = {grading.late_grace_minutes} is "
                         "negative")
    extensions = {}
    for assignment, students in grading.extensions.items():
        for student, text in students.items():
            problem = id_problem(student)
            if problem:
                raise SystemExit(f"c.Grading.extensions[{assignment!r}]: {problem}")
            extensions.setdefault(assignment, {})[student] = course_date(
                text, f"c.Grading.extensions[{assignment!r}][{student!r}]", tz)
    return Policy(grading.late_grace_minutes, grading.late_penalty, grading.late_per,
                  grading.late_floor, grading.late_written, grading.late_unknown_penalty,
                  extensions, tz)


def unused_extensions(policy, assignments, students):
    """[(assignment, student, "assignment" or "student": what names no one)] of the
    extensions that would apply to no one: an assignment that is not the course's
    (assignments: course.json's), or a student who is not one of students (the roster's and
    the gradebook's). Such an extension is ignored, and its student penalized as if they
    had none: tools/instructor/grades.py stops, or warns."""
    return [(assignment, student, "assignment" if assignment not in assignments else "student")
            for assignment, by_student in policy.extensions.items() for student in by_student
            if assignment not in assignments or student not in students]


def number(value):
    """A score as the LMSs read it: at most two decimals, no trailing zeros ('7.6', '10')."""
    text = f"{round(value, 2):.2f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def shown(when, zone):
    """A time as the log and the reasons show it: in the course's zone (else UTC)."""
    return when.astimezone(zone or datetime.timezone.utc).strftime("%Y-%m-%d %H:%M %Z")


def _taken(policy, percent, base, what):
    """(points taken, the words of it) of a penalty of percent of base (what: its words),
    at most 100 - the floor's percent."""
    cap = 100 - policy.floor
    words = f"{number(percent)}%"
    if percent > cap:
        words += f", at most {number(cap)}% (c.Grading.late_floor = {number(policy.floor)}):"
        words += f" {number(cap)}%"
        percent = cap
    points = round(base * percent / 100, 2)
    return points, f"{words} of {what} {number(base)} = {number(points)} off"


def decide(policy, assignment, student, due, when, late_marker, auto, written,
           lms_extension=None):
    """The Decision of one graded submission: its assignment's due date (aware, or None),
    its time (aware, or None), whether the LMS marked it late without a time, its
    autograded and written points, and the extension the LMS granted (aware, or None:
    the course's own, c.Grading.extensions, wins)."""

    extension = policy.extensions.get(assignment, {}).get(student) or lms_extension
    deadline = extension or due
    raw = round(auto + written, 2)
    base = round(auto + written * policy.written, 2)
    what = "the autograded and written" if policy.written else "the autograded"

    def decision(late, rule, penalty, reason):
        return Decision(due, extension, when, late, rule, raw, penalty,
                        round(raw - penalty, 2), reason)

    granted = f" (extension to {shown(extension, policy.zone)})" if extension else ""
    if when is None and late_marker:
        said = "late, time unknown (Canvas's _LATE marker)"
        if extension:
            return decision(None, "late marker, extension", 0.0, f"{said}: no penalty, the "
                            f"marker is against Canvas's due date{granted}")
        if policy.unknown is None:
            return decision(None, "late marker", 0.0, f"{said}: no penalty (no time to count "
                            "from; c.Grading.late_unknown_penalty sets a flat one)")
        points, words = _taken(policy, policy.unknown, base, what)
        return decision(None, "late marker, flat", points, f"{said}: flat {words}")
    if when is None:
        return decision(None, "time unknown", 0.0, "time unknown: no penalty")
    if deadline is None:
        return decision(None, "no due date", 0.0, "no due date (c.Grading.due): no penalty")
    utc = datetime.timezone.utc  # (two times of one zone subtract as clocks: not across DST)
    late = (when.astimezone(utc) - deadline.astimezone(utc)).total_seconds()
    if late <= 0:
        return decision(late, "on time", 0.0, "on time" + granted)
    lateness = late_words(late) + granted
    if late <= policy.grace_minutes * 60:
        return decision(late, "grace", 0.0, f"{lateness}, within the grace period of "
                        f"{policy.grace_minutes} min: no penalty")
    if not policy.penalty:
        return decision(late, "no penalty set", 0.0, f"{lateness}: no penalty "
                        "(c.Grading.late_penalty is 0)")
    started = math.ceil(late / UNITS[policy.per])
    points, words = _taken(policy, started * policy.penalty, base, what)
    return decision(late, f"per {policy.per}", points, f"{lateness}: {started} started "
                    f"{policy.per}{'s' * (started > 1)} x {number(policy.penalty)}% = {words}")


LOG = ["assignment", "student_id", "due", "extension", "submitted", "late_by", "rule", "raw",
       "penalty", "final", "reason"]  # the columns of logs/late.csv


def log_row(assignment, student, decision, zone):
    """A row of logs/late.csv (LOG's columns) of a submission's Decision (None: not
    submitted, or not graded yet)."""

    if decision is None:
        return [assignment, student, "", "", "", "", "not graded", "", "", "", ""]
    d = decision
    late = "unknown" if d.late is None else late_words(d.late)
    return [assignment, student, *(shown(t, zone) if t else "" for t in (
        d.due, d.extension, d.submitted)), late, d.rule, d.raw, d.penalty, d.final, d.reason]


def late_words(seconds):
    """'2 h 5 min late' of a number of seconds late ('' if on time)."""
    if seconds <= 0:
        return ""
    minutes = int(seconds + 59) // 60
    days, hours, minutes = minutes // 1440, minutes // 60 % 24, minutes % 60
    parts = [f"{days} d" * bool(days), f"{hours} h" * bool(hours), f"{minutes} min" * bool(
        minutes)]
    return " ".join(p for p in parts if p) + " late"
