"""Bridges to other forecasting libraries, one submodule each, imported explicitly.

- :mod:`tsrec.interop.gluonts`: GluonTS datasets <-> tsrec frames, and a GluonTS ``Estimator`` /
  ``Predictor`` pair backed by tsrec models (``TsrecEstimator``, ``TsrecPredictor``).

Importing ``tsrec.interop`` loads no third-party library; each submodule imports its library.
"""

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
