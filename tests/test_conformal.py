"""Conformal intervals: the finite-sample rank, coverage of a known distribution, calibration at
fit and its save/load, ``predict(levels=...)`` on every kind of model, and auto with covariates."""

from __future__ import annotations

import dataclasses
import json
import math
import re
import warnings

import numpy as np
import pandas as pd
import pytest

import tsrec.halving
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


def _calibration(scores: np.ndarray, scorer: str = "absolute", stride: int = 1, **config):
    """The calibration of ``scores`` ``[H, n]`` as the residuals of a zero forecast of one series."""
    n_steps, n = scores.shape
    truth = scores.T[:, :, None]  # [W=n, H, 1]
    return calibrate(np.zeros_like(truth), truth, np.ones(truth.shape, bool), np.zeros(n, np.int64), np.ones((1, 1)), n,
                     stride, ConformalConfig(scores=scorer, **config), 0.0)


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
    with pytest.raises(ValueError, match=r"conformal_windows=300 calibrates the intervals on each series' last 305 "
                                         r"observed steps.*too few: item 's\d' has 0 time steps before them \(288 "
                                         r"observed\), the most of any series. Pass conformal_windows=<fewer> \(at "
                                         r"most 276 here\)"):
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



def test_a_constant_series_band_is_in_its_own_units_not_one_data_unit(tmp_path):
    """A flat series has no one-step change to scale its scores by. Its band was the pooled score
    times 1, in the data's units whatever they were (a series at 5.0 got 2.4 to 7.6 at 80%). Now it
    is scaled by its own forecasts' errors: 0 where they were exact, and the other series' bands do
    not depend on its level. Saved and loaded, the zero scale gives the same bands."""
    varying = noisy(n=24 * 12)
    ds = varying["ds"].unique()

    def panel(level):
        return pd.concat([varying, pd.DataFrame({"id": "flat", "ds": ds, "y": level})], ignore_index=True)

    fits = {level: Forecaster("seasonal_naive", prediction_length=H, conformal_windows=8).fit(panel(level), **COLS)
            for level in (5.0, 5e6)}
    bands = {level: f.predict(levels=[80]).set_index(["item_id", "timestamp"]) for level, f in fits.items()}
    for level, band in bands.items():
        flat = band.loc["flat"]
        assert (flat["mean"] == level).all() and (flat["0.1"] == level).all() and (flat["0.9"] == level).all()
    pd.testing.assert_frame_equal(bands[5.0].drop(index="flat"), bands[5e6].drop(index="flat"))
    assert (fits[5.0].calibration.scale == 0).sum() == 1  # the flat series alone
    fits[5.0].save(tmp_path / "m")
    pd.testing.assert_frame_equal(Forecaster.load(tmp_path / "m").predict(levels=[80]).set_index(
        ["item_id", "timestamp"]), bands[5.0])



def test_a_series_constant_at_fit_that_moves_since_is_named_at_predict():
    """Its band keeps width 0 (its calibration saw no error): predict names it where the values it
    is given are no longer one value, and does not where they are, or where no band is asked for."""
    rng = np.random.default_rng(0)
    ds = pd.date_range("2022-01-01", periods=260, freq="D")
    df = pd.concat([pd.DataFrame({"id": "a", "ds": ds, "y": 50 + rng.normal(0, 1, 260)}),
                    pd.DataFrame({"id": "stuck", "ds": ds, "y": np.r_[np.full(200, 7.0), 7 + rng.normal(0, 1, 60)]})])
    fit_part = df.groupby("id").head(200)
    f = Forecaster("seasonal_naive", prediction_length=H, conformal_windows=8).fit(fit_part, **COLS)
    with pytest.warns(UserWarning, match=r"^predict: 1 series were constant at fit and have moved since \(item "
                                         r"'stuck'\): their conformal bands have width 0"):
        f.predict(df, levels=[80])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f.predict(fit_part, levels=[80])
        f.predict(df)

