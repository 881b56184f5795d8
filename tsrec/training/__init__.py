"""Training: one LightningModule for every model, typed settings, the default Trainer, and the
per-epoch checkpoints a killed fit resumes from.

Each name is loaded from its module on first use (as :mod:`tsrec` loads the estimator): importing
the package, its budget or its prediction loop loads no Lightning, which only training (and a
forecast in a precision or on an accelerator only a Lightning ``Trainer`` applies) needs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tsrec.config import TrainingConfig
    from tsrec.nn.outputs import masked_loss
    from tsrec.training.budget import Budget, plan_budget, refit_budget
    from tsrec.training.callbacks import (
        EpochCheckpoint,
        RestoreBestWeights,
        SmoothedEarlyStopping,
        describe_run,
        resume_checkpoint,
    )
    from tsrec.training.module import (
        DIVERGED_ERROR,
        ForecastingModule,
        TrainingDiverged,
        cosine_lr_factor,
        informer_lr_factor,
    )
    from tsrec.training.predict import predict_batches, predict_device
    from tsrec.training.sharding import EpochShuffleSampler, epoch_seed
    from tsrec.training.trainer import (
        EXIT_SIGTERM,
        InterruptRecorder,
        TrainingTerminated,
        fit_or_raise,
        make_loader,
        make_predict_trainer,
        make_trainer,
        quiet_lightning,
    )

#: The module of each name.
_LAZY = {
    "TrainingConfig": "tsrec.config",
    "masked_loss": "tsrec.nn.outputs",
    **dict.fromkeys(("Budget", "plan_budget", "refit_budget"), "tsrec.training.budget"),
    **dict.fromkeys(("EpochCheckpoint", "RestoreBestWeights", "SmoothedEarlyStopping", "describe_run",
                     "resume_checkpoint"), "tsrec.training.callbacks"),
    **dict.fromkeys(("DIVERGED_ERROR", "ForecastingModule", "TrainingDiverged", "cosine_lr_factor",
                     "informer_lr_factor"), "tsrec.training.module"),
    **dict.fromkeys(("predict_batches", "predict_device"), "tsrec.training.predict"),
    **dict.fromkeys(("EpochShuffleSampler", "epoch_seed"), "tsrec.training.sharding"),
    **dict.fromkeys(("EXIT_SIGTERM", "InterruptRecorder", "TrainingTerminated", "fit_or_raise", "make_loader",
                     "make_predict_trainer", "make_trainer", "quiet_lightning"), "tsrec.training.trainer"),
}

__all__ = [
    "DIVERGED_ERROR",
    "EXIT_SIGTERM",
    "Budget",
    "EpochCheckpoint",
    "EpochShuffleSampler",
    "ForecastingModule",
    "InterruptRecorder",
    "RestoreBestWeights",
    "SmoothedEarlyStopping",
    "TrainingConfig",
    "TrainingDiverged",
    "TrainingTerminated",
    "cosine_lr_factor",
    "describe_run",
    "epoch_seed",
    "fit_or_raise",
    "informer_lr_factor",
    "make_loader",
    "make_predict_trainer",
    "make_trainer",
    "masked_loss",
    "plan_budget",
    "predict_batches",
    "predict_device",
    "quiet_lightning",
    "refit_budget",
    "resume_checkpoint",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'tsrec.training' has no attribute {name!r}")
