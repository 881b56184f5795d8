"""Forecasting networks, their typed configs and the registry."""

from tsrec.models.base import ForecastModel, ModelConfig
from tsrec.models.dlinear import DLinear, DLinearConfig
from tsrec.models.naive import SeasonalNaive, SeasonalNaiveConfig
from tsrec.models.patchtst import PatchTST, PatchTSTConfig
from tsrec.models.registry import build_model, list_models, model_config, model_spec, register
from tsrec.models.relevancy import RelevancyConfig, RelevancyRNN
from tsrec.models.srupp import SRUpp, SRUppConfig
from tsrec.models.starsaber import StarSaber, StarSaberConfig
from tsrec.models.transformer import EncoderDecoderForecaster, TransformerConfig

__all__ = [
    "ForecastModel",
    "ModelConfig",
    "DLinear",
    "DLinearConfig",
    "SeasonalNaive",
    "SeasonalNaiveConfig",
    "PatchTST",
    "PatchTSTConfig",
    "RelevancyConfig",
    "RelevancyRNN",
    "StarSaber",
    "StarSaberConfig",
    "SRUpp",
    "SRUppConfig",
    "EncoderDecoderForecaster",
    "TransformerConfig",
    "build_model",
    "list_models",
    "model_config",
    "model_spec",
    "register",
]