def test_a_constant_series_forecast_inexactly_is_scaled_by_its_errors():
    """Scores of a series of scale 0 are its residuals over their mean absolute value (its own
    units); a panel of constant series forecast exactly keeps its zeros, a band of width 0."""
    truth = np.zeros((4, 2, 1))  # [W, H, C]: two series, two windows each
    mean = np.array([0.0, 0.0, 1e-3, -3e-3])[:, None, None] * np.ones((1, 2, 1))
    rows = np.array([0, 0, 1, 1])
    calibration = calibrate(mean, truth, np.ones(truth.shape, bool), rows, np.zeros((2, 1)), 2, 1,
                            ConformalConfig(scores="scaled"), 0.0)
    assert calibration.scale[:, 0].tolist() == [0.0, pytest.approx(2e-3)]
    assert calibration.counts.tolist() == [2, 2]  # series 0 adds no score; series 1's are 0.5 and 1.5
    np.testing.assert_allclose(calibration.order, [[0.5, 1.5], [0.5, 1.5]])
    exact = calibrate(np.zeros((4, 2, 1)), truth, np.ones(truth.shape, bool), rows, np.zeros((2, 1)), 2, 1,
                      ConformalConfig(scores="scaled"), 0.0)
    assert exact.scale.tolist() == [[0.0], [0.0]] and exact.counts.tolist() == [4, 4]
    assert (exact.width(50) == 0).all()

def test_calibration_is_saved_with_the_model_and_loads_back(tmp_path):
    df = noisy()
    # nonnegative=False: no floor row, so that the format is the one calibration itself needs (8)
    f = Forecaster("seasonal_naive", prediction_length=H, conformal_windows=8, nonnegative=False).fit(df, **COLS)
    expected = f.predict(levels=[80, 90])
    f.save(tmp_path / "m")
    meta = json.loads((tmp_path / "m" / "forecaster.json").read_text())
    assert meta["format_version"] == 8 and meta["conformal"]["windows"] == 8
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


def test_a_calibrated_point_models_quantiles_are_the_ends_of_its_bands():
    """quantiles= of a calibrated point model (auto's members, ets here) are its conformal bands'
    ends, in the order asked sorted, and 0.5 its forecast: what darts' conformal models and GluonTS's
    predictor give; they were an error that asked for levels=[...]."""
    pytest.importorskip("statsforecast")
    f = Forecaster("ets", prediction_length=H, conformal_windows=5).fit(noisy(n=24 * 8, sigmas=(1.0, 3.0)), **COLS)
    bands = f.predict(levels=[50, 80])
    got = f.predict(quantiles=[0.9, 0.25, 0.5, 0.1])
    assert list(got.columns) == ["item_id", "timestamp", "mean", "0.1", "0.25", "0.5", "0.9"]
    pd.testing.assert_frame_equal(got[["mean", "0.1", "0.25", "0.9"]], bands[["mean", "0.1", "0.25", "0.9"]])
    assert (got["0.5"] == got["mean"]).all() and (got["0.25"] < got["mean"]).all()
    assert got.attrs["intervals"] == "conformal"
    median = f.predict(quantiles=[0.5])
    assert list(median.columns[-2:]) == ["mean", "0.5"] and "intervals" not in median.attrs


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
    # 3 series -> 8 validation windows of 6 steps (10 would make 30 independent ones; a fifth of 240 steps
    # holds 8): origins 2 steps apart over them (22 per series, nearest the 30 wanted); 24 independent
    # windows, so 2 blocks of 22 more before them (a third would leave under half the 192 steps before the
    # validation); the scores of the 6 steps pooled (66 x 3 each) and learning after the fit
    assert (calibration.windows, calibration.stride) == (66, 2) and calibration.counts.tolist() == [1188] * H
    assert calibration.profile.shape == (H,) and calibration.update == "rolling" and calibration.rolling == 396
    assert f.leaderboard.attrs["calibration"] == ("66 windows per series, 72 independent (series x windows one horizon "
                                                  "apart): the validation's and 2 block(s) before them, the members "
                                                  "fitted before each")
    forecast = f.predict(levels=[80, 95])
    assert forecast.attrs["intervals"] == "conformal"
    assert (forecast["0.025"] < forecast["0.1"]).all() and (forecast["0.9"] < forecast["0.975"]).all()
    off = Forecaster(prediction_length=H, candidates=("theta", "seasonal_naive"), conformal_windows=0).fit(df, **COLS)
    assert off.calibration is None
    # the selection reads the same windows one horizon apart whatever the calibration's stride
    pd.testing.assert_frame_equal(off.leaderboard[["model", "val_score", "weight"]],
                                  f.leaderboard[["model", "val_score", "weight"]])


