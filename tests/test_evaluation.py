"""Rolling-origin backtests: window arithmetic, agreement with predict, refits without leakage, metrics."""

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.exceptions import NotFittedError

from tsrec import Forecaster
from tsrec.evaluation import backtest, score_backtest

# the naive baselines only: ets and theta (tested at the end) need the stats extra and a statsforecast fit per series
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
    assert result.metric("mse", "scaled") == 0.0  # the values as the model reads them, float32
    assert result.metric("mse", "original") < 1e-12  # the data's own, against forecasts read back from float32


def test_refit_uses_only_data_before_each_origin(monkeypatch):
    """Each refit block's model is fitted on a slice of the one read, every series cut right before
    the block's first origin (Read.before: no second read of the frame)."""
    import tsrec.evaluation

    seen, reads = [], []
    import tsrec.forecaster

    original_fit, original_read = tsrec.forecaster.fit_state, tsrec.data.source.read

    def spy(read, settings, **kwargs):  # the forecaster's refits (Forecaster.fit_read; the baselines fit elsewhere)
        seen.append(read.panel.items[0].index[len(read.panel.items[0]) - 1])
        return original_fit(read, settings, **kwargs)

    monkeypatch.setattr(tsrec.forecaster, "fit_state", spy)
    monkeypatch.setattr(tsrec.data.source, "read", lambda *a, **k: reads.append(1) or original_read(*a, **k))
    df = frame()
    f = Forecaster("dlinear", prediction_length=6, context_length=24, val_windows=0, **TRAIN)
    result = backtest(f, df, start=240, stride=6, refit_every=4, baselines=NAIVE)
    origins = sorted(result.errors.origin.unique())
    assert len(origins) == 10 and len(reads) == 1
    # blocks start at windows 0, 4, 8: each fit ends right before its block's first origin
    assert seen == [origins[0] - pd.Timedelta(hours=1), origins[4] - pd.Timedelta(hours=1),
                    origins[8] - pd.Timedelta(hours=1)]


def test_a_window_with_fewer_steps_than_the_context_reads_them_as_predict_does(fitted):
    """A network with a context of 24 forecast from 10 steps: the window is padded, as ``predict``
    pads a series that short (it was refused, though predict forecast it)."""
    df = frame()
    errors = backtest(fitted, df, start=10, n_windows=1, baselines=()).errors
    both = errors.merge(fitted.predict(df.iloc[:10]), on=["item_id", "timestamp"], validate="one_to_one")
    assert len(both) == len(errors) == 12  # 6 steps of 2 columns
    np.testing.assert_allclose(both.y_pred, both["mean"], rtol=1e-5)


def test_backtest_errors(fitted):
    with pytest.raises(ValueError, match="would start at position 0, with no earlier step to forecast from"):
        backtest(fitted, frame(), start=0)
    with pytest.raises(ValueError, match="stride must be an integer >= 1"):
        backtest(fitted, frame(), stride=0)
    with pytest.raises(NotFittedError, match="not fitted"):
        backtest(Forecaster("dlinear", prediction_length=6), frame())
    with pytest.raises(ValueError, match="not a timestamp"):
        backtest(fitted, frame(), start="1999-01-01")


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


def test_the_naive_baselines_score_a_short_history():
    """Three yearly series of 17 steps, three windows of 3 (8 steps before the first origin): the
    last value and the last season are run as a user runs them and need no training window, so
    their skill rows have scores (they were empty: 6 + 3 steps were asked for)."""
    years = pd.date_range("2001", periods=17, freq="YS")
    rng = np.random.default_rng(0)
    df = pd.concat([pd.DataFrame({"item_id": name, "timestamp": years, "target": np.cumsum(rng.normal(size=17))})
                    for name in "abc"])
    f = Forecaster("drift", prediction_length=3).fit(df[df.timestamp < years[-3]])
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        skill = backtest(f, df, n_windows=3, baselines=NAIVE).skill.set_index("baseline")
    assert not [w for w in said if "could not be run" in str(w.message)]
    assert np.isfinite(skill.loc[list(NAIVE), "mse_ratio"]).all()


def test_the_truth_is_the_datas_own_values_so_a_zero_is_inside_a_band_floored_at_zero():
    """Counts of a rare item (most days 0, never negative: bands floored at 0): the errors' truth
    is each value as given, not read back from the float32 windows (a 0 came back as -5e-9 and fell
    outside every band, an 80% band covering 4% of a series), and the coverage counts those zeros."""
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"y": rng.poisson(0.3, 200).astype(float)}, index=pd.date_range("2024-01-01", periods=200))
    f = Forecaster("ets", prediction_length=14, conformal_windows=20).fit(df.iloc[:-28])
    result = backtest(f, df, n_windows=2, levels=[80])
    e = result.errors
    np.testing.assert_array_equal(e.y_true.to_numpy(), df.y.to_numpy()[-28:])
    inside = (e["y_q0.1"] <= e.y_true) & (e.y_true <= e["y_q0.9"])
    assert (e["y_q0.1"] == 0).all() and (e.y_true == 0).any() and inside[e.y_true == 0].all()
    assert result.intervals.coverage.iloc[0] == pytest.approx(inside.mean())
    assert inside.mean() >= (e.y_true == 0).mean()


