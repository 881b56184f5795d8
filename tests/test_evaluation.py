"""Rolling-origin backtests: window arithmetic, agreement with predict, refits without leakage, metrics."""

import numpy as np
import pandas as pd
import pytest
from sklearn.exceptions import NotFittedError

from tsrec import Forecaster
from tsrec.evaluation import backtest

# the naive baselines only: ets and theta would cost a statsforecast fit per window
NAIVE = ("naive", "seasonal_naive")

TRAIN = dict(max_epochs=1, batch_size=64, trainer_kwargs={"enable_progress_bar": False, "logger": False})


def frame(n=300, seed=0):
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    return pd.DataFrame({"a": np.sin(2 * np.pi * t / 24) + 0.1 * rng.standard_normal(n) + 3,
                         "b": np.cos(2 * np.pi * t / 12) + 0.1 * rng.standard_normal(n)},
                        index=pd.date_range("2024-01-01", periods=n, freq="h"))


@pytest.fixture(scope="module")
def fitted():
    return Forecaster("dlinear", prediction_length=6, context_length=24, **TRAIN).fit(frame().iloc[:200])


def test_rolling_windows_match_predict_on_the_history(fitted):
    df = frame()
    # 7 does not divide the window count
    result = backtest(fitted, df, start=210, stride=5, batch_size=7, baselines=NAIVE)
    origins = sorted(result.errors.origin.unique())
    assert len(origins) == len(range(210, 300 - 6 + 1, 5)) == 17
    assert origins[0] == df.index[210] and origins[-1] == df.index[290]
    assert len(result.errors) == 17 * 6 * 2
    last = result.errors[result.errors.origin == origins[-1]]
    direct = fitted.predict(df.iloc[:290])
    for item in ("a", "b"):
        np.testing.assert_allclose(last[last.item_id == item].y_pred.values,
                                   direct[direct.item_id == item]["mean"].values, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(last[last.item_id == item].y_true.values, df[item].values[290:296], rtol=1e-6)


def test_default_is_the_last_windows_ending_at_the_end(fitted):
    df = frame()
    result = backtest(fitted, df, n_windows=3, baselines=NAIVE)
    assert sorted(result.errors.origin.unique()) == list(df.index[[282, 288, 294]])
    assert result.errors.timestamp.max() == df.index[-1]


def test_metrics_are_labelled_and_consistent(fitted):
    result = backtest(fitted, frame(), start=200, stride=1, baselines=NAIVE)
    e = result.errors
    assert result.metric("mse", "original") == pytest.approx(float(np.mean((e.y_true - e.y_pred) ** 2)))
    assert result.metric("mse", "scaled") == pytest.approx(float(np.mean((e.y_true_scaled - e.y_pred_scaled) ** 2)))
    assert set(result.summary.units) == {"original", "scaled", "scale-free", "ratio", "count"}
    assert result.metric("windows_without_forecast", "count") == 0
    assert {"mse", "mae", "rmse", "mase", "smape", "mse_ratio_naive", "mae_ratio_naive"} <= set(result.summary.metric)
    assert result.metric("mse_ratio_naive", "ratio") == pytest.approx(
        result.metric("mse", "scaled") / float(np.mean((e.y_true_scaled - e.y_naive_scaled) ** 2)))
    assert list(result.by_step.query("units == 'scaled'").step) == list(range(1, 7))


def test_seasonal_naive_is_exact_on_a_periodic_series():
    df = pd.DataFrame({"y": np.tile([1.0, 5.0, 2.0, 7.0], 30)}, index=pd.date_range("2024", periods=120, freq="D"))
    f = Forecaster("seasonal_naive", prediction_length=4, context_length=8, season_length=4).fit(df)
    result = backtest(f, df, start=8, stride=1, season_length=4, baselines=NAIVE)
    assert result.metric("mse", "original") == 0.0


def test_refit_uses_only_data_before_each_origin(monkeypatch):
    seen = []
    original_fit = Forecaster.fit

    def spy(self, df, **kwargs):
        seen.append(df.index.max())
        return original_fit(self, df, **kwargs)

    monkeypatch.setattr(Forecaster, "fit", spy)
    df = frame()
    f = Forecaster("dlinear", prediction_length=6, context_length=24, val_windows=0, **TRAIN)
    result = backtest(f, df, start=240, stride=6, refit_every=4, baselines=NAIVE)
    origins = sorted(result.errors.origin.unique())
    assert len(origins) == 10
    # blocks start at windows 0, 4, 8: each fit ends right before its block's first origin
    assert seen == [origins[0] - pd.Timedelta(hours=1), origins[4] - pd.Timedelta(hours=1),
                    origins[8] - pd.Timedelta(hours=1)]


def test_backtest_errors(fitted):
    with pytest.raises(ValueError, match="context_length=24"):
        backtest(fitted, frame(), start=10)
    with pytest.raises(ValueError, match="stride must be a positive int"):
        backtest(fitted, frame(), stride=0)
    with pytest.raises(NotFittedError, match="not fitted"):
        backtest(Forecaster("dlinear", prediction_length=6), frame())
    with pytest.raises(ValueError, match="not a timestamp"):
        backtest(fitted, frame(), start="1999-01-01")


def test_naive_baselines_are_the_last_observed_value_and_season():
    from tsrec.evaluation import naive_forecasts

    past = np.array([[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]]).reshape(1, 6, 1)
    observed = np.ones_like(past)
    observed[0, 5] = 0  # the last value is missing: the naive forecast repeats the one before
    naive, seasonal = naive_forecasts(past, observed, 4, season=3)
    assert naive[0, :, 0].tolist() == [5.0, 5.0, 5.0, 5.0]
    # y[T + h - 3 * ceil((h + 1) / 3)]: 4, 5, (6 missing), 4
    np.testing.assert_array_equal(seasonal[0, :, 0], [4.0, 5.0, np.nan, 4.0])
    assert np.isnan(naive_forecasts(past, observed, 2, season=None)[1]).all()


def test_backtest_scores_the_model_against_the_naive_forecasts_of_the_same_windows():
    t = np.arange(400)
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"y": np.sin(2 * np.pi * t / 12) + 0.05 * rng.standard_normal(400)},
                      index=pd.date_range("2024-01-01", periods=400, freq="h"))
    f = Forecaster("seasonal_naive", prediction_length=6, context_length=24).fit(df.iloc[:300])
    assert f.resolved_settings.network.season_length == 12  # the cycle found, not the calendar's 24
    result = backtest(f, df, start=300, stride=6, baselines=NAIVE)
    skill = result.skill.set_index("baseline")
    assert skill.loc["seasonal_naive", "season"] == 12
    assert skill.loc["seasonal_naive", "mse_ratio"] == pytest.approx(1.0)  # the model is that baseline
    assert skill.loc["naive", "mse_ratio"] < 0.1  # and beats the last value on a clean cycle
    e = result.errors
    assert skill.loc["naive", "baseline_mse"] == pytest.approx(float(np.mean((e.y_true_scaled - e.y_naive_scaled) ** 2)))
    assert result.metric("mse_ratio_seasonal_naive", "ratio") == pytest.approx(1.0)


def test_a_perfect_baseline_gives_an_infinite_ratio_not_an_error():
    """The last 6 steps are constant: the last value forecasts the last window perfectly, a season of
    8 steps (reaching back before the constant part) does not."""
    df = pd.DataFrame({"y": np.r_[np.sin(np.arange(134)), np.full(6, 2.0)]},
                      index=pd.date_range("2024-01-01", periods=140, freq="h"))
    f = Forecaster("seasonal_naive", prediction_length=4, context_length=8, season_length=8).fit(df.iloc[:120])
    skill = backtest(f, df, n_windows=1, baselines=("naive",)).skill.set_index("baseline")
    assert skill.loc["naive", "baseline_mse"] == 0 and skill.loc["naive", "mse_ratio"] == np.inf
