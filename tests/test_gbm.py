"""The global gradient-boosted trees (``Forecaster("gbm")``, tsrec.models.gbm): a nonlinear relation
the ridge cannot fit, a known-future covariate read, the exported trees against scikit-learn's
predict, save/load without pickles, determinism under the seed, and its place among auto's candidates."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.ensemble import HistGradientBoostingRegressor

import tsrec
from tsrec import Forecaster
from tsrec.config import DataFacts
from tsrec.models.ensemble import AUTO_CANDIDATES
from tsrec.models.gbm import Trees
from tsrec.models.registry import build_model
from tests.held_out import mae, split

H = 12
LONG = {"id_col": "id", "time_col": "ds", "target_col": "y"}


def threshold_panel(n=24 * 12, ids=4, seed=0):
    """``y = 2 where x > 0.3 else -1``, plus noise of scale 0.1 and a level per series: ``x`` white
    noise known in the future. No line through ``x`` fits a step (the ridge's best is 0.8 MAE)."""
    rng = np.random.default_rng(seed)
    parts = []
    for k in range(ids):
        x = rng.standard_normal(n)
        y = np.where(x > 0.3, 2.0, -1.0) + 0.1 * rng.standard_normal(n) + 5 * k
        parts.append(pd.DataFrame({"id": f"s{k}", "ds": pd.date_range("2024-01-01", periods=n, freq="h"), "y": y,
                                   "x": x, "region": "north" if k % 2 else "south"}))
    return pd.concat(parts, ignore_index=True)


def test_gbm_is_registered_and_an_auto_candidate_with_nothing_to_train():
    assert "gbm" in tsrec.list_models() and "gbm" in AUTO_CANDIDATES
    model = build_model("gbm", context_length=24, prediction_length=H, n_channels=1, n_time_features=3,
                        season_length=12)
    assert not model.trainable and type(model).fits_windows and type(model).reads_covariates()
    with pytest.raises(ValueError, match="gbm forecasts points only"):
        Forecaster("gbm", prediction_length=H, output="quantile")
    with pytest.raises(ValueError, match="gbm reads each channel alone"):
        Forecaster("gbm", prediction_length=H, channel_independent=False)
    with pytest.raises(ValueError, match="learning_rate must be a positive number"):
        Forecaster("gbm", prediction_length=H, learning_rate=0.0)


def test_the_season_comes_from_the_data_and_sets_the_seasonal_lags():
    facts = DataFacts(season=24, n_channels=1, n_time_features=3, cycles=(24.0, 168.0))
    model = build_model("gbm", data=facts, context_length=48, prediction_length=H)
    assert model.config.season_length == 24 and model.n_seasonal == 2 and model.windows == (3, 24, 48)
    past = torch.arange(48.0).reshape(1, 48, 1)
    features, _, _, n = model.rows({"past_target": past, "past_time_feat": torch.zeros(1, 48, 3),
                                    "future_time_feat": torch.zeros(1, H, 3)})
    x = ((past - n.loc) / n.scale)[0, :, 0].double()
    assert features.shape == (1, model.n_features)
    torch.testing.assert_close(features[0, :24], x[24:])  # the last 24 values
    torch.testing.assert_close(features[0, 24:27], torch.stack([x[-w:].mean() for w in (3, 24, 48)]))
    # the next step is position 48: the same phase a day and two days back
    torch.testing.assert_close(features[0, 27:29], x[[24, 0]])
    flat = build_model("gbm", data=DataFacts(season=1, n_channels=1, n_time_features=0), context_length=8,
                       prediction_length=2)
    assert flat.config.season_length == 1 and flat.n_seasonal == 0 and flat.windows == (3,)


def test_a_feature_missing_in_every_training_row_is_fitted_as_a_constant():
    """Yearly data with an 11-year cycle and a context of 20 years: the phase two cycles back (22
    years) is in no training row's context. scikit-learn 1.9 fails on a column missing in every row
    (the default failed on 309 years of sunspots); the trees are fitted with it constant, split on it
    nowhere, and forecast."""
    t = np.arange(309)
    df = pd.DataFrame({"y": 50 + 40 * np.sin(2 * np.pi * t / 11) + np.random.default_rng(0).normal(0, 5, 309)},
                      index=pd.date_range("1700", periods=309, freq="YS"))
    f = Forecaster("gbm", prediction_length=10, context_length=20, season_length=11).fit(df)
    model = f.model
    assert model.n_seasonal == 2 and model.n_features == 20 + 3 + 2 + 2  # lags, means of 3, 11, 20; loc, scale
    second = 20 + 3 + 1  # the lag two cycles back
    assert second not in set(model.trees.feature[~model.trees.leaf].tolist())
    assert np.isfinite(f.predict().iloc[:, -1].to_numpy()).all()


def test_gbm_fits_a_threshold_of_a_covariate_that_the_ridge_cannot():
    train, test = split(threshold_panel(), H)
    future = test[["id", "ds", "x"]]
    errors = {}
    for name in ("gbm", "ridge"):
        f = Forecaster(name, prediction_length=H).fit(train, **LONG, future_covariates=["x"])
        errors[name] = mae(f.predict(future_covariates=future), test)
    assert errors["ridge"] > 0.5  # the step is 3 high: a line through x misses it by half that on average
    assert errors["gbm"] < 0.3 * errors["ridge"]  # 0.14 against 0.79 when written


def test_a_known_future_covariate_that_drives_the_target_is_read():
    train, test = split(threshold_panel(), H)
    with_x = Forecaster("gbm", prediction_length=H).fit(train, **LONG, future_covariates=["x"])
    without = Forecaster("gbm", prediction_length=H).fit(train[["id", "ds", "y"]], **LONG)
    error, blind = mae(with_x.predict(future_covariates=test[["id", "ds", "x"]]), test), mae(without.predict(), test)
    assert blind > 1.0  # the signal, a step in white noise, is not in the past
    assert error < 0.2 * blind


def test_the_exported_trees_walk_as_scikit_learn_predicts():
    """Numerical splits with missing values, in training (NaN learnt a side) and only at predict
    (NaN sent down scikit-learn's default side), to 1e-9."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3_000, 6))
    x[rng.random(3_000) < 0.2, 1] = np.nan
    y = np.where(x[:, 0] > 0.2, 1.0, -1.0) * np.nan_to_num(x[:, 1], nan=3.0) + np.sin(3 * x[:, 2])
    model = HistGradientBoostingRegressor(max_iter=60, max_leaf_nodes=15, random_state=0).fit(x, y)
    trees = Trees.of(model)
    assert len(trees.roots) == model.n_iter_
    probe = rng.standard_normal((2_000, 6)) * 2
    probe[rng.random(2_000) < 0.3, 1] = np.nan
    probe[rng.random(2_000) < 0.3, 3] = np.nan  # never missing in training
    np.testing.assert_allclose(trees.predict(probe), model.predict(probe), rtol=0, atol=1e-9)


def test_a_fitted_gbm_forecasts_as_its_scikit_learn_model_would(monkeypatch):
    fitted = []
    export = Trees.of.__func__

    def keep(cls, model):
        fitted.append(model)
        return export(cls, model)

    monkeypatch.setattr(Trees, "of", classmethod(keep))
    train, _ = split(threshold_panel(), H)
    f = Forecaster("gbm", prediction_length=H).fit(train, **LONG, future_covariates=["x"],
                                                   static_covariates=["region"])
    (model,) = fitted
    g = torch.Generator().manual_seed(0)
    past = torch.randn(16, f.model.config.context_length, 1, generator=g, dtype=torch.float64)
    batch = {"past_target": past, "past_observed": (torch.rand(past.shape, generator=g) > 0.1).double(),
             "past_time_feat": torch.randn(16, past.shape[1], f.model.batch_features, generator=g),
             "future_time_feat": torch.randn(16, H, f.model.batch_features, generator=g),
             "static_cat": torch.randint(0, 2, (16, 1), generator=g)}
    features, _, _, _ = f.model.rows(batch)
    assert features.shape == (16, f.model.n_features) and torch.isnan(features).any()  # missing lags
    np.testing.assert_allclose(f.model.trees.predict(features.numpy()), model.predict(features.numpy()),
                               rtol=0, atol=1e-9)
    ours = f.model(batch)  # [16, H, 1] every step's features walked through the exported trees
    f.model.trees = type("Sklearn", (), {"predict": staticmethod(model.predict)})()
    torch.testing.assert_close(ours, f.model(batch), rtol=0, atol=1e-9)


def test_save_and_load_give_the_same_forecasts(tmp_path):
    train, test = split(threshold_panel(), H)
    future = test[["id", "ds", "x"]]
    f = Forecaster("gbm", prediction_length=H).fit(train, **LONG, future_covariates=["x"],
                                                   static_covariates=["region"])
    assert len(f.model.trees.roots) > 10
    f.save(tmp_path / "gbm")
    assert not list(tmp_path.rglob("*.pkl"))
    loaded = Forecaster.load(tmp_path / "gbm")
    for name, value in f.model.trees.tensors().items():
        assert torch.equal(loaded.model.trees.tensors()[name], value), name
    pd.testing.assert_frame_equal(loaded.predict(future_covariates=future), f.predict(future_covariates=future))


def test_corrupted_trees_are_refused_with_a_reason():
    train, _ = split(threshold_panel(ids=2), H)
    model = Forecaster("gbm", prediction_length=H, max_iter=5).fit(train[["id", "ds", "y"]], **LONG).model
    state = model.get_extra_state()
    inner = int(np.flatnonzero(~state["leaf"].numpy())[0])
    looped = dict(state, left=state["left"].clone())
    looped["left"][inner] = inner
    with pytest.raises(ValueError, match="children are not nodes after it.*fit again"):
        model.set_extra_state(looped)
    with pytest.raises(ValueError, match="feature beyond"):
        model.set_extra_state(dict(state, feature=state["feature"] + model.n_features))
    with pytest.raises(ValueError, match="hold .*not"):
        model.set_extra_state({"value": state["value"]})


def test_the_fit_is_deterministic_under_the_seed():
    train, _ = split(threshold_panel(n=24 * 20), H)  # 1,680 rows: the seed draws the rows held out to stop early
    fits = [Forecaster("gbm", prediction_length=H, seed=seed).fit(train, **LONG, future_covariates=["x"]).model.trees
            for seed in (0, 0, 1)]
    first, again, other = (t.tensors() for t in fits)
    assert all(torch.equal(first[name], again[name]) for name in first)
    assert not all(first[name].shape == other[name].shape and torch.equal(first[name], other[name]) for name in first)


def test_auto_scores_gbm_with_the_covariates_below_the_networks_minimum():
    """A few hundred windows (far below the networks' 1,000): gbm is scored with the covariate and,
    where a threshold of it drives the target, chosen over the ridge."""
    df = threshold_panel(n=24 * 10, ids=3)
    train, test = split(df, H)
    f = Forecaster("auto", prediction_length=H, candidates=("seasonal_naive", "ridge", "gbm", "dlinear"),
                   trainer_kwargs={"enable_progress_bar": False, "logger": False}).fit(
        train[["id", "ds", "y", "x"]], **LONG, future_covariates=["x"])
    board = f.leaderboard.set_index("model")
    assert board.loc["dlinear", "note"].startswith("skipped")
    assert np.isfinite(board.loc["gbm", "val_score"]) and board.loc["gbm", "covariates"] == "future: x"
    assert board.val_score.idxmin() == "gbm" and board.loc["gbm", "val_score"] < 0.5 * board.loc["ridge", "val_score"]
    forecast = f.predict(future_covariates=test[["id", "ds", "x"]])
    naive = Forecaster("seasonal_naive", prediction_length=H).fit(train[["id", "ds", "y"]], **LONG)
    assert mae(forecast, test) < 0.5 * mae(naive.predict(), test)
