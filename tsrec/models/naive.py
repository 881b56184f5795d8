"""Seasonal naive (repeat the last observed season), the random walk with drift (extend the line
from a series' first observation through its last), and the season rule the untrained models share."""

from __future__ import annotations

import abc
import dataclasses
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor

from tsrec._checks import check_optional_int
from tsrec.batch import ForecastBatch
from tsrec.config import DataFacts
from tsrec.models.base import ForecastModel, ModelConfig


@dataclass(frozen=True)
class SeasonalConfig(ModelConfig):
    """The season of a model that is fitted on each window, not trained (seasonal naive and the
    statistical models).

    ``season_length``: steps per season (1: no season). None: the calendar's season confirmed or
    overruled by the data (:func:`choose_season`), given up (1, with a warning saying why) only
    where the history read, ``context_length`` steps, cannot hold ``SEASONS_NEEDED`` of it.
    """

    season_length: int | None = None
    revin: bool = False  # nothing is learnt: the model reads the values as they are

    #: Whole seasons the context must hold for the season to be used.
    SEASONS_NEEDED: ClassVar[int] = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "season_length", check_optional_int("season_length", self.season_length, 1))
        if self.season_length is not None and self.context_length is not None \
                and self.season_length * self.SEASONS_NEEDED > self.context_length:
            raise ValueError(f"season_length must be between 1 and context_length ({self.context_length})"
                             + (f" / {self.SEASONS_NEEDED}" if self.SEASONS_NEEDED > 1 else "")
                             + f", got {self.season_length!r}")

    def unresolved(self) -> list[str]:
        return super().unresolved() + (["season_length"] if self.season_length is None else [])

    def resolved(self, data: DataFacts) -> SeasonalConfig:
        config = super().resolved(data)
        season = config.season_length
        if season is None and config.context_length is not None:
            season, reason = choose_season(data.cycles, data.periods, config.context_length, self.SEASONS_NEEDED)
            if reason:
                warnings.warn(f"season_length is 1 (no season): {reason}", UserWarning, stacklevel=2)
        return dataclasses.replace(config, season_length=season)


#: Relative distance within which a line the data show is a calendar cycle.
MATCH_TOLERANCE = 0.05


def season_for(freq: str, periods: Sequence[float], history_length: int, seasons_needed: int = 2) -> tuple[int, str]:
    """The season (steps) of a statistical model on data of ``freq`` whose training part shows the
    cycles ``periods`` (strongest first: ``DataFacts.periods``,
    :func:`tsrec.data.periods.dominant_periods`) when it reads ``history_length`` steps (the
    longest series' history), and why there is none when it is 1: :func:`choose_season` of the
    frequency's :func:`~tsrec.data.time_features.calendar_cycles`. ``seasons_needed``: whole
    seasons the history must hold (2 for the statistical models, statsforecast's own rule; 1
    for seasonal naive)."""
    from tsrec.data.calendar import Calendar  # pandas: loaded when asked
    from tsrec.data.time_features import calendar_cycles

    return choose_season(calendar_cycles(Calendar.of(freq)), periods, history_length, seasons_needed)


def seasons_for(freq: str, periods: Sequence[float], history_length: int, seasons_needed: int = 2) -> tuple[int, ...]:
    """The several seasons of a model of multiple seasonalities (MSTL) on data of ``freq``: the
    season of :func:`season_for` and every longer calendar cycle the history holds
    ``seasons_needed`` times (hourly data over two weeks: 24 and 168; daily data over two
    years: 7 and 365), shortest first; empty where there is no season."""
    from tsrec.data.calendar import Calendar  # pandas: loaded when asked
    from tsrec.data.time_features import calendar_cycles

    return choose_seasons(calendar_cycles(Calendar.of(freq)), periods, history_length, seasons_needed)


