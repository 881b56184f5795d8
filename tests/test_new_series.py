"""Series new at predict (cold start): a frame given to ``predict`` may hold series that ``fit`` never
saw, as with neuralforecast, AutoGluon and statsforecast (:meth:`tsrec.fitted.FittedState.with_new_series`)."""

import numpy as np
import pandas as pd
import pytest

from tsrec import Forecaster
from tsrec.data import StandardScaler
from tsrec.evaluation import backtest

TRAIN = {"max_epochs": 2, "batch_size": 64, "trainer_kwargs": {"enable_progress_bar": False, "logger": False}}


def daily(ids, n=150, seed=0, levels=None):
    """A long frame of daily series with a weekly cycle, each at its level (default 10 + 5k)."""
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    parts = []
    for k, item in enumerate(ids):
        level = 10.0 + 5 * k if levels is None else levels[k]
        y = level * (1 + 0.1 * np.sin(2 * np.pi * t / 7)) + 0.02 * level * rng.standard_normal(n)
        parts.append(pd.DataFrame({"unique_id": item, "ds": pd.date_range("2023-01-01", periods=n, freq="D"),
                                   "y": y}))
    return pd.concat(parts, ignore_index=True)


def renamed(df, mapping):
    return df.assign(unique_id=df["unique_id"].map(mapping))


def test_a_network_forecasts_new_series_at_their_own_level_and_leaves_the_fitted_ones_as_they_were():
    df = daily(("a", "b"))
    f = Forecaster("dlinear", prediction_length=7, context_length=28, **TRAIN).fit(df)
    new = daily(("x", "y"), seed=1, levels=(1000.0, -50.0))
    both = f.predict(pd.concat([df, new], ignore_index=True))
    alone = f.predict(df)
    assert list(both["item_id"].unique()) == ["a", "b", "x", "y"]
    pd.testing.assert_frame_equal(both[both.item_id.isin(["a", "b"])].reset_index(drop=True), alone)
    level = both.groupby("item_id")["mean"].mean()
    assert 900 < level["x"] < 1100 and -55 < level["y"] < -45  # scaled with their own statistics
    assert f.panel.item_ids == ("a", "b")  # the fitted model is left as it was


def test_a_new_series_is_scaled_by_its_own_history_with_the_fit_s_options():
    df = daily(("a", "b"))
    f = Forecaster("seasonal_naive", prediction_length=7).fit(df)
    state = f.fitted
    panel = f.panel  # a panel of the fitted ids only: the state itself
    assert state.with_new_series(panel, state.covariate_history) is state
    new = daily(("x",), seed=3, levels=(40.0,))
    from tsrec.data import source
    read = source.read(new, state.schema, categorical=(), freq=f.freq, gaps=f.settings.window.gaps)
    extended = state.with_new_series(read.panel, read.covariates)
    assert extended.history.item_ids == ("a", "b", "x")
    np.testing.assert_array_equal(extended.scaler.loc[:2], state.scaler.loc)
    item = read.panel.items[0]
    own = StandardScaler.fit([item.values], [item.observed], robust=state.scaler.robust,
                             nonnegative=state.resolved.window.nonnegative)
    for name in ("loc", "scale", "low", "high", "floor"):
        np.testing.assert_array_equal(getattr(extended.scaler, name)[2:], getattr(own, name))
    assert extended.scaler.floor[2, 0] == 0.0  # never negative: never forecast below 0, as a fitted one


def test_a_long_frame_given_to_a_model_fitted_on_a_wide_one_is_named_as_such_not_as_new_series():
    index = pd.date_range("2024-01-01", periods=200, freq="h")
    wide = pd.DataFrame({"a": np.sin(np.arange(200) / 4) + 5, "b": np.cos(np.arange(200) / 4) + 5}, index=index)
    f = Forecaster("seasonal_naive", prediction_length=6).fit(wide)
    long = wide.rename_axis("timestamp").melt(ignore_index=False, var_name="item_id", value_name="target")
    with pytest.raises(ValueError, match="the model was fitted on a wide frame but got a long frame"):
        f.predict(long.reset_index())


