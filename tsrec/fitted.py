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
import gc
import hashlib
import io
import itertools
import json
import os
import pickle
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import torch

from tsrec import _saving
from tsrec._hashing import sha256_of
from tsrec._saving import ConcurrentSaveError
from tsrec._version import __version__
from tsrec.config import DataFacts
from tsrec.conformal import Calibration
from tsrec.data import CovariateEncoder, CovariateValues, Panel, Series, StandardScaler, forecast_frame
from tsrec.data.frame import split_at
from tsrec.data.schema import Schema
from tsrec.data.tails import fills_tails, tail_gaps
from tsrec.data.time_features import calendar_cycles, data_facts, regular_stamps
from tsrec.models import ForecastModel, build_model
from tsrec.settings import ForecasterSettings

__all__ = ["ConcurrentSaveError", "FittedState", "ForecastResult", "TrainingSummary", "unscale"]

FORMAT = "tsrec-forecaster"
FORMAT_VERSION = 11
#: Model formats this tsrec reads: 4 (tsrec 0.1 before whole-model checksums; see
#: :func:`_verify_checksums`), 5 (the history as three tensors per series), 6 (the history packed
#: end to end), 7 (every per-series value in ``weights.pt``, :meth:`FittedState._tensors`;
#: before it ``forecaster.json`` held the ids, starts, scaler rows and static covariates), 8
#: (a conformal calibration, when fitted: ``forecaster.json``'s ``conformal`` and ``weights.pt``'s
#: ``conformal_*`` tensors, :class:`~tsrec.conformal.Calibration`) and 9 (the statistical models'
#: fitted parameters in the state dict, ``<module>._extra_state``,
#: :class:`~tsrec.models.parameters.Parameters`; a model saved before them has none and fits each
#: window, as it did) and 10 (``weights.pt``'s ``scaler_floor``: the series never forecast below 0,
#: :attr:`StandardScaler.floor <tsrec.data.scaling.StandardScaler>`; before it, none is) and 11 (a
#: calibration that pools its steps or learns after the fit: ``weights.pt``'s ``conformal_profile``
#: and the ``conformal`` entry's ``update`` and ``rolling``, :class:`~tsrec.conformal.Calibration`;
#: a calibration saved before them reads as one that neither pools nor learns, as it was).
READABLE_VERSIONS = (4, 5, 6, 7, 8, 9, 10, 11)
#: The format of a model without a calibration: 7, which a tsrec from before format 8 reads too.
UNCALIBRATED_VERSION = 7
#: The format of a calibrated model without fitted parameters.
CALIBRATED_VERSION = 8
#: The format of a model with fitted parameters and no floor.
PARAMETERS_VERSION = 9
#: The format of a model with a floor and no calibration that pools steps or learns.
FLOOR_VERSION = 10
#: The state dict's entries of a module's extra state (the statistical models' parameters, format 9).
EXTRA_STATE = "_extra_state"
CONFIG_FILE = "forecaster.json"
WEIGHTS_FILE = "weights.pt"
#: ``forecaster.json``'s entry with the SHA-256 of every file of the model, itself included.
CHECKSUMS = "sha256"
#: ``forecaster.json``'s entries that describe the file, not the model (format 4's ``weights_sha256`` too).
HEADER = frozenset({"format", "format_version", "tsrec_version", CHECKSUMS, "weights_sha256"})
#: The scaler's per-series rows (``[N, C]`` each), ``weights.pt``'s ``scaler_<name>`` since format 7.
SCALER_ROWS = ("loc", "scale", "low", "high", "floor")
#: The scaler rows a file of an earlier format may lack (its default: no floor).
LATER_ROWS = {"floor": FLOOR_VERSION}
#: ``weights.pt``'s tensors beside the state dict in format 7 (:meth:`FittedState._tensors`): dtype
#: and number of dimensions, checked before they are read (:func:`_check_tensors`).
SERIES_TENSORS: dict[str, tuple[torch.dtype, int]] = {
    "history_lengths": (torch.int64, 1), "history_values": (torch.float64, 2), "history_observed": (torch.bool, 2),
    "history_covariates": (torch.float64, 2), "item_ids": (torch.uint8, 1), "item_id_ends": (torch.int64, 1),
    "starts": (torch.int64, 1), **{f"scaler_{name}": (torch.float64, 2) for name in SCALER_ROWS},
    "static_real": (torch.float64, 2), "static_cat": (torch.uint8, 1), "static_cat_ends": (torch.int64, 1),
}


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
        settings: the settings as given to the Forecaster, its trainer settings (``trainer_kwargs``'
            JSON values, ``output_dir``) included.
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
        calibration: the conformal calibration of ``predict(levels=...)``'s intervals
            (:mod:`tsrec.conformal`; None when the model was fitted without one).
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
    calibration: Calibration | None = None

    def save(self, path: str | os.PathLike) -> Path:
        """Write the state into the directory ``path``: ``forecaster.json`` (the format and tsrec
        versions, settings, data description, covariate encoding, and the SHA-256 of every file of
        the model, itself included) and ``weights.pt`` (tensors only: the weights and every
        per-series value, :meth:`_tensors`).

        Crash-safe and safe under concurrent saves and loads (:mod:`tsrec._saving`): the files are
        written into a hidden folder beside ``path`` that is renamed into place, under a lock,
        only when complete, so ``path`` always holds either the previous model or the new one,
        never a mixed or partial pair; the folders left by crashed saves are removed. An existing
        ``path`` is replaced only when it is a saved model (or empty); anything else there is
        refused, never deleted. Raises :class:`ConcurrentSaveError` when another process kept
        ``path`` locked for more than :data:`tsrec._saving.LOCK_TIMEOUT` seconds.
        """
        path = Path(path)
        _require_replaceable(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with _saving.staging_folder(path) as staging:
            tensors = self._tensors()
            torch.save(tensors, staging / WEIGHTS_FILE)
            learns = self.calibration is not None and self.calibration.learns_or_pools
            version = FORMAT_VERSION if learns else FLOOR_VERSION if np.isfinite(self.scaler.floor).any() else \
                PARAMETERS_VERSION if any(key.endswith(EXTRA_STATE) for key in tensors["state_dict"]) else \
                UNCALIBRATED_VERSION if self.calibration is None else CALIBRATED_VERSION
            meta = {"format": FORMAT, "format_version": version, "tsrec_version": __version__,
                    **self._content()}
            checksums = {file.name: sha256_of(file) for file in sorted(staging.iterdir())}
            meta[CHECKSUMS] = {**checksums, CONFIG_FILE: _json_sha256(meta)}
            (staging / CONFIG_FILE).write_text(json.dumps(meta, indent=2))
            _saving.move_into_place(staging, path, _require_replaceable)
        return path

    def _tensors(self) -> dict[str, Any]:
        """What ``weights.pt`` holds: the network's state dict and every per-series value of the
        ``N`` fitted series, as a handful of tensors however many series were fitted (so that a
        load costs no per-series decoding; dtypes in :data:`SERIES_TENSORS`):

        - ``history_lengths`` ``[N]``; ``history_values`` ``[sum T_i, C]``, ``history_observed``
          ``[sum T_i, C]`` and ``history_covariates`` ``[sum T_i, K]``: every series' rows laid end
          to end;
        - ``item_ids`` ``[B]`` the ids' UTF-8 bytes laid end to end, ``item_id_ends`` ``[N]`` where
          each id's bytes end (:func:`_pack_strings`);
        - ``starts`` ``[N]`` each series' first timestamp in nanoseconds since 1970 (UTC in a named
          time zone, ``forecaster.json``'s ``data.tz``; the wall clock without one);
        - ``scaler_loc``, ``scaler_scale``, ``scaler_low``, ``scaler_high`` ``[N, C]``;
        - ``static_real`` ``[N, Ks]``; ``static_cat`` and ``static_cat_ends`` the ``[N, Kc]``
          categorical static covariates row by row, as the ids;
        - ``model_name`` the UTF-8 bytes of the registry name the network was built as (one
          network class serves several names, e.g. ``patchtst`` and ``rsa_patchtst``): ``load``
          refuses a ``forecaster.json`` that names another (:func:`_named_as_built`).
        """
        history, statics = self.history, self.covariate_history
        items = history.items
        ids, id_ends = _pack_strings([s.item_id for s in items])
        categories, category_ends = _pack_strings(statics.static_cat.ravel().tolist())
        return {
            "state_dict": self.model.state_dict(),
            "history_lengths": torch.tensor([len(s) for s in items], dtype=torch.int64),
            "history_values": torch.from_numpy(np.concatenate([s.values for s in items])),
            "history_observed": torch.from_numpy(np.concatenate([s.observed for s in items])),
            "history_covariates": torch.from_numpy(np.concatenate(statics.dynamic)),
            "item_ids": ids, "item_id_ends": id_ends,
            "starts": torch.from_numpy(history.stamps[history.offsets[:-1]].asi8.copy()),  # [N]
            **{f"scaler_{name}": _tensor(getattr(self.scaler, name), np.float64) for name in SCALER_ROWS},
            "static_real": _tensor(statics.static_real, np.float64),
            "static_cat": categories, "static_cat_ends": category_ends,
            "model_name": _pack_strings([self.resolved.model])[0],
            **({} if self.calibration is None else self.calibration.tensors()),
        }

    def _content(self) -> dict[str, Any]:
        """What ``forecaster.json`` describes of the state (all but its header, see :meth:`save`):
        nothing per series (:meth:`_tensors` holds that), so that its size and the cost of
        reading and checking it do not grow with the number of series."""
        tz = self.history.items[0].index.tz
        scaler = {"robust": self.scaler.robust}  # its rows (SCALER_ROWS) are in weights.pt
        return {
            "settings": self.settings.to_dict(),
            "resolved_settings": self.resolved.to_dict(),
            "data_facts": dataclasses.asdict(self.facts),
            "training_summary": self.summary.to_dict(),
            "columns": self.schema.columns,
            "data": {
                "freq": self.history.freq,
                "layout": self.history.layout,
                "targets": list(self.history.columns),
                "tz": None if tz is None else str(tz),
            },
            "scaler": scaler,
            "covariates": {"encoder": self.covariates.to_dict()},
            **({} if self.calibration is None else {"conformal": self.calibration.to_dict()}),
        }

    @classmethod
    def load(cls, path: str | os.PathLike) -> FittedState:
        """Read a directory written by :meth:`save`. Reads JSON and tensors only (no unpickling of
        arbitrary objects). ``ValueError`` for a missing, foreign or corrupted directory, a model
        edited after saving (a file that does not match its checksum, or settings that do not fit
        the weights' shapes), and one saved by a newer tsrec; :class:`ConcurrentSaveError` when
        another process is saving to ``path`` for longer than the lock's timeout."""
        path = Path(path)
        with _saving.folder_lock(path, exclusive=False):  # a concurrent save never shows half its files
            meta, files = _read_saved(path)
        _verify_checksums(path, meta, files)
        try:
            return cls._from_saved(meta, files[WEIGHTS_FILE])
        except (KeyError, TypeError, AttributeError, IndexError, RuntimeError, EOFError, ValueError, OSError,
                pickle.UnpicklingError) as err:
            raise _unreadable(path, meta, err) from err

    @classmethod
    def _from_saved(cls, meta: dict[str, Any], weights: bytes) -> FittedState:
        """The state that ``forecaster.json``'s ``meta`` and ``weights.pt``'s bytes describe,
        checked to be one model (:func:`_state_dict_mismatches`, :func:`_check_tensors`,
        :func:`_inconsistencies`, :func:`_unknown_keys`)."""
        _settings_before_scaling(meta)
        tensors = torch.load(io.BytesIO(weights), map_location="cpu", weights_only=True)
        if meta["format_version"] >= 7:
            _check_tensors(tensors, meta["format_version"])
        resolved = ForecasterSettings.from_dict(meta["resolved_settings"])
        model = build_model(resolved.model, resolved.network)
        if meta["format_version"] < 9:  # no fitted parameters yet: the statistical models fit each window, as then
            tensors["state_dict"] = {**{key: value for key, value in model.state_dict().items()
                                        if key.endswith(EXTRA_STATE)}, **tensors["state_dict"]}
        mismatches = _state_dict_mismatches(model, tensors["state_dict"])
        if mismatches:
            network = resolved.network
            raise _Inconsistent(
                f"{WEIGHTS_FILE} does not fit the {resolved.model!r} network that {CONFIG_FILE} describes "
                f"(prediction_length {network.prediction_length}, context_length {network.context_length}, "
                f"{network.n_channels} channels): {'; '.join(mismatches)}")
        _named_as_built(resolved.model, tensors)  # one network class, another name (the mismatches: another class)
        model.load_state_dict(tensors["state_dict"])
        encoder = CovariateEncoder.from_dict(meta["covariates"]["encoder"])
        meta, rows = _per_series(meta, tensors, len(encoder.categorical))
        values, observed, dynamic = _series_arrays(tensors, "history_values", "history_observed", "history_covariates")
        state = cls(
            settings=ForecasterSettings.from_dict(meta["settings"]), resolved=resolved, model=model.eval(),
            history=_history(meta["data"], rows, values, observed),
            scaler=rows.scaler,
            covariates=encoder,
            covariate_history=CovariateValues(tuple(dynamic), rows.static_real, rows.static_cat),
            # files written before the facts held the calendar's cycles: the frequency's
            facts=DataFacts(**{"cycles": calendar_cycles(meta["data"]["freq"]), **meta["data_facts"]}),
            summary=TrainingSummary.from_dict(meta["training_summary"]),
            schema=Schema(**meta["columns"], covariates=encoder.config),
            calibration=_saved_calibration(meta, tensors))
        problems = _inconsistencies(state)
        if problems:
            raise _Inconsistent(f"{CONFIG_FILE} contradicts itself or {WEIGHTS_FILE}: {'; '.join(problems)}")
        unknown = _unknown_keys({k: v for k, v in meta.items() if k not in HEADER}, state._content())
        if unknown:
            raise _Inconsistent(f"{CONFIG_FILE} has entries this tsrec does not know: {', '.join(unknown)}")
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
        intervals: the interval levels (percent) whose bands are among ``quantiles`` (empty without).
        interval_method: what gave those bands: ``"conformal"`` (the model's calibration,
            :mod:`tsrec.conformal`) or ``"model"`` (a probabilistic network's own distribution or
            quantiles); None without intervals.
        floored: the point forecasts raised to their series' floor (a series never negative in
            its training data is never forecast below 0: ``WindowConfig.nonnegative``).
    """

    items: np.ndarray
    origins: np.ndarray
    mean: np.ndarray
    scaled: np.ndarray
    levels: tuple[float, ...] = ()
    quantiles: np.ndarray | None = None
    scaled_quantiles: np.ndarray | None = None
    samples: np.ndarray | None = None
    intervals: tuple[float, ...] = ()
    interval_method: str | None = None
    floored: int = 0

    @property
    def blind(self) -> np.ndarray:
        """``[N, C]`` bool: the windows and channels that got no forecast (no observed value in
        their context)."""
        return np.isnan(self.scaled[:, 0])

    def to_frame(self, panel: Panel) -> pd.DataFrame:
        """A long frame with ``item_id``, ``timestamp``, ``mean``, then one column per quantile
        level (GluonTS's ``QuantileForecast`` keys: ``"0.1"``, ...) and per sample path
        (``sample_0``, ...); rows ordered by window, channel, step (:func:`~tsrec.data.forecast_frame`).
        With intervals, ``frame.attrs["intervals"]`` says what gave their bands (:attr:`interval_method`)
        and ``frame.attrs["levels"]`` lists their levels; ``frame.attrs["floored"]`` counts the point
        forecasts raised to 0 (:attr:`floored`)."""
        frame = forecast_frame(panel, self.mean, items=self.items, origins=self.origins)
        extra = {str(level): _long_order(self.quantiles[..., i]) for i, level in enumerate(self.levels)}
        if self.samples is not None:
            extra.update({f"sample_{i}": _long_order(path) for i, path in enumerate(self.samples)})
        frame = pd.concat([frame, pd.DataFrame(extra, index=frame.index)], axis=1) if extra else frame
        if self.interval_method is not None:
            frame.attrs.update(intervals=self.interval_method, levels=list(self.intervals))
        frame.attrs["floored"] = self.floored
        return frame


def unscale(model: ForecastModel, scaler: StandardScaler, outputs: np.ndarray, rows: np.ndarray, items: np.ndarray,
            origins: np.ndarray, *, levels: Sequence[float] = (), num_samples: int | None = None) -> ForecastResult:
    """The forecasts of a network's scaled ``outputs`` in the data's units: the one place where
    scaling is undone, and where a series never negative in its training data is kept at or above
    0 (:attr:`StandardScaler.floor <tsrec.data.scaling.StandardScaler>`: the point forecasts,
    quantiles and samples alike, in both units).

    outputs: ``[N, H, C]`` point forecasts or ``[N, H, C, P]`` a distribution's parameters
             (:func:`tsrec.forecasting.outputs`), in the scaler's units.
    rows:    ``[N]`` each window's scaler row; ``items``/``origins`` ``[N]`` as in :class:`ForecastResult`.
    levels, num_samples: the quantiles and sample paths wanted (a probabilistic model's only).
    """
    output = model.output
    if not output.probabilistic:
        mean = scaler.inverse_transform(outputs, rows)  # [N, H, C]
        return ForecastResult(items, origins, scaler.floored(mean, rows), scaler.floored(outputs, rows, scaled=True),
                              floored=_below(scaler, mean, rows))
    scaled_params = torch.from_numpy(outputs).double()  # [N, H, C, P]
    shift = torch.from_numpy(scaler.loc[rows])[:, None, :]  # [N, 1, C]
    scale = torch.from_numpy(scaler.scale[rows])[:, None, :]
    params = output.affine(scaled_params, shift, scale)  # [N, H, C, P] in the data's units
    levels = tuple(levels)
    mean = output.mean(params).numpy()  # [N, H, C]

    def floored(values: np.ndarray, scaled: bool, last: bool) -> np.ndarray:  # [..., C] or [..., C, Q] (last)
        values = np.moveaxis(values, -1, 1) if last else values
        values = scaler.floored(values, rows, scaled=scaled)
        return np.moveaxis(values, 1, -1) if last else values

    return ForecastResult(
        items, origins, floored(mean, False, False), floored(output.mean(scaled_params).numpy(), True, False), levels,
        quantiles=floored(output.quantiles(params, levels).numpy(), False, True) if levels else None,
        scaled_quantiles=floored(output.quantiles(scaled_params, levels).numpy(), True, True) if levels else None,
        samples=None if num_samples is None else
        np.maximum(output.sample(params, num_samples).numpy(), scaler.floor[rows][None, :, None, :]),
        floored=_below(scaler, mean, rows))


def _below(scaler: StandardScaler, mean: np.ndarray, rows: np.ndarray) -> int:
    """How many of the point forecasts ``mean`` ``[N, H, C]`` (rows ``rows`` ``[N]``) lie below their floor."""
    return int((mean < scaler.floor[rows][:, None, :]).sum())


def _settings_before_scaling(meta: dict[str, Any]) -> None:
    """Complete, in place, the settings of a file saved before ``WindowConfig.scaling`` existed: its
    scaler was fitted on the values as they were, i.e. ``scaling="standard"`` (its fences are
    unbounded, :meth:`StandardScaler.from_dict`), and a refit of its settings fits the same way."""
    for key in ("settings", "resolved_settings"):
        window = meta[key]["window"]
        if isinstance(window, dict) and "scaling" not in window:
            window["scaling"] = "standard"


@dataclass(frozen=True)
class _SeriesRows:
    """What a saved model holds of each of its ``N`` series besides the history, decoded: from
    ``weights.pt`` (format 7) or ``forecaster.json`` (formats 4 to 6), :func:`_per_series`.

    item_ids:    ``[N]`` the series' ids.
    firsts:      ``[N]`` each series' first timestamp (in ``data.tz``).
    scaler:      the target scaler, ``[N, C]`` rows.
    static_real: ``[N, Ks]`` float64 numeric static covariates.
    static_cat:  ``[N, Kc]`` str (object) categorical static covariates.
    """

    item_ids: list[str]
    firsts: pd.DatetimeIndex
    scaler: StandardScaler
    static_real: np.ndarray
    static_cat: np.ndarray


def _per_series(meta: dict[str, Any], tensors: dict[str, Any],
                n_categorical: int) -> tuple[dict[str, Any], _SeriesRows]:
    """``meta`` without its per-series entries (what :func:`_unknown_keys` checks) and the
    per-series values, wherever the model's format keeps them: format 7's tensors (checked by
    :func:`_check_tensors`), or the JSON lists of formats 4 to 6. ``n_categorical``: ``Kc``."""
    tz = meta["data"]["tz"]
    if meta["format_version"] >= 7:
        firsts = pd.DatetimeIndex(tensors["starts"].numpy().view("M8[ns]"))  # [N]
        categories = _unpack_strings(tensors["static_cat"], tensors["static_cat_ends"])  # [N * Kc]
        n_series = len(tensors["history_lengths"])
        if len(categories) != n_series * n_categorical:
            raise _Inconsistent(f"{WEIGHTS_FILE} holds {len(categories)} categorical static covariates "
                                f"(static_cat_ends) but {n_series} series of {n_categorical} each ({CONFIG_FILE}'s "
                                "covariates.encoder)")
        rows = _SeriesRows(
            _unpack_strings(tensors["item_ids"], tensors["item_id_ends"]),
            firsts if tz is None else firsts.tz_localize("UTC").tz_convert(tz),
            StandardScaler(**{name: tensors[f"scaler_{name}"].numpy() for name in SCALER_ROWS
                              if f"scaler_{name}" in tensors}, robust=meta["scaler"]["robust"]),
            tensors["static_real"].numpy(),
            np.array(categories, dtype=object).reshape(n_series, n_categorical))
        return meta, rows
    data, covariates = dict(meta["data"]), dict(meta["covariates"])
    ids, starts = data.pop("item_ids"), data.pop("starts")
    static_real, static_cat = covariates.pop("static_real"), covariates.pop("static_cat")
    scaler = StandardScaler.from_dict(meta["scaler"])  # [N, C] rows, fences unbounded before format 5
    firsts = pd.DatetimeIndex(pd.to_datetime(starts, utc=tz is not None, format="ISO8601"))  # [N]
    rows = _SeriesRows(ids, firsts if tz is None else firsts.tz_convert(tz), scaler,
                       np.array(static_real, dtype=np.float64),  # [N, Ks]
                       np.array(static_cat, dtype=object))  # [N, Kc]
    robust = {key: value for key, value in meta["scaler"].items() if key not in SCALER_ROWS}
    return {**meta, "data": data, "covariates": covariates, "scaler": robust}, rows


def _check_tensors(tensors: dict[str, Any], version: int) -> None:
    """Refuse a format-7 (or later, ``version``) ``weights.pt`` whose per-series tensors are
    missing (but a scaler row of a later format than ``version``, :data:`LATER_ROWS`), of another
    dtype or number of dimensions than :data:`SERIES_TENSORS`, a history of another number of steps
    than ``history_lengths``, and strings whose ends do not cut their bytes (the shapes that depend
    on ``forecaster.json`` are :func:`_inconsistencies`', the counts of series :func:`_history`'s)."""
    optional = {f"scaler_{name}" for name, since in LATER_ROWS.items() if version < since}
    wrong = [f"{key} is {_described(tensors.get(key))}, not {str(dtype).removeprefix('torch.')} with {ndim} "
             f"dimension{'s' * (ndim > 1)}" for key, (dtype, ndim) in SERIES_TENSORS.items()
             if not (key in optional and key not in tensors)
             and not (isinstance(tensors.get(key), torch.Tensor) and tensors[key].dtype == dtype
                      and tensors[key].ndim == ndim)]
    if wrong:
        raise _Inconsistent(f"{WEIGHTS_FILE}'s {'; '.join(wrong)}")
    lengths = tensors["history_lengths"]
    steps = {key: len(tensors[key]) for key in ("history_values", "history_observed", "history_covariates")}
    if set(steps.values()) != {int(lengths.sum())} or (lengths < 0).any():
        rows = ", ".join(f"{key} has {n} rows" for key, n in steps.items())
        raise _Inconsistent(f"{WEIGHTS_FILE}'s history_lengths ({len(lengths)} series of {int(lengths.sum())} steps in "
                            f"all) do not cut its history: {rows}")
    for data, ends in (("item_ids", "item_id_ends"), ("static_cat", "static_cat_ends")):
        bounds = torch.cat([torch.zeros(1, dtype=torch.int64), tensors[ends]])  # [N + 1] from 0
        if (bounds.diff() < 0).any() or bounds[-1] != len(tensors[data]):
            raise _Inconsistent(f"{WEIGHTS_FILE}'s {ends} are not where the strings of its {data} "
                                f"({len(tensors[data])} bytes) end, in order")


def _named_as_built(name: str, tensors: dict[str, Any]) -> None:
    """Refuse a ``forecaster.json`` whose model ``name`` is not the one ``weights.pt`` was saved
    with (``model_name``; files saved before it have none, and nothing to compare): an edited name
    would run one model's network under another's (``patchtst``'s as ``rsa_patchtst``)."""
    saved = tensors.get("model_name")
    if saved is None:
        return
    built = bytes(saved.numpy()).decode("utf-8", "surrogatepass") if isinstance(saved, torch.Tensor) else saved
    if built != name:
        raise _Inconsistent(f"{CONFIG_FILE} names the model {name!r}, but {WEIGHTS_FILE} holds the network of "
                            f"{built!r}")


def _described(value: Any) -> str:
    """How :func:`_check_tensors` names what ``weights.pt`` holds under a key."""
    if not isinstance(value, torch.Tensor):
        return "missing" if value is None else type(value).__name__
    return f"{str(value.dtype).removeprefix('torch.')} {list(value.shape)}"


def _pack_strings(texts: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """``texts`` ``[N]`` as two tensors: their UTF-8 bytes laid end to end ``[B]`` uint8, and where
    each text's bytes end ``[N]`` int64 (:func:`_unpack_strings` reads them back). Lone surrogates
    (text decoded with ``errors="surrogateescape"``) are kept, as JSON kept them before format 7."""
    encoded = [text.encode("utf-8", "surrogatepass") for text in texts]
    ends = np.cumsum([len(part) for part in encoded], dtype=np.int64)  # [N]
    return torch.from_numpy(np.frombuffer(b"".join(encoded), dtype=np.uint8).copy()), torch.from_numpy(ends)


def _unpack_strings(data: torch.Tensor, ends: torch.Tensor) -> list[str]:
    """The ``[N]`` texts that :func:`_pack_strings` packed into ``data`` and ``ends``."""
    raw, bounds = data.numpy().tobytes(), ends.tolist()
    return [raw[start:end].decode("utf-8", "surrogatepass") for start, end in zip([0, *bounds[:-1]], bounds)]


def _tensor(array: np.ndarray, dtype: type) -> torch.Tensor:
    """``array`` as a tensor of its own contiguous memory (a view would save its whole base)."""
    return torch.from_numpy(np.array(array, dtype=dtype, order="C", copy=True))


def _series_arrays(tensors: dict[str, Any], *keys: str) -> list[list[np.ndarray]]:
    """Per key of ``weights.pt``, its arrays of each series: formats 6 and 7's packed
    ``[sum T_i, ...]`` tensor cut at ``history_lengths``, or formats 4 and 5's list of one tensor
    per series."""
    arrays = []
    for key in keys:
        saved = tensors[key]
        if isinstance(saved, list):
            arrays.append([part.numpy() for part in saved])
            continue
        lengths = tensors["history_lengths"].numpy()  # [N]
        if len(lengths) and (lengths == lengths[0]).all():  # every series as long (the usual case): one reshape
            arrays.append(list(saved.numpy().reshape(len(lengths), int(lengths[0]), *saved.shape[1:])))
        else:
            arrays.append(list(split_at(saved.numpy(), np.r_[0, np.cumsum(lengths)])))
    return arrays


def _history(data: dict[str, Any], rows: _SeriesRows, values: Sequence[np.ndarray],
             observed: Sequence[np.ndarray]) -> Panel:
    """The saved history panel (:meth:`FittedState._content`'s ``data``, the series' ids and
    first timestamps, and each series' ``[T_i, C]`` values and observed flags). The series that
    start at one timestamp with one length (usually all) share one grid, every distinct grid
    computed at once (:func:`regular_stamps`). ``_Inconsistent`` when they count different series."""
    if not len(rows.item_ids) == len(rows.firsts) == len(values) == len(observed):
        raise _Inconsistent(f"the saved model holds {len(rows.item_ids)} item ids, {len(rows.firsts)} starts and "
                            f"{len(values)} series' histories; one of each per series")
    lengths = np.fromiter(map(len, values), np.int64, len(values))  # [N]
    _, first_of, grid_of = np.unique(np.stack([rows.firsts.asi8, lengths], axis=1), axis=0, return_index=True,
                                     return_inverse=True)  # [U] a series of each distinct grid, [N] its grid
    grid_lengths = lengths[first_of]  # [U]
    stamps = regular_stamps(rows.firsts[first_of], grid_lengths, data["freq"])  # [sum over the U grids]
    starts = np.r_[0, np.cumsum(grid_lengths)[:-1]][grid_of.reshape(-1)]  # [N] each series' first step in stamps
    with _gc_paused():
        items = tuple(map(Series, rows.item_ids, itertools.repeat(stamps), values, observed, starts.tolist()))
    return Panel(freq=data["freq"], layout=data["layout"], columns=tuple(data["targets"]), items=items)


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector (if it runs) while one object per series is built:
    these make no reference cycles, but every few hundred thousand of them would set off a full
    collection, which scans every object of the process (torch's and pandas' included)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _long_order(values: np.ndarray) -> np.ndarray:
    """``[N, H, C]`` values in the row order of :func:`~tsrec.data.forecast_frame` (forecast,
    column, timestamp)."""
    return values.transpose(0, 2, 1).ravel()


def _require_replaceable(path: Path) -> None:
    """Refuse to replace ``path`` unless it is missing, an empty folder or a saved model."""
    if os.path.lexists(path) and not (path.is_dir() and (not any(path.iterdir()) or (path / CONFIG_FILE).is_file())):
        raise ValueError(f"{path} exists and is not a saved tsrec model; save into a new or empty folder "
                         "(tsrec replaces only a folder written by Forecaster.save)")


def _json_sha256(meta: dict[str, Any]) -> str:
    """The SHA-256 of ``meta``'s content without its checksums, as canonical JSON (sorted keys, no
    spaces), so that the digest does not depend on the file's layout, only on what it says."""
    content = {key: value for key, value in meta.items() if key != CHECKSUMS}
    return hashlib.sha256(json.dumps(content, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _read_saved(path: Path) -> tuple[dict[str, Any], dict[str, bytes]]:
    """``forecaster.json``'s content, checked to be a format this tsrec reads, and the bytes of
    the model's other files (``weights.pt`` and any other file its checksums list)."""
    config_file = path / CONFIG_FILE
    if not config_file.is_file() or not (path / WEIGHTS_FILE).is_file():
        raise ValueError(f"{path} is not a saved tsrec Forecaster: expected {CONFIG_FILE} and {WEIGHTS_FILE} "
                         "written by Forecaster.save")
    try:
        meta = json.loads(config_file.read_bytes())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{config_file} is corrupted (not valid JSON: {err}); save the model again") from err
    _check_format(path, meta)
    listed = meta.get(CHECKSUMS) if meta["format_version"] >= 5 else None
    names = {WEIGHTS_FILE} | (set(listed) - {CONFIG_FILE} if isinstance(listed, dict) else set())
    unsafe = sorted(name for name in names if not isinstance(name, str) or Path(name).name != name
                    or name in ("", ".", ".."))
    if unsafe:
        raise ValueError(f"{config_file} lists files outside the model's folder ({unsafe}): it was edited or "
                         "corrupted after saving; save the model again from the Forecaster that fitted it, or fit again")
    try:
        return meta, {name: (path / name).read_bytes() for name in names}
    except FileNotFoundError as err:
        raise ValueError(f"{err.filename} is missing, but {CONFIG_FILE} lists it: the saved model is incomplete; "
                         "save it again from the Forecaster that fitted it, or fit again") from err


def _check_format(path: Path, meta: Any) -> None:
    """Refuse a JSON that is not a tsrec model, or one in a format this tsrec does not read."""
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ValueError(f"{path / CONFIG_FILE} was not written by tsrec's Forecaster.save (format is "
                         f"{meta.get('format') if isinstance(meta, dict) else None!r})")
    version = meta.get("format_version")
    if isinstance(version, int) and not isinstance(version, bool) and version > FORMAT_VERSION:
        raise ValueError(f"{path} was saved by a newer tsrec (version {meta.get('tsrec_version', 'unknown')}, "
                         f"model format {version}); upgrade tsrec to load it (tsrec {__version__} reads model "
                         f"formats up to {FORMAT_VERSION})")
    if version not in READABLE_VERSIONS:
        raise ValueError(f"{path} has format version {version!r}; this tsrec reads versions "
                         f"{', '.join(map(str, READABLE_VERSIONS))}. Use the tsrec version that saved it, or refit")


def _verify_checksums(path: Path, meta: dict[str, Any], files: dict[str, bytes]) -> None:
    """Refuse a model whose files do not match the checksums ``forecaster.json`` holds.

    Format 4 (written by tsrec 0.1 before format 5) holds the checksum of ``weights.pt`` only, as
    ``weights_sha256``; such models are still read, with only their weights checked here (their
    JSON is checked against the weights' shapes in :meth:`FittedState._from_saved`, as every
    model's is). Every later format (5 and up, :data:`READABLE_VERSIONS`) holds ``sha256``: every
    file's digest, ``forecaster.json``'s over its canonical content (:func:`_json_sha256`); since format 7
    the per-series values are in ``weights.pt``, so its digest covers them.
    """
    if meta["format_version"] == 4:
        expected = {WEIGHTS_FILE: meta.get("weights_sha256")}
    else:
        expected = meta.get(CHECKSUMS)
        if not isinstance(expected, dict) or not {CONFIG_FILE, WEIGHTS_FILE} <= set(expected):
            raise ValueError(f"{path / CONFIG_FILE} has no checksum of {CONFIG_FILE} and {WEIGHTS_FILE} "
                             f"(its {CHECKSUMS!r} entry is {expected!r}): it was edited or corrupted after saving; "
                             "save the model again from the Forecaster that fitted it, or fit again")
    actual = {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}
    actual[CONFIG_FILE] = _json_sha256(meta)
    changed = [name for name, digest in expected.items() if actual.get(name) != digest]
    if changed:
        raise ValueError(f"{' and '.join(str(path / name) for name in sorted(changed))} "
                         f"{'does' if len(changed) == 1 else 'do'} not match the checksum in {CONFIG_FILE}: the "
                         "saved model was edited or corrupted after saving. Save it again from the Forecaster "
                         "that fitted it, or fit again")


class _Inconsistent(ValueError):
    """``forecaster.json`` and ``weights.pt`` do not describe one model (the message says where)."""


def _unreadable(path: Path, meta: dict[str, Any], err: Exception) -> ValueError:
    """The error for a model whose checksums match but that this tsrec cannot rebuild (``err``):
    a newer tsrec's, or one edited and given new checksums (or in format 4, which has none)."""
    detail = str(err) if isinstance(err, _Inconsistent) else f"{type(err).__name__}: {err}"
    newer = _newer_tsrec(meta)
    if newer is not None:
        return ValueError(f"{path} was saved by a newer tsrec (version {newer}); upgrade tsrec to load it "
                          f"(tsrec {__version__} cannot read it: {detail})")
    return ValueError(f"{path} is corrupted or was edited after saving ({detail}); save the model again from the "
                      "Forecaster that fitted it, or fit again")


def _newer_tsrec(meta: dict[str, Any]) -> str | None:
    """The version of tsrec that saved ``meta`` when it is newer than this one, else None."""
    from packaging.version import InvalidVersion, Version

    saved = meta.get("tsrec_version")
    try:
        return saved if isinstance(saved, str) and Version(saved) > Version(__version__) else None
    except InvalidVersion:
        return None


def _state_dict_mismatches(model: torch.nn.Module, saved: dict[str, torch.Tensor]) -> list[str]:
    """How the tensors ``saved`` differ from ``model``'s parameters and buffers: missing and
    unexpected names, and shapes (at most three of each kind)."""
    expected = {name: tuple(getattr(value, "shape", ())) for name, value in model.state_dict().items()}
    got = {name: tuple(getattr(value, "shape", ())) for name, value in saved.items()}  # extra states: checked at load
    missing = sorted(set(expected) - set(got))
    unexpected = sorted(set(got) - set(expected))
    shapes = [f"{name} is {list(got[name])} in {WEIGHTS_FILE} but {list(shape)} in the network"
              for name, shape in expected.items() if name in got and got[name] != shape]
    return ([f"the network has {_some(missing)}, missing from {WEIGHTS_FILE}"] if missing else []) + \
        ([f"{WEIGHTS_FILE} has {_some(unexpected)}, which the network does not"] if unexpected else []) + shapes[:3]


def _history_shapes(state: FittedState, channels: int) -> tuple[str, Any, str, Any]:
    """The check of the history's shapes: ``[context_length, channels]`` for every series, or for a
    model that reads whole histories at most ``context_length`` steps (each series as it was); a
    network that forecasts missing tails (:func:`~tsrec.data.tails.fill_tails`) keeps up to as many
    more steps as the longest tail."""
    context = state.resolved.window.context_length
    shapes = sorted({s.values.shape for s in state.history.items})
    if state.model.reads_whole_history:
        return ("the history's shapes", [list(shape) for shape in shapes if not (0 < shape[0] <= context
                                                                                and shape[1] == channels)],
                f"[1..{context} (context_length) steps, {channels} channels]", [])
    if fills_tails(state.model.trainable, state.covariates.config.columns):
        wrong = [(item.item_id, list(item.values.shape)) for item, gap in zip(state.history.items,
                                                                             tail_gaps(state.history))
                 if not (context <= len(item) <= context + gap and item.values.shape[1] == channels)]
        return ("the history's shapes", wrong[:3], f"[{context} (context_length) steps and the series' missing tail, "
                                                   f"{channels} channels]", [])
    return "the history's shapes", shapes, "[context_length, channels]", [(context, channels)]


def _some(names: list[str]) -> str:
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def _inconsistencies(state: FittedState) -> list[str]:
    """Where the loaded ``state`` contradicts itself (the JSON paths named): the settings,
    network, data facts, scaler and history of one fitted model agree on the horizon, the
    context, the frequency and the number of series and channels."""
    settings, resolved, facts, history = state.settings, state.resolved, state.facts, state.history
    window, network, encoder, statics = resolved.window, resolved.network, state.covariates, state.covariate_history
    channels = len(history.columns) if history.layout == "wide" else 1
    expected_facts = data_facts(history.freq, channels, facts.periods, n_covariate_features=encoder.n_features,
                                static_cardinalities=encoder.cardinalities)
    pairs = [
        ("settings.model", settings.model, "resolved_settings.model", resolved.model),
        ("settings.window.prediction_length", settings.window.prediction_length,
         "resolved_settings.window.prediction_length", window.prediction_length),
        ("resolved_settings.network.prediction_length", network.prediction_length,
         "resolved_settings.window.prediction_length", window.prediction_length),
        ("resolved_settings.network.context_length", network.context_length,
         "resolved_settings.window.context_length", window.context_length),
        ("resolved_settings.window.freq", window.freq, "data.freq", history.freq),
        ("data_facts", dataclasses.asdict(facts), f"what data.freq {history.freq!r} and data.targets give",
         dataclasses.asdict(expected_facts)),
        *((f"resolved_settings.network.{name}", getattr(network, name), f"data_facts.{name}", getattr(facts, name))
          for name in ("n_channels", "n_time_features", "n_covariate_features", "static_cardinalities")),
        ("the scaler's shape", [list(state.scaler.loc.shape), list(state.scaler.scale.shape)],
         "[series, channels] of the item ids and data.targets", [[len(history.items), channels]] * 2),
        ("the static covariates' shapes", [list(statics.static_real.shape), list(statics.static_cat.shape)],
         "[series, numeric], [series, categorical] of the item ids and covariates.encoder",
         [[len(history.items), len(encoder.real)], [len(history.items), len(encoder.categorical)]]),
        _history_shapes(state, channels),
        ("the covariate history's series", len(statics.dynamic), "the item ids", len(history.items)),
        *_calibration_shapes(state, channels),
    ]
    return [f"{name} is {value!r} but {other} is {expected!r}" for name, value, other, expected in pairs
            if value != expected]


def _saved_calibration(meta: dict[str, Any], tensors: dict[str, Any]) -> Calibration | None:
    """The calibration ``forecaster.json``'s ``conformal`` entry and ``weights.pt``'s ``conformal_*``
    tensors hold (None without one), or :class:`_Inconsistent` naming them and what is wrong."""
    if "conformal" not in meta:
        return None
    try:
        return Calibration.from_saved(meta["conformal"], tensors)
    except ValueError as err:
        raise _Inconsistent(f"the conformal calibration ({CONFIG_FILE}'s 'conformal' entry and {WEIGHTS_FILE}'s "
                            f"conformal_* tensors) is not one calibration could write: {err}") from err


def _calibration_shapes(state: FittedState, channels: int) -> list[tuple[str, Any, str, Any]]:
    """The checks of the calibration's shapes against the model's (none without one): its scores'
    horizon steps and its scale's ``[series, channels]``, so that a calibration edited and given new
    checksums is refused at load instead of failing at ``predict``."""
    calibration = state.calibration
    if calibration is None:
        return []
    return [(f"{WEIGHTS_FILE}'s conformal_order (the calibration's scores per horizon step): its steps",
             len(calibration.order), "resolved_settings.window.prediction_length",
             state.resolved.window.prediction_length),
            (f"{WEIGHTS_FILE}'s conformal_scale (the calibration's scale of each series): its shape",
             list(calibration.scale.shape), "[series, channels] of the item ids and data.targets",
             [len(state.history.items), channels])]


def _unknown_keys(saved: dict[str, Any], known: dict[str, Any], prefix: str = "") -> list[str]:
    """The keys of ``saved`` (nested dicts too, as dotted paths) that ``known`` does not have."""
    unknown = []
    for key, value in saved.items():
        if key not in known:
            unknown.append(prefix + str(key))
        elif isinstance(value, dict) and isinstance(known[key], dict):
            unknown += _unknown_keys(value, known[key], f"{prefix}{key}.")
    return unknown
