"""Per-item, per-channel standard scaling fitted on the training part only.

The statistics are explicit arrays (GluonTS style ``loc`` / ``scale``), and this is the one place
where values are scaled and unscaled: ``scaled = (x - loc) / scale``, ``x = scaled * scale + loc``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

Items = int | Sequence[int] | np.ndarray


@dataclass(frozen=True)
class StandardScaler:
    """Fitted statistics, one row per item.

    loc:   ``[N, C]`` float32 mean of the observed training values (0 for a fully missing channel).
    scale: ``[N, C]`` float32 population standard deviation; 1 where it is (numerically) zero,
           i.e. constant channels, channels with one observed value, fully missing channels.
    """

    loc: np.ndarray
    scale: np.ndarray

    def __post_init__(self) -> None:
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
        locs, scales = [], []
        for x, mask, end in zip(values, observed, ends):
            mask = np.asarray(mask[:end], dtype=bool)  # [t, C]
            x = np.where(mask, np.asarray(x[:end], dtype=np.float64), 0.0)  # [t, C]
            count = np.maximum(mask.sum(axis=0), 1)  # [C]
            loc = x.sum(axis=0) / count  # [C], 0 when nothing is observed
            std = np.sqrt((np.where(mask, x - loc, 0.0) ** 2).sum(axis=0) / count)  # [C]
            flat = ~(std > np.finfo(np.float32).eps * np.maximum(np.abs(loc), 1.0))
            locs.append(loc)
            scales.append(np.where(flat, 1.0, std))
        return cls(
            loc=np.asarray(locs, dtype=np.float32), scale=np.asarray(scales, dtype=np.float32)
        )

    def _params(self, items: Items, ndim: int) -> tuple[np.ndarray, np.ndarray]:
        """``loc``, ``scale`` of ``items`` shaped to broadcast against an ``ndim``-dim ``x``."""
        loc, scale = self.loc[items], self.scale[items]  # [C] or [N, C]
        if loc.ndim == 2:
            shape = (loc.shape[0],) + (1,) * (ndim - 2) + (loc.shape[1],)  # [N, 1, ..., 1, C]
            loc, scale = loc.reshape(shape), scale.reshape(shape)
        return loc, scale

    def transform(self, x: np.ndarray, items: Items) -> np.ndarray:
        """Scale ``x``: ``[..., C]`` for one item (``items`` an int), or ``[N, ..., C]`` with
        ``items`` ``[N]`` (row ``n`` of ``x`` belongs to item ``items[n]``). NaN stays NaN."""
        loc, scale = self._params(items, np.ndim(x))
        return ((np.asarray(x) - loc) / scale).astype(np.float32)

    def inverse_transform(self, x: np.ndarray, items: Items) -> np.ndarray:
        """Undo :meth:`transform`; same shapes."""
        loc, scale = self._params(items, np.ndim(x))
        return (np.asarray(x) * scale + loc).astype(np.float32)

    def to_dict(self) -> dict[str, list[list[float]]]:
        """JSON-serialisable ``{"loc": [[...]], "scale": [[...]]}`` (exact float32 round trip)."""
        return {"loc": self.loc.tolist(), "scale": self.scale.tolist()}

    @classmethod
    def from_dict(cls, state: dict[str, list[list[float]]]) -> StandardScaler:
        """Inverse of :meth:`to_dict`."""
        return cls(
            loc=np.asarray(state["loc"], dtype=np.float32),
            scale=np.asarray(state["scale"], dtype=np.float32),
        )
