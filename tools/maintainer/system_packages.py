"""`make test`'s first step: the system packages it needs beside the Python ones.

    python3 -m tools.maintainer.system_packages [NAME ...]
        (default: all; make screenshots: chromium; make worker: bubblewrap)

    bubblewrap  `bwrap`, grading's OS sandbox (tools/sandbox/bubblewrap.py)
    chromium    the browser of tests/test_browser.py (COURSE_CHROMIUM: another binary)
    postgresql  the server tests/postgres.py starts (COURSE_INITDB: another initdb)
    unzip       a download extracted as an instructor does, its dates kept (test_collect.py)

A missing one is installed with apt-get (as root, or by a sudo that asks no password), one
at a time; elsewhere it names each missing package and its install command and exits 1
before any test starts, as it does where `bwrap` cannot make grading's sandbox here
(tools/sandbox/probe.py). The system's python3 runs it before .venv exists: stdlib only.
"""

import glob
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass

from tools.sandbox.probe import sandbox_refusal


@dataclass(frozen=True)
class Package:
    name: str  # the package, in Debian's archive (and Fedora's)
    program: str  # what the tests run: a command looked up on PATH, or a path
    use: str  # what for, in a few words


def packages(env=os.environ):
    """The packages `make test` needs, with the programs it runs (COURSE_CHROMIUM's,
    COURSE_INITDB's)."""
    return (Package("bubblewrap", "bwrap", "the OS sandbox that grading runs student code in"),
            Package("chromium", env.get("COURSE_CHROMIUM", "/usr/bin/chromium"),
                    "the browser of the student's-view test (tests/test_browser.py)"),
            Package("postgresql", env.get("COURSE_INITDB") or initdb(),
                    "the server of the shared gradebook's tests (tests/postgres.py)"),
            Package("unzip", "unzip", "an LMS's download extracted as an instructor does "
                    "(tests/test_collect.py)"))


def initdb():
    """PostgreSQL's initdb: the newest of Debian's /usr/lib/postgresql/<version>/bin, else
    the one on PATH (Fedora's /usr/bin), else the bare name (not installed)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: [int(n) for n in p.split("/")[4].split(".") if n.isdigit()])
    return found[-1] if found else "initdb"


def missing(needed, path=None):
    """The packages of needed whose program is not there (on path, else PATH)."""
    return [p for p in needed if shutil.which(p.program, path=path) is None]


def install_command(euid, has_apt, passwordless_sudo):
    """The command prefix that installs Debian packages here without asking anything, or
    None: apt-get as root, or through sudo where sudo asks no password."""
    if not has_apt:
        return None
    apt = ["env", "DEBIAN_FRONTEND=noninteractive", "apt-get"]
    if euid == 0:
        return apt
    return ["sudo", "-n", *apt] if passwordless_sudo else None


def refusal(absent):
    """The one message for packages that are missing and cannot be installed here."""
    names = " ".join(p.name for p in absent)
    lines = ["make test: missing system packages, so no test was run:"]
    lines += [f"  {p.name} ({p.program}): {p.use}" for p in absent]
    lines += ["Install them, then run make test again:",
              f"  Debian: sudo apt-get install {names}",
              f"  Fedora: sudo dnf install {names.replace('postgresql', 'postgresql-server')}"]
    if any(p.name == "bubblewrap" for p in absent):
        lines += ["  Ubuntu: sudo apt-get install bubblewrap",
                  "  macOS, Windows: bubblewrap is Linux's; run make test in a Linux VM or "
                  "container"]
    if any(p.name == "chromium" for p in absent):
        lines.append("  Chromium elsewhere (Ubuntu: sudo snap install chromium): set "
                     "COURSE_CHROMIUM to its binary (/snap/bin/chromium), or to Chrome's")
    return "\n".join(lines)


def install(prefix, absent):
    """apt-get install each package on its own (after an `apt-get update` if the first try
    fails, as on a machine whose package lists are stale or empty), printing what failed."""
    how = "sudo apt-get" if prefix[0] == "sudo" else "apt-get"
    print(f"make test: installing {', '.join(p.name for p in absent)} (system packages it "
          f"needs) with {how} ...", flush=True)
    updated = False
    for package in absent:
        run = _apt(prefix, "install", "-y", "-q", package.name)
        if run.returncode and not updated:  # stale or empty package lists: update, once
            updated = True
            if _apt(prefix, "update", "-q").returncode == 0:
                run = _apt(prefix, "install", "-y", "-q", package.name)
        if run.returncode:
            print(f"make test: {' '.join(run.args[len(prefix) - 1:])} failed:\n"
                  f"{run.stdout[-1500:]}{run.stderr[-1500:]}", file=sys.stderr)


def _apt(prefix, *args):
    return subprocess.run([*prefix, *args], stdin=subprocess.DEVNULL, capture_output=True,
                          text=True)


def passwordless_sudo():
    """Whether sudo runs a command here without asking for a password."""
    return shutil.which("sudo") is not None and subprocess.run(
        ["sudo", "-n", "true"], stdin=subprocess.DEVNULL, capture_output=True).returncode == 0


def main(names=()):
    needed = [p for p in packages() if not names or p.name in names]
    absent = missing(needed)
    if absent:
        prefix = install_command(os.geteuid(), shutil.which("apt-get") is not None,
                                 passwordless_sudo())
        if prefix is not None:
            install(prefix, absent)
            needed = [p for p in packages() if not names or p.name in names]  # (where now)
        if missing(needed):
            sys.exit(refusal(missing(needed)))
    problem = sandbox_refusal() if any(p.name == "bubblewrap" for p in needed) else None
    if problem:
        sys.exit(f"make test: no test was run. {problem}")
    print("make test: system packages present: " +
          ", ".join(f"{p.name} ({shutil.which(p.program)})" for p in needed))


if __name__ == "__main__":
    unknown = set(sys.argv[1:]) - {p.name for p in packages()}
    if unknown:
        sys.exit("usage: python3 -m tools.maintainer.system_packages [NAME ...]: no package "
                 f"{unknown}")
    main(sys.argv[1:])
