"""The Lightning Trainer tsrec uses by default, and the data loaders it feeds."""

from __future__ import annotations

import contextlib
import datetime
import logging
import signal
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import Checkpoint, TQDMProgressBar
from lightning.pytorch.callbacks.progress.tqdm_progress import Tqdm
from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.utilities.exceptions import SIGTERMException
from torch.utils.data import DataLoader

from tsrec.config import TrainingConfig
from tsrec.data.windows import WindowDataset
from tsrec.training.budget import Budget
from tsrec.training.callbacks import EpochCheckpoint, RestoreBestWeights, SmoothedEarlyStopping
from tsrec.training.sharding import GlobalBatchSampler, ShardSampler

log = logging.getLogger(__name__)

#: The exit status of a program ended by SIGTERM, by the shell's convention (128 + the signal number).
EXIT_SIGTERM = 128 + signal.SIGTERM


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
    :class:`~lightning.pytorch.callbacks.Checkpoint` callback is present. An
    :class:`InterruptRecorder` lets :func:`fit_or_raise` tell a Ctrl-C from other exits.
    """
    extra = dict(trainer_kwargs or {})
    if extra.get("use_distributed_sampler", False):
        raise ValueError("trainer_kwargs use_distributed_sampler=True is not supported: tsrec shards the windows "
                         "among DDP processes itself (every window once, none repeated to pad a process's share; "
                         "Lightning's DistributedSampler pads); leave use_distributed_sampler out")
    callbacks: list[pl.Callback] = [InterruptRecorder()]
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
        "use_distributed_sampler": False,  # tsrec's loaders shard the windows themselves (tsrec.training.sharding)
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


# ---------------------------------------------------------------------------------------- signals
class TrainingTerminated(SystemExit, KeyboardInterrupt):
    """SIGTERM stopped training; ``str()`` is the line logged then: what was kept.

    A ``SystemExit`` with status 143 (128 + SIGTERM): uncaught, it ends the program with the status
    of a process killed by SIGTERM, after ``finally`` blocks and ``atexit`` handlers have run. And a
    ``KeyboardInterrupt``, so that test runners, which report a ``SystemExit`` as one failed test
    and carry on, stop as on Ctrl-C. ``checkpoint``: the checkpoint ``fit(..., resume=True)``
    continues from, or None when none was kept.
    """

    def __init__(self, message: str, checkpoint: Path | None) -> None:
        KeyboardInterrupt.__init__(self, message)
        self.code = EXIT_SIGTERM
        self.checkpoint = checkpoint


class InterruptRecorder(pl.Callback):
    """Keeps the exception that stopped ``Trainer.fit``: Lightning shows a Ctrl-C to callbacks only
    (``on_exception``) before it exits with ``sys.exit(1)``."""

    def __init__(self) -> None:
        self.exception: BaseException | None = None

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.exception = None

    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException) -> None:
        self.exception = exception


def fit_or_raise(trainer: pl.Trainer, module: pl.LightningModule, train_loader: DataLoader,
                 val_loader: DataLoader | None = None, *, ckpt_path: str | Path | None = None,
                 resumable: Path | None = None, unkept: str | None = None) -> None:
    """``trainer.fit``, ended by Ctrl-C or SIGTERM as a Python program is, saying what was kept.

    Lightning ends a fit on Ctrl-C with ``sys.exit(1)``, and on SIGTERM at the end of the batch
    with a ``SystemExit`` of status 0, which a script cannot tell from a finished fit. Here either
    signal logs one line (a WARNING on this module's logger, which Python prints on stderr when
    logging is not configured) naming the signal and what was kept, then raises a
    ``KeyboardInterrupt`` with that line (Ctrl-C: uncaught, Python ends with the status of SIGINT,
    130) or :class:`TrainingTerminated` (SIGTERM: uncaught, the program exits with status 143).
    Kept is ``resumable``, the checkpoint ``resume=True`` continues from, once it exists (the
    trainer's own :class:`EpochCheckpoint` writes it at the end of the first epoch). ``unkept``:
    why nothing is kept whatever was written (a run in a folder its caller removes), said in place
    of the advice to resume. A SIGTERM handler of the caller's that raises ``KeyboardInterrupt``
    (the ``tsrec`` command's does) stops training at once and counts as SIGTERM; any other
    exception passes unchanged.
    """
    recorder = next((c for c in trainer.callbacks if isinstance(c, InterruptRecorder)), InterruptRecorder())
    try:
        trainer.fit(module, train_loader, val_loader, ckpt_path=ckpt_path, weights_only=True)
    except (SystemExit, KeyboardInterrupt) as err:
        stopped_by = err if recorder.exception is None else recorder.exception  # Lightning's sys.exit(1) hides Ctrl-C
        if not isinstance(stopped_by, (SIGTERMException, KeyboardInterrupt)):
            raise
        raise _interrupted(trainer, resumable, unkept) from None
    if isinstance(recorder.exception, KeyboardInterrupt):  # older Lightning returned after a Ctrl-C
        raise _interrupted(trainer, resumable, unkept)


def _interrupted(trainer: pl.Trainer, resumable: Path | None, unkept: str | None) -> KeyboardInterrupt:
    """The exception for a fit stopped by a signal, once its line is logged."""
    signum = signal.SIGTERM if trainer.received_sigterm else signal.SIGINT
    own = next((c for c in trainer.callbacks if isinstance(c, EpochCheckpoint) and c.path == resumable), None)
    # not a file an earlier fit left: this fit wrote it, or resumed from it
    kept = unkept is None and resumable is not None and resumable.is_file() and \
        (own is None or own.written or trainer.current_epoch > 0)
    if kept:
        what = (f"kept the checkpoint of the last finished epoch, {resumable}; fit again with resume=True "
                "('tsrec fit ... --resume') to continue from it")
    else:
        what = "nothing kept: " + (unkept or ("no epoch had finished" if resumable is not None else
                                             "checkpoints are written only when output_dir is set"))
    name = "Ctrl-C (SIGINT)" if signum == signal.SIGINT else "SIGTERM"
    message = f"interrupted by {name}: {what}"
    log.warning(message)
    return TrainingTerminated(message, resumable if kept else None) if signum == signal.SIGTERM else \
        KeyboardInterrupt(message)


def make_predict_trainer(config: TrainingConfig, trainer_kwargs: dict[str, Any] | None = None, *,
                         devices: int | list[int] = 1) -> pl.Trainer:
    """A Trainer for ``trainer.predict``: the accelerator the model trains on (``trainer_kwargs``'
    ``accelerator``, default ``"auto"``), one device (``devices``: Lightning's choice of one, or
    ``[index]``), the training precision, no logs or bars."""
    accelerator = (trainer_kwargs or {}).get("accelerator", "auto")
    return pl.Trainer(accelerator=accelerator, devices=devices, precision=config.precision, logger=False,
                      enable_checkpointing=False, enable_model_summary=False, enable_progress_bar=False)


def make_loader(dataset: WindowDataset, config: TrainingConfig, *, train: bool) -> DataLoader:
    """Batches of windows, each gathered in one go (:meth:`WindowDataset.__getitems__`, passed on
    by :meth:`WindowDataset.collate`); never drops the last partial batch. Training batches come
    from a :class:`~tsrec.training.sharding.GlobalBatchSampler` (shuffled per epoch when
    ``config.shuffle``), evaluation windows in order from a
    :class:`~tsrec.training.sharding.ShardSampler`: under DDP each rank reads its share of them,
    every window exactly once. The loader draws its workers' base seed from its own generator,
    never from the global one that dropout uses."""
    options = {"collate_fn": dataset.collate, "num_workers": config.num_workers,
               "persistent_workers": config.num_workers > 0,
               "generator": torch.Generator().manual_seed(config.seed)}
    if train:
        return DataLoader(dataset, batch_sampler=GlobalBatchSampler(len(dataset), config.batch_size, seed=config.seed,
                                                                    shuffle=config.shuffle), **options)
    return DataLoader(dataset, batch_size=config.batch_size, sampler=ShardSampler(len(dataset)), **options)


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
