"""Dominant cycle lengths of the training data, for REM dilations and initial ``theta`` s.

The periodogram of every (detrended, z-scored, gap-filled) training series is averaged; its peaks,
strongest first, are the candidate periods. A series longer than ``max_segment`` steps is cut into
half-overlapping segments of ``max_segment`` steps, each linearly detrended over its observed steps,
and their periodograms are averaged (Welch's method), so the work grows as ``T log(max_segment)``
and the spectrum has ``max_segment // 2 + 1`` bins whatever the length. A candidate is kept when it
is a line, not a bump of the noise: its power is ``min_prominence`` times the median power of the
frequencies around it (red noise such as an AR(1) process has a smooth spectrum, a cycle a sharp
line); when it is no harmonic (an integer fraction ``P / k``) of a stronger kept period; and when
a segment holds at least ``min_cycles`` of it. The median around a bin is taken exactly on a grid of
bins spaced 1/64 octave apart (every bin at low frequencies) and interpolated between them, which
costs ``O(n)`` for ``n`` bins where a median at every bin costs ``O(n^2)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["dominant_periods", "MAX_SEGMENT"]

#: Longest stretch (steps) transformed at once; longer series are averaged over segments this long.
#: Longer than every shared benchmark's training part, so their spectra are single periodograms.
MAX_SEGMENT = 2**16
#: Fewest observed steps a series (or a segment) needs for its line fit and spectrum to count.
MIN_OBSERVED = 8
#: Grid points per octave at which the noise floor is computed exactly.
FLOOR_GRID_PER_OCTAVE = 64


def dominant_periods(values: Sequence[np.ndarray], observed: Sequence[np.ndarray], *, max_periods: int = 3,
                     min_period: float = 2.0, min_cycles: float = 4.0, min_prominence: float = 20.0,
                     tolerance: float = 0.05, max_segment: int = MAX_SEGMENT) -> tuple[float, ...]:
    """Up to ``max_periods`` dominant cycle lengths in steps, strongest first.

    Args:
        values: per item ``[T_i, C]`` (the training part only; NaN or anything where unobserved).
        observed: per item ``[T_i, C]`` bool.
        max_periods: how many periods to return at most.
        min_period: shortest period considered (2 steps is the Nyquist limit).
        min_cycles: a period is kept only if a segment (the whole series when it is at most
            ``max_segment`` steps long) spans this many cycles of it.
        min_prominence: a peak's power over the median power of the frequencies within 30% of it.
        tolerance: relative distance within which ``P / k`` counts as a harmonic of ``P``.
        max_segment: longest stretch transformed at once (the FFT size); longer series are averaged
            over half-overlapping segments this long, so periods up to ``max_segment / min_cycles``
            are looked for.

    Returns an empty tuple for series too short or without a clear cycle (white noise, a trend).
    """
    length = max((len(v) for v in values), default=0)
    if length < 2 * min_cycles * min_period:
        return ()
    segment = min(length, int(max_segment))
    power = _averaged_power(values, observed, segment)  # [segment // 2 + 1]
    if not power[1:].any():
        return ()
    frequency = np.arange(power.size) / segment  # cycles per step
    with np.errstate(divide="ignore"):
        period = np.where(frequency > 0, 1.0 / frequency, np.inf)
    searched = np.flatnonzero((period >= min_period) & (period <= segment / min_cycles))
    peaks = _local_peaks(power, searched)
    peaks = peaks[power[peaks] >= min_prominence * _noise_floor(power, peaks)]
    peaks = peaks[np.argsort(-power[peaks], kind="stable")]  # strongest first
    kept: list[float] = []
    for k in peaks:
        if len(kept) == max_periods:
            break
        candidate = _refine(power, int(k), segment)
        if not any(_harmonic(candidate, p, tolerance) or abs(candidate - p) <= tolerance * p for p in kept):
            kept.append(candidate)
    return tuple(round(p, 2) for p in kept)


#: Most values standardised and transformed in one batch of equally long columns (bounds memory).
BATCH_VALUES = 2**20


def _averaged_power(values: Sequence[np.ndarray], observed: Sequence[np.ndarray], segment: int) -> np.ndarray:
    """Sum over every item and channel of its spectrum scaled to unit power (DC left out):
    ``[segment // 2 + 1]``, zeros when no column has a spectrum. Columns of one length are
    transformed together, in batches of at most :data:`BATCH_VALUES` values."""
    power = np.zeros(segment // 2 + 1)
    by_length: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
    for x, mask in zip(values, observed):
        by_length.setdefault(len(x), []).append((x, mask))
    for length, items in by_length.items():
        if length == 0:
            continue
        per_batch = max(1, BATCH_VALUES // (length * items[0][0].shape[1]))  # items per batch
        for first in range(0, len(items), per_batch):
            batch = items[first:first + per_batch]
            columns = np.concatenate([np.asarray(x, dtype=np.float64).T for x, _ in batch])  # [n, T]: every channel
            masks = np.concatenate([np.asarray(mask, dtype=bool).T for _, mask in batch])  # [n, T]
            power += _columns_power(columns, masks, segment)
    return power


def _columns_power(columns: np.ndarray, masks: np.ndarray, segment: int) -> np.ndarray:
    """Summed Welch spectra of ``columns [n, T]`` (observed where ``masks [n, T]``): per column the
    Hann-tapered periodograms of its segments (one segment, the whole column, when ``T <= segment``),
    each zero-padded to ``segment`` steps, summed and scaled to unit power outside the DC bin; the
    columns flat, too sparse or left with nothing add nothing: ``[segment // 2 + 1]``."""
    standardised, kept = _standardised(columns, masks)  # [n', T], [n'] rows of columns
    if not kept.size:
        return np.zeros(segment // 2 + 1)
    width = min(columns.shape[1], segment)
    starts = _segment_starts(columns.shape[1], width)  # [S]
    windows = np.lib.stride_tricks.sliding_window_view(standardised, width, axis=1)[:, starts]  # [n', S, width]
    seen = np.lib.stride_tricks.sliding_window_view(masks[kept], width, axis=1)[:, starts]  # [n', S, width]
    residual, valid = _line_residuals(windows.reshape(-1, width), seen.reshape(-1, width))  # [n' S, width], [n' S]
    # A Hann taper keeps a strong line's leakage from posing as other lines.
    spectra = np.abs(np.fft.rfft(residual * np.hanning(width), n=segment, axis=1)) ** 2  # [n' S, bins]
    spectra[~valid] = 0.0
    power = spectra.reshape(len(standardised), len(starts), -1).sum(axis=1)  # [n', bins]
    total = power[:, 1:].sum(axis=1)  # [n']
    return (power[total > 0] / total[total > 0, None]).sum(axis=0)


def _standardised(columns: np.ndarray, masks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Observed values of ``columns [n, T]`` linearly detrended and z-scored, gaps filled with 0:
    ``[n', T]`` for the columns ``[n']`` (indices) that are neither flat nor too sparse."""
    residual, fitted = _line_residuals(columns, masks)  # [n, T], [n]
    weight = masks.astype(np.float64)
    count = np.maximum(weight.sum(axis=1), 1.0)
    scale = np.sqrt(((residual - (residual.sum(axis=1) / count)[:, None] * weight) ** 2 * weight).sum(axis=1) / count)
    kept = np.flatnonzero(fitted & (scale > 0))
    return residual[kept] / scale[kept, None], kept


def _line_residuals(rows: np.ndarray, seen: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row of ``rows [S, W]`` minus its least-squares line through its observed steps
    (``seen [S, W]`` bool), unobserved steps set to 0: ``[S, W]``, and ``[S]`` whether the row had
    the :data:`MIN_OBSERVED` observed steps (at two times at least) a line needs (else it is 0)."""
    weight = seen.astype(np.float64)
    t = np.arange(rows.shape[1], dtype=np.float64)
    t -= t.mean()  # centred, so the normal equations stay well conditioned
    y = np.where(seen, rows, 0.0)
    n = weight.sum(axis=1)  # [S]
    sum_t, sum_tt = weight @ t, weight @ (t * t)
    sum_y, sum_ty = y.sum(axis=1), y @ t
    determinant = n * sum_tt - sum_t**2
    valid = (n >= MIN_OBSERVED) & (determinant > 0)
    safe = np.where(valid, determinant, 1.0)
    slope = np.where(valid, (n * sum_ty - sum_t * sum_y) / safe, 0.0)
    intercept = np.where(valid, (sum_y - slope * sum_t) / np.maximum(n, 1.0), 0.0)
    residual = (y - intercept[:, None] - slope[:, None] * t) * weight
    return np.where(valid[:, None], residual, 0.0), valid


def _segment_starts(n_steps: int, width: int) -> np.ndarray:
    """First steps of the segments of ``width`` steps that cover ``n_steps`` steps, spread evenly
    from the first to the last step with at least half a segment of overlap: ``[S]``, where
    ``S = 1 + ceil((n_steps - width) / (width // 2))`` (1 when ``n_steps <= width``)."""
    if n_steps <= width:
        return np.zeros(1, dtype=np.int64)
    count = 1 + -(-(n_steps - width) // max(1, width // 2))
    return np.round(np.linspace(0, n_steps - width, count)).astype(np.int64)


def _local_peaks(power: np.ndarray, bins: np.ndarray) -> np.ndarray:
    """The ``bins`` (increasing, ``[K]``) whose power is above the bin below and at least the bin above
    (outside the spectrum counts as ``-inf``): ``[K']``."""
    padded = np.r_[-np.inf, power, -np.inf]
    return bins[(power[bins] > padded[bins]) & (power[bins] >= padded[bins + 2])]


def _noise_floor(power: np.ndarray, bins: np.ndarray) -> np.ndarray:
    """:func:`_background` at every bin of ``bins [K]``: exact on :func:`_floor_grid`, interpolated
    linearly over log frequency between its points: ``[K]``."""
    if bins.size == 0:
        return np.zeros(0)
    grid = _floor_grid(int(bins.min()), int(bins.max()))  # [G]
    floor = np.array([_background(power, int(k)) for k in grid])  # [G]
    return np.interp(np.log(bins), np.log(grid), floor)


def _floor_grid(low: int, high: int) -> np.ndarray:
    """Bins from ``low`` to ``high`` (both included, ``low >= 1``), :data:`FLOOR_GRID_PER_OCTAVE` per
    octave (every bin while they are closer than one bin apart): ``[G]``, ``G = O(log(high / low))``.
    The medians on it cost ``O(high)`` in all, for windows of 60% of their bin."""
    count = int(np.ceil(np.log2(high / low) * FLOOR_GRID_PER_OCTAVE)) + 1
    return np.unique(np.round(np.geomspace(low, high, count)).astype(np.int64))


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