def test_a_statistical_model_fits_a_new_series_on_the_history_given_with_bands_of_its_own_scale():
    pytest.importorskip("statsforecast", reason="the stats extra: pip install 'tsrec[stats]'")
    df = daily(("a", "b"))
    f = Forecaster("ets", prediction_length=7, conformal_windows=10).fit(df)
    copy = renamed(df[df.unique_id == "a"], {"a": "new"})
    new = f.predict(pd.concat([df, copy], ignore_index=True), levels=[80])
    refit = f.predict(df, levels=[80], refit=True)
    columns = ["mean", "0.1", "0.9"]
    np.testing.assert_allclose(new.loc[new.item_id == "new", columns].to_numpy(),
                               refit.loc[refit.item_id == "a", columns].to_numpy(), rtol=1e-9)
    carried = f.predict(df, levels=[80])
    pd.testing.assert_frame_equal(new[new.item_id != "new"].reset_index(drop=True), carried)


def test_the_default_forecasts_new_series_with_intervals():
    pytest.importorskip("statsforecast", reason="the stats extra: pip install 'tsrec[stats]'")
    df = daily(("a", "b", "c"))
    f = Forecaster(prediction_length=7).fit(df)
    new = daily(("x",), seed=5, levels=(200.0,))
    fc = f.predict(pd.concat([df, new], ignore_index=True), levels=[80])
    x = fc[fc.item_id == "x"]
    assert len(x) == 7 and np.isfinite(x[["mean", "0.1", "0.9"]].to_numpy()).all()
    assert (x["0.1"] < x["mean"]).all() and (x["mean"] < x["0.9"]).all()
    assert 180 < x["mean"].mean() < 220
    pd.testing.assert_frame_equal(fc[fc.item_id != "x"].reset_index(drop=True), f.predict(df, levels=[80]))


def test_a_backtest_scores_new_series_scaled_by_their_history_before_the_first_origin():
    """A window rule forecasts a new copy of a fitted series as that series (up to the float32 of
    windows scaled by other statistics); its scaled columns
    read the copy's own scale, from its steps before the first origin (no look-ahead)."""
    df = daily(("a", "b"))
    f = Forecaster("seasonal_naive", prediction_length=7).fit(df.groupby("unique_id").head(120))
    copy = renamed(df[df.unique_id == "a"], {"a": "x"})
    errors = backtest(f, pd.concat([df, copy], ignore_index=True), n_windows=3).errors
    a, x = (errors[errors.item_id == name].reset_index(drop=True) for name in ("a", "x"))
    assert len(x) == 21
    np.testing.assert_allclose(x["y_pred"], a["y_pred"], rtol=1e-6)  # the windows hold float32
    first = len(copy) - 21
    y = copy["y"].to_numpy()[:first]
    np.testing.assert_allclose(x["y_true_scaled"], (x["y_true"] - y.mean()) / y.std(), rtol=1e-6)


def test_a_statistical_model_backtests_a_new_series_fitted_at_every_origin():
    pytest.importorskip("statsforecast", reason="the stats extra: pip install 'tsrec[stats]'")
    df = daily(("a", "b"))
    f = Forecaster("ets", prediction_length=7).fit(df.groupby("unique_id").head(120))
    copy = renamed(df[df.unique_id == "a"], {"a": "x"})
    new = backtest(f, pd.concat([df, copy], ignore_index=True), n_windows=2, baselines=["naive"]).errors
    refit = backtest(f, df, n_windows=2, refit_every=1, baselines=["naive"]).errors
    # the same fits, on histories unscaled by other statistics (float64 round trips apart)
    np.testing.assert_allclose(new.loc[new.item_id == "x", "y_pred"], refit.loc[refit.item_id == "a", "y_pred"],
                               rtol=1e-6)


@pytest.mark.slow
def test_the_benchmark_scores_a_statistical_model_on_held_out_series_of_public_data(tmp_path):
    """benchmarks/new_series.py on statsmodels' macrodata (12 quarterly series): ETS fitted without
    every other series forecasts them as well as fitted on them, within a tenth (fitted at each
    origin, it reads more than the carried parameters of the warm fit)."""
    pytest.importorskip("statsforecast", reason="the stats extra: pip install 'tsrec[stats]'")
    pytest.importorskip("statsmodels", reason="macrodata ships with statsmodels")
    from benchmarks import new_series

    assert new_series.main(["--datasets", "macrodata", "--models", "ets", "--seeds", "0",
                            "--out-dir", str(tmp_path)]) == 0
    report = (tmp_path / "new_series.md").read_text()
    row = next(line for line in report.splitlines() if line.startswith("| macrodata ets |"))
    ratio = float(row.split("|")[6])  # run, warm_mase (spread), cold_mase (spread), mase_ratio
    assert 0.9 < ratio < 1.1
