"""Forecaster("auto"), the default: statistical candidates scored first, networks only on data with
the windows for them and by successive halving within a budget, AutoGluon's validation windows,
greedy ensemble weights that mix, the leaderboard with what was skipped and why, missing tails,
progress lines, save/load and quantile ensembles."""

from __future__ import annotations

import io
import re
import sys
import time

import numpy as np
import pandas as pd
import pytest

import tsrec.auto
import tsrec.models.stats
from tsrec import Forecaster
from tsrec.halving import network_budget
import tsrec.candidates
import tsrec.halving
from tsrec.validation import MAX_CALIBRATION_BLOCKS, Scores, Validation, calibration_blocks, greedy_weights, repeated_forecasts, series_scales, shrunk_weights, validation_stride, validation_windows
from tsrec.config import DEFAULT_MODEL
from tsrec.data import canonicalize
from tsrec.fitted import ForecastResult
from tsrec.forecasting import window_origins
from tsrec.models.intermittent import INTERMITTENT_MODELS
from tsrec.models.parameters import VARIANT_GROWTH

QUIET = {"enable_progress_bar": False, "logger": False}
H = 6
FAST = dict(prediction_length=H, max_steps=20, trainer_kwargs=QUIET)
COLUMNS = ["model", "val_score", "weight", "fit_seconds", "cpu_seconds", "note", "covariates"]


def hourly(n=24 * 12, seed=0):
    t = np.arange(n)
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"a": 10 + 2 * np.sin(2 * np.pi * t / 24) + 0.3 * rng.standard_normal(n),
                         "b": 5 + np.cos(2 * np.pi * t / 24) + 0.3 * rng.standard_normal(n)},
                        index=pd.date_range("2024-01-01", periods=n, freq="h"))


def long_hourly(n=24 * 8, ids=("a", "b", "c"), seed=0):
    t = np.arange(n)
    rng = np.random.default_rng(seed)
    return pd.concat([pd.DataFrame({"id": i, "ds": pd.date_range("2024-01-01", periods=n, freq="h"),
                                    "y": 10 + k + 2 * np.sin(2 * np.pi * t / 24) + 0.3 * rng.standard_normal(n)})
                      for k, i in enumerate(ids)], ignore_index=True)


@pytest.fixture
def networks_allowed(monkeypatch):
    """Networks tried on the tests' small frames (the rule asks for 1,000 training windows)."""
    monkeypatch.setattr(tsrec.halving, "MIN_NETWORK_WINDOWS", 0)


@pytest.fixture
def scored(monkeypatch):
    """The names in the order the candidates were scored."""
    order = []
    add = Scores.add

    def recording(self, name, result):
        order.append(name)
        return add(self, name, result)

    monkeypatch.setattr(Scores, "add", recording)
    return order


@pytest.fixture
def validations(monkeypatch):
    """The validation windows of every auto fit."""
    made = []
    of = Validation.of.__func__

    def recording(cls, *args):
        made.append(of(cls, *args))
        return made[-1]

    monkeypatch.setattr(Validation, "of", classmethod(recording))
    return made


def test_the_default_model_is_auto_and_a_named_network_is_one_network():
    assert DEFAULT_MODEL == "auto" and Forecaster(prediction_length=H).model_name == "auto"
    f = Forecaster("rsa_patchtst", **FAST).fit(hourly())
    assert f.model_name == "rsa_patchtst" and type(f.model).__name__ == "PatchTST"


def test_the_default_on_short_data_scores_the_statistical_models_and_skips_the_networks_saying_why(scored):
    board = Forecaster(**FAST).fit(hourly(n=24 * 8)).leaderboard  # 2 series x 192 steps: a few hundred windows
    assert list(board.columns) == COLUMNS
    networks = board[board.model.isin(["rsa_patchtst", "patchtst", "dlinear"])]
    assert len(networks) == 3 and networks.val_score.isna().all() and (networks.weight == 0).all()
    assert networks.note.str.fullmatch(r"skipped: \d+ training windows < 1000 \(networks are tried only on data "
                                       r"with at least that many\)").all()
    assert scored == ["seasonal_naive", "naive", "drift", "ets", "theta", "ces", "dynamic_theta", "ridge", "gbm"]
    stats = board[~board.model.isin([*networks.model, "mstl", *INTERMITTENT_MODELS])]
    assert board.set_index("model").note["mstl"].startswith("skipped: 1 calendar season(s)")  # a day, not a week
    intermittent = board.set_index("model").loc[list(INTERMITTENT_MODELS)]
    assert intermittent.note.str.startswith("skipped: the data are not intermittent").all()
    assert intermittent.val_score.isna().all()
    assert stats.val_score.notna().all() and (stats.cpu_seconds > 0).all() and board.weight.sum() == pytest.approx(1)


def test_statistical_candidates_are_scored_before_the_networks(networks_allowed, scored):
    """The rules on each window first (a time_limit never skips them), then the other statistical
    candidates, then the networks."""
    f = Forecaster("auto", candidates=("dlinear", "theta", "seasonal_naive"), **FAST).fit(hourly())
    assert scored[:2] == ["seasonal_naive", "theta"] and set(scored[2:]) == {"dlinear"}
    assert list(f.leaderboard.sort_values("fit_seconds").model)  # every candidate timed
    assert set(f.leaderboard.model) == {"dlinear", "seasonal_naive", "theta"}


def test_successive_halving_stops_a_network_far_behind_the_leader(networks_allowed, scored, monkeypatch):
    """patchtst made bad (its validation forecasts 10 standard deviations off) stops after the
    first rung; dlinear, the leader, trains through every rung of its 90 steps."""
    add = Scores.add  # the recording one

    def patchtst_is_bad(self, name, result):
        mse = add(self, name, result)
        if name == "patchtst":
            self.scaled[name] = self.scaled[name] + 10.0
            return float(np.nanmean((self.scaled[name] - self.truth) ** 2))
        return mse

    monkeypatch.setattr(Scores, "add", patchtst_is_bad)
    f = Forecaster("auto", candidates=("dlinear", "patchtst"), prediction_length=H, max_steps=90,
                   trainer_kwargs=QUIET).fit(hourly())
    notes = dict(zip(f.leaderboard.model, f.leaderboard.note))
    assert notes["patchtst"].startswith("rung 1: 10 steps; stopped at rung 1: ")
    assert "x the leader (dlinear)" in notes["patchtst"]
    assert notes["dlinear"].startswith("rung 3: 90 steps")
    assert scored.count("patchtst") == 1 and scored.count("dlinear") == len(tsrec.halving.RUNGS)
    weights = dict(zip(f.resolved_settings.network.members, f.resolved_settings.network.weights))
    assert weights["dlinear"] > 0.9


def test_the_networks_budget_is_honoured(networks_allowed):
    """A budget of 1 CPU-s (time_limit) ends a run of 100,000 steps, and a spent budget stops the
    networks before they start (the bound on seconds is generous: a loaded machine is slow)."""
    assert network_budget(10_000) == pytest.approx(tsrec.halving.BUDGET_SECONDS + 10.0)
    assert network_budget(10 ** 9) == tsrec.halving.MAX_BUDGET_SECONDS and network_budget(10 ** 6, 5.0) == 5.0
    assert network_budget(10 ** 6, stats_seconds=2.0) == 2.0 * tsrec.halving.STATS_COST_RATIO
    assert network_budget(100, 120.0, stats_seconds=2.0) == 120.0  # the user's time_limit is the budget
    f = Forecaster("auto", candidates=("seasonal_naive", "dlinear"), prediction_length=H, max_steps=100_000,
                   time_limit=1.0, trainer_kwargs=QUIET).fit(hourly())
    row = f.leaderboard.set_index("model").loc["dlinear"]
    steps = int(row.note.split(": ")[1].split(" steps")[0])
    assert 0 < steps < 100_000
    assert "the budget's share ran out" in row.note or "budget of 1 CPU-s was spent" in row.note
    assert row.cpu_seconds < 30
    f = Forecaster("auto", candidates=("seasonal_naive", "dlinear"), prediction_length=H, max_steps=100_000,
                   time_limit=1e-9, trainer_kwargs=QUIET).fit(hourly())
    row = f.leaderboard.set_index("model").loc["dlinear"]
    assert re.fullmatch(r"skipped: the fit had spent its time_limit of 1e-09 CPU-s on the statistical candidates "
                        r"\(\d+\.\d\)", row.note) and np.isnan(row.val_score)


