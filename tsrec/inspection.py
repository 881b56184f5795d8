"""What an RSA model learned, as a table: gates and REM parameters with their meaning in time."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from tsrec.data import step_duration
from tsrec.models.base import ForecastModel

KIND_NAMES = {0: "regular", 1: "cos", 2: "sin"}
GATE_COLUMNS = ["layer", "attention", "head", "kind", "dilated", "gate", "lambda", "gamma", "theta", "dilation",
                "half_life_steps", "period_steps", "half_life", "period", "steps_per_token"]


def _duration(step: pd.Timedelta | None, steps: float) -> pd.Timedelta:
    """``steps`` steps of ``step`` as a duration, rounded to the millisecond (NaT without a fixed step)."""
    if step is None or not np.isfinite(steps):
        return pd.NaT
    return pd.Timedelta(seconds=round(step.total_seconds() * steps, 3))


def gate_table(model: ForecastModel, freq: str | None = None) -> pd.DataFrame:
    """One row per REM head of every RSA layer of ``model``.

    Columns: ``layer`` (index within its attention kind), ``attention`` (``"encoder self"``,
    ``"decoder self"``, ``"cross"``), ``head``, ``kind`` (regular, cos, sin), ``dilated``,
    ``gate`` (``sigmoid(mu)`` of the layer, or of the head with per-head gates), ``lambda``,
    ``gamma``, ``theta`` (NaN where the head has no such parameter), ``dilation`` (in tokens);
    the decay half-life ``ln(1/2) / ln|lambda or gamma| * dilation * steps_per_token`` and the
    cycle period ``2 pi / |theta| * dilation * steps_per_token``, in the data's steps
    (``half_life_steps``, ``period_steps``) and, for fixed-length ``freq``, as durations
    (``half_life``, ``period``); ``steps_per_token`` (``model.steps_per_token``: 1, or
    PatchTST's stride, whose REM parameters act on patch lags). Empty (with these columns) for a
    model without RSA.
    """
    step = None if freq is None else step_duration(freq)
    per_token = model.steps_per_token  # REM lags are in tokens; the table reports steps
    rows = []
    for attention, index, layer in model.rsa_layers():
        params = layer.rsa.rem.head_parameters()
        gates = layer.rsa.gate.values()
        for head in range(len(params["kind"])):
            kind = int(params["kind"][head])
            dilation = int(params["dilation"][head])
            magnitude = abs(float(params["lambda"][head] if kind == 0 else params["gamma"][head]))
            theta = float(params["theta"][head])
            span = dilation * per_token  # steps per power of the REM coefficient
            half_life = math.log(0.5) / math.log(magnitude) * span if 0.0 < magnitude < 1.0 else math.inf
            period = 2 * math.pi / abs(theta) * span if kind != 0 and theta != 0 else math.nan
            rows.append({
                "layer": index,
                "attention": attention,
                "head": head,
                "kind": KIND_NAMES[kind],
                "dilated": dilation > 1,
                "gate": float(gates[head if gates.numel() > 1 else 0]),
                "lambda": float(params["lambda"][head]),
                "gamma": float(params["gamma"][head]),
                "theta": theta,
                "dilation": dilation,
                "half_life_steps": half_life,
                "period_steps": period,
                "half_life": _duration(step, half_life),
                "period": _duration(step, period),
                "steps_per_token": per_token,
            })
    return pd.DataFrame(rows, columns=GATE_COLUMNS)
