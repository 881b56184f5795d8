"""Helpers of the tests that write saved models as older tsrec versions wrote them."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path


def read_meta(path: Path) -> dict:
    return json.loads((path / "forecaster.json").read_text())


def write_format_4(path: Path) -> None:
    """Rewrite the model in ``path`` as tsrec 0.1 wrote it before format 5: no ``tsrec_version``,
    no ``sha256``, only ``weights_sha256`` (the SHA-256 of ``weights.pt``), right after the version."""
    meta = read_meta(path)
    del meta["tsrec_version"], meta["sha256"]
    old = {"format": meta.pop("format"), "format_version": 4,
           "weights_sha256": hashlib.sha256((path / "weights.pt").read_bytes()).hexdigest()}
    del meta["format_version"]
    (path / "forecaster.json").write_text(json.dumps({**old, **meta}, indent=2))
