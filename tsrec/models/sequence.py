"""The frame shared by the sequence backbones (SRU++, StarSaber, relevancy screening).

``embed -> backbone -> temporal head``: the (scaled, optionally RevIN-normalised and
channel-folded) context ``[B, Lc, C']`` is embedded as the RSA family embeds its encoder input
(:class:`~tsrec.nn.embedding.DataEmbedding`: value convolution + positions + calendar features),
a backbone maps ``[B, Lc, d] -> [B, Lc, d]``, and a direct multi-step head maps every position's
state to the horizon: a linear map over time (``Lc -> H``, as DLinear's) on each feature, then a
linear map ``d -> C'`` on each step. No autoregressive decoding. A subclass only builds its
backbone (:meth:`SequenceForecaster.build_backbone`) and, with RSA, lists its RSA layers.
"""

from __future__ import annotations

import abc
import dataclasses
from dataclasses import dataclass
from typing import Self

from torch import Tensor, nn

from tsrec._checks import check_fraction, check_int
from tsrec.config import DataFacts, RSAConfig
from tsrec.models.base import ForecastModel, ModelConfig
from tsrec.nn.attention import RSAMixer
from tsrec.nn.embedding import DataEmbedding

__all__ = ["SequenceConfig", "SequenceForecaster"]


@dataclass(frozen=True)
class SequenceConfig(ModelConfig):
    """Settings of every sequence backbone.

    Attributes:
        d_model: width of the embedded sequence and of the backbone's states.
        n_layers: backbone layers.
        dropout: after the embedding (backbones apply it inside their layers as they document).
        rsa: RSA in the backbone's attention over time (an :class:`~tsrec.config.RSAConfig` or a
            dict of its fields), resolved from the data with ``n_heads`` REM heads; ``None``
            for the plain backbone. Only backbones with an attention matrix over time take it.
        n_heads: attention heads (and REM heads with RSA); must divide the attention width.
    """

    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    dropout: float = 0.1
    rsa: RSAConfig | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("d_model", "n_layers", "n_heads"):
            object.__setattr__(self, name, check_int(name, getattr(self, name), 1))
        object.__setattr__(self, "dropout", check_fraction("dropout", self.dropout))
        self._check_rsa()

    def resolved(self, data: DataFacts) -> Self:
        """Also fills the RSA section from the data (one token = one step); the attention over
        the context sees lags up to ``context_length - 1``, so a longer dilation becomes a plain
        head (:meth:`~tsrec.config.RSAConfig.within`)."""
        config = super().resolved(data)
        if config.rsa is None:
            return config
        max_lag = None if config.context_length is None else config.context_length - 1
        return dataclasses.replace(config, rsa=config.rsa.resolved(config.n_heads, data, max_lag=max_lag))


class SequenceForecaster(ForecastModel):
    """``forecast([B, Lc, C'], [B, Lc, F], [B, H, F]) -> [B, H, C']`` through
    embedding ``[B, Lc, d]`` -> :meth:`build_backbone` ``[B, Lc, d]`` -> temporal head."""

    config_class = SequenceConfig

    def __init__(self, config: SequenceConfig) -> None:
        super().__init__(config)
        c = config
        self.embedding = DataEmbedding(self.core_channels, c.n_time_features, c.d_model, c.dropout)
        self.backbone = self.build_backbone(c)
        self.time_head = nn.Linear(c.context_length, c.prediction_length)  # over time, per feature
        self.out = nn.Linear(c.d_model, self.core_channels * self.n_params)  # over features, per step

    @abc.abstractmethod
    def build_backbone(self, config: SequenceConfig) -> nn.Module:
        """The backbone: a module mapping ``[B, Lc, d_model] -> [B, Lc, d_model]``."""

    def forecast(self, past_target: Tensor, past_time_feat: Tensor, future_time_feat: Tensor) -> Tensor:
        """The time features of the horizon are not used here (the head is direct; the base class
        adds the covariate head's forecast from the horizon's covariates)."""
        h = self.backbone(self.embedding(past_target, past_time_feat))  # [B, Lc, d]
        y = self.time_head(h.transpose(1, 2)).transpose(1, 2)  # [B, H, d]
        return self.out(y).unflatten(-1, (self.core_channels, self.n_params))  # [B, H, C', P]

    def rsa_layers(self) -> list[tuple[str, int, nn.Module]]:
        """Every backbone module holding an :class:`~tsrec.nn.attention.RSAMixer` as ``rsa``, in
        module order, as ``("backbone", index, module)``."""
        holders = [m for m in self.backbone.modules() if isinstance(getattr(m, "rsa", None), RSAMixer)]
        return [("backbone", index, module) for index, module in enumerate(holders)]
