"""DataFrame in -> canonical panel of regular series; forecasts -> DataFrame out.

Two input layouts (GluonTS / neuralforecast conventions):

- wide: a ``DatetimeIndex`` (or ``time_col``) and one numeric column per variable. All columns form
  one multivariate series, forecast jointly: one item (``item_id`` ``"0"``) with ``C`` channels.
- long: ``id_col`` / ``time_col`` / ``target_col``: one univariate item per id (``C = 1``).

Rows may come in any order. Each item is put on its full regular grid at ``freq`` from its first to
its last timestamp; grid steps without a row, and NaN or +-inf values, are missing
(``observed`` False, value NaN).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd
from pandas.api.types import is_numeric_dtype
from pandas.tseries.frequencies import to_offset

from tsrec.data.time_features import future_index, normalize_freq

Layout = Literal["wide", "long"]
WIDE_ITEM_ID = "0"


@dataclass(frozen=True)
class Series:
    """One item on a regular grid.

    index:    ``[T]`` timestamps, consecutive steps at the panel's ``freq``.
    values:   ``[T, C]`` float32, NaN where missing.
    observed: ``[T, C]`` bool, False where missing.
    """

    item_id: str
    index: pd.DatetimeIndex
    values: np.ndarray
    observed: np.ndarray

    def __len__(self) -> int:
        return len(self.index)


@dataclass(frozen=True)
class Panel:
    """Canonical form of a user frame: regular series sharing ``freq`` and ``columns``.

    freq:    pandas offset alias, e.g. ``"h"``, ``"15min"``.
    layout:  ``"wide"`` (one item, C = len(columns)) or ``"long"`` (one item per id, C = 1).
    columns: target variable names (the wide frame's columns, or the long frame's target column).
    items:   the series, wide: one with ``item_id`` ``"0"``; long: sorted by ``item_id``.
    """

    freq: str
    layout: Layout
    columns: tuple[str, ...]
    items: tuple[Series, ...]

    @property
    def item_ids(self) -> tuple[str, ...]:
        return tuple(s.item_id for s in self.items)

    def item_label(self, position: int) -> str:
        """How error messages name ``items[position]``."""
        return "the series" if self.layout == "wide" else f"item {self.items[position].item_id!r}"

    def check_compatible(self, other: Panel) -> np.ndarray:
        """Check that ``other`` (e.g. the frame given to ``predict``) matches this fitted panel.

        Returns ``[len(other.items)]`` int64: the position in ``self.items`` (the fitted scaler's
        row) of each item of ``other``. ``ValueError`` naming the difference: layout, freq,
        columns or unknown item ids.
        """
        if other.layout != self.layout:
            raise ValueError(
                f"the model was fitted on a {self.layout} frame but got a {other.layout} frame; "
                "pass the same layout (id_col for a long frame, none for a wide frame)"
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
                f"columns differ from the fitted frame (missing {missing}, unexpected {extra}); "
                f"pass exactly these columns in this order: {list(self.columns)}"
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


def canonicalize(
    df: pd.DataFrame,
    *,
    freq: str | None = None,
    time_col: Hashable | None = None,
    id_col: Hashable | None = None,
    target_col: Hashable | Sequence[Hashable] | None = None,
) -> Panel:
    """Validate a user frame and put every item on its regular ``freq`` grid.

    df:         wide (no ``id_col``) or long (``id_col`` given) frame, rows in any order.
    freq:       pandas offset alias; inferred when None (``pd.infer_freq`` per item, else the most
                common step between timestamps).
    time_col:   timestamp column; None uses the frame's ``DatetimeIndex``.
    id_col:     item id column; makes the frame long.
    target_col: long: the target column (None: the only column left besides id and time);
                wide: a column or list of columns (None: every column except ``time_col``).

    Raises ``TypeError`` / ``ValueError`` naming the column, the value and the fix.
    """
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"expected a pandas DataFrame, got {type(df).__name__}")
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
        item_ids = [WIDE_ITEM_ID]
        grouping = f"df.groupby({time_key}).mean()"
    else:
        layout = "long"
        _require_column(df, id_col, "id_col")
        targets = [_long_target(df, id_col, time_col, target_col)]
        codes, uniques = pd.factorize(df[id_col].astype(str), sort=True)  # [R], [N]
        item_ids = [str(u) for u in uniques]
        time_key = "df.index" if time_col is None else repr(time_col)
        grouping = f"df.groupby([{id_col!r}, {time_key}]).mean()"
    for column in targets:
        if not is_numeric_dtype(df[column].dtype):
            raise TypeError(
                f"target column {column!r} has non-numeric dtype {df[column].dtype}; convert it, "
                f"e.g. df[{column!r}] = pd.to_numeric(df[{column!r}], errors='coerce') "
                "(unparseable values become missing)"
            )
    values = df[targets].to_numpy(dtype=np.float64, na_value=np.nan)  # [R, C]
    order = np.lexsort((timestamps.asi8, codes))  # by item, then time
    groups = np.split(order, np.flatnonzero(np.diff(codes[order])) + 1)  # rows of each item
    indexes = [timestamps[g] for g in groups]
    where = ["the frame"] if layout == "wide" else [f"item {i!r}" for i in item_ids]
    for place, index in zip(where, indexes):
        duplicated = index.duplicated()
        if duplicated.any():
            example = index[duplicated][0]
            raise ValueError(
                f"duplicate timestamps in {place}, e.g. {example} appears "
                f"{int((index == example).sum())} times; aggregate them first, e.g. {grouping}"
            )
    freq = normalize_freq(freq) if freq is not None else _infer_freq(indexes, where)
    items = tuple(
        _regularize(item_id, place, index, values[rows], freq)
        for item_id, place, index, rows in zip(item_ids, where, indexes, groups)
    )
    return Panel(freq=freq, layout=layout, columns=tuple(str(t) for t in targets), items=items)


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
    positions = range(n_rows) if items is None else items
    horizon = mean.shape[1]
    ids, stamps, values = [], [], []
    for n, position in enumerate(positions):
        series = panel.items[int(position)]
        origin = len(series) if origins is None else int(origins[n])
        if not 1 <= origin <= len(series):
            label = panel.item_label(int(position))
            raise ValueError(f"origin {origin} of {label} is outside [1, {len(series)}]")
        index = future_index(series.index[origin - 1], panel.freq, horizon)  # [H]
        names = panel.columns if panel.layout == "wide" else (series.item_id,)
        for c, name in enumerate(names):
            ids.append(np.full(horizon, name, dtype=object))
            stamps.append(index)
            values.append(mean[n, :, c])
    return pd.DataFrame(
        {
            "item_id": np.concatenate(ids),
            "timestamp": stamps[0].append(stamps[1:]),
            "mean": np.concatenate(values),
        }
    )


def _require_column(df: pd.DataFrame, column: Hashable, argument: str) -> None:
    if column not in df.columns:
        raise ValueError(
            f"{argument}={column!r} is not a column of the frame; available columns: "
            f"{list(df.columns)}"
        )


def _timestamps(df: pd.DataFrame, time_col: Hashable | None) -> pd.DatetimeIndex:
    """The ``[R]`` timestamps of the rows, from ``time_col`` or the ``DatetimeIndex``."""
    if time_col is None:
        if not isinstance(df.index, pd.DatetimeIndex):
            raise ValueError(
                f"no timestamps: the frame has a {type(df.index).__name__}, not a DatetimeIndex; "
                f"pass time_col=<column> or set one with df.set_index(<column>) (available "
                f"columns: {list(df.columns)})"
            )
        timestamps = df.index
        where = "the index"
    else:
        _require_column(df, time_col, "time_col")
        column = df[time_col]
        where = f"time column {time_col!r}"
        if is_numeric_dtype(column.dtype):
            raise TypeError(
                f"{where} has numeric dtype {column.dtype}; convert it to datetimes, e.g. "
                f"df[{time_col!r}] = pd.to_datetime(df[{time_col!r}], unit='s')"
            )
        try:
            timestamps = pd.DatetimeIndex(pd.to_datetime(column))
        except (TypeError, ValueError) as error:
            raise ValueError(
                f"{where} cannot be parsed as datetimes ({error}); convert it with pd.to_datetime"
            ) from None
    if timestamps.hasnans:
        raise ValueError(
            f"{where} has {int(timestamps.isna().sum())} missing timestamps (NaT); drop those rows"
        )
    return timestamps


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


def _infer_freq(indexes: Sequence[pd.DatetimeIndex], where: Sequence[str]) -> str:
    """``pd.infer_freq`` per item (all must agree); otherwise the most common step."""
    inferred: dict[str, str] = {}
    for place, index in zip(where, indexes):
        if len(index) >= 3 and (freq := pd.infer_freq(index)) is not None:
            inferred.setdefault(freq, place)
    if len(inferred) > 1:
        found = ", ".join(f"{f!r} in {place}" for f, place in inferred.items())
        raise ValueError(
            f"the series have different frequencies ({found}); resample them to one frequency "
            "and pass freq=..."
        )
    if inferred:
        return normalize_freq(next(iter(inferred)))
    steps = np.concatenate([np.diff(index.asi8) for index in indexes])
    if steps.size == 0:
        raise ValueError(
            "cannot infer the frequency: every series has a single timestamp; pass freq=..., "
            "e.g. freq='h'"
        )
    unique, counts = np.unique(steps, return_counts=True)
    if counts.max() * 2 < steps.size:
        shown = ", ".join(str(pd.Timedelta(int(u))) for u in unique[:4])
        raise ValueError(
            f"cannot infer the frequency: the steps between timestamps vary ({shown}, ...) and no "
            "step accounts for half of them; pass freq=..., e.g. freq='h'"
        )
    return normalize_freq(to_offset(pd.Timedelta(int(unique[counts.argmax()]))).freqstr)


def _regularize(
    item_id: str, place: str, index: pd.DatetimeIndex, values: np.ndarray, freq: str
) -> Series:
    """Reindex sorted unique ``index`` ``[n]`` and ``values`` ``[n, C]`` onto the ``freq`` grid."""
    grid = pd.date_range(index[0], index[-1], freq=freq)  # [T]
    positions = grid.get_indexer(index)  # [n], -1 where off the grid
    off_grid = positions < 0
    if off_grid.any():
        raise ValueError(
            f"timestamp {index[off_grid][0]} in {place} does not match freq {freq!r} (steps of "
            f"{freq!r} from {index[0]}); resample first, e.g. df.resample({freq!r}).mean() (per id "
            "for a long frame), or pass the right freq=..."
        )
    regular = np.full((len(grid), values.shape[1]), np.nan, dtype=np.float32)  # [T, C]
    regular[positions] = values
    observed = np.isfinite(regular)  # [T, C]
    regular[~observed] = np.nan
    return Series(item_id=item_id, index=grid, values=regular, observed=observed)
