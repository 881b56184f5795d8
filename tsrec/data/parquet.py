"""Long Parquet data larger than memory as pandas objects, read a chunk of series at a time.

:func:`read_parquet` returns what :func:`~tsrec.data.covariates.read_frame` returns for the same
data loaded as one DataFrame, without ever holding that DataFrame:

1. The id column alone is scanned, a batch at a time, for the distinct ids, ordered as
   :func:`~tsrec.data.frame.read_targets` orders them (as text, sorted).
2. Per run of ``chunk_series`` consecutive ids in that order, the rows of those series only, and
   only the columns the panel needs (id, time, target, covariates), are read with a dataset filter
   on the id column and converted to pandas; :func:`~tsrec.data.covariates.read_frame` puts them on
   their grids. A series split over several files is one chunk's rows like any other.
3. The chunks' panels and covariates are joined in id order into one :class:`~tsrec.data.frame.Panel`
   and one :class:`~tsrec.data.covariates.CovariateValues`.

Memory. The result itself is in memory: per grid step of every series, the value (float64), its
observed flag (bool), its timestamp (int64) and each dynamic covariate (float64), about
``17 + 8 * Kd`` bytes, plus the distinct ids. What is bounded is the rest: the rows of one chunk
(at most ``chunk_series`` series) exist at a time, as an Arrow table, the DataFrame made from it
and the copies :func:`~tsrec.data.covariates.read_frame` makes of them; while a chunk is read,
Arrow also holds about one row group of the needed columns, decoded, besides it. Lower
``chunk_series`` when a chunk's rows do not fit.

Reading time. Every chunk scans the data once more, filtered on the chunk's ids and their range:
Parquet skips the row groups whose id statistics lie outside that range, so data written sorted by
id (``df.sort_values([id_col, time_col]).to_parquet(path, row_group_size=...)``) are read about
once in all, and data in any other order once per chunk; a larger ``chunk_series`` means fewer
passes.

Files that disagree. The dataset's schema is its first file's. Before any row is read, every
file's own schema (its footer) is checked for the columns read: a file without one of them, or
with a column of another kind (a number, a timestamp, text; text is parsed into the others' type
where it can be) is a ``ValueError`` naming the file, the column, both types and the fix; so is
a value that cannot be read in the others' type. An error about a series' rows (duplicate
timestamps, say) names the file that alone gives it, or the files whose rows of that series
share timestamps; timestamps on 1970-01-01 (what zeros, or epoch numbers read in the wrong unit,
become) are named as a likely corruption.

Frequency. With ``freq=None`` every chunk's frequency is inferred from its series and must be
the first chunk's (a ``ValueError`` naming a series of each otherwise, as for series of different
frequencies in one frame); a chunk whose series give none (one timestamp each) is read at the
first chunk's. Pass ``freq`` to fix the grid for all.
"""

from __future__ import annotations

import functools

import os
from collections.abc import Callable, Hashable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from tsrec._checks import check_int
from tsrec.config import CovariateConfig
from tsrec.data.covariates import CovariateValues, categorical_statics, read_frame, without_covariates
from tsrec.data.frame import Panel, _item_codes, _long_target, _require_column
from tsrec.data.schema import Schema

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.dataset as ds

__all__ = ["read_dataset", "read_parquet", "read_series", "series_ids"]

PathLike = str | os.PathLike


def read_dataset(source: PathLike | Sequence[PathLike], schema: Schema, categorical: Sequence[str] | None, *,
                 freq: str | None, gaps: str, last: int | None = None, ids: Sequence[Any] | None = None,
                 ) -> tuple[Panel, CovariateValues, Schema, tuple[str, ...]]:
    """:func:`read_parquet` of the columns ``schema`` names, the roles it leaves unnamed filled from a
    column convention (:meth:`Schema.conventional <tsrec.data.schema.Schema.conventional>`) and, with
    ``categorical`` None, the static covariates read as categories those whose dtype is not a real
    number's (:func:`~tsrec.data.covariates.categorical_statics`), both from the files' schema (no row
    read for them). Returns the panel, the covariates, the schema read with and the categorical
    static covariates."""
    columns = empty_frame(source)  # [0, columns]
    schema = schema.conventional(columns.columns)
    categorical = categorical_statics(columns, schema.covariates) if categorical is None else tuple(categorical)
    panel, covariates = read_parquet(source, schema.covariates, categorical, freq=freq, gaps=gaps, last=last, ids=ids,
                                     **schema.columns)
    return panel, covariates, schema, categorical


