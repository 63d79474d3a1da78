"""The worker: the one process that runs the submission's code. It imports the student's
normlib modules from its working directory and answers the judge's requests (tools.judge
.peer) on stdin/stdout; whatever the student's code prints goes nowhere. It decides
nothing: every value it returns is compared by the judge. Started by tools.judge.judge,
inside the sandbox (tools.judge.box).

    python -m tools.judge.worker LIMITS_JSON [SOURCE]

SOURCE: the submission, copied into the working folder first (in the sandbox, box.SOURCE).
LIMITS_JSON: the grading limits (tools.course.grading_limits); the worker installs
tools/sandbox.py with them (its audit hook: no reading the protected folders, no
processes) before any student code, as a second wall inside the OS sandbox.
"""

import json
import os
import sys

WORKER_OPS = ("import", "getattr", "setattr", "call", "backward", "params", "setparams",
              "peak", "reset")


def main():
    reader, writer = os.fdopen(os.dup(0), "rb"), os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # the student's prints must not reach the channel
        os.dup2(devnull, fd)
    from tools import sandbox
    from tools.judge.peer import Peer, WorkerGone

    limits = json.loads(sys.argv[1])
    sys.path.insert(0, os.getcwd())  # the submission's normlib/, before anything installed
    source = sys.argv[2] if len(sys.argv) > 2 else None
    sandbox.install(os.getcwd(), limits["protected"], limits["memory_mb"], limits["file_mb"],
                    source)

    try:
        Peer(reader, writer, WORKER_OPS).serve_forever()
    except WorkerGone:  # the judge closed the channel: grading is over
        pass
    os._exit(0)


if __name__ == "__main__":
    main()
