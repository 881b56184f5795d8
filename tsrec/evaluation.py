"""Rolling-origin backtests of a :class:`~tsrec.Forecaster`: the windows of a frame, the model's
forecasts of them and the baselines' of the same windows, as one errors frame.

::

    backtest(forecaster, df, ...)
      read            df read once (tsrec.data.source.read)
      origins         per series the first origin and the number of windows, stride apart
      refits          refit_every: the forecaster fitted again on Read.before(each block's first origin)
      forecasts       forecast_origins(state, panel, ...)                     [windows, horizon, channels]
      baselines       each the registered model of its name: fit_state(Read.before(first origin)),
                      forecast_origins over the same windows (again every baselines_refit_every)
      errors          one row per window, channel and step (_window_frame)
      scores          tsrec.scoring.score(errors, ...): summary, per step, skill, intervals

Scoring is :mod:`tsrec.scoring`'s (arrays and frames in, tables out); this module runs the models.
"""

from __future__ import annotations

import dataclasses
import functools
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tsrec._checks import check_optional_int
from tsrec.config import FAR_IQRS, CovariateConfig
from tsrec.conformal import DEFAULT_LEVELS
from tsrec.data import CovariateValues, Panel, metric_season, source
from tsrec.data.frame import block_frame
from tsrec.data.launches import launched
from tsrec.data.scaling import OutlierWarning, StandardScaler
from tsrec.data.schema import Schema
from tsrec.data.source import Read, Source
from tsrec.data.windows import far_as_missing
from tsrec.fitted import FittedState, ForecastResult
from tsrec.fitting import fit_state, report_unseen_categories
from tsrec.forecaster import Forecaster
from tsrec.forecasting import context_read, forecast_origins, interval_settings, window_origins
from tsrec.metrics import seasonal_scale
from tsrec.models.base import DEFAULT_QUANTILE_LEVELS
from tsrec.models.parameters import refits
from tsrec.nn.outputs import check_levels
from tsrec.scoring import (BASELINES, COVERAGE_TOLERANCE, STATS_BASELINES, BacktestResult, CoverageWarning,
                           coverage_tolerance, score, scored_levels, step_errors)
from tsrec.settings import ForecasterSettings

__all__ = ["COVERAGE_TOLERANCE", "STATS_BASELINES", "BacktestResult", "CoverageWarning", "backtest",
           "coverage_tolerance", "score_backtest", "step_errors"]

#: The baselines of a backtest that names none (ets and theta when statsforecast is installed).
DEFAULT_BASELINES = ("naive", "seasonal_naive", "ets", "theta")


@dataclass(frozen=True)
class _Stacked:
    """A panel's items end to end, as :attr:`Panel.stamps`, so that windows and histories are gathered
    by row number.

    Attributes:
        values: ``[R, C]`` float64, the items' values one after another (``R``: their lengths summed).
        observed: ``[R, C]`` bool.
        index: ``[R]`` the items' timestamps (:attr:`Panel.stamps`).
        start: ``[I]`` int64, the row of each item's first step.
        length: ``[I]`` int64, each item's number of steps.
    """

    values: np.ndarray
    observed: np.ndarray
    index: pd.DatetimeIndex
    start: np.ndarray
    length: np.ndarray

    @classmethod
    def of(cls, panel: Panel) -> _Stacked:
        """``panel``'s items, in order."""
        return cls(values=np.concatenate([series.values for series in panel.items]),
                   observed=np.concatenate([series.observed for series in panel.items]),
                   index=panel.stamps, start=panel.offsets[:-1], length=np.diff(panel.offsets))

    @property
    def item(self) -> np.ndarray:
        """``[R]`` int64: the item of each row."""
        return np.repeat(np.arange(len(self.length)), self.length)

    def rows(self, items: np.ndarray, origin: np.ndarray, steps: np.ndarray) -> np.ndarray:
        """``[N, S]`` rows of the ``steps`` ``[S]`` (grid offsets from the origin) of the windows
        ``(items[k], origin[k])`` ``[N]``."""
        return self.start[items, None] + origin[:, None] + steps


