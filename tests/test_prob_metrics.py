"""Probabilistic metrics: GluonTS's Evaluator on the same forecasts, hand-computed cases, masks, errors."""

from __future__ import annotations

import math
import warnings
from statistics import NormalDist

import numpy as np
import pandas as pd
import pytest

from tsrec.metrics import (
    coverage,
    crps_from_quantiles,
    crps_from_samples,
    interval_coverage,
    mean_weighted_quantile_loss,
    per_step,
    quantile_loss,
    weighted_quantile_loss,
    winkler_score,
)

LEVELS = (0.1, 0.25, 0.5, 0.75, 0.9)
N, HISTORY, H = 4, 12, 6  # series, past steps, forecast steps
START = pd.Period("2021-03-01 00:00", freq="h")


@pytest.fixture(scope="module")
def panel() -> tuple[np.ndarray, np.ndarray]:
    """``history`` ``[N, HISTORY]`` and ``future`` ``[N, H]`` targets; NaN gaps in the future."""
    rng = np.random.default_rng(7)
    series = rng.gamma(2.0, 3.0, size=(N, HISTORY + H))
    series[1, HISTORY + 2] = np.nan
    series[2, HISTORY:] = np.nan  # a series with no observed future value
    series[3, [HISTORY, HISTORY + 5]] = np.nan
    return series[:, :HISTORY], series[:, HISTORY:]


def run_evaluator(history: np.ndarray, future: np.ndarray, forecasts: list) -> tuple[dict, pd.DataFrame]:
    from gluonts.evaluation import Evaluator

    target = np.concatenate([history, future], axis=1)
    index = pd.period_range(START, periods=target.shape[1], freq="h")
    series = [pd.Series(row, index=index) for row in target]
    with warnings.catch_warnings():  # the all-NaN future of series 2 gives masked-to-NaN warnings
        warnings.simplefilter("ignore", UserWarning)
        return Evaluator(quantiles=LEVELS, num_workers=0)(series, forecasts, num_series=len(series))


def close(actual: float | np.ndarray, expected: float | np.ndarray | pd.Series) -> None:
    np.testing.assert_allclose(actual, expected, rtol=1e-9, atol=1e-9)


def assert_matches_evaluator(future: np.ndarray, preds: np.ndarray, agg: dict, per_item: pd.DataFrame) -> None:
    """``preds`` ``[N, H, Q]``: the quantile forecasts the Evaluator saw, level ``LEVELS[j]`` in column ``j``."""
    observed = ~np.isnan(future)  # the Evaluator masks invalid target values
    counts = observed.sum(axis=1)  # [N]
    compared = ["mean_wQuantileLoss", "mean_absolute_QuantileLoss", *(f"Coverage[{q}]" for q in LEVELS)]
    assert np.isfinite([agg[key] for key in compared]).all()  # NaN == NaN would pass vacuously
    assert per_item["abs_target_sum"].isna().tolist() == [False, False, True, False]
    close(mean_weighted_quantile_loss(future, preds, LEVELS, mask=observed), agg["mean_wQuantileLoss"])
    close(crps_from_quantiles(future, preds, LEVELS, mask=observed) * counts.sum(), agg["mean_absolute_QuantileLoss"])
    for j, q in enumerate(LEVELS):
        pred = preds[..., j]
        close(weighted_quantile_loss(future, pred, q, mask=observed), agg[f"wQuantileLoss[{q}]"])
        close(2 * quantile_loss(future, pred, q, mask=observed) * counts.sum(), agg[f"QuantileLoss[{q}]"])
        per_series = coverage(future, pred, mask=observed, axis=1)  # [N], NaN for the empty series
        close(np.nanmean(per_series), agg[f"Coverage[{q}]"])
        close(per_series, per_item[f"Coverage[{q}]"])
        per_series_loss = per_item[f"QuantileLoss[{q}]"]
        close(
            weighted_quantile_loss(future, pred, q, mask=observed, axis=1), per_series_loss / per_item["abs_target_sum"]
        )
        close(2 * quantile_loss(future, pred, q, mask=observed, axis=1) * counts, per_series_loss.where(counts > 0))


def test_quantile_forecasts_match_gluonts_evaluator(panel) -> None:
    from gluonts.model.forecast import QuantileForecast

    history, future = panel
    rng = np.random.default_rng(1)
    # non-crossing quantiles around a noisy median: [N, H, Q]
    center = np.nan_to_num(future, nan=5.0) + rng.normal(0.0, 2.0, size=future.shape)
    offsets = np.sort(rng.gamma(1.0, 1.5, size=(N, H, len(LEVELS))), axis=-1)
    preds = center[..., None] + offsets - offsets[..., [2]]
    forecasts = [
        QuantileForecast(preds[i].T, START + HISTORY, [str(q) for q in LEVELS], item_id=str(i)) for i in range(N)
    ]
    agg, per_item = run_evaluator(history, future, forecasts)
    assert_matches_evaluator(future, preds, agg, per_item)


