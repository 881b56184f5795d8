"""DataFrame in -> canonical panel of regular series; forecasts -> DataFrame out.

Two input layouts (GluonTS / neuralforecast conventions):

- wide: a ``DatetimeIndex`` (or ``time_col``) and one numeric column per variable. All columns form
  one multivariate series, forecast jointly: one item (``item_id`` ``"0"``) with ``C`` channels.
- long: ``id_col`` / ``time_col`` / ``target_col``: one univariate item per id (``C = 1``).

Rows may come in any order. Each item is put on its full regular grid at ``freq`` from its first to
its last timestamp; grid steps without a row, and NaN or +-inf values, are missing
(``observed`` False, value NaN). Values are kept in float64, as given: every finite value stays
finite and observed (tsrec scales them before anything is rounded to float32, see
:class:`tsrec.data.windows.WindowDataset`).

The grid keeps the timestamps' time zone (a named zone such as ``Europe/Berlin`` stays named): steps
shorter than a day are exact durations across daylight-saving changes, days and longer steps follow
the wall clock (as ``pd.date_range`` does).

Spacing checks (``gaps="raise"``: ``ValueError``; ``gaps="warn"``: ``UserWarning``, data kept), per
item, on the timestamps of its rows (NaN values do not matter):

- long gap: more than ``LONG_GAP_SEASONS`` (7) seasons of the item's usual spacing of missing grid
  steps between two consecutive rows. The usual spacing is the median number of grid steps between
  consecutive rows (1 for regular data), a season is :func:`tsrec.data.time_features.seasonality`
  of ``freq`` (a day of hourly or 15-minute steps, a week of days, a year of weeks, months or
  quarters). So a week of hourly data may be missing, not more: a day missing passes, a timestamp
  typed a year late (8,759 missing hourly steps) is caught.
- mostly empty grid: more than half of the item's grid steps (its long gaps aside) have no row,
  or its rows (three or more) are usually two or more steps apart: a declared ``freq`` finer than
  the data's, refused even where the rows fill half of the grid, naming the frequency they follow.
- weekends empty: under ``freq="D"``, no row on a Saturday or Sunday and at least two steps from a
  Friday to the next Monday: the rows are business days (``"B"``).

Sessions (:mod:`tsrec.data.sessions`): rows usually one step (shorter than a day) apart that leave
the same hours of the day, or the same weekdays, empty are put on the grid of their session's open
steps (``freq`` ``"h 06:00-22:00"``, ``"5min 09:30-16:00 Mon-Fri"``), with or without a declared
plain step (``freq="h"``); the errors above name the session that rows too sparse to show one fit.

Without ``freq``, calendar frequencies are read from the dates where rows are missing
(:func:`tsrec.data.time_features.calendar_freq`: business days with holidays missing, weeks on a
weekday, month, quarter and year starts or ends). A row off the grid that the item's other rows
follow is a ``ValueError`` naming it and how many are off.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import warnings
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd
from pandas.api.types import is_complex_dtype, is_integer_dtype, is_numeric_dtype
from pandas.tseries.frequencies import to_offset

from tsrec.config import GAP_POLICIES
from tsrec.data import sessions
from tsrec.data.calendar import Calendar
from tsrec.data.schema import Schema
from tsrec.data.time_features import (
    BUSINESS_WEEKENDS,
    calendar_freq,
    fixed_step_nanos,
    future_indexes,
    most_common,
    normalize_freq,
    regular_stamps,
    seasonality,
    weekends_skipped,
)

Layout = Literal["wide", "long"]
WIDE_ITEM_ID = "0"
LONG_GAP_SEASONS = 7
"""A run of missing grid steps between two rows longer than this many seasons of the item's usual
spacing is a long gap (see the module docstring)."""


@dataclass(frozen=True)
class Series:
    """One item on a regular grid.

    grid:     timestamps of which the item's ``T`` steps, consecutive at the panel's ``freq``, are
              the run ``grid[start:start + T]``: its own ``[T]`` timestamps, or every item's of a
              panel laid end to end (shared, so that a panel of many items is built without
              slicing an index per item).
    values:   ``[T, C]`` float64, the given values, NaN where missing.
    observed: ``[T, C]`` bool, False where missing.
    start:    the position of the item's first step in ``grid``.
    """

    item_id: str
    grid: pd.DatetimeIndex
    values: np.ndarray
    observed: np.ndarray
    start: int = 0

    @functools.cached_property
    def index(self) -> pd.DatetimeIndex:
        """``[T]`` the item's timestamps."""
        end = self.start + len(self.values)
        return self.grid if self.start == 0 and end == len(self.grid) else self.grid[self.start:end]

    def __len__(self) -> int:
        return len(self.values)

    @property
    def first_observed(self) -> int:
        """The item's first step with an observed value (its length where none is): a long frame's
        series counts from it, NaN rows before it or not."""
        seen = self.observed.any(axis=1)  # [T]
        return int(np.argmax(seen)) if seen.any() else len(seen)

    @property
    def first_time(self) -> pd.Timestamp:
        """The timestamp of the item's first observed step (it has one)."""
        return self.index[self.first_observed]


def split_at(array: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, ...]:
    """``array`` ``[offsets[-1], ...]`` cut into the views ``array[offsets[i]:offsets[i + 1]]``
    (``offsets`` ``[N + 1]``, from 0), one per item; as ``np.split``, without its cost per piece."""
    bounds = np.asarray(offsets).tolist()
    return tuple(array[start:end] for start, end in zip(bounds[:-1], bounds[1:]))


