"""What every worker of a distributed prediction or backtest does with its part of the series.

A driver (Ray, Spark) splits the series ids among workers
(:func:`~tsrec.collective.split_ids`); a worker reads the rows of its series
(:func:`~tsrec.data.source.rows_of`: from a DataFrame or straight from Parquet), loads the
saved model once per process (:func:`load_model`), and returns the forecasts
(:func:`predict_part`) or the backtest errors (:func:`backtest_part`) of those series alone. The
parts' forecasts concatenated are one ``Forecaster.predict`` of all the series, and their errors,
scored by :func:`tsrec.evaluation.score_backtest`, one ``backtest``: every series is forecast
from its own rows with the same weights and scaler row, whichever worker holds it.

Under a ``torch.distributed`` process group (DDP) ``Forecaster.predict`` and
``tsrec.evaluation.backtest`` split the series the same way among the ranks
(:func:`tsrec.collective.by_series`).
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Hashable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from tsrec.forecaster import Forecaster

__all__ = ["backtest_part", "check_backtest", "id_column", "load_model", "predict_part"]

_MODELS: dict[tuple[str, int, int], Forecaster] = {}


def load_model(path: str | os.PathLike) -> Forecaster:
    """The Forecaster saved in ``path``, loaded once per process: later calls with the same
    unchanged directory return the same object (a directory saved again is loaded again)."""
    meta = Path(path).resolve() / "forecaster.json"
    try:
        stat = meta.stat()
    except FileNotFoundError:
        raise FileNotFoundError(f"no saved model in {str(path)!r} (no forecaster.json): pass the directory "
                                "Forecaster.save(path) wrote, on a file system every worker reads") from None
    key = (str(meta), stat.st_mtime_ns, stat.st_size)
    if key not in _MODELS:
        _MODELS.clear()  # one model per process at a time
        _MODELS[key] = Forecaster.load(meta.parent)
    return _MODELS[key]


def id_column(forecaster: Forecaster) -> Hashable:
    """The id column of the long frames ``forecaster`` was fitted on; ``ValueError`` for a model
    fitted on a wide frame (one multivariate series, which cannot be split among workers)."""
    id_col = forecaster.fitted.schema.id_col
    if id_col is None:
        raise ValueError("the model was fitted on a wide frame, which is one multivariate series: there is nothing "
                         "to split among workers; call Forecaster.predict or tsrec.evaluation.backtest on it")
    return id_col


def predict_part(model_path: str | os.PathLike, frame: pd.DataFrame, **predict: Any) -> pd.DataFrame:
    """``Forecaster.predict(frame, **predict)`` of the model saved in ``model_path`` (loaded once per
    process): the forecasts of the series of ``frame`` (a long frame of whole series, in the fitted
    columns), one row per series and step."""
    return load_model(model_path).predict(frame, **predict)


def backtest_part(model_path: str | os.PathLike, frame: pd.DataFrame, **backtest: Any) -> pd.DataFrame:
    """The errors (:attr:`~tsrec.evaluation.BacktestResult.errors`) of
    ``tsrec.evaluation.backtest(model, frame, **backtest)`` for the model saved in ``model_path``
    (loaded once per process, never refitted); score the parts' errors together with
    :func:`~tsrec.evaluation.score_backtest`."""
    from tsrec.evaluation import backtest as run

    check_backtest(backtest)
    forecaster = load_model(model_path)
    return run(forecaster, frame, **forecaster.fitted.schema.columns, **backtest).errors


def check_backtest(backtest: Mapping[str, Any]) -> None:
    """Check the arguments of :func:`backtest_part` before any worker starts: ``ValueError`` for
    ``refit_every`` (a distributed backtest scores one saved model) and for the column arguments
    (the saved model's schema names the columns), ``TypeError`` naming an unknown argument."""
    from tsrec.evaluation import backtest as run

    if "refit_every" in backtest:
        raise ValueError("a distributed backtest scores one saved model: refit_every is not supported; run "
                         "tsrec.evaluation.backtest with refit_every on one machine")
    if fixed := sorted(set(backtest) & {"time_col", "id_col", "target_col"}):
        raise ValueError(f"{fixed} are the saved model's columns (its schema names them): leave them out")
    inspect.signature(run).bind(None, None, **backtest)
