"""Split-conformal prediction intervals for any fitted model, calibrated once at ``fit``.

::

    fit:      a model fitted on each series up to its first calibration origin (``before``)
              forecasts W rolling origins of the fit data         -> residuals y - y_hat [W*N, H, C]
              score = |residual| / scale (per series and channel, ``ConformalConfig.scores``)
              pooled per horizon step over series, channels, windows -> Calibration (saved with the model)
    predict:  band of level L at step h = y_hat +- s_h * scale, where s_h is the
              ceil((n_h + 1) * L / 100)-th smallest of the n_h scores of step h

The finite-sample rank ``ceil((n + 1)(1 - a))`` makes the band cover at least ``1 - a`` of a new
residual exchangeable with the calibration ones (Vovk et al. 2005; Lei et al. 2018); a level
whose rank exceeds ``n`` needs more residuals and is refused. statsforecast's
``ConformalIntervals`` takes the same rolling-origin residuals per series and step, without the
correction and without pooling; pooling over series (scaled) lets a few windows calibrate many
series.

Cost: W forecasts of every series by the model fitted before the calibration origins (for a
statistical model, one statsforecast fit per series and window), plus that fit (a network trains
once more; ``auto`` reuses its members' validation runs, :func:`tsrec.auto.fit_auto`).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from tsrec.config import CONFORMAL_SCORES, CONFORMAL_UPDATES, ConformalConfig
from tsrec.data import Panel
from tsrec.data.scaling import StandardScaler
from tsrec.metrics import seasonal_scale

__all__ = ["DEFAULT_LEVELS", "MAX_KEPT", "Calibration", "band_ends", "band_quantiles", "calibrate",
           "check_interval_levels", "default_windows", "error_scale", "observed_ends", "observed_starts",
           "origins_before_end", "rolling_size", "series_scale", "step_profile"]

#: The interval levels a backtest scores for a calibrated model when none are named (percent).
DEFAULT_LEVELS = (80.0, 90.0, 95.0)
#: Residuals per horizon step :func:`default_windows` aims at (a 95% band needs 19).
TARGET_RESIDUALS = 100
#: Calibration origins per series by default: at least / at most.
MIN_WINDOWS, MAX_WINDOWS = 2, 30
#: Order statistics kept per horizon step: all of them up to this many, else this many ranks
#: spread over them (each level then reads the kept rank at or above its own: a band at most
#: ``1 / MAX_KEPT`` of coverage wider than the exact one, never narrower).
MAX_KEPT = 1000


def default_windows(n_series: int) -> int:
    """Calibration origins per series for ``n_series`` series (channels of a wide frame count as
    series): :data:`TARGET_RESIDUALS` residuals per horizon step in all, within
    [:data:`MIN_WINDOWS`, :data:`MAX_WINDOWS`]."""
    return int(min(MAX_WINDOWS, max(MIN_WINDOWS, math.ceil(TARGET_RESIDUALS / max(1, n_series)))))


def check_interval_levels(levels: Any) -> tuple[float, ...]:
    """``levels`` (percent, statsforecast's ``level=[80, 90]``) as a sorted tuple of distinct
    floats in [1, 100), or a ``ValueError`` naming the problem and the fix: a level below 1 is a
    fraction among percentages (``[0.9, 90]``: a 0.9% band, a sliver around the mean) and a bool
    no level at all (``True`` would read as a 1% band)."""
    given = [levels] if np.isscalar(levels) else levels
    try:
        given = list(given)
    except TypeError:
        given = None
    if given is not None and any(isinstance(level, (bool, np.bool_)) for level in given):
        raise ValueError(f"levels must be interval levels in percent, e.g. [80, 90]; got {levels!r}, which holds a "
                         "bool (True reads as a 1% interval): pass the levels themselves")
    try:
        values = tuple(sorted(float(level) for level in given))
    except (TypeError, ValueError):
        raise ValueError(f"levels must be a list of interval levels in percent, e.g. [80, 90]; "
                         f"got {levels!r}") from None
    if not values or any(not 0.0 < v < 100.0 for v in values) or len(set(values)) < len(values):
        raise ValueError(f"levels must be distinct percentages strictly between 0 and 100, e.g. [80, 90]; "
                         f"got {levels!r}")
    fractions = [v for v in values if v < 1.0]
    if fractions:
        meant = sorted({round(100 * v, 10) for v in fractions} | {v for v in values if v >= 1.0})
        spelt = "[" + ", ".join(f"{v:g}" for v in meant) + "]"
        raise ValueError(f"levels are percentages (80 for an 80% interval), got {levels!r}: "
                         f"{' and '.join(f'{v:g}' for v in fractions)} would give "
                         f"{' and '.join(f'{v:g}%' for v in fractions)} interval(s), a sliver around the mean; "
                         f"pass levels={spelt}, or quantiles=[...] for quantile levels (e.g. "
                         f"quantiles={list(band_quantiles(meant))} for their bands)")
    return values


def band_ends(level: float) -> tuple[float, float]:
    """The quantile levels of the lower and upper band of the interval ``level`` (percent):
    ``(1 - L/100) / 2`` and ``1 - (1 - L/100) / 2`` (80 -> 0.1 and 0.9), the keys of their columns."""
    low = round((100.0 - level) / 200.0, 12)
    return low, round(1.0 - low, 12)


def band_quantiles(levels: Sequence[float]) -> tuple[float, ...]:
    """The quantile levels of the bands of interval ``levels`` (percent, :func:`band_ends`), sorted."""
    return tuple(sorted({q for level in levels for q in band_ends(level)}))


def band_levels(quantiles: Sequence[float]) -> tuple[float, ...]:
    """The interval levels (percent) whose bands end at ``quantiles``: ``100 |1 - 2q|`` (0.1 and 0.9
    -> 80), sorted; 0.5 is none (the mean, about which the bands are symmetric)."""
    return tuple(sorted({round(100.0 * abs(1.0 - 2.0 * q), 9) for q in quantiles if q != 0.5}))


def series_scale(panel: Panel, scaler: StandardScaler, rows: np.ndarray) -> np.ndarray:
    """``[I, C]``: each series' and channel's mean absolute one-step change over its observed steps
    (a naive forecast's in-sample error: :func:`tsrec.metrics.seasonal_scale` at season 1). 0 for a
    constant series (:func:`calibrate` scales it by its own calibration errors); where undefined
    (a single observation), the scaler's ``scale`` (``rows`` ``[I]``), else 1."""
    y = np.concatenate([np.where(s.observed, s.values, np.nan) for s in panel.items])  # [sum T_i, C]
    out = seasonal_scale(y, 1, lengths=np.diff(panel.offsets))  # [I, C]
    fallback = np.asarray(scaler.scale, dtype=np.float64)[rows]  # [I, C]
    out = np.where(np.isfinite(out), out, fallback)
    return np.where(np.isfinite(out) & (out >= 0), out, 1.0)


def error_scale(residual: np.ndarray, rows: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """``scale`` ``[N, C]`` with each 0 (a constant series, :func:`series_scale`) replaced by its
    series' and channel's mean absolute residual ``residual`` ``[W, H, C]`` (NaN: none) over its
    windows (rows ``rows`` ``[W]``): its band is then as wide as its own forecasts' errors, in its own
    units, and 0 where they were all exact (or it had no window)."""
    constant = scale == 0  # [N, C]
    if not constant.any():
        return scale
    total = np.zeros_like(scale)
    count = np.zeros_like(scale)
    seen = np.isfinite(residual)  # [W, H, C]
    np.add.at(total, rows, np.where(seen, np.abs(residual), 0.0).sum(axis=1))
    np.add.at(count, rows, seen.sum(axis=1))
    with np.errstate(invalid="ignore"):
        own = np.where(count > 0, total / count, 0.0)  # [N, C]
    return np.where(constant, own, scale)


def observed_ends(panel: Panel) -> np.ndarray:
    """``[I]`` int64: each series' length up to and including its last step with an observed value."""
    ends = []
    for item in panel.items:
        seen = np.flatnonzero(item.observed.any(axis=1))
        ends.append(int(seen[-1]) + 1 if len(seen) else 0)
    return np.asarray(ends, dtype=np.int64)


def observed_starts(panel: Panel) -> np.ndarray:
    """``[I]`` int64: each series' first step with an observed value (:attr:`Series.first_observed
    <tsrec.data.frame.Series.first_observed>`)."""
    return np.asarray([item.first_observed for item in panel.items], dtype=np.int64)


def origins_before_end(ends: np.ndarray, horizon: int, windows: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Calibration origins of series whose observed data end at ``ends`` ``[I]``: ``windows`` origins
    per series, one step apart, the last one's window ending at the series' end (they cover its
    last ``windows + horizon - 1`` steps). Returns the first origin ``[I]``, the count ``[I]`` and
    the stride (1). (``auto`` takes its origins from its validation backtest, :mod:`tsrec.auto`.)"""
    last = ends - horizon  # [I]
    return last - (windows - 1), np.full(len(ends), windows, dtype=np.int64), 1


@dataclass(frozen=True)
class Calibration:
    """What conformal calibration learned (saved with the model: ``forecaster.json``'s
    ``conformal`` and ``weights.pt``'s ``conformal_*`` tensors).

    Attributes:
        scores: ``"scaled"`` or ``"absolute"`` (:class:`~tsrec.config.ConformalConfig`).
        order: ``[H, K]`` float64, each horizon step's smallest-first nonconformity scores (all of
            them, or :data:`MAX_KEPT` ranks spread over them; NaN after a step's ``kept``).
        counts: ``[H]`` int64, the scores of each step (``n_h``).
        scale: ``[N, C]`` float64, what each fitted series' and channel's residuals were divided by
            (:func:`series_scale`, a constant series' by :func:`error_scale`; ones for ``"absolute"``),
            in the fitted series' order; 0: a constant series forecast exactly (a band of width 0).
        windows: calibration origins per series; ``stride``: steps between them.
        cpu_seconds: what the calibration cost (the fit before the origins and their forecasts).
        profile: ``[H]`` float64, each step's mean score where the steps' scores are pooled
            (``ConformalConfig.pooling="steps"``: ``order[h]`` is ``profile[h]`` times the pooled
            scores' ranks); None where each step reads its own.
        update: ``"rolling"``: the scores learn from the data after the fit
            (:mod:`tsrec.conformal_update`); ``"off"``: they stay these.
        rolling: the rolling window's size in pooled scores (:func:`rolling_size`); 0 without update.
    """

    scores: str
    order: np.ndarray
    counts: np.ndarray
    scale: np.ndarray
    windows: int
    stride: int
    cpu_seconds: float
    profile: np.ndarray | None = None
    update: str = "off"
    rolling: int = 0

    @property
    def kept(self) -> np.ndarray:
        """``[H]`` int64: the order statistics kept of each step."""
        return np.minimum(self.counts, self.order.shape[1])

    def max_level(self) -> float:
        """The highest level (percent) every step can calibrate: ``100 * n / (n + 1)`` of the
        step with the fewest scores."""
        n = int(self.counts.min())
        return 100.0 * n / (n + 1)

    def width(self, level: float) -> np.ndarray:
        """``[H]`` the half-width of the level-``level`` band at each step, in scaled score units:
        the ``k = ceil((n_h + 1) * level / 100)``-th smallest score of step ``h`` (the kept rank
        at or above it). ``ValueError`` when ``k > n_h``."""
        n, kept = self.counts, self.kept
        k = np.ceil((n + 1) * (level / 100.0) - 1e-9).astype(np.int64)  # [H]
        if (k > n).any():
            raise ValueError(
                f"a {level:g}% conformal interval needs at least {math.ceil(level / (100 - level) - 1e-9)} "
                f"calibration residuals per horizon step; this model has {int(n.min())} ({self.windows} windows per "
                f"series), enough for levels up to {self.max_level():.1f}%: ask for a lower level, or refit with "
                f"more calibration windows (conformal_windows=...) on a history that holds them")
        j = np.ceil(k * kept / n - 1e-9).astype(np.int64)  # [H] the kept rank at or above k
        return self.order[np.arange(len(n)), j - 1]

    def require_quantiles(self, quantiles: Sequence[float]) -> None:
        """``ValueError`` naming the interval (:func:`band_levels`) of any pair of ``quantiles`` that
        this calibration is too small for, with :meth:`width`'s fix."""
        for level in band_levels(quantiles):
            try:
                self.width(level)
            except ValueError as error:
                ends = " and ".join(f"{q:g}" for q in band_ends(level))
                raise ValueError(f"quantiles {ends} are the ends of the {level:g}% conformal interval: {error}") \
                    from None

    def bands(self, mean: np.ndarray, rows: np.ndarray, levels: Sequence[float],
              widths: Mapping[float, np.ndarray] | None = None) -> tuple[tuple[float, ...], np.ndarray]:
        """The bands of ``levels`` (percent) around ``mean`` ``[N, H, C]`` of windows whose series
        are the fitted rows ``rows`` ``[N]``: the quantile levels (:func:`band_quantiles`) and
        ``[N, H, C, Q]`` their values, lower bands ascending then upper bands. ``widths``: each
        level's half-widths ``[N, H]`` per window in score units (learned after the fit,
        :func:`tsrec.conformal_update.learned_widths`); else :meth:`width`'s for every window."""
        quantiles = band_quantiles(levels)
        out = np.empty(mean.shape + (len(quantiles),))
        scale = self.scale[np.asarray(rows)][:, None, :]  # [N, 1, C]
        for level in levels:
            width = self.width(level)[None, :] if widths is None else widths[level]  # [N or 1, H]
            half = width[:, :, None] * scale  # [N, H, C]
            low, high = band_ends(level)
            out[..., quantiles.index(low)] = mean - half
            out[..., quantiles.index(high)] = mean + half
        return quantiles, out

    # ------------------------------------------------------------------ saving
    def to_dict(self) -> dict[str, Any]:
        """``forecaster.json``'s ``conformal`` entry (the arrays are :meth:`tensors`)."""
        learned = {} if not self.learns_or_pools else {"update": self.update, "rolling": self.rolling}
        return {"scores": self.scores, "windows": self.windows, "stride": self.stride,
                "cpu_seconds": self.cpu_seconds, **learned}

    @property
    def learns_or_pools(self) -> bool:
        """Whether the calibration pools steps or learns after the fit (saved as model format 11;
        one that does neither is written as before, in a format older tsrec reads)."""
        return self.profile is not None or self.update != "off"

    def tensors(self) -> dict[str, torch.Tensor]:
        profile = {} if self.profile is None else \
            {"conformal_profile": torch.from_numpy(np.ascontiguousarray(self.profile, dtype=np.float64))}
        return {"conformal_order": torch.from_numpy(np.ascontiguousarray(self.order, dtype=np.float64)),
                "conformal_counts": torch.from_numpy(np.ascontiguousarray(self.counts, dtype=np.int64)),
                "conformal_scale": torch.from_numpy(np.ascontiguousarray(self.scale, dtype=np.float64)), **profile}

    @classmethod
    def from_saved(cls, data: dict[str, Any], tensors: dict[str, Any]) -> Calibration:
        """The calibration :meth:`to_dict` and :meth:`tensors` wrote; ``ValueError`` naming the entry
        where they are missing or could not have been written by :func:`calibrate` (a count or
        order statistic that does not fit the others, a score that is negative, unsorted or not a
        number, a scale that is negative): an edit, even one given new checksums, is refused
        here instead of failing at ``predict``. Whether it fits the model (its horizon, series and
        channels) is the loader's check (:mod:`tsrec.saved_state`)."""
        arrays = {}
        for key, (dtype, ndim) in {"conformal_order": (torch.float64, 2), "conformal_counts": (torch.int64, 1),
                                   "conformal_scale": (torch.float64, 2)}.items():
            value = tensors.get(key)
            if not (isinstance(value, torch.Tensor) and value.dtype == dtype and value.ndim == ndim):
                raise ValueError(f"the saved calibration's {key} is missing or not {dtype} with {ndim} dimensions")
            arrays[key] = value.numpy()
        order, counts, scale = arrays["conformal_order"], arrays["conformal_counts"], arrays["conformal_scale"]
        ranks = min(MAX_KEPT, int(counts.max(initial=0)))  # what calibrate keeps
        if len(order) != len(counts) or (counts < 1).any() or order.shape[1] != ranks:
            raise ValueError(f"the saved calibration holds {list(order.shape)} scores (horizon steps, ranks) for the "
                             f"counts {counts.tolist()[:5]}{' ...' if len(counts) > 5 else ''}: calibration keeps, for "
                             f"each step with at least one score, min({MAX_KEPT}, the largest count) ranks")
        kept = np.arange(order.shape[1]) < np.minimum(counts, order.shape[1])[:, None]  # [H, K]
        ranked = np.where(kept, order, np.inf)
        if not (np.isfinite(order[kept]).all() and (order[kept] >= 0).all() and np.isnan(order[~kept]).all()
                and (np.diff(ranked, axis=1)[kept[:, 1:]] >= 0).all()):
            raise ValueError("the saved calibration's conformal_order is not each step's ascending nonnegative scores "
                             "followed by NaN")
        if not (np.isfinite(scale).all() and (scale >= 0).all()):
            raise ValueError("the saved calibration's conformal_scale is not finite and nonnegative everywhere")
        if data.get("scores") not in CONFORMAL_SCORES:
            raise ValueError(f"the saved calibration's scores is {data.get('scores')!r}, not one of {CONFORMAL_SCORES}")
        for key in ("windows", "stride"):
            if not (isinstance(data.get(key), int) and not isinstance(data.get(key), bool) and data[key] >= 1):
                raise ValueError(f"the saved calibration's {key} is {data.get(key)!r}, not an integer >= 1")
        profile = tensors.get("conformal_profile")  # model format 11: pooled steps
        if profile is not None:
            if not (isinstance(profile, torch.Tensor) and profile.dtype == torch.float64 and profile.ndim == 1
                    and len(profile) == len(order)):
                raise ValueError("the saved calibration's conformal_profile is not float64 with one value per step")
            profile = profile.numpy()
            if not (np.isfinite(profile).all() and (profile > 0).all()):
                raise ValueError("the saved calibration's conformal_profile is not finite and positive everywhere")
        update, rolling = data.get("update", "off"), data.get("rolling", 0)
        if update not in CONFORMAL_UPDATES or (update == "rolling" and profile is None):
            raise ValueError(f"the saved calibration's update is {update!r}: one of {CONFORMAL_UPDATES}, and "
                             "'rolling' only with pooled steps (a conformal_profile)")
        if not (isinstance(rolling, int) and not isinstance(rolling, bool)
                and (update == "off" or 1 <= rolling <= int(counts.min()))):
            raise ValueError(f"the saved calibration's rolling window is {rolling!r}, not an integer from 1 to its "
                             "scores' count")
        return cls(scores=data["scores"], order=order, counts=counts, scale=scale,
                   windows=data["windows"], stride=data["stride"], cpu_seconds=float(data["cpu_seconds"]),
                   profile=profile, update=update, rolling=rolling)


def calibrate(mean: np.ndarray, truth: np.ndarray, observed: np.ndarray, rows: np.ndarray, fitted_scale: np.ndarray,
              windows: int, stride: int, config: ConformalConfig, cpu_seconds: float) -> Calibration:
    """The :class:`Calibration` of ``W`` calibration windows: their forecasts ``mean``, true values
    ``truth`` and whether each was ``observed`` (``[W, H, C]`` each), and each window's fitted
    series ``rows`` ``[W]``; ``fitted_scale`` ``[N, C]``: every fitted series' scale
    (:func:`series_scale`, used for ``"scaled"`` scores; a 0 becomes :func:`error_scale`'s,
    :attr:`Calibration.scale`). A series whose scale stays 0 (constant, every forecast exact) adds
    no score (unless no series adds one: then its zeros) and gets a band of width 0. ``ValueError``
    for a horizon step with no score (no observed value with a forecast)."""
    horizon = mean.shape[1]
    residual = np.where(observed, truth - mean, np.nan)  # [W, H, C]
    if config.scores == "scaled":
        fitted_scale = error_scale(residual, rows, fitted_scale)
    divisor = fitted_scale[rows][:, None, :] if config.scores == "scaled" else 1.0  # [W, 1, C]
    with np.errstate(invalid="ignore", divide="ignore"):
        score = np.abs(residual) / divisor  # [W, H, C]: NaN for an exact forecast of a constant series
    score = np.where(np.isfinite(score), score, np.nan).transpose(1, 0, 2).reshape(horizon, -1)  # [H, W*C]
    exact = (residual == 0).transpose(1, 0, 2).reshape(horizon, -1)  # [H, W*C]
    score = np.where(~np.isfinite(score).any(axis=1, keepdims=True) & exact, 0.0, score)  # only constants: width 0
    counts = np.isfinite(score).sum(axis=1)  # [H]
    if (counts == 0).any():
        raise ValueError(f"conformal calibration: horizon step {int(np.argmin(counts)) + 1} has no observed value "
                         "with a forecast in the calibration windows; pass data with observations at the end of "
                         "the series, or more calibration windows (conformal_windows=...)")
    profile = None
    if config.pooling == "steps":  # every step reads the pooled scores, at its own profile
        profile = step_profile(score)  # [H]
        pooled = (score / profile[:, None]).ravel()  # [H*W*C]
        pooled = np.sort(pooled[np.isfinite(pooled)])  # [n]
        counts = np.full(horizon, pooled.size, dtype=np.int64)
        order = profile[:, None] * kept_ranks(pooled[None, :], counts[:1])  # [H, K]
    else:
        order = kept_ranks(np.sort(score, axis=1), counts)  # [H, K]
    update = config.update or "off"
    return Calibration(config.scores, order, counts.astype(np.int64),
                       fitted_scale if config.scores == "scaled" else np.ones_like(fitted_scale), windows, stride,
                       cpu_seconds, profile=profile, update=update,
                       rolling=rolling_size(int(counts.min()), horizon, stride) if update == "rolling" else 0)


def kept_ranks(ordered: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``[S, K]`` the order statistics kept of ``ordered`` ``[S, n]`` (each row's ``counts[s]``
    ascending scores, NaN after them): all of them up to :data:`MAX_KEPT`, else that many ranks
    spread over them; NaN after a row's kept ranks."""
    kept = min(MAX_KEPT, int(counts.max()))
    order = np.full((len(counts), kept), np.nan)
    for s, n in enumerate(counts.tolist()):
        ranks = np.arange(1, n + 1) if n <= kept else np.ceil(np.arange(1, kept + 1) * n / kept).astype(np.int64)
        order[s, :len(ranks)] = ordered[s, ranks - 1]
    return order


def step_profile(score: np.ndarray) -> np.ndarray:
    """``[H]`` each step's mean of its scores ``score`` ``[H, n]`` (NaN: none), the width shape of a
    pooled calibration; a step whose mean is 0 (every residual 0) takes the smallest positive mean
    of the others (1 where none is positive), so that no step divides by 0."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        profile = np.nanmean(score, axis=1)  # [H]
    positive = profile[np.isfinite(profile) & (profile > 0)]
    floor = positive.min() if positive.size else 1.0
    return np.where(np.isfinite(profile) & (profile > 0), profile, floor)


def rolling_size(count: int, horizon: int, stride: int) -> int:
    """The rolling window's size in pooled scores (:mod:`tsrec.conformal_update`): as many
    independent scores as the calibration holds, ``count`` pooled scores of windows ``stride`` steps
    apart whose ``horizon`` steps overlap counted ``stride / horizon`` each, and at least
    :data:`TARGET_RESIDUALS` (never more than ``count``). A rule fixed before any benchmark."""
    independent = math.ceil(count * min(1.0, stride / horizon))
    return int(min(count, max(TARGET_RESIDUALS, independent)))


