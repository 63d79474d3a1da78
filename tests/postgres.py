"""A real PostgreSQL server for the tests of a shared gradebook, started for them and
stopped after: its own cluster in a temporary folder, on a free local port, reached over
TCP with trust authentication (nothing but this machine can reach 127.0.0.1).

    with Server() as server:
        url = server.database("course")   # postgresql://postgres@127.0.0.1:PORT/course

The binaries are Debian's postgresql package (tools/maintainer/system_packages.py installs it;
COURSE_INITDB names another initdb). PostgreSQL refuses to run as root, so as root the
server runs as the user `nobody`, in a folder of its own.
"""

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from tests.conftest import free_port
from tools.maintainer.system_packages import packages

STARTUP_SECONDS = 60  # a loaded 2-core machine: initdb takes about 2 s, the start 1 s


def binaries():
    """The folder of PostgreSQL's initdb and postgres."""
    [package] = [p for p in packages() if p.name == "postgresql"]
    initdb = shutil.which(package.program)
    if initdb is None:
        raise RuntimeError(f"PostgreSQL's initdb ({package.program}) is not installed: make "
                           "test installs the postgresql package (tools/maintainer/system_packages.py)")
    return Path(initdb).resolve().parent


class Server:
    """A PostgreSQL server of its own (see the module's docstring)."""

    def __init__(self):
        self.folder = Path(tempfile.mkdtemp(prefix="normlib-postgres-"))
        self.port = free_port()
        self.user = {}
        if os.geteuid() == 0:  # ("initdb: cannot be run as root")
            nobody = pwd.getpwnam("nobody")
            os.chown(self.folder, nobody.pw_uid, nobody.pw_gid)
            self.user = {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}
        self.process = None

    def __enter__(self):
        bin_ = binaries()
        data = self.folder / "data"
        subprocess.run([bin_ / "initdb", "-D", data, "-U", "postgres", "--auth=trust",
                        "--no-sync", "-E", "UTF8", "--locale=C"], check=True,
                       capture_output=True, cwd=self.folder, **self.user)
        # durability off: a test's server never outlives its test
        with open(self.folder / "server.log", "wb") as log:
            self.process = subprocess.Popen(
                [bin_ / "postgres", "-D", data, "-p", str(self.port), "-k", self.folder,
                 "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off",
                 "-c", "synchronous_commit=off", "-c", "full_page_writes=off"],
                stdout=subprocess.DEVNULL, stderr=log, cwd=self.folder, **self.user)
        deadline = time.monotonic() + STARTUP_SECONDS
        while not self._answers():
            if self.process.poll() is not None or time.monotonic() > deadline:
                log = (self.folder / "server.log").read_text(errors="replace")
                self.__exit__()
                raise RuntimeError(f"PostgreSQL did not start:\n{log[-2000:]}")
            time.sleep(0.1)
        return self

    def _answers(self):
        import psycopg

        try:
            psycopg.connect(self._dsn("postgres"), connect_timeout=2).close()
            return True
        except psycopg.OperationalError:
            return False

    def _dsn(self, database):
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def database(self, name):
        """A new, empty database of this server: its SQLAlchemy URL."""
        import psycopg

        with psycopg.connect(self._dsn("postgres"), autocommit=True) as connection:
            connection.execute(f'CREATE DATABASE "{name}"')
        return self._dsn(name)

    def __exit__(self, *_):
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)  # PostgreSQL's fast shutdown
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)
