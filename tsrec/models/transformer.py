"""The encoder-decoder forecasters of the RSA paper: Informer, LogSparse and vanilla Transformer,
each with or without RSA. One network; the attention kernel and the RSA settings are config."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from tsrec._checks import check_fraction, check_int, check_optional_int
from tsrec.config import DataFacts, RSAConfig
from tsrec.models.base import ForecastModel, ModelConfig, zeros_like_future
from tsrec.nn.attention import KERNELS, AttentionLayer, make_kernel
from tsrec.nn.decoder import Decoder, DecoderLayer
from tsrec.nn.embedding import DataEmbedding
from tsrec.nn.encoder import Encoder, EncoderLayer


@dataclass(frozen=True)
class TransformerConfig(ModelConfig):
    """Informer-style encoder-decoder; defaults are the RSA paper's Informer recipe.

    The decoder reads the last ``label_length`` known steps (None: half the context) followed by
    ``prediction_length`` zeros (with their calendar features) and forecasts the zeros.
    ``attention`` names the kernel of encoder and decoder self-attention (a key of
    :data:`tsrec.nn.attention.KERNELS`); cross-attention is full attention, as in Informer.
    ``rsa`` (an :class:`~tsrec.config.RSAConfig`, or a dict of its fields) puts RSA in every
    attention.

    ``mix=True`` (Informer's default) flattens the decoder self-attention heads as
    ``[B, H, L, D] -> [B, L, H*D]``; with one decoder layer only the last heads then reach the
    forecast rows, so the first heads of decoder self-attention (and their REMs) get no gradient.
    It is kept as the default for fidelity to the paper's baseline; ``mix=False`` avoids it.
    """

    label_length: int | None = None
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
    rsa: RSAConfig | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.attention not in KERNELS:
            raise ValueError(f"attention must be one of {tuple(sorted(KERNELS))}, got {self.attention!r}")
        for name in ("d_model", "n_heads", "e_layers", "d_layers", "d_ff", "factor"):
            object.__setattr__(self, name, check_int(name, getattr(self, name), 1))
        object.__setattr__(self, "label_length", check_optional_int("label_length", self.label_length, 0))
        if self.label_length is not None and self.context_length is not None \
                and self.label_length > self.context_length:
            raise ValueError(
                f"label_length ({self.label_length}) must be between 0 and context_length ({self.context_length})")
        object.__setattr__(self, "dropout", check_fraction("dropout", self.dropout))
        self._check_attention()
        if self.rsa is not None and self.distil:
            raise ValueError("RSA needs distil=False: distilling halves the encoder's time axis, so REM lags "
                             "would no longer be real time lags (the RSA paper removes distilling)")

    def unresolved(self) -> list[str]:
        return (["label_length"] if self.label_length is None else []) + super().unresolved()

    def resolved(self, data: DataFacts) -> TransformerConfig:
        """Also fills ``label_length`` (half the context) and the RSA section from the data. One
        RSA section serves every attention, so its dilations are bound by the shortest sequence
        an attention sees (:attr:`max_lag`): a longer one would leave that attention's dilated
        heads without a lag, and they become plain heads (:meth:`~tsrec.config.RSAConfig.within`)."""
        config = super().resolved(data)
        label = config.label_length
        if label is None and config.context_length is not None:
            label = config.context_length // 2
        config = dataclasses.replace(config, label_length=label)
        rsa = None if config.rsa is None else config.rsa.resolved(config.n_heads, data, max_lag=config.max_lag)
        return dataclasses.replace(config, rsa=rsa)

    @property
    def max_lag(self) -> int | None:
        """The longest lag the shortest-sighted attention sees, in steps: encoder self-attention
        reads ``context_length`` steps, decoder self-attention ``label_length + prediction_length``
        (cross-attention reaches further, ``context_length + prediction_length - 1``); None until
        all three are known."""
        if self.context_length is None or self.label_length is None or self.prediction_length is None:
            return None
        return min(self.context_length, self.label_length + self.prediction_length) - 1


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
        encoder_masked = c.rsa.encoder_masked if c.rsa is not None else True

        def attention(kind: str, *, masked: bool = True, mix: bool = False) -> AttentionLayer:
            kernel = make_kernel(kind, dropout=c.dropout, factor=c.factor)
            return AttentionLayer(kernel, c.d_model, c.n_heads, rsa=c.rsa, rsa_masked=masked, mix=mix)

        self.enc_embedding = DataEmbedding(self.core_channels, c.n_time_features, c.d_model, c.dropout)
        self.dec_embedding = DataEmbedding(self.core_channels, c.n_time_features, c.d_model, c.dropout)
        self.encoder = Encoder(
            [EncoderLayer(attention(c.attention, masked=encoder_masked), c.d_model, c.d_ff, c.dropout, c.activation)
             for _ in range(c.e_layers)],
            c.d_model, distil=c.distil)
        self.decoder = Decoder(
            [DecoderLayer(attention(c.attention, mix=c.mix), attention("full"),
                          c.d_model, c.d_ff, c.dropout, c.activation) for _ in range(c.d_layers)],
            c.d_model)
        self.projection = nn.Linear(c.d_model, self.core_channels * self.n_params)

    def forecast(self, past_target: Tensor, past_time_feat: Tensor, future_time_feat: Tensor) -> Tensor:
        c = self.config
        label = past_target[:, c.context_length - c.label_length:]  # [B, label, C]
        dec_in = torch.cat([label, zeros_like_future(past_target, c.prediction_length)], dim=1)  # [B, label+H, C]
        dec_time = torch.cat([past_time_feat[:, c.context_length - c.label_length:], future_time_feat], dim=1)
        memory, _ = self.encoder(self.enc_embedding(past_target, past_time_feat))  # [B, Lc', d]
        out = self.decoder(self.dec_embedding(dec_in, dec_time), memory, cross_offset=c.context_length - c.label_length,
                           keep_last=c.prediction_length)  # [B, H, d]: the label rows are only read as keys
        return self.projection(out).unflatten(-1, (self.core_channels, self.n_params))  # [B, H, C, P]

    def rsa_layers(self) -> list[tuple[str, int, nn.Module]]:
        layers: list[tuple[str, int, Any]] = []
        for i, layer in enumerate(self.encoder.layers):
            layers.append(("encoder self", i, layer.attention))
        for i, layer in enumerate(self.decoder.layers):
            layers.append(("decoder self", i, layer.self_attention))
            layers.append(("cross", i, layer.cross_attention))
        return [entry for entry in layers if entry[2].rsa is not None]
