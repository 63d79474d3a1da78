"""normlib's provided per-channel affine and running statistics (normlib/_channels.py), under the
name they had from 2026-11-26 to 2026-12-07: exercise files written then import them
from here (`from normkit.channels import ...`), and still run and grade. New code imports
normlib._channels.
"""

from normlib._channels import (  # noqa: F401
    channel_affine,
    channel_affine_backward,
    per_channel,
    update_running,
)
