"""The course's structure, which every other zone reads (tools/__init__.py):

    exercises  the exercises and written questions, read from solutions/
    markers    the solution and hidden-test markers, the "Exercise N.M" patterns
    folder     a course folder as `make build` made it, and nbgrader run in it
    settings   the instructor's settings of a course (c.Grading): one typed object
    bounds     the bounds on what a student sends, and the rule a student id keeps
    late       the late policy
    leaks      what must never leave the instructor's machine, and a scan for it
"""
