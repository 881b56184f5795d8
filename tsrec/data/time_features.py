"""Frequencies, calendar time features (from GluonTS) and future timestamps."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
from pandas.tseries.frequencies import to_offset

from tsrec.config import DataFacts

#: Time steps handled at once when gathering a panel's calendar features (bounds the temporaries).
BLOCK = 2**20
_GLUONTS_FREQS = "YS, YE, QS, QE, MS, ME, W, D, B, h, min, s (and multiples such as '15min')"


def _feature_functions(freq: str) -> list[Callable[[pd.DatetimeIndex], np.ndarray]]:
    from gluonts.time_feature import time_features_from_frequency_str

    try:
        return time_features_from_frequency_str(freq)
    except RuntimeError:
        raise ValueError(
            f"freq {freq!r} has no calendar time features in GluonTS; use one of {_GLUONTS_FREQS}"
        ) from None


def normalize_freq(freq: object) -> str:
    """Validate a pandas offset alias and return its canonical spelling (``'H'`` -> ``'h'``,
    ``'W'`` -> ``'W-SUN'``); ``ValueError`` for an invalid, non-positive or GluonTS-unsupported
    freq."""
    try:
        offset = to_offset(freq)
    except (TypeError, ValueError):
        offset = None
    if offset is None or offset.n <= 0:
        raise ValueError(
            f"invalid freq {freq!r}: pass a positive pandas offset alias such as 'h', '15min', "
            "'D', 'W' or 'MS'"
        )
    _feature_functions(offset.freqstr)
    return offset.freqstr


def time_feature_dim(freq: str) -> int:
    """Number ``F`` of time features for ``freq`` (0 for yearly data)."""
    return len(_feature_functions(freq))


def time_features(index: pd.DatetimeIndex, freq: str) -> np.ndarray:
    """Calendar features of ``index`` (``gluonts.time_feature.time_features_from_frequency_str``).

    Returns ``[T, F]`` float32, each feature in ``[-0.5, 0.5]``, columns in GluonTS order.
    """
    functions = _feature_functions(freq)
    if not functions:
        return np.zeros((len(index), 0), dtype=np.float32)
    return np.stack([f(index) for f in functions], axis=1).astype(np.float32)  # [T, F]


def panel_time_features(stamps: pd.DatetimeIndex, freq: str, *, out: np.ndarray | None = None) -> np.ndarray:
    """:func:`time_features` of ``stamps`` ``[S]`` (e.g. every item's timestamps laid end to end),
    computed once per distinct timestamp: ``[S, F]`` float32, written into ``out`` when given (e.g.
    the leading columns of a larger table).

    Items of a panel mostly share their timestamps, so this costs about one item's features plus
    a gather, where calling :func:`time_features` per item costs the panel's size in pandas calls.
    For steps of a fixed duration the distinct timestamps are the positions on one grid (no sort).
    """
    times = stamps.as_unit("ns").asi8  # [S], UTC for a named zone
    if out is None:
        out = np.empty((len(times), time_feature_dim(freq)), dtype=np.float32)
    nanos = fixed_step_nanos(freq, stamps.tz)
    if nanos is not None and len(times):
        first, last = int(times.argmin()), int(times.argmax())
        span = (int(times[last]) - int(times[first])) // nanos + 1  # grid steps from the earliest to the latest
        if span < 2 * len(times) and _on_one_grid(times, int(times[first]), nanos):  # a gather from it: no sort
            grid = time_features(regular_stamps(stamps[[first]], np.array([span]), freq), freq)  # [span, F]
            for block in range(0, len(times), BLOCK):  # in blocks: the temporaries stay small
                out[block:block + BLOCK] = grid[(times[block:block + BLOCK] - times[first]) // nanos]
            return out
    distinct, inverse = np.unique(times, return_inverse=True)  # [U], [S]
    unique = pd.DatetimeIndex(distinct.view("M8[ns]"))
    table = time_features(unique if stamps.tz is None else unique.tz_localize("UTC").tz_convert(stamps.tz), freq)
    out[:] = table[inverse]  # [U, F] gathered
    return out


def _on_one_grid(times: np.ndarray, origin: int, nanos: int) -> bool:
    """Whether every one of ``times`` (int64 ns) is a whole number of ``nanos`` steps from ``origin``."""
    return all(not ((times[block:block + BLOCK] - origin) % nanos).any() for block in range(0, len(times), BLOCK))


def future_index(last_timestamp: pd.Timestamp, freq: str, n: int) -> pd.DatetimeIndex:
    """The ``n`` timestamps after ``last_timestamp`` at ``freq``: ``[last + 1 step, ..., + n]``."""
    offset = to_offset(freq)
    return pd.date_range(pd.Timestamp(last_timestamp) + offset, periods=n, freq=offset)


def future_indexes(last_timestamps: pd.DatetimeIndex, freq: str, n: int) -> pd.DatetimeIndex:
    """:func:`future_index` of each of ``last_timestamps`` ``[N]``, laid end to end: ``[N * n]``."""
    return regular_stamps(last_timestamps + to_offset(freq), np.full(len(last_timestamps), n), freq)


def regular_stamps(firsts: pd.DatetimeIndex, lengths: np.ndarray, freq: str) -> pd.DatetimeIndex:
    """Grids of ``lengths[i]`` steps of ``freq`` from ``firsts[i]`` (``[N]`` each), laid end to end:
    ``[sum lengths]`` in the firsts' time zone. As ``pd.date_range`` of each, computed at once for
    steps of a fixed duration (:func:`fixed_step_nanos`)."""
    nanos = fixed_step_nanos(freq, firsts.tz)
    if nanos is None:
        grids = [pd.date_range(first, periods=int(length), freq=freq) for first, length in zip(firsts, lengths)]
        return grids[0].append(grids[1:]) if grids else pd.DatetimeIndex([], tz=firsts.tz)
    lengths = np.asarray(lengths, dtype=np.int64)
    starts = np.r_[0, np.cumsum(lengths)[:-1]]  # [N] each grid's first position
    step = np.arange(int(lengths.sum()), dtype=np.int64) - np.repeat(starts, lengths)  # [sum lengths]
    times = np.repeat(firsts.as_unit("ns").asi8, lengths) + step * nanos
    index = pd.DatetimeIndex(times.view("M8[ns]"))
    return index if firsts.tz is None else index.tz_localize("UTC").tz_convert(firsts.tz)


def fixed_step_nanos(freq: str, tz: object = None) -> int | None:
    """Nanoseconds of one step of ``freq`` when its grid's steps are one fixed duration (steps
    shorter than a day, or days without a time zone); None for wall-clock and calendar steps
    (days in a time zone with daylight saving, weeks, months, business days, ...)."""
    offset = to_offset(freq)
    if isinstance(offset, pd.offsets.Tick) and (not isinstance(offset, pd.offsets.Day) or tz is None):
        return int(offset.nanos)
    return None


def step_duration(freq: str) -> pd.Timedelta | None:
    """Duration of one step of a fixed-length ``freq`` (``"h"`` -> 1 hour); None for calendar
    frequencies whose steps vary (months, quarters, years, business days)."""
    offset = to_offset(freq)
    return pd.Timedelta(offset) if isinstance(offset, pd.offsets.Tick) else None


def seasonality(freq: str) -> int:
    """Steps per natural season of ``freq``: a day for sub-daily data (24 hourly, 96 for
    15-minute data), a week for daily data, a year for weekly, monthly and quarterly data; at
    least 2."""
    from gluonts.time_feature import get_seasonality

    offset = to_offset(freq)
    if isinstance(offset, pd.offsets.Day):
        return max(7 // offset.n, 2)
    if isinstance(offset, pd.offsets.Week):
        return max(52 // offset.n, 2)
    return max(int(get_seasonality(offset.freqstr)), 2)


def data_facts(freq: str, n_channels: int, periods: tuple[float, ...] = (), *, n_covariate_features: int = 0,
               static_cardinalities: tuple[int, ...] = ()) -> DataFacts:
    """What the settings resolver needs to know of data at ``freq`` with ``n_channels`` channels
    per window: the season, whether one step is shorter than a day, the feature counts (the
    calendar's and the ``n_covariate_features`` of the covariates, with ``static_cardinalities``:
    :attr:`tsrec.data.covariates.CovariateEncoder.n_features` and ``.cardinalities``), and the
    dominant ``periods`` found in the training part (:func:`tsrec.data.periods.dominant_periods`)."""
    step = step_duration(freq)
    return DataFacts(season=seasonality(freq), sub_daily=step is not None and step < pd.Timedelta(days=1),
                     n_channels=n_channels, n_time_features=time_feature_dim(freq) + n_covariate_features,
                     periods=periods, n_covariate_features=n_covariate_features,
                     static_cardinalities=static_cardinalities)
