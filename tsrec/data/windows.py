"""Forecast windows gathered batch by batch from series stored end to end (map-style dataset;
DistributedSampler shards it as is)."""

from __future__ import annotations

import copy
import dataclasses
import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from torch import Tensor
from torch.utils.data import Dataset, default_collate

from tsrec._checks import check_int
from tsrec.batch import ForecastBatch
from tsrec.data.frame import Panel
from tsrec.data.scaling import StandardScaler, item_blocks
from tsrec.data.split import OriginRange
from tsrec.data.time_features import future_indexes, panel_time_features, time_feature_dim

FLOAT32_MAX = float(np.finfo(np.float32).max)


@dataclass(frozen=True)
class WindowCovariates:
    """A panel's encoded covariates, as :class:`WindowDataset` appends them to its calendar features
    (:meth:`tsrec.data.covariates.CovariateEncoder.encode` makes them).

    features:   ``[sum T_i, K]`` float, the items' steps laid end to end (``T_i + H`` steps each
                for prediction windows), scaled, 0 where missing: the ``past_only`` columns first,
                then the others (future and numeric static covariates).
    past_only:  leading columns of ``features`` known only up to a window's origin (the past
                covariates and their flag): zero in every ``future_time_feat``.
    static_cat: ``[N, Kc]`` int64 codes of each item's categorical static covariates.
    """

    features: np.ndarray
    past_only: int
    static_cat: np.ndarray


