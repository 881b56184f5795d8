"""Per-item, per-channel standard scaling fitted on the training part only, robust to extreme values.

The statistics are explicit arrays (GluonTS style ``loc`` / ``scale``), and this is the one place
where values are scaled and unscaled: ``scaled = (x - loc) / scale``, ``x = scaled * scale + loc``.
Everything here is float64: a level of 1e9 with a swing of 10 keeps its swing (float32 would keep
about 7 significant digits, i.e. steps of 64 at 1e9). Only scaled values are rounded to float32,
for the model (:class:`tsrec.data.windows.WindowDataset`).

Extreme values. Each item and channel also gets robust *fences* ``[low, high]``: its training
quartiles widened by :data:`~tsrec.config.FAR_IQRS` interquartile ranges (Tukey's fences, with a
far wider multiple than his 3: clean heavy-tailed data, such as the ETT load columns, stay inside).
A value beyond them is *far* from the training distribution. With ``robust=True`` (the estimator's
default, ``scaling="robust"``) far values are treated as missing, as NaN is: left out of the
moments, and of the windows a model is fitted on (:func:`tsrec.data.windows.scaled_values` with
``drop_far``). One typo of 1e9 in a series around 5 thus no longer sets the scale to 4e7, which
flattened every other value to a constant and let the model's small errors come back multiplied
by 4e7. On data without far values both modes give the same ``loc`` and ``scale``, bit for bit.

Level shifts. Far values are not all mistakes: a series that jumps from 5 to 50 and stays there
has its new values beyond the fences of its old ones. A run of at least
:data:`~tsrec.config.SHIFT_STEPS` observed far values beyond one fence up to a series' last
observed step (:func:`level_shifts`) is a *level shift*, and data: the training windows keep its
values, scaled as every value (only the *isolated* far values, :meth:`StandardScaler.far_parts`,
are missing there), and the networks' instance normalisation reads a window that ends in one at
its new level (:class:`tsrec.nn.heads.RevIN`). The robust moments still leave every far value
out, a shift's too: ``scale`` stays the series' usual variation, so that RevIN, which judges
values in these units, sees the shift as far from the old level. A typo of 1e9 somewhere, or one
or two at the very end, stays isolated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tsrec.config import FAR_IQRS, SHIFT_STEPS

if TYPE_CHECKING:
    from tsrec.data.frame import Panel

Items = int | Sequence[int] | np.ndarray


class OutlierWarning(UserWarning):
    """Values lie far outside their series' training distribution (beyond the fences of
    :class:`StandardScaler`): ``Forecaster.fit`` and ``predict`` name their series, columns and
    timestamps. Silence it with ``warnings.filterwarnings("ignore", category=OutlierWarning)``."""

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
    low, high: ``[N, C]`` the fences (module docstring): values outside ``[low, high]`` are far
           from the training distribution. ``-inf``/``inf`` where nothing is judged far (a constant
           channel; a scaler saved before the fences existed). Default: ``-inf``/``inf``.
    robust: the moments leave out far values, and the windows a model is fitted on treat the
           isolated ones (not a level shift) as missing (``fit(..., robust=True)``).
    floor: ``[N, C]`` the least value a forecast of the channel takes: 0 for a channel whose observed
           training values are all at least 0 (``fit(..., nonnegative=True)``: counts, sales, load,
           prices are never forecast below zero), else ``-inf``. Default: ``-inf``.
    """

    loc: np.ndarray
    scale: np.ndarray
    low: np.ndarray | None = None
    high: np.ndarray | None = None
    robust: bool = False
    floor: np.ndarray | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "loc", np.asarray(self.loc, dtype=np.float64))
        object.__setattr__(self, "scale", np.asarray(self.scale, dtype=np.float64))
        for name, unbounded in (("low", -np.inf), ("high", np.inf), ("floor", -np.inf)):
            value = np.full(self.loc.shape, unbounded) if getattr(self, name) is None else getattr(self, name)
            object.__setattr__(self, name, np.asarray(value, dtype=np.float64))
        if self.loc.ndim != 2 or not self.loc.shape == self.scale.shape == self.low.shape == self.high.shape \
                == self.floor.shape:
            raise ValueError(
                f"loc, scale, low, high and floor must all have shape [N, C], got {self.loc.shape}, "
                f"{self.scale.shape}, {self.low.shape}, {self.high.shape} and {self.floor.shape}"
            )
        if not np.isin(self.floor, (0.0, -np.inf)).all():
            raise ValueError("floor must be 0 or -inf in every entry")
        if not (np.isfinite(self.scale).all() and (self.scale > 0).all()):
            raise ValueError("scale must be finite and positive")
        if not (self.low <= self.high).all():
            raise ValueError("the fences must have low <= high")

    @classmethod
    def fit(
        cls,
        values: Sequence[np.ndarray],
        observed: Sequence[np.ndarray],
        train_end: Sequence[int] | None = None,
        *,
        robust: bool = False,
        nonnegative: bool = False,
    ) -> StandardScaler:
        """Fit on rows ``[0, train_end[i])`` of each item ``i``, observed entries only.

        values:    per item ``[T_i, C]`` (values where ``observed`` is False are ignored).
        observed:  per item ``[T_i, C]`` bool.
        train_end: per item, end (exclusive) of the training part; default the whole series.
        robust:    leave far values out of the moments (see the module docstring).
        nonnegative: a channel whose observed training values are all at least 0 gets the floor 0.
        """
        ends = [len(v) for v in values] if train_end is None else list(train_end)
        if not len(values) == len(observed) == len(ends):
            raise ValueError(
                f"got {len(values)} value arrays, {len(observed)} masks and {len(ends)} train ends"
            )
        if not values:
            return cls(loc=np.zeros((0, 0)), scale=np.ones((0, 0)), robust=robust)
        parts = []
        for block in item_blocks(ends):  # a few items at a time: the sums' temporaries stay small
            x = np.concatenate([np.asarray(values[i][:ends[i]], dtype=np.float64) for i in block])  # [M, C]
            mask = np.concatenate([np.asarray(observed[i][:ends[i]], dtype=bool) for i in block])
            item = np.repeat(np.arange(len(block)), [ends[i] for i in block])  # [M]
            low, high = _fences(x, mask, item, len(block))  # [n, C] each
            negative = np.zeros((len(block), x.shape[1]), dtype=bool)  # [n, C]
            np.logical_or.at(negative, item, mask & (x < 0))
            floor = np.where(negative | (not nonnegative), -np.inf, 0.0)
            if robust:
                mask = mask & (x >= low[item]) & (x <= high[item])
            parts.append((*_moments(x, mask, item, len(block)), low, high, floor))
        loc, scale, low, high, floor = (np.concatenate(column) for column in zip(*parts))
        return cls(loc=loc, scale=scale, low=low, high=high, robust=robust, floor=floor)

    @classmethod
    def fences_of(cls, panel: Panel) -> StandardScaler:
        """The robust scaler of all of ``panel``'s observed values, a row per item: the fences that
        tell its far values (a typo, a placeholder) whatever a model's own scaler read: auto's
        validation truth, a backtest's, and the test of ``far_values="auto"`` (:mod:`tsrec.data.events`)."""
        return cls.fit([s.values for s in panel.items], [s.observed for s in panel.items], robust=True)

    def floored(self, x: np.ndarray, items: Items, *, scaled: bool = False) -> np.ndarray:
        """``x`` (shaped as for :meth:`transform`; the data's units, or the scaler's with ``scaled``)
        raised to each channel's :attr:`floor` where it lies below it."""
        floor, = self._shaped((self.floor,), items, np.ndim(x))
        if scaled:
            loc, scale = self._shaped((self.loc, self.scale), items, np.ndim(x))
            floor = (floor - loc) / scale
        return np.maximum(x, floor)

    def _shaped(self, stats: tuple[np.ndarray, ...], items: Items, ndim: int) -> tuple[np.ndarray, ...]:
        """Rows ``items`` of each ``[N, C]`` array of ``stats``, shaped to broadcast against an
        ``ndim``-dim ``x``: ``[C]`` for one item, ``[N, 1, ..., 1, C]`` for ``items`` ``[N]``."""
        rows = tuple(s[items] for s in stats)  # [C] or [N, C] each
        if rows[0].ndim == 2:
            shape = (rows[0].shape[0],) + (1,) * (ndim - 2) + (rows[0].shape[1],)  # [N, 1, ..., 1, C]
            rows = tuple(r.reshape(shape) for r in rows)
        return rows

    def transform(self, x: np.ndarray, items: Items) -> np.ndarray:
        """Scale ``x`` in float64: ``[..., C]`` for one item (``items`` an int), or ``[N, ..., C]``
        with ``items`` ``[N]`` (row ``n`` of ``x`` belongs to item ``items[n]``). NaN stays NaN."""
        loc, scale = self._shaped((self.loc, self.scale), items, np.ndim(x))
        return (np.asarray(x, dtype=np.float64) - loc) / scale

    def far(self, x: np.ndarray, items: Items) -> np.ndarray:
        """Where ``x`` (shaped as for :meth:`transform`) lies outside the fences: bool, ``x``'s
        shape (False for NaN)."""
        low, high = self._shaped((self.low, self.high), items, np.ndim(x))
        return _sides(np.asarray(x, dtype=np.float64), low, high) != 0

    def far_parts(self, x: np.ndarray, observed: np.ndarray, items: np.ndarray,
                  series: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The observed far values of ``x`` ``[M, C]`` (``observed`` ``[M, C]``; row ``m`` scaled
        by row ``items[m]``, and a step of the series ``series[m]``, ascending, rows in time
        order), split: ``(isolated, shifted)``, each ``[M, C]`` bool: the level shifts
        (``shifted``, :func:`level_shifts`: runs up to each series' last observed row here) and
        the rest."""
        shifted, placeholders = self._runs(x, observed, items, series)
        low, high = self._shaped((self.low, self.high), items, 2)
        side = _sides(np.asarray(x, dtype=np.float64), low, high)  # [M, C]
        shifted &= ~placeholders
        return observed & (side != 0) & ~shifted, shifted

    def placeholders(self, x: np.ndarray, observed: np.ndarray, items: np.ndarray, series: np.ndarray) -> np.ndarray:
        """``[M, C]`` bool: the runs of far values up to each series' last observed row (arguments as
        for :meth:`far_parts`) that are placeholders, not a level shift (:func:`placeholder_runs`)."""
        return self._runs(x, observed, items, series)[1]

    def _runs(self, x: np.ndarray, observed: np.ndarray, items: np.ndarray,
              series: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``[M, C]`` each: the runs of far values up to each series' end (:func:`level_shifts`) and
        those of them that are placeholders (:func:`placeholder_runs`)."""
        low, high = self._shaped((self.low, self.high), items, 2)
        x = np.asarray(x, dtype=np.float64)
        series = np.asarray(series)
        n = int(series[-1]) + 1 if len(series) else 0
        runs = level_shifts(_sides(x, low, high), observed, series, n)
        return runs, placeholder_runs(x, runs, observed, series, n, low, high)

    def inverse_transform(self, x: np.ndarray, items: Items) -> np.ndarray:
        """Undo :meth:`transform` (float64, same shapes), e.g. on a model's float32 forecasts."""
        loc, scale = self._shaped((self.loc, self.scale), items, np.ndim(x))
        return np.asarray(x, dtype=np.float64) * scale + loc

    def appended(self, other: StandardScaler) -> StandardScaler:
        """This scaler's rows, then ``other``'s (``[N + M, C]``): the rows of series new to a fitted
        scaler, fitted on their own histories (:meth:`tsrec.fitted.FittedState.with_new_series`)."""
        if other.loc.shape[1:] != self.loc.shape[1:] or other.robust != self.robust:
            raise ValueError(f"appended rows need the same channels and robustness: got {other.loc.shape[1:]} "
                             f"(robust={other.robust}) for {self.loc.shape[1:]} (robust={self.robust})")
        rows = {name: np.concatenate([getattr(self, name), getattr(other, name)])
                for name in ("loc", "scale", "low", "high", "floor")}
        return StandardScaler(**rows, robust=self.robust)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable ``{"loc": [[...]], "scale": [[...]], "low": ..., "high": ..., "robust": bool}``
        (exact float64 round trip; unbounded fences are written as JSON ``Infinity``, as Python's
        ``json`` does)."""
        return {"loc": self.loc.tolist(), "scale": self.scale.tolist(), "low": self.low.tolist(),
                "high": self.high.tolist(), "floor": self.floor.tolist(), "robust": self.robust}

    @classmethod
    def from_dict(cls, state: dict[str, Any]) -> StandardScaler:
        """Inverse of :meth:`to_dict`; a state without fences (saved before they existed) gets
        unbounded ones and is not robust, so it scales as it did."""
        fences = {name: np.asarray(state[name]) for name in ("low", "high", "floor") if name in state}
        return cls(loc=np.asarray(state["loc"]), scale=np.asarray(state["scale"]), **fences,
                   robust=bool(state.get("robust", False)))


def level_shifts(side: np.ndarray, observed: np.ndarray, series: np.ndarray, n_series: int) -> np.ndarray:
    """``[M, C]`` bool: the observed entries that make a level shift.

    side:     ``[M, C]`` int: +1 above the high fence, -1 below the low one, 0 between (any value
              where unobserved).
    observed: ``[M, C]`` bool.
    series:   ``[M]`` ascending in ``[0, n_series)``: each row's series (its rows in time order).

    A series' (and channel's) level shift is the run of its observed entries after the last one
    on another side than its last observed entry, when that entry is far (``side != 0``) and the
    run holds at least :data:`~tsrec.config.SHIFT_STEPS` of them: far values beyond one fence up to
    the end, unobserved steps between them allowed.
    """
    rows, channels = side.shape
    if rows == 0:
        return np.zeros(side.shape, dtype=bool)
    step = np.arange(rows)[:, None]  # [M, 1]
    starts = np.searchsorted(series, np.arange(n_series))  # [N]
    present = np.diff(np.r_[starts, rows]) > 0

    def last(mask: np.ndarray) -> np.ndarray:  # [N, C] each series' last row where mask holds, -1 without
        out = np.full((n_series, channels), -1)
        if present.any():
            out[present] = np.maximum.reduceat(np.where(mask, step, -1), starts[present], axis=0)
        return out

    final = last(observed)  # [N, C]
    final_side = np.where(final >= 0, side[final.clip(0), np.arange(channels)], 0)  # [N, C]
    run = observed & (step > last(observed & (side != final_side[series]))[series]) & (final_side[series] != 0)
    return run & (_counts(run, series, n_series) >= SHIFT_STEPS)[series]


#: How many times its series' size (the larger of its typical level and spread) a run of far values
#: must lie from that level to be a placeholder or a unit error by its size alone
#: (:func:`placeholder_runs`): three orders of magnitude, where a level shift of the process itself
#: rarely goes (-9999 in a series around 5 is 2,000 times out; 1e9 typos, 1e8 times).
PLACEHOLDER_JUMP = 1e3


def placeholder_runs(x: np.ndarray, runs: np.ndarray, observed: np.ndarray, series: np.ndarray, n_series: int,
                     low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """``[M, C]`` bool: the runs of ``runs`` (:func:`level_shifts`) that are placeholders or error
    codes rather than a level shift, each whole or not at all.

    x, observed: ``[M, C]`` values and whether each is observed; ``series`` ``[M]`` ascending in
    ``[0, n_series)``; ``low``, ``high`` ``[M, C]``: each row's fences, from which its series'
    typical level ``c`` (their midpoint) and spread ``s`` (their width over ``1 + 2 FAR_IQRS``, the
    interquartile range) are read. A run is a placeholder where

    - it lies :data:`PLACEHOLDER_JUMP` times its series' size ``max(s, |c|)`` or more from ``c``
      (every value of it): orders of magnitude, a typo of 1e9 or a wrong unit; or
    - its values are all one value, and either that value is a code of nines (-999, 9999, -99999:
      what data loggers write for "no reading") or the series' other observed values rarely repeat
      from one step to the next (fewer than half of them): a sensor that reads noise does not
      read one value three times in a row at a new level. A series that holds its values (a price,
      a setting) may shift to one value and stay there: that remains a level shift.
    """
    rows, channels = x.shape
    if rows == 0 or not runs.any():
        return np.zeros(x.shape, dtype=bool)
    center, size = (low + high) / 2, np.maximum((high - low) / (1 + 2 * FAR_IQRS), np.abs((low + high) / 2))
    starts = np.searchsorted(series, np.arange(n_series))  # [N]
    present = np.diff(np.r_[starts, rows]) > 0

    def per_series(ufunc: np.ufunc, y: np.ndarray, empty: float) -> np.ndarray:  # [N, C] reduced over each series' rows
        out = np.full((n_series, channels), empty)
        if present.any():
            out[present] = ufunc.reduceat(y, starts[present], axis=0)
        return out

    value = np.where(runs, x, np.nan)
    top, bottom = per_series(np.fmax, value, np.nan), per_series(np.fmin, value, np.nan)  # [N, C] the runs' extremes
    nearest = per_series(np.fmin, np.where(runs, np.abs(x - center) / np.where(size > 0, size, np.inf), np.nan),
                         np.nan)  # [N, C] the run's value nearest the level, in sizes
    huge = nearest >= PLACEHOLDER_JUMP
    one = top == bottom  # [N, C] a run of one value (False without a run: NaN)
    digits = np.log10(np.abs(top) + 1, where=one, out=np.zeros_like(top))
    nines = one & (digits >= 3) & np.isclose(digits, np.round(digits), rtol=0, atol=1e-12)
    rest = observed & ~runs  # [M, C] the series' other observed values
    pairs = rest[1:] & rest[:-1] & (series[1:] == series[:-1])[:, None]  # [M - 1, C] consecutive ones
    same = pairs & (x[1:] == x[:-1])
    pair_series = series[1:]
    n_pairs, n_same = (np.stack([np.bincount(pair_series[m[:, c]], minlength=n_series) for c in range(channels)], 1)
                       for m in (pairs, same))  # [N, C] each
    noisy = (n_pairs > 0) & (2 * n_same < n_pairs)
    return runs & (huge | (one & (nines | noisy)))[series]


def _sides(x: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """``x``'s shape, int8: +1 above ``high``, -1 below ``low``, 0 between (and for NaN)."""
    return (x > high).astype(np.int8) - (x < low).astype(np.int8)


