"""SRU++ as a forecasting backbone (seed 002, ``ZOO_SPEC.md`` section 1), with or without RSA.

The context is embedded as the RSA family embeds its encoder input, a stack of SRU++ layers
(:mod:`tsrec.nn.sru`: causal attention on a factorised projection feeding SRU's elementwise
recurrence) runs over it left to right, and the direct temporal head of
:class:`~tsrec.models.sequence.SequenceForecaster` maps every state to the horizon. With RSA
every attention mixes in causal REMs over step lags.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from tsrec._checks import check_fraction, check_int
from tsrec.models.sequence import SequenceConfig, SequenceForecaster
from tsrec.nn.sru import SRUppStack

__all__ = ["SRUpp", "SRUppConfig"]


@dataclass(frozen=True)
class SRUppConfig(SequenceConfig):
    """SRU++'s settings; besides those of :class:`~tsrec.models.sequence.SequenceConfig`
    (``d_model = 64``, ``n_layers = 2``, ``n_heads = 4``, ``dropout = 0.1``, ``rsa``).

    Attributes:
        d_attention: width ``d'`` of each layer's factorised projection and attention, below
            ``d_model`` and divisible by ``n_heads``. None (default): ``d_model // 2`` (the paper
            uses ``d / 4`` at ``d = 3072``; at ``d = 64``, ``d / 2`` leaves 8 features per head).
        attention_every: layer ``i`` (from 0) has attention when ``(i + 1) % attention_every == 0``;
            the others use the projection ``W3 dropout(LayerNorm(W1 x))`` without attention. At
            most ``n_layers``, so that some layer attends.
        alpha_init: initial value of each layer's learned attention scale ``alpha`` (0 in the
            paper: the layers start as plain SRUs and attention enters as ``|alpha|`` grows).
        attn_dropout: dropout on the attention weights (0 in the reference).

    ``dropout`` is used, as in the reference, after the embedding, on each layer's normalised
    projection before ``W3``, and as variational dropout of the highway's recurrent term in every
    layer but the last.
    """

    d_attention: int | None = None
    attention_every: int = 1
    alpha_init: float = 0.0
    attn_dropout: float = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.d_attention is None:
            object.__setattr__(self, "d_attention", self.d_model // 2)
        for name in ("d_attention", "attention_every"):
            object.__setattr__(self, name, check_int(name, getattr(self, name), 1))
        object.__setattr__(self, "attn_dropout", check_fraction("attn_dropout", self.attn_dropout))
        if isinstance(self.alpha_init, bool) or not isinstance(self.alpha_init, numbers.Real) \
                or not math.isfinite(self.alpha_init):
            raise ValueError(f"alpha_init must be a finite number, got {self.alpha_init!r}")
        object.__setattr__(self, "alpha_init", float(self.alpha_init))
        if self.d_attention >= self.d_model:
            raise ValueError(f"d_attention ({self.d_attention}) must be below d_model ({self.d_model}): SRU++ "
                             f"attends in a narrower space; set d_attention, e.g. d_attention={self.d_model // 2}")
        if self.d_attention % self.n_heads:
            raise ValueError(f"d_attention ({self.d_attention}) must be divisible by n_heads ({self.n_heads})")
        if self.attention_every > self.n_layers:
            raise ValueError(f"attention_every ({self.attention_every}) exceeds n_layers ({self.n_layers}): no "
                             f"layer would have attention; set attention_every <= {self.n_layers}")
        if self.rsa is not None and not self.rsa.encoder_masked:
            raise ValueError("SRU++ attends causally, as its recurrence runs left to right, so its REMs are causal: "
                             "rsa.encoder_masked must be True")


class SRUpp(SequenceForecaster):
    """Embedding -> :class:`~tsrec.nn.sru.SRUppStack` ``[B, Lc, d_model]`` -> temporal head."""

    config_class = SRUppConfig

    def build_backbone(self, config: SRUppConfig) -> SRUppStack:  # type: ignore[override]
        return SRUppStack(config.d_model, config.n_layers, config.d_attention, config.n_heads,
                          attention_every=config.attention_every, alpha_init=config.alpha_init,
                          dropout=config.dropout, attn_dropout=config.attn_dropout, rsa=config.rsa)
