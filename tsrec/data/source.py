"""Where data come from, asked once: a DataFrame, long Parquet data, or some series of either.

Every other module takes a :data:`Source` and hands it here; this is the only module that asks
which kind it is:

- :func:`read`: a source as a :class:`Read`, its targets as a :class:`~tsrec.data.frame.Panel`
  and its covariates on the same grids (a DataFrame: :func:`~tsrec.data.covariates.read_frame`;
  Parquet: :func:`~tsrec.data.parquet.read_dataset`, a chunk of series at a time), with the
  column roles a convention fills and the static covariates that are categories, from the dtypes;
- :func:`series_ids`, :func:`subset`, :func:`rows_of`: the series of a source, and some of them;
- :meth:`Read.before`: the steps before each series' own origin, a slice of what was read (what
  ``Forecaster("auto")`` validates on, conformal calibration calibrates on and
  ``backtest(refit_every=...)`` refits on: the source is never read again for them).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from tsrec.config import CovariateConfig
from tsrec.data.covariates import CovariateValues, categorical_statics, read_frame
from tsrec.data.frame import Panel, index_as_columns
from tsrec.data.schema import Schema

__all__ = ["ParquetSeries", "Read", "Source", "is_parquet", "read", "rows_of", "series_ids", "subset"]


@dataclass(frozen=True)
class ParquetSeries:
    """The series ``ids`` of long Parquet data ``files`` (a file, a folder of files or a list of
    files): one process's part of the series, of which only the rows are read (a chunk of series
    at a time, as for all of them)."""

    files: str | os.PathLike | Sequence[str | os.PathLike]
    ids: tuple[Any, ...]


#: What a read takes: a frame, or long Parquet data (a file, a folder of files, a list of files, or
#: some of its series).
Source = pd.DataFrame | str | os.PathLike | Sequence[str | os.PathLike] | ParquetSeries


@dataclass(frozen=True)
class Read:
    """One read of a source.

    panel:      the targets, on a regular grid per series.
    covariates: the covariates on the same grids (:class:`~tsrec.data.covariates.CovariateValues`).
    schema:     the roles of the source's columns, as read.
    categorical: the static covariates read as categories (at ``fit``,
                 :func:`~tsrec.data.covariates.categorical_statics`).
    """

    panel: Panel
    covariates: CovariateValues
    schema: Schema
    categorical: tuple[str, ...] = ()

    def before(self, ends: Sequence[int] | np.ndarray) -> Read:
        """The steps of every series before its own grid position ``ends[i]`` (``[I]``; one at or
        past a series' length keeps all of it), targets and covariates alike: what is fitted on
        before an origin (``auto``'s validation, conformal calibration, a refitting backtest). A
        slice of the arrays read, never a second read of the source (:meth:`Panel.head
        <tsrec.data.frame.Panel.head>`)."""
        return Read(self.panel.head(ends), self.covariates.head(ends), self.schema, self.categorical)

    def targets(self) -> Read:
        """This read without its covariates: what a model that reads none (a statistical one) is
        fitted on beside models that do (``auto``'s candidates)."""
        if not self.schema.covariates.columns:
            return self
        return Read(self.panel, CovariateValues.none(self.panel), dataclasses.replace(self.schema,
                                                                                     covariates=CovariateConfig()))


def is_parquet(source: object) -> bool:
    """Whether ``source`` names Parquet data (a path, a non-empty list of paths, or
    :class:`ParquetSeries`) rather than a frame."""
    if isinstance(source, (str, os.PathLike, ParquetSeries)):
        return True
    return isinstance(source, (list, tuple)) and bool(source) and all(isinstance(p, (str, os.PathLike)) for p in source)


def read(source: Source, schema: Schema, *, categorical: Sequence[str] | None = None, freq: str | None, gaps: str,
         last: int | None = None, layout: Sequence[str] | None = None) -> Read:
    """``source``'s targets and covariates (:class:`Read`), the kind of source asked once.

    categorical: the static covariates read as categories (a fitted model's); None: those whose dtype
                 is not a real number's (:func:`~tsrec.data.covariates.categorical_statics`: what
                 ``fit`` reads, from a Parquet source's schema without reading a row).
    last:        read each series' ``last`` latest rows alone (None: all).
    layout:      the target columns of a fitted model, whose layout a frame must have
                 (:meth:`Schema.require_layout <tsrec.data.schema.Schema.require_layout>`).

    A long frame in a column convention needs no column names (:meth:`Schema.conventional
    <tsrec.data.schema.Schema.conventional>`): ``Read.schema`` holds the names it was read with."""
    source = index_as_columns(source)
    if not isinstance(source, pd.DataFrame):
        from tsrec.data.parquet import read_dataset

        files, ids = (source.files, source.ids) if isinstance(source, ParquetSeries) else (source, None)
        return Read(*read_dataset(_parquet(files), schema, categorical, freq=freq, gaps=gaps, last=last, ids=ids))
    schema = schema.conventional(source.columns)
    if layout is not None:
        schema.require_layout(source, layout)
    categorical = categorical_statics(source, schema.covariates) if categorical is None else tuple(categorical)
    panel, covariates = read_frame(source, schema.covariates, categorical, freq=freq, gaps=gaps, last=last,
                                   **schema.columns)
    return Read(panel, covariates, schema, categorical)


def series_ids(source: Source, id_col: Hashable, *, part: tuple[int, int] = (0, 1)) -> np.ndarray:
    """The ids of ``source``'s series, object: of Parquet data ``[U]``, each once, in no set order; of a
    frame its id column as it stands (``[rows]``, repeats included). ``part=(k, n)``: of Parquet files, those of the ``k``-th of ``n`` runs of the files
    alone (:func:`~tsrec.data.parquet.series_ids`); a frame or :class:`ParquetSeries` has one part."""
    if isinstance(source, pd.DataFrame):
        return index_as_columns(source)[id_col].to_numpy(object)
    if isinstance(source, ParquetSeries):
        return np.asarray(source.ids, dtype=object)
    from tsrec.data.parquet import series_ids as parquet_ids

    return parquet_ids(_parquet(source), id_col, part=part).to_numpy(object)


def subset(source: Source, id_col: Hashable, ids: Sequence[Any]) -> Source:
    """The series ``ids`` of ``source``: a frame's rows of them, or of Parquet data a
    :class:`ParquetSeries`, whose rows are read when it is."""
    if isinstance(source, pd.DataFrame):
        source = index_as_columns(source)
        return source[source[id_col].isin(ids)]
    return ParquetSeries(_files(source), tuple(ids))


def rows_of(source: Source, id_col: Hashable, ids: Sequence[Any]) -> pd.DataFrame:
    """The rows of the series ``ids`` of ``source`` as a frame: a DataFrame's, or of long Parquet
    data (a file, a folder or a list of files) only those series' rows, every column read."""
    if isinstance(source, pd.DataFrame):
        source = index_as_columns(source)
        return source[source[id_col].isin(ids)]
    from tsrec.data.parquet import read_series

    return read_series(_files(source), id_col, ids)


def _files(source: object) -> Any:
    """The Parquet files of ``source``: a :class:`ParquetSeries`'s, or ``source`` itself (checked
    by :func:`_parquet`)."""
    return _parquet(source.files if isinstance(source, ParquetSeries) else source)


def _parquet(source: object) -> Any:
    """``source`` if :func:`is_parquet`, else a ``TypeError`` naming what a source may be."""
    if not is_parquet(source):
        fix = "; pass one series as a frame: s.to_frame()" if isinstance(source, pd.Series) else ""
        raise TypeError(f"expected a pandas DataFrame, or long Parquet data (a file, a folder of files or a list of "
                        f"files), got {type(source).__name__}{fix}")
    return source