def test_a_time_limit_forecasts_no_calibration_block_it_has_no_time_for():
    """The blocks refit the members; a time_limit that the validation spent leaves the bands the
    validation's windows alone, and the leaderboard says why."""
    f = Forecaster(prediction_length=H, candidates=("theta", "seasonal_naive"), time_limit=1e-6,
                   trainer_kwargs=QUIET).fit(noisy(n=24 * 10), **COLS)
    assert (f.calibration.windows, f.calibration.stride) == (22, 2)
    assert re.fullmatch(r"22 windows per series, 24 independent \(series x windows one horizon apart\): the "
                        r"validation's alone \(the time_limit leaves too little for block 1, about \d+\.\d CPU-s\)",
                        f.leaderboard.attrs["calibration"])


def test_auto_gives_covariates_to_the_candidates_that_take_them(monkeypatch):
    """A target driven by a known future covariate: the network reads it (and forecasts far better
    than the statistical models, which see the target alone, as the leaderboard says)."""
    monkeypatch.setattr(tsrec.halving, "MIN_NETWORK_WINDOWS", 0)
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


def test_pooled_steps_read_every_steps_tail_at_their_own_profile():
    """Step 2's residuals are twice step 1's: pooled over their profile (mean), each step's band is
    the finite-sample rank of all 2n pooled scores times its own mean (a naive loop's answer)."""
    rng = np.random.default_rng(1)
    first = np.abs(rng.standard_normal(30))
    scores = np.stack([first, 2 * first[::-1]])  # [H=2, n=30]
    pooled = _calibration(scores, "absolute", pooling="steps")
    assert pooled.counts.tolist() == [60, 60] and pooled.profile == pytest.approx([first.mean(), 2 * first.mean()])
    naive = np.sort(np.concatenate([scores[0] / scores[0].mean(), scores[1] / scores[1].mean()]))
    for level in (80, 90, 95):
        k = math.ceil(61 * level / 100)
        assert pooled.width(level) == pytest.approx(naive[k - 1] * pooled.profile)
    assert _calibration(scores, "absolute").profile is None  # pooling="none": each step its own, as before


def _rolling(scores: np.ndarray, stride: int = 1):
    """A pooled calibration that learns, of ``scores`` ``[H, n]`` (one series, unit scale)."""
    return _calibration(scores, "absolute", pooling="steps", update="rolling", stride=stride)


def test_the_rolling_window_moves_the_band_to_new_errors_and_only_after_they_are_seen():
    from tsrec.conformal_update import Evidence, learned_widths

    rng = np.random.default_rng(2)
    calibration = _rolling(np.abs(rng.standard_normal((3, 200))))  # [H=3] 600 pooled scores
    assert calibration.rolling == 200  # 600 scores one step apart over 3 steps: 200 independent ones
    horizon = 3
    windows = 120  # new windows, each of 3 steps, errors 3x the calibration's
    mean = np.zeros((windows, horizon, 1))
    truth = 3 * np.abs(rng.standard_normal((windows, horizon, 1)))
    stamps = np.arange(windows, dtype=np.int64)[:, None] * 10 + np.arange(horizon)  # [V, H] window w at 10w ..
    evidence = Evidence.of(calibration, mean, truth, np.ones_like(truth, bool), np.zeros(windows, np.int64), stamps,
                           np.ones(windows, bool))
    cutoffs = np.array([0, 5, 300, 10_000], dtype=np.int64)  # none seen, 1 window, 30 windows (90 scores), all
    for level in (80, 90, 95):
        widths = learned_widths(calibration, evidence, cutoffs, level)  # [4, H]
        np.testing.assert_array_equal(widths[0], calibration.width(level))  # nothing seen yet: the calibration's
        assert (widths[1] >= widths[0]).all() and (widths[2] > widths[1]).all() and (widths[3] > widths[2]).all()
        # all seen: the newest 200 scores alone, their finite-sample rank, at each step's profile
        newest = np.sort(evidence.scores[-200:])
        assert widths[3] == pytest.approx(newest[math.ceil(201 * level / 100) - 1] * calibration.profile)
    # a window the fit saw (not eligible) teaches nothing
    unseen = Evidence.of(calibration, mean, truth, np.ones_like(truth, bool), np.zeros(windows, np.int64), stamps,
                         np.zeros(windows, bool))
    np.testing.assert_array_equal(learned_widths(calibration, unseen, cutoffs, 90)[3], calibration.width(90))


