"""Rolling-origin backtests: window arithmetic, agreement with predict, refits without leakage, metrics."""

import numpy as np
import pandas as pd
import pytest
from sklearn.exceptions import NotFittedError

from tsrec import Forecaster
from tsrec.evaluation import backtest, score_backtest

# the naive baselines only: ets and theta would cost a statsforecast fit per window
NAIVE = ("naive", "seasonal_naive")

TRAIN = dict(max_epochs=1, batch_size=64, trainer_kwargs={"enable_progress_bar": False, "logger": False})


def frame(n=300, seed=0):
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    return pd.DataFrame({"a": np.sin(2 * np.pi * t / 24) + 0.1 * rng.standard_normal(n) + 3,
                         "b": np.cos(2 * np.pi * t / 12) + 0.1 * rng.standard_normal(n)},
                        index=pd.date_range("2024-01-01", periods=n, freq="h"))


@pytest.fixture(scope="module")
def fitted():
    return Forecaster("dlinear", prediction_length=6, context_length=24, **TRAIN).fit(frame().iloc[:200])


def test_rolling_windows_match_predict_on_the_history(fitted):
    df = frame()
    # 7 does not divide the window count
    result = backtest(fitted, df, start=210, stride=5, batch_size=7, baselines=NAIVE)
    origins = sorted(result.errors.origin.unique())
    assert len(origins) == len(range(210, 300 - 6 + 1, 5)) == 17
    assert origins[0] == df.index[210] and origins[-1] == df.index[290]
    assert len(result.errors) == 17 * 6 * 2
    last = result.errors[result.errors.origin == origins[-1]]
    direct = fitted.predict(df.iloc[:290])
    for item in ("a", "b"):
        np.testing.assert_allclose(last[last.item_id == item].y_pred.values,
                                   direct[direct.item_id == item]["mean"].values, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(last[last.item_id == item].y_true.values, df[item].values[290:296], rtol=1e-6)


def test_default_is_the_last_windows_ending_at_the_end(fitted):
    df = frame()
    result = backtest(fitted, df, n_windows=3, baselines=NAIVE)
    assert sorted(result.errors.origin.unique()) == list(df.index[[282, 288, 294]])
    assert result.errors.timestamp.max() == df.index[-1]


def test_metrics_are_labelled_and_consistent(fitted):
    result = backtest(fitted, frame(), start=200, stride=1, baselines=NAIVE)
    e = result.errors
    assert result.metric("mse", "original") == pytest.approx(float(np.mean((e.y_true - e.y_pred) ** 2)))
    assert result.metric("mse", "scaled") == pytest.approx(float(np.mean((e.y_true_scaled - e.y_pred_scaled) ** 2)))
    assert set(result.summary.units) == {"original", "scaled", "scale-free", "ratio", "count"}
    assert result.metric("windows_without_forecast", "count") == 0
    assert {"mse", "mae", "rmse", "mase", "smape", "mse_ratio_naive", "mae_ratio_naive"} <= set(result.summary.metric)
    assert result.metric("mse_ratio_naive", "ratio") == pytest.approx(
        result.metric("mse", "scaled") / float(np.mean((e.y_true_scaled - e.y_naive_scaled) ** 2)))
    assert list(result.by_step.query("units == 'scaled'").step) == list(range(1, 7))


def test_seasonal_naive_is_exact_on_a_periodic_series():
    df = pd.DataFrame({"y": np.tile([1.0, 5.0, 2.0, 7.0], 30)}, index=pd.date_range("2024", periods=120, freq="D"))
    f = Forecaster("seasonal_naive", prediction_length=4, context_length=8, season_length=4).fit(df)
    result = backtest(f, df, start=8, stride=1, season_length=4, baselines=NAIVE)
    assert result.metric("mse", "original") == 0.0


def test_refit_uses_only_data_before_each_origin(monkeypatch):
    seen = []
    original_fit = Forecaster.fit

    def spy(self, df, **kwargs):
        seen.append(df.index.max())
        return original_fit(self, df, **kwargs)

    monkeypatch.setattr(Forecaster, "fit", spy)
    df = frame()
    f = Forecaster("dlinear", prediction_length=6, context_length=24, val_windows=0, **TRAIN)
    result = backtest(f, df, start=240, stride=6, refit_every=4, baselines=NAIVE)
    origins = sorted(result.errors.origin.unique())
    assert len(origins) == 10
    # blocks start at windows 0, 4, 8: each fit ends right before its block's first origin
    assert seen == [origins[0] - pd.Timedelta(hours=1), origins[4] - pd.Timedelta(hours=1),
                    origins[8] - pd.Timedelta(hours=1)]


def test_backtest_errors(fitted):
    with pytest.raises(ValueError, match="context_length=24"):
        backtest(fitted, frame(), start=10)
    with pytest.raises(ValueError, match="stride must be an integer >= 1"):
        backtest(fitted, frame(), stride=0)
    with pytest.raises(NotFittedError, match="not fitted"):
        backtest(Forecaster("dlinear", prediction_length=6), frame())
    with pytest.raises(ValueError, match="not a timestamp"):
        backtest(fitted, frame(), start="1999-01-01")


def test_naive_baselines_are_the_last_observed_value_and_season():
    from tsrec.evaluation import naive_forecasts

    past = np.array([[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]]).reshape(1, 6, 1)
    observed = np.ones_like(past)
    observed[0, 5] = 0  # the last value is missing: the naive forecast repeats the one before
    naive, seasonal = naive_forecasts(past, observed, 4, season=3)
    assert naive[0, :, 0].tolist() == [5.0, 5.0, 5.0, 5.0]
    # y[T + h - 3 * ceil((h + 1) / 3)]: 4, 5, (6 missing), 4
    np.testing.assert_array_equal(seasonal[0, :, 0], [4.0, 5.0, np.nan, 4.0])
    assert np.isnan(naive_forecasts(past, observed, 2, season=None)[1]).all()


def test_backtest_scores_the_model_against_the_naive_forecasts_of_the_same_windows():
    t = np.arange(400)
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"y": np.sin(2 * np.pi * t / 12) + 0.05 * rng.standard_normal(400)},
                      index=pd.date_range("2024-01-01", periods=400, freq="h"))
    f = Forecaster("seasonal_naive", prediction_length=6, context_length=24).fit(df.iloc[:300])
    assert f.resolved_settings.network.season_length == 12  # the cycle found, not the calendar's 24
    result = backtest(f, df, start=300, stride=6, baselines=NAIVE)
    skill = result.skill.set_index("baseline")
    assert skill.loc["seasonal_naive", "season"] == 12
    assert skill.loc["seasonal_naive", "mse_ratio"] == pytest.approx(1.0)  # the model is that baseline
    assert skill.loc["naive", "mse_ratio"] < 0.1  # and beats the last value on a clean cycle
    e = result.errors
    assert skill.loc["naive", "baseline_mse"] == pytest.approx(float(np.mean((e.y_true_scaled - e.y_naive_scaled) ** 2)))
    assert result.metric("mse_ratio_seasonal_naive", "ratio") == pytest.approx(1.0)


