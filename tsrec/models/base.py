"""What every forecasting network shares: a typed config, the batch contract, RevIN and channel independence."""

from __future__ import annotations

import abc
import dataclasses
import types
import typing
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from tsrec.nn.heads import RevIN


@dataclass(frozen=True)
class ModelConfig:
    """Settings every model has.

    Attributes:
        context_length: past steps the model reads.
        prediction_length: future steps it forecasts.
        n_channels: target variables forecast jointly (``C``).
        n_time_features: calendar features per step (``F``).
        revin: reversible instance normalisation of each input window.
        channel_independent: run the core on each channel separately (``C = 1``), sharing weights.
    """

    context_length: int = 96
    prediction_length: int = 24
    n_channels: int = 1
    n_time_features: int = 0
    revin: bool = False
    channel_independent: bool = False

    def __post_init__(self) -> None:
        for name in ("context_length", "prediction_length", "n_channels"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if self.n_time_features < 0:
            raise ValueError(f"n_time_features must be >= 0, got {self.n_time_features!r}")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-compatible dict (nested configs become dicts, tuples lists)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        """Inverse of :meth:`to_dict`; unknown keys are an error that lists the known ones."""
        hints = typing.get_type_hints(cls)
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise TypeError(f"{cls.__name__} has no option(s) {unknown}; known options: {sorted(names)}")
        return cls(**{key: _coerce(hints[key], value) for key, value in data.items()})


def _coerce(hint: Any, value: Any) -> Any:
    """Rebuild nested dataclasses and tuples from their JSON form."""
    if value is None:
        return None
    options = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
    for option in options:
        if dataclasses.is_dataclass(option) and isinstance(value, dict):
            return option.from_dict(value) if hasattr(option, "from_dict") else option(**{
                k: _coerce(typing.get_type_hints(option)[k], v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(_coerce(Any, v) for v in value)
    return value


class ForecastModel(nn.Module, abc.ABC):
    """Base of every registered network.

    ``forward(past_target [B, Lc, C], past_time_feat [B, Lc, F], future_time_feat [B, H, F],
    past_observed [B, Lc, C] | None) -> [B, H, C]`` on the (already scaled) target. Subclasses
    implement :meth:`forecast` on ``core_channels`` channels; RevIN and channel independence
    are applied here, once for every model.
    """

    config_class: ClassVar[type[ModelConfig]] = ModelConfig
    trainable: ClassVar[bool] = True

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        if not isinstance(config, self.config_class):
            raise TypeError(f"{type(self).__name__} needs a {self.config_class.__name__}, got {type(config).__name__}")
        self.config = config
        self.core_channels = 1 if config.channel_independent else config.n_channels
        self.revin = RevIN(config.n_channels) if config.revin else None

    @abc.abstractmethod
    def forecast(self, past_target: Tensor, past_time_feat: Tensor, future_time_feat: Tensor) -> Tensor:
        """``[B, Lc, C']``, ``[B, Lc, F]``, ``[B, H, F]`` -> ``[B, H, C']`` with ``C' = core_channels``."""

    def forward(self, past_target: Tensor, past_time_feat: Tensor, future_time_feat: Tensor,
                past_observed: Tensor | None = None) -> Tensor:
        x = past_target
        stats = None
        if self.revin is not None:
            x, stats = self.revin.normalize(x, past_observed)
        batch, _, channels = x.shape
        if self.config.channel_independent and channels > 1:
            x = x.transpose(1, 2).reshape(batch * channels, -1, 1)  # [B*C, Lc, 1]
            past_time_feat = past_time_feat.repeat_interleave(channels, dim=0)
            future_time_feat = future_time_feat.repeat_interleave(channels, dim=0)
        y = self.forecast(x, past_time_feat, future_time_feat)
        if self.config.channel_independent and channels > 1:
            y = y.reshape(batch, channels, -1).transpose(1, 2)  # [B, H, C]
        if stats is not None:
            y = self.revin.denormalize(y, stats)
        return y

    def rsa_layers(self) -> list[tuple[str, int, nn.Module]]:
        """``(attention name, layer index, AttentionLayer)`` for every layer with RSA (none by default)."""
        return []


def zeros_like_future(past_target: Tensor, prediction_length: int) -> Tensor:
    """``[B, H, C]`` zeros with the dtype and device of ``past_target``."""
    return torch.zeros(past_target.shape[0], prediction_length, past_target.shape[2],
                       dtype=past_target.dtype, device=past_target.device)
