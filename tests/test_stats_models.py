"""The free statistical baselines inside tsrec: ``ets`` and ``theta`` (statsforecast, the optional
extra ``tsrec[stats]``), their seasons, and the backtest's skill table against them."""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
import pytest

from tsrec import Forecaster
from tsrec.cli import main
from tsrec.evaluation import backtest
from tsrec.models.stats import fill_context

statsforecast = pytest.importorskip("statsforecast.models", reason="the stats extra: pip install 'tsrec[stats]'")

H = 6


def positive_seasonal(n=24 * 12, seed=0, channels=("load",)):
    """Positive hourly series with a daily cycle whose amplitude grows with the level (where AutoETS
    may pick multiplicative components, which it can only on positive values)."""
    t = np.arange(n)
    rng = np.random.default_rng(seed)
    level = 20 + 0.02 * t
    return pd.DataFrame({name: level * (1 + 0.2 * np.sin(2 * np.pi * t / 24 + k)) + rng.standard_normal(n)
                         for k, name in enumerate(channels)},
                        index=pd.date_range("2024-01-01", periods=n, freq="h"))


@pytest.mark.parametrize(("name", "reference"), [("ets", "AutoETS"), ("theta", "AutoTheta")])
def test_forecasts_are_statsforecasts_on_the_original_values(name, reference):
    df = positive_seasonal(channels=("a", "b"))
    f = Forecaster(name, prediction_length=H, context_length=120).fit(df)
    assert f.resolved_settings.network.season_length == 24  # the daily cycle found in the data
    forecast = f.predict()
    for column in ("a", "b"):
        model = getattr(statsforecast, reference)(season_length=24)
        expected = model.forecast(y=df[column].to_numpy()[-120:], h=H)["mean"]
        got = forecast[forecast.item_id == column]["mean"].to_numpy()
        np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_the_default_context_is_ten_seasons_capped_by_the_history():
    df = positive_seasonal()
    assert Forecaster("ets", prediction_length=H).fit(df).context_length == 240  # 10 daily cycles
    short = df.iloc[:150]  # the validation windows take the last 15 steps and a horizon more
    f = Forecaster("theta", prediction_length=H).fit(short)
    assert f.context_length == 150 - H - (H + (15 - H + 1) - 1) == f.resolved_settings.window.context_length
    assert Forecaster("dlinear", prediction_length=H, max_epochs=1).fit(short).context_length == 2 * H


def test_save_load_and_the_cli(tmp_path):
    df = positive_seasonal()
    f = Forecaster("theta", prediction_length=H, context_length=96).fit(df)
    f.save(tmp_path / "m")
    pd.testing.assert_frame_equal(Forecaster.load(tmp_path / "m").predict(), f.predict())
    df.rename_axis("date").reset_index().to_csv(tmp_path / "data.csv", index=False)
    assert main(["fit", "--data", str(tmp_path / "data.csv"), "--model", "ets", "--prediction-length", str(H),
                 "--output", str(tmp_path / "cli")]) == 0
    assert main(["predict", "--model-dir", str(tmp_path / "cli"), "--output", str(tmp_path / "fc.csv")]) == 0
    assert len(pd.read_csv(tmp_path / "fc.csv")) == H


def test_missing_values_in_the_context_are_filled_from_the_last_observation():
    values = np.array([9.0, 1.0, 2.0, 9.0, 9.0, 5.0])
    observed = np.array([False, True, True, False, False, True])
    np.testing.assert_array_equal(fill_context(values, observed), [1.0, 1.0, 2.0, 2.0, 2.0, 5.0])
    assert fill_context(values, np.zeros(6, bool)) is None


def test_a_context_statsforecast_cannot_fit_gets_its_last_value_and_a_warning():
    df = positive_seasonal(n=40)
    f = Forecaster("ets", prediction_length=2, context_length=3, season_length=1, val_windows=0).fit(df)
    with pytest.warns(UserWarning, match="could not be fitted on a context of 3 steps.*last value"):
        forecast = f.predict()
    np.testing.assert_allclose(forecast["mean"], df["load"].iloc[-1])


