"""Figures of what an RSA forecaster learned and how well it forecasts.

Every function returns a :class:`matplotlib.figure.Figure` built directly (never through
``pyplot``): nothing is shown, no global backend is touched, and figures are freed with their
last reference. Save one with ``fig.savefig("gates.png")`` (PNG, SVG, PDF).

- :func:`plot_gates`: the learned gates ``sigmoid(mu)`` per RSA layer (or head), the REM heads'
  decay half-lives and cycle periods in the data's own units (one marker per head), and a caption
  saying what a gate is.
- :func:`plot_rem`: the REM kernels of one layer, as weight-by-lag curves and as matrices.
- :func:`plot_gate_history`: the gates per epoch, from the Lightning CSV log.
- :func:`plot_forecast`: history, forecast, interval bands and the truth after the origin, one panel per item.
- :func:`plot_backtest`: MSE and MAE per horizon step of a backtest, beside its baselines'.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator, NullLocator

__all__ = ["plot_gates", "plot_rem", "plot_gate_history", "plot_forecast", "plot_backtest"]

ATTENTIONS = ("encoder self", "decoder self", "cross")
COLORS = {"encoder self": "tab:blue", "decoder self": "tab:orange", "cross": "tab:green"}
GATE_LABEL = "gate sigmoid(mu)"


# ---------------------------------------------------------------------------------------- gates
def _gate_frame(source: Any) -> pd.DataFrame:
    """The gate table (:func:`tsrec.inspection.gate_table` columns) of a Forecaster, a model or a table."""
    if isinstance(source, pd.DataFrame):
        table = source
    elif hasattr(source, "gates"):
        table = source.gates()
    elif hasattr(source, "rsa_layers"):
        from tsrec.inspection import gate_table

        table = gate_table(source)
    else:
        raise TypeError("expected a fitted Forecaster, a ForecastModel or the DataFrame of Forecaster.gates(), "
                        f"got {type(source).__name__}")
    missing = {"attention", "layer", "head", "gate"} - set(table.columns)
    if missing:
        raise ValueError(f"the gate table lacks columns {sorted(missing)}; pass Forecaster.gates()")
    if table.empty:
        raise ValueError("the model has no RSA layers, so there are no gates to plot; use an rsa_* model")
    return table


def _layer_groups(table: pd.DataFrame) -> list[tuple[str, int, pd.DataFrame]]:
    """``(attention, layer, rows)`` in the order encoder self, decoder self, cross; layers ascending."""
    rank = {name: i for i, name in enumerate(ATTENTIONS)}
    keys = sorted({(a, int(i)) for a, i in zip(table["attention"], table["layer"])},
                  key=lambda k: (rank.get(k[0], len(rank)), k[0], k[1]))
    return [(a, i, table[(table["attention"] == a) & (table["layer"] == i)].sort_values("head")) for a, i in keys]


def _offsets(n: int, width: float) -> np.ndarray:
    """``[n]`` x offsets of ``n`` bars sharing ``width`` around their group's centre."""
    return (np.arange(n) - (n - 1) / 2) * width / n


#: What a gate is, by the RSA mix (``RSAConfig.mix``): the caption line of the gate figure.
GATE_CAPTIONS = {
    "gate": "A gate sigmoid(mu) is the share of a layer's attention output that comes from its REM term, the learned "
            "recurrence (decays and cycles), instead of softmax attention: 0 is plain attention, 1 is recurrence only.",
    "bias": "A gate sigmoid(mu) scales how strongly a layer's REM, the learned recurrence (decays and cycles), biases "
            "its attention scores before the softmax: 0 is plain attention.",
}


