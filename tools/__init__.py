"""Course tooling: generating the student edition, the student's `make check`, and the
nbgrader course build. Run from the repository root as `python -m tools.<name>`."""
