"""Dominant cycle lengths of the training data, for REM dilations and initial ``theta`` s.

The periodogram of every (detrended, z-scored, gap-filled) training series is averaged; its peaks,
strongest first, are the candidate periods. A candidate is kept when it is a line, not a bump of
the noise: its power is ``min_prominence`` times the median power of the frequencies around it
(red noise such as an AR(1) process has a smooth spectrum, a cycle a sharp line); when it is no
harmonic (an integer fraction ``P / k``) of a stronger kept period; and when the series holds at
least ``min_cycles`` of it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["dominant_periods"]


def dominant_periods(values: Sequence[np.ndarray], observed: Sequence[np.ndarray], *, max_periods: int = 3,
                     min_period: float = 2.0, min_cycles: float = 4.0, min_prominence: float = 20.0,
                     tolerance: float = 0.05) -> tuple[float, ...]:
    """Up to ``max_periods`` dominant cycle lengths in steps, strongest first.

    Args:
        values: per item ``[T_i, C]`` (the training part only; NaN or anything where unobserved).
        observed: per item ``[T_i, C]`` bool.
        max_periods: how many periods to return at most.
        min_period: shortest period considered (2 steps is the Nyquist limit).
        min_cycles: a period is kept only if the series spans this many cycles of it.
        min_prominence: a peak's power over the median power of the frequencies within 30% of it.
        tolerance: relative distance within which ``P / k`` counts as a harmonic of ``P``.

    Returns an empty tuple for series too short or without a clear cycle (white noise, a trend).
    """
    length = max((len(v) for v in values), default=0)
    if length < 2 * min_cycles * min_period:
        return ()
    power = np.zeros(length // 2 + 1)
    for x, mask in zip(values, observed):
        x = np.asarray(x, dtype=np.float64)
        mask = np.asarray(mask, dtype=bool)
        for c in range(x.shape[1]):
            column = _standardised(x[:, c], mask[:, c])
            if column is not None:
                # A Hann taper keeps a strong line's leakage from posing as other lines.
                spectrum = np.abs(np.fft.rfft(column * np.hanning(column.size), n=length)) ** 2  # [length // 2 + 1]
                power += spectrum / spectrum[1:].sum()
    frequency = np.arange(power.size) / length  # cycles per step
    with np.errstate(divide="ignore"):
        period = np.where(frequency > 0, 1.0 / frequency, np.inf)
    searched = (period >= min_period) & (period <= length / min_cycles)
    peaks = [k for k in np.flatnonzero(searched)
             if _is_peak(power, k) and power[k] >= min_prominence * _background(power, k)]
    peaks.sort(key=lambda k: power[k], reverse=True)
    kept: list[float] = []
    for k in peaks:
        if len(kept) == max_periods:
            break
        candidate = _refine(power, k, length)
        if not any(_harmonic(candidate, p, tolerance) or abs(candidate - p) <= tolerance * p for p in kept):
            kept.append(candidate)
    return tuple(round(p, 2) for p in kept)


def _standardised(column: np.ndarray, mask: np.ndarray) -> np.ndarray | None:
    """Observed values z-scored and linearly detrended, gaps filled with 0; None if flat or too sparse."""
    if mask.sum() < 8:
        return None
    t = np.flatnonzero(mask)
    y = column[mask]
    slope, intercept = np.polyfit(t, y, 1)
    residual = y - (slope * t + intercept)
    scale = residual.std()
    if not scale > 0:
        return None
    out = np.zeros(len(column))
    out[mask] = residual / scale
    return out


def _is_peak(power: np.ndarray, k: int) -> bool:
    left = power[k - 1] if k > 0 else -np.inf
    right = power[k + 1] if k + 1 < power.size else -np.inf
    return power[k] > left and power[k] >= right


def _background(power: np.ndarray, k: int) -> float:
    """Median power of the bins within 30% of bin ``k`` (at least 3 on each side), ``k`` and its
    neighbours left out."""
    reach = max(3, int(0.3 * k))
    around = np.r_[power[max(1, k - reach):max(1, k - 1)], power[k + 2:k + reach + 1]]
    return float(np.median(around)) if around.size else np.inf


def _refine(power: np.ndarray, k: int, length: int) -> float:
    """The peak's period from a parabola through the log power of its bin and neighbours."""
    if 0 < k < power.size - 1 and np.all(power[k - 1:k + 2] > 0):
        a, b, c = np.log(power[k - 1:k + 2])
        denominator = a - 2 * b + c
        shift = 0.5 * (a - c) / denominator if denominator < 0 else 0.0
        k = k + float(np.clip(shift, -0.5, 0.5))
    return length / k


def _harmonic(candidate: float, period: float, tolerance: float) -> bool:
    """``candidate`` is ``period / n`` for an integer ``n >= 2``, within ``tolerance``."""
    ratio = period / candidate
    n = round(ratio)
    return n >= 2 and abs(ratio - n) <= tolerance * n
