"""Split borders and standard settings of the two evaluation protocols.

``"informer"``: the protocol of Informer (Zhou et al., AAAI 2021) that the RSA paper (ICLR 2023)
follows; ``"long_horizon"``: the Time-Series-Library protocol (Autoformer and successors). Both use
the same borders, taken from the reference loaders (``Dataset_ETT_hour``, ``Dataset_ETT_minute``,
``Dataset_Custom`` in ``zhouhaoyi/Informer2020:data/data_loader.py``):

* ETTh*: fixed 12/4/4 months of 30 days, 8640/2880/2880 rows; ETTm*: the same x4
  (34560/11520/11520). Rows after the test border (17420 - 14400 hourly) are never used.
* WTH, weather: ``num_train = int(n * 0.7)``, ``num_test = int(n * 0.2)``,
  ``num_val = n - num_train - num_test``; the test split is the last ``num_test`` rows.

Validation and test inputs start ``context_length`` rows before their border
(``border1s = [0, num_train - seq_len, n - num_test - seq_len]``), and a split of ``L`` rows holds
``L - context_length - prediction_length + 1`` windows (Informer's ``__len__``). The scaler is
fitted on the training rows ``[0, num_train)`` only; metrics are reported on the scaled data.
The protocols differ only in their standard (context, label, horizon) settings:
see :func:`paper_setting`.
"""

from __future__ import annotations

import types
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

from tsrec._checks import check_int
from tsrec.datasets.registry import DatasetInfo, get_info

__all__ = [
    "INFORMER_SETTINGS",
    "LONG_HORIZON_CONTEXT",
    "LONG_HORIZON_HORIZONS",
    "LONG_HORIZON_LABEL",
    "PROTOCOLS",
    "Split",
    "Splits",
    "paper_setting",
    "splits",
]

Protocol = Literal["informer", "long_horizon"]
SplitName = Literal["train", "val", "test"]
#: The supported protocol names.
PROTOCOLS: tuple[str, ...] = ("informer", "long_horizon")

#: Multivariate ("M") settings of the RSA paper's Table 1, horizon -> (context_length,
#: label_length, prediction_length), transcribed from Informer's own scripts
#: ``zhouhaoyi/Informer2020:scripts/{ETTh1,ETTh2,ETTm1,WTH}.sh`` (the ``### M`` blocks; the RSA
#: paper says its input lengths follow Informer). Note two entries whose label length is not the
#: context length: ETTh2-336 is ``--seq_len 336 --label_len 168`` and WTH-336 is
#: ``--seq_len 720 --label_len 168`` in those scripts.
_INFORMER_SETTINGS: dict[str, dict[int, tuple[int, int, int]]] = {
    "ETTh1": {24: (48, 48, 24), 48: (96, 48, 48), 168: (168, 168, 168), 336: (168, 168, 336)},
    "ETTh2": {24: (48, 48, 24), 48: (96, 96, 48), 168: (336, 336, 168), 336: (336, 168, 336)},
    "ETTm1": {24: (672, 96, 24), 48: (96, 48, 48), 96: (384, 384, 96), 288: (672, 288, 288)},
    "WTH": {24: (168, 168, 24), 48: (96, 96, 48), 168: (336, 168, 168), 336: (720, 168, 336)},
}
INFORMER_SETTINGS: Mapping[str, Mapping[int, tuple[int, int, int]]] = types.MappingProxyType(
    {name: types.MappingProxyType(table) for name, table in _INFORMER_SETTINGS.items()}
)

#: Time-Series-Library long-horizon protocol: input 96, label (decoder start) 48.
LONG_HORIZON_CONTEXT = 96
LONG_HORIZON_LABEL = 48
LONG_HORIZON_HORIZONS: tuple[int, ...] = (96, 192, 336, 720)


def paper_setting(
    name: str | DatasetInfo, horizon: int, *, protocol: Protocol = "informer"
) -> tuple[int, int, int]:
    """Standard ``(context_length, label_length, prediction_length)`` of a protocol.

    ``"informer"``: the RSA paper's Table 1 settings (:data:`INFORMER_SETTINGS`: ETTh1, ETTh2,
    ETTm1, WTH at their four horizons). ``"long_horizon"``: ``(96, 48, horizon)`` for any dataset
    and ``horizon`` in 96/192/336/720.

    Raises:
        ValueError: unknown protocol, or a dataset/horizon without a standard setting (the
            message lists the available ones).
    """
    info = get_info(name)
    if protocol == "informer":
        table = INFORMER_SETTINGS.get(info.name)
        if table is None:
            raise ValueError(
                f"the informer protocol (RSA paper Table 1) has no setting for {info.name}; "
                f"datasets with settings: {', '.join(INFORMER_SETTINGS)}"
            )
        if horizon not in table:
            raise ValueError(
                f"no informer setting for {info.name} at horizon {horizon}; "
                f"horizons: {sorted(table)}"
            )
        return table[horizon]
    if protocol == "long_horizon":
        if horizon not in LONG_HORIZON_HORIZONS:
            raise ValueError(
                f"the long_horizon protocol uses horizons {LONG_HORIZON_HORIZONS}, got {horizon}"
            )
        return (LONG_HORIZON_CONTEXT, LONG_HORIZON_LABEL, horizon)
    raise ValueError(f"unknown protocol {protocol!r}; known: {', '.join(PROTOCOLS)}")


