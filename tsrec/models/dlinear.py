"""DLinear (Zeng et al., 2023): moving-average decomposition, one linear map per component."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from tsrec._checks import check_int
from tsrec.models.base import ForecastModel, ModelConfig
from tsrec.nn.heads import MovingAverage
from tsrec.nn.outputs import LOCATION


@dataclass(frozen=True)
class DLinearConfig(ModelConfig):
    """Attributes: ``moving_average`` kernel of the trend; ``individual`` gives each channel its own maps."""

    moving_average: int = 25
    individual: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "moving_average", check_int("moving_average", self.moving_average, 1))


class TimeLinear(nn.Module):
    """Linear map along time ``[B, L, C] -> [B, H, C]``, shared or per channel; starts as the mean."""

    def __init__(self, context_length: int, prediction_length: int, channels: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.full((channels, prediction_length, context_length), 1.0 / context_length))
        self.bias = nn.Parameter(torch.zeros(channels, prediction_length))

    def forward(self, x: Tensor) -> Tensor:
        return torch.einsum("blc,chl->bhc", x, self.weight) + self.bias.transpose(0, 1)


class DLinear(ForecastModel):
    config_class = DLinearConfig

    def __init__(self, config: DLinearConfig) -> None:
        super().__init__(config)
        maps = self.core_channels if config.individual else 1
        outputs = config.prediction_length * self.n_params  # (step, parameter) pairs, step-major
        self.trend = MovingAverage(config.moving_average)
        self.seasonal_map = TimeLinear(config.context_length, outputs, maps)
        self.trend_map = TimeLinear(config.context_length, outputs, maps)
        # Only the forecast's location starts as the window mean; a distribution's other
        # parameters and a quantile output's gaps start at zero (their output's own prior).
        others = torch.arange(outputs) % self.n_params != self.output.roles.index(LOCATION)
        with torch.no_grad():
            for linear in (self.seasonal_map, self.trend_map):
                linear.weight[:, others] = 0.0

    def forecast(self, past_target: Tensor, past_time_feat: Tensor, future_time_feat: Tensor) -> Tensor:
        trend = self.trend(past_target)  # [B, Lc, C]
        y = self.seasonal_map(past_target - trend) + self.trend_map(trend)  # [B, H*P, C]
        size, _, channels = y.shape
        return y.view(size, -1, self.n_params, channels).transpose(2, 3)  # [B, H, C, P]