def _origins(panel: Panel, stacked: _Stacked, horizon: int, start: int | str | pd.Timestamp | None,
             n_windows: int | None, stride: int) -> tuple[np.ndarray, np.ndarray]:
    """Per item the first forecast origin (grid position of the first forecast step) and the number
    of windows, ``[I]`` int64 each; the origins are ``stride`` apart. A window needs one earlier
    step: one with fewer than ``context_length`` before it reads them padded, as ``predict`` reads
    a series that short."""
    last = stacked.length - horizon  # [I] the last origin whose window fits
    if start is None:
        first = last - stride * ((1 if n_windows is None else n_windows) - 1)
    elif isinstance(start, (int, np.integer)) and not isinstance(start, bool):
        first = np.full_like(last, int(start))
    else:
        first = _positions(panel, stacked, pd.Timestamp(start))
    if (early := np.flatnonzero(first < 1)).size:
        i = early[0]
        raise ValueError(f"{panel.item_label(i)}: the first backtest window would start at position {first[i]}, "
                         "with no earlier step to forecast from; start later, or use fewer windows")
    if (late := np.flatnonzero(first > last)).size:
        i = late[0]
        raise ValueError(f"{panel.item_label(i)}: no backtest window fits: the first origin {first[i]} leaves fewer "
                         f"than prediction_length={horizon} steps before the end ({stacked.length[i]} steps)")
    count = (last - first) // stride + 1
    return first, count if n_windows is None else np.minimum(count, n_windows)


def _positions(panel: Panel, stacked: _Stacked, stamp: pd.Timestamp) -> np.ndarray:
    """``[I]`` int64: the grid position of ``stamp`` in each item; ``ValueError`` naming the first
    item without it."""
    rows = np.flatnonzero(stacked.index == stamp)  # at most one per item
    items = stacked.item[rows]
    position = np.full(len(stacked.length), -1, dtype=np.int64)
    position[items] = rows - stacked.start[items]
    if (missing := np.flatnonzero(position < 0)).size:
        i = missing[0]
        index = panel.items[i].index
        raise ValueError(f"start={stamp} is not a timestamp of {panel.item_label(i)} "
                         f"({index[0]} .. {index[-1]} at freq {panel.freq!r})")
    return position


def _block_ends(stacked: _Stacked, first: np.ndarray, count: np.ndarray) -> np.ndarray:
    """``[I]`` the step each item's fit data end before: the block's first origin, or, for an item
    without a window in the block (``count`` 0), its length (all of it)."""
    return np.where(count > 0, first, stacked.length)


