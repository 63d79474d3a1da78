"""The authors' and CI's tools:

    edition          `make student`: the student edition generated from solutions/
    system_packages  `make test`'s system packages, and the sandbox probe first (the
                     system's python3 runs it: the standard library only)
"""
