"""The tests check the reference: solutions/ goes first on sys.path, so `import normlib`
is solutions/normlib (the student's normlib/ is exercised through `make check` only).

Every test about one exercise carries its marker, `ex3_4` for Exercise 3.4 (registered
here from tools.course.exercises; --strict-markers refuses any other), so that

    pytest -m ex3_4      (or -k ex3_4)

runs the reference against torch, its check on the wrong and right variants, the round
trip's scores and the isolation of its file. Mark a test with @exercise("3.4"), or a
parametrized case with exercise_param("3.4", ...).
"""

import os
import socket
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "solutions"))
sys.path.insert(1, str(REPO))  # for `tools`

from tools.course.exercises import by_number  # noqa: E402
from tools.sandbox.bubblewrap import threads  # noqa: E402 (needs the path above)

# One thread per process for NumPy and torch, in this process (before torch is imported),
# its xdist workers, their notebook kernels and every subprocess a test starts (a test
# that needs more says so): `make test` runs two workers on two cores, and with more
# threads than cores torch's OpenMP threads spin waiting for each other (a notebook cell
# of small torch operations ran 20 times slower beside another worker).
for name, value in threads(1).items():
    os.environ.setdefault(name, value)


@pytest.fixture(scope="session")
def postgres():
    """A PostgreSQL server of this test process's own, stopped at its end (tests/postgres.py):
    server.database(name) makes a database and gives its URL."""
    from tests.postgres import Server

    with Server() as server:
        yield server


def failed(claims):
    """The claims ({claim: whether it holds}) of an experiment that do not hold."""
    return [claim for claim, holds in claims.items() if not holds]


def exercise_marks(*numbers):
    """The markers of these exercises ("3.4", ...), for pytest.param(..., marks=...)."""
    unknown = [n for n in numbers if n not in by_number()]
    if unknown:
        raise ValueError(f"no exercise {', '.join(unknown)} in the course")
    return [getattr(pytest.mark, by_number()[n].marker) for n in numbers]


def exercise(*numbers):
    """A decorator marking a test as being about these exercises ("3.4", ...)."""
    def mark(test):
        for m in exercise_marks(*numbers):
            test = m(test)
        return test
    return mark


def exercise_param(number, *values):
    """A parametrized case (number, *values) marked with exercise `number`'s marker."""
    return pytest.param(number, *values, marks=exercise_marks(number))


def processes_naming(text):
    """The pids of every process whose command line or name (comm) contains text: what
    a test's sandboxes left running."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if text.encode() in Path(f"/proc/{pid}/cmdline").read_bytes() or \
                    text == Path(f"/proc/{pid}/comm").read_text().strip():
                found.append(pid)
        except OSError:  # (it ended meanwhile)
            pass
    return found


def free_port():
    """A local TCP port that nothing listens on (now: a server may take it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pytest_configure(config):
    for e in by_number().values():
        config.addinivalue_line("markers", f"{e.marker}: a test of Exercise {e.number} ({e.name})")


# The files that take longest (alone on a 2-core machine: the round trip 2 minutes, the
# others 9 to 35 s), longest first; the last two spend most of theirs waiting out time limits.
# A long file left out of this list runs in collection order, and if it comes last the
# other core idles beside it (notebook 08's experiments: 25 s).
LONGEST = ["tests/test_roundtrip.py", "tests/test_docs.py", "tests/test_machines.py",
           "tests/test_browser.py",
           "tests/test_isolation.py", "solutions/08_normalization_today.ipynb",
           "solutions/05_add_and_norm.ipynb", "solutions/09_norms_at_scale.ipynb",
           "tests/test_judge.py",
           "tests/test_term.py", "tests/test_training.py", "tests/test_check.py",
           "tests/test_answers.py", "solutions/04_why_normalization_helps.ipynb",
           "solutions/06_numerics_and_precision.ipynb", "tests/test_convnet.py",
           "solutions/07_kernels_and_speed.ipynb",
           "tests/test_preprocessors.py", "tests/test_limits.py", "tests/test_feedback_every.py"]


def pytest_collection_modifyitems(items):
    """The longest files first (LONGEST), the round trip before all: with two workers
    (make test: --dist loadfile --no-loadscope-reorder keeps this order) the round trip
    starts at once and the others fill the second core beside it, so the run ends with
    short files on both workers. When a long file came last, it ran alone at the end for
    a dozen seconds while the other core idled; files that wait go beside busy ones."""
    def rank(item):
        path = item.nodeid.split("::")[0]
        return LONGEST.index(path) if path in LONGEST else len(LONGEST)

    items.sort(key=rank)  # (stable: the other files keep their order)