def test_overlapping_windows_teach_the_steps_already_observed_before_they_end():
    """A stride below the horizon: at a window's origin, the windows before it have not ended,
    but their first steps are observed, and those scores (and no later one) are read."""
    from tsrec.conformal_update import Evidence, learned_widths

    rng = np.random.default_rng(5)
    calibration = _rolling(np.abs(rng.standard_normal((3, 200))))  # [H=3] pooled, R = 200
    horizon, windows = 3, 6
    truth = 50 + rng.random((windows, horizon, 1))  # errors far beyond the calibration's
    stamps = np.arange(windows, dtype=np.int64)[:, None] + np.arange(horizon)  # [V, H] origins 1 step apart
    evidence = Evidence.of(calibration, np.zeros_like(truth), truth, np.ones_like(truth, bool),
                           np.zeros(windows, np.int64), stamps, np.ones(windows, bool))
    assert evidence.times.tolist() == stamps.ravel().tolist()  # windows in the order they end, steps in order
    cutoffs = np.arange(4, dtype=np.int64)  # the origins of windows 0-3
    for level in (80, 95):
        widths = learned_widths(calibration, evidence, cutoffs, level)  # [4, H]
        np.testing.assert_array_equal(widths[0], calibration.width(level))  # nothing observed before time 0
        for cutoff in (1, 2, 3):  # window 0 has not ended before 3, yet its observed steps are read
            seen = stamps < cutoff  # [V, H]
            alone = Evidence(times=stamps[seen], ends=np.broadcast_to(stamps[:, -1:], stamps.shape)[seen],
                             scores=truth[..., 0][seen] / calibration.profile[np.nonzero(seen)[1]])
            np.testing.assert_allclose(widths[cutoff], learned_widths(calibration, alone, cutoffs[-1:] + 100, level)[0])
        assert (widths[1] > widths[0]).all() and (widths[3] > widths[1]).all()


def test_rolling_needs_pooled_steps_and_says_so():
    with pytest.raises(ValueError, match="conformal_update='rolling' learns from the scores of every horizon step"):
        Forecaster("seasonal_naive", prediction_length=H, conformal_windows=5, conformal_update="rolling",
                   conformal_pooling="none")
    assert ConformalConfig().resolved_for(auto=True) == ConformalConfig(pooling="steps", update="rolling")
    assert ConformalConfig().resolved_for(auto=False) == ConformalConfig(pooling="none", update="off")
    assert ConformalConfig(update="rolling").resolved_for(auto=False).pooling == "steps"


def _noisier_after(n_fit: int, n_after: int, factor: float) -> pd.DataFrame:
    """Three hourly series whose noise is ``factor`` times larger after their first ``n_fit`` steps."""
    df = noisy(n=n_fit + n_after)
    step = df.groupby("id").cumcount()
    base = noisy(n=n_fit + n_after, sigmas=(0.0, 0.0, 0.0))
    df["y"] = base["y"] + np.where(step >= n_fit, factor, 1.0) * (df["y"] - base["y"])
    return df


