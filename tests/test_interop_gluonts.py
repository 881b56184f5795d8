"""GluonTS datasets <-> tsrec frames: round trips, frequencies, period and timestamp starts, errors."""

from __future__ import annotations

import contextlib
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from tsrec.interop.gluonts import from_tsrec_frame, to_tsrec_frame

# the naive baselines only: ets and theta would cost a statsforecast fit per series
NAIVE = ("naive", "seasonal_naive")

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


# ------------------------------------------------------------------ TsrecEstimator / TsrecPredictor
H = 8
LEVELS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)  # the quantile output's default levels
TINY = {"context_length": 24, "max_epochs": 2, "trainer_kwargs": {"enable_progress_bar": False}}


def hourly_entries(length: int = 24 * 10, ids: tuple = ("a", "b")) -> list[dict]:
    """Daily cycles with noise, one per id (fresh dicts: ListDataset rewrites its input entries)."""
    rng = np.random.default_rng(0)
    t = np.arange(length)
    cycle = [np.sin(2 * np.pi * (t + 5 * k) / 24) for k in range(len(ids))]
    return [
        {"start": "2021-01-01 00:00", "target": 10 + wave + 0.2 * rng.standard_normal(length), "item_id": item_id}
        for wave, item_id in zip(cycle, ids)
    ]


def datasets(ids: tuple = ("a", "b")) -> tuple:
    """(full, train): the hourly series, and the same without their last ``H`` steps."""
    from gluonts.dataset.common import ListDataset

    full = ListDataset(hourly_entries(ids=ids), freq="h")
    train = ListDataset([{**entry, "target": entry["target"][:-H]} for entry in hourly_entries(ids=ids)], freq="h")
    return full, train


@pytest.fixture(scope="module")
def quantile_predictor():
    import torch

    from tsrec.interop.gluonts import TsrecEstimator

    torch.set_num_threads(1)
    _, train = datasets()
    return TsrecEstimator("dlinear", prediction_length=H, **TINY).train(train)


@pytest.fixture(scope="module")
def studentt_predictor():
    from tsrec.interop.gluonts import TsrecEstimator

    _, train = datasets()
    return TsrecEstimator("dlinear", prediction_length=H, output="studentt", **TINY).train(train)


def evaluate(forecasts, series) -> tuple[dict, pd.DataFrame]:
    from gluonts.evaluation import Evaluator

    return Evaluator(quantiles=LEVELS, num_workers=0)(series, forecasts)


def test_estimator_trains_a_predictor(quantile_predictor) -> None:
    from gluonts.model.estimator import Estimator
    from gluonts.model.predictor import Predictor

    from tsrec.interop.gluonts import TsrecEstimator, TsrecPredictor

    assert isinstance(TsrecEstimator("dlinear", prediction_length=H), Estimator)
    assert isinstance(quantile_predictor, TsrecPredictor) and isinstance(quantile_predictor, Predictor)
    forecaster = quantile_predictor.forecaster
    assert quantile_predictor.prediction_length == H and quantile_predictor.freq == "h"
    assert forecaster.panel.item_ids == ("a", "b") and forecaster.training_summary.epochs_run == 2


def test_evaluator_scores_equal_tsrec_backtest(quantile_predictor) -> None:
    from gluonts.evaluation import make_evaluation_predictions

    from tsrec.evaluation import backtest

    full, _ = datasets()
    forecasts, series = make_evaluation_predictions(full, quantile_predictor, num_samples=100)
    agg, per_item = evaluate(forecasts, series)
    assert list(per_item.item_id) == ["a", "b"]
    result = backtest(quantile_predictor.forecaster, to_tsrec_frame(full), quantiles=LEVELS, baselines=NAIVE,
                      **LONG)  # the last window
    pairs = [("MSE", "mse", "original"), ("MASE", "mase", "scale-free"),
             ("mean_wQuantileLoss", "mean_wQuantileLoss", "scale-free")]
    pairs += [(f"Coverage[{q}]", f"coverage_{q}", "fraction") for q in LEVELS]
    for gluonts_name, tsrec_name, units in pairs:
        np.testing.assert_allclose(agg[gluonts_name], result.metric(tsrec_name, units), rtol=1e-6, err_msg=gluonts_name)


