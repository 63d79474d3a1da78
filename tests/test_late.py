"""The late policy (tools/course/late.py), decision by decision: the grace period, a penalty per
started hour or day of the autograded score, the floor, written answers taken or not, a
student's extension, and Canvas's _LATE marker without a time (apply nothing, or the
flat penalty the config gives); and each of its settings refused by name when it is not
one (tools/course/settings.py). Every raw, penalty, final score and reason is compared exactly.
grades.csv, logs/late.csv and the LMS files carry these: tests/test_lms_grades.py."""

import datetime
import zoneinfo

import pytest

from tools.course.late import Policy, decide, number
from tools.course.settings import read
from tools.instructor.build import build_course

BERLIN = zoneinfo.ZoneInfo("Europe/Berlin")
DUE = datetime.datetime(2026, 10, 5, 23, 59, tzinfo=BERLIN)  # 21:59 UTC (CEST)
HOURLY = Policy(grace_minutes=15, penalty=10, per="hour", floor=50, zone=BERLIN,
                extensions={"unit1": {"ada": datetime.datetime(2026, 10, 7, 23, 59,
                                                                tzinfo=BERLIN)}})


def utc(*args):
    return datetime.datetime(*args, tzinfo=datetime.timezone.utc)


def outcome(decision):
    return decision.rule, decision.raw, decision.penalty, decision.final, decision.reason


@pytest.mark.parametrize("student,when,marker,expected", [
    ("bob", utc(2026, 10, 5, 21, 0), False, ("on time", 7.0, 0.0, 7.0, "on time")),
    ("bob", utc(2026, 10, 5, 22, 10), False, (  # 11 min: within the grace period
        "grace", 7.0, 0.0, 7.0, "11 min late, within the grace period of 15 min: no penalty")),
    ("bob", utc(2026, 10, 6, 0, 29, 30), False, (  # 2 h 30 min 30 s: 3 started hours
        "per hour", 7.0, 1.65, 5.35, "2 h 31 min late: 3 started hours x 10% = 30% of the "
        "autograded 5.5 = 1.65 off")),
    ("bob", utc(2026, 10, 5, 22, 59), False, (  # exactly 1 h: 1 started hour
        "per hour", 7.0, 0.55, 6.45, "1 h late: 1 started hour x 10% = 10% of the "
        "autograded 5.5 = 0.55 off")),
    ("bob", utc(2026, 10, 6, 6, 59), False, (  # 9 h: 90%, at most 50% (the floor)
        "per hour", 7.0, 2.75, 4.25, "9 h late: 9 started hours x 10% = 90%, at most 50% "
        "(c.Grading.late_floor = 50): 50% of the autograded 5.5 = 2.75 off")),
    ("ada", utc(2026, 10, 7, 20, 0), False, (  # before her extension (21:59 UTC)
        "on time", 7.0, 0.0, 7.0, "on time (extension to 2026-10-07 23:59 CEST)")),
    ("ada", utc(2026, 10, 7, 22, 30), False, (  # 31 min after her extension
        "per hour", 7.0, 0.55, 6.45, "31 min late (extension to 2026-10-07 23:59 CEST): 1 "
        "started hour x 10% = 10% of the autograded 5.5 = 0.55 off")),
    ("bob", None, True, (  # Canvas's _LATE: hours cannot be counted
        "late marker", 7.0, 0.0, 7.0, "late, time unknown (Canvas's _LATE marker): no penalty "
        "(no time to count from; c.Grading.late_unknown_penalty sets a flat one)")),
    ("ada", None, True, (  # the marker is against Canvas's due date, not her extension
        "late marker, extension", 7.0, 0.0, 7.0, "late, time unknown (Canvas's _LATE "
        "marker): no penalty, the marker is against Canvas's due date (extension to "
        "2026-10-07 23:59 CEST)")),
    ("bob", None, False, ("time unknown", 7.0, 0.0, 7.0, "time unknown: no penalty")),
])
def test_each_decision_of_an_hourly_policy(student, when, marker, expected):
    """Autograded 5.5, written 1.5: the penalty takes a share of the 5.5 alone."""
    assert outcome(decide(HOURLY, "unit1", student, DUE, when, marker, 5.5, 1.5)) == expected


