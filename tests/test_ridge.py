"""The global ridge (``Forecaster("ridge")``, tsrec.models.ridge): an exact linear relation recovered,
a known-future covariate read, its closed form and blocked cross-validation against a naive
computation, save/load, wide frames, and its place among auto's candidates."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

import tsrec
from tsrec import Forecaster
from tsrec.models.ensemble import AUTO_CANDIDATES
from tsrec.models.registry import build_model
from tsrec.data import StandardScaler, WindowDataset, canonicalize
from tsrec.models.ridge import ALPHAS, CV_BLOCKS, _Moments
from tests.held_out import mae, split

H = 12
LONG = {"id_col": "id", "time_col": "ds", "target_col": "y"}


def seasonal_trend_panel(n=24 * 14, ids=6, seed=0):
    """Noise-free series with ``(1 - B)(1 - B^24) y = 0``: ``y[t] = y[t-1] + y[t-24] - y[t-25]``, a
    random daily pattern on a random slope per series. Every forecast is a fixed linear map of the
    last 25 values whose weights sum to 1 (so it holds as well in each window's normalised units);
    neither the last season nor the line through the ends is it."""
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    parts = []
    for k in range(ids):
        pattern = rng.normal(0, 1 + k, 24)
        y = 50 + 10 * k + rng.normal(0, 0.2) * t + pattern[t % 24]
        parts.append(pd.DataFrame({"id": f"s{k}", "ds": pd.date_range("2024-01-01", periods=n, freq="h"), "y": y}))
    return pd.concat(parts, ignore_index=True)


def covariate_panel(n=24 * 12, ids=4, seed=0):
    """``y = 3 x + AR(1) noise of scale 0.1``, ``x`` white noise known in the future."""
    rng = np.random.default_rng(seed)
    parts = []
    for k in range(ids):
        x = rng.standard_normal(n)
        noise = np.zeros(n)
        for t in range(1, n):
            noise[t] = 0.5 * noise[t - 1] + 0.1 * rng.standard_normal()
        parts.append(pd.DataFrame({"id": f"s{k}", "ds": pd.date_range("2024-01-01", periods=n, freq="h"),
                                   "y": 3 * x + noise + 5 * k, "x": x, "region": "north" if k % 2 else "south"}))
    return pd.concat(parts, ignore_index=True)


def test_ridge_is_registered_and_an_auto_candidate_with_nothing_to_train():
    assert "ridge" in tsrec.list_models() and "ridge" in AUTO_CANDIDATES
    model_class = type(build_model("ridge", context_length=24, prediction_length=H, n_channels=1, n_time_features=3))
    assert not model_class.trainable and model_class.fits_windows and model_class.reads_covariates()
    with pytest.raises(ValueError, match="ridge forecasts points only"):
        Forecaster("ridge", prediction_length=H, output="quantile")
    with pytest.raises(ValueError, match="alpha must be a positive number"):
        Forecaster("ridge", prediction_length=H, alpha=0.0)


def test_ridge_recovers_an_exact_linear_relation():
    train, test = split(seasonal_trend_panel(), H)
    ridge = Forecaster("ridge", prediction_length=H).fit(train, **LONG)
    naive = Forecaster("seasonal_naive", prediction_length=H).fit(train, **LONG)
    error, naive_error = mae(ridge.predict(), test), mae(naive.predict(), test)
    assert ridge.model.config.context_length == 48  # two days: the relation's 25 lags
    assert error < 1e-3 * test["y"].abs().mean()
    assert error < 1e-3 * naive_error


def test_a_known_future_covariate_that_drives_the_target_is_read():
    df = covariate_panel()
    train, test = split(df, H)
    future = test[["id", "ds", "x"]]
    with_x = Forecaster("ridge", prediction_length=H).fit(train, **LONG, future_covariates=["x"])
    without = Forecaster("ridge", prediction_length=H).fit(train[["id", "ds", "y"]], **LONG)
    error, blind = mae(with_x.predict(future_covariates=future), test), mae(without.predict(), test)
    assert blind > 2.0  # the signal, 3 x of white noise, is not in the past
    assert error < 0.1 * blind  # the covariate read in the series' units (0.05x here; 0.18x in per-window units)


def test_save_and_load_give_the_same_forecasts(tmp_path):
    df = covariate_panel()
    train, test = split(df, H)
    future = test[["id", "ds", "x"]]
    f = Forecaster("ridge", prediction_length=H).fit(train, **LONG, future_covariates=["x"],
                                                     static_covariates=["region"])
    # lags and the covariate over the context, future features, 2 regions, the window's mean and 1 / scale
    assert f.model.n_features == 2 * f.model.config.context_length + H * f.model.batch_features + 2 + 2
    f.save(tmp_path / "ridge")
    assert not list(tmp_path.rglob("*.pkl"))
    loaded = Forecaster.load(tmp_path / "ridge")
    assert torch.equal(loaded.model.coef, f.model.coef) and float(loaded.model.alpha) == float(f.model.alpha)
    pd.testing.assert_frame_equal(loaded.predict(future_covariates=future), f.predict(future_covariates=future))


def _naive_ridge(x, y, alpha, std):
    """The ridge of ``alpha`` (per row) on the rows ``x`` ``[n, d]``, ``y`` ``[n, m]``: the columns
    centred and divided by ``std``, the intercept unpenalised; its raw weights and intercept."""
    z = (x - x.mean(0)) / std
    w = np.linalg.solve(z.T @ z + len(x) * alpha * np.eye(x.shape[1]), z.T @ (y - y.mean(0))) / std[:, None]
    return w, y.mean(0) - x.mean(0) @ w


def test_the_closed_form_and_its_blocked_cross_validation_match_a_naive_computation():
    """Sufficient statistics added in chunks, per block, against the explicit design: each block
    forecast by the ridge of every alpha fitted on the other blocks' rows (the columns standardised
    as the whole fit standardises them), the alpha of the least error over the blocks, and the
    coefficients of that alpha on every row in the raw features' units."""
    rng = np.random.default_rng(1)
    n, d, m = 90, 7, 3
    x = rng.standard_normal((n, d)) * rng.uniform(0.1, 10, d) + rng.standard_normal(d)
    y = x[:, :2] @ rng.standard_normal((2, m)) + rng.standard_normal((n, m))
    block = np.repeat(np.arange(CV_BLOCKS), n // CV_BLOCKS)  # [n]
    moments = _Moments(CV_BLOCKS)
    for rows in (slice(0, 25), slice(25, 61), slice(61, n)):  # chunks that cut blocks apart
        moments.add(torch.from_numpy(x[rows]), torch.from_numpy(y[rows]), torch.from_numpy(block[rows]))
    std = x.std(0)
    naive = []
    for alpha in ALPHAS:
        error = 0.0
        for k in range(CV_BLOCKS):
            w, b = _naive_ridge(x[block != k], y[block != k], alpha, std)
            error += ((y[block == k] - b - x[block == k] @ w) ** 2).sum()
        naive.append(error)
    varies = np.ones(d, dtype=bool)
    np.testing.assert_allclose(moments.held_out_errors(std, varies), naive, rtol=1e-8)
    coef, alpha = moments.solve(None)
    assert alpha == ALPHAS[int(np.argmin(naive))] and moments.count == n
    w, b = _naive_ridge(x, y, alpha, std)
    np.testing.assert_allclose(coef[:-1], w, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(coef[-1], b, rtol=1e-8, atol=1e-10)
    fixed, kept = moments.solve(0.37)
    assert kept == 0.37 and not np.allclose(fixed, coef)
    one = _Moments(CV_BLOCKS)  # every row in one block: nothing to hold out, the most shrinkage
    one.add(torch.from_numpy(x), torch.from_numpy(y))
    assert one.solve(None)[1] == ALPHAS[-1]


def test_too_many_features_fail_the_fit_with_the_fix_but_build_a_model_that_loads(monkeypatch):
    from tsrec.models import ridge

    monkeypatch.setattr(ridge, "MAX_FEATURES", 40)
    model = build_model("ridge", context_length=48, prediction_length=H, n_channels=1, n_time_features=3)
    assert model.n_features > 40  # built (as a saved model is loaded), not fitted
    with pytest.raises(ValueError, match=r"ridge would read \d+ features per window \(context_length 48 .* more than "
                                         r"40: use a shorter context_length, or channel_independent=True"):
        Forecaster("ridge", prediction_length=H, context_length=48).fit(seasonal_trend_panel(), **LONG)


def test_the_blocks_are_each_series_windows_in_time_order():
    """Every series' windows in CV_BLOCKS contiguous runs of nearly equal size, whatever its count
    (an item with fewer windows than blocks gets one block per window; an item's only window, its
    item's position modulo the blocks)."""
    panel = canonicalize(seasonal_trend_panel(n=24 * 6, ids=3), **LONG)
    scaler = StandardScaler.fit([s.values for s in panel.items], [s.observed for s in panel.items])
    origins = [(24, 24 + 23), (24, 27), (30, 24 * 6 - H + 1)]  # 23, 3 and 103 windows
    windows = WindowDataset.from_panel(panel, scaler, 24, H, origins)
    blocks = windows.time_blocks(CV_BLOCKS).numpy()
    first, second, third = blocks[:23], blocks[23:26], blocks[26:]
    for run in (first, third):
        assert (np.diff(run) >= 0).all() and set(run.tolist()) == set(range(CV_BLOCKS))
        sizes = np.bincount(run)
        assert sizes.max() - sizes.min() <= 1
    assert second.tolist() == [0, 1, 3]
    singles = WindowDataset.from_panel(panel, scaler, 24, H, [(30, 31), (40, 41), (50, 51)])  # one window each
    assert singles.time_blocks(CV_BLOCKS).tolist() == [0, 1, 2]  # held out a series at a time


def test_alpha_is_chosen_from_the_grid_or_kept_where_set():
    train, _ = split(covariate_panel(), H)
    chosen = Forecaster("ridge", prediction_length=H).fit(train, **LONG)
    assert float(chosen.model.alpha) in ALPHAS
    noise = train.assign(y=np.random.default_rng(3).standard_normal(len(train)))
    assert float(Forecaster("ridge", prediction_length=H).fit(noise, **LONG).model.alpha) >= 1.0  # nothing to learn
    fixed = Forecaster("ridge", prediction_length=H, alpha=123.0).fit(train, **LONG)
    assert float(fixed.model.alpha) == 123.0
    assert not np.allclose(fixed.predict()["mean"], chosen.predict()["mean"])


def test_a_missing_context_value_reads_as_the_window_mean():
    model = build_model("ridge", context_length=8, prediction_length=2, n_channels=1, n_time_features=0)
    past = torch.arange(8.0).reshape(1, 8, 1)
    observed = torch.ones(1, 8, 1)
    observed[0, 3] = 0.0
    features, _, _, (loc, scale) = model.design({"past_target": past, "past_observed": observed,
                                                 "past_time_feat": torch.zeros(1, 8, 0),
                                                 "future_time_feat": torch.zeros(1, 2, 0)})
    assert features[0, 3] == 0.0
    seen = past[0, observed[0, :, 0] > 0, 0]
    assert loc.item() == pytest.approx(float(seen.mean()))
    torch.testing.assert_close(features[0, 4], (past[0, 4, 0] - loc[0, 0, 0]) / scale[0, 0, 0])


@pytest.mark.parametrize("channel_independent", [True, False])
def test_a_wide_frame_is_forecast(channel_independent):
    t = np.arange(24 * 10)
    df = pd.DataFrame({"a": 10 + np.sin(2 * np.pi * t / 24), "b": 3 + np.cos(2 * np.pi * t / 24)},
                      index=pd.date_range("2024-01-01", periods=len(t), freq="h"))
    f = Forecaster("ridge", prediction_length=H, channel_independent=channel_independent).fit(df.iloc[:-H])
    forecast = f.predict()
    assert f.model.coef.shape[1] == H * (1 if channel_independent else 2)
    truth = df.iloc[-H:]
    for column in "ab":
        got = forecast.set_index("timestamp")[column] if column in forecast else \
            forecast[forecast["item_id"] == column].set_index("timestamp")["mean"]
        np.testing.assert_allclose(got.to_numpy(), truth[column].to_numpy(), atol=1e-3)


@pytest.mark.parametrize("channel_independent", [True, False])
def test_the_fit_adds_each_window_to_its_block_and_each_channel_with_its_window(channel_independent, monkeypatch):
    """A wide frame of 2 channels: read alone, every window adds one row per channel, both in the
    window's block; read jointly, one row. Per block, the rows are the windows of that block."""
    from tsrec.models import ridge

    seen = []
    original = ridge._Moments.add
    monkeypatch.setattr(ridge._Moments, "add", lambda self, x, y, block=None: (seen.append(block.clone()),
                                                                               original(self, x, y, block))[1])
    t = np.arange(24 * 10)
    df = pd.DataFrame({"a": 10 + np.sin(2 * np.pi * t / 24), "b": 3 + np.cos(2 * np.pi * t / 24)},
                      index=pd.date_range("2024-01-01", periods=len(t), freq="h"))
    Forecaster("ridge", prediction_length=H, channel_independent=channel_independent).fit(df.iloc[:-H])
    rows = torch.cat(seen).numpy()
    windows = len(rows) // (2 if channel_independent else 1)
    expected = CV_BLOCKS * np.arange(windows) // windows  # one series: its windows in order
    if channel_independent:
        expected = np.repeat(expected, 2)
    np.testing.assert_array_equal(rows, expected)


def test_auto_scores_the_ridge_with_the_covariates_whatever_the_data_size():
    """A few hundred windows (far below the networks' 1,000): the ridge is scored with the
    covariate, chosen where it drives the target, and the ensemble reads it at predict."""
    df = covariate_panel(n=24 * 10, ids=3)
    train, test = split(df, H)
    f = Forecaster("auto", prediction_length=H, candidates=("seasonal_naive", "naive", "ridge", "dlinear"),
                   trainer_kwargs={"enable_progress_bar": False, "logger": False}).fit(
        train[["id", "ds", "y", "x"]], **LONG, future_covariates=["x"])
    board = f.leaderboard.set_index("model")
    assert board.loc["dlinear", "note"].startswith("skipped")
    assert np.isfinite(board.loc["ridge", "val_score"]) and board.loc["ridge", "covariates"] == "future: x"
    assert board.val_score.idxmin() == "ridge" and board.loc["ridge", "weight"] > 0.5
    forecast = f.predict(future_covariates=test[["id", "ds", "x"]])
    naive = Forecaster("seasonal_naive", prediction_length=H).fit(train[["id", "ds", "y"]], **LONG)
    assert mae(forecast, test) < 0.5 * mae(naive.predict(), test)
