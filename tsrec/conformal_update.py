"""Conformal bands that learn from the data after the fit: a rolling window of pooled scores.

::

    evidence:  windows forecast after the fit (origin past the series' fitted end), against
               their truth: |y - y_hat| / (series scale x step profile), one score per observed
               step, known from when that step was observed (a window's first steps teach before
               its last is observed)         -> Evidence (windows in the order they end)
    a window forecast from cutoff t (predict: after every observation given; a backtest: its origin):
               the newest m <= R of the scores of steps observed before t (of the windows that
               ended last) replace the oldest of the calibration's: the calibration's pooled
               scores weigh (R - m) / R of the window, each new score 1 / R; the band of level L
               is the ceil((R + 1) L / 100)-th score of that weighted window, times the step's
               profile (R: Calibration.rolling)

The calibration must pool its steps (``ConformalConfig.pooling="steps"``, :func:`tsrec.conformal.calibrate`):
every new window then gives each step ``H`` scores to learn from, not one. With no window after
the fit (or no step of one observed before a cutoff), the bands are the calibration's own. Arrays
only: the forecasts come from :mod:`tsrec.forecasting`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from tsrec.conformal import Calibration
from tsrec.data import Panel

__all__ = ["Evidence", "learned_widths", "window_values"]


@dataclass(frozen=True)
class Evidence:
    """Pooled scores of windows forecast after the fit, each known from when its step was observed.

    Attributes:
        times: ``[S]`` int64, when each score's step was observed (nanoseconds since 1970 of its
            timestamp): the score is known at any later cutoff.
        ends: ``[S]`` int64, when its window's last step was observed, ascending.
        scores: ``[S]`` float64, the observed scores divided by their series' scale and their
            step's profile, window after window in the order their last steps were observed
            (ties as given), each window's steps in order.
    """

    times: np.ndarray
    ends: np.ndarray
    scores: np.ndarray

    @classmethod
    def of(cls, calibration: Calibration, mean: np.ndarray, truth: np.ndarray, observed: np.ndarray,
           rows: np.ndarray, stamps: np.ndarray, eligible: np.ndarray) -> Evidence:
        """The evidence of windows with forecasts ``mean``, truths ``truth`` and observed masks
        ``observed`` (``[V, H, C]`` each) of the fitted series ``rows`` ``[V]``, whose steps are at
        ``stamps`` ``[V, H]`` (int64 ns); only the ``eligible`` ``[V]`` windows count (those
        forecast after the fit)."""
        profile = calibration.profile
        if profile is None:
            raise ValueError("a calibration learns after the fit only from pooled steps (conformal_pooling='steps')")
        divisor = calibration.scale[rows][:, None, :] * profile[None, :, None]  # [V, H, C]
        with np.errstate(invalid="ignore", divide="ignore"):
            score = np.abs(truth - mean) / divisor  # [V, H, C]
        valid = observed & np.isfinite(score) & eligible[:, None, None]  # [V, H, C]
        stamps = np.asarray(stamps, dtype=np.int64)
        order = np.argsort(stamps[:, -1], kind="stable")  # windows by when their last step was observed
        valid, score, stamps = valid[order], score[order], stamps[order]
        times = np.broadcast_to(stamps[:, :, None], score.shape)[valid]  # [S]
        ends = np.broadcast_to(stamps[:, -1:, None], score.shape)[valid]  # [S]
        return cls(times=times, ends=ends, scores=score[valid].astype(np.float64))

    @functools.cached_property
    def span(self) -> int:
        """The longest a score waits for its window's end (ns): a window is open over at most this."""
        return int((self.ends - self.times).max()) if len(self) else 0

    def known(self, cutoff: int) -> np.ndarray:
        """The scores of steps observed before ``cutoff``, the newest window's last: those of every
        window that ended before it, then the first steps of those still open there (ending within
        :attr:`span` of it: only they are searched, not every later window)."""
        ended = int(np.searchsorted(self.ends, cutoff, side="left"))  # every step of these is known
        if ended == len(self.ends):
            return self.scores
        stop = int(np.searchsorted(self.ends, cutoff + self.span, side="left"))  # later windows start after it
        tail = slice(ended, stop)
        return np.concatenate([self.scores[:ended], self.scores[tail][self.times[tail] < cutoff]])

    def __len__(self) -> int:
        return int(self.scores.size)


def learned_widths(calibration: Calibration, evidence: Evidence, cutoffs: np.ndarray, level: float) -> np.ndarray:
    """``[N, H]`` the half-widths (score units, as :meth:`Calibration.width <tsrec.conformal.Calibration.width>`)
    of the level-``level`` band of windows forecast from ``cutoffs`` ``[N]`` (int64 ns: the scores of
    steps observed before a cutoff are known there): the rolling window of the module. A window
    with no score before its cutoff gets the calibration's own width."""
    frozen = calibration.width(level)  # [H] (ValueError for a level the calibration cannot give)
    profile = calibration.profile
    if profile is None or calibration.update != "rolling" or not len(evidence):
        return np.broadcast_to(frozen, (len(cutoffs), len(frozen))).copy()  # [N, H]
    n = int(calibration.counts.min())
    size = int(min(n, max(calibration.rolling, math.ceil(level / (100.0 - level) - 1e-9))))  # k <= size below
    k = math.ceil((size + 1) * level / 100.0 - 1e-9)
    kept = calibration.kept[0]
    old = calibration.order[0, :kept] / profile[0]  # [K] the pooled scores' kept ranks
    unique, which = np.unique(cutoffs, return_inverse=True)  # [U], [N]
    widths = np.broadcast_to(frozen, (len(unique), len(frozen))).copy()  # [U, H]
    for u, cutoff in enumerate(unique.tolist()):
        new = evidence.known(cutoff)[-size:]  # the newest, at most size
        if not new.size:
            continue
        values = np.concatenate([old, new])
        weights = np.concatenate([np.full(kept, (size - new.size) / kept), np.ones(new.size)])
        ranked = np.argsort(values, kind="stable")
        reach = np.cumsum(weights[ranked])
        at = min(int(np.searchsorted(reach, k - 1e-9, side="left")), len(ranked) - 1)
        widths[u] = values[ranked[at]] * profile
    return widths[which]


def window_values(panel: Panel, items: np.ndarray, origins: np.ndarray, horizon: int) -> tuple[np.ndarray, np.ndarray]:
    """The values and observed masks ``[W, H, C]`` of the ``horizon`` steps from ``origins`` ``[W]``
    of ``panel``'s ``items`` ``[W]`` (one gather from the items laid end to end)."""
    values = np.concatenate([item.values for item in panel.items])  # [R, C]
    observed = np.concatenate([item.observed for item in panel.items])
    rows = panel.offsets[:-1][items, None] + origins[:, None] + np.arange(horizon)  # [W, H]
    return values[rows], observed[rows]
