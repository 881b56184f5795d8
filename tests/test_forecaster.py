"""The estimator end to end: fit / predict / save / load on small synthetic frames, and its errors."""

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.exceptions import NotFittedError

from tsrec import Forecaster

# the naive baselines only: ets and theta would cost a statsforecast fit per series
NAIVE = ("naive", "seasonal_naive")

NET = dict(d_model=16, n_heads=8, d_ff=16, e_layers=1, d_layers=1)
TRAIN = dict(max_epochs=2, batch_size=64, trainer_kwargs={"enable_progress_bar": False, "logger": False})
TINY = {**NET, **TRAIN}


def wide_frame(n=240, seed=0, freq="h"):
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    index = pd.date_range("2024-01-01", periods=n, freq=freq)
    return pd.DataFrame({"load": np.sin(2 * np.pi * t / 24) + 0.1 * rng.standard_normal(n) + 5,
                         "temp": np.cos(2 * np.pi * t / 24) + 0.1 * rng.standard_normal(n)}, index=index)


def long_frame(n=200, ids=("a", "b", "c"), seed=0):
    rng = np.random.default_rng(seed)
    parts = []
    for k, item in enumerate(ids):
        t = np.arange(n)
        parts.append(pd.DataFrame({"id": item, "ds": pd.date_range("2024-03-01", periods=n, freq="h"),
                                   "y": 10 * k + np.sin(2 * np.pi * t / 24) + 0.1 * rng.standard_normal(n)}))
    return pd.concat(parts, ignore_index=True)


def tiny(model="rsa_informer", **extra):
    options = TRAIN if model in ("dlinear", "seasonal_naive") else TINY
    return Forecaster(model, prediction_length=6, context_length=24, **{**options, **extra})


@pytest.fixture(scope="module")
def fitted_wide():
    return tiny().fit(wide_frame())


def test_wide_fit_predict_contract(fitted_wide):
    df = wide_frame()
    fc = fitted_wide.predict()
    assert list(fc.columns) == ["item_id", "timestamp", "mean"]
    assert set(fc["item_id"]) == {"load", "temp"}
    expected = pd.date_range(df.index[-1], periods=7, freq="h")[1:]
    for _, part in fc.groupby("item_id"):
        assert list(part["timestamp"]) == list(expected)
    assert np.isfinite(fc["mean"]).all()
    # forecasts are on the original scale: the load series lives around 5
    assert fc.loc[fc.item_id == "load", "mean"].between(2, 8).all()


def test_predict_new_frame_forecasts_after_its_end(fitted_wide):
    new = wide_frame(n=100, seed=3)
    new.index = new.index + pd.Timedelta(days=30)
    fc = fitted_wide.predict(new)
    assert fc["timestamp"].min() == new.index[-1] + pd.Timedelta(hours=1)