def test_the_time_limit_caps_the_whole_fit_not_the_networks_alone(networks_allowed, monkeypatch):
    """The statistical candidates are scored first; the networks get what they left of the user's
    time_limit, where they had been given all of it on top."""
    budgets = []
    original = tsrec.halving.network_budget
    monkeypatch.setattr(tsrec.halving, "network_budget",
                        lambda observations, time_limit=None, stats_seconds=None:
                        budgets.append(time_limit) or original(observations, time_limit, stats_seconds))
    started = time.process_time()
    Forecaster("auto", candidates=("ets", "dlinear"), prediction_length=H, max_steps=20, time_limit=600.0,
               trainer_kwargs=QUIET).fit(hourly())
    assert len(budgets) == 1 and 600.0 - (time.process_time() - started) <= budgets[0] < 600.0
    f = Forecaster("auto", candidates=("ets", "theta", "naive", "dlinear"), prediction_length=H, time_limit=1e-6,
                   trainer_kwargs=QUIET).fit(hourly())  # spent by the first candidate, the rule
    notes = f.leaderboard.set_index("model").note
    assert notes["ets"] == notes["theta"] == "skipped: the fit had spent its time_limit of 1e-06 CPU-s on those before"
    assert notes["dlinear"].startswith("skipped: the fit had spent its time_limit of 1e-06 CPU-s")
    assert f.resolved_settings.network.members == ("naive",)


def test_a_run_that_spends_its_budget_share_goes_on_at_the_next_rung(networks_allowed, monkeypatch):
    """The first rung's share spent after one step (a limit of 0 CPU-s): the run ends there as a
    step budget would end it, and the next rungs resume it up to its 90 steps."""
    limit = tsrec.halving._CpuLimit.of
    shares = iter([0.0])
    monkeypatch.setattr(tsrec.halving._CpuLimit, "of", staticmethod(lambda seconds: limit(next(shares, 1e6))))
    notes = []
    progress = tsrec.halving.progress_line
    monkeypatch.setattr(tsrec.halving, "progress_line", lambda row: notes.append(row.note) or progress(row))
    f = Forecaster("auto", candidates=("dlinear",), prediction_length=H, max_steps=90, patience=None,
                   trainer_kwargs=QUIET).fit(hourly())
    assert notes == ["rung 1: 1 steps, the budget's share ran out", "rung 2: 30 steps", "rung 3: 90 steps"]
    assert f.leaderboard.note[0] == "rung 3: 90 steps"


def test_the_validation_windows_follow_autogluons_rule_capped_by_the_shortest_series(validations):
    assert validation_windows(1, 150, H) == 5 and validation_windows(19, 1000, H) == 5
    assert validation_windows(20, 1000, H) == 3 and validation_windows(99, 1000, H) == 3
    assert validation_windows(100, 1000, H) == 2
    assert validation_windows(5, 40, H) == 3  # half of 40 steps holds three horizons of 6
    assert validation_windows(5, 10, H) == 1
    # few long series: windows up to 30 independent ones (series x windows), within a fifth of the
    # shortest series (1000 steps: 33 horizons of 6)
    assert validation_windows(1, 1000, H) == 30 and validation_windows(2, 1000, H) == 15
    assert validation_windows(1, 600, H) == 20 and validation_windows(4, 1000, H) == 8
    Forecaster("auto", candidates=("seasonal_naive",), conformal_windows=0, **FAST).fit(long_hourly(n=48), id_col="id",
                                                                                         time_col="ds")
    v = validations[-1]  # 3 series, 48 // 2 // 6 = 4 windows ending at each series' end, every origin scored
    assert (v.horizons, v.count.tolist(), v.stride, v.first.tolist()) == (4, [19, 19, 19], 1, [24, 24, 24])
    assert v.truth.shape == (57, H, 1) and v.evidence == 12


def test_the_validation_stride_gives_about_the_origins_wanted():
    # 28 windows of 13 steps: at the horizon 28 origins, one step apart 352; 30 wanted
    assert validation_stride(13, 28, 30) == 13
    assert validation_stride(12, 5, 30) == 2  # 25 origins, not 49
    assert validation_stride(6, 4, 34) == 1  # 19 origins, the most there are
    assert validation_stride(6, 2, 2) == 6 and validation_stride(48, 15, 30) == 24  # 2 and 29 origins


def test_the_validation_scale_is_the_metrics_scale_over_each_series_history():
    """Each series' errors are divided by its scale over its history before the validation windows
    (the scale the field's test scores use, not the few held-out values'): the in-sample seasonal
    naive MAE for MASE, the standard deviation for MSE and MAE, none for sMAPE."""
    df = long_hourly(n=96)
    df.loc[df.id == "c", "y"] = 3.0  # a flat series: no scale, so 1
    panel = canonicalize(df, id_col="id", time_col="ds", target_col="y")
    first = np.array([48, 48, 48])
    history = [item.values[:48, 0] for item in panel.items]
    mase = series_scales(panel, first, "mase", 24)
    np.testing.assert_allclose(mase[:2, 0], [np.mean(np.abs(y[24:] - y[:-24])) for y in history[:2]])
    np.testing.assert_allclose(series_scales(panel, first, "mse", 24)[:2, 0], [np.std(y) for y in history[:2]])
    assert mase[2, 0] == 1.0 and (series_scales(panel, first, "smape", 24) == 1).all()
    np.testing.assert_allclose(series_scales(panel, np.array([20, 20, 20]), "mase", 24)[0, 0],
                               np.mean(np.abs(np.diff(history[0][:20]))))  # shorter than a season: at 1


def test_a_series_flat_before_the_validation_windows_is_scaled_by_all_its_steps_not_by_one():
    """A product launched inside the validation windows (zeros before them) has no scale there: in
    the data's units (1) its errors would outweigh every other series' and choose for the panel. It
    gets its scale over its steps from its first sale on."""
    df = long_hourly(n=96)
    before = canonicalize(df, id_col="id", time_col="ds", target_col="y")
    launched = np.r_[np.zeros(60), 500 + 40 * np.sin(np.arange(36) / 3)]
    df.loc[df.id == "c", "y"] = launched
    panel = canonicalize(df, id_col="id", time_col="ds", target_col="y")
    first = np.array([48, 48, 48])
    sold = launched[60:]  # from its first sale: the jump from zero is no change of its own
    for metric, whole in (("mase", np.mean(np.abs(sold[24:] - sold[:-24]))), ("mse", np.std(sold)),
                          ("rmsse", np.sqrt(np.mean(np.diff(sold) ** 2)))):
        scales = series_scales(panel, first, metric, 24)
        np.testing.assert_allclose(scales[2, 0], whole)
        np.testing.assert_allclose(scales[:2], series_scales(before, first, metric, 24)[:2])  # theirs as they were


def test_weights_shrink_toward_the_blend_of_the_best_few_by_the_evidence():
    greedy = np.array([1.0, 0.0, 0.0, 0.0])
    scores = np.array([1.0, 1.1, 1.2, 5.0])  # the last is beyond HALVING_FACTOR of the best: never blended
    few = shrunk_weights(greedy, scores, evidence=10)  # 10 windows: the blend is worth 30 of them
    np.testing.assert_allclose(few, 0.25 * greedy + 0.75 * np.array([1, 1, 1, 0]) / 3)
    many = shrunk_weights(greedy, scores, evidence=3000)
    assert many[0] > 0.99 and many[3] == 0 and many.sum() == pytest.approx(1)
    np.testing.assert_allclose(shrunk_weights(greedy, np.array([1.0, 2.0, 3.0, 4.0]), 30), [1, 0, 0, 0])


