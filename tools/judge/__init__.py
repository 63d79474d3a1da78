"""Grading where student code never decides a grade.

    judge.py   the judge: runs the check cells (hidden tests included) with proxies of
               the student's modules, compares, and says why a check failed (explain).
               No student code.
    __main__   `python -m tools.judge`: a judge process serving grading jobs
    client.py  the judge's client: starts a judge process, sends it a submission's
               checks, and makes their Verdicts (a grading task calls it).

The runner, the one process that runs the student's normlib files, and the channel to it
(peer, wire, remote, torch_proxies) are in tools/sandboxed/, the only code of tools/ a
sandbox mounts.
"""