def test_a_perfect_baseline_gives_an_infinite_ratio_not_an_error():
    """A baseline that forecasts every scored entry exactly: its MSE is 0 and the model's ratio to it inf."""
    df = pd.DataFrame({"y": np.sin(np.arange(140.0))}, index=pd.date_range("2024-01-01", periods=140, freq="h"))
    f = Forecaster("seasonal_naive", prediction_length=4, context_length=8, season_length=8).fit(df.iloc[:120])
    errors = backtest(f, df, n_windows=1, baselines=("naive",)).errors
    errors["y_naive_scaled"] = errors["y_true_scaled"]
    skill = score_backtest(f, errors).skill.set_index("baseline")
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
    f = Forecaster("seasonal_naive", prediction_length=4, context_length=8).fit(df, **LONG)
    return f, backtest(f, df, start="2024-01-06 12:00", stride=4, baselines=NAIVE, **LONG)


def wide_backtest():
    """Naive on three channels, 8 overlapping windows, MASE against a 12-step season."""
    df = wide_frame()
    f = Forecaster("naive", prediction_length=6, context_length=12).fit(df)
    return f, backtest(f, df, n_windows=8, stride=5, season_length=12, baselines=NAIVE)


def window_by_window(series, f, baselines, *, start=None, n_windows=None, stride, mase_season, order):
    """What ``backtest`` of the seasonal naive model ``f`` should give, computed one series and one
    window at a time in plain numpy from the definitions: ``series`` maps each item id to its values
    on its grid, with ``f``'s scaler row ``(loc, scale)``; a window's values are read as the model reads
    them (scaled, rounded to float32, 0 where missing); the model forecasts
    ``y[T + h - m * ceil((h + 1) / m)]`` with its own season ``m`` (where missing, the same phase of the
    latest earlier season observed, else the context's last observed value), nothing where the context
    holds no observed value; ``baselines`` maps the naive and seasonal naive baselines to the season
    and context of their own models, which forecast by the same rule from their own contexts; each
    series' MASE scale is the mean ``|y[t] - y[t - mase_season]|`` of its observed pairs before its
    first origin. Returns the rows of ``errors``, sorted by the columns ``order``."""
    horizon, context = f.prediction_length, f.context_length
    m = f.resolved_settings.network.season_length
    rows = []
    for item, (values, loc, scale) in series.items():
        v, stamps = values.to_numpy(dtype=float), values.index
        last = len(v) - horizon
        if start is not None:
            origins = range(int(np.argmax(stamps >= pd.Timestamp(start))), last + 1, stride)
        else:
            origins = range(last - stride * (n_windows - 1), last + 1, stride)
        assert origins[0] >= context
        z = ((v - loc) / scale).astype(np.float32).astype(float)  # as the model reads the values
        seen = ~np.isnan(v)
        z[~seen] = 0.0
        history = v[:origins[0]]
        pairs = np.abs(history[mase_season:] - history[:-mase_season])
        seasonal_error = np.nanmean(pairs) if len(history) > mase_season else np.nan
        for origin in origins:
            model = seasonal_rule(z, seen, origin, context, m, horizon)
            others = {name: seasonal_rule(v, seen, origin, c, season, horizon)
                      for name, (season, c) in baselines.items()}
            for h in range(horizon):
                at = origin + h
                true = z[at] if seen[at] else np.nan
                rows.append({"item_id": item, "origin": stamps[origin], "step": h + 1, "timestamp": stamps[at],
                             "y_true": v[at], "y_pred": model[h] * scale + loc, "y_true_scaled": true,
                             "y_pred_scaled": model[h], "observed": bool(seen[at]),
                             "forecast": bool(seen[origin - context:origin].any()), "seasonal_error": seasonal_error,
                             **{key: value for name, (season, _) in baselines.items()
                                for key, value in ((f"y_{name}", others[name][h]),
                                                   (f"y_{name}_scaled", (others[name][h] - loc) / scale),
                                                   (f"season_{name}", season))}})
    return pd.DataFrame(rows).sort_values(order, ignore_index=True)


