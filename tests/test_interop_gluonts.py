"""GluonTS datasets <-> tsrec frames: round trips, frequencies, period and timestamp starts, errors."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from tsrec.interop.gluonts import from_tsrec_frame, to_tsrec_frame

LONG = {"id_col": "item_id", "time_col": "timestamp", "target_col": "target"}


def long_frame() -> pd.DataFrame:
    """Two hourly items of different starts and lengths, a NaN value, rows in the frame's id order."""
    return pd.DataFrame(
        {
            "item_id": ["a"] * 3 + ["b"] * 4,
            "timestamp": pd.date_range("2021-01-01 02:00", periods=3, freq="h").append(
                pd.date_range("2021-01-01 00:00", periods=4, freq="h")
            ),
            "target": [5.0, 6.0, 7.5, 1.0, np.nan, 3.0, 4.25],
        }
    )


def wide_frame() -> pd.DataFrame:
    index = pd.date_range("2022-03-01", periods=6, freq="D", name="timestamp")
    values = np.arange(18, dtype=np.float64).reshape(6, 3) / 4
    values[2, 1] = np.nan
    return pd.DataFrame(values, index=index, columns=["load", "temp", "price"])


def test_univariate_long_round_trip_keeps_nan_and_freq() -> None:
    df = long_frame()
    dataset = from_tsrec_frame(df, **LONG)
    assert [entry["item_id"] for entry in dataset] == ["a", "b"]
    assert [entry["start"] for entry in dataset] == [
        pd.Period("2021-01-01 02:00", freq="h"),
        pd.Period("2021-01-01 00:00", freq="h"),
    ]
    assert dataset[1]["target"].shape == (4,) and np.isnan(dataset[1]["target"][1])
    back = to_tsrec_frame(dataset)
    assert list(back.columns) == ["item_id", "timestamp", "target"]
    pd.testing.assert_frame_equal(back, df)


def test_absent_grid_steps_become_nan() -> None:
    df = long_frame().drop(index=5)  # item b loses 02:00: the GluonTS target has NaN there
    back = to_tsrec_frame(from_tsrec_frame(df, **LONG))
    assert len(back) == len(df) + 1
    assert np.isnan(back.loc[(back.item_id == "b") & (back.timestamp == "2021-01-01 02:00"), "target"]).all()


def test_multivariate_wide_round_trip() -> None:
    df = wide_frame()
    dataset = from_tsrec_frame(df)
    (entry,) = dataset
    assert entry["target"].shape == (3, 6) and entry["start"] == pd.Period("2022-03-01", freq="D")
    pd.testing.assert_frame_equal(to_tsrec_frame(dataset, columns=list(df.columns)), df)
    assert list(to_tsrec_frame(dataset).columns) == ["0", "1", "2"]


def test_pandas_dataset_inputs() -> None:
    from gluonts.dataset.pandas import PandasDataset

    df = long_frame()
    dataset = PandasDataset.from_long_dataframe(df, target="target", item_id="item_id", timestamp="timestamp", freq="h")
    pd.testing.assert_frame_equal(to_tsrec_frame(dataset), df)
    wide = wide_frame()
    (multivariate,) = PandasDataset(wide, target=list(wide.columns), freq="D")
    pd.testing.assert_frame_equal(to_tsrec_frame([multivariate], columns=list(wide.columns)), wide)


@pytest.mark.parametrize(
    ("freq", "period_freq", "timestamps"),
    [
        ("15min", "15min", pd.date_range("2021-01-01 00:15", periods=5, freq="15min")),
        ("MS", "M", pd.date_range("2021-01-01", periods=5, freq="MS")),
        ("ME", "M", pd.date_range("2021-01-31", periods=5, freq="ME")),
        ("W-SUN", "W-SUN", pd.date_range("2021-01-03", periods=5, freq="W-SUN")),
    ],
)
def test_freq_round_trip(freq: str, period_freq: str, timestamps: pd.DatetimeIndex) -> None:
    df = pd.DataFrame({"y": np.arange(5.0)}, index=timestamps.rename("timestamp"))
    dataset = from_tsrec_frame(df)
    assert dataset[0]["start"].freqstr == period_freq
    assert dataset[0]["start"] == timestamps[0].to_period(period_freq)
    pd.testing.assert_frame_equal(to_tsrec_frame(dataset, freq=freq, columns=["y"]), df, check_freq=False)


def test_periods_default_to_their_start_times() -> None:
    dataset = [{"start": pd.Period("2021-01", freq="M"), "target": [1.0, 2.0, 3.0], "item_id": "x"}]
    frame = to_tsrec_frame(dataset)
    assert list(frame.timestamp) == list(pd.date_range("2021-01-01", periods=3, freq="MS"))
    assert list(to_tsrec_frame(dataset, freq="ME").timestamp) == list(pd.date_range("2021-01-31", periods=3, freq="ME"))