def test_a_perfect_baseline_gives_an_infinite_ratio_not_an_error():
    """The last 6 steps are constant: the last value forecasts the last window perfectly, a season of
    8 steps (reaching back before the constant part) does not."""
    df = pd.DataFrame({"y": np.r_[np.sin(np.arange(134)), np.full(6, 2.0)]},
                      index=pd.date_range("2024-01-01", periods=140, freq="h"))
    f = Forecaster("seasonal_naive", prediction_length=4, context_length=8, season_length=8).fit(df.iloc[:120])
    skill = backtest(f, df, n_windows=1, baselines=("naive",)).skill.set_index("baseline")
    assert skill.loc["naive", "baseline_mse"] == 0 and skill.loc["naive", "mse_ratio"] == np.inf


def test_refit_blocks_keep_the_stride_when_the_first_item_has_run_out_of_windows():
    """From ``start``, the shorter first item (ids sort) has fewer windows than the second: its refit blocks
    run out first, and the later blocks still step the second item's origins ``stride`` apart."""
    t = np.arange(130)
    df = pd.DataFrame({"id": np.repeat(["a", "b"], [100, 130]), "y": np.r_[np.sin(t[:100] / 3), np.sin(t / 3)],
                       "time": np.r_[pd.date_range("2024-01-01", periods=100, freq="h"),
                                     pd.date_range("2024-01-01", periods=130, freq="h")]})
    f = Forecaster("naive", prediction_length=4, context_length=8)
    result = backtest(f, df, start=60, stride=5, refit_every=3, baselines=("naive",), id_col="id", time_col="time",
                      target_col="y")
    for item, count in (("a", 8), ("b", 14)):
        origins = result.errors[result.errors.item_id == item].origin.unique()
        assert len(origins) == count and (np.diff(origins) == pd.Timedelta(hours=5)).all()