class WindowDataset(Dataset):
    """Forecast windows over one or more items, indexed arithmetically and gathered batch by batch.

    Window ``k`` enumerates items in order, and within item ``i`` the origins
    ``start, start + stride, ... < stop`` of ``origins[i]``; ``k -> (item, origin)`` is a
    ``searchsorted`` on cumulative per-item counts, so no window is ever materialised.

    Every item's values, masks and time features are stored end to end, one tensor each, so that a
    batch of windows is one vectorised gather (:meth:`gather`): a ``DataLoader`` fetches each batch
    through :meth:`__getitems__` with no per-window Python, and :meth:`collate` as its
    ``collate_fn`` hands the gathered batch on unchanged.

    Values are stored scaled, in float32, the precision models compute in; an observed value
    outside float32's finite range is an error, never silently infinite.

    Each window is a dict (``C`` channels, ``F`` time features: the calendar's, then the
    covariates', ``H = prediction_length``):

    - ``past_target``      ``[context_length, C]`` float32, scaled, 0 where unobserved
    - ``past_observed``    ``[context_length, C]`` float32, 1 observed / 0 missing
    - ``past_time_feat``   ``[context_length, F]`` float32
    - ``future_time_feat`` ``[H, F]`` float32, 0 in the ``past_only`` columns
    - ``static_cat``       ``[Kc]`` int64 (only with categorical static covariates)
    - ``future_target``    ``[H, C]`` float32, 0 where unobserved (only ``with_future_target``)
    - ``future_observed``  ``[H, C]`` float32 (only ``with_future_target``)
    - ``target_loc``, ``target_scale`` ``[C]`` float64: the scaler's statistics of the window's
      item (original = scaled * scale + loc; only when the dataset was given them)
    - ``target_floor``     ``[C]`` float64: the lowest value a forecast of the window's item takes,
      in the data's units (:attr:`StandardScaler.floor <tsrec.data.scaling.StandardScaler>`: 0 for
      a series never negative, else -inf; only when the dataset was given it)
    - ``item``             int, position of the item in the inputs
    - ``series``           int, the item's scaler row: which fitted series the window is (``scaler_rows``; the
      item's position without them), what the statistical models' fitted parameters are kept by
    - ``origin``           int, grid position of the first forecast step

    A batch (:meth:`gather`, and what loaders yield with :meth:`collate` or the default collate)
    stacks these into ``[B, ...]`` tensors (``item``/``series``/``origin``: int64 ``[B]``).
    """

    def __init__(
        self,
        values: Sequence[np.ndarray],
        observed: Sequence[np.ndarray],
        time_feat: Sequence[np.ndarray],
        context_length: int,
        prediction_length: int,
        origins: Sequence[OriginRange],
        *,
        stride: int = 1,
        with_future_target: bool = True,
        past_only: slice = slice(0, 0),
        static_cat: np.ndarray | None = None,
        loc: np.ndarray | None = None,
        scale: np.ndarray | None = None,
        floor: np.ndarray | None = None,
        series: np.ndarray | None = None,
        padded: bool = False,
    ) -> None:
        """
        values:     per item ``[T_i, C]`` scaled values (anything where unobserved, e.g. NaN);
                    observed ones must be finite in float32 (``ValueError`` naming the first that
                    is not).
        observed:   per item ``[T_i, C]`` bool.
        time_feat:  per item ``[T_i, F]``, or ``[T_i + H, F]`` when windows forecast past the end.
        origins:    per item half-open origin range ``(start, stop)``; an empty range gives no
                    window. Origins need ``start >= context_length``, ``origin + H <= T_i`` (with
                    future target) or ``origin <= T_i`` and ``origin + H <= len(time_feat[i])``.
        stride:     step between consecutive origins of an item.
        with_future_target: False for prediction windows (no ``future_target``/``future_observed``).
        past_only:  the columns of ``time_feat`` known only up to each window's origin (past
                    covariates): zeroed in ``future_time_feat``.
        static_cat: ``[N, Kc]`` int64 codes of each item's categorical static covariates (None or
                    ``Kc = 0``: windows get no ``static_cat``).
        loc, scale: ``[N, C]`` float64, the scaler's statistics of each item (both or neither):
                    windows get them as ``target_loc`` / ``target_scale`` (models that must see
                    original units, such as the statistical ones, unscale with them).
        floor:      ``[N, C]`` float64, each item's floor in the data's units (0 or -inf; only with
                    ``loc`` and ``scale``): windows get it as ``target_floor``.
        series:     ``[N]`` int64, each item's scaler row (the windows' ``series``; default the item's position).
        padded:     origins may start before ``context_length`` (from 1): a window's steps before
                    its item's first step are unobserved (``past_target``, ``past_observed`` and
                    ``past_time_feat`` 0 there), for the models that read whole histories
                    (``ForecastModel.reads_whole_history``). The stored tables get
                    ``context_length`` leading rows once, never a copy per window.
        """
        if not 0 < len(values) == len(observed) == len(time_feat) == len(origins):
            raise ValueError(
                f"got {len(values)} value arrays, {len(observed)} masks, {len(time_feat)} "
                f"time-feature arrays and {len(origins)} origin ranges; pass one of each per item, "
                "for at least one item"
            )
        for i, (x, mask, feat) in enumerate(zip(values, observed, time_feat)):
            if x.ndim != 2 or mask.shape != x.shape or feat.ndim != 2 or len(feat) < len(x) or \
                    (x.shape[1], feat.shape[1]) != (values[0].shape[1], time_feat[0].shape[1]):
                raise ValueError(
                    f"item {i}: values {x.shape} and observed {mask.shape} must both be [T, C] and "
                    f"time_feat {feat.shape} [T or more, F], with the C and F of item 0"
                )
            if (bad := first_unrepresentable(x, mask)) is not None:
                raise ValueError(
                    f"item {i}: the observed value {x[bad]} at row {bad[0]}, channel {bad[1]} is not "
                    "finite in float32; pass scaled values (StandardScaler.transform), or mark it unobserved"
                )
        stored = StoredSeries(
            target=np.concatenate([np.where(mask, x, 0.0) for x, mask in zip(values, observed)]).astype(np.float32),
            observed=np.concatenate(observed).astype(bool),
            time_feat=np.concatenate(time_feat).astype(np.float32),
            lengths=np.array([len(x) for x in values], dtype=np.int64),
            feature_lengths=np.array([len(feat) for feat in time_feat], dtype=np.int64),
        )
        self._store(stored, context_length, prediction_length, with_future_target=with_future_target,
                    past_only=past_only, static_cat=static_cat, loc=loc, scale=scale, floor=floor, series=series,
                    padded=padded)
        self._set_origins(origins, check_int("stride", stride, 1))

    @classmethod
    def _of_series(cls, stored: StoredSeries, context_length: int, prediction_length: int,
                   origins: Sequence[OriginRange], *, stride: int = 1, **options: object) -> WindowDataset:
        """The windows at ``origins`` of series already laid end to end (the constructor's
        keyword ``options``), stored as they are: no per-item copy and no second check of values
        that :func:`stored_panel` checked."""
        dataset = cls.__new__(cls)
        dataset._store(stored, context_length, prediction_length, **options)
        dataset._set_origins(origins, check_int("stride", stride, 1))
        return dataset

    def _store(self, stored: StoredSeries, context_length: int, prediction_length: int, *,
               with_future_target: bool = True, past_only: slice = slice(0, 0), static_cat: np.ndarray | None = None,
               loc: np.ndarray | None = None, scale: np.ndarray | None = None, floor: np.ndarray | None = None,
               series: np.ndarray | None = None, padded: bool = False) -> None:
        """Keep the series laid end to end, ``stored``, and the options of the constructor (checked)."""
        self.context_length = check_int("context_length", context_length, 1)
        self.prediction_length = check_int("prediction_length", prediction_length, 1)
        self.with_future_target = with_future_target
        self._past_only = past_only
        self._static_cat = None if static_cat is None or not static_cat.shape[1] else \
            torch.as_tensor(static_cat.astype(np.int64))  # [N, Kc]
        if (loc is None) != (scale is None) or (floor is not None and loc is None):
            raise ValueError("pass both loc and scale, or neither; a floor only with them")
        self._loc = None if loc is None else torch.as_tensor(np.asarray(loc, dtype=np.float64))  # [N, C]
        self._scale = None if scale is None else torch.as_tensor(np.asarray(scale, dtype=np.float64))  # [N, C]
        self._floor = None if floor is None else torch.as_tensor(np.asarray(floor, dtype=np.float64))  # [N, C]
        self._lengths = stored.lengths.tolist()  # T_i
        self._feature_lengths = stored.feature_lengths.tolist()  # T_i, or T_i + H
        rows = np.arange(len(stored.lengths)) if series is None else np.asarray(series, dtype=np.int64)
        if rows.shape != stored.lengths.shape:
            raise ValueError(f"got {rows.shape[0] if rows.ndim else rows} series rows for {len(stored.lengths)} items; "
                             "pass one scaler row per item")
        self._series = torch.as_tensor(rows, dtype=torch.int64)  # [N]
        # Items end to end: rows first_row[i] .. first_row[i] + T_i - 1 of _target are item i's.
        self._target = torch.from_numpy(stored.target)  # [sum T_i, C]
        self._observed = torch.from_numpy(stored.observed)  # [sum T_i, C] bool
        self._time_feat = torch.from_numpy(stored.time_feat)  # [sum len(time_feat[i]), F]
        self._first_row = _starts(stored.lengths)  # [N]
        self._first_feat_row = _starts(stored.feature_lengths)  # [N]
        self.padded = padded
        if padded:  # rows read before the first item's first step: masked in gather, like any other item's
            pad = self.context_length
            self._target = torch.cat([self._target.new_zeros(pad, self._target.shape[1]), self._target])
            self._observed = torch.cat([self._observed.new_zeros(pad, self._observed.shape[1]), self._observed])
            self._time_feat = torch.cat([self._time_feat.new_zeros(pad, self._time_feat.shape[1]), self._time_feat])
            self._first_row += pad
            self._first_feat_row += pad

    def at_origins(self, origins: Sequence[OriginRange], *, stride: int = 1) -> WindowDataset:
        """The windows of the same items at other ``origins`` (per item ``(start, stop)``, checked as
        in the constructor), sharing this dataset's stored values: e.g. the validation windows of
        the series the training windows come from, without a second copy of them."""
        other = copy.copy(self)
        other._set_origins(origins, check_int("stride", stride, 1))
        return other

    def _set_origins(self, origins: Sequence[OriginRange], stride: int) -> None:
        """Index the windows at ``origins`` (per item ``(start, stop)``), ``stride`` apart."""
        if len(origins) != len(self._lengths):
            raise ValueError(f"got {len(origins)} origin ranges for {len(self._lengths)} items; pass one per item")
        ranges = []
        for i, (length, feature_length, (start, stop)) in enumerate(zip(self._lengths, self._feature_lengths,
                                                                       origins)):
            origin_range = range(int(start), int(stop), stride)
            if origin_range:
                last_past = length - (self.prediction_length if self.with_future_target else 0)
                last = min(last_past, feature_length - self.prediction_length)
                first = 1 if self.padded else self.context_length
                if origin_range[0] < first or origin_range[-1] > last:
                    raise ValueError(
                        f"item {i}: origins [{start}, {stop}) must lie within "
                        f"[{first}, {last}] (context_length="
                        f"{self.context_length}, prediction_length={self.prediction_length}, "
                        f"{length} time steps)"
                    )
            ranges.append(origin_range)
        self._stride = stride
        counts = torch.tensor([len(r) for r in ranges], dtype=torch.int64)  # [N] windows per item
        self._cumulative = counts.cumsum(0)  # [N] windows of items 0..i
        self._first_window = self._cumulative - counts  # [N] index of each item's first window
        self._first_origin = torch.tensor([r.start for r in ranges], dtype=torch.int64)  # [N]

    @classmethod
    def from_panel(
        cls,
        panel: Panel,
        scaler: StandardScaler,
        context_length: int,
        prediction_length: int,
        origins: Sequence[OriginRange],
        *,
        stride: int = 1,
        scaler_rows: Sequence[int] | None = None,
        covariates: WindowCovariates | None = None,
        drop_far: bool = False,
        padded: bool = False,
        dtype: type = np.float32,
    ) -> WindowDataset:
        """Training / validation windows of ``panel`` (e.g. ``Split.train`` or ``Split.val``).

        scaler_rows: per item, its row in ``scaler`` (default its position; ``Split.val_rows`` or
                     ``Panel.check_compatible`` for another panel).
        covariates:  ``panel``'s encoded covariates (features ``[sum T_i, K]``), appended to the calendar features.
        drop_far:    treat values far from the training distribution as missing when the scaler is
                     robust (:func:`stored_panel`): the windows a model is fitted on.
        padded:      origins may start before ``context_length`` (see the constructor).
        dtype:       the stored values' type: float32, the precision networks compute in, or
                     float64 for the statistical models (which read the data's own values).
        """
        return cls._of_series(
            stored_panel(panel, scaler, scaler_rows, (panel.stamps, np.diff(panel.offsets)), covariates,
                         drop_far=drop_far, dtype=dtype),
            context_length,
            prediction_length,
            origins,
            stride=stride,
            padded=padded,
            **_covariate_options(panel, covariates),
            **_statistics(panel, scaler, scaler_rows),
        )

    @classmethod
    def for_prediction(
        cls,
        panel: Panel,
        scaler: StandardScaler,
        context_length: int,
        prediction_length: int,
        *,
        scaler_rows: Sequence[int] | None = None,
        covariates: WindowCovariates | None = None,
        padded: bool = False,
        dtype: type = np.float32,
    ) -> WindowDataset:
        """One window per item forecasting the ``prediction_length`` steps after its last timestamp
        (``origin = len(item)``); future time features come from :func:`future_indexes`, and
        ``covariates`` (features ``[sum (T_i + H), K]``: the forecast steps' future covariates included)
        are appended to them.

        Raises ``ValueError`` naming an item with fewer than ``context_length`` time steps, unless
        ``padded`` (its window then starts with unobserved steps; see the constructor). ``dtype``:
        as :meth:`from_panel`.
        """
        context_length = check_int("context_length", context_length, 1)
        for i, series in enumerate(() if padded else panel.items):
            if len(series) < context_length:
                raise ValueError(
                    f"{panel.item_label(i)} has {len(series)} time steps but forecasting needs the "
                    f"last context_length={context_length}; pass more history"
                )
        return cls._of_series(
            stored_panel(panel, scaler, scaler_rows, _with_future(panel, prediction_length), covariates, dtype=dtype),
            context_length,
            prediction_length,
            [(len(s), len(s) + 1) for s in panel.items],
            with_future_target=False,
            padded=padded,
            **_covariate_options(panel, covariates),
            **_statistics(panel, scaler, scaler_rows),
        )

    def __len__(self) -> int:
        return int(self._cumulative[-1])

    def time_blocks(self, blocks: int) -> Tensor:
        """``[N]`` int64: the block of every window (in index order) among ``blocks`` contiguous blocks
        of its item's windows in time order, as equal as they can be: block ``blocks * r // n`` for
        the item's ``r``-th of ``n`` windows (a cross-validation's folds, ``tsrec.models.ridge``). An
        item's only window goes to block ``item % blocks``, so that a panel of one window per series
        is still held out a block of series at a time."""
        index = torch.arange(len(self))
        item = torch.searchsorted(self._cumulative, index, right=True)  # [N]
        count = (self._cumulative - self._first_window)[item]  # [N] windows of each window's item
        return torch.where(count == 1, item % blocks, blocks * (index - self._first_window[item]) // count)

    def __getitem__(self, index: int) -> dict[str, Tensor | int]:
        """Window ``index`` (negative counts from the end) as the dict of the class docstring."""
        return self.__getitems__([index])[0]

    def __getitems__(self, indices: Sequence[int]) -> WindowBatch:
        """Windows ``indices`` in one :meth:`gather`. A ``DataLoader`` (with a batch size) calls this
        once per batch with the batch's indices, and passes what it returns to its ``collate_fn``."""
        return WindowBatch(self.gather(indices))

    @staticmethod
    def collate(batch: WindowBatch | Sequence[dict[str, Tensor | int]]) -> ForecastBatch:
        """The ``collate_fn`` of a ``DataLoader`` over these windows: a :class:`WindowBatch` as
        gathered, with no per-window work; windows fetched one by one (through a ``ConcatDataset``,
        which has no ``__getitems__``) stacked by ``default_collate``."""
        return batch.tensors if isinstance(batch, WindowBatch) else default_collate(batch)

    def gather(self, indices: Sequence[int] | Tensor) -> ForecastBatch:
        """Windows ``indices`` (``[B]``; negative ones count from the end), in that order, as one
        batch: every field of the class docstring stacked along a leading ``B`` dimension, as
        ``default_collate`` would stack the single windows (``item``/``origin``: int64 ``[B]``).

        Raises ``IndexError`` naming the first index out of range.
        """
        item, origin = self._locate(indices)  # [B], [B]
        row = self._first_row[item] + origin  # [B] row of each window's first forecast step in _target
        feat_row = self._first_feat_row[item] + origin  # [B] ... and in _time_feat
        context, horizon = self.context_length, self.prediction_length
        batch: ForecastBatch = {
            "past_target": _blocks(self._target, row - context, context),
            "past_observed": _blocks(self._observed, row - context, context).float(),
            "past_time_feat": _blocks(self._time_feat, feat_row - context, context),
            "future_time_feat": _blocks(self._time_feat, feat_row, horizon),
        }
        batch["future_time_feat"][..., self._past_only] = 0.0
        if self.padded:  # the steps before an item's first step are not its history
            before = torch.arange(context) < (context - origin).clamp(min=0)[:, None]  # [B, Lc]
            if before.any():
                for key in ("past_target", "past_observed", "past_time_feat"):
                    batch[key][before] = 0.0
        if self._static_cat is not None:
            batch["static_cat"] = self._static_cat[item]
        if self.with_future_target:
            batch["future_target"] = _blocks(self._target, row, horizon)
            batch["future_observed"] = _blocks(self._observed, row, horizon).float()
        if self._loc is not None:
            batch["target_loc"], batch["target_scale"] = self._loc[item], self._scale[item]
        if self._floor is not None:
            batch["target_floor"] = self._floor[item]
        batch["item"], batch["series"], batch["origin"] = item, self._series[item], origin
        return batch

    def _locate(self, indices: Sequence[int] | Tensor) -> tuple[Tensor, Tensor]:
        """The item and the origin of each of the windows ``indices`` ``[B]``: int64 ``[B]`` each."""
        index = np.asarray(indices, dtype=np.int64)  # [B]; NumPy reads a list of ints faster than torch does
        total = len(self)
        outside = (index < -total) | (index >= total)
        if outside.any():
            raise IndexError(f"window {index[outside][0]} out of range for {total} windows")
        index = torch.from_numpy(index % total)  # negative indices count from the end
        item = torch.searchsorted(self._cumulative, index, right=True)
        return item, self._first_origin[item] + (index - self._first_window[item]) * self._stride


class WindowBatch(Sequence[dict[str, Tensor | int]]):
    """Windows gathered by :meth:`WindowDataset.__getitems__`.

    ``tensors`` holds them collated (:meth:`WindowDataset.gather`), which
    :meth:`WindowDataset.collate` returns as it is. As a sequence, the batch is its ``B``
    single-window dicts (views of ``tensors``, built on first use), so that ``default_collate``
    stacks it into the same batch, window by window.
    """

    def __init__(self, tensors: ForecastBatch) -> None:
        self.tensors = tensors

    def __len__(self) -> int:
        return len(self.tensors["item"])

    def __getitem__(self, position: int) -> dict[str, Tensor | int]:
        return self._windows[position]

    @functools.cached_property
    def _windows(self) -> list[dict[str, Tensor | int]]:
        """The windows one by one: views of ``tensors``, ``item``/``series``/``origin`` as ints."""
        columns = {key: value.tolist() if key in ("item", "series", "origin") else value.unbind()
                   for key, value in self.tensors.items()}
        return [dict(zip(columns, window)) for window in zip(*columns.values())]


def _starts(lengths: np.ndarray) -> Tensor:
    """The row each of items of ``lengths`` ``[N]`` starts at when laid end to end: int64 ``[N]``."""
    lengths = torch.as_tensor(lengths, dtype=torch.int64)
    return lengths.cumsum(0) - lengths


def _blocks(table: Tensor, start: Tensor, length: int) -> Tensor:
    """Rows ``start[b], ..., start[b] + length - 1`` of ``table`` ``[S, D]`` for each ``b``:
    ``[B, length, D]``, contiguous.

    The rows of a window are one contiguous block of ``length * D`` values of the row-major
    ``table``: a view of every such block (no copy) is indexed by ``start``, copying the ``B``
    blocks whole rather than element by element.
    """
    width = table.shape[1]
    if width == 0 or len(table) < length:  # nothing to copy, or no window fits (and start is empty)
        return table.new_empty(len(start), length, width)
    return table.view(-1).unfold(0, length * width, width).index_select(0, start).view(-1, length, width)


def _with_future(panel: Panel, horizon: int) -> tuple[pd.DatetimeIndex, np.ndarray]:
    """Every item's timestamps followed by its ``horizon`` forecast steps, items laid end to end:
    ``[sum (T_i + H)]``, and the ``[N]`` lengths ``T_i + H``."""
    lengths = np.diff(panel.offsets)  # [N]
    future = future_indexes(panel.stamps[panel.offsets[1:] - 1], panel.calendar, horizon)  # [N * H]
    total = lengths + horizon
    start = np.r_[0, np.cumsum(total)[:-1]]  # [N] each item's first row in the result
    past = np.repeat(start - panel.offsets[:-1], lengths) + np.arange(len(panel.stamps))  # [sum T_i] rows of history
    ahead = np.repeat(start + lengths, horizon) + np.tile(np.arange(horizon), len(lengths))  # [N * H] forecast rows
    times = np.empty(int(total.sum()), dtype=np.int64)
    times[past], times[ahead] = panel.stamps.as_unit("ns").asi8, future.as_unit("ns").asi8
    index = pd.DatetimeIndex(times.view("M8[ns]"))
    return (index if panel.stamps.tz is None else index.tz_localize("UTC").tz_convert(panel.stamps.tz)), total


def _covariate_options(panel: Panel, covariates: WindowCovariates | None) -> dict[str, object]:
    """The ``past_only`` and ``static_cat`` arguments of :class:`WindowDataset` for ``covariates``."""
    if covariates is None:
        return {}
    features = time_feature_dim(panel.calendar)  # the calendar's, before the covariates'
    return {"past_only": slice(features, features + covariates.past_only), "static_cat": covariates.static_cat}


def _statistics(panel: Panel, scaler: StandardScaler, scaler_rows: Sequence[int] | None) -> dict[str, np.ndarray]:
    """The ``loc``, ``scale``, ``floor`` and ``series`` arguments of :class:`WindowDataset`: each item's
    scaler row."""
    rows = np.arange(len(panel.items)) if scaler_rows is None else np.asarray(scaler_rows, dtype=np.int64)
    return {"loc": scaler.loc[rows], "scale": scaler.scale[rows], "floor": scaler.floor[rows], "series": rows}


@dataclass(frozen=True)
class StoredSeries:
    """Items laid end to end along time, as :class:`WindowDataset` keeps them: rows
    ``sum(lengths[:i]) ..`` of ``target``/``observed`` (and ``sum(feature_lengths[:i]) ..`` of
    ``time_feat``) are item ``i``'s.

    target:          ``[sum T_i, C]`` float32 (float64 where asked), scaled, 0 where unobserved.
    observed:        ``[sum T_i, C]`` bool.
    time_feat:       ``[sum T'_i, F]`` float32: calendar, then covariate features.
    lengths:         ``[N]`` int64 ``T_i``.
    feature_lengths: ``[N]`` int64 ``T'_i``: ``T_i``, or ``T_i + H`` for windows forecasting past the end.
    """

    target: np.ndarray
    observed: np.ndarray
    time_feat: np.ndarray
    lengths: np.ndarray
    feature_lengths: np.ndarray


def stored_panel(
    panel: Panel,
    scaler: StandardScaler,
    scaler_rows: Sequence[int] | None,
    steps: tuple[pd.DatetimeIndex, np.ndarray],
    covariates: WindowCovariates | None = None,
    *,
    drop_far: bool = False,
    dtype: type = np.float32,
) -> StoredSeries:
    """``panel``'s items laid end to end, each written once into its place (no per-item arrays):
    values scaled (in float64, a block of items at a time) with the ``scaler`` row
    ``scaler_rows[i]`` (default ``i``), and the calendar features of ``steps`` (the timestamps of
    every item's feature steps laid end to end, ``[sum T'_i]``, and their ``[N]`` counts ``T'_i``)
    followed by ``covariates``' features. With ``drop_far`` and a robust scaler
    (``StandardScaler.robust``), isolated values beyond its fences are unobserved; a level shift up
    to an item's end is kept (``StandardScaler.far_parts``).
    ``dtype``: the stored values' type (float32, or float64 for the statistical models).

    Raises ``ValueError`` naming the column (and item), the timestamp and the value of the first
    observed value whose scaled value lies outside float32's finite range, which models compute in.
    """
    rows = np.arange(len(panel.items)) if scaler_rows is None else np.asarray(scaler_rows, dtype=np.int64)  # [N]
    lengths = np.diff(panel.offsets)  # [N]
    stamps, feature_lengths = steps
    n_covariates = 0 if covariates is None else covariates.features.shape[1]
    time_feat = np.empty((len(stamps), time_feature_dim(panel.calendar) + n_covariates), dtype=np.float32)
    panel_time_features(stamps, panel.calendar, out=time_feat[:, :time_feat.shape[1] - n_covariates])
    if n_covariates:
        time_feat[:, -n_covariates:] = covariates.features
    target = np.empty((len(panel.stamps), len(panel.columns)), dtype=dtype)  # [sum T_i, C]
    observed = np.empty(target.shape, dtype=bool)
    for block in item_blocks(lengths):  # a few items at a time: the float64 temporaries stay small
        first, last = panel.offsets[block.start], panel.offsets[block.stop]
        values = np.concatenate([panel.items[i].values for i in block])  # [sum T_i, C]
        observed[first:last] = np.concatenate([panel.items[i].observed for i in block])
        items = np.repeat(rows[block.start:block.stop], lengths[block])  # [sum T_i]
        x = scaler.transform(values, items)  # [sum T_i, C]
        if drop_far and scaler.robust:
            observed[first:last] &= ~_read_as_missing(scaler, values, observed[first:last], items, lengths[block])
        if (bad := first_unrepresentable(x, observed[first:last])) is not None:
            step, c = bad
            position = block.start + int(np.searchsorted(np.cumsum(lengths[block]), step, side="right"))
            row = int(rows[position])
            raise ValueError(
                f"{panel.channel_label(position, c)} at {panel.stamps[first + step]}: the value "
                f"{values[step, c]:.6g} scales to {x[step, c]:.6g} with the scaler fitted on the training data (loc "
                f"{scaler.loc[row, c]:.6g}, scale {scaler.scale[row, c]:.6g}), beyond float32's "
                f"range (+-{FLOAT32_MAX:.3g}) that models compute in; check the value (a wrong unit or a "
                "typo?), or fit on data that cover its range"
            )
        target[first:last] = np.where(observed[first:last], x, 0.0)
    return StoredSeries(target, observed, time_feat, lengths.astype(np.int64), np.asarray(feature_lengths, np.int64))


def far_as_missing(panel: Panel, scaler: StandardScaler, scaler_rows: Sequence[int] | None = None) -> Panel:
    """``panel`` with the values that its ``scaler`` (row ``scaler_rows[i]`` for item ``i``, default
    ``i``) reads as missing, unobserved: with a robust scaler (``StandardScaler.robust``), the isolated
    values beyond its fences and the runs of placeholders at a series' end; a level shift up to a
    series' end is kept (``StandardScaler.far_parts``). What the training windows read
    (``drop_far``), and so what every model forecasts from and every validation and calibration
    scores against. ``panel`` itself where the scaler keeps every value, or none is far."""
    if not scaler.robust:
        return panel
    rows = np.arange(len(panel.items)) if scaler_rows is None else np.asarray(scaler_rows, dtype=np.int64)  # [N]
    lengths = np.diff(panel.offsets)  # [N]
    items = list(panel.items)
    for block in item_blocks(lengths):
        values = np.concatenate([items[i].values for i in block])  # [sum T_i, C]
        observed = np.concatenate([items[i].observed for i in block])
        far = _read_as_missing(scaler, values, observed, np.repeat(rows[block.start:block.stop], lengths[block]),
                               lengths[block])
        if not far.any():
            continue
        for i, mask in zip(block, np.split(far, np.cumsum(lengths[block])[:-1])):
            if mask.any():
                items[i] = dataclasses.replace(items[i], observed=items[i].observed & ~mask)
    changed = any(new is not old for new, old in zip(items, panel.items))
    return dataclasses.replace(panel, items=tuple(items)) if changed else panel


def _read_as_missing(scaler: StandardScaler, values: np.ndarray, observed: np.ndarray, rows: np.ndarray,
                     lengths: np.ndarray) -> np.ndarray:
    """``[M, C]`` bool: the observed values of items laid end to end (``values``, ``observed``
    ``[M, C]``; ``rows`` ``[M]`` each step's scaler row, ``lengths`` ``[n]`` the items' steps) that
    the robust ``scaler`` reads as missing (:func:`far_as_missing`)."""
    series = np.repeat(np.arange(len(lengths)), lengths)  # [M]
    return scaler.far_parts(values, observed, rows, series)[0]


def first_unrepresentable(x: np.ndarray, observed: np.ndarray) -> tuple[int, int] | None:
    """``(row, channel)`` of the first observed entry of ``x`` ``[T, C]`` that is not finite in
    float32 (NaN, infinite, or beyond +-3.4e38); None if there is none."""
    bad = np.argwhere(np.asarray(observed, dtype=bool) & ~(np.abs(x) <= FLOAT32_MAX))  # [K, 2]
    return (int(bad[0, 0]), int(bad[0, 1])) if len(bad) else None
