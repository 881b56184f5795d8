"""statsforecast's automatic models as tsrec models: ``ets``, ``theta``, ``ces``, ``dynamic_theta``,
``arima`` and ``mstl``.

statsforecast is an optional extra (``pip install "tsrec[stats]"``), imported only when one of
these models is built or forecasts. They are what a statsforecast user runs:

- **All the history**: each model reads every series whole (``ForecastModel.whole_history``):
  its context is the longest series, a shorter series' window starts with unobserved steps that
  are not its history and are left out. ``arima`` alone reads at most the last
  :attr:`ARIMA.max_history` steps, as its search costs seconds per series (a ``context_length``
  set by the user caps every model the same way).
- **The calendar's season** (:func:`tsrec.models.naive.season_for`), confirmed or overruled by the
  data, given up only where the longest history cannot hold two seasons; ``mstl`` takes the
  calendar's several seasons (:func:`tsrec.models.naive.seasons_for`).
- **One call for all the series** of a batch of windows: ``StatsForecast(models=[model], freq=1,
  n_jobs=1).forecast`` on a long frame of every window's and channel's history, in the data's
  original units (the window carries its scaler's statistics, ``target_loc`` and
  ``target_scale``), so that each forecasts what statsforecast forecasts on the same values.
- **Missing values**: a history starts at its first observed step; a gap inside it is filled
  with the last observed value before it (statsforecast takes no NaN); a history whose last
  values are missing is forecast from its last observed step, ``gap + H`` steps ahead, and the
  last ``H`` of them are the forecast of the requested steps (``predict`` names such series in
  a warning).
"""

from __future__ import annotations

import dataclasses
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

from tsrec._checks import check_int
from tsrec.batch import ForecastBatch
from tsrec.config import DataFacts
from tsrec.models.base import ForecastModel
from tsrec.models.naive import SeasonalConfig, choose_seasons

__all__ = ["ARIMA", "CES", "ETS", "MSTL", "STATS_EXTRA", "DynamicTheta", "MSTLConfig", "StatsConfig", "StatsModel",
           "Theta", "fill_context", "histories", "require_statsforecast", "statsforecast_installed"]

#: What installs statsforecast with tsrec.
STATS_EXTRA = 'pip install "tsrec[stats]"'
#: The registered models statsforecast fits.
STATS_MODELS = ("ets", "theta", "ces", "dynamic_theta", "arima", "mstl")


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
        raise ModuleNotFoundError(f"the statistical models ({', '.join(STATS_MODELS)}; and backtest's ets/theta "
                                  f"baselines) need statsforecast, which is not installed: {STATS_EXTRA}") from err


@dataclass(frozen=True)
class StatsConfig(SeasonalConfig):
    """``season_length`` as :class:`~tsrec.models.naive.SeasonalConfig`, with two seasons needed in
    the history read (statsforecast fits a seasonal model only on at least two seasons)."""

    SEASONS_NEEDED: ClassVar[int] = 2

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.revin:
            raise ValueError("the statistical models fit on each history's values as they are: RevIN does not apply "
                             "to them; leave revin out")
        if not statsforecast_installed():  # at Forecaster("ets", ...), before any data is read
            require_statsforecast()


@dataclass(frozen=True)
class MSTLConfig(StatsConfig):
    """``season_lengths``: MSTL's seasons (steps, each at least 2). None: the calendar's several
    seasons the history holds twice (:func:`~tsrec.models.naive.choose_seasons`: 24 and 168 for
    hourly data over two weeks), or ``(season_length,)`` where that is set; empty: no season (the
    trend forecaster alone)."""

    season_lengths: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.season_lengths is not None:
            object.__setattr__(self, "season_lengths",
                               tuple(sorted({check_int("each of season_lengths", m, 2) for m in self.season_lengths})))

    def unresolved(self) -> list[str]:
        return super().unresolved() + (["season_lengths"] if self.season_lengths is None else [])

    def resolved(self, data: DataFacts) -> MSTLConfig:
        config = super().resolved(data)
        seasons = config.season_lengths
        if seasons is None and config.context_length is not None:
            seasons = (() if self.season_length == 1 else (self.season_length,)) if self.season_length is not None \
                else choose_seasons(data.cycles, data.periods, config.context_length, self.SEASONS_NEEDED)
        return dataclasses.replace(config, season_lengths=seasons)


