"""Frequencies, calendar time features (from GluonTS) and future timestamps.

Calendar frequencies are read from the dates themselves where ``pd.infer_freq`` cannot help
because rows are missing (:func:`calendar_freq`): quarter anchors are spelt one way
(:func:`normalize_freq`), so that equal grids have equal names. Everything after the read takes a
:class:`~tsrec.data.calendar.Calendar` (the step and the session, if any), not the string.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
from pandas.tseries.frequencies import to_offset

from tsrec.config import DataFacts
from tsrec.data.calendar import Calendar
from tsrec.data.sessions import WEEKDAYS, Session, session_of, wall_clock

#: Time steps handled at once when gathering a panel's calendar features (bounds the temporaries).
BLOCK = 2**20
_GLUONTS_FREQS = "YS, YE, QS, QE, MS, ME, W, D, B, h, min, s, ms, us (and multiples such as '15min')"
MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_WEEKDAYS = tuple(day.upper() for day in WEEKDAYS)  # as pandas anchors weeks: "MON", ...
_QUARTERLY = (pd.offsets.QuarterBegin, pd.offsets.QuarterEnd, pd.offsets.BQuarterBegin, pd.offsets.BQuarterEnd)
_DAY_NANOS = 86_400 * 10**9
#: Steps from a Friday to the next Monday that rows on weekdays only must make to be business days.
BUSINESS_WEEKENDS = 2


def _feature_functions(step: str) -> list[Callable[[pd.DatetimeIndex], np.ndarray]]:
    """GluonTS's calendar features of steps of ``step`` (a session's: its step's); for steps shorter
    than a second (sensor data: ``'500ms'``, ``'10us'``), which GluonTS has none for, its seconds'
    (second of minute, minute of hour, ..., day of year): the finest calendar it knows."""
    from gluonts.time_feature import time_features_from_frequency_str

    try:
        return time_features_from_frequency_str("s" if _sub_second(step) else step)
    except RuntimeError:
        raise ValueError(
            f"freq {step!r} has no calendar time features in GluonTS; use one of {_GLUONTS_FREQS}"
        ) from None


def _sub_second(step: str) -> bool:
    """Whether one step of ``step`` (a pandas alias) is shorter than a second."""
    try:
        offset = to_offset(step)
    except (TypeError, ValueError):
        return False
    return isinstance(offset, pd.offsets.Tick) and pd.Timedelta(offset) < pd.Timedelta(seconds=1)


def normalize_freq(freq: object) -> str:
    """Validate a pandas offset alias and return its canonical spelling (``'H'`` -> ``'h'``,
    ``'W'`` -> ``'W-SUN'``; a quarter anchored on the equal-grid month among October to December, as
    ``pd.infer_freq`` names it: ``'QS'`` and ``'QS-JAN'`` -> ``'QS-OCT'``, ``'QE-MAR'`` ->
    ``'QE-DEC'``; a session as :mod:`tsrec.data.sessions` spells it: ``'h 09:00-17:00 Mon-Fri'``,
    also from pandas' ``BusinessHour`` / ``CustomBusinessHour``); ``ValueError`` for an invalid,
    non-positive or GluonTS-unsupported freq."""
    if (session := session_of(freq)) is not None:
        _feature_functions(session.step)
        return session.alias
    try:
        offset = to_offset(freq)
    except (TypeError, ValueError):
        offset = None
    if offset is None or offset.n <= 0:
        raise ValueError(
            f"invalid freq {freq!r}: pass a positive pandas offset alias such as 'h', '15min', "
            "'D', 'W' or 'MS'"
        )
    if isinstance(offset, _QUARTERLY):  # QS-JAN, QS-APR, QS-JUL and QS-OCT are one grid
        offset = type(offset)(n=offset.n, startingMonth=(offset.startingMonth - 1) % 3 + 10)
    _feature_functions(offset.freqstr)
    return offset.freqstr


def calendar_freq(stamps: pd.DatetimeIndex, first: np.ndarray) -> str | None:
    """The calendar frequency that the dates of rows with missing steps follow, or None.

    ``stamps`` ``[R]`` sorted by item, then time, item ``i`` starting at row ``first[i]``. The rule
    reads the wall-clock dates (in the stamps' time zone) and needs most rows (more than half) at
    one time of day, so steps shorter than a day never match. Then, in this order:

    - most rows on a month's last day: ``k`` months (``ME``, ``QE-DEC``, ``YE-DEC``, ``2ME``, ...)
      with ``k`` the most common number of months between consecutive rows, anchored on the most
      common month;
    - most rows on a month's first day: the same with ``MS``, ``QS-OCT``, ``YS-JAN``, ...;
    - the most common step a whole number ``k`` of weeks and most rows on one weekday:
      ``k`` weeks anchored there (``W-WED``);
    - business days (``B``): at most one row in seven on a Saturday or Sunday (calendar days have
      two in seven), at least ``BUSINESS_WEEKENDS`` (2) steps from a Friday to the next Monday, and
      most steps one business day (a holiday is a missing step, not a new rule).

    None when no rule holds: the data's steps are then a fixed duration (the most common step).
    """
    wall = wall_clock(stamps)  # [R]
    days = wall.normalize()  # [R]
    if not _most(wall.asi8 - days.asi8):  # rows at different times of day: steps shorter than a day
        return None
    within = np.ones(len(wall) - 1, dtype=bool)  # [R - 1] whether row k + 1 continues row k's item
    within[first[1:] - 1] = False
    if _most(wall.is_month_end, True):
        return _monthly(wall, within, "E")
    if _most(wall.day == 1, True):
        return _monthly(wall, within, "S")
    day_steps = np.diff(days.asi8 // _DAY_NANOS)[within]  # [S] days between consecutive rows of an item
    if not day_steps.size:
        return None
    step = most_common(day_steps)
    if step % 7 == 0 and _most(wall.dayofweek):
        prefix = "" if step == 7 else str(step // 7)
        return f"{prefix}W-{_WEEKDAYS[most_common(wall.dayofweek)]}"
    weekend = wall.dayofweek >= 5  # [R]
    if 7 * weekend.sum() <= len(wall) and weekends_skipped(wall)[within].sum() >= BUSINESS_WEEKENDS:
        dates = days.values.astype("M8[D]")  # [R]
        business_steps = np.busday_count(dates[:-1][within], dates[1:][within])  # [S]
        if most_common(business_steps) == 1:
            return "B"
    return None


def weekends_skipped(index: pd.DatetimeIndex) -> np.ndarray:
    """``[n - 1]`` bool: whether the step from ``index[k]`` to ``index[k + 1]`` (sorted, wall clock)
    goes from a Friday to the next Monday."""
    days = index.normalize().as_unit("ns").asi8 // _DAY_NANOS  # [n] days since 1970
    return (index.dayofweek[:-1] == 4) & (np.diff(days) == 3)


def _monthly(wall: pd.DatetimeIndex, within: np.ndarray, end: str) -> str | None:
    """``k`` months, anchored (``end``: ``"S"`` month starts or ``"E"`` month ends), for the rows
    ``wall`` ``[R]`` (``within`` ``[R - 1]`` marks the steps inside an item); None without a step."""
    months = wall.year.to_numpy() * 12 + wall.month.to_numpy() - 1  # [R] months since year 0
    steps = np.diff(months)[within]
    if not steps.size or (k := most_common(steps)) <= 0:
        return None
    month = wall.month.to_numpy() - 1  # [R] 0 = January
    if k % 12 == 0:
        n, unit, anchor = k // 12, "Y", MONTHS[most_common(month)]
    elif k % 3 == 0:  # named on October to December, as normalize_freq spells quarters
        n, unit, anchor = k // 3, "Q", MONTHS[most_common(month % 3) + 9]
    else:
        return f"{'' if k == 1 else k}M{end}"
    return f"{'' if n == 1 else n}{unit}{end}-{anchor}"


def most_common(values: np.ndarray) -> int:
    """The most common of the integers ``values`` ``[n]``, ``n >= 1``; on a tie, the one that comes first."""
    unique, index, counts = np.unique(values, return_index=True, return_counts=True)
    tied = counts == counts.max()
    return int(unique[tied][index[tied].argmin()])


def _most(values: np.ndarray, value: object = None) -> bool:
    """Whether more than half of ``values`` equal ``value`` (None: their most common value)."""
    values = np.asarray(values)
    if value is None:
        _, counts = np.unique(values, return_counts=True)
        return 2 * int(counts.max()) > len(values)
    return 2 * int((values == value).sum()) > len(values)


def time_feature_dim(calendar: Calendar) -> int:
    """Number ``F`` of time features for ``calendar`` (0 for yearly data)."""
    return len(_feature_functions(calendar.step))


def time_features(index: pd.DatetimeIndex, calendar: Calendar) -> np.ndarray:
    """Calendar features of ``index`` (``gluonts.time_feature.time_features_from_frequency_str``).

    Returns ``[T, F]`` float32, each feature in ``[-0.5, 0.5]``, columns in GluonTS order.
    """
    functions = _feature_functions(calendar.step)
    if not functions:
        return np.zeros((len(index), 0), dtype=np.float32)
    return np.stack([f(index) for f in functions], axis=1).astype(np.float32)  # [T, F]


def panel_time_features(stamps: pd.DatetimeIndex, calendar: Calendar, *,
                        out: np.ndarray | None = None) -> np.ndarray:
    """:func:`time_features` of ``stamps`` ``[S]`` (e.g. every item's timestamps laid end to end),
    computed once per distinct timestamp: ``[S, F]`` float32, written into ``out`` when given (e.g.
    the leading columns of a larger table).

    Items of a panel mostly share their timestamps, so this costs about one item's features plus
    a gather, where calling :func:`time_features` per item costs the panel's size in pandas calls.
    For steps of a fixed duration the distinct timestamps are the positions on one grid (no sort).
    """
    times = stamps.as_unit("ns").asi8  # [S], UTC for a named zone
    if out is None:
        out = np.empty((len(times), time_feature_dim(calendar)), dtype=np.float32)
    nanos = fixed_step_nanos(calendar, stamps.tz)
    if nanos is not None and len(times):
        first, last = int(times.argmin()), int(times.argmax())
        span = (int(times[last]) - int(times[first])) // nanos + 1  # grid steps from the earliest to the latest
        if span < 2 * len(times) and _on_one_grid(times, int(times[first]), nanos):  # a gather from it: no sort
            grid = time_features(regular_stamps(stamps[[first]], np.array([span]), calendar), calendar)  # [span, F]
            for block in range(0, len(times), BLOCK):  # in blocks: the temporaries stay small
                out[block:block + BLOCK] = grid[(times[block:block + BLOCK] - times[first]) // nanos]
            return out
    distinct, inverse = np.unique(times, return_inverse=True)  # [U], [S]
    unique = pd.DatetimeIndex(distinct.view("M8[ns]"))
    table = time_features(unique if stamps.tz is None else unique.tz_localize("UTC").tz_convert(stamps.tz), calendar)
    out[:] = table[inverse]  # [U, F] gathered
    return out


def _on_one_grid(times: np.ndarray, origin: int, nanos: int) -> bool:
    """Whether every one of ``times`` (int64 ns) is a whole number of ``nanos`` steps from ``origin``."""
    return all(not ((times[block:block + BLOCK] - origin) % nanos).any() for block in range(0, len(times), BLOCK))


def future_index(last_timestamp: pd.Timestamp, calendar: Calendar, n: int) -> pd.DatetimeIndex:
    """The ``n`` timestamps after ``last_timestamp`` on ``calendar``: ``[last + 1 step, ..., + n]``
    (a session's next open steps)."""
    if calendar.session is not None:
        return future_indexes(pd.DatetimeIndex([pd.Timestamp(last_timestamp)]), calendar, n)
    offset = to_offset(calendar.step)
    return pd.date_range(pd.Timestamp(last_timestamp) + offset, periods=n, freq=offset)


def future_indexes(last_timestamps: pd.DatetimeIndex, calendar: Calendar, n: int) -> pd.DatetimeIndex:
    """:func:`future_index` of each of ``last_timestamps`` ``[N]``, laid end to end: ``[N * n]``.
    Every future timestamp of tsrec (predict, backtest, covariates, plots, GluonTS) comes from here
    or :func:`regular_stamps`: a session's skip its closed hours and days."""
    if (session := calendar.session) is not None:
        after = session.positions(last_timestamps)[0] + 1  # [N] the next open step of each
        return session.stamps((after[:, None] + np.arange(n)).ravel(), last_timestamps.tz)
    return regular_stamps(last_timestamps + to_offset(calendar.step), np.full(len(last_timestamps), n), calendar)


def regular_stamps(firsts: pd.DatetimeIndex, lengths: np.ndarray, calendar: Calendar) -> pd.DatetimeIndex:
    """Grids of ``lengths[i]`` steps of ``calendar`` from ``firsts[i]`` (``[N]`` each), laid end to end:
    ``[sum lengths]`` in the firsts' time zone. As ``pd.date_range`` of each, computed at once for
    steps of a fixed duration (:func:`fixed_step_nanos`); a session's grids hold its open steps alone."""
    if (session := calendar.session) is not None:
        lengths = np.asarray(lengths, dtype=np.int64)
        starts = np.r_[0, np.cumsum(lengths)[:-1]]  # [N] each grid's first position
        step = np.arange(int(lengths.sum()), dtype=np.int64) - np.repeat(starts, lengths)  # [sum lengths]
        return session.stamps(np.repeat(session.positions(firsts)[0], lengths) + step, firsts.tz)
    nanos = fixed_step_nanos(calendar, firsts.tz)
    if nanos is None:
        grids = [pd.date_range(first, periods=int(length), freq=calendar.step)
                 for first, length in zip(firsts, lengths)]
        return grids[0].append(grids[1:]) if grids else pd.DatetimeIndex([], tz=firsts.tz)
    lengths = np.asarray(lengths, dtype=np.int64)
    starts = np.r_[0, np.cumsum(lengths)[:-1]]  # [N] each grid's first position
    step = np.arange(int(lengths.sum()), dtype=np.int64) - np.repeat(starts, lengths)  # [sum lengths]
    times = np.repeat(firsts.as_unit("ns").asi8, lengths) + step * nanos
    index = pd.DatetimeIndex(times.view("M8[ns]"))
    return index if firsts.tz is None else index.tz_localize("UTC").tz_convert(firsts.tz)


def fixed_step_nanos(calendar: Calendar, tz: object = None) -> int | None:
    """Nanoseconds of one step of ``calendar`` when its grid's steps are one fixed duration (steps
    shorter than a day, or days without a time zone); None for wall-clock and calendar steps
    (days in a time zone with daylight saving, weeks, months, business days, sessions, ...)."""
    if calendar.session is not None:
        return None
    offset = to_offset(calendar.step)
    if isinstance(offset, pd.offsets.Tick) and (not isinstance(offset, pd.offsets.Day) or tz is None):
        return int(offset.nanos)
    return None


def step_duration(calendar: Calendar) -> pd.Timedelta | None:
    """Duration of one step of a fixed-length ``calendar`` (``"h"`` -> 1 hour); None for calendar
    frequencies whose steps vary (months, quarters, years, business days, sessions: a session's
    step after its last open hour is the night)."""
    return None if calendar.session is not None else _tick(calendar.step)


def _tick(step: str) -> pd.Timedelta | None:
    """Duration of one ``step`` of a fixed length, else None."""
    offset = to_offset(step)
    return pd.Timedelta(offset) if isinstance(offset, pd.offsets.Tick) else None


def seasonality(calendar: Calendar, *, at_least: int = 2) -> int:
    """Steps per natural season of ``calendar``: a day for sub-daily data (24 hourly, 96 for
    15-minute data), a week for daily data, a year for weekly, monthly and quarterly data, a
    session day for a session (16 hourly steps for ``'h 06:00-22:00'``; its week where a session
    day is one step); at least ``at_least``. The models' season is at least 2 (a season of one
    step is no season to them); a seasonal scale's (MASE) is 1 where the calendar has no season
    (yearly data, as the field scores them: M4, GIFT-Eval), :func:`metric_season`."""
    from gluonts.time_feature import get_seasonality

    if (session := calendar.session) is not None:
        return int(next(iter(_session_cycles(session)), 2))  # its day, or its week (of at least 2 steps)
    offset = to_offset(calendar.step)
    if isinstance(offset, pd.offsets.Day):
        return max(7 // offset.n, at_least)
    if isinstance(offset, pd.offsets.Week):
        return max(52 // offset.n, at_least)
    # GluonTS's season of one step of this unit (24 for 'h'), divided by the multiple where it divides
    # (8 for '3h'), else 1, as its get_seasonality does for the multiple but without its logged
    # warning, which a '5YS' fit printed dozens of times
    steps, remainder = divmod(int(get_seasonality(offset.base.freqstr)), offset.n)
    return max(1 if remainder else steps, at_least)


def metric_season(calendar: Calendar) -> int:
    """The season of ``calendar``'s seasonal scale (MASE's, auto's validation scale): its natural
    season (:func:`seasonality`), 1 (the last value) where it has none, as yearly data are scored
    in M4 and by GluonTS's ``get_seasonality``."""
    return seasonality(calendar, at_least=1)


#: Days per year, for the yearly cycle of daily and weekly data.
DAYS_PER_YEAR = 365.25


def calendar_cycles(calendar: Calendar) -> tuple[float, ...]:
    """The natural cycles of ``calendar`` in steps, shortest first (not rounded): a day and a week
    for sub-daily data (24 and 168 hourly, 144 and 1008 for 10-minute data; for steps of an hour
    or longer that do not divide a day, none), a week and a year for daily data (7, 365.25), a
    year for weekly (52.18), monthly (12) and quarterly (4) data, the week (5) for business
    days; a session day and a session week for a session (16 and 112 for ``'h 06:00-22:00'``, 8 and
    40 for ``'h 09:00-17:00 Mon-Fri'``); none for yearly data. A cycle of fewer than 2 steps is left out."""
    if (session := calendar.session) is not None:
        return _session_cycles(session)
    offset = to_offset(calendar.step)
    step = _tick(calendar.step)
    if step is not None:  # fixed steps: sub-daily, daily or multi-day
        days = step / pd.Timedelta(days=1)
        whole = tuple(float(c) for c in (1 / days, 7 / days) if c >= 2 and float(c).is_integer())  # day, week
        return whole if days < 1 else whole + _at_least_two(DAYS_PER_YEAR / days)
    if isinstance(offset, pd.offsets.Week):
        return _at_least_two(DAYS_PER_YEAR / 7 / offset.n)
    if isinstance(offset, (pd.offsets.MonthBegin, pd.offsets.MonthEnd, pd.offsets.SemiMonthBegin,
                           pd.offsets.SemiMonthEnd, pd.offsets.BusinessMonthBegin, pd.offsets.BusinessMonthEnd)):
        per_year = 24 if isinstance(offset, (pd.offsets.SemiMonthBegin, pd.offsets.SemiMonthEnd)) else 12
        return _at_least_two(per_year / offset.n)
    if isinstance(offset, (pd.offsets.QuarterBegin, pd.offsets.QuarterEnd, pd.offsets.BQuarterBegin,
                           pd.offsets.BQuarterEnd)):
        return _at_least_two(4 / offset.n)
    if isinstance(offset, pd.offsets.BusinessDay):
        return _at_least_two(5 / offset.n) + _at_least_two(DAYS_PER_YEAR * 5 / 7 / offset.n)
    return ()


def _session_cycles(session: Session) -> tuple[float, ...]:
    """A session's day and week in steps, shortest first, those of at least 2 steps."""
    day = session.steps_per_day
    return _at_least_two(day) + (_at_least_two(day * len(session.days)) if len(session.days) > 1 else ())


def _at_least_two(cycle: float) -> tuple[float, ...]:
    return (float(cycle),) if cycle >= 2 else ()


def data_facts(calendar: Calendar, n_channels: int, periods: tuple[float, ...] = (), *, n_covariate_features: int = 0,
               static_cardinalities: tuple[int, ...] = ()) -> DataFacts:
    """What the settings resolver needs to know of data on ``calendar`` with ``n_channels`` channels
    per window: the season, whether one step is shorter than a day, the feature counts (the
    calendar's and the ``n_covariate_features`` of the covariates, with ``static_cardinalities``:
    :attr:`tsrec.data.covariates.CovariateEncoder.n_features` and ``.cardinalities``), and the
    dominant ``periods`` found in the training part (:func:`tsrec.data.periods.dominant_periods`)."""
    step = _tick(calendar.step)  # a session's open steps are sub-daily
    return DataFacts(season=seasonality(calendar), sub_daily=step is not None and step < pd.Timedelta(days=1),
                     n_channels=n_channels, n_time_features=time_feature_dim(calendar) + n_covariate_features,
                     periods=periods, n_covariate_features=n_covariate_features,
                     static_cardinalities=static_cardinalities, cycles=calendar_cycles(calendar))
