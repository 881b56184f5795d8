"""The free statistical baselines as tsrec models: ``ets`` and ``theta``, backed by statsforecast.

statsforecast is an optional extra (``pip install "tsrec[stats]"``), imported only when one of
these models is built or forecasts. Each model is fitted on every window's context, per channel,
in the data's original units (the window carries its scaler's statistics, ``target_loc`` and
``target_scale``), so that it forecasts what statsforecast's ``AutoETS`` / ``AutoTheta`` forecast
on the same values: their automatic choice of multiplicative components needs positive data,
which standardised values are not.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import warnings
from dataclasses import dataclass
from types import ModuleType
from typing import Any, ClassVar

import numpy as np
import torch
from torch import Tensor

from tsrec.batch import ForecastBatch
from tsrec.models.base import ForecastModel
from tsrec.models.naive import SeasonalConfig

__all__ = ["ETS", "STATS_EXTRA", "StatsConfig", "StatsModel", "Theta", "fill_context", "require_statsforecast",
           "statsforecast_installed"]

#: What installs statsforecast with tsrec.
STATS_EXTRA = 'pip install "tsrec[stats]"'


def statsforecast_installed() -> bool:
    """Whether statsforecast can be imported (without importing it)."""
    if "statsforecast" in sys.modules:
        return sys.modules["statsforecast"] is not None
    return importlib.util.find_spec("statsforecast") is not None


def require_statsforecast() -> ModuleType:
    """``statsforecast.models``, or a ``ModuleNotFoundError`` naming the extra that installs it."""
    try:
        importlib.import_module("statsforecast")
        return importlib.import_module("statsforecast.models")
    except ImportError as err:
        raise ModuleNotFoundError(f"the models 'ets' and 'theta' (and backtest's ets/theta baselines) need "
                                  f"statsforecast, which is not installed: {STATS_EXTRA}") from err


@dataclass(frozen=True)
class StatsConfig(SeasonalConfig):
    """``season_length`` as :class:`~tsrec.models.naive.SeasonalConfig`: the cycle found in the
    training part, when the context holds two of them (statsforecast fits a seasonal model only
    on at least two seasons), else 1 with a warning saying why."""

    SEASONS_NEEDED: ClassVar[int] = 2

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.revin:
            raise ValueError("ets and theta fit on each window's values as they are: RevIN does not apply to them; "
                             "leave revin out")
        if not statsforecast_installed():  # at Forecaster("ets", ...), before any data is read
            require_statsforecast()


def fill_context(values: np.ndarray, observed: np.ndarray) -> np.ndarray | None:
    """``values`` ``[L]`` with each unobserved entry replaced by the last observed one before it
    (by the first observed one before any), as statsforecast takes no NaN; None when nothing is
    observed."""
    seen = np.flatnonzero(observed)
    if not len(seen):
        return None
    last = np.maximum.accumulate(np.where(observed, np.arange(len(values)), -1))  # [L] last observed position
    return values[np.where(last < 0, seen[0], last)]


class StatsModel(ForecastModel):
    """A statsforecast model fitted on each window's context, per channel; nothing to train.

    ``forward(batch) -> [B, H, C]`` in the batch's scaled units: each context is unscaled with the
    window's ``target_loc`` / ``target_scale`` (taken as they are without them), its missing values filled (:func:`fill_context`),
    forecast by :meth:`fit_forecast`, and scaled back. A context too short or too degenerate for
    the model gets its last value, with a warning naming why.
    """

    config_class = StatsConfig
    trainable = False
    #: The statsforecast class (``statsforecast.models.<name>``).
    statsforecast_name: ClassVar[str]

    def __init__(self, config: StatsConfig) -> None:
        super().__init__(config)
        self._models = require_statsforecast()

    @classmethod
    def default_context(cls, prediction_length: int, season: int) -> int:
        """Ten seasons of the frequency and at least 100 steps (a statistical model estimates its
        smoothing and seasonal terms better from more history, and costs little more), or twice
        the horizon when that is longer; capped at ``fit`` by the shortest series."""
        return max(2 * prediction_length, 10 * season, 100)

    def forecast(self, past_target: Tensor, past_time_feat: Tensor, future_time_feat: Tensor) -> Tensor:
        """``[B, Lc, C']`` values, every one observed and taken as they are -> ``[B, H, C', 1]``.
        The Forecaster calls :meth:`forward`, which also reads the windows' observed masks and
        scaler statistics."""
        return self.forward({"past_target": past_target}).unsqueeze(-1)

    def forward(self, batch: ForecastBatch) -> Tensor:
        past = batch["past_target"].double().cpu().numpy()  # [B, Lc, C]
        observed = batch["past_observed"].cpu().numpy() > 0 if "past_observed" in batch else np.ones(past.shape, bool)
        if "target_loc" in batch:  # the Forecaster's windows: scaled values and their scaler's statistics
            loc = batch["target_loc"].double().cpu().numpy()[:, None, :]  # [B, 1, C]
            scale = batch["target_scale"].double().cpu().numpy()[:, None, :]
        else:  # a batch built by hand: its values as they are
            loc, scale = np.zeros((past.shape[0], 1, past.shape[2])), np.ones((past.shape[0], 1, past.shape[2]))
        raw = past * scale + loc  # [B, Lc, C]
        horizon = self.config.prediction_length
        out = np.full((past.shape[0], horizon, past.shape[2]), np.nan)  # [B, H, C]
        for b in range(past.shape[0]):
            for c in range(past.shape[2]):
                y = fill_context(raw[b, :, c], observed[b, :, c])
                if y is not None:
                    out[b, :, c] = self.forecast_series(y, horizon)
        scaled = (out - loc) / scale
        return torch.from_numpy(scaled).to(batch["past_target"].dtype).to(batch["past_target"].device)

    def forecast_series(self, y: np.ndarray, horizon: int) -> np.ndarray:
        """``horizon`` steps after ``y`` ``[L]`` (no NaN), or its last value where the model cannot
        be fitted (a warning says why)."""
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # statsforecast's own on flat series
                return np.asarray(self.fit_forecast(y, horizon), dtype=np.float64)
        except (NotImplementedError, ValueError, np.linalg.LinAlgError, ZeroDivisionError) as err:
            warnings.warn(f"{self.statsforecast_name} could not be fitted on a context of {len(y)} steps "
                          f"({type(err).__name__}: {err}); that window gets its last value", UserWarning,
                          stacklevel=2)
            return np.full(horizon, y[-1])

    def fit_forecast(self, y: np.ndarray, horizon: int) -> np.ndarray:
        """statsforecast's forecast of ``horizon`` steps after ``y``."""
        model: Any = getattr(self._models, self.statsforecast_name)(season_length=self.config.season_length)
        return model.forecast(y=y, h=horizon)["mean"]


class ETS(StatsModel):
    """statsforecast's ``AutoETS`` (exponential smoothing, the error, trend and season components
    chosen by AICc; Hyndman et al. 2008)."""

    statsforecast_name = "AutoETS"


class Theta(StatsModel):
    """statsforecast's ``AutoTheta`` (the Theta method's variants chosen by in-sample MSE, with a
    seasonal decomposition when a seasonality test finds one; Fiorucci et al. 2016)."""

    statsforecast_name = "AutoTheta"
