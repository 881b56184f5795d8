"""The estimator users touch: ``Forecaster(model, ...).fit(df).predict()``, ``save`` / ``load``."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import pickle
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from tsrec.data import (
    Panel,
    Series,
    StandardScaler,
    WindowDataset,
    canonicalize,
    forecast_frame,
    normalize_freq,
    seasonality,
    split_panel,
    step_duration,
    time_feature_dim,
)
from tsrec.models import ForecastModel, RSASettings, build_model, model_config, model_spec
from tsrec.training import ForecastingModule, TrainingConfig, make_loader, make_trainer

__all__ = ["Forecaster", "default_rsa_settings"]

log = logging.getLogger(__name__)

FORMAT = "tsrec-forecaster"
FORMAT_VERSION = 1
_CONFIG_FILE = "forecaster.json"
_WEIGHTS_FILE = "weights.pt"
_TRAINING_FIELDS = {f.name for f in dataclasses.fields(TrainingConfig)}


def default_rsa_settings(n_heads: int, season: int, *, sub_daily: bool) -> RSASettings:
    """The RSA paper's head mix (cos/sin pairs, half of them dilated by the season) for ``n_heads``.

    ``theta`` starts at the season's cycle and its half (``2 pi / s``, ``2 pi / (s/2)``) for the
    plain pairs and, for sub-daily data where one dilated step is a day, at the weekly cycle and
    its half for the dilated pairs (RSA_SPEC section 4.6).
    """
    quarter = n_heads // 4
    kinds = (n_heads - 4 * quarter, quarter, quarter, 0, quarter, quarter)
    return RSASettings(kinds=kinds, dilation=season, periods=(float(season), season / 2.0),
                       dilated_periods=(7.0, 3.5) if sub_daily else None)


class Forecaster:
    """Train any registered model on a DataFrame and forecast the steps after it.

    Args:
        model: a name from :func:`tsrec.list_models`.
        prediction_length: steps to forecast.
        context_length: past steps the model reads (default ``2 * prediction_length``).
        freq: pandas frequency of the data (inferred from the timestamps when None).
        val_windows: validation forecast origins taken from the end of the fit frame (default
            ``prediction_length``; 0 trains without validation, early stopping or weight restore).
        output_dir: where Lightning writes its CSV logs (default: a new temporary directory,
            never the working directory).
        trainer_kwargs: passed to ``lightning.pytorch.Trainer`` unchanged, over tsrec's defaults.
        **options: training settings (:class:`~tsrec.training.TrainingConfig` fields such as
            ``max_epochs``, ``batch_size``, ``learning_rate``, ``seed``, ``precision``) and model
            options (fields of the model's config such as ``d_model``, ``n_heads``, ``e_layers``,
            ``label_length``, ``rsa``).

    ``fit`` accepts a wide frame (DatetimeIndex or ``time_col``, one numeric column per variable,
    forecast jointly) or a long frame (``id_col``, ``time_col``, ``target_col``; many series).
    ``predict`` returns a long frame with columns ``item_id``, ``timestamp``, ``mean``.
    """

    def __init__(self, model: str = "rsa_informer", *, prediction_length: int, context_length: int | None = None,
                 freq: str | None = None, val_windows: int | None = None, output_dir: str | os.PathLike | None = None,
                 trainer_kwargs: dict[str, Any] | None = None, **options: Any) -> None:
        spec = model_spec(model)  # unknown names: ValueError listing the known ones
        for name, value in (("prediction_length", prediction_length), ("context_length", context_length)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if val_windows is not None and (not isinstance(val_windows, int) or val_windows < 0):
            raise ValueError(f"val_windows must be an int >= 0, got {val_windows!r}")
        if trainer_kwargs is not None and not isinstance(trainer_kwargs, dict):
            raise TypeError(f"trainer_kwargs must be a dict of lightning.pytorch.Trainer arguments, "
                            f"got {type(trainer_kwargs).__name__}")
        self.model_name = model
        self.prediction_length = prediction_length
        self.context_length = context_length or 2 * prediction_length
        self.freq = None if freq is None else normalize_freq(freq)
        self.val_windows = val_windows
        self.output_dir = None if output_dir is None else Path(output_dir)
        self.trainer_kwargs = dict(trainer_kwargs or {})
        self.training = TrainingConfig(**{k: v for k, v in options.items() if k in _TRAINING_FIELDS})
        self.model_options = {k: v for k, v in options.items() if k not in _TRAINING_FIELDS}
        # Fail now, not after loading data, on unknown or invalid model options.
        self._model_config(n_channels=1, n_time_features=0)
        self.trainable = spec.model_class.trainable
        self.model: ForecastModel | None = None
        self.panel: Panel | None = None
        self.scaler: StandardScaler | None = None
        self.trainer = None

    # ------------------------------------------------------------------ configuration
    def _model_config(self, *, n_channels: int, n_time_features: int):
        options = dict(self.model_options)
        spec = model_spec(self.model_name)
        fields = {f.name: f.default for f in dataclasses.fields(spec.model_class.config_class)}
        fields.update(spec.defaults)
        if "label_length" in fields and "label_length" not in options:
            options["label_length"] = self.context_length // 2
        if "season_length" in fields and "season_length" not in options and self.freq is not None:
            options["season_length"] = min(seasonality(self.freq), self.context_length)
        if fields.get("rsa") is not None:
            # Before fit infers freq, an hourly season stands in (only to validate the options).
            n_heads = options.get("n_heads", fields["n_heads"])
            season = seasonality(self.freq) if self.freq else 24
            step = step_duration(self.freq) if self.freq else pd.Timedelta(hours=1)
            sub_daily = step is not None and step < pd.Timedelta(days=1)
            base = dataclasses.asdict(default_rsa_settings(n_heads, season, sub_daily=sub_daily))
            given = options.get("rsa") or {}
            options["rsa"] = {**base, **(dataclasses.asdict(given) if dataclasses.is_dataclass(given) else given)}
        return model_config(self.model_name, context_length=self.context_length,
                            prediction_length=self.prediction_length, n_channels=n_channels,
                            n_time_features=n_time_features, **options)

    # ------------------------------------------------------------------ fit
    def fit(self, df: pd.DataFrame, *, time_col: str | None = None, id_col: str | None = None,
            target_col: str | None = None, val_df: pd.DataFrame | None = None) -> Forecaster:
        """Train on ``df`` (validation from its end, or on ``val_df``); returns ``self``."""
        self._columns = {"time_col": time_col, "id_col": id_col, "target_col": target_col}
        panel = canonicalize(df, freq=self.freq, **self._columns)
        self.freq = panel.freq
        val_panel = None if val_df is None else canonicalize(val_df, freq=panel.freq, **self._columns)
        split = split_panel(panel, self.context_length, self.prediction_length,
                            val_windows=self.val_windows, val_panel=val_panel)
        scaler = StandardScaler.fit([s.values for s in panel.items], [s.observed for s in panel.items],
                                    split.train_end)
        config = self._model_config(n_channels=len(panel.columns) if panel.layout == "wide" else 1,
                                    n_time_features=time_feature_dim(panel.freq))
        import lightning.pytorch as pl

        pl.seed_everything(self.training.seed, workers=True, verbose=False)
        model = build_model(self.model_name, config)
        if self.trainable:
            train_set = WindowDataset.from_panel(panel, scaler, self.context_length, self.prediction_length,
                                                 split.train)
            if len(train_set) == 0:
                raise ValueError("no training window fits in the data; use a shorter context_length or "
                                 "prediction_length, or fewer val_windows")
            val_loader = None
            if split.val is not None:
                val_set = WindowDataset.from_panel(val_panel or panel, scaler, self.context_length,
                                                   self.prediction_length, split.val, scaler_rows=split.val_rows)
                val_loader = make_loader(val_set, self.training, train=False)
            output_dir = self.output_dir or Path(tempfile.mkdtemp(prefix="tsrec-run-"))
            self.output_dir = output_dir
            module = ForecastingModule(model, self.training)
            self.trainer = make_trainer(self.training, output_dir, validate=val_loader is not None,
                                        trainer_kwargs=self.trainer_kwargs)
            self.trainer.fit(module, make_loader(train_set, self.training, train=True), val_loader)
            log.info("tsrec: training logs in %s", output_dir)
        self.model = model.cpu().eval()
        self.panel = _tail(panel, self.context_length)
        self.scaler = scaler
        return self

    # ------------------------------------------------------------------ predict
    def _require_fitted(self) -> None:
        if self.model is None:
            raise RuntimeError("this Forecaster is not fitted yet: call fit(df) first, or Forecaster.load(path)")

    def predict(self, df: pd.DataFrame | None = None, *, batch_size: int | None = None) -> pd.DataFrame:
        """Forecast the ``prediction_length`` steps after the end of the fitted frame, or of ``df``
        (same columns, or known ids, as the fitted frame; at least ``context_length`` steps)."""
        self._require_fitted()
        if df is None:
            panel, rows = self.panel, np.arange(len(self.panel.items))
        else:
            panel = canonicalize(df, freq=self.freq, **self._columns)
            rows = self.panel.check_compatible(panel)
        dataset = WindowDataset.for_prediction(panel, self.scaler, self.context_length, self.prediction_length,
                                               scaler_rows=rows)
        mean = self.scaler.inverse_transform(self.forecast_windows(dataset, batch_size=batch_size), rows)
        return forecast_frame(panel, mean)

    def forecast_windows(self, dataset: WindowDataset, *, batch_size: int | None = None) -> np.ndarray:
        """Scaled forecasts ``[N, H, C]`` for every window of ``dataset``, in order, batched (the
        last partial batch included), on the device the model is on."""
        self._require_fitted()
        loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size or self.training.batch_size)
        device = next(iter(self.model.parameters()), torch.empty(0)).device
        outputs = []
        self.model.eval()
        with torch.no_grad():
            for batch in loader:
                pred = self.model(batch["past_target"].to(device), batch["past_time_feat"].to(device),
                                  batch["future_time_feat"].to(device), batch["past_observed"].to(device))
                outputs.append(pred.float().cpu().numpy())
        if not outputs:
            return np.zeros((0, self.prediction_length, len(self.panel.columns) if self.panel.layout == "wide" else 1),
                            dtype=np.float32)
        return np.concatenate(outputs)

    def unfitted_copy(self) -> Forecaster:
        """A new, unfitted Forecaster with the same settings (used to refit in backtests)."""
        return Forecaster(self.model_name, prediction_length=self.prediction_length,
                          context_length=self.context_length, freq=self.freq, val_windows=self.val_windows,
                          trainer_kwargs=self.trainer_kwargs, **self.training.to_dict(), **self.model_options)

    # ------------------------------------------------------------------ gates
    def gates(self) -> pd.DataFrame:
        """One row per RSA gate and REM head: ``layer``, ``attention``, ``head``, ``kind``, ``gate``,
        ``lambda``, ``gamma``, ``theta``, ``dilation``, and in the data's time units the decay
        ``half_life`` and the cycle ``period`` (``freq`` steps, e.g. hours for ``"h"``)."""
        self._require_fitted()
        from tsrec.inspection import gate_table

        return gate_table(self.model, self.freq)

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | os.PathLike) -> Path:
        """Write ``forecaster.json`` (versioned config, data description, scaler) and ``weights.pt``
        (tensors only) into the directory ``path``."""
        self._require_fitted()
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        meta = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "model": self.model_name,
            "model_config": self.model.config.to_dict(),
            "training": self.training.to_dict(),
            "prediction_length": self.prediction_length,
            "context_length": self.context_length,
            "val_windows": self.val_windows,
            "columns": self._columns,
            "data": {
                "freq": self.panel.freq,
                "layout": self.panel.layout,
                "targets": list(self.panel.columns),
                "item_ids": list(self.panel.item_ids),
                "starts": [str(s.index[0]) for s in self.panel.items],
            },
            "scaler": self.scaler.to_dict(),
        }
        tensors = {
            "state_dict": self.model.state_dict(),
            "history_values": [torch.from_numpy(s.values) for s in self.panel.items],
            "history_observed": [torch.from_numpy(s.observed) for s in self.panel.items],
        }
        torch.save(tensors, path / _WEIGHTS_FILE)
        (path / _CONFIG_FILE).write_text(json.dumps(meta, indent=2))
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> Forecaster:
        """Load a directory written by :meth:`save`. Reads JSON and tensors only (no unpickling of
        arbitrary objects); a missing, corrupted or foreign directory raises ``ValueError``."""
        path = Path(path)
        config_file, weights_file = path / _CONFIG_FILE, path / _WEIGHTS_FILE
        if not config_file.is_file() or not weights_file.is_file():
            raise ValueError(f"{path} is not a saved tsrec Forecaster: expected {_CONFIG_FILE} and {_WEIGHTS_FILE} "
                             "written by Forecaster.save")
        try:
            meta = json.loads(config_file.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise ValueError(f"{config_file} is corrupted (not valid JSON: {err}); save the model again") from None
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise ValueError(f"{config_file} was not written by tsrec's Forecaster.save (format is "
                             f"{meta.get('format') if isinstance(meta, dict) else None!r})")
        if meta.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"{path} has format version {meta.get('format_version')!r}; this tsrec reads version "
                             f"{FORMAT_VERSION}. Use the tsrec version that saved it, or refit")
        try:
            tensors = torch.load(weights_file, map_location="cpu", weights_only=True)
            data = meta["data"]
            config = model_spec(meta["model"]).model_class.config_class.from_dict(meta["model_config"])
            training = meta["training"]
            self = cls(meta["model"], prediction_length=meta["prediction_length"],
                       context_length=meta["context_length"], freq=data["freq"], val_windows=meta["val_windows"],
                       **training)
            model = build_model(meta["model"], config)
            model.load_state_dict(tensors["state_dict"])
            items = []
            for item_id, start, values, observed in zip(data["item_ids"], data["starts"],
                                                        tensors["history_values"], tensors["history_observed"]):
                index = pd.date_range(pd.Timestamp(start), periods=len(values), freq=data["freq"])
                items.append(Series(item_id, index, values.numpy(), observed.numpy()))
            self.panel = Panel(freq=data["freq"], layout=data["layout"], columns=tuple(data["targets"]),
                               items=tuple(items))
            self.scaler = StandardScaler.from_dict(meta["scaler"])
            self._columns = meta["columns"]
        except (KeyError, TypeError, RuntimeError, EOFError, ValueError, OSError, pickle.UnpicklingError) as err:
            raise ValueError(f"{path} is corrupted or incomplete ({type(err).__name__}: {err}); "
                             "save the model again") from None
        self.model = model.eval()
        return self

    def __repr__(self) -> str:
        state = "fitted" if self.model is not None else "not fitted"
        return (f"Forecaster({self.model_name!r}, prediction_length={self.prediction_length}, "
                f"context_length={self.context_length}, freq={self.freq!r}; {state})")


def _tail(panel: Panel, length: int) -> Panel:
    """The last ``length`` steps of every item: all that ``predict()`` needs of the fit frame."""
    items = tuple(Series(s.item_id, s.index[-length:], s.values[-length:], s.observed[-length:])
                  for s in panel.items)
    return dataclasses.replace(panel, items=items)
