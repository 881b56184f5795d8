"""The SHA-256 of a file: what saved models and downloaded data sets are checked against."""

from __future__ import annotations

import hashlib
import os

#: Bytes read at a time.
CHUNK = 1 << 20


def sha256_of(path: str | os.PathLike[str]) -> str:
    """Hex sha256 digest of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()
