"""Training callbacks: the best check's weights, early stopping on a smoothed validation loss, and the
per-epoch checkpoint a killed fit resumes from."""

from __future__ import annotations

import hashlib
import os
import pickle
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import numpy as np
import torch
from lightning.pytorch.callbacks import Checkpoint, EarlyStopping
from torch import Tensor


class RestoreBestWeights(pl.Callback):
    """Keep the weights of the validation check with the lowest ``monitor`` in memory and load them
    when fitting ends (nothing unpickled). ``best_epoch`` (0-based) and ``best_step`` (optimizer
    steps done) say when that check ran. With DDP the monitored value is synchronised, so every rank
    keeps the same check. Its state (best score, epoch, step and weights) goes into checkpoints, so
    a resumed run keeps the same check as an uninterrupted one."""

    def __init__(self, monitor: str = "val_loss") -> None:
        self.monitor = monitor
        self.best_score: float | None = None
        self.best_epoch: int | None = None
        self.best_step: int | None = None
        self._state: dict[str, torch.Tensor] | None = None

    @property
    def state_key(self) -> str:
        return self._generate_state_key(monitor=self.monitor)

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking or self.monitor not in trainer.callback_metrics:
            return
        score = float(trainer.callback_metrics[self.monitor])
        if self.best_score is None or score < self.best_score:
            self.best_score, self.best_epoch, self.best_step = score, trainer.current_epoch, trainer.global_step
            self._state = {k: v.detach().to("cpu", copy=True) for k, v in pl_module.state_dict().items()}

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._state is not None:
            pl_module.load_state_dict(self._state)

    def state_dict(self) -> dict[str, Any]:
        return {"best_score": self.best_score, "best_epoch": self.best_epoch, "best_step": self.best_step,
                "weights": self._state}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.best_score, self.best_epoch = state_dict["best_score"], state_dict["best_epoch"]
        self.best_step = state_dict.get("best_step")
        self._state = state_dict["weights"]


class SmoothedEarlyStopping(EarlyStopping):
    """Lightning's early stopping on an exponential moving average of the monitored value over the
    validation checks, ``s = SMOOTHING * s + (1 - SMOOTHING) * value``: on a noisy validation loss
    one lucky check no longer starts the countdown that ends training. The smoothed value is
    checkpointed with the rest of the state."""

    #: The weight of the previous checks in the moving average.
    SMOOTHING = 0.5

    def __init__(self, monitor: str, *, patience: int) -> None:
        super().__init__(monitor, patience=patience, mode="min")
        self.smoothed: Tensor | None = None

    def _evaluate_stopping_criteria(self, current: Tensor) -> tuple[bool, str | None]:
        if torch.isfinite(current):
            current = current if self.smoothed is None else \
                self.SMOOTHING * self.smoothed.to(current.device) + (1 - self.SMOOTHING) * current
            self.smoothed = current.detach()
        return super()._evaluate_stopping_criteria(current)

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "smoothed": None if self.smoothed is None else float(self.smoothed)}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        smoothed = state_dict.get("smoothed")
        self.smoothed = None if smoothed is None else torch.tensor(smoothed)


class EpochCheckpoint(Checkpoint):
    """Write the complete training state of every finished epoch to ``dirpath/last.ckpt``.

    The file is a Lightning checkpoint (weights, optimizer, learning-rate schedule, loop progress,
    every callback's state, the module's ``history``) that ``Trainer.fit(ckpt_path=...)`` continues
    from. It also holds ``run``, the description of the settings and data that
    :func:`resume_checkpoint` compares before resuming, and whether a callback (early stopping) had
    stopped training, which Lightning does not save.

    Atomic: each epoch's checkpoint is written to a temporary file beside it, flushed to disk and
    renamed over ``last.ckpt``, so a kill at any moment leaves the previous epoch's checkpoint or the
    new one, never a partial file. Saved after the module's ``on_train_epoch_end``, which appends the
    epoch's row to ``history`` and stops a diverged run before its state is saved.
    """

    FILENAME = "last.ckpt"

    def __init__(self, dirpath: str | os.PathLike, run: dict[str, Any]) -> None:
        self.dirpath = Path(dirpath)
        self.run = run
        self._stopped = False
        #: Whether this fit has written its checkpoint (a Ctrl-C may come between the write and the
        #: trainer's count of finished epochs: the file is whole once it is renamed into place).
        self.written = False

    @property
    def path(self) -> Path:
        """The checkpoint of the last finished epoch."""
        return self.dirpath / self.FILENAME

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._stopped = trainer.should_stop
        staging = self.dirpath / f".{self.FILENAME}.partial"
        if trainer.is_global_zero:
            self.dirpath.mkdir(parents=True, exist_ok=True)
        # every rank takes part; the strategy writes on rank 0 only
        trainer.save_checkpoint(staging, weights_only=False)
        if trainer.is_global_zero:
            with staging.open("rb+") as file:  # flushed to disk before it replaces the previous epoch's
                os.fsync(file.fileno())
            os.replace(staging, self.path)
            self.written = True  # at once: a signal during the barrier finds the file whole
        trainer.strategy.barrier("EpochCheckpoint")
        self.written = True  # every rank, once rank 0 has written it

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.written = False

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._stopped:  # restored from the epoch at which early stopping ended the run
            trainer.should_stop = True

    def state_dict(self) -> dict[str, Any]:
        return {"run": self.run, "stopped": self._stopped}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._stopped = state_dict["stopped"]


