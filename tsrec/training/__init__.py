"""Training: one LightningModule for every model, typed settings, the default Trainer, and the
per-epoch checkpoints a killed fit resumes from."""

from tsrec.config import TrainingConfig
from tsrec.nn.outputs import masked_loss
from tsrec.training.callbacks import EpochCheckpoint, RestoreBestWeights, describe_run, resume_checkpoint
from tsrec.training.module import (
    DIVERGED_ERROR,
    ForecastingModule,
    TrainingDiverged,
    informer_lr_factor,
)
from tsrec.training.trainer import (
    EpochShuffleSampler,
    epoch_seed,
    make_loader,
    make_predict_trainer,
    make_trainer,
    quiet_lightning,
)

__all__ = [
    "DIVERGED_ERROR",
    "EpochCheckpoint",
    "EpochShuffleSampler",
    "ForecastingModule",
    "RestoreBestWeights",
    "TrainingConfig",
    "TrainingDiverged",
    "describe_run",
    "epoch_seed",
    "informer_lr_factor",
    "make_loader",
    "make_predict_trainer",
    "make_trainer",
    "masked_loss",
    "quiet_lightning",
    "resume_checkpoint",
]