@dataclass(frozen=True)
class Split:
    """One split as a slice of the full (scaled) array.

    Attributes:
        name: ``"train"``, ``"val"`` or ``"test"``.
        start: first row of the data slice, context prefix included (Informer's ``border1``).
        end: one past the last row (Informer's ``border2``).
        border: first row that belongs to the split itself (``start + context_length`` for
            val/test, ``0`` for train).
        context_length: input length of a window.
        prediction_length: forecast length of a window.
    """

    name: SplitName
    start: int
    end: int
    border: int
    context_length: int
    prediction_length: int

    @property
    def rows(self) -> range:
        """Rows of the data slice ``[start, end)``."""
        return range(self.start, self.end)

    @property
    def n_windows(self) -> int:
        """``(end - start) - context_length - prediction_length + 1``."""
        return (self.end - self.start) - self.context_length - self.prediction_length + 1

    @property
    def window_starts(self) -> range:
        """Row of the first input step of each window."""
        return range(self.start, self.start + self.n_windows)

    @property
    def origins(self) -> range:
        """Forecast origins: row of the first forecast step of each window.

        Window ``i`` reads inputs ``[o - context_length, o)`` and targets
        ``[o, o + prediction_length)`` for ``o = origins[i]``, all within :attr:`rows`.
        """
        first = self.start + self.context_length
        return range(first, first + self.n_windows)


@dataclass(frozen=True)
class Splits:
    """Train/val/test splits of one dataset under one protocol (see the module docstring).

    Attributes:
        dataset: dataset name.
        protocol: ``"informer"`` or ``"long_horizon"``.
        n_rows: rows of the full array the ranges index into.
        context_length, prediction_length: window geometry.
        train, val, test: the three :class:`Split` objects.
        scaler_rows: training rows ``[0, num_train)`` on which the scaler is fitted.
    """

    dataset: str
    protocol: str
    n_rows: int
    context_length: int
    prediction_length: int
    train: Split
    val: Split
    test: Split
    scaler_rows: range

    def __iter__(self) -> Iterator[Split]:
        return iter((self.train, self.val, self.test))

    def __getitem__(self, name: SplitName) -> Split:
        parts = {"train": self.train, "val": self.val, "test": self.test}
        if name not in parts:
            raise KeyError(f"split must be 'train', 'val' or 'test', got {name!r}")
        return parts[name]

    @property
    def n_windows(self) -> dict[str, int]:
        """Windows per split, e.g. ``{"train": 8353, "val": 2689, "test": 2689}``."""
        return {s.name: s.n_windows for s in self}


def splits(
    name_or_info: str | DatasetInfo,
    protocol: Protocol = "informer",
    *,
    context_length: int,
    prediction_length: int,
    n_rows: int | None = None,
) -> Splits:
    """Border arithmetic of the standard protocols.

    Args:
        name_or_info: dataset name or ``DatasetInfo`` (its ``fixed_borders`` decide between the
            ETT month borders and the 70/10/20 ratio).
        protocol: ``"informer"`` or ``"long_horizon"`` (same borders; recorded in the result).
        context_length: input length (Informer's ``seq_len``).
        prediction_length: horizon (``pred_len``).
        n_rows: length of the array being split; default the registry's ``n_rows`` (the rows
            :func:`tsrec.datasets.load` returns).

    Example:
        ETTh1 with context 96 and horizon 192: train rows ``[0, 8640)``, val ``[8544, 11520)``,
        test ``[11424, 14400)``; 8353 / 2689 / 2689 windows.

    Raises:
        ValueError: unknown protocol, non-positive lengths, too few rows for the fixed borders,
            a context longer than the training part, or a split without a single window.
    """
    info = get_info(name_or_info)
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r}; known: {', '.join(PROTOCOLS)}")
    seq = check_int("context_length", context_length)
    pred = check_int("prediction_length", prediction_length)
    n = check_int("n_rows", info.n_rows if n_rows is None else n_rows)

    if info.fixed_borders is not None:
        num_train, num_val, num_test = info.fixed_borders
        if n < num_train + num_val + num_test:
            raise ValueError(
                f"{info.name} uses fixed borders {info.fixed_borders} (train/val/test rows) and "
                f"needs at least {num_train + num_val + num_test} rows, got n_rows={n}"
            )
    else:
        num_train = int(n * 0.7)  # the exact float expressions of Informer's Dataset_Custom
        num_test = int(n * 0.2)
        num_val = n - num_train - num_test
    test_border = num_train + num_val
    border1s = (0, num_train - seq, test_border - seq)
    border2s = (num_train, test_border, test_border + num_test)
    if border1s[1] < 0:
        raise ValueError(
            f"context_length={seq} is longer than the training part of {info.name} "
            f"({num_train} rows)"
        )
    names: tuple[SplitName, SplitName, SplitName] = ("train", "val", "test")
    parts = [
        Split(name, b1, b2, 0 if name == "train" else b1 + seq, seq, pred)
        for name, b1, b2 in zip(names, border1s, border2s, strict=True)
    ]
    for part in parts:
        if part.n_windows < 1:
            raise ValueError(
                f"the {part.name} split of {info.name} ({part.end - part.start} rows incl. "
                f"context) has no window of context_length={seq} + prediction_length={pred}"
            )
    return Splits(
        dataset=info.name,
        protocol=protocol,
        n_rows=n,
        context_length=seq,
        prediction_length=pred,
        train=parts[0],
        val=parts[1],
        test=parts[2],
        scaler_rows=range(0, num_train),
    )
