"""Sample efficiency, the RSA paper's central claim, plus the synthetic generator it runs on.

The claim: with a small training set, RSA-Transformer reaches a clearly lower validation MSE than
the same Transformer without RSA under the same budget. Protocol and settings:
``benchmarks/sample_efficiency.py`` (``Setup``); the curve over training-set sizes:
``benchmarks/results/sample_efficiency.md``.
"""

from __future__ import annotations

import statistics

import numpy as np
import pandas as pd
import pytest
import torch

from benchmarks import sample_efficiency as se
from tsrec.datasets.synthetic import (
    ar_roots_inside_unit_circle,
    ar_variance,
    oracle_mse,
    recurrent_series,
)


# ----------------------------------------------------------------------------------------------
# The generator
# ----------------------------------------------------------------------------------------------

def test_recurrent_series_is_a_seeded_wide_frame_on_a_regular_index():
    df = recurrent_series(100, freq="15min", n_series=3, seed=7, start="2021-03-01")
    assert df.shape == (100, 3) and list(df.columns) == ["series_0", "series_1", "series_2"]
    assert isinstance(df.index, pd.DatetimeIndex) and df.index.freqstr == "15min"
    assert df.index[0] == pd.Timestamp("2021-03-01") and df.index.name == "date"
    assert np.isfinite(df.to_numpy()).all()
    pd.testing.assert_frame_equal(df, recurrent_series(100, freq="15min", n_series=3, seed=7, start="2021-03-01"))
    assert not df.equals(recurrent_series(100, freq="15min", n_series=3, seed=8, start="2021-03-01"))
    assert not np.allclose(df["series_0"], df["series_1"])  # independent draws per column
    longer = recurrent_series(150, freq="15min", n_series=3, seed=7, start="2021-03-01")
    pd.testing.assert_frame_equal(longer.iloc[:100], df, check_freq=False)  # a longer draw extends it
    named = recurrent_series(5, n_series=2, columns=["a", "b"])
    assert list(named.columns) == ["a", "b"]


def test_recurrent_series_components():
    t = np.arange(48)
    cycle_only = recurrent_series(48, ar=(), noise=0.0, cycle=(24, 12), amplitude=(2.0, 0.5), trend=0.1)
    expected = 2.0 * np.sin(2 * np.pi * t / 24) + 0.5 * np.sin(2 * np.pi * t / 12) + 0.1 * t
    np.testing.assert_allclose(cycle_only.to_numpy()[:, 0], expected, atol=1e-12)
    # The recurrence starts in its stationary regime: variance matches theory from the first rows.
    ar1 = recurrent_series(40, n_series=4000, ar=0.95, innovation=0.5, cycle=None, noise=0.0, seed=1).to_numpy()
    np.testing.assert_allclose(ar1[0].var(), ar_variance(0.95, 0.5), rtol=0.1)
    np.testing.assert_allclose(ar1[-1].var(), ar_variance(0.95, 0.5), rtol=0.1)
    lag1 = np.mean(ar1[1:] * ar1[:-1]) / np.mean(ar1**2)
    assert abs(lag1 - 0.95) < 0.01
    ar2 = recurrent_series(20_000, ar=(1.2, -0.5), cycle=None, noise=0.0, seed=2).to_numpy()[:, 0]
    np.testing.assert_allclose(ar2.var(), ar_variance((1.2, -0.5)), rtol=0.1)


def test_recurrent_series_rejects_bad_arguments():
    assert ar_roots_inside_unit_circle(0.9) and ar_roots_inside_unit_circle((1.2, -0.5))
    assert not ar_roots_inside_unit_circle(1.0) and not ar_roots_inside_unit_circle((0.5, 0.6))
    with pytest.raises(ValueError, match="stationary"):
        recurrent_series(10, ar=1.01)
    with pytest.raises(ValueError, match="n_steps"):
        recurrent_series(0)
    with pytest.raises(ValueError, match="amplitude"):
        recurrent_series(10, cycle=(24, 12), amplitude=(1.0, 2.0, 3.0))
    with pytest.raises(ValueError, match="noise"):
        recurrent_series(10, noise=-1.0)
    with pytest.raises(ValueError, match="columns"):
        recurrent_series(10, n_series=2, columns=["a"])


def test_oracle_mse():
    # Without observation noise the state is known: lead-h error is innovation^2 * sum_{j<h} ar^(2j).
    phi, sigma = 0.9, 0.5
    closed = sigma**2 * np.cumsum(phi ** (2 * np.arange(6)))
    np.testing.assert_allclose(oracle_mse(6, ar=phi, innovation=sigma, noise=0.0), closed, rtol=1e-9)
    # With noise it is a floor that a least-squares linear predictor on a long past nearly reaches.
    x = recurrent_series(20_000, ar=phi, innovation=1.0, cycle=None, noise=0.5, seed=3).to_numpy()[:, 0]
    past = np.lib.stride_tricks.sliding_window_view(x[:-1], 40)
    target = x[40:]
    w, *_ = np.linalg.lstsq(past, target, rcond=None)
    floor = oracle_mse(1, ar=phi, innovation=1.0, noise=0.5)[0]
    assert 0.96 * floor < np.mean((past @ w - target) ** 2) < 1.05 * floor
    np.testing.assert_allclose(oracle_mse(3, ar=(), noise=0.2), [0.04] * 3)


