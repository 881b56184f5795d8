"""Rolling-origin backtests of a :class:`~tsrec.Forecaster`, with metrics labelled by units."""

from __future__ import annotations

import dataclasses
import functools
import math
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tsrec._checks import check_optional_int
from tsrec import metrics
from tsrec.config import CovariateConfig, DataFacts
from tsrec.data import Panel, seasonality
from tsrec.data.time_features import future_indexes
from tsrec.data.frame import block_frame
from tsrec.data import source
from tsrec.data.schema import Schema
from tsrec.data.source import Source, history_before
from tsrec.data.scaling import StandardScaler, item_blocks
from tsrec.fitted import ForecastResult
from tsrec.forecaster import Forecaster
from tsrec.conformal import DEFAULT_LEVELS, band_ends
from tsrec.forecasting import context_read, forecast_origins, interval_settings, window_origins
from tsrec.models.base import DEFAULT_QUANTILE_LEVELS
from tsrec.models.naive import choose_season, season_for
from tsrec.nn.outputs import check_levels

__all__ = ["COVERAGE_TOLERANCE", "BacktestResult", "CoverageWarning", "backtest", "coverage_tolerance",
           "score_backtest", "step_errors"]

#: The columns of :attr:`BacktestResult.intervals`.
INTERVAL_COLUMNS = ("item_id", "level", "coverage", "width", "winkler", "winkler_scaled", "entries", "windows",
                    "method")
#: How far (a fraction) an interval's empirical coverage may stray from its level before a
#: backtest warns, at least (:func:`coverage_tolerance` widens it for few windows).
COVERAGE_TOLERANCE = 0.03


class CoverageWarning(UserWarning):
    """A backtest's intervals cover a fraction of the truths farther from their level than
    :func:`coverage_tolerance` allows."""


def coverage_tolerance(level: float, windows: int) -> float:
    """How far the coverage of a level-``level`` interval (percent) scored on ``windows``
    (series, window) pairs may stray before :func:`backtest` warns: :data:`COVERAGE_TOLERANCE`,
    or two binomial standard errors ``2 * sqrt(p (1 - p) / windows)`` when larger. The steps of one
    window share its origin and their misses go together, so each window counts as one draw (not
    each of its ``H`` steps): a conservative count of the independent evidence."""
    p = level / 100.0
    return max(COVERAGE_TOLERANCE, 2.0 * math.sqrt(p * (1.0 - p) / max(1, windows)))


@dataclass(frozen=True)
class BacktestResult:
    """What :func:`backtest` returns.

    Attributes:
        errors: one row per window, item (wide frames: per column), horizon step: ``item_id``,
            ``origin`` (timestamp of the window's first forecast step), ``step`` (1..H),
            ``timestamp``, ``y_true``, ``y_pred`` (original units), ``y_true_scaled``,
            ``y_pred_scaled`` (the fitted scaler's units), ``observed``, ``forecast`` and
            ``seasonal_error`` (the series' in-sample seasonal-naive MAE before its first origin,
            MASE's scale; NaN without that much history); with ets or theta among the baselines,
            ``stats_fit_steps``: the steps of the series (from its start) that the ets and theta
            models forecasting the window were fitted on (the history before its first origin, or
            before the origin of their last refit).
            Unobserved targets are kept, flagged, and left out of every metric; so are the windows
            of a series or column whose context held no observed value (``forecast`` False,
            ``y_pred`` NaN: a forecast is only made from data).
        summary: one row per ``metric`` and ``units``: ``mse``, ``mae``, ``rmse`` in ``"original"``
            and ``"scaled"`` units, ``mase`` and ``smape`` (``"scale-free"``), over observed entries,
            ``windows_without_forecast`` (``"count"``: the (series, window) pairs left out for an
            empty context), and the skill ratios of :attr:`skill` (``mse_ratio_naive``, ``mae_ratio_naive``,
            ``mse_ratio_seasonal_naive``, ``mae_ratio_seasonal_naive``; units ``"ratio"``).
        by_step: ``mse`` and ``mae`` per horizon ``step`` in both units.
        skill: the model against the free baselines of the same windows, one row per
            ``baseline`` of ``backtest``'s ``baselines``: ``"naive"`` (the last observed value of
            the window's context), ``"seasonal_naive"`` (the last observed season, with ``season``
            the strongest cycle found in the fitted data when the context holds it), and
            statsforecast's ``"ets"`` (AutoETS) and ``"theta"`` (AutoTheta), fitted once per
            series and channel on all its history before its first origin and carried forward
            over the origins with the fitted parameters (each window forecast from all the
            history before its origin), as statsforecast's ``cross_validation(refit=False)``,
            or refit every ``baselines_refit_every`` origins (``refit=k``), with the season of
            :func:`~tsrec.models.naive.season_for` for each series. Columns ``season``, ``fit`` (how the baseline
            was fitted: ``"each window's context"`` for the naive ones; ``"fitted once on the
            history before the first origin"`` or ``"refit every k origins"`` for ets and theta),
            ``model_mse``, ``baseline_mse``, ``mse_ratio``, ``model_mae``, ``baseline_mae``,
            ``mae_ratio``, in scaled units over the entries both forecast (``errors`` has the
            baselines as ``y_<baseline>`` and ``y_<baseline>_scaled``), and ``note``: why a season
            was dropped (no cycle stood out, or the history is too short for it; the baseline then
            runs without one, or, for seasonal naive, its row has no ratios), else empty. A ratio
            below 1 means the model beats the baseline.
        intervals: the forecast's intervals per series (empty without): one row per ``item_id``
            and ``level`` (percent; every pair of quantile levels ``q``, ``1 - q`` scored, e.g.
            0.1 and 0.9 -> 80) with ``coverage`` (the fraction of scored truths inside the
            interval), ``width`` and ``winkler`` (:func:`tsrec.metrics.winkler_score`) in original
            units, ``winkler_scaled``, ``entries`` and ``windows`` scored, and ``method``
            (``"conformal"``, ``"model"``: what gave the bands). :attr:`summary` has the same over
            every series (``interval_coverage_<level>``, ``interval_width_<level>``,
            ``winkler_<level>``), and :func:`backtest` warns when a level's coverage is off by more
            than :func:`coverage_tolerance`.
    """

    errors: pd.DataFrame
    summary: pd.DataFrame
    by_step: pd.DataFrame
    skill: pd.DataFrame
    intervals: pd.DataFrame = dataclasses.field(default_factory=lambda: pd.DataFrame(columns=INTERVAL_COLUMNS))

    def metric(self, name: str, units: str = "scaled") -> float:
        """One number of :attr:`summary`, e.g. ``result.metric("mse", "scaled")``."""
        row = self.summary[(self.summary.metric == name) & (self.summary.units == units)]
        if row.empty:
            raise KeyError(f"no metric {name!r} in {units!r} units; available: "
                           f"{sorted(zip(self.summary.metric, self.summary.units))}")
        return float(row.value.iloc[0])


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