def test_a_flat_penalty_for_a_late_marker_written_answers_and_days():
    flat = Policy(penalty=20, per="day", unknown=25, written=True)
    assert outcome(decide(flat, "unit1", "bob", DUE, None, True, 5.5, 1.5)) == (
        "late marker, flat", 7.0, 1.75, 5.25, "late, time unknown (Canvas's _LATE marker): "
        "flat 25% of the autograded and written 7 = 1.75 off")
    assert outcome(decide(flat, "unit1", "bob", DUE, utc(2026, 10, 7, 22, 0), False, 5.5,
                          1.5)) == (  # 2 days 1 min: 3 started days
        "per day", 7.0, 4.2, 2.8, "2 d 1 min late: 3 started days x 20% = 60% of the "
        "autograded and written 7 = 4.2 off")
    assert outcome(decide(flat, "unit2", "bob", None, utc(2026, 10, 7), False, 5.5, 1.5)) == (
        "no due date", 7.0, 0.0, 7.0, "no due date (c.Grading.due): no penalty")
    assert outcome(decide(Policy(), "unit1", "bob", DUE, utc(2026, 10, 6), False, 5.5, 0)) == (
        "no penalty set", 5.5, 0.0, 5.5, "2 h 1 min late: no penalty (c.Grading.late_penalty is 0)")


@pytest.mark.parametrize("value,text", [(7, "7"), (5.35, "5.35"), (4.2, "4.2"), (0.0, "0"),
                                        (1 / 3, "0.33"), (-0.001, "0"), (10.005, "10.01")])
def test_numbers_as_the_lms_reads_them(value, text):
    assert number(value) == text


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    return build_course(tmp_path_factory.mktemp("late") / "course", layout="unit")


@pytest.mark.parametrize("setting,message", [
    ("c.Grading.late_penalty = 120", r"c.Grading.late_penalty = 120.0 is not a percentage"),
    ("c.Grading.late_floor = -1", r"c.Grading.late_floor = -1.0 is not a percentage"),
    ("c.Grading.late_unknown_penalty = 101",
     r"c.Grading.late_unknown_penalty = 101.0 is not a percentage"),
    ("c.Grading.late_grace_minutes = -5", r"c.Grading.late_grace_minutes = -5 is negative"),
    ("c.Grading.late_per = 'week'", r"The 'late_per' trait of a Grading instance expected any "
                                    r"of \['hour', 'day'\], not the str 'week'"),
    ("c.Grading.late_penalty = 'ten'", r"The 'late_penalty' trait .* expected a float"),
    ("c.Grading.timezone = 'Mars/Olympus'", r"c.Grading.timezone = 'Mars/Olympus' is not a "
                                            r"time zone"),
    ("c.Grading.extensions = {'unit1': {'ada': 'soon'}}",
     r"c.Grading.extensions\['unit1'\]\['ada'\] = 'soon' is not a date"),
    ("c.Grading.extensions = {'unit1': {'ada': '2026-10-07 23:59'}}",
     r"c.Grading.extensions\['unit1'\]\['ada'\] = '2026-10-07 23:59' has no time zone"),
    ("c.Grading.extensions = {'unit1': {'../x': '2026-10-07 23:59 Z'}}",
     r"c.Grading.extensions\['unit1'\]: a student id must start with a letter or a digit"),
])
def test_a_setting_that_is_not_one_is_refused_by_name(course, setting, message):
    (course / "nbgrader_config_local.py").write_text(setting + "\n")
    with pytest.raises(SystemExit, match=message):
        read(course)


def test_dates_without_an_offset_are_in_the_course_time_zone(course):
    (course / "nbgrader_config_local.py").write_text(
        "c.Grading.timezone = 'Europe/Berlin'\n"
        "c.Grading.due = {'unit1': '2026-10-05 23:59', 'unit2': '2026-12-05 23:59'}\n"
        "c.Grading.extensions = {'unit1': {'ada': '2026-10-07 23:59 +00:00'}}\n"
        "c.Grading.late_penalty = 10\nc.Grading.late_per = 'hour'\n")
    settings = read(course)
    assert {a: d.astimezone(datetime.timezone.utc) for a, d in settings.due.items()} == {
        "unit1": utc(2026, 10, 5, 21, 59), "unit2": utc(2026, 12, 5, 22, 59)}  # CEST, CET
    assert settings.late.extensions == {"unit1": {"ada": utc(2026, 10, 7, 23, 59)}}
    assert (settings.late.penalty, settings.late.per, settings.late.floor,
            settings.late.unknown, settings.late.zone) == (10.0, "hour", 0.0, None, BERLIN)