@dataclass(frozen=True)
class Panel:
    """Canonical form of a user frame: regular series sharing ``calendar`` and ``columns``.

    calendar: the series' grid: a step (``"h"``, ``"15min"``) and, for data of opening hours only,
             its session (:class:`~tsrec.data.calendar.Calendar`); :attr:`freq` spells it.
    layout:  ``"wide"`` (one item, C = len(columns)) or ``"long"`` (one item per id, C = 1).
    columns: target variable names (the wide frame's columns, or the long frame's target column).
    items:   the series, wide: one with ``item_id`` ``"0"``; long: sorted by ``item_id``.
    integer_ids: the long frame's ids were integers (an ``item_id`` holds one as text): frames of
             forecasts give them back as integers (:meth:`output_ids`), so that they join the
             user's frame on its id column.
    """

    calendar: Calendar
    layout: Layout
    columns: tuple[str, ...]
    items: tuple[Series, ...]
    integer_ids: bool = False

    @property
    def freq(self) -> str:
        """tsrec's spelling of :attr:`calendar` (``"h"``, ``"h 09:00-17:00 Mon-Fri"``): what
        settings, messages and saved models hold."""
        return self.calendar.freq

    @property
    def item_ids(self) -> tuple[str, ...]:
        return tuple(s.item_id for s in self.items)

    def output_ids(self) -> np.ndarray:
        """``[N]`` the items' ids as the user's frame held them: int64 where they were integers
        (:attr:`integer_ids`), else text (object)."""
        ids = np.array(self.item_ids, dtype=object)
        return ids.astype(np.int64) if self.integer_ids else ids

    @functools.cached_property
    def offsets(self) -> np.ndarray:
        """``[N + 1]`` int64: item ``i``'s steps are ``offsets[i]:offsets[i + 1]`` of :attr:`stamps`."""
        return np.r_[0, np.cumsum([len(s) for s in self.items])].astype(np.int64)

    @functools.cached_property
    def first_steps(self) -> np.ndarray:
        """``[N, C]`` int64: each item's first observed step per channel (0 where it has none)."""
        first = np.zeros((len(self.items), len(self.columns)), dtype=np.int64)
        for i, item in enumerate(self.items):
            first[i] = item.observed.argmax(axis=0)
        return first

    @functools.cached_property
    def stamps(self) -> pd.DatetimeIndex:
        """``[sum T_i]`` every item's timestamps, laid end to end (see :attr:`offsets`), in
        nanoseconds: one ``take`` from each run of items that share a grid (:class:`Series`)."""
        if not self.items:
            return pd.DatetimeIndex([])
        parts = []
        for _, run in itertools.groupby(self.items, key=lambda s: id(s.grid)):
            run = list(run)
            lengths = np.fromiter((len(s) for s in run), np.int64, len(run))  # [n]
            ends = np.cumsum(lengths)  # [n]
            starts = np.fromiter((s.start for s in run), np.int64, len(run))  # [n] in the run's grid
            shift = starts - (ends - lengths)  # [n] where each item's steps lie in the grid minus where they go
            grid = run[0].grid
            if ends[-1] == len(grid) and not shift.any():  # the items are the whole grid, in order
                parts.append(grid)
            else:
                parts.append(grid.take(np.repeat(shift, lengths) + np.arange(ends[-1])))  # [sum T_i of the run]
        if len(parts) == 1:
            return parts[0].as_unit("ns")
        tz = parts[0].tz
        times = np.concatenate([part.as_unit("ns").asi8 for part in parts])  # UTC for a named zone
        index = pd.DatetimeIndex(times.view("M8[ns]"))
        return index if tz is None else index.tz_localize("UTC").tz_convert(tz)

    def tail(self, length: int) -> Panel:
        """The last ``length`` steps of every item (all of a shorter one); the panel itself when
        no item is longer. The items share one new grid of their kept steps alone."""
        lengths = np.diff(self.offsets)  # [N]
        if (lengths <= length).all():
            return self
        kept = np.minimum(lengths, length)  # [N]
        offsets = np.r_[0, np.cumsum(kept)]  # [N + 1] in the new grid
        grid = self.stamps.take(np.repeat(self.offsets[1:] - offsets[1:], kept) + np.arange(offsets[-1]))
        items = tuple(Series(s.item_id, grid, s.values[len(s) - k:], s.observed[len(s) - k:], start)
                      for s, k, start in zip(self.items, kept.tolist(), offsets[:-1].tolist()))
        return dataclasses.replace(self, items=items)

    def head(self, ends: Sequence[int] | np.ndarray) -> Panel:
        """The first ``ends[i]`` steps of every item ``i`` (``[N]``, each at least 1; one at or past
        an item's length keeps all of it): the history before each item's own origin, sliced, never
        read again. The items keep their grids (no timestamp is copied)."""
        ends = np.minimum(np.asarray(ends, dtype=np.int64), np.diff(self.offsets))  # [N]
        if ends.shape != (len(self.items),):
            raise ValueError(f"head needs one end per item ({len(self.items)}), got {ends.shape}")
        if (empty := np.flatnonzero(ends < 1)).size:
            raise ValueError(f"{self.item_label(int(empty[0]))} would keep no step (end {int(ends[empty[0]])}); "
                             "every item needs at least one")
        if (ends == np.diff(self.offsets)).all():
            return self
        items = tuple(s if e == len(s) else dataclasses.replace(s, values=s.values[:e], observed=s.observed[:e])
                      for s, e in zip(self.items, ends.tolist()))
        return dataclasses.replace(self, items=items)

    def item_label(self, position: int) -> str:
        """How error messages name ``items[position]``."""
        return "the series" if self.layout == "wide" else f"item {self.items[position].item_id!r}"

    def items_with_steps(self, positions: np.ndarray, steps: np.ndarray, *, shown: int = 5) -> str:
        """How a message names the items at ``positions`` ``[K]`` with their ``steps`` ``[K]``: the
        first ``shown`` (``item 'a' (12 steps)``), then how many more."""
        named = ", ".join(f"{self.item_label(int(i))} ({int(n)} step{'' if n == 1 else 's'})"
                          for i, n in zip(positions[:shown], steps[:shown]))
        return named + (f" and {len(positions) - shown} more" if len(positions) > shown else "")

    def channel_label(self, position: int, channel: int) -> str:
        """How error messages name channel ``channel`` of ``items[position]``: ``"column 'a'"``
        (wide) or ``"item 'x' (column 'y')"`` (long)."""
        column = f"column {self.columns[channel]!r}"
        return column if self.layout == "wide" else f"{self.item_label(position)} ({column})"

    def in_order_of(self, fitted: Panel) -> Panel:
        """This wide panel with its columns (channels) in the order of ``fitted``'s when they are
        the same columns in another order (a frame given to ``predict`` with its columns
        reordered); otherwise this panel as it is (:meth:`check_compatible` names a difference)."""
        if (self.layout, fitted.layout) != ("wide", "wide") or self.columns == fitted.columns \
                or sorted(self.columns) != sorted(fitted.columns):
            return self
        order = [self.columns.index(c) for c in fitted.columns]  # [C] this panel's channel of each fitted column
        items = tuple(dataclasses.replace(s, values=np.ascontiguousarray(s.values[:, order]),
                                          observed=np.ascontiguousarray(s.observed[:, order]))
                      for s in self.items)
        return dataclasses.replace(self, columns=fitted.columns, items=items)

    def check_compatible(self, other: Panel) -> np.ndarray:
        """Check that ``other`` (e.g. the frame given to ``predict``) matches this fitted panel.

        Returns ``[len(other.items)]`` int64: the position in ``self.items`` (the fitted scaler's
        row) of each item of ``other``. ``ValueError`` naming the difference: layout, freq,
        columns or unknown item ids.
        """
        if other.layout != self.layout:
            raise ValueError(
                f"the model was fitted on a {self.layout} frame but got a {other.layout} frame; read it with "
                "the fitted schema (Forecaster.predict does), in the fitted layout"
            )
        if other.freq != self.freq:
            raise ValueError(
                f"freq differs: fitted with {self.freq!r}, got {other.freq!r}; resample the frame "
                f"or pass freq={self.freq!r}"
            )
        if self.layout == "wide" and other.columns != self.columns:
            missing = [c for c in self.columns if c not in other.columns]
            extra = [c for c in other.columns if c not in self.columns]
            raise ValueError(
                f"columns differ from the fitted frame (missing {missing}, unexpected {extra}); pass exactly the "
                f"columns the model was fitted on, in any order, e.g. df[{list(self.columns)}]"
            )
        positions = {item_id: i for i, item_id in enumerate(self.item_ids)}
        unknown = [i for i in other.item_ids if i not in positions]
        if unknown:
            raise ValueError(
                f"unknown item ids {unknown[:5]}{' ...' if len(unknown) > 5 else ''}: the model "
                f"scales each id with statistics from fit and knows {len(positions)} ids, e.g. "
                f"{list(positions)[:5]}; drop the unknown ids or refit including them"
            )
        return np.array([positions[i] for i in other.item_ids], dtype=np.int64)


