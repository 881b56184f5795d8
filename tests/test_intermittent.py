"""Intermittent demand and the random walk with drift: statsforecast's CrostonOptimized, ADIDA, IMAPA
and TSB as ``croston``, ``adida``, ``imapa`` and ``tsb`` (what statsforecast forecasts on the same
histories; their fits kept, saved and carried forward), ``drift`` (statsforecast's
RandomWalkWithDrift), the intermittency rule, and auto's use of them: the intermittent models tried
only on intermittent data, scored by RMSSE unless the user names a metric."""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pandas as pd
import pytest
import torch

from tsrec import Forecaster
from tsrec.validation import eval_metric_for, series_scales
from tsrec.data import canonicalize
from tsrec.evaluation import backtest
from tsrec.models import build_model, list_models
from tsrec.models.ensemble import AUTO_CANDIDATES
from tsrec.models.intermittent import ADI_THRESHOLD, INTERMITTENT_MODELS, intermittency
from tsrec.models.parameters import FITTED, NONE

LONG = {"id_col": "id", "time_col": "time", "target_col": "y"}
QUIET = {"enable_progress_bar": False, "logger": False}
H = 6
#: The registered model and the statsforecast class (with its arguments) it is.
REFERENCES = {"croston": ("CrostonOptimized", {}), "adida": ("ADIDA", {}), "imapa": ("IMAPA", {}),
              "tsb": ("TSB", {"alpha_d": 0.2, "alpha_p": 0.2})}


def demand(lengths=(60, 83, 101), rate=0.3, seed=0, freq="W"):
    """Weekly intermittent demand of unequal lengths and ends (a long frame): a demand in about
    ``rate`` of the weeks, of Poisson size; the last series' first weeks have none."""
    rng = np.random.default_rng(seed)
    parts = []
    for k, n in enumerate(lengths):
        y = (rng.random(n) < rate) * (1 + rng.poisson(2 + k, n)).astype(float)
        if k == len(lengths) - 1:
            y[:10] = 0.0
        stamps = pd.date_range("2015-01-04", periods=n, freq=freq) + pd.tseries.frequencies.to_offset(freq) * (3 - k)
        parts.append(pd.DataFrame({"id": f"s{k}", "time": stamps, "y": y}))
    return pd.concat(parts, ignore_index=True)


def reference(name):
    statsforecast = pytest.importorskip("statsforecast.models", reason="the stats extra: pip install 'tsrec[stats]'")
    cls, kwargs = REFERENCES[name]
    return getattr(statsforecast, cls)(**kwargs)


def statsforecasts(model, df, h, freq="W"):
    """What a statsforecast user gets: one call on the long frame, in the order of the ids."""
    from statsforecast import StatsForecast

    frame = df.rename(columns={"id": "unique_id", "time": "ds"})
    out = StatsForecast(models=[model], freq=freq, n_jobs=1).forecast(df=frame, h=h)
    return out.sort_values(["unique_id", "ds"])[repr(model)].to_numpy()


def ordered(forecast):
    return forecast.sort_values(["item_id", "timestamp"])["mean"].to_numpy()


@pytest.mark.parametrize("name", INTERMITTENT_MODELS)
def test_forecasts_are_statsforecasts_on_the_whole_histories(name):
    """fit/predict on series of unequal lengths and ends: what statsforecast forecasts on the same frame."""
    model = reference(name)
    df = demand()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f = Forecaster(name, prediction_length=H).fit(df, **LONG)
        forecast = f.predict()
    assert f.context_length == 101
    np.testing.assert_allclose(ordered(forecast), statsforecasts(model, df, H), rtol=1e-6, atol=1e-9)


def ses(x, alpha):
    """Simple exponential smoothing's next value after ``x``, started at ``x[0]`` (written out here,
    independently of statsforecast's C++)."""
    level = x[0]
    for value in x:
        level = alpha * value + (1 - alpha) * level
    return level


def intervals(y):
    return np.diff(np.flatnonzero(y != 0) + 1, prepend=0).astype(float)


def blocks(y, size):
    cut = y[len(y) % size:]
    return cut.reshape(-1, size).sum(axis=1)


def carried(name, codes, values, y):
    """The forecast of history ``y`` by the fit ``codes``, ``values`` kept at fit."""
    if name == "croston":
        return ses(y[y > 0], values[0]) / ses(intervals(y), values[1])
    if name == "adida":
        return ses(blocks(y, codes[0]), values[0]) / codes[0]
    return np.mean([ses(blocks(y, size), values[size - 1]) / size for size in range(1, codes[0] + 1)])