def _origins(panel: Panel, stacked: _Stacked, context: int, horizon: int, start: int | str | pd.Timestamp | None,
             n_windows: int | None, stride: int, *, whole_history: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Per item the first forecast origin (grid position of the first forecast step) and the number
    of windows, ``[I]`` int64 each; the origins are ``stride`` apart. A window needs ``context``
    earlier steps, or, for a model that reads whole histories (``whole_history``), one."""
    last = stacked.length - horizon  # [I] the last origin whose window fits
    if start is None:
        first = last - stride * ((1 if n_windows is None else n_windows) - 1)
    elif isinstance(start, (int, np.integer)) and not isinstance(start, bool):
        first = np.full_like(last, int(start))
    else:
        first = _positions(panel, stacked, pd.Timestamp(start))
    if whole_history and (early := np.flatnonzero(first < 1)).size:
        i = early[0]
        raise ValueError(f"{panel.item_label(i)}: the first backtest window would start at position {first[i]}, "
                         "with no earlier step to forecast from; start later, or use fewer windows")
    if not whole_history and (early := np.flatnonzero(first < context)).size:
        i = early[0]
        raise ValueError(f"{panel.item_label(i)}: the first backtest window would start at position {first[i]}, "
                         f"but each window needs context_length={context} earlier steps; start later, use fewer "
                         "windows, or pass more history")
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


def _refit_cut(panel: Panel, stacked: _Stacked, first: np.ndarray, count: np.ndarray) -> pd.DatetimeIndex:
    """``[I]`` the timestamp each item's refit data end before: the block's first origin, or, for an
    item without a window in the block (``count`` 0), the step after its last."""
    end = stacked.start + stacked.length - 1  # [I] each item's last row
    after = future_indexes(stacked.index[end], panel.freq, 1)  # [I] (a session's next open step)
    return stacked.index[np.minimum(stacked.start + first, end)].where(count > 0, after)


def backtest(forecaster: Forecaster, df: Source, *, start: int | str | pd.Timestamp | None = None,
             n_windows: int | None = None, stride: int | None = None, refit_every: int | None = None,
             batch_size: int | None = None, season_length: int | None = None,
             quantiles: Sequence[float] | None = None, baselines: Sequence[str] | None = None,
             baselines_refit_every: int | None = None, time_col: str | None = None, id_col: str | None = None,
             target_col: str | None = None, levels: Sequence[float] | None = None,
             intervals: str | None = None) -> BacktestResult:
    """Forecast from rolling origins over ``df`` and score every window.

    Args:
        forecaster: a fitted Forecaster (or an unfitted one with ``refit_every``).
        df: the frame to backtest on, in the layout the forecaster was fitted with, or long
            Parquet data (a file, a folder of files or a list of files; with ``refit_every``, the
            rows before each block's origins are read into memory to refit on);
            windows read their context from it, so it must hold ``context_length`` steps before the
            first origin.
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
        batch_size: windows per inference batch (the last partial batch is kept).
        season_length: MASE's seasonal period (default: the frequency's natural season).
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
            without it is an error naming the extra). The statistical baselines (statsforecast's
            AutoETS, AutoTheta, AutoCES, DynamicOptimizedTheta) are fitted once per series and channel, on all the history before its
            first origin (AutoETS about 0.1 s on a few hundred steps), and carried forward over
            the origins, as statsforecast's ``cross_validation(refit=False)`` (docs/backtests.md).
        baselines_refit_every: refit ets and theta on all the history before the origin every
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
        errors = by_series(df, id_col, lambda part: windows(part)[0])
        return _score_unrefitted(forecaster, errors, baselines, _scored_levels(errors), bands.method)
    errors, seasons, periods = windows(df)
    return _result(errors, baselines, _scored_levels(errors), seasons, forecaster.freq, periods, bands.method)


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


def _scored_levels(errors: pd.DataFrame) -> tuple[float, ...]:
    """The quantile levels of ``errors``' ``y_q<level>`` columns."""
    return tuple(float(c[3:]) for c in errors.columns if c.startswith("y_q") and not c.endswith("_scaled"))


