"""Covariates: columns of the user's frame that the model reads but does not forecast.

Three kinds (:class:`~tsrec.config.CovariateConfig`): past-only and known-future dynamic
covariates (numbers per step) and static covariates (one value per series; numeric ones scaled,
others categorical and embedded by the network). They come in the frame of the targets: a wide
frame's covariate columns are not targets, a long frame has them per row.

Flow (:class:`~tsrec.forecaster.Forecaster` drives it)::

    frame --without_covariates--> read_targets --> Panel (targets only), Placement (where rows landed)
    frame + Placement --read_covariates--> CovariateValues (raw, on each item's grid)
        --CovariateEncoder.fit (training rows only)--> scalers, categories
        --CovariateEncoder.encode--> WindowCovariates --> WindowDataset time features
    predict: + read_future(future_covariates frame) for the forecast steps, check_context

Feature layout appended to each step's calendar features (all scaled with training statistics,
float64 until the windows round them to float32): the ``Kp`` past covariates, a flag that is 1
where they are known (the flag and the past covariates are 0 in every window's future part), the
``Kf`` future covariates, the ``Ks`` numeric static covariates broadcast over time; the network
appends the embeddings of the categorical static covariates. A missing dynamic value (NaN, inf,
or a grid step without a row) in training and backtest windows reads as its training mean (0
once scaled); ``predict`` instead requires every covariate over the context and every future
covariate over the horizon (:func:`check_context`, :func:`read_future`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from pandas.api.types import is_bool_dtype, is_complex_dtype, is_numeric_dtype

from tsrec.config import FAR_EXAMPLES, CovariateConfig, static_embedding_dim
from tsrec.data.frame import Panel, Placement, _timestamps, index_as_columns, read_targets
from tsrec.data.scaling import StandardScaler
from tsrec.data.time_features import future_index, future_indexes
from tsrec.data.windows import WindowCovariates, first_unrepresentable

__all__ = ["UNSEEN", "CovariateEncoder", "CovariateValues", "categorical_statics", "check_context", "read_covariates",
           "read_frame", "read_future", "without_covariates"]


#: The code of a categorical static covariate's category that ``fit`` never saw (a new store of a new
#: type at ``predict``): every model reads it as the average of the known categories
#: (:class:`~tsrec.nn.covariates.StaticEmbedding`'s mean embedding, the ridge's indicators all
#: ``1 / n``, the trees' missing value).
UNSEEN = -1


@dataclass(frozen=True)
class CovariateValues:
    """A panel's covariates on its items' grids, as given (before scaling).

    dynamic:     per item ``[T_i, Kp + Kf]`` float64: the past, then the future covariates, NaN
                 where missing (NaN or inf in the frame, or a grid step without a row).
    static_real: ``[N, Ks]`` float64, each item's numeric static covariates.
    static_cat:  ``[N, Kc]`` str (object), each item's categorical static covariates.
    """

    dynamic: tuple[np.ndarray, ...]
    static_real: np.ndarray
    static_cat: np.ndarray

    @classmethod
    def none(cls, panel: Panel) -> CovariateValues:
        """No covariates for the items of ``panel``: ``[T_i, 0]`` dynamic, ``[N, 0]`` statics."""
        n = len(panel.items)
        return cls(tuple(np.zeros((len(item), 0)) for item in panel.items), np.zeros((n, 0)),
                   np.zeros((n, 0), dtype=object))

    def head(self, ends: Sequence[int] | np.ndarray) -> CovariateValues:
        """The first ``ends[i]`` steps of every item ``i`` (``[N]``; :meth:`Panel.head`)."""
        return CovariateValues(tuple(d[:e] for d, e in zip(self.dynamic, np.asarray(ends).tolist())),
                               self.static_real, self.static_cat)

    def tail(self, length: int) -> CovariateValues:
        """The last ``length`` steps of every item (what ``predict()`` needs of the fit frame)."""
        return CovariateValues(tuple(d[-length:] for d in self.dynamic), self.static_real, self.static_cat)


def without_covariates(df: pd.DataFrame, config: CovariateConfig, *, time_col: Hashable | None,
                       id_col: Hashable | None, target_col: Any) -> pd.DataFrame:
    """``df`` without its covariate columns (for :func:`~tsrec.data.canonicalize`, which then
    takes the remaining columns as targets). ``ValueError`` naming a covariate that is not a
    column of ``df``, or that is also its time, id or target column."""
    if not config.columns:
        return df
    _require_columns(df, config.columns, "the frame")
    targets = target_col if isinstance(target_col, (list, tuple)) else [target_col]
    for role, names in (("time_col", [time_col]), ("id_col", [id_col]), ("target_col", targets)):
        clash = [name for name in names if name is not None and name in config.columns]
        if clash:
            raise ValueError(f"column {clash[0]!r} is both the {role} and a covariate; a covariate is an input "
                             "the model reads, not the target or an index: name it once")
    return df.drop(columns=list(config.columns))


def read_frame(df: pd.DataFrame, config: CovariateConfig, categorical: Sequence[str], *, freq: str | None,
               gaps: str, time_col: Hashable | None, id_col: Hashable | None,
               target_col: Any, last: int | None = None) -> tuple[Panel, CovariateValues]:
    """``df`` as a panel of its targets (:func:`~tsrec.data.canonicalize` of every column but the
    covariates) and its covariates on the panel's grids (:func:`read_covariates`); with ``last``,
    of each series' ``last`` latest rows alone (:func:`~tsrec.data.frame.read_targets`)."""
    columns = {"time_col": time_col, "id_col": id_col, "target_col": target_col}
    panel, placement = read_targets(without_covariates(df, config, **columns), freq=freq, gaps=gaps, last=last,
                                    **columns)
    return panel, read_covariates(df, panel, placement, config, categorical, time_col=time_col)


