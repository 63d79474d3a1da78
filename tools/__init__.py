"""Course tooling, run from the repository root as `python -m tools.<name>`.

Authors and students:
    student     generate (or --check) the student edition from solutions/
    strip       solution blocks of normlib/*.py -> NotImplementedError stubs
    check       `make check`: which exercises pass
Instructors (docs/instructors.md):
    instructor  the commands: build, release, collect, autograde, feedback, export, bench
    course      the nbgrader course: layouts, assignments, the files each one grades
    grading     nbgrader preprocessors: hardened execution, skipped experiments, feedback
    sandbox     what a submission's code may do while it is graded
    recheck     every check re-run in a clean process; the clean score counts
    synthetic   a synthetic class (correct, stub, wrong, hostile) for tests and the bench
"""
