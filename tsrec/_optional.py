"""Helpers for importing tsrec's optional dependencies (imported by the functions that need them)."""

import contextlib
import warnings
from collections.abc import Iterator


@contextlib.contextmanager
def quiet_gluonts_import() -> Iterator[None]:
    """Import GluonTS modules without the ``UserWarning`` ``gluonts.json`` gives when it is first
    imported without ``orjson`` or ``ujson`` ("Using `json`-module for json-handling"): advice on
    GluonTS's serialization speed, which tsrec does not use, not a problem of the user's."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Using `json`-module", category=UserWarning)
        yield
