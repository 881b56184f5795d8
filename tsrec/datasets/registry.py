"""Registry of the benchmark datasets: one frozen :class:`DatasetInfo` per file.

The values (row counts, sha256, columns, sources, licences) are those of the shared dataset README
(``shared/datasets/README.md``), which describes the files byte for byte. No data lives here.
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

__all__ = ["DATASETS", "DatasetInfo", "dataset_names", "get_info"]

#: Conversion applied to downloaded bytes before the checksum is checked.
#: ``"none"``: the bytes are the file (after gunzip when the URL ends in ``.gz``);
#: ``"deepfs_wth"``: see :func:`tsrec.datasets.loading.convert_deepfs_wth`.
Conversion = Literal["none", "deepfs_wth"]


@dataclass(frozen=True)
class DatasetInfo:
    """Static description of one benchmark file.

    Attributes:
        name: canonical name (``"ETTh1"``); lookups are case-insensitive.
        filename: file name searched for in the data directories (``"ETTh1.csv"``).
        freq: pandas frequency alias of the sampling step (``"h"``, ``"15min"``, ``"10min"``).
        target: the usual target column (``OT`` for ETT and weather, ``WetBulbCelsius`` for WTH).
        columns: the variable columns in file order (the ``date`` column excluded).
        n_rows: rows returned by :func:`tsrec.datasets.load` (exact-duplicate rows dropped); the
            split arithmetic uses this count.
        file_rows: data rows in the file, header excluded.
        sha256: hex digest of the file as distributed.
        url: public raw URL the file can be downloaded from (``.gz`` URLs are decompressed and
            ``conversion`` applied before the checksum is checked).
        source: provenance in words (origin repository, paper).
        licence: the data licence as the origin states it.
        seasonality: steps per day (24 hourly, 96 for 15 minutes, 144 for 10 minutes).
        fixed_borders: ``(n_train, n_val, n_test)`` rows for the ETT fixed 12/4/4-month borders;
            ``None`` means the 70/10/20 row ratio of Informer's ``Dataset_Custom``.
        conversion: how downloaded bytes become the file (see :data:`Conversion`).
    """

    name: str
    filename: str
    freq: str
    target: str
    columns: tuple[str, ...]
    n_rows: int
    file_rows: int
    sha256: str
    url: str
    source: str
    licence: str
    seasonality: int
    fixed_borders: tuple[int, int, int] | None = None
    conversion: Conversion = "none"

    @property
    def n_variables(self) -> int:
        """Number of variable columns (the date column excluded)."""
        return len(self.columns)


_ETT_COLUMNS = ("HUFL", "HULL", "MUFL", "MULL", "LUFL", "LULL", "OT")
_ETT_URL = "https://raw.githubusercontent.com/zhouhaoyi/ETDataset/main/ETT-small/{}.csv"
_ETT_LICENCE = "CC BY-ND 4.0 (Creative Commons Attribution-NoDerivatives 4.0 International)"
_ETT_SOURCE = (
    "ETDataset (zhouhaoyi/ETDataset, ETT-small/{}.csv), Zhou et al., Informer, AAAI 2021: "
    "2 electricity transformers at 2 stations in one province of China, 2016-07 to 2018-06"
)
_HOURLY_BORDERS = (12 * 30 * 24, 4 * 30 * 24, 4 * 30 * 24)  # 8640 / 2880 / 2880
_MINUTE_BORDERS = tuple(4 * b for b in _HOURLY_BORDERS)  # 34560 / 11520 / 11520

_WTH_COLUMNS = (
    "Visibility",
    "DryBulbFarenheit",
    "DryBulbCelsius",
    "WetBulbFarenheit",
    "DewPointFarenheit",
    "DewPointCelsius",
    "RelativeHumidity",
    "WindSpeed",
    "WindDirection",
    "StationPressure",
    "Altimeter",
    "WetBulbCelsius",
)
_WEATHER_COLUMNS = (
    "p (mbar)",
    "T (degC)",
    "Tpot (K)",
    "Tdew (degC)",
    "rh (%)",
    "VPmax (mbar)",
    "VPact (mbar)",
    "VPdef (mbar)",
    "sh (g/kg)",
    "H2OC (mmol/mol)",
    "rho (g/m**3)",
    "wv (m/s)",
    "max. wv (m/s)",
    "wd (deg)",
    "rain (mm)",
    "raining (s)",
    "SWDR (W/m\ufffd)",
    "PAR (\ufffdmol/m\ufffd/s)",
    "max. PAR (\ufffdmol/m\ufffd/s)",
    "Tlog (degC)",
    "OT",
)  # U+FFFD stands where the origin had the squared sign and the micro sign


def _ett(name: str, freq: str, rows: int, sha: str, borders: tuple[int, ...]) -> DatasetInfo:
    seasonality = 24 if freq == "h" else 96
    return DatasetInfo(
        name=name,
        filename=f"{name}.csv",
        freq=freq,
        target="OT",
        columns=_ETT_COLUMNS,
        n_rows=rows,
        file_rows=rows,
        sha256=sha,
        url=_ETT_URL.format(name),
        source=_ETT_SOURCE.format(name),
        licence=_ETT_LICENCE,
        seasonality=seasonality,
        fixed_borders=(borders[0], borders[1], borders[2]),
    )


_ENTRIES = (
    _ett(
        "ETTh1",
        "h",
        17420,
        "f18de3ad269cef59bb07b5438d79bb3042d3be49bdeecf01c1cd6d29695ee066",
        _HOURLY_BORDERS,
    ),
    _ett(
        "ETTh2",
        "h",
        17420,
        "a3dc2c597b9218c7ce1cd55eb77b283fd459a1d09d753063f944967dd6b9218b",
        _HOURLY_BORDERS,
    ),
    _ett(
        "ETTm1",
        "15min",
        69680,
        "6ce1759b1a18e3328421d5d75fadcb316c449fcd7cec32820c8dafda71986c9e",
        _MINUTE_BORDERS,
    ),
    _ett(
        "ETTm2",
        "15min",
        69680,
        "db973ca252c6410a30d0469b13d696cf919648d0f3fd588c60f03fdbdbadd1fd",
        _MINUTE_BORDERS,
    ),
    DatasetInfo(
        name="WTH",
        filename="WTH.csv",
        freq="h",
        target="WetBulbCelsius",
        columns=_WTH_COLUMNS,
        n_rows=35064,
        file_rows=35064,
        sha256="755c260441bd18a4cac2f2ee4bcc607057daa0efe4af6c0d8a17409f53ab151d",
        # DeepFS's copy carries the same values with M/D/YYYY H:MM dates and a trailing `time`
        # column; ``conversion="deepfs_wth"`` rewrites it into this file byte for byte.
        url="https://raw.githubusercontent.com/songjiang0909/DeepFS/"
        "059f5b5f84bb587584cdba262c3351b7d53e67a5/data/WTH.csv",
        source="Informer's 'Weather (WTH)' set (Zhou et al., AAAI 2021): hourly U.S. local "
        "climatological data of one station, 2010-01-01 to 2013-12-31; copy from "
        "songjiang0909/DeepFS:data/WTH.csv with the `time` column dropped and ISO dates",
        licence="none stated for the data in the source repositories",
        seasonality=24,
        conversion="deepfs_wth",
    ),
    DatasetInfo(
        name="weather",
        filename="weather.csv",
        freq="10min",
        target="OT",
        columns=_WEATHER_COLUMNS,
        n_rows=52695,
        file_rows=52696,
        sha256="34ee981d07313e51da2a50bb600072c8ae4a69cb4b0651f4cb93a069d7a2ba63",
        url="https://raw.githubusercontent.com/ljnvs/HiCR-Mamba/"
        "ba27dd7d4a34de1acd4a8435ed239a6444706831/datasets/weather/weather.csv.gz",
        source="the Autoformer benchmark 'Weather' (thuml/Autoformer): 21 meteorological "
        "indicators every 10 minutes through 2020, Max Planck Institute for Biogeochemistry "
        "weather station (per the Autoformer paper); copy from "
        "ljnvs/HiCR-Mamba:datasets/weather/weather.csv.gz, decompressed",
        licence="none stated for the data in the source repositories",
        seasonality=144,
    ),
)

#: Read-only mapping canonical name -> :class:`DatasetInfo`, in registry order.
DATASETS: Mapping[str, DatasetInfo] = types.MappingProxyType({d.name: d for d in _ENTRIES})
_BY_LOWER = {d.name.lower(): d for d in _ENTRIES}


def dataset_names() -> tuple[str, ...]:
    """The canonical names of the registered datasets."""
    return tuple(DATASETS)


def get_info(name_or_info: str | DatasetInfo) -> DatasetInfo:
    """Return the registry entry for ``name`` (case-insensitive); a ``DatasetInfo`` passes through.

    Raises:
        ValueError: unknown name; the message lists the known ones.
        TypeError: neither a string nor a ``DatasetInfo``.
    """
    if isinstance(name_or_info, DatasetInfo):
        return name_or_info
    if not isinstance(name_or_info, str):
        raise TypeError(
            f"dataset must be a name or a DatasetInfo, got {type(name_or_info).__name__}"
        )
    try:
        return _BY_LOWER[name_or_info.lower()]
    except KeyError:
        known = ", ".join(DATASETS)
        raise ValueError(f"unknown dataset {name_or_info!r}; known datasets: {known}") from None
