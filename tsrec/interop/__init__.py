"""Bridges to other forecasting libraries, one submodule each, imported explicitly.

- :mod:`tsrec.interop.gluonts`: GluonTS datasets <-> tsrec frames.

Importing ``tsrec.interop`` loads no third-party library; each submodule imports its library.
"""
