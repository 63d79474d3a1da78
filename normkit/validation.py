"""normlib's provided argument checks and empty-input results (normlib/_validation.py), under the
name they had from 2026-11-26 to 2026-12-07: exercise files written then import them
from here (`from normkit.validation import ...`), and still run and grade. New code imports
normlib._validation.
"""

from normlib._validation import (  # noqa: F401
    FLOAT_DTYPES,
    as_normalized_shape,
    check_batch_norm_args,
    check_channel_args,
    check_empty_affine,
    check_float_array,
    check_group_norm_args,
    check_instance_norm_args,
    check_layer_norm_args,
    check_rms_norm_args,
    empty_backward,
    empty_forward,
    forget_running_stats,
)
