"""Dominant cycle lengths of the training data (REM dilations and initial thetas come from them)."""

from pathlib import Path

import numpy as np
import pytest

from tsrec.config import DataFacts, RSAConfig
from tsrec.data.periods import dominant_periods
from tsrec.datasets.synthetic import recurrent_series

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"


def found(frame):
    values = frame.to_numpy(dtype=float)
    return dominant_periods([values], [np.isfinite(values)])


def test_cycles_are_found_strongest_first_without_their_harmonics():
    t = np.arange(24 * 7 * 20)
    rng = np.random.default_rng(0)
    y = 2 * np.sin(2 * np.pi * t / 24) + 0.8 * np.sin(2 * np.pi * t / 168) + 0.5 * np.sin(4 * np.pi * t / 24) \
        + 0.3 * rng.standard_normal(t.size)
    periods = dominant_periods([y[:, None]], [np.ones((t.size, 1), bool)])
    assert periods == pytest.approx((24.0, 168.0), rel=0.01)  # 12 is a harmonic of 24: left out


@pytest.mark.parametrize("make", [
    lambda rng: rng.standard_normal((3000, 2)),  # white noise
    lambda rng: np.cumsum(rng.standard_normal((3000, 1)), axis=0),  # a random walk
    lambda rng: np.c_[np.arange(3000.0)],  # a trend
], ids=["white noise", "random walk", "trend"])
def test_no_cycle_is_invented(make):
    values = make(np.random.default_rng(1))
    assert dominant_periods([values], [np.ones(values.shape, bool)]) == ()


def test_red_noise_does_not_hide_a_weak_cycle_nor_make_one_up():
    with_cycle = recurrent_series(730, freq="D", cycle=7, ar=0.9, innovation=1.0, seed=0)
    assert found(with_cycle) == pytest.approx((7.0,), abs=0.05)
    without = recurrent_series(730, freq="D", cycle=None, ar=0.9, innovation=1.0, seed=0)
    assert found(without) == ()


def test_gaps_and_several_items_are_handled():
    rng = np.random.default_rng(2)
    t = np.arange(2000)
    items = [np.sin(2 * np.pi * (t[:n] + rng.integers(12)) / 12)[:, None] + 0.2 * rng.standard_normal((n, 1))
             for n in (2000, 1500)]
    masks = [np.ones(x.shape, bool) for x in items]
    masks[0][100:400] = False
    items[0][100:400] = np.nan
    assert dominant_periods(items, masks) == pytest.approx((12.0,), abs=0.05)
    assert dominant_periods([np.zeros((10, 1))], [np.ones((10, 1), bool)]) == ()  # too short


def test_rsa_settings_follow_the_cycles_found():
    hourly = DataFacts(season=24, sub_daily=True, n_channels=1, periods=(24.0, 168.0))
    rsa = RSAConfig().resolved(8, hourly)
    assert (rsa.dilation, rsa.periods, rsa.dilated_periods) == (24, (24.0, 168.0, 12.0), (7.0,))
    twelve = RSAConfig().resolved(8, DataFacts(season=24, periods=(12.0,)))
    assert (twelve.dilation, twelve.periods, twelve.dilated_periods) == (12, (12.0, 6.0), (7.0, 3.5))
    calendar = RSAConfig().resolved(8, DataFacts(season=24))  # no cycle found: the calendar season
    assert (calendar.dilation, calendar.periods, calendar.dilated_periods) == (24, (24.0, 12.0), (7.0, 3.5))


@pytest.mark.skipif(not (DATA / "ETTh1.csv").exists(), reason="benchmark CSVs not found in ../shared/datasets")
def test_the_daily_cycle_of_every_benchmark_file():
    from tsrec import datasets

    expected = {"ETTh1": 24, "ETTh2": 24, "ETTm1": 96, "ETTm2": 96, "WTH": 24, "weather": 144}
    for name, period in expected.items():
        frame = datasets.load(name, DATA)
        train = frame.iloc[: {"ETTh1": 8640, "ETTh2": 8640, "ETTm1": 34560, "ETTm2": 34560}.get(
            name, int(len(frame) * 0.7))]
        assert found(train)[0] == pytest.approx(period, rel=0.002), name


def test_the_paper_preset_stays_the_hand_picked_calendar_setting():
    """The paper's REM settings (for the Table 1 reproduction, and the ablation against the cycles
    found in the data) are set by hand, so the detection never changes them."""
    from tsrec.models.presets import paper_rsa_settings

    assert paper_rsa_settings("ETTh1", 48) == RSAConfig(kinds=(0, 2, 2, 2, 1, 1), dilation=24, periods=(24.0, 12.0),
                                                        dilated_periods=(7.0, 3.5))
    assert paper_rsa_settings("ETTm1", 48).resolved(8, DataFacts(season=96, periods=(50.0,))).dilation == 96


def test_paper_options_give_the_paper_rem_settings_to_the_paper_models_only():
    """The paper's REM heads are counted for its 8-head encoder-decoders; RSA in another backbone
    (SRU++, StarSaber, PatchTST) under the paper's protocol keeps the settings found in the data."""
    from tsrec.models.presets import PAPER_RSA_MODELS, paper_options, paper_rsa_settings

    for model in PAPER_RSA_MODELS:
        assert paper_options("ETTh1", 24, model)["rsa"] == paper_rsa_settings("ETTh1", 24)
    for model in ("rsa_srupp", "rsa_starsaber", "rsa_patchtst", "informer"):
        options = paper_options("ETTh1", 24, model)
        assert "rsa" not in options and options["context_length"] == 48
