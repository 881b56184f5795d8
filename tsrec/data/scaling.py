"""Per-item, per-channel standard scaling fitted on the training part only.

The statistics are explicit arrays (GluonTS style ``loc`` / ``scale``), and this is the one place
where values are scaled and unscaled: ``scaled = (x - loc) / scale``, ``x = scaled * scale + loc``.
Everything here is float64: a level of 1e9 with a swing of 10 keeps its swing (float32 would keep
about 7 significant digits, i.e. steps of 64 at 1e9). Only scaled values are rounded to float32,
for the model (:class:`tsrec.data.windows.WindowDataset`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

Items = int | Sequence[int] | np.ndarray
#: Most time steps whose statistics are computed at once (bounds the temporaries of many series).
BLOCK_STEPS = 2**20


def item_blocks(lengths: Sequence[int]) -> list[range]:
    """Consecutive runs of items whose ``lengths`` add up to at most :data:`BLOCK_STEPS` (an item
    longer than that alone): what array operations over many series take at a time."""
    blocks, start, total = [], 0, 0
    for i, length in enumerate(lengths):
        if total and total + length > BLOCK_STEPS:
            blocks.append(range(start, i))
            start, total = i, 0
        total += length
    blocks.append(range(start, len(lengths)))
    return blocks


@dataclass(frozen=True)
class StandardScaler:
    """Fitted statistics, one row per item, in float64 (as the values they scale).

    loc:   ``[N, C]`` mean of the observed training values (0 for a channel with none).
    scale: ``[N, C]`` population standard deviation; 1 for a constant channel (one whose observed
           values are all equal, or that has at most one, or none).
    """

    loc: np.ndarray
    scale: np.ndarray

    def __post_init__(self) -> None:
        object.__setattr__(self, "loc", np.asarray(self.loc, dtype=np.float64))
        object.__setattr__(self, "scale", np.asarray(self.scale, dtype=np.float64))
        if self.loc.ndim != 2 or self.loc.shape != self.scale.shape:
            raise ValueError(
                f"loc and scale must both have shape [N, C], got {self.loc.shape} and "
                f"{self.scale.shape}"
            )
        if not (np.isfinite(self.scale).all() and (self.scale > 0).all()):
            raise ValueError("scale must be finite and positive")

    @classmethod
    def fit(
        cls,
        values: Sequence[np.ndarray],
        observed: Sequence[np.ndarray],
        train_end: Sequence[int] | None = None,
    ) -> StandardScaler:
        """Fit on rows ``[0, train_end[i])`` of each item ``i``, observed entries only.

        values:    per item ``[T_i, C]`` (values where ``observed`` is False are ignored).
        observed:  per item ``[T_i, C]`` bool.
        train_end: per item, end (exclusive) of the training part; default the whole series.
        """
        ends = [len(v) for v in values] if train_end is None else list(train_end)
        if not len(values) == len(observed) == len(ends):
            raise ValueError(
                f"got {len(values)} value arrays, {len(observed)} masks and {len(ends)} train ends"
            )
        if not values:
            return cls(loc=np.zeros((0, 0)), scale=np.ones((0, 0)))
        parts = []
        for block in item_blocks(ends):  # a few items at a time: the sums' temporaries stay small
            x = np.concatenate([np.asarray(values[i][:ends[i]], dtype=np.float64) for i in block])  # [M, C]
            mask = np.concatenate([np.asarray(observed[i][:ends[i]], dtype=bool) for i in block])
            parts.append(_moments(x, mask, np.repeat(np.arange(len(block)), [ends[i] for i in block]), len(block)))
        return cls(loc=np.concatenate([loc for loc, _ in parts]), scale=np.concatenate([scale for _, scale in parts]))

    def _params(self, items: Items, ndim: int) -> tuple[np.ndarray, np.ndarray]:
        """``loc``, ``scale`` of ``items`` shaped to broadcast against an ``ndim``-dim ``x``."""
        loc, scale = self.loc[items], self.scale[items]  # [C] or [N, C]
        if loc.ndim == 2:
            shape = (loc.shape[0],) + (1,) * (ndim - 2) + (loc.shape[1],)  # [N, 1, ..., 1, C]
            loc, scale = loc.reshape(shape), scale.reshape(shape)
        return loc, scale

    def transform(self, x: np.ndarray, items: Items) -> np.ndarray:
        """Scale ``x`` in float64: ``[..., C]`` for one item (``items`` an int), or ``[N, ..., C]``
        with ``items`` ``[N]`` (row ``n`` of ``x`` belongs to item ``items[n]``). NaN stays NaN."""
        loc, scale = self._params(items, np.ndim(x))
        return (np.asarray(x, dtype=np.float64) - loc) / scale

    def inverse_transform(self, x: np.ndarray, items: Items) -> np.ndarray:
        """Undo :meth:`transform` (float64, same shapes), e.g. on a model's float32 forecasts."""
        loc, scale = self._params(items, np.ndim(x))
        return np.asarray(x, dtype=np.float64) * scale + loc

    def to_dict(self) -> dict[str, list[list[float]]]:
        """JSON-serialisable ``{"loc": [[...]], "scale": [[...]]}`` (exact float64 round trip)."""
        return {"loc": self.loc.tolist(), "scale": self.scale.tolist()}

    @classmethod
    def from_dict(cls, state: dict[str, list[list[float]]]) -> StandardScaler:
        """Inverse of :meth:`to_dict`."""
        return cls(loc=np.asarray(state["loc"]), scale=np.asarray(state["scale"]))


