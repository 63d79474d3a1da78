"""The student's commands:

    check   `make check`: which exercises pass, each failure with its likely cause
    lab     `make lab`: JupyterLab on notebooks/, nbgrader cut to what works for a student
    jupyter/  the Jupyter settings `make lab` starts with
"""
