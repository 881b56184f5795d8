"""Find, download and read the benchmark CSV files.

Lookup order for a file (first hit wins):

1. the ``data_dir`` argument,
2. the directory in the environment variable ``TSREC_DATA_DIR``,
3. the user cache ``$XDG_CACHE_HOME/tsrec/datasets`` (``~/.cache/tsrec/datasets`` by default).

Downloads (``download=True``) go to the user cache, are checked against the registry's sha256 and
are moved into place atomically; the data is never shipped with the package.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import os
import re
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import BinaryIO, Protocol

import pandas as pd

from tsrec._hashing import CHUNK, sha256_of
from tsrec.datasets.registry import DatasetInfo, get_info

__all__ = [
    "ENV_VAR",
    "ChecksumError",
    "cache_dir",
    "convert_deepfs_wth",
    "download",
    "find_file",
    "load",
    "search_dirs",
    "sha256_of",
]

#: Environment variable naming a directory that holds the benchmark files.
ENV_VAR = "TSREC_DATA_DIR"


class ChecksumError(ValueError):
    """A downloaded or local file does not have the registry's sha256."""


def cache_dir() -> Path:
    """The user cache directory for datasets: ``$XDG_CACHE_HOME/tsrec/datasets``.

    ``XDG_CACHE_HOME`` defaults to ``~/.cache`` when unset or empty. The directory is not created.
    """
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "tsrec" / "datasets"


def _labelled_dirs(data_dir: str | os.PathLike[str] | None) -> list[tuple[Path, str]]:
    dirs: list[tuple[Path, str]] = []
    if data_dir is not None:
        dirs.append((Path(data_dir).expanduser(), "data_dir argument"))
    env = os.environ.get(ENV_VAR)
    if env:
        dirs.append((Path(env).expanduser(), f"${ENV_VAR}"))
    dirs.append((cache_dir(), "user cache"))
    return dirs


def search_dirs(data_dir: str | os.PathLike[str] | None = None) -> tuple[Path, ...]:
    """The directories searched for a file, in lookup order (see the module docstring)."""
    return tuple(path for path, _ in _labelled_dirs(data_dir))


def find_file(
    name: str | DatasetInfo, data_dir: str | os.PathLike[str] | None = None
) -> Path | None:
    """Path of the dataset's file in the first search directory that has it, else ``None``."""
    info = get_info(name)
    for directory in search_dirs(data_dir):
        candidate = directory / info.filename
        if candidate.is_file():
            return candidate
    return None


_DEEPFS_DATE = re.compile(r"^(\d{1,2})/(\d{1,2})/(\d{4}) (\d{1,2}):(\d{2})$")


def convert_deepfs_wth(raw: bytes) -> bytes:
    """Rewrite songjiang0909/DeepFS's ``WTH.csv`` into the benchmark's ``WTH.csv`` layout.

    DeepFS stores the same values with dates as ``M/D/YYYY H:MM`` and an extra trailing ``time``
    column (the row index). This drops that column and writes dates as ``YYYY-MM-DD HH:MM:SS``;
    every value field is kept as text, so the result is the benchmark file byte for byte (the
    caller still checks the sha256).

    Raises:
        ValueError: the input does not have DeepFS's layout.
    """
    lines = raw.decode("utf-8").split("\n")
    trailing_newline = lines[-1] == ""
    if trailing_newline:
        lines.pop()
    if not lines or not lines[0].rstrip("\r").endswith(",time"):
        raise ValueError("not DeepFS's WTH.csv: the header does not end with a 'time' column")
    out = [lines[0].rstrip("\r")[: -len(",time")]]
    for number, line in enumerate(lines[1:], start=2):
        fields = line.rstrip("\r").split(",")
        match = _DEEPFS_DATE.match(fields[0])
        if match is None or len(fields) < 3:
            raise ValueError(f"not DeepFS's WTH.csv: line {number} starts with {fields[0]!r}")
        month, day, year, hour, minute = match.groups()
        date = f"{year}-{int(month):02d}-{int(day):02d} {int(hour):02d}:{minute}:00"
        out.append(",".join([date, *fields[1:-1]]))
    text = "\n".join(out) + ("\n" if trailing_newline else "")
    return text.encode("utf-8")


class _Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


def _copy_hashing(src: _Readable, dst: BinaryIO) -> str:
    digest = hashlib.sha256()
    for chunk in iter(lambda: src.read(CHUNK), b""):
        digest.update(chunk)
        dst.write(chunk)
    return digest.hexdigest()


def _fetch(info: DatasetInfo, url: str, dst: BinaryIO, timeout: float) -> str:
    """Stream ``url`` into ``dst`` (gunzip, conversion); return the sha256 of what was written."""
    with urllib.request.urlopen(url, timeout=timeout) as response:
        stream: _Readable = response
        if urllib.parse.urlparse(url).path.endswith(".gz"):
            stream = gzip.GzipFile(fileobj=response)
        if info.conversion == "deepfs_wth":
            data = convert_deepfs_wth(stream.read())
            dst.write(data)
            return hashlib.sha256(data).hexdigest()
        return _copy_hashing(stream, dst)


