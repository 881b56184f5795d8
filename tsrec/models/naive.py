"""Seasonal naive: repeat the last observed season; and the season rule the untrained models share."""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor

from tsrec._checks import check_optional_int
from tsrec.config import DataFacts
from tsrec.models.base import ForecastModel, ModelConfig


@dataclass(frozen=True)
class SeasonalConfig(ModelConfig):
    """The season of a model that is fitted on each window, not trained (seasonal naive, ETS, Theta).

    ``season_length``: steps per season (1: no season). None: the strongest cycle found in the
    training part (rounded) when the context holds ``SEASONS_NEEDED`` of them, else 1 with a
    warning saying why: a season is used only where the data show one, never the calendar's guess.
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
            season, reason = season_from_data(data, config.context_length, self.SEASONS_NEEDED)
            if reason:
                warnings.warn(f"season_length is 1 (no season): {reason}", UserWarning, stacklevel=2)
        return dataclasses.replace(config, season_length=season)


def season_from_data(data: DataFacts, context_length: int, seasons: int = 1) -> tuple[int, str]:
    """The season the data show within ``context_length`` steps holding ``seasons`` of them, and,
    when there is none (1), why: no cycle stood out in the training part, or the strongest one is
    too long for the context (naming the ``context_length`` it needs)."""
    cycle = round(data.periods[0]) if data.periods else 0
    if cycle < 2:
        return 1, "no cycle stood out in the training part"
    if cycle * seasons > context_length:
        need = f"{seasons} x {cycle} = {cycle * seasons}" if seasons > 1 else f"{cycle}"
        return 1, (f"the strongest cycle found, {cycle} steps, needs context_length >= {need} (it is "
                   f"{context_length}); set a longer context_length, or season_length")
    return cycle, ""


@dataclass(frozen=True)
class SeasonalNaiveConfig(SeasonalConfig):
    """``season_length``: steps per season (1 gives the plain naive forecast); see :class:`SeasonalConfig`."""


class SeasonalNaive(ForecastModel):
    """``y[T + h] = y[T + h - m * ceil((h + 1) / m)]`` for ``h = 0..H-1``; nothing to train."""

    config_class = SeasonalNaiveConfig
    trainable = False

    def forecast(self, past_target: Tensor, past_time_feat: Tensor, future_time_feat: Tensor) -> Tensor:
        m = self.config.season_length
        steps = torch.arange(self.config.prediction_length, device=past_target.device)
        index = past_target.shape[1] - m + steps % m  # [H]
        return past_target[:, index].unsqueeze(-1)  # [B, H, C', 1]
