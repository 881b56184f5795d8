"""PatchTST (Nie et al., ICLR 2023, "A Time Series is Worth 64 Words"), with or without RSA.

Each channel's (RevIN-normalised) context is cut into overlapping patches, each patch is one
token of a Transformer encoder, and a flat linear head maps all the encoded tokens to the
horizon. With RSA every encoder attention mixes in REMs over *patch* lags: one token is
``stride`` steps, so REM dilations and periods are resolved in patches
(:meth:`~tsrec.config.DataFacts.in_token_units`) and reported in steps by
:func:`tsrec.inspection.gate_table` (``ForecastModel.steps_per_token``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from tsrec._checks import check_choice, check_fraction, check_int
from tsrec.config import DataFacts, RSAConfig
from tsrec.models.base import ForecastModel, ModelConfig
from tsrec.nn.attention import AttentionLayer, make_kernel
from tsrec.nn.encoder import FeedForward

__all__ = ["PatchTST", "PatchTSTConfig", "make_patches", "patch_count"]

NORMS = ("batch", "layer")


def patch_count(context_length: int, patch_len: int, stride: int) -> int:
    """Patches of a context padded at its end by ``stride`` copies of its last value:
    ``(context_length - patch_len) // stride + 2`` (PatchTST's ``padding_patch="end"``)."""
    return (context_length - patch_len) // stride + 2


def make_patches(x: Tensor, patch_len: int, stride: int) -> Tensor:
    """``x [..., L]`` -> patches ``[..., N, patch_len]``, ``N = patch_count(L, patch_len, stride)``.

    The series is first padded at its end with ``stride`` copies of its last value (as PatchTST's
    ``ReplicationPad1d((0, stride))``); patch ``n`` covers padded steps ``n * stride ..
    n * stride + patch_len - 1``. A view by ``unfold``: no loop over patches.
    """
    padded = torch.cat([x, x[..., -1:].expand(*x.shape[:-1], stride)], dim=-1)  # [..., L + stride]
    return padded.unfold(-1, patch_len, stride)  # [..., N, patch_len]