def _fences(x: np.ndarray, mask: np.ndarray, item: np.ndarray, n_items: int) -> tuple[np.ndarray, np.ndarray]:
    """``low``, ``high`` ``[N, C]``: the fences of the observed entries of ``x`` (arguments as for
    :func:`_moments`): the quartiles ``Q1``, ``Q3`` widened by ``FAR_IQRS`` spreads.

    The spread is the interquartile range; where that is 0 (more than half the values equal the
    median ``m``, as in intermittent demand), it is the median of ``|x - m|`` over the values that
    differ from ``m``, when at least two do, else 0: a single value that differs from an otherwise
    constant series has nothing to be judged against but that constant, and is far. A constant
    channel, or one without observations, gets unbounded fences (nothing is judged far).
    """
    q1, median, q3 = item_quantiles(x, mask, item, n_items, (0.25, 0.5, 0.75))  # [N, C] each
    deviation = np.abs(x - median[item])  # [M, C]
    off = mask & (deviation > 0)  # [M, C] values that differ from their median
    n_off = _counts(off, item, n_items)  # [N, C]
    tied = (q3 == q1) & (n_off >= 2)  # [N, C] where the fallback spread is needed (rarely anywhere)
    typical_off = item_quantiles(deviation, off & tied[item], item, n_items, (0.5,))[0] if tied.any() else q1
    spread = np.where(q3 > q1, q3 - q1, np.where(tied, typical_off, 0.0))  # [N, C]
    bounded = n_off > 0  # [N, C] not constant (NaN quartiles of empty channels compare False too)
    return (np.where(bounded, q1 - FAR_IQRS * spread, -np.inf),
            np.where(bounded, q3 + FAR_IQRS * spread, np.inf))


