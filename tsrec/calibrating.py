"""Conformal calibration at ``fit``: a model fitted before the calibration origins forecasts them,
and their residuals become the :class:`~tsrec.conformal.Calibration` of the final model.

::

    calibrated(df, read, settings, state, fit_before)     any model (ConformalConfig.windows set)
        origins: the last W + H - 1 steps of each series (conformal.origins_before_end)
        before = fit_before(rows of df before the first origin)      (one more fit)
        -> attach(state, before, read, origins)
    attach(state, before, read, origins)
        forecast_origins(before, ...) -> residuals -> conformal.calibrate -> state with its calibration

``auto`` calibrates its ensemble from its validation backtest instead (:func:`tsrec.auto.fit_auto`),
with the same scales (:func:`fitted_scales`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import numpy as np

from tsrec.conformal import Calibration, calibrate, observed_ends, origins_before_end, series_scale
from tsrec.data import Panel, source
from tsrec.data.source import Read, Source, history_before
from tsrec.fitted import FittedState
from tsrec.forecasting import forecast_origins
from tsrec.settings import ForecasterSettings

__all__ = ["attach", "calibrated", "calibration_origins", "fitted_scales", "shortened"]


def calibration_origins(read: Read, settings: ForecasterSettings) -> tuple[np.ndarray, np.ndarray, int]:
    """The calibration origins of ``read``'s series (:func:`~tsrec.conformal.origins_before_end`):
    the settings' ``conformal_windows`` (set) per series; ``ValueError`` naming the series when one
    is too short to hold them after a first step."""
    panel, horizon, windows = read.panel, settings.window.prediction_length, settings.conformal.windows
    ends = observed_ends(panel)
    first, count, stride = origins_before_end(ends, horizon, windows)
    if (short := np.flatnonzero(first < 2)).size:
        i = short[0]
        raise ValueError(f"{panel.item_label(i)} is too short to calibrate intervals on {int(count[i])} windows of "
                         f"{horizon} steps ({int(ends[i])} observed steps): pass conformal_windows=<fewer> (at least "
                         "2), or conformal_windows=0 to fit without intervals")
    return first, count, stride


def shortened(df: Source, read: Read, first: np.ndarray, gaps: str) -> tuple[object, Read]:
    """The rows of ``df`` before each series' grid position ``first`` ``[I]``, and their read
    (``gaps``: the settings' ``WindowConfig.gaps``)."""
    panel, schema = read.panel, read.schema
    frame = source.in_memory(df, schema.id_col)
    cut = [item.index[int(p)] for item, p in zip(panel.items, first)]
    part = history_before(frame, schema, panel, cut)
    return part, source.read(part, schema, categorical=read.categorical, freq=panel.freq, gaps=gaps)


def calibrated(df: Source, read: Read, settings: ForecasterSettings, state: FittedState,
               fit_before: Callable[[object, Read, ForecasterSettings], FittedState]) -> FittedState:
    """``state`` (fitted on ``df``, read as ``read``) calibrated on ``settings.conformal.windows``
    origins per series, when set (else ``state`` as it is): ``fit_before(frame, read, settings)``
    fits the same settings on the rows before the first origin."""
    if not settings.conformal.windows:
        return state
    started = time.process_time()
    first, count, stride = calibration_origins(read, settings)
    frame, before_read = shortened(df, read, first, settings.window.gaps)
    # no calibration of its own, and no output_dir: its checkpoints must not replace the fitted run's
    quiet = dataclasses.replace(settings, conformal=dataclasses.replace(settings.conformal, windows=0),
                                trainer=dataclasses.replace(settings.trainer, output_dir=None))
    before = fit_before(frame, before_read, quiet)
    return attach(state, before, read, first, count, stride, settings, started)


def attach(state: FittedState, before: FittedState, read: Read, first: np.ndarray, count: np.ndarray, stride: int,
           settings: ForecasterSettings, started: float) -> FittedState:
    """``state`` with the calibration of the windows ``(item, first[item] + stride * k)`` of
    ``read`` forecast by ``before`` (fitted on each series up to its first origin); ``started``:
    the process time the calibration began at (its cost, ``Calibration.cpu_seconds``)."""
    panel = read.panel
    result = forecast_origins(before, panel, read.covariates, first, count, stride)
    horizon = settings.window.prediction_length
    steps = result.origins[:, None] + np.arange(horizon)  # [W, H]
    truth = np.stack([panel.items[i].values[s] for i, s in zip(result.items, steps)])  # [W, H, C]
    seen = np.stack([panel.items[i].observed[s] for i, s in zip(result.items, steps)])  # [W, H, C]
    rows, fitted_scale = fitted_scales(state, panel)
    calibration: Calibration = calibrate(result.mean, truth, seen, fitted_scale[rows[result.items]], fitted_scale,
                                         int(count.max()), stride, settings.conformal, time.process_time() - started)
    return dataclasses.replace(state, calibration=calibration)


def fitted_scales(state: FittedState, panel: Panel) -> tuple[np.ndarray, np.ndarray]:
    """``[I]`` the row of each series of ``panel`` among ``state``'s fitted series, and ``[N, C]``
    every fitted series' scale (:func:`~tsrec.conformal.series_scale` of ``panel``; 1 for a
    fitted series ``panel`` lacks)."""
    rows = state.history.check_compatible(panel)  # [I]
    scale = np.ones_like(np.asarray(state.scaler.scale, dtype=np.float64))  # [N, C]
    scale[rows] = series_scale(panel, state.scaler, rows)
    return rows, scale
