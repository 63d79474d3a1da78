"""The instructor's steps (python -m tools.instructor STEP: __main__.py), one module each,
in the order of a term: build, release, collect, autograde, feedback, grades, rubric and
score (a written answer's points by hand). What they share, on the head alone:

    gradebook    the grading state: nbgrader's gradebook and the course's table in it
    roster       who the students are, and the student of each name an LMS wrote
    unpack       an LMS's download unpacked within the bounds
    grade_sheet  the LMS's gradebook export filled in for its import
    cluster      where grading runs: a local Dask cluster, or a scheduler's workers
    exchange     nbgrader's exchange where the course has none
    markdown     the feedback's markdown: sanitized, its math as MathML
    templates/   the feedback page (nbgrader's, with the judge's verdicts)
"""
