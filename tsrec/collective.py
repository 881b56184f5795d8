"""The process group, and what its ranks exchange: the one module that knows about ranks.

Nothing here imports an estimator: the forecaster, backtests and the Ray and Spark workers call it.

- :func:`world`: this process's ``(rank, world size)``; :func:`alone`: a block run as a world of one.
- :func:`gather_parts` (any picklable value, errors raised in every rank), :func:`gather` (arrays
  in rank order: the windows of :class:`~tsrec.training.sharding.ShardSampler`'s shares),
  :func:`gather_frames` (frames, sent column by column).
- :func:`split_ids` and :func:`by_series`: the series of a source split among the ranks, each
  computing on its own, the results gathered in rank order.

``torch.distributed.all_gather_object`` pickles each rank's whole object, pads every pickle to the
largest and unpickles all of them in every rank: for the 24 million rows of a 100,000-series
backtest that took longer than the backtest itself (23.6 s against 16 s, two ranks) and 5 GB more
memory per rank. :func:`gather_frames` instead sends each column once from each rank straight into
the concatenated column (one ``broadcast`` per column and rank, no padding): numbers, booleans and
timestamps as their bytes, a column of Python objects (the ids) as integer codes with each rank's
distinct values. The float64 columns are received into one ``[columns, rows]`` block that the frame
holds without a copy (:func:`~tsrec.data.frame.block_frame`).

The rank and world size are read when asked (:func:`world`): in the process that starts a DDP run,
the process group only exists once ``Trainer.fit`` has started the others.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import pandas as pd
import torch

from tsrec._checks import check_int
from tsrec.data.frame import block_frame
from tsrec.data.source import Source, is_parquet, series_ids, subset

__all__ = ["alone", "by_series", "gather", "gather_frames", "gather_parts", "split_ids", "world"]

T = TypeVar("T")
_ALONE = contextvars.ContextVar("tsrec_alone", default=False)


def world() -> tuple[int, int]:
    """``(rank, world size)`` of the initialized default process group, else ``(0, 1)``; ``(0, 1)``
    inside :func:`alone`."""
    if not _ALONE.get() and torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


@contextlib.contextmanager
def alone() -> Iterator[None]:
    """Within the block this process works as a world of one (:func:`world` is ``(0, 1)``): on its
    own part of a job split among the ranks, with no collective call."""
    token = _ALONE.set(True)
    try:
        yield
    finally:
        _ALONE.reset(token)


def gather_parts(compute: Callable[[], T]) -> list[T]:
    """Every rank's ``compute()``, run :func:`alone`, in rank order on every rank (``[compute()]`` in
    one process). An exception in any rank is raised in every rank, so that none waits for the
    others forever: its own in the rank that raised it, a ``RuntimeError`` naming that rank and
    quoting it in the others. Every rank must call it."""
    rank, size = world()
    if size == 1:
        return [compute()]
    result, error = None, None
    try:
        with alone():
            result = compute()
    except Exception as err:  # told to every rank before it is raised
        error = err
    parts: list[tuple[T | None, str | None] | None] = [None] * size
    torch.distributed.all_gather_object(parts, (result, None if error is None else f"{type(error).__name__}: {error}"))
    if error is not None:
        raise error
    failed = [(r, part[1]) for r, part in enumerate(parts) if part is not None and part[1] is not None]
    if failed:
        raise RuntimeError(f"process {failed[0][0]} failed ({failed[0][1]}); its traceback is in its output")
    return [part[0] for part in parts]  # type: ignore[index]


def gather(part: np.ndarray) -> np.ndarray:
    """This rank's ``part`` ``[n_r, ...]`` and the other ranks', concatenated in rank order on every
    rank (the windows of :class:`~tsrec.training.sharding.ShardSampler`'s shares back in their order); ``part`` itself in one
    process. Every rank must call it."""
    size = world()[1]
    if size == 1:
        return part
    parts: list[np.ndarray | None] = [None] * size
    torch.distributed.all_gather_object(parts, part)
    return np.concatenate(parts)


@dataclass(frozen=True)
class _Part:
    """What a rank tells the others of its frame: its columns, their dtypes, its number of rows and,
    per column of Python objects, its distinct values (the codes it sends index them)."""

    columns: tuple
    dtypes: tuple
    rows: int
    uniques: dict
    sendable: bool = True

    @property
    def schema(self) -> tuple:
        return self.columns, tuple(str(dtype) for dtype in self.dtypes)


def _wire(column: pd.Series) -> tuple[np.ndarray, np.ndarray | None] | None:
    """``column`` as a contiguous array of fixed-size items to send, and its distinct values for a
    column of objects (its codes are sent); None for a dtype sent only by pickling (extension dtypes)."""
    dtype = column.dtype
    if dtype == object:
        codes, uniques = pd.factorize(column.to_numpy(), use_na_sentinel=False)
        return codes.astype(np.int64), np.asarray(uniques, dtype=object)
    if isinstance(dtype, pd.DatetimeTZDtype):
        return np.ascontiguousarray(column.array.asi8), None  # UTC
    if isinstance(dtype, np.dtype) and dtype.kind in "biufmM":
        return np.ascontiguousarray(column.to_numpy()).view(np.int64 if dtype.kind in "mM" else dtype), None
    return None


def _column(wire: np.ndarray, dtype: object, uniques: list[np.ndarray], bounds: list[int]) -> np.ndarray | pd.Index:
    """The concatenated column from its received ``wire`` array (codes rebased onto the ranks'
    ``uniques`` laid end to end; ``bounds``: each rank's first row, then the total)."""
    if dtype == object:
        base = np.cumsum([0] + [len(u) for u in uniques[:-1]])
        for start, end, shift in zip(bounds[:-1], bounds[1:], base.tolist()):
            wire[start:end] += shift
        return np.concatenate(uniques)[wire]
    if isinstance(dtype, pd.DatetimeTZDtype):
        return pd.DatetimeIndex(wire.view(f"M8[{dtype.unit}]"), tz="UTC").tz_convert(dtype.tz)
    return wire.view(dtype)


def gather_frames(compute: Callable[[], pd.DataFrame | None]) -> pd.DataFrame | None:
    """Every rank's ``compute()`` (a frame, or None for no rows), concatenated in rank order with a
    new ``RangeIndex``, on every rank (None when every rank has None); ``compute()`` itself in one
    process. Every rank must call it. An error in one rank's ``compute`` is raised in every rank
    (:func:`~tsrec.training.sharding.gather_parts`). Frames whose columns or dtypes differ between
    the ranks, or with a dtype that has no fixed-size form (an extension dtype), are pickled whole."""
    rank, size = world()
    if size == 1:
        return compute()
    own: list[pd.DataFrame | None] = []
    wires: dict = {}

    def describe() -> _Part | None:
        frame = compute()
        own.append(frame)
        if frame is None:
            return None
        part = _Part(tuple(frame.columns), tuple(frame.dtypes), len(frame), {})
        for position in range(frame.shape[1]):
            sent = None if frame.columns.has_duplicates else _wire(frame.iloc[:, position])
            if sent is None:
                return dataclasses.replace(part, sendable=False)
            wires[position], part.uniques[position] = sent
        return part

    parts = gather_parts(describe)
    present = [part for part in parts if part is not None]
    if not present:
        return None
    if any(part.schema != present[0].schema or not part.sendable for part in present):
        frames = gather_parts(lambda: own[0])
        return pd.concat([frame for frame in frames if frame is not None], ignore_index=True)
    first = present[0]
    rows = [0 if part is None else part.rows for part in parts]
    bounds = np.cumsum([0, *rows]).tolist()  # [W + 1]
    floats = [p for p, dtype in enumerate(first.dtypes) if dtype == np.float64]
    block = np.empty((len(floats), bounds[-1]))  # the float64 columns, received in place
    others = {}
    for position, dtype in enumerate(first.dtypes):
        if position in floats:
            wire = block[floats.index(position)]
        else:
            wire = np.empty(bounds[-1], _wire_dtype(dtype))
        for source, (start, end) in enumerate(zip(bounds[:-1], bounds[1:])):
            if end > start:
                if source == rank:
                    wire[start:end] = wires[position]
                torch.distributed.broadcast(torch.from_numpy(wire[start:end].view(np.uint8)), src=source)
        if position not in floats:
            uniques = [part.uniques[position] if part is not None else np.array([], object) for part in parts]
            others[first.columns[position]] = _column(wire, dtype, uniques, bounds)
    return block_frame(list(first.columns), block, others)


def _wire_dtype(dtype: object) -> np.dtype:
    """The dtype of the array a column of ``dtype`` is sent as (for a rank without rows of its own)."""
    if dtype == object or isinstance(dtype, pd.DatetimeTZDtype) or dtype.kind in "mM":
        return np.dtype(np.int64)
    return np.dtype(dtype)


def split_ids(ids: Sequence[Any] | pd.Series | np.ndarray, parts: int) -> list[np.ndarray]:
    """The distinct ``ids`` in at most ``parts`` runs of near-equal size, in their order as text
    (so that the parts, in order, hold the series in the order ``predict`` returns them)."""
    parts = check_int("parts", parts)
    unique = pd.unique(pd.Series(ids, dtype=object))
    order = np.argsort(np.asarray([str(i) for i in unique]), kind="stable")
    return [run for run in np.array_split(unique[order], min(parts, max(len(unique), 1))) if len(run)]


def by_series(source: Source, id_col: Hashable, compute: Callable[[Source], pd.DataFrame]) -> pd.DataFrame:
    """``compute`` of every rank's run of the series of ``source`` (:func:`split_ids` among the
    ranks of the process group; :func:`~tsrec.data.source.subset`: a frame's rows of those series,
    or from Parquet a :class:`~tsrec.data.source.ParquetSeries` of them, whose rows alone are read),
    concatenated in rank order (the series' order as text) on every rank (:func:`gather_frames`:
    each rank computes alone, an error in one is raised in all, and the columns travel as arrays).
    From Parquet, each rank reads the ids of its share of the files, and the ranks exchange them.
    A rank left without series (fewer series than ranks) computes nothing. A DataFrame without
    ``id_col`` is given to ``compute`` whole (in every rank), which names the problem. Every rank
    must call it."""
    rank, size = world()
    if is_parquet(source):  # each rank reads the ids of its share of the files
        ids = np.concatenate(gather_parts(lambda: series_ids(source, id_col, part=(rank, size))))
        if not len(ids):
            series_ids(source, id_col)  # all the files together: the error that they hold no row
    elif id_col not in getattr(source, "columns", ()):
        return compute(source)  # which names the problem
    else:
        ids = series_ids(source, id_col)
    runs = split_ids(ids, size)

    def share() -> pd.DataFrame | None:
        return None if rank >= len(runs) else compute(subset(source, id_col, runs[rank]))

    return gather_frames(share)
