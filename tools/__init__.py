"""The course's tools: one folder per process or trust zone. An arrow is "may import".

    student/     the student's commands: `make lab`, `make check`                        -> course
    instructor/  the instructor's steps, one per make target; the gradebook  -> course, lms, worker
    worker/      a Dask worker's task: one submission graded  -> course, judge, sandbox, sandboxed
    judge/       the judge (runs the checks, never student code)     -> course, sandbox, sandboxed
    sandbox/     the OS sandbox: bubblewrap, its cgroups, the probe           -> course, sandboxed
    sandboxed/   what runs inside the sandbox, the one folder of tools/ it mounts       -> nothing
    course/      the course's structure, read by every zone                      -> lms, sandboxed
    lms/         the LMSs' own formats: download names, the feedback upload             -> nothing
    maintainer/  the authors' and CI's tools                        -> course, instructor, sandbox

tests/test_layout.py enforces these arrows; nbgrader_config.py (every nbgrader command loads it)
follows worker/'s. A *worker* is a Dask worker, the *runner* the judge's sandboxed process.
"""