def categorical_statics(df: pd.DataFrame, config: CovariateConfig) -> tuple[str, ...]:
    """The static covariates of ``df`` that are categorical: every column whose dtype is not a
    real number (strings, ``category``; booleans are numbers 0/1)."""
    _require_columns(df, config.static, "the frame")
    return tuple(name for name in config.static
                 if not is_numeric_dtype(df[name].dtype) or is_complex_dtype(df[name].dtype))


def read_covariates(df: pd.DataFrame, panel: Panel, placement: Placement, config: CovariateConfig,
                    categorical: Sequence[str], *, time_col: Hashable | None) -> CovariateValues:
    """The covariates of ``df`` on the grids of ``panel``, where ``placement`` put its rows
    (:func:`~tsrec.data.frame.read_targets` of :func:`without_covariates` of the same ``df``);
    ``categorical`` names the static covariates read as categories (:func:`categorical_statics` at
    fit, the fitted ones later).

    Raises ``TypeError`` for a non-numeric dynamic or numeric static covariate, ``ValueError``
    for a missing column and for a static covariate that is missing or not constant within a
    series (naming the series, the column and the timestamps).
    """
    if not config.columns:
        return CovariateValues.none(panel)
    _require_columns(df, config.columns, "the frame")
    dynamic = placement.per_item(placement.on_grid(_numeric(df, config.dynamic, "dynamic")))  # per item [T_i, Kd]
    if not config.static:
        return dataclasses.replace(CovariateValues.none(panel), dynamic=dynamic)
    real = [name for name in config.static if name not in categorical]
    times = _timestamps(df, time_col)  # [R], validated by read_targets
    return CovariateValues(dynamic, _statics(df, panel, placement, times, real, numeric=True),
                           _statics(df, panel, placement, times, list(categorical), numeric=False))


