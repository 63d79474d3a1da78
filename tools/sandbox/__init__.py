"""The OS sandbox in which student code runs (the judge's runner, --execute's kernels):

    bubblewrap  the sandbox: namespaces, mounts (tools/sandboxed/ alone of tools/), seccomp
    cgroup      each sandbox's cgroup: its tasks and memory
    probe       whether bubblewrap can make the sandbox on this machine
"""
