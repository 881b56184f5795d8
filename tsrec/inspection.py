"""What an RSA model learned, as a table: gates and REM parameters with their meaning in time."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from tsrec.data import step_duration
from tsrec.models.base import ForecastModel

KIND_NAMES = {0: "regular", 1: "cos", 2: "sin"}
GATE_COLUMNS = ["layer", "attention", "head", "channel", "kind", "dilated", "mix", "gate", "lambda", "gamma", "theta",
                "dilation", "half_life_steps", "period_steps", "half_life", "period", "steps_per_token"]
CHANNEL_VIEWS = ("median", "each")


def _duration(step: pd.Timedelta | None, steps: float) -> pd.Timedelta:
    """``steps`` steps of ``step`` as a duration, rounded to the millisecond (NaT without a fixed step)."""
    if step is None or not np.isfinite(steps):
        return pd.NaT
    return pd.Timedelta(seconds=round(step.total_seconds() * steps, 3))


def _channel_views(params: dict, channels: str) -> list[tuple[object, dict]]:
    """``(channel, per-head parameters [H])`` for the table: the shared REM's once (channel NA), or
    for per-channel REMs (``[C, H]``) each channel's, or their median over the channels (NA)."""
    if params["lambda"].dim() == 1:
        return [(pd.NA, params)]
    if channels == "each":
        return [(c, {**params, **{k: params[k][c] for k in ("lambda", "gamma", "theta")}})
                for c in range(params["lambda"].shape[0])]
    return [(pd.NA, {**params, **{k: params[k].median(dim=0).values for k in ("lambda", "gamma", "theta")}})]


def gate_table(model: ForecastModel, freq: str | None = None, *, channels: str = "median") -> pd.DataFrame:
    """One row per REM head of every RSA layer of ``model``.

    Columns: ``layer`` (index within its attention kind), ``attention`` (``"encoder self"``,
    ``"decoder self"``, ``"cross"``), ``head``, ``channel`` (see below), ``kind`` (regular, cos,
    sin), ``dilated``, ``mix`` (``RSAConfig.mix``: ``"gate"``, the gate weighs the REM term after
    the softmax; ``"bias"``, the gate scales the REM's log-envelope bias before it), ``gate``
    (``sigmoid(mu)`` of the layer, or of the head with per-head gates), ``lambda``,
    ``gamma``, ``theta`` (NaN where the head has no such parameter), ``dilation`` (in tokens);
    the decay half-life ``ln(1/2) / ln|lambda or gamma| * dilation * steps_per_token`` and the
    cycle period ``2 pi / |theta| * dilation * steps_per_token``, in the data's steps
    (``half_life_steps``, ``period_steps``) and, for fixed-length ``freq``, as durations
    (``half_life``, ``period``); ``steps_per_token`` (``model.steps_per_token``: 1, or
    PatchTST's stride, whose REM parameters act on patch lags). Empty (with these columns) for a
    model without RSA.

    REMs shared by the channels have ``channel`` NA. Per-channel REMs (``rsa.per_channel``) give,
    with ``channels="median"``, one row per head with the median of ``lambda``, ``gamma`` and
    ``theta`` over the channels (``channel`` NA), or with ``channels="each"`` one row per head and
    channel (``channel`` its index among the targets).
    """
    if channels not in CHANNEL_VIEWS:
        raise ValueError(f"channels must be one of {CHANNEL_VIEWS}, got {channels!r}")
    step = None if freq is None else step_duration(freq)
    per_token = model.steps_per_token  # REM lags are in tokens; the table reports steps
    rows = []
    for attention, index, layer in model.rsa_layers():
        gates = layer.rsa.gate.values()
        for channel, params in _channel_views(layer.rsa.rem.head_parameters(), channels):
            for head in range(len(params["kind"])):
                rows.append({"layer": index, "attention": attention, "head": head, "channel": channel,
                             "mix": layer.rsa.config.mix, "gate": float(gates[head if gates.numel() > 1 else 0]),
                             **_head_row(params, head, per_token, step)})
    return pd.DataFrame(rows, columns=GATE_COLUMNS).astype({"channel": "Int64"})


def _head_row(params: dict, head: int, per_token: int, step: pd.Timedelta | None) -> dict:
    """The REM columns of one head (its kind, parameters, half-life and period)."""
    kind = int(params["kind"][head])
    dilation = int(params["dilation"][head])
    magnitude = abs(float(params["lambda"][head] if kind == 0 else params["gamma"][head]))
    theta = float(params["theta"][head])
    span = dilation * per_token  # steps per power of the REM coefficient
    half_life = math.log(0.5) / math.log(magnitude) * span if 0.0 < magnitude < 1.0 else math.inf
    period = 2 * math.pi / abs(theta) * span if kind != 0 and theta != 0 else math.nan
    return {
        "kind": KIND_NAMES[kind],
        "dilated": dilation > 1,
        "lambda": float(params["lambda"][head]),
        "gamma": float(params["gamma"][head]),
        "theta": theta,
        "dilation": dilation,
        "half_life_steps": half_life,
        "period_steps": period,
        "half_life": _duration(step, half_life),
        "period": _duration(step, period),
        "steps_per_token": per_token,
    }
