"""Which windows each process reads under DDP: every window once, the same steps on every rank, one
process unchanged (the 2-process runs themselves are in test_ddp.py)."""

import numpy as np
import pytest
from torch.utils.data import DataLoader

from tsrec.config import TrainingConfig
from tsrec import collective
from tsrec.training import EpochShuffleSampler, make_trainer, plan_budget, sharding
from tsrec.training.sharding import GlobalBatchSampler, ShardSampler, epoch_seed, shard_bounds


def as_rank(monkeypatch, rank, size):
    monkeypatch.setattr(sharding, "world", lambda: (rank, size))


@pytest.mark.parametrize("shuffle", [True, False])
def test_one_process_reads_the_batches_of_a_plain_loader(shuffle):
    sampler = GlobalBatchSampler(103, 10, seed=5, shuffle=shuffle)
    plain = DataLoader(range(103), batch_size=10, sampler=EpochShuffleSampler(103, 5) if shuffle else None)
    for epoch in (0, 3):
        sampler.set_epoch(epoch)
        if shuffle:
            plain.sampler.set_epoch(epoch)
        assert list(sampler) == [batch.tolist() for batch in plain]
    assert len(sampler) == len(plain) == 11


@pytest.mark.parametrize("length, batch, size", [(103, 10, 2), (101, 10, 3), (100, 10, 4), (5, 8, 2), (21, 10, 2)])
def test_ranks_split_each_global_batch_and_read_every_window_once(monkeypatch, length, batch, size):
    per_rank = []
    for rank in range(size):
        as_rank(monkeypatch, rank, size)
        sampler = GlobalBatchSampler(length, batch, seed=1, shuffle=True)
        sampler.set_epoch(2)
        per_rank.append(list(sampler))
        assert len(sampler) == len(per_rank[-1])
    assert len({len(batches) for batches in per_rank}) == 1  # the same number of steps on every rank
    assert all(batch for batches in per_rank for batch in batches)  # no empty rank batch
    read = [i for batches in per_rank for batch in batches for i in batch]
    assert sorted(read) == list(range(length))
    as_rank(monkeypatch, 0, 1)
    one = GlobalBatchSampler(length, batch, seed=1, shuffle=True)
    one.set_epoch(2)
    merged = [sum((batches[k] for batches in per_rank), []) for k in range(len(per_rank[0]))]
    expected = list(one)
    if length % batch and length % batch < size:  # the small last batch joins the one before
        expected = expected[:-2] + [expected[-2] + expected[-1]]
    assert merged == expected


def test_shards_are_contiguous_unpadded_and_in_rank_order(monkeypatch):
    assert [shard_bounds(10, r, 3) for r in range(3)] == [(0, 3), (3, 6), (6, 10)]
    shares = []
    for rank in range(4):
        as_rank(monkeypatch, rank, 4)
        sampler = ShardSampler(6)
        shares.append(list(sampler))
        assert len(sampler) == len(shares[-1])
    assert sum(shares, []) == list(range(6)) and [] not in shares[1:]
    as_rank(monkeypatch, 0, 1)
    assert list(ShardSampler(6)) == list(range(6))


def test_gather_is_the_identity_in_one_process():
    part = np.arange(6.0).reshape(3, 2)
    assert collective.gather(part) is part


def test_each_rank_draws_its_own_randomness_and_rank_0_that_of_one_process():
    assert epoch_seed(3, 1, rank=0) == epoch_seed(3, 1) != epoch_seed(3, 1, rank=1) != epoch_seed(3, 1, rank=2)


def test_lightnings_padding_sampler_is_refused_with_the_reason():
    with pytest.raises(ValueError, match=r"use_distributed_sampler=True is not supported: tsrec shards the windows"):
        make_trainer(TrainingConfig(), "unused", budget=plan_budget(TrainingConfig(max_epochs=1), 10), validate=False,
                     trainer_kwargs={"use_distributed_sampler": True})