@dataclass(frozen=True)
class Placement:
    """Where the rows of a frame read by :func:`read_targets` landed on its panel's grids, so that
    other columns of the same frame (covariates) go to the same steps without a second read.

    rows:    ``[n]`` int64 positions in the frame of its rows, ordered by item, then time.
    item:    ``[n]`` int64 position in ``Panel.items`` of each of those rows.
    cell:    ``[n]`` int64 position of each of those rows in the items' grids laid end to end.
    offsets: ``[N + 1]`` int64 start of each item in that concatenation (item ``i`` holds cells
             ``offsets[i]:offsets[i + 1]``).
    """

    rows: np.ndarray
    item: np.ndarray
    cell: np.ndarray
    offsets: np.ndarray

    def on_grid(self, values: np.ndarray) -> np.ndarray:
        """``values`` ``[R, K]`` (one row per frame row) on the items' grids laid end to end:
        ``[sum T_i, K]``, NaN at steps without a row (:meth:`per_item` splits it)."""
        grid = np.full((int(self.offsets[-1]), values.shape[1]), np.nan)  # [sum T_i, K]
        grid[self.cell] = values[self.rows]
        return grid

    def per_item(self, grid: np.ndarray) -> tuple[np.ndarray, ...]:
        """``grid`` ``[sum T_i, ...]`` split into per-item views ``[T_i, ...]``."""
        return split_at(grid, self.offsets)


def canonicalize(
    df: pd.DataFrame,
    *,
    freq: str | None = None,
    time_col: Hashable | None = None,
    id_col: Hashable | None = None,
    target_col: Hashable | Sequence[Hashable] | None = None,
    gaps: str = "raise",
) -> Panel:
    """Validate a user frame and put every item on its regular ``freq`` grid.

    df:         wide (no ``id_col``) or long (``id_col`` given) frame, rows in any order.
    freq:       pandas offset alias; inferred when None (``pd.infer_freq`` per item, else the most
                common step between timestamps).
    time_col:   timestamp column; None uses the frame's ``DatetimeIndex``.
    id_col:     item id column; makes the frame long.
    target_col: long: the target column (None: the only column left besides id and time);
                wide: a column or list of columns (None: every column except ``time_col``).
    gaps:       ``"raise"`` or ``"warn"``: what a long gap or a mostly empty grid gets (module
                docstring); with ``"warn"`` the data are kept, the empty steps missing.

    A long frame in AutoGluon's or Nixtla's column names needs no column arguments
    (:meth:`tsrec.data.schema.Schema.conventional`).

    Raises ``TypeError`` / ``ValueError`` naming the column, the value and the fix.
    """
    schema = Schema(time_col, id_col, target_col)
    if isinstance(df, pd.DataFrame):
        schema = schema.conventional(df.columns)
    return read_targets(df, freq=freq, gaps=gaps, **schema.columns)[0]


def read_targets(
    df: pd.DataFrame,
    *,
    freq: str | None = None,
    time_col: Hashable | None = None,
    id_col: Hashable | None = None,
    target_col: Hashable | Sequence[Hashable] | None = None,
    gaps: str = "raise",
    last: int | None = None,
) -> tuple[Panel, Placement]:
    """:func:`canonicalize`, and where each row of ``df`` landed (:class:`Placement`); with ``last``,
    of each item's ``last`` latest rows alone (what forecasting from a long history reads: the
    earlier rows are neither placed nor checked).

    Every step is vectorised over the rows: one sort by (item, time), one pass for duplicates,
    spacing and grid positions; only items whose rows are not one step apart, and calendar
    frequencies (months, business days, ...), are looked at one by one.
    """
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"expected a pandas DataFrame, got {type(df).__name__}")
    if gaps not in GAP_POLICIES:
        raise ValueError(f"gaps must be one of {GAP_POLICIES}, got {gaps!r}")
    if len(df) == 0:
        raise ValueError("the frame is empty (0 rows); pass at least one row per series")
    if df.columns.has_duplicates:
        duplicated = list(df.columns[df.columns.duplicated()].unique())
        raise ValueError(f"duplicate column names {duplicated}; rename them so each is unique")
    timestamps = _timestamps(df, time_col)  # [R]
    time_key = "level=0" if time_col is None else repr(time_col)
    if id_col is None:
        layout: Layout = "wide"
        targets = _wide_targets(df, time_col, target_col)
        codes = np.zeros(len(df), dtype=np.int64)  # [R]
        item_ids, integer_ids = [WIDE_ITEM_ID], False
        grouping = f"df.groupby({time_key}).mean()"
    else:
        layout = "long"
        _require_column(df, id_col, "id_col")
        targets = [_long_target(df, id_col, time_col, target_col)]
        codes, item_ids = _item_codes(df[id_col], id_col)  # [R], [N]
        integer_ids = is_integer_dtype(df[id_col].dtype)
        time_key = "df.index" if time_col is None else repr(time_col)
        grouping = f"df.groupby([{id_col!r}, {time_key}]).mean()"
    values = _target_values(df, targets, timestamps, wide=layout == "wide")  # [R, C]
    rows = _by_item_and_time(codes, timestamps.asi8)  # [R]
    if last is not None:
        rows = _latest(rows, codes[rows], last)  # [R'] <= [R]
    item = codes[rows]  # [R]
    first = np.flatnonzero(np.r_[True, item[1:] != item[:-1]])  # [N] first sorted row of each item
    stamps = timestamps[rows]  # [R]
    where = ["the frame"] if layout == "wide" else [f"item {i!r}" for i in item_ids]
    column = "df.index" if time_col is None else f"df[{time_col!r}]"
    localize = f"{column} = {column}{'' if time_col is None else '.dt'}.tz_localize(zone, ambiguous='infer')"
    _require_unique(stamps, item, where, grouping, localize)
    # pandas infers business hours ('bh') loosely: the session is read from the rows at its step
    calendar = Calendar.of(normalize_freq(freq)) if freq is not None else \
        Calendar(Calendar.of(_infer_freq(stamps, first, where, column)).step)
    detected = calendar.session is None and (session := sessions.detect(stamps, first, calendar.step)) is not None
    if detected:
        calendar = Calendar.of(session.alias)  # rows only in some hours or on some weekdays: their open steps
    positions = _positions(stamps, item, first, where, calendar, gaps, detected=detected)  # [R]
    if (session := calendar.session) is not None:
        for said in sessions.closed_early(session, stamps, first, where):  # stacklevel 4: canonicalize's caller
            warnings.warn(said, stacklevel=4)
    lengths = positions[np.r_[first[1:], len(rows)] - 1] + 1  # [N] grid steps of each item
    offsets = np.r_[0, np.cumsum(lengths)].astype(np.int64)  # [N + 1]
    cell = offsets[item] + positions  # [R]
    placement = Placement(rows=rows, item=item, cell=cell, offsets=offsets)
    grid = placement.on_grid(values)  # [sum T_i, C]
    observed = np.isfinite(grid)
    grid[~observed] = np.nan
    index = regular_stamps(stamps[first], lengths, calendar)  # [sum T_i]
    items = tuple(Series(item_id, index, x, mask, start) for item_id, x, mask, start in
                  zip(item_ids, placement.per_item(grid), placement.per_item(observed), offsets[:-1].tolist()))
    return Panel(calendar=calendar, layout=layout, columns=tuple(str(t) for t in targets), items=items,
                 integer_ids=integer_ids), placement