def backtest(forecaster: Forecaster, df: Source, *, start: int | str | pd.Timestamp | None = None,
             n_windows: int | None = None, stride: int | None = None, refit_every: int | None = None,
             batch_size: int | None = None, season_length: int | None = None,
             quantiles: Sequence[float] | None = None, baselines: Sequence[str] | None = None,
             baselines_refit_every: int | None = None, time_col: str | None = None, id_col: str | None = None,
             target_col: str | None = None, levels: Sequence[float] | None = None,
             intervals: str | None = None) -> BacktestResult:
    """Forecast from rolling origins over ``df`` and score every window.

    Args:
        forecaster: a fitted Forecaster (or an unfitted one with ``refit_every``). Series of ``df`` it
            was not fitted on are scaled by their steps before their first origin and forecast as
            ``predict`` forecasts them (:meth:`~tsrec.fitted.FittedState.with_new_series`).
        df: the frame to backtest on, in the layout the forecaster was fitted with, or long
            Parquet data (a file, a folder of files or a list of files), read once: the refits
            (``refit_every``, ``auto``'s and calibrated models' included) and the baselines are fitted
            on slices of that read (:meth:`Read.before <tsrec.data.source.Read.before>`); windows read
            their context from it, so it must hold ``context_length`` steps before the first origin.
            A forecaster fitted with covariates reads them from it too, the future covariates of
            each window included (a missing value reads as the training mean, as in ``fit``);
            refits use the same covariate columns.
        start: the first forecast origin: a grid position (int) or a timestamp. Default: the
            last ``n_windows`` origins, ``stride`` apart, ending with the window that forecasts
            the frame's last ``prediction_length`` steps.
        n_windows: number of windows per item (default: 1 without ``start``, all with it).
        stride: steps between origins (default ``prediction_length``: windows do not overlap).
        refit_every: refit a copy of the forecaster on the data before the origin every this many
            windows (default: never refit; the fitted forecaster is reused).
        batch_size: windows per inference batch of the forecaster (the last partial batch is kept;
            the baselines run in batches of their own, :data:`BASELINE_BATCH`).
        season_length: MASE's seasonal period (default: the frequency's natural season, 1 for
            yearly data, :func:`~tsrec.data.time_features.metric_season`).
        quantiles: for a probabilistic model, the levels scored (default: a quantile output's own
            levels, else 0.1, ..., 0.9): ``errors`` gets ``y_q<level>`` (original units) and
            ``y_q<level>_scaled`` per level, and ``summary`` the CRPS (from the quantiles, in both
            units), ``mean_wQuantileLoss`` and ``coverage_<level>``, as GluonTS's ``Evaluator``.
        levels, intervals: interval levels (percent) and what gives their bands, as in
            ``Forecaster.predict`` (:func:`~tsrec.forecasting.interval_settings`). Default: a
            calibrated model's conformal 80, 90 and 95% intervals (those its calibration can give),
            else the intervals of the quantile pairs scored (0.1 and 0.9: 80%). Each level's
            coverage, width and Winkler score go into ``summary`` and, per series, ``intervals``;
            a level whose coverage strays more than :func:`coverage_tolerance` from it warns
            (:class:`CoverageWarning`).
        baselines: the rows of :attr:`BacktestResult.skill`, from ``"naive"``, ``"seasonal_naive"``,
            ``"ets"``, ``"theta"``, ``"ces"`` and ``"dynamic_theta"`` (default: the first four when
            statsforecast is installed, the two naive ones otherwise; naming a statistical one
            without it is an error naming the extra). Each is the registered model of that name
            with its default settings (``Forecaster(<baseline>, prediction_length=...)``: its own
            season and context), fitted with :func:`~tsrec.fitting.fit_state` on each series'
            history before its first origin and forecasting the same windows
            (:func:`~tsrec.forecasting.forecast_origins`): the statistical ones (statsforecast's
            AutoETS, AutoTheta, AutoCES, DynamicOptimizedTheta) fitted once per series and
            channel and carried forward over the origins, as statsforecast's
            ``cross_validation(refit=False)`` (docs/backtests.md). A baseline whose model cannot
            be fitted on that history forecasts nothing (NaN), with a warning.
        baselines_refit_every: fit the baselines again on all the history before the origin every
            this many windows of a series (statsforecast's ``refit=k``; default: never, they are
            fitted once). Independent of ``refit_every``, which refits the forecaster.

    Under a process group (DDP, ``torchrun``) every rank must call it; without ``refit_every`` the
    series of long data (``id_col``) are split among the ranks, each reading and scoring its own,
    and every rank returns the whole result (``docs/scale.md``).
    """
    stride, n_windows, refit_every, baselines_refit_every = (
        check_optional_int(name, value) for name, value in (("stride", stride), ("n_windows", n_windows),
                                                            ("refit_every", refit_every),
                                                            ("baselines_refit_every", baselines_refit_every)))
    if forecaster.model is None and refit_every is None:
        from sklearn.exceptions import NotFittedError

        raise NotFittedError("the forecaster is not fitted: fit it first, or pass refit_every=k to fit it on the data "
                           "before each block of k windows")
    from tsrec.collective import by_series, world

    wanted = _levels(forecaster, quantiles)
    baselines = _check_baselines(baselines)
    bands = _Bands(levels, intervals, quantiles)
    windows = functools.partial(_backtest_errors, forecaster, start=start, n_windows=n_windows, stride=stride,
                                refit_every=refit_every, batch_size=batch_size, season_length=season_length,
                                levels=wanted, bands=bands, baselines=baselines,
                                baselines_refit_every=baselines_refit_every, time_col=time_col, id_col=id_col,
                                target_col=target_col)
    if refit_every is None and id_col is not None and world()[1] > 1:  # DDP: each rank reads and scores its series
        errors = by_series(df, id_col, windows)
    else:
        errors = windows(df)
    return score(errors, baselines, scored_levels(errors), bands.method)


