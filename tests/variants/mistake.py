"""A catalogued mistake (tests/variants' WRONG tables): a realistic wrong implementation of
an exercise, and the words by which its visible check's message names the cause."""

from typing import Any, NamedTuple


class Mistake(NamedTuple):
    variant: Any  # the wrong function or class, in place of the exercise's
    named: str  # what the visible check's message must say (its likely cause)