def test_without_statsforecast_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "statsforecast", None)
    for name in ("ets", "theta"):
        with pytest.raises(ModuleNotFoundError, match=r"pip install \"tsrec\[stats\]\""):
            Forecaster(name, prediction_length=H)
    fitted = Forecaster("seasonal_naive", prediction_length=H, context_length=48).fit(positive_seasonal())
    with pytest.raises(ModuleNotFoundError, match=r"tsrec\[stats\]"):
        backtest(fitted, positive_seasonal(), baselines=("naive", "ets"))
    skill = backtest(fitted, positive_seasonal()).skill  # the default leaves them out
    assert list(skill.baseline) == ["naive", "seasonal_naive"]


def test_the_skill_table_scores_the_model_against_ets_and_theta():
    df = positive_seasonal()
    f = Forecaster("seasonal_naive", prediction_length=H, context_length=48).fit(df.iloc[:-2 * H])
    result = backtest(f, df, n_windows=2)
    skill = result.skill.set_index("baseline")
    assert list(skill.index) == ["naive", "seasonal_naive", "ets", "theta"]
    assert (skill["season"] == [1, 24, 24, 24]).all() and (skill["note"] == "").all()
    # the ets column's first window: AutoETS fitted on all the history before the first origin
    # (later windows carry that fit forward: tests/test_evaluation.py checks them against statsforecast)
    errors = result.errors
    first = errors[(errors.item_id == "load") & (errors.origin == errors.origin.min())].sort_values("step")
    origin = len(df) - 2 * H
    expected = statsforecast.AutoETS(season_length=24).forecast(y=df["load"].to_numpy()[:origin], h=H)
    np.testing.assert_allclose(first["y_ets"], expected["mean"], rtol=1e-9)
    ratio = skill.loc["ets", "model_mse"] / skill.loc["ets", "baseline_mse"]
    assert skill.loc["ets", "mse_ratio"] == pytest.approx(ratio)
    assert result.metric("mse_ratio_theta", "ratio") == pytest.approx(skill.loc["theta", "mse_ratio"])


def test_a_dropped_season_is_said_at_fit_and_in_the_skill_table():
    rng = np.random.default_rng(0)
    noise = pd.DataFrame({"y": 10 + rng.standard_normal(300)}, index=pd.date_range("2024", periods=300, freq="h"))
    with pytest.warns(UserWarning, match="season_length is 1 .*no cycle stood out"):
        f = Forecaster("seasonal_naive", prediction_length=H, context_length=24).fit(noise)
    skill = backtest(f, noise, baselines=("naive", "seasonal_naive", "theta")).skill.set_index("baseline")
    assert skill.loc["seasonal_naive", "note"] == "no season: no cycle stood out in the training part"
    assert np.isnan(skill.loc["seasonal_naive", "mse_ratio"]) and skill.loc["theta", "season"] == 1
    assert skill.loc["theta", "note"].startswith("fitted without a season: no cycle stood out")
    cycle = positive_seasonal()
    with pytest.warns(UserWarning, match=r"24 steps, needs context_length >= 2 x 24 = 48 \(it is 30\)"):
        Forecaster("ets", prediction_length=H, context_length=30).fit(cycle)


def test_a_network_called_directly_forecasts_the_values_it_is_given():
    """``forecast`` (values taken as they are) and ``forward`` on a batch without scaler statistics
    agree with statsforecast on the same values."""
    import torch

    from tsrec.models import build_model

    y = positive_seasonal()["load"].to_numpy()[-96:]
    model = build_model("theta", context_length=96, prediction_length=H, n_channels=1, n_time_features=0,
                        season_length=24)
    past = torch.tensor(y, dtype=torch.float64).view(1, 96, 1)
    expected = statsforecast.AutoTheta(season_length=24).forecast(y=y, h=H)["mean"]
    np.testing.assert_allclose(model.forecast(past, past[..., :0], past[:, :H, :0])[0, :, 0, 0], expected, rtol=1e-9)
    np.testing.assert_allclose(model({"past_target": past})[0, :, 0], expected, rtol=1e-9)