def test_the_blend_takes_each_forecast_once():
    """Seasonal naive without a season (yearly data) forecasts what naive does: the blend of the
    best few takes it once, and the next distinct candidate in its place."""
    forecasts = np.array([[1.0, 2.0, np.nan], [1.0, 2.0, np.nan], [0.0, 2.5, 1.0], [3.0, 3.0, 3.0], [1.0, 2.0, 0.0]])
    scores = np.array([1.0, 1.0, 1.1, 1.2, 1.3])  # 0 and 1 repeat each other; 4 differs from them in one entry
    repeats = repeated_forecasts(forecasts, scores)
    np.testing.assert_array_equal(repeats, [-1, 0, -1, -1, -1])
    greedy = np.array([1.0, 0.0, 0.0, 0.0, 0.0])
    np.testing.assert_allclose(shrunk_weights(greedy, scores, 0, repeats), [1 / 3, 0, 1 / 3, 1 / 3, 0])
    np.testing.assert_allclose(shrunk_weights(greedy, scores, 0), [1 / 3, 1 / 3, 1 / 3, 0, 0])  # counted twice
    rng = np.random.default_rng(0)
    yearly = pd.DataFrame({f"c{i}": 100 + np.cumsum(rng.normal(size=40)) for i in range(3)},
                          index=pd.date_range("1980-01-01", periods=40, freq="YS"))
    board = Forecaster(prediction_length=4, candidates=("naive", "seasonal_naive", "theta")).fit(yearly).leaderboard
    notes = board.set_index("model").note
    assert notes["seasonal_naive"] == "the same forecasts as naive: blended once" and notes["naive"] == ""


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


def test_greedy_weights_mix_complementary_candidates_where_half_and_half_would_not_help():
    """``a`` is the better model; ``b`` errs the other way, much more. Half and half is worse than
    ``a`` alone (a selection that stops at the first round without gain gives ``a`` everything),
    but ``b`` at a small weight cancels part of ``a``'s error: the rounds find that mix."""
    truth = np.zeros(6)
    a = np.array([0.2, 0.2, 0.2, -0.1, 0.1, 0.2])
    b = np.array([-0.9, -0.9, -0.9, 0.3, -0.4, -0.9])
    mse = lambda f: float(np.mean((f - truth) ** 2))  # noqa: E731
    assert mse((a + b) / 2) > mse(a)
    weights = greedy_weights(truth, np.stack([a, b]))
    assert 0.5 < weights[0] < 1 and 0 < weights[1] < 0.5
    assert mse(weights @ np.stack([a, b])) < 0.5 * mse(a)
    assert weights.sum() == pytest.approx(1)