@dataclass
class _Bands:
    """The intervals a backtest asks for (``levels``, ``intervals``, beside ``quantiles``), resolved
    against the first forecaster that forecasts (:meth:`resolve`): the same for every refit block."""

    levels: Sequence[float] | None
    intervals: str | None
    quantiles: Sequence[float] | None
    method: str | None = None
    resolved: tuple[float, ...] | None = None

    def resolve(self, forecaster: Forecaster) -> tuple[tuple[float, ...], str | None]:
        """The interval levels and method of ``forecaster``'s forecasts (:func:`interval_settings`;
        without ``levels``, a calibrated model's :data:`~tsrec.conformal.DEFAULT_LEVELS` that its
        calibration can give, unless ``quantiles`` asks for the model's own)."""
        if self.resolved is None:
            levels, method = self.levels, self.intervals
            calibration = forecaster.fitted.calibration
            if levels is None and method is None and calibration is not None and self.quantiles is None:
                levels = [level for level in DEFAULT_LEVELS if level <= calibration.max_level()] or None
            self.resolved, self.method = interval_settings(forecaster.fitted, levels, method, self.quantiles)
        return self.resolved, self.method


def _backtest_errors(forecaster: Forecaster, df: Source, *, start: int | str | pd.Timestamp | None,
                     n_windows: int | None, stride: int | None, refit_every: int | None, batch_size: int | None,
                     season_length: int | None, levels: tuple[float, ...], bands: _Bands, baselines: Sequence[str],
                     baselines_refit_every: int | None, time_col: str | None, id_col: str | None,
                     target_col: str | None) -> pd.DataFrame:
    """:func:`backtest`'s errors of the windows of ``df`` (its arguments checked, ``levels`` and
    ``baselines`` resolved): ``df`` read once, the forecaster's forecasts of each refit block,
    the baselines' of every window."""
    fitted = forecaster.covariates
    covariates = CovariateConfig() if fitted is None else fitted.config
    schema = Schema(time_col, id_col, target_col, covariates)
    read = source.read(df, schema, categorical=() if fitted is None else fitted.categorical, freq=forecaster.freq,
                       gaps=forecaster.settings.window.gaps)
    horizon = forecaster.prediction_length
    window = (forecaster.resolved_settings or forecaster.settings).window
    read = dataclasses.replace(read, panel=launched(read.panel, horizon, window.leading_zeros)[0])  # as fit reads
    panel, values = read.panel, read.covariates
    stride = stride or horizon
    stacked = _Stacked.of(panel)
    first, count = _origins(panel, stacked, horizon, start, n_windows, stride)  # [I] each
    if window.robust:  # as the fit read far values
        _report_far_truth(panel, first)
    if refit_every is None:  # a refitting backtest's blocks are fitted on the frame's own categories
        report_unseen_categories(forecaster.fitted, panel, values, "backtest", stacklevel=5)
    y = np.where(stacked.observed, stacked.values, np.nan)  # [R, C]
    season = season_length or metric_season(panel.calendar)
    scale = seasonal_scale(y, season, lengths=stacked.length, ends=first)  # [I, C]
    scores = _baselines(baselines, read, first, count, stride, horizon, baselines_refit_every)
    n_blocks = int(count.max())
    block = refit_every or n_blocks
    parts: list[pd.DataFrame] = []
    for done in range(0, n_blocks, block):
        block_first, block_count = first + stride * done, np.clip(count - done, 0, block)  # [I] each
        if refit_every is not None:
            forecaster = _refitted(forecaster, read, _block_ends(stacked, block_first, block_count))
        # series the forecaster was not fitted on: known by their steps before their first origin
        state = forecaster.fitted.with_new_series(panel, values, np.clip(block_first, 1, None))
        rows = state.history.check_compatible(panel)
        intervals, method = bands.resolve(forecaster)
        result = forecast_origins(state, panel, values, block_first, block_count, stride,
                                  levels=() if method == "conformal" else levels, intervals=intervals, method=method,
                                  batch_size=batch_size)
        parts.append(_window_frame(panel, stacked, state.scaler, result, rows, scale,
                                   scores.of(result.items, result.origins, first, count, stride)))
    return parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)  # one block: no copy