def test_backtest_metrics_runs(studentt_predictor) -> None:
    from gluonts.evaluation import Evaluator
    from gluonts.evaluation.backtest import backtest_metrics

    full, _ = datasets()
    agg, per_item = backtest_metrics(full, studentt_predictor, evaluator=Evaluator(quantiles=(0.1, 0.9), num_workers=0))
    assert len(per_item) == 2 and 0 < agg["mean_wQuantileLoss"] < 1 and np.isfinite(agg["MSE"])


def test_quantile_forecasts(quantile_predictor) -> None:
    from gluonts.model.forecast import QuantileForecast

    full, _ = datasets()
    forecasts = list(quantile_predictor.predict(full, num_samples=7))  # num_samples: not used for quantiles
    expected = quantile_predictor.forecaster.predict(to_tsrec_frame(full), quantiles=LEVELS)
    for forecast, item_id in zip(forecasts, ["a", "b"]):
        assert isinstance(forecast, QuantileForecast) and forecast.item_id == item_id
        assert forecast.forecast_keys == [str(q) for q in LEVELS] + ["mean"]
        assert forecast.forecast_array.shape == (len(LEVELS) + 1, H)
        assert forecast.start_date == pd.Period("2021-01-11 00:00", freq="h")  # the step after 240 hours
        rows = expected[expected.item_id == item_id]
        np.testing.assert_allclose(forecast.mean, rows["mean"])
        np.testing.assert_allclose(forecast.quantile(0.9), rows["0.9"])
        assert (np.diff(forecast.forecast_array[:-1], axis=0) >= 0).all()  # never crossing


def test_sample_forecasts(studentt_predictor) -> None:
    from gluonts.model.forecast import SampleForecast

    from tsrec.interop.gluonts import DEFAULT_NUM_SAMPLES

    full, _ = datasets()
    first, second = studentt_predictor.predict(full, num_samples=5)
    assert isinstance(first, SampleForecast) and first.samples.shape == (5, H)
    assert (first.item_id, second.item_id) == ("a", "b")
    assert first.start_date == second.start_date == pd.Period("2021-01-11 00:00", freq="h")
    default = next(iter(studentt_predictor.predict(full)))
    assert default.samples.shape == (DEFAULT_NUM_SAMPLES, H) and np.isfinite(default.samples).all()


def test_rolling_windows_repeat_item_ids(quantile_predictor) -> None:
    """generate_instances' windows share their item ids: each is forecast from its own history,
    as tsrec's backtest forecasts the same windows."""
    from gluonts.dataset.split import split

    from tsrec.evaluation import backtest

    full, _ = datasets()
    _, template = split(full, offset=-3 * H)
    pairs = list(template.generate_instances(prediction_length=H, windows=3, distance=H))
    forecasts = list(quantile_predictor.predict([entry for entry, _ in pairs]))
    assert [f.item_id for f in forecasts] == ["a", "a", "a", "b", "b", "b"]
    assert [f.start_date for f in forecasts] == [label["start"] for _, label in pairs]
    errors = backtest(quantile_predictor.forecaster, to_tsrec_frame(full), n_windows=3, **LONG, baselines=NAIVE).errors
    for forecast in forecasts:
        window = errors[(errors.item_id == forecast.item_id) & (errors.origin == forecast.start_date.start_time)]
        np.testing.assert_allclose(forecast.quantile(0.1), window["y_q0.1"], rtol=1e-6)


def test_entries_without_item_id() -> None:
    """Named by position as in training (a position past them is a new series); one fitted series takes every
    entry without an id."""
    from gluonts.dataset.common import ListDataset

    from tsrec.interop.gluonts import TsrecEstimator

    def unnamed(entries: list[dict]) -> ListDataset:
        return ListDataset([{k: v for k, v in e.items() if k != "item_id"} for e in entries], freq="h")

    entries = hourly_entries(ids=("a", "b"))
    predictor = TsrecEstimator("dlinear", prediction_length=H, **TINY).train(unnamed(entries))
    assert predictor.forecaster.panel.item_ids == ("0", "1")
    forecasts = list(predictor.predict(unnamed(entries)))
    assert [f.item_id for f in forecasts] == [None, None]
    assert not np.allclose(forecasts[0].mean, forecasts[1].mean)
    single = TsrecEstimator("dlinear", prediction_length=H, **TINY).train(unnamed(entries[:1]))
    assert len(list(single.predict(unnamed(entries[:1] * 3)))) == 3
    again = list(predictor.predict(unnamed(entries * 2)))  # positions 2 and 3: series new to the model
    assert len(again) == 4 and all(np.isfinite(f.mean).all() for f in again)
    np.testing.assert_allclose(again[0].mean, forecasts[0].mean)


