"""The gradebook's URL is checked before a step uses it (tools/gradebook.py,
check_reachable): a PostgreSQL URL whose driver is missing, or whose server does not
answer, stops the step with one message naming what is wrong and where, its password
hidden; a SQLite file passes. (Issue 28 adds the round trip on a real server.)"""

import socket
import sys

import pytest

from tools import instructor
from tools.gradebook import check_reachable


def closed_port():
    """A local port that nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_sqlite_gradebook_needs_no_server(tmp_path):
    check_reachable(f"sqlite:///{tmp_path / 'gradebook.db'}")


def test_an_unreachable_server_is_named_without_the_password():
    port = closed_port()
    with pytest.raises(SystemExit) as stopped:
        check_reachable(f"postgresql://grader:s3cret@127.0.0.1:{port}/course")
    message = str(stopped.value)
    assert message.startswith(f"cannot reach the gradebook's server at 127.0.0.1:{port} "
                              f"(postgresql://grader:***@127.0.0.1:{port}/course)"), message
    assert "Connection refused" in message and "NBGRADER_DB_URL" in message
    assert "s3cret" not in message


def test_a_missing_driver_is_named(monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)  # (import psycopg fails)
    with pytest.raises(SystemExit, match="needs the Python driver 'psycopg', which is not "
                                         "installed"):
        check_reachable(f"postgresql://grader@127.0.0.1:{closed_port()}/course")


def test_the_driver_is_in_the_environment():
    import psycopg

    assert psycopg.pq.__impl__ in ("binary", "c")  # (no system libpq needed)


def test_a_step_stops_before_it_starts_on_an_unreachable_gradebook(monkeypatch, tmp_path):
    monkeypatch.setenv("NBGRADER_DB_URL", f"postgresql://grader@127.0.0.1:{closed_port()}/c")
    for step in ("release", "collect", "autograde", "feedback", "export"):
        with pytest.raises(SystemExit, match="cannot reach the gradebook's server"):
            instructor.main([step, str(tmp_path / "course")])
