"""The Jupyter servers of the course: the student's `make lab` switches nbgrader's assignment
list on only with an exchange (what it serves, and how it looks in a browser: tests/
test_browser.py); the instructor's JupyterLab in a built course has the formgrader."""

import contextlib
import http.client
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request

from tests.conftest import REPO, free_port
from tools.course.exercises import notebooks
from tools.instructor.build import build_course

TOKEN = "course-test"


def get(port, path, timeout=5):
    url = f"http://127.0.0.1:{port}{path}{'&' if '?' in path else '?'}token={TOKEN}"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, ""


def _start(target, cwd, port, make_vars, env):
    """`make target` with a Jupyter server on port; the process once it answers there, or
    None if it exited first (another process, e.g. a test's kernel, took the port)."""
    args = (f"--no-browser --port={port} --ServerApp.port_retries=0 --ServerApp.ip=127.0.0.1 "
            f"--IdentityProvider.token={TOKEN}")
    server = subprocess.Popen(["make", "--no-print-directory", target, f"LAB_ARGS={args}",
                               *make_vars], cwd=cwd, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True,
                              env={**os.environ, **(env or {})})
    deadline = time.monotonic() + 90
    while server.poll() is None:
        try:
            if get(port, "/api/status")[0] == 200:
                return server
        except (OSError, http.client.HTTPException):  # not up yet, or not Jupyter on port
            pass
        assert time.monotonic() < deadline, "JupyterLab did not answer in 90 s"
        time.sleep(0.5)
    return None


@contextlib.contextmanager
def serving(target, cwd, *make_vars, env=None):
    """Run `make target` (a Jupyter server; env: more environment variables) until it
    answers on a free port, and yield the port; stop it afterwards. Other tests start
    kernels that take ports at random, so a port found free may be taken before Jupyter
    binds it: the server then exits (no port retries) and starts again on another."""
    for _ in range(3):
        port = free_port()
        server = _start(target, cwd, port, make_vars, env)
        if server is not None:
            break
    else:
        raise AssertionError(f"make {target} exited three times before answering")
    try:
        yield port
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


def redirect(port, path):
    """Where the server sends a request for path (its Location header)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("GET", f"{path}?token={TOKEN}")
    response = connection.getresponse()
    return response.status, response.getheader("Location")


STUDENT_OFF = ["@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment",
               "@jupyter/nbgrader:course-list", "@jupyter/nbgrader:assignment-list",
               "@jupyter/nbgrader:menu", "@jupyterlab/apputils-extension:announcements"]


def test_the_assignment_list_is_on_only_with_an_exchange(tmp_path, monkeypatch):
    """tools.student.lab: an exchange (nbgrader's Exchange.root, a folder that exists) switches the
    assignment list back on; without one the panel would only show errors."""
    from jupyterlab_server.config import get_static_page_config

    from tools.student.lab import config_path, exchange_root

    config = tmp_path / "config"
    config.mkdir()
    (config / "nbgrader_config.py").write_text(
        f"c = get_config()\nc.Exchange.root = {str(tmp_path / 'exchange')!r}\n")
    monkeypatch.setenv("JUPYTER_CONFIG_PATH", str(config))
    assert exchange_root() is None  # configured, but the folder does not exist
    (tmp_path / "exchange").mkdir()
    assert exchange_root() == tmp_path / "exchange"
    for exchange, listed in [(None, False), (tmp_path / "exchange", True)]:
        monkeypatch.setenv("JUPYTER_CONFIG_PATH", config_path(exchange))
        disabled = get_static_page_config()["disabledExtensions"]
        on = {name for name, off in disabled.items() if not off}
        exchange_panels = {"@jupyter/nbgrader:assignment-list", "@jupyter/nbgrader:menu"}
        assert exchange_panels <= on if listed else not exchange_panels & on
        assert {name for name in STUDENT_OFF if disabled.get(name)} == \
            set(STUDENT_OFF) - (exchange_panels if listed else set())


def test_the_formgrader_serves_a_built_course(tmp_path):
    """`make formgrader`: JupyterLab in a course built by `make build`, with the
    formgrader, which lists the course's assignments."""
    root = build_course(tmp_path / "course")
    with serving("formgrader", REPO, f"COURSE_DIR={root}") as port:
        # (the first request creates the gradebook: slow on a loaded machine)
        assert get(port, "/formgrader", timeout=120)[0] == 200
        status, body = get(port, "/formgrader/api/assignments", timeout=60)
        assert status == 200
        units = [f"unit{n}" for n in range(1, len(notebooks()) + 1)]
        assert sorted(a["name"] for a in json.loads(body)) == units
