"""python -m tests.variants: how many wrong and right variants each exercise has (the
graders' tests run its check on every one: tests/test_graders.py)."""

import sys

from tests.variants import RIGHT, WRONG
from tools.exercises import SOLUTIONS, exercises

sys.path.insert(0, str(SOLUTIONS))  # (the reference normlib, as the tests see it)
print(f"{'exercise':<9}{'function':<26}{'wrong':>5}{'right':>6}")
for e in exercises():
    print(f"{e.number:<9}{e.name:<26}{len(WRONG.get(e.number, {})):>5}"
          f"{len(RIGHT.get(e.number, {})):>6}")
