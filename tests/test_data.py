"""Tests for tsrec.data: canonicalisation, splits, scaling, time features, windows."""

from __future__ import annotations

import json
import re
import warnings

import numpy as np
import pandas as pd
import pytest
import torch
from gluonts.time_feature import time_features_from_frequency_str
from torch.utils.data import ConcatDataset, DataLoader, default_collate

from tsrec.config import TrainingConfig
from tsrec.data import (
    Calendar,
    Panel,
    StandardScaler,
    WindowDataset,
    canonicalize,
    forecast_frame,
    future_index,
    split_panel,
    time_feature_dim,
    time_features,
)
from tsrec.training import make_loader

LONG = {"time_col": "ts", "id_col": "id"}


def wide_frame(length: int = 100, freq: str = "h", columns: tuple[str, ...] = ("a", "b")):
    index = pd.date_range("2021-03-01", periods=length, freq=freq)
    rng = np.random.default_rng(0)
    return pd.DataFrame({c: rng.normal(size=length) for c in columns}, index=index)


def long_frame(lengths: dict[str, int] | None = None, freq: str = "h") -> pd.DataFrame:
    lengths = lengths or {"x": 30, "y": 40}
    parts = [
        pd.DataFrame(
            {
                "id": item_id,
                "ts": pd.date_range("2021-03-01", periods=n, freq=freq),
                "y": np.arange(n, dtype=float) + 100 * k,
            }
        )
        for k, (item_id, n) in enumerate(lengths.items())
    ]
    return pd.concat(parts, ignore_index=True)


def arrays(panel: Panel):
    return [s.values for s in panel.items], [s.observed for s in panel.items]


# --- canonicalize -----------------------------------------------------------------------------


def test_wide_frame_is_one_multivariate_item():
    panel = canonicalize(wide_frame())
    assert (panel.layout, panel.freq, panel.columns) == ("wide", "h", ("a", "b"))
    assert panel.item_ids == ("0",)
    series = panel.items[0]
    assert series.values.shape == series.observed.shape == (100, 2)
    assert series.values.dtype == np.float64 and series.observed.all()


def test_wide_frame_with_time_column_and_selected_targets():
    df = wide_frame(columns=("a", "b", "c")).rename_axis("when").reset_index()
    panel = canonicalize(df, time_col="when", target_col=["c", "a"])
    assert panel.columns == ("c", "a")
    np.testing.assert_array_equal(panel.items[0].values[:, 0], df["c"].to_numpy())


def test_long_frame_one_item_per_id_and_target_inferred():
    panel = canonicalize(long_frame(), **LONG)
    assert (panel.layout, panel.columns, panel.item_ids) == ("long", ("y",), ("x", "y"))
    assert [len(s) for s in panel.items] == [30, 40]
    assert panel.items[1].values.shape == (40, 1)
    assert panel.items[1].values[0, 0] == 100


def test_unsorted_input_is_sorted():
    df = long_frame()
    shuffled = canonicalize(df.sample(frac=1, random_state=1), **LONG)
    ordered = canonicalize(df, **LONG)
    assert shuffled.item_ids == ordered.item_ids
    for a, b in zip(shuffled.items, ordered.items):
        assert a.index.equals(b.index) and a.index.is_monotonic_increasing
        np.testing.assert_array_equal(a.values, b.values)
    wide = wide_frame()
    np.testing.assert_array_equal(
        canonicalize(wide.iloc[::-1]).items[0].values, wide.to_numpy()
    )


def test_nan_inf_and_missing_timestamps_become_unobserved():
    df = wide_frame(length=10)
    df.iloc[2, 0] = np.nan
    df.iloc[3, 1] = np.inf
    df.iloc[4, 0] = -np.inf
    df = df.drop(df.index[6])  # a gap on the hourly grid
    series = canonicalize(df, freq="h").items[0]
    assert len(series) == 10
    expected = np.ones((10, 2), dtype=bool)
    expected[2, 0] = expected[3, 1] = expected[4, 0] = False
    expected[6, :] = False
    np.testing.assert_array_equal(series.observed, expected)
    assert np.isnan(series.values[~expected]).all()
    assert np.isfinite(series.values[expected]).all()


@pytest.mark.parametrize(
    ("freq", "expected"), [("h", "h"), ("15min", "15min"), ("D", "D"), ("MS", "MS"), ("W", "W-SUN")]
)
def test_freq_is_inferred(freq, expected):
    assert canonicalize(wide_frame(length=20, freq=freq)).freq == expected


def test_freq_inferred_despite_gaps_from_most_common_step():
    df = wide_frame(length=12).drop(pd.date_range("2021-03-01 03:00", periods=3, freq="2h"))
    panel = canonicalize(df)
    assert panel.freq == "h" and len(panel.items[0]) == 12
    assert panel.items[0].observed.sum() == 2 * 9


def test_given_freq_is_normalised():
    assert canonicalize(wide_frame(length=20, freq="W-SUN"), freq="W").freq == "W-SUN"


def off_grid_frame() -> pd.DataFrame:
    df = wide_frame(length=10)
    return df.rename(index={df.index[4]: df.index[4] + pd.Timedelta("30min")})


BAD_INPUTS = [
    # (frame builder, kwargs, error type, message fragments)
    (lambda: wide_frame().iloc[:0], {}, ValueError, ["empty"]),
    (lambda: [1, 2], {}, TypeError, ["DataFrame"]),
    (long_frame, {"time_col": "time", "id_col": "id"}, ValueError, ["time_col='time'", "'ts'"]),
    (long_frame, {"time_col": "ts", "id_col": "item"}, ValueError, ["id_col='item'", "'id'"]),
    (long_frame, LONG | {"target_col": "z"}, ValueError, ["target_col='z'", "'y'"]),
    (lambda: wide_frame().reset_index(drop=True), {}, ValueError, ["DatetimeIndex", "time_col="]),
    (lambda: wide_frame().assign(b="x"), {}, TypeError, ["'b'", "pd.to_numeric"]),
    (lambda: long_frame().assign(y="1"), LONG, TypeError, ["'y'", "object"]),
    (lambda: long_frame().assign(ts=1), LONG, TypeError, ["'ts'", "pd.date_range", "for step numbers"]),
    (
        lambda: wide_frame().iloc[[0, 1, 1, 2]],
        {},
        ValueError,
        ["duplicate timestamps", "2021-03-01 01:00:00", "groupby"],
    ),
    (
        lambda: pd.concat([long_frame(), long_frame({"y": 40}).iloc[[5]]]),
        {"time_col": "ts", "id_col": "id"},
        ValueError,
        ["duplicate timestamps in item 'y'", "2021-03-01 05:00:00", "groupby"],
    ),
    (
        off_grid_frame,
        {"freq": "h"},
        ValueError,
        ["2021-03-01 04:30:00", "does not match freq 'h'", "resample('h').mean()"],
    ),
    (lambda: wide_frame(length=5, freq="D"), {"freq": "MS"}, ValueError, ["2021-03-02", "freq 'MS'"]),
    (lambda: wide_frame(length=1), {}, ValueError, ["freq="]),
    (lambda: wide_frame(), {"freq": "hourly"}, ValueError, ["invalid freq 'hourly'"]),
    (lambda: wide_frame(), {"freq": "-1h"}, ValueError, ["invalid freq"]),
    (
        lambda: pd.concat([long_frame({"x": 10}), long_frame({"y": 10}, freq="D")]),
        {"time_col": "ts", "id_col": "id"},
        ValueError,
        ["different frequencies", "'h'", "'D'"],
    ),
]


