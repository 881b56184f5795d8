"""Shared blocks around a forecaster's core: instance normalisation and series decomposition."""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn import functional as F


class RevIN(nn.Module):
    """Reversible instance normalisation (Kim et al., 2022) over the time axis of ``[B, L, C]``.

    ``normalize`` returns the per-window statistics; ``inverse_affine`` gives the map that undoes it,
    which :meth:`tsrec.nn.outputs.ForecastOutput.affine` applies to each output parameter by its role.
    Unobserved steps (``observed == 0``) are left out of the statistics.
    """

    def __init__(self, n_channels: int, *, affine: bool = True, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(n_channels)) if affine else None
        self.bias = nn.Parameter(torch.zeros(n_channels)) if affine else None

    def normalize(self, x: Tensor, observed: Tensor | None = None) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """``x [B, L, C]`` -> normalised ``x`` and the statistics ``(loc, scale)``, each ``[B, 1, C]``."""
        weight = torch.ones_like(x) if observed is None else observed.to(x.dtype)
        count = weight.sum(1, keepdim=True).clamp_min(1.0)
        loc = (x * weight).sum(1, keepdim=True) / count
        scale = torch.sqrt(((x - loc) ** 2 * weight).sum(1, keepdim=True) / count + self.eps)
        y = (x - loc) / scale
        if self.weight is not None:
            y = y * self.weight + self.bias
        return y, (loc.detach(), scale.detach())

    def inverse_affine(self, stats: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor]:
        """``(shift, scale)``, each ``[B, 1, C]``: a normalised value ``y`` is ``y * scale + shift``
        in the input's units."""
        loc, scale = stats
        if self.weight is None:
            return loc, scale
        scale = scale / (self.weight + self.eps)
        return loc - self.bias * scale, scale


class MovingAverage(nn.Module):
    """Centred moving average along time with edge replication: ``[B, L, C] -> [B, L, C]``."""

    def __init__(self, kernel_size: int) -> None:
        super().__init__()
        if kernel_size < 1:
            raise ValueError(f"moving-average kernel must be >= 1, got {kernel_size}")
        self.kernel_size = kernel_size

    def forward(self, x: Tensor) -> Tensor:
        front = (self.kernel_size - 1) // 2
        back = self.kernel_size - 1 - front
        padded = F.pad(x.transpose(1, 2), (front, back), mode="replicate")  # [B, C, L + k - 1]
        return F.avg_pool1d(padded, self.kernel_size, stride=1).transpose(1, 2)
