"""tsrec: time-series forecasting with Self-Attention with Recurrence (RSA).

The estimator is :class:`tsrec.Forecaster`; models by name are in :func:`tsrec.list_models`.
"""

from tsrec.forecaster import Forecaster
from tsrec.models import build_model, list_models

__version__ = "0.1.0"
__all__ = ["Forecaster", "build_model", "list_models", "__version__"]