@pytest.mark.parametrize(("build", "kwargs", "error", "fragments"), BAD_INPUTS)
def test_bad_input_gives_clear_error(build, kwargs, error, fragments):
    with pytest.raises(error) as info:
        canonicalize(build(), **kwargs)
    for fragment in fragments:
        assert fragment in str(info.value)


def clock_times(zone: str, start: str, end: str, freq: str = "h") -> pd.DataFrame:
    """A long frame of one series stamped with ``zone``'s local clock times, its zone dropped (as
    meters and spreadsheets export them): the hour set back in autumn appears twice."""
    stamps = pd.date_range(start, end, freq=freq, tz=zone)
    values = np.arange(len(stamps), dtype=float)
    return pd.DataFrame({"ds": stamps.tz_localize(None), "y": values, "unique_id": "load"})


@pytest.mark.parametrize("zone, start, freq", [("Europe/Berlin", "2023-01-01", "h"),
                                               ("America/New_York", "2023-06-01", "30min"),
                                               ("Australia/Sydney", "2022-01-01", "15min")])
def test_clock_times_repeated_where_daylight_saving_ends_are_told_to_take_their_zone(zone, start, freq):
    df = clock_times(zone, start, "2024-12-31", freq)
    with pytest.raises(ValueError, match="duplicate timestamps in item 'load'") as info:
        canonicalize(df, time_col="ds", id_col="unique_id")
    message = str(info.value)
    assert "daylight saving time ends" in message
    assert "df['ds'] = df['ds'].dt.tz_localize(zone, ambiguous='infer')" in message
    assert "df.groupby(['unique_id', 'ds']).mean()" in message
    df["ds"] = df["ds"].dt.tz_localize(zone, ambiguous="infer")  # the fix as the message writes it
    panel = canonicalize(df, time_col="ds", id_col="unique_id")
    assert panel.items[0].values.shape[0] == len(pd.date_range(df["ds"].iloc[0], df["ds"].iloc[-1], freq=freq))


@pytest.mark.parametrize("repeat", ["2023-10-29 02:00",  # a Sunday's night, but twice in one year
                                    "2023-10-31 02:00",  # a Tuesday
                                    "2023-10-29 11:00"])  # a Sunday's late morning
def test_other_repeated_timestamps_are_not_taken_for_a_clock_change(repeat):
    stamps = pd.date_range("2023-01-01", "2023-12-31", freq="h")
    extra = [pd.Timestamp(repeat)] + ([pd.Timestamp("2023-03-26 01:00")] if repeat == "2023-10-29 02:00" else [])
    df = pd.DataFrame({"y": 1.0}, index=stamps.append(pd.DatetimeIndex(extra)))
    with pytest.raises(ValueError, match="aggregate them first, e.g. df.groupby\\(level=0\\).mean\\(\\)") as info:
        canonicalize(df)
    assert "daylight" not in str(info.value)


# --- forecast frame and compatibility ---------------------------------------------------------


def test_forecast_frame_timestamps_are_the_next_steps():
    panel = canonicalize(long_frame({"x": 30, "y": 40}, freq="15min"), **LONG)
    mean = np.arange(2 * 3, dtype=np.float32).reshape(2, 3, 1)
    out = forecast_frame(panel, mean)
    assert list(out.columns) == ["item_id", "timestamp", "mean"]
    assert list(out["item_id"]) == ["x"] * 3 + ["y"] * 3
    for item in panel.items:
        stamps = out.loc[out["item_id"] == item.item_id, "timestamp"]
        expected = [item.index[-1] + k * pd.Timedelta("15min") for k in (1, 2, 3)]
        assert list(stamps) == expected
    np.testing.assert_array_equal(out["mean"], mean.ravel())


def test_forecast_frame_wide_columns_become_item_ids_and_origins_shift_timestamps():
    panel = canonicalize(wide_frame(length=20, freq="MS"))
    mean = np.stack([np.zeros((2, 2)), np.ones((2, 2))], axis=-1)[:1]  # [1, 2, 2]
    out = forecast_frame(panel, mean, items=[0], origins=[5])
    assert list(out["item_id"]) == ["a", "a", "b", "b"]
    assert list(out["mean"]) == [0, 0, 1, 1]
    assert list(out["timestamp"][:2]) == [pd.Timestamp("2021-08-01"), pd.Timestamp("2021-09-01")]
    with pytest.raises(ValueError, match="shape"):
        forecast_frame(panel, np.zeros((1, 2, 3)))


def test_future_index():
    assert list(future_index(pd.Timestamp("2021-01-31"), Calendar("ME"), 2)) == [
        pd.Timestamp("2021-02-28"),
        pd.Timestamp("2021-03-31"),
    ]
    assert future_index(pd.Timestamp("2021-01-01 23:45"), Calendar("15min"), 2)[0] == pd.Timestamp("2021-01-02")


def test_check_compatible_returns_positions_and_names_differences():
    fitted = canonicalize(long_frame({"x": 30, "y": 40, "z": 30}), **LONG)
    new = canonicalize(long_frame({"z": 30, "x": 10}), **LONG)
    np.testing.assert_array_equal(fitted.check_compatible(new), [0, 2])
    with pytest.raises(ValueError, match=r"unknown item ids \['w'\]"):
        fitted.check_compatible(canonicalize(long_frame({"w": 5}), **LONG))
    with pytest.raises(ValueError, match="wide frame"):
        fitted.check_compatible(canonicalize(wide_frame()))
    with pytest.raises(ValueError, match="freq differs"):
        fitted.check_compatible(canonicalize(long_frame({"x": 5}, freq="D"), **LONG))
    wide = canonicalize(wide_frame())
    with pytest.raises(ValueError, match=r"missing \['b'\], unexpected \['c'\]"):
        wide.check_compatible(canonicalize(wide_frame(columns=("a", "c"))))


# --- split ------------------------------------------------------------------------------------


def test_split_last_windows_are_validation():
    panel = canonicalize(wide_frame(length=100))
    split = split_panel(panel, 10, 5, val_windows=3)
    # validation origins 93, 94, 95 (targets up to row 99); training ends before row 93
    assert split.val == ((93, 96),) and split.train_end == (93,) and split.val_rows == (0,)
    assert split.train == ((10, 89),)  # last training origin 88: targets rows 88..92
    # default: the windows whose targets are the last 10% of the 100 steps (rows 90..99)
    assert split_panel(panel, 10, 5).val == ((90, 96),)
    no_val = split_panel(panel, 10, 5, val_windows=0)
    assert (no_val.train, no_val.train_end, no_val.val) == (((10, 96),), (100,), None)