def fill_context(values: np.ndarray, observed: np.ndarray) -> np.ndarray | None:
    """``values`` ``[L]`` with each unobserved entry replaced by the last observed one before it
    (by the first observed one before any), as statsforecast takes no NaN; None when nothing is
    observed."""
    seen = np.flatnonzero(observed)
    if not len(seen):
        return None
    last = np.maximum.accumulate(np.where(observed, np.arange(len(values)), -1))  # [L] last observed position
    return values[np.where(last < 0, seen[0], last)]


def histories(values: np.ndarray, observed: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The histories statsforecast fits of the columns ``values``, ``observed`` ``[K, L]``: each from its
    first observed step to its last, gaps filled with the last observed value before them
    (:func:`fill_context`), laid end to end: ``y`` ``[sum n_k]``, the lengths ``n`` ``[K]`` (0 for a
    column with nothing observed) and each column's ``gap`` ``[K]``, the unobserved steps after its
    last observed one."""
    steps = np.arange(values.shape[1])
    last_seen = np.maximum.accumulate(np.where(observed, steps, -1), axis=1)  # [K, L]
    any_seen = observed.any(axis=1)  # [K]
    first = np.where(any_seen, np.argmax(observed, axis=1), values.shape[1])  # [K]
    last = last_seen[:, -1]  # [K], -1 where nothing is observed
    inside = (steps >= first[:, None]) & (steps <= last[:, None])  # [K, L]
    filled = np.take_along_axis(values, np.maximum(last_seen, 0), axis=1)  # [K, L]
    lengths = inside.sum(axis=1)
    return filled[inside], lengths, np.where(any_seen, values.shape[1] - 1 - last, 0)


class _LastValue:
    """statsforecast's ``fallback_model`` for a history its model cannot fit: the last value; keeps
    the histories it was asked for, so that the model can say which and why."""

    def __init__(self) -> None:
        self.failed: list[np.ndarray] = []

    def forecast(self, y: np.ndarray, h: int, **_: Any) -> dict[str, np.ndarray]:
        self.failed.append(np.array(y))
        return {"mean": np.full(h, y[-1])}

    def __repr__(self) -> str:
        return "LastValue"


class StatsModel(ForecastModel):
    """A statsforecast model fitted on every window's history, all of them in one call; nothing to train.

    ``forward(batch) -> [B, H, C]`` in the batch's scaled units: each window's channels are unscaled
    with the window's ``target_loc`` / ``target_scale`` (taken as they are without them), cut to
    their histories (:func:`histories`), forecast by :meth:`forecast_histories`, and scaled back. A
    history the model cannot fit gets its last value, with a warning naming why.
    """

    config_class = StatsConfig
    trainable = False
    whole_history = True
    #: What the model does with a series whose last values are missing (``predict``'s warning).
    missing_tail: ClassVar[str] = ("the statistical models forecast each from its last observed step, the horizon "
                                   "lengthened by the gap, and give the requested steps (the end of that forecast)")
    #: The statsforecast class (``statsforecast.models.<name>``).
    statsforecast_name: ClassVar[str]

    def __init__(self, config: StatsConfig) -> None:
        super().__init__(config)
        self._models = require_statsforecast()

    def statsforecast_model(self) -> Any:
        """The statsforecast model fitted on every history."""
        return getattr(self._models, self.statsforecast_name)(season_length=self.config.season_length)

    def forecast(self, past_target: Tensor, past_time_feat: Tensor, future_time_feat: Tensor) -> Tensor:
        """``[B, Lc, C']`` values, every one observed and taken as they are -> ``[B, H, C', 1]``.
        The Forecaster calls :meth:`forward`, which also reads the windows' observed masks and
        scaler statistics."""
        return self.forward({"past_target": past_target}).unsqueeze(-1)

    def forward(self, batch: ForecastBatch) -> Tensor:
        past = batch["past_target"].double().cpu().numpy()  # [B, Lc, C]
        size, length, channels = past.shape
        observed = batch["past_observed"].cpu().numpy() > 0 if "past_observed" in batch else np.ones(past.shape, bool)
        if "target_loc" in batch:  # the Forecaster's windows: scaled values and their scaler's statistics
            loc = batch["target_loc"].double().cpu().numpy()[:, None, :]  # [B, 1, C]
            scale = batch["target_scale"].double().cpu().numpy()[:, None, :]
        else:  # a batch built by hand: its values as they are
            loc, scale = np.zeros((size, 1, channels)), np.ones((size, 1, channels))
        raw = past * scale + loc  # [B, Lc, C]
        columns = raw.transpose(0, 2, 1).reshape(size * channels, length)  # [B*C, Lc], channel fastest
        seen = observed.transpose(0, 2, 1).reshape(size * channels, length)
        y, lengths, gaps = histories(columns, seen)
        out = self.forecast_histories(y, lengths, gaps, self.config.prediction_length)  # [B*C, H]
        out = out.reshape(size, channels, -1).transpose(0, 2, 1)  # [B, H, C]
        scaled = (out - loc) / scale
        return torch.from_numpy(scaled).to(batch["past_target"].dtype).to(batch["past_target"].device)

    def forecast_histories(self, y: np.ndarray, lengths: np.ndarray, gaps: np.ndarray, horizon: int) -> np.ndarray:
        """The forecasts ``[K, horizon]`` of the ``K`` histories laid end to end in ``y``
        (``lengths`` ``[K]``, NaN rows for the empty ones), each the last ``horizon`` of
        ``gaps[k] + horizon`` steps after its history: one statsforecast call
        (:meth:`_forecast_groups` groups them where the model needs to)."""
        out = np.full((len(lengths), horizon), np.nan)
        kept = np.flatnonzero(lengths > 0)
        if not kept.size:
            return out
        starts = np.r_[0, np.cumsum(lengths)[:-1]]  # [K] each history's first value in y
        ahead = horizon + int(gaps[kept].max())
        forecasts = self._forecast_groups(y, starts[kept], lengths[kept], ahead)  # [K', ahead]
        steps = gaps[kept, None] + np.arange(horizon)  # [K', H] the requested steps of each
        out[kept] = np.take_along_axis(forecasts, steps, axis=1)
        return out

    def _forecast_groups(self, y: np.ndarray, starts: np.ndarray, lengths: np.ndarray, ahead: int) -> np.ndarray:
        """``ahead`` steps after each history (``starts``, ``lengths`` ``[K]`` into ``y``): ``[K, ahead]``."""
        return self._statsforecast(self.statsforecast_model(), y, starts, lengths, ahead)

    def _statsforecast(self, model: Any, y: np.ndarray, starts: np.ndarray, lengths: np.ndarray,
                       ahead: int) -> np.ndarray:
        """``StatsForecast(models=[model], freq=1, n_jobs=1).forecast`` of ``ahead`` steps on the
        histories (``starts``, ``lengths`` ``[K]`` into ``y``), as a statsforecast user calls it on a
        long frame: ``[K, ahead]``. statsforecast's own numerical warnings (flat series) are kept
        from the user; a history it cannot fit gets its last value and a warning."""
        import pandas as pd
        from statsforecast import StatsForecast

        rows = np.repeat(starts, lengths) + np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths,
                                                                                      lengths)
        frame = pd.DataFrame({"unique_id": np.repeat(np.arange(len(lengths)), lengths),
                              "ds": rows - np.repeat(starts, lengths), "y": y[rows]})
        fallback = _LastValue()
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)
            result = StatsForecast(models=[model], freq=1, n_jobs=1, fallback_model=fallback).forecast(df=frame,
                                                                                                         h=ahead)
        result = result.sort_values(["unique_id", "ds"])
        if fallback.failed:
            self._report_failed(model, fallback.failed, len(lengths))
        return result[repr(model)].to_numpy(np.float64).reshape(len(lengths), ahead)

    def _report_failed(self, model: Any, failed: list[np.ndarray], total: int) -> None:
        """Warn that ``model`` could not be fitted on the histories ``failed`` (of ``total``), with
        the error the shortest raises."""
        shortest = min(failed, key=len)
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore", RuntimeWarning)
                model.forecast(y=shortest, h=1)
            reason = ""
        except Exception as err:  # noqa: BLE001 - statsforecast raises many kinds; its message is the reason
            reason = f" ({type(err).__name__}: {err})"
        warnings.warn(f"{repr(model)} could not be fitted on {len(failed)} of {total} histories (the shortest of "
                      f"{len(shortest)} steps{reason}); they get their last value", UserWarning, stacklevel=4)


class ETS(StatsModel):
    """statsforecast's ``AutoETS`` (exponential smoothing, the error, trend and season components
    chosen by AICc; Hyndman et al. 2008). statsforecast fits no seasonal component for a season
    over 24 steps (weekly data's 52), as R's ``ets``."""

    statsforecast_name = "AutoETS"


class Theta(StatsModel):
    """statsforecast's ``AutoTheta`` (the Theta method's variants chosen by in-sample MSE, with a
    seasonal decomposition when a seasonality test finds one; Fiorucci et al. 2016)."""

    statsforecast_name = "AutoTheta"


class CES(StatsModel):
    """statsforecast's ``AutoCES`` (complex exponential smoothing, its seasonal variant chosen by
    AIC; Svetunkov and Kourentzes 2016)."""

    statsforecast_name = "AutoCES"


class DynamicTheta(StatsModel):
    """statsforecast's ``DynamicOptimizedTheta`` (the Theta method with its theta and smoothing
    optimised and its coefficients updated over time; Fiorucci et al. 2016)."""

    statsforecast_name = "DynamicOptimizedTheta"


class ARIMA(StatsModel):
    """statsforecast's ``AutoARIMA`` (Hyndman and Khandakar's stepwise search over seasonal ARIMA
    orders). Its search costs seconds per series: 6.4 and 3.8 CPU-s on one monthly series of 300
    and 1,000 steps with season 12, 32x and 7x AutoETS on the same (one measurement, statsforecast
    2.1.1): it reads at most the last :attr:`max_history` steps of each series, and ``auto``
    leaves it out unless named."""

    statsforecast_name = "AutoARIMA"
    max_history = 1000


class MSTL(StatsModel):
    """statsforecast's ``MSTL`` (the series decomposed by STL into several seasons, a trend and a
    remainder; the seasons forecast by seasonal naive, the trend and remainder by ``AutoETS`` of a
    non-seasonal model, statsforecast's default trend forecaster). A history holds the seasons
    of ``season_lengths`` it holds twice (STL's need): a shorter one is fitted with fewer, and
    one that holds none by the trend forecaster alone."""

    config_class = MSTLConfig
    statsforecast_name = "MSTL"

    def statsforecast_model(self, seasons: tuple[int, ...] | None = None) -> Any:
        """MSTL with ``seasons`` (default the config's), or the trend forecaster alone without any."""
        seasons = self.config.season_lengths if seasons is None else seasons
        trend = self._models.AutoETS(model="ZZN")
        return self._models.MSTL(season_length=list(seasons), trend_forecaster=trend) if seasons else trend

    def _forecast_groups(self, y: np.ndarray, starts: np.ndarray, lengths: np.ndarray, ahead: int) -> np.ndarray:
        """One statsforecast call per set of seasons the histories hold twice (at most one more
        than there are seasons)."""
        seasons = np.asarray(self.config.season_lengths, dtype=np.int64)  # [S]
        held = (2 * seasons[None, :] <= lengths[:, None]).sum(axis=1)  # [K] the shortest seasons held
        out = np.empty((len(lengths), ahead))
        for count in np.unique(held):
            group = np.flatnonzero(held == count)
            model = self.statsforecast_model(tuple(int(m) for m in seasons[:count]))
            out[group] = self._statsforecast(model, y, starts[group], lengths[group], ahead)
        return out
