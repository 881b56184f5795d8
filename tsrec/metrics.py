"""Point, quantile and probabilistic forecast metrics on numpy arrays.

Every metric takes ``y_true`` and ``y_pred`` of the same shape (for example ``[N, H, D]``:
windows, horizon steps, variables), an optional observed ``mask`` (broadcastable to that shape;
``True``/1 = observed, only observed entries count) and an optional ``axis``:

* ``axis=None`` (default): one ``float`` over all observed entries;
* ``axis=(0, 2)`` on ``[N, H, D]``: a ``[H]`` array, the metric per horizon step
  (:func:`per_step` is a shortcut); any int or tuple of ints reduces those axes only.

A reduction over no observed entry gives NaN. NaNs in unmasked entries propagate: mask them out.

Probabilistic forecasts add one axis to ``y_true``'s shape, always the **last**:

* quantile forecasts ``quantile_preds`` ``[*shape, Q]`` with quantile levels ``levels`` ``[Q]``, each
  in ``(0, 1)`` and distinct (columns in any order);
* sample paths ``samples`` ``[*shape, S]`` (``sample_axis`` moves another axis there, e.g.
  ``sample_axis=0`` for GluonTS's ``SampleForecast.samples`` ``[S, H]``).

The single-level metrics (:func:`quantile_loss`, :func:`weighted_quantile_loss`, :func:`coverage`)
take one quantile forecast of ``y_true``'s shape. ``mask`` and ``axis`` always refer to ``y_true``'s
axes. The GluonTS ``Evaluator`` entries these reproduce are named in each docstring.

Units: the metrics do not know whether the arrays are z-scored or in the data's own units. The
benchmark protocols report MSE/MAE on the *scaled* data (train-only standard scaling); the caller
labels every reported number "scaled" or "original".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from tsrec._checks import check_int

__all__ = [
    "coverage",
    "crps_from_quantiles",
    "crps_from_samples",
    "interval_coverage",
    "mae",
    "mase",
    "mean_weighted_quantile_loss",
    "mse",
    "per_step",
    "quantile_loss",
    "rmse",
    "seasonal_scale",
    "smape",
    "weighted_quantile_loss",
    "winkler_score",
]

Axis = int | tuple[int, ...] | None
FloatArray = NDArray[np.float64]


def _prepare(
    y_true: ArrayLike, y_pred: ArrayLike, mask: ArrayLike | None
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Validate shapes; return float arrays and a 0/1 weight array of ``y_true``'s shape."""
    t = np.asarray(y_true, dtype=np.float64)
    p = np.asarray(y_pred, dtype=np.float64)
    if t.shape != p.shape:
        raise ValueError(f"y_true and y_pred must have the same shape, got {t.shape} and {p.shape}")
    return t, p, _weights(mask, t.shape)


def _weights(mask: ArrayLike | None, shape: tuple[int, ...]) -> FloatArray:
    """The 0/1 weight array of ``shape`` for an observed ``mask`` (None: all observed)."""
    if mask is None:
        return np.ones(shape, dtype=np.float64)
    m = np.asarray(mask)
    try:
        w = np.broadcast_to(m, shape)
    except ValueError:
        raise ValueError(f"mask of shape {m.shape} does not broadcast to the data shape {shape}") from None
    return w.astype(bool).astype(np.float64)


def _masked_mean(values: FloatArray, weights: FloatArray, axis: Axis) -> float | FloatArray:
    """Mean of ``values`` over the entries with weight 1 (NaN where there are none)."""
    values = np.where(weights > 0, values, 0.0)  # masked-out NaNs must not leak into the sum
    with np.errstate(invalid="ignore", divide="ignore"):
        total = np.sum(values, axis=axis)
        count = np.sum(weights, axis=axis)
        result = np.where(count > 0, total / np.where(count > 0, count, 1.0), np.nan)
    return float(result) if np.ndim(result) == 0 else np.asarray(result, dtype=np.float64)


def _masked_ratio(
    numerator: FloatArray, denominator: FloatArray, weights: FloatArray, axis: Axis
) -> float | FloatArray:
    """``sum(numerator) / sum(denominator)`` over the entries with weight 1 (NaN where there are none).

    A zero denominator sum over observed entries gives ``inf`` (``NaN`` if the numerator sum is 0 too).
    """
    observed = weights > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        total = np.sum(np.where(observed, numerator, 0.0), axis=axis)
        scale = np.sum(np.where(observed, denominator, 0.0), axis=axis)
        result = np.where(np.sum(weights, axis=axis) > 0, total / scale, np.nan)
    return float(result) if np.ndim(result) == 0 else np.asarray(result, dtype=np.float64)


