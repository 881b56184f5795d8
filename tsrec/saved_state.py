"""A :class:`~tsrec.fitted.FittedState` in the files of a saved model (:mod:`tsrec.saved_format`):
:func:`save_state` lays it out, :func:`load_state` reads it back, checked to be one model
(``forecaster.json`` and ``weights.pt`` agree on the horizon, context, frequency, series and
channels) before it is handed over. ``Forecaster.save`` and ``Forecaster.load`` call them.
"""

from __future__ import annotations

import dataclasses
import gc
import itertools
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from tsrec.config import DataFacts
from tsrec.conformal import Calibration
from tsrec.data import CovariateEncoder, CovariateValues, Panel, Series, StandardScaler
from tsrec.data.calendar import Calendar
from tsrec.data.schema import Schema
from tsrec.data.tails import fills_tails, tail_gaps
from tsrec.data.time_features import calendar_cycles, data_facts, regular_stamps
from tsrec.fitted import FittedState, TrainingSummary
from tsrec.models import build_model
from tsrec.saved_format import (CONFIG_FILE, EXTRA_STATE, HEADER, SCALER_ROWS, WEIGHTS_FILE, Inconsistent,
                                load_tensors, named_as_built, own_tensor, pack_strings, read_model, series_arrays,
                                state_dict_mismatches, unknown_keys, unpack_strings, write_model)
from tsrec.settings import ForecasterSettings

__all__ = ["load_state", "save_state"]


def save_state(state: FittedState, path: str | os.PathLike) -> Path:
    """Write ``state`` into the directory ``path`` (:func:`~tsrec.saved_format.write_model`:
    crash-safe, safe under concurrent saves and loads, never a partial pair): ``forecaster.json``
    (the format and tsrec versions, settings, data description, covariate encoding, and the SHA-256
    of every file of the model, itself included; :func:`_content`) and ``weights.pt`` (tensors
    only: the weights and every per-series value, :func:`_tensors`). Returns ``path``."""
    return write_model(path, _tensors(state), _content(state))


def _tensors(state: FittedState) -> dict[str, Any]:
    """What ``weights.pt`` holds: the network's state dict and every per-series value of the
    ``N`` fitted series, as a handful of tensors however many series were fitted (so that a
    load costs no per-series decoding; dtypes in :data:`~tsrec.saved_format.SERIES_TENSORS`):

    - ``history_lengths`` ``[N]``; ``history_values`` ``[sum T_i, C]``, ``history_observed``
      ``[sum T_i, C]`` and ``history_covariates`` ``[sum T_i, K]``: every series' rows laid end
      to end;
    - ``item_ids`` ``[B]`` the ids' UTF-8 bytes laid end to end, ``item_id_ends`` ``[N]`` where
      each id's bytes end (:func:`pack_strings`);
    - ``starts`` ``[N]`` each series' first timestamp in nanoseconds since 1970 (UTC in a named
      time zone, ``forecaster.json``'s ``data.tz``; the wall clock without one);
    - ``scaler_loc``, ``scaler_scale``, ``scaler_low``, ``scaler_high`` ``[N, C]``;
    - ``static_real`` ``[N, Ks]``; ``static_cat`` and ``static_cat_ends`` the ``[N, Kc]``
      categorical static covariates row by row, as the ids;
    - ``model_name`` the UTF-8 bytes of the registry name the network was built as (one
      network class serves several names, e.g. ``patchtst`` and ``rsa_patchtst``): ``load``
      refuses a ``forecaster.json`` that names another (:func:`named_as_built`).
    """
    history, statics = state.history, state.covariate_history
    items = history.items
    ids, id_ends = pack_strings([s.item_id for s in items])
    categories, category_ends = pack_strings(statics.static_cat.ravel().tolist())
    return {
        "state_dict": state.model.state_dict(),
        "history_lengths": torch.tensor([len(s) for s in items], dtype=torch.int64),
        "history_values": torch.from_numpy(np.concatenate([s.values for s in items])),
        "history_observed": torch.from_numpy(np.concatenate([s.observed for s in items])),
        "history_covariates": torch.from_numpy(np.concatenate(statics.dynamic)),
        "item_ids": ids, "item_id_ends": id_ends,
        "starts": torch.from_numpy(history.stamps[history.offsets[:-1]].asi8.copy()),  # [N]
        **{f"scaler_{name}": own_tensor(getattr(state.scaler, name), np.float64) for name in SCALER_ROWS},
        "static_real": own_tensor(statics.static_real, np.float64),
        "static_cat": categories, "static_cat_ends": category_ends,
        "model_name": pack_strings([state.resolved.model])[0],
        **({} if state.calibration is None else state.calibration.tensors()),
    }


