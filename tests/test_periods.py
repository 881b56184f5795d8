"""Dominant cycle lengths of the training data (REM dilations and initial thetas come from them)."""

import numpy as np
import pytest

from tsrec.config import DataFacts, RSAConfig
from tsrec.data import periods as periods_module
from tsrec.data.periods import MAX_SEGMENT, dominant_periods
from tsrec.datasets.synthetic import recurrent_series
from tests.shared_data import SHARED_DATASETS

DATA = SHARED_DATASETS


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


@pytest.mark.parametrize("length", [3000, 150_000], ids=["short", "long: averaged segments"])
@pytest.mark.parametrize("make", [
    lambda rng, n: rng.standard_normal((n, 2)),  # white noise
    lambda rng, n: np.cumsum(rng.standard_normal((n, 1)), axis=0),  # a random walk
    lambda rng, n: np.c_[np.arange(float(n))],  # a trend
], ids=["white noise", "random walk", "trend"])
def test_no_cycle_is_invented(make, length):
    values = make(np.random.default_rng(1), length)
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


def cycles_series(n_steps, cycles, noise, missing, seed=3):
    """One item ``[n_steps, 1]`` of sines (amplitudes 1, 0.6, 0.4, random phases), Gaussian noise and a
    slight trend, with ``missing`` of its steps unobserved in blocks of 50 (1e9 there, which a mask
    that is not honoured would turn into the strongest feature)."""
    rng = np.random.default_rng(seed)
    t = np.arange(n_steps)
    y = sum(amplitude * np.sin(2 * np.pi * t / cycle + rng.uniform(0, 2 * np.pi))
            for cycle, amplitude in zip(cycles, (1.0, 0.6, 0.4)))
    y = y + noise * rng.standard_normal(n_steps) + 1e-3 * t
    mask = np.ones(n_steps, bool)
    for start in rng.integers(0, n_steps - 50, int(missing * n_steps / 50)):
        mask[start:start + 50] = False
    return [np.where(mask, y, 1e9)[:, None]], [mask[:, None]]


#: (steps, cycles, noise, fraction missing) and the periods that the previous implementation (one
#: periodogram of the whole series, the noise floor's median taken at every peak) returned for them.
KNOWN_CYCLES = [
    ((4800, (24,), 0.3, 0.0), (24.0,)),
    ((2000, (7,), 0.3, 0.2), (7.0,)),
    ((6000, (12,), 3.0, 0.0), (12.0,)),
    ((8000, (24, 168), 1.0, 0.2), (24.0, 168.09)),
    ((12000, (96,), 1.0, 0.2), (95.99,)),
    ((20000, (144,), 3.0, 0.0), (143.97,)),
    ((5000, (17.5,), 1.0, 0.0), (17.5,)),
    ((6000, (60, 11), 0.3, 0.2), (60.0, 11.0)),
    ((30000, (24, 168, 1000), 1.0, 0.1), (24.0, 168.0, 997.36)),
]


@pytest.mark.parametrize("case, before", KNOWN_CYCLES, ids=[str(case) for case, _ in KNOWN_CYCLES])
def test_the_same_periods_as_the_full_periodogram_found(case, before):
    assert dominant_periods(*cycles_series(*case)) == pytest.approx(before, abs=0.01)


@pytest.mark.parametrize("case, before", [c for c in KNOWN_CYCLES if c[0][0] > 4096],
                         ids=[str(case) for case, _ in KNOWN_CYCLES if case[0] > 4096])
def test_averaging_over_segments_finds_the_same_cycles(case, before):
    """Series longer than ``max_segment`` are averaged over segments (Welch): the same periods, to
    the coarser refinement of a shorter transform."""
    assert dominant_periods(*cycles_series(*case), max_segment=4096) == pytest.approx(before, rel=0.005)


def test_segments_honour_the_gaps():
    """A gap longer than two segments (1e9 where unobserved) and scattered gaps: the segments are
    detrended over their observed steps only, and those without enough of them left out."""
    values, masks = cycles_series(50_000, (24,), 1.0, 0.1)
    masks[0][20_000:30_000] = False
    values[0][20_000:30_000] = 1e9
    assert dominant_periods(values, masks, max_segment=4096) == pytest.approx((24.0,), abs=0.05)


def test_a_million_steps_with_a_daily_cycle():
    rng = np.random.default_rng(4)
    t = np.arange(1_000_000)
    y = np.sin(2 * np.pi * t / 24) + rng.standard_normal(t.size)
    assert dominant_periods([y[:, None]], [np.ones((t.size, 1), bool)]) == pytest.approx((24.0,), abs=0.05)