def _check_level(q: float) -> float:
    """``q`` as a float, or ``ValueError`` unless it lies in ``(0, 1)``."""
    if not 0.0 < float(q) < 1.0:
        raise ValueError(f"the quantile level q must lie in (0, 1), got {q!r}")
    return float(q)


def _pinball(y: FloatArray, y_hat: FloatArray, q: float | FloatArray) -> FloatArray:
    """Elementwise pinball loss ``max(q (y - y_hat), (q - 1) (y - y_hat))`` (broadcasting)."""
    diff = y - y_hat
    return np.maximum(q * diff, (q - 1.0) * diff)


def mse(
    y_true: ArrayLike, y_pred: ArrayLike, *, mask: ArrayLike | None = None, axis: Axis = None
) -> float | FloatArray:
    """Mean squared error ``mean((y - y_hat)^2)``."""
    t, p, w = _prepare(y_true, y_pred, mask)
    return _masked_mean((t - p) ** 2, w, axis)


def mae(
    y_true: ArrayLike, y_pred: ArrayLike, *, mask: ArrayLike | None = None, axis: Axis = None
) -> float | FloatArray:
    """Mean absolute error ``mean(|y - y_hat|)``."""
    t, p, w = _prepare(y_true, y_pred, mask)
    return _masked_mean(np.abs(t - p), w, axis)


def rmse(
    y_true: ArrayLike, y_pred: ArrayLike, *, mask: ArrayLike | None = None, axis: Axis = None
) -> float | FloatArray:
    """Root mean squared error ``sqrt(mse)`` (the root of the mean over the reduced axes)."""
    value = mse(y_true, y_pred, mask=mask, axis=axis)
    return float(np.sqrt(value)) if isinstance(value, float) else np.sqrt(value)


def smape(
    y_true: ArrayLike, y_pred: ArrayLike, *, mask: ArrayLike | None = None, axis: Axis = None
) -> float | FloatArray:
    """Symmetric MAPE ``mean(2 |y - y_hat| / (|y| + |y_hat|))``, a fraction in ``[0, 2]``.

    Terms with ``y = y_hat = 0`` count as 0 (a perfect forecast). Multiply by 100 for the
    percentage convention of the M4 competition.
    """
    t, p, w = _prepare(y_true, y_pred, mask)
    num = 2.0 * np.abs(t - p)
    den = np.abs(t) + np.abs(p)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)
    return _masked_mean(ratio, w, axis)


def mase(
    y_true: ArrayLike,
    y_pred: ArrayLike,
    y_train: ArrayLike,
    *,
    m: int = 1,
    mask: ArrayLike | None = None,
    axis: Axis = None,
) -> float | FloatArray:
    """Mean absolute scaled error: absolute errors divided by the in-sample seasonal-naive MAE.

    Args:
        y_true, y_pred: forecasts and truth, same shape ``[..., *V]``.
        y_train: the training series, time on axis 0: shape ``[T]`` or ``[T, *V]`` where ``V``
            are the trailing (variable) dimensions of ``y_true``. The scale is
            ``mean_t |y_train[t] - y_train[t - m]|`` per variable (NaNs in ``y_train`` skipped).
        m: seasonal period in steps (1: naive; 24 for a daily cycle in hourly data).
        mask, axis: see the module docstring.

    A variable whose training series has a zero seasonal-naive MAE (constant at lag ``m``)
    gives ``inf`` (or NaN for zero error).

    Raises:
        TypeError: ``m`` not an integer. ValueError: ``m`` below 1, ``y_train`` not longer than ``m``, or its
            trailing shape does not broadcast against ``y_true``.
    """
    m = check_int("the seasonal period m", m)
    t, p, w = _prepare(y_true, y_pred, mask)
    train = np.asarray(y_train, dtype=np.float64)
    if train.ndim == 0 or train.shape[0] <= m:
        raise ValueError(f"y_train needs more than m={m} steps on axis 0, got shape {train.shape}")
    scale = seasonal_scale(train, m)  # [*V]
    try:
        fits = np.broadcast_shapes(np.shape(scale), t.shape) == t.shape
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(
            f"y_train of shape {train.shape} gives a scale of shape {np.shape(scale)} that does "
            f"not broadcast against y_true of shape {t.shape} (time must be axis 0 of y_train)"
        )
    with np.errstate(invalid="ignore", divide="ignore"):
        scaled = np.abs(t - p) / scale
    return _masked_mean(np.asarray(scaled, dtype=np.float64), w, axis)


