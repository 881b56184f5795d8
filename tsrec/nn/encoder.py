"""Informer's encoder: attention + feed-forward layers, optional distilling between them."""

from __future__ import annotations

from torch import Tensor, nn
from torch.nn import functional as F

from tsrec.nn.attention import AttentionLayer


class FeedForward(nn.Module):
    """Position-wise ``d_model -> d_ff -> d_model`` (Informer's two kernel-1 convolutions)."""

    def __init__(self, d_model: int, d_ff: int, dropout: float, activation: str = "gelu") -> None:
        super().__init__()
        if activation not in ("gelu", "relu"):
            raise ValueError(f"activation must be 'gelu' or 'relu', got {activation!r}")
        self.up = nn.Linear(d_model, d_ff)
        self.down = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)
        self.activation = F.gelu if activation == "gelu" else F.relu

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(self.down(self.dropout(self.activation(self.up(x)))))


class EncoderLayer(nn.Module):
    """``x = norm1(x + dropout(attn(x))); x = norm2(x + ffn(x))`` with ``x [B, L, d_model]``."""

    def __init__(self, attention: AttentionLayer, d_model: int, d_ff: int, dropout: float,
                 activation: str = "gelu", *, causal: bool = False) -> None:
        super().__init__()
        self.attention = attention
        self.causal = causal
        self.ffn = FeedForward(d_model, d_ff, dropout, activation)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, *, need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        attended, weights = self.attention(x, x, x, causal=self.causal, need_weights=need_weights)
        x = self.norm1(x + self.dropout(attended))
        return self.norm2(x + self.ffn(x)), weights


class DistilLayer(nn.Module):
    """Informer's distilling: circular conv, batch norm, ELU, max-pool (stride 2): ``[B, L, d] -> [B, ~L/2, d]``."""

    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.conv = nn.Conv1d(d_model, d_model, kernel_size=3, padding=1, padding_mode="circular")
        self.norm = nn.BatchNorm1d(d_model)
        self.pool = nn.MaxPool1d(kernel_size=3, stride=2, padding=1)

    def forward(self, x: Tensor) -> Tensor:
        y = self.pool(F.elu(self.norm(self.conv(x.transpose(1, 2)))))
        return y.transpose(1, 2)


class Encoder(nn.Module):
    """Encoder layers with optional distilling layers between them, then a final LayerNorm."""

    def __init__(self, layers: list[EncoderLayer], d_model: int, distil: bool = False) -> None:
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.distil = nn.ModuleList(DistilLayer(d_model) for _ in layers[:-1]) if distil else None
        self.norm = nn.LayerNorm(d_model)

    def forward(self, x: Tensor, *, need_weights: bool = False) -> tuple[Tensor, list[Tensor | None]]:
        weights = []
        for i, layer in enumerate(self.layers):
            x, w = layer(x, need_weights=need_weights)
            weights.append(w)
            if self.distil is not None and i < len(self.distil):
                x = self.distil[i](x)
        return self.norm(x), weights
