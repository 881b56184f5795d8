"""tsrec.data.launches: a series that begins with zeros unlike the rest of it (a product not launched
yet) is read as missing at fit and at every forecast after it (``leading_zeros="missing"``), or kept
and named (``"keep"``)."""

import warnings

import numpy as np
import pandas as pd
import pytest

from tsrec import Forecaster
from tsrec.data import canonicalize
from tsrec.data.launches import leading_zeros, zeros_before_fit
from tsrec.evaluation import backtest


def weekly(values: dict[str, np.ndarray]) -> pd.DataFrame:
    """A long weekly frame of the series ``values``."""
    return pd.concat([pd.DataFrame({"unique_id": name, "ds": pd.date_range("2020-01-06", periods=len(y), freq="W-MON"),
                                    "y": y}) for name, y in values.items()], ignore_index=True)


def test_a_launch_given_as_zeros_is_told_apart_from_intermittent_demand_and_from_a_short_run():
    rng = np.random.default_rng(0)
    sales = rng.poisson(20, 120).astype(float)
    sparse = rng.poisson(0.4, 120).astype(float)
    sparse[:6] = 0.0  # an intermittent series: its first run of zeros is like its later ones
    frame = weekly({"launched": np.r_[np.zeros(80), sales[:40]], "sold": sales, "sparse": sparse,
                    "short_run": np.r_[np.zeros(5), sales[:115]], "missing_then_zeros": np.r_[np.full(10, np.nan),
                                                                                         np.zeros(70), sales[:40]],
                    "never_sold": np.zeros(120)})
    panel = canonicalize(frame, time_col="ds", id_col="unique_id", target_col="y")
    runs = dict(zip((item.item_id for item in panel.items), leading_zeros(panel, 8)[:, 0].tolist()))
    assert runs == {"launched": 80, "missing_then_zeros": 70, "never_sold": 0, "short_run": 0, "sold": 0, "sparse": 0}


QUIET = {"enable_progress_bar": False, "logger": False}


