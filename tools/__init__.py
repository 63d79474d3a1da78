"""Course tooling, run from the repository root as `python -m tools.<name>`.

Authors and students:
    exercises   the course's exercises, read from solutions/ (every tool below uses it)
    markers     the solution and hidden-test markers, the "Exercise N.M" patterns
    student     generate (or --check) the student edition from solutions/
    check       `make check`: which exercises pass
    lab         `make lab`: JupyterLab on notebooks/, nbgrader cut to what works for a student
Instructors (docs/instructors.md):
    instructor  the commands: build, release, collect, autograde, feedback, export, bench
    course      the nbgrader course: layouts, assignments, the files each one grades
    grading     nbgrader preprocessors: kernels in the OS sandbox, limits, no hidden
                tests in the kernel, skipped experiments, feedback
    sandbox     resource limits and an audit hook, inside the OS sandbox
    recheck     every check run by the judge: its score is the grade, its verdict the feedback
    judge       the judge (checks, verdicts) and its sandboxed worker (student code)
    synthetic   a synthetic class (correct, stub, wrong, hostile) for tests and the bench
"""