def test_sample_forecasts_match_gluonts_evaluator(panel) -> None:
    from gluonts.model.forecast import SampleForecast

    history, future = panel
    rng = np.random.default_rng(2)
    samples = 6.0 + rng.gamma(2.0, 3.0, size=(N, 50, H))  # [N, S, H]
    forecasts = [SampleForecast(samples[i], START + HISTORY, item_id=str(i)) for i in range(N)]
    agg, per_item = run_evaluator(history, future, forecasts)
    # SampleForecast.quantile(q) is the order statistic sorted[round((S - 1) q)]: numpy's "nearest"
    preds = np.moveaxis(np.quantile(samples, LEVELS, axis=1, method="nearest"), 0, -1)  # [N, H, Q]
    assert_matches_evaluator(future, preds, agg, per_item)


def test_hand_computed_quantile_metrics() -> None:
    y = np.array([1.0, 2.0, 3.0, 4.0])
    p = np.array([2.0, 2.0, 1.0, 8.0])  # q = 0.9 pinball terms: 0.1, 0, 1.8, 0.4
    assert weighted_quantile_loss(y, p, 0.9) == pytest.approx(2 * 2.3 / 10)
    assert coverage(y, p) == pytest.approx(0.75)  # y <= p except at index 2; equality counts
    assert interval_coverage(y, [0.0, 2.0, 3.5, 4.0], [1.0, 3.0, 4.0, 5.0]) == pytest.approx(0.75)
    # 80%: widths 1, 1, 0.5, 1; y = 3 misses [3.5, 4] by 0.5 -> + (2 / 0.2) * 0.5
    each = winkler_score(y, [0.0, 2.0, 3.5, 4.0], [1.0, 3.0, 4.0, 5.0], 80, axis=())
    np.testing.assert_allclose(each, [1.0, 1.0, 0.5 + 5.0, 1.0])
    assert winkler_score(y, [0.0, 2.0, 3.5, 4.0], [1.0, 3.0, 4.0, 5.0], 80) == pytest.approx(8.5 / 4)
    assert winkler_score(y, [0.0, 2.0, 3.5, 4.0], [1.0, 3.0, 4.0, 5.0], 80, mask=[1, 1, 0, 1]) == pytest.approx(1.0)
    # y = 1 with the 0.25 / 0.75 quantiles at 0 and 2: pinball 0.25 each -> 2 * mean = 0.5
    assert crps_from_quantiles([1.0], [[0.0, 2.0]], [0.25, 0.75]) == pytest.approx(0.5)
    assert crps_from_quantiles([1.0], [[2.0, 0.0]], [0.75, 0.25]) == pytest.approx(0.5)  # column order free
    assert mean_weighted_quantile_loss([2.0], [[0.0, 2.0]], [0.25, 0.75]) == pytest.approx((2 * 0.5 / 2) / 2)


def test_mean_weighted_quantile_loss_is_crps_over_mean_abs_target() -> None:
    rng = np.random.default_rng(3)
    y = rng.normal(size=(5, 7))
    preds = np.sort(rng.normal(size=(5, 7, 3)), axis=-1)
    crps = crps_from_quantiles(y, preds, [0.2, 0.5, 0.8], axis=1)
    np.testing.assert_allclose(
        mean_weighted_quantile_loss(y, preds, [0.2, 0.5, 0.8], axis=1), crps / np.abs(y).mean(axis=1)
    )
    wql = [weighted_quantile_loss(y, preds[..., j], q) for j, q in enumerate([0.2, 0.5, 0.8])]
    assert mean_weighted_quantile_loss(y, preds, [0.2, 0.5, 0.8]) == pytest.approx(np.mean(wql))


def test_crps_from_samples_hand_computed() -> None:
    # samples {0, 2}, y = 1: E|X - y| = 1, E|X - X'| = 1 (empirical) or 2 (fair)
    assert crps_from_samples([1.0], [[0.0, 2.0]]) == pytest.approx(0.5)
    assert crps_from_samples([1.0], [[0.0, 2.0]], fair=True) == pytest.approx(0.0)
    assert crps_from_samples([3.0], [[2.0, 0.0]]) == pytest.approx(2.0 - 0.5)
    assert crps_from_samples([1.0, 5.0], [[4.0], [2.0]]) == pytest.approx(3.0)  # one sample: the MAE


def test_crps_from_samples_brute_force_and_sample_axis() -> None:
    rng = np.random.default_rng(4)
    y = rng.normal(size=(3, 4))
    samples = rng.normal(size=(9, 3, 4))  # [S, N, H]
    accuracy = np.abs(samples - y).mean(axis=0)
    pairs = np.abs(samples[:, None] - samples[None, :]).sum(axis=(0, 1))  # [N, H]
    for fair, denominator in ((False, 81), (True, 72)):
        expected = accuracy - 0.5 * pairs / denominator
        got = crps_from_samples(y, samples, sample_axis=0, fair=fair, axis=0)
        np.testing.assert_allclose(got, expected.mean(axis=0))
    last = crps_from_samples(y, np.moveaxis(samples, 0, -1))
    assert last == pytest.approx(crps_from_samples(y, samples, sample_axis=0))


