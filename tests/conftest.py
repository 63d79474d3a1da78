"""The tests check the reference: solutions/ goes first on sys.path, so `import normlib`
is solutions/normlib (the student's normlib/ is exercised through `make check` only)."""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "solutions"))
sys.path.insert(1, str(REPO))  # for `tools`