def test_validation_data_picks_the_best_epoch() -> None:
    from tsrec.interop.gluonts import TsrecEstimator

    full, train = datasets()
    predictor = TsrecEstimator("dlinear", prediction_length=H, **TINY).train(train, validation_data=full)
    assert predictor.forecaster.training_summary.best_epoch in (1, 2)


def test_serialize_round_trip(quantile_predictor, tmp_path) -> None:
    from gluonts.model.predictor import Predictor

    from tsrec.interop.gluonts import TsrecPredictor

    quantile_predictor.serialize(tmp_path)
    loaded = Predictor.deserialize(tmp_path, device="cpu")
    assert isinstance(loaded, TsrecPredictor) and loaded.forecaster.trainer_kwargs["accelerator"] == "cpu"
    full, _ = datasets()
    for before, after in zip(quantile_predictor.predict(full), loaded.predict(full)):
        np.testing.assert_allclose(after.forecast_array, before.forecast_array)
        assert (after.start_date, after.item_id) == (before.start_date, before.item_id)


def test_wrapping_a_forecaster_with_other_column_names() -> None:
    from tsrec import Forecaster
    from tsrec.interop.gluonts import TsrecPredictor

    full, train = datasets()
    frame = to_tsrec_frame(train).rename(columns={"item_id": "site", "timestamp": "time", "target": "load"})
    forecaster = Forecaster("dlinear", prediction_length=H, output="normal", **TINY)
    forecaster.fit(frame, id_col="site", time_col="time", target_col="load")
    forecasts = list(TsrecPredictor(forecaster).predict(full, num_samples=3))
    assert [f.samples.shape for f in forecasts] == [(3, H), (3, H)]


def test_multivariate_entries_are_refused(quantile_predictor) -> None:
    from tsrec.interop.gluonts import TsrecEstimator

    multivariate = [{"start": pd.Period("2021-01-01 00:00", "h"), "target": np.ones((2, 60)), "item_id": "m"}]
    with pytest.raises(ValueError, match=r"entry 0 of training_data \(item_id 'm'\) has a multivariate target"):
        TsrecEstimator("dlinear", prediction_length=H, **TINY).train(multivariate)
    full, _ = datasets()
    with pytest.raises(ValueError, match=r"entry 2 of the dataset .* shape \(2, 60\); .* forecast univariate"):
        list(quantile_predictor.predict([*full, *multivariate]))


def test_frequency_errors(quantile_predictor) -> None:
    from gluonts.dataset.common import ListDataset

    from tsrec.interop.gluonts import TsrecEstimator

    with pytest.raises(ValueError, match="invalid freq 'fortnightly'"):
        TsrecEstimator("dlinear", prediction_length=H, freq="fortnightly")
    timestamps = ListDataset(hourly_entries(), freq="h", use_timestamp=True)
    with pytest.raises(ValueError, match=r"not a pandas Period; pass freq=\.\.\."):
        TsrecEstimator("dlinear", prediction_length=H, **TINY).train(timestamps)
    daily = ListDataset(hourly_entries(), freq="D")
    with pytest.raises(ValueError, match="periods of frequency 'D', which freq='h' does not match"):
        list(quantile_predictor.predict(daily))
    assert len(list(quantile_predictor.predict(timestamps))) == 2  # timestamps are read at the fitted freq


@pytest.mark.parametrize(
    ("model", "options", "match"),
    [
        ("dlinear", {"output": "point"}, r"output='point' forecasts a mean only and has no conformal calibration.*"
                                         r"'Forecast contains NaN values'.*conformal_windows=<k>"),
        ("seasonal_naive", {}, "'seasonal_naive' is not trained and has no conformal calibration.*conformal_windows"),
        ("auto", {"conformal_windows": 0}, "'auto' is not trained and has no conformal calibration"),
    ],
)
def test_point_forecasters_without_a_calibration_are_refused(model, options, match) -> None:
    from tsrec.interop.gluonts import TsrecEstimator

    with pytest.raises(ValueError, match=match):
        TsrecEstimator(model, prediction_length=H, **options)


