"""Argument checks shared by the data modules."""

from __future__ import annotations

import numpy as np


def check_int(name: str, value: object, minimum: int) -> int:
    """Return ``value`` as an ``int``; ``TypeError``/``ValueError`` naming ``name`` otherwise.

    Booleans are rejected; ``value`` must be an integer ``>= minimum``.
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value}")
    return int(value)
