"""Conformal bands that learn from the data after the fit: a rolling window of pooled scores.

::

    evidence:  windows forecast after the fit (origin past the series' fitted end), against
               their truth: |y - y_hat| / (series scale x step profile)   -> Evidence (ordered by
               when each window's last truth was observed)
    a window forecast from cutoff t (predict: after every observation given; a backtest: its origin):
               the newest m <= R scores of windows that ended before t replace the oldest of the
               calibration's: the calibration's pooled scores weigh (R - m) / R of the window, each
               new score 1 / R; the band of level L is the ceil((R + 1) L / 100)-th score of that
               weighted window, times the step's profile (R: Calibration.rolling)

The calibration must pool its steps (``ConformalConfig.pooling="steps"``, :func:`tsrec.conformal.calibrate`):
every new window then gives each step ``H`` scores to learn from, not one. With no window after
the fit (or none before a cutoff), the bands are the calibration's own. Arrays only: the forecasts
come from :mod:`tsrec.forecasting`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tsrec.conformal import Calibration
from tsrec.data import Panel

__all__ = ["Evidence", "learned_widths", "window_values"]


@dataclass(frozen=True)
class Evidence:
    """Pooled scores of windows forecast after the fit.

    Attributes:
        ends: ``[V]`` int64, when each window's last step was observed (nanoseconds since 1970 of
            its timestamp), ascending.
        offsets: ``[V + 1]`` where each window's scores start in ``scores``.
        scores: ``[S]`` float64, the windows' observed scores divided by their series' scale and
            their step's profile, window after window.
    """

    ends: np.ndarray
    offsets: np.ndarray
    scores: np.ndarray

    @classmethod
    def of(cls, calibration: Calibration, mean: np.ndarray, truth: np.ndarray, observed: np.ndarray,
           rows: np.ndarray, ends: np.ndarray, eligible: np.ndarray) -> Evidence:
        """The evidence of windows with forecasts ``mean``, truths ``truth`` and observed masks
        ``observed`` (``[V, H, C]`` each) of the fitted series ``rows`` ``[V]``, whose last steps
        are at ``ends`` ``[V]`` (int64 ns); only the ``eligible`` ``[V]`` windows count (those
        forecast after the fit)."""
        profile = calibration.profile
        if profile is None:
            raise ValueError("a calibration learns after the fit only from pooled steps (conformal_pooling='steps')")
        divisor = calibration.scale[rows][:, None, :] * profile[None, :, None]  # [V, H, C]
        with np.errstate(invalid="ignore", divide="ignore"):
            score = np.abs(truth - mean) / divisor  # [V, H, C]
        valid = observed & np.isfinite(score) & eligible[:, None, None]  # [V, H, C]
        order = np.argsort(ends, kind="stable")
        valid, score = valid[order], score[order]
        counts = valid.reshape(len(order), -1).sum(axis=1)  # [V]
        return cls(ends=np.asarray(ends, dtype=np.int64)[order], offsets=np.concatenate([[0], np.cumsum(counts)]),
                   scores=score[valid].astype(np.float64))

    def __len__(self) -> int:
        return int(self.scores.size)


def learned_widths(calibration: Calibration, evidence: Evidence, cutoffs: np.ndarray, level: float) -> np.ndarray:
    """``[N, H]`` the half-widths (score units, as :meth:`Calibration.width <tsrec.conformal.Calibration.width>`)
    of the level-``level`` band of windows forecast from ``cutoffs`` ``[N]`` (int64 ns: the scores of
    windows that ended before a cutoff are known there): the rolling window of the module. A window
    with no score before its cutoff gets the calibration's own width."""
    frozen = calibration.width(level)  # [H] (ValueError for a level the calibration cannot give)
    profile = calibration.profile
    out = np.broadcast_to(frozen, (len(cutoffs), len(frozen))).copy()  # [N, H]
    if profile is None or calibration.update != "rolling" or not len(evidence):
        return out
    n = int(calibration.counts.min())
    size = int(min(n, max(calibration.rolling, math.ceil(level / (100.0 - level) - 1e-9))))  # k <= size below
    k = math.ceil((size + 1) * level / 100.0 - 1e-9)
    kept = calibration.kept[0]
    old = calibration.order[0, :kept] / profile[0]  # [K] the pooled scores' kept ranks
    known = np.searchsorted(evidence.ends, cutoffs, side="left")  # [N] windows that ended before each cutoff
    for stop in np.unique(known):
        if stop == 0:
            continue
        end = int(evidence.offsets[stop])
        new = evidence.scores[max(0, end - size):end]  # the newest, at most size
        values = np.concatenate([old, new])
        weights = np.concatenate([np.full(kept, (size - new.size) / kept), np.ones(new.size)])
        ranked = np.argsort(values, kind="stable")
        reach = np.cumsum(weights[ranked])
        at = min(int(np.searchsorted(reach, k - 1e-9, side="left")), len(ranked) - 1)
        out[known == stop] = values[ranked[at]] * profile
    return out


def window_values(panel: Panel, items: np.ndarray, origins: np.ndarray, horizon: int) -> tuple[np.ndarray, np.ndarray]:
    """The values and observed masks ``[W, H, C]`` of the ``horizon`` steps from ``origins`` ``[W]``
    of ``panel``'s ``items`` ``[W]`` (one gather from the items laid end to end)."""
    values = np.concatenate([item.values for item in panel.items])  # [R, C]
    observed = np.concatenate([item.observed for item in panel.items])
    rows = panel.offsets[:-1][items, None] + origins[:, None] + np.arange(horizon)  # [W, H]
    return values[rows], observed[rows]