def long_frame():
    """Four hourly series of different lengths and ends with a 6-step and a daily cycle, about 5% of
    the values missing, and a 16-step run of them in item s2 that leaves windows without a forecast."""
    rng = np.random.default_rng(7)
    parts = []
    for k, (length, offset) in enumerate([(150, 0), (190, 10), (220, 5), (260, 20)]):
        t = np.arange(length)
        y = ((k + 1) * np.sin(2 * np.pi * t / 6) + 0.5 * np.sin(2 * np.pi * t / 24) + 0.2 * rng.standard_normal(length)
             + 10 * k)
        y[rng.random(length) < 0.05] = np.nan
        if k == 2:
            y[150:166] = np.nan
        parts.append(pd.DataFrame({"id": f"s{k}", "y": y, "time": pd.date_range("2024-01-01", periods=length, freq="h")
                                   + pd.Timedelta(hours=offset)}))
    return pd.concat(parts, ignore_index=True)


def wide_frame():
    """Three hourly columns of different levels and scales, about 5% missing, a 15-step run in ``c``."""
    rng = np.random.default_rng(3)
    t = np.arange(240)
    df = pd.DataFrame({"a": np.sin(2 * np.pi * t / 12) + 0.1 * rng.standard_normal(240) + 5,
                       "b": 100 * np.cos(2 * np.pi * t / 24) + 10 * rng.standard_normal(240),
                       "c": 0.01 * t + 0.05 * rng.standard_normal(240)},
                      index=pd.date_range("2024-03-01", periods=240, freq="h"))
    df = df.mask(rng.random(df.shape) < 0.05)
    df.loc[df.index[200:215], "c"] = np.nan
    return df


LONG = {"id_col": "id", "time_col": "time", "target_col": "y"}


def long_backtest():
    """Seasonal naive (the 6-step cycle it finds) from a timestamp: the items get 4 to 37 windows."""
    df = long_frame()
    f = Forecaster("seasonal_naive", prediction_length=4).fit(df, **LONG)
    return backtest(f, df, start="2024-01-06 12:00", stride=4, baselines=NAIVE, **LONG)


def wide_backtest():
    """Naive on three channels, 8 overlapping windows, MASE against a 12-step season."""
    df = wide_frame()
    f = Forecaster("naive", prediction_length=6, context_length=12).fit(df)
    return backtest(f, df, n_windows=8, stride=5, season_length=12, baselines=NAIVE)


def fingerprint(errors):
    """Per column of backtest ``errors`` but ``item_id``: the count, sum and row-number-weighted sum of
    its finite values (timestamps in hours after the column's first, and that first); per item id, its rows.
    ``seasonal_error`` came later (test_score_backtest_of_parts_equals_the_whole_backtest checks it)."""
    weight = np.arange(1, len(errors) + 1)
    out = {"rows": errors.item_id.value_counts(sort=False).to_dict()}
    for column in errors.columns.drop(["item_id", "seasonal_error"]):
        x = errors[column]
        if pd.api.types.is_datetime64_any_dtype(x):
            out[f"first_{column}"] = str(x.min())
            x = (x - x.min()) / pd.Timedelta(hours=1)
        x = x.to_numpy(dtype=float)
        out[column] = [int(np.isfinite(x).sum()), float(np.nansum(x)), float(np.nansum(x * weight))]
    return out


