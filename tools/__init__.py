"""The course's tools, one folder per process or trust zone. An arrow is "may import";
tests/test_layout.py holds the code to these rules and to no import circle.

    student/     `make lab`, `make check`: the student's commands            -> course
    instructor/  the instructor's steps, one module each, named as its make target and
                 its command (`make grades` = `python -m tools.instructor grades` =
                 instructor/grades.py), and the head's state: the gradebook, the roster
                                                                 -> course, lms, worker
    worker/      the grading task a Dask worker runs: one submission, its verdicts and
                 nbgrader's record of them, in a scratch course
                                               -> course, judge, sandbox, sandboxed
    judge/       the judge process, which runs the checks and never student code, and
                 its client                           -> course, sandbox, sandboxed
    sandbox/     the OS sandbox: bubblewrap, its cgroups, the probe    -> course, sandboxed
    sandboxed/   what runs inside the sandbox, the only folder of tools/ it mounts: the
                 runner (the process that runs the student's code), the channel to it,
                 guard, limits                                         -> nothing
    course/      the course's structure, read by every zone: exercises, markers, the course
                 folder, settings, bounds, the late policy, what must never leak
                                                                     -> lms, sandboxed
    lms/         the LMSs' own formats: their downloads' names and dates, their bulk
                 feedback upload                                       -> nothing
    maintainer/  the authors' and CI's: the student edition, make test's system packages
                                                          -> course, instructor, sandbox

The repository's nbgrader_config.py is loaded by every nbgrader command, a worker's
Autograde too, so it follows worker/'s arrows: the head's feedback classes are named in it
as strings, imported only by the feedback step.

Two words keep one meaning each: a *worker* is a Dask worker (worker/, `make worker`),
the *runner* is the judge's sandboxed process (sandboxed/runner.py).
"""
