"""tsrec: time-series forecasting with Self-Attention with Recurrence (RSA)."""

__version__ = "0.1.0"
