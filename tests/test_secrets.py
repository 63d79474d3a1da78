"""Nothing of the host's environment is in reach of student code (tools/sandbox/bubblewrap.py;
docs/security.md, section 4, and issue 39's case 1).

bubblewrap's pid 1 in the sandbox keeps the environment bwrap started with, whatever
--clearenv does for the program it runs: so bwrap starts with an empty one (`env -i`), and
what launches it gets only bubblewrap.LAUNCH_ENV's variables. Secrets are planted where a
grading host keeps them (the head's environment, a Dask worker's, a PostgreSQL URL) and
where the launcher would pass them on; a submission then searches every process's
environment and command line in its sandbox and every file in reach (all but the read-only
installation), and passes Exercise 1.1 only if it finds none. Under each place a sandbox's
cgroup can be made (tools/sandbox/cgroup.py: cgroup v2, a systemd scope, none, and this
machine's own), through the judge's own launch. The round trip's "leaker" student tries
the same at autograde (tests/test_roundtrip.py).
"""

import os
import uuid

import pytest

from tests.synthetic import override
from tests.test_judge import judge_in_process, needs_bwrap, submission
from tools.course.exercises import exercises
from tools.sandbox import bubblewrap, cgroup

MARK = "PLANTED-SECRET-"  # what the submission looks for; each test adds its own suffix
UNIT1_FIRST = [(e.grade_id, e.source) for e in exercises() if e.number == "1.1"]

# A right layer_norm_stats that fails if it finds the mark anywhere in reach. It must read
# /proc/1/environ (the leak of case 1): a sandbox where it cannot is no test of it.
SEEKER = """
import os as _os, stat as _stat, sys as _sys, sysconfig as _sysconfig

_MARK = bytes.fromhex(MARK_HEX)  # (not its bytes as they are: this file is in reach too)


def _found_in_proc():
    found = []
    for pid in _os.listdir("/proc"):
        if pid.isdigit() or pid == "self":
            for name in ("environ", "cmdline"):
                try:
                    with open(f"/proc/{pid}/{name}", "rb") as f:
                        if _MARK in f.read():
                            found.append(f"/proc/{pid}/{name}")
                except OSError:
                    pass
    return found


def _found_in_files():
    installed = {"/proc", "/sys", "/usr", _sys.base_prefix, _sys.prefix,
                 _sysconfig.get_paths()["purelib"]}
    found, scanned = [], 0
    for top, folders, files in _os.walk("/", followlinks=False):
        folders[:] = [d for d in folders if _os.path.join(top, d) not in installed]
        for name in files:
            path = _os.path.join(top, name)
            try:
                if not _stat.S_ISREG(_os.lstat(path).st_mode):
                    continue
                with open(path, "rb") as f:
                    scanned += 1
                    if _MARK in f.read(64 << 20):
                        found.append(path)
            except OSError:
                pass
    assert scanned > 10, scanned  # (the course's tools/, the submission: it did look)
    return found


_reference_stats = layer_norm_stats


def layer_norm_stats(x, normalized_shape, eps=1e-5):
    found = _found_in_proc()
    if _os.path.isdir("/opt/grader"):  # in the sandbox (a small tree to scan)
        with open("/proc/1/environ", "rb") as f:  # (readable, or this raises: no test)
            f.read()
        found += _found_in_files()
    if found:
        raise RuntimeError(f"found the secret in {found}")
    return _reference_stats(x, normalized_shape, eps)
"""


def seeker(tmp_path, secret):
    code = SEEKER.replace("MARK_HEX", repr(secret[:len(MARK) + 8].encode().hex()))
    return submission(tmp_path, layer_norm=override("normlib/layer_norm.py", code))


def plant(monkeypatch, secret):
    """The secrets a grading host keeps in its environment (the head's, whose Dask
    workers inherit it; a PostgreSQL URL with its password)."""
    for name, value in {"PGPASSWORD": secret, "AWS_SECRET_ACCESS_KEY": secret,
                        "NBGRADER_DB_URL": f"postgresql://grader:{secret}@db.example.edu/n",
                        "DASK_WORKER_TOKEN": secret}.items():
        monkeypatch.setenv(name, value)


