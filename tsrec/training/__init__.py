"""Training: one LightningModule for every model, typed settings, the default Trainer, and the
per-epoch checkpoints a killed fit resumes from."""

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

__all__ = [
    "Budget",
    "DIVERGED_ERROR",
    "EXIT_SIGTERM",
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
