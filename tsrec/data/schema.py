"""Which columns of a user frame are what, declared once.

``Forecaster.fit``'s column arguments become a :class:`Schema`; it is kept with the fitted model
(:class:`tsrec.fitted.FittedState`), saved with it, and every later read of a frame (``predict``,
``backtest``, the CLI, the GluonTS predictor) goes through :meth:`Schema.read`: one vectorised pass
that returns the targets and the covariates together, on the same grids.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from tsrec.config import CovariateConfig
from tsrec.data.covariates import CovariateValues, read_frame
from tsrec.data.frame import Panel

__all__ = ["Schema"]


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

    def read(self, df: pd.DataFrame, *, categorical: Sequence[str], freq: str | None,
             gaps: str) -> tuple[Panel, CovariateValues]:
        """``df``'s targets as a :class:`~tsrec.data.Panel` and its covariates on the same grids
        (:func:`~tsrec.data.covariates.read_frame`); ``categorical`` names the categorical static
        covariates."""
        return read_frame(df, self.covariates, categorical, freq=freq, gaps=gaps, **self.columns)
