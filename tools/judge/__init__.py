"""Grading where student code never decides a grade.

    judge.py   the judge: runs the check cells (hidden tests included) with proxies of
               the student's modules; compares; writes the verdict. No student code.
    worker.py  the worker: imports the student's normlib files and computes what the
               judge asks for, nothing else. Runs in tools/sandbox.py's sandbox.
    peer.py    the channel's two ends: requests, handles, autograd across it.
    torch_proxies.py  its torch side: a call as one autograd node, a module's proxy.
    wire.py    what may cross: values (arrays, tensors, numbers, ...) and handles.
    __main__   `python -m tools.judge`: a judge process serving grading jobs
               (tools.verdicts starts it).
"""