# ----------------------------------------------------------------------------------------------
# The harness
# ----------------------------------------------------------------------------------------------

def test_harness_keeps_train_and_validation_apart_and_shares_the_batch_order():
    setup = se.Setup()
    train, val = se.make_data(setup, 16, seed=0)
    assert train.past.shape == (16, setup.context, 1) and train.future.shape == (16, setup.horizon, 1)
    assert val.past.shape == (setup.n_val, setup.context, 1) and train.past_time.shape[-1] == 0
    # the same series: window k+1 of training starts train_stride steps after window k
    series = recurrent_series(5000, ar=setup.ar, innovation=setup.innovation, cycle=setup.cycle,
                              amplitude=setup.amplitude, noise=setup.noise, seed=10_000).to_numpy()[:, 0]
    first = series[: setup.context] / setup.scale
    np.testing.assert_allclose(train.past[0, :, 0].numpy(), first, rtol=1e-5, atol=1e-6)
    # validation windows start after the last training target
    train_end = setup.context + setup.horizon + 15 * setup.train_stride
    first_val = series[train_end:train_end + setup.context] / setup.scale
    np.testing.assert_allclose(val.past[0, :, 0].numpy(), first_val, rtol=1e-5, atol=1e-6)
    # batches: a permutation per epoch, identical for a given seed (so for both models)
    order = se.batch_order(40, setup, seed=1)
    assert len(order) == setup.steps and all(len(b) == setup.batch_size for b in order)
    assert sorted(torch.cat(order[:2]).tolist()) == sorted(set(torch.cat(order[:2]).tolist()))
    assert all(torch.equal(a, b) for a, b in zip(order, se.batch_order(40, setup, seed=1)))


# ----------------------------------------------------------------------------------------------
# The claim
# ----------------------------------------------------------------------------------------------

N_TRAIN = 32
SEEDS = (0, 1, 2)


@pytest.mark.slow  # six trainings of 150 steps
@pytest.mark.timeout(300)
def test_rsa_is_more_sample_efficient_than_transformer(one_thread):
    """32 training windows, 150 Adam steps, the same data, batches, budget and seed for both models.

    Setup (``se.Setup()``): hourly ``x = AR(1, 0.98, innovation 0.15) + sin(2 pi t / 24) + 0.1 noise``,
    z-scored with population statistics (oracle MSE 0.132), no calendar features; context 48,
    label 24, horizon 12; disjoint training windows (stride 61, so every hour of the day starts
    some window), 256 validation windows after the training history; d_model 16, 4 heads,
    1 encoder + 1 decoder layer, d_ff 32, dropout 0, batch 16, AdamW lr 1e-3 without decay.
    RSA: kinds (2, 1, 1, 0, 0, 0), theta from the 24-step cycle, gates started at 0.5, REM scalars
    and gates at lr 3e-2 in their own group.

    Measured (this machine, torch 2.13 CPU, 1 thread), validation MSE at 32 windows:

    ====  ===========  =====  =============  ==============
    seed  Transformer  RSA    RSA / Transf.  seasonal naive
    ====  ===========  =====  =============  ==============
    0     0.582        0.314  0.54           0.555
    1     0.375        0.266  0.71           0.305
    2     0.721        0.401  0.56           0.465
    ====  ===========  =====  =============  ==============

    Over seeds 0..9 the ratio RSA / Transformer was 0.54, 0.71, 0.56, 0.63, 0.53, 0.51, 0.51, 0.54,
    0.54, 0.80 (mean 0.59, std 0.10, worst 0.80): RSA won on all 10, and beat seasonal naive on all
    10 (mean 0.305 against 0.431; the Transformer: 0.533). The thresholds (every seed under 0.90,
    the mean of the 3 seeds under 0.75, i.e. ~3 standard errors above the 10-seed mean) test the
    effect, not the luck of three seeds. With 16 windows the ratio is similar (10 seeds: mean 0.58,
    worst 0.78) but RSA is only at seasonal-naive level; see benchmarks/results/sample_efficiency.md.
    """
    setup = se.Setup()
    rows = []
    for seed in SEEDS:
        data = se.make_data(setup, N_TRAIN, seed)
        naive = se.seasonal_naive_mse(setup, data[1])
        plain = se.train_and_evaluate("transformer", setup, N_TRAIN, seed, data=data)
        rsa = se.train_and_evaluate("rsa_transformer", setup, N_TRAIN, seed, data=data)
        rows.append((seed, plain, rsa, naive))
    report = "\n".join(f"seed {s}: transformer {p:.3f}  rsa {r:.3f}  ratio {r / p:.3f}  naive {n:.3f}"
                       for s, p, r, n in rows)
    ratios = [r / p for _, p, r, _ in rows]
    assert all(ratio < 0.90 for ratio in ratios), report
    assert statistics.fmean(ratios) < 0.75, report
    assert statistics.fmean(r for _, _, r, _ in rows) < statistics.fmean(n for *_, n in rows), report
