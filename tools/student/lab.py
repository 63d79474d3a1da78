"""`make lab`: JupyterLab on the course as a student should first see it.

    python -m tools.student.lab [jupyter lab flags]      (make lab LAB_ARGS="...")

- It opens on `notebooks/` (`LabApp.default_url`: JupyterLab's own setting overrides
  `ServerApp.default_url`, so the latter alone lands on the repository root).
- Of nbgrader, only what works for the student is on (tools/student/jupyter/): the
  notebook toolbar's Validate. The formgrader and create-assignment are instructors'
  panels, the course list lists formgrader services, and the Nbgrader menu holds nothing
  else; the assignment list (fetch and submit) needs an exchange, so it and the menu are
  switched back on only when one is configured (`exchange/`, the higher-priority config
  folder).
- JupyterLab's news pop-up ("get notified about official Jupyter news?") is off.
"""

import os
import subprocess
import sys
from pathlib import Path

from tools.course.exercises import REPO

STUDENT_CONFIG = REPO / "tools" / "student" / "jupyter"
NOTEBOOKS_URL = "/lab/tree/notebooks"


def exchange_root():
    """The nbgrader exchange folder the assignment list would use, if it exists (None
    otherwise): nbgrader's setting (`Exchange.root`, default /usr/local/share/nbgrader/
    exchange), from the nbgrader_config.py files of the Jupyter config folders (~/.jupyter,
    JUPYTER_CONFIG_PATH, ...), where a class's JupyterHub sets it. Not the repository's own
    nbgrader_config.py: that is the instructor's grading setup (and imports what Windows
    lacks)."""
    from nbgrader.apps import NbGrader
    from nbgrader.exchange.default.exchange import Exchange

    app = NbGrader()
    app.load_cwd_config = False
    app.load_config_file()  # (from app.config_file_paths: the Jupyter config folders)
    root = Path(Exchange(config=app.config).root)
    return root if root.is_dir() else None


def config_path(exchange, current=""):
    """JUPYTER_CONFIG_PATH: the student settings (under the exchange ones when there is an
    exchange; the first folder wins), then the folders already there (current)."""
    folders = [STUDENT_CONFIG / "exchange"] if exchange else []
    return os.pathsep.join([str(f) for f in [*folders, STUDENT_CONFIG]] +
                           ([current] if current else []))


def command(args):
    """The `jupyter lab` command line (Jupyter refuses root unless told: containers and CI
    machines often run as root)."""
    root = ["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []
    return [sys.executable, "-m", "jupyter", "lab",
            f"--ServerApp.root_dir={REPO}", f"--LabApp.default_url={NOTEBOOKS_URL}",
            *root, *args]


def main(argv=None):
    args = sys.argv[1:] if argv is None else argv
    os.chdir(REPO)
    exchange = exchange_root()
    if exchange:
        print(f"nbgrader exchange at {exchange}: the Nbgrader menu lists your assignments",
              flush=True)
    env = {**os.environ, "JUPYTER_CONFIG_PATH": config_path(
        exchange, os.environ.get("JUPYTER_CONFIG_PATH", ""))}
    server = subprocess.Popen(command(args), env=env)
    while True:
        try:
            return server.wait()
        except KeyboardInterrupt:  # JupyterLab got the Ctrl-C too: it asks, then stops
            pass


if __name__ == "__main__":
    sys.exit(main())
