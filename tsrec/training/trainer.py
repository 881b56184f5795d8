"""The Lightning Trainer tsrec uses by default, and the data loaders it feeds."""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.callbacks import EarlyStopping
from lightning.pytorch.loggers import CSVLogger
from torch.utils.data import DataLoader, Dataset

from tsrec.training.callbacks import RestoreBestWeights
from tsrec.config import TrainingConfig


def make_trainer(config: TrainingConfig, output_dir: str | Path, *, validate: bool,
                 trainer_kwargs: dict[str, Any] | None = None) -> pl.Trainer:
    """A Trainer with tsrec's defaults, overridden key by key by ``trainer_kwargs``.

    Defaults: ``accelerator="auto"``, one device, CSV logs under ``output_dir``, early stopping on
    ``val_loss`` with the best weights restored (when ``validate``), no checkpoint files, progress bar.
    """
    callbacks: list[pl.Callback] = []
    if validate:
        callbacks.append(RestoreBestWeights("val_loss"))
        if config.patience is not None:
            callbacks.append(EarlyStopping("val_loss", patience=config.patience, mode="min"))
    kwargs: dict[str, Any] = dict(
        accelerator="auto",
        devices=1,
        max_epochs=config.max_epochs,
        precision=config.precision,
        deterministic=config.deterministic,
        gradient_clip_val=config.gradient_clip_val,
        default_root_dir=str(output_dir),
        logger=CSVLogger(str(output_dir), name="logs"),
        callbacks=callbacks,
        enable_checkpointing=False,
        enable_model_summary=False,
        log_every_n_steps=10,
        limit_val_batches=1.0 if validate else 0,
        num_sanity_val_steps=0,
    )
    extra = dict(trainer_kwargs or {})
    if "callbacks" in extra:
        kwargs["callbacks"] = callbacks + list(extra.pop("callbacks"))
    kwargs.update(extra)
    return pl.Trainer(**kwargs)


def make_predict_trainer(config: TrainingConfig, trainer_kwargs: dict[str, Any] | None = None) -> pl.Trainer:
    """A Trainer for ``trainer.predict``: the accelerator the model trains on (``trainer_kwargs``'
    ``accelerator``, default ``"auto"``), one device, the training precision, no logs or bars."""
    accelerator = (trainer_kwargs or {}).get("accelerator", "auto")
    return pl.Trainer(accelerator=accelerator, devices=1, precision=config.precision, logger=False,
                      enable_checkpointing=False, enable_model_summary=False, enable_progress_bar=False)


def make_loader(dataset: Dataset, config: TrainingConfig, *, train: bool) -> DataLoader:
    """Batches of windows; never drops the last partial batch."""
    return DataLoader(dataset, batch_size=config.batch_size, shuffle=train and config.shuffle, drop_last=False,
                      num_workers=config.num_workers, persistent_workers=config.num_workers > 0)


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
