"""torch's intra-op threads while a network trains, chosen for the work.

torch runs each operator on one thread per core by default. A small network's operators are too
short to share, and a second thread competes with every other process for the cores
(``python -m benchmarks.threads``, PatchTST on a 2-core machine): idle, two threads trained
d_model 16 and 32 (82k and 194k parameters) 1.24x and 1.17x faster for 1.52x and 1.56x the CPU time,
where d_model 64 and 128 (412k and 921k) gained 1.31x and 1.34x for 1.41x and 1.38x
(benchmarks/results/threads.md); loaded (load average 7-8), two threads made d_model 16 12x slower
for 13x the CPU time (threads_loaded.md). Below :data:`SMALL_NETWORK_PARAMETERS` a network trains on
one thread, which leaves the other cores to other candidates, series or jobs;
``Forecaster(..., threads=n)`` sets the count.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import nn

__all__ = ["SMALL_NETWORK_PARAMETERS", "torch_threads", "training_threads"]

#: Networks with fewer parameters than this train on one intra-op thread (every default network).
SMALL_NETWORK_PARAMETERS = 200_000


def training_threads(model: nn.Module, requested: int | None) -> int:
    """The intra-op threads to train ``model`` on: ``requested``, else one for a network of fewer
    than :data:`SMALL_NETWORK_PARAMETERS` parameters, else torch's current setting."""
    if requested is not None:
        return requested
    size = sum(p.numel() for p in model.parameters())
    return 1 if size < SMALL_NETWORK_PARAMETERS else torch.get_num_threads()


@contextlib.contextmanager
def torch_threads(count: int) -> Iterator[None]:
    """torch's intra-op threads set to ``count`` inside the block, restored after it."""
    before = torch.get_num_threads()
    if count != before:
        torch.set_num_threads(count)
    try:
        yield
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)
