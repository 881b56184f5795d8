"""The encoder-decoder forecasters of the RSA paper: Informer, LogSparse and vanilla Transformer,
each with or without RSA. One network; the attention kernel and the RSA settings are config."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from tsrec.models.base import ForecastModel, ModelConfig, zeros_like_future
from tsrec.nn.attention import (
    AttentionKernel,
    AttentionLayer,
    FullAttention,
    LogSparseAttention,
    ProbSparseAttention,
    RSAConfig,
)
from tsrec.nn.decoder import Decoder, DecoderLayer
from tsrec.nn.embedding import DataEmbedding
from tsrec.nn.encoder import Encoder, EncoderLayer
from tsrec.nn.rem import REMConfig

ATTENTION_KINDS = ("prob", "full", "logsparse")


@dataclass(frozen=True)
class RSASettings:
    """RSA in every attention of the network (encoder self, decoder self, cross).

    Attributes:
        kinds: REM head counts ``(k1..k6)``: regular, cos, sin, dilated regular/cos/sin; they must
            sum to ``n_heads``.
        dilation: dilation of the dilated heads (the data's seasonality: 24 for hourly data).
        periods: cycle lengths (steps) initialising ``theta`` of the plain cos/sin pairs; None: pi/4.
        dilated_periods: the same for the dilated pairs, in dilated steps.
        encoder_masked: causal REM in encoder self-attention (decoder self and cross always causal).
        per_head_gate: one gate per head instead of one per layer.
        gate_init: ``mu ~ U(gate_init)``.
        rem_on_lazy_queries: ProbSparse's lazy rows get the REM term too.
    """

    kinds: tuple[int, int, int, int, int, int] = (0, 2, 2, 0, 2, 2)
    dilation: int | tuple[int, ...] = 24
    periods: tuple[float, ...] | None = None
    dilated_periods: tuple[float, ...] | None = None
    encoder_masked: bool = True
    per_head_gate: bool = False
    gate_init: tuple[float, float] = (-3.0, 3.0)
    rem_on_lazy_queries: bool = True

    def layer_config(self, *, masked: bool) -> RSAConfig:
        rem = REMConfig(kinds=tuple(self.kinds), dilation=self.dilation, masked=masked,
                        periods=self.periods, dilated_periods=self.dilated_periods)
        return RSAConfig(rem=rem, per_head_gate=self.per_head_gate, gate_init=tuple(self.gate_init),
                         rem_on_lazy_queries=self.rem_on_lazy_queries)


@dataclass(frozen=True)
class TransformerConfig(ModelConfig):
    """Informer-style encoder-decoder; defaults are the RSA paper's Informer recipe.

    The decoder reads the last ``label_length`` known steps followed by ``prediction_length``
    zeros (with their calendar features) and forecasts the zeros.

    ``mix=True`` (Informer's default) flattens the decoder self-attention heads as
    ``[B, H, L, D] -> [B, L, H*D]``; with one decoder layer only the last heads then reach the
    forecast rows, so the first heads of decoder self-attention (and their REMs) get no gradient.
    It is kept as the default for fidelity to the paper's baseline; ``mix=False`` avoids it.
    """

    label_length: int = 48
    attention: str = "prob"
    d_model: int = 512
    n_heads: int = 8
    e_layers: int = 2
    d_layers: int = 1
    d_ff: int = 2048
    dropout: float = 0.05
    factor: int = 5
    activation: str = "gelu"
    distil: bool = False
    mix: bool = True
    rsa: RSASettings | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.attention not in ATTENTION_KINDS:
            raise ValueError(f"attention must be one of {ATTENTION_KINDS}, got {self.attention!r}")
        if not 0 <= self.label_length <= self.context_length:
            raise ValueError(
                f"label_length ({self.label_length}) must be between 0 and context_length ({self.context_length})")
        for name in ("d_model", "n_heads", "e_layers", "d_layers", "d_ff"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)!r}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout!r}")
        if self.rsa is not None:
            if sum(self.rsa.kinds) != self.n_heads:
                raise ValueError(f"rsa.kinds {tuple(self.rsa.kinds)} give {sum(self.rsa.kinds)} REM heads but "
                                 f"n_heads is {self.n_heads}; every head needs a REM kind")
            if self.distil:
                raise ValueError("RSA needs distil=False: distilling halves the encoder's time axis, so REM lags "
                                 "would no longer be real time lags (the RSA paper removes distilling)")


def _kernel(kind: str, config: TransformerConfig) -> AttentionKernel:
    if kind == "prob":
        return ProbSparseAttention(factor=config.factor, dropout=config.dropout)
    if kind == "logsparse":
        return LogSparseAttention(dropout=config.dropout)
    return FullAttention(dropout=config.dropout)


class EncoderDecoderForecaster(ForecastModel):
    """Informer's network (embedding, encoder, decoder, linear projection) with a chosen kernel.

    Encoder and decoder self-attention use ``config.attention``; cross-attention is full
    attention, as in Informer. With ``config.rsa`` every attention is an RSA layer; the
    cross-attention REM measures real time lags (decoder step ``i`` sits at time
    ``context_length - label_length + i``).
    """

    config_class = TransformerConfig

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__(config)
        c = config
        rsa = c.rsa
        enc_rsa = rsa.layer_config(masked=rsa.encoder_masked) if rsa else None
        causal_rsa = rsa.layer_config(masked=True) if rsa else None

        def attention(kind: str, rsa_config: RSAConfig | None, mix: bool = False) -> AttentionLayer:
            return AttentionLayer(_kernel(kind, c), c.d_model, c.n_heads, rsa=rsa_config, mix=mix)

        self.enc_embedding = DataEmbedding(self.core_channels, c.n_time_features, c.d_model, c.dropout)
        self.dec_embedding = DataEmbedding(self.core_channels, c.n_time_features, c.d_model, c.dropout)
        self.encoder = Encoder(
            [EncoderLayer(attention(c.attention, enc_rsa), c.d_model, c.d_ff, c.dropout, c.activation)
             for _ in range(c.e_layers)],
            c.d_model, distil=c.distil)
        self.decoder = Decoder(
            [DecoderLayer(attention(c.attention, causal_rsa, mix=c.mix), attention("full", causal_rsa),
                          c.d_model, c.d_ff, c.dropout, c.activation) for _ in range(c.d_layers)],
            c.d_model)
        self.projection = nn.Linear(c.d_model, self.core_channels)

    def forecast(self, past_target: Tensor, past_time_feat: Tensor, future_time_feat: Tensor) -> Tensor:
        c = self.config
        label = past_target[:, c.context_length - c.label_length:]  # [B, label, C]
        dec_in = torch.cat([label, zeros_like_future(past_target, c.prediction_length)], dim=1)  # [B, label+H, C]
        dec_time = torch.cat([past_time_feat[:, c.context_length - c.label_length:], future_time_feat], dim=1)
        memory, _ = self.encoder(self.enc_embedding(past_target, past_time_feat))  # [B, Lc', d]
        out = self.decoder(self.dec_embedding(dec_in, dec_time), memory, cross_offset=c.context_length - c.label_length,
                           keep_last=c.prediction_length)  # [B, H, d]: the label rows are only read as keys
        return self.projection(out)  # [B, H, C]

    def rsa_layers(self) -> list[tuple[str, int, nn.Module]]:
        layers: list[tuple[str, int, Any]] = []
        for i, layer in enumerate(self.encoder.layers):
            layers.append(("encoder self", i, layer.attention))
        for i, layer in enumerate(self.decoder.layers):
            layers.append(("decoder self", i, layer.self_attention))
            layers.append(("cross", i, layer.cross_attention))
        return [entry for entry in layers if entry[2].rsa is not None]
