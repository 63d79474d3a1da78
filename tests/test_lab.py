"""`make lab` starts JupyterLab on the course: it answers on its port, serves the
notebooks, and has nbgrader's instructor panels switched off."""

import os
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

from tests.conftest import REPO

TOKEN = "course-test"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port, path):
    url = f"http://127.0.0.1:{port}{path}{'&' if '?' in path else '?'}token={TOKEN}"
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, ""


def test_make_lab_serves_the_course():
    port = free_port()
    args = f"--no-browser --port={port} --ServerApp.ip=127.0.0.1 --IdentityProvider.token={TOKEN}"
    lab = subprocess.Popen(["make", "--no-print-directory", "lab", f"LAB_ARGS={args}"], cwd=REPO,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                status, _ = get(port, "/api/status")
                if status == 200:
                    break
            except OSError:
                pass
            assert lab.poll() is None, "make lab exited"
            assert time.monotonic() < deadline, "JupyterLab did not answer in 90 s"
            time.sleep(0.5)
        status, body = get(port, "/api/contents/notebooks")
        assert status == 200 and "01_layernorm_forward.ipynb" in body
        status, page = get(port, "/lab")
        assert status == 200
        disabled = re.search(r'"disabledExtensions": \[([^\]]*)\]', page).group(1)
        assert '"@jupyter/nbgrader:formgrader"' in disabled
        assert '"@jupyter/nbgrader:create-assignment"' in disabled
        assert get(port, "/formgrader")[0] == 404  # the server extension is off
    finally:
        os.killpg(lab.pid, signal.SIGTERM)
        lab.wait(timeout=30)