def test_crps_from_samples_gaussian_closed_form() -> None:
    """Samples on the N(0, 1) quantile grid: the CRPS converges to y (2 Phi(y) - 1) + 2 phi(y) - 1/sqrt(pi)."""
    normal = NormalDist()
    s = 2000
    grid = np.array([normal.inv_cdf((k + 0.5) / s) for k in range(s)])
    for y in (-1.5, 0.0, 0.3, 2.0):
        exact = y * (2 * normal.cdf(y) - 1) + 2 * normal.pdf(y) - 1 / math.sqrt(math.pi)
        assert crps_from_samples([y], grid[None, :]) == pytest.approx(exact, abs=1e-3)


def test_dense_quantiles_approach_sample_crps() -> None:
    """The empirical CRPS of the samples is the limit of the quantile approximation on their quantiles."""
    rng = np.random.default_rng(5)
    y = rng.normal(size=6)
    samples = rng.normal(size=(6, 15))
    levels = (np.arange(4000) + 0.5) / 4000
    quantiles = np.moveaxis(np.quantile(samples, levels, axis=1, method="inverted_cdf"), 0, -1)  # [6, K]
    assert crps_from_quantiles(y, quantiles, levels) == pytest.approx(crps_from_samples(y, samples), abs=1e-4)


def test_masks_hide_nan_and_empty_reductions_are_nan() -> None:
    y = np.array([[1.0, np.nan, 3.0], [2.0, 2.0, 2.0]])
    preds = np.stack([y - 1, np.nan_to_num(y, nan=0.0) + 1], axis=-1)  # [2, 3, 2], levels 0.1 / 0.9
    samples = np.stack([y - 1, y + 1], axis=-1)  # NaN samples where y is NaN
    mask = ~np.isnan(y)
    for metric, args in (
        (crps_from_quantiles, (preds, [0.1, 0.9])),
        (mean_weighted_quantile_loss, (preds, [0.1, 0.9])),
        (crps_from_samples, (samples,)),
        (coverage, (preds[..., 1],)),
        (weighted_quantile_loss, (preds[..., 0], 0.1)),
        (interval_coverage, (preds[..., 0], preds[..., 1])),
    ):
        assert math.isnan(metric(y, *args)), metric.__name__  # unmasked NaN propagates
        assert np.isfinite(metric(y, *args, mask=mask)), metric.__name__
        per_row = metric(y, *args, mask=np.array([[False], [True]]), axis=1)
        assert math.isnan(per_row[0]) and np.isfinite(per_row[1]), metric.__name__
    assert crps_from_samples(y, samples, mask=mask) == pytest.approx(0.5)  # samples y -/+ 1: 1 - 1/2
    assert coverage(y, preds[..., 1], mask=mask) == 1.0
    np.testing.assert_allclose(per_step(crps_from_quantiles, y, preds, [0.1, 0.9], mask=mask), [0.2, 0.2, 0.2])


def test_zero_target_gives_inf_weighted_loss() -> None:
    assert weighted_quantile_loss([0.0, 0.0], [1.0, -1.0], 0.5) == math.inf


@pytest.mark.parametrize("levels", [[0.0, 0.5], [0.5, 1.0], [0.5, float("nan")], [0.3, 0.3], [], [[0.1, 0.9]]])
def test_bad_levels(levels) -> None:
    with pytest.raises(ValueError, match="levels"):
        crps_from_quantiles(np.zeros(3), np.zeros((3, max(np.size(levels), 1))), levels)


def test_errors_name_the_fix() -> None:
    y = np.zeros((4, 5))
    with pytest.raises(ValueError, match=r"y_true.shape \+ \(Q,\) = \(4, 5, 3\).*np.moveaxis"):
        mean_weighted_quantile_loss(y, np.zeros((3, 4, 5)), [0.1, 0.5, 0.9])
    with pytest.raises(ValueError, match="quantile level q must lie in"):
        weighted_quantile_loss(y, y, 1.5)
    with pytest.raises(ValueError, match="sample_axis=3 is out of range"):
        crps_from_samples(y, np.zeros((4, 5, 8)), sample_axis=3)
    with pytest.raises(ValueError, match="plus the sample axis"):
        crps_from_samples(y, np.zeros((8, 4, 5)))  # samples first without sample_axis=0
    with pytest.raises(ValueError, match="at least 2 samples with fair=True"):
        crps_from_samples(y, np.zeros((4, 5, 1)), fair=True)
    with pytest.raises(ValueError, match="at least one sample"):
        crps_from_samples(y, np.zeros((4, 5, 0)))
    lower = np.zeros((4, 5))
    lower[1, 2] = 1.0
    with pytest.raises(ValueError, match=r"lower > upper in 1 observed entries, e.g. at index \(1, 2\)"):
        interval_coverage(y, lower, np.zeros((4, 5)))
    mask = np.ones((4, 5), bool)
    mask[1, 2] = False
    assert interval_coverage(y, lower, np.zeros((4, 5)), mask=mask) == 1.0  # masked entries are not checked
    with pytest.raises(ValueError, match="does not broadcast"):
        coverage(y, y, mask=np.ones(3, bool))