def _report_far_truth(panel: Panel, first: np.ndarray) -> None:
    """Warn (:class:`~tsrec.data.scaling.OutlierWarning`) naming the values of ``panel`` that a robust
    scaler fitted on all of it reads as missing (:func:`~tsrec.data.windows.far_as_missing`: a typo
    of 1e7, -9999) where a backtest scores them as given: in the windows from each series' first
    origin ``first`` ``[I]`` on, and in the histories before them that MASE's scale is read from.
    Every model forecasts as if they were missing, but an error on one outweighs every other (a
    typo of 1e7 in a daily series around 20 took every skill ratio to 1.000)."""
    kept = far_as_missing(panel, StandardScaler.fences_of(panel))
    if kept is panel:
        return
    examples: dict[bool, list[str]] = {True: [], False: []}  # in the windows scored, before them
    counts = {True: 0, False: 0}
    for i, (item, clean) in enumerate(zip(panel.items, kept.items)):
        for t, c in zip(*np.nonzero(item.observed & ~clean.observed)):
            scored = bool(t >= first[i])
            counts[scored] += 1
            if len(examples[scored]) < 3:
                examples[scored].append(
                    f"{panel.channel_label(i, int(c))} at {item.index[t]} ({item.values[t, c]:.6g})")
    named = (examples[True] or examples[False])[:3]
    warnings.warn(f"backtest: {counts[True]} value(s) in the windows scored and {counts[False]} in the histories "
                  f"before them (from which MASE's scale is read) lie far outside their series' distribution (more "
                  f"than {FAR_IQRS:g} interquartile ranges beyond its quartiles, apart from any level shift): "
                  f"{', '.join(named)}. Every model forecasts as if they were missing, but they are scored as given, "
                  "and an error on one outweighs every other: set them to NaN (or drop those rows) to score without "
                  "them", OutlierWarning, stacklevel=4)


def _refitted(forecaster: Forecaster, read: Read, ends: np.ndarray) -> Forecaster:
    """A copy of ``forecaster`` fitted, as its ``fit`` fits (calibration and auto's selection
    included), on each series' first ``ends`` ``[I]`` steps of ``read``: a slice of the arrays read
    (:meth:`Read.before <tsrec.data.source.Read.before>`), never the rows read again."""
    return forecaster.unfitted_copy().fit_read(read.before(ends))


def score_backtest(forecaster: Forecaster, errors: pd.DataFrame) -> BacktestResult:
    """The :class:`BacktestResult` of backtest ``errors`` (:attr:`BacktestResult.errors`) of the fitted
    ``forecaster``: its summary, per-step errors and skill, from the errors alone
    (:func:`tsrec.scoring.score`).

    For backtests run in parts (e.g. over partitions of the series, on several workers): the errors
    of the parts concatenated give the metrics of one backtest over all the series (within float
    rounding), since every metric is a mean over the scored entries (MASE divides each entry by its
    series' ``seasonal_error``). The baselines scored are those with columns in ``errors``, the
    quantile levels those of its ``y_q<level>`` columns (intervals: their symmetric pairs).
    """
    baselines = tuple(b for b in BASELINES if f"y_{b}_scaled" in errors)
    method = errors.attrs.get("intervals")  # lost where the parts' frames were joined without it:
    if method is None and forecaster.calibration is not None and not forecaster.model.output.probabilistic:
        method = "conformal"  # a point model's only bands
    return score(errors, baselines, scored_levels(errors), method)


def _check_baselines(baselines: Sequence[str] | None) -> tuple[str, ...]:
    """The skill table's baselines: ``baselines`` checked, else those of :data:`DEFAULT_BASELINES` that
    are installed."""
    from tsrec.models.stats import require_statsforecast, statsforecast_installed

    if baselines is None:
        return DEFAULT_BASELINES if statsforecast_installed() else DEFAULT_BASELINES[:2]
    names = (baselines,) if isinstance(baselines, str) else tuple(baselines)
    unknown = sorted(set(names) - set(BASELINES))
    if unknown:
        raise ValueError(f"unknown baseline(s) {unknown}; choose from {', '.join(BASELINES)}")
    if set(names) & set(STATS_BASELINES) and not statsforecast_installed():
        require_statsforecast()
    return names


