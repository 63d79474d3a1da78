"""The grading task a Dask worker runs (tools/instructor/autograde.py sends it), on the head
or on another machine, with nothing of the head's but what the task carries:

    task     one submission graded: the judge's verdicts, then nbgrader's autograde in a
             scratch course; the Outcome goes back to the head, which alone records it
    stage    the submitted notebooks staged for nbgrader (a stand-in for an unreadable one)
    judged   the verdicts into nbgrader's autograde (nbgrader preprocessors)
    execute  autograde --execute: each notebook run in a sandboxed kernel
"""