def _backtest_errors(forecaster: Forecaster, df: Source, *, start: int | str | pd.Timestamp | None,
                     n_windows: int | None, stride: int | None, refit_every: int | None, batch_size: int | None,
                     season_length: int | None, levels: tuple[float, ...], bands: _Bands, baselines: Sequence[str],
                     baselines_refit_every: int | None, time_col: str | None, id_col: str | None,
                     target_col: str | None) -> tuple[pd.DataFrame, list[tuple[int, str]], tuple[float, ...]]:
    """:func:`backtest`'s windows of ``df`` (its arguments checked, ``levels`` and ``baselines``
    resolved): the errors, the seasonal naive baseline's season and note in each refit block, and
    the cycles (``DataFacts.periods``) of the first block's forecaster, from which the statistical
    baselines' seasons come."""
    fitted = forecaster.covariates
    covariates = CovariateConfig() if fitted is None else fitted.config
    schema = Schema(time_col, id_col, target_col, covariates)
    columns = schema.columns
    if refit_every is not None:  # Parquet read once, not again for every refit
        df = source.in_memory(df, id_col)
    read = source.read(df, schema, categorical=() if fitted is None else fitted.categorical, freq=forecaster.freq,
                       gaps=forecaster.settings.window.gaps)
    panel, values = read.panel, read.covariates
    horizon, context = forecaster.prediction_length, forecaster.context_length
    stride = stride or horizon
    stacked = _Stacked.of(panel)
    whole = _reads_whole_history(forecaster)
    first, count = _origins(panel, stacked, context, horizon, start, n_windows, stride, whole_history=whole)  # [I] each
    scale = _seasonal_scale(stacked, first, season_length or seasonality(panel.freq))  # [I, C]
    n_blocks = int(count.max())
    block = refit_every or n_blocks
    parts: list[pd.DataFrame] = []
    seasons: list[tuple[int, str]] = []
    stats_names = [b for b in baselines if b in STATS_BASELINES]
    for done in range(0, n_blocks, block):
        block_first, block_count = first + stride * done, np.clip(count - done, 0, block)  # [I] each
        if refit_every is not None:
            cut = _refit_cut(panel, stacked, block_first, block_count)
            forecaster = forecaster.unfitted_copy().fit(history_before(df, schema, panel, cut), **columns,
                                                        past_covariates=covariates.past,
                future_covariates=covariates.future, static_covariates=covariates.static)
        if done == 0:  # the statistical baselines of every window, from the first block's forecaster's cycles
            periods = forecaster.data_facts.periods
            stats = _stats_baselines(panel.freq, stacked, stats_names, periods, first, count, stride, horizon,
                                     baselines_refit_every)
        rows = forecaster.panel.check_compatible(panel)
        context = context_read(forecaster.fitted, panel)  # a whole-history model reads all there is
        intervals, method = bands.resolve(forecaster)
        result = forecast_origins(forecaster.fitted, panel, values, block_first, block_count, stride,
                                  levels=() if method == "conformal" else levels, intervals=intervals, method=method,
                                  batch_size=batch_size)
        items, origin = result.items, result.origins  # [N] each, the block's windows
        seasons.append(_naive_season(forecaster.data_facts, context))
        parts.append(_window_frame(panel, stacked, forecaster, context, result, rows, scale, seasons[-1][0],
                                   stats.of(items, origin, first, count, stride)))
    errors = parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)  # one block: no copy
    return errors, seasons, periods


def _reads_whole_history(forecaster: Forecaster) -> bool:
    """Whether ``forecaster``'s model reads whole histories (its windows may start from a
    series' first step): the fitted network's answer, else its class's (a backtest that refits)."""
    if forecaster.model is not None:
        return forecaster.model.reads_whole_history
    from tsrec.models import model_spec

    return model_spec(forecaster.model_name).model_class.whole_history


def score_backtest(forecaster: Forecaster, errors: pd.DataFrame) -> BacktestResult:
    """The :class:`BacktestResult` of backtest ``errors`` (:attr:`BacktestResult.errors`) of the fitted
    ``forecaster`` without refits: its summary, per-step errors and skill, from the errors alone.

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
    return _score_unrefitted(forecaster, errors, baselines, _scored_levels(errors), method)


def _score_unrefitted(forecaster: Forecaster, errors: pd.DataFrame, baselines: Sequence[str],
                      levels: tuple[float, ...], method: str | None = None) -> BacktestResult:
    """The :class:`BacktestResult` of the fitted ``forecaster``'s backtest ``errors`` without refits."""
    seasons = [_naive_season(forecaster.data_facts, forecaster.context_length)]
    return _result(errors, baselines, levels, seasons, forecaster.freq, forecaster.data_facts.periods, method)


def _result(errors: pd.DataFrame, baselines: Sequence[str], levels: tuple[float, ...], seasons: list[tuple[int, str]],
            freq: str, periods: tuple[float, ...], method: str | None = None) -> BacktestResult:
    """The :class:`BacktestResult` of ``errors``; ``seasons``: the seasonal naive baseline's season and
    note in each refit block; ``freq``, ``periods``: the data's frequency and the cycles found in
    the fitted data, which give the statistical baselines' seasons (:func:`~tsrec.models.naive.season_for`)."""
    skill = _skill(errors, baselines, seasons, freq, periods)
    ratios = pd.DataFrame([(f"{ratio}_{row.baseline}", "ratio", getattr(row, ratio)) for row in skill.itertuples()
                           if np.isfinite(row.mse_ratio) for ratio in ("mse_ratio", "mae_ratio")],
                          columns=["metric", "units", "value"])
    if method is None and levels:
        method = "model"  # quantiles without conformal bands are the network's own
    errors.attrs["intervals"] = method  # what score_backtest reads back
    per_series, overall = _interval_scores(errors, levels, method)
    parts = [_summary(errors), _probabilistic_summary(errors, levels), overall, ratios]
    summary = pd.concat([part for part in parts if not part.empty], ignore_index=True)
    return BacktestResult(errors, summary, _by_step(errors), skill, per_series)