def download(
    name: str | DatasetInfo,
    dest_dir: str | os.PathLike[str] | None = None,
    *,
    url: str | None = None,
    overwrite: bool = False,
    timeout: float = 60.0,
) -> Path:
    """Download a dataset file, verify its sha256 and move it into place atomically.

    Args:
        name: registry name or a ``DatasetInfo``.
        dest_dir: target directory; default :func:`cache_dir`. Created if needed.
        url: override the registry URL (a mirror, or a ``file://`` URL). A path ending in ``.gz``
            is decompressed; the entry's ``conversion`` is applied either way.
        overwrite: download even when the file already exists in ``dest_dir`` (otherwise the
            existing file is returned as it is; ``load(..., verify=True)`` checks it).
        timeout: socket timeout in seconds.

    Returns:
        The path of the verified file.

    Raises:
        ChecksumError: the downloaded content has another sha256; the partial file is removed and
            the message gives both hashes.
        OSError: the download itself failed (network, missing URL target).
    """
    info = get_info(name)
    dest = Path(dest_dir).expanduser() if dest_dir is not None else cache_dir()
    target = dest / info.filename
    if target.is_file() and not overwrite:
        return target
    source = url or info.url
    dest.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{info.filename}.", suffix=".part", dir=dest)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                actual = _fetch(info, source, out, timeout)
            except (urllib.error.URLError, OSError) as exc:
                raise OSError(
                    f"downloading {info.filename} from {source} failed: {exc}. Download it by "
                    f"hand and put it in {dest} (or any directory of tsrec.datasets.search_dirs())"
                ) from exc
        if actual != info.sha256:
            raise ChecksumError(
                f"checksum mismatch for {info.filename} downloaded from {source}: expected sha256 "
                f"{info.sha256}, got {actual}; the partial file was removed"
            )
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


_download = download  # `load` has a parameter of the same name


def _missing_message(info: DatasetInfo, data_dir: str | os.PathLike[str] | None) -> str:
    searched = "\n".join(
        f"  {i}. {path} ({label})" for i, (path, label) in enumerate(_labelled_dirs(data_dir), 1)
    )
    return (
        f"{info.filename} (dataset {info.name!r}) was not found. Searched, in order:\n{searched}\n"
        f"Fix: put {info.filename} in one of these directories, set {ENV_VAR} to the directory "
        f"that holds it, or call tsrec.datasets.load({info.name!r}, download=True) to fetch it "
        f"from {info.url} into {cache_dir()}."
    )


def _read(info: DatasetInfo, path: Path) -> pd.DataFrame:
    """Parse one benchmark CSV into the canonical wide frame (see :func:`load`)."""
    frame = pd.read_csv(path, encoding="utf-8", index_col=0)
    if frame.index.name != "date" or tuple(frame.columns) != info.columns:
        raise ValueError(
            f"{path} does not have the columns of {info.name}: expected "
            f"{['date', *info.columns]}, found {[frame.index.name, *frame.columns]}"
        )
    try:
        index = pd.to_datetime(frame.index, format="%Y-%m-%d %H:%M:%S")
    except ValueError as exc:
        raise ValueError(f"{path}: the date column is not 'YYYY-MM-DD HH:MM:SS': {exc}") from exc
    try:
        frame = frame.astype("float64")
    except ValueError as exc:
        raise ValueError(f"{path}: a value cell is not numeric: {exc}") from exc
    frame.index = pd.DatetimeIndex(index, name="date")

    # Exact duplicates (timestamp and every value) are dropped: weather.csv repeats one row.
    positions = pd.RangeIndex(1, len(frame) + 1)  # 1-based data row numbers in the file
    duplicated = frame.reset_index().duplicated(keep="first").to_numpy()
    dropped = positions[duplicated].tolist()
    frame = frame.loc[~duplicated]
    if frame.index.has_duplicates:
        clashes = frame.index[frame.index.duplicated()].unique()[:5]
        raise ValueError(
            f"{path}: timestamps repeated with different values, e.g. {list(map(str, clashes))}"
        )
    if not frame.index.is_monotonic_increasing:
        frame = frame.sort_index(kind="stable")
    # Set the frequency where the index is regular; weather.csv has a gap and keeps None.
    with contextlib.suppress(ValueError):
        frame.index = pd.DatetimeIndex(frame.index, freq=info.freq, name="date")
    frame.columns.name = None
    frame.attrs.update(
        {"dataset": info.name, "path": str(path), "dropped_rows": dropped, "freq": info.freq}
    )
    return frame


def load(
    name: str | DatasetInfo,
    data_dir: str | os.PathLike[str] | None = None,
    *,
    download: bool = False,
    verify: bool = False,
) -> pd.DataFrame:
    """Load a benchmark dataset as a wide frame.

    Args:
        name: ``"ETTh1"``, ``"ETTh2"``, ``"ETTm1"``, ``"ETTm2"``, ``"WTH"`` or ``"weather"``
            (case-insensitive), or a ``DatasetInfo``.
        data_dir: directory searched first (then ``$TSREC_DATA_DIR``, then the user cache).
        download: if the file is in none of them, download it into the user cache (checked
            against the registry's sha256).
        verify: check the sha256 of a file found locally too.

    Returns:
        A frame with a ``DatetimeIndex`` named ``"date"`` (sorted, ``freq`` set when the steps are
        regular) and one ``float64`` column per variable, in file order. ``frame.attrs`` records
        ``dataset``, ``path``, ``freq`` and ``dropped_rows`` (1-based data rows dropped as exact
        duplicates). The loader never resamples: gaps stay gaps (weather.csv has one, so its
        index has ``freq=None``). Missing cells would come back as NaN (the six files have none).

    Raises:
        ValueError: unknown name, or a file whose columns/dates do not match the registry.
        FileNotFoundError: the file is absent and ``download`` is false; the message names the
            file, the directories searched and the fixes.
        ChecksumError: a downloaded (or, with ``verify``, local) file has another sha256.
    """
    info = get_info(name)
    path = find_file(info, data_dir)
    if path is None:
        if not download:
            raise FileNotFoundError(_missing_message(info, data_dir))
        path = _download(info)
    elif verify and (actual := sha256_of(path)) != info.sha256:
        raise ChecksumError(
            f"{path} is not the published {info.filename}: expected sha256 {info.sha256}, "
            f"got {actual}"
        )
    return _read(info, path)