def test_the_work_grows_linearly_with_the_length(monkeypatch):
    """Not timed: counts the samples transformed and the medians taken for the noise floor. The FFT
    size stays ``MAX_SEGMENT``, the segments (half-overlapping) grow with the length, and the floor's
    medians depend on the FFT size only."""
    transforms, medians = [], []
    rfft, background = np.fft.rfft, periods_module._background

    def counting_rfft(a, n=None, axis=-1, **kwargs):
        transforms.append((np.shape(a), n))
        return rfft(a, n=n, axis=axis, **kwargs)

    def counting_background(power, k):
        medians.append(2 * max(3, int(0.3 * k)))  # bins the median reads
        return background(power, k)

    monkeypatch.setattr(np.fft, "rfft", counting_rfft)
    monkeypatch.setattr(periods_module, "_background", counting_background)
    work = {}
    for n_steps in (200_000, 1_000_000):
        transforms.clear()
        medians.clear()
        values = np.random.default_rng(5).standard_normal((n_steps, 1))
        assert dominant_periods([values], [np.ones(values.shape, bool)]) == ()
        assert {n for _, n in transforms} == {MAX_SEGMENT}
        segments = sum(shape[0] for shape, _ in transforms)
        assert segments == 1 + -(-(n_steps - MAX_SEGMENT) // (MAX_SEGMENT // 2))  # about 2 n / MAX_SEGMENT
        assert sum(medians) <= 100 * (MAX_SEGMENT // 2 + 1)  # O(bins), not O(bins^2)
        work[n_steps] = (segments, len(medians))
    assert work[1_000_000][1] == work[200_000][1]


def test_the_interpolated_noise_floor_is_the_median_around_each_bin():
    """Exact on the grid; between its points (1/64 octave apart) the median around a bin moves by a
    few of its order statistics at most."""
    power = np.random.default_rng(6).exponential(size=20_001) / (1 + np.arange(20_001.0))  # a red spectrum
    bins = np.arange(4, 20_000, 3)
    exact = np.array([periods_module._background(power, int(k)) for k in bins])
    error = np.abs(periods_module._noise_floor(power, bins) / exact - 1)
    assert np.quantile(error, 0.99) < 0.02 and error.max() < 0.15
    assert (error[bins < 90] == 0).all()  # every bin is on the grid there


def test_segments_cover_the_series_with_half_overlap():
    starts = periods_module._segment_starts(100_000, 4096)
    assert starts[0] == 0 and starts[-1] == 100_000 - 4096
    assert np.diff(starts).max() <= 4096 // 2
    assert periods_module._segment_starts(3000, 4096).tolist() == [0]


def test_segments_are_detrended_over_their_observed_steps():
    t = np.arange(64.0)
    windows = np.stack([3 + 0.5 * t, -2 - t, t])  # [3, 64] lines
    seen = np.ones(windows.shape, bool)
    seen[0, 10:40] = False
    windows[0, 10:40] = 1e9  # unobserved: must not pull the line
    seen[2, 5:] = False  # 5 observed steps: too few, left out
    residual, valid = periods_module._line_residuals(windows, seen)
    assert valid.tolist() == [True, True, False]
    assert residual.shape == (3, 64)
    assert np.abs(residual).max() < 1e-9


def test_rsa_settings_follow_the_cycles_found():
    hourly = DataFacts(season=24, sub_daily=True, n_channels=1, periods=(24.0, 168.0))
    rsa = RSAConfig().resolved(8, hourly)
    assert (rsa.dilation, rsa.periods, rsa.dilated_periods) == (24, (24.0, 168.0, 12.0), (7.0,))
    twelve = RSAConfig().resolved(8, DataFacts(season=24, periods=(12.0,)))
    assert (twelve.dilation, twelve.periods, twelve.dilated_periods) == (12, (12.0, 6.0), (7.0, 3.5))
    calendar = RSAConfig().resolved(8, DataFacts(season=24))  # no cycle found: the calendar season
    assert (calendar.dilation, calendar.periods, calendar.dilated_periods) == (24, (24.0, 12.0), (7.0, 3.5))


@pytest.mark.shared_datasets("ETTh1.csv", "ETTh2.csv", "ETTm1.csv", "ETTm2.csv", "WTH.csv", "weather.csv")
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
