"""Forecaster("auto"): candidates scored on a validation backtest, greedy ensemble weights, the
members refitted on all the history, the leaderboard, save/load and quantile ensembles."""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
import pytest

from tsrec import Forecaster
from tsrec.auto import MAX_VAL_WINDOWS, greedy_weights

QUIET = {"enable_progress_bar": False, "logger": False}
H = 6
FAST = dict(prediction_length=H, max_steps=20, trainer_kwargs=QUIET)


def hourly(n=24 * 12, seed=0):
    t = np.arange(n)
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"a": 10 + 2 * np.sin(2 * np.pi * t / 24) + 0.3 * rng.standard_normal(n),
                         "b": 5 + np.cos(2 * np.pi * t / 24) + 0.3 * rng.standard_normal(n)},
                        index=pd.date_range("2024-01-01", periods=n, freq="h"))


def test_greedy_selection_keeps_the_best_model_unless_averaging_helps():
    truth = np.zeros(4)
    good, biased_up, biased_down = np.full(4, 0.1), np.full(4, 1.0), np.full(4, -1.0)
    # averaging the two biased forecasts cancels their biases: one each
    np.testing.assert_allclose(greedy_weights(truth, np.stack([biased_up, biased_down])), [0.5, 0.5])
    # nothing improves on the good one alone
    np.testing.assert_allclose(greedy_weights(truth, np.stack([biased_up, good])), [0.0, 1.0])
    # good 0.1 and slightly low -0.05: two parts good, one part low lands at 0.05
    weights = greedy_weights(truth, np.stack([good, np.full(4, -0.05)]), rounds=3)
    np.testing.assert_allclose(weights, [1 / 3, 2 / 3])


def test_auto_scores_weights_refits_and_forecasts_the_weighted_members(tmp_path):
    df = hourly()
    candidates = ("dlinear", "seasonal_naive", "theta")
    f = Forecaster("auto", candidates=candidates, **FAST).fit(df)
    board = f.leaderboard
    assert list(board.columns) == ["model", "val_mse", "weight", "fit_seconds", "note"]
    assert sorted(board.model) == sorted(candidates) and board.val_mse.is_monotonic_increasing
    assert board.weight.sum() == pytest.approx(1.0) and (board.weight > 0).any()
    network = f.resolved_settings.network
    assert set(network.members) == set(board.model[board.weight > 0])
    assert f.context_length == max(m["context_length"] for m in f.model.describe())
    # the forecast is the weighted sum of the members, each refitted on all of df (same seed)
    expected = sum(w * Forecaster(name, **FAST).fit(df).predict()["mean"].to_numpy()
                   for name, w in zip(network.members, network.weights))
    forecast = f.predict()
    np.testing.assert_allclose(forecast["mean"], expected, rtol=1e-5)
    f.save(tmp_path / "auto")
    loaded = Forecaster.load(tmp_path / "auto")
    pd.testing.assert_frame_equal(loaded.predict(), forecast)
    pd.testing.assert_frame_equal(loaded.leaderboard, board[["model", "val_mse", "weight"]], check_exact=False)


def test_the_validation_windows_are_the_last_tenth_one_horizon_apart():
    from tsrec.auto import _validation_windows

    assert _validation_windows([288, 400], H) == 5  # round(28.8 / 6)
    assert _validation_windows([40], H) == 1
    assert _validation_windows([10_000], H) == MAX_VAL_WINDOWS


def test_a_quantile_ensemble_uses_trainable_candidates_and_its_quantiles_do_not_cross():
    df = hourly()
    f = Forecaster("auto", candidates=("dlinear", "patchtst", "seasonal_naive"), output="quantile",
                   quantile_levels=(0.1, 0.5, 0.9), **FAST).fit(df)
    assert "seasonal_naive" not in set(f.leaderboard.model)
    forecast = f.predict(quantiles=[0.1, 0.5, 0.9])
    assert (forecast["0.1"] <= forecast["0.5"]).all() and (forecast["0.5"] <= forecast["0.9"]).all()


def test_auto_refuses_what_it_cannot_do_and_says_so(monkeypatch):
    df = hourly()
    with pytest.raises(ValueError, match=r"takes no val_df"):
        Forecaster("auto", **FAST).fit(df.iloc[:200], val_df=df.iloc[150:])
    with pytest.raises(ValueError, match="output='point' or 'quantile'"):
        Forecaster("auto", output="normal", **FAST)
    with pytest.raises(ValueError, match="candidates must name registered models"):
        Forecaster("auto", candidates=("auto",), **FAST)
    with pytest.raises(AttributeError, match="only Forecaster\\('auto'\\) has a leaderboard"):
        Forecaster("seasonal_naive", prediction_length=H).fit(df).leaderboard
    monkeypatch.setitem(sys.modules, "statsforecast", None)
    with pytest.warns(UserWarning, match=r"auto leaves out ets: statsforecast is not installed"):
        f = Forecaster("auto", candidates=("seasonal_naive", "ets"), **FAST).fit(df)
    assert list(f.leaderboard.model) == ["seasonal_naive"]
