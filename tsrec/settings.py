"""The estimator's settings tree, and the one resolver that completes it from the data.

::

    ForecasterSettings
      model     registry name ("rsa_informer", "dlinear", ...)
      window    WindowConfig: prediction_length, context_length, freq, val_windows
      network   the model's own config class (TransformerConfig, DLinearConfig, ...),
                with its RSA section (tsrec.config.RSAConfig) where the model has one
      training  TrainingConfig: epochs, batch, learning rates, schedule, seed, ...
      covariates CovariateConfig: the frame's past, future and static covariate columns
                (given to ``fit``; empty in the user's settings, recorded in the resolved ones)

Every field has one default, in its config class. Fields that depend on the data (the network's
shape, ``label_length``, ``season_length``, the REM head mix, dilations and initial periods) are
``None`` in what the user builds and are filled by :meth:`ForecasterSettings.resolved` from the
fitted data; a value the user set is never replaced. ``Forecaster``, ``save``/``load``,
``unfitted_copy``, the presets, the CLI and the benchmark runner all go through this object.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from tsrec.config import Config, CovariateConfig, DataFacts, TrainingConfig, WindowConfig
from tsrec.models.base import ModelConfig
from tsrec.models.registry import model_config, model_spec

__all__ = ["ForecasterSettings", "WINDOW_FIELDS", "TRAINING_FIELDS"]

WINDOW_FIELDS = tuple(f.name for f in dataclasses.fields(WindowConfig))
TRAINING_FIELDS = tuple(f.name for f in dataclasses.fields(TrainingConfig))


@dataclass(frozen=True)
class ForecasterSettings(Config):
    """Everything that decides which model ``fit`` trains (see the module docstring)."""

    model: str
    window: WindowConfig
    network: ModelConfig
    training: TrainingConfig
    covariates: CovariateConfig = dataclasses.field(default_factory=CovariateConfig)

    def __post_init__(self) -> None:
        expected = model_spec(self.model).model_class.config_class
        if type(self.network) is not expected:
            raise TypeError(f"model {self.model!r} takes a {expected.__name__}, got {type(self.network).__name__}")

    @classmethod
    def from_options(cls, model: str, **options: Any) -> ForecasterSettings:
        """Sort flat keyword options into the tree: window fields, training fields, and the
        model's own options (anything else is an error that lists all three)."""
        spec = model_spec(model)  # unknown names: ValueError listing the known ones
        window = {k: options.pop(k) for k in WINDOW_FIELDS if k in options}
        if "prediction_length" not in window:
            raise TypeError("prediction_length is required: the number of steps to forecast")
        # The model's own training defaults (its registry entry), under the user's settings.
        training = {**spec.training, **{k: options.pop(k) for k in TRAINING_FIELDS if k in options}}
        shape = sorted(set(options) & set(ModelConfig.SHAPE_FIELDS))
        if shape:
            raise TypeError(f"{shape} come from the data and the window settings, not from model options; "
                            "set context_length and prediction_length, and tsrec reads the channels and "
                            "calendar features off the frame")
        network_fields = [f.name for f in dataclasses.fields(spec.model_class.config_class)
                          if f.name not in ModelConfig.SHAPE_FIELDS]
        unknown = sorted(set(options) - set(network_fields), key=str)
        if unknown:
            raise TypeError(f"unknown option(s) {unknown} for model {model!r}. Window settings: "
                            f"{', '.join(WINDOW_FIELDS)}; training settings: {', '.join(TRAINING_FIELDS)}; "
                            f"{model} options: {', '.join(network_fields)}")
        return cls(model=model, window=WindowConfig(**window), network=model_config(model, **options),
                   training=TrainingConfig(**training))

    def to_options(self) -> dict[str, Any]:
        """The flat options that rebuild these settings with :meth:`from_options`: the window
        settings, and the training and model settings that differ from their defaults."""
        options: dict[str, Any] = {"model": self.model, **dataclasses.asdict(self.window)}
        defaults = ((self.training, TrainingConfig(**model_spec(self.model).training)),
                    (self.network, model_config(self.model)))
        for config, default in defaults:
            for field in dataclasses.fields(config):
                value = getattr(config, field.name)
                if value != getattr(default, field.name):
                    options[field.name] = value
        return options

    def unresolved(self) -> list[str]:
        return self.network.unresolved()

    def resolved(self, data: DataFacts, *, freq: str, covariates: CovariateConfig | None = None,
                 context_length: int | None = None) -> ForecasterSettings:
        """The complete settings for data with these facts at ``freq`` and these ``covariates``
        (default: those of these settings): the window's context (``context_length``, default the
        window's own) and frequency, the network's shape and every data-dependent field still
        ``None``."""
        context = self.window.context if context_length is None else context_length
        window = dataclasses.replace(self.window, context_length=context, freq=freq)
        network = dataclasses.replace(self.network, context_length=window.context_length,
                                      prediction_length=window.prediction_length)
        return dataclasses.replace(self, window=window, network=network.resolved(data),
                                   covariates=self.covariates if covariates is None else covariates)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ForecasterSettings:
        required = {"model", "window", "network", "training"}
        if not isinstance(data, dict) or not required <= set(data) <= required | {"covariates"}:
            got = sorted(data) if isinstance(data, dict) else type(data).__name__
            raise TypeError(f"settings must be a dict with the keys model, window, network and training (and "
                            f"optionally covariates), got {got}")
        config_class = model_spec(data["model"]).model_class.config_class
        return cls(model=data["model"], window=WindowConfig.from_dict(data["window"]),
                   network=config_class.from_dict(data["network"]),
                   training=TrainingConfig.from_dict(data["training"]),
                   covariates=CovariateConfig.from_dict(data.get("covariates", {})))
