"""Far values that a covariate marks: events, not mistakes.

An isolated far value (:meth:`StandardScaler.far_parts <tsrec.data.scaling.StandardScaler.far_parts>`:
beyond its series' robust fences, not a level shift) is read as missing by default: a typo of 1e9
or a -9999 placeholder. A promotion that triples a day's sales is far too, and it is data that a
covariate explains. The two differ in where they fall: a mistake lands on a covariate's unusual
steps only as often as those steps occur, an event the covariate drives lands there far more often.

:func:`far_events` tests that, per dynamic covariate: the far values on the steps it *marks*
(its value outside its series' interquartile range, strictly: a binary promotion on a minority of
days marks those days, a continuous covariate about half of all steps) against the share of all
observed entries it marks, a one-sided binomial test, Bonferroni over the covariates, at
:data:`EVENT_LEVEL`. ``far_values="auto"`` (the default) keeps every far value where one passes
(:func:`tsrec.fitting.resolve_far_values`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tsrec.data.covariates import CovariateValues
from tsrec.data.frame import Panel
from tsrec.data.scaling import StandardScaler, item_blocks, item_quantiles

__all__ = ["EVENT_LEVEL", "Events", "binomial_tail", "far_events", "marked_steps"]

#: The level of the test that the far values fall on a covariate's marked steps more often than
#: chance (one-sided binomial, Bonferroni over the dynamic covariates): one typo on one of 25
#: promotion days (p = 0.04) stays a mistake, three far values all on them (p = 6e-5) are events.
EVENT_LEVEL = 0.01


@dataclass(frozen=True)
class Events:
    """What :func:`far_events` found.

    Attributes:
        far: the isolated far values (entries: series x channel x step; 0 where there is no dynamic
            covariate to test them against: they are not counted).
        covariate: the dynamic covariate whose marked steps hold them more often than chance at
            :data:`EVENT_LEVEL` (the most significant), or None where none does.
        marked: how many of the far values lie on its marked steps (0 without one).
        share: the share of all observed entries it marks.
        p_value: the test's p-value, Bonferroni-corrected (1 without a covariate).
    """

    far: int
    covariate: str | None = None
    marked: int = 0
    share: float = 0.0
    p_value: float = 1.0

    def describe(self) -> str:
        """One sentence on the test, for the warning that says the far values are kept."""
        return (f"{self.marked} of the {self.far} far values lie on the steps where covariate {self.covariate!r} "
                f"is outside its series' interquartile range, which are {self.share:.1%} of the steps (one-sided "
                f"binomial test, p = {self.p_value:.2g})")


def binomial_tail(k: int, n: int, p: float) -> float:
    """``P(X >= k)`` for ``X ~ Binomial(n, p)``, summed in log space (exact for the counts here)."""
    if k <= 0:
        return 1.0
    if p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    logs = [math.lgamma(n + 1) - math.lgamma(j + 1) - math.lgamma(n - j + 1) + j * math.log(p)
            + (n - j) * math.log1p(-p) for j in range(k, n + 1)]
    top = max(logs)
    return min(1.0, math.exp(top) * math.fsum(math.exp(v - top) for v in logs))


def marked_steps(dynamic: np.ndarray, series: np.ndarray, n_series: int) -> np.ndarray:
    """``[M, K]`` bool: where each covariate of ``dynamic`` ``[M, K]`` (rows of the series
    ``series`` ``[M]``, ascending; NaN missing) lies outside its series' interquartile range,
    strictly (:func:`~tsrec.data.scaling.item_quantiles`, every series at once)."""
    seen = np.isfinite(dynamic)
    q1, q3 = item_quantiles(dynamic, seen, series, n_series, (0.25, 0.75))  # [N, K] each
    with np.errstate(invalid="ignore"):
        return seen & ((dynamic < q1[series]) | (dynamic > q3[series]))


def far_events(panel: Panel, covariates: CovariateValues, names: Sequence[str]) -> Events:
    """Whether the isolated far values of ``panel`` (robust fences over each series' observed
    values) fall on the steps a dynamic covariate marks (:func:`marked_steps`; ``covariates``'
    dynamic columns, named ``names``) more often than the share of the observed entries it marks
    allows by chance (see the module). Without a dynamic covariate there is nothing to test, and
    nothing is counted (``far`` 0)."""
    if not names:
        return Events(0)
    items = panel.items
    lengths = np.diff(panel.offsets)  # [N]
    scaler = StandardScaler.fences_of(panel)
    far_total, observed_total = 0, 0
    on_marked = np.zeros(len(names), dtype=np.int64)  # [K] far values on each covariate's marked steps
    marked_total = np.zeros(len(names), dtype=np.int64)  # [K] observed entries it marks
    for block in item_blocks(lengths):
        values = np.concatenate([items[i].values for i in block])  # [M, C]
        observed = np.concatenate([items[i].observed for i in block])  # [M, C]
        series = np.repeat(np.arange(len(block)), lengths[block])  # [M]
        rows = np.repeat(np.arange(block.start, block.stop), lengths[block])  # [M] scaler rows
        far, _ = scaler.far_parts(values, observed, rows, series)  # [M, C]
        marked = marked_steps(np.concatenate([covariates.dynamic[i] for i in block]), series, len(block))  # [M, K]
        on_marked += (far.sum(1)[:, None] * marked).sum(0)
        marked_total += (observed.sum(1)[:, None] * marked).sum(0)
        far_total += int(far.sum())
        observed_total += int(observed.sum())
    if not far_total:
        return Events(0)
    tests = [(binomial_tail(int(k), far_total, float(m) / observed_total) * len(names), j)
             for j, (k, m) in enumerate(zip(on_marked, marked_total))]
    p_value, j = min(tests)
    if p_value >= EVENT_LEVEL:
        return Events(far_total)
    return Events(far_total, names[j], int(on_marked[j]), float(marked_total[j]) / observed_total, p_value)
