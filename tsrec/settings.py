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
      conformal ConformalConfig: the calibration of predict's intervals (conformal_windows,
                conformal_scores; tsrec.conformal)
      trainer   TrainerConfig: trainer_kwargs (Lightning's Trainer) and output_dir: how a fit runs,
                not what it trains (a resumed run need not share them)

Every field has one default, in its config class. Fields that depend on the data (the network's
shape, ``label_length``, ``season_length``, the REM head mix, dilations and initial periods) are
``None`` in what the user builds and are filled by :meth:`ForecasterSettings.resolved` from the
fitted data; a value the user set is never replaced. ``Forecaster``, ``save``/``load``,
``unfitted_copy``, the presets, the CLI and the benchmark runner all go through this object.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any

from tsrec.config import (Config, ConformalConfig, CovariateConfig, DataFacts, TrainerConfig, TrainingConfig,
                          WindowConfig)
from tsrec.models.base import ModelConfig
from tsrec.models.registry import model_config, model_spec

__all__ = ["ForecasterSettings", "WINDOW_FIELDS", "TRAINING_FIELDS"]

WINDOW_FIELDS = tuple(f.name for f in dataclasses.fields(WindowConfig))
TRAINING_FIELDS = tuple(f.name for f in dataclasses.fields(TrainingConfig))
#: The flat options of :class:`~tsrec.config.ConformalConfig`'s fields (``conformal_windows``, ...).
CONFORMAL_FIELDS = tuple(f"conformal_{f.name}" for f in dataclasses.fields(ConformalConfig))


@dataclass(frozen=True)
class ForecasterSettings(Config):
    """Everything that decides which model ``fit`` trains (see the module docstring)."""

    model: str
    window: WindowConfig
    network: ModelConfig
    training: TrainingConfig
    covariates: CovariateConfig = dataclasses.field(default_factory=CovariateConfig)
    trainer: TrainerConfig = dataclasses.field(default_factory=TrainerConfig)
    conformal: ConformalConfig = dataclasses.field(default_factory=ConformalConfig)

    def __post_init__(self) -> None:
        expected = model_spec(self.model).model_class.config_class
        if type(self.network) is not expected:
            raise TypeError(f"model {self.model!r} takes a {expected.__name__}, got {type(self.network).__name__}")

    @classmethod
    def from_options(cls, model: str, **options: Any) -> ForecasterSettings:
        """Sort flat keyword options into the tree: window fields, training fields, the trainer's
        (``trainer_kwargs``, ``output_dir``, ``threads``) and the model's own options (anything else is an error
        that lists them)."""
        spec = model_spec(model)  # unknown names: ValueError listing the known ones
        output_dir = options.pop("output_dir", None)
        kwargs = options.pop("trainer_kwargs", None)
        trainer = TrainerConfig(trainer_kwargs={} if kwargs is None else dict(kwargs) if isinstance(kwargs, dict)
                                else kwargs, output_dir=None if output_dir is None else os.fspath(output_dir),
                                threads=options.pop("threads", None))
        window = {k: options.pop(k) for k in WINDOW_FIELDS if k in options}
        conformal = ConformalConfig(**{k.removeprefix("conformal_"): options.pop(k) for k in CONFORMAL_FIELDS
                                       if k in options})
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
                            f"calibration: {', '.join(CONFORMAL_FIELDS)}; "
                            f"{model} options: {', '.join(network_fields)}")
        return cls(model=model, window=WindowConfig(**window), network=model_config(model, **options),
                   training=TrainingConfig(**training), trainer=trainer, conformal=conformal)

    def to_options(self) -> dict[str, Any]:
        """The flat options that rebuild these settings with :meth:`from_options`: the window
        settings, the training and model settings that differ from their defaults, and the
        trainer's where set."""
        options: dict[str, Any] = {"model": self.model, **dataclasses.asdict(self.window)}
        if self.trainer.trainer_kwargs:
            options["trainer_kwargs"] = dict(self.trainer.trainer_kwargs)
        if self.trainer.output_dir is not None:
            options["output_dir"] = self.trainer.output_dir
        if self.trainer.threads is not None:
            options["threads"] = self.trainer.threads
        for field in dataclasses.fields(ConformalConfig):
            value = getattr(self.conformal, field.name)
            if value != field.default:
                options[f"conformal_{field.name}"] = value
        defaults = ((self.training, TrainingConfig(**model_spec(self.model).training)),
                    (self.network, model_config(self.model)))
        for config, default in defaults:
            for field in dataclasses.fields(config):
                value = getattr(config, field.name)
                if value != getattr(default, field.name):
                    options[field.name] = value
        return options

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: each section's own (:meth:`TrainerConfig.to_dict
        <tsrec.config.TrainerConfig.to_dict>` keeps the JSON values of ``trainer_kwargs``)."""
        sections = (self.window, self.network, self.training, self.covariates, self.trainer)
        data = {"model": self.model, **{name: section.to_dict() for name, section in
                                        zip(("window", "network", "training", "covariates", "trainer"), sections)}}
        if self.conformal != ConformalConfig():  # files of the default settings read as before it existed
            data["conformal"] = self.conformal.to_dict()
        return data

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
                                      prediction_length=window.prediction_length, far_values=window.far_values)
        return dataclasses.replace(self, window=window, network=network.resolved(data),
                                   covariates=self.covariates if covariates is None else covariates)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ForecasterSettings:
        required = {"model", "window", "network", "training"}
        if not isinstance(data, dict) or not required <= set(data) <= required | {"covariates", "trainer", "conformal"}:
            got = sorted(data) if isinstance(data, dict) else type(data).__name__
            raise TypeError(f"settings must be a dict with the keys model, window, network and training (and "
                            f"optionally covariates, trainer and conformal), got {got}")
        config_class = model_spec(data["model"]).model_class.config_class
        return cls(model=data["model"], window=WindowConfig.from_dict(data["window"]),
                   network=config_class.from_dict(data["network"]),
                   training=TrainingConfig.from_dict(data["training"]),
                   covariates=CovariateConfig.from_dict(data.get("covariates", {})),
                   trainer=TrainerConfig.from_dict(data.get("trainer", {})),
                   conformal=ConformalConfig.from_dict(data.get("conformal", {})))