#: Steps of series laid end to end that :func:`seasonal_scale` differences at a time (its temporaries
#: stay a few tens of MB however many series there are).
SCALE_STEPS = 2**21


def seasonal_scale(y: ArrayLike, m: int, *, lengths: ArrayLike | None = None,
                   ends: ArrayLike | None = None) -> FloatArray:
    """MASE's scale: the mean ``|y[t] - y[t - m]|`` over the steps ``t`` where both values are
    known (NaN is missing), per variable: the in-sample MAE of the seasonal naive forecast of
    season ``m`` (``m = 1``: the naive one). The one definition :func:`mase`, the backtest's
    ``seasonal_error`` (:func:`tsrec.evaluation.backtest`) and conformal calibration's scale
    (:func:`tsrec.conformal.series_scale`) use.

    y: ``[T, *V]``, time on axis 0: one series -> ``[*V]``; or, with ``lengths`` ``[I]``, ``I``
       series laid end to end (``T = sum(lengths)``) -> ``[I, *V]``, each series differenced
       within itself only, a block of series at a time.
    ends: ``[I]`` only the steps ``t < ends[i]`` of series ``i`` count (e.g. those before its first
       forecast origin); default all.

    NaN where there is no such pair (a series of no more than ``m`` steps, or every pair missing).
    """
    m = check_int("the seasonal period m", m)
    values = np.asarray(y, dtype=np.float64)
    single = lengths is None
    counts = np.array([len(values)] if single else lengths, dtype=np.int64)  # [I]
    limit = counts if ends is None else np.minimum(np.asarray(ends, dtype=np.int64), counts)  # [I]
    if counts.sum() != len(values):
        raise ValueError(f"lengths add up to {int(counts.sum())} steps but y has {len(values)} on axis 0")
    starts = np.r_[0, np.cumsum(counts)[:-1]]  # [I]
    out = np.full((len(counts), *values.shape[1:]), np.nan)
    width = int(np.prod(values.shape[1:], dtype=np.int64))
    first = 0
    while first < len(counts):  # blocks of whole series, about SCALE_STEPS steps each
        last = first + max(1, int(np.searchsorted(np.cumsum(counts[first:]), SCALE_STEPS, side="right")))
        rows = slice(starts[first], starts[first] + counts[first:last].sum())
        block = values[rows].reshape(-1, width)  # [R, W]
        item = np.repeat(np.arange(last - first), counts[first:last])  # [R] the series of each step
        step = np.arange(len(item)) - (starts[first:last] - starts[first])[item]  # [R] its step in its series
        later = np.flatnonzero((step >= m) & (step < limit[first:last][item]))  # [K] steps t with t - m in the series
        diffs = np.abs(block[later] - block[later - m])  # [K, W]
        known = ~np.isnan(diffs)
        cell = (item[later, None] * width + np.arange(width)).ravel()  # [K * W] the (series, variable) of each
        size = (last - first) * width
        total = np.bincount(cell, np.where(known, diffs, 0.0).ravel(), minlength=size)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[first:last] = (total / np.bincount(cell, known.ravel(), minlength=size)).reshape(
                last - first, *values.shape[1:])
        first = last
    return out[0] if single else out


def quantile_loss(
    y_true: ArrayLike,
    y_pred: ArrayLike,
    q: float,
    *,
    mask: ArrayLike | None = None,
    axis: Axis = None,
) -> float | FloatArray:
    """Mean pinball loss of the ``q``-quantile forecast ``y_pred``.

    ``mean(max(q (y - y_hat), (q - 1) (y - y_hat)))``; at ``q = 0.5`` this is half the MAE.
    (GluonTS's ``quantile_loss`` is twice the *sum* of these terms.)

    Raises:
        ValueError: ``q`` outside ``(0, 1)``.
    """
    level = _check_level(q)
    t, p, w = _prepare(y_true, y_pred, mask)
    return _masked_mean(_pinball(t, p, level), w, axis)


