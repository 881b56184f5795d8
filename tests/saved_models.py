"""Helpers of the tests that write saved models as older tsrec versions wrote them."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import torch

from tsrec.fitted import _json_sha256

#: ``weights.pt``'s per-series arrays, packed end to end since format 6.
HISTORY_KEYS = ("history_values", "history_observed", "history_covariates")


def read_meta(path: Path) -> dict:
    return json.loads((path / "forecaster.json").read_text())


def write_per_series_history(path: Path) -> None:
    """Rewrite ``weights.pt`` with the history as formats 4 and 5 held it: one tensor per series
    for each of :data:`HISTORY_KEYS`, no ``history_lengths``."""
    tensors = torch.load(path / "weights.pt", weights_only=True)
    cuts = np.cumsum(tensors.pop("history_lengths").numpy())[:-1].tolist()
    for key in HISTORY_KEYS:
        tensors[key] = [part.clone() for part in torch.tensor_split(tensors[key], cuts)]
    torch.save(tensors, path / "weights.pt")


def write_format_5(path: Path) -> Path:
    """Rewrite the model in ``path`` as tsrec wrote it before format 6 (the history per series), with
    its checksums recomputed as that tsrec computed them. Returns ``path``."""
    write_per_series_history(path)
    meta = {**read_meta(path), "format_version": 5}
    checksums = {**meta["sha256"], "weights.pt": hashlib.sha256((path / "weights.pt").read_bytes()).hexdigest()}
    meta["sha256"] = {**checksums, "forecaster.json": _json_sha256(meta)}
    (path / "forecaster.json").write_text(json.dumps(meta, indent=2))
    return path


def write_format_4(path: Path) -> None:
    """Rewrite the model in ``path`` as tsrec 0.1 wrote it before format 5: the history per series,
    no ``tsrec_version``, no ``sha256``, only ``weights_sha256`` (the SHA-256 of ``weights.pt``),
    right after the version."""
    write_per_series_history(path)
    meta = read_meta(path)
    del meta["tsrec_version"], meta["sha256"]
    old = {"format": meta.pop("format"), "format_version": 4,
           "weights_sha256": hashlib.sha256((path / "weights.pt").read_bytes()).hexdigest()}
    del meta["format_version"]
    (path / "forecaster.json").write_text(json.dumps({**old, **meta}, indent=2))