def read_parquet(
    source: PathLike | Sequence[PathLike],
    config: CovariateConfig,
    categorical: Sequence[str],
    *,
    freq: str | None,
    gaps: str,
    time_col: Hashable | None,
    id_col: Hashable | None,
    target_col: Any,
    chunk_series: int = 2_000,
    last: int | None = None,
    ids: Sequence[Any] | None = None,
) -> tuple[Panel, CovariateValues]:
    """Long Parquet data as a panel of its targets and its covariates on the panel's grids.

    source:       a Parquet file, a folder of them (its ``*.parquet`` files, sub-folders aside) or
                  a list of files (``str`` or ``os.PathLike``), read as one dataset.
    config:       the covariate columns; ``categorical`` the static ones read as categories (as for
                  :func:`~tsrec.data.covariates.read_frame`).
    freq, gaps:   as for :func:`~tsrec.data.frame.canonicalize`; ``freq=None`` is inferred from the
                  first chunk (module docstring).
    time_col:     the timestamp column; None: the ``DatetimeIndex`` pandas saved with the data
                  (``df.to_parquet`` of a frame indexed by time).
    id_col:       the series id column (required: Parquet data are read as a long frame).
    target_col:   the target column; None: the only column left besides id, time, covariates
                  and an index pandas saved.
    chunk_series: the most series whose rows are in memory at once.
    last:         read each series' ``last`` latest rows alone (None: all of them).
    ids:          read these series alone (ids of ``id_col`` the data hold; None: every series).

    Returns the :class:`~tsrec.data.frame.Panel` (layout ``"long"``, ``N`` items sorted by id as
    text, item ``i`` with ``T_i`` steps) and the :class:`~tsrec.data.covariates.CovariateValues`
    (``dynamic`` per item ``[T_i, Kp + Kf]``, ``static_real`` ``[N, Ks]``, ``static_cat`` ``[N, Kc]``)
    that :func:`~tsrec.data.covariates.read_frame` returns for the data as one frame.

    Raises ``ModuleNotFoundError`` without pyarrow, ``FileNotFoundError`` for a path that does not
    exist, ``ValueError`` for a folder without Parquet files, a missing id, time, target or
    covariate column (the columns listed), a row without an id, or no rows; and every error of
    :func:`~tsrec.data.covariates.read_frame`, unchanged.
    """
    if id_col is None:
        raise ValueError(
            "Parquet data are read as a long frame (id, time, target, covariate columns): pass id_col=<the series "
            "id column>; load wide data (one column per variable) with pandas instead, e.g. pd.read_parquet(path), "
            "and pass the DataFrame"
        )
    chunk_series = check_int("chunk_series", chunk_series)
    dataset = _dataset(source)
    time_col, target_col = _time_and_target(dataset.schema, config, time_col=time_col, id_col=id_col,
                                            target_col=target_col)
    columns = list(dict.fromkeys([id_col, time_col, target_col, *config.columns]))
    dataset = _check_files(dataset, columns, {id_col: "id_col", time_col: "time_col", target_col: "target_col"})

    def read(table: pd.DataFrame, *, freq: str | None) -> tuple[Panel, CovariateValues]:
        return read_frame(table, config, categorical, gaps=gaps, time_col=time_col, id_col=id_col,
                          target_col=target_col, last=last, freq=freq)

    parts = []
    wanted = _distinct_ids(dataset, id_col) if ids is None else _id_array(dataset, id_col, ids)
    for chunk in _chunks(wanted, id_col, chunk_series):
        rows = _rows(dataset, columns, id_col, chunk)
        try:
            parts.append(read(rows, freq=freq) if freq is not None or not parts else
                         _inferred_alike(functools.partial(read, rows), parts[0][0]))
        except ValueError as error:
            named = _naming_files(error, dataset, columns, id_col, time_col, chunk,
                                  functools.partial(read, freq=freq if freq is not None or not parts
                                                    else parts[0][0].freq))
            if named is error:
                raise
            raise named from error
    return _joined(parts)


