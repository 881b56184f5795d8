"""Conformal calibration at ``fit``: forecasts of calibration windows made before them, against
the truth, become the :class:`~tsrec.conformal.Calibration` of the final model. One path for every
model::

    calibrated(read, settings, fit)                 any model but auto (ConformalConfig.windows set)
        origins: the last W + H - 1 steps of each series (conformal.origins_before_end)
        before = fit_state(read.before(first origins))           (one more fit, on a slice)
        forecast_origins(before, ...) -> calibration_of(...)
    calibration_of(state, panel, items, origins, mean, ...)      auto too: its ensemble's forecasts
        truth and scales of the windows -> conformal.calibrate -> Calibration
"""

from __future__ import annotations

import dataclasses
import time
import warnings

import numpy as np

from tsrec.config import ConformalConfig
from tsrec.conformal import Calibration, calibrate, observed_ends, observed_starts, origins_before_end, series_scale
from tsrec.conformal_update import window_values
from tsrec.data import Panel, SeriesTooShort
from tsrec.data.source import Read
from tsrec.data.windows import far_as_missing
from tsrec.fitted import FittedState
from tsrec.fitting import Fit, fit_state
from tsrec.forecasting import forecast_origins
from tsrec.settings import ForecasterSettings

__all__ = ["calibrated", "calibration_of", "calibration_origins", "fitted_scales", "window_values"]


def calibration_origins(read: Read, settings: ForecasterSettings) -> tuple[np.ndarray, np.ndarray, int]:
    """The calibration origins of ``read``'s series (:func:`~tsrec.conformal.origins_before_end`):
    the settings' ``conformal_windows`` (set) per series, on which the model is fitted on each
    series' steps before them, at least ``prediction_length + 1`` from its first observed one (as
    auto validates). A series with fewer (a new product) has none: it is fitted on all its steps,
    its bands come from the others' scaled scores, and a warning names it; ``ValueError`` where
    every series is that short."""
    panel, horizon, windows = read.panel, settings.window.prediction_length, settings.conformal.windows
    ends = observed_ends(panel)
    first, count, stride = origins_before_end(ends, horizon, windows)
    starts = observed_starts(panel)  # [I]
    before, spans = first - starts, ends - starts  # [I] steps before the windows, and in all, from the first observed
    short = before < horizon + 1  # [I]
    if short.all():
        i = int(np.argmax(spans))
        raise SeriesTooShort(
            f"conformal_windows={windows} calibrates the intervals on each series' last {windows + horizon - 1} "
            f"observed steps, fitting the model on the steps before them, at least prediction_length + 1 = "
            f"{horizon + 1}, and those are too few: {panel.item_label(i)} has {max(int(before[i]), 0)} time steps "
            f"before them ({int(spans[i])} observed), the most of any series. Pass conformal_windows=<fewer> (at most "
            f"{max(int(spans[i]) - 2 * horizon, 0)} here), or conformal_windows=0 to fit without intervals")
    if short.any():
        named = panel.items_with_steps(np.flatnonzero(short), spans[short])
        warnings.warn(f"conformal_windows={windows}: {int(short.sum())} series hold fewer than {windows + 2 * horizon} "
                      f"steps ({named}), too few for the calibration windows and prediction_length + 1 steps "
                      f"before them: they are not calibrated on, and their bands come from the scaled scores of the "
                      f"other {int((~short).sum())} series", UserWarning, stacklevel=4)
        first, count = np.where(short, ends, first), np.where(short, 0, count)
    return first, count, stride


def calibrated(read: Read, settings: ForecasterSettings, fit: Fit) -> Fit:
    """``fit`` (of ``settings`` on ``read``) calibrated on ``settings.conformal.windows`` origins per
    series, when set (else ``fit`` as it is): the same settings fitted on each series' history
    before its first origin (:meth:`Read.before <tsrec.data.source.Read.before>`) forecast them."""
    if not settings.conformal.windows:
        return fit
    started = time.process_time()
    first, count, stride = calibration_origins(read, settings)
    # no calibration of its own, and no output_dir: its checkpoints must not replace the fitted run's
    quiet = dataclasses.replace(settings, conformal=dataclasses.replace(settings.conformal, windows=0),
                                window=dataclasses.replace(  # far values read as the fit read them
                                    settings.window, far_values=fit.state.resolved.window.far_values),
                                trainer=dataclasses.replace(settings.trainer, output_dir=None))
    try:
        before = fit_state(read.before(first), quiet).state
    except SeriesTooShort as error:  # a windowed model: no series holds a training window before them
        raise SeriesTooShort(
            f"conformal_windows={settings.conformal.windows} calibrates the intervals on each series' last "
            f"{settings.conformal.windows + settings.window.prediction_length - 1} observed steps, fitting the model "
            f"on the steps before them, and those are too few: {error}. Pass conformal_windows=<fewer>, or "
            "conformal_windows=0 to fit without intervals") from error
    result = forecast_origins(before, read.panel, read.covariates, first, count, stride)
    calibration = calibration_of(fit.state, read.panel, result.items, result.origins, result.mean, int(count.max()),
                                 stride, settings.conformal.resolved_for(auto=False), time.process_time() - started)
    return dataclasses.replace(fit, state=dataclasses.replace(fit.state, calibration=calibration))


def calibration_of(state: FittedState, panel: Panel, items: np.ndarray, origins: np.ndarray, mean: np.ndarray,
                   windows: int, stride: int, config: ConformalConfig, cpu_seconds: float) -> Calibration:
    """The calibration of ``state`` (fitted on ``panel``) from forecasts ``mean`` ``[W, H, C]`` of the
    windows ``(items[k], origins[k])`` ``[W]`` of ``panel``, made before them (``windows`` origins
    per series, ``stride`` apart), against their truth (:func:`~tsrec.conformal.calibrate`), each
    series' residuals divided by its scale (:func:`fitted_scales`); ``cpu_seconds``: what it cost.
    The values ``state``'s scaler reads as missing (:func:`~tsrec.data.windows.far_as_missing`: a
    typo of 1e9) are neither truth nor in a scale: one would widen every band."""
    panel = far_as_missing(panel, state.scaler, state.history.check_compatible(panel))
    rows, fitted_scale = fitted_scales(state, panel)
    truth, seen = window_values(panel, items, origins, mean.shape[1])  # [W, H, C] each
    return calibrate(mean, truth, seen, rows[items], fitted_scale, windows, stride, config, cpu_seconds)


def fitted_scales(state: FittedState, panel: Panel) -> tuple[np.ndarray, np.ndarray]:
    """``[I]`` the row of each series of ``panel`` among ``state``'s fitted series, and ``[N, C]``
    every fitted series' scale (:func:`~tsrec.conformal.series_scale` of ``panel``; 1 for a
    fitted series ``panel`` lacks)."""
    rows = state.history.check_compatible(panel)  # [I]
    scale = np.ones_like(np.asarray(state.scaler.scale, dtype=np.float64))  # [N, C]
    scale[rows] = series_scale(panel, state.scaler, rows)
    return rows, scale
