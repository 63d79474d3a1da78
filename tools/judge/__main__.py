"""python -m tools.judge: a judge process serving grading jobs, one JSON line each on
stdin, each answered by one JSON line on stdout ({grade_id: [passed, detail]}):

    {"judge_dir": ..., "worker_dir": ..., "student_modules": [...], "cells": [[grade_id,
     source], ...], "limits": {...}, "sandbox": true}

(tools.recheck starts one per grading thread, so that torch is imported once per thread,
not once per submission.) What the checks print goes nowhere.
"""

import json
import os
import sys

from tools.judge.judge import Judge


def main():
    out = os.fdopen(os.dup(1), "w")
    sys.stdout = open(os.devnull, "w")  # the checks' "visible checks pass" lines
    for line in sys.stdin:
        job = json.loads(line)
        judge = Judge(job["judge_dir"], job["worker_dir"], job["student_modules"],
                      job["limits"], job.get("sandbox", True))
        out.write(json.dumps(judge.run([tuple(c) for c in job["cells"]])) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