def test_auto_bands_learn_from_the_data_predict_and_backtest_see_and_are_saved(tmp_path):
    n_fit = 24 * 10
    df = _noisier_after(n_fit, 24 * 8, factor=3.0)
    fit_part = df.groupby("id").head(n_fit)
    f = Forecaster(prediction_length=H, candidates=("seasonal_naive",), trainer_kwargs=QUIET).fit(fit_part, **COLS)
    assert f.calibration.update == "rolling"
    width = lambda frame: float((frame["0.95"] - frame["0.05"]).mean())  # noqa: E731
    at_fit, after = width(f.predict(levels=[90])), width(f.predict(df, levels=[90]))
    assert after > 2 * at_fit  # the noise tripled after the fit: the band learnt it
    frozen = dataclasses.replace(f.fitted.calibration, update="off")
    still = Forecaster.load(f.save(tmp_path / "m"))
    assert json.loads((tmp_path / "m" / "forecaster.json").read_text())["format_version"] == 11
    pd.testing.assert_frame_equal(still.predict(df, levels=[90]), f.predict(df, levels=[90]))
    learnt = backtest(f, df, start=n_fit, stride=H, baselines=("naive",), levels=[90], **COLS)
    f.fitted = dataclasses.replace(f.fitted, calibration=frozen)
    assert width(f.predict(df, levels=[90])) == pytest.approx(at_fit)
    fixed = backtest(f, df, start=n_fit, stride=H, baselines=("naive",), levels=[90], **COLS)
    coverage = {name: r.metric("interval_coverage_90", "fraction") for name, r in (("learnt", learnt),
                                                                                    ("fixed", fixed))}
    assert coverage["fixed"] < 0.75 and abs(coverage["learnt"] - 0.9) < abs(coverage["fixed"] - 0.9) - 0.05, coverage


def test_a_calibration_saved_before_format_11_loads_and_keeps_its_bands(tmp_path):
    from tests.saved_models import edit_weights, read_meta, write_checksummed

    n_fit = 24 * 10
    df = _noisier_after(n_fit, 24 * 4, factor=3.0)
    f = Forecaster(prediction_length=H, candidates=("seasonal_naive",), trainer_kwargs=QUIET)
    f.fit(df.groupby("id").head(n_fit), **COLS).save(tmp_path / "m")
    edit_weights(tmp_path / "m", lambda tensors: tensors.pop("conformal_profile"), rehash=False)
    meta = read_meta(tmp_path / "m")
    meta["conformal"] = {k: v for k, v in meta["conformal"].items() if k not in ("update", "rolling")}
    write_checksummed(tmp_path / "m", {**meta, "format_version": 10})
    old = Forecaster.load(tmp_path / "m")
    assert old.calibration.profile is None and old.calibration.update == "off"
    f.fitted = dataclasses.replace(f.fitted, calibration=dataclasses.replace(f.fitted.calibration, update="off"))
    pd.testing.assert_frame_equal(old.predict(df, levels=[80, 90]), f.predict(df, levels=[80, 90]))


def test_windows_the_fit_saw_leave_the_bands_exactly_the_calibrations():
    """A backtest that starts inside the fit data: until a window forecast after the fit has an
    observed step, the band is the calibration's own (not a re-ranking of its scores)."""
    from tsrec.conformal_update import Evidence, learned_widths

    rng = np.random.default_rng(7)
    calibration = _rolling(np.abs(rng.standard_normal((3, 200))))
    horizon, windows = 3, 6
    truth = 3 * np.abs(rng.standard_normal((windows, horizon, 1)))
    stamps = np.arange(windows, dtype=np.int64)[:, None] * 10 + np.arange(horizon)  # [V, H] one horizon apart
    eligible = np.arange(windows) >= 2  # windows 0 and 1 lie inside the fit data
    evidence = Evidence.of(calibration, np.zeros_like(truth), truth, np.ones_like(truth, bool),
                           np.zeros(windows, np.int64), stamps, eligible)
    for level in (80, 90, 95):
        widths = learned_widths(calibration, evidence, np.array([15, 20, 25], dtype=np.int64), level)
        np.testing.assert_array_equal(widths[:2], np.stack([calibration.width(level)] * 2))  # seen: fitted windows only
        assert not np.array_equal(widths[2], calibration.width(level))  # window 2's steps 20-22 teach


def _yearly(n: int) -> pd.DataFrame:
    years = pd.date_range("1950-01-01", periods=n, freq="YS")
    return pd.DataFrame({"id": "g", "ds": years, "y": 100 + np.cumsum(np.random.default_rng(4).normal(1, 2, n))})


