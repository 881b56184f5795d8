"""What ``fit`` learns, as one immutable value, and the forecasts it makes.

- :class:`FittedState`: the settings as resolved, the fitted scaler and covariate encoding, the data
  facts, the last ``context_length`` steps of every fitted series, the training summary and the
  network's weights. ``Forecaster.fit`` builds one; :mod:`tsrec.saved_format` writes and reads it as
  is (a folder of JSON and tensors: :func:`~tsrec.saved_format.save_state`,
  :func:`~tsrec.saved_format.load_state`).
- :class:`ForecastResult`: the forecasts of a batch of windows in the data's units and in the
  scaler's: point forecasts, quantiles and sample paths. :func:`unscale` is the one place where a
  network's scaled outputs are turned into the data's units; ``predict``, ``backtest``, the CLI and
  the GluonTS predictor read its results.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import torch

from tsrec.config import DataFacts
from tsrec.conformal import Calibration, series_scale
from tsrec.data import CovariateEncoder, CovariateValues, Panel, StandardScaler, forecast_frame
from tsrec.data.launches import launched
from tsrec.data.schema import Schema
from tsrec.data.windows import far_as_missing
from tsrec.models import ForecastModel
from tsrec.settings import ForecasterSettings

__all__ = ["FittedState", "ForecastResult", "TrainingSummary", "unscale"]


@dataclass(frozen=True)
class TrainingSummary:
    """What one ``fit`` did.

    Attributes:
        history: one row per epoch of the run that validation watched (the only run without
            validation): ``epoch`` (1-based), ``train_loss``, ``val_loss`` (scaled units, means over
            the epoch's windows; NaN in an epoch without a validation check), ``learning_rate`` of the backbone,
            ``seconds``. Empty for models that need no training.
        best_epoch: the epoch of the validation check whose weights were kept (lowest validation
            loss); None without validation (the last epoch's weights are kept).
        fit_seconds: wall time of the whole ``fit`` after the data were prepared.
        best_step: optimizer steps done at that check (None without validation).
        budget: the run's budget: ``max_steps`` and ``max_epochs`` (None where unbounded),
            ``val_check_steps`` (None: once per epoch), ``steps_per_epoch``, ``train_windows``,
            ``steps_run``, ``time_limit`` and ``stopped_by`` (``"budget"``, ``"early stopping"`` or
            ``"time limit"``). Empty for models that need no training.
        refit: the refit on all the history (``refit_full``): ``windows``, ``steps``,
            ``epochs``, ``seconds`` and the last epoch's ``train_loss``; None when there was none,
            and ``{"skipped": reason}`` when it was skipped.
    """

    history: pd.DataFrame
    best_epoch: int | None
    fit_seconds: float
    best_step: int | None = None
    budget: dict[str, Any] = dataclasses.field(default_factory=dict)
    refit: dict[str, Any] | None = None

    COLUMNS: ClassVar[tuple[str, ...]] = ("epoch", "train_loss", "val_loss", "learning_rate", "seconds")

    @property
    def epochs_run(self) -> int:
        return len(self.history)

    def to_dict(self) -> dict[str, Any]:
        return {"history": self.history.to_dict(orient="list"), "best_epoch": self.best_epoch,
                "fit_seconds": self.fit_seconds, "best_step": self.best_step, "budget": dict(self.budget),
                "refit": self.refit}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainingSummary:
        return cls(pd.DataFrame(data["history"], columns=list(cls.COLUMNS)), data["best_epoch"], data["fit_seconds"],
                   data.get("best_step"), dict(data.get("budget") or {}), data.get("refit"))

    def __str__(self) -> str:
        steps = self.budget.get("steps_run")
        text = f"{self.epochs_run} epochs" + ("" if steps is None else f" ({steps} steps)")
        text += f" in {self.fit_seconds:.1f} s"
        if self.best_epoch is not None:
            text += f", best epoch {self.best_epoch}"
        if self.budget.get("stopped_by"):
            text += f", stopped by {self.budget['stopped_by']}"
        if self.refit and "skipped" not in self.refit:
            text += f"; refit on all the history for {self.refit['steps']} steps"
        return text



@dataclass(frozen=True)
class FittedState:
    """Everything ``fit`` learned; never changed after it is built (a new ``fit`` builds a new one).

    Attributes:
        settings: the settings as given to the Forecaster, its trainer settings (``trainer_kwargs``'
            JSON values, ``output_dir``) included.
        resolved: the settings as completed from the data (context length, network sizes, ...).
        model: the trained network, in eval mode.
        history: the last ``context_length`` steps of every fitted series (what ``predict()``
            forecasts from without a frame), on its grid at ``history.freq``.
        scaler: per series and channel ``loc``/``scale`` and fences ``low``/``high`` ``[N, C]`` fitted on the
            training part.
        covariates: the fitted covariate encoding.
        covariate_history: the covariates over ``history``.
        facts: what the resolver knew of the data.
        summary: what the training did.
        schema: the roles of the fitted frame's columns (read again by ``predict`` and ``backtest``).
        leaderboard: ``Forecaster("auto")``'s candidates and weights (None otherwise).
        calibration: the conformal calibration of ``predict(levels=...)``'s intervals
            (:mod:`tsrec.conformal`; None when the model was fitted without one).
    """

    settings: ForecasterSettings
    resolved: ForecasterSettings
    model: ForecastModel
    history: Panel
    scaler: StandardScaler
    covariates: CovariateEncoder
    covariate_history: CovariateValues
    facts: DataFacts
    summary: TrainingSummary
    schema: Schema
    leaderboard: pd.DataFrame | None = None
    calibration: Calibration | None = None

    def with_new_series(self, panel: Panel, values: CovariateValues, ends: np.ndarray | None = None) -> FittedState:
        """This state with the series of ``panel`` that ``fit`` never saw (a new product, a new
        meter; ``values``: ``panel``'s covariates) appended after the fitted ones, for one forecast;
        this state itself where there are none. Each new series is known by its history given, or
        by its first ``ends[i]`` steps (``[I]``, at least 1: a backtest's steps before each series'
        first origin): there it gets a scaler row, fitted with the fit's options (robust fences, the
        floor of a series never negative; a product launched later, its zeros before the launch read
        as missing: ``leading_zeros``, :func:`~tsrec.data.launches.launched`, so that the forecast
        reads them so too), and, in a calibration of scaled scores, its scale
        (:func:`~tsrec.conformal.series_scale`, as at ``fit``), and that is its fitted history.
        Nothing else changes: the networks, the ridge and the trees read a new series' windows as
        any other's, the statistical models fit it on the history a window gives (they hold no
        parameters of it), an ensemble keeps its weights and conformal bands their pooled scores;
        as neuralforecast, AutoGluon and statsforecast forecast series new at predict."""
        if (panel.layout, self.history.layout) != ("long", "long"):  # a wide frame is one series, "0"
            return self  # another layout than the fitted one: Panel.check_compatible names it
        known = set(self.history.item_ids)
        new = np.array([i for i, item_id in enumerate(panel.item_ids) if item_id not in known], dtype=np.int64)
        if not new.size:
            return self
        part = dataclasses.replace(panel, items=tuple(panel.items[i] for i in new))
        given = CovariateValues(tuple(values.dynamic[i] for i in new), values.static_real[new], values.static_cat[new])
        if ends is not None:
            part, given = part.head(np.asarray(ends)[new]), given.head(np.asarray(ends)[new])
        window = self.resolved.window
        part = launched(part, window.prediction_length, window.leading_zeros)[0]  # as fit reads a launch
        fitted = len(self.history.items)
        own = StandardScaler.fit([s.values for s in part.items], [s.observed for s in part.items],
                                 robust=self.scaler.robust, nonnegative=window.nonnegative)
        scaler = self.scaler.appended(own)
        calibration = self.calibration
        if calibration is not None:
            rows = np.arange(fitted, fitted + new.size)  # [M] the new series' scaler rows
            scale = series_scale(far_as_missing(part, scaler, rows), scaler, rows) if calibration.scores == "scaled" \
                else np.ones((new.size, calibration.scale.shape[1]))  # [M, C]
            calibration = dataclasses.replace(calibration, scale=np.concatenate([calibration.scale, scale]))
        old = self.covariate_history
        covariate_history = CovariateValues(old.dynamic + given.dynamic,
                                            np.concatenate([old.static_real, given.static_real]),
                                            np.concatenate([old.static_cat, given.static_cat]))
        history = dataclasses.replace(self.history, items=self.history.items + part.items)
        return dataclasses.replace(self, history=history, scaler=scaler, covariate_history=covariate_history,
                                   calibration=calibration)


@dataclass(frozen=True)
class ForecastResult:
    """Forecasts of ``N`` windows (``H`` steps, ``C`` channels), in the data's units and in the
    fitted scaler's. Rows whose context held no observed value are NaN (:attr:`blind`).

    Attributes:
        items: ``[N]`` int64, the position of each window's series in the panel it was read from.
        origins: ``[N]`` int64, the grid position of each window's first forecast step.
        mean: ``[N, H, C]`` float64, point forecasts (a distribution's mean).
        scaled: ``[N, H, C]``, the same in the scaler's units.
        levels: the quantile levels of ``quantiles`` (empty without).
        quantiles: ``[N, H, C, Q]`` float64 at ``levels``, never crossing (None without).
        scaled_quantiles: the same in the scaler's units (None without).
        samples: ``[S, N, H, C]`` float64 sample paths (None without).
        intervals: the interval levels (percent) whose bands are among ``quantiles`` (empty without).
        interval_method: what gave those bands: ``"conformal"`` (the model's calibration,
            :mod:`tsrec.conformal`) or ``"model"`` (a probabilistic network's own distribution or
            quantiles); None without intervals.
        floored: the point forecasts raised to their series' floor (a series never negative in
            its training data is never forecast below 0: ``WindowConfig.nonnegative``).
    """

    items: np.ndarray
    origins: np.ndarray
    mean: np.ndarray
    scaled: np.ndarray
    levels: tuple[float, ...] = ()
    quantiles: np.ndarray | None = None
    scaled_quantiles: np.ndarray | None = None
    samples: np.ndarray | None = None
    intervals: tuple[float, ...] = ()
    interval_method: str | None = None
    floored: int = 0

    def at_quantiles(self, asked: tuple[float, ...]) -> ForecastResult:
        """The forecasts with the quantile levels ``asked`` (sorted) alone: each the end of a band of
        :attr:`levels`, and 0.5 the point forecast (conformal bands are symmetric about it)."""
        near = [int(np.abs(np.asarray(self.levels) - q).argmin()) if q != 0.5 else -1 for q in asked]

        def pick(bands: np.ndarray | None, mean: np.ndarray) -> np.ndarray:  # [N, H, C, len(asked)]
            return np.stack([mean if k < 0 else bands[..., k] for k in near], axis=-1)

        return dataclasses.replace(self, levels=asked, quantiles=pick(self.quantiles, self.mean),
                                   scaled_quantiles=pick(self.scaled_quantiles, self.scaled))

    @property
    def blind(self) -> np.ndarray:
        """``[N, C]`` bool: the windows and channels that got no forecast (no observed value in
        their context)."""
        return np.isnan(self.scaled[:, 0])

    def to_frame(self, panel: Panel) -> pd.DataFrame:
        """A long frame with ``item_id``, ``timestamp``, ``mean``, then one column per quantile
        level (GluonTS's ``QuantileForecast`` keys: ``"0.1"``, ...) and per sample path
        (``sample_0``, ...); rows ordered by window, channel, step (:func:`~tsrec.data.forecast_frame`).
        With intervals, ``frame.attrs["intervals"]`` says what gave their bands (:attr:`interval_method`)
        and ``frame.attrs["levels"]`` lists their levels; ``frame.attrs["floored"]`` counts the point
        forecasts raised to 0 (:attr:`floored`)."""
        frame = forecast_frame(panel, self.mean, items=self.items, origins=self.origins)
        extra = {str(level): _long_order(self.quantiles[..., i]) for i, level in enumerate(self.levels)}
        if self.samples is not None:
            extra.update({f"sample_{i}": _long_order(path) for i, path in enumerate(self.samples)})
        frame = pd.concat([frame, pd.DataFrame(extra, index=frame.index)], axis=1) if extra else frame
        if self.interval_method is not None:
            frame.attrs.update(intervals=self.interval_method, levels=list(self.intervals))
        frame.attrs["floored"] = self.floored
        return frame


def unscale(model: ForecastModel, scaler: StandardScaler, outputs: np.ndarray, rows: np.ndarray, items: np.ndarray,
            origins: np.ndarray, *, levels: Sequence[float] = (), num_samples: int | None = None) -> ForecastResult:
    """The forecasts of a network's scaled ``outputs`` in the data's units: the one place where
    scaling is undone, and where a series never negative in its training data is kept at or above
    0 (:attr:`StandardScaler.floor <tsrec.data.scaling.StandardScaler>`: the point forecasts,
    quantiles and samples alike, in both units).

    outputs: ``[N, H, C]`` point forecasts or ``[N, H, C, P]`` a distribution's parameters
             (:func:`tsrec.forecasting.outputs`), in the scaler's units.
    rows:    ``[N]`` each window's scaler row; ``items``/``origins`` ``[N]`` as in :class:`ForecastResult`.
    levels, num_samples: the quantiles and sample paths wanted (a probabilistic model's only).
    """
    output = model.output
    if not output.probabilistic:
        mean = scaler.inverse_transform(outputs, rows)  # [N, H, C]
        return ForecastResult(items, origins, scaler.floored(mean, rows), scaler.floored(outputs, rows, scaled=True),
                              floored=_below(scaler, mean, rows))
    scaled_params = torch.from_numpy(outputs).double()  # [N, H, C, P]
    shift = torch.from_numpy(scaler.loc[rows])[:, None, :]  # [N, 1, C]
    scale = torch.from_numpy(scaler.scale[rows])[:, None, :]
    params = output.affine(scaled_params, shift, scale)  # [N, H, C, P] in the data's units
    levels = tuple(levels)
    mean = output.mean(params).numpy()  # [N, H, C]

    def floored(values: np.ndarray, scaled: bool, last: bool) -> np.ndarray:  # [..., C] or [..., C, Q] (last)
        values = np.moveaxis(values, -1, 1) if last else values
        values = scaler.floored(values, rows, scaled=scaled)
        return np.moveaxis(values, 1, -1) if last else values

    return ForecastResult(
        items, origins, floored(mean, False, False), floored(output.mean(scaled_params).numpy(), True, False), levels,
        quantiles=floored(output.quantiles(params, levels).numpy(), False, True) if levels else None,
        scaled_quantiles=floored(output.quantiles(scaled_params, levels).numpy(), True, True) if levels else None,
        samples=None if num_samples is None else
        np.maximum(output.sample(params, num_samples).numpy(), scaler.floor[rows][None, :, None, :]),
        floored=_below(scaler, mean, rows))


def _below(scaler: StandardScaler, mean: np.ndarray, rows: np.ndarray) -> int:
    """How many of the point forecasts ``mean`` ``[N, H, C]`` (rows ``rows`` ``[N]``) lie below their floor."""
    return int((mean < scaler.floor[rows][:, None, :]).sum())


def _long_order(values: np.ndarray) -> np.ndarray:
    """``[N, H, C]`` values in the row order of :func:`~tsrec.data.forecast_frame` (forecast,
    column, timestamp)."""
    return values.transpose(0, 2, 1).ravel()
