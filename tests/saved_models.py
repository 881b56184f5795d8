"""Helpers of the tests that write saved models as older tsrec versions wrote them, each from a
model this tsrec saved (format 7), and that edit a saved model's ``weights.pt``."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from tsrec.saved_format import SCALER_ROWS, json_sha256, unpack_strings

#: ``weights.pt``'s per-series arrays, packed end to end since format 6.
HISTORY_KEYS = ("history_values", "history_observed", "history_covariates")
#: ``weights.pt``'s per-series tensors since format 7 (``forecaster.json``'s lists before it).
SERIES_KEYS = ("item_ids", "item_id_ends", "starts", *(f"scaler_{name}" for name in SCALER_ROWS), "static_real",
               "static_cat", "static_cat_ends")


def read_meta(path: Path) -> dict:
    return json.loads((path / "forecaster.json").read_text())


def write_checksummed(path: Path, meta: dict) -> None:
    """Write ``meta`` into ``path``'s forecaster.json with the checksums of ``weights.pt`` and of
    itself recomputed, as the tsrec that wrote ``meta``'s format computed them."""
    checksums = {**meta["sha256"], "weights.pt": hashlib.sha256((path / "weights.pt").read_bytes()).hexdigest()}
    meta = {**meta, "sha256": checksums}
    meta["sha256"] = {**checksums, "forecaster.json": json_sha256(meta)}
    (path / "forecaster.json").write_text(json.dumps(meta, indent=2))


def edit_weights(path: Path, edit: Callable[[dict], object], *, rehash: bool) -> None:
    """Apply ``edit`` to the tensors of ``path``'s ``weights.pt``; ``rehash``: with the checksums
    recomputed, as a user covering an edit would write them."""
    tensors = torch.load(path / "weights.pt", weights_only=True)
    edit(tensors)
    torch.save(tensors, path / "weights.pt")
    if rehash:
        write_checksummed(path, read_meta(path))


def write_format_6(path: Path) -> Path:
    """Rewrite the model in ``path`` as tsrec wrote it before format 7 (the ids, ISO starts in the
    series' time zone, scaler rows and static covariates as lists in ``forecaster.json``; the
    weights and the packed history in ``weights.pt``), with its checksums recomputed. Returns ``path``."""
    tensors = torch.load(path / "weights.pt", weights_only=True)
    series = {key: tensors.pop(key) for key in SERIES_KEYS}
    torch.save(tensors, path / "weights.pt")
    meta = read_meta(path)
    data, covariates, tz = meta["data"], meta["covariates"], meta["data"]["tz"]
    firsts = pd.DatetimeIndex(series["starts"].numpy().view("M8[ns]"))
    firsts = firsts if tz is None else firsts.tz_localize("UTC").tz_convert(tz)
    categories = np.array(unpack_strings(series["static_cat"], series["static_cat_ends"]), dtype=object)
    meta["data"] = {"freq": data["freq"], "layout": data["layout"], "targets": data["targets"],
                    "item_ids": unpack_strings(series["item_ids"], series["item_id_ends"]),
                    "starts": [first.isoformat() for first in firsts], "tz": tz}
    meta["scaler"] = {**{name: series[f"scaler_{name}"].tolist() for name in SCALER_ROWS}, **meta["scaler"]}
    n_categorical = len(covariates["encoder"]["categorical"])
    meta["covariates"] = {**covariates, "static_real": series["static_real"].tolist(),
                          "static_cat": categories.reshape(len(firsts), n_categorical).tolist()}
    write_checksummed(path, {**meta, "format_version": 6})
    return path


def write_per_series_history(path: Path) -> None:
    """Rewrite a format-6 ``weights.pt`` with the history as formats 4 and 5 held it: one tensor per
    series for each of :data:`HISTORY_KEYS`, no ``history_lengths``."""
    tensors = torch.load(path / "weights.pt", weights_only=True)
    cuts = np.cumsum(tensors.pop("history_lengths").numpy())[:-1].tolist()
    for key in HISTORY_KEYS:
        tensors[key] = [part.clone() for part in torch.tensor_split(tensors[key], cuts)]
    torch.save(tensors, path / "weights.pt")


def write_format_5(path: Path) -> Path:
    """Rewrite the model in ``path`` as tsrec wrote it before format 6 (the history per series), with
    its checksums recomputed as that tsrec computed them. Returns ``path``."""
    write_format_6(path)
    write_per_series_history(path)
    write_checksummed(path, {**read_meta(path), "format_version": 5})
    return path


def write_format_4(path: Path) -> None:
    """Rewrite the model in ``path`` as tsrec 0.1 wrote it before format 5: the history per series,
    no ``tsrec_version``, no ``sha256``, only ``weights_sha256`` (the SHA-256 of ``weights.pt``),
    right after the version."""
    write_format_6(path)
    write_per_series_history(path)
    meta = read_meta(path)
    del meta["tsrec_version"], meta["sha256"]
    old = {"format": meta.pop("format"), "format_version": 4,
           "weights_sha256": hashlib.sha256((path / "weights.pt").read_bytes()).hexdigest()}
    del meta["format_version"]
    (path / "forecaster.json").write_text(json.dumps({**old, **meta}, indent=2))
