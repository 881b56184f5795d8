"""Bridges to other forecasting libraries, one submodule each, imported explicitly.

- :mod:`tsrec.interop.gluonts`: GluonTS datasets <-> tsrec frames, and a GluonTS ``Estimator`` /
  ``Predictor`` pair backed by tsrec models (``TsrecEstimator``, ``TsrecPredictor``).

Importing ``tsrec.interop`` loads no third-party library; each submodule imports its library.
"""
