"""Series that begin with a run of zeros unlike the rest of them: products not launched yet, given as zeros.

A product launched late in a sales panel is often exported with zeros before its first sale. To
every model those zeros are history, and a network forecasts the product from a context that is
mostly zeros: on four such products in a weekly panel of 44 (``benchmarks/launches.py``, seeds
0-2) RSA-PatchTST alone scored a test MASE of 7.51 on them with their zeros and 1.64 with the
zeros given as missing, the default 5.48 and 1.71. tsrec does not read the zeros as missing on its
own (a sensor or a price that starts at zero is no launch); :func:`report_leading_zeros` names the
series where the run is unlike the rest of the series, with the fix.
"""

from __future__ import annotations

import warnings

import numpy as np

from tsrec.data.frame import Panel

__all__ = ["leading_zeros", "report_leading_zeros"]


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


def report_leading_zeros(panel: Panel, horizon: int, *, stacklevel: int) -> None:
    """Warn naming the series :func:`leading_zeros` finds, with how many zeros each begins with and
    the fix: the steps before a launch as missing (NaN) or as no rows."""
    runs = leading_zeros(panel, horizon)  # [I, C]
    named = np.argwhere(runs)  # [K, 2] (series, channel)
    if not named.size:
        return
    label = panel.channel_label if panel.layout == "wide" else lambda i, c: panel.item_label(i)
    listed = ", ".join(f"{label(int(i), int(c))} ({runs[i, c]} zeros)" for i, c in named[:5])
    more = f" and {len(named) - 5} more" if len(named) > 5 else ""
    warnings.warn(f"{len(named)} series begin with a run of zeros more than twice as long as any later in them "
                  f"({listed}{more}): if they had not started yet (a product launched later), give those steps as "
                  "missing (NaN) or drop their rows; as zeros they are history to every model, and a network forecasts "
                  "such a series from the zeros in its context (docs/auto.md)", UserWarning, stacklevel=stacklevel)
