"""tools/sandboxed/guard.py, in a fresh process laid out as at grading: the submission's folder
inside a protected course folder. Each attempt reports what it raised (None: allowed)."""

import json
import subprocess
import sys
import textwrap

from tests.conftest import REPO

PROBE = textwrap.dedent("""
    import json, os, sqlite3, subprocess, sys, tempfile
    sys.path.append(sys.argv[1])
    from tools.sandboxed import guard
    guard.install(os.getcwd(), [sys.argv[2]], memory_mb=1024, file_mb=64)

    def attempt(action):
        try:
            action()
        except BaseException as error:
            return type(error).__name__
        return None

    results = {
        "read own file": attempt(lambda: open("own.txt").read()),
        "write own file": attempt(lambda: open("new.txt", "w").write("x")),
        "write a temporary file": attempt(lambda: tempfile.mkstemp()),
        "read outside the course": attempt(lambda: open(sys.executable, "rb").read(10)),
        "read the course": attempt(lambda: open("../../gradebook.db").read()),
        "list the course": attempt(lambda: os.listdir("../..")),
        "write beside the course": attempt(lambda: open("/nonexistent-dir/x.txt", "w")),
        "delete outside": attempt(lambda: os.remove("/nonexistent-dir/x.txt")),
        "start a process": attempt(lambda: subprocess.run(["true"])),
        "run a shell": attempt(lambda: os.system("true")),
        "open a database": attempt(lambda: sqlite3.connect("../../gradebook.db")),
        "open a database in memory": attempt(lambda: sqlite3.connect(":memory:")),
        "signal the parent": attempt(lambda: os.kill(os.getppid(), 0)),
        "allocate 2 GiB": attempt(lambda: bytearray(2 << 30)),
    }
    print(json.dumps(results))
""")


def test_the_sandbox_refuses_what_grading_forbids_and_allows_the_rest(tmp_path):
    course = tmp_path / "course"
    own = course / "autograded" / "student" / "unit1"
    own.mkdir(parents=True)
    (own / "own.txt").write_text("mine")
    (course / "gradebook.db").write_text("hidden tests")
    result = subprocess.run([sys.executable, "-c", PROBE, str(REPO), str(course)], cwd=own,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "read own file": None,
        "write own file": None,
        "write a temporary file": None,
        "read outside the course": None,
        "read the course": "PermissionError",
        "list the course": "PermissionError",
        "write beside the course": "PermissionError",  # (not FileNotFoundError: refused first)
        "delete outside": "PermissionError",
        "start a process": "PermissionError",
        "run a shell": "PermissionError",
        "open a database": "PermissionError",
        "open a database in memory": None,
        "signal the parent": "PermissionError",
        "allocate 2 GiB": "MemoryError",
    }
    assert (own / "new.txt").read_text() == "x"
