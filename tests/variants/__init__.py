"""Implementations of each exercise other than the reference, by exercise number:

    RIGHT[number][description]   correct, written differently: the check must pass them
    WRONG[number][description]   a classic mistake (a Mistake: the wrong implementation, and
                                 the cause the visible check's message names): the visible
                                 check must fail it and name the cause, the whole check must
                                 fail it (tests/test_diagnosis.py, test_graders.py)
    FEWER[number]                why an exercise has fewer than three classic mistakes

One file per part (layer_norm: Units 1-2, family: 3, network: 4, transformer: 5, numerics: 6
and 7's NumPy kernels, compiled: 7's Numba kernels, today: 8, scale: 9), each a RIGHT or WRONG table
of the exercise's function or class (tools.course.exercises: Exercise.module, .name).
tests/test_graders.py runs every check on every variant; `python -m tests.variants` counts
them, and `python -m tests.variants --catalogue` writes docs/mistakes.md.
"""

import normkit.kernel_code
from tests.variants import (
    right_compiled,
    right_family,
    right_layer_norm,
    right_network,
    right_numerics,
    right_scale,
    right_today,
    right_transformer,
    wrong_compiled,
    wrong_family,
    wrong_layer_norm,
    wrong_network,
    wrong_numerics,
    wrong_scale,
    wrong_today,
    wrong_transformer,
)

RIGHT = {**right_layer_norm.RIGHT, **right_family.RIGHT, **right_network.RIGHT,
         **right_transformer.RIGHT, **right_numerics.RIGHT, **right_compiled.RIGHT,
         **right_today.RIGHT, **right_scale.RIGHT}
WRONG = {**wrong_layer_norm.WRONG, **wrong_family.WRONG, **wrong_network.WRONG,
         **wrong_transformer.WRONG, **wrong_numerics.WRONG, **wrong_compiled.WRONG,
         **wrong_today.WRONG, **wrong_scale.WRONG}
FEWER = {}  # {number: why it has fewer than three classic mistakes}

# The Numba variants share their row steps from compiled_rows.py, another file: the race
# reader follows them there (a student's file cannot: normkit.kernel_code.IMPORTS)
normkit.kernel_code.IMPORTS = normkit.kernel_code.resolve_source
