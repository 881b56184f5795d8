"""tsrec: time-series forecasting with Self-Attention with Recurrence (RSA).

The estimator is :class:`tsrec.Forecaster`; models by name are in :func:`tsrec.list_models`.
Importing ``tsrec`` (or ``tsrec.nn``, ``tsrec.models``) loads neither Lightning, pandas nor
matplotlib: the estimator and the registry are loaded on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tsrec._version import __version__
__all__ = ["Forecaster", "build_model", "list_models", "__version__"]

if TYPE_CHECKING:
    from tsrec.forecaster import Forecaster
    from tsrec.models import build_model, list_models

_LAZY = {"Forecaster": "tsrec.forecaster", "build_model": "tsrec.models", "list_models": "tsrec.models"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'tsrec' has no attribute {name!r}")