@dataclass(frozen=True)
class PatchTSTConfig(ModelConfig):
    """PatchTST's settings; the defaults are the paper's ETTh1/ETTh2 setting (its small-data
    recipe, which is also the one that trains quickly on a CPU): ``patch_len=16, stride=8``,
    ``d_model=16, n_heads=4, d_ff=128, e_layers=3, dropout=0.3`` and head dropout 0 (the
    released ETTh scripts set ``--head_dropout 0``; their ``fc_dropout 0.3`` only applies to the
    self-supervised pre-training head, which is not part of this model).

    PatchTST is channel-independent with RevIN by design, so ``revin`` and
    ``channel_independent`` default to True here; ``channel_independent=False`` is refused.
    Calendar features are not used (``n_time_features`` is read but ignored); covariates reach
    the forecast through the covariate head every model shares (:class:`~tsrec.models.base.ForecastModel`).

    Attributes:
        patch_len: steps per patch (one encoder token).
        stride: steps between the starts of consecutive patches (= the steps one token spans;
            at most ``patch_len``, so that no step is skipped). The context is padded at its end
            by ``stride`` copies of its last value, giving
            ``n_patches = (context_length - patch_len) // stride + 2``.
        d_model, n_heads, e_layers, d_ff: the Transformer encoder (full, non-causal attention).
        dropout: after the patch + position embedding, on the attention output and in the
            feed-forward block (as PatchTST; attention weights themselves get no dropout, as
            PatchTST's ``attn_dropout=0``).
        head_dropout: on the output of the flatten head.
        norm: ``"batch"`` (PatchTST's BatchNorm over ``d_model`` in each encoder layer, the
            default) or ``"layer"`` (LayerNorm, as in the vanilla Transformer); either is a
            post-norm after each residual connection, with no final norm.
        rsa: RSA in every encoder attention (an :class:`~tsrec.config.RSAConfig` or a dict of its
            fields); its data-dependent fields are resolved in PATCH units, i.e. from the data's
            facts with the season and periods divided by ``stride`` (hourly data, stride 8: a
            dilation of 3 patches = one day, initial periods 3 and 1.5 patches); a dilation longer
            than the ``n_patches - 1`` lags the encoder sees (15-minute data at input 96: a day is
            12 patches, the input 12 patches) makes those heads plain heads of their kind
            (``rsa.max_lag``, ``rsa.undilated``). REMs are causal
            unless ``rsa.encoder_masked=False`` (the ``rsa_patchtst`` preset). With
            ``rsa.per_channel`` each of the ``n_channels`` channels has its own REM parameters.

    PatchTST's "residual attention" (each layer adding the previous layer's attention scores) is
    not reproduced: the attention layers are tsrec's :class:`~tsrec.nn.attention.AttentionLayer`.
    """

    channel_independent: bool = True
    patch_len: int = 16
    stride: int = 8
    d_model: int = 16
    n_heads: int = 4
    e_layers: int = 3
    d_ff: int = 128
    dropout: float = 0.3
    head_dropout: float = 0.0
    norm: str = "batch"
    rsa: RSAConfig | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.channel_independent:
            raise ValueError("PatchTST is channel-independent by design: channel_independent must be True "
                             "(each channel is patched and encoded on its own, with shared weights)")
        for name in ("patch_len", "stride", "d_model", "n_heads", "e_layers", "d_ff"):
            object.__setattr__(self, name, check_int(name, getattr(self, name), 1))
        if self.stride > self.patch_len:
            raise ValueError(f"stride ({self.stride}) must be at most patch_len ({self.patch_len}): "
                             "a longer stride skips steps of the context")
        if self.context_length is not None and self.patch_len > self.context_length:
            raise ValueError(f"patch_len ({self.patch_len}) must be at most context_length "
                             f"({self.context_length}): a patch cannot be longer than the context")
        for name in ("dropout", "head_dropout"):
            object.__setattr__(self, name, check_fraction(name, getattr(self, name)))
        check_choice("norm", self.norm, NORMS)
        self._check_attention()

    @property
    def n_patches(self) -> int:
        """Encoder tokens per channel (needs ``context_length``)."""
        if self.context_length is None:
            raise ValueError("n_patches needs context_length")
        return patch_count(self.context_length, self.patch_len, self.stride)

    def resolved(self, data: DataFacts) -> PatchTSTConfig:
        """Also fills the RSA section, in patch units (one token = ``stride`` steps); the encoder
        sees lags up to ``n_patches - 1`` patches, so a longer dilation becomes a plain head
        (:meth:`~tsrec.config.RSAConfig.within`)."""
        config = super().resolved(data)
        if config.rsa is None:
            return config
        max_lag = None if config.context_length is None else config.n_patches - 1
        rsa = config.rsa.resolved(config.n_heads, data.in_token_units(config.stride), steps_per_token=config.stride,
                                  max_lag=max_lag)
        return dataclasses.replace(config, rsa=rsa)


class _TokenBatchNorm(nn.Module):
    """BatchNorm over the feature axis of ``[B, L, d]`` (statistics over batch and tokens)."""

    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.norm = nn.BatchNorm1d(d_model)

    def forward(self, x: Tensor) -> Tensor:
        return self.norm(x.transpose(1, 2)).transpose(1, 2)  # [B, L, d]