@pytest.mark.parametrize("name", ["croston", "adida", "imapa"])
def test_the_fit_is_kept_and_carried_forward_without_fitting_again(name, monkeypatch, tmp_path):
    """Fitted on each series before its last 3 windows: the parameters kept are statsforecast's
    choice (the forecast of the fitted history is statsforecast's), a backtest of the 3 windows and a
    loaded model fit nothing (no statsforecast call) and apply them to each window's whole history
    (the smoothing run again over it with the kept parameters)."""
    model = reference(name)
    df, windows = demand(), 3
    before = df[df.groupby("id").cumcount(ascending=False) >= windows * H]
    f = Forecaster(name, prediction_length=H).fit(before, **LONG)
    parameters = f.model.parameters
    assert (parameters.status == FITTED).all()
    np.testing.assert_allclose(ordered(f.predict()), statsforecasts(model, before, H), rtol=1e-6, atol=1e-9)
    cls = type(model)
    for method in ("fit", "forecast"):
        monkeypatch.setattr(cls, method, lambda *args, **kwargs: pytest.fail("fitted again"))
    errors = backtest(f, df, n_windows=windows, baselines=("naive",), **LONG).errors
    for row, item in enumerate(["s0", "s1", "s2"]):
        codes, values = parameters.entry(row, 0)
        y = df[df.id == item].y.to_numpy()
        expected = [carried(name, codes, values, y[:len(y) - (windows - k) * H]) for k in range(windows)]
        got = errors[errors.item_id == item].sort_values(["origin", "step"]).y_pred.to_numpy().reshape(windows, H)
        np.testing.assert_allclose(got, np.repeat(np.array(expected)[:, None], H, axis=1), rtol=1e-6)
    f.save(tmp_path / "m")
    loaded = Forecaster.load(tmp_path / "m")
    np.testing.assert_array_equal(loaded.model.parameters.values, parameters.values)
    pd.testing.assert_frame_equal(loaded.predict(), f.predict())


@pytest.mark.parametrize("name", INTERMITTENT_MODELS)
def test_a_refitting_backtest_is_statsforecasts_cross_validation(name):
    """``backtest(refit_every=1)``: each window fitted on its own history, statsforecast's
    ``cross_validation(refit=True)`` of the same series."""
    from statsforecast import StatsForecast

    model = reference(name)
    df = demand()
    result = backtest(Forecaster(name, prediction_length=H), df, n_windows=3, refit_every=1, baselines=("naive",),
                      **LONG)
    got = result.errors.sort_values(["item_id", "origin", "step"]).y_pred.to_numpy()
    frame = df.rename(columns={"id": "unique_id", "time": "ds"})
    cv = StatsForecast(models=[model], freq="W", n_jobs=1).cross_validation(df=frame, h=H, n_windows=3, step_size=H)
    np.testing.assert_allclose(got, cv.sort_values(["unique_id", "cutoff", "ds"])[repr(model)], rtol=1e-6, atol=1e-9)


def test_a_series_without_demand_at_fit_keeps_nothing_and_is_fitted_on_each_window():
    """A series of zeros at fit has nothing to smooth: no parameters (status NONE), and a later window
    with demand is statsforecast's forecast of that window."""
    model = reference("croston")
    df = demand(lengths=(40, 40))
    df.loc[df.id == "s1", "y"] = 0.0
    f = Forecaster("croston", prediction_length=H).fit(df, **LONG)
    assert f.model.parameters.status[:, 0].tolist() == [FITTED, NONE]
    later = df.copy()
    later.loc[later.index[later.id == "s1"][-5:], "y"] = [3.0, 0.0, 2.0, 0.0, 1.0]
    got = ordered(f.predict(later))[H:]
    np.testing.assert_allclose(got, model.forecast(y=later[later.id == "s1"].y.to_numpy(), h=H)["mean"], rtol=1e-6)


def test_a_zero_comes_back_from_the_scalers_round_trip_as_a_zero():
    """The statistical models unscale their windows (float64): 0 must stay 0, not 1e-16, or the
    intermittent models would count every zero as a demand."""
    from tsrec.models.stats import unscaled

    rng = np.random.default_rng(0)
    loc, scale = rng.uniform(0.1, 50, (200, 1, 1)), rng.uniform(0.1, 50, (200, 1, 1))
    values = np.array([0.0, 1.0, 3.0, 1e-3])[None, :, None]
    back = unscaled((values - loc) / scale, loc, scale)
    assert (back[:, 0] == 0).all() and (back[:, 1:] != 0).all()
    np.testing.assert_allclose(back, np.broadcast_to(values, back.shape), rtol=0, atol=1e-12)
    assert ((values - loc) / scale * scale + loc != 0)[:, 0].any()  # the plain round trip misses 0


def test_an_edited_parameter_block_is_a_value_error():
    f = Forecaster("imapa", prediction_length=H).fit(demand(), **LONG)
    state = f.model.get_extra_state()
    bad = {**state, "codes": state["codes"] + 1}  # one more block length than smoothing parameters kept
    with pytest.raises(ValueError, match=r"IMAPA's fitted parameters .* which are not a IMAPA fit"):
        f.model.set_extra_state(bad)