def block_frame(names: Sequence[Hashable], block: np.ndarray, others: Mapping[Hashable, Any]) -> pd.DataFrame:
    """A frame of the columns ``names``, in order: those in ``others`` (each inserted, a copy) and
    the rest, in their order, the rows of ``block`` ``[k, R]``, which the frame holds without a copy.
    ``pd.DataFrame(dict)`` would copy every column into one block per dtype; writing the float
    columns of a large frame into one array up front leaves pandas nothing to copy."""
    frame = pd.DataFrame(block.T, columns=[name for name in names if name not in others], copy=False)
    for place, name in enumerate(names):
        if name in others:
            frame.insert(place, name, others[name])
    return frame


def forecast_frame(
    panel: Panel,
    mean: np.ndarray,
    *,
    items: Sequence[int] | np.ndarray | None = None,
    origins: Sequence[int] | np.ndarray | None = None,
) -> pd.DataFrame:
    """Forecasts (original scale) as a long frame with columns ``item_id``, ``timestamp``, ``mean``.

    mean:    ``[N, H, C]``: row ``n`` forecasts ``panel.items[items[n]]`` for the ``H`` steps
             starting at grid position ``origins[n]``.
    items:   ``[N]`` positions in ``panel.items``; default every item in order (``N = len(items)``).
    origins: ``[N]`` grid position of the first forecast step, in ``[1, len(item)]``; default
             ``len(item)``: the ``H`` steps at ``freq`` after the item's last timestamp.

    Wide panels give one ``item_id`` per column; rows are ordered by forecast, column, timestamp.
    """
    mean = np.asarray(mean)
    n_rows = len(panel.items) if items is None else len(items)
    if mean.ndim != 3 or mean.shape[0] != n_rows or mean.shape[2] != len(panel.columns):
        raise ValueError(
            f"mean must have shape [N={n_rows}, H, C={len(panel.columns)}], got {mean.shape}"
        )
    positions = np.arange(n_rows) if items is None else np.asarray(items, dtype=np.int64)  # [N]
    lengths = np.diff(panel.offsets)[positions]  # [N]
    origin = lengths if origins is None else np.asarray(origins, dtype=np.int64)  # [N]
    if (outside := np.flatnonzero((origin < 1) | (origin > lengths))).size:
        n = outside[0]
        label = panel.item_label(int(positions[n]))
        raise ValueError(f"origin {origin[n]} of {label} is outside [1, {lengths[n]}]")
    horizon, channels = mean.shape[1], mean.shape[2]
    lasts = panel.stamps[panel.offsets[positions] + origin - 1]  # [N] the step before each forecast
    stamps = future_indexes(lasts, panel.calendar, horizon)  # [N * H]
    names = np.array(panel.columns, dtype=object) if panel.layout == "wide" else panel.output_ids()
    name = names[np.arange(channels)] if panel.layout == "wide" else names[positions][:, None]  # [C] or [N, 1]
    at = np.broadcast_to(np.arange(n_rows * horizon).reshape(n_rows, 1, horizon), (n_rows, channels, horizon))
    return pd.DataFrame(
        {
            "item_id": np.broadcast_to(np.asarray(name)[..., None], (n_rows, channels, horizon)).ravel(),
            "timestamp": stamps[at.ravel()],
            "mean": mean.transpose(0, 2, 1).ravel(),
        }
    )


def _require_column(df: pd.DataFrame, column: Hashable, argument: str) -> None:
    if column not in df.columns:
        raise ValueError(
            f"{argument}={column!r} is not a column of the frame; available columns: "
            f"{list(df.columns)}"
        )


def index_as_columns(df: Any) -> Any:
    """``df`` as a long frame where it is a frame indexed by series and time, a MultiIndex of two
    named levels whose second holds timestamps (AutoGluon's ``TimeSeriesDataFrame``, or a frame
    after ``df.set_index(["item_id", "timestamp"])``): a plain DataFrame with those levels as its
    first columns (``df.reset_index()``); anything else as it is."""
    if not isinstance(df, pd.DataFrame) or not isinstance(df.index, pd.MultiIndex) or df.index.nlevels != 2:
        return df
    times = df.index.levels[1]
    if None in df.index.names or not isinstance(times, (pd.DatetimeIndex, pd.PeriodIndex)):
        return df
    return pd.DataFrame(df).reset_index()


def _timestamps(df: pd.DataFrame, time_col: Hashable | None) -> pd.DatetimeIndex:
    """The ``[R]`` timestamps of the rows, from ``time_col`` or the ``DatetimeIndex``."""
    if time_col is None:
        if isinstance(df.index, pd.PeriodIndex):
            raise ValueError("no timestamps: the frame has a PeriodIndex, not a DatetimeIndex; convert it to each "
                             "period's start with df = df.to_timestamp()")
        if isinstance(df.index, pd.MultiIndex):
            raise ValueError(
                f"no timestamps: the frame has a MultiIndex of levels {list(df.index.names)}, not a DatetimeIndex; "
                "make its levels columns with df = df.reset_index(), and name them (id_col=, time_col=) unless they "
                "are AutoGluon's item_id, timestamp or Nixtla's unique_id, ds (a MultiIndex of two named levels, "
                "series then timestamps, is read as such)"
            )
        if not isinstance(df.index, pd.DatetimeIndex):
            raise ValueError(
                f"no timestamps: the frame has a {type(df.index).__name__}, not a DatetimeIndex; "
                f"pass time_col=<column> or set one with df.set_index(<column>) (available "
                f"columns: {list(df.columns)}; a long frame named as AutoGluon's item_id, timestamp, target or "
                "Nixtla's unique_id, ds, y needs no names)"
            )
        timestamps = df.index
        where = "the index"
    else:
        _require_column(df, time_col, "time_col")
        column = df[time_col]
        where = f"time column {time_col!r}"
        if is_numeric_dtype(column.dtype):
            raise TypeError(f"{where} has numeric dtype {column.dtype}; convert it to datetimes, e.g. "
                            f"df[{time_col!r}] = {_numeric_time_advice(column.dropna().to_numpy(), time_col)}")
        if isinstance(column.dtype, pd.PeriodDtype):
            raise TypeError(f"{where} holds periods ({column.dtype}), not datetimes; convert it to each period's "
                            f"start with df[{time_col!r}] = df[{time_col!r}].dt.to_timestamp()")
        try:  # a datetime column as it is (to_datetime would look at its values one by one)
            timestamps = pd.DatetimeIndex(column if isinstance(column.dtype, (np.dtype, pd.DatetimeTZDtype))
                                          and column.dtype.kind == "M" else pd.to_datetime(column))
        except (TypeError, ValueError) as error:
            raise ValueError(
                f"{where} cannot be parsed as datetimes ({error}); convert it with pd.to_datetime"
            ) from None
    if timestamps.hasnans:
        raise ValueError(
            f"{where} has {int(timestamps.isna().sum())} missing timestamps (NaT); drop those rows"
        )
    return _in_nanoseconds(timestamps, where, "df.index" if time_col is None else f"df[{time_col!r}]")


#: A shift of whole 400-year Gregorian cycles keeps every date's weekday, month and leap day, so
#: the calendar's seasons and features read the shifted timestamps as they would the true ones.
_GREGORIAN_CYCLE_YEARS = 400


