"""Time-based train / validation splits expressed as ranges of forecast origins.

A forecast origin ``o`` is the grid position of the first forecast step: the window reads past rows
``[o - context_length, o)`` and future rows ``[o, o + prediction_length)``. Train and validation
windows index the SAME arrays; only their origin ranges differ. Validation windows may read their
past from the training part (up to ``context_length`` rows before the border), never the reverse.
"""

from __future__ import annotations

from dataclasses import dataclass

from tsrec._checks import check_int
from tsrec.data.frame import Panel

OriginRange = tuple[int, int]
"""Half-open range ``[start, stop)`` of forecast origins of one item."""


class SeriesTooShort(ValueError):
    """A series holds fewer steps than a fit's windows need (its message names the series and the
    fix); a caller that cut the history (a calibration) says which of its settings cut it."""


VAL_FRACTION = 0.1
"""Share of each series whose steps are validation targets by default (as the 70/10/20 split of
the long-horizon benchmarks): validation is sized with the series, not a handful of windows."""


def default_val_windows(length: int, prediction_length: int) -> int:
    """Validation windows of a series of ``length`` steps by default: those whose targets are its
    last ``VAL_FRACTION`` of steps, and at least one (one horizon of targets)."""
    return max(1, round(VAL_FRACTION * length) - prediction_length + 1)


@dataclass(frozen=True)
class Split:
    """Origin ranges for training and validation.

    train:     per item of the fit panel, the training origins; every training window (past and
               future) lies in rows ``[0, train_end)``.
    train_end: per item of the fit panel, end (exclusive) of the training part: fit the scaler on
               rows ``[0, train_end)``, strictly before the first validation target.
    val:       per item of the validation panel (the fit panel, or ``val_panel``), the validation
               origins; None without validation.
    val_rows:  per item of the validation panel, its position in the fit panel (its scaler row);
               None without validation.
    """

    train: tuple[OriginRange, ...]
    train_end: tuple[int, ...]
    val: tuple[OriginRange, ...] | None
    val_rows: tuple[int, ...] | None


def split_panel(
    panel: Panel,
    context_length: int,
    prediction_length: int,
    *,
    val_windows: int | None = None,
    val_panel: Panel | None = None,
    skip_short: bool = False,
) -> Split:
    """Split ``panel`` by time.

    Without ``val_panel``: the last ``val_windows`` origins of each item are validation origins
    (default :func:`default_val_windows`: the windows whose targets are the item's last 10% of
    steps; 0 disables validation) and training uses the rows before the first validation target.
    With ``val_panel`` (e.g. canonicalised ``val_df``; same layout, series of ``panel`` only: a
    ``ValueError`` names others): training uses
    all of ``panel`` and validation the last ``val_windows`` origins of each ``val_panel`` item
    (default all of its windows).

    Raises ``ValueError`` for non-positive lengths and for a series too short to hold one training
    window plus its validation windows (naming the item, its length and the required length). A
    series is as long as its steps from its first observed one (a product launched late in a frame
    that holds NaN for it before is as short as it is without those rows).
    With ``skip_short`` (every fit, :func:`tsrec.fitting.prepare`: a statistical model fits such a
    series whole, a windowed one forecasts it from a padded window), such a series gets no training
    or validation window instead, and all of it is its training part.
    """
    context = check_int("context_length", context_length, 1)
    horizon = check_int("prediction_length", prediction_length, 1)
    one_window = f"context_length={context} + prediction_length={horizon}"
    if val_panel is None:
        explicit = None if val_windows is None else check_int("val_windows", val_windows, 0)
        train, ends, val = [], [], []
        for i, series in enumerate(panel.items):
            length = len(series) - series.first_observed
            windows = default_val_windows(length, horizon) if explicit is None else explicit
            extra = horizon + windows - 1 if windows else 0
            reason = one_window + (f" + {extra} for {windows} validation windows" if windows else "")
            if skip_short and length < context + horizon + extra:
                train.append((context, context))  # no window: too short for one
                ends.append(len(series))
                val.append((len(series), len(series)))
                continue
            _require_length(panel, i, context + horizon + extra, reason)
            end = len(series) - extra
            train.append((context, end - horizon + 1))
            ends.append(end)
            val.append((end, end + windows))
        if explicit == 0:
            return Split(train=tuple(train), train_end=tuple(ends), val=None, val_rows=None)
        return Split(train=tuple(train), train_end=tuple(ends), val=tuple(val), val_rows=tuple(range(len(ends))))
    if unknown := sorted(set(val_panel.item_ids) - set(panel.item_ids)):
        shown = f"{unknown[:5]}{' ...' if len(unknown) > 5 else ''}"
        raise ValueError(
            f"val_df holds {len(unknown)} series the fit frame does not ({shown}): "
            "val_df validates the model on later steps of the series it is fitted on, each scaled with its "
            "statistics from the fit frame; drop them from val_df, or give their earlier steps to fit as well")
    rows = panel.check_compatible(val_panel)
    windows = None if val_windows is None else check_int("val_windows", val_windows, 1)
    for i in range(len(panel.items)):
        _require_length(panel, i, context + horizon, one_window)
    extra = 0 if windows is None else windows - 1
    reason = one_window + (f" + {extra} for val_windows={windows}" if extra else "")
    val = []
    for i, series in enumerate(val_panel.items):
        _require_length(val_panel, i, context + horizon + extra, reason)
        stop = len(series) - horizon + 1
        val.append((context if windows is None else stop - windows, stop))
    return Split(
        train=tuple((context, len(s) - horizon + 1) for s in panel.items),
        train_end=tuple(len(s) for s in panel.items),
        val=tuple(val),
        val_rows=tuple(int(r) for r in rows),
    )


def _require_length(panel: Panel, position: int, needed: int, reason: str) -> None:
    series = panel.items[position]
    length = len(series) - series.first_observed
    if length < needed:
        since = " from its first observed value" if length < len(series) else ""
        raise SeriesTooShort(
            f"{panel.item_label(position)} has {length} time steps{since} but {reason} needs at least "
            f"{needed}; use a shorter context_length or prediction_length, fewer val_windows, or "
            "drop the short series"
        )
