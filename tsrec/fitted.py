"""What ``fit`` learns, as one immutable value, and the forecasts it makes.

- :class:`FittedState`: the settings as resolved, the fitted scaler and covariate encoding, the data
  facts, the last ``context_length`` steps of every fitted series, the training summary and the
  network's weights. ``Forecaster.fit`` builds one; :meth:`FittedState.save` and
  :meth:`FittedState.load` write and read it as is (a folder of JSON and tensors).
- :class:`ForecastResult`: the forecasts of a batch of windows in the data's units and in the
  scaler's: point forecasts, quantiles and sample paths. :func:`unscale` is the one place where a
  network's scaled outputs are turned into the data's units; ``predict``, ``backtest``, the CLI and
  the GluonTS predictor read its results.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import torch

from tsrec.config import DataFacts
from tsrec.data import CovariateEncoder, CovariateValues, Panel, Series, StandardScaler, forecast_frame
from tsrec.data.schema import Schema
from tsrec.datasets.loading import sha256_of
from tsrec.models import ForecastModel, build_model
from tsrec.settings import ForecasterSettings

__all__ = ["FittedState", "ForecastResult", "TrainingSummary", "unscale"]

FORMAT = "tsrec-forecaster"
FORMAT_VERSION = 4
CONFIG_FILE = "forecaster.json"
WEIGHTS_FILE = "weights.pt"


@dataclass(frozen=True)
class TrainingSummary:
    """What one ``fit`` did.

    Attributes:
        history: one row per epoch of the run that validation watched (the only run without
            validation): ``epoch`` (1-based), ``train_loss``, ``val_loss`` (scaled units, means over
            the epoch's windows; NaN in an epoch without a validation check), ``learning_rate`` of the backbone,
            ``seconds``. Empty for models that need no training.
        best_epoch: the epoch of the validation check whose weights were kept (lowest validation
            loss); None without validation (the last epoch's weights are kept).
        fit_seconds: wall time of the whole ``fit`` after the data were prepared.
        best_step: optimizer steps done at that check (None without validation).
        budget: the run's budget: ``max_steps`` and ``max_epochs`` (None where unbounded),
            ``val_check_steps`` (None: once per epoch), ``steps_per_epoch``, ``train_windows``,
            ``steps_run``, ``time_limit`` and ``stopped_by`` (``"budget"``, ``"early stopping"`` or
            ``"time limit"``). Empty for models that need no training.
        refit: the refit on all the history (``refit_full``): ``windows``, ``steps``,
            ``epochs``, ``seconds`` and the last epoch's ``train_loss``; None when there was none,
            and ``{"skipped": reason}`` when it was skipped.
    """

    history: pd.DataFrame
    best_epoch: int | None
    fit_seconds: float
    best_step: int | None = None
    budget: dict[str, Any] = dataclasses.field(default_factory=dict)
    refit: dict[str, Any] | None = None

    COLUMNS: ClassVar[tuple[str, ...]] = ("epoch", "train_loss", "val_loss", "learning_rate", "seconds")

    @property
    def epochs_run(self) -> int:
        return len(self.history)

    def to_dict(self) -> dict[str, Any]:
        return {"history": self.history.to_dict(orient="list"), "best_epoch": self.best_epoch,
                "fit_seconds": self.fit_seconds, "best_step": self.best_step, "budget": dict(self.budget),
                "refit": self.refit}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainingSummary:
        return cls(pd.DataFrame(data["history"], columns=list(cls.COLUMNS)), data["best_epoch"], data["fit_seconds"],
                   data.get("best_step"), dict(data.get("budget") or {}), data.get("refit"))

    def __str__(self) -> str:
        steps = self.budget.get("steps_run")
        text = f"{self.epochs_run} epochs" + ("" if steps is None else f" ({steps} steps)")
        text += f" in {self.fit_seconds:.1f} s"
        if self.best_epoch is not None:
            text += f", best epoch {self.best_epoch}"
        if self.budget.get("stopped_by"):
            text += f", stopped by {self.budget['stopped_by']}"
        if self.refit and "skipped" not in self.refit:
            text += f"; refit on all the history for {self.refit['steps']} steps"
        return text


@dataclass(frozen=True)
class FittedState:
    """Everything ``fit`` learned; never changed after it is built (a new ``fit`` builds a new one).

    Attributes:
        settings: the settings as given to the Forecaster.
        resolved: the settings as completed from the data (context length, network sizes, ...).
        model: the trained network, in eval mode.
        history: the last ``context_length`` steps of every fitted series (what ``predict()``
            forecasts from without a frame), on its grid at ``history.freq``.
        scaler: per series and channel ``loc``/``scale`` and fences ``low``/``high`` ``[N, C]`` fitted on the
            training part.
        covariates: the fitted covariate encoding.
        covariate_history: the covariates over ``history``.
        facts: what the resolver knew of the data.
        summary: what the training did.
        schema: the roles of the fitted frame's columns (read again by ``predict`` and ``backtest``).
        leaderboard: ``Forecaster("auto")``'s candidates and weights (None otherwise).
    """

    settings: ForecasterSettings
    resolved: ForecasterSettings
    model: ForecastModel
    history: Panel
    scaler: StandardScaler
    covariates: CovariateEncoder
    covariate_history: CovariateValues
    facts: DataFacts
    summary: TrainingSummary
    schema: Schema
    leaderboard: pd.DataFrame | None = None

    def save(self, path: str | os.PathLike) -> Path:
        """Write the state into the directory ``path``: ``forecaster.json`` (versioned settings,
        data description, scaler, the SHA-256 of the weights) and ``weights.pt`` (tensors only).

        Crash-safe: both files are written into a new folder beside ``path`` that is renamed into
        place only when complete, so ``path`` always holds either the previous model or the new
        one, never a mixed or partial pair. An existing ``path`` is replaced only when it is a
        saved model (or empty); anything else there is refused, never deleted.
        """
        path = Path(path)
        if path.exists() and not _is_replaceable(path):
            raise ValueError(f"{path} exists and is not a saved tsrec model; save into a new or empty folder "
                             "(tsrec replaces only a folder written by Forecaster.save)")
        tensors = {
            "state_dict": self.model.state_dict(),
            "history_values": [torch.from_numpy(s.values) for s in self.history.items],
            "history_observed": [torch.from_numpy(s.observed) for s in self.history.items],
            "history_covariates": [torch.from_numpy(d) for d in self.covariate_history.dynamic],
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{path.name}.saving-", dir=path.parent))
        try:
            torch.save(tensors, staging / WEIGHTS_FILE)
            meta = self._metadata(sha256_of(staging / WEIGHTS_FILE))
            (staging / CONFIG_FILE).write_text(json.dumps(meta, indent=2))
            _replace_folder(staging, path)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return path

    def _metadata(self, weights_sha256: str) -> dict[str, Any]:
        """What ``forecaster.json`` holds (see :meth:`save`)."""
        tz = self.history.items[0].index.tz
        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "weights_sha256": weights_sha256,
            "settings": self.settings.to_dict(),
            "resolved_settings": self.resolved.to_dict(),
            "data_facts": dataclasses.asdict(self.facts),
            "training_summary": self.summary.to_dict(),
            "columns": self.schema.columns,
            "data": {
                "freq": self.history.freq,
                "layout": self.history.layout,
                "targets": list(self.history.columns),
                "item_ids": list(self.history.item_ids),
                "starts": [s.index[0].isoformat() for s in self.history.items],
                "tz": None if tz is None else str(tz),
            },
            "scaler": self.scaler.to_dict(),
            "covariates": {"encoder": self.covariates.to_dict(),
                           "static_real": self.covariate_history.static_real.tolist(),
                           "static_cat": self.covariate_history.static_cat.tolist()},
        }

    @classmethod
    def load(cls, path: str | os.PathLike) -> FittedState:
        """Read a directory written by :meth:`save`. Reads JSON and tensors only (no unpickling of
        arbitrary objects); a missing, corrupted or foreign directory raises ``ValueError``."""
        path = Path(path)
        config_file, weights_file = path / CONFIG_FILE, path / WEIGHTS_FILE
        if not config_file.is_file() or not weights_file.is_file():
            raise ValueError(f"{path} is not a saved tsrec Forecaster: expected {CONFIG_FILE} and {WEIGHTS_FILE} "
                             "written by Forecaster.save")
        try:
            meta = json.loads(config_file.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise ValueError(f"{config_file} is corrupted (not valid JSON: {err}); save the model again") from err
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise ValueError(f"{config_file} was not written by tsrec's Forecaster.save (format is "
                             f"{meta.get('format') if isinstance(meta, dict) else None!r})")
        if meta.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"{path} has format version {meta.get('format_version')!r}; this tsrec reads version "
                             f"{FORMAT_VERSION}. Use the tsrec version that saved it, or refit")
        if meta.get("weights_sha256") != sha256_of(weights_file):
            raise ValueError(f"{weights_file} does not match the checksum in {CONFIG_FILE}: the weights were "
                             "corrupted or replaced after saving; save the model again")
        try:
            _settings_before_scaling(meta)
            tensors = torch.load(weights_file, map_location="cpu", weights_only=True)
            resolved = ForecasterSettings.from_dict(meta["resolved_settings"])
            model = build_model(resolved.model, resolved.network)
            model.load_state_dict(tensors["state_dict"])
            encoder = CovariateEncoder.from_dict(meta["covariates"]["encoder"])
            state = cls(
                settings=ForecasterSettings.from_dict(meta["settings"]), resolved=resolved, model=model.eval(),
                history=_history(meta["data"], tensors["history_values"], tensors["history_observed"]),
                scaler=StandardScaler.from_dict(meta["scaler"]),
                covariates=encoder,
                covariate_history=CovariateValues(
                    tuple(d.numpy() for d in tensors["history_covariates"]),
                    np.array(meta["covariates"]["static_real"], dtype=np.float64),  # [N, Ks]
                    np.array(meta["covariates"]["static_cat"], dtype=object)),  # [N, Kc]
                facts=DataFacts(**meta["data_facts"]),
                summary=TrainingSummary.from_dict(meta["training_summary"]),
                schema=Schema(**meta["columns"], covariates=encoder.config))
        except (KeyError, TypeError, RuntimeError, EOFError, ValueError, OSError, pickle.UnpicklingError) as err:
            raise ValueError(f"{path} is corrupted or incomplete ({type(err).__name__}: {err}); "
                             "save the model again") from err
        return state


@dataclass(frozen=True)
class ForecastResult:
    """Forecasts of ``N`` windows (``H`` steps, ``C`` channels), in the data's units and in the
    fitted scaler's. Rows whose context held no observed value are NaN (:attr:`blind`).

    Attributes:
        items: ``[N]`` int64, the position of each window's series in the panel it was read from.
        origins: ``[N]`` int64, the grid position of each window's first forecast step.
        mean: ``[N, H, C]`` float64, point forecasts (a distribution's mean).
        scaled: ``[N, H, C]``, the same in the scaler's units.
        levels: the quantile levels of ``quantiles`` (empty without).
        quantiles: ``[N, H, C, Q]`` float64 at ``levels``, never crossing (None without).
        scaled_quantiles: the same in the scaler's units (None without).
        samples: ``[S, N, H, C]`` float64 sample paths (None without).
    """

    items: np.ndarray
    origins: np.ndarray
    mean: np.ndarray
    scaled: np.ndarray
    levels: tuple[float, ...] = ()
    quantiles: np.ndarray | None = None
    scaled_quantiles: np.ndarray | None = None
    samples: np.ndarray | None = None

    @property
    def blind(self) -> np.ndarray:
        """``[N, C]`` bool: the windows and channels that got no forecast (no observed value in
        their context)."""
        return np.isnan(self.scaled[:, 0])

    def to_frame(self, panel: Panel) -> pd.DataFrame:
        """A long frame with ``item_id``, ``timestamp``, ``mean``, then one column per quantile
        level (GluonTS's ``QuantileForecast`` keys: ``"0.1"``, ...) and per sample path
        (``sample_0``, ...); rows ordered by window, channel, step (:func:`~tsrec.data.forecast_frame`)."""
        frame = forecast_frame(panel, self.mean, items=self.items, origins=self.origins)
        extra = {str(level): _long_order(self.quantiles[..., i]) for i, level in enumerate(self.levels)}
        if self.samples is not None:
            extra.update({f"sample_{i}": _long_order(path) for i, path in enumerate(self.samples)})
        return pd.concat([frame, pd.DataFrame(extra, index=frame.index)], axis=1) if extra else frame


def unscale(model: ForecastModel, scaler: StandardScaler, outputs: np.ndarray, rows: np.ndarray, items: np.ndarray,
            origins: np.ndarray, *, levels: Sequence[float] = (), num_samples: int | None = None) -> ForecastResult:
    """The forecasts of a network's scaled ``outputs`` in the data's units: the one place where
    scaling is undone.

    outputs: ``[N, H, C]`` point forecasts or ``[N, H, C, P]`` a distribution's parameters
             (``Forecaster.forecast_windows``), in the scaler's units.
    rows:    ``[N]`` each window's scaler row; ``items``/``origins`` ``[N]`` as in :class:`ForecastResult`.
    levels, num_samples: the quantiles and sample paths wanted (a probabilistic model's only).
    """
    output = model.output
    if not output.probabilistic:
        return ForecastResult(items, origins, scaler.inverse_transform(outputs, rows), outputs)
    scaled_params = torch.from_numpy(outputs).double()  # [N, H, C, P]
    shift = torch.from_numpy(scaler.loc[rows])[:, None, :]  # [N, 1, C]
    scale = torch.from_numpy(scaler.scale[rows])[:, None, :]
    params = output.affine(scaled_params, shift, scale)  # [N, H, C, P] in the data's units
    levels = tuple(levels)
    return ForecastResult(
        items, origins, output.mean(params).numpy(), output.mean(scaled_params).numpy(), levels,
        quantiles=output.quantiles(params, levels).numpy() if levels else None,
        scaled_quantiles=output.quantiles(scaled_params, levels).numpy() if levels else None,
        samples=None if num_samples is None else output.sample(params, num_samples).numpy())


def _settings_before_scaling(meta: dict[str, Any]) -> None:
    """Complete, in place, the settings of a file saved before ``WindowConfig.scaling`` existed: its
    scaler was fitted on the values as they were, i.e. ``scaling="standard"`` (its fences are
    unbounded, :meth:`StandardScaler.from_dict`), and a refit of its settings fits the same way."""
    for key in ("settings", "resolved_settings"):
        window = meta[key]["window"]
        if isinstance(window, dict) and "scaling" not in window:
            window["scaling"] = "standard"


def _history(data: dict[str, Any], values: Sequence[torch.Tensor], observed: Sequence[torch.Tensor]) -> Panel:
    """The saved history panel (:meth:`FittedState._metadata`'s ``data`` and the tensors)."""
    items = []
    for item_id, start, x, seen in zip(data["item_ids"], data["starts"], values, observed):
        first = pd.Timestamp(start) if data["tz"] is None else pd.Timestamp(start).tz_convert(data["tz"])
        index = pd.date_range(first, periods=len(x), freq=data["freq"])
        items.append(Series(item_id, index, x.numpy(), seen.numpy()))
    return Panel(freq=data["freq"], layout=data["layout"], columns=tuple(data["targets"]), items=tuple(items))


def _long_order(values: np.ndarray) -> np.ndarray:
    """``[N, H, C]`` values in the row order of :func:`~tsrec.data.forecast_frame` (forecast,
    column, timestamp)."""
    return values.transpose(0, 2, 1).ravel()


def _is_replaceable(path: Path) -> bool:
    """Whether :meth:`FittedState.save` may replace ``path``: an empty folder or a saved model."""
    return path.is_dir() and (not any(path.iterdir()) or (path / CONFIG_FILE).is_file())


def _replace_folder(new: Path, path: Path) -> None:
    """Move the complete folder ``new`` to ``path``, replacing a previous ``path``: the old folder
    is first renamed aside, so a crash leaves ``path`` or its ``.old`` copy whole, never a mix."""
    old = None
    if path.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{path.name}.old-", dir=path.parent))
        os.replace(path, old / path.name)
    os.replace(new, path)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
