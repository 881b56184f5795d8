"""What an RSA model learned, as a table: gates and REM parameters with their meaning in time."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch

from pandas.tseries.frequencies import to_offset

from tsrec.data import step_duration
from tsrec.data.calendar import Calendar
from tsrec.models.base import ForecastModel, ModelConfig

KIND_NAMES = {0: "regular", 1: "cos", 2: "sin"}
GATE_COLUMNS = ["layer", "attention", "head", "channel", "kind", "dilated", "undilated", "mix", "gate", "lambda",
                "gamma", "theta", "dilation", "half_life_steps", "period_steps", "half_life", "period",
                "steps_per_token", "gate_start", "half_life_start_steps", "period_start_steps", "moved"]
CHANNEL_VIEWS = ("median", "each")
#: Relative change of a head's timescale (its cycle period, or the half-life of a regular head) or
#: of its gate beyond which ``gate_table`` counts the head as moved by training.
MOVED_TOLERANCE = 0.05
#: The units of fixed-length steps, longest first: a step is told in the longest unit it fills.
_FIXED_UNITS = (("days", pd.Timedelta("1D")), ("hours", pd.Timedelta("1h")), ("minutes", pd.Timedelta("1min")),
                ("seconds", pd.Timedelta("1s")))
#: The units of calendar steps, by the offset's kind.
_CALENDAR_UNITS = (((pd.offsets.Week,), "weeks"), ((pd.offsets.MonthBegin, pd.offsets.MonthEnd), "months"),
                   ((pd.offsets.QuarterBegin, pd.offsets.QuarterEnd), "quarters"),
                   ((pd.offsets.YearBegin, pd.offsets.YearEnd), "years"), ((pd.offsets.BusinessDay,), "business days"))


def time_unit(freq: str | None) -> tuple[str, float]:
    """The unit a model's timescales are told in for data at ``freq``, and how many of it one step
    is: the step's own unit (``"h"`` -> hours, ``"15min"`` -> minutes, ``"D"`` -> days, ``"2h"`` ->
    2 hours a step), the calendar's for calendar steps (weeks, months, quarters, years, business
    days), else ``("steps", 1.0)`` (a session, whose steps skip its closed hours, or no ``freq``).
    The console (``tsrec``'s gate lines) and the figures (:func:`tsrec.plotting.plot_gates`) use it alike."""
    calendar = None if freq is None else Calendar.of(freq)
    if calendar is None or calendar.session is not None:
        return "steps", 1.0
    offset = to_offset(calendar.step)
    step = step_duration(calendar)
    if step is not None:
        name, unit = next(((name, unit) for name, unit in _FIXED_UNITS if step >= unit), _FIXED_UNITS[-1])
        return name, step / unit
    return next(((name, float(offset.n)) for kinds, name in _CALENDAR_UNITS if isinstance(offset, kinds)),
                ("steps", 1.0))


def _duration(step: pd.Timedelta | None, steps: float) -> pd.Timedelta | np.timedelta64:
    """``steps`` steps of ``step`` as a duration, rounded to the millisecond (a duration's NaT
    without a fixed step, so that a column of them stays durations, never datetimes)."""
    if step is None or not np.isfinite(steps):
        return np.timedelta64("NaT", "ns")
    return pd.Timedelta(seconds=round(step.total_seconds() * steps, 3))


def lag_frequency(theta: float) -> float:
    """The angular frequency in ``[0, pi]`` that ``cos(p * theta)`` and ``sin(p * theta)`` show at
    integer powers ``p``: ``theta`` folded by ``2 pi`` and reflected at ``pi``. A REM is only ever
    evaluated at integer lags, so a ``theta`` above the Nyquist limit ``pi`` (a period under 2
    tokens) encodes the cycle of ``2 pi - theta`` (the sin head with its sign flipped)."""
    return abs(math.remainder(theta, 2 * math.pi))


def _timescales(kind: int, magnitude: float, theta: float, span: int) -> tuple[float, float]:
    """``(half-life, period)`` in steps of a head whose coefficient has ``magnitude`` (``|lambda|``
    or ``gamma``) and angle ``theta`` per power, one power being ``span`` steps. The half-life is
    infinite for a magnitude of 1 or more, the period NaN for a regular head and infinite for a
    cyclical head whose lag frequency is 0 (a pure decay)."""
    half_life = math.log(0.5) / math.log(magnitude) * span if 0.0 < magnitude < 1.0 else math.inf
    if kind == 0:
        return half_life, math.nan
    frequency = lag_frequency(theta)
    return half_life, 2 * math.pi / frequency * span if frequency > 0 else math.inf


def _changed(end: float, start: float) -> bool:
    """Relative change above :data:`MOVED_TOLERANCE` (infinite or equal values: unchanged)."""
    if not (np.isfinite(end) and np.isfinite(start)):
        return end != start and not (np.isnan(end) and np.isnan(start))
    return abs(end - start) > MOVED_TOLERANCE * abs(start)


def _channel_views(params: dict, channels: str) -> list[tuple[object, dict]]:
    """``(channel, per-head parameters [H])`` for the table: the shared REM's once (channel NA), or
    for per-channel REMs (``[C, H]``) each channel's, or their median over the channels (NA)."""
    if params["lambda"].dim() == 1:
        return [(pd.NA, params)]
    if channels == "each":
        return [(c, {**params, **{k: params[k][c] for k in ("lambda", "gamma", "theta")}})
                for c in range(params["lambda"].shape[0])]
    return [(pd.NA, {**params, **{k: params[k].median(dim=0).values for k in ("lambda", "gamma", "theta")}})]


def _head_rows(model: ForecastModel, channels: str) -> list[dict]:
    """Per REM head (and channel, :func:`_channel_views`): its layer, kind, mix, gate, parameters
    and timescales in steps."""
    per_token = model.steps_per_token  # REM lags are in tokens; the table reports steps
    rows = []
    for attention, index, layer in model.rsa_layers():
        gates = layer.rsa.gate.values()
        made_plain = layer.rsa.config.undilated_heads()
        for channel, params in _channel_views(layer.rsa.rem.head_parameters(), channels):
            for head in range(len(params["kind"])):
                kind = int(params["kind"][head])
                dilation = int(params["dilation"][head])
                magnitude = abs(float(params["lambda"][head] if kind == 0 else params["gamma"][head]))
                theta = float(params["theta"][head])
                half_life, period = _timescales(kind, magnitude, theta, dilation * per_token)
                rows.append({
                    "layer": index,
                    "attention": attention,
                    "head": head,
                    "channel": channel,
                    "kind": KIND_NAMES[kind],
                    "dilated": dilation > 1,
                    "undilated": made_plain[head],
                    "mix": layer.rsa.config.mix,
                    "gate": float(gates[head if gates.numel() > 1 else 0]),
                    "lambda": float(params["lambda"][head]),
                    "gamma": float(params["gamma"][head]),
                    "theta": theta,
                    "dilation": dilation,
                    "half_life_steps": half_life,
                    "period_steps": period,
                    "steps_per_token": per_token,
                })
    return rows


def gate_table(model: ForecastModel, freq: str | None = None, *, channels: str = "median",
               start: ForecastModel | None = None) -> pd.DataFrame:
    """One row per REM head of every RSA layer of ``model``.

    Columns: ``layer`` (index within its attention kind), ``attention`` (``"encoder self"``,
    ``"decoder self"``, ``"cross"``), ``head``, ``channel`` (see below), ``kind`` (regular, cos,
    sin), ``dilated``, ``undilated`` (a head set as dilated that resolution made plain, because
    its dilation was longer than the ``RSAConfig.max_lag`` lags the attention sees: its REM would
    have been zero at every lag, :meth:`tsrec.config.RSAConfig.within`), ``mix``
    (``RSAConfig.mix``: ``"gate"``, the gate weighs the REM term after the softmax; ``"bias"``, the
    gate scales the REM's log-envelope bias before it), ``gate``
    (``sigmoid(mu)`` of the layer, or of the head with per-head gates), ``lambda``,
    ``gamma``, ``theta`` (NaN where the head has no such parameter), ``dilation`` (in tokens);
    the decay half-life ``ln(1/2) / ln|lambda or gamma| * dilation * steps_per_token`` and the
    cycle period ``2 pi / lag_frequency(theta) * dilation * steps_per_token`` (the cycle the REM
    shows at its integer lags, :func:`lag_frequency`), in the data's steps (``half_life_steps``,
    ``period_steps``) and, for fixed-length ``freq`` (not a session, whose steps skip its closed
    hours), as durations (``half_life``, ``period``);
    ``steps_per_token`` (``model.steps_per_token``: 1, or PatchTST's stride, whose REM
    parameters act on patch lags).

    With ``start``, the same network as it was initialised (:func:`initial_network`), the
    columns ``gate_start``, ``half_life_start_steps`` and ``period_start_steps`` hold the values
    training started from (the periods from ``RSAConfig.periods``: the data's cycles, or the
    calendar's where none stood out), and ``moved`` says whether training changed the head's
    timescale (its period, or a regular head's half-life) or its gate by more than
    :data:`MOVED_TOLERANCE` (5%). A head that did not move reports its start, not something
    learned from the data. Without ``start`` these columns are NaN / NA.

    REMs shared by the channels have ``channel`` NA. Per-channel REMs (``rsa.per_channel``) give,
    with ``channels="median"``, one row per head with the median of ``lambda``, ``gamma`` and
    ``theta`` over the channels (``channel`` NA), or with ``channels="each"`` one row per head and
    channel (``channel`` its index among the targets).

    Empty (with these columns) for a model without RSA. ``table.attrs["freq"]`` is ``freq``, which
    :func:`time_unit` turns into the unit the console and the figures tell the timescales in.
    """
    if channels not in CHANNEL_VIEWS:
        raise ValueError(f"channels must be one of {CHANNEL_VIEWS}, got {channels!r}")
    step = None if freq is None else step_duration(Calendar.of(freq))
    rows = _head_rows(model, channels)
    if start is not None:
        initial = _head_rows(start, channels)
        if [(r["attention"], r["layer"], r["head"], r["channel"]) for r in initial] != \
                [(r["attention"], r["layer"], r["head"], r["channel"]) for r in rows]:
            raise ValueError("start is not the same network as model (its RSA layers or heads differ); pass the "
                             "network model was initialised as (tsrec.inspection.initial_network)")
    for i, row in enumerate(rows):
        row["half_life"] = _duration(step, row["half_life_steps"])
        row["period"] = _duration(step, row["period_steps"])
        if start is None:
            row.update(gate_start=math.nan, half_life_start_steps=math.nan, period_start_steps=math.nan, moved=pd.NA)
            continue
        first = initial[i]
        timescale = "half_life_steps" if row["kind"] == "regular" else "period_steps"
        row.update(gate_start=first["gate"], half_life_start_steps=first["half_life_steps"],
                   period_start_steps=first["period_steps"],
                   moved=_changed(row[timescale], first[timescale]) or _changed(row["gate"], first["gate"]))
    table = pd.DataFrame(rows, columns=GATE_COLUMNS).astype({"channel": "Int64", "half_life": "timedelta64[ns]",
                                                             "period": "timedelta64[ns]"})  # typed without rows too
    table["moved"] = table["moved"].astype("boolean")
    table.attrs["freq"] = freq
    return table


def initial_network(model_name: str, network: ModelConfig, seed: int) -> ForecastModel:
    """The network ``Forecaster.fit`` started from: ``build_model(model_name, network)`` right after
    seeding torch with ``seed`` (as ``fit`` and its refit do), built under a forked RNG so that the
    caller's random state is left as it was. ``network`` is the resolved model config
    (``Forecaster.resolved_settings.network``)."""
    from tsrec.models import build_model

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build_model(model_name, network)