def _in_nanoseconds(timestamps: pd.DatetimeIndex, where: str, column: str) -> pd.DatetimeIndex:
    """``timestamps`` in nanoseconds, the unit tsrec computes its grid in; a clear error, with the
    shift of ``column`` (the expression that holds them) that brings them in, where some lie
    outside the whole years that unit holds (1678-2261: historical yearly data given in seconds)."""
    try:
        return timestamps.as_unit("ns")
    except pd.errors.OutOfBoundsDatetime:
        first, last = timestamps.min(), timestamps.max()
        low, high = pd.Timestamp.min.year + 1, pd.Timestamp.max.year - 1
        cycles = math.ceil((low - first.year) / _GREGORIAN_CYCLE_YEARS) if first.year < low else \
            -math.ceil((last.year - high) / _GREGORIAN_CYCLE_YEARS)
        shifted = f"{column} = {column} + pd.DateOffset(years={cycles * _GREGORIAN_CYCLE_YEARS})"
        raise ValueError(
            f"{where} runs from {first.date()} to {last.date()}, outside the years {low}-{high} that tsrec's "
            f"timestamps (pandas' nanoseconds) hold; shift them by whole 400-year cycles, which keep every "
            f"weekday and leap day, with {shifted}, and shift the forecast's timestamps back"
        ) from None


def _wide_targets(
    df: pd.DataFrame, time_col: Hashable | None, target_col: Hashable | Sequence[Hashable] | None
) -> list[Hashable]:
    if target_col is None:
        targets = [c for c in df.columns if time_col is None or c != time_col]
    else:
        targets = list(target_col) if isinstance(target_col, (list, tuple)) else [target_col]
        for column in targets:
            _require_column(df, column, "target_col")
    if not targets:
        raise ValueError(
            f"no target columns: the frame only has {list(df.columns)}; add one numeric column per "
            "variable"
        )
    return targets


def _long_target(
    df: pd.DataFrame,
    id_col: Hashable,
    time_col: Hashable | None,
    target_col: Hashable | Sequence[Hashable] | None,
) -> Hashable:
    if target_col is None:
        rest = [c for c in df.columns if c != id_col and (time_col is None or c != time_col)]
        if len(rest) != 1:
            raise ValueError(
                f"cannot tell the target column of the long frame among {rest}; pass "
                "target_col=<column>"
            )
        return rest[0]
    if isinstance(target_col, (list, tuple)):
        raise TypeError(
            f"a long frame has one target column, got target_col={target_col!r}; pass one column "
            "name, or leave id_col out for a wide (multivariate) frame"
        )
    _require_column(df, target_col, "target_col")
    return target_col


def _text_number_advice(column: pd.Series, name: Hashable) -> str:
    """The conversion of a text ``column`` of numbers, as code (``pd.to_numeric`` alone would make
    every value with a comma missing): commas taken out where every value that holds one groups
    thousands (``"1,234.5"``), made points where every such value is a decimal comma (``"10,5"``),
    else ``pd.to_numeric`` as it is."""
    text = column.dropna().astype(str).str.strip().head(1000)
    commas = text[text.str.contains(",", regex=False)]
    column_code = f"df[{name!r}]"
    if len(commas) and commas.str.fullmatch(r"[+-]?\d{1,3}(,\d{3})+(\.\d*)?").all():
        return (f"pd.to_numeric({column_code}.str.replace(',', ''), errors='coerce') (its values group thousands "
                f"with commas, e.g. {commas.iloc[0]!r}; unparseable values become missing)")
    if len(commas) and commas.str.fullmatch(r"[+-]?\d*,\d+").all():
        return (f"pd.to_numeric({column_code}.str.replace(',', '.'), errors='coerce') (its values have decimal "
                f"commas, e.g. {commas.iloc[0]!r}; unparseable values become missing)")
    return f"pd.to_numeric({column_code}, errors='coerce') (unparseable values become missing)"


def _target_values(df: pd.DataFrame, targets: Sequence[Hashable], timestamps: pd.DatetimeIndex, *,
                   wide: bool) -> np.ndarray:
    """The ``[R, C]`` float64 values of the target columns, NaN where NA; ``TypeError`` for a column
    that is not real numbers, ``ValueError`` for a finite value beyond float64's range."""
    for column in targets:
        dtype = df[column].dtype
        if not is_numeric_dtype(dtype):
            # In a wide frame a text column is most often the series id of a long frame.
            long_hint = (f"if {column!r} names the series (a long frame: id, time, value columns), pass "
                         f"id_col={column!r}; if it holds numbers as text, " if wide else "")
            raise TypeError(
                f"target column {column!r} has non-numeric dtype {dtype}; {long_hint}convert it, "
                f"e.g. df[{column!r}] = {_text_number_advice(df[column], column)}"
            )
        if is_complex_dtype(dtype):
            raise TypeError(
                f"target column {column!r} has complex dtype {dtype}; tsrec forecasts real values: "
                f"pass the part to forecast, e.g. df[{column!r}] = np.real(df[{column!r}])"
            )
    with np.errstate(over="ignore"):  # a long double beyond float64 is reported below
        values = df[targets].to_numpy(dtype=np.float64, na_value=np.nan)  # [R, C]
    for c, column in enumerate(targets):
        given = df[column].to_numpy()
        if given.dtype.kind == "f" and given.dtype.itemsize > 8:  # e.g. longdouble: may exceed float64
            lost = np.flatnonzero(np.isfinite(given) & ~np.isfinite(values[:, c]))
            if lost.size:
                raise ValueError(
                    f"target column {column!r} has the value {given[lost[0]]} at {timestamps[lost[0]]}, "
                    "beyond float64's range (about 1.8e308); rescale the column, e.g. divide it by a "
                    "power of ten"
                )
    return values


def _item_codes(ids: pd.Series, id_col: Hashable) -> tuple[np.ndarray, list[str]]:
    """``[R]`` int64 code of each row's id (its position among the ids as text, sorted) and those
    ids; ids equal as text are one item. ``ValueError`` naming a row without an id."""
    codes, uniques = pd.factorize(ids)  # [R] (-1: missing), [U]: one factorisation of the raw ids
    missing = codes < 0
    if missing.any():
        raise ValueError(
            f"id_col {id_col!r} is missing (NaN/None) in {int(missing.sum())} rows, e.g. row "
            f"{ids.index[np.argmax(missing)]!r}; every row needs the id of its series: drop those "
            f"rows, or fill them, e.g. df[{id_col!r}] = df[{id_col!r}].fillna('unknown')"
        )
    by_text, names = pd.factorize(np.asarray(uniques.astype(str), dtype=object), sort=True)  # [U], [N]
    return by_text[codes].astype(np.int64), [str(name) for name in names]


def _by_item_and_time(codes: np.ndarray, times: np.ndarray) -> np.ndarray:
    """``[R]`` row order by item code, then time (stable; cheap when the rows of each item come
    in time order, as most frames have them)."""
    order = np.argsort(codes, kind="stable")  # [R]
    ordered, later = codes[order], times[order]
    if ((ordered[1:] != ordered[:-1]) | (later[1:] > later[:-1])).all():
        return order
    return np.lexsort((times, codes))


def _latest(rows: np.ndarray, item: np.ndarray, count: int) -> np.ndarray:
    """The ``count`` last of ``rows`` ``[R]`` of each item (``item`` ``[R]``: their items; both
    sorted by item, then time)."""
    ends = np.flatnonzero(np.r_[item[1:] != item[:-1], True])  # [N] each item's last position
    end = np.repeat(ends, np.diff(np.r_[-1, ends]))  # [R] its item's last position
    return rows[np.arange(len(rows)) > end - count]


