"""The Lightning Trainer tsrec uses by default, and the data loaders it feeds."""

from __future__ import annotations

import contextlib
import datetime
import logging
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import numpy as np
import torch
from lightning.pytorch.callbacks import Checkpoint, TQDMProgressBar
from lightning.pytorch.callbacks.progress.tqdm_progress import Tqdm
from lightning.pytorch.loggers import CSVLogger
from torch.utils.data import DataLoader, Sampler

from tsrec.config import TrainingConfig
from tsrec.data.windows import WindowDataset
from tsrec.training.budget import Budget
from tsrec.training.callbacks import EpochCheckpoint, RestoreBestWeights, SmoothedEarlyStopping


def make_trainer(config: TrainingConfig, output_dir: str | Path, *, budget: Budget, validate: bool,
                 trainer_kwargs: dict[str, Any] | None = None, checkpoint: EpochCheckpoint | None = None,
                 max_seconds: float | None = None) -> pl.Trainer:
    """A Trainer with tsrec's defaults, overridden key by key by ``trainer_kwargs``.

    Defaults: ``accelerator="auto"``, one device, the run's ``budget`` (steps or epochs, and when
    to validate), at most ``max_seconds`` of training, CSV logs under ``output_dir``, early
    stopping on the smoothed ``val_loss`` with the best check's weights restored (when
    ``validate``), a progress bar on stderr when
    stderr is a terminal (``enable_progress_bar`` forces it on or off), and no checkpoint
    files but those of ``checkpoint`` (tsrec's per-epoch ``last.ckpt``; left out when
    ``trainer_kwargs`` set ``enable_checkpointing=False``). Checkpointing is on exactly when a
    :class:`~lightning.pytorch.callbacks.Checkpoint` callback is present.
    """
    extra = dict(trainer_kwargs or {})
    callbacks: list[pl.Callback] = []
    if validate:
        callbacks.append(RestoreBestWeights("val_loss"))
        if config.patience is not None:
            callbacks.append(SmoothedEarlyStopping("val_loss", patience=config.patience))
    if checkpoint is not None and extra.get("enable_checkpointing", True):
        callbacks.append(checkpoint)
    # Progress on stderr (stdout carries results), by default only when stderr is a terminal.
    progress = extra.pop("enable_progress_bar", sys.stderr.isatty())
    if progress:
        callbacks.append(StderrProgressBar())
    callbacks += list(extra.pop("callbacks", []))
    kwargs: dict[str, Any] = {
        "accelerator": "auto",
        "devices": 1,
        "max_epochs": -1 if budget.max_epochs is None else budget.max_epochs,
        "max_steps": -1 if budget.max_steps is None else budget.max_steps,
        "max_time": None if max_seconds is None else datetime.timedelta(seconds=max_seconds),
        "val_check_interval": budget.val_check_steps,
        "check_val_every_n_epoch": 1 if budget.val_check_steps is None else None,
        "precision": config.precision,
        "deterministic": config.deterministic,
        "gradient_clip_val": config.gradient_clip_val,
        "default_root_dir": str(output_dir),
        "logger": CSVLogger(str(output_dir), name="logs"),
        "callbacks": callbacks,
        "enable_checkpointing": any(isinstance(c, Checkpoint) for c in callbacks),
        "enable_model_summary": False,
        "enable_progress_bar": bool(progress),
        "log_every_n_steps": 10,
        "limit_val_batches": 1.0 if validate else 0,
        "num_sanity_val_steps": 0,
    }
    kwargs.update(extra)
    return pl.Trainer(**kwargs)


class StderrProgressBar(TQDMProgressBar):
    """Lightning's tqdm progress bar, written to stderr instead of stdout."""

    def init_sanity_tqdm(self) -> Tqdm:
        with contextlib.redirect_stdout(sys.stderr):
            return super().init_sanity_tqdm()

    def init_train_tqdm(self) -> Tqdm:
        with contextlib.redirect_stdout(sys.stderr):
            return super().init_train_tqdm()

    def init_validation_tqdm(self) -> Tqdm:
        with contextlib.redirect_stdout(sys.stderr):
            return super().init_validation_tqdm()

    def init_predict_tqdm(self) -> Tqdm:
        with contextlib.redirect_stdout(sys.stderr):
            return super().init_predict_tqdm()


def make_predict_trainer(config: TrainingConfig, trainer_kwargs: dict[str, Any] | None = None, *,
                         devices: int | list[int] = 1) -> pl.Trainer:
    """A Trainer for ``trainer.predict``: the accelerator the model trains on (``trainer_kwargs``'
    ``accelerator``, default ``"auto"``), one device (``devices``: Lightning's choice of one, or
    ``[index]``), the training precision, no logs or bars."""
    accelerator = (trainer_kwargs or {}).get("accelerator", "auto")
    return pl.Trainer(accelerator=accelerator, devices=devices, precision=config.precision, logger=False,
                      enable_checkpointing=False, enable_model_summary=False, enable_progress_bar=False)


def epoch_seed(seed: int, epoch: int) -> int:
    """The seed of one epoch's randomness, a function of ``(seed, epoch)`` only; NumPy's
    ``SeedSequence`` mixes the two, so neighbouring seeds or epochs give unrelated streams."""
    return int(np.random.SeedSequence((seed, epoch)).generate_state(1)[0])


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

    def __iter__(self) -> Iterator[int]:
        generator = torch.Generator().manual_seed(epoch_seed(self.seed, self.epoch))
        order = torch.randperm(self.length, generator=generator)  # [length] int64
        for part in order.split(ORDER_CHUNK):  # Python ints for a chunk at a time, never the whole epoch
            yield from part.tolist()


def make_loader(dataset: WindowDataset, config: TrainingConfig, *, train: bool) -> DataLoader:
    """Batches of windows, each gathered in one go (:meth:`WindowDataset.__getitems__`, passed on
    by :meth:`WindowDataset.collate`); never drops the last partial batch. Training windows are
    shuffled (when ``config.shuffle``) by an :class:`EpochShuffleSampler`, which Lightning wraps
    in a ``DistributedSampler`` under DDP; the loader draws its workers' base seed from its own
    generator, never from the global one that dropout uses."""
    sampler = EpochShuffleSampler(len(dataset), config.seed) if train and config.shuffle else None
    return DataLoader(dataset, batch_size=config.batch_size, sampler=sampler, drop_last=False,
                      collate_fn=dataset.collate, num_workers=config.num_workers,
                      persistent_workers=config.num_workers > 0, generator=torch.Generator().manual_seed(config.seed))


@contextlib.contextmanager
def quiet_lightning() -> Iterator[None]:
    """Hide Lightning's start-up chatter and hints for the duration of the block (restored after)."""
    logger = logging.getLogger("lightning.pytorch")
    level = logger.level
    logger.setLevel(logging.WARNING)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", module=r"lightning(\.|_).*")
        warnings.filterwarnings("ignore", message=r".*(does not have many workers|LeafSpec).*")
        try:
            yield
        finally:
            logger.setLevel(level)
