"""Lazily indexed forecast windows (map-style dataset; DistributedSampler shards it as is)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch.utils.data import Dataset

from tsrec._checks import check_int
from tsrec.data.frame import Panel
from tsrec.data.scaling import StandardScaler
from tsrec.data.split import OriginRange
from tsrec.data.time_features import future_index, time_feature_dim, time_features

FLOAT32_MAX = float(np.finfo(np.float32).max)


@dataclass(frozen=True)
class WindowCovariates:
    """A panel's encoded covariates, as :class:`WindowDataset` appends them to its calendar features
    (:meth:`tsrec.data.covariates.CovariateEncoder.encode` makes them).

    features:   per item ``[T_i, K]`` float (``[T_i + H, K]`` for prediction windows), scaled, 0
                where missing: the ``past_only`` columns first, then the others (future and
                numeric static covariates).
    past_only:  leading columns of ``features`` known only up to a window's origin (the past
                covariates and their flag): zero in every ``future_time_feat``.
    static_cat: ``[N, Kc]`` int64 codes of each item's categorical static covariates.
    """

    features: tuple[np.ndarray, ...]
    past_only: int
    static_cat: np.ndarray


class WindowDataset(Dataset):
    """Forecast windows over one or more items, indexed arithmetically.

    Window ``k`` enumerates items in order, and within item ``i`` the origins
    ``start, start + stride, ... < stop`` of ``origins[i]``; ``k -> (item, origin)`` is a
    ``searchsorted`` on cumulative per-item counts, so no window is ever materialised.

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
    - ``item``             int, position of the item in the inputs
    - ``origin``           int, grid position of the first forecast step

    The default ``DataLoader`` collate stacks these into ``[B, ...]`` tensors (``item``/``origin``:
    int64 ``[B]``).
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
        """
        self.context_length = check_int("context_length", context_length, 1)
        self.prediction_length = check_int("prediction_length", prediction_length, 1)
        stride = check_int("stride", stride, 1)
        if not len(values) == len(observed) == len(time_feat) == len(origins):
            raise ValueError(
                f"got {len(values)} value arrays, {len(observed)} masks, {len(time_feat)} "
                f"time-feature arrays and {len(origins)} origin ranges; pass one of each per item"
            )
        self.with_future_target = with_future_target
        self._past_only = past_only
        self._static_cat = None if static_cat is None or not static_cat.shape[1] else static_cat.astype(np.int64)
        if (loc is None) != (scale is None):
            raise ValueError("pass both loc and scale, or neither")
        self._loc = None if loc is None else torch.as_tensor(np.asarray(loc, dtype=np.float64))  # [N, C]
        self._scale = None if scale is None else torch.as_tensor(np.asarray(scale, dtype=np.float64))  # [N, C]
        self._target, self._observed, self._time_feat, self._origins = [], [], [], []
        for i, (x, mask, feat, (start, stop)) in enumerate(
            zip(values, observed, time_feat, origins)
        ):
            if x.ndim != 2 or mask.shape != x.shape or feat.ndim != 2 or len(feat) < len(x):
                raise ValueError(
                    f"item {i}: values {x.shape} and observed {mask.shape} must both be [T, C] and "
                    f"time_feat {feat.shape} [T or more, F]"
                )
            origin_range = range(int(start), int(stop), stride)
            if origin_range:
                last_past = len(x) - (self.prediction_length if with_future_target else 0)
                last = min(last_past, len(feat) - self.prediction_length)
                if origin_range[0] < self.context_length or origin_range[-1] > last:
                    raise ValueError(
                        f"item {i}: origins [{start}, {stop}) must lie within "
                        f"[{self.context_length}, {last}] (context_length="
                        f"{self.context_length}, prediction_length={self.prediction_length}, "
                        f"{len(x)} time steps)"
                    )
            if (bad := first_unrepresentable(x, mask)) is not None:
                raise ValueError(
                    f"item {i}: the observed value {x[bad]} at row {bad[0]}, channel {bad[1]} is not "
                    "finite in float32; pass scaled values (StandardScaler.transform), or mark it unobserved"
                )
            self._target.append(np.where(mask, x, 0.0).astype(np.float32))  # [T, C]
            self._observed.append(mask.astype(np.float32))  # [T, C]
            self._time_feat.append(np.asarray(feat, dtype=np.float32))  # [T(+H), F]
            self._origins.append(origin_range)
        self._cumulative = np.cumsum([len(r) for r in self._origins], dtype=np.int64)  # [N]

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
    ) -> WindowDataset:
        """Training / validation windows of ``panel`` (e.g. ``Split.train`` or ``Split.val``).

        scaler_rows: per item, its row in ``scaler`` (default its position; ``Split.val_rows`` or
                     ``Panel.check_compatible`` for another panel).
        covariates:  ``panel``'s encoded covariates (features ``[T_i, K]``), appended to the calendar features.
        """
        return cls(
            scaled_values(panel, scaler, scaler_rows),
            [s.observed for s in panel.items],
            _with_covariates([time_features(s.index, panel.freq) for s in panel.items], covariates),
            context_length,
            prediction_length,
            origins,
            stride=stride,
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
    ) -> WindowDataset:
        """One window per item forecasting the ``prediction_length`` steps after its last timestamp
        (``origin = len(item)``); future time features come from :func:`future_index`, and
        ``covariates`` (features ``[T_i + H, K]``: the forecast steps' future covariates included)
        are appended to them.

        Raises ``ValueError`` naming an item with fewer than ``context_length`` time steps.
        """
        context_length = check_int("context_length", context_length, 1)
        for i, series in enumerate(panel.items):
            if len(series) < context_length:
                raise ValueError(
                    f"{panel.item_label(i)} has {len(series)} time steps but forecasting needs the "
                    f"last context_length={context_length}; pass more history"
                )
        calendar = [
            time_features(s.index.append(future_index(s.index[-1], panel.freq, prediction_length)), panel.freq)
            for s in panel.items
        ]  # [T + H, F] each
        return cls(
            scaled_values(panel, scaler, scaler_rows),
            [s.observed for s in panel.items],
            _with_covariates(calendar, covariates),
            context_length,
            prediction_length,
            [(len(s), len(s) + 1) for s in panel.items],
            with_future_target=False,
            **_covariate_options(panel, covariates),
            **_statistics(panel, scaler, scaler_rows),
        )

    def __len__(self) -> int:
        return int(self._cumulative[-1]) if len(self._cumulative) else 0

    def __getitem__(self, index: int) -> dict[str, torch.Tensor | int]:
        total = len(self)
        if not -total <= index < total:
            raise IndexError(f"window {index} out of range for {total} windows")
        index = int(index) % total
        item = int(np.searchsorted(self._cumulative, index, side="right"))
        first = int(self._cumulative[item - 1]) if item else 0
        origin = self._origins[item][index - first]
        past = slice(origin - self.context_length, origin)
        future = slice(origin, origin + self.prediction_length)
        window: dict[str, torch.Tensor | int] = {
            "past_target": torch.tensor(self._target[item][past]),
            "past_observed": torch.tensor(self._observed[item][past]),
            "past_time_feat": torch.tensor(self._time_feat[item][past]),
            "future_time_feat": torch.tensor(self._time_feat[item][future]),
        }
        window["future_time_feat"][:, self._past_only] = 0.0
        if self._static_cat is not None:
            window["static_cat"] = torch.tensor(self._static_cat[item])
        if self.with_future_target:
            window["future_target"] = torch.tensor(self._target[item][future])
            window["future_observed"] = torch.tensor(self._observed[item][future])
        if self._loc is not None:
            window["target_loc"], window["target_scale"] = self._loc[item], self._scale[item]
        window["item"] = item
        window["origin"] = origin
        return window


def _with_covariates(calendar: list[np.ndarray], covariates: WindowCovariates | None) -> list[np.ndarray]:
    """Per item the calendar features ``[T_i, F]`` followed by the covariate features ``[T_i, K]``."""
    if covariates is None:
        return calendar
    return [np.concatenate([c, k.astype(np.float32)], axis=1) for c, k in zip(calendar, covariates.features)]


def _covariate_options(panel: Panel, covariates: WindowCovariates | None) -> dict[str, object]:
    """The ``past_only`` and ``static_cat`` arguments of :class:`WindowDataset` for ``covariates``."""
    if covariates is None:
        return {}
    calendar = time_feature_dim(panel.freq)
    return {"past_only": slice(calendar, calendar + covariates.past_only), "static_cat": covariates.static_cat}


def _statistics(panel: Panel, scaler: StandardScaler, scaler_rows: Sequence[int] | None) -> dict[str, np.ndarray]:
    """The ``loc`` and ``scale`` arguments of :class:`WindowDataset`: each item's scaler row."""
    rows = np.arange(len(panel.items)) if scaler_rows is None else np.asarray(scaler_rows, dtype=np.int64)
    return {"loc": scaler.loc[rows], "scale": scaler.scale[rows]}


def scaled_values(
    panel: Panel, scaler: StandardScaler, scaler_rows: Sequence[int] | None = None
) -> list[np.ndarray]:
    """Per item ``[T_i, C]`` float64: ``panel``'s values scaled (in float64) with the ``scaler`` row
    ``scaler_rows[i]`` (default ``i``), NaN where unobserved.

    Raises ``ValueError`` naming the column (and item), the timestamp and the value of the first
    observed value whose scaled value lies outside float32's finite range, which models compute in.
    """
    rows = range(len(panel.items)) if scaler_rows is None else scaler_rows
    scaled = []
    for position, (series, row) in enumerate(zip(panel.items, rows)):
        x = scaler.transform(series.values, int(row))  # [T, C]
        if (bad := first_unrepresentable(x, series.observed)) is not None:
            t, c = bad
            raise ValueError(
                f"{panel.channel_label(position, c)} at {series.index[t]}: the value {series.values[t, c]:.6g} "
                f"scales to {x[t, c]:.6g} with the scaler fitted on the training data (loc "
                f"{scaler.loc[int(row), c]:.6g}, scale {scaler.scale[int(row), c]:.6g}), beyond float32's "
                f"range (+-{FLOAT32_MAX:.3g}) that models compute in; check the value (a wrong unit or a "
                "typo?), or fit on data that cover its range"
            )
        scaled.append(x)
    return scaled


def first_unrepresentable(x: np.ndarray, observed: np.ndarray) -> tuple[int, int] | None:
    """``(row, channel)`` of the first observed entry of ``x`` ``[T, C]`` that is not finite in
    float32 (NaN, infinite, or beyond +-3.4e38); None if there is none."""
    bad = np.argwhere(np.asarray(observed, dtype=bool) & ~(np.abs(x) <= FLOAT32_MAX))  # [K, 2]
    return (int(bad[0, 0]), int(bad[0, 1])) if len(bad) else None
