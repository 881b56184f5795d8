"""Dataset registry, lookup, download, loader quirks and split arithmetic.

Offline and fast: every CSV here is a tiny generated file in ``tmp_path`` (never real data), and
downloads use ``file://`` URLs or an HTTP server on 127.0.0.1. One test reads the real benchmark
files from ``../shared/datasets`` next to the checkout and skips when they are absent.
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import hashlib
import http.server
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tsrec import datasets as ds
from tsrec.datasets import ChecksumError, DatasetInfo
from tests.shared_data import SHARED_DATASETS

REPO = Path(__file__).resolve().parents[1]
SHARED = SHARED_DATASETS


def write_csv(
    directory: Path,
    info: DatasetInfo,
    n: int = 30,
    value: float = 0.0,
    *,
    newline: str = "\n",
    duplicate_at: int | None = None,
    gap_at: int | None = None,
) -> Path:
    """Write a tiny synthetic file in the benchmark layout; return its path."""
    dates = list(pd.date_range("2020-01-01", periods=n, freq=info.freq))
    if gap_at is not None:
        dates = dates[:gap_at] + [d + 9 * pd.Timedelta(info.freq) for d in dates[gap_at:]]
    rows = [
        ",".join(
            [d.strftime("%Y-%m-%d %H:%M:%S")]
            + [repr(value + i + j / 10) for j in range(info.n_variables)]
        )
        for i, d in enumerate(dates)
    ]
    if duplicate_at is not None:
        rows.insert(duplicate_at, rows[duplicate_at - 1])
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / info.filename
    text = newline.join([",".join(["date", *info.columns]), *rows]) + newline
    path.write_bytes(text.encode("utf-8"))
    return path


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Isolate the lookup: no TSREC_DATA_DIR, XDG cache under tmp_path."""
    monkeypatch.delenv(ds.ENV_VAR, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return {"cache": tmp_path / "xdg" / "tsrec" / "datasets", "root": tmp_path}


def with_file(info: DatasetInfo, path: Path, url: str) -> DatasetInfo:
    return dataclasses.replace(info, url=url, sha256=hashlib.sha256(path.read_bytes()).hexdigest())


# ----------------------------------------------------------------------------------- registry


def test_registry_names_and_lookup() -> None:
    assert ds.dataset_names() == ("ETTh1", "ETTh2", "ETTm1", "ETTm2", "WTH", "weather")
    assert ds.get_info("etth1") is ds.DATASETS["ETTh1"]
    assert ds.get_info("WEATHER").name == "weather"
    with pytest.raises(ValueError, match="known datasets: ETTh1, ETTh2, ETTm1, ETTm2, WTH"):
        ds.get_info("electricity")
    with pytest.raises(ValueError, match="unknown dataset"):
        ds.load("traffic")


@pytest.mark.parametrize(
    ("name", "freq", "season", "target", "rows", "n_vars"),
    [
        ("ETTh1", "h", 24, "OT", 17420, 7),
        ("ETTh2", "h", 24, "OT", 17420, 7),
        ("ETTm1", "15min", 96, "OT", 69680, 7),
        ("ETTm2", "15min", 96, "OT", 69680, 7),
        ("WTH", "h", 24, "WetBulbCelsius", 35064, 12),
        ("weather", "10min", 144, "OT", 52695, 21),
    ],
)
def test_registry_entries(
    name: str, freq: str, season: int, target: str, rows: int, n_vars: int
) -> None:
    info = ds.get_info(name)
    assert (info.freq, info.seasonality, info.target, info.n_rows) == (freq, season, target, rows)
    assert info.n_variables == n_vars and info.target in info.columns
    assert len(info.sha256) == 64 and int(info.sha256, 16) >= 0
    assert info.url.startswith("https://raw.githubusercontent.com/")
    assert pd.Timedelta(pd.tseries.frequencies.to_offset(freq)) * season == pd.Timedelta("1D")
    if name.startswith("ETT"):
        assert "zhouhaoyi/ETDataset" in info.url and "CC BY-ND 4.0" in info.licence


# ------------------------------------------------------------------------------------- lookup


def test_cache_dir_honours_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert ds.cache_dir() == tmp_path / "tsrec" / "datasets"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert ds.cache_dir() == Path.home() / ".cache" / "tsrec" / "datasets"


def test_lookup_order(env: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    info = ds.get_info("ETTh1")
    arg_dir, env_dir = env["root"] / "arg", env["root"] / "env"
    write_csv(arg_dir, info, value=1.0)
    write_csv(env_dir, info, value=2.0)
    write_csv(env["cache"], info, value=3.0)
    monkeypatch.setenv(ds.ENV_VAR, str(env_dir))
    assert ds.search_dirs(arg_dir) == (arg_dir, env_dir, env["cache"])

    def first_value(data_dir: Path | None = None) -> float:
        return float(ds.load("etth1", data_dir).iloc[0, 0])

    assert first_value(arg_dir) == 1.0  # data_dir beats the environment and the cache
    assert first_value(env["root"] / "empty") == 2.0  # a data_dir without the file falls through
    assert first_value() == 2.0  # the environment beats the cache
    monkeypatch.delenv(ds.ENV_VAR)
    assert first_value() == 3.0
    assert ds.find_file("ETTh1") == env["cache"] / "ETTh1.csv"


def test_missing_file_message(env: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    env_dir = env["root"] / "envdir"
    monkeypatch.setenv(ds.ENV_VAR, str(env_dir))
    with pytest.raises(FileNotFoundError) as err:
        ds.load("ETTm2", env["root"] / "mine")
    message = str(err.value)
    for part in (
        "ETTm2.csv",
        str(env["root"] / "mine"),
        str(env_dir),
        str(env["cache"]),
        "TSREC_DATA_DIR",
        "download=True",
    ):
        assert part in message


# -------------------------------------------------------------------------------------- loader


def test_loaded_frame_format(tmp_path: Path) -> None:
    info = ds.get_info("ETTm1")
    write_csv(tmp_path, info, n=20)
    frame = ds.load("ETTm1", tmp_path)
    assert frame.shape == (20, 7)
    assert list(frame.columns) == list(info.columns)
    assert isinstance(frame.index, pd.DatetimeIndex) and frame.index.name == "date"
    assert frame.index.freq == pd.tseries.frequencies.to_offset("15min")
    assert (frame.dtypes == np.float64).all()
    assert frame.attrs["dataset"] == "ETTm1" and frame.attrs["dropped_rows"] == []


def test_weather_quirks_do_not_crash(tmp_path: Path) -> None:
    """CRLF, U+FFFD in the header, one exact-duplicate row and a 9-step gap (synthetic)."""
    info = ds.get_info("weather")
    assert any("\ufffd" in c for c in info.columns)
    write_csv(tmp_path, info, n=40, newline="\r\n", duplicate_at=10, gap_at=25)
    frame = ds.load("weather", tmp_path)
    assert frame.shape == (40, 21)  # the duplicate is dropped, the gap is kept (no resampling)
    assert frame.attrs["dropped_rows"] == [11]
    assert frame.index.is_unique and frame.index.is_monotonic_increasing
    assert frame.index.freq is None
    steps = frame.index.to_series().diff().value_counts()
    assert steps[pd.Timedelta("10min")] == 38 and steps[pd.Timedelta("100min")] == 1
    assert list(frame.columns) == list(info.columns)


def test_wrong_columns_and_conflicting_duplicates(tmp_path: Path) -> None:
    info = ds.get_info("ETTh2")
    path = write_csv(tmp_path, info)
    path.write_text(path.read_text().replace("HUFL", "X", 1))
    with pytest.raises(ValueError, match="does not have the columns of ETTh2"):
        ds.load("ETTh2", tmp_path)
    lines = write_csv(tmp_path, info).read_text().splitlines()
    lines.insert(3, lines[2].replace(",", ",9", 1))  # same timestamp, other values
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match="timestamps repeated"):
        ds.load("ETTh2", tmp_path)


def test_verify_local_checksum(tmp_path: Path) -> None:
    write_csv(tmp_path, ds.get_info("ETTh1"))
    with pytest.raises(ChecksumError, match="expected sha256 f18de3ad"):
        ds.load("ETTh1", tmp_path, verify=True)


# ------------------------------------------------------------------------------------ download


def test_download_file_url_success(env: dict[str, Path]) -> None:
    source = write_csv(env["root"] / "remote", ds.get_info("ETTh1"), value=7.0)
    info = with_file(ds.get_info("ETTh1"), source, source.as_uri())
    with pytest.raises(FileNotFoundError):
        ds.load(info)
    frame = ds.load(info, download=True)
    assert float(frame.iloc[0, 0]) == 7.0
    target = env["cache"] / "ETTh1.csv"
    assert target.read_bytes() == source.read_bytes()
    assert sorted(p.name for p in env["cache"].iterdir()) == ["ETTh1.csv"]  # no partial file


def test_download_checksum_mismatch_removes_partial(env: dict[str, Path]) -> None:
    source = write_csv(env["root"] / "remote", ds.get_info("WTH"))
    info = dataclasses.replace(ds.get_info("ETTh1"), url=source.as_uri(), conversion="none")
    actual = hashlib.sha256(source.read_bytes()).hexdigest()
    with pytest.raises(ChecksumError) as err:
        ds.load(info, download=True)
    assert info.sha256 in str(err.value) and actual in str(err.value)
    assert list(env["cache"].iterdir()) == []


def test_download_failure_is_oserror(env: dict[str, Path]) -> None:
    missing = (env["root"] / "nowhere" / "ETTh1.csv").as_uri()
    with pytest.raises(OSError, match=r"downloading ETTh1\.csv from file:"):
        ds.download("ETTh1", url=missing)
    assert list(env["cache"].iterdir()) == []


def test_download_gz_over_http(env: dict[str, Path]) -> None:
    info = ds.get_info("weather")
    plain = write_csv(env["root"] / "plain", info, newline="\r\n")
    served = env["root"] / "srv"
    served.mkdir()
    (served / "weather.csv.gz").write_bytes(gzip.compress(plain.read_bytes()))
    handler = functools.partial(_QuietHandler, directory=str(served))
    with _Server(handler) as port:
        url = f"http://127.0.0.1:{port}/weather.csv.gz"
        path = ds.download(with_file(info, plain, url), env["root"] / "out")
    assert path == env["root"] / "out" / "weather.csv"
    assert path.read_bytes() == plain.read_bytes()
    assert ds.download(with_file(info, plain, "file:///unused"), path.parent) == path  # cached


def test_download_converts_deepfs_wth(env: dict[str, Path]) -> None:
    info = ds.get_info("WTH")
    expected = write_csv(env["root"] / "expected", info, n=30, value=-3.0)
    lines = expected.read_text().splitlines()
    deepfs = [lines[0] + ",time"]
    for i, line in enumerate(lines[1:]):
        date, rest = line.split(",", 1)
        d = pd.Timestamp(date)
        deepfs.append(f"{d.month}/{d.day}/{d.year} {d.hour}:{d.minute:02d},{rest},{i}")
    remote = env["root"] / "remote" / "WTH.csv"
    remote.parent.mkdir()
    remote.write_text("\n".join(deepfs) + "\n")
    assert ds.convert_deepfs_wth(remote.read_bytes()) == expected.read_bytes()
    frame = ds.load(with_file(info, expected, remote.as_uri()), download=True)
    assert frame.shape == (30, 12) and frame.index[1] == pd.Timestamp("2020-01-01 01:00")
    with pytest.raises(ValueError, match="not DeepFS"):
        ds.convert_deepfs_wth(expected.read_bytes())


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


class _Server:
    def __init__(self, handler: functools.partial[_QuietHandler]) -> None:
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> int:
        self.thread.start()
        return int(self.httpd.server_address[1])

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


# -------------------------------------------------------------------------------------- splits


def test_splits_etth1_96_192() -> None:
    s = ds.splits("ETTh1", context_length=96, prediction_length=192)
    assert s.n_windows == {"train": 8353, "val": 2689, "test": 2689}
    assert (s.train.start, s.train.end) == (0, 8640)
    assert (s.val.start, s.val.end, s.val.border) == (8544, 11520, 8640)
    assert (s.test.start, s.test.end, s.test.border) == (11424, 14400, 11520)
    assert s.scaler_rows == range(0, 8640)
    # origins: first forecast step of each window; the first val/test forecasts start at the border
    assert s.val.origins[0] == 8640 and s.test.origins[0] == 11520
    assert s.test.origins[-1] + 192 == 14400 and len(s.test.origins) == 2689
    assert s.train.window_starts == range(0, 8353) and s.train.origins[0] == 96
    assert [p.name for p in s] == ["train", "val", "test"] and s["val"] is s.val


def test_splits_etth1_paper_setting_48_24() -> None:
    """RSA paper ETTh1-24 (seq 48): 8640 - 72 + 1; 2880 + 48 - 72 + 1 (by hand)."""
    s = ds.splits("ETTh1", context_length=48, prediction_length=24)
    assert s.n_windows == {"train": 8569, "val": 2857, "test": 2857}
    assert s.val.rows == range(8592, 11520) and s.test.rows == range(11472, 14400)


def test_splits_wth_ratio() -> None:
    # n = 35064: int(0.7 n) = 24544, int(0.2 n) = 7012, val = 3508
    s = ds.splits("WTH", context_length=168, prediction_length=24)
    assert s.scaler_rows == range(0, 24544)
    assert s.val.rows == range(24544 - 168, 28052) and s.test.rows == range(28052 - 168, 35064)
    assert s.n_windows == {"train": 24353, "val": 3485, "test": 6989}
    assert ds.splits("WTH", "long_horizon", context_length=168, prediction_length=24).n_windows == (
        s.n_windows
    )


def test_splits_ettm_and_weather() -> None:
    s = ds.splits("ETTm2", "long_horizon", context_length=96, prediction_length=96)
    assert (s.val.border, s.test.border, s.test.end) == (34560, 46080, 57600)
    assert s.n_windows == {"train": 34369, "val": 11425, "test": 11425}
    w = ds.splits("weather", "long_horizon", context_length=96, prediction_length=96)
    # 52695 rows after dropping the duplicate: 36886 / 5270 / 10539
    assert (w.val.border, w.test.border, w.n_rows) == (36886, 42156, 52695)
    assert w.n_windows == {"train": 36695, "val": 5175, "test": 10444}
    small = ds.splits("WTH", context_length=2, prediction_length=1, n_rows=10)
    assert (small.val.border, small.test.border) == (7, 8)


def test_splits_errors() -> None:
    with pytest.raises(ValueError, match="unknown protocol"):
        ds.splits("ETTh1", "tslib", context_length=96, prediction_length=96)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="context_length must be an integer >= 1"):
        ds.splits("ETTh1", context_length=0, prediction_length=96)
    with pytest.raises(ValueError, match="needs at least 14400 rows"):
        ds.splits("ETTh1", context_length=96, prediction_length=96, n_rows=14000)
    with pytest.raises(ValueError, match="longer than the training part"):
        ds.splits("ETTh1", context_length=9000, prediction_length=24)
    with pytest.raises(ValueError, match="the val split of ETTh1"):
        ds.splits("ETTh1", context_length=96, prediction_length=2881)


def test_paper_settings() -> None:
    table = {
        ("ETTh1", 24): (48, 48),
        ("ETTh1", 48): (96, 48),
        ("ETTh1", 168): (168, 168),
        ("ETTh1", 336): (168, 168),
        ("ETTh2", 24): (48, 48),
        ("ETTh2", 48): (96, 96),
        ("ETTh2", 168): (336, 336),
        ("ETTh2", 336): (336, 168),
        ("ETTm1", 24): (672, 96),
        ("ETTm1", 48): (96, 48),
        ("ETTm1", 96): (384, 384),
        ("ETTm1", 288): (672, 288),
        ("WTH", 24): (168, 168),
        ("WTH", 48): (96, 96),
        ("WTH", 168): (336, 168),
        ("WTH", 336): (720, 168),
    }  # zhouhaoyi/Informer2020 scripts/*.sh, "### M" blocks
    for (name, horizon), (seq, label) in table.items():
        assert ds.paper_setting(name.lower(), horizon) == (seq, label, horizon)
        ds.splits(name, context_length=seq, prediction_length=horizon)  # every setting fits
    assert ds.paper_setting("weather", 720, protocol="long_horizon") == (96, 48, 720)
    with pytest.raises(ValueError, match="no setting for ETTm2"):
        ds.paper_setting("ETTm2", 24)
    with pytest.raises(ValueError, match=r"horizons: \[24, 48, 168, 336\]"):
        ds.paper_setting("ETTh1", 96)
    with pytest.raises(ValueError, match="long_horizon protocol uses horizons"):
        ds.paper_setting("ETTh1", 24, protocol="long_horizon")


def test_dataset_cards_exist() -> None:
    cards = REPO / "datasets"
    assert (cards / "README.md").is_file()
    for info in ds.DATASETS.values():
        text = (cards / f"{info.name}.md").read_text(encoding="utf-8")
        assert info.sha256 in text and info.url in text


# ----------------------------------------------------------------------------------- real files


@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.shared_datasets(ds.get_info(name).filename))
                                  for name in ds.dataset_names()])
