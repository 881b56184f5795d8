"""Rolling-origin backtests of a :class:`~tsrec.Forecaster`, with metrics labelled by units."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from tsrec import metrics
from tsrec.config import CovariateConfig
from tsrec.data import Panel, WindowDataset, seasonality
from tsrec.data.covariates import read_frame
from tsrec.forecaster import Forecaster
from tsrec.models.base import DEFAULT_QUANTILE_LEVELS
from tsrec.nn.outputs import check_levels

__all__ = ["BacktestResult", "backtest", "step_errors"]


@dataclass(frozen=True)
class BacktestResult:
    """What :func:`backtest` returns.

    Attributes:
        errors: one row per window, item (wide frames: per column), horizon step: ``item_id``,
            ``origin`` (timestamp of the window's first forecast step), ``step`` (1..H),
            ``timestamp``, ``y_true``, ``y_pred`` (original units), ``y_true_scaled``,
            ``y_pred_scaled`` (the fitted scaler's units), ``observed`` and ``forecast``.
            Unobserved targets are kept, flagged, and left out of every metric; so are the windows
            of a series or column whose context held no observed value (``forecast`` False,
            ``y_pred`` NaN: a forecast is only made from data).
        summary: one row per ``metric`` and ``units``: ``mse``, ``mae``, ``rmse`` in ``"original"``
            and ``"scaled"`` units, ``mase`` and ``smape`` (``"scale-free"``), over observed entries,
            ``windows_without_forecast`` (``"count"``: the (series, window) pairs left out for an
            empty context), and the skill ratios of :attr:`skill` (``mse_ratio_naive``, ``mae_ratio_naive``,
            ``mse_ratio_seasonal_naive``, ``mae_ratio_seasonal_naive``; units ``"ratio"``).
        by_step: ``mse`` and ``mae`` per horizon ``step`` in both units.
        skill: the model against the naive forecasts of the same windows, one row per
            ``baseline``: ``"naive"`` (the last observed value of the window's context) and
            ``"seasonal_naive"`` (the last observed season, with ``season`` the strongest cycle
            found in the fitted data when the context holds it; no row without one). Columns
            ``season``, ``model_mse``, ``baseline_mse``, ``mse_ratio``, ``model_mae``,
            ``baseline_mae``, ``mae_ratio``, in scaled units over the entries both forecast
            (``errors`` has the baselines as ``y_naive`` and ``y_seasonal_naive``). A ratio
            below 1 means the model beats the baseline.
    """

    errors: pd.DataFrame
    summary: pd.DataFrame
    by_step: pd.DataFrame
    skill: pd.DataFrame

    def metric(self, name: str, units: str = "scaled") -> float:
        """One number of :attr:`summary`, e.g. ``result.metric("mse", "scaled")``."""
        row = self.summary[(self.summary.metric == name) & (self.summary.units == units)]
        if row.empty:
            raise KeyError(f"no metric {name!r} in {units!r} units; available: "
                           f"{sorted(zip(self.summary.metric, self.summary.units))}")
        return float(row.value.iloc[0])


def _origins(panel: Panel, context: int, horizon: int, start: int | str | pd.Timestamp | None,
             n_windows: int | None, stride: int) -> list[range]:
    """Per item, the forecast origins (grid positions of the first forecast step)."""
    ranges = []
    for i, series in enumerate(panel.items):
        last = len(series) - horizon
        if start is None:
            count = 1 if n_windows is None else n_windows
            first = last - stride * (count - 1)
        elif isinstance(start, (int, np.integer)) and not isinstance(start, bool):
            first = int(start)
        else:
            stamp = pd.Timestamp(start)
            if stamp not in series.index:
                raise ValueError(f"start={stamp} is not a timestamp of {panel.item_label(i)} "
                                 f"({series.index[0]} .. {series.index[-1]} at freq {panel.freq!r})")
            first = int(series.index.get_loc(stamp))
        if first < context:
            raise ValueError(f"{panel.item_label(i)}: the first backtest window would start at position {first}, "
                             f"but each window needs context_length={context} earlier steps; start later, use fewer "
                             "windows, or pass more history")
        if first > last:
            raise ValueError(f"{panel.item_label(i)}: no backtest window fits: the first origin {first} leaves fewer "
                             f"than prediction_length={horizon} steps before the end ({len(series)} steps)")
        origins = range(first, last + 1, stride)
        if n_windows is not None:
            origins = origins[:n_windows]
        ranges.append(origins)
    return ranges


def _history_before(df: pd.DataFrame, panel: Panel, cut: list[pd.Timestamp], *, time_col: str | None,
                    id_col: str | None) -> pd.DataFrame:
    """The rows of ``df`` strictly before each item's ``cut`` timestamp (for refitting)."""
    times = pd.DatetimeIndex(df.index if time_col is None else pd.to_datetime(df[time_col]))
    if id_col is None:
        return df[times < cut[0]]
    by_id = dict(zip(panel.item_ids, cut))
    limit = df[id_col].astype(str).map(by_id)
    return df[times < pd.DatetimeIndex(limit)]


def backtest(forecaster: Forecaster, df: pd.DataFrame, *, start: int | str | pd.Timestamp | None = None,
             n_windows: int | None = None, stride: int | None = None, refit_every: int | None = None,
             batch_size: int | None = None, season_length: int | None = None,
             quantiles: Sequence[float] | None = None, time_col: str | None = None,
             id_col: str | None = None, target_col: str | None = None) -> BacktestResult:
    """Forecast from rolling origins over ``df`` and score every window.

    Args:
        forecaster: a fitted Forecaster (or an unfitted one with ``refit_every``).
        df: the frame to backtest on, in the layout the forecaster was fitted with; windows read
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
        batch_size: windows per inference batch (the last partial batch is kept).
        season_length: MASE's seasonal period (default: the frequency's natural season).
        quantiles: for a probabilistic model, the levels scored (default: a quantile output's own
            levels, else 0.1, ..., 0.9): ``errors`` gets ``y_q<level>`` (original units) and
            ``y_q<level>_scaled`` per level, and ``summary`` the CRPS (from the quantiles, in both
            units), ``mean_wQuantileLoss`` and ``coverage_<level>``, as GluonTS's ``Evaluator``.
    """
    if stride is not None and (not isinstance(stride, int) or stride < 1):
        raise ValueError(f"stride must be a positive int, got {stride!r}")
    if n_windows is not None and (not isinstance(n_windows, int) or n_windows < 1):
        raise ValueError(f"n_windows must be a positive int, got {n_windows!r}")
    if refit_every is not None and (not isinstance(refit_every, int) or refit_every < 1):
        raise ValueError(f"refit_every must be a positive int, got {refit_every!r}")
    if forecaster.model is None and refit_every is None:
        from sklearn.exceptions import NotFittedError

        raise NotFittedError("the forecaster is not fitted: fit it first, or pass refit_every=k to fit it on the data "
                           "before each block of k windows")
    levels = _levels(forecaster, quantiles)
    columns = dict(time_col=time_col, id_col=id_col, target_col=target_col)
    fitted = forecaster.covariates
    covariates = CovariateConfig() if fitted is None else fitted.config
    panel, values = read_frame(df, covariates, () if fitted is None else fitted.categorical, freq=forecaster.freq,
                               gaps=forecaster.settings.window.gaps, **columns)
    horizon, context = forecaster.prediction_length, forecaster.context_length
    origins = _origins(panel, context, horizon, start, n_windows, stride or horizon)
    n_blocks = max(len(r) for r in origins)
    block = refit_every or n_blocks
    parts: list[pd.DataFrame] = []
    seasons: list[int | None] = []
    for first in range(0, n_blocks, block):
        block_origins = [r[first:first + block] for r in origins]
        if refit_every is not None:
            cut = [s.index[r[0]] if len(r) else s.index[-1] + pd.tseries.frequencies.to_offset(panel.freq)
                   for s, r in zip(panel.items, block_origins)]
            forecaster = forecaster.unfitted_copy().fit(_history_before(df, panel, cut, **{
                k: v for k, v in columns.items() if k != "target_col"}), **columns, past_covariates=covariates.past,
                future_covariates=covariates.future, static_covariates=covariates.static)
        rows = forecaster.panel.check_compatible(panel)
        ranges = [(r.start, r.stop) if len(r) else (context, context) for r in block_origins]
        dataset = WindowDataset.from_panel(panel, forecaster.scaler, context, horizon, ranges,
                                           stride=block_origins[0].step if block_origins[0] else 1,
                                           scaler_rows=rows, covariates=forecaster.covariates.encode(panel, values))
        scaled, bands = _point_and_quantiles(forecaster, forecaster.forecast_windows(dataset, batch_size=batch_size),
                                             levels)  # [N, H, C], [N, H, C, Q] or None
        seasons.append(forecaster.data_facts.cycle_within(context))
        parts.append(_window_frame(panel, forecaster, dataset, scaled, rows, seasons[-1], bands, levels))
    errors = pd.concat(parts, ignore_index=True)
    m = season_length or seasonality(panel.freq)
    skill = _skill(errors, seasons)
    ratios = pd.DataFrame([(f"{ratio}_{row.baseline}", "ratio", getattr(row, ratio)) for row in skill.itertuples()
                           for ratio in ("mse_ratio", "mae_ratio")], columns=["metric", "units", "value"])
    parts = [_summary(errors, panel, origins, m), _probabilistic_summary(errors, levels), ratios]
    summary = pd.concat([part for part in parts if not part.empty], ignore_index=True)
    return BacktestResult(errors, summary, _by_step(errors), skill)


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


def _skill(errors: pd.DataFrame, seasons: list[int | None]) -> pd.DataFrame:
    """The skill table (see :class:`BacktestResult`); ``seasons``: the seasonal baseline's season
    in each refit block (its ``season`` column is NaN where the blocks' seasons differ)."""
    rows = []
    truth, model = errors["y_true_scaled"].to_numpy(), errors["y_pred_scaled"].to_numpy()
    for baseline in ("naive", "seasonal_naive"):
        forecast = errors[f"y_{baseline}_scaled"].to_numpy()
        both = _scored(errors) & np.isfinite(forecast)
        if not both.any():
            continue
        scores = {name: (fn(truth, model, mask=both), fn(truth, forecast, mask=both))
                  for name, fn in (("mse", metrics.mse), ("mae", metrics.mae))}
        found = {s for s in seasons if s is not None}
        season = 1 if baseline == "naive" else (found.pop() if len(found) == 1 else np.nan)
        rows.append({"baseline": baseline, "season": season,
                     **{f"{k}_{name}": v for name, (m, b) in scores.items()
                        for k, v in (("model", m), ("baseline", b))},
                     "mse_ratio": scores["mse"][0] / scores["mse"][1], "mae_ratio": scores["mae"][0] / scores["mae"][1]})
    columns = ["baseline", "season", "model_mse", "baseline_mse", "mse_ratio", "model_mae", "baseline_mae", "mae_ratio"]
    return pd.DataFrame(rows, columns=columns)


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


def _point_and_quantiles(forecaster: Forecaster, outputs: np.ndarray,
                         levels: tuple[float, ...]) -> tuple[np.ndarray, np.ndarray | None]:
    """Scaled point forecasts ``[N, H, C]`` and, for a probabilistic model, its quantiles at
    ``levels`` ``[N, H, C, Q]``, from :meth:`Forecaster.forecast_windows`' outputs."""
    if not levels:
        return outputs, None
    output = forecaster.model.output
    params = torch.from_numpy(outputs).double()
    return output.mean(params).numpy(), output.quantiles(params, levels).numpy()


def _window_frame(panel: Panel, forecaster: Forecaster, dataset: WindowDataset, scaled: np.ndarray,
                  rows: np.ndarray, season: int | None, bands: np.ndarray | None = None,
                  levels: tuple[float, ...] = ()) -> pd.DataFrame:
    """Tidy per-window, per-step, per-channel rows for one block of windows, with the naive
    baselines of the same windows and, for a probabilistic model, its quantiles ``bands``."""
    n, horizon, channels = scaled.shape
    context = forecaster.context_length
    items = np.empty(n, dtype=np.int64)
    origin = np.empty(n, dtype=np.int64)
    truth = np.empty_like(scaled)
    observed = np.empty(scaled.shape, dtype=bool)
    past = np.empty((n, context, channels), dtype=np.float64)
    past_observed = np.empty((n, context, channels), dtype=np.float64)
    for k in range(n):
        window = dataset[k]
        items[k], origin[k] = window["item"], window["origin"]
        truth[k] = window["future_target"].numpy()
        observed[k] = window["future_observed"].numpy() > 0
        past[k], past_observed[k] = window["past_target"].numpy(), window["past_observed"].numpy()
    naive, seasonal = naive_forecasts(past, past_observed, horizon, season)  # each [N, H, C], scaled
    scaler_rows = rows[items]
    pred = forecaster.scaler.inverse_transform(scaled, scaler_rows)
    true = forecaster.scaler.inverse_transform(truth, scaler_rows)
    names = [panel.columns if panel.layout == "wide" else (panel.items[i].item_id,) for i in items]
    item_id = np.array([[names[k][c] for c in range(channels)] for k in range(n)], dtype=object)  # [N, C]
    step_index = np.stack([panel.items[i].index[o:o + horizon] for i, o in zip(items, origin)]) if n else \
        np.empty((0, horizon), dtype="datetime64[ns]")  # [N, H]
    shape = (n, horizon, channels)
    quantile_columns = {}
    for i, level in enumerate(levels):
        quantile_columns[f"y_q{level}"] = forecaster.scaler.inverse_transform(bands[..., i], scaler_rows).ravel()
        quantile_columns[f"y_q{level}_scaled"] = bands[..., i].ravel()
    return pd.DataFrame({
        "item_id": np.broadcast_to(item_id[:, None, :], shape).ravel(),
        "origin": np.broadcast_to(step_index[:, :1, None], shape).ravel(),
        "step": np.broadcast_to(np.arange(1, horizon + 1)[None, :, None], shape).ravel(),
        "timestamp": np.broadcast_to(step_index[:, :, None], shape).ravel(),
        "y_true": np.where(observed, true, np.nan).ravel(),
        "y_pred": pred.ravel(),
        "y_true_scaled": np.where(observed, truth, np.nan).ravel(),
        "y_pred_scaled": scaled.ravel(),
        "observed": observed.ravel(),
        "forecast": np.isfinite(scaled).ravel(),
        "y_naive": forecaster.scaler.inverse_transform(naive, scaler_rows).ravel(),
        "y_seasonal_naive": forecaster.scaler.inverse_transform(seasonal, scaler_rows).ravel(),
        "y_naive_scaled": naive.ravel(),
        "y_seasonal_naive_scaled": seasonal.ravel(),
        **quantile_columns,
    })


def _summary(errors: pd.DataFrame, panel: Panel, origins: list[range], m: int) -> pd.DataFrame:
    obs = _scored(errors)
    rows = []
    for units, true_col, pred_col in (("original", "y_true", "y_pred"), ("scaled", "y_true_scaled", "y_pred_scaled")):
        t, p = errors[true_col].to_numpy(), errors[pred_col].to_numpy()
        for name, fn in (("mse", metrics.mse), ("mae", metrics.mae), ("rmse", metrics.rmse)):
            rows.append((name, units, fn(t, p, mask=obs)))
    rows.append(("smape", "scale-free", metrics.smape(errors.y_true.to_numpy(), errors.y_pred.to_numpy(), mask=obs)))
    rows.append(("mase", "scale-free", _mase(errors, panel, origins, m)))
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


def _mase(errors: pd.DataFrame, panel: Panel, origins: list[range], m: int) -> float:
    """MASE with each series' in-sample seasonal-naive MAE before its first backtest origin."""
    total, count = 0.0, 0
    for series, origin in zip(panel.items, origins):
        history = np.where(series.observed, series.values, np.nan)[: origin[0]]  # [T0, C]
        if len(history) <= m:
            return float("nan")
        names = panel.columns if panel.layout == "wide" else (series.item_id,)
        for c, name in enumerate(names):
            part = errors[(errors.item_id == name) & errors.observed & errors.forecast]
            if part.empty:
                continue
            value = metrics.mase(part.y_true.to_numpy(), part.y_pred.to_numpy(), history[:, c], m=m)
            total += value * len(part)
            count += len(part)
    return total / count if count else float("nan")


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
    keep = errors[true_col].notna() & errors[pred_col].notna()
    if "observed" in errors:
        keep &= errors["observed"].astype(bool)
    rows = errors[keep]
    diff = rows[pred_col].to_numpy(dtype=float) - rows[true_col].to_numpy(dtype=float)
    grouped = pd.DataFrame({"step": rows["step"].to_numpy(), "se": diff**2, "ae": np.abs(diff)}).groupby("step")
    return pd.DataFrame({"step": grouped.se.mean().index, "units": units, "mse": grouped.se.mean().to_numpy(),
                         "mae": grouped.ae.mean().to_numpy(), "n": grouped.se.count().to_numpy()})


def _by_step(errors: pd.DataFrame) -> pd.DataFrame:
    return pd.concat([step_errors(errors, units).drop(columns="n") for units in ("original", "scaled")],
                     ignore_index=True)