def _moments(x: np.ndarray, mask: np.ndarray, item: np.ndarray, n_items: int) -> tuple[np.ndarray, np.ndarray]:
    """``loc``, ``scale`` ``[N, C]`` of the observed entries of ``x`` ``[M, C]`` float64 (``mask``
    ``[M, C]``) per item (``item`` ``[M]``, ascending, in ``[0, N)``), as in :class:`StandardScaler`.

    The sums run on ``x`` divided by a power of two near each item's largest magnitude (an exact
    division), so they stay finite for any finite ``x``; squares of values above 1e154 would
    overflow float64.
    """
    x = np.where(mask, x, 0.0)
    starts = np.searchsorted(item, np.arange(n_items))  # [N] first row of each item (its end when it has none)
    rows = np.diff(np.r_[starts, len(item)])  # [N]
    present = rows > 0

    def per_item(ufunc: np.ufunc, y: np.ndarray, empty: float) -> np.ndarray:
        """``ufunc`` reduced over each item's rows of ``y`` ``[M, C]``: ``[N, C]``, ``empty`` without rows."""
        out = np.full((n_items, y.shape[1]), empty)
        if present.any():
            out[present] = ufunc.reduceat(y, starts[present], axis=0)
        return out

    _, exponent = np.frexp(per_item(np.maximum, np.abs(x), 0.0))  # [N, C]
    unit = np.ldexp(1.0, exponent - 1)  # [N, C], <= max |x|, so |x / unit| < 2
    y = x / unit[item]  # [M, C]
    observed = per_item(np.add, mask.astype(np.float64), 0.0)  # [N, C] observed entries
    count = np.maximum(observed, 1)
    mean = per_item(np.add, y, 0.0) / count  # [N, C], 0 when nothing is observed
    std = np.sqrt(per_item(np.add, np.where(mask, y - mean[item], 0.0) ** 2, 0.0) / count) * unit  # [N, C]
    high = per_item(np.maximum, np.where(mask, x, -np.inf), -np.inf)  # [N, C]
    low = per_item(np.minimum, np.where(mask, x, np.inf), np.inf)
    constant = ~(high > low)  # [N, C], True without observations
    loc = np.where(constant, np.where(observed > 0, high, 0.0), mean * unit)  # a constant exactly
    return loc, np.where(constant, 1.0, std)
