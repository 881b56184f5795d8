"""Training: one LightningModule for every model, typed settings, the default Trainer."""

from tsrec.training.callbacks import RestoreBestWeights
from tsrec.config import TrainingConfig
from tsrec.training.module import ForecastingModule, informer_lr_factor, masked_loss
from tsrec.training.trainer import make_loader, make_predict_trainer, make_trainer, quiet_lightning

__all__ = [
    "ForecastingModule",
    "RestoreBestWeights",
    "TrainingConfig",
    "informer_lr_factor",
    "make_loader",
    "make_predict_trainer",
    "make_trainer",
    "masked_loss",
    "quiet_lightning",
]
