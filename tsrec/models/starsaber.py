"""StarSaber ("Transforming recurrent neural networks with attention and fixed-point equations";
seed 000, ``ZOO_SPEC.md`` section 2) as a forecasting backbone, with or without RSA.

The embedded context ``X0 [B, Lc, d]`` goes through ``n_layers`` fixed-point iterations of a
bidirectional RNN whose chain is replaced by a learned relation graph
(:class:`~tsrec.nn.starsaber.StarSaberEncoder`), then through the shared temporal head of
:class:`~tsrec.models.sequence.SequenceForecaster`.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from tsrec.models.sequence import SequenceConfig, SequenceForecaster
from tsrec.nn.starsaber import StarSaberEncoder

__all__ = ["StarSaber", "StarSaberConfig"]


@dataclass(frozen=True)
class StarSaberConfig(SequenceConfig):
    """StarSaber's settings (and those of :class:`~tsrec.models.sequence.SequenceConfig`).

    Attributes:
        gated: the gated variant, a GRU's fixed point ``H' = (1 - z) * H + z * Htilde`` with its
            own gate maps on the same graph, instead of the ReZero update ``H + alpha * Htilde``.
        causal: each position relates to earlier ones only (the softmax runs over ``j < i``).
            Off by default: every context step lies in the forecast's past, so the graph may
            look both ways. With RSA it needs causal REMs (``rsa.encoder_masked=True``).
        alpha_init: the initial value of each layer's ReZero scale ``alpha`` (the seed's 0 makes
            every layer start as the identity). Plain update only: leave it at 0 with ``gated``.
        n_layers: fixed-point iterations, each with its own weights.
        n_heads: heads of the relation graph (and REM heads with RSA); must divide ``d_model``.
        dropout: after the embedding and on each layer's ``Htilde``.
        rsa: the graph is mixed with REMs, ``(1 - g) A + g P``: causal REMs
            (``rsa.encoder_masked=True``) act on the past only, bidirectional ones
            (``rsa_starsaber``'s preset) on the past and, mirrored, on the future.
    """

    gated: bool = False
    causal: bool = False
    alpha_init: float = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("gated", "causal"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be True or False, got {getattr(self, name)!r}")
        alpha = self.alpha_init
        if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or not math.isfinite(alpha):
            raise ValueError(f"alpha_init must be a finite number, got {alpha!r}")
        object.__setattr__(self, "alpha_init", float(alpha))
        if self.gated and self.alpha_init != 0.0:
            raise ValueError(f"alpha_init ({self.alpha_init}) scales the plain update only; the gated update "
                             "(1 - z) H + z Htilde has no alpha: leave alpha_init at 0.0 with gated=True")
        self._check_attention()
        if self.rsa is not None and self.rsa.mix != "gate":
            raise ValueError(f"StarSaber mixes REMs into its relation graph, (1 - g) A + g P, with no attention "
                             f"scores to bias: rsa mix={self.rsa.mix!r} is not available, use mix='gate'")
        if self.causal and self.rsa is not None and not self.rsa.encoder_masked:
            raise ValueError("causal=True keeps only the past, where bidirectional REMs would lose their future "
                             "half: set rsa={'encoder_masked': True}, or causal=False")


class StarSaber(SequenceForecaster):
    """``forecast([B, Lc, C'], [B, Lc, F], [B, H, F]) -> [B, H, C']`` through the embedding, a
    :class:`~tsrec.nn.starsaber.StarSaberEncoder` and the direct temporal head."""

    config_class = StarSaberConfig

    def build_backbone(self, config: StarSaberConfig) -> StarSaberEncoder:
        return StarSaberEncoder(config.d_model, config.n_heads, config.n_layers, gated=config.gated,
                                causal=config.causal, alpha_init=config.alpha_init, dropout=config.dropout,
                                rsa=config.rsa)
