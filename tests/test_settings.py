"""The settings tree: one definition per setting, resolution from the data, and save / load / copy /
clone agreeing on the model they train (regression tests for bugs of the earlier settings layer)."""

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

from tsrec import Forecaster
from tsrec.config import RSAConfig, TrainingConfig, WindowConfig
from tsrec.evaluation import backtest
from tsrec.saved_format import json_sha256
from tsrec.settings import ForecasterSettings

# the naive baselines only: ets and theta would cost a statsforecast fit per series
NAIVE = ("naive", "seasonal_naive")

NET = dict(d_model=16, n_heads=8, d_ff=16, e_layers=1, d_layers=1)
QUIET = {"enable_progress_bar": False, "logger": False}


def frame(n=120, freq="D", seed=0):
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    return pd.DataFrame({"y": np.sin(2 * np.pi * t / 7) + 0.1 * rng.standard_normal(n) + 3},
                        index=pd.date_range("2024-01-01", periods=n, freq=freq))


def hourly(n=240, seed=0):
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    return pd.DataFrame({"a": np.sin(2 * np.pi * t / 24) + 0.1 * rng.standard_normal(n),
                         "b": np.cos(2 * np.pi * t / 24) + 0.1 * rng.standard_normal(n)},
                        index=pd.date_range("2024-01-01", periods=n, freq="h"))


def rsa_forecaster(**extra):
    options = dict(prediction_length=4, context_length=14, max_epochs=1, batch_size=32, trainer_kwargs=QUIET,
                   **NET)
    return Forecaster("rsa_informer", **{**options, **extra})


# ------------------------------------------------------------------------------- resolution
@pytest.mark.parametrize("rsa", [RSAConfig(per_head_gate=True), {"per_head_gate": True}], ids=["dataclass", "dict"])
def test_rsa_settings_in_either_form_keep_the_data_derived_fields(rsa):
    """Bug: rsa=RSASettings(per_head_gate=True) on daily data reset the dilation (7) to 24 and the
    periods to none, while the dict form kept them."""
    f = rsa_forecaster(rsa=rsa).fit(frame())
    resolved = f.resolved_settings.network.rsa
    assert resolved.per_head_gate is True
    # the weekly cycle of the data, found in the training part (a week's calendar season is 7 too)
    assert resolved.dilation == 7 and resolved.periods == pytest.approx((7.0, 3.5), abs=0.1)
    assert resolved.kinds == (0, 2, 2, 0, 2, 2)
    assert f.settings.network.rsa == RSAConfig(per_head_gate=True)  # what the user set, unresolved


def test_a_set_value_is_never_replaced_by_the_resolver():
    mine = RSAConfig(dilation=3, periods=(5.0,))
    f = rsa_forecaster(rsa=mine, label_length=2).fit(frame())
    net = f.resolved_settings.network
    assert (net.rsa.dilation, net.rsa.periods, net.label_length) == (3, (5.0,), 2)
    # the weekly cycle found in the data, counted in dilated steps of the dilation the user set
    assert net.rsa.dilated_periods == pytest.approx((7.0 / 3,), abs=0.05)


def test_every_fit_reads_the_frequency_anew_unless_it_was_set():
    f = Forecaster("seasonal_naive", prediction_length=3, context_length=30)
    f.fit(hourly(n=200)[["a"]].rename(columns={"a": "y"}))
    assert f.freq == "h" and f.resolved_settings.network.season_length == 24  # the daily cycle found
    f.fit(frame())
    assert f.freq == "D" and f.resolved_settings.network.season_length == 7  # the weekly cycle found
    assert f.settings.window.freq is None


def test_seasonal_naive_uses_no_season_the_data_do_not_show():
    """Weekly data with a 36-step context once got a 36-week season (the calendar's 52, capped)."""
    rng = np.random.default_rng(0)
    weekly = pd.DataFrame({"y": np.cumsum(rng.standard_normal(150))},
                          index=pd.date_range("2020-01-05", periods=150, freq="W"))
    f = Forecaster("seasonal_naive", prediction_length=4, context_length=36).fit(weekly)
    assert f.resolved_settings.network.season_length == 1
    np.testing.assert_allclose(f.predict()["mean"], weekly["y"].iloc[-1], rtol=1e-6)


def test_each_default_is_defined_once():
    """The defaults the estimator reports come from the config classes and, for training, the
    model's registry entry over them, nowhere else; the user's settings win over both."""
    f = Forecaster("rsa_informer", prediction_length=6)
    assert f.settings.training == TrainingConfig(learning_rate=1e-4, lr_schedule="cosine", rsa_lr_multiplier=100.0)
    assert Forecaster("rsa_informer", prediction_length=6, learning_rate=5e-4).settings.training.learning_rate == 5e-4
    assert Forecaster("dlinear", prediction_length=6).settings.training == TrainingConfig()
    assert Forecaster(prediction_length=6).model_name == "auto"  # the default: the selection of tsrec.auto
    assert f.settings.window == WindowConfig(prediction_length=6)
    assert f.context_length == 12  # WindowConfig.context: 2 * prediction_length
    assert f.settings.network.rsa == RSAConfig()