@dataclass(frozen=True)
class _Baselines:
    """The baselines' forecasts of every window of a backtest, in :func:`~tsrec.forecasting.window_origins`'
    order over all its windows (``W``: ``count.sum()``).

    Attributes:
        forecasts: per baseline name, ``[W, H, C]`` float64 in original units (NaN where the
            window's context held no observed value, or the baseline's model could not be fitted).
        seasons: per baseline name, the season its model resolved (NaN where it could not be fitted).
        fit_steps: ``[W]`` float64, the steps (from the series' start) the statistical models
            forecasting each window were fitted on; None without a statistical baseline.
    """

    forecasts: dict[str, np.ndarray]
    seasons: dict[str, float]
    fit_steps: np.ndarray | None

    def of(self, items: np.ndarray, origin: np.ndarray, first: np.ndarray, count: np.ndarray,
           stride: int) -> _Baselines:
        """The same for the windows ``(items[k], origin[k])`` ``[N]`` of a block, with ``first``,
        ``count`` ``[I]`` and ``stride`` those the whole backtest's windows came from."""
        index = (np.cumsum(count) - count)[items] + (origin - first[items]) // stride  # [N] place among all windows
        return _Baselines({name: f[index] for name, f in self.forecasts.items()}, self.seasons,
                          None if self.fit_steps is None else self.fit_steps[index])