def test_period_and_timestamp_starts_agree() -> None:
    from gluonts.dataset.common import ListDataset

    def raw() -> list[dict]:  # fresh dicts: ListDataset rewrites its input entries in place
        return [{"start": "2021-01-01 00:00", "target": [1.0, 2.0, np.nan], "item_id": "x"}]

    as_periods = ListDataset(raw(), freq="h")
    as_timestamps = ListDataset(raw(), freq="h", use_timestamp=True)
    assert isinstance(as_periods[0]["start"], pd.Period) and isinstance(as_timestamps[0]["start"], pd.Timestamp)
    expected = to_tsrec_frame(as_periods)
    pd.testing.assert_frame_equal(to_tsrec_frame(as_timestamps, freq="h"), expected)
    pd.testing.assert_frame_equal(to_tsrec_frame(raw(), freq="h"), expected)  # plain dicts, string start
    with pytest.raises(ValueError, match=r"not a pandas Period; pass freq=\.\.\."):
        to_tsrec_frame(as_timestamps)
    with pytest.raises(ValueError, match="is not a step of freq='ME'; .* start the series at 2021-01-31"):
        to_tsrec_frame([{"start": pd.Timestamp("2021-01-15"), "target": [1.0]}], freq="ME")
    with pytest.raises(ValueError, match="periods of frequency 'h', which freq='D' does not match"):
        to_tsrec_frame(as_periods, freq="D")


def test_gluonts_predictor_runs_on_the_converted_dataset() -> None:
    from gluonts.evaluation import make_evaluation_predictions
    from gluonts.model.seasonal_naive import SeasonalNaivePredictor

    df = pd.DataFrame(
        {
            "item_id": np.repeat(["a", "b"], 24),
            "timestamp": np.tile(pd.date_range("2021-01-01", periods=24, freq="h"), 2),
        }
    )
    df["target"] = np.arange(48.0)
    predictor = SeasonalNaivePredictor(prediction_length=4, season_length=1)
    forecasts, _ = make_evaluation_predictions(from_tsrec_frame(df, **LONG), predictor, num_samples=10)
    first = next(iter(forecasts))
    assert first.start_date == pd.Period("2021-01-01 20:00", freq="h") and first.item_id == "a"
    np.testing.assert_allclose(first.mean, 19.0)


def test_item_ids_default_to_positions() -> None:
    frame = to_tsrec_frame([{"start": pd.Period("2021-01-01", "D"), "target": [1.0]}] * 2)
    assert list(frame.item_id) == ["0", "1"]


@pytest.mark.parametrize(
    ("dataset", "error", "match"),
    [
        (pd.DataFrame({"target": [1.0]}), TypeError, "got a DataFrame"),
        (42, TypeError, "got int"),
        ([[1.0, 2.0]], TypeError, "entry 0 is a list, not a mapping"),
        ([], ValueError, "no entries"),
        ([{"start": pd.Period("2021-01-01", "D")}], ValueError, r"has no \['target'\] field"),
        ([{"start": pd.Period("2021-01-01", "D"), "target": [[1.0, 2.0], [3.0]]}], ValueError, "ragged"),
        ([{"start": pd.Period("2021-01-01", "D"), "target": ["a", "b"]}], ValueError, "not numeric"),
        ([{"start": pd.Period("2021-01-01", "D"), "target": np.zeros((1, 2, 3))}], ValueError, r"expected \[T\]"),
        ([{"start": pd.Period("2021-01-01", "D"), "target": np.zeros((2, 3))}] * 2, ValueError, "2 multivariate"),
        (
            [
                {"start": pd.Period("2021-01-01", "D"), "target": np.zeros((2, 3)), "item_id": "m"},
                {"start": pd.Period("2021-01-01", "D"), "target": np.zeros(3), "item_id": "u"},
            ],
            ValueError,
            "mixes univariate",
        ),
        ([{"start": pd.Period("2021-01-01", "D"), "target": [1.0], "item_id": "x"}] * 2, ValueError, r"\['x'\]"),
        (
            [
                {"start": pd.Period("2021-01-01", "D"), "target": [1.0, 2.0], "item_id": "d"},
                {"start": pd.Period("2021-01-01", "h"), "target": [1.0, 2.0], "item_id": "h"},
            ],
            ValueError,
            "different frequencies",
        ),
    ],
)
def test_unknown_or_bad_inputs(dataset, error, match) -> None:
    with pytest.raises(error, match=match):
        to_tsrec_frame(dataset)


def test_column_name_errors() -> None:
    multivariate = [{"start": pd.Period("2021-01-01", "D"), "target": np.zeros((2, 3))}]
    with pytest.raises(ValueError, match="columns has 3 names for a target of 2 variables"):
        to_tsrec_frame(multivariate, columns=["a", "b", "c"])
    with pytest.raises(ValueError, match="this dataset is univariate"):
        to_tsrec_frame([{"start": pd.Period("2021-01-01", "D"), "target": [1.0]}], columns=["a"])


def test_frame_errors_come_from_tsrec() -> None:
    with pytest.raises(ValueError, match="duplicate timestamps in item 'a'"):
        from_tsrec_frame(pd.concat([long_frame(), long_frame().iloc[:1]]), **LONG)
    with pytest.raises(TypeError, match="expected a pandas DataFrame"):
        from_tsrec_frame([{"start": pd.Period("2021-01-01", "D"), "target": [1.0]}])


def test_import_tsrec_does_not_import_gluonts() -> None:
    code = "import sys, tsrec, tsrec.interop, tsrec.metrics; print('gluonts' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "False"