def test_default_validation_is_sized_with_each_series():
    panel = canonicalize(long_frame({"x": 30, "y": 400}), **LONG)
    split = split_panel(panel, 8, 4)
    # x: 10% is 3 rows, less than one horizon: one window (targets rows 26..29)
    # y: 10% is 40 rows: 37 windows, targets rows 360..399
    assert split.val == ((26, 27), (360, 397)) and split.train_end == (26, 360)


def test_split_with_separate_validation_panel():
    panel = canonicalize(long_frame({"x": 30, "y": 40}), **LONG)
    val_panel = canonicalize(long_frame({"y": 20}), **LONG)
    split = split_panel(panel, 8, 4, val_panel=val_panel)
    assert split.train == ((8, 27), (8, 37)) and split.train_end == (30, 40)
    assert split.val == ((8, 17),) and split.val_rows == (1,)
    assert split_panel(panel, 8, 4, val_panel=val_panel, val_windows=2).val == ((15, 17),)
    other = canonicalize(long_frame({"y": 20, "new": 20}), **LONG)  # a series the fit frame lacks
    with pytest.raises(ValueError, match=r"^val_df holds 1 series the fit frame does not \(\['new'\]\): val_df "
                                         r"validates the model on later steps of the series it is fitted on, .*; drop "
                                         r"them from val_df, or give their earlier steps to fit as well$"):
        split_panel(panel, 8, 4, val_panel=other)


def test_split_errors_name_the_short_item():
    panel = canonicalize(long_frame({"x": 30, "short": 20}), **LONG)
    with pytest.raises(ValueError) as info:
        split_panel(panel, 10, 5, val_windows=5)
    message = str(info.value)
    for fragment in ["item 'short'", "20 time steps", "at least 24", "shorter context_length"]:
        assert fragment in message
    split_panel(panel, 10, 5, val_windows=0)  # 20 >= 15 without validation
    for bad in [{"context_length": 0}, {"prediction_length": -1}, {"val_windows": -1}]:
        kwargs = {"context_length": 10, "prediction_length": 5} | bad
        with pytest.raises(ValueError, match=next(iter(bad))):
            split_panel(panel, **kwargs)


def test_a_series_is_as_long_as_its_steps_from_its_first_observed_value():
    """A product launched late in a frame that holds NaN for it before is split as the series it is
    without those rows: too short for validation windows, it is all training part (skip_short) or
    named with the steps it holds (it got the others' windows, and a training part with nothing in it)."""
    df = long_frame({"x": 30, "new": 30})
    df.loc[(df.id == "new") & (df.index < df[df.id == "new"].index[20]), "y"] = np.nan  # its last 10 observed
    panel = canonicalize(df, **LONG)
    split = split_panel(panel, 4, 3, val_windows=2, skip_short=True)
    new = panel.item_ids.index("new")
    assert split.train_end[new] == 30 and split.train[new] == (4, 4)  # no window, all of it the training part
    assert split.train_end[1 - new] == 30 - 4  # the other keeps its validation windows
    with pytest.raises(ValueError, match="item 'new' has 10 time steps from its first observed value but "
                                         "context_length=4 \\+ prediction_length=3 \\+ 4 for 2 validation windows "
                                         "needs at least 11"):
        split_panel(panel, 4, 3, val_windows=2)


# --- scaling ----------------------------------------------------------------------------------


def test_scaler_uses_training_part_only_and_ignores_missing():
    panel = canonicalize(wide_frame(length=50))
    values, observed = arrays(panel)
    scaler = StandardScaler.fit(values, observed, [30])
    changed = values[0].copy()
    changed[30:] = 1e6
    hidden = observed[0].copy()
    hidden[30:] = False
    for v, m in [(changed, observed[0]), (values[0], hidden)]:
        other = StandardScaler.fit([v], [m], [30])
        np.testing.assert_array_equal(other.loc, scaler.loc)
        np.testing.assert_array_equal(other.scale, scaler.scale)
    np.testing.assert_allclose(scaler.loc[0], values[0][:30].mean(axis=0), rtol=1e-5)
    np.testing.assert_allclose(scaler.scale[0], values[0][:30].std(axis=0), rtol=1e-5)
    with_nan = values[0].copy()
    with_nan[3] = np.nan
    mask = observed[0].copy()
    mask[3] = False
    np.testing.assert_allclose(
        StandardScaler.fit([with_nan], [mask], [30]).loc[0],
        np.delete(values[0][:30], 3, axis=0).mean(axis=0),
        rtol=1e-5,
    )