def read_future(frame: Any, panel: Panel, config: CovariateConfig, horizon: int, *, time_col: Hashable | None,
                id_col: Hashable | None) -> tuple[np.ndarray, ...]:
    """Per item of ``panel`` its future covariates ``[H, Kf]`` float64 at the ``horizon`` steps
    after its last timestamp, from ``frame`` (the layout of the fit frame: ``time_col`` or a
    DatetimeIndex, ``id_col`` for a long frame; rows outside the horizon are ignored).

    A missing column, and a missing, short, misaligned or NaN future covariate is a ``ValueError``
    naming the series, the column and the first forecast step without a finite value.
    """
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"future_covariates must be a pandas DataFrame, got {type(frame).__name__}")
    frame = index_as_columns(frame)
    _require_columns(frame, config.future, "future_covariates")
    if id_col is not None:
        _require_columns(frame, [id_col], "future_covariates", kind="id column")
    times = _timestamps(frame, time_col)  # [R]
    _require_time_zone(times, panel)
    values = _numeric(frame, config.future, "future")  # [R, Kf]
    item = _item_positions(frame, panel, id_col)  # [R], -1: an id the panel does not hold
    known = item >= 0
    rows = pd.MultiIndex.from_arrays([item[known], times[known]])
    if rows.has_duplicates:
        k = np.flatnonzero(rows.duplicated())[0]
        raise ValueError(f"future_covariates has several rows for {panel.item_label(item[known][k])} at "
                         f"{times[known][k]}; pass one row per series and forecast step")
    lasts = panel.stamps[panel.offsets[1:] - 1]  # [N] each item's last step
    steps = future_indexes(lasts, panel.calendar, horizon)  # [N * H]
    cells = pd.MultiIndex.from_arrays([np.repeat(np.arange(len(panel.items)), horizon), steps])
    at = cells.get_indexer(rows)  # [R'] forecast step of each row of a known id, -1 outside the horizon
    ahead = np.full((len(cells), len(config.future)), np.nan)  # [N * H, Kf]
    ahead[at[at >= 0]] = values[known][at >= 0]
    ahead = ahead.reshape(len(panel.items), horizon, -1)  # [N, H, Kf]
    for position in np.flatnonzero(~np.isfinite(ahead).all(axis=(1, 2)))[:1]:
        _require_finite_future(ahead[position], steps[position * horizon:(position + 1) * horizon],
                               times[item == position], panel.item_label(position), config.future, panel.freq)
    return tuple(ahead)


def check_context(panel: Panel, values: CovariateValues, config: CovariateConfig, context_length: int) -> None:
    """``ValueError`` naming the series, the column and the first timestamp where a dynamic
    covariate is missing in the last ``context_length`` steps of an item (what a forecast reads)."""
    for position, (item, dynamic) in enumerate(zip(panel.items, values.dynamic)):
        missing = ~np.isfinite(dynamic[-context_length:])  # [Lc, Kd]
        if missing.any():
            t, k = np.argwhere(missing)[0]  # the first step (row-major order)
            kind = "past" if k < len(config.past) else "future"
            context = item.index[-context_length:]
            raise ValueError(f"{kind} covariate {config.dynamic[k]!r} of {panel.item_label(position)} is missing at "
                             f"{context[t]}, in the forecast's context (its last {len(context)} steps, {context[0]} .. "
                             f"{context[-1]}); pass data whose covariates have a value at every step of the context")