def interval_levels(levels: Sequence[float]) -> tuple[float, ...]:
    """The interval levels (percent) of the quantile ``levels``' symmetric pairs ``q``, ``1 - q``
    (``q < 0.5``): 0.1 and 0.9 -> 80, 0.05 and 0.95 -> 90; sorted."""
    present = {round(q, 12) for q in levels}
    return tuple(sorted(round(100.0 * (1.0 - 2.0 * q), 10) for q in present
                        if q < 0.5 and round(1.0 - q, 12) in present))


def _interval_scores(errors: pd.DataFrame, levels: tuple[float, ...],
                     method: str | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Each interval's (:func:`interval_levels` of ``levels``) coverage, width and Winkler score
    over the scored entries of ``errors``: per series (:attr:`BacktestResult.intervals`) and
    overall (``summary`` rows); warns (:class:`CoverageWarning`) for a level whose overall coverage
    strays more than :func:`coverage_tolerance` from it."""
    rows, summary = [], []
    scored = _scored(errors)
    item = errors["item_id"].to_numpy()[scored]
    window = pd.MultiIndex.from_arrays([errors["item_id"].to_numpy()[scored], errors["origin"].to_numpy()[scored]])
    for level in interval_levels(levels):
        low, high = band_ends(level)
        lo = {u: errors[f"y_q{low}{u}"].to_numpy()[scored] for u in ("", "_scaled")}
        hi = {u: errors[f"y_q{high}{u}"].to_numpy()[scored] for u in ("", "_scaled")}
        truth = {u: errors[f"y_true{u}"].to_numpy()[scored] for u in ("", "_scaled")}
        inside = ((lo[""] <= truth[""]) & (truth[""] <= hi[""])).astype(np.float64)
        winkler = {u: metrics.winkler_score(truth[u], lo[u], hi[u], level, axis=()) for u in ("", "_scaled")}  # [E]
        frame = pd.DataFrame({"item_id": item, "inside": inside, "width": hi[""] - lo[""], "winkler": winkler[""],
                              "winkler_scaled": winkler["_scaled"], "window": window})
        grouped = frame.groupby("item_id", sort=False)
        per = grouped[["inside", "width", "winkler", "winkler_scaled"]].mean()
        per["entries"], per["windows"] = grouped.size(), grouped["window"].nunique()
        rows.append(per.rename(columns={"inside": "coverage"}).reset_index().assign(level=level, method=method))
        name = f"{level:g}"
        coverage, windows = float(inside.mean()) if inside.size else math.nan, int(window.nunique())
        summary += [(f"interval_coverage_{name}", "fraction", coverage),
                    (f"interval_width_{name}", "original",
                     float(np.mean(hi[""] - lo[""])) if inside.size else math.nan),
                    (f"interval_width_{name}", "scaled",
                     float(np.mean(hi["_scaled"] - lo["_scaled"])) if inside.size else math.nan),
                    (f"winkler_{name}", "original", float(np.mean(winkler[""])) if inside.size else math.nan),
                    (f"winkler_{name}", "scaled", float(np.mean(winkler["_scaled"])) if inside.size else math.nan)]
        tolerance = coverage_tolerance(level, windows)
        if inside.size and abs(coverage - level / 100.0) > tolerance:
            warnings.warn(f"the {name}% intervals ({method}) cover {coverage:.1%} of {inside.size} scored values in "
                          f"{windows} (series, window) pairs, more than {tolerance:.1%} from {name}% (the tolerance: "
                          f"{COVERAGE_TOLERANCE:.0%}, or two binomial standard errors over the windows where larger): "
                          + ("too narrow" if coverage < level / 100.0 else "wider than needed") + "; see "
                          "result.intervals for the series", CoverageWarning, stacklevel=4)
    per_series = pd.concat(rows, ignore_index=True)[list(INTERVAL_COLUMNS)] if rows else \
        pd.DataFrame(columns=INTERVAL_COLUMNS)
    return per_series, pd.DataFrame(summary, columns=["metric", "units", "value"])


def naive_forecasts(past: np.ndarray, observed: np.ndarray, horizon: int, season: int | None) -> np.ndarray:
    """Baseline forecasts from contexts ``past``, ``observed`` ``[N, Lc, C]``: ``[2, N, H, C]`` with
    the last observed value, then the last observed season (``y[T + h - m * ceil((h + 1) / m)]``;
    NaN where that value is unobserved, or everywhere without a ``season``)."""
    n, length, channels = past.shape
    seen = observed > 0
    last = length - 1 - np.argmax(seen[:, ::-1], axis=1)  # [N, C] position of the last observed value
    value = np.take_along_axis(past, last[:, None, :], axis=1)[:, 0]  # [N, C]
    value = np.where(seen.any(axis=1), value, np.nan)
    naive = np.broadcast_to(value[:, None, :], (n, horizon, channels))
    seasonal = np.full((n, horizon, channels), np.nan, dtype=np.float64)
    if season is not None:
        steps = np.arange(horizon)
        index = length - season * np.ceil((steps + 1) / season).astype(int) + steps  # [H]
        seasonal = np.where(seen[:, index], past[:, index], np.nan)
    return np.stack([naive, seasonal]).astype(np.float64)


BASELINES = ("naive", "seasonal_naive", "ets", "theta", "ces", "dynamic_theta")
#: The baselines of a backtest that names none (ets and theta when statsforecast is installed).
DEFAULT_BASELINES = ("naive", "seasonal_naive", "ets", "theta")
#: The baselines fitted by statsforecast (the optional extra tsrec[stats]).
STATS_BASELINES = ("ets", "theta", "ces", "dynamic_theta")


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


#: statsforecast's class of each statistical baseline.
STATS_CLASSES = {"ets": "AutoETS", "theta": "AutoTheta", "ces": "AutoCES", "dynamic_theta": "DynamicOptimizedTheta"}
#: How the naive baselines are fitted (the skill table's ``fit``): they read each window's context.
NAIVE_FIT = "each window's context"
#: How the statistical baselines are fitted without ``baselines_refit_every``.
FITTED_ONCE = "fitted once on the history before the first origin"


def _naive_season(facts: DataFacts, context: int) -> tuple[int, str]:
    """The seasonal naive baseline's season, from windows of ``context`` steps, and why there is
    none (1): the rule of the ``seasonal_naive`` model (:func:`~tsrec.models.naive.choose_season`,
    one season needed)."""
    return choose_season(facts.cycles, facts.periods, context, 1)


@dataclass(frozen=True)
class _StatsBaselines:
    """The statistical baselines' forecasts of every window of a backtest, in :func:`~tsrec.forecasting.window_origins`'
    order over all its windows (``W``: ``count.sum()``).

    Attributes:
        forecasts: per baseline name, ``[W, H, C]`` float64 in original units (NaN where the
            history held no observed value).
        fit_steps: ``[W]`` float64, the steps (from the series' start) the models forecasting each
            window were fitted on.
    """

    forecasts: dict[str, np.ndarray]
    fit_steps: np.ndarray

    def of(self, items: np.ndarray, origin: np.ndarray, first: np.ndarray, count: np.ndarray,
           stride: int) -> _StatsBaselines:
        """The same for the windows ``(items[k], origin[k])`` ``[N]`` of a block, with ``first``,
        ``count`` ``[I]`` and ``stride`` those the whole backtest's windows came from."""
        index = (np.cumsum(count) - count)[items] + (origin - first[items]) // stride  # [N] place among all windows
        return _StatsBaselines({name: f[index] for name, f in self.forecasts.items()}, self.fit_steps[index])


def _stats_baselines(freq: str, stacked: _Stacked, names: Sequence[str], periods: tuple[float, ...], first: np.ndarray,
                     count: np.ndarray, stride: int, horizon: int, refit_every: int | None) -> _StatsBaselines:
    """The baselines ``names`` (of :data:`STATS_BASELINES`) of the windows of items with ``count``
    ``[I]`` origins from ``first`` ``[I]``, ``stride`` apart: per series and channel, the
    statsforecast model is fitted (``fit``) on all the history before the series' first origin,
    and every ``refit_every`` windows again on all the history before that window's origin, and
    forecasts each window from all the history before its origin with the parameters of its last
    fit (``forward``), exactly as statsforecast's ``cross_validation(refit=False)`` (``refit=k``).
    Missing values are filled from the last observation (:func:`~tsrec.models.stats.fill_context`);
    a fit statsforecast cannot make gives the windows until the next fit their history's last
    value, with one warning per baseline.

    A loop over series with one compiled fit per series is what statsforecast's own
    ``StatsForecast.cross_validation`` runs too (``GroupedArray.cross_validation`` loops over
    the series, fitting and forwarding each); called directly, the same fits also serve windows
    that start at different origins per series, the channels of wide frames and missing values."""
    from tsrec.models.stats import fill_context, require_statsforecast

    total, channels = int(count.sum()), stacked.values.shape[1]
    forecasts = {name: np.full((total, horizon, channels), np.nan) for name in names}
    items, origin = window_origins(first, count, stride)  # [W] each, all the windows
    rank = (origin - first[items]) // stride  # [W] the window's place in its series
    every = refit_every or int(count.max())  # without refits, only each series' first window fits
    fit_steps = (origin - stride * (rank % every)).astype(np.float64)  # [W] the origin of the window's fit
    if not names:
        return _StatsBaselines(forecasts, fit_steps)
    models = require_statsforecast()
    failed = dict.fromkeys(names, 0)
    offsets = np.cumsum(count) - count
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # statsforecast's own on flat series
        for i in np.flatnonzero(count):
            season, _ = season_for(freq, periods, int(first[i]))
            rows = slice(stacked.start[i], stacked.start[i] + stacked.length[i])
            windows = range(offsets[i], offsets[i] + count[i])
            for c in range(channels):
                values, observed = stacked.values[rows, c], stacked.observed[rows, c]
                histories = [fill_context(values[:origin[w]], observed[:origin[w]]) for w in windows]  # [L_w] or None
                for name in names:
                    model = None
                    for w, y in zip(windows, histories):
                        if rank[w] % every == 0:  # (re)fit on this window's history
                            model = _fit_stats(getattr(models, STATS_CLASSES[name]), season, y)
                            failed[name] += model is None and y is not None
                        if y is not None:
                            forecasts[name][w, :, c] = _forward_stats(model, y, horizon)
    for name, n in failed.items():
        if n:
            warnings.warn(f"statsforecast's {STATS_CLASSES[name]} could not be fitted {n} time(s) (a history too "
                          f"short or degenerate); the {name} baseline's windows of those fits get their history's "
                          "last value", UserWarning, stacklevel=3)
    return _StatsBaselines(forecasts, fit_steps)


def _fit_stats(model_class: type, season: int, y: np.ndarray | None) -> object | None:
    """A statsforecast model of ``model_class`` with ``season`` fitted on ``y`` ``[L]``; None without
    ``y`` or where statsforecast cannot fit it."""
    if y is None:
        return None
    try:
        return model_class(season_length=season).fit(y=y)
    except (NotImplementedError, ValueError, np.linalg.LinAlgError, ZeroDivisionError):
        return None


def _forward_stats(model: object | None, y: np.ndarray, horizon: int) -> np.ndarray:
    """``horizon`` steps after ``y`` ``[L]`` from the fitted ``model``'s parameters, or ``y``'s last
    value without a model or where statsforecast cannot forward it."""
    if model is not None:
        try:
            return model.forward(y=y, h=horizon)["mean"]
        except (NotImplementedError, ValueError, np.linalg.LinAlgError, ZeroDivisionError):
            pass
    return np.full(horizon, y[-1])


def _skill(errors: pd.DataFrame, baselines: Sequence[str], seasons: list[tuple[int, str]], freq: str,
           periods: tuple[float, ...]) -> pd.DataFrame:
    """The skill table (see :class:`BacktestResult`); ``seasons``: the seasonal naive baseline's season
    and note in each refit block; ``freq``, ``periods``: what the statistical baselines' seasons
    come from (:func:`_stats_fit`)."""
    rows = []
    truth, model = errors["y_true_scaled"].to_numpy(), errors["y_pred_scaled"].to_numpy()
    stats = _stats_fit(errors, freq, periods) if set(baselines) & set(STATS_BASELINES) else None
    for baseline in baselines:
        if baseline == "naive":
            season, fit, note = 1, NAIVE_FIT, ""
        elif baseline == "seasonal_naive":
            found = {m for m, _ in seasons}
            season, fit = (found.pop() if len(found) == 1 else np.nan), NAIVE_FIT
            note = "; ".join(dict.fromkeys(n for _, n in seasons if n))
            note = f"no season: {note}" if note else ""
        else:
            season, fit, note = stats
        forecast = errors[f"y_{baseline}_scaled"].to_numpy()
        both = _scored(errors) & np.isfinite(forecast)
        scores = {name: (fn(truth, model, mask=both), fn(truth, forecast, mask=both)) if both.any() else
                  (np.nan, np.nan) for name, fn in (("mse", metrics.mse), ("mae", metrics.mae))}
        rows.append({"baseline": baseline, "season": season, "fit": fit,
                     **{f"{k}_{name}": v for name, (m, b) in scores.items()
                        for k, v in (("model", m), ("baseline", b))},
                     "mse_ratio": _ratio(*scores["mse"]), "mae_ratio": _ratio(*scores["mae"]),
                     "note": note})
    columns = ["baseline", "season", "fit", "model_mse", "baseline_mse", "mse_ratio", "model_mae", "baseline_mae",
               "mae_ratio", "note"]
    return pd.DataFrame(rows, columns=columns)


def _stats_fit(errors: pd.DataFrame, freq: str, periods: tuple[float, ...]) -> tuple[float, str, str]:
    """The statistical baselines' row facts, read off ``errors``' ``stats_fit_steps`` (so that errors
    scored in parts give the whole backtest's): their ``season`` (NaN when the series' seasons
    differ), how they were fitted (the most windows one fit served: ``k`` of ``"refit every k
    origins"``, or none but the first per series: :data:`FITTED_ONCE`), and the note saying why a
    season was dropped, per series (:func:`~tsrec.models.naive.season_for` of its history before its first origin)."""
    windows = errors.loc[errors["step"].to_numpy() == 1, ["item_id", "origin", "stats_fit_steps"]]  # [N * C]
    history = windows.groupby("item_id", sort=False)["stats_fit_steps"].min()  # each series' first fit
    per_season = Counter(season_for(freq, periods, int(h)) for h in history)  # (season, note): series
    served = windows.groupby(["item_id", "stats_fit_steps"], sort=False)["origin"].nunique()  # windows per fit
    refits = windows.groupby("item_id", sort=False)["stats_fit_steps"].nunique().max() > 1
    fit = f"refit every {served.max()} origins" if refits else FITTED_ONCE
    if len(per_season) == 1:
        (season, note), = per_season
        return season, fit, f"fitted without a season: {note}" if note else ""
    parts = [f"season {m} on {n} series" + (f" ({note})" if note else "") for (m, note), n in per_season.items()]
    return np.nan, fit, "; ".join(parts)


def _ratio(model: float, baseline: float) -> float:
    """``model / baseline``: inf (or NaN for 0 / 0) when the baseline is perfect."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.float64(model) / np.float64(baseline))


def _levels(forecaster: Forecaster, quantiles: Sequence[float] | None) -> tuple[float, ...]:
    """The quantile levels a backtest scores: none for a point model; ``quantiles``, else a
    quantile output's own levels, else 0.1, ..., 0.9."""
    if forecaster.settings.network.output == "point":
        if quantiles is not None:
            raise ValueError(f"{forecaster.model_name} forecasts points (output='point'): it has no quantiles to "
                             "score; refit with output='quantile', 'normal' or 'studentt'")
        return ()
    if quantiles is not None:
        return check_levels("quantiles", quantiles)
    if forecaster.settings.network.output == "quantile":
        return forecaster.settings.network.quantile_levels
    return DEFAULT_QUANTILE_LEVELS


#: Steps (windows x (context + horizon)) whose values :func:`_window_frame` gathers at a time: its
#: temporaries stay bounded (tens of MB) however many windows a backtest scores and however long
#: their contexts (a whole-history model's are its longest series).
WINDOW_STEPS = 2**22


def _window_frame(panel: Panel, stacked: _Stacked, forecaster: Forecaster, context: int, result: ForecastResult,
                  rows: np.ndarray, scale: np.ndarray, season: int, stats: _StatsBaselines) -> pd.DataFrame:
    """Tidy per-window, per-step, per-channel rows for one block of windows ``(result.items[k],
    result.origins[k])`` ``[N]`` of ``context`` steps each with ``rows`` ``[I]`` the items' scaler rows: the forecasts of
    ``result`` (its quantiles too, for a probabilistic model), the truth, each series' MASE scale
    ``scale`` ``[I, C]`` (:func:`_seasonal_scale`), the naive baselines of the same windows
    (seasonal naive: NaN when ``season`` is 1) and the statistical baselines of these windows,
    ``stats`` (:meth:`_StatsBaselines.of`), with their ``stats_fit_steps``.

    The float64 columns are written, :data:`WINDOW_STEPS` steps of windows at a time, into one
    ``[columns, N * H * C]`` block that the frame holds without a copy (:func:`block_frame`)."""
    items, origin, scaled = result.items, result.origins, result.scaled
    n, horizon, channels = scaled.shape
    scaler = forecaster.scaler
    scaler_rows = rows[items]  # [N]
    shape, width = (n, horizon, channels), horizon * channels  # width: the entries of one window
    stats_forecasts = stats.forecasts  # name: [N, H, C] original units
    names = ["y_true", "y_pred", "seasonal_error", "y_naive", "y_seasonal_naive", "y_naive_scaled",
             "y_seasonal_naive_scaled", *(f"y_{name}{units}" for name in stats_forecasts for units in ("", "_scaled")),
             *(["stats_fit_steps"] if stats_forecasts else []),
             *(f"y_q{level}{units}" for level in result.levels for units in ("", "_scaled"))]
    block = np.empty((len(names), n * width))  # [columns, N * H * C] float64
    column = dict(zip(names, block))  # name: [N * H * C] view
    true_scaled = np.empty(n * width, scaled.dtype)  # the truth as the model reads it
    observed = np.empty(n * width, bool)
    chunk = max(1, WINDOW_STEPS // (context + horizon))  # windows at a time
    for at in range(0, n, chunk):
        part = slice(at, min(at + chunk, n))  # windows
        entries = slice(part.start * width, part.stop * width)
        offsets = np.arange(-context, horizon)  # [Lc + H]
        inside = origin[part, None] + offsets >= 0  # [n', Lc + H] False before the item's first step (padded windows)
        window_rows = np.where(inside, stacked.rows(items[part], origin[part], offsets),
                               stacked.start[items[part], None])  # [n', Lc + H]
        target, seen = _window_values(stacked, scaler, window_rows, scaler_rows[part])  # [n', Lc + H, C] each
        seen &= inside[:, :, None]
        truth, seen_truth = target[:, context:].astype(scaled.dtype), seen[:, context:]  # [n', H, C]
        naive, seasonal = naive_forecasts(target[:, :context], seen[:, :context], horizon,
                                          season if season > 1 else None)  # [n', H, C]
        observed[entries] = seen_truth.ravel()
        true_scaled[entries] = np.where(seen_truth, truth, np.nan).ravel()
        true = scaler.inverse_transform(truth, scaler_rows[part])
        column["y_true"][entries] = np.where(seen_truth, true, np.nan).ravel()
        for name, forecast in (("y_naive", naive), ("y_seasonal_naive", seasonal)):
            column[name][entries] = scaler.inverse_transform(forecast, scaler_rows[part]).ravel()
            column[f"{name}_scaled"][entries] = forecast.ravel()
    column["y_pred"][:] = result.mean.ravel()
    column["seasonal_error"][:] = np.broadcast_to(scale[items][:, None, :], shape).ravel()
    for name, raw in stats_forecasts.items():
        column[f"y_{name}"][:] = raw.ravel()
        column[f"y_{name}_scaled"][:] = scaler.transform(raw, scaler_rows).ravel()
    if stats_forecasts:
        column["stats_fit_steps"][:] = np.broadcast_to(stats.fit_steps[:, None, None], shape).ravel()
    for i, level in enumerate(result.levels):
        column[f"y_q{level}"][:] = result.quantiles[..., i].ravel()
        column[f"y_q{level}_scaled"][:] = result.scaled_quantiles[..., i].ravel()
    future = stacked.rows(items, origin, np.arange(horizon))[:, :, None]  # [N, H, 1] the forecast steps' rows
    others = {
        "item_id": np.broadcast_to(_channel_names(panel)[items][:, None, :], shape).ravel(),
        "origin": stacked.index.take(np.broadcast_to(future[:, :1], shape).ravel()),
        "step": np.broadcast_to(np.arange(1, horizon + 1)[None, :, None], shape).ravel(),
        "timestamp": stacked.index.take(np.broadcast_to(future, shape).ravel()),
        "y_true_scaled": true_scaled,
        "y_pred_scaled": scaled.ravel(),
        "observed": observed,
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
    return np.array(panel.item_ids, dtype=object)[:, None]


def _summary(errors: pd.DataFrame) -> pd.DataFrame:
    """The point metrics of :attr:`BacktestResult.summary`."""
    obs = _scored(errors)
    rows = []
    for units, true_col, pred_col in (("original", "y_true", "y_pred"), ("scaled", "y_true_scaled", "y_pred_scaled")):
        t, p = errors[true_col].to_numpy(), errors[pred_col].to_numpy()
        for name, fn in (("mse", metrics.mse), ("mae", metrics.mae), ("rmse", metrics.rmse)):
            rows.append((name, units, fn(t, p, mask=obs)))
    rows.append(("smape", "scale-free", metrics.smape(errors.y_true.to_numpy(), errors.y_pred.to_numpy(), mask=obs)))
    rows.append(("mase", "scale-free", _mase(errors)))
    blind = errors[~errors["forecast"]].groupby(["item_id", "origin"]).ngroups
    rows.append(("windows_without_forecast", "count", float(blind)))
    return pd.DataFrame(rows, columns=["metric", "units", "value"])


def _scored(errors: pd.DataFrame) -> np.ndarray:
    """The entries every metric scores: an observed target and a forecast (windows whose context
    held no observed value get none, and are counted as ``windows_without_forecast``)."""
    return (errors["observed"] & errors["forecast"]).to_numpy()


def _probabilistic_summary(errors: pd.DataFrame, levels: tuple[float, ...]) -> pd.DataFrame:
    """CRPS (from the quantiles, original and scaled units), ``mean_wQuantileLoss`` and the
    coverage of each level, over observed entries (empty for a point model)."""
    rows: list[tuple[str, str, float]] = []
    if levels:
        obs = _scored(errors)
        for units, suffix in (("original", ""), ("scaled", "_scaled")):
            truth = errors[f"y_true{suffix}"].to_numpy()
            bands = np.stack([errors[f"y_q{q}{suffix}"].to_numpy() for q in levels], axis=-1)
            rows.append(("crps", units, metrics.crps_from_quantiles(truth, bands, levels, mask=obs)))
            if units == "original":
                rows.append(("mean_wQuantileLoss", "scale-free",
                             metrics.mean_weighted_quantile_loss(truth, bands, levels, mask=obs)))
                rows += [(f"coverage_{q}", "fraction", metrics.coverage(truth, bands[..., i], mask=obs))
                         for i, q in enumerate(levels)]
    return pd.DataFrame(rows, columns=["metric", "units", "value"])


def _mase(errors: pd.DataFrame) -> float:
    """MASE over the scored ``errors``: each absolute error divided by its series' ``seasonal_error``
    (NaN when a scored series has none: no more than the season's steps before its first origin)."""
    scored = _scored(errors)
    error = np.abs(errors["y_true"].to_numpy() - errors["y_pred"].to_numpy())[scored]
    if not error.size:
        return float("nan")
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.mean(error / errors["seasonal_error"].to_numpy()[scored]))


def _seasonal_scale(stacked: _Stacked, first: np.ndarray, m: int) -> np.ndarray:
    """``[I, C]``: each item's and channel's mean ``|y[t] - y[t - m]|`` over its steps ``t < first[i]``
    with both values observed (NaN without one, and for an item with no more than ``m`` steps before
    ``first[i]``), the scale of :func:`tsrec.metrics.mase`. Computed a block of items at a time
    (:func:`~tsrec.data.scaling.item_blocks`), so its temporaries stay bounded."""
    channels = stacked.values.shape[1]
    scale = np.full((len(first), channels), np.nan)
    for block in item_blocks(stacked.length):
        lo, hi = block.start, block.stop
        rows = slice(stacked.start[lo], stacked.start[lo] + stacked.length[lo:hi].sum())  # the block's rows
        y = np.where(stacked.observed[rows], stacked.values[rows], np.nan)  # [R', C]
        item = np.repeat(np.arange(hi - lo), stacked.length[lo:hi])  # [R'] item within the block
        position = np.arange(len(item)) - (stacked.start[lo:hi] - stacked.start[lo])[item]  # [R'] step within its item
        later = np.flatnonzero((position >= m) & (position < first[lo:hi][item]))  # [K] rows with t - m in the history
        diffs = np.abs(y[later] - y[later - m])  # [K, C]
        valid = ~np.isnan(diffs)
        cell = (item[later, None] * channels + np.arange(channels)).ravel()  # [K * C] the (item, channel) of each diff
        total = np.bincount(cell, np.where(valid, diffs, 0.0).ravel(), minlength=(hi - lo) * channels)
        count = np.bincount(cell, valid.ravel(), minlength=(hi - lo) * channels)
        with np.errstate(invalid="ignore"):
            scale[lo:hi] = (total / count).reshape(hi - lo, channels)
    scale[first <= m] = np.nan
    return scale


def step_errors(errors: pd.DataFrame, units: str = "scaled") -> pd.DataFrame:
    """MSE and MAE per horizon step of backtest ``errors`` (:attr:`BacktestResult.errors`, or a
    frame with ``step``, ``y_true``/``y_pred`` or their ``_scaled`` twins, optionally ``observed``).

    Returns one row per ``step``: ``step``, ``units``, ``mse``, ``mae``, ``n`` (scored entries).
    Rows without a true value (NaN, or ``observed`` False) are left out.
    """
    if units not in ("original", "scaled"):
        raise ValueError(f"units must be 'original' or 'scaled', got {units!r}")
    suffix = "" if units == "original" else "_scaled"
    true_col, pred_col = f"y_true{suffix}", f"y_pred{suffix}"
    missing = {"step", true_col, pred_col} - set(errors.columns)
    if missing:
        raise ValueError(f"the backtest errors lack columns {sorted(missing)}")
    true, pred = errors[true_col].to_numpy(dtype=float), errors[pred_col].to_numpy(dtype=float)
    keep = ~(np.isnan(true) | np.isnan(pred))  # the columns alone, never a copy of the whole frame
    if "observed" in errors:
        keep &= errors["observed"].to_numpy(dtype=bool)
    diff = pred[keep] - true[keep]
    grouped = pd.DataFrame({"step": errors["step"].to_numpy()[keep], "se": diff**2, "ae": np.abs(diff)}).groupby("step")
    return pd.DataFrame({"step": grouped.se.mean().index, "units": units, "mse": grouped.se.mean().to_numpy(),
                         "mae": grouped.ae.mean().to_numpy(), "n": grouped.se.count().to_numpy()})


def _by_step(errors: pd.DataFrame) -> pd.DataFrame:
    return pd.concat([step_errors(errors, units).drop(columns="n") for units in ("original", "scaled")],
                     ignore_index=True)