def weighted_quantile_loss(
    y_true: ArrayLike,
    y_pred_q: ArrayLike,
    q: float,
    *,
    mask: ArrayLike | None = None,
    axis: Axis = None,
) -> float | FloatArray:
    """Weighted quantile loss of the ``q``-quantile forecast ``y_pred_q``: GluonTS's ``wQuantileLoss[q]``.

    ``2 sum(max(q (y - y_hat), (q - 1) (y - y_hat))) / sum(|y|)``, both sums over the observed
    entries of the reduced axes. ``axis=None`` gives the ``Evaluator``'s aggregate (sums pooled over
    all series); ``axis=-1`` on ``[N, T]`` gives one value per series. A zero ``sum(|y|)`` gives
    ``inf`` (NaN for a zero loss).

    Raises:
        ValueError: ``q`` outside ``(0, 1)``, or shapes that differ.
    """
    level = _check_level(q)
    t, p, w = _prepare(y_true, y_pred_q, mask)
    return _masked_ratio(2.0 * _pinball(t, p, level), np.abs(t), w, axis)


def mean_weighted_quantile_loss(
    y_true: ArrayLike,
    quantile_preds: ArrayLike,
    levels: ArrayLike,
    *,
    mask: ArrayLike | None = None,
    axis: Axis = None,
) -> float | FloatArray:
    """Mean over the levels of :func:`weighted_quantile_loss`: GluonTS's ``mean_wQuantileLoss``.

    ``mean_q wQL_q = 2 sum(mean_q pinball_q(y, y_hat_q)) / sum(|y|)``: GluonTS's CRPS approximation,
    scaled by the mean absolute target. It equals ``crps_from_quantiles(...) / mean(|y|)`` over the
    same entries.

    Args:
        y_true: ``[*shape]``.
        quantile_preds: ``[*shape, Q]``, column ``j`` forecasts the ``levels[j]``-quantile.
        levels: ``[Q]`` quantile levels in ``(0, 1)``, distinct.
        mask, axis: over ``y_true``'s axes, see the module docstring.
    """
    t, p, lv, w = _prepare_quantiles(y_true, quantile_preds, levels, mask)
    return _masked_ratio(2.0 * _pinball(t[..., None], p, lv).mean(axis=-1), np.abs(t), w, axis)


def crps_from_quantiles(
    y_true: ArrayLike,
    quantile_preds: ArrayLike,
    levels: ArrayLike,
    *,
    mask: ArrayLike | None = None,
    axis: Axis = None,
) -> float | FloatArray:
    """CRPS approximated by the quantile losses, in the data's units (GluonTS's approximation).

    ``CRPS(F, y) = 2 integral_0^1 pinball_q(y, F^-1(q)) dq`` is approximated on the ``Q`` levels by
    ``(2 / Q) sum_q pinball_q(y, y_hat_q)`` per entry (a quadrature that suits evenly spread levels
    such as ``0.1, ..., 0.9``), then averaged over the observed entries. In GluonTS's ``Evaluator``
    terms it is ``mean_absolute_QuantileLoss`` divided by the number of observed target values;
    :func:`mean_weighted_quantile_loss` (GluonTS's ``mean_wQuantileLoss``, often reported as "CRPS")
    divides the same sum by ``sum(|y|)`` instead.

    Args:
        y_true: ``[*shape]``.
        quantile_preds: ``[*shape, Q]``, column ``j`` forecasts the ``levels[j]``-quantile.
        levels: ``[Q]`` quantile levels in ``(0, 1)``, distinct.
        mask, axis: over ``y_true``'s axes, see the module docstring.

    Raises:
        ValueError: levels outside ``(0, 1)``, repeated or not 1-d, or ``quantile_preds`` not of
            shape ``y_true.shape + (Q,)``.
    """
    t, p, lv, w = _prepare_quantiles(y_true, quantile_preds, levels, mask)
    return _masked_mean(2.0 * _pinball(t[..., None], p, lv).mean(axis=-1), w, axis)