def plot_gates(source: Any, *, per_head: bool | None = None, rem_panel: bool = True,
               data_periods: Sequence[float] | None = None) -> Figure:
    """Bar chart of the learned gates ``sigmoid(mu)`` of every RSA layer, with a caption saying what a gate is.

    Args:
        source: a fitted :class:`~tsrec.Forecaster`, a model with ``rsa_layers()``, or the frame
            of :meth:`Forecaster.gates` (one row per REM head).
        per_head: one bar per head (per-head gates) instead of one per layer; None decides from
            the table (per head when the heads of a layer have different gates).
        rem_panel: add a second panel with each REM head's decay half-life and cycle period, in
            the data's own units (:func:`tsrec.inspection.time_unit` of the table's
            ``attrs["freq"]``: hours for hourly data, days for daily, quarters for quarterly;
            steps for a table without it, e.g. one read back from a CSV file).
        data_periods: the data's own cycle lengths in steps, marked on the REM panel. None: a
            fitted Forecaster's ``data_facts.periods`` (the cycles found in its training part);
            unknown for a model or a table (the panel's title says which: "no cycle in the
            data" when there are none, "data periods unknown" when none were given).

    Returns:
        A figure whose first axes hold the bars (one group per layer, ticks "<attention>\\nlayer
        <i>", y in [0, 1], coloured by attention) and, with ``rem_panel``, second axes on a log
        axis with one marker per REM head (a cycle head's sin twin, which shares its decay and
        period, is left out) at its layer's x: "decay half-life" and "cycle period" for heads
        that training moved (or whose start is unknown), hollow "... (start, not moved)" for
        heads still within 5% of their start (the table's ``moved`` column), and one dashed
        horizontal line "data period <value> <unit>" per data period; the axis ends at ticks
        above and below every marker. Heads that do not decay (an infinite half-life) are
        counted in the panel's title, not drawn. The last line of the figure says what a gate is.
    """
    table = _gate_frame(source)
    if data_periods is None:
        facts = getattr(source, "data_facts", None)
        data_periods = None if facts is None else facts.periods
    groups = _layer_groups(table)
    if per_head is None:
        per_head = any(rows["gate"].nunique() > 1 for _, _, rows in groups)
    fig = Figure(figsize=(max(6.5, 1.4 * len(groups) + 2.5), 7.4 if rem_panel else 4.4), layout="constrained")
    axes = fig.subplots(2 if rem_panel else 1, 1, sharex=True, squeeze=False)[:, 0]
    bars = axes[0]
    width = 0.8
    for g, (attention, layer, rows) in enumerate(groups):
        heads = len(rows) if per_head else 1
        bars.bar(g + _offsets(heads, width), rows["gate"].to_numpy()[:heads], width=width / heads,
                 color=COLORS.get(attention, "tab:grey"), edgecolor="black", linewidth=0.5)
    bars.set_ylim(0.0, 1.0)
    bars.set_ylabel(GATE_LABEL)
    bars.set_title("RSA gates: weight of the REM term per " + ("head" if per_head else "layer"))
    present = [a for a in ATTENTIONS if any(a == att for att, _, _ in groups)]
    bars.legend(handles=[Patch(color=COLORS[a], label=a) for a in present], loc="upper left",
                bbox_to_anchor=(1.01, 1.0), fontsize="small")  # beside the bars, which may reach 1
    axes[-1].set_xticks(range(len(groups)), [f"{attention}\nlayer {layer}" for attention, layer, _ in groups])
    if rem_panel:
        heads = [rows[rows["kind"] != "sin"] if "kind" in rows else rows for _, _, rows in groups]  # no sin twins
        x = np.concatenate([g + _offsets(len(rows), width) for g, rows in enumerate(heads)])
        from tsrec.inspection import time_unit

        unit, per_step = time_unit(table.attrs.get("freq"))
        _rem_panel(axes[1], pd.concat(heads), x, per_step, unit, data_periods=data_periods)
    mixes = set(table["mix"]) if "mix" in table else {"gate"}
    fig.supxlabel(" ".join(GATE_CAPTIONS.get(mix, "") for mix in sorted(mixes)), fontsize="small", wrap=True)
    return fig