def _require_unique(stamps: pd.DatetimeIndex, item: np.ndarray, where: Sequence[str], grouping: str,
                    localize: str) -> None:
    """``ValueError`` naming the first item (and its earliest timestamp) with two rows at one
    time; ``stamps`` and ``item`` ``[R]`` are sorted by item, then time. Where the repeats look like
    local clock times at the end of daylight saving time (:func:`_clock_change_repeats`), the
    message gives ``localize`` (the code that gives the timestamps their zone) first."""
    times = stamps.asi8
    repeated = np.flatnonzero((item[1:] == item[:-1]) & (times[1:] == times[:-1]))
    if repeated.size:
        k = repeated[0] + 1
        count = int(((item == item[k]) & (times == times[k])).sum())
        of_item = item == item[k]
        if _clock_change_repeats(stamps[of_item], stamps[repeated[item[repeated] == item[k]] + 1]):
            fix = (f"they look like local clock times, one hour repeated where daylight saving time ends: "
                   f"give them the zone of their clock (zone = 'Europe/Berlin', say): {localize} (the repeated "
                   f"hour is then two hours, one in each offset), or aggregate them, e.g. {grouping}")
        else:
            fix = f"aggregate them first, e.g. {grouping}"
        raise ValueError(f"duplicate timestamps in {where[item[k]]}, e.g. {stamps[k]} appears {count} times; {fix}")


def _clock_change_repeats(stamps: pd.DatetimeIndex, repeats: pd.DatetimeIndex) -> bool:
    """Whether ``repeats`` (the repeated ones of one series' sorted ``stamps``) are what local clock
    times without a zone repeat where daylight saving time ends: naive sub-daily stamps whose
    repeats fall in one hour between midnight and 4 a.m. of a Sunday, of days at least 300 apart
    (when Europe, North America and Oceania set their clocks back; a half-hour step repeats two
    stamps of that hour)."""
    if stamps.tz is not None or len(stamps) < 2 or (stamps[-1] - stamps[0]) < pd.Timedelta(days=1):
        return False
    step = np.diff(stamps.asi8).max()
    if step <= 0 or step >= pd.Timedelta(days=1).value:
        return False
    hours = repeats.floor("h").unique()
    days = hours.normalize()
    apart = np.diff(days.asi8) >= pd.Timedelta(days=300).value  # the next year's change, not a second one
    return bool((hours.hour < 4).all() and (days.dayofweek == 6).all() and apart.all())


def _infer_freq(stamps: pd.DatetimeIndex, first: np.ndarray, where: Sequence[str], column: str = "df.index") -> str:
    """``pd.infer_freq`` per item (all must agree: else a ``ValueError`` with the fix,
    :func:`_one_frequency`, ``column`` the time column's expression); otherwise, rows being
    missing, the calendar frequency their dates follow (:func:`~tsrec.data.time_features.calendar_freq`: business days,
    weeks, months, quarters, years); otherwise the most common step.

    ``stamps`` ``[R]`` sorted by item, then time, item ``i`` starting at row ``first[i]``. Items
    whose steps are all one duration shorter than 28 days (no calendar rule can hold there) share
    their answer with the first item of the same step (and weekday, for weeks): ``pd.infer_freq``
    runs once per such group, and on each other item.
    """
    ends = np.r_[first[1:], len(stamps)]  # [N]
    times = stamps.as_unit("ns").asi8  # [R]
    within = np.ones(len(times) - 1, dtype=bool)  # [R - 1] whether row k + 1 continues row k's item
    within[first[1:] - 1] = False
    steps = np.diff(times)[within]  # every step between consecutive rows of an item
    stepping = np.flatnonzero(ends - first >= 2)  # items with a step; item i's steps start at first[i] - i
    low = np.minimum.reduceat(steps, first[stepping] - stepping) if stepping.size else steps  # [M] shortest step
    high = np.maximum.reduceat(steps, first[stepping] - stepping) if stepping.size else steps  # [M] longest step
    chosen = ends[stepping] - first[stepping] >= 3  # pd.infer_freq needs 3 timestamps
    long_enough, low, high = stepping[chosen], low[chosen], high[chosen]
    week = pd.Timedelta(days=7).value
    shared = (low == high) & (low < pd.Timedelta(days=28).value)  # [M]
    weekday = np.where(low % week == 0, stamps[first[long_enough]].dayofweek, -1)  # [M]
    groups = np.stack([low, weekday], axis=1)[shared]  # [M', 2] (step, weekday or -1) of the shared items
    _, representative = np.unique(groups, axis=0, return_index=True)  # the first item of each group
    asked = np.sort(np.r_[long_enough[shared][representative], long_enough[~shared]])  # items to ask, in order
    inferred: dict[str, str] = {}
    for position in asked:
        if (found := pd.infer_freq(stamps[first[position]:ends[position]])) is not None:
            inferred.setdefault(found, where[position])
    if len(inferred) > 1:
        found = ", ".join(f"{f!r} in {place}" for f, place in inferred.items())
        raise ValueError(f"the series have different frequencies ({found}); {_one_frequency(list(inferred), column)}")
    if inferred:
        return normalize_freq(next(iter(inferred)))
    if steps.size == 0:
        raise ValueError(
            "cannot infer the frequency: every series has a single timestamp; pass freq=..., "
            "e.g. freq='h'"
        )
    if (calendar := calendar_freq(stamps, first)) is not None:
        return normalize_freq(calendar)
    unique, counts = np.unique(steps, return_counts=True)
    if counts.max() * 2 < steps.size:
        shown = ", ".join(str(pd.Timedelta(int(u))) for u in unique[:4])
        shortest = to_offset(pd.Timedelta(int(unique[0]))).freqstr
        session = sessions.suggest(stamps[first[0]:ends[0]], shortest)  # rows only in some hours or weekdays
        advice = f"pass freq=..., freq={session!r} if the rows are a session (opening or trading hours, " \
            "docs/data.md#sessions)" if session is not None else _irregular_times_advice(steps, column)
        raise ValueError(
            f"cannot infer the frequency: the steps between timestamps vary ({shown}, ...) and no "
            f"step accounts for half of them; {advice}"
        )
    return normalize_freq(to_offset(pd.Timedelta(int(unique[counts.argmax()]))).freqstr)


#: The steps a grid of irregular readings is suggested (:func:`_irregular_times_advice`), with their length.
_READING_STEPS = {step: pd.Timedelta(length).value for step, length in (
    ("s", "1s"), ("min", "1min"), ("5min", "5min"), ("10min", "10min"), ("15min", "15min"), ("30min", "30min"),
    ("h", "1h"), ("D", "1D"), ("W", "7D"))}


def _irregular_times_advice(steps: np.ndarray, column: str) -> str:
    """What a frame whose ``steps`` (``[S]`` ns between consecutive rows) fit no grid is advised:
    the grid of the :data:`_READING_STEPS` step nearest their median (in ratio), readings at
    irregular times (a logger's, a sensor's) being put on it by flooring their times."""
    median = float(np.median(steps))
    nearest = min(_READING_STEPS, key=lambda step: abs(math.log(max(median, 1.0) / _READING_STEPS[step])))
    return (f"their median is {pd.Timedelta(int(median))}, about one {nearest!r} step: put readings taken at "
            f"irregular times on that grid, {column} = {column}.dt.floor({nearest!r}) (then average the rows that "
            "share a step), or pass freq=...")