def test_a_frame_of_recent_rows_only_is_named_at_predict():
    """Given fewer steps of a series than the model read of it at fit (a frame of the last rows
    only), predict names the series: its forecast reads those steps alone. The whole history, a
    longer one, a ragged panel's short series as it was at fit (with NaN rows before its first
    value or without), or the history cut at an earlier end (forecasts from an earlier origin), are
    not named."""
    df = long_frame(n=200).rename(columns={"id": "unique_id"})
    ragged = df[(df["unique_id"] != "c") | (df.groupby("unique_id").cumcount() >= 150)]  # c: its last 50 steps
    f = Forecaster("ets", prediction_length=6).fit(ragged)
    with pytest.warns(UserWarning, match=r"^predict: 1 series hold fewer steps than the model read of them at fit "
                                         r"\(item 'a' \(20 steps\); it read up to 200 of each\): their forecasts "
                                         r"read these steps alone"):
        f.predict(pd.concat([ragged[ragged["unique_id"] != "a"], df[df["unique_id"] == "a"].tail(20)]))
    with pytest.warns(UserWarning, match=r"^predict: 1 series hold fewer steps .* \(item 'b' \(40 steps\)"):
        f.predict(pd.concat([ragged[ragged["unique_id"] != "b"], df[df["unique_id"] == "b"].iloc[100:140]]))
    launched = df.assign(y=df["y"].mask((df["unique_id"] == "c") & (df.groupby("unique_id").cumcount() < 150)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f.predict(ragged)
        f.predict()
        f.predict(launched)  # c's first 150 steps as NaN rows: as long as without them
        f.predict(ragged.groupby("unique_id").head(120))  # every series up to an earlier origin, from its start
        Forecaster("ets", prediction_length=6).fit(launched).predict(ragged)

def test_save_load_gives_identical_predictions(fitted_wide, tmp_path):
    fitted_wide.save(tmp_path / "model")
    meta = json.loads((tmp_path / "model" / "forecaster.json").read_text())
    # 10: wide_frame's series are never negative, so the scaler's floor row is saved
    assert meta["format_version"] == 10 and meta["settings"]["model"] == "rsa_informer"
    loaded = Forecaster.load(tmp_path / "model")
    pd.testing.assert_frame_equal(loaded.predict(), fitted_wide.predict())
    pd.testing.assert_frame_equal(loaded.predict(wide_frame(seed=5)), fitted_wide.predict(wide_frame(seed=5)))


def test_load_refuses_foreign_and_corrupted_directories(fitted_wide, tmp_path):
    with pytest.raises(ValueError, match="not a saved tsrec Forecaster"):
        Forecaster.load(tmp_path)
    path = fitted_wide.save(tmp_path / "m")
    (path / "forecaster.json").write_text("{not json")
    with pytest.raises(ValueError, match="corrupted"):
        Forecaster.load(path)
    fitted_wide.save(path)
    (path / "weights.pt").write_bytes(b"garbage")
    with pytest.raises(ValueError, match="corrupted"):
        Forecaster.load(path)
    fitted_wide.save(path)
    meta = json.loads((path / "forecaster.json").read_text())
    (path / "forecaster.json").write_text(json.dumps({**meta, "format": "other"}))
    with pytest.raises(ValueError, match="not written by tsrec"):
        Forecaster.load(path)


def test_flipped_bytes_in_the_weights_are_caught_by_the_checksum(fitted_wide, tmp_path):
    path = fitted_wide.save(tmp_path / "m")
    weights = bytearray((path / "weights.pt").read_bytes())
    weights[len(weights) // 2] ^= 0x01  # one bit, inside a tensor's data: torch.load would not notice
    (path / "weights.pt").write_bytes(bytes(weights))
    with pytest.raises(ValueError, match="does not match the checksum"):
        Forecaster.load(path)


def test_save_never_leaves_a_mixed_or_partial_model(fitted_wide, tmp_path, monkeypatch):
    path = fitted_wide.save(tmp_path / "m")
    before = {name: (path / name).read_bytes() for name in ("forecaster.json", "weights.pt")}

    def crash(obj, file, *args, **kwargs):
        Path(file).write_bytes(b"half a file")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", crash)
    with pytest.raises(OSError, match="disk full"):
        fitted_wide.save(path)
    monkeypatch.undo()
    assert {name: (path / name).read_bytes() for name in before} == before  # the old model, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]  # no staging folder left behind
    pd.testing.assert_frame_equal(Forecaster.load(path).predict(), fitted_wide.predict())


def test_save_refuses_to_replace_a_folder_it_did_not_write(fitted_wide, tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="not a saved tsrec model"):
        fitted_wide.save(tmp_path)
    assert (tmp_path / "notes.txt").read_text() == "mine"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert Forecaster.load(fitted_wide.save(empty)).predict().equals(fitted_wide.predict())


def test_a_named_time_zone_survives_save_and_load_across_a_dst_change(tmp_path):
    index = pd.date_range("2024-03-20", "2024-04-05", freq="h", tz="Europe/Berlin")  # DST starts 31 March
    df = pd.DataFrame({"y": np.sin(np.arange(len(index)) * 2 * np.pi / 24)}, index=index)
    f = tiny("dlinear").fit(df.loc[:"2024-03-30 22:00"])  # forecasts 30 March 23:00 .. 31 March 05:00
    assert str(f.panel.items[0].index.tz) == "Europe/Berlin"
    loaded = Forecaster.load(f.save(tmp_path / "m"))
    assert str(loaded.panel.items[0].index.tz) == "Europe/Berlin"
    fc, again = f.predict(), loaded.predict()
    pd.testing.assert_frame_equal(again, fc)
    assert list(fc["timestamp"].dt.strftime("%H%z"))[:6] == ["23+0100", "00+0100", "01+0100", "03+0200",
                                                             "04+0200", "05+0200"]


def test_long_frame_many_series():
    df = long_frame()
    f = tiny("dlinear").fit(df.sample(frac=1.0, random_state=0), id_col="id", time_col="ds", target_col="y")
    fc = f.predict()
    assert sorted(fc["item_id"].unique()) == ["a", "b", "c"]
    # each id is scaled with its own statistics: levels 0, 10, 20 come back
    levels = fc.groupby("item_id")["mean"].mean()
    assert levels["a"] < levels["b"] < levels["c"]


def test_same_seed_same_forecast_and_chaining():
    df = wide_frame()
    a = tiny(seed=7).fit(df).predict()
    b = Forecaster("rsa_informer", prediction_length=6, context_length=24, seed=7, **TINY).fit(df).predict()
    pd.testing.assert_frame_equal(a, b)


def test_no_leakage_after_the_training_part():
    """Without the refit on all the history, values after the training part (the validation
    targets) change neither the scaler nor the trained weights (one epoch, so model selection on
    validation cannot pick another epoch)."""
    df = wide_frame()
    changed = df.assign(load=np.r_[df.load.values[:-11], np.full(11, 1e3)])  # the last 11 rows: validation only
    fits = [tiny(seed=1, val_windows=6, max_epochs=1, refit_full=False).fit(frame) for frame in (df, changed)]
    np.testing.assert_array_equal(fits[0].scaler.loc, fits[1].scaler.loc)
    np.testing.assert_array_equal(fits[0].scaler.scale, fits[1].scaler.scale)
    for p, q in zip(fits[0].model.parameters(), fits[1].model.parameters()):
        torch.testing.assert_close(p, q, rtol=0, atol=0)
    # one more changed row (the last training target) does change the fit
    leaky = df.assign(load=np.r_[df.load.values[:-12], np.full(12, 1e3)])
    assert not np.array_equal(tiny(seed=1, val_windows=6, max_epochs=1, refit_full=False).fit(leaky).scaler.loc,
                              fits[0].scaler.loc)


def test_nan_targets_are_masked_never_forecast():
    df = wide_frame()
    df.iloc[10:30, 0] = np.nan
    df.iloc[-3:, 1] = np.inf
    with pytest.warns(UserWarning, match=r"column 'temp' \(3 steps after .*the missing steps from each series' last "
                                         r"observation"):
        fc = tiny("dlinear").fit(df).predict()
    assert np.isfinite(fc["mean"]).all()


def test_constant_series_is_fine():
    df = wide_frame().assign(temp=3.0)
    fc = tiny("dlinear").fit(df).predict()
    assert np.isfinite(fc["mean"]).all()


def test_seasonal_naive_needs_no_training():
    df = wide_frame()
    fc = Forecaster("seasonal_naive", prediction_length=6, context_length=48).fit(df).predict()
    expected = df["load"].values[-24:-18]
    np.testing.assert_allclose(fc.loc[fc.item_id == "load", "mean"].values, expected, rtol=1e-5)


@pytest.mark.parametrize(("model", "freq", "length", "horizon", "context", "expected"), [
    ("naive", "YS", 8, 3, 6, [7.0] * 3),  # its default context, 6, and the horizon: 9 steps were asked for
    ("naive", "YS", 4, 3, 6, [3.0] * 3),  # shorter than the context: read padded
    ("seasonal_naive", "W-SUN", 60, 4, 52, [8.0, 9.0, 10.0, 11.0]),  # a year of weeks: 52 + 4 were asked for
])
def test_the_naive_rules_forecast_a_series_shorter_than_their_context_and_horizon(model, freq, length, horizon,
                                                                                 context, expected):
    """A rule on each window is fitted on no training window: like statsforecast's Naive, it
    forecasts any series that holds its rule's steps (the last value, the last season), a shorter
    one than its context read padded."""
    df = pd.DataFrame({"y": np.arange(float(length))}, index=pd.date_range("2000", periods=length, freq=freq))
    f = Forecaster(model, prediction_length=horizon).fit(df)
    assert f.context_length == context
    np.testing.assert_allclose(f.predict()["mean"], expected, rtol=1e-6)


def ragged_monthly(lengths, seed=0):
    """A long frame of monthly series of ``lengths`` ending on the same month (a yearly cycle, noise)."""
    rng = np.random.default_rng(seed)
    return pd.concat([pd.DataFrame({"item_id": f"s{i}", "timestamp": pd.date_range(end="2024-12-01", periods=n,
                                                                                   freq="MS"),
                                    "target": 50 + 10 * np.sin(np.arange(n) * 2 * np.pi / 12) + rng.normal(size=n)})
                      for i, n in enumerate(lengths)], ignore_index=True)


@pytest.mark.parametrize("model, options", [("ridge", {}), ("gbm", {}), ("dlinear", TRAIN)])
def test_a_series_too_short_for_a_training_window_gives_none_and_is_forecast(model, options, tmp_path):
    """A new series of 15 months beside 10-year ones (a window is 24 + 12 steps, and a network's
    validation windows more): it gives no training or validation window, so the fit is the one
    without it, and it is forecast from a window padded with unobserved steps, after a save and
    load too (the whole fit was refused for it)."""
    df = ragged_monthly([120, 120, 120, 15])
    f = Forecaster(model, prediction_length=12, **options).fit(df)
    assert f.context_length == 24
    forecast = f.predict()
    alone = Forecaster(model, prediction_length=12, **options).fit(df[df.item_id != "s3"]).predict()
    np.testing.assert_allclose(forecast[forecast.item_id != "s3"]["mean"], alone["mean"], rtol=1e-6)
    new = forecast[forecast.item_id == "s3"]["mean"]
    assert len(new) == 12 and np.isfinite(new).all() and 30 < new.min() and new.max() < 70
    f.save(tmp_path / "m")
    pd.testing.assert_frame_equal(Forecaster.load(tmp_path / "m").predict(), forecast)


def test_a_rule_forecasts_a_series_shorter_than_the_horizon():
    """The last value needs one step: three months forecast a year (13 steps were asked for)."""
    df = pd.DataFrame({"y": [1.0, 2.0, 3.0]}, index=pd.date_range("2024-01-01", periods=3, freq="MS"))
    np.testing.assert_allclose(Forecaster("naive", prediction_length=12).fit(df).predict()["mean"], 3.0, rtol=1e-6)


@pytest.mark.parametrize("make, match", [
    (lambda: Forecaster("nope", prediction_length=3), "known models: .*rsa_informer"),
    (lambda: Forecaster("dlinear", prediction_length=0), "prediction_length must be an integer >= 1"),
    (lambda: Forecaster("dlinear", prediction_length=4, context_length=-1), "context_length must be an integer >= 1"),
    (lambda: Forecaster("dlinear", prediction_length=2.5), "prediction_length must be an integer, got 2.5"),
    (lambda: Forecaster("dlinear", prediction_length=4, d_model=8),
     r"unknown option\(s\) \['d_model'\] for model 'dlinear'.*dlinear options: revin"),
    (lambda: Forecaster("dlinear", prediction_length=4, n_channels=3), "come from the data"),
    (lambda: Forecaster("dlinear", prediction_length=4, max_epochs=0), "max_epochs must be an integer >= 1"),
    (lambda: Forecaster("rsa_informer", prediction_length=4, rsa={"dilations": 7}),
     r"RSAConfig has no setting\(s\) \['dilations'\]; its settings are: kinds, dilation"),
])
def test_bad_construction(make, match):
    with pytest.raises((ValueError, TypeError), match=match):
        make()


@pytest.mark.parametrize("frame, kwargs, match", [
    (pd.DataFrame(), {}, "empty"),
    (long_frame().drop(columns="y"), dict(id_col="id", time_col="ds", target_col="y"), "'y'"),
    (long_frame(), dict(id_col="id", time_col="when", target_col="y"), "'when'"),
    (long_frame().assign(y="x"), dict(id_col="id", time_col="ds", target_col="y"), "numeric"),
    (pd.concat([wide_frame(), wide_frame().iloc[:1]]), {}, "duplicate"),
    (wide_frame(n=20), {}, "has 20 time steps"),
])
def test_bad_input_gets_a_clear_error(frame, kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        tiny("dlinear").fit(frame, **kwargs)


def test_freq_mismatch_and_uninferable_freq():
    with pytest.raises(ValueError, match="freq"):
        Forecaster("dlinear", prediction_length=6, context_length=24, freq="2h").fit(wide_frame())
    irregular = wide_frame().iloc[[0, 1, 3, 7, 15, 31, 63, 127]]
    with pytest.raises(ValueError, match="freq"):
        tiny("dlinear").fit(irregular)


def test_predict_before_fit_and_with_other_columns(fitted_wide):
    with pytest.raises(NotFittedError, match="not fitted"):
        tiny().predict()
    with pytest.raises(ValueError, match="columns differ"):
        fitted_wide.predict(wide_frame().rename(columns={"temp": "humidity"}))


def test_gates_table(fitted_wide):
    gates = fitted_wide.gates()
    assert {"layer", "attention", "head", "kind", "gate", "lambda", "gamma", "theta", "dilation", "half_life",
            "period"} <= set(gates.columns)
    assert set(gates["attention"]) == {"encoder self", "decoder self", "cross"}
    assert gates["gate"].between(0, 1).all()
    assert tiny("informer").fit(wide_frame()).gates().empty


# ------------------------------------------------------------------------------ only from data
def test_a_column_without_data_in_its_context_gets_nan_and_a_warning(tmp_path):
    df = wide_frame()
    f = tiny("dlinear").fit(df)
    outage = df.copy()
    outage.iloc[-30:, 1] = np.nan  # the 'temp' sensor is out for longer than the 24-step context
    with pytest.warns(UserWarning, match=r"1 series have no observed value in their last 24 steps.*column 'temp'"):
        fc = f.predict(outage)
    assert fc.loc[fc.item_id == "temp", "mean"].isna().all() and fc.loc[fc.item_id == "load", "mean"].notna().all()
    strict = tiny("dlinear", missing_context="raise").fit(df)
    with pytest.raises(ValueError, match=r"column 'temp'.*\(missing_context='raise'\); refit with a context_length"):
        strict.predict(outage)


def test_a_column_never_observed_in_training_is_refused():
    df = wide_frame()
    df["dead"] = np.nan
    with pytest.raises(ValueError, match=r"column 'dead' has no observed value in the training part"):
        tiny("dlinear").fit(df)
    long = long_frame()
    long.loc[long.id == "b", "y"] = np.nan
    with pytest.raises(ValueError, match=r"item 'b' \(column 'y'\) has no observed value"):
        tiny("dlinear").fit(long, id_col="id", time_col="ds", target_col="y")


def test_backtest_skips_and_counts_windows_without_context():
    from tsrec.evaluation import backtest

    df = wide_frame(n=300)
    f = tiny("dlinear").fit(df.iloc[:200])
    gap = df.copy()
    gap.iloc[200:260, 1] = np.nan  # 'temp' unobserved over 60 steps: the windows reading only them get nothing
    with pytest.warns(UserWarning, match="no observed value"):
        pass_through = f.predict(gap.iloc[:260])
    assert pass_through.loc[pass_through.item_id == "temp", "mean"].isna().all()
    result = backtest(f, gap, start=230, stride=6, baselines=NAIVE)
    counts = result.summary.set_index("metric")["value"]
    blind = result.errors[~result.errors["forecast"]]
    assert set(blind["item_id"]) == {"temp"} and blind["y_pred"].isna().all()
    assert counts["windows_without_forecast"] == blind.groupby("origin").ngroups > 0
    assert np.isfinite(result.metric("mse", "scaled"))


@pytest.mark.parametrize("model", ["dlinear", "seasonal_naive"])
def test_a_missing_tail_is_named_with_what_the_model_does_about_it(model):
    """No model forecasts from a filled-in tail silently: predict names the series, the gap and what
    the model does (the networks: the missing steps forecast from the last observation,
    tests/test_missing_tails.py)."""
    df = wide_frame()
    options = TRAIN if model == "dlinear" else {}
    f = Forecaster(model, prediction_length=6, context_length=24, **options).fit(df)
    recent = df.copy()
    recent.iloc[-5:, 0] = np.nan
    what = "missing steps from each series' last observation" if model == "dlinear" else "latest observed value"
    with pytest.warns(UserWarning, match=rf"1 series end with missing values: .*\(5 steps after .*{what}"):
        forecast = f.predict(recent)
    assert forecast["mean"].notna().all()


def test_a_series_never_negative_is_never_forecast_below_zero_unless_asked(tmp_path):
    """A series whose training values are all at least 0 (a) gets forecasts, bands and quantiles
    raised to 0, counted in the frame's attrs; one that went negative (b) is left as the model
    forecasts it; ``nonnegative=False`` leaves both; the floor survives save and load."""
    pytest.importorskip("statsforecast", reason="the stats extra: pip install 'tsrec[stats]'")
    t = np.arange(60)
    df = pd.DataFrame({"a": np.maximum(0, 30 - 0.5 * t) + 0.1 * np.abs(np.sin(t)), "b": 5 - 0.2 * t},
                      index=pd.date_range("2020-01-01", periods=60, freq="D"))
    f = Forecaster("ets", prediction_length=14, conformal_windows=5).fit(df)
    forecast = f.predict(levels=[80])
    a, b = (forecast[forecast.item_id == c] for c in ("a", "b"))
    assert a["mean"].min() == 0 and a["0.1"].min() == 0 and b["mean"].min() < -5
    assert forecast.attrs["floored"] == int((Forecaster("ets", prediction_length=14, nonnegative=False).fit(df)
                                              .predict().query("item_id == 'a'")["mean"] < 0).sum()) > 0
    loaded = Forecaster.load(f.save(tmp_path / "m"))
    pd.testing.assert_frame_equal(loaded.predict(levels=[80]), forecast)
    assert Forecaster("ets", prediction_length=14, nonnegative=False).fit(df).predict()["mean"].min() < -5
    with pytest.raises(TypeError, match="nonnegative must be True or False"):
        Forecaster("ets", prediction_length=14, nonnegative="yes")
