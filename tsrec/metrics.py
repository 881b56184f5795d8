"""Point and quantile forecast metrics on numpy arrays.

Every metric takes ``y_true`` and ``y_pred`` of the same shape (for example ``[N, H, D]``:
windows, horizon steps, variables), an optional observed ``mask`` (broadcastable to that shape;
``True``/1 = observed, only observed entries count) and an optional ``axis``:

* ``axis=None`` (default): one ``float`` over all observed entries;
* ``axis=(0, 2)`` on ``[N, H, D]``: a ``[H]`` array, the metric per horizon step
  (:func:`per_step` is a shortcut); any int or tuple of ints reduces those axes only.

A reduction over no observed entry gives NaN. NaNs in unmasked entries propagate: mask them out.

Units: the metrics do not know whether the arrays are z-scored or in the data's own units. The
benchmark protocols report MSE/MAE on the *scaled* data (train-only standard scaling); the caller
labels every reported number "scaled" or "original".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["mae", "mase", "mse", "per_step", "quantile_loss", "rmse", "smape"]

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
    if mask is None:
        return t, p, np.ones(t.shape, dtype=np.float64)
    m = np.asarray(mask)
    try:
        w = np.broadcast_to(m, t.shape)
    except ValueError:
        raise ValueError(
            f"mask of shape {m.shape} does not broadcast to the data shape {t.shape}"
        ) from None
    return t, p, w.astype(bool).astype(np.float64)


def _masked_mean(values: FloatArray, weights: FloatArray, axis: Axis) -> float | FloatArray:
    """Mean of ``values`` over the entries with weight 1 (NaN where there are none)."""
    values = np.where(weights > 0, values, 0.0)  # masked-out NaNs must not leak into the sum
    with np.errstate(invalid="ignore", divide="ignore"):
        total = np.sum(values, axis=axis)
        count = np.sum(weights, axis=axis)
        result = np.where(count > 0, total / np.where(count > 0, count, 1.0), np.nan)
    return float(result) if np.ndim(result) == 0 else np.asarray(result, dtype=np.float64)


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
        ValueError: ``m`` not a positive int, ``y_train`` not longer than ``m``, or its
            trailing shape does not broadcast against ``y_true``.
    """
    if isinstance(m, bool) or not isinstance(m, int | np.integer) or m < 1:
        raise ValueError(f"the seasonal period m must be a positive integer, got {m!r}")
    t, p, w = _prepare(y_true, y_pred, mask)
    train = np.asarray(y_train, dtype=np.float64)
    if train.ndim == 0 or train.shape[0] <= m:
        raise ValueError(f"y_train needs more than m={m} steps on axis 0, got shape {train.shape}")
    diffs = np.abs(train[m:] - train[:-m])
    valid = ~np.isnan(diffs)
    with np.errstate(invalid="ignore", divide="ignore"):
        scale = np.where(valid, diffs, 0.0).sum(axis=0) / valid.sum(axis=0)  # [*V]
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
    if not 0.0 < float(q) < 1.0:
        raise ValueError(f"the quantile level q must lie in (0, 1), got {q!r}")
    t, p, w = _prepare(y_true, y_pred, mask)
    diff = t - p
    return _masked_mean(np.maximum(q * diff, (q - 1.0) * diff), w, axis)


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
