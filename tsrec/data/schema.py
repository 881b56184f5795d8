"""Which columns of a user frame are what, declared once.

``Forecaster.fit``'s column arguments become a :class:`Schema`; it is kept with the fitted model
(:class:`tsrec.fitted.FittedState`), saved with it, and every later read of a frame (``predict``,
``backtest``, the CLI, the GluonTS predictor) goes through :meth:`Schema.read`: one vectorised pass
that returns the targets and the covariates together, on the same grids.
"""

from __future__ import annotations

import os
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from tsrec.config import CovariateConfig
from tsrec.data.covariates import CovariateValues, categorical_statics, read_frame
from tsrec.data.frame import Panel

__all__ = ["Schema", "Source", "is_parquet"]

#: What a read takes: a frame, or long Parquet data (a file, a folder of files, a list of files).
Source = pd.DataFrame | str | os.PathLike | Sequence[str | os.PathLike]


@dataclass(frozen=True)
class Schema:
    """The roles of a frame's columns.

    time_col:   the timestamps' column (None: the frame's ``DatetimeIndex``).
    id_col:     the series id's column; makes the frame long (None: wide, one multivariate series).
    target_col: the column(s) to forecast (None: inferred, :func:`~tsrec.data.canonicalize`).
    covariates: the columns the model reads but does not forecast.
    """

    time_col: Hashable | None = None
    id_col: Hashable | None = None
    target_col: Any = None
    covariates: CovariateConfig = field(default_factory=CovariateConfig)

    @property
    def columns(self) -> dict[str, Any]:
        """``time_col``, ``id_col`` and ``target_col`` as keyword arguments."""
        return {"time_col": self.time_col, "id_col": self.id_col, "target_col": self.target_col}

    def read(self, source: Source, *, categorical: Sequence[str], freq: str | None,
             gaps: str, last: int | None = None) -> tuple[Panel, CovariateValues]:
        """``source``'s targets as a :class:`~tsrec.data.Panel` and its covariates on the same grids;
        ``categorical`` names the categorical static covariates; ``last``: read each series' ``last``
        latest rows alone (None: all). ``source`` is a DataFrame
        (:func:`~tsrec.data.covariates.read_frame`) or long Parquet data: a file, a folder of
        files or a list of files, read a chunk of series at a time
        (:func:`~tsrec.data.parquet.read_parquet`)."""
        options = {"freq": freq, "gaps": gaps, "last": last, **self.columns}
        if isinstance(source, pd.DataFrame):
            return read_frame(source, self.covariates, categorical, **options)
        from tsrec.data.parquet import read_parquet

        return read_parquet(_parquet(source), self.covariates, categorical, **options)

    def categorical(self, source: Source) -> tuple[str, ...]:
        """The static covariates of ``source`` that are categorical (not real numbers), from its
        dtypes (a Parquet source's schema: no row is read)."""
        if isinstance(source, pd.DataFrame):
            return categorical_statics(source, self.covariates)
        from tsrec.data.parquet import empty_frame

        return categorical_statics(empty_frame(_parquet(source)), self.covariates)


def is_parquet(source: object) -> bool:
    """Whether ``source`` names Parquet data (a path, or a non-empty list of paths) rather than a frame."""
    if isinstance(source, (str, os.PathLike)):
        return True
    return isinstance(source, (list, tuple)) and bool(source) and all(isinstance(p, (str, os.PathLike)) for p in source)


def _parquet(source: object) -> Any:
    """``source`` if :func:`is_parquet`, else a ``TypeError`` naming what a source may be."""
    if not is_parquet(source):
        raise TypeError(f"expected a pandas DataFrame, or long Parquet data (a file, a folder of files or a list of "
                        f"files), got {type(source).__name__}")
    return source
