"""The project's bad-input matrix (issue 49, "nothing silent", round four): one case per bad input,
each run as a user would meet it, asserting the clear error, the warning or the correct behaviour
and, where the message offers a fix, that the fix works. docs/bad_input.md gives the case count
(checked below) and what stays out of reach.

Each case failed on the code before it (commit 1ace7ab): missing tails at least as long as the
context forecast silently (``missing_context="raise"`` did not raise); sensor placeholders at a
series' end read as a level shift (training diverged with advice about the learning rate, ets
forecast -9999); a stray weekend row opened Saturdays; early closes and a daylight-saving change
inside an overnight session went unsaid or crashed in pandas; ``[0.9, 90]`` and ``[True]`` gave
slivers of bands; a calibrated statistical model asked for quantiles was told to refit with
``output='quantile'``; Parquet zones were dropped, a file of dates was called duplicate
timestamps, an empty part file a type mismatch, a damaged one was read; an edited calibration
with new checksums loaded and failed with an IndexError at ``predict``.
"""

from __future__ import annotations

import functools
import re
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.saved_models import edit_weights, read_meta, write_checksummed
from tsrec import Forecaster
from tsrec.data import canonicalize
from tsrec.data.scaling import StandardScaler
from tsrec.training import TrainingDiverged

QUIET = {"enable_progress_bar": False, "logger": False}
COLUMNS = dict(id_col="id", time_col="ds", target_col="y")
DOCS = Path(__file__).resolve().parents[1] / "docs" / "bad_input.md"
CASES: dict[str, Callable[[Path], None]] = {}


def case(kind: str) -> Callable[[Callable[[Path], None]], Callable[[Path], None]]:
    """Register a case of the class ``kind`` (its id: ``kind/function name``)."""
    def register(check: Callable[[Path], None]) -> Callable[[Path], None]:
        CASES[f"{kind}/{check.__name__}"] = check
        return check
    return register


