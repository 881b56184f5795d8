"""Conformal intervals: the finite-sample rank, coverage of a known distribution, calibration at
fit and its save/load, ``predict(levels=...)`` on every kind of model, and auto with covariates."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

import tsrec.auto
from tsrec import Forecaster
from tsrec.config import ConformalConfig
from tsrec.conformal import MAX_KEPT, band_quantiles, calibrate, check_interval_levels, default_windows
from tsrec.evaluation import backtest

QUIET = {"enable_progress_bar": False, "logger": False}
H = 6


def noisy(n=24 * 12, sigmas=(0.5, 2.0, 8.0), seed=0):
    """A long hourly frame: series around a daily cycle with white noise of each ``sigma``."""
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    return pd.concat([pd.DataFrame({"id": f"s{k}", "ds": pd.date_range("2024-01-01", periods=n, freq="h"),
                                    "y": 100 + 10 * k + 3 * sigma * np.sin(2 * np.pi * t / 24)
                                    + sigma * rng.standard_normal(n)})
                      for k, sigma in enumerate(sigmas)], ignore_index=True)


COLS = dict(id_col="id", time_col="ds", target_col="y")


def _calibration(scores: np.ndarray, scorer: str = "absolute"):
    """The calibration of ``scores`` ``[H, n]`` as the residuals of a zero forecast of one series."""
    n_steps, n = scores.shape
    truth = scores.T[:, :, None]  # [W=n, H, 1]
    return calibrate(np.zeros_like(truth), truth, np.ones(truth.shape, bool), np.ones((n, 1)), np.ones((1, 1)), n, 1,
                     ConformalConfig(scores=scorer), 0.0)


def test_the_band_is_the_finite_sample_rank_not_the_empirical_quantile():
    scores = np.tile(np.arange(1.0, 10.0), (2, 1))  # 9 residuals 1..9 per step
    calibration = _calibration(scores)
    # ceil((9 + 1) * 0.9) = 9th smallest, where the plain 90% quantile of 1..9 is 8.2
    assert calibration.width(90).tolist() == [9.0, 9.0] and np.quantile(np.arange(1, 10), 0.9) < 9
    assert calibration.width(80).tolist() == [8.0, 8.0]  # ceil(10 * 0.8) = 8
    assert calibration.width(50).tolist() == [5.0, 5.0]
    with pytest.raises(ValueError, match=r"a 95% conformal interval needs at least 19 calibration residuals per "
                                         r"horizon step; this model has 9 .* levels up to 90.0%"):
        calibration.width(95)
    assert calibration.max_level() == pytest.approx(90.0)


def test_many_residuals_keep_ranks_that_never_narrow_the_band():
    n = 5 * MAX_KEPT
    calibration = _calibration(np.arange(1.0, n + 1)[None, ::-1].copy())  # one step, 1..n unsorted
    assert calibration.order.shape == (1, MAX_KEPT) and calibration.counts.tolist() == [n]
    for level in (50, 80, 90, 95, 99):
        exact = math.ceil((n + 1) * level / 100)  # the exact rank's value is the rank itself
        assert exact <= calibration.width(level)[0] <= exact + n / MAX_KEPT


def test_coverage_of_a_known_distribution_is_the_level_within_sampling_error():
    """Gaussian residuals: 400 independent calibrations (one per horizon step) of n = 99 each, every
    one tested on 2,000 new draws. Split conformal's coverage averages k / (n + 1) exactly, with
    k = ceil((n + 1) level); the plain empirical quantile's would fall short by about 1 / (n + 1)."""
    rng = np.random.default_rng(0)
    steps, n, fresh = 400, 99, 2000
    calibration = _calibration(np.abs(rng.standard_normal((steps, n))))
    new = np.abs(rng.standard_normal((steps, fresh)))
    for level in (80, 90, 95):
        covered = (new <= calibration.width(level)[:, None]).mean(axis=1)  # [steps]
        expected = math.ceil((n + 1) * level / 100) / (n + 1)
        error = covered.std(ddof=1) / math.sqrt(steps)  # the spread of coverage over calibrations
        assert abs(covered.mean() - expected) < 4 * error, (level, covered.mean(), expected, error)
        assert covered.mean() > level / 100 - 4 * error