def crps_from_samples(
    y_true: ArrayLike,
    samples: ArrayLike,
    *,
    sample_axis: int = -1,
    fair: bool = False,
    mask: ArrayLike | None = None,
    axis: Axis = None,
) -> float | FloatArray:
    """CRPS of a sample forecast in its energy form, in the data's units.

    ``CRPS(F, y) = E|X - y| - E|X - X'| / 2`` with ``X, X'`` independent draws of ``F``. With the
    ``S`` samples ``x_1..x_S`` of an entry::

        E|X - y|  ~ (1/S) sum_i |x_i - y|
        E|X - X'| ~ (1/S^2) sum_ij |x_i - x_j|        (fair=False)
                    (1/(S (S-1))) sum_ij |x_i - x_j|  (fair=True)

    The double sum is computed exactly in ``O(S log S)`` from the sorted samples:
    ``sum_ij |x_i - x_j| = 2 sum_k (2k - S - 1) x_(k)``.

    Default (``fair=False``): the CRPS of the empirical distribution of the samples, i.e. of the
    forecast exactly as the samples represent it. It is the limit of :func:`crps_from_quantiles` on
    the samples' quantiles as the levels get dense, never negative, and equals the absolute error
    for ``S = 1``; with few samples it overstates the CRPS of the distribution they are drawn from
    by ``E|X - X'| / (2S)``. ``fair=True`` removes that bias (an unbiased estimate of ``CRPS(F, y)``,
    for comparing ensembles of different sizes); it needs ``S >= 2``.

    Args:
        y_true: ``[*shape]``.
        samples: ``[*shape, S]`` (the sample axis at ``sample_axis``; the other axes, in order, must
            equal ``y_true``'s shape).
        sample_axis: the sample axis of ``samples`` (default last; ``0`` for ``[S, *shape]``).
        fair: the unbiased (``S (S-1)``) estimator of ``E|X - X'|`` instead of the empirical one.
        mask, axis: over ``y_true``'s axes, see the module docstring.

    Raises:
        ValueError: ``sample_axis`` out of range, shapes that do not match, no sample, or
            ``fair=True`` with a single sample.
    """
    t = np.asarray(y_true, dtype=np.float64)
    s = np.asarray(samples, dtype=np.float64)
    if not -s.ndim <= sample_axis < s.ndim:
        raise ValueError(f"sample_axis={sample_axis} is out of range for samples of shape {s.shape}")
    s = np.moveaxis(s, sample_axis, -1)  # [*shape, S]
    if s.shape[:-1] != t.shape:
        raise ValueError(
            f"samples of shape {np.shape(samples)} with sample_axis={sample_axis} forecast shape "
            f"{s.shape[:-1]}, but y_true has shape {t.shape}; samples must be y_true's shape plus the sample axis"
        )
    n = s.shape[-1]
    if n < (2 if fair else 1):
        needed = "at least 2 samples with fair=True" if fair else "at least one sample"
        raise ValueError(f"crps_from_samples needs {needed} per entry, got {n}")
    w = _weights(mask, t.shape)
    accuracy = np.abs(s - t[..., None]).mean(axis=-1)  # [*shape]
    ranks = 2.0 * np.arange(1, n + 1) - n - 1.0  # [S]: 2k - S - 1
    pair_sum = 2.0 * (np.sort(s, axis=-1) @ ranks)  # [*shape]: sum_ij |x_i - x_j|
    spread = pair_sum / (n * (n - 1) if fair else n * n)
    return _masked_mean(accuracy - 0.5 * spread, w, axis)


def coverage(
    y_true: ArrayLike, y_pred_q: ArrayLike, *, mask: ArrayLike | None = None, axis: Axis = None
) -> float | FloatArray:
    """Fraction of observed ``y`` at or below the quantile forecast: GluonTS's ``Coverage[q]``.

    ``mean(y <= y_hat_q)``; a calibrated ``q``-quantile forecast covers a fraction ``q``. The
    ``Evaluator`` aggregates the per-series coverages (``axis=-1`` on ``[N, T]``) by their mean,
    which is the pooled ``axis=None`` value when every series has the same number of observed
    values. NaN in an unmasked entry gives NaN.
    """
    t, p, w = _prepare(y_true, y_pred_q, mask)
    return _masked_mean(_indicator(t <= p, t, p), w, axis)


def interval_coverage(
    y_true: ArrayLike,
    lower: ArrayLike,
    upper: ArrayLike,
    *,
    mask: ArrayLike | None = None,
    axis: Axis = None,
) -> float | FloatArray:
    """Fraction of observed ``y`` inside the interval: ``mean(lower <= y <= upper)``.

    With the ``alpha/2`` and ``1 - alpha/2`` quantile forecasts as bounds, a calibrated forecast
    covers a fraction ``1 - alpha``. NaN in an unmasked entry gives NaN.

    Raises:
        ValueError: shapes that differ, or ``lower > upper`` in an observed entry.
    """
    t, lo, w = _prepare(y_true, lower, mask)
    _, hi, _ = _prepare(y_true, upper, mask)
    crossed = (lo > hi) & (w > 0)
    if crossed.any():
        first = tuple(int(i) for i in np.argwhere(crossed)[0])
        raise ValueError(
            f"lower > upper in {int(crossed.sum())} observed entries, e.g. at index {first} "
            f"({lo[first]} > {hi[first]}); pass the lower quantile first, or sort the quantile forecasts"
        )
    return _masked_mean(_indicator((lo <= t) & (t <= hi), t, lo, hi), w, axis)


