"""Converters between GluonTS datasets and tsrec frames.

GluonTS side: an iterable of entries (``ListDataset``, ``PandasDataset``, or plain dicts), each with

- ``start``: a ``pd.Period`` (or, with ``freq=`` given, a ``pd.Timestamp`` or date string);
- ``target``: ``[T]`` (univariate) or ``[C, T]`` (multivariate), NaN where missing;
- ``item_id`` (optional). Other fields (covariates, static features) are not converted.

tsrec side (:mod:`tsrec.data.frame`): a *long* frame with columns ``item_id``, ``timestamp``,
``target`` (one univariate item per id), or a *wide* frame (``DatetimeIndex`` named ``timestamp``,
one column per variable: a single multivariate item).

Timestamps and periods: a tsrec timestamp belongs to the GluonTS period that contains it (pandas'
``DatetimeIndex.to_period``: ``'MS'`` and ``'ME'`` both give ``'M'``). Back from periods, timestamps
are the periods' starts, or with ``freq=`` the first step of ``freq`` inside each period
(``freq='ME'``: month ends, ``freq='W-SUN'``: Sundays).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
from gluonts.dataset.common import ListDataset
from pandas.tseries.frequencies import to_offset

from tsrec.data.frame import canonicalize
from tsrec.data.time_features import normalize_freq

__all__ = ["from_tsrec_frame", "to_tsrec_frame"]


class _Item(NamedTuple):
    """One dataset entry read: its id, ``[T]`` timestamps, ``[T]`` or ``[C, T]`` float64 target, step."""

    item_id: str
    index: pd.DatetimeIndex
    target: np.ndarray
    step: str  # the period frequency (freq=None) or the freq the timestamps step at


def to_tsrec_frame(
    dataset: Iterable[Mapping[str, Any]], *, freq: str | None = None, columns: Sequence[str] | None = None
) -> pd.DataFrame:
    """A GluonTS dataset as a tsrec frame.

    Univariate targets give a long frame with columns ``item_id`` (str; the entry's position when
    it has none), ``timestamp`` and ``target`` (float64, NaN kept), items in dataset order. One
    multivariate item (target ``[C, T]``) gives a wide frame ``[T, C]`` with a ``DatetimeIndex``
    named ``timestamp`` and columns ``columns`` (default ``"0"``, ..., ``"C-1"``).

    Args:
        dataset: iterable of entries with ``start``, ``target`` and optionally ``item_id``.
        freq: pandas offset alias of the timestamps. None: the periods' own frequency, each
            timestamp the start of its period; required when the starts are not ``pd.Period``.
        columns: the variable names of a multivariate target.

    Raises:
        TypeError: not a dataset of mappings.
        ValueError: no entry, a missing field, a ragged or >2-d target, a start off the ``freq``
            grid or periods of another frequency, repeated item ids, or several (or mixed)
            multivariate items.
    """
    if isinstance(dataset, pd.DataFrame):
        raise TypeError(
            "to_tsrec_frame takes a GluonTS dataset (an iterable of entries), got a DataFrame; a "
            "DataFrame is already a tsrec frame, or wrap it with gluonts.dataset.pandas.PandasDataset"
        )
    if not isinstance(dataset, Iterable):
        raise TypeError(f"expected a GluonTS dataset (an iterable of entries), got {type(dataset).__name__}")
    freq = None if freq is None else normalize_freq(freq)
    items = [_read_entry(position, entry, freq) for position, entry in enumerate(dataset)]
    if not items:
        raise ValueError("the dataset has no entries; pass at least one series")
    _check_same_freq(items)
    ranks = {item.target.ndim for item in items}
    if ranks == {1}:
        if columns is not None:
            raise ValueError("columns names the variables of a multivariate target; this dataset is univariate")
        return _long_frame(items)
    if ranks == {2} and len(items) == 1:
        return _wide_frame(items[0].index, items[0].target, columns)
    if ranks == {2}:
        raise ValueError(
            f"got {len(items)} multivariate items; a tsrec wide frame holds one multivariate item: convert "
            "them one at a time (to_tsrec_frame([entry])), or split each target [C, T] into univariate items"
        )
    raise ValueError(
        "the dataset mixes univariate ([T]) and multivariate ([C, T]) targets; tsrec frames are either "
        "long (univariate items) or wide (one multivariate item): split the multivariate items into rows"
    )


def from_tsrec_frame(
    df: pd.DataFrame,
    *,
    id_col: Hashable | None = None,
    time_col: Hashable | None = None,
    target_col: Hashable | Sequence[Hashable] | None = None,
    freq: str | None = None,
) -> list[dict[str, Any]]:
    """A tsrec frame as a GluonTS ``ListDataset`` (a list of entries, usable by GluonTS's estimators).

    The frame is read as tsrec reads it (:func:`tsrec.data.frame.canonicalize`, same arguments and
    errors): long with ``id_col``, wide without. Each item becomes an entry with ``start`` (a
    ``pd.Period`` at the period frequency of ``freq``), ``target`` (float32, NaN at missing and
    absent grid steps) and ``item_id``. Long: one ``[T]`` entry per id, sorted by id (as str).
    Wide: one ``[C, T]`` entry with ``item_id`` ``"0"``, rows in column order; GluonTS keeps no
    column names: pass them back as ``to_tsrec_frame(dataset, columns=...)``.
    """
    panel = canonicalize(df, freq=freq, time_col=time_col, id_col=id_col, target_col=target_col)
    period_freq = _period_freq(panel.freq)
    entries = [
        {
            "start": pd.Period(series.index[0], freq=period_freq),
            "target": series.values[:, 0] if panel.layout == "long" else series.values.T,
            "item_id": series.item_id,
        }
        for series in panel.items
    ]
    # GluonTS runs to_offset(freq): give it the Period's offset, as the alias "M" is deprecated there
    return ListDataset(entries, freq=entries[0]["start"].freq, one_dim_target=panel.layout == "long")


def _period_freq(freq: str) -> str:
    """The ``pd.Period`` frequency of the offset alias ``freq`` (``'MS'``, ``'ME'`` -> ``'M'``; ``'h'`` -> ``'h'``)."""
    return pd.date_range("2000-01-01", periods=1, freq=freq).to_period().freqstr


def _read_entry(position: int, entry: object, freq: str | None) -> _Item:
    """One dataset entry, validated."""
    if not isinstance(entry, Mapping):
        raise TypeError(
            f"entry {position} is a {type(entry).__name__}, not a mapping; a GluonTS entry is a dict "
            "with 'start', 'target' and optionally 'item_id'"
        )
    item_id = str(entry.get("item_id", position))
    label = f"entry {position} (item_id {item_id!r})"
    missing = [field for field in ("start", "target") if field not in entry]
    if missing:
        raise ValueError(f"{label} has no {missing} field; its fields are {sorted(map(str, entry))}")
    try:
        target = np.asarray(entry["target"], dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise ValueError(
            f"the target of {label} is ragged or not numeric ({error}); a multivariate target is a [C, T] "
            "array whose C rows have the same length"
        ) from None
    if target.ndim not in (1, 2):
        raise ValueError(f"the target of {label} has shape {target.shape}; expected [T] or [C, T]")
    start = entry["start"]
    step = start.freqstr if freq is None and isinstance(start, pd.Period) else str(freq)
    return _Item(item_id, _timestamps(label, start, target.shape[-1], freq), target, step)


def _timestamps(label: str, start: object, length: int, freq: str | None) -> pd.DatetimeIndex:
    """The ``[length]`` timestamps of an item starting at ``start`` (see the module docstring)."""
    if isinstance(start, pd.Period):
        if freq is None:
            return pd.period_range(start, periods=length, freq=start.freq).to_timestamp()
        if _period_freq(freq) != start.freqstr:
            raise ValueError(
                f"{label} has periods of frequency {start.freqstr!r}, which freq={freq!r} does not match "
                f"(its periods are {_period_freq(freq)!r}); pass a freq of the same period, or freq=None"
            )
        offset = to_offset(freq)
        return pd.date_range(offset.rollforward(start.start_time), periods=length, freq=offset)
    if freq is None:
        raise ValueError(
            f"{label} starts at a {type(start).__name__} ({start!r}), not a pandas Period; pass freq=... "
            "(e.g. freq='h') to place its timestamps"
        )
    try:
        first = pd.Timestamp(start)
    except (TypeError, ValueError) as error:
        raise ValueError(f"the start {start!r} of {label} is not a timestamp ({error})") from None
    offset = to_offset(freq)
    if not offset.is_on_offset(first):
        raise ValueError(
            f"the start {first} of {label} is not a step of freq={freq!r}; pass the freq of the data, or "
            f"start the series at {offset.rollforward(first)}"
        )
    return pd.date_range(first, periods=length, freq=offset)


def _check_same_freq(items: Sequence[_Item]) -> None:
    """``ValueError`` unless every item steps at one frequency."""
    freqs = {item.step for item in items}
    if len(freqs) > 1:
        raise ValueError(
            f"the items have different frequencies {sorted(freqs)}; a tsrec frame has one frequency: "
            "resample the series to one frequency first"
        )


def _long_frame(items: Sequence[_Item]) -> pd.DataFrame:
    """Columns ``item_id``, ``timestamp``, ``target``, rows by item (dataset order), then time."""
    ids, indexes, targets, _ = zip(*items)
    id_index = pd.Index(ids)
    if id_index.has_duplicates:
        repeated = list(id_index[id_index.duplicated()].unique())
        raise ValueError(
            f"item ids {repeated[:5]} appear more than once; a long frame has one series per id: give "
            "each entry its own item_id"
        )
    return pd.DataFrame(
        {
            "item_id": np.repeat(np.array(ids, dtype=object), [len(index) for index in indexes]),
            "timestamp": indexes[0].append(list(indexes[1:])).rename(None),
            "target": np.concatenate(targets),
        }
    )


def _wide_frame(index: pd.DatetimeIndex, target: np.ndarray, columns: Sequence[str] | None) -> pd.DataFrame:
    """``[T, C]`` frame of a ``[C, T]`` target, index named ``timestamp``."""
    names = [str(c) for c in range(target.shape[0])] if columns is None else list(columns)
    if len(names) != target.shape[0]:
        raise ValueError(f"columns has {len(names)} names for a target of {target.shape[0]} variables ([C, T])")
    return pd.DataFrame(target.T, index=index.rename("timestamp"), columns=names)