def test_real_files(name: str) -> None:
    info = ds.get_info(name)
    frame = ds.load(name, SHARED, verify=True)
    assert frame.shape == (info.n_rows, info.n_variables)
    assert list(frame.columns) == list(info.columns)
    assert (frame.dtypes == np.float64).all() and np.isfinite(frame.to_numpy()).all()
    assert frame.index.is_monotonic_increasing and frame.index.is_unique
    if name == "weather":
        assert frame.index.freq is None and frame.attrs["dropped_rows"] == [19045]
        assert frame.index[0] == pd.Timestamp("2020-01-01 00:10")
        assert (frame.index.to_series().diff() == pd.Timedelta("10min")).sum() == info.n_rows - 2
    else:
        assert frame.index.freq == pd.tseries.frequencies.to_offset(info.freq)
    s = ds.splits(name, "long_horizon", context_length=96, prediction_length=96, n_rows=len(frame))
    assert s.test.end <= len(frame)
    if name == "WTH":  # DeepFS's layout rebuilt from the real file converts back byte for byte
        raw = (SHARED / "WTH.csv").read_bytes().decode().splitlines()
        deepfs = [raw[0] + ",time"] + [
            f"{d.month}/{d.day}/{d.year} {d.hour}:{d.minute:02d},{line.split(',', 1)[1]},{i}"
            for i, (d, line) in enumerate(zip(frame.index, raw[1:], strict=True))
        ]
        converted = ds.convert_deepfs_wth(("\n".join(deepfs) + "\n").encode())
        assert hashlib.sha256(converted).hexdigest() == info.sha256