def _baselines(names: Sequence[str], read: Read, first: np.ndarray, count: np.ndarray, stride: int, horizon: int,
               refit_every: int | None) -> _Baselines:
    """The baselines ``names`` of the windows of items with ``count`` ``[I]`` origins from ``first``
    ``[I]``, ``stride`` apart, in ``read`` (:class:`_Baselines`): each the registered model of its
    name (:func:`_run_baseline`), on the targets alone. The statistical ones are fitted once per
    series and channel on all its history before its first origin and carried forward
    (statsforecast's ``cross_validation(refit=False)``), or fitted again before every
    ``refit_every``-th window of a series (``refit=k``); a window whose history is more than
    :data:`~tsrec.models.parameters.REFIT_GROWTH` times the fitted one is fitted on its own."""
    panel = read.panel
    targets = Read(panel, CovariateValues.none(panel), dataclasses.replace(read.schema, covariates=CovariateConfig()))
    items, origin = window_origins(first, count, stride)  # [W] each, all the windows
    every = refit_every or max(1, int(count.max()))  # without refits, only each series' first window fits
    fit_origin = origin - stride * (((origin - first[items]) // stride) % every)  # [W] the origin of the window's fit
    fit_steps = np.where(refits(origin, fit_origin), origin, fit_origin).astype(np.float64) \
        if set(names) & set(STATS_BASELINES) else None
    forecasts, seasons = {}, {}
    said: dict[tuple[type[Warning], str], list[str]] = {}  # each warning once, naming every baseline that gave it
    for name in names:
        forecasts[name], seasons[name], caught = _run_baseline(name, targets, first, count, stride, horizon, every)
        for category, message in caught:
            said.setdefault((category, message), []).append(name)
    for (category, message), who in said.items():
        named = who[0] if len(who) == 1 else f"{', '.join(who[:-1])} and {who[-1]}"
        warnings.warn(f"backtest's {named} baseline{'s' if len(who) > 1 else ''}: {message}", category, stacklevel=4)
    return _Baselines(forecasts, seasons, fit_steps)


#: Values (steps x channels of the windows' contexts) of a batch of a baseline's windows: their
#: models cost little per window, so they run in few batches (a few MB each) whatever ``batch_size``
#: says of the forecaster's.
BASELINE_BATCH = 2**20


def _run_baseline(name: str, read: Read, first: np.ndarray, count: np.ndarray, stride: int, horizon: int,
                  every: int) -> tuple[np.ndarray, float, list[tuple[type[Warning], str]]]:
    """The forecasts ``[W, H, C]`` of the registered model ``name`` (its default settings at the
    backtest's horizon, without validation windows, as it has nothing to train; a window with
    fewer steps before it than the model's context reads them padded) of the windows of ``read``, fitted on all of each series' history before its first origin
    (and again every ``every`` windows), the season it resolved, and the warnings its run gave
    (category and message, for the caller to say once per baseline named: the fit data's far values
    are the forecaster's to report, and are left out); a model that cannot be fitted gives NaN, with
    a warning."""
    panel = read.panel
    lengths = np.diff(panel.offsets)  # [I]
    out = np.full((int(count.sum()), horizon, len(panel.columns) if panel.layout == "wide" else 1), np.nan)
    season, offsets = np.nan, np.cumsum(count) - count
    options = {"prediction_length": horizon, "freq": panel.freq, "val_windows": 0}  # nothing to train or validate
    settings = ForecasterSettings.from_options(name, **options)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            for done in range(0, int(count.max()), every):
                block_first, block_count = first + stride * done, np.clip(count - done, 0, every)  # [I] each
                state = fit_state(read.before(np.where(block_count > 0, block_first, lengths)), settings).state
                windows = max(1, BASELINE_BATCH // (context_read(state, panel) * out.shape[2]))
                result = forecast_origins(state, panel, read.covariates, block_first, block_count, stride,
                                          batch_size=windows)
                out[offsets[result.items] + done + (result.origins - block_first[result.items]) // stride] = \
                    result.mean
                season = season if done else float(_season_of(state))
        except (ValueError, RuntimeError) as err:
            out[:], season = np.nan, np.nan
            warnings.warn(f"could not be run: {err}; its skill row has no scores", UserWarning)
    said = [(w.category, str(w.message)) for w in caught if not issubclass(w.category, OutlierWarning)]
    return out, season, list(dict.fromkeys(said))


def _season_of(state: FittedState) -> int:
    """The season a baseline's fitted model resolved (1 for the naive one)."""
    return getattr(state.resolved.network, "season_length", 1)


def _levels(forecaster: Forecaster, quantiles: Sequence[float] | None) -> tuple[float, ...]:
    """The quantile levels a backtest scores: none for a point model; ``quantiles``, else a
    quantile output's own levels, else 0.1, ..., 0.9."""
    if forecaster.settings.network.output == "point":
        if quantiles is not None:
            calibrated = forecaster.settings.conformal.windows != 0 if forecaster.fitted is None \
                else forecaster.fitted.calibration is not None
            fix = ("its quantiles are the ends of its conformal bands, which a backtest scores as quantiles too (CRPS, "
                   "mean_wQuantileLoss, coverage): pass levels=[80] for 0.1 and 0.9, or leave quantiles out (its 80, "
                   "90 and 95% bands)" if calibrated else
                   "refit with conformal_windows=<k> for conformal bands (levels=[...])" if not forecaster.trainable
                   else "refit with output='quantile', 'normal' or 'studentt', or with conformal_windows=<k> for "
                   "conformal bands (levels=[...])")
            raise ValueError(f"{forecaster.model_name} forecasts points (output='point'), so a backtest has no "
                             f"quantiles=[...] of its own to score: {fix}")
        return ()
    if quantiles is not None:
        return check_levels("quantiles", quantiles)
    if forecaster.settings.network.output == "quantile":
        return forecaster.settings.network.quantile_levels
    return DEFAULT_QUANTILE_LEVELS


def _window_frame(panel: Panel, stacked: _Stacked, scaler: StandardScaler, result: ForecastResult, rows: np.ndarray,
                  scale: np.ndarray, baselines: _Baselines) -> pd.DataFrame:
    """Tidy per-window, per-step, per-channel rows for one block of windows ``(result.items[k],
    result.origins[k])`` ``[N]`` with ``rows`` ``[I]`` the items' rows of the forecaster's ``scaler``: the forecasts of
    ``result`` (its quantiles too, for a probabilistic model), the truth, each series' MASE scale
    ``scale`` ``[I, C]`` (:func:`~tsrec.metrics.seasonal_scale`), and the ``baselines`` of these
    windows (:meth:`_Baselines.of`) with their seasons and ``stats_fit_steps``.

    The float64 columns are written into one ``[columns, N * H * C]`` block that the frame holds
    without a copy (:func:`block_frame`)."""
    items, origin, scaled = result.items, result.origins, result.scaled
    n, horizon, channels = scaled.shape
    scaler_rows = rows[items]  # [N]
    shape = (n, horizon, channels)
    names = ["y_true", "y_pred", "seasonal_error",
             *(f"{column}{name}{units}" for name in baselines.forecasts
               for column, units in (("y_", ""), ("y_", "_scaled"), ("season_", ""))),
             *(["stats_fit_steps"] if baselines.fit_steps is not None else []),
             *(f"y_q{level}{units}" for level in result.levels for units in ("", "_scaled"))]
    block = np.empty((len(names), n * horizon * channels))  # [columns, N * H * C] float64
    column = dict(zip(names, block))  # name: [N * H * C] view
    future = stacked.rows(items, origin, np.arange(horizon))  # [N, H] the forecast steps' rows
    truth, observed = _window_values(stacked, scaler, future, scaler_rows)  # [N, H, C] each, as the model reads it
    true_scaled = np.where(observed, truth.astype(scaled.dtype), np.nan)  # [N, H, C]
    # the data's own values, not those read back from float32: a 0 read back as -5e-9 fell outside a
    # band floored at 0 (a never-negative series' intervals), and an intermittent series' 80% band covered 4%
    column["y_true"][:] = np.where(observed, stacked.values[future], np.nan).ravel()
    column["y_pred"][:] = result.mean.ravel()
    column["seasonal_error"][:] = np.broadcast_to(scale[items][:, None, :], shape).ravel()
    for name, raw in baselines.forecasts.items():
        column[f"y_{name}"][:] = raw.ravel()
        column[f"y_{name}_scaled"][:] = scaler.transform(raw, scaler_rows).astype(scaled.dtype).ravel()
        column[f"season_{name}"][:] = baselines.seasons[name]
    if baselines.fit_steps is not None:
        column["stats_fit_steps"][:] = np.broadcast_to(baselines.fit_steps[:, None, None], shape).ravel()
    for i, level in enumerate(result.levels):
        column[f"y_q{level}"][:] = result.quantiles[..., i].ravel()
        column[f"y_q{level}_scaled"][:] = result.scaled_quantiles[..., i].ravel()
    future = future[:, :, None]  # [N, H, 1]
    others = {
        "item_id": np.broadcast_to(_channel_names(panel)[items][:, None, :], shape).ravel(),
        "origin": stacked.index.take(np.broadcast_to(future[:, :1], shape).ravel()),
        "step": np.broadcast_to(np.arange(1, horizon + 1)[None, :, None], shape).ravel(),
        "timestamp": stacked.index.take(np.broadcast_to(future, shape).ravel()),
        "y_true_scaled": true_scaled.ravel(),
        "y_pred_scaled": scaled.ravel(),
        "observed": observed.ravel(),
        "forecast": np.isfinite(scaled).ravel(),
    }
    order = ["item_id", "origin", "step", "timestamp", "y_true", "y_pred", "y_true_scaled", "y_pred_scaled",
             "observed", "forecast", *names[2:]]
    return block_frame(order, block, others)


def _window_values(stacked: _Stacked, scaler: StandardScaler, rows: np.ndarray,
                   scaler_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The values at ``rows`` ``[N, L]`` of windows with scaler rows ``scaler_rows`` ``[N]`` as the
    model reads them from :class:`~tsrec.data.WindowDataset` (scaled, rounded to float32, 0 where unobserved),
    float64 ``[N, L, C]``, and whether each was observed, bool ``[N, L, C]``."""
    observed = stacked.observed[rows]
    scaled = scaler.transform(stacked.values[rows], scaler_rows)
    return np.where(observed, scaled, 0.0).astype(np.float32).astype(np.float64), observed


def _channel_names(panel: Panel) -> np.ndarray:
    """``[I, C]`` object: the ``item_id`` of each item's channels in the errors (wide: the columns of
    the one item; long: each item's id)."""
    if panel.layout == "wide":
        return np.array([panel.columns], dtype=object)
    return panel.output_ids()[:, None]


