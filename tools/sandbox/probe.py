"""Whether bubblewrap can make grading's sandbox on this machine: the probe is that sandbox,
built by tools/sandbox/bubblewrap.py, running a Python that does nothing. `make test` and
`make worker` run it first (tools/maintainer/system_packages.py), and a grading worker
before its first task (tools/worker/task.py). The standard library and tools/sandbox/
only: the system's python3 runs it before the virtual environment exists.
"""

import os
import subprocess
import tempfile


def sandbox_refusal():
    """None where bubblewrap makes grading's sandbox here (tools/sandbox/bubblewrap.py's, with its
    namespaces, file systems and seccomp filter); else the message saying why not."""
    from tools.sandbox import bubblewrap  # (the standard library and tools/ only)

    with tempfile.TemporaryDirectory() as folder:
        command, fd = bubblewrap.command(folder, ["-c", "pass"], {}, memory_mb=256)
        try:
            run = subprocess.run(command, pass_fds=() if fd is None else (fd,),
                                 stdin=subprocess.DEVNULL, capture_output=True, text=True)
        finally:
            if fd is not None:
                os.close(fd)
    if run.returncode == 0:
        return None
    return (f"bubblewrap is installed but cannot make grading's sandbox here:\n  "
            f"{run.stderr.strip() or f'exit status {run.returncode}'}\n"
            "It needs unprivileged user namespaces. Ubuntu 24.04: sudo sysctl -w "
            "kernel.apparmor_restrict_unprivileged_userns=0; in a Docker container: docker "
            "run --security-opt seccomp=unconfined --security-opt apparmor=unconfined "
            "--security-opt systempaths=unconfined (its own /proc).")


