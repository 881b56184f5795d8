"""Scoring backtest errors: arrays and frames in, tables out; no Forecaster, no model.

:func:`score` turns a backtest's errors frame (one row per window, series and horizon step,
:attr:`BacktestResult.errors`) into the :class:`BacktestResult`: the summary metrics (MSE, MAE,
RMSE in both units, sMAPE, MASE, the quantile losses and coverage of a probabilistic model, the
windows without a forecast), the per-step errors, the skill table against the baselines of the same
windows, and each interval's coverage, width and Winkler score per series and overall (with a
:class:`CoverageWarning` where a level's coverage strays from it). Every number is a mean over the
scored entries, read off the frame alone, so that the errors of backtests run in parts (over
partitions of the series, on several workers) give the whole backtest's scores when concatenated
(:func:`tsrec.evaluation.score_backtest`). :mod:`tsrec.evaluation` runs the backtests.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tsrec import metrics
from tsrec.conformal import band_ends

__all__ = ["BASELINES", "COVERAGE_TOLERANCE", "FITTED_ONCE", "NAIVE_BASELINES", "NAIVE_FIT", "STATS_BASELINES",
           "BacktestResult", "CoverageWarning", "coverage_tolerance", "interval_levels", "score", "scored_levels",
           "step_errors"]

#: The baselines that read each window's context (the registered ``naive`` and ``seasonal_naive``).
NAIVE_BASELINES = ("naive", "seasonal_naive")
#: The baselines fitted by statsforecast (the registered ``ets``, ``theta``, ``ces`` and
#: ``dynamic_theta``; the optional extra tsrec[stats]).
STATS_BASELINES = ("ets", "theta", "ces", "dynamic_theta")
BASELINES = NAIVE_BASELINES + STATS_BASELINES
#: How the naive baselines are fitted (the skill table's ``fit``): they read each window's context.
NAIVE_FIT = "each window's context"
#: How the statistical baselines are fitted without ``baselines_refit_every``.
FITTED_ONCE = "fitted once on the history before the first origin"
#: The resolution of the scaled values windows are stored and forecast at (a few float32 ulps,
#: times the values' size where it is above 1): a skill score at or below it (squared for the MSE)
#: is read as 0, so that a baseline exact in the data (naive on a flat tail) gives an infinite
#: ratio rather than one of 1e12 from rounding.
STORED_EPS = 4 * float(np.finfo(np.float32).eps)

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
            ``timestamp``, ``y_true`` (the data's own value), ``y_pred`` (original units), ``y_true_scaled``,
            ``y_pred_scaled`` (the fitted scaler's units: the values as the model reads them, float32),
            ``observed``, ``forecast`` and
            ``seasonal_error`` (the series' in-sample seasonal-naive MAE before its first origin,
            MASE's scale, :func:`tsrec.metrics.seasonal_scale`; NaN without that much history); per
            baseline its forecast ``y_<baseline>`` and ``y_<baseline>_scaled`` (in the model's
            scaler's units) and ``season_<baseline>``, the season its model resolved; with a
            statistical baseline, ``stats_fit_steps``: the steps of the series (from its start)
            that the statistical models forecasting the window were fitted on (the history before
            its first origin, or before the origin of their last refit, or before the window's own
            origin where that history is more than twice the fitted one,
            :data:`~tsrec.models.parameters.REFIT_GROWTH`).
            Unobserved targets are kept, flagged, and left out of every metric; so are the windows
            of a series or column whose context held no observed value (``forecast`` False,
            ``y_pred`` NaN: a forecast is only made from data).
        summary: one row per ``metric`` and ``units``: ``mse``, ``mae``, ``rmse`` in ``"original"``
            and ``"scaled"`` units, ``mase`` and ``smape`` (``"scale-free"``), over observed entries,
            ``windows_without_forecast`` (``"count"``: the (series, window) pairs left out for an
            empty context), and the skill ratios of :attr:`skill` (``mse_ratio_naive``, ``mae_ratio_naive``,
            ``mse_ratio_seasonal_naive``, ``mae_ratio_seasonal_naive``; units ``"ratio"``).
        by_step: ``mse`` and ``mae`` per horizon ``step`` in both units.
        skill: the model against baselines of the same windows, one row per ``baseline`` of
            ``backtest``'s ``baselines``: the registered models of those names, run as a user runs
            them (:func:`tsrec.evaluation.backtest`): ``"naive"`` and ``"seasonal_naive"`` (the
            last observed value, the last observed season of each window's context), and
            statsforecast's ``"ets"`` (AutoETS), ``"theta"`` (AutoTheta), ``"ces"`` (AutoCES) and
            ``"dynamic_theta"`` (DynamicOptimizedTheta), fitted once per series and channel on
            all its history before its first origin and carried forward over the origins with the
            fitted parameters (statsforecast's ``cross_validation(refit=False)``), or refit every
            ``baselines_refit_every`` origins (``refit=k``). Columns ``season`` (the season the
            baseline's model resolved on that history, as ``Forecaster(<baseline>)`` resolves it;
            NaN where parts of the series scored together resolved different ones), ``fit`` (how
            it was fitted: ``"each window's context"`` for the naive ones; ``"fitted once on the
            history before the first origin"`` or ``"refit every k origins"`` for the statistical
            ones), ``model_mse``, ``baseline_mse``, ``mse_ratio``, ``model_mae``, ``baseline_mae``,
            ``mae_ratio``, in scaled units over the entries both forecast, and ``note``: why a
            baseline runs without a season, or which seasons parts of the series got, else empty.
            A ratio below 1 means the model beats the baseline.
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




def scored_levels(errors: pd.DataFrame) -> tuple[float, ...]:
    """The quantile levels of ``errors``' ``y_q<level>`` columns."""
    return tuple(float(c[3:]) for c in errors.columns if c.startswith("y_q") and not c.endswith("_scaled"))


