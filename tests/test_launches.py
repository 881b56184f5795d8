"""tsrec.data.launches: a series that begins with zeros unlike the rest of it is named at fit."""

import warnings

import numpy as np
import pandas as pd
import pytest

from tsrec import Forecaster
from tsrec.data import canonicalize
from tsrec.data.launches import leading_zeros


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


def test_the_default_and_a_network_name_the_launches_a_statistical_model_does_not():
    rng = np.random.default_rng(1)
    frame = weekly({"old": rng.poisson(20, 150).astype(float), "new": np.r_[np.zeros(130), rng.poisson(20, 20)]})
    with pytest.warns(UserWarning, match=r"^1 series begin with a run of zeros more than twice as long as any later in "
                                         r"them \(item 'new' \(130 zeros\)\): if they had not started yet .* give "
                                         r"those steps as missing \(NaN\) or drop their rows"):
        Forecaster(prediction_length=8, candidates=("naive", "seasonal_naive")).fit(frame)
    with pytest.warns(UserWarning, match=r"item 'new' \(130 zeros\)"):
        Forecaster("dlinear", prediction_length=8, max_steps=2,
                   trainer_kwargs={"enable_progress_bar": False, "logger": False}).fit(frame)
    before_launch = (frame["unique_id"] == "new") & (frame.groupby("unique_id").cumcount() < 130)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Forecaster("naive", prediction_length=8).fit(frame)
        Forecaster(prediction_length=8, candidates=("naive", "seasonal_naive")).fit(
            frame.assign(y=frame["y"].mask(before_launch)))  # the zeros given as missing