def choose_season(cycles: Sequence[float], periods: Sequence[float], history_length: int,
                  seasons_needed: int = 2) -> tuple[int, str]:
    """The season from the calendar's ``cycles`` (steps, shortest first), confirmed or overruled
    by the data's ``periods`` (the clear lines of the training part's spectrum, strongest first),
    among those whose ``seasons_needed`` seasons (rounded) fit in ``history_length`` steps:

    1. the shortest calendar cycle that one of the data's lines confirms (within
       :data:`MATCH_TOLERANCE`);
    2. else, where the data show clear lines but none at a calendar cycle, the strongest of them
       (the calendar is overruled);
    3. else the shortest calendar cycle (the data show no line: too short a history for the
       spectrum to see a yearly cycle, say, never a reason to drop it);
    4. else 1, with the reason: the history cannot hold the season, or neither the calendar
       nor the data have one.

    Returns ``(season, reason)``; ``reason`` is empty unless ``season`` is 1.
    """
    def fits(cycle: float) -> bool:
        return round(cycle) >= 2 and round(cycle) * seasons_needed <= history_length

    def matches(period: float, cycle: float) -> bool:
        return abs(period - cycle) <= MATCH_TOLERANCE * cycle

    confirmed = [c for c in cycles if fits(c) and any(matches(p, c) for p in periods)]
    if confirmed:
        return round(confirmed[0]), ""
    lines = [p for p in periods if fits(p) and not any(matches(p, c) for c in cycles)]
    if lines:
        return round(lines[0]), ""
    calendar = [c for c in cycles if fits(c)]
    if calendar:
        return round(calendar[0]), ""
    wanted = [round(c) for c in (*cycles, *periods) if round(c) >= 2]
    if not wanted:
        return 1, "the frequency has no natural cycle and none stood out in the training part"
    need = f"{seasons_needed} x {min(wanted)} = {seasons_needed * min(wanted)}" if seasons_needed > 1 \
        else f"{min(wanted)}"
    return 1, (f"the history read ({history_length} steps) cannot hold {seasons_needed} season(s) of the shortest "
               f"cycle, {min(wanted)} steps (it needs {need}); pass more history, or set season_length")


def choose_seasons(cycles: Sequence[float], periods: Sequence[float], history_length: int,
                   seasons_needed: int = 2) -> tuple[int, ...]:
    """:func:`choose_season`'s season and the longer calendar ``cycles`` whose ``seasons_needed``
    seasons fit in ``history_length`` steps, rounded, shortest first; empty without a season."""
    season, _ = choose_season(cycles, periods, history_length, seasons_needed)
    if season == 1:
        return ()
    longer = {round(c) for c in cycles if round(c) > season and round(c) * seasons_needed <= history_length}
    return tuple(sorted({season} | longer))


class WindowRule(ForecastModel):
    """An untrained model that is a rule on each window: its values and which of them are observed,
    ``past``, ``observed`` ``[B, Lc, C]`` -> ``[B, H, C]`` (:meth:`rule`); the scaled values in, the
    forecast in the same units out."""

    trainable = False

    def forecast(self, past_target: Tensor, past_time_feat: Tensor, future_time_feat: Tensor) -> Tensor:
        """``[B, Lc, C']`` values, every one observed -> ``[B, H, C', 1]``."""
        return self.rule(past_target, torch.ones_like(past_target, dtype=torch.bool)).unsqueeze(-1)

    def forward(self, batch: ForecastBatch) -> Tensor:
        past = batch["past_target"]  # [B, Lc, C]
        observed = batch["past_observed"] > 0 if "past_observed" in batch else torch.ones_like(past, dtype=torch.bool)
        return self.rule(past, observed)

    @abc.abstractmethod
    def rule(self, past: Tensor, observed: Tensor) -> Tensor:
        """``past``, ``observed`` ``[B, Lc, C]`` -> the forecast ``[B, H, C]``."""


@dataclass(frozen=True)
class SeasonalNaiveConfig(SeasonalConfig):
    """``season_length``: steps per season (1 gives the plain naive forecast); see :class:`SeasonalConfig`."""


