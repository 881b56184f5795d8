"""Forecasting: a :class:`~tsrec.fitted.FittedState` and windows -> a :class:`~tsrec.fitted.ForecastResult`.

One path serves ``predict`` and ``backtest`` (and through them the CLI, GluonTS and the Ray and
Spark workers)::

    forecast_next(state, panel, covariates, ...)     the windows after the end of every series
        -> forecast(state, dataset, rows, items, origins, ...)
    backtest: WindowDataset.from_panel(...) at its origins
        -> forecast(state, dataset, rows, items, origins, ...)

    forecast = outputs (the network on every window, batched, sharded under DDP; scaled units)
               -> unscale (tsrec.fitted: the one place values are unscaled)

The device and Lightning arguments are the state's (``settings.trainer.trainer_kwargs``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch

from tsrec._checks import check_optional_int
from tsrec.conformal import band_levels, band_quantiles, check_interval_levels, observed_starts
from tsrec.conformal_update import Evidence, learned_widths, window_values
from tsrec.data import CovariateValues, Panel, WindowCovariates, WindowDataset, future_index
from tsrec.data.covariates import check_context, read_future
from tsrec.data.launches import zeros_before_fit
from tsrec.data.scaling import OutlierWarning, item_blocks
from tsrec.data.tails import fill_tails, fills_tails, with_tails
from tsrec.data.windows import far_as_missing
from tsrec.fitted import FittedState, ForecastResult, unscale
from tsrec.fitting import history_cap, report_far, report_far_covariates, report_unseen_categories
from tsrec.models import ForecastModel
from tsrec.models.base import MISSING_TAIL_AS_MEAN
from tsrec.models.stats import refitting
from tsrec.nn.heads import RevIN
from tsrec.nn.outputs import check_levels

__all__ = ["INTERVAL_METHODS", "conformal_quantiles", "context_read", "forecast", "forecast_next", "forecast_origins",
           "interval_settings", "outputs", "point_model_fix", "steps_read", "window_dtype", "window_origins",
           "with_intervals"]


def forecast_next(state: FittedState, panel: Panel, values: CovariateValues | None = None, *,
                  future_covariates: pd.DataFrame | None = None, quantiles: Sequence[float] | None = None,
                  num_samples: int | None = None, batch_size: int | None = None,
                  levels: Sequence[float] | None = None, intervals: str | None = None,
                  refit: bool = False) -> ForecastResult:
    """The forecasts of the ``prediction_length`` steps after every series of ``panel`` (read with
    the fitted schema or built directly; a series ``fit`` never saw is forecast from its own history,
    :meth:`~tsrec.fitted.FittedState.with_new_series`), as arrays: what
    ``Forecaster.predict`` returns as a frame. ``values``: ``panel``'s covariates (None for a model
    without covariates); ``future_covariates``: the future covariates' values over the horizon.
    ``refit``: the statistical models (or an ensemble's) fit each series again on the history
    given instead of applying the parameters fitted at ``fit`` (:func:`tsrec.models.stats.refitting`;
    the state is left as it is).

    Warns (:class:`~tsrec.data.scaling.OutlierWarning`) naming context values far from their
    series' training distribution (of the fitted history itself, ``panel`` being ``state.history``,
    the level shifts alone: the fit named its isolated far values), and names the series whose
    context holds no observation (their forecast is NaN; an error with ``missing_context="raise"``).
    ``levels``, ``intervals``: the interval levels (percent) and what gives their bands
    (:func:`interval_settings`)."""
    name, model, encoder = state.settings.model, state.model, state.covariates
    asked = conformal_quantiles(state, quantiles) if levels is None and intervals in (None, "conformal") else None
    if asked is not None:  # a calibrated point model's quantiles: the ends of its conformal bands
        quantiles, levels = None, band_levels(asked) or None
        intervals = "conformal" if levels else None
    bands, method = interval_settings(state, levels, intervals, quantiles)
    if not model.output.probabilistic and (quantiles is not None or num_samples is not None):
        raise ValueError(point_model_fix(state, "quantiles" if quantiles is not None else "samples"))
    levels = () if quantiles is None else check_levels("quantiles", quantiles)
    num_samples = check_optional_int("num_samples", num_samples, 1)
    if values is None:
        if encoder.config.columns:
            raise ValueError(f"{name} reads the covariates {list(encoder.config.columns)}: "
                             "pass their values with the series (predict a frame that holds them)")
        values = CovariateValues.none(panel)
    state = state.with_new_series(panel, values)
    context = context_read(state, panel)
    rows = state.history.check_compatible(panel)
    _report_cut_short(state, panel, rows)
    panel = _as_fitted(state, panel, rows)
    fitted = panel is state.history  # predict() of the fitted history: the fit named its isolated far values
    panel = _without_placeholders(state, panel, rows)
    # The windows read the last context_length steps only: they are built from those alone.
    recent = panel.tail(context)
    report_far(state, recent, rows, "predict", stacklevel=4, isolated=not fitted)
    _report_tails(state, recent)
    panel = far_as_missing(panel, state.scaler, rows)  # as the model was fitted: every model forecasts without them
    recent = panel.tail(context)
    if fills_tails(model.trainable, encoder.config.columns):  # missing tails forecast from the last observations
        gapped, _ = with_tails(panel, CovariateValues.none(panel), context)
        recent = fill_tails(gapped, state.settings.window.prediction_length, context,
                            functools.partial(_forecast_cut, state, rows, batch_size))[0].tail(context)
    dataset = WindowDataset.for_prediction(
        recent, state.scaler, context, state.settings.window.prediction_length, scaler_rows=rows,
        covariates=_prediction_covariates(state, recent, values.tail(context), future_covariates, named=not fitted),
        padded=True, dtype=window_dtype(model))
    learning = bands and method == "conformal" and state.calibration.update == "rolling"
    evidence = _evidence_after_fit(state, panel, values, rows, bands, batch_size) if learning else None
    cutoffs = np.full(len(panel.items), np.iinfo(np.int64).max) if evidence is not None else None
    with refitting(model) if refit else contextlib.nullcontext():
        result = forecast(state, dataset, rows, np.arange(len(panel.items)), np.diff(panel.offsets), levels=levels,
                          intervals=bands, method=method, num_samples=num_samples, batch_size=batch_size,
                          evidence=evidence, cutoffs=cutoffs)
    _report_blind(state, panel, result.blind, context)
    _report_unfollowed_shifts(state, recent, rows, result)
    if bands and method == "conformal":
        _report_moved_constants(state, panel, rows)
    return result if asked is None else result.at_quantiles(asked)


def conformal_quantiles(state: FittedState, quantiles: Sequence[float] | None) -> tuple[float, ...] | None:
    """``quantiles`` checked (sorted) where they are a calibrated point model's: the ends of its
    conformal bands (a pair ``q``, ``1 - q`` the interval of level ``100 (1 - 2q)`` percent,
    :func:`~tsrec.conformal.band_levels`; 0.5 the point forecast), as darts' conformal models and
    :class:`~tsrec.interop.gluonts.TsrecPredictor` read them; None for any other model, whose
    quantiles are its own. ``ValueError`` for a level its calibration cannot give."""
    if quantiles is None or state.model.output.probabilistic or state.calibration is None:
        return None
    asked = check_levels("quantiles", quantiles)
    state.calibration.require_quantiles(asked)
    return asked


def _forecast_cut(state: FittedState, rows: np.ndarray, batch_size: int | None, cut: Panel,
                  items: np.ndarray) -> np.ndarray:
    """``[n, H, C]`` the point forecasts after the ends of the series of ``cut`` (items ``items``
    ``[n]`` of the panel whose scaler rows are ``rows``), from windows padded with unobserved
    steps where a series is shorter than the context: :func:`~tsrec.data.tails.fill_tails`' forecasts
    of a missing tail, for a network without covariates."""
    dataset = WindowDataset.for_prediction(
        cut, state.scaler, state.resolved.window.context_length, state.settings.window.prediction_length,
        scaler_rows=rows[items], covariates=_prediction_covariates(state, cut, CovariateValues.none(cut), None),
        padded=True, dtype=window_dtype(state.model))
    return forecast(state, dataset, rows[items], np.arange(len(items)), np.diff(cut.offsets),
                    batch_size=batch_size).mean


def forecast(state: FittedState, dataset: WindowDataset, rows: np.ndarray, items: np.ndarray, origins: np.ndarray,
             *, levels: Sequence[float] = (), intervals: Sequence[float] = (), method: str | None = None,
             num_samples: int | None = None, batch_size: int | None = None, evidence: Evidence | None = None,
             cutoffs: np.ndarray | None = None) -> ForecastResult:
    """The forecasts of every window of ``dataset`` in the data's units (:func:`~tsrec.fitted.unscale`).

    rows:    ``[N]`` each window's scaler row; ``items``, ``origins`` ``[N]``: its series'
             position in the panel the windows come from and its first forecast step.
    levels, num_samples: quantiles and sample paths (probabilistic models only).
    intervals, method: interval levels (percent, checked by :func:`interval_settings`) and what
             gives their bands: ``"conformal"`` (the state's calibration, around the mean; then no
             other ``levels``) or ``"model"`` (the network's own quantiles at the bands' levels).
    evidence, cutoffs: what conformal bands learn from after the fit (:func:`with_intervals`).
    """
    scaled = outputs(state, dataset, batch_size=batch_size)
    rows = np.asarray(rows)
    if intervals and method == "model":
        levels = tuple(sorted({*levels, *band_quantiles(intervals)}))
    result = unscale(state.model, state.scaler, scaled, rows, np.asarray(items), np.asarray(origins),
                     levels=levels, num_samples=num_samples)
    return with_intervals(state, result, rows, intervals, method, evidence=evidence, cutoffs=cutoffs)


def with_intervals(state: FittedState, result: ForecastResult, rows: np.ndarray, intervals: Sequence[float],
                   method: str | None, *, evidence: Evidence | None = None,
                   cutoffs: np.ndarray | None = None) -> ForecastResult:
    """``result`` (forecasts of windows of the fitted series ``rows`` ``[N]``) with the bands of
    ``intervals`` by ``method`` (:func:`forecast`); conformal bands learn from ``evidence`` (scores
    after the fit) known before each window's cutoff ``cutoffs`` ``[N]`` (int64 ns) where the
    calibration updates (:func:`~tsrec.conformal_update.learned_widths`)."""
    if not intervals:
        return result
    if method == "model":
        return dataclasses.replace(result, intervals=tuple(intervals), interval_method=method)
    widths = None
    if evidence is not None and cutoffs is not None and state.calibration.update == "rolling":
        widths = {level: learned_widths(state.calibration, evidence, cutoffs, level) for level in intervals}
    quantiles, bands = state.calibration.bands(result.mean, rows, intervals, widths)  # [N, H, C, Q]
    bands = np.moveaxis(state.scaler.floored(np.moveaxis(bands, -1, 1), rows), 1, -1)  # [N, H, C, Q] at the floor
    scaled_bands = np.moveaxis(state.scaler.transform(np.moveaxis(bands, -1, 1), rows), 1, -1)  # [N, H, C, Q]
    return dataclasses.replace(result, levels=quantiles, quantiles=bands, scaled_quantiles=scaled_bands,
                               intervals=tuple(intervals), interval_method=method)


def point_model_fix(state: FittedState, asked: str) -> str:
    """What a model that forecasts points says when ``asked`` (``"quantiles"``, ``"samples"``) for:
    what works for it. A calibrated model has conformal bands (``levels=[...]``); a network can
    be refitted with a distribution; a statistical model has no ``output`` to refit with, so only
    a calibration (``conformal_windows``) gives it intervals."""
    name, calibrated = state.settings.model, state.calibration is not None
    said = f"{name} forecasts points, so it has no {asked}"
    if calibrated:
        top = state.calibration.max_level()
        example = "[80, 90]" if top >= 90 else f"[{math.floor(top)}]"
        return (f"{said} of its own; its intervals are conformal bands: pass levels={example} (percent; up to "
                f"{top:.1f}% here) or their ends as quantiles=[0.1, 0.5, 0.9] (levels=[80] gives 0.1 and 0.9; "
                f"0.5 is the forecast)")
    if not state.model.trainable:
        return (f"{said}: refit with conformal_windows=<k> (e.g. 20) for conformal bands, then pass levels=[80, 90] "
                "(percent)")
    return (f"{name} was trained with output='point', so it has no {asked}: refit with output='quantile', 'normal' "
            "or 'studentt' for its own, or with conformal_windows=<k> for conformal bands (levels=[80, 90])")


#: What may give a forecast's intervals (``predict(..., intervals=...)``).
INTERVAL_METHODS = ("conformal", "model")


def interval_settings(state: FittedState, levels: Sequence[float] | None, method: str | None,
                      quantiles: Sequence[float] | None = None) -> tuple[tuple[float, ...], str | None]:
    """The interval levels (percent, :func:`~tsrec.conformal.check_interval_levels`) and the
    method that gives their bands: ``method``, else ``"conformal"`` for a calibrated model, else
    ``"model"`` for a probabilistic network. ``ValueError`` naming the fix for a model with neither,
    a level its calibration cannot give, and conformal bands asked for beside ``quantiles``."""
    name = state.settings.model
    if levels is None:
        if method is not None:
            raise ValueError(f"intervals={method!r} says what gives the bands of levels=[...]; pass levels too")
        return (), None
    levels = check_interval_levels(levels)
    probabilistic = state.model.output.probabilistic
    if method is None:
        method = "conformal" if state.calibration is not None else "model" if probabilistic else None
    if method is None:
        raise ValueError(f"{name} was fitted without a conformal calibration and forecasts points only, so it has no "
                         f"intervals: refit with conformal_windows=<k> (k rolling origins at the end of the fit data "
                         f"calibrate the bands; Forecaster('auto') calibrates by default), or with "
                         "output='quantile', 'normal' or 'studentt' for a network's own")
    if method not in INTERVAL_METHODS:
        raise ValueError(f"intervals must be one of {INTERVAL_METHODS}, got {method!r}")
    if method == "conformal":
        if state.calibration is None:
            raise ValueError(f"{name} was fitted without a conformal calibration: refit with conformal_windows=<k>, "
                             "or ask for intervals='model' (a probabilistic network's own)")
        if quantiles is not None:
            raise ValueError("conformal bands are the only quantiles of a forecast: pass levels=[...] or "
                             "quantiles=[...] (a point model's: its conformal bands' ends; a network's: its own), "
                             "or intervals='model' with both")
        for level in levels:
            state.calibration.width(level)  # ValueError for a level the calibration cannot give
    elif not probabilistic:
        raise ValueError(f"{name} forecasts points (output='point'): it has no distribution of its own for "
                         "intervals='model'; use its conformal calibration (conformal_windows=<k>)")
    return levels, method


def outputs(state: FittedState, dataset: WindowDataset, *, batch_size: int | None = None) -> np.ndarray:
    """Scaled outputs for every window of ``dataset``, in order, batched (the last partial batch
    included), on the accelerator the model trains on (``trainer_kwargs``' ``accelerator``,
    default ``"auto"``; :func:`~tsrec.training.predict_batches`, without a Lightning Trainer
    where it adds nothing): point forecasts ``[N, H, C]``, or a probabilistic output's
    parameters ``[N, H, C, P]``.

    Under an initialized process group (e.g. on every rank of a script that fitted with
    ``trainer_kwargs={"strategy": "ddp", ...}``, or started by ``torchrun``) each rank forecasts
    its contiguous share of the windows and every rank gets all of them back, in order
    (:mod:`tsrec.training.sharding`; ``predict`` and ``backtest`` of long data split the series
    among the ranks before this, :func:`tsrec.collective.by_series`): every rank
    gets what one process returns, and every rank must call it."""
    from tsrec.collective import gather
    from tsrec.training.predict import predict_batches, predict_device

    model, training = state.model, state.settings.training
    trainer_kwargs = state.settings.trainer.trainer_kwargs
    shape = (0, state.settings.window.prediction_length, model.config.n_channels)
    empty = np.zeros(shape + ((model.n_params,) if model.output.probabilistic else ()), np.float32)
    if len(dataset) == 0:
        return empty
    size = batch_size or training.batch_size
    device = predict_device(trainer_kwargs)
    if device is not None:
        scaled = predict_batches(model, training, dataset, size, device=device)
    else:  # an accelerator only Lightning knows how to place the model on
        from tsrec.training import ForecastingModule, make_predict_trainer, quiet_lightning
        from tsrec.training.sharding import ShardSampler

        with quiet_lightning():
            loader = torch.utils.data.DataLoader(dataset, batch_size=size, sampler=ShardSampler(len(dataset)),
                                                 collate_fn=dataset.collate)
            scaled = make_predict_trainer(training, trainer_kwargs).predict(ForecastingModule(model, training), loader)
    model.eval()
    return gather(np.concatenate([out.float().cpu().numpy() for out in scaled]) if scaled else empty)


def _prediction_covariates(state: FittedState, panel: Panel, values: CovariateValues,
                           future_covariates: pd.DataFrame | None, *, named: bool | None = None) -> WindowCovariates:
    """The covariates of the prediction windows of ``panel``: its ``values`` (every dynamic
    covariate known over the context) and the future covariates of the horizon, from
    ``future_covariates``. ``named``: warn naming the values far outside their training
    distribution (:func:`~tsrec.fitting.report_far_covariates`), those of the context too (True)
    or the future ones alone (False: the fitted history's, which the fit named); None: no warning."""
    name, config = state.settings.model, state.covariates.config
    horizon = state.settings.window.prediction_length
    if future_covariates is not None and not config.future:
        raise ValueError(f"{name} was fitted without future covariates, so it reads no "
                         "future_covariates; leave them out, or refit with future_covariates=[<columns>]")
    if future_covariates is None and config.future:
        steps = future_index(panel.items[0].index[-1], panel.calendar, horizon)
        raise ValueError(f"{name} was fitted with the future covariates {list(config.future)}: pass "
                         f"predict(future_covariates=<frame>) with their values at the {horizon} forecast steps "
                         f"of every series ({steps[0]} .. {steps[-1]} for {panel.item_label(0)})")
    check_context(panel, values, config, state.resolved.window.context_length)
    if config.future:
        future = read_future(future_covariates, panel, config, horizon, time_col=state.schema.time_col,
                             id_col=state.schema.id_col)
    else:
        future = tuple(np.zeros((horizon, 0)) for _ in panel.items)
    if named is not None:
        report_far_covariates(state, panel, values, "predict", future, context=named, stacklevel=5)
        report_unseen_categories(state, panel, values, "predict", stacklevel=5)
    return state.covariates.encode(panel, values, future)


def steps_read(state: FittedState) -> int | None:
    """The most steps of each series ``state``'s model reads: its fitted ``context_length``; for a
    model that reads whole histories (or an ensemble with such members) every step given, up to the
    user's ``context_length`` and the model's ``max_history`` (None: no cap,
    :func:`~tsrec.fitting.history_cap`)."""
    model = state.model
    if not model.reads_whole_history:
        return state.resolved.window.context_length
    return history_cap(type(model), state.settings.window.context_length)


def context_read(state: FittedState, panel: Panel) -> int:
    """The steps of each series of ``panel`` the windows of ``state``'s model hold: :func:`steps_read`
    of ``panel``'s longest series, and at least the fitted ``context_length`` (a whole-history model
    reads every step there is, not only as many as at ``fit``; an ensemble's other members their own
    context, :class:`~tsrec.models.ensemble.Ensemble`)."""
    fitted, cap = state.resolved.window.context_length, steps_read(state)
    if not state.model.reads_whole_history:
        return fitted
    longest = max(len(item) for item in panel.items)
    return max(fitted, longest if cap is None else min(longest, cap))


def window_dtype(model: ForecastModel) -> type:
    """The type a model's windows store their values in: float64 for a statistical model, which
    fits on the data's own values (float32's rounding moves AutoETS's optimum by up to 1e-3 of
    the forecast), and an ensemble with such members (its networks read float32 copies), float32
    for every network."""
    return np.float64 if model.reads_whole_history else np.float32


def _as_fitted(state: FittedState, panel: Panel, rows: np.ndarray) -> Panel:
    """``panel`` (its series ``state``'s fitted rows ``rows`` ``[N]``) with the zeros before each
    series' first observed step at ``fit`` read as missing, where ``fit`` read a product's zeros
    before its launch so (``leading_zeros="missing"``, :func:`~tsrec.data.launches.zeros_before_fit`):
    a frame that holds them again is forecast as the fit data were."""
    if state.resolved.window.leading_zeros != "missing":
        return panel
    return zeros_before_fit(panel, state.history, rows)


def _without_placeholders(state: FittedState, panel: Panel, rows: np.ndarray) -> Panel:
    """``panel`` with the placeholder runs at the end of its series (-9999 three times, typos of
    1e9: :func:`~tsrec.data.scaling.placeholder_runs`) read as missing, as the training windows read
    them, so that every model forecasts such a series from its last real value (its missing tail);
    named in an :class:`~tsrec.data.scaling.OutlierWarning`. ``panel`` itself where there is none,
    or where the scaler keeps every value (``far_values="keep"``, ``scaling="standard"``). ``rows``
    ``[N]``: the series' scaler rows."""
    if not state.scaler.robust:
        return panel
    lengths = np.diff(panel.offsets)  # [N]
    items, named = list(panel.items), []
    for block in item_blocks(lengths):
        values = np.concatenate([panel.items[i].values for i in block])  # [M, C]
        observed = np.concatenate([panel.items[i].observed for i in block])
        series = np.repeat(np.arange(len(block)), lengths[block])  # [M]
        found = state.scaler.placeholders(values, observed, rows[block][series], series)  # [M, C]
        if not found.any():
            continue
        for i, mask in zip(block, np.split(found, np.cumsum(lengths[block])[:-1])):
            if not mask.any():
                continue
            item = items[i]
            items[i] = dataclasses.replace(item, observed=item.observed & ~mask)
            for c in np.flatnonzero(mask.any(axis=0)):
                steps = np.flatnonzero(mask[:, c])
                shown = np.unique(item.values[steps, c])
                named.append(f"{panel.channel_label(i, int(c))}: {len(steps)} values from {item.index[steps[0]]} "
                             f"({', '.join(f'{v:.6g}' for v in shown[:3])}{' ...' if len(shown) > 3 else ''})")
    if not named:
        return panel
    warnings.warn(f"{len(named)} series end in a run of placeholder values far outside their training distribution "
                  f"(one repeated value where the series never repeats, a code such as -9999, or orders of magnitude "
                  f"off: not a level shift): {'; '.join(named[:5])}{' ...' if len(named) > 5 else ''}. They are read "
                  "as missing, so those series are forecast from their last real values; set them to NaN (or drop "
                  "those rows) to say so, or pass far_values='keep' at fit to read them as values",
                  OutlierWarning, stacklevel=4)
    return dataclasses.replace(panel, items=tuple(items))


def _report_unfollowed_shifts(state: FittedState, recent: Panel, rows: np.ndarray, result: ForecastResult) -> None:
    """Warn (:class:`~tsrec.data.scaling.OutlierWarning`) naming the series whose context
    ``recent`` ends in a level shift (:func:`~tsrec.data.scaling.level_shifts`) while their forecast
    in ``result`` (its median over the horizon) lies more than :data:`UNFOLLOWED_SHIFT` of the
    shift away from the new level, with
    the fix: the default ``far_values`` for a network whose instance normalisation reads such a
    window at its new level (``far_values="keep"`` reads it as one level), else the rows before
    the shift dropped."""
    said = []
    for i, item in enumerate(recent.items):
        items, series = np.full(len(item), rows[i]), np.zeros(len(item), dtype=np.int64)
        _, shifted = state.scaler.far_parts(item.values, item.observed, items, series)  # [T, C]
        for c in np.flatnonzero(shifted.any(axis=0)):
            before = item.observed[:, c] & ~shifted[:, c]
            if not before.any() or not np.isfinite(result.mean[i, :, c]).all():
                continue
            new, old = np.median(item.values[shifted[:, c], c]), np.median(item.values[before, c])
            forecast = float(np.median(result.mean[i, :, c]))
            if abs(forecast - new) > UNFOLLOWED_SHIFT * abs(new - old):
                start = item.index[np.flatnonzero(shifted[:, c])[0]]
                said.append(f"{recent.channel_label(i, int(c))} (from {start}: median {new:.6g}, before it {old:.6g}; "
                            f"its forecast's median {forecast:.6g}, {abs(forecast - new) / abs(new - old):.0%} of the "
                            "shift away from the new level)")
    if not said:
        return
    relevels = any(isinstance(m, RevIN) for m in state.model.modules())
    fix = ("refit with far_values='missing': the network's instance normalisation then reads a window that ends in "
           "a level shift at its new level (far_values='keep' reads the window as one level)"
           if relevels and state.resolved.window.far_values == "keep" else
           "if the shift is real, drop the rows before it, so that the series starts at its new level")
    warnings.warn(f"{len(said)} series end in a level shift that their forecast does not follow: {'; '.join(said[:5])}"
                  f"{' ...' if len(said) > 5 else ''}; {fix}", OutlierWarning, stacklevel=4)


#: How far from a level shift's new level (as a share of the shift) a forecast must lie for
#: ``predict`` to say that it does not follow the shift.
UNFOLLOWED_SHIFT = 0.25


def _report_tails(state: FittedState, panel: Panel) -> None:
    """Name the series and columns of ``panel`` whose last values are missing (but not all of
    them) and what the model does about it (its ``missing_tail`` note, or its members'; a network's
    is :data:`~tsrec.models.base.MISSING_TAIL_AS_MEAN` where its tails are not filled, as with
    covariates or in an ensemble), in one warning; nothing for a model without such a note."""
    fills = fills_tails(state.model.trainable, state.covariates.config.columns)
    notes = {m.missing_tail if fills or not m.trainable else MISSING_TAIL_AS_MEAN
             for m in state.model.modules() if getattr(m, "missing_tail", None)}
    if not notes:
        return
    gaps = []
    for position, series in enumerate(panel.items):
        seen = series.observed  # [T, C]
        gap = np.argmax(seen[::-1], axis=0)  # [C] unobserved steps after the last observed one
        for c in np.flatnonzero(seen.any(axis=0) & (gap > 0)):
            last = series.index[-1 - gap[c]]
            gaps.append(f"{panel.channel_label(position, int(c))} ({int(gap[c])} steps after {last})")
    if gaps:
        warnings.warn(f"{len(gaps)} series end with missing values: {', '.join(gaps[:5])}"
                      f"{' ...' if len(gaps) > 5 else ''}; {'; '.join(sorted(notes))}", UserWarning, stacklevel=4)


def _report_cut_short(state: FittedState, panel: Panel, rows: np.ndarray) -> None:
    """Warn naming the series of ``panel`` (the fitted rows ``rows`` ``[I]``) that hold fewer steps
    than ``state`` kept of them at ``fit`` (its last ``context_length`` steps of each,
    :attr:`FittedState.history <tsrec.fitted.FittedState.history>`; each counted from its first
    observed value, so that NaN rows before a launch count alike given or not) and start after the
    first of those: a frame of recent rows only, whose forecasts read those steps alone (a network
    pads its window, a statistical member filters the few steps given) and differ from the
    forecasts of the whole history. A series cut at an earlier end, from the start the fit read
    (forecasts from an earlier origin), holds all there was then, and is not named."""
    kept = (np.diff(state.history.offsets) - observed_starts(state.history))[rows]  # [I]
    given = np.diff(panel.offsets) - observed_starts(panel)  # [I]
    short = [i for i in np.flatnonzero(given < kept)
             if given[i] == 0 or panel.items[i].first_time > state.history.items[rows[i]].first_time]
    if not short:
        return
    short = np.asarray(short)
    warnings.warn(f"predict: {len(short)} series hold fewer steps than the model read of them at fit "
                  f"({panel.items_with_steps(short, given[short])}; it read up to {int(kept[short].max())} of each): "
                  "their forecasts read these steps alone and differ from the forecasts of their whole history; "
                  "pass each series' whole history, or call predict() without a frame to forecast from the end of "
                  "the fit data", UserWarning, stacklevel=4)


def _report_moved_constants(state: FittedState, panel: Panel, rows: np.ndarray) -> None:
    """Warn naming the series of ``panel`` (fitted rows ``rows`` ``[I]``) whose conformal band has
    width 0 (constant at ``fit`` and forecast exactly there: a calibration scale of 0,
    :func:`~tsrec.conformal.error_scale`) and whose values given here are not all one value: the
    band says nothing of how they move now."""
    flat = state.calibration.scale[rows] == 0  # [I, C]
    moved = []
    for i, c in np.argwhere(flat):
        item = panel.items[i]
        seen = item.values[item.observed[:, c], c]  # [n] its observed values
        if seen.size and seen.max() > seen.min() and (not moved or moved[-1] != i):
            moved.append(int(i))
    if moved:
        named = ", ".join(panel.item_label(int(i)) for i in moved[:5]) + (" ..." if len(moved) > 5 else "")
        warnings.warn(f"predict: {len(moved)} series were constant at fit and have moved since ({named}): their "
                      "conformal bands have width 0, as their calibration saw no error; fit again on the data that "
                      "holds their changes for bands that do", UserWarning, stacklevel=4)


def _report_blind(state: FittedState, panel: Panel, blind: np.ndarray, context: int) -> None:
    """Name the series and columns ``blind`` ``[N, C]`` marks (no observed value in the last
    ``context`` steps of ``panel`` they are forecast from; their forecast is NaN), with where each
    was last observed, and the fix: a warning, or with ``missing_context="raise"`` an error."""
    if not blind.any():
        return
    names, reach = [], 0
    for n, c in zip(*np.nonzero(blind)):
        series = panel.items[int(n)]
        seen = np.flatnonzero(series.observed[:, int(c)])
        label = panel.channel_label(int(n), int(c))
        if len(seen):
            gap = len(series) - 1 - int(seen[-1])
            reach = max(reach, gap + 1)
            label += f" (last observed at {series.index[seen[-1]]}, {gap} steps before its end)"
        else:
            label += f" (no observed value in the {len(series)} steps given)"
        names.append(label)
    problem = (f"{len(names)} series have no observed value in their last {context} steps, so they get no forecast: "
               f"{', '.join(names[:5])}{' ...' if len(names) > 5 else ''}")
    longer = f"of at least {reach}" if reach else "longer than their missing tails"
    fix = (f"refit with a context_length {longer}, which forecasts them from their last observations (the missing "
           "steps included), or drop their missing rows to forecast from their last observation")
    if state.settings.window.missing_context == "raise":
        raise ValueError(f"{problem} (missing_context='raise'); {fix}")
    warnings.warn(f"{problem}; their forecast is NaN (missing_context='raise' makes this an error); {fix}",
                  UserWarning, stacklevel=4)


def forecast_origins(state: FittedState, panel: Panel, values: CovariateValues, first: np.ndarray, count: np.ndarray,
                     stride: int, *, levels: Sequence[float] = (), intervals: Sequence[float] = (),
                     method: str | None = None, batch_size: int | None = None) -> ForecastResult:
    """The forecasts of the windows ``(item, first[item] + stride * k)``, ``k < count[item]``, of
    ``panel`` (``values``: its covariates; series of ``state``'s fitted ids, a backtest's new ones
    appended by :meth:`~tsrec.fitted.FittedState.with_new_series` first), each from its own
    context, in :func:`window_origins`' order: a backtest's windows (:func:`tsrec.evaluation.backtest`
    scores them; conformal calibration, :mod:`tsrec.calibrating`, takes their residuals).
    ``levels``, ``intervals``, ``method``: as :func:`forecast`'s."""
    horizon = state.settings.window.prediction_length
    rows = state.history.check_compatible(panel)  # [I]
    panel = far_as_missing(_as_fitted(state, panel, rows), state.scaler, rows)  # each context as predict reads one
    ranges = list(zip(first.tolist(), (first + stride * count).tolist()))
    dataset = WindowDataset.from_panel(panel, state.scaler, context_read(state, panel), horizon, ranges, stride=stride,
                                       scaler_rows=rows, covariates=state.covariates.encode(panel, values),
                                       padded=True, dtype=window_dtype(state.model))
    items, origins = window_origins(first, count, stride)  # [W] each
    if not (intervals and method == "conformal" and state.calibration.update == "rolling"):
        return forecast(state, dataset, rows[items], items, origins, levels=levels, intervals=intervals,
                        method=method, batch_size=batch_size)
    # bands that learn: each window's from the steps observed before its origin of the windows forecast after the fit
    result = forecast(state, dataset, rows[items], items, origins, levels=levels, batch_size=batch_size)
    stamps = _stamps(panel, items, origins)  # [W] each window's origin
    evidence = _evidence(state, panel, rows, result, stamps)
    return with_intervals(state, result, rows[items], intervals, method, evidence=evidence, cutoffs=stamps)


def _stamps(panel: Panel, items: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """int64 ns: the timestamps of the steps ``steps`` of ``panel``'s items ``items`` (arrays of one
    shape, e.g. ``[W]``, or broadcasting to it)."""
    return panel.stamps.asi8[panel.offsets[:-1][items] + steps]


def _fitted_ends(state: FittedState) -> np.ndarray:
    """``[N]`` int64 ns: the last fitted timestamp of every fitted series."""
    history = state.history
    return history.stamps.asi8[history.offsets[1:] - 1]


def _evidence(state: FittedState, panel: Panel, rows: np.ndarray, result: ForecastResult,
              stamps: np.ndarray) -> Evidence:
    """The :class:`~tsrec.conformal_update.Evidence` of ``result``'s windows of ``panel`` (whose items
    are the fitted series ``rows`` ``[I]``) forecast after the fit (their origins' timestamps
    ``stamps`` ``[W]`` past their series' fitted end)."""
    horizon = state.settings.window.prediction_length
    truth, observed = window_values(panel, result.items, result.origins, horizon)  # [W, H, C] each
    steps = _stamps(panel, result.items[:, None], result.origins[:, None] + np.arange(horizon))  # [W, H]
    eligible = stamps > _fitted_ends(state)[rows[result.items]]
    return Evidence.of(state.calibration, result.mean, truth, observed, rows[result.items], steps, eligible)


def _evidence_after_fit(state: FittedState, panel: Panel, values: CovariateValues, rows: np.ndarray,
                        levels: Sequence[float], batch_size: int | None) -> Evidence | None:
    """What ``predict`` learns from: the windows ``H`` steps apart that end at each series' end of
    ``panel`` and start after its fitted end, as many as fill the rolling window (pooled over the
    series; about the calibration's independent windows per series), or None where no series of
    ``panel`` holds a whole window after its fitted end."""
    calibration, horizon = state.calibration, state.settings.window.prediction_length
    lengths = np.diff(panel.offsets)  # [I]
    fitted = _fitted_ends(state)[rows]  # [I]
    after = np.array([np.searchsorted(item.index.asi8, end, side="right") for item, end in
                      zip(panel.items, fitted.tolist())], dtype=np.int64)  # [I] the first step past the fit
    size = max(calibration.rolling, max(math.ceil(level / (100.0 - level) - 1e-9) for level in levels))
    channels = calibration.scale.shape[1]
    wanted = math.ceil(size / (horizon * channels * len(panel.items))) + 1
    count = np.minimum((lengths - after) // horizon, wanted).clip(min=0)  # [I]
    if not count.any():
        return None
    first = lengths - horizon * count  # [I]
    result = forecast_origins(state, panel, values, first, count, horizon, batch_size=batch_size)
    return _evidence(state, panel, rows, result, _stamps(panel, result.items, result.origins))


def window_origins(first: np.ndarray, count: np.ndarray, stride: int) -> tuple[np.ndarray, np.ndarray]:
    """The windows of items with ``count`` ``[I]`` origins from ``first`` ``[I]``, ``stride`` apart, in
    :class:`WindowDataset`'s order (items in order, each item's origins rising): ``items``, ``origin`` ``[W]``."""
    items = np.repeat(np.arange(len(count)), count)  # [W]
    rank = np.arange(len(items)) - np.repeat(np.cumsum(count) - count, count)  # [W] the window's place in its item
    return items, first[items] + stride * rank