# What backtest gave on long_backtest and wide_backtest before its scoring was vectorised (commit 577afe1,
# windows read one by one, MASE one series at a time): summary values in row order, skill rows (season
# and the six scores), by_step columns and the fingerprint of the errors.
OLD_RESULTS = {
    "long": {
        "summary": [0.8060766478639152, 0.6302703957370308, 0.8978177141624658, 0.1779032140590051, 0.30441163255852294,
                    0.42178574425768006, 0.08480231278319104, 2.826195212323959, 2.0, 0.06658415126983434,
                    0.21408322029282167, 1.0, 1.0],
        "skill": [
            [1.0, 0.1779032140590051, 2.671855248827109, 0.06658415126983434, 0.30441163255852294, 1.4219313038273182,
             0.21408322029282167],
            [6.0, 0.09839413711608522, 0.09839413711608522, 1.0, 0.25031255534246427, 0.25031255534246427, 1.0],
        ],
        "by_step": {
            "mse": [0.641060421206952, 0.8587832758668174, 1.0679223058209495, 0.6514397703114576, 0.14189653316044953,
                    0.20514454868702456, 0.2200271780094291, 0.14320283758458302],
            "mae": [0.5760527263796842, 0.680215957881341, 0.7081935697810973, 0.5541496858736022, 0.2782323690376466,
                    0.3365101259377961, 0.33346884970763324, 0.26813998827452046],
        },
        "errors": {
            "rows": {"s0": 16, "s1": 68, "s2": 92, "s3": 148},
            "first_origin": "2024-01-06 12:00:00",
            "origin": [324, 16976.0, 3669448.0],
            "step": [324, 810.0, 132030.0],
            "first_timestamp": "2024-01-06 12:00:00",
            "timestamp": [324, 17462.0, 3748828.0],
            "y_true": [292, 6256.268670931026, 1276009.0073255936],
            "y_pred": [316, 6792.873813076465, 1365842.6324121072],
            "y_true_scaled": [292, -4.42380387493904, -418.63376973447885],
            "y_pred_scaled": [316, 0.8046245137738879, -13.42236883809528],
            "observed": [324, 292.0, 48131.0],
            "forecast": [324, 316.0, 51686.0],
            "y_naive": [316, 6737.364782001998, 1355087.9733580765],
            "y_seasonal_naive": [292, 6264.339970650057, 1273644.162554523],
            "y_naive_scaled": [316, -28.091988932341337, -4253.255443556234],
            "y_seasonal_naive_scaled": [292, 0.8046245137738879, -13.42236883809528],
        },
    },
    "wide": {
        "summary": [1785.3072355926595, 23.02424647818045, 42.252896179938475, 1.0795971559417277, 0.8122095769953408,
                    1.0390366480262994, 0.5170541743884666, 3.243628321739937, 1.0, 0.9164536323418726,
                    0.965897145903131, 0.6927309863706647, 1.0234819827689674],
        "skill": [
            [1.0, 1.0795971559417277, 1.178016124157819, 0.9164536323418726, 0.8122095769953408, 0.8408861962584125,
             0.965897145903131],
            [12.0, 1.2186161511241431, 1.759147742919196, 0.6927309863706647, 0.8975364684451823, 0.8769440826080326,
             1.0234819827689674],
        ],
        "by_step": {
            "mse": [163.9366055216618, 751.6526601945621, 1443.0081070227588, 1807.9258623185667, 2948.5428387096395,
                    3635.2419160653676, 0.22976855789667147, 0.7340936468952423, 1.154167520272976, 1.4790170757308336,
                    1.2924078957233411, 1.675112577198909],
            "mae": [7.397713115613525, 15.783586173961913, 23.53768646987588, 24.831757122403364, 32.80181547225412,
                    34.9588596807716, 0.3726993929151268, 0.7058103280509577, 0.8835953996133279, 0.9788749516527686,
                    0.941143567673862, 1.04161047921516],
        },
        "errors": {
            "rows": {"a": 48, "b": 48, "c": 48},
            "first_origin": "2024-03-09 07:00:00",
            "origin": [144, 2520.0, 250740.0],
            "step": [144, 504.0, 37800.0],
            "first_timestamp": "2024-03-09 07:00:00",
            "timestamp": [144, 2880.0, 278100.0],
            "y_true": [119, -111.46202060688435, 22091.84949740372],
            "y_pred": [138, -465.7398056667158, -23821.71640036593],
            "y_true_scaled": [119, 46.88971603917889, 5288.146420127479],
            "y_pred_scaled": [138, 60.947189753875136, 6070.012911516242],
            "observed": [144, 119.0, 9266.0],
            "forecast": [144, 138.0, 10053.0],
            "y_naive": [138, -459.02533825859234, -23695.862053906185],
            "y_seasonal_naive": [119, 881.714624639237, 37963.58696544172],
            "y_naive_scaled": [138, 73.80651444755495, 6373.420452433638],
            "y_seasonal_naive_scaled": [119, 53.78320451430045, 3721.4568404241],
        },
    },
}