def series_ids(source: PathLike | Sequence[PathLike], id_col: Hashable, *, part: tuple[int, int] = (0, 1)) -> pd.Series:
    """``[U]`` the distinct ids of the Parquet data ``source`` (a file, a folder or a list of files),
    in no set order, reading the id column alone: what a driver splits among workers.

    ``part=(k, n)``: the distinct ids of the ``k``-th of ``n`` near-equal runs of the files alone
    (possibly none), so that ``n`` workers each read a share of the ids; the parts' ids together
    hold every id (one held by several files may be in several parts). The whole data without a
    row is a ``ValueError``; a part without one is not."""
    dataset = _dataset(source)
    if part == (0, 1):
        return _distinct_ids(dataset, id_col).to_pandas()
    k, n = part
    files = dataset.files[len(dataset.files) * k // n:len(dataset.files) * (k + 1) // n]
    if not files:
        return pd.Series([], dtype=object)
    import pyarrow.dataset as ds

    return _distinct_ids(ds.dataset(files, schema=dataset.schema, format=_format()), id_col, empty=True).to_pandas()


def read_series(source: PathLike | Sequence[PathLike], id_col: Hashable, ids: Sequence[Any]) -> pd.DataFrame:
    """Every column of the rows of the series ``ids`` of the Parquet data ``source``, as one long
    frame (Parquet skips the row groups outside the ids' range: data written sorted by id are read
    about once by all the workers together)."""
    dataset = _dataset(source)
    return _rows(dataset, dataset.schema.names, id_col, _id_array(dataset, id_col, ids))


def _id_array(dataset: ds.Dataset, id_col: Hashable, ids: Sequence[Any]) -> pa.Array:
    """``ids`` as an array of ``id_col``'s type in ``dataset``."""
    import pyarrow as pa

    return pa.array(list(ids), type=dataset.schema.field(id_col).type)


def _dataset(source: PathLike | Sequence[PathLike]) -> ds.Dataset:
    """``source`` as one pyarrow dataset of its files with rows (module docstring: files without
    rows are left out, their columns' types say nothing), read with the pages' checksums verified
    (:func:`_format`); ``ModuleNotFoundError`` naming the extra without pyarrow, ``ValueError``
    naming a file that is not Parquet (empty, cut short, or another format)."""
    try:
        import pyarrow.dataset as ds
        import pyarrow.parquet as pq
    except ModuleNotFoundError as error:
        raise ModuleNotFoundError('reading Parquet data needs pyarrow: pip install "tsrec[parquet]"') from error
    files, rows = _files(source), []
    for path in files:
        try:
            rows.append(pq.read_metadata(path).num_rows)  # the footer alone
        except (OSError, ValueError) as error:  # pyarrow's ArrowInvalid is a ValueError, its IOError an OSError
            raise ValueError(f"Parquet file {path!r} cannot be read as Parquet ({error}): it is empty, cut short or "
                             "another format; write it again from its source, or leave it out of the data") from error
    return ds.dataset([path for path, n in zip(files, rows) if n] or files[:1], format=_format())


def _format() -> ds.ParquetFileFormat:
    """Parquet read with each data page's CRC checked where the writer stored one
    (``df.to_parquet(path, write_page_checksum=True)``; pandas and pyarrow store none by default,
    and then a damaged page can only be caught where it no longer decodes)."""
    import pyarrow.dataset as ds

    return ds.ParquetFileFormat(default_fragment_scan_options=ds.ParquetFragmentScanOptions(
        page_checksum_verification=True))


def _damaged(path: str, error: Exception) -> ValueError:
    """The error for a Parquet file whose pages do not match their checksums or do not decode."""
    return ValueError(f"Parquet file {path!r} is damaged: {error}; write it again from its source, or leave it out "
                      "of the data")


def _inferred_alike(read: Callable[..., tuple[Panel, CovariateValues]], first: Panel) -> tuple[Panel, CovariateValues]:
    """A later chunk read with its own frequency inferred, which must be the ``first`` chunk's
    (a ``ValueError`` naming a series of each, as for one frame); a chunk whose series give no
    frequency (one timestamp each) is read at the first chunk's."""
    try:
        panel, values = read(freq=None)
    except ValueError as error:
        if str(error).startswith("cannot infer the frequency"):
            return read(freq=first.freq)
        raise
    if panel.calendar != first.calendar:
        raise ValueError(f"the series have different frequencies ({first.freq!r} in {first.item_label(0)}, "
                         f"{panel.freq!r} in {panel.item_label(0)}); resample them to one frequency and pass freq=...")
    return panel, values


def empty_frame(source: PathLike | Sequence[PathLike]) -> pd.DataFrame:
    """The columns and dtypes of the Parquet data ``source`` (as :func:`read_parquet` takes it) as
    a DataFrame without rows: what the data hold, known without reading any row."""
    return _dataset(source).schema.empty_table().to_pandas()


def _files(source: PathLike | Sequence[PathLike]) -> list[str]:
    """The Parquet files of ``source`` (a file, a folder or a list of files), each checked to exist."""
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if path.is_dir():
            files = sorted(str(p) for p in path.glob("*.parquet") if p.is_file())
            if not files:
                raise ValueError(f"the folder {str(path)!r} holds no *.parquet files (sub-folders are not searched); "
                                 "pass a folder of Parquet files, a Parquet file or a list of them")
            return files
        paths = [path]
    elif isinstance(source, Sequence) and not isinstance(source, bytes):
        if not source:
            raise ValueError("source is an empty list; pass at least one Parquet file")
        paths = [Path(p) for p in source]
    else:
        raise TypeError(f"source must be a Parquet file, a folder of them or a list of files (str or os.PathLike), "
                        f"got {type(source).__name__}")
    for path in paths:
        if not path.is_file():
            what = "is a folder; pass it alone, not in a list" if path.is_dir() else "does not exist"
            raise FileNotFoundError(f"Parquet file {str(path)!r} {what}")
    return [str(path) for path in paths]


def _time_and_target(schema: pa.Schema, config: CovariateConfig, *, time_col: Hashable | None, id_col: Hashable,
                     target_col: Any) -> tuple[Hashable, Hashable]:
    """The time and target columns of data with ``schema``, checked (with the errors of
    :func:`~tsrec.data.covariates.read_frame`, which list the columns) before anything is read.

    ``time_col`` None is the ``DatetimeIndex`` pandas saved; ``target_col`` None is the only
    column left besides id, time, covariates and an index pandas saved (which pandas reads back as
    the index, not as a column).
    """
    saved = _saved_index(schema)
    time_col = _saved_time(schema, saved) if time_col is None else time_col
    frame = without_covariates(pd.DataFrame(columns=schema.names), config, time_col=time_col, id_col=id_col,
                               target_col=target_col)  # [0, columns]: the columns alone
    _require_column(frame, time_col, "time_col")
    _require_column(frame, id_col, "id_col")
    candidates = frame.drop(columns=[name for name in saved if name not in (id_col, time_col, target_col)],
                            errors="ignore")
    return time_col, _long_target(candidates, id_col, time_col, target_col)


def _saved_index(schema: pa.Schema) -> list[str]:
    """The columns holding an index pandas saved with the data (``df.to_parquet``)."""
    metadata = schema.pandas_metadata or {}
    return [name for name in metadata.get("index_columns", []) if isinstance(name, str)]  # a RangeIndex is a dict


def _saved_time(schema: pa.Schema, saved: Sequence[str]) -> str:
    """The column of the ``DatetimeIndex`` pandas saved (``saved``: its index columns); ``ValueError`` without one."""
    import pyarrow as pa

    if len(saved) != 1 or not pa.types.is_timestamp(schema.field(saved[0]).type):
        raise ValueError(f"time_col=None reads the timestamps from a DatetimeIndex saved by pandas, and the Parquet "
                         f"data have none; pass time_col=<the timestamp column> (its columns: {schema.names})")
    return saved[0]


def _distinct_ids(dataset: ds.Dataset, id_col: Hashable, *, empty: bool = False) -> pa.Array:
    """``[U]`` the distinct values of ``id_col`` (dictionaries decoded), read a batch at a time;
    ``ValueError`` naming a row without an id (null or NaN) and its file, or for data without
    rows (unless ``empty``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    distinct, missing, example = [], 0, ""
    for fragment in dataset.get_fragments():
        start = 0
        try:
            batches = list(fragment.to_batches(schema=dataset.schema, columns=[id_col]))
        except OSError as error:
            raise _damaged(fragment.path, error) from error
        for batch in batches:
            ids = batch.column(0)
            ids = ids.dictionary_decode() if pa.types.is_dictionary(ids.type) else ids
            absent = pc.is_null(ids, nan_is_null=True).to_numpy(zero_copy_only=False)  # [rows of the batch]
            if absent.any():
                missing += int(absent.sum())
                example = example or f"row {start + int(absent.argmax())} of {fragment.path}"
            distinct.append(pc.unique(ids))
            start += len(batch)
    if missing:
        raise ValueError(
            f"id_col {id_col!r} is missing (null/NaN) in {missing} rows, e.g. {example}; every row needs the id of "
            "its series: drop those rows, or fill them, e.g. with 'unknown'"
        )
    ids = pc.unique(pa.concat_arrays(distinct)) if distinct else pa.array([])
    if len(ids) == 0 and not empty:
        raise ValueError(f"the Parquet data ({dataset.files[0]} ...) have no rows; pass at least one row per series")
    return ids


def _chunks(ids: pa.Array, id_col: Hashable, size: int) -> Iterator[pa.Array]:
    """The raw ``ids`` ``[U]`` in runs of ``size`` consecutive ids as text, sorted (the order of
    :func:`~tsrec.data.frame.read_targets`); ids equal as text are in one run."""
    codes, _ = _item_codes(ids.to_pandas(), id_col)  # [U] position of each id among the ids as text, sorted
    order = np.argsort(codes, kind="stable")  # [U]
    bounds = np.searchsorted(codes[order], np.arange(0, codes.max() + 1 + size, size))  # run k: bounds[k]:bounds[k + 1]
    for start, end in zip(bounds[:-1], bounds[1:]):
        yield ids.take(order[start:end])


def _rows(dataset: ds.Dataset, columns: list[Hashable], id_col: Hashable, ids: pa.Array) -> pd.DataFrame:
    """``[R, len(columns)]`` the rows of the series ``ids``, only ``columns``, as pandas reads them
    (every column a column, an index pandas saved included). The ids' range, besides the ids, lets
    Parquet skip the row groups whose statistics lie outside it; the files are read one at a time.
    A value a file holds that cannot be read in the dataset's type (text that is not a number) is
    a ``ValueError`` naming the file."""
    import pyarrow as pa

    rows = _of_ids(id_col, ids)
    try:
        table = dataset.to_table(columns=columns, filter=rows, fragment_readahead=1)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OSError) as error:
        for fragment in dataset.get_fragments():
            try:
                fragment.to_table(schema=dataset.schema, columns=columns, filter=rows)
            except OSError as alone:  # a page that does not match its checksum, or does not decode
                raise _damaged(fragment.path, alone) from error
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
                types = {name: str(fragment.physical_schema.field(name).type) for name in columns}
                wanted = {name: str(dataset.schema.field(name).type) for name in columns}
                raise ValueError(
                    f"Parquet file {fragment.path!r} cannot be read with the other files: {error} (its columns' types: "
                    f"{types}; the data's, from {dataset.files[0]!r}: {wanted}); write every file with one type per "
                    "column, e.g. df[column] = pd.to_numeric(df[column]) before df.to_parquet(...)") from error
        raise
    return table.to_pandas(ignore_metadata=True)


def _of_ids(id_col: Hashable, ids: pa.Array) -> Any:
    """The dataset filter of the rows of ``ids``: their range (which lets Parquet skip the row
    groups whose statistics lie outside it) and the ids themselves."""
    import pyarrow.compute as pc

    field, bounds = pc.field(id_col), pc.min_max(ids)
    return (field >= bounds["min"]) & (field <= bounds["max"]) & field.isin(ids)


def _kind(type_: pa.DataType) -> str:
    """What a column of Arrow type ``type_`` holds, as the file checks compare it: ``"number"``
    (integers, floats, decimals, booleans), ``"timestamp"`` (timestamps and dates), ``"text"``
    (strings, dictionaries of them), else the type's own name."""
    import pyarrow as pa

    if pa.types.is_dictionary(type_):
        type_ = type_.value_type
    if pa.types.is_integer(type_) or pa.types.is_floating(type_) or pa.types.is_decimal(type_) \
            or pa.types.is_boolean(type_):
        return "number"
    if pa.types.is_timestamp(type_) or pa.types.is_date(type_):
        return "timestamp"
    if pa.types.is_string(type_) or pa.types.is_large_string(type_):
        return "text"
    return str(type_)


def _check_files(dataset: ds.Dataset, columns: Sequence[Hashable], roles: dict[Hashable, str]) -> ds.Dataset:
    """Every file of ``dataset`` holds ``columns`` with the kind of value (:func:`_kind`) the
    dataset's schema (its first file's) gives them: text may stand for another kind (read as
    it, :func:`_rows`), except in the id column (ids of one kind in every file); timestamps are in
    one time zone, or naive, in every file (read together, naive ones would be taken as UTC, or
    the zone of zoned ones dropped); else a ``ValueError`` naming the file, the column (``roles``:
    the option that names it), both types and the fix. Reads each file's footer alone.

    Returns the dataset to read: ``dataset``, or where a column holds dates in the first file and
    timestamps in another, one that reads every file's as timestamps (a date at midnight), so
    that no file's times of day are cut off (the errors about a file of dates name it as such,
    :func:`_naming_files`)."""
    import pyarrow as pa

    first = dataset.files[0]
    expected = {name: dataset.schema.field(name).type for name in columns}
    stamps = {name: (want, first) for name, want in expected.items() if pa.types.is_timestamp(want)}
    for fragment in dataset.get_fragments():
        schema = fragment.physical_schema
        for name, want in expected.items():
            role = f" ({roles[name]})" if name in roles else ""
            if schema.get_field_index(name) < 0:
                raise ValueError(
                    f"Parquet file {fragment.path!r} has no column {name!r}{role}, which {first!r} has (its columns: "
                    f"{schema.names}); write that file with the column (rename it if it is there under another name), "
                    "or leave the file out of the data")
            got = schema.field(name).type
            kinds = {_kind(got), _kind(want)}
            if len(kinds) > 1 and ("text" not in kinds or roles.get(name) == "id_col"):
                hint = (f" (numbers where timestamps are due are often seconds since 1970: convert them with "
                        f"pd.to_datetime(df[{name!r}], unit='s'))" if kinds == {"number", "timestamp"} else "")
                raise ValueError(
                    f"Parquet file {fragment.path!r}: column {name!r}{role} is {got}, where {first!r} has {want}"
                    f"{hint}; write every file with one type per column")
            if pa.types.is_timestamp(got):
                seen, where = stamps.setdefault(name, (got, fragment.path))
                if seen.tz != got.tz:
                    raise ValueError(_zones_differ(name, role, (got, fragment.path), (seen, where)))
    widened = [(name, stamps[name][0]) for name, want in expected.items() if pa.types.is_date(want) and name in stamps]
    if not widened:
        return dataset
    schema = dataset.schema
    for name, type_ in widened:
        schema = schema.set(schema.get_field_index(name), pa.field(name, type_))
    import pyarrow.dataset as ds

    return ds.dataset(dataset.files, schema=schema, format=_format())


def _zones_differ(name: Hashable, role: str, one: tuple[pa.DataType, str], other: tuple[pa.DataType, str]) -> str:
    """The error for a timestamp column ``name`` naive in one file and zoned in another, or in two
    zones: ``one`` and ``other`` are ``(type, file)``."""
    def said(type_: pa.DataType) -> str:
        return f"naive timestamps ({type_})" if type_.tz is None else f"timestamps in {type_.tz} ({type_})"

    (got, path), (seen, where) = one, other
    zoned, naive = (seen, got) if got.tz is None else (got, seen)
    if naive.tz is None:
        fix = (f"localize the naive ones in their zone before writing, e.g. df[{name!r}] = "
               f"df[{name!r}].dt.tz_localize({zoned.tz!r}), or make every file naive (.dt.tz_convert(None) gives "
               "UTC wall times)")
        effect = f"the naive ones would be read as UTC times and shown in {zoned.tz}, or the zone dropped"
    else:
        fix = f"convert them to one zone before writing, e.g. df[{name!r}] = df[{name!r}].dt.tz_convert({seen.tz!r})"
        effect = "every file's would be shown in the first one's zone, which moves their days and hours"
    return (f"Parquet file {path!r}: column {name!r}{role} holds {said(got)}, where {where!r} holds {said(seen)}: "
            f"read together, {effect}; write every file's timestamps in one zone: {fix}")


def _naming_files(error: ValueError, dataset: ds.Dataset, columns: list[Hashable], id_col: Hashable,
                  time_col: Hashable, ids: pa.Array, read: Callable[[pd.DataFrame], Any]) -> ValueError:
    """``error`` (raised reading the rows of the series ``ids``) with the Parquet files it comes
    from: the file whose rows of ``ids`` alone give the same error (``read``: what raised it,
    applied to a file's rows), or the files whose rows of one series share timestamps; with a
    likely corruption named where that file has timestamps on 1970-01-01. ``error`` as it is
    where neither explains it."""
    rows = dataset.to_table(columns=[*columns, "__filename"], filter=_of_ids(id_col, ids)).to_pandas(
        ignore_metadata=True)
    for path, part in rows.groupby("__filename", sort=False):
        try:
            read(part.drop(columns="__filename"))
        except ValueError as alone:
            if str(alone) != str(error):
                continue
            stamps = pd.to_datetime(part[time_col], errors="coerce")
            epoch = int((stamps.dt.year == 1970).sum()) if hasattr(stamps, "dt") else 0
            corrupt = (f". {epoch} of the file's timestamps fall in 1970, which is what zeros, or epoch numbers read "
                       f"in the wrong unit, become: they are likely corrupted; fix the file's column {time_col!r} "
                       "rather than aggregating" if epoch else "")
            dates = _dates_among_stamps(dataset, path, time_col)
            if dates:
                stamps = dataset.schema.field(time_col).type
                return ValueError(f"Parquet file {path!r} holds dates in {time_col!r} ({dates}, without a time of day) "
                                  f"where the other files hold timestamps ({stamps}): read as timestamps at midnight, "
                                  f"its rows give this error: {error}. Write that file with the timestamps (a "
                                  "datetime64 column, not .dt.date)")
            return ValueError(f"in Parquet file {path!r}: {error}{corrupt}")
    shared = rows[rows.duplicated([id_col, time_col], keep=False)]
    overlapping = shared.groupby([id_col, time_col], sort=False)["__filename"].nunique()
    overlapping = overlapping[overlapping > 1]
    if len(overlapping):
        (series, stamp) = overlapping.index[0]
        files = sorted(shared.loc[(shared[id_col] == series) & (shared[time_col] == stamp), "__filename"].unique())
        return ValueError(f"{error}. Series {series!r} has rows at the same timestamps (e.g. {stamp}) in the Parquet "
                          f"files {files}: keep each series' timestamp in one file")
    return error


def _dates_among_stamps(dataset: ds.Dataset, path: str, time_col: Hashable) -> str:
    """The type of ``time_col`` in the file ``path`` where it holds dates and the data are read as
    timestamps (:func:`_check_files`), else ``""``."""
    import pyarrow as pa

    got = next(f.physical_schema.field(time_col).type for f in dataset.get_fragments() if f.path == path)
    return str(got) if pa.types.is_date(got) and pa.types.is_timestamp(dataset.schema.field(time_col).type) else ""


def _joined(parts: Sequence[tuple[Panel, CovariateValues]]) -> tuple[Panel, CovariateValues]:
    """The chunks' panels and covariates (``parts``, in id order) as one panel and its covariates."""
    panels, values = zip(*parts)
    first = panels[0]
    panel = Panel(calendar=first.calendar, layout=first.layout, columns=first.columns,
                  items=tuple(item for part in panels for item in part.items), integer_ids=first.integer_ids)
    covariates = CovariateValues(dynamic=tuple(d for part in values for d in part.dynamic),
                                 static_real=np.concatenate([part.static_real for part in values]),
                                 static_cat=np.concatenate([part.static_cat for part in values]))
    return panel, covariates
