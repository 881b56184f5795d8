"""Training callbacks."""

from __future__ import annotations

import lightning.pytorch as pl
import torch


class RestoreBestWeights(pl.Callback):
    """Keep the weights of the epoch with the lowest ``monitor`` in memory and load them when fitting
    ends (no checkpoint files, nothing unpickled). With DDP the monitored value is synchronised,
    so every rank keeps the same epoch."""

    def __init__(self, monitor: str = "val_loss") -> None:
        self.monitor = monitor
        self.best_score: float | None = None
        self.best_epoch: int | None = None
        self._state: dict[str, torch.Tensor] | None = None

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking or self.monitor not in trainer.callback_metrics:
            return
        score = float(trainer.callback_metrics[self.monitor])
        if self.best_score is None or score < self.best_score:
            self.best_score, self.best_epoch = score, trainer.current_epoch
            self._state = {k: v.detach().to("cpu", copy=True) for k, v in pl_module.state_dict().items()}

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._state is not None:
            pl_module.load_state_dict(self._state)
