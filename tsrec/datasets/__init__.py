"""Benchmark datasets: registry, loader, downloader and the split protocols.

>>> from tsrec import datasets
>>> df = datasets.load("ETTh1")  # doctest: +SKIP
>>> s = datasets.splits("ETTh1", context_length=96, prediction_length=192)
>>> s.n_windows
{'train': 8353, 'val': 2689, 'test': 2689}
>>> datasets.paper_setting("ETTh1", 24)
(48, 48, 24)

The files are never shipped: put them in a directory (``data_dir``, ``$TSREC_DATA_DIR`` or
``~/.cache/tsrec/datasets``) or pass ``download=True``. Dataset cards: ``datasets/*.md`` at the
repository root.
"""

from tsrec.datasets.loading import (
    ENV_VAR,
    ChecksumError,
    cache_dir,
    convert_deepfs_wth,
    download,
    find_file,
    load,
    search_dirs,
    sha256_of,
)
from tsrec.datasets.protocols import (
    INFORMER_SETTINGS,
    LONG_HORIZON_CONTEXT,
    LONG_HORIZON_HORIZONS,
    LONG_HORIZON_LABEL,
    PROTOCOLS,
    Split,
    Splits,
    paper_setting,
    splits,
)
from tsrec.datasets.registry import DATASETS, DatasetInfo, dataset_names, get_info

__all__ = [
    "DATASETS",
    "ENV_VAR",
    "INFORMER_SETTINGS",
    "LONG_HORIZON_CONTEXT",
    "LONG_HORIZON_HORIZONS",
    "LONG_HORIZON_LABEL",
    "PROTOCOLS",
    "ChecksumError",
    "DatasetInfo",
    "Split",
    "Splits",
    "cache_dir",
    "convert_deepfs_wth",
    "dataset_names",
    "download",
    "find_file",
    "get_info",
    "load",
    "paper_setting",
    "search_dirs",
    "sha256_of",
    "splits",
]
