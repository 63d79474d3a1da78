"""Course tooling, run from the repository root as `python -m tools.<name>`.

Authors and students:
    exercises   the course's exercises, read from solutions/ (every tool below uses it)
    markers     the solution and hidden-test markers, the "Exercise N.M" patterns
    student     generate (or --check) the student edition from solutions/
    check       `make check`: which exercises pass
    lab         `make lab`: JupyterLab on notebooks/, nbgrader cut to what works for a student
Instructors (docs/instructors.md), one module per step of the term:
    instructor  the command line: `python -m tools.instructor <step>` (the Makefile's targets)
    course      build: the nbgrader course, its layouts, assignments and student files
    release     release: what students get, scanned for solutions
    collect     collect: the LMS's zips (or the exchange) into submitted/, every one accounted
    autograde   autograde: new and changed submissions, graded once, by the judge, on a
                Dask cluster; this process alone writes the results
    feedback    feedback: HTML pages and one zip per student
    grades      export: grades.csv
    handgrade   score: a written answer's points by hand (`make score`), as formgrader saves
and what they share:
    settings    the course's settings (c.Grading): limits, due dates, roster
    gradebook   the grading state: nbgrader's gradebook and the course's table in it
    grading     one submission graded where a worker runs it, from the files it carries
    cluster     where grading runs: a local Dask cluster, or a scheduler's workers
    verdicts    a submission's verdicts, from the judge
    markdown    markdown for the pages: sanitized, its math as MathML (no MathJax)
    rubric      `make rubric`: the graders' page of model answers and rubrics
    exchange    nbgrader's exchange where the course has none (formgrader lists it quietly)
    preprocessors  nbgrader preprocessors: verdicts into the notebooks, --execute's
                sandboxed kernels, feedback without hidden tests
    judge       the judge: checks and verdicts, where no student code runs
    sandbox     the OS sandbox (bubblewrap, seccomp), where student code runs
    cgroup      each sandbox's cgroup: its tasks and memory
    sandboxed   what runs inside the sandbox, and the one folder it mounts: the worker
                (the only process running student code), the channel to it, guard
                (resource limits and an audit hook) and limits (one typed object)
tests/synthetic.py is the synthetic class (correct, stub, wrong, hostile) of the tests and
`make grading-bench` (tests/grading_bench.py).
"""
