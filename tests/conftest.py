"""The tests check the reference: solutions/ goes first on sys.path, so `import normlib`
is solutions/normlib (the student's normlib/ is exercised through `make check` only)."""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "solutions"))
sys.path.insert(1, str(REPO))  # for `tools`


def pytest_collection_modifyitems(items):
    """The grading round trip first: it is the longest test (about two minutes), so with
    two workers it should start at once rather than after other files."""
    items.sort(key=lambda item: "tests/test_roundtrip.py" not in item.nodeid)  # (stable)
