"""Relevancy screening as a forecaster (Kerg et al. 2020; ``ZOO_SPEC.md`` section 3).

``embed -> relevancy-screening RNN layers -> temporal head`` (the frame of
:class:`~tsrec.models.sequence.SequenceForecaster`): an RNN whose every step attends over the last
``buffer_size`` states and a relevant set of at most ``relevant_size`` older states, kept for the
attention they drew (:class:`~tsrec.nn.relevancy.RelevancyScreeningRNN`).
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from tsrec._checks import check_int
from tsrec.models.sequence import SequenceConfig, SequenceForecaster
from tsrec.nn.relevancy import RelevancyScreeningRNN

__all__ = ["RelevancyConfig", "RelevancyRNN"]


@dataclass(frozen=True)
class RelevancyConfig(SequenceConfig):
    """Settings of the relevancy-screening RNN; ``buffer_size`` and ``relevant_size`` default to
    the authors' code (``--lastk 10 --rsize 15``).

    Attributes:
        buffer_size: ``k``, the last states every step attends to (a FIFO buffer); at least 1.
        relevant_size: ``r``, the most older states kept in the relevant set (0: the buffer only).
            For seasonal data, an ``r`` covering at least one season is a sensible value to try.
        n_layers: stacked RNN layers, each reading the previous one's states (default 1, as the
            authors'); every layer is one more sequential pass over the context.
        dropout: after the embedding and between stacked layers.
        n_heads: not used: the additive attention has a single head (the field is shared by the
            sequence backbones and left at its default).
        rsa: must be ``None``. There is no RSA variant: each step attends over a sparse memory of
            ``k + r`` states chosen per row, not over a matrix of positions that REMs could mix into.
    """

    n_layers: int = 1
    buffer_size: int = 10
    relevant_size: int = 15

    def __post_init__(self) -> None:
        if self.rsa is not None:
            raise ValueError("relevancy_rnn has no RSA variant (its attention reads a per-row memory of "
                             "buffer_size + relevant_size states, not a matrix over time): set rsa=None")
        super().__post_init__()
        object.__setattr__(self, "buffer_size", check_int("buffer_size", self.buffer_size, 1))
        object.__setattr__(self, "relevant_size", check_int("relevant_size", self.relevant_size, 0))


class RelevancyRNN(SequenceForecaster):
    """``forecast([B, Lc, C'], ...) -> [B, H, C']`` through ``n_layers`` relevancy-screening RNN
    layers of width ``d_model`` on the embedded context."""

    config_class = RelevancyConfig

    def build_backbone(self, config: RelevancyConfig) -> nn.Module:
        """``[B, Lc, d] -> [B, Lc, d]``: the layers in sequence, with dropout between them."""
        layers: list[nn.Module] = []
        for index in range(config.n_layers):
            if index:
                layers.append(nn.Dropout(config.dropout))
            layers.append(RelevancyScreeningRNN(config.d_model, config.d_model, config.buffer_size,
                                                config.relevant_size))
        return nn.Sequential(*layers)
