"""One LightningModule for every registered model."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import lightning.pytorch as pl
import torch
from torch import Tensor

from tsrec.batch import ForecastBatch
from tsrec.config import TrainingConfig
from tsrec.models.base import ForecastModel, forecast_from_data
from tsrec.nn.attention import rsa_parameters
from tsrec.nn.covariates import covariate_parameters
from tsrec.training.budget import COSINE_FLOOR
from tsrec.collective import world
from tsrec.training.sharding import epoch_seed

#: Training has diverged when its typical error exceeds this many standard deviations of the
#: training data: the targets are scaled to mean 0 and standard deviation 1, so forecasting zero
#: scores about 1, and an epoch's mean MSE above ``DIVERGED_ERROR ** 2`` (MAE above ``DIVERGED_ERROR``)
#: is far beyond any forecast that has learnt something.
DIVERGED_ERROR = 100.0


class TrainingDiverged(ValueError):
    """The training loss became NaN or infinite, or exploded (see :data:`DIVERGED_ERROR`): the
    learning rate is too high for the data, or the data hold values no setting makes predictable
    (:func:`tsrec.fitting.fit_state` names those). A ``ValueError``: the fix is another setting,
    or other data. ``problem``: what happened, without the advice that follows it."""

    def __init__(self, message: str, problem: str = "") -> None:
        super().__init__(message)
        self.problem = problem or message


def informer_lr_factor(epoch: int) -> float:
    """Informer's ``type1`` schedule: factor 1 for epochs 0 and 1, then halved every epoch."""
    return 0.5 ** max(epoch - 1, 0)


def cosine_lr_factor(step: int, steps: int) -> float:
    """A half cosine from 1 at step 0 to :data:`~tsrec.training.budget.COSINE_FLOOR` at ``steps``
    (and after)."""
    progress = min(step, steps) / max(steps, 1)
    return COSINE_FLOOR + (1 - COSINE_FLOOR) * 0.5 * (1 + math.cos(math.pi * progress))