def _rem_panel(ax: Any, rows: pd.DataFrame, x: np.ndarray, factor: float, unit: str, *,
               data_periods: Sequence[float] | None) -> None:
    """The REM heads' half-lives and periods of ``rows`` at ``x [heads]``, in ``unit`` (``factor``
    units per step), hollow where the head did not move from its start; the data's periods (steps)
    as dashed lines (None: unknown, said in the title). The log axis ends at the ticks around every value."""
    not_moved = rows["moved"].eq(False).fillna(False).to_numpy(dtype=bool) if "moved" in rows else \
        np.zeros(len(rows), bool)  # unknown (no start) counts as moved
    drawn = [period * factor for period in data_periods or ()]
    no_decay = 0
    for column, marker, color, label in (("half_life_steps", "o", "black", "decay half-life"),
                                         ("period_steps", "^", "tab:red", "cycle period")):
        if column not in rows:
            continue
        y = pd.to_numeric(rows[column], errors="coerce").to_numpy(dtype=float) * factor  # [heads]
        shown = np.isfinite(y) & (y > 0)
        if column == "half_life_steps":
            no_decay = int(np.isinf(y).sum())
        drawn.extend(y[shown])
        for still, suffix, face in ((False, "", color), (True, " (start, not moved)", "none")):
            keep = shown & (not_moved == still)
            if keep.any():
                ax.plot(x[keep], y[keep], linestyle="none", marker=marker, color=color, markerfacecolor=face,
                        alpha=0.8, label=label + suffix)
    for k, period in enumerate(data_periods or ()):
        ax.axhline(period * factor, color="tab:purple", linestyle=("--", ":", "-.")[k % 3], linewidth=1.0,
                   label=f"data period {period * factor:.4g} {unit}")
    ax.set_yscale("log")
    if drawn:
        ticks = _log_ticks(min(drawn), max(drawn))
        ax.set_yticks(ticks, [f"{t:g}" for t in ticks])
        ax.yaxis.set_minor_locator(NullLocator())
        ax.set_ylim(ticks[0], ticks[-1])
    ax.set_ylabel(unit)
    note = " (data periods unknown)" if data_periods is None else "" if data_periods else " (no cycle in the data)"
    if no_decay:
        note += f"; {no_decay} head{'s' if no_decay > 1 else ''} without decay not drawn"
    ax.set_title("REM heads: decay half-lives and cycle periods" + note)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")


def _log_ticks(low: float, high: float) -> list[float]:
    """Ticks 1, 2, 5 x 10^k from the largest at or below ``low`` to the smallest at or above
    ``high`` (``0 < low <= high``): a log axis between the end ones holds every value."""
    ticks = [m * 10.0**k for k in range(math.floor(math.log10(low)) - 1, math.ceil(math.log10(high)) + 1)
             for m in (1, 2, 5)]
    first = max(t for t in ticks if t <= low * (1 + 1e-9))
    last = min(t for t in ticks if t >= high * (1 - 1e-9))
    return [t for t in ticks if first <= t <= last]


# ---------------------------------------------------------------------------------------- REM
def _model_of(source: Any) -> Any:
    model = getattr(source, "model", source)
    if model is None:
        from sklearn.exceptions import NotFittedError

        raise NotFittedError("the forecaster is not fitted yet: fit it, or Forecaster.load a saved one")
    if not hasattr(model, "rsa_layers"):
        raise TypeError(f"expected a fitted Forecaster or a ForecastModel, got {type(source).__name__}")
    return model


def _head_label(head: int, kind: int, dilation: int) -> str:
    name = ("regular", "cos", "sin")[kind]
    return f"h{head} {name}" + (f" d={dilation}" if dilation > 1 else "")