def _starts(item: np.ndarray, n_items: int) -> np.ndarray:
    """``[N]`` the first row of each item in ``item`` ``[M]`` (ascending; its end when it has none)."""
    return np.searchsorted(item, np.arange(n_items))


def _counts(mask: np.ndarray, item: np.ndarray, n_items: int) -> np.ndarray:
    """``[N, C]`` int: the True entries of ``mask`` ``[M, C]`` per item (``item`` ``[M]``)."""
    counts = np.zeros((n_items, mask.shape[1]), dtype=np.int64)
    for c in range(mask.shape[1]):
        counts[:, c] = np.bincount(item[mask[:, c]], minlength=n_items)
    return counts


def item_quantiles(x: np.ndarray, mask: np.ndarray, item: np.ndarray, n_items: int,
               levels: Sequence[float]) -> list[np.ndarray]:
    """Per item and channel, the ``levels`` quantiles of the observed entries of ``x`` ``[M, C]``
    (linear interpolation between order statistics, as ``np.quantile``): one ``[N, C]`` array per
    level, NaN where an item has no observed entry. ``item`` ``[M]`` ascending in ``[0, N)``.

    Vectorised over items and channels: each item's rows sorted at once, as rows of one padded
    ``[N, W, C]`` array where the items have about one length (padding at most doubles it), else
    by two sorts of all rows (by value, then by item and rank: faster than ``np.lexsort``)."""
    rows = len(item)
    if rows == 0:
        return [np.full((n_items, x.shape[1]), np.nan) for _ in levels]
    count = _counts(mask, item, n_items)  # [N, C] observed entries
    first = _starts(item, n_items)  # [N]
    lengths = np.diff(np.r_[first, rows])  # [N] rows of each item
    keyed = np.where(mask, x, np.inf)  # [M, C]: unobserved entries sort last
    if n_items * int(lengths.max()) <= 2 * rows:
        padded = np.full((n_items, int(lengths.max()), x.shape[1]), np.inf)  # [N, W, C]
        padded[item, np.arange(rows) - first[item]] = keyed
        padded.sort(axis=1)

        def ranked(k: np.ndarray) -> np.ndarray:  # [N, C] the entries of rank k [N, C] of each item
            return np.take_along_axis(padded, k[:, None, :], axis=1)[:, 0, :]
    else:
        by_value = np.ascontiguousarray(keyed.T)  # [C, M]: sorts run along contiguous rows
        rank = np.empty(by_value.shape, dtype=np.int64)  # [C, M] each entry's rank by value
        np.put_along_axis(rank, np.argsort(by_value, axis=1), np.arange(rows)[None], axis=1)
        ordered = np.take_along_axis(by_value, np.argsort(item * rows + rank, axis=1), axis=1).T  # [M, C]

        def ranked(k: np.ndarray) -> np.ndarray:
            return np.take_along_axis(ordered, np.minimum(first[:, None] + k, rows - 1), axis=0)
    last = np.maximum(count - 1, 0)
    out = []
    for level in levels:
        position = last * level  # [N, C] fractional rank within each item
        below = np.floor(position).astype(np.int64)
        low, high = (np.where(count > 0, ranked(k), np.nan)  # NaN, not inf, without entries
                     for k in (below, np.minimum(below + 1, last)))  # [N, C] each
        out.append(low + (position - below) * (high - low))
    return out


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
