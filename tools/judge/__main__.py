"""python -m tools.judge: a judge process serving grading jobs, one JSON line each on
stdin, each answered by one JSON line on stdout ({grade_id: [passed, detail]}):

    {"judge_dir": ..., "runner_dir": ..., "student_modules": [...], "cells": [[grade_id,
     source], ...], "limits": Limits.to_json(), "sandboxed": true}

(tools.judge.client starts one per grading thread, so that torch is imported once per thread,
not once per submission, and gives it tools.judge.client.deadline(limits) seconds a job.) What
the checks print goes nowhere.

Its own limits, set anew for each job: the CPU time it may use on it (its notebook time on
every core: past it, SIGXCPU ends the judge) and MEMORY_FACTOR times the grading memory of
address space (its torch, NumPy and the expected values: a reply it could not hold is an
error of that check, MemoryError, not a machine out of memory).
"""

import gc
import json
import math
import os
import resource
import sys

from tools.judge.judge import Judge
from tools.sandboxed.guard import MiB, cpu_seconds
from tools.sandboxed.limits import Limits

MEMORY_FACTOR = 2  # the judge's address space: its torch (about 1.5 GiB) and a reply


def limit_job(limits):
    """This process's soft CPU and memory limits for one job (see the docstring)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    spent = math.ceil(usage.ru_utime + usage.ru_stime)
    hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
    soft = spent + cpu_seconds(limits.notebook_timeout)
    resource.setrlimit(resource.RLIMIT_CPU, (soft if hard < 0 else min(soft, hard), hard))
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    soft = MEMORY_FACTOR * limits.memory_mb * MiB
    resource.setrlimit(resource.RLIMIT_AS, (soft if hard < 0 else min(soft, hard), hard))


def main():
    out = os.fdopen(os.dup(1), "w")
    sys.stdout = open(os.devnull, "w")  # the checks' "visible checks pass" lines
    for line in sys.stdin:
        job = json.loads(line)
        limits = Limits.from_json(job["limits"])
        judge = Judge(job["judge_dir"], job["runner_dir"], job["student_modules"], limits,
                      job["sandboxed"])
        limit_job(limits)
        out.write(json.dumps(judge.run([tuple(c) for c in job["cells"]])) + "\n")
        out.flush()
        if not gc.get_freeze_count():  # torch, NumPy and the course's modules, imported by
            gc.collect()  # the first job, are never collected again: the collector scans
            gc.freeze()  # the jobs' own objects alone


if __name__ == "__main__":
    main()