def seasonal_rule(x, seen, origin, context, m, horizon):
    """``[H]`` seasonal naive of season ``m`` from the ``context`` values of ``x`` before ``origin``
    (``seen``: observed): each step's phase in the latest season that has it, else the context's last
    observed value; NaN without any."""
    past, past_seen = x[origin - context:origin], seen[origin - context:origin]
    observed_before = np.flatnonzero(past_seen)
    if not len(observed_before):
        return np.full(horizon, np.nan)
    out = []
    for h in range(horizon):
        phase = [k for k in range(context + h - m * -(-(h + 1) // m), -1, -m) if past_seen[k]]
        out.append(past[phase[0]] if phase else past[observed_before[-1]])
    return np.array(out)


def baseline_models(before, horizon, first, **columns):
    """The season and context of the naive and seasonal naive baselines of a backtest whose series'
    histories before their first origin are ``before`` (``first``: the earliest first origin): the
    registered models fitted on them, a context no longer than ``first``."""
    out = {}
    for name in NAIVE:
        context = min(Forecaster(name, prediction_length=horizon).fit(before, **columns).context_length, first)
        model = Forecaster(name, prediction_length=horizon, context_length=context).fit(before, **columns)
        out[name] = (model.resolved_settings.network.season_length, context)
    return out


def mean(x):
    return float(np.mean(x)) if len(x) else np.nan


def scores_of(e):
    """The summary, skill and per-step errors of backtest errors ``e``, from their definitions."""
    scored = e.observed & e.forecast
    s = e[scored]
    summary = []
    for units, suffix in (("original", ""), ("scaled", "_scaled")):
        diff = s[f"y_true{suffix}"] - s[f"y_pred{suffix}"]
        summary += [mean(diff**2), mean(np.abs(diff)), np.sqrt(mean(diff**2))]
    summary += [mean(2 * np.abs(s.y_true - s.y_pred) / (np.abs(s.y_true) + np.abs(s.y_pred))),
                mean(np.abs(s.y_true - s.y_pred) / s.seasonal_error),
                float(e[~e.forecast].groupby(["item_id", "origin"]).ngroups)]
    skill = []
    for baseline in NAIVE:
        both = e[scored & np.isfinite(e[f"y_{baseline}_scaled"])]
        model, other = both.y_true_scaled - both.y_pred_scaled, both.y_true_scaled - both[f"y_{baseline}_scaled"]
        row = [mean(model**2), mean(other**2), mean(model**2) / mean(other**2),
               mean(np.abs(model)), mean(np.abs(other)), mean(np.abs(model)) / mean(np.abs(other))]
        skill.append([e[f"season_{baseline}"].iloc[0], *row])
        summary += [row[2], row[5]]
    by_step = {}
    for units, suffix in (("original", ""), ("scaled", "_scaled")):
        kept = e[e.observed & e[f"y_pred{suffix}"].notna()]
        diff = kept[f"y_pred{suffix}"] - kept[f"y_true{suffix}"]
        for name, values in (("mse", diff**2), ("mae", np.abs(diff))):
            by_step.setdefault(name, []).extend(values.groupby(kept.step).mean().tolist())
    return summary, skill, by_step


def long_by_window(f):
    df = long_frame()
    ids = sorted(df.id.unique())
    series = {item: (part.set_index("time").y, f.scaler.loc[ids.index(item), 0], f.scaler.scale[ids.index(item), 0])
              for item, part in df.groupby("id")}
    before = df[df.time < pd.Timestamp("2024-01-06 12:00")]
    first = int(before.groupby("id").size().min())
    return window_by_window(series, f, baseline_models(before, 4, first, **LONG), start="2024-01-06 12:00", stride=4,
                            mase_season=24, order=["item_id", "origin", "step"])


def wide_by_window(f):
    df = wide_frame()
    series = {name: (df[name], f.scaler.loc[0, k], f.scaler.scale[0, k]) for k, name in enumerate(df.columns)}
    first = len(df) - 6 - 5 * 7
    # one item: its windows, then steps, then channels (the columns, item_id here)
    return window_by_window(series, f, baseline_models(df.iloc[:first], 6, first), n_windows=8, stride=5,
                            mase_season=12, order=["origin", "step", "item_id"])


@pytest.mark.parametrize(("case", "by_window"), [(long_backtest, long_by_window), (wide_backtest, wide_by_window)],
                         ids=["long", "wide"])
def test_backtest_equals_a_window_by_window_computation(case, by_window):
    """Windows, forecasts, baselines (the registered naive and seasonal naive models, fitted on the
    history before the first origin), MASE scales, summary, skill and per-step errors of two
    backtests with missing values and windows without a forecast (long: series of different lengths
    and ends; wide: channels of different scales) against :func:`window_by_window` and :func:`scores_of`."""
    f, result = case()
    expected = by_window(f)
    assert f.resolved_settings.network.season_length == (6 if case is long_backtest else 1)
    assert list(result.errors.columns) == list(expected.columns)
    pd.testing.assert_frame_equal(result.errors, expected, check_dtype=False, rtol=1e-6, atol=1e-9)
    assert (~expected.forecast).any() and (~expected.observed).any()  # both kinds of gap are exercised
    summary, skill, by_step = scores_of(expected)
    np.testing.assert_allclose(result.summary.value, summary, rtol=1e-6)
    assert list(result.summary.metric) == ["mse", "mae", "rmse"] * 2 + [
        "smape", "mase", "windows_without_forecast", "mse_ratio_naive", "mae_ratio_naive", "mse_ratio_seasonal_naive",
        "mae_ratio_seasonal_naive"]
    np.testing.assert_allclose(result.skill.drop(columns=["baseline", "fit", "note"]).to_numpy(dtype=float), skill,
                               rtol=1e-6)
    for column, values in by_step.items():
        np.testing.assert_allclose(result.by_step[column], values, rtol=1e-9)


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
    cases = [(long_backtest()[1], long, 24), (wide_backtest()[1], dict(wide_frame().items()), 12),
             (backtest(fitted, frame(), start=200, stride=3, baselines=NAIVE), dict(frame().items()), 24)]
    for result, series, m in cases:
        assert result.metric("mase", "scale-free") == pytest.approx(mase_per_series(result.errors, series, m),
                                                                     rel=1e-9)


def test_score_backtest_of_parts_equals_the_whole_backtest():
    """Backtests over disjoint sets of series (as workers run them), their errors concatenated and
    scored, give the whole backtest's metrics, skill and per-step errors; each row's seasonal_error is
    its series' scale of the per-series MASE loop. A baseline is a model fitted on the series it is
    given: where the parts' models resolve different seasons, the skill table says which."""
    df = long_frame()
    f = Forecaster("dlinear", prediction_length=6, context_length=24, **TRAIN).fit(
        df, id_col="id", time_col="time", target_col="y")
    kwargs = dict(start="2024-01-06 12:00", stride=4, id_col="id", time_col="time", target_col="y")
    whole = backtest(f, df, baselines=("naive",), **kwargs)
    ids = sorted(df.id.unique())
    parts = [backtest(f, df[df.id.isin(ids[k::2])], baselines=("naive",), **kwargs).errors for k in (1, 0)]
    scored = score_backtest(f, pd.concat(parts, ignore_index=True))
    pd.testing.assert_frame_equal(scored.summary, whole.summary, rtol=1e-9)
    pd.testing.assert_frame_equal(scored.skill, whole.skill, rtol=1e-9)
    pd.testing.assert_frame_equal(scored.by_step, whole.by_step, rtol=1e-9)
    seasonal = [backtest(f, df[df.id.isin(ids[k::2])], baselines=NAIVE, **kwargs).errors for k in (1, 0)]
    skill = score_backtest(f, pd.concat(seasonal, ignore_index=True)).skill.set_index("baseline")
    assert [part.season_seasonal_naive.iloc[0] for part in seasonal] == [6, 24]  # s1, s3: the 6-step cycle; s0, s2: 24
    assert np.isnan(skill.loc["seasonal_naive", "season"])
    assert skill.loc["seasonal_naive", "note"] == "season 6 on 2 series; season 24 on 2 series"
    assert len(scored.errors) == len(whole.errors)
    for name, rows in whole.errors.groupby("item_id"):
        history = df[(df.id == name) & (df.time < rows.origin.min())].y.to_numpy()
        np.testing.assert_allclose(rows.seasonal_error, np.nanmean(np.abs(history[24:] - history[:-24])), rtol=1e-12)


# ets and theta: fitted once per series and carried forward, as statsforecast's cross_validation(refit=False)

STATS_LONG = dict(id_col="id", time_col="time", target_col="y")


def seasonal_panel(n_series=4, n=240, cycle=12, seed=0):
    """Positive hourly series with a cycle of ``cycle`` steps and a trend, of ``n`` steps each."""
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    phase = np.arange(n_series)[:, None]
    y = 20 + 0.02 * t + 3 * np.sin(2 * np.pi * t / cycle + phase) + rng.standard_normal((n_series, n))
    return pd.DataFrame({"id": np.repeat([f"s{i}" for i in range(n_series)], n),
                         "time": np.tile(pd.date_range("2024-01-01", periods=n, freq="h"), n_series), "y": y.ravel()})


def statsforecast_cv(df, season, horizon, windows, refit):
    """statsforecast's own ``cross_validation`` of AutoETS and AutoTheta, in the backtest errors' order."""
    from statsforecast import StatsForecast
    from statsforecast.models import AutoETS, AutoTheta

    sf = StatsForecast(models=[AutoETS(season_length=season), AutoTheta(season_length=season)], freq="h")
    cv = sf.cross_validation(df=df.rename(columns={"id": "unique_id", "time": "ds"}), h=horizon, n_windows=windows,
                             step_size=horizon, refit=refit)
    return cv.sort_values(["unique_id", "cutoff", "ds"]).reset_index(drop=True)


@pytest.mark.parametrize(("refit", "fit"), [(None, "fitted once on the history before the first origin"),
                                            (2, "refit every 2 origins")], ids=["once", "every_2"])
def test_ets_and_theta_are_statsforecasts_cross_validation(refit, fit):
    """The baselines of every window equal statsforecast's ``cross_validation(refit=False)`` (or
    ``refit=2``) on the same panel, windows and season, and the skill table says how they were fitted."""
    pytest.importorskip("statsforecast", reason="the stats extra: pip install 'tsrec[stats]'")
    df, horizon, windows = seasonal_panel(n_series=2, n=144), 6, 5
    f = Forecaster("seasonal_naive", prediction_length=horizon, context_length=36).fit(
        df[df.time < df.time.max() - pd.Timedelta(hours=40)], **STATS_LONG)
    result = backtest(f, df, n_windows=windows, baselines_refit_every=refit, **STATS_LONG)
    skill = result.skill.set_index("baseline")
    assert (skill.loc[["ets", "theta"], "season"] == 12).all() and (skill.loc[["ets", "theta"], "fit"] == fit).all()
    assert (skill.loc[["naive", "seasonal_naive"], "fit"] == "each window's context").all()
    expected = statsforecast_cv(df, 12, horizon, windows, False if refit is None else refit)
    errors = result.errors.sort_values(["item_id", "origin", "step"]).reset_index(drop=True)
    assert (errors.timestamp.to_numpy() == expected.ds.to_numpy()).all()
    np.testing.assert_allclose(errors.y_ets, expected.AutoETS, rtol=1e-6)
    np.testing.assert_allclose(errors.y_theta, expected.AutoTheta, rtol=1e-6)
    # the steps each window's models were fitted on: the first origin's, or the last refit's
    first = len(df) // 2 - horizon * windows
    steps = first + horizon * (np.arange(windows) // (refit or windows) * (refit or windows))
    np.testing.assert_array_equal(errors.stats_fit_steps.to_numpy().reshape(2, windows, horizon)[:, :, 0],
                                  np.broadcast_to(steps, (2, windows)))


def test_ets_and_theta_are_fitted_once_per_series_and_channel_or_every_k_origins(monkeypatch):
    """The cost that matters: one statsforecast fit per series, channel and baseline (and one more
    every k windows of a series), never one per window."""
    statsforecast = pytest.importorskip("statsforecast.models", reason="the stats extra: pip install 'tsrec[stats]'")
    fits = []
    for name in ("AutoETS", "AutoTheta"):
        original = getattr(statsforecast, name).fit
        monkeypatch.setattr(getattr(statsforecast, name), "fit",
                            lambda self, y, X=None, _fit=original: fits.append(len(y)) or _fit(self, y, X))
    df = frame()  # wide: one item, 2 channels
    f = Forecaster("seasonal_naive", prediction_length=6, context_length=48).fit(df.iloc[:200])
    backtest(f, df, start=200, stride=6, baselines=("ets", "theta"))  # 16 windows
    assert sorted(fits) == [200] * 4  # 2 channels x 2 baselines, on all 200 steps before the first origin
    fits.clear()
    backtest(f, df, start=200, stride=6, baselines=("ets",), baselines_refit_every=5)
    assert sorted(fits) == sorted([200, 230, 260, 290] * 2)  # windows 0, 5, 10, 15 of each channel


def test_wide_channels_with_missing_values_are_statsforecasts_on_the_filled_history():
    """A wide frame's channels are series of their own; a missing value reads as the last observed
    one before it (statsforecast takes no NaN), and the windows start where ``start`` says."""
    pytest.importorskip("statsforecast", reason="the stats extra: pip install 'tsrec[stats]'")
    df = frame(n=204)
    gappy = df.copy()
    gappy.iloc[[100, 101, 170], 0] = np.nan
    f = Forecaster("seasonal_naive", prediction_length=6, context_length=48).fit(df.iloc[:156])
    result = backtest(f, gappy, start=156, stride=6, baselines=("ets", "theta"), baselines_refit_every=4)
    season = int(result.skill.season.iloc[0])  # the ets and theta models' season, resolved on the 156 steps
    assert season in (12, 24) and (result.skill.season == season).all()
    filled = gappy.ffill().reset_index(names="time").melt(id_vars="time", var_name="id", value_name="y")
    expected = statsforecast_cv(filled, season, 6, 8, 4)
    errors = result.errors.sort_values(["item_id", "origin", "step"]).reset_index(drop=True)
    np.testing.assert_allclose(errors.y_ets, expected.AutoETS, rtol=1e-6)
    np.testing.assert_allclose(errors.y_theta, expected.AutoTheta, rtol=1e-6)


def test_the_statistical_baselines_take_their_models_season_for_every_series():
    """A baseline is the registered model fitted on every series' history before its first origin: one
    season resolved over all of them (as ``Forecaster("ets")`` resolves it), and statsforecast decides
    what a series too short for two seasons gets, as it does for a user."""
    statsforecast = pytest.importorskip("statsforecast.models", reason="the stats extra: pip install 'tsrec[stats]'")
    df = seasonal_panel(n_series=2, cycle=12)
    f = Forecaster("seasonal_naive", prediction_length=4, context_length=12).fit(df, **STATS_LONG)
    short = df[(df.id == "s1") & (df.time >= df.time.min() + pd.Timedelta(hours=240 - 28))]  # its last 28 steps
    df = pd.concat([df[df.id == "s0"], short], ignore_index=True)
    result = backtest(f, df, n_windows=2, stride=4, baselines=("naive", "ets"), **STATS_LONG)  # s1: 20 steps before
    before = pd.concat([df[df.id == "s0"].iloc[:-8], short.iloc[:20]])
    season = Forecaster("ets", prediction_length=4, val_windows=0).fit(before, **STATS_LONG).resolved_settings.network
    assert season.season_length == 24  # the short series hides the 12-step cycle from the periodogram: the calendar's
    skill = result.skill.set_index("baseline")
    assert skill.loc["ets", "season"] == 24 and skill.loc["ets", "note"] == ""
    assert (result.errors.season_ets == 24).all() and (result.errors.season_naive == 1).all()
    errors = result.errors[(result.errors.item_id == "s1")].sort_values(["origin", "step"])
    y = short.y.to_numpy()
    model = statsforecast.AutoETS(season_length=24).fit(y[:20])
    expected = np.concatenate([model.forward(y=y[:o], h=4)["mean"] for o in (20, 24)])
    np.testing.assert_allclose(errors.y_ets, expected, rtol=1e-6)


def test_the_statistical_baselines_fit_a_series_shorter_than_the_horizon_on_what_it_holds():
    """A series with 9 steps before its first origin at horizon 12 (fewer than one window of context
    1 + horizon): the ets baseline fits it on those 9 steps, as statsforecast does, and the skill
    row has scores (one such series had emptied the whole row)."""
    statsforecast = pytest.importorskip("statsforecast.models", reason="the stats extra: pip install 'tsrec[stats]'")
    df = seasonal_panel(n_series=2, cycle=12)
    f = Forecaster("seasonal_naive", prediction_length=12, context_length=12).fit(df, **STATS_LONG)
    df = pd.concat([df[df.id == "s0"], df[df.id == "s1"].iloc[-21:]], ignore_index=True)
    result = backtest(f, df, n_windows=1, baselines=("naive", "ets"), **STATS_LONG)
    skill = result.skill.set_index("baseline")
    assert np.isfinite(skill.loc["ets", "mse_ratio"]) and skill.loc["ets", "note"] == ""
    y = df[df.id == "s1"].y.to_numpy()[:9]
    expected = statsforecast.AutoETS(season_length=int(skill.loc["ets", "season"])).forecast(y=y, h=12)["mean"]
    got = result.errors[result.errors.item_id == "s1"].sort_values("step").y_ets
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_a_fit_statsforecast_cannot_make_gives_the_last_value_and_a_warning():
    pytest.importorskip("statsforecast", reason="the stats extra: pip install 'tsrec[stats]'")
    df = frame(n=40)[["a"]]
    f = Forecaster("seasonal_naive", prediction_length=2, context_length=3, season_length=1).fit(df)
    with pytest.warns(UserWarning, match=r"backtest's ets baseline: AutoETS could not be fitted on 1 of 1 histories "
                                         r"\(the shortest of 3 steps .*\); they get their last value"):
        result = backtest(f, df, start=3, stride=2, n_windows=2, baselines=("ets",))
    first = result.errors[result.errors.origin == df.index[3]]
    np.testing.assert_allclose(first.y_ets, df.a.iloc[2])


def test_score_backtest_of_parts_gives_the_whole_skill_with_ets_and_theta():
    """The statistical baselines' season, fit and note come from the errors, so backtests of parts
    of the series scored together give the whole backtest's skill table."""
    pytest.importorskip("statsforecast", reason="the stats extra: pip install 'tsrec[stats]'")
    df = seasonal_panel(n_series=4, n=120)
    f = Forecaster("seasonal_naive", prediction_length=6, context_length=24).fit(df, **STATS_LONG)
    kwargs = dict(n_windows=4, baselines_refit_every=3, **STATS_LONG)  # all four baselines
    whole = backtest(f, df, **kwargs)
    parts = [backtest(f, df[df.id.isin(ids)], **kwargs).errors for ids in (["s1", "s3"], ["s0", "s2"])]
    scored = score_backtest(f, pd.concat(parts, ignore_index=True))
    pd.testing.assert_frame_equal(scored.skill, whole.skill, rtol=1e-9)
    assert list(whole.skill.fit) == ["each window's context"] * 2 + ["refit every 3 origins"] * 2


def test_ets_is_the_same_whether_or_not_the_forecaster_is_refit_in_blocks():
    """The baselines are fitted on their own schedule: refitting the forecaster every 2 windows (blocks
    of windows scored one after another, series with different window counts) leaves them as they are."""
    pytest.importorskip("statsforecast", reason="the stats extra: pip install 'tsrec[stats]'")
    df = seasonal_panel(n_series=3, n=120)
    df = df[~((df.id == "s1") & (df.time > df.time.max() - pd.Timedelta(hours=10)))]  # s1: 8 windows, others 10
    f = Forecaster("seasonal_naive", prediction_length=6, context_length=24).fit(df, **STATS_LONG)
    kwargs = dict(start=60, stride=6, baselines=("ets",), baselines_refit_every=3, **STATS_LONG)
    order, columns = ["item_id", "origin", "step"], ["item_id", "origin", "step", "y_ets", "stats_fit_steps"]
    once = backtest(f, df, **kwargs).errors.sort_values(order).reset_index(drop=True)
    blocks = backtest(f, df, refit_every=2, **kwargs).errors.sort_values(order).reset_index(drop=True)
    assert len(once) == 28 * 6
    pd.testing.assert_frame_equal(blocks[columns], once[columns])
    assert list(once.groupby("item_id").stats_fit_steps.nunique()) == [4, 3, 4]  # windows 0, 3, 6 (, 9)


def test_a_calibrated_models_backtest_scores_coverage_and_winkler_per_series_and_overall():
    df = frame(n=24 * 20)
    f = Forecaster("seasonal_naive", prediction_length=6, conformal_windows=40).fit(df.iloc[:24 * 14])
    result = backtest(f, df, start=24 * 14, stride=6, baselines=NAIVE)  # default levels: 80, 90, 95
    summary = result.summary.set_index(["metric", "units"]).value
    for level in ("80", "90", "95"):
        assert 0 <= summary[(f"interval_coverage_{level}", "fraction")] <= 1
        assert summary[(f"winkler_{level}", "original")] >= summary[(f"interval_width_{level}", "original")] > 0
    assert ("crps", "original") in summary.index  # next to the CRPS of the bands' quantiles
    per = result.intervals
    assert list(per.columns) == ["item_id", "level", "coverage", "width", "winkler", "winkler_scaled", "entries",
                                 "windows", "method"]
    assert set(per.item_id) == {"a", "b"} and set(per.level) == {80.0, 90.0, 95.0} and (per.method == "conformal").all()
    assert (per.windows == 24).all() and (per.entries == 24 * 6).all()
    # the overall coverage is the entries' mean: the series' coverages weighted by their entries
    at80 = per[per.level == 80]
    overall = np.average(at80.coverage, weights=at80.entries)
    assert summary[("interval_coverage_80", "fraction")] == pytest.approx(overall)
    # by hand: series a at 80%
    errors = result.errors[result.errors.item_id == "a"]
    inside = (errors["y_q0.1"] <= errors.y_true) & (errors.y_true <= errors["y_q0.9"])
    assert at80.set_index("item_id").coverage["a"] == pytest.approx(inside.mean())
    lo, hi, y = errors["y_q0.1"], errors["y_q0.9"], errors.y_true
    winkler = (hi - lo) + (2 / 0.2) * ((lo - y).clip(lower=0) + (y - hi).clip(lower=0))
    assert at80.set_index("item_id").winkler["a"] == pytest.approx(winkler.mean())
    assert score_backtest(f, result.errors).intervals.equals(result.intervals)  # scored again from the errors alone
    joined = pd.concat([result.errors.iloc[:10], result.errors.iloc[10:]])  # parts joined: no attrs to read
    joined.attrs.clear()
    assert (score_backtest(f, joined).intervals.method == "conformal").all()


def test_intervals_that_miss_warn_with_the_tolerance_and_a_quantile_networks_pairs_are_scored():
    """Calibrated on quiet data, scored where the noise is 10x: the 90% intervals cover far less,
    and the backtest warns naming the coverage and the tolerance."""
    from tsrec.evaluation import CoverageWarning, coverage_tolerance

    df = frame(n=24 * 20)
    loud = df.copy()
    loud.iloc[24 * 14:] += np.random.default_rng(1).normal(0, 1.0, size=(24 * 6, 2))
    f = Forecaster("seasonal_naive", prediction_length=6, conformal_windows=40).fit(df.iloc[:24 * 14])
    with pytest.warns(CoverageWarning, match=r"the 90% intervals \(conformal\) cover 16.0% of 288 scored values in "
                                             r"48 \(series, window\) pairs, more than 8.7% from 90% .*too narrow"):
        backtest(f, loud, start=24 * 14, stride=6, baselines=NAIVE, levels=[90])
    assert coverage_tolerance(90, 10_000) == 0.03 and coverage_tolerance(90, 16) == pytest.approx(0.15)
    q = Forecaster("dlinear", prediction_length=6, context_length=24, output="quantile",
                   quantile_levels=(0.1, 0.5, 0.9), **TRAIN).fit(df.iloc[:200])
    result = backtest(q, df, start=210, stride=6, baselines=NAIVE)
    assert set(result.intervals.level) == {80.0} and (result.intervals.method == "model").all()
    with pytest.raises(ValueError, match="levels are percentages"):
        backtest(f, df, start=24 * 14, baselines=NAIVE, levels=[0.9])


def test_a_baseline_whose_model_cannot_be_fitted_forecasts_nothing_and_says_why():
    """A series with no observed value before its first origin: the baseline models cannot be fitted
    on that history (fit_state refuses it), so the baseline forecasts nothing, with a warning naming
    the baseline and the reason; the model's own scores are unaffected."""
    df = long_frame()
    df.loc[(df.id == "s0") & (df.time < pd.Timestamp("2024-01-06 12:00")), "y"] = np.nan
    f = Forecaster("naive", prediction_length=4, context_length=8).fit(long_frame(), **LONG)
    with pytest.warns(UserWarning, match=r"backtest's naive baseline: could not be run: item 's0' \(column 'y'\) has "
                                         r"no observed value in the training part"):
        result = backtest(f, df, start="2024-01-06 12:00", stride=4, baselines=("naive",), **LONG)
    assert result.errors.y_naive.isna().all() and result.errors.y_pred.notna().any()
    skill = result.skill.set_index("baseline")
    assert np.isnan(skill.loc["naive", "season"]) and np.isnan(skill.loc["naive", "mse_ratio"])
    assert skill.loc["naive", "note"] == "no forecast: naive's model could not be fitted (backtest warned why)"


def test_a_calibrated_models_refits_are_calibrated_as_its_fit_was():
    """refit_every with a model calibrated at fit: each block's model is fitted and calibrated on the
    rows before the block's first origin, as ``Forecaster.fit`` on those rows fits and calibrates it."""
    df = frame(n=24 * 12)
    f = Forecaster("seasonal_naive", prediction_length=6, conformal_windows=10)
    result = backtest(f, df, start=24 * 10, stride=6, refit_every=4, baselines=("naive",), levels=[80])
    assert (result.intervals.method == "conformal").all()
    cut = 24 * 10 + 24  # the second block's first origin
    expected = Forecaster("seasonal_naive", prediction_length=6, conformal_windows=10).fit(df.iloc[:cut]).predict(
        levels=[80])
    got = result.errors[result.errors.origin == df.index[cut]].sort_values(["item_id", "step"])
    np.testing.assert_allclose(got["y_q0.1"], expected.sort_values(["item_id", "timestamp"])["0.1"], rtol=1e-6)
    np.testing.assert_allclose(got["y_q0.9"], expected.sort_values(["item_id", "timestamp"])["0.9"], rtol=1e-6)


def test_yearly_mase_is_scaled_by_the_last_value_as_the_field_scores_it():
    """Yearly data have no season: MASE's scale is the mean one-year change (M4's, GluonTS's
    ``get_seasonality('Y') == 1``), not a two-year one, though the models' season is at least 2."""
    rng = np.random.default_rng(3)
    years = pd.date_range("1950-01-01", periods=60, freq="YS")
    df = pd.DataFrame({"time": np.tile(years, 2), "id": np.repeat(["a", "b"], 60),
                       "y": np.concatenate([np.cumsum(rng.normal(1, 1, 60)), np.sin(np.arange(60)) * 5 + 20])})
    f = Forecaster("naive", prediction_length=3).fit(df.groupby("id").head(45), time_col="time", id_col="id",
                                                    target_col="y")
    result = backtest(f, df, start=45, stride=3, baselines=(), time_col="time", id_col="id", target_col="y")
    series = {item: part.set_index("time").y for item, part in df.groupby("id")}
    assert result.metric("mase", "scale-free") == pytest.approx(mase_per_series(result.errors, series, 1), rel=1e-9)
    assert result.metric("mase", "scale-free") != pytest.approx(mase_per_series(result.errors, series, 2), rel=1e-3)


def test_a_warning_several_baselines_give_is_said_once_naming_them():
    """Yearly data have no season: seasonal naive, ETS and Theta each resolve none, for one reason,
    said once for the three rather than three times."""
    pytest.importorskip("statsforecast", reason="the stats extra: pip install 'tsrec[stats]'")
    years = pd.date_range("1950-01-01", periods=60, freq="YS")
    df = pd.DataFrame({"y": np.cumsum(np.random.default_rng(5).normal(1, 1, 60))}, index=years)
    f = Forecaster("naive", prediction_length=3).fit(df.iloc[:45])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        backtest(f, df, start=45, stride=3, baselines=("naive", "seasonal_naive", "ets", "theta"))
    said = [str(w.message) for w in caught if "season_length is 1" in str(w.message)]
    assert len(said) == 1 and said[0].startswith("backtest's seasonal_naive, ets and theta baselines: season_length "
                                                 "is 1 (no season): ")


def test_a_baseline_exact_in_the_data_has_an_infinite_ratio_not_one_of_rounding():
    """A flat tail: the naive forecast is the data's own value, exact but for the float32 its scaled
    windows are stored at (an MSE of 1e-15); its skill ratios are inf, not 1e12."""
    rng = np.random.default_rng(0)
    y = np.concatenate([100 + np.cumsum(rng.normal(size=100)), np.full(30, 93.7)])
    df = pd.DataFrame({"y": y}, index=pd.date_range("2024-01-01", periods=130, freq="D"))
    f = Forecaster("drift", prediction_length=5).fit(df.iloc[:100])
    skill = backtest(f, df, start=105, stride=5, baselines=("naive",)).skill.set_index("baseline")
    assert 0 < skill.loc["naive", "baseline_mse"] < 1e-12 and skill.loc["naive", "model_mse"] > 1e-4
    assert np.isinf(skill.loc["naive", "mse_ratio"]) and np.isinf(skill.loc["naive", "mae_ratio"])