def score(errors: pd.DataFrame, baselines: Sequence[str], levels: tuple[float, ...],
          method: str | None = None) -> BacktestResult:
    """The :class:`BacktestResult` of backtest ``errors``: the skill against ``baselines`` (each
    with its ``y_<baseline>_scaled`` and ``season_<baseline>`` columns), the quantile ``levels``
    scored, and what gave the intervals' bands (``method``; None: the quantiles' own, if any)."""
    skill = _skill(errors, baselines)
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


def _skill(errors: pd.DataFrame, baselines: Sequence[str]) -> pd.DataFrame:
    """The skill table (see :class:`BacktestResult`), from ``errors`` alone."""
    rows = []
    truth, model = errors["y_true_scaled"].to_numpy(), errors["y_pred_scaled"].to_numpy()
    first = errors["step"].to_numpy() == errors["step"].min()  # one row per window and channel
    fit = _stats_fit(errors[first]) if set(baselines) & set(STATS_BASELINES) else FITTED_ONCE
    for baseline in baselines:
        season, note = _season(errors[first], baseline)
        forecast = errors[f"y_{baseline}_scaled"].to_numpy()
        both = _scored(errors) & np.isfinite(forecast)
        scores = {name: (fn(truth, model, mask=both), fn(truth, forecast, mask=both)) if both.any() else
                  (np.nan, np.nan) for name, fn in (("mse", metrics.mse), ("mae", metrics.mae))}
        # the resolution of the scaled values forecasts are stored at: an error below it is none
        floor = STORED_EPS * max(1.0, float(np.abs(truth[both]).max())) if both.any() else 0.0
        rows.append({"baseline": baseline, "season": season, "fit": NAIVE_FIT if baseline in NAIVE_BASELINES else fit,
                     **{f"{k}_{name}": v for name, (m, b) in scores.items()
                        for k, v in (("model", m), ("baseline", b))},
                     "mse_ratio": _ratio(*scores["mse"], floor ** 2), "mae_ratio": _ratio(*scores["mae"], floor),
                     "note": note})
    columns = ["baseline", "season", "fit", "model_mse", "baseline_mse", "mse_ratio", "model_mae", "baseline_mae",
               "mae_ratio", "note"]
    return pd.DataFrame(rows, columns=columns)


def _season(windows: pd.DataFrame, baseline: str) -> tuple[float, str]:
    """The season of ``baseline`` over the ``windows`` (a row per window and channel): its
    ``season_<baseline>`` where every series has the same (else NaN), and the note saying why it
    is 1 (for another baseline than naive), which seasons the series got, or that its model could
    not be fitted (NaN)."""
    seasons = windows.groupby("item_id", sort=False)[f"season_{baseline}"].first().to_numpy()  # [I]
    per_series = Counter(int(m) if np.isfinite(m) else None for m in seasons)
    if len(per_series) == 1:
        (season, _), = per_series.items()
        if season is None:
            return np.nan, f"no forecast: {baseline}'s model could not be fitted (backtest warned why)"
        dropped = season == 1 and baseline != "naive"
        return season, (f"no season: {baseline}'s model resolved season_length 1 on the history before the first "
                        "origin (the history cannot hold two of its season, or no cycle stood out; backtest warned "
                        "why)" if dropped else "")
    parts = [f"season {m} on {n} series" if m is not None else f"no forecast on {n} series (its model could not be "
             "fitted)" for m, n in per_series.items()]
    return np.nan, "; ".join(parts)


def _stats_fit(windows: pd.DataFrame) -> str:
    """How the statistical baselines were fitted, read off the ``stats_fit_steps`` of the
    ``windows`` (a row per window and channel), so that errors scored in parts give the whole
    backtest's: ``k`` of ``"refit every k origins"`` (the most windows one fit served), or none but
    the first per series (:data:`FITTED_ONCE`)."""
    served = windows.groupby(["item_id", "stats_fit_steps"], sort=False)["origin"].nunique()  # windows per fit
    refits = windows.groupby("item_id", sort=False)["stats_fit_steps"].nunique().max() > 1
    return f"refit every {served.max()} origins" if refits else FITTED_ONCE


def _ratio(model: float, baseline: float, floor: float = 0.0) -> float:
    """``model / baseline``, each score at or below ``floor`` read as 0: inf (or NaN for 0 / 0) when
    the baseline is perfect."""
    model, baseline = (0.0 if score <= floor else score for score in (model, baseline))
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.float64(model) / np.float64(baseline))


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