def winkler_score(
    y_true: ArrayLike,
    lower: ArrayLike,
    upper: ArrayLike,
    level: float,
    *,
    mask: ArrayLike | None = None,
    axis: Axis = None,
) -> float | FloatArray:
    """Mean Winkler (interval) score of the level-``level`` interval ``[lower, upper]`` (Winkler
    1972; Gneiting & Raftery 2007's interval score): its width, plus ``2 / a`` times the distance by
    which ``y`` falls outside it, with ``a = 1 - level / 100`` (``level`` in percent)::

        (u - l) + (2 / a) * (l - y) * [y < l] + (2 / a) * (y - u) * [y > u]

    Lower is better; it rewards narrow intervals and charges misses by their size, so two intervals
    of equal coverage compare by width and by how far they miss. In ``y``'s units, as fabletools'
    ``winkler_score``. NaN in an unmasked entry gives NaN; ``axis=()`` gives each entry's score
    (what a caller that groups the entries, by series say, averages itself).
    """
    if not 0.0 < level < 100.0:
        raise ValueError(f"level must be a percentage strictly between 0 and 100 (80 for an 80% interval), "
                         f"got {level!r}")
    t, lo, w = _prepare(y_true, lower, mask)
    _, hi, _ = _prepare(y_true, upper, mask)
    alpha = 1.0 - level / 100.0
    score = (hi - lo) + (2.0 / alpha) * (np.maximum(lo - t, 0.0) + np.maximum(t - hi, 0.0))
    return _masked_mean(score, w, axis)


def _indicator(condition: NDArray[np.bool_], *arrays: FloatArray) -> FloatArray:
    """``condition`` as 0/1 floats, NaN wherever one of ``arrays`` is NaN (so NaN propagates)."""
    missing = np.logical_or.reduce([np.isnan(a) for a in arrays])
    return np.where(missing, np.nan, condition.astype(np.float64))


def _prepare_quantiles(
    y_true: ArrayLike, quantile_preds: ArrayLike, levels: ArrayLike, mask: ArrayLike | None
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """Validate; return ``y`` ``[*shape]``, forecasts ``[*shape, Q]``, levels ``[Q]``, weights ``[*shape]``."""
    t = np.asarray(y_true, dtype=np.float64)
    p = np.asarray(quantile_preds, dtype=np.float64)
    lv = np.asarray(levels, dtype=np.float64)
    if lv.ndim != 1 or lv.size == 0:
        raise ValueError(f"levels must be a non-empty 1-d sequence of quantile levels, got shape {lv.shape}")
    if not np.all((lv > 0.0) & (lv < 1.0)):
        raise ValueError(f"quantile levels must lie in (0, 1), got {lv.tolist()}")
    if np.unique(lv).size != lv.size:
        raise ValueError(f"quantile levels must be distinct, got {lv.tolist()}")
    if p.shape != t.shape + lv.shape:
        raise ValueError(
            f"quantile_preds must have shape y_true.shape + (Q,) = {t.shape + lv.shape} (quantile axis "
            f"last, one column per level), got {p.shape}; move the quantile axis last with np.moveaxis"
        )
    return t, p, lv, _weights(mask, t.shape)


def per_step(
    metric: Callable[..., float | FloatArray],
    y_true: ArrayLike,
    y_pred: ArrayLike,
    *args: Any,
    step_axis: int = 1,
    **kwargs: Any,
) -> FloatArray:
    """A metric per forecast step: reduce every axis except ``step_axis``.

    ``per_step(mse, y, y_hat)`` on ``[N, H, D]`` arrays returns ``[H]``; extra positional and
    keyword arguments go to ``metric`` (``y_train`` and ``m`` for :func:`mase`, ``q`` for
    :func:`quantile_loss`, ``mask``).
    """
    ndim = np.ndim(y_true)
    if not -ndim <= step_axis < ndim:
        raise ValueError(f"step_axis={step_axis} is out of range for {ndim}-d arrays")
    keep = step_axis % ndim
    axes = tuple(a for a in range(ndim) if a != keep)
    result = metric(y_true, y_pred, *args, axis=axes, **kwargs)
    return np.atleast_1d(np.asarray(result, dtype=np.float64))
