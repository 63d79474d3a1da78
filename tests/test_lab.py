"""`make lab` starts JupyterLab on the course: it answers on its port, serves the
notebooks, and has nbgrader's instructor panels switched off; the instructor's JupyterLab
in a built course has them."""

import contextlib
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

from tests.conftest import REPO
from tools.course import build_course
from tools.exercises import notebooks

TOKEN = "course-test"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port, path, timeout=5):
    url = f"http://127.0.0.1:{port}{path}{'&' if '?' in path else '?'}token={TOKEN}"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, ""


def _start(target, cwd, port, make_vars):
    """`make target` with a Jupyter server on port; the process once it answers there, or
    None if it exited first (another process, e.g. a test's kernel, took the port)."""
    args = (f"--no-browser --port={port} --ServerApp.port_retries=0 --ServerApp.ip=127.0.0.1 "
            f"--IdentityProvider.token={TOKEN}")
    server = subprocess.Popen(["make", "--no-print-directory", target, f"LAB_ARGS={args}",
                               *make_vars], cwd=cwd, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
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
def serving(target, cwd, *make_vars):
    """Run `make target` (a Jupyter server) until it answers on a free port, and yield the
    port; stop it afterwards. Other tests start kernels that take ports at random, so a
    port found free may be taken before Jupyter binds it: the server then exits (no port
    retries) and starts again on another."""
    for _ in range(3):
        port = free_port()
        server = _start(target, cwd, port, make_vars)
        if server is not None:
            break
    else:
        raise AssertionError(f"make {target} exited three times before answering")
    try:
        yield port
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


def test_make_lab_serves_the_course():
    with serving("lab", REPO) as port:
        status, body = get(port, "/api/contents/notebooks")
        assert status == 200 and "01_layernorm_forward.ipynb" in body
        status, page = get(port, "/lab")
        assert status == 200
        disabled = re.search(r'"disabledExtensions": \[([^\]]*)\]', page).group(1)
        assert '"@jupyter/nbgrader:formgrader"' in disabled
        assert '"@jupyter/nbgrader:create-assignment"' in disabled
        assert get(port, "/formgrader")[0] == 404  # the server extension is off


def test_the_formgrader_serves_a_built_course(tmp_path):
    """`make formgrader`: JupyterLab in a course built by `make course`, with the
    formgrader, which lists the course's assignments."""
    root = build_course(tmp_path / "course")
    with serving("formgrader", REPO, f"COURSE_DIR={root}") as port:
        # (the first request creates the gradebook: slow on a loaded machine)
        assert get(port, "/formgrader", timeout=120)[0] == 200
        status, body = get(port, "/formgrader/api/assignments", timeout=60)
        assert status == 200
        units = [f"unit{n}" for n in range(1, len(notebooks()) + 1)]
        assert sorted(a["name"] for a in json.loads(body)) == units