def describe_run(settings: dict[str, Any], data: Any, val_data: Any = None) -> dict[str, Any]:
    """What a resumed run must share with the checkpoint's: the resolved settings (a
    ``ForecasterSettings.to_dict()``) and a description of the training panel and, when given, the
    validation panel (layout, frequency, columns, items, steps, first and last timestamps, and a
    SHA-256 of every id, timestamp and value)."""
    return {"settings": settings, "data": _describe_panel(data),
            "val_data": None if val_data is None else _describe_panel(val_data)}


def _describe_panel(panel: Any) -> dict[str, Any]:
    digest = hashlib.sha256()
    for item in panel.items:
        digest.update(str(item.item_id).encode())
        for array in (item.index.asi8, item.values, item.observed):
            digest.update(np.ascontiguousarray(array).tobytes())
    return {"layout": panel.layout, "freq": panel.freq, "columns": [str(c) for c in panel.columns],
            "items": len(panel.items), "steps": sum(len(item) for item in panel.items),
            "first": min(item.index[0] for item in panel.items).isoformat(),
            "last": max(item.index[-1] for item in panel.items).isoformat(), "sha256": digest.hexdigest()}


def resume_checkpoint(dirpath: str | os.PathLike | None, run: dict[str, Any]) -> Path:
    """The checkpoint in ``dirpath`` that the run described by ``run`` (:func:`describe_run`) resumes
    from; a ``ValueError`` when there is none or when it was written by a run with other settings
    or data (naming every difference)."""
    if dirpath is None:
        raise ValueError("resume=True needs the output_dir of the run to resume: checkpoints are written "
                         "there (in its checkpoints folder), and only when output_dir is set")
    path = Path(dirpath) / EpochCheckpoint.FILENAME
    if not path.is_file():
        raise ValueError(f"no checkpoint to resume from: {path} does not exist (a fit writes it at the end of "
                         "its first epoch when output_dir is set); fit without resume=True to start training")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
        saved = state["callbacks"][EpochCheckpoint.__qualname__]["run"]
    except (OSError, RuntimeError, EOFError, KeyError, TypeError, pickle.UnpicklingError) as err:
        raise ValueError(f"{path} is not a readable tsrec training checkpoint ({type(err).__name__}: {err}); "
                         "fit without resume=True to start again") from err
    differences = _differences(saved, run)
    if differences:
        raise ValueError(f"cannot resume from {path}: it was written by a run with other settings or data: "
                         f"{'; '.join(differences)}. Fit with the settings and data of that run, or without "
                         "resume=True to start again (its checkpoint is then replaced)")
    return path


def _differences(saved: Any, now: Any, key: str = "") -> list[str]:
    """Where the run described by ``now`` differs from the ``saved`` one, as readable phrases."""
    if isinstance(saved, dict) and isinstance(now, dict):
        return [line for k in sorted(set(saved) | set(now), key=str)
                for line in _differences(saved.get(k), now.get(k), f"{key}.{k}" if key else str(k))]
    if saved == now:
        return []
    if key.endswith("sha256"):
        return [f"{key.rsplit('.', 1)[0]} has other values"]
    return [f"{key} is {now!r} here but {saved!r} in the checkpoint"]