def _content(state: FittedState) -> dict[str, Any]:
    """What ``forecaster.json`` describes of the state (all but its header, :func:`~tsrec.saved_format.write_model`):
    nothing per series (:func:`_tensors` holds that), so that its size and the cost of
    reading and checking it do not grow with the number of series."""
    tz = state.history.items[0].index.tz
    scaler = {"robust": state.scaler.robust}  # its rows (SCALER_ROWS) are in weights.pt
    return {
        "settings": state.settings.to_dict(),
        "resolved_settings": state.resolved.to_dict(),
        "data_facts": dataclasses.asdict(state.facts),
        "training_summary": state.summary.to_dict(),
        "columns": state.schema.columns,
        "data": {
            "freq": state.history.freq,
            "layout": state.history.layout,
            "targets": list(state.history.columns),
            "tz": None if tz is None else str(tz),
            **({"integer_ids": True} if state.history.integer_ids else {}),
        },
        "scaler": scaler,
        "covariates": {"encoder": state.covariates.to_dict()},
        **({} if state.calibration is None else {"conformal": state.calibration.to_dict()}),
    }


def load_state(path: str | os.PathLike) -> FittedState:
    """Read a directory written by :func:`save_state` (:func:`~tsrec.saved_format.read_model`:
    JSON and tensors only). ``ValueError`` for a missing, foreign or corrupted directory, a model
    edited after saving (a file that does not match its checksum, or settings that do not fit the
    weights' shapes), and one saved by a newer tsrec; :class:`~tsrec.saved_format.ConcurrentSaveError`
    when another process is saving to ``path`` for longer than the lock's timeout."""
    return read_model(path, _from_saved)