# ------------------------------------------------------------------ the default: auto's conformal quantiles
@pytest.fixture(scope="module")
def auto_predictor():
    """TsrecEstimator() on two hourly series of different noise (statistical candidates: too few windows
    for networks), calibrated at train."""
    from gluonts.dataset.common import ListDataset

    from tsrec.interop.gluonts import TsrecEstimator

    entries = hourly_entries()
    entries[1]["target"] = 10 + 4 * (entries[1]["target"] - 10)  # b: four times a's spread
    train = ListDataset([{**entry, "target": entry["target"][:-H]} for entry in entries], freq="h")
    return TsrecEstimator(prediction_length=H, seed=0).train(train), ListDataset(entries, freq="h")


def test_the_default_estimator_is_auto_with_its_conformal_bands_as_quantile_forecasts(auto_predictor) -> None:
    from gluonts.evaluation import Evaluator
    from gluonts.model.forecast import QuantileForecast

    from tsrec.interop.gluonts import QUANTILES, TsrecEstimator

    assert TsrecEstimator(prediction_length=H).forecaster.model_name == "auto"
    assert QUANTILES == tuple(Evaluator.default_quantiles)
    predictor, full = auto_predictor
    assert predictor.forecaster.calibration is not None and predictor.levels == (20.0, 40.0, 60.0, 80.0)
    forecasts = list(predictor.predict(full))
    expected = predictor.forecaster.predict(to_tsrec_frame(full), levels=[20, 40, 60, 80])
    assert expected.attrs["intervals"] == "conformal"
    widths = []
    for forecast, item_id in zip(forecasts, ["a", "b"]):
        assert isinstance(forecast, QuantileForecast) and forecast.item_id == item_id
        assert forecast.forecast_keys == [str(q) for q in QUANTILES] + ["mean"]
        rows = expected[expected.item_id == item_id]
        for q in QUANTILES:  # the bands of predict(levels=...), the median the mean
            np.testing.assert_allclose(forecast.quantile(q), rows["mean" if q == 0.5 else str(q)])
        np.testing.assert_allclose(forecast.quantile(0.1) + forecast.quantile(0.9), 2 * forecast.mean)
        assert (np.diff(forecast.forecast_array[:-1], axis=0) >= 0).all()
        widths.append(forecast.quantile(0.9) - forecast.quantile(0.1))
    assert (widths[1] > 2 * widths[0]).all()  # calibrated per item: b's band is wider


def test_the_default_scores_in_gluonts_evaluator_at_its_own_levels(auto_predictor) -> None:
    from gluonts.evaluation import make_evaluation_predictions

    from tsrec.interop.gluonts import TsrecPredictor

    predictor, full = auto_predictor
    custom = TsrecPredictor(predictor.forecaster, quantiles=[0.05, 0.5, 0.95])
    forecasts, series = make_evaluation_predictions(full, custom)
    forecasts = list(forecasts)
    assert forecasts[0].forecast_keys == ["0.05", "0.5", "0.95", "mean"]
    agg, _ = evaluate_at(forecasts, series, (0.05, 0.5, 0.95))
    assert np.isfinite(agg["MASE"]) and 0 <= agg["Coverage[0.05]"] <= agg["Coverage[0.95]"] <= 1


def evaluate_at(forecasts, series, quantiles) -> tuple[dict, pd.DataFrame]:
    from gluonts.evaluation import Evaluator

    return Evaluator(quantiles=quantiles, num_workers=0)(series, forecasts)


def test_quantiles_a_calibration_cannot_give_and_bad_quantiles_are_refused(auto_predictor) -> None:
    from tsrec.interop.gluonts import TsrecEstimator, TsrecPredictor

    predictor, _ = auto_predictor
    top = predictor.forecaster.calibration.max_level()
    q = (100 - (top + 0.5 * (100 - top))) / 200  # a band beyond the calibration's reach
    ends = rf"quantiles {q:g} and .* are the ends of the .*% conformal interval: .*conformal_windows"
    with pytest.raises(ValueError, match=ends):
        TsrecPredictor(predictor.forecaster, quantiles=[q, 0.5, 1 - q])
    for bad in ([0.0, 0.5], [50], ["x"]):
        with pytest.raises(ValueError, match="quantiles must be"):
            TsrecEstimator(prediction_length=H, quantiles=bad)