class PatchEncoderLayer(nn.Module):
    """PatchTST's post-norm encoder layer: ``x = norm1(x + dropout(attn(x))); x = norm2(x + ffn(x))``
    on ``x [B, N, d_model]``, with BatchNorm or LayerNorm. Attention is full and non-causal."""

    def __init__(self, attention: AttentionLayer, d_model: int, d_ff: int, dropout: float, norm: str) -> None:
        super().__init__()
        make_norm = _TokenBatchNorm if norm == "batch" else nn.LayerNorm
        self.attention = attention
        self.ffn = FeedForward(d_model, d_ff, dropout, "gelu")
        self.norm1 = make_norm(d_model)
        self.norm2 = make_norm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, channel: Tensor | None = None) -> Tensor:
        """``x [B, N, d_model]``, ``channel [B]`` (each row's channel, for per-channel REMs) -> ``[B, N, d_model]``."""
        attended, _ = self.attention(x, x, x, causal=False, channel=channel)
        x = self.norm1(x + self.dropout(attended))  # [B, N, d]
        return self.norm2(x + self.ffn(x))  # [B, N, d]


class PatchTST(ForecastModel):
    """Patches -> linear embedding + learned positions -> Transformer encoder -> flatten head.

    Runs on each channel separately (the base class folds channels into the batch, after RevIN):
    ``forecast([B, Lc, 1], ...) -> [B, H, 1]``. With ``config.rsa`` every encoder attention is an
    RSA layer whose REMs act on patch lags (:attr:`steps_per_token` = ``stride``).
    """

    config_class = PatchTSTConfig
    per_channel_rsa = True

    @classmethod
    def default_context(cls, prediction_length: int, season: int) -> int:
        """Twice the horizon, and at least two patches of the default length (32 steps): a short
        horizon's ``2 * H`` would not hold one patch."""
        return max(2 * prediction_length, 2 * PatchTSTConfig.patch_len)

    def __init__(self, config: PatchTSTConfig) -> None:
        super().__init__(config)
        c = config
        self.n_patches = c.n_patches
        masked = c.rsa.encoder_masked if c.rsa is not None else True
        self.per_channel = c.rsa is not None and c.rsa.per_channel
        self.embedding = nn.Linear(c.patch_len, c.d_model)
        # PatchTST's learned positional encoding (pe="zeros", learn_pe=True): U(-0.02, 0.02).
        self.position = nn.Parameter(torch.empty(self.n_patches, c.d_model).uniform_(-0.02, 0.02))
        self.dropout = nn.Dropout(c.dropout)
        self.layers = nn.ModuleList(
            PatchEncoderLayer(AttentionLayer(make_kernel("full", dropout=0.0), c.d_model, c.n_heads,
                                             rsa=c.rsa, rsa_masked=masked, rsa_channels=c.n_channels),
                              c.d_model, c.d_ff, c.dropout, c.norm)
            for _ in range(c.e_layers))
        self.head = nn.Linear(self.n_patches * c.d_model, c.prediction_length * self.n_params)
        self.head_dropout = nn.Dropout(c.head_dropout)

    @property
    def steps_per_token(self) -> int:
        """One encoder token is one patch, ``stride`` steps after the previous one."""
        return self.config.stride

    def forecast(self, past_target: Tensor, past_time_feat: Tensor, future_time_feat: Tensor) -> Tensor:
        """``past_target [B, Lc, C']`` -> ``[B, H, C', P]``; the time features are not used here (the
        base class adds the covariate head's forecast)."""
        c = self.config
        size, _, channels = past_target.shape
        x = past_target.transpose(1, 2).reshape(size * channels, -1)  # [B*C', Lc]
        z = self.embedding(make_patches(x, c.patch_len, c.stride))  # [B*C', N, d]
        z = self.dropout(z + self.position)  # [B*C', N, d]
        channel = self.row_channels(size * channels, x.device) if self.per_channel else None  # [B*C']
        for layer in self.layers:
            z = layer(z, channel)  # [B*C', N, d]
        y = self.head_dropout(self.head(z.flatten(1)))  # [B*C', H*P]
        return y.view(size, channels, -1, self.n_params).transpose(1, 2)  # [B, H, C', P]

    def rsa_layers(self) -> list[tuple[str, int, nn.Module]]:
        layers: list[tuple[str, int, Any]] = [("encoder self", i, layer.attention)
                                              for i, layer in enumerate(self.layers)]
        return [entry for entry in layers if entry[2].rsa is not None]