class SeasonalNaive(WindowRule):
    """``y[T + h] = y[T + h - m * ceil((h + 1) / m)]`` for ``h = 0..H-1``; nothing to train. Where
    that value is missing, the same phase of the latest earlier season that has it; where no season
    of the context has it, the context's last observed value. Missing values are never read as data."""

    config_class = SeasonalNaiveConfig
    missing_tail = ("seasonal naive repeats each phase's latest observed value (the last observed value where "
                    "the context has none at that phase)")

    @classmethod
    def default_context(cls, prediction_length: int, season: int) -> int:
        """Twice the horizon and at least one season of the calendar (``season``: 52 for weekly
        data), so that a short default context never drops the season."""
        return max(2 * prediction_length, season)

    def rule(self, past: Tensor, observed: Tensor) -> Tensor:
        """``past``, ``observed`` ``[B, Lc, C]`` -> ``[B, H, C]`` (see the class)."""
        m, horizon, length = self.config.season_length, self.config.prediction_length, past.shape[1]
        steps = torch.arange(horizon, device=past.device)
        latest = length - m + steps % m  # [H] the phase's position in the last season
        back = torch.arange(max(1, length // m), device=past.device)  # [K] seasons further back
        position = latest[None, :] - m * back[:, None]  # [K, H]
        inside = position >= 0
        position = position.clamp(min=0)
        values = past[:, position]  # [B, K, H, C]
        seen = observed[:, position] & inside[None, :, :, None]  # [B, K, H, C]
        first = seen.to(torch.uint8).argmax(dim=1, keepdim=True)  # [B, 1, H, C] the latest season with the value
        repeated = values.gather(1, first).squeeze(1)  # [B, H, C]
        last = length - 1 - observed.flip(1).to(torch.uint8).argmax(dim=1)  # [B, C] the last observed step
        naive = past.gather(1, last.unsqueeze(1)).expand(-1, horizon, -1)  # [B, H, C]
        return torch.where(seen.any(dim=1), repeated, naive)


@dataclass(frozen=True)
class DriftConfig(ModelConfig):
    """The random walk with drift has no setting of its own: it reads every series whole."""

    revin: bool = False  # nothing is learnt: the model reads the values as they are


class Drift(WindowRule):
    """The random walk with drift (Hyndman and Athanasopoulos, *Forecasting: principles and
    practice*, 5.2): the last observed value plus the average change over the series' history,
    ``y[t_last] + (h + t - t_last) * (y[t_last] - y[t_first]) / (t_last - t_first)`` at step ``t + h``
    after a window of ``t`` steps whose first and last observed steps are ``t_first`` and ``t_last``:
    the line through the series' first and last observations, statsforecast's
    ``RandomWalkWithDrift`` on the same history. Nothing to train or keep: it reads every series
    whole (``whole_history``, as the statistical models do: the drift is the whole history's, not
    the last few steps'), and missing values inside it are never read. A history with one
    observation has no drift: its value is repeated (statsforecast's slope is then 0 / 0).

    The forecast is affine in the values, so the scaler's units (the windows' scaled values) give
    the forecast in those units."""

    config_class = DriftConfig
    whole_history = True
    missing_tail = ("drift extends the line from each series' first observed value through its last observed one, "
                    "over the missing steps and the requested ones")

    def rule(self, past: Tensor, observed: Tensor) -> Tensor:
        """``past``, ``observed`` ``[B, Lc, C]`` -> ``[B, H, C]`` (see the class; a channel with nothing
        observed gets its window's last value, as seasonal naive gives it)."""
        length, horizon = past.shape[1], self.config.prediction_length
        seen = observed.to(torch.uint8)
        first = seen.argmax(dim=1)  # [B, C] the first observed step (0 where none is)
        last = length - 1 - seen.flip(1).argmax(dim=1)  # [B, C] the last observed step
        start, end = past.gather(1, first.unsqueeze(1)), past.gather(1, last.unsqueeze(1))  # [B, 1, C] each
        span = (last - first).unsqueeze(1).to(past.dtype)  # [B, 1, C]
        drifts = (span > 0) & observed.any(dim=1, keepdim=True)  # [B, 1, C] two observations or more
        slope = torch.where(drifts, (end - start) / span.clamp(min=1), torch.zeros_like(span))  # [B, 1, C]
        ahead = length - last.unsqueeze(1) + torch.arange(horizon, device=past.device)[None, :, None]  # [B, H, C]
        return end + slope * ahead.to(past.dtype)
