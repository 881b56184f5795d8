"""Probabilistic forecasts end to end: quantile and distribution outputs through fit, predict,
backtest (scored as GluonTS's Evaluator scores them), save and load, and the CLI."""

import warnings

import numpy as np
import pandas as pd
import pytest

from tsrec import Forecaster
from tsrec.cli import main
from tsrec.evaluation import backtest

# the naive baselines only: ets and theta would cost a statsforecast fit per series
NAIVE = ("naive", "seasonal_naive")

H, CONTEXT = 12, 48
QUIET = {"enable_progress_bar": False, "logger": False}
NOISE = 0.5


def noisy_cycle(n=24 * 40, seed=0):
    """Two hourly series: a daily cycle plus independent Gaussian noise of sd ``NOISE`` (the best
    0.1 / 0.9 quantiles are the cycle -/+ 1.28 NOISE), around very different levels."""
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    cycle = np.sin(2 * np.pi * t / 24)
    return pd.DataFrame({"a": 100 + 5 * cycle + 5 * NOISE * rng.standard_normal(n),
                         "b": -3 + cycle + NOISE * rng.standard_normal(n)},
                        index=pd.date_range("2024-01-01", periods=n, freq="h"))


def fit(output, data, **extra):
    # DLinear learns these series in a few hundred steps at 1e-2 (its default 1e-3 needs more epochs)
    return Forecaster("dlinear", prediction_length=H, context_length=CONTEXT, output=output, max_epochs=10,
                      learning_rate=1e-2, seed=0, trainer_kwargs=QUIET, **extra).fit(data)


@pytest.fixture(scope="module")
def data():
    return noisy_cycle()


@pytest.fixture(scope="module")
def quantile_model(data):
    return fit("quantile", data.iloc[:-H * 10])


@pytest.fixture(scope="module")
def studentt_model(data):
    return fit("studentt", data.iloc[:-H * 10])


def test_quantile_forecasts_are_named_ordered_and_in_original_units(quantile_model):
    fc = quantile_model.predict(quantiles=[0.1, 0.5, 0.9])
    assert list(fc.columns) == ["item_id", "timestamp", "mean", "0.1", "0.5", "0.9"]
    assert ((fc["0.1"] <= fc["0.5"]) & (fc["0.5"] <= fc["0.9"])).all()
    np.testing.assert_array_equal(fc["mean"], fc["0.5"])  # the median, as GluonTS's QuantileForecast
    width = (fc["0.9"] - fc["0.1"]).groupby(fc["item_id"]).mean()
    assert width["a"] == pytest.approx(5 * 2.56 * NOISE, rel=0.35)  # the noise's 0.1-0.9 interval
    assert width["b"] == pytest.approx(2.56 * NOISE, rel=0.35)
    with pytest.raises(ValueError, match=r"\[0.25\] were not trained"):
        quantile_model.predict(quantiles=[0.25])
    with pytest.raises(ValueError, match="no distribution to sample"):
        quantile_model.predict(num_samples=10)


def test_distribution_samples_and_quantiles_agree(studentt_model):
    fc = studentt_model.predict(quantiles=[0.1, 0.9], num_samples=400)
    samples = fc[[f"sample_{i}" for i in range(400)]].to_numpy()
    np.testing.assert_allclose(samples.mean(axis=1), fc["mean"], atol=0.5 * (fc["0.9"] - fc["0.1"]).max() / 4)
    inside = ((samples >= fc[["0.1"]].to_numpy()) & (samples <= fc[["0.9"]].to_numpy())).mean()
    assert inside == pytest.approx(0.8, abs=0.05)


def test_backtest_scores_quantiles_as_gluonts_evaluator_does(quantile_model, data):
    from gluonts.evaluation import Evaluator
    from gluonts.model.forecast import QuantileForecast

    levels = (0.1, 0.5, 0.9)
    result = backtest(quantile_model, data, n_windows=1, quantiles=levels, baselines=NAIVE)
    summary = result.summary.set_index(["metric", "units"])["value"]
    # calibrated on unseen windows
    many = backtest(quantile_model, data, n_windows=10, baselines=NAIVE).summary.set_index("metric")["value"]
    assert many["coverage_0.1"] == pytest.approx(0.1, abs=0.1) and many["coverage_0.9"] == pytest.approx(0.9, abs=0.1)

    series, forecasts = [], []
    for item, rows in result.errors.groupby("item_id", sort=False):
        start = pd.Period(rows["timestamp"].iloc[0], freq="h")
        history = data[item][data.index < rows["timestamp"].iloc[0]]
        index = pd.period_range(pd.Period(history.index[0], freq="h"), periods=len(history) + H, freq="h")
        series.append(pd.Series(np.concatenate([history.to_numpy(), rows["y_true"].to_numpy()]), index=index))
        forecasts.append(QuantileForecast(np.stack([rows[f"y_q{q}"].to_numpy() for q in levels]), start_date=start,
                                          forecast_keys=[str(q) for q in levels], item_id=item))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        agg, _ = Evaluator(quantiles=levels, num_workers=0)(series, forecasts, num_series=len(series))
    np.testing.assert_allclose(summary[("mean_wQuantileLoss", "scale-free")], agg["mean_wQuantileLoss"], rtol=1e-6)
    for q in levels:
        np.testing.assert_allclose(summary[(f"coverage_{q}", "fraction")], agg[f"Coverage[{q}]"], rtol=1e-6)
    n_entries = len(result.errors)
    np.testing.assert_allclose(summary[("crps", "original")], agg["mean_absolute_QuantileLoss"] / n_entries,
                               rtol=1e-6)


def test_save_and_load_keep_the_probabilistic_output(studentt_model, tmp_path):
    loaded = Forecaster.load(studentt_model.save(tmp_path / "m"))
    pd.testing.assert_frame_equal(loaded.predict(quantiles=[0.1, 0.9]), studentt_model.predict(quantiles=[0.1, 0.9]))


def test_a_point_model_has_no_quantiles(data):
    point = Forecaster("dlinear", prediction_length=H, context_length=CONTEXT, max_epochs=1,
                       trainer_kwargs=QUIET).fit(data)
    with pytest.raises(ValueError, match="output='point'"):
        point.predict(quantiles=[0.1])
    with pytest.raises(ValueError, match="output='point'"):
        backtest(point, data, quantiles=[0.1])


def test_cli_predicts_quantiles(data, tmp_path):
    data.rename_axis("date").reset_index().to_csv(tmp_path / "d.csv", index=False)
    assert main(["fit", "--data", str(tmp_path / "d.csv"), "--model", "dlinear", "--prediction-length", "6",
                 "--epochs", "1", "--option", "output=quantile", "--output", str(tmp_path / "m")]) == 0
    assert main(["predict", "--model-dir", str(tmp_path / "m"), "--output", str(tmp_path / "fc.csv"),
                 "--quantiles", "0.1", "0.9"]) == 0
    assert list(pd.read_csv(tmp_path / "fc.csv").columns) == ["item_id", "timestamp", "mean", "0.1", "0.9"]