def launch_frames(seed: int = 1, launch: int = 130, n: int = 150) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Two weekly series, ``new`` launched at week ``launch``: with zeros before it, and with NaN."""
    rng = np.random.default_rng(seed)
    new = np.r_[np.zeros(launch), rng.poisson(20, n - launch)]
    zeros = weekly({"old": rng.poisson(20, n).astype(float), "new": new})
    before_launch = (zeros["unique_id"] == "new") & (zeros.groupby("unique_id").cumcount() < launch)
    return zeros, zeros.assign(y=zeros["y"].mask(before_launch))


@pytest.mark.parametrize("model, options", [("auto", {"candidates": ("naive", "seasonal_naive", "ets")}),
                                            ("ets", {"conformal_windows": 8}),
                                            ("dlinear", {"max_steps": 3, "trainer_kwargs": QUIET})])
def test_a_launch_given_as_zeros_is_forecast_as_one_given_as_missing(model, options):
    """By default the zeros before a launch are missing for every model: the fit, its calibration
    and every forecast, from the fitted history or from a frame that holds the zeros again (of which
    a network reads its last context steps alone), equal those of the frame with NaN there."""
    zeros, nan = launch_frames(launch=140)  # a network's context (16 steps) holds 6 of the zeros
    with pytest.warns(UserWarning, match=r"^1 series begin with a run of zeros more than twice as long as any later in "
                                         r"them \(item 'new' \(140 zeros\)\): read as missing, as a product not "
                                         r"launched yet \(leading_zeros='missing'\); leading_zeros='keep' keeps them"):
        given_zeros = Forecaster(model, prediction_length=8, seed=0, **options).fit(zeros)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        given_nan = Forecaster(model, prediction_length=8, seed=0, **options).fit(nan)
    assert not [w for w in caught if "run of zeros" in str(w.message)]
    new = given_zeros.panel.items[0]  # the first series in id order (a network keeps its last steps alone)
    assert new.item_id == "new" and not (new.observed & (new.values == 0)).any()
    levels = None if model == "dlinear" else [80]
    for frame_zeros, frame_nan in ((None, None), (zeros, nan)):
        a = given_zeros.predict(frame_zeros, levels=levels)
        b = given_nan.predict(frame_nan, levels=levels)
        pd.testing.assert_frame_equal(a, b)


def test_kept_leading_zeros_are_data_and_named_for_the_default_and_the_networks():
    zeros, _ = launch_frames()
    keep = {"prediction_length": 8, "leading_zeros": "keep"}
    with pytest.warns(UserWarning, match=r"item 'new' \(130 zeros\)\): if they had not started yet .* "
                                         r"leading_zeros='missing' reads them as missing"):
        kept = Forecaster(candidates=("naive", "seasonal_naive"), **keep).fit(zeros)
    assert kept.panel.items[0].observed.all()
    with pytest.warns(UserWarning, match=r"item 'new' \(130 zeros\)"):
        Forecaster("dlinear", max_steps=2, trainer_kwargs=QUIET, **keep).fit(zeros)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Forecaster("naive", **keep).fit(zeros)  # a statistical model kept them without a word, as before
    with pytest.raises(ValueError, match=r"leading_zeros must be one of \('missing', 'keep'\)"):
        Forecaster(prediction_length=8, leading_zeros="drop")


def test_only_the_zeros_before_a_series_fitted_start_are_read_as_missing():
    """A forecast reads as missing the zeros before each series' first observed step at fit, per
    channel, and no other: a series observed from its first fitted step keeps its zeros, however
    its frame begins (an off season of zeros at the start of a context)."""
    zeros, nan = launch_frames()
    fitted = canonicalize(nan, time_col="ds", id_col="unique_id", target_col="y")
    given = canonicalize(zeros.assign(y=zeros["y"].where(zeros["unique_id"] == "new", 0.0)),
                         time_col="ds", id_col="unique_id", target_col="y")  # 'old' all zeros now
    read = zeros_before_fit(given, fitted, np.arange(2))
    assert not read.items[0].observed[:130].any() and read.items[0].observed[130:].all()
    assert read.items[1].observed.all()  # 'old' was observed from its first step at fit
    assert zeros_before_fit(fitted, fitted, np.arange(2)) is fitted


@pytest.mark.parametrize("model, options", [("auto", {"candidates": ("naive", "seasonal_naive", "ridge")}),
                                            ("dlinear", {"max_steps": 3, "trainer_kwargs": QUIET})])
def test_a_series_new_at_predict_launched_as_zeros_is_forecast_as_one_given_as_missing(model, options):
    """A series that fit never saw is read as fit would read it: its zeros before a launch are
    missing, for its scaler and its forecast, at predict and in a backtest; leading_zeros='keep'
    keeps them (the default's ridge and seasonal naive read them then)."""
    zeros, nan = launch_frames(launch=110)
    old = zeros[zeros["unique_id"] == "old"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        fitted = Forecaster(model, prediction_length=8, seed=0, **options).fit(old)
        kept = Forecaster(model, prediction_length=8, seed=0, leading_zeros="keep", **options).fit(old)
        levels = [80] if model == "auto" else None
        a, b = fitted.predict(zeros, levels=levels), fitted.predict(nan, levels=levels)
        pd.testing.assert_frame_equal(a, b)
        if model == "auto":  # dlinear's context (16 steps) holds no zero here: only its scaler read them
            assert not np.allclose(kept.predict(zeros)["mean"], kept.predict(nan)["mean"])
        windows = {"n_windows": 2, "baselines": ()}
        pd.testing.assert_frame_equal(backtest(fitted, zeros, **windows).errors,
                                      backtest(fitted, nan, **windows).errors)


@pytest.mark.parametrize("refit_every", [None, 1])
def test_a_backtest_reads_a_launch_given_as_zeros_as_one_given_as_missing(refit_every):
    """A backtest reads its frame as fit reads one: the windows of a network that keeps its last
    context steps alone (the launch lies before them) are forecast and scored as with NaN before the
    launch, refitted or not."""
    zeros, nan = launch_frames(launch=120)  # 30 weeks of sales; 3 windows of 8, the first context reaching back
    options = {"prediction_length": 8, "seed": 0, "max_steps": 3, "trainer_kwargs": QUIET}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        given_zeros = Forecaster("dlinear", **options).fit(zeros)
        given_nan = Forecaster("dlinear", **options).fit(nan)
        a = backtest(given_zeros, zeros, n_windows=3, refit_every=refit_every, baselines=())
        b = backtest(given_nan, nan, n_windows=3, refit_every=refit_every, baselines=())
    pd.testing.assert_frame_equal(a.errors, b.errors)


def test_a_wide_frames_column_launched_inside_the_validation_windows_as_zeros_names_both_fixes():
    """A wide frame's columns share auto's validation windows: a column whose zeros before a recent
    launch are read as missing has no history before them, and the error says so, with the long
    frame and leading_zeros='keep' as fixes (the latter fits)."""
    zeros, _ = launch_frames(launch=140)
    wide = zeros.pivot(index="ds", columns="unique_id", values="y")
    with pytest.raises(ValueError, match=r"column 'new' is first observed at 2022-09-12 00:00:00 \(its 140 zeros "
                                         r"before, read as missing as a product not launched yet: leading_zeros='keep' "
                                         r"fits them as data\), after auto's validation windows begin .*Fit a long frame"):
        Forecaster(prediction_length=8, candidates=("naive", "seasonal_naive")).fit(wide)
    kept = Forecaster(prediction_length=8, candidates=("naive", "seasonal_naive"), leading_zeros="keep").fit(wide)
    assert kept.predict()["mean"].notna().all()


def test_a_series_too_short_once_its_zeros_before_a_launch_are_missing_names_leading_zeros():
    """auto needs 2 H + 1 steps from a series' first observed value: where only the zeros read as
    missing made it too short, the error says so and how to keep them (which fits)."""
    zeros, _ = launch_frames(launch=130)  # 20 weeks of sales
    one = zeros[zeros["unique_id"] == "new"]
    with pytest.raises(ValueError, match=r"the longest, item 'new', has 20 \(its 130 zeros before, read as missing "
                                         r"as a product not launched yet: leading_zeros='keep' fits them as data\)\)"):
        Forecaster(prediction_length=12, candidates=("naive", "seasonal_naive")).fit(one)
    kept = Forecaster(prediction_length=12, candidates=("naive", "seasonal_naive"), leading_zeros="keep").fit(one)
    assert kept.predict()["mean"].notna().all()