@dataclass(frozen=True)
class CovariateEncoder:
    """How covariates become features: scaled with training statistics only (per column, float64),
    categories fixed at ``fit``. Saved with the model (:meth:`to_dict`).

    config:      the covariate columns.
    categorical: the static covariates that are categorical (embedded by the network).
    dynamic:     ``StandardScaler`` with one row ``[1, Kp + Kf]``: the dynamic covariates over
                 every item's training part.
    static:      ``StandardScaler`` ``[1, Ks]``: the numeric static covariates over the items.
    categories:  per categorical static covariate, its categories, sorted (a code is a position).
    """

    config: CovariateConfig
    categorical: tuple[str, ...]
    dynamic: StandardScaler
    static: StandardScaler
    categories: tuple[tuple[str, ...], ...]

    @classmethod
    def fit(cls, config: CovariateConfig, categorical: Sequence[str], values: CovariateValues, panel: Panel,
            train_end: Sequence[int], *, robust: bool = False) -> CovariateEncoder:
        """Fit on ``values`` of ``panel``: dynamic covariates on each item's rows ``[0, train_end[i])``.
        ``robust`` (the targets' ``scaling="robust"`` with ``far_values="missing"``): a dynamic
        covariate's values far outside its training distribution are left out of its statistics and
        read as missing wherever it is encoded (:meth:`read_as_missing`). ``ValueError`` naming a
        dynamic covariate with no observed value there."""
        training = np.concatenate([d[:end] for d, end in zip(values.dynamic, train_end)])  # [sum, Kd]
        observed = np.isfinite(training)
        never = [name for name, seen in zip(config.dynamic, observed.any(axis=0)) if not seen]
        if never:
            where = "the series" if panel.layout == "wide" else "any series"
            raise ValueError(f"covariate {never[0]!r} has no observed value in the training part of {where}; drop it, "
                             "or fit on a frame where it has data")
        static = values.static_real
        return cls(config, tuple(categorical), StandardScaler.fit([training], [observed], robust=robust),
                   StandardScaler.fit([static], [np.isfinite(static)]),
                   tuple(tuple(sorted(set(column))) for column in values.static_cat.T))

    @property
    def real(self) -> tuple[str, ...]:
        """The numeric static covariates."""
        return tuple(name for name in self.config.static if name not in self.categorical)

    @property
    def past_only(self) -> int:
        """Leading covariate features known only up to a window's origin: the past covariates and their flag."""
        return len(self.config.past) + 1 if self.config.past else 0

    @property
    def cardinalities(self) -> tuple[int, ...]:
        return tuple(len(c) for c in self.categories)

    @property
    def n_features(self) -> int:
        """Covariate features per step the network reads (``K``), the embeddings included."""
        return (self.past_only + len(self.config.future) + len(self.real)
                + sum(static_embedding_dim(c) for c in self.cardinalities))

    def encode(self, panel: Panel, values: CovariateValues,
               future: Sequence[np.ndarray] | None = None) -> WindowCovariates:
        """``values`` of ``panel`` as window features (module docstring), followed by ``future``
        (per item ``[H, Kf]``, from :func:`read_future`) for prediction windows. Every item is
        scaled at once, on its steps laid end to end."""
        n_past = len(self.config.past)
        static = self.static.transform(values.static_real, 0)  # [N, Ks]
        lengths, stacked = self._stacked(values, future)  # [N], [sum, Kd]
        scaled = self._scaled(panel, lengths, np.where(self.read_as_missing(lengths, stacked), np.nan, stacked))
        flag = np.ones((len(scaled), 1 if n_past else 0))
        features = np.concatenate([scaled[:, :n_past], flag, scaled[:, n_past:],
                                   np.repeat(static, lengths, axis=0)], axis=1)  # [sum, K]
        return WindowCovariates(features, self.past_only, self._codes(values.static_cat))

    def _stacked(self, values: CovariateValues,
                 future: Sequence[np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``[N]`` each item's steps ``T'_i`` (``T_i``, plus ``H`` with ``future``) and ``[sum T'_i, Kd]``
        its dynamic covariates laid end to end, the future ones after each item's steps (its past
        ones NaN there)."""
        dynamic = list(values.dynamic)  # per item [T_i, Kd]
        if future is not None:
            for position, ahead in enumerate(future):
                known = np.full((len(ahead), dynamic[position].shape[1]), np.nan)  # [H, Kd]
                known[:, len(self.config.past):] = ahead
                dynamic[position] = np.concatenate([dynamic[position], known])
        lengths = np.array([len(d) for d in dynamic], dtype=np.int64)  # [N] T_i (+ H)
        return lengths, np.concatenate(dynamic) if dynamic else np.zeros((0, len(self.config.dynamic)))

    def read_as_missing(self, lengths: np.ndarray, dynamic: np.ndarray) -> np.ndarray:
        """``[sum T'_i, Kd]`` bool: the values of ``dynamic`` (items' steps laid end to end,
        ``lengths`` ``[N]``) that a robust encoder reads as missing, as the targets' far values are
        read (:meth:`~tsrec.data.scaling.StandardScaler.far_parts`: beyond the training fences,
        apart from a level shift up to an item's end): a typo of 1e9 in a temperature no longer
        flattens the covariate in training, nor sends most forecasts to 5e6-3e9 at ``predict``. None
        for an encoder that keeps every value (``far_values="keep"``, one saved before), nor in a
        column that held one value but once in training (its fences have no width: a holiday flag
        set on one day is data, and so is the next holiday)."""
        if not self.dynamic.robust or not dynamic.size:
            return np.zeros(dynamic.shape, dtype=bool)
        series = np.repeat(np.arange(len(lengths)), lengths)  # [sum]
        far = self.dynamic.far_parts(dynamic, np.isfinite(dynamic), np.zeros(len(dynamic), np.int64), series)[0]
        return far & (self.dynamic.low[0] < self.dynamic.high[0])  # [sum, Kd]

    def far_values(self, panel: Panel, values: CovariateValues, future: Sequence[np.ndarray] | None = None, *,
                   context: bool = True) -> tuple[int, list[str]]:
        """How many values of ``values`` (and ``future``, per item ``[H, Kf]``) of ``panel`` the
        encoder reads as missing (:meth:`read_as_missing`; ``context=False``: those in ``future``
        alone), and the first :data:`FAR_EXAMPLES` named with their covariate, series and step."""
        lengths, stacked = self._stacked(values, future)
        far = self.read_as_missing(lengths, stacked)  # [sum, Kd]
        if not context:
            far &= np.concatenate([np.arange(n) >= len(item) for n, item in zip(lengths, panel.items)])[:, None]
        named = []
        for t, k in np.argwhere(far)[:FAR_EXAMPLES]:
            position, stamp = self._step(panel, lengths, int(t))
            named.append(f"covariate {self.config.dynamic[k]!r} of {panel.item_label(position)} at {stamp} "
                         f"({stacked[t, k]:.6g})")
        return int(far.sum()), named

    @staticmethod
    def _step(panel: Panel, lengths: np.ndarray, t: int) -> tuple[int, Any]:
        """The item of row ``t`` of covariates laid end to end (``lengths`` ``[N]``, forecast steps
        included), and its timestamp."""
        position = int(np.searchsorted(np.cumsum(lengths), t, side="right"))
        step = t - int(lengths[:position].sum())
        item = panel.items[position]
        stamps = item.index.append(future_index(item.index[-1], panel.calendar, int(lengths[position]) - len(item)))
        return position, stamps[step]

    def _scaled(self, panel: Panel, lengths: np.ndarray, dynamic: np.ndarray) -> np.ndarray:
        """``dynamic`` ``[sum_i T'_i, Kd]`` (item ``i``'s ``T'_i = lengths[i]`` steps, forecast steps
        included, laid end to end) scaled, 0 where missing; ``ValueError`` naming a value that
        scales beyond float32's range."""
        scaled = self.dynamic.transform(dynamic, 0)  # [sum, Kd]
        if (beyond := first_unrepresentable(scaled, np.isfinite(dynamic))) is not None:
            t, k = beyond
            position, stamp = self._step(panel, lengths, t)
            raise ValueError(f"covariate {self.config.dynamic[k]!r} of {panel.item_label(position)} at {stamp}: "
                             f"the value {dynamic[t, k]:.6g} scales to {scaled[t, k]:.6g} with the training "
                             "statistics, beyond float32's range; check the value (a wrong unit or a typo?)")
        return np.nan_to_num(scaled, nan=0.0)

    def _codes(self, static_cat: np.ndarray) -> np.ndarray:
        """``[N, Kc]`` int64 codes of ``static_cat``: each category's position among those fitted,
        :data:`UNSEEN` for one ``fit`` never saw (:meth:`unseen` names them)."""
        codes = np.full(static_cat.shape, UNSEEN, dtype=np.int64)
        for k, known in enumerate(self.categories):
            lookup = {category: code for code, category in enumerate(known)}
            codes[:, k] = [lookup.get(value, UNSEEN) for value in static_cat[:, k]]
        return codes

    def unseen(self, panel: Panel, static_cat: np.ndarray) -> list[str]:
        """How a message names each categorical static covariate of ``panel``'s items (``static_cat``
        ``[N, Kc]``) whose category ``fit`` never saw: ``"item 'c': region 'west' (known: 'north',
        'south')"``, one per item and covariate."""
        found = []
        for position, k in zip(*np.nonzero(self._codes(static_cat) == UNSEEN)):
            known = self.categories[k]
            shown = ", ".join(repr(c) for c in known[:10]) + (" ..." if len(known) > 10 else "")
            found.append(f"{panel.item_label(int(position))}: {self.categorical[k]} {static_cat[position, k]!r} "
                         f"(known: {shown})")
        return found

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable state (exact float64 round trip)."""
        return {"config": self.config.to_dict(), "categorical": list(self.categorical),
                "dynamic": self.dynamic.to_dict(), "static": self.static.to_dict(),
                "categories": [list(c) for c in self.categories]}

    @classmethod
    def from_dict(cls, state: dict[str, Any]) -> CovariateEncoder:
        """Inverse of :meth:`to_dict`."""
        return cls(CovariateConfig.from_dict(state["config"]), tuple(state["categorical"]),
                   StandardScaler.from_dict(state["dynamic"]), StandardScaler.from_dict(state["static"]),
                   tuple(tuple(c) for c in state["categories"]))


def _require_columns(df: pd.DataFrame, names: Sequence[Hashable], where: str, *, kind: str = "covariate") -> None:
    missing = [name for name in names if name not in df.columns]
    if missing:
        raise ValueError(f"{kind} {missing[0]!r} is not a column of {where} (its columns: {list(df.columns)[:20]}); "
                         f"pass a frame with every {kind} the model reads")


def _require_time_zone(times: pd.DatetimeIndex, panel: Panel) -> None:
    expected = panel.items[0].index.tz
    if str(times.tz) != str(expected):
        raise ValueError(f"future_covariates has timestamps in time zone {times.tz}, the data in {expected}; convert "
                         "them, e.g. with tz_localize or tz_convert")


def _item_positions(df: pd.DataFrame, panel: Panel, id_col: Hashable | None) -> np.ndarray:
    """``[R]`` int64: the position in ``panel.items`` of each row's id (ids compared as text; -1
    for an id the panel does not hold; a wide frame's rows all belong to its one item)."""
    if id_col is None:
        return np.zeros(len(df), dtype=np.int64)
    codes, uniques = pd.factorize(df[id_col])  # [R], [U]
    positions = pd.Index(panel.item_ids).get_indexer(uniques.astype(str))  # [U]
    return np.where(codes >= 0, positions[codes], -1).astype(np.int64)


def _numeric(df: pd.DataFrame, names: Sequence[str], kind: str) -> np.ndarray:
    """``[R, K]`` float64 values of the covariate columns ``names``, NaN where NA or infinite;
    ``TypeError`` naming a column that is not real numbers."""
    for name in names:
        dtype = df[name].dtype
        if not is_numeric_dtype(dtype) or is_complex_dtype(dtype):
            hint = " (a categorical covariate can only be static; encode a dynamic one, e.g. with pd.get_dummies)" \
                if kind != "numeric static" else " (it was numeric when the model was fitted)"
            raise TypeError(f"{kind} covariate {name!r} has dtype {dtype}, not real numbers{hint}; convert it, e.g. "
                            f"df[{name!r}] = pd.to_numeric(df[{name!r}], errors='coerce')")
    frame = df[list(names)]
    if any(is_bool_dtype(frame[name].dtype) for name in names):
        frame = frame.astype(np.float64)
    values = frame.to_numpy(dtype=np.float64, na_value=np.nan)  # [R, K]
    values[~np.isfinite(values)] = np.nan
    return values


def _statics(df: pd.DataFrame, panel: Panel, placement: Placement, times: pd.DatetimeIndex, names: list[str], *,
             numeric: bool) -> np.ndarray:
    """``[N, K]`` each item's value of each static covariate in ``names``: float64 (``numeric``),
    else the values as ``str`` (object); ``ValueError`` naming a series where one is missing or
    takes several values (its earliest such row)."""
    out = np.empty((len(panel.items), len(names)), dtype=np.float64 if numeric else object)
    rows, item = placement.rows, placement.item  # [n]: by item, then time
    first = rows[np.r_[0, np.flatnonzero(item[1:] != item[:-1]) + 1]]  # [N] each item's earliest row
    for k, name in enumerate(names):
        if numeric:
            given = _numeric(df, [name], "numeric static")[:, 0]  # [R]
            missing = np.isnan(given)
        else:
            given, missing = df[name].astype(str).to_numpy(), df[name].isna().to_numpy()
        if (bad := np.flatnonzero(missing[rows])).size:
            row = rows[bad[0]]
            raise ValueError(f"static covariate {name!r} of {panel.item_label(item[bad[0]])} is missing at {times[row]}; "
                             "give it a value in every row of the series")
        value = given[first]  # [N]
        if (bad := np.flatnonzero(given[rows] != value[item])).size:
            position, row = item[bad[0]], rows[bad[0]]
            raise ValueError(f"static covariate {name!r} is not constant within {panel.item_label(position)}: "
                             f"{value[position]!r} at {times[first[position]]} but {given[row]!r} at {times[row]}; a "
                             "static covariate has one value per series: fix the rows, or pass the column as a past "
                             "or future covariate")
        out[:, k] = value
    return out


def _require_finite_future(ahead: np.ndarray, steps: pd.DatetimeIndex, given: pd.DatetimeIndex, label: str,
                           names: Sequence[str], freq: str) -> None:
    """``ValueError`` naming the column and the first forecast step of ``steps`` ``[H]`` where
    ``ahead`` ``[H, Kf]`` has no finite value, and why (NaN, no row, rows off the grid or short)."""
    bad = ~np.isfinite(ahead)  # [H, Kf]
    if not bad.any():
        return
    h, k = np.argwhere(bad)[0]  # the first step (row-major order)
    where = f"at {steps[h]}, forecast step {h + 1} of {len(steps)} ({steps[0]} .. {steps[-1]})"
    if steps[h] in given:
        problem = f"is missing (NaN) {where}"
    else:
        inside = given[(given > steps[0]) & (given < steps[-1]) & ~given.isin(steps)]
        if len(inside):
            why = f"its rows at {inside[0]} ... are off the {freq!r} grid of the forecast steps"
        elif len(given):
            why = f"its rows for this series run from {given.min()} to {given.max()}"
        else:
            why = "it has no row for this series"
        problem = f"has no value {where}: {why}"
    raise ValueError(f"future covariate {names[k]!r} of {label} {problem}; pass future_covariates with a finite value "
                     "of every future covariate at every forecast step of every series")