#: Integer times below this are read as step numbers (statsforecast's integer ``ds``: 1, 2, 3, ...), at or
#: above it as seconds since 1970 (1e8 s is March 1973).
_STEP_NUMBERS_BELOW = 10 ** 8


def _numeric_time_advice(values: np.ndarray, time_col: Hashable) -> str:
    """The conversion a numeric time column's ``values`` ``[R]`` need, as code: integers 1000-2999
    are years; other integers below :data:`_STEP_NUMBERS_BELOW` step numbers, which carry no
    calendar, dated at the data's own frequency (the example's months); else seconds since 1970."""
    column = f"df[{time_col!r}]"
    whole = values.size and (values == np.round(values)).all()
    if whole and ((values >= 1000) & (values < 3000)).all():
        return f"pd.to_datetime({column}.astype(int).astype(str), format='%Y') for years"
    if whole and ((values >= 0) & (values < _STEP_NUMBERS_BELOW)).all():
        return (f"pd.date_range('2000-01-01', periods=int({column}.max()) + 1, freq='MS')[{column}] for step numbers "
                "(0, 1, 2, ...) of monthly data, with the data's own start and freq (tsrec reads the calendar: its "
                "seasons and calendar features)")
    return f"pd.to_datetime({column}, unit='s') for seconds since 1970"


def _positions(stamps: pd.DatetimeIndex, item: np.ndarray, first: np.ndarray, where: Sequence[str],
               calendar: Calendar, gaps: str, *, detected: bool = False) -> np.ndarray:
    """``[R]`` int64 grid position of each row (``stamps`` ``[R]`` sorted by item, then time, item
    ``i`` from row ``first[i]``) on its item's ``calendar`` grid, which starts at its first row
    (``detected``: the calendar's session was read from the rows, :func:`tsrec.data.sessions.detect`).

    Off-grid rows are a ``ValueError``; long gaps and mostly empty grids (module docstring) are one
    too, or with ``gaps="warn"`` a warning. Items whose rows are all one step apart pass unseen.
    """
    ends = np.r_[first[1:], len(stamps)]  # [N]
    nanos = fixed_step_nanos(calendar, stamps.tz)
    session = calendar.session
    if session is not None:
        steps, off_grid = session.positions(stamps)  # [R], [R] on the session's open steps
        positions = steps - steps[first][item]
    elif nanos is not None:
        steps, remainder = np.divmod(stamps.as_unit("ns").asi8, nanos)  # [R], [R]: no overflow
        positions = steps - steps[first][item]
        off_grid = remainder != remainder[first][item]
    else:
        positions = np.empty(len(stamps), dtype=np.int64)
        off_grid = np.zeros(len(stamps), dtype=bool)
        for i, (a, b) in enumerate(zip(first, ends)):
            positions[a:b], off_grid[a:b] = _grid_positions(stamps[a:b], calendar.step)
    irregular = np.flatnonzero(np.diff(positions) != 1) + 1  # [K] rows not one step after the previous
    irregular = irregular[item[irregular] == item[irregular - 1]]
    for i in np.unique(np.r_[item[off_grid], item[irregular]]):
        rows = slice(first[i], ends[i])
        if off_grid[rows].any():
            # The grid most rows follow: off it are the rows to fix (the first row may be one of them).
            off = off_grid[rows] if nanos is None else remainder[rows] != most_common(remainder[rows])
            raise _off_grid(where[i], stamps[rows], off, calendar, detected)
        for problem, fix in _spacing_problems(where[i], stamps[rows], positions[rows], calendar):
            if gaps == "raise":
                raise ValueError(
                    f"{problem}; {fix}, or pass gaps='warn' to keep the data as they are (the empty steps "
                    "become missing values)"
                )
            # stacklevel 4: the caller of canonicalize (through read_targets)
            warnings.warn(f"{problem}; kept, the empty steps are missing values (gaps='warn'); {fix}", stacklevel=4)
    return positions


def _off_grid(place: str, index: pd.DatetimeIndex, off: np.ndarray, calendar: Calendar,
              detected: bool = False) -> ValueError:
    """The error naming the rows of one item (``index`` ``[n]``) that ``off`` ``[n]`` marks off the
    ``calendar`` grid that its other rows follow (``detected``: a session read from the rows)."""
    shown = ", ".join(str(t) for t in index[off][:3]) + (" ..." if off.sum() > 3 else "")
    freq = calendar.freq
    if (session := calendar.session) is not None and detected:
        return ValueError(
            f"timestamp {index[off][0]} in {place} lies outside the session the other rows follow, {freq!r} "
            f"({session.describe()}, read from the rows): {int(off.sum())} of {len(index)} rows are outside it "
            f"({shown}), too few to open those hours or days; drop those rows if they are stray, or declare the "
            f"session that holds them, freq={sessions.holding(index, session.step)!r} (docs/data.md#sessions)"
        )
    if session is not None:
        return ValueError(
            f"timestamp {index[off][0]} in {place} is not a step of the session freq {freq!r} ({session.describe()}): "
            f"{int(off.sum())} of {len(index)} rows are outside it ({shown}); drop those rows, or declare the session "
            f"that holds them (e.g. wider hours or more weekdays, docs/data.md#sessions), or leave freq unset: a session "
            "is read from the rows"
        )
    grid = f"steps of {freq!r} from {index[~off][0]}" if (~off).any() else f"steps of {freq!r}"
    return ValueError(
        f"timestamp {index[off][0]} in {place} does not match freq {freq!r} ({grid}): {int(off.sum())} of "
        f"{len(index)} rows are off that grid ({shown}); fix or drop those rows, resample first, e.g. "
        f"df.resample({freq!r}).mean() (per id for a long frame), or pass the right freq=..."
    )


def _grid_positions(index: pd.DatetimeIndex, step: str) -> tuple[np.ndarray, np.ndarray]:
    """``[n]`` int64 position of each timestamp of the sorted unique ``index`` on the grid of the
    calendar ``step`` that starts at ``index[0]`` (``pd.date_range``), and ``[n]`` bool: off that grid."""
    positions = pd.date_range(index[0], index[-1], freq=to_offset(step)).get_indexer(index)  # [n], -1 off the grid
    return positions.astype(np.int64), positions < 0


def _spacing_problems(
    place: str, index: pd.DatetimeIndex, positions: np.ndarray, calendar: Calendar
) -> list[tuple[str, str]]:
    """``(problem, fix)`` messages for a long gap, a mostly empty grid and a freq the weekdays
    contradict (module docstring) of one item: sorted unique ``index`` ``[n]`` at grid
    ``positions`` ``[n]``."""
    steps = np.diff(positions)  # [n - 1] grid steps between consecutive rows, >= 1
    if steps.size == 0:
        return []
    usual = float(np.median(steps))
    found = [problem for problem in (_long_gap(place, index, steps, usual, calendar),
                                     _mostly_empty(place, index, steps, usual, calendar),
                                     _weekends_empty(place, index, calendar))
             if problem is not None]
    if found and (session := sessions.suggest(index, calendar.freq)) is not None:  # rows only in some hours or weekdays
        found = [(problem, f"if the rows are a session (opening or trading hours), declare it: freq={session!r} "
                           f"(docs/data.md#sessions); otherwise {fix}") for problem, fix in found]
    return found


