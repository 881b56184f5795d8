"""Seasonal naive: repeat the last observed season."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from tsrec.models.base import ForecastModel, ModelConfig


@dataclass(frozen=True)
class SeasonalNaiveConfig(ModelConfig):
    """``season_length``: steps per season (1 gives the plain naive forecast)."""

    season_length: int = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 1 <= self.season_length <= self.context_length:
            raise ValueError(f"season_length must be between 1 and context_length ({self.context_length}), "
                             f"got {self.season_length!r}")


class SeasonalNaive(ForecastModel):
    """``y[T + h] = y[T + h - m * ceil((h + 1) / m)]`` for ``h = 0..H-1``; nothing to train."""

    config_class = SeasonalNaiveConfig
    trainable = False

    def forecast(self, past_target: Tensor, past_time_feat: Tensor, future_time_feat: Tensor) -> Tensor:
        m = self.config.season_length
        steps = torch.arange(self.config.prediction_length, device=past_target.device)
        index = past_target.shape[1] - m + steps % m  # [H]
        return past_target[:, index]
