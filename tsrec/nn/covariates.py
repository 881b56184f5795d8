"""The covariate path every trainable network shares (tensors only).

Covariates reach a network as trailing features of its per-step time features (after the
calendar's); :class:`~tsrec.models.base.ForecastModel` appends the embeddings of categorical static
covariates (:class:`StaticEmbedding`) and adds the output of a :class:`CovariateHead` to every
network's own output, so that backbones that ignore time features (PatchTST, DLinear) or the
horizon's (the sequence backbones) use covariates too.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import Tensor, nn

from tsrec.config import static_embedding_dim

__all__ = ["CovariateHead", "StaticEmbedding", "covariate_parameters"]


class StaticEmbedding(nn.Module):
    """One learned embedding per categorical static covariate: codes ``[B, Kc]`` int64 ->
    ``[B, E]``, ``E = sum(static_embedding_dim(c) for c in cardinalities)``. A negative code (a
    category ``fit`` never saw, :data:`tsrec.data.covariates.UNSEEN`) gets the mean of its table's
    embeddings: the average of the known categories."""

    def __init__(self, cardinalities: tuple[int, ...]) -> None:
        super().__init__()
        self.tables = nn.ModuleList(nn.Embedding(c, static_embedding_dim(c)) for c in cardinalities)

    def forward(self, codes: Tensor) -> Tensor:
        parts = []
        for k, table in enumerate(self.tables):  # no host sync: the same operators whatever the codes
            seen = codes[:, k, None] >= 0  # [B, 1]
            parts.append(torch.where(seen, table(codes[:, k].clamp(min=0)), table.weight.mean(0)))  # [B, e]
        return torch.cat(parts, dim=-1)  # [B, E]


class CovariateHead(nn.Module):
    """A linear forecast from the covariate features of a window, added to a network's output.

    ``past [B, Lc, K]``, ``future [B, H, K]`` -> ``[B, H, n_outputs]``: each forecast step's own
    features through one map shared by all steps (``y_h = W x_h + b``: a known-future covariate
    acting at its step), plus a map of the whole window's features mixed over time
    (``Lc + H -> H``, then ``K -> n_outputs``: lagged effects and past-only covariates).
    """

    def __init__(self, context_length: int, prediction_length: int, n_features: int, n_outputs: int) -> None:
        super().__init__()
        self.step = nn.Linear(n_features, n_outputs)
        self.mix_time = nn.Linear(context_length + prediction_length, prediction_length, bias=False)
        self.mix_features = nn.Linear(n_features, n_outputs, bias=False)

    def forward(self, past: Tensor, future: Tensor) -> Tensor:
        window = torch.cat([past, future], dim=1)  # [B, Lc + H, K]
        mixed = self.mix_time(window.transpose(1, 2)).transpose(1, 2)  # [B, H, K]
        return self.step(future) + self.mix_features(mixed)  # [B, H, n_outputs]


def covariate_parameters(module: nn.Module) -> Iterator[nn.Parameter]:
    """The weights of every covariate head and static embedding in ``module`` (for their own
    optimiser group: ``TrainingConfig.covariate_lr_multiplier``)."""
    for sub in module.modules():
        if isinstance(sub, (CovariateHead, StaticEmbedding)):
            yield from sub.parameters()
