"""Informer's decoder: masked self-attention, cross-attention to the encoder, feed-forward."""

from __future__ import annotations

from torch import Tensor, nn

from tsrec.nn.attention import AttentionLayer
from tsrec.nn.encoder import FeedForward


class DecoderLayer(nn.Module):
    """``x [B, Ld, d]`` attends to itself (causally), then to ``memory [B, Le, d]``, then a feed-forward.

    ``cross_offset`` is the time of decoder position 0 on the encoder's clock (Informer:
    ``context_length - label_length``); it sets the real time lags of the cross-attention REM.
    """

    def __init__(self, self_attention: AttentionLayer, cross_attention: AttentionLayer, d_model: int, d_ff: int,
                 dropout: float, activation: str = "gelu") -> None:
        super().__init__()
        self.self_attention = self_attention
        self.cross_attention = cross_attention
        self.ffn = FeedForward(d_model, d_ff, dropout, activation)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, memory: Tensor, *, cross_offset: int, keep_last: int | None = None) -> Tensor:
        """``x [B, Ld, d]`` -> ``[B, Ld, d]``, or ``[B, keep_last, d]``: everything after self-attention
        is row-wise, so rows nobody reads are dropped before cross-attention and the feed-forward."""
        x = self.norm1(x + self.dropout(self.self_attention(x, x, x, causal=True)[0]))
        if keep_last is not None and keep_last < x.shape[1]:
            cross_offset += x.shape[1] - keep_last  # the kept rows' time on the encoder's clock
            x = x[:, -keep_last:]  # [B, keep_last, d]
        x = self.norm2(x + self.dropout(self.cross_attention(x, memory, memory, query_offset=cross_offset)[0]))
        return self.norm3(x + self.ffn(x))


class Decoder(nn.Module):
    """Decoder layers then a final LayerNorm."""

    def __init__(self, layers: list[DecoderLayer], d_model: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.norm = nn.LayerNorm(d_model)

    def forward(self, x: Tensor, memory: Tensor, *, cross_offset: int, keep_last: int | None = None) -> Tensor:
        """``x [B, Ld, d]`` -> ``[B, Ld, d]``; with ``keep_last`` only the last rows ``[B, keep_last, d]``,
        which the last layer computes alone after its self-attention (same values, less work)."""
        for i, layer in enumerate(self.layers):
            last = i == len(self.layers) - 1
            x = layer(x, memory, cross_offset=cross_offset, keep_last=keep_last if last else None)
        return self.norm(x)
