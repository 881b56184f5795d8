"""Metrics against hand-computed values, masks, per-step reduction, MASE scaling, shape errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tsrec.metrics import mae, mase, mse, per_step, quantile_loss, rmse, smape

Y = np.array([1.0, 2.0, 3.0, 4.0])
P = np.array([2.0, 2.0, 1.0, 8.0])  # errors (y - p): -1, 0, 2, -4


def test_hand_computed_values() -> None:
    assert mse(Y, P) == pytest.approx((1 + 0 + 4 + 16) / 4)
    assert mae(Y, P) == pytest.approx((1 + 0 + 2 + 4) / 4)
    assert rmse(Y, P) == pytest.approx(math.sqrt(21 / 4))
    # 2|e| / (|y| + |p|): 2/3, 0, 4/4, 8/12
    assert smape(Y, P) == pytest.approx((2 / 3 + 0 + 1 + 2 / 3) / 4)
    assert isinstance(mse(Y, P), float)


def test_smape_zero_over_zero_is_perfect() -> None:
    assert smape([0.0, 1.0], [0.0, 1.0]) == 0.0
    assert smape([0.0], [1.0]) == pytest.approx(2.0)


def test_quantile_loss_pinball() -> None:
    # q = 0.9; terms max(q e, (q - 1) e) for e = -1, 0, 2, -4: 0.1, 0, 1.8, 0.4
    assert quantile_loss(Y, P, 0.9) == pytest.approx((0.1 + 0 + 1.8 + 0.4) / 4)
    assert quantile_loss(Y, P, 0.5) == pytest.approx(mae(Y, P) / 2)
    with pytest.raises(ValueError, match="quantile level"):
        quantile_loss(Y, P, 1.0)


def test_mask_excludes_entries_and_hides_nan() -> None:
    y = np.array([1.0, np.nan, 3.0, 4.0])
    mask = np.array([True, False, True, False])
    # observed errors: -1 and 2
    assert mse(y, P, mask=mask) == pytest.approx(2.5)
    assert mae(y, P, mask=mask.astype(int)) == pytest.approx(1.5)
    assert math.isnan(mse(y, P))  # unmasked NaN propagates
    assert math.isnan(mse(Y, P, mask=np.zeros(4, bool)))  # nothing observed


def test_axis_and_per_step() -> None:
    rng = np.random.default_rng(0)
    y = rng.normal(size=(5, 3, 2))  # [N, H, D]
    p = rng.normal(size=(5, 3, 2))
    steps = per_step(mse, y, p)
    assert steps.shape == (3,)
    np.testing.assert_allclose(steps, ((y - p) ** 2).mean(axis=(0, 2)))
    np.testing.assert_allclose(mae(y, p, axis=0), np.abs(y - p).mean(axis=0))
    np.testing.assert_allclose(rmse(y, p, axis=(0, 2)), np.sqrt(steps))
    # mask broadcast over the variable axis: drop window 0 entirely
    mask = np.ones((5, 1, 1), bool)
    mask[0] = False
    np.testing.assert_allclose(per_step(mae, y, p, mask=mask), np.abs(y - p)[1:].mean(axis=(0, 2)))
    # a step with nothing observed is NaN
    step_mask = np.ones((1, 3, 1), bool)
    step_mask[0, 1, 0] = False
    out = per_step(mse, y, p, mask=step_mask)
    assert math.isnan(out[1]) and np.isfinite(out[[0, 2]]).all()


def test_mase_seasonal_period() -> None:
    train = np.array([1.0, 2.0, 4.0, 1.0, 3.0, 6.0])
    # m = 3: |1-1|, |3-2|, |6-4| -> scale 1.0; m = 1: 1, 2, 3, 2, 3 -> scale 2.2
    y, p = np.array([2.0, 5.0]), np.array([4.0, 4.0])  # |e| = 2, 1
    assert mase(y, p, train, m=3) == pytest.approx(1.5 / 1.0)
    assert mase(y, p, train) == pytest.approx(1.5 / 2.2)
    with pytest.raises(ValueError, match="seasonal period m must be an integer >= 1"):
        mase(y, p, train, m=0)
    with pytest.raises(ValueError, match="more than m=6"):
        mase(y, p, train, m=6)


def test_mase_multivariate_scales_per_variable() -> None:
    train = np.stack([np.arange(10.0), 3.0 * np.arange(10.0)], axis=1)  # [T, D]: scales 1, 3
    y = np.zeros((4, 2, 2))  # [N, H, D]
    p = np.ones((4, 2, 2))
    np.testing.assert_allclose(mase(y, p, train, axis=(0, 1)), [1.0, 1 / 3])
    assert mase(y, p, train) == pytest.approx((1.0 + 1 / 3) / 2)
    train_nan = train.copy()
    train_nan[0, 0] = np.nan  # skipped in the scale
    assert np.asarray(mase(y, p, train_nan, axis=(0, 1)))[0] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="does not broadcast"):
        mase(y, p, np.ones((10, 3)))


def test_shape_errors() -> None:
    with pytest.raises(ValueError, match=r"same shape, got \(4,\) and \(3,\)"):
        mse(Y, P[:3])
    with pytest.raises(ValueError, match="mask of shape"):
        mae(Y, P, mask=np.ones(3, bool))
    with pytest.raises(ValueError, match="step_axis"):
        per_step(mse, Y, P, step_axis=2)
