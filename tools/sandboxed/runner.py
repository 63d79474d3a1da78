"""The runner: the one process that runs the submission's code. It imports the student's
normlib modules from its working directory and answers the judge's requests
(tools.sandboxed.peer) on stdin/stdout; what the student's code prints goes nowhere. It
decides nothing: the judge compares every value it returns. Started by tools.judge.judge
inside the sandbox (tools.sandbox.bubblewrap); guard.py is installed before student code.

    python -m tools.sandboxed.runner [--measure [--numba]] LIMITS_JSON [SOURCE]

SOURCE: the submission, copied into the working folder first (a measuring runner has none:
its working folder is the submission, read-only). LIMITS_JSON: as Limits.to_json writes it.
--measure: a runner for one measured call (MEASURE_OPS; Judge.measure), whose memory is
seen from outside: each NumPy array mapped on its own and no huge pages (MEASURED_ENV), so
its resident memory follows them byte for byte; its arguments mapped copy-on-write from a
descriptor. --numba: the call is a compiled kernel's; Numba is loaded first (_warm_up).
"""

import os
import sys

RUNNER_OPS = ("import", "getattr", "setattr", "call", "backward", "params", "setparams",
              "reset")
MEASURE_OPS = ("map", "reset", "load", "compile", "run", "fetch")
# glibc's malloc: every block of 64 KiB or more mapped on its own and returned when freed
# (no heap left over from decoding the arguments for a call to reuse unseen); set before the
# process starts
MEASURED_ENV = {"GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=65536:"
                                  "glibc.malloc.trim_threshold=65536"}


def main():
    reader, writer = os.fdopen(os.dup(0), "rb"), os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # the student's prints must not reach the channel
        os.dup2(devnull, fd)
    from tools.sandboxed import guard
    from tools.sandboxed.limits import Limits
    from tools.sandboxed.peer import Peer, RunnerGone

    measure = sys.argv[1] == "--measure"
    numba = measure and sys.argv[2] == "--numba"
    argv = sys.argv[2 + numba:] if measure else sys.argv[1:]
    limits = Limits.from_json(argv[0])
    sys.path.insert(0, os.getcwd())  # the submission's normlib/, before anything installed
    source = argv[1] if len(argv) > 1 else None
    boxed = os.environ.get("PYTHONPATH") == guard.GRADER  # (tools.sandbox.bubblewrap.command's)
    guard.install(os.getcwd(), limits.protected, limits.memory_mb, limits.file_mb,
                  source, tasks=boxed)
    if measure:
        _warm_up(numba)

    try:
        Peer(reader, writer, MEASURE_OPS if measure else RUNNER_OPS).serve_forever()
    except RunnerGone:  # the judge closed the channel: grading is over
        pass
    os._exit(0)


def _warm_up(numba=False):
    """What NumPy allocates once, on its first use, allocated before the judge takes the
    measuring runner's memory (BLAS's buffers); its arrays in pages of 4 KiB. numba: a
    compiled kernel is measured (--numba): Numba too, its modules, its compiler and its
    threads, started by a kernel of its own (its threads alone are not enough: a first
    parallel call allocates about 5 MiB more, measured); its dispatcher's class and compile
    method kept aside (peer.NUMBA) before any student code runs, with what may run during a
    compile step (tools/sandboxed/compile_step.py, state); and its cache turned off."""
    import numpy as np

    np._core.multiarray._set_madvise_hugepage(False)
    for dtype in (np.float32, np.float64):
        a = np.ones((64, 64), dtype)  # (64, 64)
        a @ a, a @ a[0], np.vecdot(a, a), a.sum(axis=1), np.sqrt(a)
    if numba:
        import warnings

        from tools.sandboxed import compile_step, peer

        with warnings.catch_warnings():  # (a read-only /dev/shm: no lock for its threads'
            warnings.simplefilter("ignore")  # start, which one process does not need)
            from numba import njit, prange, typeof
            from numba.core.dispatcher import Dispatcher
            from numba.core.registry import CPUDispatcher

            # a kernel's @njit(cache=True) ignored: here nothing is writable, where Numba's
            # cache would refuse to load the module (and the kernel is compiled apart)
            Dispatcher.enable_caching = lambda self: None

            @njit(parallel=True)
            def total(a):
                s = 0.0
                for i in prange(a.shape[0]):
                    s += a[i]
                return s

            total(np.ones(64))
        peer.NUMBA = (CPUDispatcher, CPUDispatcher.compile, typeof, compile_step.state())


if __name__ == "__main__":
    main()