def caught(call: Callable[[], object]) -> tuple[object, list[str]]:
    """``call()``'s result and the texts of the warnings it gave (RuntimeWarnings are errors)."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        warnings.simplefilter("error", RuntimeWarning)
        result = call()
    return result, [str(w.message) for w in seen]


def said(messages: list[str], *fragments: str) -> None:
    assert any(all(f in m for f in fragments) for m in messages), (fragments, messages)


def refused(call: Callable[[], object], *fragments: str, error: type[Exception] = ValueError) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(error) as info:
            call()
    for fragment in fragments:
        assert fragment in str(info.value), (fragment, str(info.value))
    return str(info.value)


def hourly(gap: int = 0, *, n: int = 300, tail: list[float] | None = None, shift: tuple[int, float] | None = None,
           ids: str = "abc") -> pd.DataFrame:
    """Hourly series ``ids`` (a daily cycle of amplitude 3 around 10, noise 0.3); series "b" with
    its last ``gap`` values missing, its last values replaced by ``tail``, or its last ``shift[0]``
    values moved by ``shift[1]``."""
    rng = np.random.default_rng(0)
    parts = []
    for i, key in enumerate(ids):
        t = np.arange(n)
        y = 10 + 3 * np.sin(2 * np.pi * t / 24 + i) + 0.3 * rng.standard_normal(n)
        if key == "b":
            if gap:
                y[-gap:] = np.nan
            if tail is not None:
                y[-len(tail):] = tail
            if shift is not None:
                y[-shift[0]:] += shift[1]
        parts.append(pd.DataFrame({"id": key, "ds": pd.date_range("2024-01-01", periods=n, freq="h"), "y": y}))
    return pd.concat(parts, ignore_index=True)


def of(forecast: pd.DataFrame, key: str) -> np.ndarray:
    return forecast.loc[forecast["item_id"] == key, "mean"].to_numpy()


def dlinear(**options) -> Forecaster:
    return Forecaster("dlinear", prediction_length=12, context_length=24, max_epochs=1, trainer_kwargs=QUIET,
                      **options)


def small_network(**options) -> Forecaster:
    return Forecaster("rsa_patchtst", prediction_length=12, context_length=48, d_model=16, n_heads=4, d_ff=32,
                      e_layers=1, patch_len=8, stride=4, max_epochs=3, batch_size=64, trainer_kwargs=QUIET, **options)


# ------------------------------------------------------------------ missing tails at least as long as the context
@case("missing tails")
def a_network_gives_nan_and_names_the_last_observation(tmp_path):
    forecaster = dlinear().fit(hourly(), **COLUMNS)
    forecast, messages = caught(lambda: forecaster.predict(hourly(gap=24)))  # before: forecast from 25 steps back
    assert np.isnan(of(forecast, "b")).all() and np.isfinite(of(forecast, "a")).all()
    said(messages, "1 series have no observed value in their last 24 steps", "item 'b'",
         "last observed at 2024-01-12 11:00:00, 24 steps before its end",
         "refit with a context_length of at least 25")
    longer = Forecaster("dlinear", prediction_length=12, context_length=25, max_epochs=1,
                        trainer_kwargs=QUIET).fit(hourly(), **COLUMNS)
    forecast, messages = caught(lambda: longer.predict(hourly(gap=24)))  # the fix named
    assert np.isfinite(forecast["mean"]).all()
    said(messages, "item 'b' (column 'y') (24 steps after", "forecast the missing steps")


@case("missing tails")
def missing_context_raise_raises_for_a_network(tmp_path):
    forecaster = dlinear(missing_context="raise").fit(hourly(), **COLUMNS)
    refused(lambda: forecaster.predict(hourly(gap=30)), "item 'b'", "(missing_context='raise')",
            "context_length of at least 31")


@case("missing tails")
def a_wide_column_out_longer_than_the_context_beside_a_short_tail(tmp_path):
    index = pd.date_range("2024-01-01", periods=300, freq="h", name="ts")
    t = np.arange(300)
    df = pd.DataFrame({"load": 10 + np.sin(t / 4), "temp": 5 + np.cos(t / 5)}, index=index)
    forecaster = dlinear().fit(df)
    outage = df.copy()
    outage.iloc[-30:, 1] = np.nan  # out longer than the 24-step context
    outage.iloc[-10:, 0] = np.nan  # a short tail: the steps before it were read too, the temp sensor's 31st last
    forecast, messages = caught(lambda: forecaster.predict(outage))
    assert np.isnan(of(forecast, "temp")).all() and np.isfinite(of(forecast, "load")).all()
    said(messages, "column 'temp'", "refit with a context_length of at least 31")


# ------------------------------------------------------------------ sensor placeholders and level shifts
@case("placeholders")
def minus_9999_at_the_end_trains_and_is_named(tmp_path):
    df = hourly(tail=[-9999.0] * 3)
    forecaster, fit_messages = caught(lambda: small_network().fit(df, **COLUMNS))  # before: TrainingDiverged
    forecast, messages = caught(forecaster.predict)
    assert np.abs(of(forecast, "b") - 10).max() < 8  # the series' level, not -9999
    said(fit_messages, "item 'b' (column 'y') at 2024-01-13 09:00:00 (-9999)", "treated as missing")
    said(messages, "placeholder", "item 'b' (column 'y'): 3 values from 2024-01-13 09:00:00 (-9999)",
         "read as missing", "set them to NaN")


@case("placeholders")
def typos_of_1e9_do_not_move_a_statistical_forecast(tmp_path):
    forecaster, _ = caught(lambda: Forecaster("ets", prediction_length=12).fit(hourly(tail=[1e9] * 4), **COLUMNS))
    forecast, messages = caught(forecaster.predict)
    assert np.abs(of(forecast, "b") - 10).max() < 8  # before: about 1e7
    said(messages, "placeholder", "4 values from 2024-01-13 08:00:00 (1e+09)")


@case("placeholders")
def the_default_validates_its_candidates_before_a_placeholder_tail(tmp_path):
    forecaster, _ = caught(lambda: Forecaster(prediction_length=12).fit(hourly(tail=[-9999] * 4), **COLUMNS))
    board = forecaster.leaderboard
    assert board["val_score"].min() < 2  # before: every candidate scored about 170 on the -9999s
    forecast, messages = caught(forecaster.predict)
    assert np.abs(of(forecast, "b") - 10).max() < 8
    said(messages, "placeholder", "4 values from 2024-01-13 08:00:00 (-9999)")


@case("placeholders")
def a_shift_kept_with_far_values_keep_and_not_followed_is_named(tmp_path):
    df = hourly(shift=(12, 200.0))
    forecaster, _ = caught(lambda: dlinear().fit(df, **COLUMNS))
    forecast, messages = caught(forecaster.predict)
    assert np.abs(of(forecast, "b") - 210).max() < 20  # by default a real shift is followed, and no placeholder
    assert not any("placeholder" in m or "does not follow" in m for m in messages), messages
    forecaster, _ = caught(lambda: dlinear(far_values="keep").fit(df, **COLUMNS))
    forecast, messages = caught(forecaster.predict)
    assert abs(np.median(of(forecast, "b")) - 210) > 50  # the network read the window as one level
    said(messages, "1 series end in a level shift that their forecast does not follow", "item 'b'",
         "refit with far_values='missing': the network's instance normalisation")


@case("placeholders")
def training_that_diverges_on_a_huge_real_shift_names_it(tmp_path):
    df = hourly(shift=(30, 5000.0))
    message = refused(lambda: small_network().fit(df, **COLUMNS), "item 'b' (column 'y') from 2024-01-12 06:00:00",
                      "no learning rate or gradient clipping", "far_values='keep'", error=TrainingDiverged)
    assert "Lower learning_rate" not in message
    forecaster, _ = caught(lambda: small_network(far_values="keep").fit(df, **COLUMNS))  # the fix named works
    assert np.isfinite(forecaster.predict()["mean"]).all()


@case("placeholders")
def a_value_held_by_a_series_that_holds_its_values_is_a_shift(tmp_path):
    price = np.repeat([9.99, 10.49, 9.99, 10.99], 50)[:, None]
    for tail, placeholder in (([99.0] * 5, False), ([-9999.0] * 5, True)):
        x = np.concatenate([price, np.asarray(tail)[:, None]])
        scaler = StandardScaler.fit([price], [np.ones_like(price, bool)], robust=True)
        zeros = np.zeros(len(x), dtype=np.int64)
        found = scaler.placeholders(x, np.ones_like(x, bool), zeros, zeros)
        assert found[-5:].all() == placeholder and not found[:-5].any()


# ------------------------------------------------------------------ sessions
def weekday_hours(weeks: int = 5, *, saturday_until: int | None = None) -> pd.DataFrame:
    """Hourly rows 09:00-16:00 on weekdays (and 09:00 to ``saturday_until`` on Saturdays)."""
    stamps = pd.date_range("2024-01-01", periods=weeks * 7 * 24, freq="h")
    open_ = (stamps.hour >= 9) & (stamps.hour < 17) & (stamps.dayofweek < 5)
    if saturday_until is not None:
        open_ |= (stamps.dayofweek == 5) & (stamps.hour >= 9) & (stamps.hour < saturday_until)
    stamps = stamps[open_]
    return pd.DataFrame({"sales": 10 + np.sin(stamps.hour / 3) + 0.1 * np.arange(len(stamps)) % 1},
                        index=stamps.rename("ts"))


@case("sessions")
def a_stray_weekend_row_is_named_not_a_six_day_session(tmp_path):
    df = weekday_hours()
    stray = pd.concat([df, pd.DataFrame({"sales": [10.0]}, index=pd.DatetimeIndex(["2024-01-13 10:00"], name="ts"))])
    refused(lambda: canonicalize(stray.sort_index()), "2024-01-13 10:00:00", "'h 09:00-17:00 Mon-Fri'",
            "read from the rows", "freq='h 09:00-17:00 Mon-Sat'")
    assert canonicalize(stray.sort_index(), freq="h 09:00-17:00 Mon-Sat").freq == "h 09:00-17:00 Mon-Sat"  # the fix


@case("sessions")
def saturdays_that_close_at_one_are_named(tmp_path):
    df = weekday_hours(saturday_until=13)
    forecaster, messages = caught(lambda: Forecaster("seasonal_naive", prediction_length=8).fit(df))
    assert forecaster.freq == "h 09:00-17:00 Mon-Sat"
    said(messages, "Saturday sessions up to 13:00 only (4 of 4 Saturdays", "drop those forecast rows",
         "dt.dayofweek == 5")


@case("sessions")
def data_ending_at_an_early_close_seen_before_are_named(tmp_path):
    df = weekday_hours()
    closes = df.index.normalize().isin(pd.to_datetime(["2024-01-12", "2024-02-02"])) & (df.index.hour >= 13)
    half = df[~closes]
    forecaster, messages = caught(lambda: Forecaster("seasonal_naive", prediction_length=8).fit(half))
    said(messages, "1 series end early in their last session day", "2024-01-12 12:00:00",
         "add rows for its closed steps with missing values (NaN)")
    assert forecaster.predict()["timestamp"].iloc[0] == pd.Timestamp("2024-02-02 13:00")
    closed = pd.DataFrame({"sales": np.nan}, index=pd.date_range("2024-02-02 13:00", periods=4, freq="h", name="ts"))
    fixed, _ = caught(lambda: Forecaster("seasonal_naive", prediction_length=8).fit(pd.concat([half, closed])))
    assert fixed.predict()["timestamp"].iloc[0] == pd.Timestamp("2024-02-05 09:00")  # the fix: the next session


def overnight(first: str, last: str, tz: str = "America/New_York") -> pd.DataFrame:
    """Hourly rows 20:00-06:00 (wall clock in ``tz``) every night."""
    stamps = pd.date_range(first, last, freq="h", tz=tz)
    wall = stamps.tz_localize(None)
    stamps = stamps[(wall.hour >= 20) | (wall.hour < 6)]
    return pd.DataFrame({"sales": 10 + np.sin(np.arange(len(stamps)) / 3)}, index=stamps.rename("ts"))


@case("sessions")
def an_overnight_session_across_spring_forward(tmp_path):
    df = overnight("2024-02-20", "2024-03-20")
    refused(lambda: Forecaster("seasonal_naive", prediction_length=8).fit(df),
            "'h 20:00-06:00'", "2024-03-10 02:00:00 in America/New_York", "does not exist", "tz_convert('UTC')",
            "freq='h 00:00-11:00'")
    utc = df.tz_convert("UTC")
    forecaster = Forecaster("seasonal_naive", prediction_length=11).fit(utc)  # the fix
    assert forecaster.freq == "h 00:00-11:00" and np.isfinite(forecaster.predict()["mean"]).all()


@case("sessions")
def an_overnight_session_across_fall_back(tmp_path):
    df = overnight("2024-10-20", "2024-11-20")
    refused(lambda: Forecaster("seasonal_naive", prediction_length=8, freq="h 20:00-06:00").fit(df),
            "2024-11-03 01:00:00 in America/New_York", "happens twice")
    forecaster = Forecaster("seasonal_naive", prediction_length=8, freq="h 00:00-11:00").fit(df.tz_convert("UTC"))
    assert np.isfinite(forecaster.predict()["mean"]).all()


@case("sessions")
def a_forecast_into_a_clock_change_is_refused_at_predict(tmp_path):
    df = overnight("2024-02-01", "2024-03-09 12:00")
    forecaster = Forecaster("seasonal_naive", prediction_length=20).fit(df)
    refused(forecaster.predict, "2024-03-10 02:00:00", "does not exist", "tz_convert('UTC')")


@case("sessions")
def a_malformed_session_gets_the_session_spelling(tmp_path):
    for freq in ("h 9-17 Mon-Fri", "1h 09:00to17:00"):
        refused(lambda: Forecaster("seasonal_naive", prediction_length=8, freq=freq).fit(weekday_hours()),
                f"invalid session freq {freq!r}", "'<step> <HH:MM>-<HH:MM> [<days>]'", "freq='h 09:00-17:00 Mon-Fri'")


# ------------------------------------------------------------------ interval levels
@functools.cache
def calibrated() -> Forecaster:
    """ets calibrated on 10 windows (fitted once for the cases that only read it)."""
    return Forecaster("ets", prediction_length=6, conformal_windows=10).fit(hourly(n=200), **COLUMNS)


@case("interval levels")
def a_fraction_among_percentages(tmp_path):
    refused(lambda: calibrated().predict(levels=[0.9, 90]), "0.9 would give 0.9% interval(s)", "levels=[90]")


@case("interval levels")
def a_bool_among_levels(tmp_path):
    refused(lambda: calibrated().predict(levels=[True]), "holds a bool", "1% interval")


@case("interval levels")
def samples_of_a_calibrated_statistical_model(tmp_path):
    forecaster = calibrated()
    message = refused(lambda: forecaster.predict(num_samples=10), "no samples", "conformal bands", "levels=[80, 90]",
                      "quantiles=[0.1, 0.5, 0.9]")
    assert "output=" not in message  # a statistical model has no output to refit with
    assert list(forecaster.predict(quantiles=[0.1, 0.5, 0.9]).columns[-3:]) == ["0.1", "0.5", "0.9"]  # it works


@case("interval levels")
def quantiles_in_a_backtest_of_a_calibrated_statistical_model(tmp_path):
    from tsrec.evaluation import backtest

    df = hourly(n=200)
    message = refused(lambda: backtest(calibrated(), df, n_windows=3, quantiles=[0.1, 0.9], baselines=(), **COLUMNS),
                      "ends of its conformal bands", "pass levels=[80] for 0.1 and 0.9")
    assert "refit with output=" not in message  # a statistical model has no output to refit with
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scored = backtest(calibrated(), df, n_windows=3, levels=[80], baselines=(), **COLUMNS).summary.metric
    assert {"coverage_0.1", "coverage_0.9", "crps", "interval_coverage_80"} <= set(scored)  # what it says works


@case("interval levels")
def quantiles_beyond_a_calibration(tmp_path):
    refused(lambda: calibrated().predict(quantiles=[0.01, 0.5]), "quantiles 0.01 and 0.99 are the ends of the 98% "
            "conformal interval", "enough for levels up to 96.8%")


@case("interval levels")
def quantiles_of_an_uncalibrated_statistical_model(tmp_path):
    forecaster = Forecaster("ets", prediction_length=6).fit(hourly(n=200), **COLUMNS)
    message = refused(lambda: forecaster.predict(quantiles=[0.1, 0.9]), "conformal_windows=<k>")
    assert "output=" not in message


# ------------------------------------------------------------------ Parquet files
def parquet_part(path: Path, ids: str = "a", *, start: str = "2024-01-01", tz: str | None = None, dates: bool = False,
                 freq: str = "h", n: int = 48, **write) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    frame = pd.concat([pd.DataFrame({"id": key, "ds": pd.date_range(start, periods=n, freq=freq, tz=tz),
                                     "y": np.sin(np.arange(n) / 3.0)}) for key in ids], ignore_index=True)
    if dates:
        frame["ds"] = frame["ds"].dt.date
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, **write)


def read(folder: Path) -> Forecaster:
    return Forecaster("naive", prediction_length=4).fit(folder, **COLUMNS)


@case("parquet")
def zoned_then_naive_timestamps(tmp_path):
    parquet_part(tmp_path / "1.parquet", "a", tz="Europe/Berlin")
    parquet_part(tmp_path / "2.parquet", "b")
    refused(lambda: read(tmp_path), "2.parquet': column 'ds' (time_col) holds naive timestamps",
            "1.parquet' holds timestamps in Europe/Berlin", "tz_localize('Europe/Berlin')")


@case("parquet")
def naive_then_zoned_timestamps(tmp_path):
    parquet_part(tmp_path / "1.parquet", "a")
    parquet_part(tmp_path / "2.parquet", "b", tz="Europe/Berlin")
    refused(lambda: read(tmp_path), "2.parquet': column 'ds' (time_col) holds timestamps in Europe/Berlin",
            "naive timestamps")


@case("parquet")
def timestamps_in_two_zones(tmp_path):
    parquet_part(tmp_path / "1.parquet", "a", tz="UTC")
    parquet_part(tmp_path / "2.parquet", "b", tz="Europe/Berlin")
    refused(lambda: read(tmp_path), "timestamps in Europe/Berlin", "timestamps in UTC", "tz_convert('UTC')")


@case("parquet")
def a_file_of_dates_among_hourly_timestamps(tmp_path):
    parquet_part(tmp_path / "1.parquet", "a")
    parquet_part(tmp_path / "2.parquet", "b", dates=True)
    refused(lambda: read(tmp_path), "2.parquet' holds dates in 'ds' (date32[day], without a time of day)",
            "where the other files hold timestamps", "not .dt.date")


@case("parquet")
def dates_first_keep_the_others_times_of_day(tmp_path):
    parquet_part(tmp_path / "1.parquet", "a", freq="D", dates=True)
    parquet_part(tmp_path / "2.parquet", "b", freq="D", start="2024-01-01 09:00")
    forecast = read(tmp_path).predict()
    stamps = pd.DatetimeIndex(forecast.loc[forecast["item_id"] == "b", "timestamp"])
    assert (stamps.hour == 9).all()  # before: cut to the first file's dates


@case("parquet")
def an_empty_part_file_among_others(tmp_path):
    parquet_part(tmp_path / "1.parquet", "a")
    pd.DataFrame({"id": [], "ds": [], "y": []}).to_parquet(tmp_path / "0.parquet")  # no rows: columns of floats
    pd.DataFrame({"id": pd.Series([], dtype=object), "ds": pd.Series([], dtype=object),
                  "y": pd.Series([], dtype=float)}).to_parquet(tmp_path / "2.parquet")  # no rows: null columns
    assert len(read(tmp_path).predict()) == 4


@case("parquet")
def a_file_that_is_not_parquet(tmp_path):
    parquet_part(tmp_path / "1.parquet", "a")
    (tmp_path / "0.parquet").write_bytes(b"")
    refused(lambda: read(tmp_path), "0.parquet' cannot be read as Parquet", "leave it out of the data")


@case("parquet")
def zeroed_bytes_in_a_file_with_page_checksums(tmp_path):
    parquet_part(tmp_path / "1.parquet", "ab", n=200, write_page_checksum=True)
    data = bytearray((tmp_path / "1.parquet").read_bytes())
    data[len(data) // 2:len(data) // 2 + 64] = bytes(64)
    (tmp_path / "1.parquet").write_bytes(bytes(data))
    refused(lambda: read(tmp_path), "1.parquet' is damaged", "CRC checksum verification failed")


# ------------------------------------------------------------------ an edited calibration with new checksums
def tampered(path: Path, forecaster: Forecaster, edit: Callable[[dict], object] | None = None,
             entry: tuple[str, object] | None = None) -> Path:
    forecaster.save(path)
    if edit is not None:
        edit_weights(path, edit, rehash=True)
    if entry is not None:
        meta = read_meta(path)
        meta["conformal"][entry[0]] = entry[1]
        write_checksummed(path, meta)
    return path


@case("calibration")
def its_scales_for_fewer_series(tmp_path):
    path = tampered(tmp_path / "m", calibrated(), lambda t: t.__setitem__("conformal_scale", t["conformal_scale"][:1]))
    refused(lambda: Forecaster.load(path), str(path), "weights.pt's conformal_scale", "[1, 1]", "[3, 1]")


@case("calibration")
def its_scores_for_fewer_horizon_steps(tmp_path):
    path = tampered(tmp_path / "m", calibrated(), lambda t: (t.__setitem__("conformal_order", t["conformal_order"][:3]),
                                                          t.__setitem__("conformal_counts", t["conformal_counts"][:3])))
    refused(lambda: Forecaster.load(path), "weights.pt's conformal_order", "its steps is 3",
            "prediction_length is 6")


@case("calibration")
def its_scores_out_of_order(tmp_path):
    path = tampered(tmp_path / "m", calibrated(),
                    lambda t: t.__setitem__("conformal_order", t["conformal_order"].flip(1)))
    refused(lambda: Forecaster.load(path), "conformal_order is not each step's ascending nonnegative scores")


@case("calibration")
def its_windows_zero(tmp_path):
    path = tampered(tmp_path / "m", calibrated(), entry=("windows", 0))
    refused(lambda: Forecaster.load(path), "forecaster.json's 'conformal' entry", "windows is 0")


# ------------------------------------------------------------------ the matrix
@pytest.mark.parametrize("name", list(CASES))
def test_bad_input(name: str, tmp_path: Path) -> None:
    CASES[name](tmp_path)


def test_docs_give_the_matrix_case_count() -> None:
    counted = re.search(r"tests/test_bad_input\.py\)?[^.]*?(\d+) cases", DOCS.read_text())
    assert counted is not None and int(counted[1]) == len(CASES), (counted and counted[1], len(CASES))
    kinds = {name.split("/")[0] for name in CASES}
    for kind in kinds:
        assert f"{kind}: {sum(name.startswith(kind + '/') for name in CASES)}" in DOCS.read_text(), kind