def fake_v2(tmp_path):
    """A cgroup v2 tree standing in for a delegated one (regular files: the launching
    shell writes its pid there, as into a real cgroup.procs)."""
    grader = tmp_path / "grader"
    grader.mkdir(parents=True)
    (tmp_path / "cgroup.controllers").write_text("cpu io memory pids\n")
    (grader / "cgroup.subtree_control").write_text("memory pids\n")
    return cgroup.place(tmp_path, "0::/grader\n", lambda: None)


def fake_systemd(tmp_path, monkeypatch, secret):
    """A systemd-run on PATH that, as a scope does, hands its own environment on to what
    it runs: here one holding a secret of its own."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    fake = bin_ / "systemd-run"
    fake.write_text(f'#!/bin/sh\nexport SCOPE_SECRET="{secret}"\n'
                    'while [ "$1" != -- ]; do shift; done\nshift\nexec "$@"\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_}:{os.environ['PATH']}")
    return cgroup.Place("systemd", user=os.geteuid() != 0)


@needs_bwrap
@pytest.mark.parametrize("placement", ["v2", "systemd", "none", "this machine's"])
def test_no_secret_of_the_host_is_in_reach_of_student_code(tmp_path, monkeypatch, placement):
    secret = MARK + uuid.uuid4().hex
    plant(monkeypatch, secret)
    where = {"v2": lambda: fake_v2(tmp_path / "cgroup"),
             "systemd": lambda: fake_systemd(tmp_path, monkeypatch, secret),
             "none": lambda: None, "this machine's": cgroup.here}[placement]()
    monkeypatch.setattr(cgroup, "here", lambda: where)
    # the launcher as careless as can be: the whole environment, secrets and all, so that
    # `env -i` before bwrap is all that stands between them and the sandbox
    monkeypatch.setattr(bubblewrap, "launch_env", lambda: dict(os.environ), raising=False)
    folder = seeker(tmp_path / "submission", secret)
    found = judge_in_process(folder, UNIT1_FIRST, sandboxed=True)
    passed, detail = found[UNIT1_FIRST[0][0]]
    assert passed, detail
    if placement == "v2":  # (the launching shell did go through the fake cgroup)
        assert list((tmp_path / "cgroup" / "grader").glob(f"{cgroup.PREFIX}*/main/cgroup.procs"))


def test_the_seeker_finds_a_secret_that_is_in_reach(tmp_path, monkeypatch):
    """Without the OS sandbox (--no-sandbox), the runner inherits the judge's environment:
    the same submission finds the secret and fails. (So its pass above means something.)"""
    secret = MARK + uuid.uuid4().hex
    plant(monkeypatch, secret)
    found = judge_in_process(seeker(tmp_path, secret), UNIT1_FIRST, sandboxed=False)
    passed, detail = found[UNIT1_FIRST[0][0]]
    assert not passed and "RuntimeError" in detail, detail


def test_what_launches_a_sandbox_gets_only_the_variables_it_needs(monkeypatch):
    """Own case (rule 2): the launcher's environment (a cgroup shell, systemd-run) is
    LAUNCH_ENV's variables alone, and bubblewrap's is empty: `env -i` comes right before
    it, after whatever the cgroup's placement puts in front."""
    secret = MARK + uuid.uuid4().hex
    plant(monkeypatch, secret)
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/1000")
    assert set(bubblewrap.launch_env()) <= set(bubblewrap.LAUNCH_ENV)
    assert secret not in repr(bubblewrap.launch_env())
    for where in (None, cgroup.Place("systemd", user=True)):
        monkeypatch.setattr(cgroup, "here", lambda where=where: where)
        argv, fd = bubblewrap.command("/nonexistent", ["-c", "pass"], {"A": "1"}, 64)
        os.close(fd) if fd is not None else None
        start = argv.index("/usr/bin/env")
        assert argv[start + 1:start + 3] == ["-i", bubblewrap.bwrap()]
        assert secret not in " ".join(argv)