def _gap_limit(usual: float, calendar: Calendar) -> float:
    """Missing steps in a row beyond which a gap is long: ``LONG_GAP_SEASONS`` seasons of ``calendar``
    times the usual (median) step ``usual`` between rows."""
    return LONG_GAP_SEASONS * seasonality(calendar) * usual


def _long_gap(
    place: str, index: pd.DatetimeIndex, steps: np.ndarray, usual: float, calendar: Calendar
) -> tuple[str, str] | None:
    """``(problem, fix)`` naming the first long gap of one item (``index`` ``[n]``, ``steps``
    ``[n - 1]`` grid steps between its rows, median ``usual``); None without one."""
    limit = _gap_limit(usual, calendar)
    gaps = np.flatnonzero(steps - 1 > limit)
    if not gaps.size:
        return None
    k = gaps[0]
    first = f" (the first of {gaps.size} such gaps)" if gaps.size > 1 else ""
    suspect = index[k + 1] if len(index) - (k + 1) <= k + 1 else index[k]  # a typo isolates few rows
    problem = (
        f"{place} has a gap{first} of {steps[k] - 1:,} missing {calendar.freq!r} steps between its rows at "
        f"{index[k]} and {index[k + 1]}, far longer than its usual spacing of {usual:g} step(s) (the "
        f"limit is {LONG_GAP_SEASONS} seasons of {seasonality(calendar)} usual steps: {limit:,.0f} steps)"
    )
    fix = (
        f"fix the timestamp {suspect} if it is a typo, or split the series at the gap (e.g. keep the "
        f"rows from {index[k + 1]} on)"
    )
    return problem, fix


def _mostly_empty(
    place: str, index: pd.DatetimeIndex, steps: np.ndarray, usual: float, calendar: Calendar
) -> tuple[str, str] | None:
    """``(problem, fix)`` when one item (``index`` ``[n]``, ``steps`` ``[n - 1]`` grid steps between
    its rows, median ``usual``) leaves more than half of its grid without a row, its long gaps aside,
    or has its rows usually two or more steps apart (``calendar`` finer than the data's, at least two
    steps of them); None otherwise. The long gaps are left out so that a single mistyped timestamp
    is reported once, as a gap."""
    kept = steps[steps - 1 <= _gap_limit(usual, calendar)]
    rows, empty = len(steps) + 1, int((kept - 1).sum())
    finer = usual >= 2 and rows >= 3
    if empty <= rows and not finer:
        return None
    length = empty + rows
    problem = (
        f"freq {calendar.freq!r} leaves {empty / length:.1%} of the grid of {place} empty ({empty:,} of "
        f"{length:,} steps have no row); its rows are usually {usual:g} step(s) apart"
    )
    resample = "resample the rows onto one regular freq first, e.g. df.resample({!r}).mean() (per id for a long frame)"
    if calendar.session is not None:  # resampling fills the closed hours: drop those bins again
        resample = ("resample the rows onto one regular freq first, e.g. df.resample({!r}).mean().dropna() (per id "
                    "for a long frame; dropna drops the closed hours' empty bins)")
    if round(usual) > 1:
        looks = _multiple(calendar, round(usual))
        looks = looks if calendar.session is not None else _looks_like(place, index, looks)
        shown = ", ".join(str(t) for t in index[:3])
        return (f"{problem} (freq {looks!r}), e.g. the rows at {shown}",
                f"pass freq={looks!r}, or {resample.format(Calendar.of(looks).step)}")
    coarser = _multiple(calendar, round(length / rows))  # a freq the rows would about fill
    return f"{problem} but come in bursts", f"{resample.format(Calendar.of(coarser).step)}, or drop the sparse part"


def _weekends_empty(place: str, index: pd.DatetimeIndex, calendar: Calendar) -> tuple[str, str] | None:
    """``(problem, fix)`` when calendar days (``calendar`` ``"D"``) are contradicted by the weekdays of
    one item's rows (``index`` ``[n]``): none on a Saturday or Sunday, and at least
    ``BUSINESS_WEEKENDS`` steps from a Friday to the next Monday: business days, ``"B"``. None
    otherwise."""
    if calendar != Calendar("D") or (index.dayofweek >= 5).any():  # normalised: calendar days are spelt "D"
        return None
    skips = np.flatnonzero(weekends_skipped(index if index.tz is None else index.tz_localize(None)))  # [K]
    if skips.size < BUSINESS_WEEKENDS:
        return None
    problem = (
        f"freq 'D' is contradicted by the rows of {place}: none falls on a Saturday or Sunday, and {skips.size:,} "
        f"times a Friday is followed by the next Monday (e.g. {index[skips[0]]} by {index[skips[0] + 1]}); they "
        "look like business days (freq 'B')"
    )
    return problem, "pass freq='B' (or leave freq unset: it is inferred)"


#: The calendar period of each kind of anchored frequency: weeks ending on different weekdays, a
#: month's start and end, ... are the same periods, dated differently.
_PERIODS = ((pd.offsets.Week, "W", "week"),
            ((pd.offsets.MonthBegin, pd.offsets.MonthEnd, pd.offsets.BusinessMonthBegin, pd.offsets.BusinessMonthEnd),
             "M", "month"),
            ((pd.offsets.QuarterBegin, pd.offsets.QuarterEnd), "Q", "quarter"),
            ((pd.offsets.YearBegin, pd.offsets.YearEnd), "Y", "year"))


def _one_frequency(freqs: Sequence[str], column: str) -> str:
    """How to put series of frequencies ``freqs`` on one: where they are one calendar period dated
    differently (weeks ending on a Sunday and on a Monday, months dated by their start and end), the
    line that dates every row by its period's first day (``column``: the time column's expression,
    or ``df.index``); else resampling."""
    offsets = [to_offset(freq) for freq in freqs]
    for kinds, period, name in _PERIODS:
        if all(isinstance(offset, kinds) and offset.n == 1 for offset in offsets):
            dt = "" if column == "df.index" else ".dt"
            return (f"they are one {name} dated differently: date every row by its {name}'s first day, "
                    f"{column} = {column}{dt}.to_period({period!r}){dt}.start_time")
    return "resample them to one frequency and pass freq=..."


def _looks_like(place: str, index: pd.DatetimeIndex, otherwise: str) -> str:
    """The frequency inferred from one item's rows (``index`` ``[n]``, sorted), ``otherwise`` when
    none is."""
    try:
        return _infer_freq(index, np.zeros(1, dtype=np.int64), [place])
    except ValueError:
        return otherwise


def _multiple(calendar: Calendar, k: int) -> str:
    """The alias of ``k`` steps of ``calendar`` (``("h", 24)`` -> ``"D"``, ``("MS", 3)`` -> ``"3MS"``; a
    session at ``k`` steps where its hours hold them: ``("5min 09:30-16:00", 2)`` -> ``"10min 09:30-16:00"``)."""
    offset = to_offset(calendar.step) * k
    alias = to_offset(pd.Timedelta(offset)).freqstr if isinstance(offset, pd.offsets.Tick) else offset.freqstr
    session = calendar.session
    if session is None or session.length % pd.Timedelta(offset):
        return alias
    return dataclasses.replace(session, step=alias).alias  # a session at k steps (its hours hold them)


