"""Missing tails for the networks: the steps after a series' last observation, forecast from it.

A network reads a window of fixed length ending where its forecast starts. Where a series' last
values are missing, that window would hold them as the series' training mean (0 in scaled units)
and the network would forecast the requested dates from a made-up tail: on the issue's case (the
last 30 of 300 hourly values of one series missing, a daily cycle of amplitude 3; the small
rsa_patchtst of tests/test_missing_tails.py) the network's mean absolute error on that series
was 1.02, 2.4x the larger of the others' (0.42 and 0.20). :func:`fill_tails` instead
forecasts, round by round, the ``prediction_length`` steps after each series' last observed (or
already forecast) step with the same network, from a window ending there (padded with
unobserved steps where fewer steps were read), and fills the missing steps with those forecasts;
the requested dates are then forecast from the observed values and the forecasts of the gap, as
the statistical models forecast them from their last observation over a longer horizon.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np

from tsrec.data.covariates import CovariateValues
from tsrec.data.frame import Panel, Series

__all__ = ["fill_tails", "fills_tails", "tail_gap", "with_tails"]


def fills_tails(trainable: bool, covariates: Sequence[str]) -> bool:
    """Whether a model's missing tails are forecast by :func:`fill_tails`: a network (``trainable``)
    without covariate columns (``covariates``; a network with them reads each missing step as
    the series' training mean, whose covariates over the gap would have to be read too)."""
    return trainable and not covariates


def tail_gaps(panel: Panel, within: int | None = None) -> np.ndarray:
    """``[N]`` the steps each series of ``panel`` holds after its last observed one (in the
    channels observed somewhere; a series observed nowhere: its length): how many more than a
    window's context a forecast from its last observations reads. ``within``: count only the
    channels observed in their last ``within`` steps (0 for a series without one)."""
    gaps = np.zeros(len(panel.items), dtype=np.int64)
    for i, series in enumerate(panel.items):
        seen = series.observed.any(axis=0)  # [C]
        after = np.argmax(series.observed[::-1], axis=0)  # [C] steps after each channel's last observation
        if within is not None:
            seen &= after < within
            gaps[i] = int(after[seen].max()) if seen.any() else 0
        else:
            gaps[i] = int(after[seen].max()) if seen.any() else len(series)
    return gaps


def tail_gap(panel: Panel) -> int:
    """The longest of :func:`tail_gaps` (0 for an empty panel)."""
    gaps = tail_gaps(panel)
    return int(gaps.max()) if len(gaps) else 0


def with_tails(panel: Panel, values: CovariateValues, context: int) -> tuple[Panel, CovariateValues]:
    """Each series' last ``context`` steps and its missing tail after them (all of a shorter one),
    and the same steps of its dynamic covariates: what a network forecasts a tail from, kept
    series by series (one long tail does not lengthen every series). Only tails shorter than
    ``context`` count: a channel whose last ``context`` steps hold no observation gets no forecast
    (:func:`fill_tails`), so the steps before its tail are not kept for it."""
    kept = np.minimum(context + tail_gaps(panel, within=context), np.diff(panel.offsets))  # [N]
    items = tuple(Series(s.item_id, s.grid, s.values[len(s) - k:], s.observed[len(s) - k:], s.start + len(s) - k)
                  for s, k in zip(panel.items, kept.tolist()))
    dynamic = tuple(d[len(d) - k:] for d, k in zip(values.dynamic, kept.tolist()))
    return dataclasses.replace(panel, items=items), dataclasses.replace(values, dynamic=dynamic)


def fill_tails(panel: Panel, horizon: int, context: int,
               forecast: Callable[[Panel, np.ndarray], np.ndarray]) -> tuple[Panel, int]:
    """``panel`` with the missing tails of its series filled, and the rounds of ``forecast`` it took
    (0, and ``panel`` itself, where no series has one).

    A series' tail is its steps after the last step where one of its channels is observed and
    the others that have an observation are not. A tail at least ``context`` steps long is not
    filled: nothing in the window before the requested dates was observed, and forecasting it
    from older data would stretch a network's ``prediction_length`` over as many rounds as it
    takes (that channel's forecast is NaN, and ``predict`` names it; a longer ``context_length``
    reaches its last observation). Each round cuts every series with a tail to fill there,
    ``forecast(cut, items)`` (``cut``: a panel of those series up to their cuts, ``items`` ``[n]``
    their positions in ``panel``) gives ``[n, horizon, C]`` forecasts in the data's units, and the
    missing entries of the ``horizon`` steps after each cut take them in the channels whose tail is
    filled (observed entries are kept; a channel left unfilled stays missing). A round that fills
    nothing (every forecast NaN: nothing observed in a window) ends it.
    """
    values = [s.values.copy() for s in panel.items]
    known = [s.observed.copy() for s in panel.items]  # observed, or filled with a forecast
    reach = [s.observed[max(len(s) - context, 0):].any(axis=0) for s in panel.items]  # [C] each: seen in the context
    rounds = 0
    while True:
        cuts = {}
        for i, seen in enumerate(known):
            last = len(seen) - 1 - np.argmax(seen[::-1], axis=0)  # [C] each channel's last known step
            tailed = reach[i] & (last < len(seen) - 1)  # [C] channels observed in the context, not at the end
            if tailed.any():
                cuts[i] = int(last[tailed].min()) + 1
        if not cuts:
            break
        items = np.fromiter(cuts, np.int64, len(cuts))  # [n]
        cut = dataclasses.replace(panel, items=tuple(
            Series(panel.items[i].item_id, panel.items[i].grid, values[i][:end], known[i][:end], panel.items[i].start)
            for i, end in cuts.items()))
        means = forecast(cut, items)  # [n, H, C]
        progress = False
        for (i, end), mean in zip(cuts.items(), means):
            stop = min(end + horizon, len(values[i]))
            fill = ~known[i][end:stop] & np.isfinite(mean[:stop - end]) & reach[i]  # [h, C]
            values[i][end:stop] = np.where(fill, mean[:stop - end], values[i][end:stop])
            known[i][end:stop] |= fill
            progress |= bool(fill.any())
        rounds += 1
        if not progress:
            break
    if not rounds:
        return panel, 0
    items = tuple(dataclasses.replace(s, values=v, observed=k) for s, v, k in zip(panel.items, values, known))
    return dataclasses.replace(panel, items=items), rounds