def test_interval_levels_are_percentages_and_bad_ones_say_so():
    assert check_interval_levels([90, 80]) == (80.0, 90.0) and band_quantiles([80, 90]) == (0.05, 0.1, 0.9, 0.95)
    for bad, message in (([0.8, 0.9], "levels are percentages"), ([80, 80], "distinct percentages"),
                         ([100], "strictly between 0 and 100"), (["x"], "in percent")):
        with pytest.raises(ValueError, match=message):
            check_interval_levels(bad)
    with pytest.raises(ValueError, match="conformal_windows must be an integer >= 0"):
        Forecaster("seasonal_naive", prediction_length=H, conformal_windows=-1)
    with pytest.raises(ValueError, match=r"conformal_scores must be one of \('scaled', 'absolute'\)"):
        Forecaster("seasonal_naive", prediction_length=H, conformal_scores="relative")
    assert default_windows(1) == 30 and default_windows(10) == 10 and default_windows(1000) == 2
    with pytest.raises(ValueError, match=r"item 's0' is too short to calibrate intervals on 300 windows of 6 steps "
                                         r"\(288 observed steps\): pass conformal_windows=<fewer>"):
        Forecaster("seasonal_naive", prediction_length=H, conformal_windows=300).fit(noisy(), **COLS)


def test_scaled_calibration_gives_each_series_its_own_width_and_covers_new_data():
    """Three series whose noise differs 16-fold share one calibration (scores divided by each
    series' scale); on the next 10 days each series' 90% band holds about 90% of the truths."""
    df = noisy(n=24 * 22)
    fit_part = df.groupby("id").head(24 * 12)
    f = Forecaster("seasonal_naive", prediction_length=H, conformal_windows=30).fit(fit_part, **COLS)
    assert f.calibration.counts.tolist() == [90] * H and f.calibration.scores == "scaled"
    forecast = f.predict(levels=[90])
    half = (forecast["0.95"] - forecast["0.05"]).groupby(forecast["item_id"]).mean() / 2
    assert 8 < half["s2"] / half["s0"] < 32  # 16x the noise: about 16x the band
    result = backtest(f, df, start=24 * 12, stride=1, baselines=("naive",), levels=[90], **COLS)
    per_series = result.intervals.set_index("item_id")
    assert per_series.method.eq("conformal").all() and (per_series.level == 90).all()
    # 240 windows per series, their steps correlated: 3 points of slack beyond 2 standard errors
    assert (abs(per_series.coverage - 0.90) < 0.08).all(), per_series
    assert result.metric("interval_coverage_90", "fraction") == pytest.approx(0.90, abs=0.04)


def test_calibration_is_saved_with_the_model_and_loads_back(tmp_path):
    df = noisy()
    f = Forecaster("seasonal_naive", prediction_length=H, conformal_windows=8).fit(df, **COLS)
    expected = f.predict(levels=[80, 90])
    f.save(tmp_path / "m")
    meta = json.loads((tmp_path / "m" / "forecaster.json").read_text())
    # 10: the series are never negative (their floor); a calibration that neither pools nor learns adds nothing
    assert meta["format_version"] == 10 and meta["conformal"]["windows"] == 8
    assert meta["settings"]["conformal"] == {"windows": 8, "scores": "scaled"}
    loaded = Forecaster.load(tmp_path / "m")
    assert loaded.settings.conformal == ConformalConfig(windows=8)
    np.testing.assert_array_equal(loaded.calibration.order, f.calibration.order)
    np.testing.assert_array_equal(loaded.calibration.scale, f.calibration.scale)
    pd.testing.assert_frame_equal(loaded.predict(levels=[80, 90]), expected)
    assert loaded.predict(levels=[80]).attrs == {"intervals": "conformal", "levels": [80.0], "floored": 0}
    plain = Forecaster("seasonal_naive", prediction_length=H, nonnegative=False).fit(df, **COLS)
    plain.save(tmp_path / "p")  # no calibration and no floor: the format older tsrec reads
    assert json.loads((tmp_path / "p" / "forecaster.json").read_text())["format_version"] == 7
    assert Forecaster.load(tmp_path / "p").calibration is None


@pytest.mark.parametrize("model", ["ets", "theta"])
def test_statistical_models_give_conformal_intervals(model):
    pytest.importorskip("statsforecast")
    df = noisy(n=24 * 8, sigmas=(1.0, 3.0))
    f = Forecaster(model, prediction_length=H, conformal_windows=5).fit(df, **COLS)
    forecast = f.predict(levels=[80])
    assert list(forecast.columns) == ["item_id", "timestamp", "mean", "0.1", "0.9"]
    assert (forecast["0.1"] < forecast["mean"]).all() and (forecast["mean"] < forecast["0.9"]).all()
    assert forecast.attrs["intervals"] == "conformal" and f.calibration.cpu_seconds > 0
    with pytest.raises(ValueError, match="up to 90.9%"):  # 10 residuals per step
        f.predict(levels=[95])


