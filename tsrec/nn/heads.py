"""Shared blocks around a forecaster's core: instance normalisation and series decomposition."""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from tsrec.config import FAR_IQRS, SHIFT_STEPS


class RevIN(nn.Module):
    """Reversible instance normalisation (Kim et al., 2022) over the time axis of ``[B, L, C]``.

    ``normalize`` returns the per-window statistics; ``inverse_affine`` gives the map that undoes it,
    which :meth:`tsrec.nn.outputs.ForecastOutput.affine` applies to each output parameter by its role.
    Unobserved steps (``observed == 0``) are left out of the statistics.

    The input is in the scaler's units, where 1 is a series' training standard deviation. A value
    far from its own window (:meth:`far`: beyond the window's quartiles widened by ``far_iqrs``
    times its interquartile range, or times 1 where that is smaller, so that a flat window's fences
    do not collapse onto it) is read as missing: left out of the statistics and replaced by the
    window's mean. One extreme value in a context thus neither sets the window's scale (a 1e9 among
    values near 0 gave a scale near 1e8 and forecasts of that size) nor reaches the network;
    windows without far values are normalised exactly as without this rule. ``eps`` is a floor on
    the variance, in the same units.

    A window that ends in a *level shift* (:meth:`relevel`: at least
    :data:`~tsrec.config.SHIFT_STEPS` observed values beyond one fence of the window's first quarter,
    up to its last observed step) is read at its new level: its steps before the shift are moved
    by the shift (the difference of the two parts' medians) before the rule above, so that the
    forecast continues the new level instead of the old one (or a blend). One or two far values
    at the end (a typo?) are far as anywhere else. ``far_iqrs=None`` reads every value as it is
    (``far_values="keep"``).
    """

    def __init__(self, n_channels: int, *, affine: bool = True, eps: float = 1e-5,
                 far_iqrs: float | None = FAR_IQRS) -> None:
        super().__init__()
        self.eps = eps
        self.far_iqrs = far_iqrs
        self.weight = nn.Parameter(torch.ones(n_channels)) if affine else None
        self.bias = nn.Parameter(torch.zeros(n_channels)) if affine else None

    def relevel(self, x: Tensor, seen: Tensor, rows: Tensor | None = None) -> Tensor:
        """``x [B, L, C]`` with the steps before a level shift moved to its level (``seen [B, L, C]``
        bool: the observed steps). A window and channel's shift: the run of observed steps after
        the last one on another side of the fences of the window's first ``ceil(L / 4)`` steps
        (its quartiles widened as in :meth:`far`) than its last observed step, when that one lies
        beyond them and the run holds at least ``SHIFT_STEPS``; the earlier observed steps are
        moved by ``median(run) - median(earlier)``. Other windows are returned as they are (only
        those whose observed span exceeds ``far_iqrs``, ``rows`` where given, can hold one)."""
        if self.far_iqrs is None:
            return x
        with torch.no_grad():
            rows = self._spread_rows(x, seen) if rows is None else rows  # [B']
            if not len(rows):
                return x
            xs, ss = x[rows], seen[rows]  # [B', L, C]
            length = x.shape[1]
            head = -(-length // 4)  # the reference: the first ceil(L / 4) steps
            q1, q3 = _quantiles(xs[:, :head], ss[:, :head], (0.25, 0.75))  # [B', 1, C] each
            reach = self.far_iqrs * (q3 - q1).clamp_min(1.0)
            referenced = ss[:, :head].any(1, keepdim=True)  # [B', 1, C]
            side = ((xs > q3 + reach).to(torch.int8) - (xs < q1 - reach).to(torch.int8)) * referenced  # [B', L, C]
            step = torch.arange(length, device=x.device).view(1, length, 1)
            final = torch.where(ss, step, -1).amax(1, keepdim=True)  # [B', 1, C] last observed step
            final_side = side.gather(1, final.clamp_min(0)) * (final >= 0)  # [B', 1, C]
            since = torch.where(ss & (side != final_side), step, -1).amax(1, keepdim=True)  # [B', 1, C]
            run = ss & (step > since) & (final_side != 0)  # [B', L, C]
            run &= run.sum(1, keepdim=True) >= SHIFT_STEPS
            earlier = ss & ~run
            moved = run.any(1, keepdim=True) & earlier.any(1, keepdim=True)  # [B', 1, C]
            shifted = _positions(moved.flatten(1).any(1))  # [B''] the windows moved (the medians' sorts)
            if not len(shifted):
                return x
            xs, run, earlier, moved = xs[shifted], run[shifted], earlier[shifted], moved[shifted]
            new, old = (_quantiles(xs, part, (0.5,))[0] for part in (run, earlier))  # [B'', 1, C] each
            delta = torch.where(earlier & moved, new - old, 0.0).to(x.dtype)  # [B'', L, C]
        return x.index_add(0, rows[shifted], delta)  # outside no_grad: a gradient to x passes through

    def _spread_rows(self, x: Tensor, seen: Tensor) -> Tensor:
        """``[B']`` the windows whose observed values span more than ``far_iqrs`` in some channel:
        the only ones that can hold a far value or a level shift (their fences are at least
        ``far_iqrs`` beyond quartiles that lie within the span)."""
        span = torch.where(seen, x, -torch.inf).amax(1) - torch.where(seen, x, torch.inf).amin(1)  # [B, C]
        return _positions((span > self.far_iqrs).any(1))

    def far(self, x: Tensor, seen: Tensor, rows: Tensor | None = None) -> Tensor:
        """``[B, L, C]`` bool: the observed steps (``seen [B, L, C]`` bool) of ``x [B, L, C]`` outside
        ``[Q1 - k s, Q3 + k s]`` of their window and channel: ``Q1``, ``Q3`` the quartiles of its
        observed steps (linear interpolation, as ``torch.quantile``), ``k = far_iqrs`` and
        ``s = max(Q3 - Q1, 1)``. None are far without ``far_iqrs``; only the windows ``rows``
        ``[B']`` can hold one where given (default: those whose observed span exceeds ``far_iqrs``)."""
        far = torch.zeros_like(seen)
        if self.far_iqrs is None:
            return far
        with torch.no_grad():
            # A value is far only beyond Q1 - k s or Q3 + k s with s >= 1, so only in a window whose
            # observed values span more than k: the quartiles (a sort) are computed for those alone.
            rows = self._spread_rows(x, seen) if rows is None else rows  # [B'] windows that may hold one
            if len(rows):
                x, seen = x[rows], seen[rows]  # [B', L, C]
                q1, q3 = _quantiles(x, seen, (0.25, 0.75))  # [B', 1, C] each
                reach = self.far_iqrs * (q3 - q1).clamp_min(1.0)
                far[rows] = seen & ((x < q1 - reach) | (x > q3 + reach))
            return far

    def normalize(self, x: Tensor, observed: Tensor | None = None) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """``x [B, L, C]`` -> normalised ``x`` and the statistics ``(loc, scale)``, each ``[B, 1, C]``;
        a window ending in a level shift is read at its new level (:meth:`relevel`), and far values
        (:meth:`far`) are left out of the statistics and normalised as the mean."""
        weight = torch.ones_like(x) if observed is None else observed.to(x.dtype)
        seen = weight > 0
        rows = None if self.far_iqrs is None else self._spread_rows(x, seen)  # [B'] the windows either rule reads
        x = self.relevel(x, seen, rows)
        far = self.far(x, seen, rows)  # [B, L, C] (relevel moves windows among rows alone)
        weight = weight.masked_fill(far, 0.0)
        x = x.masked_fill(far, 0.0)
        count = weight.sum(1, keepdim=True).clamp_min(1.0)
        loc = (x * weight).sum(1, keepdim=True) / count
        x = torch.where(far, loc, x)
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


def _positions(mask: Tensor) -> Tensor:
    """``[K]`` the positions of the true entries of ``mask`` ``[B]``, or all ``B`` positions under
    ``torch.compile``: a shape that depends on the data splits the compiled graph (a graph break
    per call), and the windows it would leave out are those no rule changes (the result is the same)."""
    if torch.compiler.is_compiling():
        return torch.arange(mask.shape[0], device=mask.device)
    return mask.nonzero().squeeze(1)


def _quantiles(x: Tensor, seen: Tensor, levels: tuple[float, ...]) -> list[Tensor]:
    """The ``levels`` quantiles of the ``seen`` steps of ``x`` along dim 1 (``[B, L, C]`` each):
    one ``[B, 1, C]`` tensor per level (inf or NaN where nothing is seen)."""
    ordered = torch.where(seen, x, torch.inf).sort(dim=1).values  # [B, L, C], unobserved last
    count = seen.sum(1, keepdim=True)  # [B, 1, C]
    return [_order_quantile(ordered, count, level) for level in levels]


def _order_quantile(ordered: Tensor, count: Tensor, level: float) -> Tensor:
    """The ``level`` quantile of the first ``count`` entries of ``ordered`` along dim 1 (sorted
    ascending): ``ordered [B, L, C]``, ``count [B, 1, C]`` -> ``[B, 1, C]`` (NaN or inf where
    ``count`` is 0)."""
    last = (count - 1).clamp_min(0)
    position = last.to(torch.float32) * level  # [B, 1, C] fractional rank (exact below 2**24 steps)
    below = position.floor().to(torch.int64)
    above = torch.minimum(below + 1, last)
    low, high = ordered.gather(1, below), ordered.gather(1, above)
    return low + (position - below).to(ordered.dtype) * (high - low)


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
