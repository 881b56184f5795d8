"""Series that begin with a run of zeros unlike the rest of them: products not launched yet, given as zeros.

A product launched late in a sales panel is often exported with zeros before its first sale. To
every model those zeros are history, and a network forecasts the product from a context that is
mostly zeros: on four such products in a weekly panel of 44 (``benchmarks/launches.py``, seeds
0-2, db121ce) RSA-PatchTST alone scored a test MASE of 7.51 on them with their zeros kept and 1.64
with them read as missing, the default 5.48 and 1.67. So, with ``leading_zeros="missing"`` (the
default, :class:`~tsrec.config.WindowConfig`), the runs :func:`leading_zeros` finds are read as
missing at ``fit`` (:func:`unlaunched`; M5 entries left the days before a product's first sale in a
store out of their training sets the same way), and every forecast reads the zeros before a series' first
observed step at ``fit`` as missing too (:func:`zeros_before_fit`), whichever steps of the frame it
reads; ``"keep"`` keeps them as data (a sensor or a price that starts at zero is no launch).
:func:`report_leading_zeros` names the series either way.
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np

from tsrec.data.frame import Panel, Series

__all__ = ["launch_note", "launched", "leading_zeros", "report_leading_zeros", "unlaunched", "zeros_before_fit"]


def _runs_of_zeros(zero: np.ndarray) -> tuple[int, int]:
    """The length of the run of ``True`` that ``zero`` ``[T]`` starts with, and of its longest later run."""
    edges = np.flatnonzero(np.diff(np.r_[0, zero.astype(np.int8), 0]))  # starts and ends of the runs, alternately
    lengths = edges[1::2] - edges[::2]  # [runs]
    if not lengths.size or edges[0] != 0:
        return 0, int(lengths.max(initial=0))
    return int(lengths[0]), int(lengths[1:].max(initial=0))


def leading_zeros(panel: Panel, horizon: int) -> np.ndarray:
    """``[I, C]`` int64: the zeros each series and channel of ``panel`` begins with (from its first
    observed value, its missing steps skipped) where they look like a launch given as zeros: at
    least ``horizon`` of them, more than twice its longest later run of zeros, and a nonzero value
    after them (an intermittent series, whose zeros come in runs throughout, is not named); else 0."""
    out = np.zeros((len(panel.items), len(panel.columns)), dtype=np.int64)
    for i, item in enumerate(panel.items):
        for c in range(out.shape[1]):
            seen = item.values[item.observed[:, c], c]  # [n] its observed values, in order
            if not seen.size or seen[0] != 0:
                continue
            first, later = _runs_of_zeros(seen == 0)
            if horizon <= first < seen.size and first > 2 * later:
                out[i, c] = first
    return out


def launched(panel: Panel, horizon: int, policy: str) -> tuple[Panel, np.ndarray]:
    """``panel`` as ``leading_zeros=policy`` reads it (``"missing"``: :func:`unlaunched`; ``"keep"``:
    as it is) and the runs :func:`leading_zeros` finds ``[I, C]``: what ``fit`` and a backtest read."""
    runs = leading_zeros(panel, horizon)
    return (unlaunched(panel, runs) if policy == "missing" else panel), runs


def unlaunched(panel: Panel, runs: np.ndarray) -> Panel:
    """``panel`` with the leading zeros ``runs`` ``[I, C]`` counts (:func:`leading_zeros`) read as
    missing (unobserved), as if the frame gave NaN there; ``panel`` itself where there is none."""
    if not runs.any():
        return panel
    items = list(panel.items)
    for i, c in np.argwhere(runs):
        item = items[i]
        steps = np.flatnonzero(item.observed[:, c])[:runs[i, c]]  # the run's grid positions
        observed = item.observed.copy()
        observed[steps, c] = False
        items[i] = dataclasses.replace(item, observed=observed)
    return dataclasses.replace(panel, items=tuple(items))


def launch_note(series: Series, channel: int = 0) -> str:
    """Where ``series`` (its ``channel``) begins with zeros :func:`unlaunched` read as missing, the
    words an error about its first observed value adds: how many, and how to keep them; else ``""``."""
    observed = series.observed[:, channel]
    start = int(np.argmax(observed)) if observed.any() else len(observed)
    zeros = int((series.values[:start, channel] == 0).sum())
    return f" (its {zeros} zeros before, read as missing as a product not launched yet: leading_zeros='keep' " \
        "fits them as data)" if zeros else ""


def zeros_before_fit(panel: Panel, history: Panel, rows: np.ndarray) -> Panel:
    """``panel`` with each zero before its series' first observed step at ``fit`` read as missing:
    item ``i``'s fitted history is ``history``'s item ``rows[i]`` (``[N]``: the steps the model kept,
    at least its context), per channel. What a forecast reads of a series whose run of zeros ``fit``
    read as missing (:func:`unlaunched`), from any frame that holds them again; ``panel`` itself
    where no zero lies before its fitted start."""
    items, changed = list(panel.items), False
    first = history.first_steps[np.asarray(rows, dtype=np.int64)]  # [N, C] each first observed step at fit
    for i in np.flatnonzero(first.any(axis=1)).tolist():  # those not observed from their fitted history's start
        item, fitted = items[i], history.items[int(rows[i])]
        starts = fitted.index.values[first[i]]  # [C]
        before = (item.index.values[:, None] < starts[None, :]) & (first[i] > 0)  # [T, C]
        zeros = before & item.observed & (item.values == 0)
        if zeros.any():
            items[i], changed = dataclasses.replace(item, observed=item.observed & ~zeros), True
    return dataclasses.replace(panel, items=tuple(items)) if changed else panel


def report_leading_zeros(runs: np.ndarray, panel: Panel, *, missing: bool, stacklevel: int) -> None:
    """Warn naming the series whose leading zeros ``runs`` ``[I, C]`` (:func:`leading_zeros`) holds,
    with how many zeros each begins with: read as missing (``missing``, :func:`unlaunched`), with
    how to keep them; else kept as data, with how to read them as missing."""
    named = np.argwhere(runs)  # [K, 2] (series, channel)
    if not named.size:
        return
    label = panel.channel_label if panel.layout == "wide" else lambda i, c: panel.item_label(i)
    listed = ", ".join(f"{label(int(i), int(c))} ({runs[i, c]} zeros)" for i, c in named[:5])
    more = f" and {len(named) - 5} more" if len(named) > 5 else ""
    found = (f"{len(named)} series begin with a run of zeros more than twice as long as any later in them "
             f"({listed}{more})")
    if missing:
        warnings.warn(f"{found}: read as missing, as a product not launched yet (leading_zeros='missing'); "
                      "leading_zeros='keep' keeps them as data (docs/auto.md)", UserWarning, stacklevel=stacklevel)
        return
    warnings.warn(f"{found}: if they had not started yet (a product launched later), leading_zeros='missing' reads "
                  "them as missing (or give those steps as NaN, or drop their rows); as zeros they are history to "
                  "every model, and a network forecasts such a series from the zeros in its context (docs/auto.md)",
                  UserWarning, stacklevel=stacklevel)