def plot_rem(source: Any, layer: int = 0, attention: str = "encoder self", *, max_lag: int | None = None,
             columns: int = 4, channel: int = 0) -> Figure:
    """The REM kernels of one RSA layer: ``f(lag)`` per head, and each head's matrix ``P``.

    Args:
        source: a fitted Forecaster or a model with ``rsa_layers()``.
        layer: layer index within ``attention``.
        attention: ``"encoder self"``, ``"decoder self"`` or ``"cross"``.
        max_lag: largest lag drawn (default: the model's ``context_length``); the matrices are
            ``[max_lag + 1, max_lag + 1]``, entry ``(i, j) = f(i - j)``.
        columns: matrices per row.
        channel: whose REMs to draw where each channel has its own (``rsa.per_channel``).

    Returns:
        A figure whose first axes hold one curve per head (weight against lag ``1..max_lag``,
        labelled ``h<i> <kind>[ d=<dilation>]``), followed by one ``imshow`` axes per head and a
        colour bar (weights in [-1, 1]).
    """
    import torch

    model = _model_of(source)
    layers = model.rsa_layers()
    match = [entry for entry in layers if entry[0] == attention and entry[1] == layer]
    if not match:
        known = ", ".join(f"({a!r}, {i})" for a, i, _ in layers) or "none: the model has no RSA layers"
        raise ValueError(f"no RSA layer {layer} in {attention!r} attention; (attention, layer) pairs: {known}")
    rsa = match[0][2].rsa
    max_lag = int(max_lag or model.config.context_length)
    if max_lag < 1:
        raise ValueError(f"max_lag must be a positive int, got {max_lag!r}")
    params = rsa.rem.head_parameters()
    gates = rsa.gate.values()
    with torch.no_grad():
        lags = torch.arange(1, max_lag + 1, device=rsa.rem.dilation.device).unsqueeze(0)  # [1, max_lag]
        which = torch.tensor([channel], device=lags.device) if rsa.rem.per_channel else None  # [1]
        kernels = rsa.rem.entries(lags, which).reshape(-1, max_lag).float().cpu().numpy()  # [H, max_lag]
        matrices = rsa.rem.matrix(max_lag + 1, channel=which).reshape(-1, max_lag + 1, max_lag + 1)  # [H, L, L]
        matrices = matrices.float().cpu().numpy()
    heads = kernels.shape[0]
    labels = [_head_label(h, int(params["kind"][h]), int(params["dilation"][h])) for h in range(heads)]
    columns = max(1, min(columns, heads))
    rows = -(-heads // columns)
    fig = Figure(figsize=(2.6 * columns + 1, 3.2 + 2.4 * rows), layout="constrained")
    grid = fig.add_gridspec(1 + rows, columns, height_ratios=[1.5] + [1.0] * rows)
    curves = fig.add_subplot(grid[0, :])
    for h in range(heads):
        curves.plot(np.arange(1, max_lag + 1), kernels[h], label=labels[h], linewidth=1.2)
    curves.axhline(0.0, color="grey", linewidth=0.5)
    curves.set_xlabel("lag (steps)")
    curves.set_ylabel("REM weight f(lag)")
    gate = f"gate {float(gates[0]):.2f}" if gates.numel() == 1 else "per-head gates " + \
        " ".join(f"{float(g):.2f}" for g in gates)
    curves.set_title(f"{attention} layer {layer}: REM kernels ({gate})")
    curves.legend(fontsize="x-small", ncol=min(4, heads), loc="upper right")
    image_axes = []
    for h in range(heads):
        ax = fig.add_subplot(grid[1 + h // columns, h % columns])
        image = ax.imshow(matrices[h], cmap="RdBu_r", vmin=-1.0, vmax=1.0, interpolation="nearest")
        ax.set_title(labels[h], fontsize="small")
        ax.set_xlabel("key j", fontsize="x-small")
        ax.set_ylabel("query i", fontsize="x-small")
        image_axes.append(ax)
    fig.colorbar(image, ax=image_axes, label="P[i, j] = f(i - j)", shrink=0.8)
    return fig


# ---------------------------------------------------------------------------------------- gate history
def _metrics_csv(source: Any) -> Path:
    """The Lightning ``metrics.csv`` of a path to it, of an output directory, or of a Forecaster."""
    if not isinstance(source, (str, os.PathLike)):
        if not hasattr(source, "output_dir"):
            raise TypeError(f"expected a metrics.csv path, an output directory or a fitted Forecaster, "
                            f"got {type(source).__name__}")
        if source.output_dir is None:
            raise ValueError("this Forecaster has no output_dir with training logs (it was fitted, or saved by an "
                             "older tsrec, without output_dir); fit with output_dir=... to keep its logs, or pass "
                             "the output directory it was trained with")
        source = source.output_dir
    path = Path(source)
    if path.is_file():
        return path
    if not path.is_dir():
        raise FileNotFoundError(f"{path} does not exist; pass a metrics.csv file or a training output directory")
    if (path / "metrics.csv").is_file():
        return path / "metrics.csv"
    found = [p for pattern in ("logs/version_*/metrics.csv", "version_*/metrics.csv") for p in path.glob(pattern)]
    if not found:
        raise FileNotFoundError(f"no Lightning metrics.csv under {path} (looked for logs/version_*/metrics.csv); "
                                "train with the default CSV logger, i.e. without trainer_kwargs={'logger': False}")
    return max(found, key=lambda p: int(re.sub(r"\D", "", p.parent.name) or 0))


def plot_gate_history(source: Any) -> Figure:
    """The gates per epoch, from the ``gate/<attention>_<layer>[_h<head>]`` columns of Lightning's CSV log.

    Args:
        source: a ``metrics.csv`` path, a training output directory (its latest
            ``logs/version_*/metrics.csv`` is read) or a fitted Forecaster (its ``output_dir``).

    Returns:
        A figure with one axes: one line per gate (x: epoch, 1-based as in
        ``Forecaster.training_summary``; y: ``sigmoid(mu)`` in [0, 1]), coloured by attention.
        Gates are logged at the end of every training epoch; a directory's latest log is its last
        run's, the refit on all the history when there was one.
    """
    path = _metrics_csv(source)
    frame = pd.read_csv(path)
    gate_columns = [c for c in frame.columns if c.startswith("gate/")]
    if not gate_columns:
        raise ValueError(f"{path} has no gate/ columns: the model has no RSA layers (gates are logged at the end "
                         "of every training epoch of an RSA model)")
    if "epoch" not in frame:
        raise ValueError(f"{path} has no 'epoch' column; is it a Lightning CSVLogger metrics.csv?")

    def attention_of(column: str) -> str:
        name = column.removeprefix("gate/")
        return next((a for a in ATTENTIONS if name.startswith(a.replace(" ", "_"))), "")

    gate_columns.sort(key=lambda c: (ATTENTIONS.index(a) if (a := attention_of(c)) else len(ATTENTIONS), c))
    per_epoch = frame.dropna(subset=gate_columns, how="all").groupby("epoch")[gate_columns].last()  # [E, G]
    fig = Figure(figsize=(7.0, 4.0), layout="constrained")
    ax = fig.add_subplot()
    styles = ("-", "--", ":", "-.")
    seen: dict[str, int] = {}
    for column in gate_columns:
        attention = attention_of(column)
        k = seen[attention] = seen.get(attention, -1) + 1  # k-th gate of this attention: its line style
        ax.plot(per_epoch.index + 1, per_epoch[column], marker="o", label=column.removeprefix("gate/").replace("_", " "),
                color=COLORS.get(attention), linestyle=styles[k % len(styles)])
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(0.0, 1.0)
    ax.set_xlabel("epoch")
    ax.set_ylabel(GATE_LABEL)
    ax.set_title("RSA gates during training")
    ax.legend(fontsize="small", ncol=1 + len(gate_columns) // 8)
    return fig


# ---------------------------------------------------------------------------------------- forecasts
def _central_bands(levels: dict[float, str]) -> list[tuple[str, str]]:
    """The central intervals among quantile columns, widest first: every pair ``(q, 1 - q)``
    present, else the lowest and highest column (nothing with fewer than two columns)."""
    by_level = {round(q, 9): column for q, column in levels.items()}
    pairs = [(column, by_level[round(1 - q, 9)]) for q, column in levels.items()
             if q < 0.5 and round(1 - q, 9) in by_level]
    if pairs or len(levels) < 2:
        return pairs
    return [(levels[min(levels)], levels[max(levels)])]


def _band_label(low: float, high: float, method: str | None) -> str:
    """A band's legend entry: its interval level where its quantiles are symmetric (0.1 and 0.9:
    "80% interval"), with the method that gave it, else its quantiles."""
    how = f" ({method})" if method else ""
    if abs(low + high - 1.0) < 1e-9:
        return f"{100 * (high - low):.4g}% interval{how}"
    return f"{low:g}-{high:g} quantiles{how}"


def _quantile_columns(frame: pd.DataFrame) -> dict[float, str]:
    """Quantile level -> column name for the columns named like ``"0.1"``."""
    levels = {}
    for column in frame.columns:
        try:
            level = float(column)
        except (TypeError, ValueError):
            continue
        if 0.0 < level < 1.0:
            levels[level] = column
    return dict(sorted(levels.items()))


def _history_series(history: pd.DataFrame, time_col: str | None, id_col: str | None,
                    target_col: str | None) -> dict[str, pd.Series]:
    """item_id (the wide frame's column, or the long frame's id) -> observed values on the time grid."""
    from tsrec.data import canonicalize

    # a plot only shows the data: a long gap is worth a warning, not an error
    panel = canonicalize(history, time_col=time_col, id_col=id_col, target_col=target_col, gaps="warn")
    out = {}
    for item in panel.items:
        names = panel.columns if panel.layout == "wide" else (item.item_id,)
        for c, name in enumerate(names):
            out[str(name)] = pd.Series(item.values[:, c], index=item.index)
    return out


def plot_forecast(history: pd.DataFrame, forecast: pd.DataFrame, *, item_id: str | Sequence[str] | None = None,
                  quantiles: tuple[Any, Any] | None = None, max_items: int = 4, history_steps: int | None = None,
                  time_col: str | None = None, id_col: str | None = None, target_col: str | None = None) -> Figure:
    """History, forecast mean and interval bands, and the values after the origin, one panel per item.

    Args:
        history: the observed data, as given to ``Forecaster.fit``: a wide frame (DatetimeIndex or
            ``time_col``, one column per variable; the columns are the item ids) or a long frame
            (``id_col``, ``time_col``, ``target_col``). Values from the forecast start on are drawn
            too, apart from the history (orange dots: the held-out truth the forecast is judged on).
        forecast: the frame of ``Forecaster.predict``: ``item_id``, ``timestamp``, ``mean`` and,
            when present, quantile columns (``"0.1"``, ``"0.9"``, ...), e.g. of
            ``predict(levels=[80, 95])``, whose ``attrs["intervals"]`` names the method in the legend.
        item_id: the item(s) to draw (default: the forecast's items in order, up to ``max_items``).
        quantiles: the two quantile columns bounding one shaded band (default: a band for every
            central interval present, ``0.1``-``0.9``, ``0.2``-``0.8``, ..., nested and darker
            inwards; else the lowest and highest column; no band without quantile columns).
        max_items: the most panels drawn.
        history_steps: observed steps drawn before the forecast start (default 4 horizons).

    Returns:
        A figure with one axes per item: the history line ("history"), the forecast mean line, a
        dashed vertical line at the forecast origin (the first forecast step, as a backtest's
        ``origin``), the bands (labelled by their interval, e.g. "80% interval (conformal)", or by
        their quantiles when not symmetric) and the observed values from the origin on ("actual
        after the origin"), when the history holds them.
    """
    method = forecast.attrs.get("intervals")
    missing = {"item_id", "timestamp", "mean"} - set(forecast.columns)
    if missing:
        raise ValueError(f"forecast lacks columns {sorted(missing)}; pass the frame of Forecaster.predict()")
    if max_items < 1:
        raise ValueError(f"max_items must be >= 1, got {max_items!r}")
    forecast = forecast.assign(item_id=forecast["item_id"].astype(str),
                               timestamp=pd.to_datetime(forecast["timestamp"]))
    available = list(dict.fromkeys(forecast["item_id"]))
    if item_id is None:
        items = available[:max_items]
    else:
        items = [str(item_id)] if isinstance(item_id, str) else [str(i) for i in item_id]
        unknown = [i for i in items if i not in available]
        if unknown:
            raise ValueError(f"item_id {unknown} not in the forecast; its items: {available[:10]}")
        items = items[:max_items]
    levels = _quantile_columns(forecast)
    if quantiles is None:
        bands = _central_bands(levels)
    else:
        band = tuple(levels.get(float(q)) for q in quantiles)
        if None in band:
            raise ValueError(f"quantiles {quantiles!r} are not all forecast columns; quantile columns: "
                             f"{list(levels.values())}")
        bands = [band]
    observed = _history_series(history, time_col, id_col, target_col)
    fig = Figure(figsize=(9.0, 2.6 * len(items) + 0.6), layout="constrained")
    axes = fig.subplots(len(items), 1, squeeze=False)[:, 0]
    for ax, item in zip(axes, items):
        part = forecast[forecast["item_id"] == item].sort_values("timestamp")
        start, end = part["timestamp"].iloc[0], part["timestamp"].iloc[-1]
        steps = history_steps if history_steps is not None else 4 * len(part)
        for depth, (low, high) in enumerate(bands):  # widest first, each inner band darker
            ax.fill_between(part["timestamp"], part[low], part[high], color="tab:blue", alpha=0.15 + 0.12 * depth,
                            linewidth=0, label=_band_label(float(low), float(high), method))
        if item in observed:
            series = observed[item]
            past = series[series.index < start].iloc[-steps:] if steps else series.iloc[:0]
            ax.plot(past.index, past.to_numpy(), color="black", linewidth=1.0, label="history")
            after = series[(series.index >= start) & (series.index <= end)].dropna()
            if len(after):
                ax.plot(after.index, after.to_numpy(), color="tab:orange", linewidth=0.8, marker="o", markersize=3,
                        label="actual after the origin")
        ax.plot(part["timestamp"], part["mean"], color="tab:blue", linewidth=1.5, label="forecast mean")
        ax.axvline(start, color="gray", linestyle="--", linewidth=1.0, label="forecast origin")
        locator = AutoDateLocator()
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(ConciseDateFormatter(locator))
        ax.set_ylabel(item)
        ax.legend(fontsize="x-small", loc="upper left")
    axes[0].set_title("Forecast" + (f" ({len(items)} of {len(available)} items)" if len(items) < len(available)
                                    else ""))
    axes[-1].set_xlabel("time")
    return fig


# ---------------------------------------------------------------------------------------- backtests
def plot_backtest(results: Any, *, units: str = "original") -> Figure:
    """MSE and MAE per horizon step of a backtest, the model's beside the baselines it computed.

    Args:
        results: a ``tsrec.evaluation.BacktestResult`` (anything with an ``.errors`` frame) or
            that tidy frame: ``step`` (1..H), ``y_true``, ``y_pred``, usually ``item_id`` and
            ``origin``, and the baselines' forecasts ``y_<baseline>`` (``y_naive``,
            ``y_seasonal_naive``, ``y_ets``, ...) where the backtest computed them. Rows without a
            true value (NaN, or ``observed`` False) are left out.
        units: ``"original"`` (``y_true``/``y_pred``) or ``"scaled"`` (``y_true_scaled``/
            ``y_pred_scaled``, the fitted scaler's units).

    Returns:
        A figure with two axes, MSE and MAE against the horizon step: the model's line first
        (solid, markers), then one dashed line per baseline, each labelled with its mean over
        the steps (weighted by the entries scored at each step).
    """
    errors = getattr(results, "errors", results)
    if not isinstance(errors, pd.DataFrame):
        raise TypeError(f"expected a BacktestResult or its errors DataFrame, got {type(results).__name__}")
    from tsrec.evaluation import BASELINES, step_errors

    per_step = step_errors(errors, units)
    if per_step.empty:
        raise ValueError("the backtest has no observed target values to score")
    suffix = "" if units == "original" else "_scaled"
    kept = [column for column in ("step", f"y_true{suffix}", "observed") if column in errors]
    baselines = {name.replace("_", " "): step_errors(errors[kept].assign(**{f"y_pred{suffix}": errors[column]}), units)
                 for name in BASELINES if (column := f"y_{name}{suffix}") in errors}
    windows = len(errors[["item_id", "origin"]].drop_duplicates()) if {"item_id", "origin"} <= set(errors) else None
    fig = Figure(figsize=(10.0, 3.8), layout="constrained")
    axes = fig.subplots(1, 2)
    dashes = ("--", ":", "-.", (0, (5, 1, 1, 1)), (0, (1, 1)), (0, (3, 1, 1, 1, 1, 1)))
    for ax, column, name in ((axes[0], "mse", "MSE"), (axes[1], "mae", "MAE")):
        for k, (label, frame) in enumerate({"model": per_step, **baselines}.items()):
            mean = float(np.average(frame[column], weights=frame["n"]))
            # baselines dashed, each narrower than the one before, so that equal ones (ets often
            # forecasts the last value, as naive does) stay visible on top of each other
            style = dict(marker="o", markersize=3, linewidth=1.6, color="tab:blue", zorder=3) if k == 0 else \
                dict(linestyle=dashes[(k - 1) % len(dashes)], linewidth=max(0.8, 2.6 - 0.5 * k), color=f"C{k}")
            ax.plot(frame["step"], frame[column].to_numpy(), label=f"{label} (mean {mean:.3g})", **style)
        ax.set_xlabel("horizon step")
        ax.set_ylabel(f"{name} ({units} units)")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.legend(fontsize="small")
    fig.suptitle("Backtest error by horizon step" + (f" ({windows} item-windows)" if windows else "")
                 + (", against the baselines" if baselines else ""))
    return fig