def test_settings_round_trip_through_json_and_flat_options():
    settings = ForecasterSettings.from_options("rsa_informer", prediction_length=5, learning_rate=1e-3,
                                               rsa={"kinds": [4, 0, 0, 4, 0, 0]}, d_model=32, compile=True)
    again = ForecasterSettings.from_dict(json.loads(json.dumps(settings.to_dict())))
    assert again == settings
    options = settings.to_options()
    assert options["learning_rate"] == 1e-3 and options["d_model"] == 32 and "batch_size" not in options
    assert options["compile"] is True and "precision" not in options
    assert ForecasterSettings.from_options(**options) == settings
    with pytest.raises(TypeError, match="keys model, window, network and training"):
        ForecasterSettings.from_dict({"model": "dlinear"})


# ------------------------------------------------------------------------------- sklearn protocol
def test_forecaster_follows_the_sklearn_estimator_protocol():
    f = Forecaster("dlinear", prediction_length=4, learning_rate=1e-3, trainer_kwargs=QUIET)
    params = f.get_params()
    assert params["model"] == "dlinear" and params["learning_rate"] == 1e-3 and params["trainer_kwargs"] == QUIET
    copy = clone(f)
    assert copy is not f and copy.settings == f.settings and copy.model is None
    assert f.set_params(learning_rate=5e-3) is f
    assert f.settings.training.learning_rate == 5e-3 and f.get_params()["learning_rate"] == 5e-3
    with pytest.raises(ValueError, match="learning_rate must be a positive number"):
        f.set_params(learning_rate=-1.0)
    assert f.settings.training.learning_rate == 5e-3  # a refused change loses nothing


# ------------------------------------------------------------------------------- save / load / copy
@pytest.mark.parametrize("model, options", [
    ("rsa_informer", dict(NET, max_epochs=2, seed=3, rsa={"per_head_gate": True})),
    ("dlinear", dict(max_epochs=2, seed=1, learning_rate=1e-3)),
    ("seasonal_naive", dict(season_length=4)),
], ids=["rsa_informer", "dlinear", "seasonal_naive"])
def test_a_loaded_models_copy_trains_exactly_the_original_model(model, options, tmp_path):
    """Bug: load rebuilt the estimator from the training settings only, so unfitted_copy() of a
    loaded model trained another model (season_length 4 became 7; RSA models fell back to d_model 512)."""
    df = frame()
    original = Forecaster(model, prediction_length=4, context_length=14, trainer_kwargs=QUIET, **options).fit(df)
    original.save(tmp_path / "m")
    loaded = Forecaster.load(tmp_path / "m")
    assert loaded.settings == original.settings
    assert loaded.resolved_settings == original.resolved_settings
    retrained = loaded.unfitted_copy().fit(df)
    assert retrained.resolved_settings == original.resolved_settings
    pd.testing.assert_frame_equal(retrained.predict(), original.predict(), check_exact=True)
    for name, tensor in original.model.state_dict().items():
        assert bool((retrained.model.state_dict()[name] == tensor).all()), name


def test_backtest_with_refit_agrees_between_a_model_and_its_loaded_copy(tmp_path):
    df = frame(n=140)
    f = Forecaster("dlinear", prediction_length=4, context_length=14, max_epochs=1, trainer_kwargs=QUIET).fit(df)
    f.save(tmp_path / "m")
    g = Forecaster.load(tmp_path / "m")
    a = backtest(f, df, n_windows=2, refit_every=1, baselines=NAIVE)
    b = backtest(g, df, n_windows=2, refit_every=1, baselines=NAIVE)
    pd.testing.assert_frame_equal(a.errors, b.errors, check_exact=True)


def test_load_keeps_the_original_error_as_the_cause(tmp_path):
    f = Forecaster("seasonal_naive", prediction_length=3).fit(frame())
    f.save(tmp_path / "m")
    meta = json.loads((tmp_path / "m" / "forecaster.json").read_text())
    meta["settings"]["network"]["colour"] = 1
    meta["sha256"]["forecaster.json"] = json_sha256(meta)  # an edit that rewrote the checksum too
    (tmp_path / "m" / "forecaster.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="corrupted or was edited after saving.*save the model again") as info:
        Forecaster.load(tmp_path / "m")
    assert isinstance(info.value.__cause__, TypeError) and "colour" in str(info.value.__cause__)


def test_predict_runs_through_lightning_without_moving_the_model(tmp_path):
    f = rsa_forecaster().fit(hourly())
    device = next(f.model.parameters()).device
    fc = f.predict()
    assert next(f.model.parameters()).device == device
    assert len(fc) == 4 * 2 and np.isfinite(fc["mean"]).all()
    assert dataclasses.is_dataclass(f.resolved_settings)