def test_scaler_degenerate_channels_and_round_trip():
    values = np.stack([np.full(10, 7.0), np.r_[5.0, np.full(9, np.nan)], np.full(10, np.nan)], axis=1)
    observed = np.isfinite(values)
    scaler = StandardScaler.fit([values.astype(np.float32)], [observed])
    np.testing.assert_array_equal(scaler.loc, [[7, 5, 0]])
    np.testing.assert_array_equal(scaler.scale, [[1, 1, 1]])
    scaled = scaler.transform(values, 0)
    assert np.isfinite(scaled[observed]).all() and np.isnan(scaled[~observed]).all()
    x = np.random.default_rng(1).normal(size=(4, 6, 3)).astype(np.float32)
    two = StandardScaler(
        loc=np.array([[1, 2, 3], [-1, 0, 10]], np.float32),
        scale=np.array([[2, 3, 4], [5, 6, 7]], np.float32),
    )
    items = np.array([1, 0, 0, 1])
    round_trip = two.inverse_transform(two.transform(x, items), items)
    np.testing.assert_allclose(round_trip, x, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(two.transform(x, items)[1], (x[1] - [1, 2, 3]) / [2, 3, 4], rtol=1e-6)
    restored = StandardScaler.from_dict(json.loads(json.dumps(two.to_dict())))
    np.testing.assert_array_equal(restored.loc, two.loc)
    np.testing.assert_array_equal(restored.scale, two.scale)


# --- time features ----------------------------------------------------------------------------


@pytest.mark.parametrize("freq", ["h", "15min"])
def test_time_features_match_gluonts(freq):
    index = pd.date_range("2021-03-01", periods=50, freq=freq)
    features = time_features(index, Calendar(freq))
    functions = time_features_from_frequency_str(freq)
    assert features.shape == (50, len(functions)) == (50, time_feature_dim(Calendar(freq)))
    assert features.dtype == np.float32
    for k, function in enumerate(functions):
        np.testing.assert_allclose(features[:, k], function(index), rtol=1e-6)


def test_time_features_without_features_and_unsupported_freq():
    assert time_features(pd.date_range("2000", periods=3, freq="YE"), Calendar("YE")).shape == (3, 0)
    with pytest.raises(ValueError, match="no calendar time features"):
        canonicalize(wide_frame(length=5, freq="SMS"), freq="SMS")


@pytest.mark.parametrize("freq", ["500ms", "ms", "20us"])
def test_steps_shorter_than_a_second_read_the_features_of_seconds(freq):
    """GluonTS has no features for sensor data sampled faster than once a second: they get its
    seconds' (the finest calendar it knows), not an error."""
    index = pd.date_range("2021-03-01 23:59:58", periods=50, freq=freq)
    features = time_features(index, Calendar(freq))
    functions = time_features_from_frequency_str("s")
    assert features.shape == (50, len(functions)) == (50, time_feature_dim(Calendar(freq)))
    for k, function in enumerate(functions):
        np.testing.assert_allclose(features[:, k], function(index), rtol=1e-6)
    assert canonicalize(wide_frame(length=5, freq=freq)).freq == freq


# --- windows ----------------------------------------------------------------------------------


def make_dataset(length=100, context=10, horizon=5, stride=1, **kwargs):
    rng = np.random.default_rng(2)
    values = rng.normal(size=(length, 2)).astype(np.float32)
    observed = rng.random((length, 2)) > 0.1
    values[~observed] = np.nan
    feat = rng.normal(size=(length, 3)).astype(np.float32)
    origins = [(context, length - horizon + 1)]
    ds = WindowDataset([values], [observed], [feat], context, horizon, origins, stride=stride, **kwargs)
    return ds, values, observed, feat


def test_window_count_arithmetic():
    assert len(make_dataset()[0]) == 86  # origins 10..95
    assert len(make_dataset(stride=4)[0]) == 22  # origins 10, 14, ..., 94
    many = WindowDataset(
        [np.zeros((t, 1)) for t in (20, 15, 30)],
        [np.ones((t, 1), bool) for t in (20, 15, 30)],
        [np.zeros((t, 0)) for t in (20, 15, 30)],
        4,
        2,
        [(4, 19), (10, 10), (20, 29)],
        stride=2,
    )
    assert len(many) == 8 + 0 + 5
    assert [(many[k]["item"], many[k]["origin"]) for k in (0, 7, 8, 12, -1)] == [
        (0, 4), (0, 18), (2, 20), (2, 28), (2, 28)
    ]
    with pytest.raises(IndexError):
        many[13]


def test_window_contents_equal_direct_slices():
    ds, values, observed, feat = make_dataset()
    filled = np.where(observed, values, 0)
    for k in (0, 37, 85):
        window = ds[k]
        o = 10 + k
        assert window["origin"] == o and window["item"] == 0 and window["series"] == 0
        np.testing.assert_array_equal(window["past_target"], filled[o - 10 : o])
        np.testing.assert_array_equal(window["past_observed"], observed[o - 10 : o])
        np.testing.assert_array_equal(window["past_time_feat"], feat[o - 10 : o])
        np.testing.assert_array_equal(window["future_target"], filled[o : o + 5])
        np.testing.assert_array_equal(window["future_observed"], observed[o : o + 5])
        np.testing.assert_array_equal(window["future_time_feat"], feat[o : o + 5])
        tensors = [v for k, v in window.items() if k not in ("item", "series", "origin")]
        assert all(t.dtype == torch.float32 for t in tensors)


def test_window_origin_range_is_validated():
    with pytest.raises(ValueError, match=r"within \[10, 95\]"):
        WindowDataset(
            [np.zeros((100, 1))], [np.ones((100, 1), bool)], [np.zeros((100, 2))], 10, 5, [(9, 20)]
        )
    with pytest.raises(ValueError, match="stride"):
        make_dataset(stride=0)


def test_dataloader_keeps_last_partial_batch():
    ds = make_dataset()[0]
    batches = list(DataLoader(ds, batch_size=32, shuffle=True))
    assert [len(b["origin"]) for b in batches] == [32, 32, 22]
    assert batches[0]["past_target"].shape == (32, 10, 2)
    assert batches[0]["future_time_feat"].shape == (32, 5, 3)
    assert batches[0]["item"].dtype == torch.int64
    assert sorted(torch.cat([b["origin"] for b in batches]).tolist()) == list(range(10, 96))


LENGTHS = (40, 23, 31)  # items of different lengths; the second has no window


def mixed_inputs(prediction: bool = False, stride: int = 3, horizon: int = 4) -> dict:
    """Three items of 2 channels and 4 time features (column 2 a past-only covariate), with
    categorical statics and scaler statistics (floors included): ``WindowDataset``'s arguments."""
    rng = np.random.default_rng(7)
    values = [rng.normal(size=(t, 2)) for t in LENGTHS]
    observed = [rng.random((t, 2)) > 0.2 for t in LENGTHS]
    for x, mask in zip(values, observed):
        x[~mask] = np.nan
    extra = horizon if prediction else 0
    origins = [(t, t + 1) for t in LENGTHS] if prediction else [(6, 37), (6, 6), (9, 28)]
    return dict(values=values, observed=observed, time_feat=[rng.normal(size=(t + extra, 4)) for t in LENGTHS],
                context_length=6, prediction_length=horizon, origins=origins,
                stride=1 if prediction else stride, with_future_target=not prediction, past_only=slice(2, 3),
                static_cat=rng.integers(0, 5, size=(3, 2)), loc=rng.normal(size=(3, 2)), scale=rng.random((3, 2)) + 0.5,
                floor=np.where(rng.random((3, 2)) > 0.5, 0.0, -np.inf))


def sliced_windows(values, observed, time_feat, context_length, prediction_length, origins, stride,
                   with_future_target, past_only, static_cat, loc, scale, floor) -> list[dict]:
    """The windows of ``WindowDataset(...)`` in its order, sliced directly from its inputs."""
    windows = []
    for i, (x, mask, feat, (start, stop)) in enumerate(zip(values, observed, time_feat, origins)):
        filled = np.where(mask, x, 0.0)
        for o in range(start, stop, stride):
            past, future = slice(o - context_length, o), slice(o, o + prediction_length)
            future_feat = feat[future].copy()
            future_feat[:, past_only] = 0.0
            window = {"past_target": filled[past], "past_observed": mask[past], "past_time_feat": feat[past],
                      "future_time_feat": future_feat, "static_cat": static_cat[i]}
            if with_future_target:
                window |= {"future_target": filled[future], "future_observed": mask[future]}
            windows.append(window | {"target_loc": loc[i], "target_scale": scale[i], "target_floor": floor[i],
                                     "item": i, "series": i, "origin": o})
    return windows


WINDOW_DTYPES = {"static_cat": torch.int64, "target_loc": torch.float64, "target_scale": torch.float64,
                 "target_floor": torch.float64,
                 "item": torch.int64, "series": torch.int64, "origin": torch.int64}


def assert_batch_is(batch: dict, windows: list[dict]) -> None:
    """``batch`` holds exactly ``windows`` stacked: the same keys in the same order, dtypes
    (float32 unless :data:`WINDOW_DTYPES` says otherwise), contiguous ``[B, ...]`` shapes, values."""
    assert list(batch) == list(windows[0])
    for key, value in batch.items():
        expected = np.stack([np.asarray(w[key]) for w in windows])
        assert value.dtype == WINDOW_DTYPES.get(key, torch.float32), key
        assert value.shape == expected.shape and value.is_contiguous(), key
        np.testing.assert_array_equal(value.numpy(), expected.astype(value.numpy().dtype), err_msg=key)


@pytest.mark.parametrize("prediction, stride", [(False, 1), (False, 3), (True, 1)])
def test_a_batch_is_its_windows_sliced_from_the_inputs_in_the_order_asked(prediction, stride):
    inputs = mixed_inputs(prediction, stride)
    ds = WindowDataset(**inputs)
    windows = sliced_windows(**inputs)
    assert len(ds) == len(windows)
    order = np.random.default_rng(0).permutation(len(ds)).tolist()
    order[:2] = [-1, -len(ds)]  # negative indices count from the end
    expected = [windows[k] for k in order]
    assert_batch_is(ds.gather(order), expected)
    assert_batch_is(ds.gather(torch.tensor(order)), expected)
    assert_batch_is(WindowDataset.collate(ds.__getitems__(order)), expected)
    assert_batch_is(default_collate(ds.__getitems__(order)), expected)  # a DataLoader without collate_fn
    for k in (0, len(ds) - 1, -1):
        window = ds[k]
        assert list(window) == list(windows[k]) and type(window["item"]) is type(window["origin"]) is int
        assert_batch_is(default_collate([window]), [windows[k]])


def test_a_batch_with_an_index_out_of_range_names_it():
    ds = WindowDataset(**mixed_inputs())
    with pytest.raises(IndexError, match=rf"window {len(ds)} out of range for {len(ds)} windows"):
        ds.__getitems__([0, len(ds), 1])
    with pytest.raises(IndexError, match=rf"window {-len(ds) - 1} out of range"):
        ds[-len(ds) - 1]


def test_items_with_different_channels_or_features_are_refused():
    inputs = mixed_inputs()
    inputs["time_feat"][1] = inputs["time_feat"][1][:, :3]
    with pytest.raises(ValueError, match=r"item 1: .* with the C and F of item 0"):
        WindowDataset(**inputs)


@pytest.mark.parametrize("left_out", [("scale",), ("loc", "scale")])
def test_scaler_statistics_come_together(left_out):
    """loc without scale, or a floor without them, would give windows the models unscale wrongly."""
    inputs = {key: value for key, value in mixed_inputs().items() if key not in left_out}
    with pytest.raises(ValueError, match="pass both loc and scale, or neither; a floor only with them"):
        WindowDataset(**inputs)


def test_windows_fetched_one_by_one_are_collated_too():
    ds = WindowDataset(**mixed_inputs())
    batch = next(iter(DataLoader(ConcatDataset([ds, ds]), batch_size=len(ds) + 2, collate_fn=ds.collate)))
    windows = sliced_windows(**mixed_inputs())
    assert_batch_is(batch, windows + windows[:2])


@pytest.mark.parametrize("train", [True, False])
def test_loader_batches_follow_the_sampler_through_a_worker_process(train):
    inputs = mixed_inputs()
    ds = WindowDataset(**inputs)
    loader = make_loader(ds, TrainingConfig(batch_size=5, seed=3, num_workers=1), train=train)
    order = [k for batch in loader.batch_sampler for k in batch]  # the first epoch's order when training, else 0, 1, ...
    assert sorted(order) == list(range(len(ds))) and (order != sorted(order)) == train
    windows = sliced_windows(**inputs)
    batches = list(loader)
    assert [len(b["item"]) for b in batches] == [min(5, len(ds) - start) for start in range(0, len(ds), 5)]
    for start, batch in zip(range(0, len(ds), 5), batches):
        assert_batch_is(batch, [windows[k] for k in order[start:start + 5]])


def test_pipeline_from_panel_and_prediction_windows():
    panel = canonicalize(long_frame({"x": 30, "y": 40}), **LONG)
    split = split_panel(panel, 8, 4, val_windows=2)
    scaler = StandardScaler.fit(*arrays(panel), split.train_end)
    train = WindowDataset.from_panel(panel, scaler, 8, 4, split.train)
    val = WindowDataset.from_panel(panel, scaler, 8, 4, split.val, scaler_rows=split.val_rows)
    assert len(train) == (30 - 5 - 4 - 8 + 1) + (40 - 5 - 4 - 8 + 1) and len(val) == 4
    window = val[3]
    assert (window["item"], window["origin"]) == (1, 36)
    np.testing.assert_allclose(
        window["future_target"][:, 0], scaler.transform(panel.items[1].values[36:40], 1)[:, 0]
    )
    predict = WindowDataset.for_prediction(panel, scaler, 8, 4)
    assert len(predict) == 2 and "future_target" not in predict[0]
    window = predict[1]
    assert window["origin"] == 40 and window["past_target"].shape == (8, 1)
    swapped = WindowDataset.for_prediction(panel, scaler, 8, 4, scaler_rows=[1, 0])  # each window says its scaler row
    assert swapped.gather([0, 1])["series"].tolist() == [1, 0] and predict.gather([0, 1])["series"].tolist() == [0, 1]
    future = future_index(panel.items[1].index[-1], Calendar("h"), 4)
    np.testing.assert_array_equal(window["future_time_feat"], time_features(future, Calendar("h")))
    batch = next(iter(DataLoader(predict, batch_size=2)))
    mean = scaler.inverse_transform(batch["past_target"][:, -4:].numpy(), batch["item"].numpy())
    out = forecast_frame(panel, mean, items=batch["item"], origins=batch["origin"])
    assert list(out["timestamp"][:1]) == [panel.items[0].index[-1] + pd.Timedelta("1h")]
    with pytest.raises(ValueError, match="item 'x' has 30 time steps"):
        WindowDataset.for_prediction(panel, scaler, 31, 4)


# --- precision: float64 values, float32 only once scaled --------------------------------------


def level_and_swing(length: int = 24 * 20, level: float = 1e9) -> pd.DataFrame:
    t = np.arange(length)
    index = pd.date_range("2024-01-01", periods=length, freq="h")
    return pd.DataFrame({"y": level + 10 * np.sin(2 * np.pi * t / 24)}, index=index)


def test_a_small_swing_on_a_large_level_survives_scaling_and_windows():
    df = level_and_swing()
    panel = canonicalize(df)
    np.testing.assert_array_equal(panel.items[0].values[:, 0], df["y"].to_numpy())  # float32 steps are 64 at 1e9
    scaler = StandardScaler.fit(*arrays(panel))
    assert scaler.loc.dtype == scaler.scale.dtype == np.float64
    np.testing.assert_allclose(scaler.scale, [[10 / np.sqrt(2)]], rtol=1e-6)
    window = WindowDataset.from_panel(panel, scaler, 24, 6, [(24, 25)])[0]
    assert window["past_target"].dtype == torch.float32
    np.testing.assert_allclose(window["past_target"][:, 0].numpy().std(), 1.0, rtol=1e-6)  # a whole cycle
    restored = scaler.inverse_transform(window["past_target"].numpy(), 0)
    np.testing.assert_allclose(restored[:, 0], df["y"].to_numpy()[:24], rtol=0, atol=1e-5)


@pytest.mark.parametrize("value", [1e39, -1e300, 1e300, 1e-300, 5e-324])
def test_finite_values_stay_finite_and_observed_at_any_magnitude(value):
    df = wide_frame(length=40)
    df.iloc[7, 0] = value
    panel = canonicalize(df)
    assert panel.items[0].observed.all() and panel.items[0].values[7, 0] == value
    scaler = StandardScaler.fit(*arrays(panel))
    assert np.isfinite(scaler.loc).all() and np.isfinite(scaler.scale).all()
    window = WindowDataset.from_panel(panel, scaler, 10, 5, [(10, 11)])[0]
    assert torch.isfinite(window["past_target"]).all() and window["past_observed"].all()


def test_scaler_sums_do_not_overflow_and_constants_are_exact():
    x = np.array([[1e200], [3e200], [2e200], [np.nan]])
    scaler = StandardScaler.fit([x], [np.isfinite(x)])
    np.testing.assert_allclose(scaler.loc, [[2e200]], rtol=1e-15)
    np.testing.assert_allclose(scaler.scale, [[np.sqrt(2 / 3) * 1e200]], rtol=1e-15)
    constant = np.full((7, 1), 0.1)  # seven additions of 0.1 are not 0.7 in floating point
    fitted = StandardScaler.fit([constant], [np.ones((7, 1), bool)])
    assert fitted.loc[0, 0] == 0.1 and fitted.scale[0, 0] == 1
    assert not fitted.transform(constant, 0).any()


def test_a_scaled_value_beyond_float32_is_an_error_naming_column_item_and_timestamp():
    fit_frame = long_frame({"x": 30, "y": 30})
    panel = canonicalize(fit_frame, **LONG)
    scaler = StandardScaler.fit(*arrays(panel))
    late = fit_frame.assign(y=lambda d: d["y"].where((d["id"] != "y") | (d.index != 52), 1e40))
    with pytest.raises(ValueError) as info:
        WindowDataset.for_prediction(canonicalize(late, **LONG), scaler, 8, 4)
    for fragment in ["item 'y' (column 'y')", "2021-03-01 22:00:00", "1e+40", "float32", "fit on data that cover"]:
        assert fragment in str(info.value)
    wide = canonicalize(wide_frame(length=30))
    wide_scaler = StandardScaler(loc=np.zeros((1, 2)), scale=np.full((1, 2), 1e-300))
    with pytest.raises(ValueError, match=r"column 'a' at 2021-03-01 00:00:00: the value .* scales to"):
        WindowDataset.from_panel(wide, wide_scaler, 8, 4, [(8, 9)])


def test_window_dataset_refuses_observed_values_that_float32_cannot_hold():
    for bad in (np.nan, 1e39):
        values = np.zeros((20, 2))
        values[5, 1] = bad
        with pytest.raises(ValueError, match=r"item 0: the observed value .* at row 5, channel 1"):
            WindowDataset([values], [np.ones((20, 2), bool)], [np.zeros((20, 0))], 4, 2, [(4, 5)])


def test_non_real_and_beyond_float64_targets_are_errors():
    with pytest.raises(TypeError, match="complex dtype"):
        canonicalize(wide_frame().astype(complex))
    if np.finfo(np.longdouble).max > np.finfo(np.float64).max:  # 80-bit long double (x86)
        df = wide_frame(length=10).astype(np.longdouble)
        df.iloc[3, 1] = np.longdouble("1e400")
        with pytest.raises(ValueError, match=r"'b' has the value .* at 2021-03-01 03:00:00, beyond float64"):
            canonicalize(df)


def test_forecaster_keeps_a_small_swing_on_a_large_level_through_save_and_load(tmp_path, one_thread):
    from tsrec import Forecaster

    df = level_and_swing()
    quiet = {"enable_progress_bar": False, "logger": False, "enable_model_summary": False}
    model = Forecaster("dlinear", prediction_length=24, context_length=48, max_epochs=5, seed=0,
                       trainer_kwargs=quiet).fit(df)
    forecast = model.predict()["mean"].to_numpy()
    t = len(df) + np.arange(24)
    truth = 1e9 + 10 * np.sin(2 * np.pi * t / 24)
    assert np.ptp(forecast) > 10  # a flat line when the values were float32
    assert np.corrcoef(forecast, truth)[0, 1] > 0.95 and np.abs(forecast - truth).max() < 2
    loaded = type(model).load(model.save(tmp_path / "model"))
    for before, after in zip(model.panel.items, loaded.panel.items):
        assert after.values.dtype == np.float64
        np.testing.assert_array_equal(after.values, before.values)
    np.testing.assert_array_equal(loaded.predict()["mean"].to_numpy(), forecast)


# --- frequency, gaps and time zones -----------------------------------------------------------


def hourly(length: int = 24 * 30, tz: str | None = None) -> pd.DataFrame:
    index = pd.date_range("2021-03-01", periods=length, freq="h", tz=tz)
    return pd.DataFrame({"y": np.arange(length, dtype=float)}, index=index)


def with_typo(df: pd.DataFrame, row: int, shift: str) -> pd.DataFrame:
    """``df`` with the timestamp of ``row`` moved by ``shift``."""
    return df.rename(index={df.index[row]: df.index[row] + pd.Timedelta(shift)})


def test_normal_sparse_missingness_passes_silently():
    df = hourly()
    missing_day = pd.date_range("2021-03-10", periods=24, freq="h")
    df = df.drop(missing_day).drop(df.index[[3, 50, 51, 400]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        series = canonicalize(df).items[0]
    assert len(series) == 24 * 30 and (~series.observed).sum() == 24 + 4


def test_long_gap_limit_is_seven_seasons_of_the_usual_spacing():
    # hourly: a season is 24 steps, so up to 7 * 24 = 168 missing steps in a row pass
    df = hourly()
    canonicalize(df.drop(df.index[100:268]))
    with pytest.raises(ValueError, match="gap of 169 missing 'h' steps"):
        canonicalize(df.drop(df.index[100:269]))
    # rows usually 2 steps apart (freq given as 'h'): the limit doubles to 336
    every_other = hourly(24 * 60).iloc[::2]
    with pytest.warns(UserWarning) as record:  # half the grid is empty, but no long gap
        canonicalize(every_other.drop(every_other.index[100:267]), freq="h", gaps="warn")
    assert len(record) == 1 and str(record[0].message).startswith("freq 'h' leaves 61.6% of the grid")
    with pytest.raises(ValueError, match="gap of 337 missing"):
        canonicalize(every_other.drop(every_other.index[100:268]), freq="h")


def test_a_timestamp_typed_a_year_late_is_an_error_naming_the_gap():
    df = with_typo(hourly(), -1, "365D")
    with pytest.raises(ValueError) as info:
        canonicalize(df)
    message = str(info.value)
    for fragment in [
        "the frame has a gap of 8,760 missing 'h' steps",
        "between its rows at 2021-03-30 22:00:00 and 2022-03-30 23:00:00",
        "usual spacing of 1 step",
        "fix the timestamp 2022-03-30 23:00:00 if it is a typo",
        "split the series",
        "gaps='warn'",
    ]:
        assert fragment in message
    long = pd.concat([long_frame({"a": 40}), with_typo(hourly(40), 0, "-365D").rename_axis("ts").reset_index()
                      .assign(id="b")])
    with pytest.raises(ValueError, match="item 'b' has a gap .* fix the timestamp 2020-03-01 00:00:00"):
        canonicalize(long, **LONG)


def test_gaps_warn_keeps_the_data_and_warns_with_the_same_text():
    df = with_typo(hourly(), -1, "365D")
    with pytest.raises(ValueError) as info:
        canonicalize(df)
    with pytest.warns(UserWarning) as record:
        series = canonicalize(df, gaps="warn").items[0]
    assert len(record) == 1
    problem = str(info.value).split(";")[0]
    assert str(record[0].message).startswith(problem) and "kept" in str(record[0].message)
    assert len(series) == 24 * 29 + 8760 + 24 and series.observed.sum() == len(df)
    assert series.values[-1, 0] == df["y"].iloc[-1] and series.index[-1] == df.index[-1]
    with pytest.raises(ValueError, match="gaps must be one of"):
        canonicalize(df, gaps="ignore")


def test_a_freq_finer_than_the_data_is_an_error_naming_the_usual_step():
    daily = wide_frame(length=60, freq="D")
    with pytest.raises(ValueError) as info:
        canonicalize(daily, freq="h")
    for fragment in ["freq 'h' leaves 95.8% of the grid of the frame empty", "1,357 of 1,417 steps",
                     "usually 24 step(s) apart (freq 'D')", "pass freq='D'", "gaps='warn'"]:
        assert fragment in str(info.value)
    bursts = hourly(100).iloc[np.arange(100) % 10 < 4]
    with pytest.raises(ValueError, match=r"leaves 57.4% .* come in bursts; resample .*, e.g. df.resample\('2h'\)"):
        canonicalize(bursts)
    with pytest.warns(UserWarning, match="leaves 95.8%"):
        assert len(canonicalize(daily, freq="h", gaps="warn").items[0]) == 1417


def test_century_typos_are_reported_without_building_their_grid():
    seconds = pd.DataFrame({"y": np.ones(100)}, index=pd.date_range("2021-01-01", periods=100, freq="s"))
    with pytest.raises(ValueError, match="gap of 3,155,") as info:  # ~3.2e9 steps: 25 GB as a grid
        canonicalize(with_typo(seconds, -1, "36524D"))
    assert "2121-" in str(info.value)
    early = hourly(10).rename(index={pd.Timestamp("2021-03-01"): pd.Timestamp("1700-03-01")})  # > 292 years of ns
    with pytest.raises(ValueError, match="gap of 2,813,") as info:
        canonicalize(early)
    assert "fix the timestamp 1700-03-01 00:00:00 if it is a typo" in str(info.value)


@pytest.mark.parametrize(("start", "freq", "length"), [("2021-03-27", "h", 48), ("2021-10-30", "h", 50),
                                                        ("2021-03-20", "D", 20), ("2021-10-24", "15min", 300)])
def test_a_named_time_zone_and_its_dst_changes_survive(start, freq, length):
    index = pd.date_range(start, periods=length, freq=freq, tz="Europe/Berlin")
    df = pd.DataFrame({"y": np.arange(length, dtype=float)}, index=index).drop(index[[5, 17]])
    for frame, kwargs in [(df, {}), (df.rename_axis("ts").reset_index(), {"time_col": "ts"})]:
        series = canonicalize(frame.sample(frac=1, random_state=0), **kwargs).items[0]
        assert str(series.index.tz) == "Europe/Berlin" and series.index.equals(index)
        np.testing.assert_array_equal(series.values[:, 0], np.where(np.isin(np.arange(length), [5, 17]), np.nan,
                                                                    np.arange(length)))
    if freq == "D":  # days follow the wall clock: midnight before and after the change
        assert (series.index.hour == 0).all()


def test_channel_labels_name_the_column_and_item():
    assert canonicalize(wide_frame()).channel_label(0, 1) == "column 'b'"
    assert canonicalize(long_frame(), **LONG).channel_label(1, 0) == "item 'y' (column 'y')"


def test_a_long_frame_passed_without_id_col_is_told_to_pass_it():
    df = pd.DataFrame({"id": ["a"] * 5 + ["b"] * 5, "ds": list(pd.date_range("2024", periods=5, freq="h")) * 2,
                       "y": np.arange(10.0)})
    with pytest.raises(TypeError, match=r"if 'id' names the series .* pass id_col='id'"):
        canonicalize(df, time_col="ds")


def test_windows_at_other_origins_share_the_stored_values():
    panel = canonicalize(long_frame({"x": 30, "y": 40}), **LONG)
    split = split_panel(panel, 8, 4, val_windows=3)
    scaler = StandardScaler.fit(*arrays(panel), split.train_end)
    train = WindowDataset.from_panel(panel, scaler, 8, 4, split.train)
    val = train.at_origins(split.val)
    built = WindowDataset.from_panel(panel, scaler, 8, 4, split.val)
    assert len(val) == len(built) == 6 and val._target is train._target
    for got, want in zip(val.gather(range(6)).values(), built.gather(range(6)).values()):
        torch.testing.assert_close(got, want)
    with pytest.raises(ValueError, match=r"item 1: origins \[38, 40\) must lie within \[8, 36\]"):
        train.at_origins([(8, 9), (38, 40)])


@pytest.mark.parametrize(("values", "advice"), [
    (np.arange(1990, 2020), r"pd.to_datetime\(df\['t'\].astype\(int\).astype\(str\), format='%Y'\) for years"),
    (np.arange(30) * 3600 + 1.6e9, r"pd.to_datetime\(df\['t'\], unit='s'\) for seconds since 1970"),
    (np.arange(1, 31), (r"pd.date_range\('2000-01-01', periods=int\(df\['t'\].max\(\)\) \+ 1, freq='MS'\)\[df\['t'\]\] "
                        r"for step numbers \(0, 1, 2, ...\) of monthly data, with the data's own start and freq "
                        r"\(tsrec reads the calendar: its seasons and calendar features\)")),
])
def test_a_numeric_time_column_gets_the_conversion_its_values_need(values, advice):
    """Years as integers (1990, 1991, ...) are the common case: converting them as seconds since
    1970 (the only advice there was) would have put them all in 1970's first hour; so are step
    numbers (statsforecast's integer ``ds``), which would have been seconds too."""
    df = pd.DataFrame({"t": values, "y": np.arange(len(values), dtype=float)})
    with pytest.raises(TypeError, match=rf"^time column 't' has numeric dtype \w+; convert it to datetimes, e.g. "
                                        rf"df\['t'\] = {advice}$"):
        canonicalize(df, time_col="t", target_col="y")


@pytest.mark.parametrize(("text", "advice", "values"), [
    (["1,234.5", "10,125.7", "12"], (r"pd.to_numeric\(df\['y'\].str.replace\(',', ''\), errors='coerce'\) \(its "
                                     r"values group thousands with commas, e.g. '1,234.5'"), [1234.5, 10125.7, 12.0]),
    (["10,5", "3,25", "7"], (r"pd.to_numeric\(df\['y'\].str.replace\(',', '.'\), errors='coerce'\) \(its values "
                             r"have decimal commas, e.g. '10,5'"), [10.5, 3.25, 7.0]),
    (["1.5", "n/a", "7"], r"pd.to_numeric\(df\['y'\], errors='coerce'\) \(unparseable values become missing\)$",
     [1.5, np.nan, 7.0]),
])
def test_a_target_of_numbers_as_text_is_told_the_conversion_that_reads_them(text, advice, values):
    """``pd.to_numeric(..., errors='coerce')``, the one advice there was, makes every value with a
    thousands separator or a decimal comma missing; the advice now reads them, as its own code shows."""
    df = pd.DataFrame({"t": pd.date_range("2024-01-01", periods=3, freq="D"), "y": text})
    with pytest.raises(TypeError, match=advice):
        canonicalize(df, time_col="t", target_col="y")
    code = re.search(r"df\['y'\] = (.*?) \(", str(_error(df))).group(1)
    np.testing.assert_array_equal(eval(code, {"pd": pd, "df": df}).to_numpy(), values)  # the advice, as given


def _error(df: pd.DataFrame) -> Exception:
    try:
        canonicalize(df, time_col="t", target_col="y")
    except TypeError as error:
        return error
    raise AssertionError("no error")


def test_the_advice_for_step_numbers_dates_them_at_the_frequency_named():
    df = pd.DataFrame({"t": np.arange(1, 31), "y": np.arange(30, dtype=float)})
    df["t"] = pd.date_range('2000-01-01', periods=int(df['t'].max()) + 1, freq='MS')[df['t']]  # the advice, as given
    panel = canonicalize(df, time_col="t", target_col="y")
    assert panel.freq == "MS" and len(panel.items[0]) == 30


def test_readings_at_irregular_times_are_told_the_grid_their_steps_are_near():
    """A logger's daily readings at varying times of day fit no grid; the advice was ``freq='h'``
    whatever the steps, which then fails on every row. It now names the step nearest their
    median and the floor that puts them on it, which reads."""
    rng = np.random.default_rng(0)
    times = pd.date_range("2024-01-01", periods=60, freq="D") + pd.to_timedelta(rng.integers(0, 3600, 60), unit="s")
    df = pd.DataFrame({"t": times, "y": rng.normal(size=60)})
    with pytest.raises(ValueError, match=r"no step accounts for half of them; their median is \d days \d\d:\d\d:\d\d, "
                                         r"about one 'D' step: put readings taken at irregular times on that grid, "
                                         r"df\['t'\] = df\['t'\]\.dt\.floor\('D'\) \(then average the rows that "
                                         r"share a step\), or pass freq=...$"):
        canonicalize(df, time_col="t", target_col="y")
    df["t"] = df["t"].dt.floor("D")
    assert canonicalize(df, time_col="t", target_col="y").freq == "D"
    minutes = pd.date_range("2024-01-01", periods=60, freq="5min") + pd.to_timedelta(rng.integers(0, 50, 60), unit="s")
    with pytest.raises(ValueError, match=r"about one '5min' step"):
        canonicalize(pd.DataFrame({"t": minutes, "y": 1.0}), time_col="t", target_col="y")


def test_timestamps_outside_the_nanosecond_years_get_the_shift_that_keeps_their_calendar():
    """Historical yearly data in seconds (pandas' non-nanosecond units hold year 1565) cannot be
    read on tsrec's nanosecond grid: the error names the whole 400-year shift that brings them in,
    and with it the same series fits; in range, any unit is read as nanoseconds."""
    from tsrec import Forecaster

    stamps = pd.date_range("1565", periods=40, freq="YS", unit="s")
    df = pd.DataFrame({"t": stamps, "y": np.arange(40.0)})
    with pytest.raises(ValueError, match=r"^time column 't' runs from 1565-01-01 to 1604-01-01, outside the years "
                                         r"1678-2261 .* with df\['t'\] = df\['t'\] \+ pd.DateOffset\(years=400\), "
                                         r"and shift the forecast's timestamps back$"):
        canonicalize(df, time_col="t", target_col="y")
    late = pd.DataFrame({"y": np.arange(40.0)}, index=pd.date_range("2250", periods=40, freq="YS", unit="s"))
    with pytest.raises(ValueError, match=r"^the index runs from 2250-01-01 .* with df.index = df.index \+ "
                                         r"pd.DateOffset\(years=-400\),"):
        canonicalize(late)
    df["t"] = df["t"] + pd.DateOffset(years=400)
    forecast = Forecaster("naive", prediction_length=3).fit(df, time_col="t", target_col="y").predict()
    assert forecast["timestamp"].tolist() == list(pd.date_range("2005", periods=3, freq="YS"))


def test_periods_and_a_series_get_the_conversion_they_need():
    """pandas periods (GluonTS's and statsmodels' monthly data) and a lone Series are common ways
    to hold a series: each error names the one call that converts it."""
    from tsrec import Forecaster

    periods = pd.period_range("2019-01", periods=30, freq="M")
    with pytest.raises(ValueError, match=r"has a PeriodIndex, not a DatetimeIndex; convert it to each period's start "
                                         r"with df = df.to_timestamp\(\)$"):
        canonicalize(pd.DataFrame({"y": np.arange(30.0)}, index=periods))
    with pytest.raises(TypeError, match=r"^time column 't' holds periods \(period\[M\]\), not datetimes; convert it "
                                        r"to each period's start with df\['t'\] = df\['t'\].dt.to_timestamp\(\)$"):
        canonicalize(pd.DataFrame({"t": periods, "y": np.arange(30.0)}), time_col="t", target_col="y")
    series = pd.Series(np.arange(30.0), index=periods.to_timestamp(), name="y")
    with pytest.raises(TypeError, match=r"got Series; pass one series as a frame: s.to_frame\(\)$"):
        Forecaster("naive", prediction_length=3).fit(series)
    assert len(Forecaster("naive", prediction_length=3).fit(series.to_frame()).predict()) == 3