def test_the_intermittent_models_take_no_season_and_tsb_checks_its_smoothing():
    pytest.importorskip("statsforecast")
    with pytest.raises(ValueError, match="have no season"):
        Forecaster("croston", prediction_length=H, season_length=12)
    with pytest.raises(ValueError, match=r"alpha_d must be in \(0, 1\], got 0"):
        Forecaster("tsb", prediction_length=H, alpha_d=0)
    f = Forecaster("tsb", prediction_length=H, alpha_d=0.5, alpha_p=0.1).fit(demand(), **LONG)
    from statsforecast.models import TSB

    np.testing.assert_allclose(ordered(f.predict()), statsforecasts(TSB(alpha_d=0.5, alpha_p=0.1), demand(), H),
                               rtol=1e-6, atol=1e-9)


def test_without_statsforecast_the_intermittent_models_name_the_extra_and_drift_still_runs(monkeypatch):
    monkeypatch.setitem(sys.modules, "statsforecast", None)
    for name in INTERMITTENT_MODELS:
        with pytest.raises(ModuleNotFoundError, match=r"pip install \"tsrec\[stats\]\""):
            Forecaster(name, prediction_length=H)
    assert Forecaster("drift", prediction_length=H).fit(demand(), **LONG).predict()["mean"].notna().all()


# ----------------------------------------------------------------------------- drift


def trending(lengths=(40, 61, 75), seed=0):
    rng = np.random.default_rng(seed)
    return pd.concat([pd.DataFrame({"id": f"s{k}", "time": pd.date_range("2015-01-01", periods=n, freq="MS")
                                    + pd.offsets.MonthBegin(3 - k),
                                    "y": 50 + (k + 1) * 0.4 * np.arange(n) + rng.standard_normal(n)})
                      for k, n in enumerate(lengths)], ignore_index=True)


def test_drift_is_statsforecasts_random_walk_with_drift_on_whole_histories():
    """Each series read whole (its first value sets the drift), a missing tail extended over."""
    statsforecast = pytest.importorskip("statsforecast.models")
    df = trending()
    f = Forecaster("drift", prediction_length=H).fit(df, **LONG)
    assert f.context_length == 75
    expected = statsforecasts(statsforecast.RandomWalkWithDrift(), df, H, "MS")
    np.testing.assert_allclose(ordered(f.predict()), expected, rtol=1e-6)
    gappy = df.copy()
    tail = gappy.index[gappy.id == "s1"][-3:]
    gappy.loc[tail, "y"] = np.nan
    with pytest.warns(UserWarning, match="drift extends the line"):
        got = ordered(f.predict(gappy))[H:2 * H]
    y = df[df.id == "s1"].y.to_numpy()[:-3]
    np.testing.assert_allclose(got, statsforecast.RandomWalkWithDrift().forecast(y=y, h=3 + H)["mean"][3:], rtol=1e-6)


def test_drift_backtest_is_statsforecasts_cross_validation():
    from statsforecast import StatsForecast
    from statsforecast.models import RandomWalkWithDrift

    df = trending()
    f = Forecaster("drift", prediction_length=H).fit(df.groupby("id").head(30), **LONG)
    got = backtest(f, df, n_windows=3, baselines=("naive",), **LONG).errors
    frame = df.rename(columns={"id": "unique_id", "time": "ds"})
    cv = StatsForecast(models=[RandomWalkWithDrift()], freq="MS", n_jobs=1).cross_validation(
        df=frame, h=H, n_windows=3, step_size=H)
    np.testing.assert_allclose(got.sort_values(["item_id", "origin", "step"]).y_pred,
                               cv.sort_values(["unique_id", "cutoff", "ds"])["RWD"], rtol=1e-6)


def test_drift_reads_no_missing_value_and_repeats_a_single_observation():
    model = build_model("drift", context_length=6, prediction_length=3, n_channels=2, n_time_features=0)
    past = torch.tensor([[[9.0, 9.0], [1.0, 9.0], [2.0, 9.0], [9.0, 9.0], [4.0, 9.0], [9.0, 7.0]]])
    observed = torch.tensor([[[0, 0], [1, 0], [1, 0], [0, 0], [1, 0], [0, 1]]], dtype=torch.float32)
    out = model({"past_target": past, "past_observed": observed})
    # channel 0: from 1 (step 1) to 4 (step 4), a drift of 1 per step, extended from step 4 to steps 6, 7, 8
    np.testing.assert_allclose(out[0, :, 0], [6.0, 7.0, 8.0])
    np.testing.assert_allclose(out[0, :, 1], [7.0, 7.0, 7.0])  # one observation: no drift