def test_a_missing_tail_is_validated_where_the_series_is_observed_and_named_in_a_warning(validations):
    df = long_hourly()
    tail = df.index[df.id == "b"][-5:]
    df.loc[tail, "y"] = np.nan
    with pytest.warns(UserWarning, match=r"auto: the last values of 1 series are missing \(item 'b': its last 5 "
                                         r"step\(s\) after 2024-01-08 18:00:00\)"):
        f = Forecaster("auto", candidates=("seasonal_naive", "theta"), **FAST).fit(df, id_col="id", time_col="ds",
                                                                                    target_col="y")
    v = validations[-1]
    windows = validation_windows(3, len(df) // 3 - 5, H)
    b = v.items == 1
    # every scored window of b ends by its last observed step: none forecasts from the filled tail
    # (the windows' every origin, one step apart, for the ensemble's calibration)
    assert b.sum() == (windows - 1) * H + 1 and np.isfinite(v.truth[b]).all()
    assert v.origins[b].max() + H == len(df) // 3 - 5 and v.origins[~b].max() + H == len(df) // 3
    assert f.leaderboard.val_score.notna().all()
    with pytest.warns(UserWarning, match=r"1 series end with missing values: item 'b'.*statistical models forecast"):
        assert len(f.predict()) == 3 * H


def test_auto_scores_weights_and_forecasts_the_weighted_members_and_saves(validations, tmp_path):
    df = hourly()
    candidates = ("seasonal_naive", "theta", "naive")
    f = Forecaster("auto", candidates=candidates, **FAST).fit(df)
    first = int(validations[0].first[0])  # the validation windows' first origin
    board = f.leaderboard
    assert list(board.columns) == COLUMNS
    assert sorted(board.model) == sorted(candidates) and board.val_score.is_monotonic_increasing
    assert board.weight.sum() == pytest.approx(1.0) and (board.weight > 0).any()
    network = f.resolved_settings.network
    assert set(network.members) == set(board.model[board.weight > 0])
    assert f.context_length == max(m["context_length"] for m in f.model.describe())

    def member(name):
        """``name`` fitted on all of df, each channel keeping the variant its fit before the validation chose."""
        fitted = Forecaster(name, **FAST).fit(df)
        fitted.model.fit_series([df.to_numpy()], [np.ones(df.shape, bool)],
                                like=Forecaster(name, **FAST).fit(df.iloc[:first]).model)
        return fitted.predict()["mean"].to_numpy()

    # the statistical members forecast from all of df: the weighted sum of each one fitted on it
    expected = sum(w * member(name) for name, w in zip(network.members, network.weights))
    forecast = f.predict()
    np.testing.assert_allclose(forecast["mean"], expected, rtol=1e-5)
    f.save(tmp_path / "auto")
    loaded = Forecaster.load(tmp_path / "auto")
    pd.testing.assert_frame_equal(loaded.predict(), forecast)
    pd.testing.assert_frame_equal(loaded.leaderboard, board[["model", "val_score", "weight"]], check_exact=False)


def test_a_network_member_is_its_validated_run_and_survives_save_and_load(networks_allowed, tmp_path):
    df = hourly()
    f = Forecaster("auto", candidates=("dlinear",), **FAST).fit(df)
    assert f.resolved_settings.network.members == ("dlinear",)
    f.save(tmp_path / "auto")
    pd.testing.assert_frame_equal(Forecaster.load(tmp_path / "auto").predict(), f.predict())
    # one training run in all: the rungs continue it, and the member is not refitted
    assert f.leaderboard.note[0] == "rung 3: 20 steps"


def test_a_progress_line_per_candidate_on_a_terminal_only(monkeypatch, capsys):
    Forecaster("auto", candidates=("seasonal_naive", "theta"), **FAST).fit(hourly())
    assert capsys.readouterr() == ("", "")  # not a terminal: silent

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    Forecaster("auto", candidates=("seasonal_naive", "theta", "dlinear"), **FAST).fit(hourly())
    lines = terminal.getvalue().splitlines()
    assert [line.split()[2] for line in lines if line.startswith("tsrec auto: ")] == ["seasonal_naive", "theta",
                                                                                      "dlinear"]
    assert "validation score" in lines[0] and "CPU-s" in lines[0] and "skipped: " in lines[2]


def test_a_quantile_ensemble_uses_trainable_candidates_and_its_quantiles_do_not_cross(networks_allowed):
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


def test_an_ensembles_statistical_members_forecast_from_all_the_history_given_to_predict(validations):
    """Given more history than at fit, an ensemble's whole-history member reads all of it (its
    forecast is the member's validated fit, on the steps before the validation windows, carried
    forward over the longer frame, statsforecast's ``forward``), not only as many steps as at fit."""
    df = hourly(n=24 * 16)
    f = Forecaster("auto", candidates=("theta", "seasonal_naive"), **FAST).fit(df.iloc[:24 * 10])
    first = int(validations[0].first[0])  # the series grew 240 / first <= VARIANT_GROWTH since
    assert 24 * 10 <= VARIANT_GROWTH * first
    members = dict(zip(f.resolved_settings.network.members, f.resolved_settings.network.weights))
    expected = sum(w * Forecaster(name, **FAST).fit(df.iloc[:first]).predict(df)["mean"].to_numpy()
                   for name, w in members.items())
    np.testing.assert_allclose(f.predict(df)["mean"], expected, rtol=1e-5)
    assert "theta" in members  # the member whose history matters (seasonal naive reads one season)


def test_a_series_never_negative_gets_the_average_of_its_members_raised_to_zero(monkeypatch):
    """A series never negative falling to 0: drift forecasts below 0 from the second step on, the last
    value stays at 1.1. The ensemble forecasts the average of each member's forecast raised to 0 (what
    each forecasts alone, what validation and calibration scored), not the average raised to 0: half
    the last value where drift is below 0, where the average raised to 0 was 0 from the fifth step."""
    monkeypatch.setattr(Scores, "weights", lambda self, kept, scores, repeats: np.full(len(kept), 1 / len(kept)))
    t = np.arange(80)
    df = pd.DataFrame({"a": np.maximum(0.2, 40 - 0.5 * t) + 0.3 * np.abs(np.random.default_rng(0).standard_normal(80))},
                      index=pd.date_range("2020-01-01", periods=80, freq="D"))
    f = Forecaster("auto", candidates=("naive", "drift"), prediction_length=14, trainer_kwargs=QUIET).fit(df)
    alone = {name: Forecaster(name, prediction_length=14).fit(df).predict()["mean"].to_numpy()
             for name in ("naive", "drift")}
    assert (alone["drift"][2:] == 0).all() and (alone["naive"] > 1).all()  # each raised to 0 alone
    forecast = f.predict()
    np.testing.assert_allclose(forecast["mean"], (alone["naive"] + alone["drift"]) / 2, rtol=1e-5)
    assert forecast["mean"].iloc[-1] == pytest.approx(alone["naive"][-1] / 2)
    assert forecast.attrs["floored"] == 0  # no blend fell below 0


def test_statistical_candidates_are_validated_with_one_fit_per_series_carried_forward(monkeypatch):
    """statsforecast's cross_validation(refit=False): each statistical candidate is fitted once per
    series (and channel) before the first validation window, not once per window; a member chosen
    keeps that fit (the series grew at most VARIANT_GROWTH since: 288 steps after 234), fitted
    again only for the calibration's earlier blocks, and its predict fits nothing."""
    import statsforecast.models

    fits = []
    for name in ("AutoETS", "AutoTheta"):
        cls = getattr(statsforecast.models, name)
        monkeypatch.setattr(cls, "fit", lambda self, y, X=None, _fit=cls.fit, _name=name:
                            fits.append((_name, len(y))) or _fit(self, y, X))
    df = hourly()  # 2 columns
    f = Forecaster("auto", candidates=("ets", "theta", "seasonal_naive"), **FAST).fit(df)
    assert f.leaderboard.val_score.notna().all()
    first = len(df) - 9 * H  # 9 validation windows: 15 would make 30 independent ones, a fifth of 288 steps holds 9
    fitted_on = lambda steps: sorted(name for name, n in fits if n == steps)  # noqa: E731
    assert fitted_on(first) == ["AutoETS", "AutoETS", "AutoTheta", "AutoTheta"]  # 2 channels, one fit each
    members = {name for name in ("ets", "theta") if name in f.resolved_settings.network.members}
    once = sorted({"ets": "AutoETS", "theta": "AutoTheta"}[m] for m in members for _ in range(2))
    assert once and len(df) <= VARIANT_GROWTH * first
    assert fitted_on(len(df)) == []
    # 2 x 9 independent validation windows: 2 blocks of calibration windows before them (a third would
    # leave under half of the 234 steps the validation's fits had), forecast by the members alone,
    # fitted once per channel on the history before each
    assert f.leaderboard.attrs["calibration"].startswith("75 windows per series, 54 independent")
    assert [fitted_on(first - block * 9 * H) for block in (1, 2)] == [once] * 2
    assert len(fits) == 4 + 2 * len(once)
    fits.clear()
    f.predict()
    assert fits == []


def _validation(first, horizons, series=1, horizon=H):
    first = np.asarray(first, dtype=np.int64)
    return Validation(first, np.ones_like(first), horizon, horizons, np.zeros(1, np.int64), np.zeros(1, np.int64),
                      np.zeros((1, horizon, 1)), "mase", np.ones((series, 1)))


def test_calibration_blocks_bring_the_independent_windows_toward_the_target_within_the_history():
    # 1 series x 5 horizons = 5 independent windows: 19 more blocks wanted, at most 3
    assert calibration_blocks(_validation([1000], 5)) == MAX_CALIBRATION_BLOCKS == 3
    # 34 series x 2 horizons = 68: one block brings them to 136
    assert calibration_blocks(_validation([1000] * 34, 2)) == 1
    assert calibration_blocks(_validation([1000] * 50, 2)) == 0  # 100 already
    # each series keeps half the history its validation fit had: 130 steps hold 65 // 30 = 2 blocks
    # of 5 horizons of 6 steps, the shortest series decides
    assert calibration_blocks(_validation([130, 1000], 5, series=2)) == 2
    assert calibration_blocks(_validation([59], 5)) == 0
    # counted from each series' first observed step: 130 steps after 940 missing ones hold 2 blocks
    assert calibration_blocks(_validation([1070, 1000], 5, series=2), starts=np.array([940, 0])) == 2


def test_a_network_member_keeps_the_calibration_to_the_validation_windows(networks_allowed):
    """A chosen network would train again for every earlier block: the calibration reads the
    validation's windows alone, and the leaderboard says why."""
    f = Forecaster("auto", candidates=("dlinear",), **FAST).fit(hourly())
    assert f.calibration.windows == 8 * H // 2 + 1  # 9 horizons, origins 2 steps apart (25: about the 30 wanted)
    assert f.leaderboard.attrs["calibration"] == (
        "25 windows per series, 18 independent (series x windows one horizon apart): the validation's alone, as "
        "dlinear would train again for earlier windows (100 wanted)")


def test_a_member_whose_forecasts_cost_a_fit_keeps_the_calibration_to_the_validation_windows(monkeypatch):
    """A block would fit such a member (MSTL) again at every one of its origins, not once: the
    calibration reads the validation's windows alone, and the leaderboard says why. Here the
    seasonal naive forecast plays that member (its class marked so), the theta model keeps to one fit."""
    blocks = []
    forecast = tsrec.candidates.Candidates.forecast

    def recording(self, name, first, **kwargs):
        blocks.append(name)
        return forecast(self, name, first, **kwargs)

    monkeypatch.setattr(tsrec.candidates.Candidates, "forecast", recording)
    f = Forecaster("auto", candidates=("theta", "seasonal_naive"), **FAST).fit(hourly())
    assert f.calibration.windows == 3 * (8 * H // 2 + 1) and set(blocks) == {"theta", "seasonal_naive"}  # 2 blocks
    blocks.clear()
    monkeypatch.setattr(tsrec.models.naive.SeasonalNaive, "forecast_refits", True)
    f = Forecaster("auto", candidates=("theta", "seasonal_naive"), **FAST).fit(hourly())
    assert (f.leaderboard.set_index("model").weight > 0).all()  # both chosen, as before
    assert f.calibration.windows == 8 * H // 2 + 1 and not blocks
    assert f.leaderboard.attrs["calibration"] == (
        "25 windows per series, 18 independent (series x windows one horizon apart): the validation's alone, as "
        "seasonal_naive would be fitted again at every origin for earlier windows (100 wanted)")


def test_an_earlier_block_a_member_cannot_fit_ends_the_calibration_there(monkeypatch):
    """A member the shorter history of an earlier block cannot fit stops the blocks (the fit and the
    blocks before it stand), and the leaderboard says why."""
    forecast = tsrec.candidates.Candidates.forecast

    def failing(self, name, first, **kwargs):
        if (first < self.validation.first - self.validation.horizons * H).any():
            raise ValueError("too short")
        return forecast(self, name, first, **kwargs)

    monkeypatch.setattr(tsrec.candidates.Candidates, "forecast", failing)
    f = Forecaster("auto", candidates=("theta", "seasonal_naive"), **FAST).fit(hourly())
    assert f.calibration.windows == 2 * (8 * H // 2 + 1)  # the validation's (9 horizons) and one block
    assert f.leaderboard.attrs["calibration"].endswith("the validation's and 1 block(s) before them (block 2 failed: "
                                                       "too short)")
    assert f.predict(levels=[80]).attrs["intervals"] == "conformal"


def test_an_epoch_budget_trains_the_networks_in_rungs(networks_allowed):
    """``max_epochs`` (no ``max_steps``) is the networks' whole run, split into rungs as a step budget
    is (it crashed with a TypeError when the rungs were cut from ``max_steps`` alone)."""
    f = Forecaster("auto", candidates=("seasonal_naive", "dlinear"), prediction_length=H, max_epochs=2,
                   trainer_kwargs=QUIET).fit(hourly())
    note = f.leaderboard.set_index("model").loc["dlinear", "note"]
    assert note.startswith("rung ") and f.leaderboard.val_score.notna().all()


def test_five_years_of_months_at_a_one_year_horizon_are_forecast():
    """60 monthly steps, horizon 12: two validation windows leave 36 steps, which every statistical
    candidate and seasonal naive fit (a model that is not trained holds out no validation windows of
    its own; it refused with a miscounted length)."""
    t = np.arange(60)
    df = pd.DataFrame({"y": 100 + t + 10 * np.sin(2 * np.pi * t / 12)},
                      index=pd.date_range("2015-01-01", periods=60, freq="MS"))
    f = Forecaster("auto", candidates=("seasonal_naive", "theta"), prediction_length=12).fit(df)
    assert f.leaderboard.val_score.notna().all() and (f.leaderboard.note == "").all()
    assert len(f.predict()) == 12


def test_one_short_series_does_not_refuse_the_panel():
    """One series of 80 weeks among longer ones, horizon 13: its history before the validation
    windows (41 steps) is shorter than a season, and every candidate still fits and forecasts it."""
    frames = []
    for i, n in enumerate([80] + [200] * 6):
        t = np.arange(n)
        frames.append(pd.DataFrame({"id": f"w{i}", "ds": pd.date_range(end="2024-12-29", periods=n, freq="W"),
                                    "y": 50 + 5 * np.sin(2 * np.pi * t / 52) + np.sin(t)}))
    f = Forecaster("auto", candidates=("seasonal_naive", "theta"), prediction_length=13).fit(
        pd.concat(frames), id_col="id", time_col="ds")
    assert f.leaderboard.val_score.notna().all()
    forecast = f.predict()
    assert len(forecast) == 7 * 13 and forecast["mean"].notna().all()


def launched(frame_of_nan: bool) -> pd.DataFrame:
    """Six weekly series of 200 weeks, one of them a product launched 14 weeks before the end: NaN
    (``frame_of_nan``, as a pivoted frame holds it) or no rows before."""
    frames = []
    for i in range(6):
        t = np.arange(200)
        y = 50 + 5 * i + 5 * np.sin(2 * np.pi * t / 52) + np.sin(t)
        if i == 5:
            y[:-14] = np.nan
        frames.append(pd.DataFrame({"id": f"w{i}", "ds": pd.date_range(end="2024-12-29", periods=200, freq="W"),
                                    "y": y}))
    df = pd.concat(frames)
    return df if frame_of_nan else df.dropna()


@pytest.mark.parametrize("frame_of_nan", [True, False], ids=["NaN before", "no rows before"])
def test_a_product_launched_inside_the_validation_windows_is_validated_on_its_own_steps(validations, frame_of_nan):
    """A series whose values begin inside the validation windows every other series has (3 windows of
    4 weeks) is as long as what it holds, NaN before it or not: the windows shrink to fit its 14 weeks
    (it was handed the others' windows, and every candidate failed on its empty history before them)."""
    f = Forecaster("auto", candidates=("seasonal_naive", "theta", "ets"), prediction_length=4).fit(
        launched(frame_of_nan), id_col="id", time_col="ds")
    assert f.leaderboard.val_score.notna().all() and validations[-1].windows == 1
    assert validations[-1].validated.all()
    forecast = f.predict()
    assert len(forecast) == 6 * 4 and forecast["mean"].notna().all()


def test_a_wide_frames_column_launched_inside_the_validation_windows_is_named_with_the_fix():
    wide = launched(True).pivot(index="ds", columns="id", values="y")
    auto = Forecaster("auto", candidates=("seasonal_naive", "theta"), prediction_length=4)
    with pytest.raises(ValueError, match=r"column 'w5' is first observed at 2024-09-29 00:00:00, after auto's "
                                         r"validation windows begin \(2024-08-18 00:00:00, the same for every column "
                                         r"of a wide frame\).*Fit a long frame") as info:
        auto.fit(wide)
    fix = re.search(r"\((df\.rename_axis.*reset_index\(\))\)", str(info.value)).group(1)
    assert auto.fit(eval(fix, {"df": wide})).predict()["mean"].notna().all()  # the fix as the message writes it


def test_covariates_no_chosen_member_reads_are_named_in_a_warning():
    """On data too small for the networks, the covariates given to the default change nothing:
    a warning says so, why, and what reads them (it was silent)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(24 * 8)
    df = hourly(n=24 * 8)[["a"]].assign(x=x)
    with pytest.warns(UserWarning, match=r"auto: the covariates \['x'\] are read by none of the members chosen .*"
                                         r"the networks, which read them, were skipped \(skipped: \d+ training "
                                         r"windows < 1000.*fit a network by name"):
        Forecaster("auto", candidates=("seasonal_naive", "dlinear"), **FAST).fit(df, past_covariates=["x"])


def test_a_covariate_gap_in_the_history_reads_as_the_training_mean(networks_allowed, recwarn):
    """A gap in a covariate inside the fit frame (docs/covariates.md: it reads as the training mean)
    is not refused by auto: the network that reads it is scored and chosen."""
    df = hourly()[["a"]].assign(x=np.sin(np.arange(24 * 12)))
    df.iloc[100:105, 1] = np.nan
    f = Forecaster("auto", candidates=("dlinear",), **FAST).fit(df, future_covariates=["x"])
    assert f.leaderboard.val_score.notna().all() and f.leaderboard.covariates[0] == "future: x"
    future = pd.DataFrame({"x": np.zeros(H)}, index=pd.date_range(df.index[-1], periods=H + 1, freq="h")[1:])
    assert f.predict(future_covariates=future)["mean"].notna().all()


def test_the_eval_metric_scores_selects_and_is_saved(tmp_path):
    """``eval_metric`` names what the candidates are scored and weighted by (MASE by default); an
    unknown one says which there are."""
    df = hourly()
    f = Forecaster("auto", candidates=("seasonal_naive", "naive"), **FAST).fit(df)
    assert f.leaderboard.attrs["eval_metric"] == "mase"
    g = Forecaster("auto", candidates=("seasonal_naive", "naive"), eval_metric="smape", **FAST).fit(df)
    assert g.leaderboard.attrs["eval_metric"] == "smape"
    assert not np.allclose(g.leaderboard.val_score, f.leaderboard.val_score)
    g.save(tmp_path / "m")
    assert Forecaster.load(tmp_path / "m").leaderboard.attrs["eval_metric"] == "smape"
    listed = r"eval_metric must be one of \('mase', 'rmsse', 'mae', 'mse', 'smape', 'wql'\)"
    with pytest.raises(ValueError, match=listed):
        Forecaster("auto", eval_metric="rmse", **FAST)


def test_absolute_and_squared_losses_weigh_differently():
    """Under MAE the greedy choice keeps the candidate that is exact on most entries; under MSE the
    one that never errs far."""
    truth = np.zeros(10)
    mostly_exact = np.r_[np.zeros(9), 3.0]  # MAE 0.3, MSE 0.9
    always_close = np.full(10, 0.5)  # MAE 0.5, MSE 0.25
    forecasts = np.stack([mostly_exact, always_close])
    assert greedy_weights(truth, forecasts, rounds=1, metric="mae").tolist() == [1.0, 0.0]
    assert greedy_weights(truth, forecasts, rounds=1, metric="mse").tolist() == [0.0, 1.0]


def two_series_validation(metric, scale, levels=()):
    """One window of 3 steps on each of a large series (around 100) and a small one (around 1)."""
    truth = np.array([[100.0, 110.0, 90.0], [1.0, 2.0, 1.5]])[..., None]  # [W, H, C]
    items, origins = np.array([0, 1]), np.array([10, 10])
    return Validation(np.array([10, 10]), np.array([1, 1]), 3, 1, items, origins, truth, metric,
                      np.asarray(scale, dtype=float)[:, None], tuple(levels))


def test_wql_scores_quantiles_as_autogluon_does_and_weighs_series_by_size():
    """``eval_metric="wql"``: quantile forecasts scored as AutoGluon's WQL (twice the mean over the
    levels of the total pinball loss over the total |y|); point forecasts at level 0.5, the total
    absolute error over the total |y|. A forecast exact on the large series and off on the small one
    wins under WQL and loses under the per-series scaled MAE."""
    levels = (0.1, 0.5, 0.9)
    validation = two_series_validation("wql", [1.0, 1.0], levels)
    rng = np.random.default_rng(0)
    y = validation.truth[..., 0].ravel()  # [E]
    quantiles = np.sort(validation.truth[..., None] + rng.normal(0, 5, (2, 3, 1, 3)), axis=-1)  # [W, H, C, Q]
    result = ForecastResult(validation.items, validation.origins, quantiles[..., 1], quantiles[..., 1],
                            levels=levels, quantiles=quantiles)
    f = quantiles[..., 0, :].reshape(-1, 3)  # [E, Q]
    autogluon = 2 * np.mean(np.abs((y[:, None] - f) * ((y[:, None] <= f) - np.array(levels))).sum(axis=0)
                            / np.abs(y).sum())
    assert Scores(validation).add("q", result) == pytest.approx(autogluon, rel=1e-12)

    exact_on_large = validation.truth + np.array([0.0, 1.0])[:, None, None]  # off by 1 on the small series
    exact_on_small = validation.truth + np.array([5.0, 0.0])[:, None, None]  # off by 5 on the large one
    def point(mean):
        return ForecastResult(validation.items, validation.origins, mean, mean)
    for metric, scale, winner in (("wql", [1.0, 1.0], "large"), ("mae", [100.0, 1.0], "small")):
        scores = Scores(two_series_validation(metric, scale))
        large, small = scores.add("large", point(exact_on_large)), scores.add("small", point(exact_on_small))
        assert (large < small) == (winner == "large")
    wql = Scores(two_series_validation("wql", [1.0, 1.0]))
    assert wql.add("large", point(exact_on_large)) == pytest.approx(3.0 / np.abs(y).sum())  # 3 steps off by 1


def test_auto_by_wql_scores_the_quantiles_of_a_quantile_ensemble(networks_allowed, monkeypatch):
    """With ``output="quantile"`` the validation scores every level of each candidate, and the
    leaderboard says ``wql``."""
    seen = []
    add = Scores.add

    def recording(self, name, result):
        seen.append((np.unique(self.levels).tolist(), result.quantiles.shape[-1]))
        return add(self, name, result)

    monkeypatch.setattr(Scores, "add", recording)
    f = Forecaster("auto", candidates=("dlinear",), output="quantile", quantile_levels=(0.1, 0.5, 0.9),
                   eval_metric="wql", **FAST).fit(hourly())
    assert f.leaderboard.attrs["eval_metric"] == "wql" and np.isfinite(f.leaderboard.val_score[0])
    assert seen and all(entry == ([0.1, 0.5, 0.9], 3) for entry in seen)


def test_a_network_within_reach_of_the_leader_is_not_stopped_for_the_budget_alone(networks_allowed, monkeypatch):
    """The first rung spends the networks' budget (here 0.01 CPU-s: every later rung starts past it);
    the network halving keeps trains its later rungs anyway, and its note says why."""
    monkeypatch.setattr(tsrec.halving, "network_budget", lambda *args: 0.01)
    f = Forecaster("auto", candidates=("dlinear",), prediction_length=H, max_steps=90, patience=None,
                   trainer_kwargs=QUIET).fit(hourly())
    note = f.leaderboard.note[0]
    assert note.startswith("rung 3: 90 steps") and "within reach of the leader" in note


@pytest.mark.slow  # MSTL fits, 9 s
def test_mstl_is_a_candidate_where_the_calendar_has_two_seasons_the_history_holds():
    """Hourly data over several weeks with a daily and a weekly cycle: MSTL is scored, in place of ETS,
    Theta and DynamicOptimizedTheta (which take one of the two seasons out, and forecast the rest by
    models of the AutoETS that MSTL fits on what is left); the same hours with a daily cycle only (the
    week a calendar season the data do not show), or monthly data (one season): MSTL is skipped, the
    others scored, and the notes say why."""
    pytest.importorskip("statsforecast", reason="the stats extra: pip install 'tsrec[stats]'")
    n = 24 * 7 * 5
    t = np.arange(n)
    df = pd.DataFrame({"y": 10 + 2 * np.sin(2 * np.pi * t / 24) + np.sin(2 * np.pi * t / 168)},
                      index=pd.date_range("2024-01-01", periods=n, freq="h"))
    one_season = ("ets", "theta", "dynamic_theta")
    board = Forecaster("auto", candidates=("mstl", *one_season, "naive"), prediction_length=24).fit(df).leaderboard
    board = board.set_index("model")
    assert np.isfinite(board.loc["mstl", "val_score"]) and board.loc[list(one_season), "val_score"].isna().all()
    said = "skipped: the data show 2 calendar seasons (24, 168 steps), which MSTL takes out before its own ETS " \
           "forecasts the rest; "
    assert board.loc["ets", "note"] == said + "ETS alone fits one"
    assert board.loc["theta", "note"] == said + "Theta takes one out and forecasts the rest by exponential " \
                                                "smoothing with a drift"
    assert board.loc["dynamic_theta", "note"].startswith(said + "DynamicOptimizedTheta takes one out")
    alone = Forecaster("auto", candidates=(*one_season, "naive"), prediction_length=24).fit(df).leaderboard
    assert np.isfinite(alone.set_index("model").loc[list(one_season), "val_score"]).all()  # without MSTL there
    daily = df.assign(y=10 + 2 * np.sin(2 * np.pi * t / 24) + 0.1 * np.random.default_rng(0).standard_normal(n))
    board = Forecaster("auto", candidates=("mstl", *one_season, "naive"), prediction_length=24).fit(daily).leaderboard
    note = board.set_index("model").loc["mstl", "note"]
    assert note.startswith("skipped: the data show no cycle at the longer calendar season(s) 168 (their spectrum's "
                           "lines, in steps: 24"), note
    assert np.isfinite(board.set_index("model").loc[list(one_season), "val_score"]).all()
    monthly = pd.DataFrame({"y": np.sin(np.arange(100))}, index=pd.date_range("2015-01-01", periods=100, freq="MS"))
    board = Forecaster("auto", candidates=("mstl", "naive"), prediction_length=12).fit(monthly).leaderboard
    assert board.set_index("model").loc["mstl", "note"].startswith("skipped: 1 calendar season(s) that 52 steps")


def test_a_series_too_short_to_validate_gets_an_error_saying_how_long_it_must_be():
    """40 months and a 24-month horizon: the history before the one validation window holds 16
    steps, too few for any candidate; the error says so once, with what fits (before, every candidate
    failed with its own copy of a message that suggested fewer validation windows than one)."""
    df = pd.DataFrame({"y": 10 + np.random.default_rng(0).normal(0, 1, 40)},
                      index=pd.date_range("2020-01-01", periods=40, freq="MS"))
    with pytest.raises(ValueError, match=r"^no series holds 49 steps from its first observed value to its last \(the longest, "
                                         r"the series, has 40\): .* Use prediction_length <= 19, or fit a "
                                         r"statistical model by name"):
        Forecaster(prediction_length=24).fit(df)
    assert len(Forecaster(prediction_length=19).fit(df).predict()) == 19


def test_a_series_too_short_for_any_horizon_is_not_told_to_shorten_it():
    """Two days and a one-day horizon: no horizon can be validated, so the error does not suggest
    ``prediction_length <= 1`` (it did, for this very horizon); it names a model by name, which fits."""
    df = pd.DataFrame({"y": [1.0, 2.0]}, index=pd.date_range("2021-01-01", periods=2, freq="D"))
    with pytest.raises(ValueError, match=r"has 2\): .* No prediction_length can be validated on fewer than 3 steps: "
                                         r"fit a statistical model by name") as raised:
        Forecaster(prediction_length=1).fit(df)
    assert "Use prediction_length" not in str(raised.value)
    assert Forecaster("naive", prediction_length=1).fit(df).predict()["mean"].tolist() == [2.0]


def ragged(lengths, seed=0):
    """A long frame of monthly series of ``lengths`` ending on the same month (a yearly cycle and noise)."""
    rng = np.random.default_rng(seed)
    return pd.concat([pd.DataFrame({"item_id": f"s{i}", "timestamp": pd.date_range(end="2024-12-01", periods=n,
                                                                                   freq="MS"),
                                    "target": 50 + 10 * np.sin(np.arange(n) * 2 * np.pi / 12) + rng.normal(size=n)})
                      for i, n in enumerate(lengths)])


def test_a_series_whose_validation_would_cost_it_its_season_is_left_out_of_it(validations):
    """Monthly series, horizon 6, one validation window: the 26-month one holds two years, but not
    before its window, where ETS and Theta could not fit the yearly season they forecast with; it is
    left out, as the 20-month one (no two years at all) and the long ones are not. Where every
    series would be left out, none is."""
    candidates = ("ets", "theta", "seasonal_naive")
    f = Forecaster(prediction_length=6, candidates=candidates).fit(ragged([120, 120, 30, 26, 20]))
    assert validations[-1].count.tolist() == [1, 1, 1, 0, 1] and validations[-1].first[3] == 26
    assert f.leaderboard.attrs["validation"] == (
        "4 of 5 series validated, 1 window(s) of 6 steps each; 1 left out, as the history before their windows "
        "holds fewer than two seasons of 12 steps where all of it holds two")
    f = Forecaster(prediction_length=6, candidates=("ets", "seasonal_naive")).fit(ragged([26, 27]))
    assert (validations[-1].count > 0).all()
    assert f.leaderboard.attrs["validation"] == "2 of 2 series validated, 2 window(s) of 6 steps each"


def test_a_few_short_series_do_not_set_every_series_validation_windows(validations):
    """20 monthly series of 10 years and 2 products of 30 months, horizon 6: the windows are those
    of the series once the shortest tenth is set aside (3, where the products alone allowed 2), and
    the products, too short for 3 windows and as long a history, are not validated, with a warning;
    with 2 products of 11 series (more than a tenth) they set the windows (2), as before."""
    candidates = ("naive", "seasonal_naive")
    with pytest.warns(UserWarning, match=r"auto: 2 series hold fewer than 36 steps \(item 's20' \(30 steps\), item "
                                         r"'s21' \(30 steps\)\), too few for 3 validation window\(s\) of "
                                         r"prediction_length=6 and as long a history before them"):
        f = Forecaster(prediction_length=6, candidates=candidates).fit(ragged([120] * 20 + [30] * 2))
    assert sorted(validations[-1].count.tolist()) == [0, 0] + [5] * 20  # 3 windows, origins 3 steps apart
    assert f.leaderboard.attrs["validation"] == "20 of 22 series validated, 3 window(s) of 6 steps each"
    f = Forecaster(prediction_length=6, candidates=candidates).fit(ragged([120] * 9 + [30] * 2))
    assert f.leaderboard.attrs["validation"].startswith("9 of 11 series validated, 2 window(s) of 6 steps each; 2 "
                                                        "left out, as the history before their windows holds fewer "
                                                        "than two seasons")  # the products, by the season rule

def test_a_series_too_short_to_validate_is_forecast_by_the_ensemble_chosen_on_the_others(validations):
    """A new series of 15 months in a panel of 10-year ones (horizon 12: 25 steps validate): it holds
    out nothing, the others are validated as without it, and the members fitted on all the history
    forecast it, with bands; a warning names it (the whole fit was refused for it)."""
    with pytest.warns(UserWarning, match=r"auto: 1 series hold fewer than 120 steps \(item 's3' \(15 steps\)\), too "
                                         r"few for 5 validation window\(s\) of prediction_length=12 and as long a "
                                         r"history before them: .* the other 3 forecasts them"):
        f = Forecaster(prediction_length=12, candidates=("ets", "theta", "naive")).fit(ragged([120, 120, 120, 15]))
    validation = validations[-1]
    assert validation.count.tolist()[3] == 0 and validation.first[3] == 15 and set(validation.items) == {0, 1, 2}
    alone = Forecaster(prediction_length=12, candidates=("ets", "theta", "naive")).fit(ragged([120, 120, 120]))
    np.testing.assert_allclose(f.leaderboard.set_index("model").val_score,
                               alone.leaderboard.set_index("model").val_score, rtol=1e-9)
    forecast = f.predict(levels=[80])
    new = forecast[forecast.item_id == "s3"]
    assert len(new) == 12 and np.isfinite(new[["mean", "0.1", "0.9"]].to_numpy()).all()
    assert (new["0.1"] < new["mean"]).all() and (new["mean"] < new["0.9"]).all()


def test_the_models_fitted_on_windows_stay_candidates_beside_a_short_series():
    """The ridge and the trees skip the new series in their fits (it holds no window of theirs) and
    are scored on the others; they had failed for it, leaving the panel to the statistical models."""
    with pytest.warns(UserWarning, match="not validated"):
        f = Forecaster(prediction_length=12, candidates=("ridge", "gbm", "naive")).fit(ragged([120, 120, 120, 15]))
    board = f.leaderboard.set_index("model")
    assert np.isfinite(board.loc[["ridge", "gbm"], "val_score"]).all() and board.weight.sum() == pytest.approx(1)
    assert (board.note.fillna("") == "").all()
    assert np.isfinite(f.predict().query("item_id == 's3'")["mean"]).all()


def test_a_series_shorter_than_the_horizon_is_fitted_whole_and_forecast():
    """A new series of 9 months at horizon 12 (fewer steps than one window of any member): every
    candidate fits it whole (the statistical ones on its 9 steps, the ridge skips it in its windows),
    and the ensemble forecasts it with bands; the whole fit was refused for it."""
    with pytest.warns(UserWarning, match=r"\(item 's1' \(9 steps\)\), too few .* the other 2 forecasts them"):
        f = Forecaster(prediction_length=12, candidates=("ets", "theta", "ridge", "naive")).fit(ragged([120, 9, 120]))
    assert np.isfinite(f.leaderboard.set_index("model").val_score).all()
    new = f.predict(levels=[80]).query("item_id == 's1'")
    assert len(new) == 12 and np.isfinite(new[["mean", "0.1", "0.9"]].to_numpy()).all()
    assert (new["0.1"] < new["mean"]).all() and (new["mean"] < new["0.9"]).all()


def two_cycles(weeks=5):
    """One hourly series with a daily and a weekly cycle (MSTL's two seasons)."""
    t = np.arange(24 * 7 * weeks)
    return pd.DataFrame({"y": 10 + 2 * np.sin(2 * np.pi * t / 24) + np.sin(2 * np.pi * t / 168)},
                        index=pd.date_range("2024-01-01", periods=len(t), freq="h"))


@pytest.fixture
def origin_counts(monkeypatch):
    """``(model, first step past the validation's first, origins per series, stride)`` of every
    forecast auto makes of its validation windows (not of its calibration's earlier blocks)."""
    made = []
    origins = tsrec.candidates.Candidates.origins

    def recording(self, name, fit, first, count, stride):
        if (first >= self.validation.first).all():
            made.append((name, int((first - self.validation.first).max()), int(count.max()), stride))
        return origins(self, name, fit, first, count, stride)

    monkeypatch.setattr(tsrec.candidates.Candidates, "origins", recording)
    return made


@pytest.mark.slow  # two MSTL fits, 18 s
def test_a_candidate_whose_forecasts_cost_a_fit_is_scored_on_its_independent_windows_first(origin_counts,
                                                                                           validations, monkeypatch):
    """MSTL decomposes each history again at every origin: it forecasts the windows one horizon apart
    first and, within reach of the leader there (here far ahead of the last value), the origins
    between them, each window once, as the others forecast every origin in one pass; its forecasts
    are those of one pass over every origin."""
    pytest.importorskip("statsforecast", reason="the stats extra: pip install 'tsrec[stats]'")
    f = Forecaster("auto", candidates=("mstl", "naive"), prediction_length=24).fit(two_cycles())
    validation = validations[-1]
    stride, horizons = validation.stride, validation.horizons
    assert stride < 24  # else there is nothing to save, and no first pass
    between = [("mstl", k * stride, horizons - 1, 24) for k in range(1, 24 // stride)]
    assert origin_counts == [("naive", 0, validation.windows, stride), ("mstl", 0, horizons, 24), *between]
    assert sum(count for name, _, count, _ in origin_counts if name == "mstl") == validation.windows
    board, calls = f.leaderboard.set_index("model"), len(origin_counts)
    monkeypatch.setattr(tsrec.models.stats.MSTL, "forecast_refits", False)  # every origin in one pass
    again = Forecaster("auto", candidates=("mstl", "naive"), prediction_length=24).fit(two_cycles()).leaderboard
    assert ("mstl", 0, validation.windows, stride) in origin_counts[calls:]
    np.testing.assert_allclose(again.set_index("model").val_score, board.val_score, rtol=1e-12)
    np.testing.assert_allclose(again.set_index("model").weight, board.weight, rtol=1e-12)


def test_a_candidate_whose_forecasts_cost_a_fit_stops_where_it_is_behind_the_leader(origin_counts, validations,
                                                                                      monkeypatch):
    """Behind the leader by more than the halving factor on the independent windows (here any
    amount: the factor is 0), such a candidate forecasts no other origin, gets no score and no weight,
    and its note says why."""
    pytest.importorskip("statsforecast", reason="the stats extra: pip install 'tsrec[stats]'")
    monkeypatch.setattr(tsrec.candidates, "HALVING_FACTOR", 0.0)
    board = Forecaster("auto", candidates=("mstl", "naive"), prediction_length=24).fit(two_cycles()).leaderboard
    validation = validations[-1]
    assert origin_counts == [("naive", 0, validation.windows, validation.stride), ("mstl", 0, validation.horizons, 24)]
    mstl = board.set_index("model").loc["mstl"]
    assert np.isnan(mstl.val_score) and mstl.weight == 0
    assert mstl.note.startswith(f"stopped after {validation.horizons} of {validation.windows} origins per series "
                                "(each of its forecasts costs about a fit): ") and "the leader (naive)" in mstl.note


def test_a_candidate_behind_a_leader_that_scores_0_stops_saying_so(monkeypatch):
    """A leader that forecast the independent windows exactly (an error of 0, as the last value of a
    series that stopped moving can): no division by it, and the note says so."""
    pytest.importorskip("statsforecast", reason="the stats extra: pip install 'tsrec[stats]'")
    monkeypatch.setattr(Scores, "leader_on", lambda self, windows: ("naive", 0.0))
    board = Forecaster("auto", candidates=("mstl", "naive"), prediction_length=24).fit(two_cycles()).leaderboard
    note = board.set_index("model").note["mstl"]
    assert note.startswith("stopped after") and note.endswith("where the leader (naive) scores 0 on them"), note


def test_forecasts_made_in_passes_are_merged_in_window_order():
    """Two series' windows forecast in three passes (the independent origins, then those one and two
    strides past them) come back in ``window_origins``' order: series in order, origins rising."""
    first = np.array([10, 40])
    items, origins = window_origins(first, np.array([7, 7]), 2)  # 3 windows of 6 steps per series, 2 apart
    mean = (items * 1000 + origins).astype(float)[:, None, None] * np.ones((1, 6, 1))  # [W, H, C]: its window
    by_window = dict(zip(zip(items.tolist(), origins.tolist()), mean))
    parts = []
    for shift, count in ((0, 3), (2, 2), (4, 2)):
        part_items, part_origins = window_origins(first + shift, np.array([count, count]), 6)
        part_mean = np.stack([by_window[key] for key in zip(part_items.tolist(), part_origins.tolist())])
        parts.append(ForecastResult(part_items, part_origins, part_mean, part_mean))
    merged = tsrec.candidates.merged(parts)
    np.testing.assert_array_equal(merged.items, items)
    np.testing.assert_array_equal(merged.origins, origins)
    np.testing.assert_array_equal(merged.mean, mean)


@pytest.mark.parametrize("metric, levels", [("mase", ()), ("wql", (0.1, 0.5, 0.9))])
def test_scores_on_a_subset_of_the_windows_are_the_scores_of_those_windows_alone(metric, levels):
    """``Scores.score_on`` and ``leader_on`` read the windows named (here the independent ones) as
    ``add`` reads them all: a validation made of those windows alone scores them alike (point
    forecasts, and quantiles at every level)."""
    df = long_hourly(n=24 * 10)
    panel = canonicalize(df, id_col="id", time_col="ds", target_col="y")
    ends = np.array([len(item) for item in panel.items])
    every = Validation.of(panel, ends, 3, 24, 8, metric, 24, levels=levels)  # 7 origins per series, 8 steps apart
    alone = Validation.of(panel, ends, 3, 24, 24, metric, 24, levels=levels)  # the 3 one horizon apart
    windows = every.independent
    np.testing.assert_array_equal(every.origins[windows], alone.origins)
    np.testing.assert_array_equal(every.items[windows], alone.items)
    rng = np.random.default_rng(0)
    scores, subset = Scores(every), Scores(alone)
    spread = np.asarray(levels) - 0.5  # [Q] each level's offset from the point forecast

    def result(validation, mean):
        quantiles = mean[..., None] + spread if levels else None
        return ForecastResult(validation.items, validation.origins, mean, mean, levels=levels, quantiles=quantiles)

    expected = {}
    for name, noise in (("good", 0.1), ("bad", 1.0)):
        mean = every.truth + noise * rng.standard_normal(every.truth.shape)
        scores.add(name, result(every, mean))
        expected[name] = subset.add(name, result(alone, mean[windows]))
        assert scores.score_on(windows, result(alone, mean[windows])) == pytest.approx(expected[name])
    assert expected["good"] < expected["bad"]
    assert scores.leader_on(windows) == ("good", pytest.approx(expected["good"]))


def test_without_statsforecast_the_networks_budget_is_not_tied_to_seasonal_naives_cost(networks_allowed,
                                                                                        monkeypatch):
    """The budget's bound of 3x what the statistical candidates cost counts statsforecast's models:
    with only the last value and seasonal naive (the base install) it gave the networks one step."""
    budgets = []
    monkeypatch.setattr(tsrec.halving, "network_budget", lambda *args: budgets.append(args) or 1e6)
    Forecaster("auto", candidates=("seasonal_naive", "naive", "dlinear"), **FAST).fit(hourly())
    assert budgets[-1][2] is None  # no bound by the statistical candidates' cost
    Forecaster("auto", candidates=("theta", "naive", "dlinear"), **FAST).fit(hourly())
    assert budgets[-1][2] > 0  # theta's CPU seconds (not naive's)


def test_a_column_never_observed_and_a_quantile_output_without_networks_get_one_error_with_the_fix():
    """A wide frame's column of NaN is named once (it was named once per candidate, 12 times); a
    quantile output on data too small for the networks says what gives quantiles instead."""
    df = hourly()
    df["empty"] = np.nan
    with pytest.raises(ValueError, match=r"^column 'empty' has no observed value in the training part \(its first 288 "
                                         r"steps\); drop it, or fit on a frame where it has data$"):
        Forecaster(**FAST).fit(df)
    with pytest.raises(ValueError, match=r"auto: no candidate was scored on the fit frame: .*skipped: \d+ training "
                                         r"windows < 1000 .*; output='quantile' scores the trainable candidates alone: "
                                         r"fit the default output, whose conformal bands give quantiles"):
        Forecaster(output="quantile", **FAST).fit(hourly())


def test_promotions_a_covariate_marks_are_kept_for_every_candidate_and_learned():
    """far_values='auto' is decided once, on all of the fit frame, for every candidate and the
    ensemble: the promotions (+60 on noise of 1, on about 1 day in 25, given as a future covariate)
    are kept, the ridge that reads the covariate leads, and the next promotion is forecast."""
    rng = np.random.default_rng(3)
    n, horizon = 300, 7
    frames = []
    for i in range(3):
        promo = (rng.random(n) < 0.04).astype(float)
        promo[-horizon:] = 0.0
        promo[-3] = 1.0
        frames.append(pd.DataFrame({"id": f"s{i}", "ds": pd.date_range("2024-01-01", periods=n, freq="D"),
                                    "y": 20 + 5 * i + rng.standard_normal(n) + 60 * promo, "promo": promo}))
    df = pd.concat(frames, ignore_index=True)
    train, ahead = df.groupby("id").head(n - horizon), df.groupby("id").tail(horizon)
    with pytest.warns(UserWarning, match="far_values='auto' kept them as events .* covariate 'promo'"):
        f = Forecaster(candidates=("ridge", "ets", "naive"), prediction_length=horizon, trainer_kwargs=QUIET).fit(
            train, id_col="id", time_col="ds", target_col="y", future_covariates=["promo"])
    assert f.settings.window.far_values == "auto" and f.resolved_settings.window.far_values == "keep"
    assert f.leaderboard.set_index("model").weight["ridge"] > 0.5
    forecast = f.predict(future_covariates=ahead[["id", "ds", "promo"]])
    on_promo = forecast.merge(ahead, left_on=["item_id", "timestamp"], right_on=["id", "ds"]).query("promo == 1")
    assert ((on_promo["mean"] - on_promo["y"]).abs() < 15).all()