def test_a_point_network_is_calibrated_on_request_and_a_quantile_network_keeps_its_own(tmp_path):
    df = noisy(n=24 * 10, sigmas=(1.0, 2.0))
    options = dict(prediction_length=H, max_steps=10, d_model=16, d_ff=32, e_layers=1, trainer_kwargs=QUIET)
    point = Forecaster("patchtst", **options).fit(df, **COLS)
    with pytest.raises(ValueError, match=r"fitted without a conformal calibration and forecasts points only.*"
                                         r"conformal_windows=<k>"):
        point.predict(levels=[80])
    calibrated = Forecaster("patchtst", conformal_windows=10, **options).fit(df, **COLS)
    assert calibrated.predict(levels=[80]).attrs["intervals"] == "conformal"
    quantile = Forecaster("patchtst", output="quantile", quantile_levels=(0.1, 0.5, 0.9), **options).fit(df, **COLS)
    own = quantile.predict(levels=[80])
    assert own.attrs["intervals"] == "model"
    pd.testing.assert_frame_equal(own, quantile.predict(quantiles=[0.1, 0.9]), check_like=True, check_exact=True)
    both = Forecaster("patchtst", output="quantile", quantile_levels=(0.1, 0.5, 0.9), conformal_windows=10,
                      **options).fit(df, **COLS)
    assert both.predict(levels=[80]).attrs["intervals"] == "conformal"  # calibrated: conformal by default
    mine = both.predict(levels=[80], intervals="model")
    np.testing.assert_allclose(mine[["0.1", "0.9"]], both.predict(quantiles=[0.1, 0.9])[["0.1", "0.9"]])
    with pytest.raises(ValueError, match="pass levels=\\[...\\] or quantiles=\\[...\\]"):
        both.predict(levels=[80], quantiles=[0.5])


def test_auto_calibrates_its_ensemble_by_default_at_the_cost_of_forecasts_only():
    df = noisy(n=24 * 10)
    f = Forecaster(prediction_length=H, candidates=("theta", "seasonal_naive"), trainer_kwargs=QUIET).fit(df, **COLS)
    calibration = f.calibration
    # 3 series -> 5 validation windows of 6 steps: origins one step apart over them (25 per series), the
    # scores of the 6 steps pooled (75 each) and learning after the fit
    assert (calibration.windows, calibration.stride) == (25, 1) and calibration.counts.tolist() == [450] * H
    assert calibration.profile.shape == (H,) and calibration.update == "rolling" and calibration.rolling == 100
    forecast = f.predict(levels=[80, 95])
    assert forecast.attrs["intervals"] == "conformal"
    assert (forecast["0.025"] < forecast["0.1"]).all() and (forecast["0.9"] < forecast["0.975"]).all()
    off = Forecaster(prediction_length=H, candidates=("theta", "seasonal_naive"), conformal_windows=0).fit(df, **COLS)
    assert off.calibration is None
    # the selection reads the same windows one horizon apart whatever the calibration's stride
    pd.testing.assert_frame_equal(off.leaderboard[["model", "val_score", "weight"]],
                                  f.leaderboard[["model", "val_score", "weight"]])


def test_auto_gives_covariates_to_the_candidates_that_take_them(monkeypatch):
    """A target driven by a known future covariate: the network reads it (and forecasts far better
    than the statistical models, which see the target alone, as the leaderboard says)."""
    monkeypatch.setattr(tsrec.auto, "MIN_NETWORK_WINDOWS", 0)
    n, rng = 24 * 12, np.random.default_rng(0)
    df = pd.concat([pd.DataFrame({"id": i, "ds": pd.date_range("2024-01-01", periods=n, freq="h"),
                                  "promo": (x := rng.standard_normal(n)),
                                  "y": 5 + 3 * x + 0.1 * rng.standard_normal(n)})
                    for i in "abc"], ignore_index=True)
    fit_part, future = df.groupby("id").head(n - H), df.groupby("id").tail(H)
    f = Forecaster("auto", candidates=("ets", "seasonal_naive", "dlinear"), prediction_length=H, max_steps=200,
                   trainer_kwargs=QUIET).fit(fit_part, future_covariates=["promo"], **COLS)
    board = f.leaderboard.set_index("model")
    assert board.loc["dlinear", "covariates"] == "future: promo"
    assert (board.loc[["ets", "seasonal_naive"], "covariates"] ==
            "none: scored on the targets alone (no covariate support)").all()
    assert board.loc["dlinear", "val_score"] < 0.5 * board.loc[["ets", "seasonal_naive"], "val_score"].min()
    with pytest.raises(ValueError, match="future covariates"):
        f.predict()
    forecast = f.predict(future_covariates=future[["id", "ds", "promo"]], levels=[80])
    assert np.abs(forecast["mean"].to_numpy() - future["y"].to_numpy()).mean() < 1.0  # the covariate's effect: 3
    assert forecast.attrs["intervals"] == "conformal"