# ----------------------------------------------------------------------------- the rule and auto


def test_the_intermittency_rule():
    """A series is intermittent where it is never negative and its ADI (observed steps per nonzero
    one) is at least 1.32; the data are where at least half of their series are."""
    def series(zeros, n=100, negative=False):
        y = np.r_[np.zeros(zeros), np.ones(n - zeros)]
        if negative:
            y[-1] = -1.0
        return y[:, None], np.ones((n, 1), bool)

    at = int(np.ceil(100 * (1 - 1 / ADI_THRESHOLD)))  # the fewest zeros of 100 steps with ADI >= 1.32
    assert intermittency(*zip(series(at))).intermittent == 1
    assert intermittency(*zip(series(at - 1))).intermittent == 0
    assert intermittency(*zip(series(90, negative=True))).intermittent == 0
    assert intermittency(*zip(series(100))).intermittent == 1  # no demand at all
    half = intermittency(*zip(series(50), series(0)))
    assert half.detected and half.series == 2 and half.zeros == pytest.approx(0.25)
    assert not intermittency(*zip(series(50), series(0), series(0))).detected
    assert "1 of 3 series have an average demand interval >= 1.32" in \
        intermittency(*zip(series(50), series(0), series(0))).describe()
    unobserved = (np.zeros((10, 1)), np.zeros((10, 1), bool))
    assert intermittency(*zip(unobserved, series(0))).series == 1  # nothing observed counts for nothing


def test_the_metric_is_the_users_else_rmsse_for_intermittent_data():
    found = intermittency([np.r_[np.zeros(50), np.ones(50)][:, None]], [np.ones((100, 1), bool)])
    smooth = intermittency([np.ones((100, 1))], [np.ones((100, 1), bool)])
    assert eval_metric_for(None, found) == "rmsse" and eval_metric_for(None, smooth) == "mase"
    assert eval_metric_for("mae", found) == "mae"


def test_rmsse_scale_is_the_rms_one_step_change_from_the_first_demand():
    y = np.r_[0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 4.0, 1.0, 7.0, 7.0]
    panel = canonicalize(pd.DataFrame({"y": y}, index=pd.date_range("2024-01-01", periods=10, freq="D")))
    changes = np.diff(y[3:8])  # from the first nonzero value to the step before `first`
    np.testing.assert_allclose(series_scales(panel, np.array([8]), "rmsse", 7)[0, 0], np.sqrt(np.mean(changes ** 2)))


def test_auto_tries_the_intermittent_models_on_intermittent_data_and_scores_by_rmsse(tmp_path):
    pytest.importorskip("statsforecast")
    candidates = ("croston", "adida", "imapa", "tsb", "ets", "naive", "drift")
    f = Forecaster("auto", candidates=candidates, prediction_length=H, trainer_kwargs=QUIET).fit(
        demand(lengths=(120, 120, 120, 120), rate=0.25), **LONG)
    board = f.leaderboard.set_index("model")
    assert board.attrs["eval_metric"] == "rmsse" and board.attrs["intermittency"].startswith("intermittent: 4 of 4")
    assert board.val_score.notna().all() and board.weight.sum() == pytest.approx(1.0)
    assert board.note[list(INTERMITTENT_MODELS)].str.startswith("tried: the data are intermittent").all()
    assert board.weight[list(INTERMITTENT_MODELS)].sum() > 0
    f.save(tmp_path / "m")
    loaded = Forecaster.load(tmp_path / "m")
    assert loaded.leaderboard.attrs["eval_metric"] == "rmsse"
    pd.testing.assert_frame_equal(loaded.predict(), f.predict())
    named = Forecaster("auto", candidates=candidates, prediction_length=H, eval_metric="mae",
                       trainer_kwargs=QUIET).fit(demand(lengths=(120, 120, 120, 120), rate=0.25), **LONG)
    assert named.leaderboard.attrs["eval_metric"] == "mae"


def test_auto_skips_the_intermittent_models_on_smooth_data_saying_why():
    pytest.importorskip("statsforecast")
    board = Forecaster("auto", candidates=("croston", "tsb", "naive", "drift"), prediction_length=H,
                       trainer_kwargs=QUIET).fit(trending(), **LONG).leaderboard
    assert board.attrs["eval_metric"] == "mase"
    notes = board.set_index("model").note
    assert notes[["croston", "tsb"]].str.startswith("skipped: the data are not intermittent: 0 of 3 series").all()
    assert board.set_index("model").val_score[["naive", "drift"]].notna().all()


def test_the_registry_and_the_auto_candidates_hold_them():
    assert {*INTERMITTENT_MODELS, "drift"} <= set(list_models())
    assert {*INTERMITTENT_MODELS, "drift"} <= set(AUTO_CANDIDATES)