class ForecastingModule(pl.LightningModule):
    """Trains a :class:`~tsrec.models.base.ForecastModel` on window batches.

    Batches are :class:`~tsrec.batch.ForecastBatch` dicts. Logs ``val_loss`` at the end of every
    validation check (its mean over the check's windows), and ``train_loss`` and, for RSA models,
    each layer's gate at the end of every training epoch as ``gate/<name>``; under DDP the losses
    are summed over the ranks by the module itself, so every rank logs the exact mean.
    ``predict_step`` returns the scaled forecast ``[B, H, C]`` of a batch, on the trainer's device.
    With ``config.compile`` the training and validation steps run the network compiled by
    ``torch.compile``; ``predict_step`` runs it as it is.

    ``history`` gets one row per finished epoch: ``epoch`` (1-based), ``train_loss`` and
    ``val_loss`` (means over the epoch's windows; NaN without validation), the backbone's
    ``learning_rate`` and the epoch's wall ``seconds`` (validation included). Under DDP the
    losses are the means over every rank's windows, the same on every rank. ``history`` is saved in checkpoints.

    Every epoch's randomness (dropout, ProbSparse's key samples) comes from the global torch
    generator reseeded at the epoch's start from ``(config.seed, epoch)``, so that a run resumed
    from a checkpoint trains exactly as an uninterrupted one.

    An epoch whose mean training loss is not finite (a NaN or infinite loss at any step makes it
    so) or exceeds the :data:`DIVERGED_ERROR` bound raises :class:`TrainingDiverged` at the end of
    that epoch, before it is checkpointed (checked per epoch, not per step, so that training never
    waits for the accelerator to report a loss).
    """

    def __init__(self, model: ForecastModel, config: TrainingConfig, *, schedule_steps: int | None = None) -> None:
        super().__init__()
        self.model = model
        self.config = config
        self.schedule_steps = schedule_steps  # the cosine schedule's length (its run's budget)
        self._compiled: Callable[[ForecastBatch], Tensor] | None = None  # see on_fit_start
        self.history: list[dict[str, float]] = []
        self._totals: dict[str, tuple[Tensor | float, int]] = {}
        self._val_epoch = (0.0, 0)  # the epoch's validation checks' summed loss and windows, over all ranks
        self._epoch_started = 0.0
        self._epoch_lr = math.nan

    def _accumulate(self, part: str, loss: Tensor, windows: int) -> None:
        total, count = self._totals.get(part, (0.0, 0))
        self._totals[part] = (total + loss.detach() * windows, count + windows)

    def _summed(self, part: str) -> tuple[float, int]:
        """The ``part``'s summed loss and window count since it was last read, over all ranks under
        DDP (every rank calls it: a rank may have read no window)."""
        total, count = self._totals.pop(part, (0.0, 0))
        if world()[1] > 1:
            sums = self.trainer.strategy.reduce(torch.tensor([float(total), float(count)], dtype=torch.float64,
                                                             device=self.device), reduce_op="sum")
            total, count = float(sums[0]), int(sums[1])
        return float(total), count

    def _rank_weight(self, batch: ForecastBatch) -> Tensor | float:
        """1 in one process. Under DDP, which averages the ranks' gradients, ``W n_r / sum n`` for
        this rank's ``n_r`` observed target entries among the global batch's ``sum n`` (``W`` ranks):
        each rank's loss is the mean over its own entries, so the averaged gradient is then that of
        the mean over every observed entry of the global batch, as one process computes it, however
        the windows and missing values fall among the ranks."""
        size = world()[1]
        if size == 1:
            return 1.0
        observed = batch["future_observed"].sum(dtype=torch.float64)
        total = self.trainer.strategy.reduce(observed.clone(), reduce_op="sum")
        return (observed * size / total.clamp_min(1.0)).float()

    def on_train_epoch_start(self) -> None:
        torch.manual_seed(epoch_seed(self.config.seed, self.current_epoch, rank=world()[0]))
        self._epoch_started = time.perf_counter()
        self._epoch_lr = self.trainer.optimizers[0].param_groups[0]["lr"]  # the scheduler steps before epoch end

    def on_train_epoch_end(self) -> None:
        trained = "train" in self._totals
        (train_total, train_count), (val_total, val_count) = self._summed("train"), self._val_epoch
        self._val_epoch = (0.0, 0)
        row = {
            "epoch": self.current_epoch + 1,
            "train_loss": train_total / train_count if train_count else math.nan,
            "val_loss": val_total / val_count if val_count else math.nan,
            "learning_rate": self._epoch_lr,
            "seconds": time.perf_counter() - self._epoch_started,
        }
        if trained:
            self._check_diverged(row["epoch"], row["train_loss"])
            self.log("train_loss", row["train_loss"], prog_bar=True)
        self.history.append(row)
        self._log_gates()

    def on_validation_epoch_end(self) -> None:
        """Log ``val_loss``, which early stopping and :class:`RestoreBestWeights` watch: the check's
        mean loss over all its windows, summed over the ranks here (a per-step log synced by
        Lightning 2.6 is not exact under gloo: it averages the window counts in an integer tensor),
        the same in every rank. Its sums join the epoch's ``history`` row."""
        if self.trainer.sanity_checking:
            return
        total, count = self._summed("val")
        epoch_total, epoch_count = self._val_epoch
        self._val_epoch = (epoch_total + total, epoch_count + count)
        self.log("val_loss", total / count if count else math.nan, prog_bar=True)

    def _log_gates(self) -> None:
        """Log every RSA layer's gate as ``gate/<attention>_<layer>[_h<head>]`` (once per epoch, in
        every run: the validated one and the refit)."""
        gates = {}
        for name, index, layer in self.model.rsa_layers():
            values = layer.rsa.gate.values()
            key = f"gate/{name.replace(' ', '_')}_{index}"
            if values.numel() == 1:
                gates[key] = float(values[0])
            else:
                gates.update({f"{key}_h{h}": float(v) for h, v in enumerate(values)})
        if gates:
            self.log_dict(gates, on_step=False, on_epoch=True)

    def _check_diverged(self, epoch: int, train_loss: float) -> None:
        """Raise :class:`TrainingDiverged` when the epoch's mean training loss is not finite or
        beyond the :data:`DIVERGED_ERROR` bound."""
        c = self.config
        bound = DIVERGED_ERROR ** 2 if c.loss == "mse" else DIVERGED_ERROR
        if math.isfinite(train_loss) and train_loss <= bound:
            return
        what = (f"the training loss became {train_loss}" if not math.isfinite(train_loss) else
                f"the mean training loss reached {train_loss:.3g} ({c.loss} in scaled units, where forecasting "
                f"zero scores about 1; the bound is {bound:g})")
        clip = ("set gradient_clip_val (e.g. 1.0)" if c.gradient_clip_val is None else
                f"a smaller gradient_clip_val than {c.gradient_clip_val:g}")
        problem = f"training diverged in epoch {epoch} at learning_rate={c.learning_rate:g}: {what}"
        raise TrainingDiverged(f"{problem}. Lower learning_rate (e.g. to {c.learning_rate / 10:g}) or {clip}", problem)

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["tsrec_history"] = [dict(row) for row in self.history]

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        self.history = [dict(row) for row in checkpoint["tsrec_history"]]

    def on_fit_start(self) -> None:
        if self.config.compile:
            # The network's forward compiled, for the training and validation steps: a function, not a
            # submodule, so parameter names and state_dict keys stay the network's own (no ``_orig_mod.``).
            self._compiled = torch.compile(self.model.forward)

    def forward(self, batch: ForecastBatch) -> Tensor:
        return self.model(batch)

    def _loss(self, batch: ForecastBatch) -> Tensor:
        out = self(batch) if self._compiled is None else self._compiled(batch)
        return self.model.output.loss(out, batch["future_target"], batch["future_observed"], self.config.loss)

    def training_step(self, batch: ForecastBatch, batch_idx: int) -> Tensor:
        loss = self._loss(batch)
        self._accumulate("train", loss, batch["past_target"].shape[0])
        return loss * self._rank_weight(batch)

    def validation_step(self, batch: ForecastBatch, batch_idx: int) -> None:
        if not self.trainer.sanity_checking:
            self._accumulate("val", self._loss(batch), batch["past_target"].shape[0])

    def predict_step(self, batch: ForecastBatch, batch_idx: int, dataloader_idx: int = 0) -> Tensor:
        """The batch's scaled forecast (:func:`~tsrec.models.base.forecast_from_data`)."""
        return forecast_from_data(self.model, batch)

    def configure_optimizers(self):  # Lightning's return type: an optimizer or a dict
        c = self.config
        # Their own groups, in this order after the backbone's: REM scalars and gates, the covariate path.
        fast = [(list(rsa_parameters(self.model)), c.rsa_lr_multiplier),
                (list(covariate_parameters(self.model)), c.covariate_lr_multiplier)]
        taken = {id(p) for params, _ in fast for p in params}
        backbone = [p for p in self.model.parameters() if p.requires_grad and id(p) not in taken]
        groups = [{"params": backbone, "lr": c.learning_rate}]
        groups += [{"params": params, "lr": c.learning_rate * multiplier} for params, multiplier in fast if params]
        # One fused kernel for every tensor (CPU and CUDA) instead of a loop of small per-tensor ops.
        optimizer = torch.optim.Adam(groups, fused=True)
        if c.lr_schedule == "constant":
            return optimizer
        if c.lr_schedule == "halve":
            scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, informer_lr_factor)
            return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "epoch"}}
        steps = self.schedule_steps or int(self.trainer.estimated_stepping_batches)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: cosine_lr_factor(step, steps))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}
