"""A cgroup of its own for each sandbox (tools/sandbox/bubblewrap.py), where the machine lets
the grader make one: pids.max of guard.TASKS, and a memory.max that counts what the kernel
keeps for it too, its file systems' inodes included. Where one is found, in order (a
delegated cgroup v2, a writable v1, systemd-run --scope, none), and what bounds a sandbox
without one: the README, "Limits on every sandbox".

    place() -> where             wrap(argv, memory_mb, where) -> argv, in a new cgroup
    measure(pid) -> Measured or None             peak(measured) -> the most it held

wrap's shell moves itself into the cgroup, then runs argv (v2: into its child "main", as a
cgroup that hands its controllers on holds no process). measure moves a process into a fresh
child cgroup ("call"), charged all it allocates from then on, whatever it frees of what it
held before. In a systemd scope or none it gives None: the judge then has resident memory
alone, which misses what docs/security.md, section 4, says.
"""

import functools
import itertools
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from tools.sandboxed.guard import TASKS

MiB = 1 << 20
ROOT = Path("/sys/fs/cgroup")
PREFIX = "normgrade-"  # the cgroups a grader makes: normgrade-<its pid>-<count>
# each controller's file for its limit, in v2 and in v1
LIMIT_FILES = {"v2": {"pids": "pids.max", "memory": "memory.max"},
               "v1": {"pids": "pids.max", "memory": "memory.limit_in_bytes"}}
_count = itertools.count()


@dataclass(frozen=True)
class Place:
    """Where a sandbox's cgroup is made: kind "v2" or "v1" (folders: {controller: the
    folder its cgroups go in}), or "systemd" (user: a user's systemd, not the system's)."""
    kind: str
    folders: dict = field(default_factory=dict)
    user: bool = False


def own_cgroups(text):
    """{controller: path} from the text of /proc/self/cgroup; "" for the v2 hierarchy."""
    found = {}
    for line in text.splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(","):
            found[controller] = path.lstrip("/")
    return found


def _writable(folder):
    return folder.is_dir() and os.access(folder, os.W_OK)


def _delegated(folder):
    """Whether folder's child cgroups get the pids and memory controllers (enabling them
    if the folder is ours to change)."""
    wanted = {"pids", "memory"}
    control = folder / "cgroup.subtree_control"
    if not (_writable(folder) and control.is_file()):
        return False
    if not wanted <= set(control.read_text().split()):
        try:
            control.write_text(" ".join(f"+{c}" for c in sorted(wanted)))
        except OSError:  # a cgroup with processes of its own gives its children none
            return False
    return wanted <= set(control.read_text().split())


def _systemd_user():
    """Whether `systemd-run --scope` works here: True for a user's, False for the system's
    (root), None if none does."""
    user = os.geteuid() != 0
    probe = ["systemd-run", *(["--user"] if user else []), "--scope", "--quiet", "true"]
    try:
        ok = subprocess.run(probe, capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    return user if ok else None


def place(root=ROOT, cgroups=None, systemd=_systemd_user):
    """The Place for sandboxes' cgroups on this machine, or None (see the module's
    docstring). cgroups: the text of /proc/self/cgroup; systemd: its probe."""
    own = own_cgroups(Path("/proc/self/cgroup").read_text() if cgroups is None else cgroups)
    if "" in own and (root / "cgroup.controllers").is_file():
        folder = root / own[""]
        if _delegated(folder):
            return Place("v2", {"pids": folder, "memory": folder})
    folders = {c: root / c / own[c] for c in ("pids", "memory") if c in own}
    if len(folders) == 2 and all(_writable(f) for f in folders.values()):
        return Place("v1", folders)
    user = systemd()
    return None if user is None else Place("systemd", user=user)


@functools.cache
def here():
    """place() of this machine, found once."""
    return place()


def wrap(argv, memory_mb, where):
    """argv, run in a new cgroup at `where` (a Place; None: argv as it is) with at most
    TASKS tasks and memory_mb MiB of memory."""
    memory = memory_mb * MiB
    if where is None:
        return list(argv)
    if where.kind == "systemd":
        return ["systemd-run", *(["--user"] if where.user else []), "--scope", "--quiet",
                "--collect", "-p", f"TasksMax={TASKS}", "-p", f"MemoryMax={memory}", "--",
                *argv]
    limits = {"pids": TASKS, "memory": memory}
    name = f"{PREFIX}{os.getpid()}-{next(_count)}"
    for parent in set(where.folders.values()):
        sweep(parent)
    procs = []
    for controller, parent in where.folders.items():
        folder = parent / name
        folder.mkdir(exist_ok=True)
        (folder / LIMIT_FILES[where.kind][controller]).write_text(f"{limits[controller]}\n")
        procs.append(str(folder / "cgroup.procs"))
    if where.kind == "v2":  # the process in a child, so that a measured call's can be made
        folder = where.folders["memory"] / name
        (folder / "main").mkdir(exist_ok=True)
        (folder / "cgroup.subtree_control").write_text("+memory +pids\n")
        procs = [str(folder / "main" / "cgroup.procs")]
    # the shell writes its process id into each cgroup (v2: the one), then becomes argv
    enter = 'for p in "$@"; do [ "$p" = -- ] && break; echo $$ > "$p" || exit 126; shift; ' \
            'done; shift; exec "$@"'
    return ["/bin/sh", "-c", enter, "sh", *dict.fromkeys(procs), "--", *argv]


def sweep(parent):
    """Remove the cgroups that graders made in parent and that no process is left in: those
    of graders that have ended, and this one's (those it is starting are not made yet),
    their children ("main", "call") first."""
    for folder in parent.glob(PREFIX + "*"):
        pid = folder.name[len(PREFIX):].split("-")[0]
        if pid.isdigit() and (int(pid) == os.getpid() or not Path(f"/proc/{pid}").exists()):
            for child in [folder / "call", folder / "main", folder]:
                try:
                    child.rmdir()  # (a cgroup's folder goes with its files; fails if in use)
                except OSError:
                    pass


PEAK_FILES = {"v1": "memory.max_usage_in_bytes", "v2": "memory.peak"}


@dataclass(frozen=True)
class Measured:
    """A measured call's cgroup (`measure`): its folder, and the file of its peak."""
    folder: Path
    peak_file: str


def measure(pid, root=ROOT, cgroups=None):
    """Process pid (a sandbox's, in a cgroup a grader made) moved into a fresh child cgroup
    ("call") of its sandbox's memory cgroup: a Measured, or None where there is none (see
    the module's docstring). cgroups: the text of /proc/<pid>/cgroup."""
    own = own_cgroups(Path(f"/proc/{pid}/cgroup").read_text() if cgroups is None else cgroups)
    if "memory" in own:
        kind, folder = "v1", root / "memory" / own["memory"]
    elif "" in own:
        kind, folder = "v2", root / own[""]
        folder = folder.parent if folder.name == "main" else folder
    else:
        return None
    if not folder.name.startswith(PREFIX) or not (folder / PEAK_FILES[kind]).is_file():
        return None
    call = folder / "call"
    call.mkdir()
    (call / "cgroup.procs").write_text(f"{pid}\n")
    return Measured(call, PEAK_FILES[kind])


def peak(measured):
    """The most memory the measured call's cgroup held, in bytes (its own charges alone)."""
    return int((measured.folder / measured.peak_file).read_text())