def test_calibration_windows_that_leave_too_little_to_fit_name_conformal_windows():
    """13 yearly steps, 3 ahead: 8 calibration windows leave 3 steps for the fit before them; the
    error says that conformal_windows cut the history (not only the fit's own hint)."""
    with pytest.raises(ValueError, match=r"conformal_windows=8 calibrates the intervals on each series' last 10 "
                                         r"observed steps.*too few: item 'g' has 3 time steps.*Pass "
                                         r"conformal_windows=<fewer>"):
        Forecaster("ets", prediction_length=3, conformal_windows=8).fit(_yearly(13), **COLS)
    assert Forecaster("ets", prediction_length=3, conformal_windows=4).fit(_yearly(13), **COLS).calibration.windows == 4


@pytest.mark.parametrize("missing_before", [False, True], ids=["no rows before", "NaN before"])
def test_a_series_too_short_for_the_calibration_is_left_out_of_it_and_forecast_with_bands(missing_before):
    """A new series of 6 years beside one of 13 (horizon 3, 4 calibration windows: 10 steps needed):
    the model is calibrated on the long one, fitted on all of the new one, and both get bands; a
    warning names the new one (the whole fit was refused for it). Its 7 years before as NaN rows
    change nothing (they were counted as steps, and it was calibrated on a fit of 3 years)."""
    new = _yearly(6) if not missing_before else \
        pd.concat([_yearly(13).iloc[:7].assign(y=np.nan), _yearly(6).assign(ds=_yearly(13).ds.iloc[7:].to_numpy())])
    df = pd.concat([_yearly(13), new.assign(id="new")], ignore_index=True)
    with pytest.warns(UserWarning, match=r"conformal_windows=4: 1 series hold fewer than 10 steps \(item 'new' \(6 "
                                         r"steps\)\), too few .* from the scaled scores of the other 1 series"):
        f = Forecaster("ets", prediction_length=3, conformal_windows=4).fit(df, **COLS)
    alone = Forecaster("ets", prediction_length=3, conformal_windows=4).fit(_yearly(13), **COLS)
    np.testing.assert_allclose(f.calibration.order, alone.calibration.order, rtol=1e-9, equal_nan=True)
    bands = f.predict(levels=[80])
    assert np.isfinite(bands[["0.1", "0.9"]].to_numpy()).all() and set(bands.item_id) == {"g", "new"}


def test_auto_says_when_the_history_holds_fewer_calibration_windows_than_asked():
    with pytest.warns(UserWarning, match=r"conformal_windows=8: auto calibrates its intervals on its validation "
                                         r"windows, and this history holds 4 origins per series .* levels up to 92.3%"):
        f = Forecaster(prediction_length=3, conformal_windows=8).fit(_yearly(13), **COLS)
    with pytest.raises(ValueError, match=r"levels up to 92.3%: ask for a lower level, or refit with more calibration "
                                         r"windows \(conformal_windows=...\) on a history that holds them"):
        f.predict(levels=[95])
    assert list(f.predict(levels=[90]).columns[-2:]) == ["0.05", "0.95"]


def test_the_known_scores_are_every_step_observed_before_the_cutoff_in_window_order():
    """Evidence.known searches only the windows still open at a cutoff: the same scores, in the same
    order, as a scan of every score, on overlapping windows of series on shifted calendars."""
    from tsrec.conformal_update import Evidence

    rng = np.random.default_rng(11)
    calibration = _rolling(np.abs(rng.standard_normal((4, 100))))
    horizon, per = 4, 30
    starts = np.concatenate([10 * np.arange(per) + shift for shift in (0, 3, 7)])  # 3 series, stride 10 < 4 x 7
    step = np.repeat([7, 5, 9], per)  # each series' own step
    stamps = (starts[:, None] + step[:, None] * np.arange(horizon)).astype(np.int64)  # [V, H]
    truth = rng.standard_normal((len(starts), horizon, 1))
    observed = rng.random(truth.shape) > 0.2
    evidence = Evidence.of(calibration, np.zeros_like(truth), truth, observed, np.zeros(len(starts), np.int64),
                           stamps, rng.random(len(starts)) > 0.1)
    for cutoff in range(-5, int(stamps.max()) + 5):
        np.testing.assert_array_equal(evidence.known(cutoff), evidence.scores[evidence.times < cutoff])