def test_auto_takes_no_validation_data(auto_predictor) -> None:
    from tsrec.interop.gluonts import TsrecEstimator

    _, full = auto_predictor
    with pytest.raises(ValueError, match=r"TsrecEstimator\('auto'\) .* takes no validation_data"):
        TsrecEstimator(prediction_length=H).train(full, validation_data=full)


def test_a_calibrated_statistical_model_and_the_serialized_quantiles(auto_predictor, tmp_path) -> None:
    from gluonts.model.predictor import Predictor

    from tsrec.interop.gluonts import TsrecEstimator

    _, full = auto_predictor
    train = [{**entry, "target": entry["target"][:-H]} for entry in full]
    predictor = TsrecEstimator("seasonal_naive", prediction_length=H, conformal_windows=20,
                               quantiles=(0.1, 0.5, 0.9)).train(train, )
    predictor.serialize(tmp_path)
    loaded = Predictor.deserialize(tmp_path)
    assert loaded.quantiles == (0.1, 0.5, 0.9)
    for before, after in zip(predictor.predict(full), loaded.predict(full)):
        assert after.forecast_keys == ["0.1", "0.5", "0.9", "mean"]
        np.testing.assert_allclose(after.forecast_array, before.forecast_array)


def test_predictor_argument_errors() -> None:
    from tsrec import Forecaster
    from tsrec.interop.gluonts import TsrecPredictor

    with pytest.raises(TypeError, match="wraps a fitted tsrec Forecaster, got str"):
        TsrecPredictor("dlinear")
    with pytest.raises(ValueError, match="not fitted"):
        TsrecPredictor(Forecaster("dlinear", prediction_length=H, output="quantile"))
    index = pd.date_range("2021-01-01", periods=60, freq="h")
    frame = pd.DataFrame({"x": np.arange(60.0), "y": np.ones(60)}, index=index)
    wide = Forecaster("dlinear", prediction_length=H, output="quantile", **TINY).fit(frame)
    with pytest.raises(ValueError, match="fitted on a wide frame"):
        TsrecPredictor(wide)


# ------------------------------------------------------------- anchored frequencies round-trip
WEEKS = ("W", "W-SUN", "W-MON", "W-TUE", "W-WED", "W-THU", "W-FRI", "W-SAT")
ANCHORED = (*WEEKS, "M", "Q", "A", "D", "B", "h", "Q-NOV", "Y-JUN")


def anchored_dataset(freq: str, length: int = 40):
    """A GluonTS user's dataset at ``freq``: ``ListDataset`` turns the string start into a period."""
    from gluonts.dataset.common import ListDataset

    with pytest.warns(FutureWarning) if freq == "A" else contextlib.nullcontext():  # pandas: 'A' is deprecated
        return ListDataset([{"start": "2001-01-01", "target": 5 + np.sin(np.arange(length)), "item_id": "a"}],
                           freq=freq)


@pytest.mark.parametrize("freq", ANCHORED)
def test_estimator_round_trips_every_anchor(freq: str) -> None:
    """Train on a dataset, forecast the same dataset: the forecast starts at GluonTS's next period
    (a weekly dataset was refused: its Monday-labelled timestamps read as 'W-MON' weeks)."""
    from tsrec.interop.gluonts import TsrecEstimator

    dataset = anchored_dataset(freq)
    start = dataset[0]["start"]
    predictor = TsrecEstimator("dlinear", prediction_length=2, context_length=8, max_epochs=1,
                               trainer_kwargs={"enable_progress_bar": False}).train(dataset)
    forecast = next(iter(predictor.predict(dataset)))
    assert forecast.start_date == start + 40
    assert forecast.start_date.freqstr == start.freqstr


@pytest.mark.parametrize("freq", ANCHORED)
def test_converters_keep_the_periods_of_every_anchor(freq: str) -> None:
    """to_tsrec_frame then from_tsrec_frame gives the same periods: a week keeps the day it ends."""
    dataset = anchored_dataset(freq)
    start = dataset[0]["start"]
    frame = to_tsrec_frame(dataset)
    if isinstance(start.freq, pd.offsets.Week):  # pandas labels a week by the day it ends
        assert frame.timestamp[0] == start.end_time.normalize()
    back = from_tsrec_frame(frame, **LONG)[0]["start"]
    assert back == start and back.freqstr[0] == start.freqstr[0]
    # read at a freq of the same span: one step in each period, whatever its anchor's name
    assert len(to_tsrec_frame(dataset, freq=pd.infer_freq(frame.timestamp))) == 40
