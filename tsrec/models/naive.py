"""Seasonal naive: repeat the last observed season."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
from torch import Tensor

from tsrec._checks import check_optional_int
from tsrec.config import DataFacts
from tsrec.models.base import ForecastModel, ModelConfig


@dataclass(frozen=True)
class SeasonalNaiveConfig(ModelConfig):
    """``season_length``: steps per season (1 gives the plain naive forecast). None: the strongest
    cycle found in the training part (rounded) when the context holds it, else 1: a season is used
    only where the data show one, never the calendar's guess."""

    season_length: int | None = None
    revin: bool = False  # nothing is learnt: the last values are repeated as they are

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "season_length", check_optional_int("season_length", self.season_length, 1))
        if self.season_length is not None and self.context_length is not None \
                and self.season_length > self.context_length:
            raise ValueError(f"season_length must be between 1 and context_length ({self.context_length}), "
                             f"got {self.season_length!r}")

    def unresolved(self) -> list[str]:
        return super().unresolved() + (["season_length"] if self.season_length is None else [])

    def resolved(self, data: DataFacts) -> SeasonalNaiveConfig:
        config = super().resolved(data)
        season = config.season_length
        if season is None and config.context_length is not None:
            season = data.cycle_within(config.context_length) or 1
        return dataclasses.replace(config, season_length=season)


class SeasonalNaive(ForecastModel):
    """``y[T + h] = y[T + h - m * ceil((h + 1) / m)]`` for ``h = 0..H-1``; nothing to train."""

    config_class = SeasonalNaiveConfig
    trainable = False

    def forecast(self, past_target: Tensor, past_time_feat: Tensor, future_time_feat: Tensor) -> Tensor:
        m = self.config.season_length
        steps = torch.arange(self.config.prediction_length, device=past_target.device)
        index = past_target.shape[1] - m + steps % m  # [H]
        return past_target[:, index].unsqueeze(-1)  # [B, H, C', 1]
