"""Informer's input embedding: value (1-D conv over channels) + positional + calendar features."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


class TokenEmbedding(nn.Module):
    """Circular 1-D convolution (kernel 3) from ``C`` channels to ``d_model``: ``[B, L, C] -> [B, L, d_model]``."""

    def __init__(self, n_channels: int, d_model: int) -> None:
        super().__init__()
        self.conv = nn.Conv1d(n_channels, d_model, kernel_size=3, padding=1, padding_mode="circular", bias=False)
        nn.init.kaiming_normal_(self.conv.weight, mode="fan_in", nonlinearity="leaky_relu")

    def forward(self, x: Tensor) -> Tensor:
        return self.conv(x.transpose(1, 2)).transpose(1, 2)


class PositionalEmbedding(nn.Module):
    """Fixed sinusoidal positions ``[1, L, d_model]``, cached up to ``max_len``."""

    def __init__(self, d_model: int, max_len: int = 5000) -> None:
        super().__init__()
        position = torch.arange(max_len, dtype=torch.float32).unsqueeze(1)
        div = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, d_model)
        pe[:, 0::2] = torch.sin(position * div)
        pe[:, 1::2] = torch.cos(position * div)[:, : d_model // 2]
        self.register_buffer("pe", pe.unsqueeze(0), persistent=False)

    def forward(self, length: int) -> Tensor:
        if length > self.pe.shape[1]:
            raise ValueError(f"sequence length {length} exceeds the positional table ({self.pe.shape[1]})")
        return self.pe[:, :length]


class DataEmbedding(nn.Module):
    """``value(x) + position + Linear(time features)`` then dropout (Informer's ``embed='timeF'``).

    ``x [B, L, C]``, ``time_feat [B, L, F]`` -> ``[B, L, d_model]``.
    """

    def __init__(self, n_channels: int, n_time_features: int, d_model: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.value = TokenEmbedding(n_channels, d_model)
        self.position = PositionalEmbedding(d_model)
        self.temporal = nn.Linear(n_time_features, d_model, bias=False) if n_time_features else None
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, time_feat: Tensor) -> Tensor:
        out = self.value(x) + self.position(x.shape[1])
        if self.temporal is not None:
            out = out + self.temporal(time_feat)
        return self.dropout(out)
