"""Argument checks shared by every layer (no torch, pandas or numpy import)."""

from __future__ import annotations

import numbers


def check_int(name: str, value: object, minimum: int = 1) -> int:
    """``value`` as an ``int``; ``TypeError``/``ValueError`` naming ``name`` otherwise.

    Any integral number is accepted (``int``, ``np.int64``, ...); booleans are rejected.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value}")
    return int(value)


def check_optional_int(name: str, value: object, minimum: int = 1) -> int | None:
    """:func:`check_int`, letting ``None`` through."""
    return None if value is None else check_int(name, value, minimum)


def check_fraction(name: str, value: object) -> float:
    """``value`` as a float in ``[0, 1)`` (dropout rates); ``ValueError`` naming ``name`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {value!r}")
    return float(value)


def check_choice(name: str, value: object, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")
    return value  # type: ignore[return-value]