@pytest.mark.parametrize("chunk", [None, 5], ids=["one_chunk", "chunks_of_5_windows"])
@pytest.mark.parametrize("case", [long_backtest, wide_backtest], ids=["long", "wide"])
def test_backtest_reproduces_the_per_window_implementation(case, chunk, monkeypatch):
    if chunk is not None:  # the windows' values gathered a few windows at a time
        monkeypatch.setattr("tsrec.evaluation.WINDOW_CHUNK", chunk)
    result = case()
    expected = OLD_RESULTS[case.__name__.removesuffix("_backtest")]
    np.testing.assert_allclose(result.summary.value, expected["summary"], rtol=1e-6)
    np.testing.assert_allclose(result.skill.drop(columns=["baseline", "note"]).to_numpy(dtype=float),
                               expected["skill"], rtol=1e-6)
    for column, values in expected["by_step"].items():
        np.testing.assert_allclose(result.by_step[column], values, rtol=1e-6)
    errors = fingerprint(result.errors)
    assert errors.keys() == expected["errors"].keys()
    for column, values in expected["errors"].items():
        if isinstance(values, list):
            np.testing.assert_allclose(errors[column], values, rtol=1e-6, err_msg=column)
        else:
            assert errors[column] == values, column


def mase_per_series(errors, series, m):
    """MASE as a loop over the series: ``series`` maps each item id of ``errors`` to its values on the
    grid; its scored errors are divided by the mean ``|y[t] - y[t - m]|`` of its values before its first
    origin (pairs with a missing value left out)."""
    total, count = 0.0, 0
    for name, values in series.items():
        rows = errors[errors.item_id == name]
        history = values[values.index < rows.origin.min()].to_numpy()
        scale = np.nanmean(np.abs(history[m:] - history[:-m]))
        scored = rows[rows.observed & rows.forecast]
        total += float(np.sum(np.abs(scored.y_true - scored.y_pred) / scale))
        count += len(scored)
    return total / count


def test_mase_matches_a_loop_over_the_series(fitted):
    long = {item: part.set_index("time").y for item, part in long_frame().groupby("id")}
    cases = [(long_backtest(), long, 24), (wide_backtest(), dict(wide_frame().items()), 12),
             (backtest(fitted, frame(), start=200, stride=3, baselines=NAIVE), dict(frame().items()), 24)]
    for result, series, m in cases:
        assert result.metric("mase", "scale-free") == pytest.approx(mase_per_series(result.errors, series, m),
                                                                     rel=1e-9)


def test_score_backtest_of_parts_equals_the_whole_backtest():
    """Backtests over disjoint sets of series (as workers run them), their errors concatenated and
    scored, give the whole backtest's metrics, skill and per-step errors; each row's seasonal_error is
    its series' scale of the per-series MASE loop."""
    df = long_frame()
    f = Forecaster("dlinear", prediction_length=6, context_length=24, **TRAIN).fit(
        df, id_col="id", time_col="time", target_col="y")
    kwargs = dict(start="2024-01-06 12:00", stride=4, baselines=NAIVE, id_col="id", time_col="time", target_col="y")
    whole = backtest(f, df, **kwargs)
    ids = sorted(df.id.unique())
    parts = [backtest(f, df[df.id.isin(ids[k::2])], **kwargs).errors for k in (1, 0)]
    scored = score_backtest(f, pd.concat(parts, ignore_index=True))
    pd.testing.assert_frame_equal(scored.summary, whole.summary, rtol=1e-9)
    pd.testing.assert_frame_equal(scored.skill, whole.skill, rtol=1e-9)
    pd.testing.assert_frame_equal(scored.by_step, whole.by_step, rtol=1e-9)
    assert len(scored.errors) == len(whole.errors)
    for name, rows in whole.errors.groupby("item_id"):
        history = df[(df.id == name) & (df.time < rows.origin.min())].y.to_numpy()
        np.testing.assert_allclose(rows.seasonal_error, np.nanmean(np.abs(history[24:] - history[:-24])), rtol=1e-12)