def _from_saved(meta: dict[str, Any], weights: bytes) -> FittedState:
    """The state that ``forecaster.json``'s ``meta`` and ``weights.pt``'s bytes describe,
    checked to be one model (:func:`~tsrec.saved_format.load_tensors`, :func:`_inconsistencies`,
    :func:`~tsrec.saved_format.state_dict_mismatches`, :func:`~tsrec.saved_format.unknown_keys`)."""
    tensors = load_tensors(meta, weights)
    resolved = ForecasterSettings.from_dict(meta["resolved_settings"])
    model = build_model(resolved.model, resolved.network)
    if meta["format_version"] < 9:  # no fitted parameters yet: the statistical models fit each window, as then
        tensors["state_dict"] = {**{key: value for key, value in model.state_dict().items()
                                    if key.endswith(EXTRA_STATE)}, **tensors["state_dict"]}
    mismatches = state_dict_mismatches(model, tensors["state_dict"])
    if mismatches:
        network = resolved.network
        raise Inconsistent(
            f"{WEIGHTS_FILE} does not fit the {resolved.model!r} network that {CONFIG_FILE} describes "
            f"(prediction_length {network.prediction_length}, context_length {network.context_length}, "
            f"{network.n_channels} channels): {'; '.join(mismatches)}")
    named_as_built(resolved.model, tensors)  # one network class, another name (the mismatches: another class)
    model.load_state_dict(tensors["state_dict"])
    encoder = CovariateEncoder.from_dict(meta["covariates"]["encoder"])
    meta, rows = _per_series(meta, tensors, len(encoder.categorical))
    values, observed, dynamic = series_arrays(tensors, "history_values", "history_observed", "history_covariates")
    state = FittedState(
        settings=ForecasterSettings.from_dict(meta["settings"]), resolved=resolved, model=model.eval(),
        history=_history(meta["data"], rows, values, observed),
        scaler=rows.scaler,
        covariates=encoder,
        covariate_history=CovariateValues(tuple(dynamic), rows.static_real, rows.static_cat),
        # files written before the facts held the calendar's cycles: the frequency's
        facts=DataFacts(**{"cycles": calendar_cycles(Calendar.of(meta["data"]["freq"])), **meta["data_facts"]}),
        summary=TrainingSummary.from_dict(meta["training_summary"]),
        schema=Schema(**meta["columns"], covariates=encoder.config),
        calibration=_saved_calibration(meta, tensors))
    problems = _inconsistencies(state)
    if problems:
        raise Inconsistent(f"{CONFIG_FILE} contradicts itself or {WEIGHTS_FILE}: {'; '.join(problems)}")
    unknown = unknown_keys({k: v for k, v in meta.items() if k not in HEADER}, _content(state))
    if unknown:
        raise Inconsistent(f"{CONFIG_FILE} has entries this tsrec does not know: {', '.join(unknown)}")
    return state


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
    """``meta`` without its per-series entries (what :func:`unknown_keys` checks) and the
    per-series values, wherever the model's format keeps them: format 7's tensors (checked by
    :func:`~tsrec.saved_format.load_tensors`), or the JSON lists of formats 4 to 6. ``n_categorical``: ``Kc``."""
    tz = meta["data"]["tz"]
    if meta["format_version"] >= 7:
        firsts = pd.DatetimeIndex(tensors["starts"].numpy().view("M8[ns]"))  # [N]
        categories = unpack_strings(tensors["static_cat"], tensors["static_cat_ends"])  # [N * Kc]
        n_series = len(tensors["history_lengths"])
        if len(categories) != n_series * n_categorical:
            raise Inconsistent(f"{WEIGHTS_FILE} holds {len(categories)} categorical static covariates "
                               f"(static_cat_ends) but {n_series} series of {n_categorical} each ({CONFIG_FILE}'s "
                               "covariates.encoder)")
        rows = _SeriesRows(
            unpack_strings(tensors["item_ids"], tensors["item_id_ends"]),
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


def _history(data: dict[str, Any], rows: _SeriesRows, values: Sequence[np.ndarray],
             observed: Sequence[np.ndarray]) -> Panel:
    """The saved history panel (:func:`_content`'s ``data``, the series' ids and
    first timestamps, and each series' ``[T_i, C]`` values and observed flags). The series that
    start at one timestamp with one length (usually all) share one grid, every distinct grid
    computed at once (:func:`regular_stamps`). ``Inconsistent`` when they count different series."""
    if not len(rows.item_ids) == len(rows.firsts) == len(values) == len(observed):
        raise Inconsistent(f"the saved model holds {len(rows.item_ids)} item ids, {len(rows.firsts)} starts and "
                           f"{len(values)} series' histories; one of each per series")
    lengths = np.fromiter(map(len, values), np.int64, len(values))  # [N]
    _, first_of, grid_of = np.unique(np.stack([rows.firsts.asi8, lengths], axis=1), axis=0, return_index=True,
                                     return_inverse=True)  # [U] a series of each distinct grid, [N] its grid
    grid_lengths = lengths[first_of]  # [U]
    calendar = Calendar.of(data["freq"])
    stamps = regular_stamps(rows.firsts[first_of], grid_lengths, calendar)  # [sum over the U grids]
    starts = np.r_[0, np.cumsum(grid_lengths)[:-1]][grid_of.reshape(-1)]  # [N] each series' first step in stamps
    with _gc_paused():
        items = tuple(map(Series, rows.item_ids, itertools.repeat(stamps), values, observed, starts.tolist()))
    return Panel(calendar=calendar, layout=data["layout"], columns=tuple(data["targets"]), items=items,
                 integer_ids=data.get("integer_ids", False))


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


def _inconsistencies(state: FittedState) -> list[str]:
    """Where the loaded ``state`` contradicts itself (the JSON paths named): the settings,
    network, data facts, scaler and history of one fitted model agree on the horizon, the
    context, the frequency and the number of series and channels."""
    settings, resolved, facts, history = state.settings, state.resolved, state.facts, state.history
    window, network, encoder, statics = resolved.window, resolved.network, state.covariates, state.covariate_history
    channels = len(history.columns) if history.layout == "wide" else 1
    expected_facts = data_facts(history.calendar, channels, facts.periods, n_covariate_features=encoder.n_features,
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


def _history_shapes(state: FittedState, channels: int) -> tuple[str, Any, str, Any]:
    """The check of the history's shapes: at most ``context_length`` steps of every series (all of
    a shorter one: it is forecast from a padded window; a model that reads whole histories keeps
    each series as it was, up to that) and ``channels`` channels; a network that forecasts missing
    tails (:func:`~tsrec.data.tails.fill_tails`) keeps up to as many more steps as the series' tail."""
    context = state.resolved.window.context_length
    if fills_tails(state.model.trainable, state.covariates.config.columns):
        wrong = [(item.item_id, list(item.values.shape)) for item, gap in zip(state.history.items,
                                                                             tail_gaps(state.history))
                 if not (0 < len(item) <= context + gap and item.values.shape[1] == channels)]
        return ("the history's shapes", wrong[:3], f"[1..{context} (context_length) steps and the series' missing "
                                                   f"tail, {channels} channels]", [])
    shapes = sorted({s.values.shape for s in state.history.items})
    return ("the history's shapes", [list(shape) for shape in shapes if not (0 < shape[0] <= context
                                                                            and shape[1] == channels)],
            f"[1..{context} (context_length) steps, {channels} channels]", [])


def _saved_calibration(meta: dict[str, Any], tensors: dict[str, Any]) -> Calibration | None:
    """The calibration ``forecaster.json``'s ``conformal`` entry and ``weights.pt``'s ``conformal_*``
    tensors hold (None without one), or :class:`Inconsistent` naming them and what is wrong."""
    if "conformal" not in meta:
        return None
    try:
        return Calibration.from_saved(meta["conformal"], tensors)
    except ValueError as err:
        raise Inconsistent(f"the conformal calibration ({CONFIG_FILE}'s 'conformal' entry and {WEIGHTS_FILE}'s "
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
