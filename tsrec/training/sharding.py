"""Which windows each process reads under ``torch.distributed`` (DDP), so that several processes
train on, validate on and forecast exactly the windows one process would: none dropped, none
repeated.

Lightning's own answer, a ``DistributedSampler`` around every loader, pads each rank's share by
repeating windows, so a validation loss or a backtest under DDP would count some windows twice.
tsrec shards the windows itself (the trainer runs with ``use_distributed_sampler=False``):

- training (:class:`GlobalBatchSampler`): the batches one process would draw, each split among the
  ranks, so every window is read once per epoch, every rank runs the same number of steps, and
  DDP's gradient average is that of the global batch;
- evaluation and prediction (:class:`ShardSampler`): each rank a contiguous run of the windows, the
  runs in rank order, without padding; :func:`~tsrec.collective.gather` puts the
  ranks' outputs back in window order.

The process group itself (the rank and world size, read when a loader is iterated, and the
gathers) is :mod:`tsrec.collective`'s.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch
from torch.utils.data import Sampler

from tsrec.collective import world

__all__ = ["EpochShuffleSampler", "GlobalBatchSampler", "ShardSampler", "epoch_seed", "shard_bounds"]


def epoch_seed(seed: int, epoch: int, *, rank: int = 0) -> int:
    """The seed of one epoch's randomness in process ``rank`` of a DDP run (0 in one process), a
    function of ``(seed, epoch, rank)`` only; NumPy's ``SeedSequence`` mixes them, so neighbouring
    seeds, epochs or ranks give unrelated streams (each rank draws its own dropout masks for its
    part of a batch, as one process draws one per window)."""
    entropy = (seed, epoch) if rank == 0 else (seed, epoch, rank)
    return int(np.random.SeedSequence(entropy).generate_state(1)[0])


#: Indices an :class:`EpochShuffleSampler` turns into Python ints at a time: their memory stays bounded
#: (as a list of the whole epoch it grew with the windows: 1.1 GB more peak at 100,000 series x 500 steps).
ORDER_CHUNK = 2**16


class EpochShuffleSampler(Sampler[int]):
    """A random order of ``range(length)`` per epoch, a function of ``(seed, epoch)`` only.

    Lightning calls :meth:`set_epoch` before every epoch, so a run resumed from a checkpoint draws
    the same orders as an uninterrupted one. ``RandomSampler`` would take its order from a generator
    whose state depends on everything drawn before (and on when the loader's iterator is created,
    which differs between a fresh and a resumed run), and that state is not checkpointed.
    """

    def __init__(self, length: int, seed: int) -> None:
        self.length = length
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.length

    def order(self) -> torch.Tensor:
        """``[length]`` int64: this epoch's order."""
        generator = torch.Generator().manual_seed(epoch_seed(self.seed, self.epoch))
        return torch.randperm(self.length, generator=generator)

    def __iter__(self) -> Iterator[int]:
        for part in self.order().split(ORDER_CHUNK):  # Python ints for a chunk at a time, never the whole epoch
            yield from part.tolist()


def shard_bounds(length: int, rank: int, size: int) -> tuple[int, int]:
    """``[start, end)`` of rank ``rank``'s contiguous share of ``length`` items among ``size`` ranks
    (shares differ by at most one item, earlier ranks take the larger ones)."""
    return length * rank // size, length * (rank + 1) // size


class ShardSampler(Sampler[int]):
    """Indices ``0 .. length - 1`` in order, or under a process group of ``W`` ranks this rank's
    contiguous share of them (:func:`shard_bounds`): every index read by exactly one rank."""

    def __init__(self, length: int) -> None:
        self.length = length

    def _bounds(self) -> tuple[int, int]:
        return shard_bounds(self.length, *world())

    def __len__(self) -> int:
        start, end = self._bounds()
        return end - start

    def __iter__(self) -> Iterator[int]:
        return iter(range(*self._bounds()))


class GlobalBatchSampler(Sampler[list[int]]):
    """Training batches: one process's batches of ``batch_size`` windows (in the epoch's order of an
    :class:`~tsrec.training.EpochShuffleSampler` of ``(seed, epoch)``, or in order without
    ``shuffle``), each split into ``W`` contiguous near-equal parts under a process group of ``W``
    ranks, of which this rank reads its own. A last batch with fewer windows than ranks is merged
    into the one before, so that no rank gets an empty batch. One process: exactly the batches of a
    ``DataLoader(batch_size=batch_size, sampler=EpochShuffleSampler(...))``.

    ``sampler`` (the epoch's order) is where Lightning finds ``set_epoch``.
    """

    def __init__(self, length: int, batch_size: int, *, seed: int, shuffle: bool) -> None:
        self.length = length
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.sampler = EpochShuffleSampler(length, seed)

    def set_epoch(self, epoch: int) -> None:
        self.sampler.set_epoch(epoch)

    def _starts(self, size: int) -> np.ndarray:
        """``[B + 1]`` the global batches' bounds in the epoch's order."""
        starts = np.append(np.arange(0, self.length, self.batch_size), self.length)
        if len(starts) > 2 and starts[-1] - starts[-2] < size:
            starts = np.delete(starts, -2)  # a last batch too small to give every rank a window
        return starts

    def __len__(self) -> int:
        return len(self._starts(world()[1])) - 1

    def __iter__(self) -> Iterator[list[int]]:
        rank, size = world()
        order = self.sampler.order() if self.shuffle else torch.arange(self.length)  # [length]
        starts = self._starts(size)
        for start, end in zip(starts[:-1].tolist(), starts[1:].tolist()):
            first, last = shard_bounds(end - start, rank, size)
            yield order[start + first:start + last].tolist()
