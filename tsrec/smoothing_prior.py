"""The ETS prior of RSA (``RSAConfig(prior="ets")``): exponential smoothing fitted on the training part.

Simple exponential smoothing forecasts ``sum_{k>=0} alpha (1 - alpha)^k y_{t-k}``: a regular REM
with ``lambda = 1 - alpha`` (normalised, :meth:`tsrec.nn.rem.LearnableREM.log_scale`). A seasonal
state smoothed by ``gamma`` is a regular REM dilated by the season with ``lambda = 1 - gamma``, a
damped trend a decay of rate ``phi``. This module fits that model (statsforecast's ``AutoETS``,
the ``ets`` model's) and reduces it to a :class:`~tsrec.config.SmoothingPrior`; the network only
reads the result (:class:`~tsrec.nn.rem.LearnableREM`, :class:`~tsrec.nn.attention.RSAMixer`).

The fit, per series and channel of the training part (its last :data:`MAX_HISTORY` steps, gaps
filled with the last observed value): ``AutoETS(season_length=m)`` on all but the last ``H``
steps, which are held out. Its ``alpha``, ``gamma`` and ``phi`` (one fit per history) give the
decays; the held-out steps give the gate. Values are the median over series (per channel with
``per_channel``, else over series and channels: one pooled value).

**The gate rule**: ``r`` = ETS's MSE over seasonal naive's (the last season repeated; the last
value without a season) on the held-out steps, each history's errors divided by its standard
deviation, pooled over histories; the gate starts at ``clip(1 - r / 2, 0.05, 0.95)``. ETS as good
as seasonal naive (``r = 1``) gives 0.5; ETS far better (``r -> 0``, hard to beat) gives 0.95;
ETS at least 1.9x worse than seasonal naive gives 0.05.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from tsrec.config import DataFacts, SmoothingPrior

__all__ = ["MAX_HISTORY", "fit_smoothing_prior", "gate_from_skill", "with_smoothing_prior"]

#: The most steps of each history the prior's ETS reads (the last ones): AutoETS's cost grows with
#: the length, and the smoothing constants are local.
MAX_HISTORY = 2000
_GATE_RANGE = (0.05, 0.95)


def gate_from_skill(skill: float) -> float:
    """The gate's start from ``skill`` (ETS's MSE over seasonal naive's): ``clip(1 - skill / 2, 0.05, 0.95)``."""
    if not np.isfinite(skill):
        return 0.5
    return float(np.clip(1.0 - skill / 2.0, *_GATE_RANGE))


def fit_smoothing_prior(histories: Sequence[np.ndarray], season: int, horizon: int, *,
                        per_channel: bool = False, max_history: int = MAX_HISTORY) -> SmoothingPrior:
    """Fit ETS on each history and reduce the fits to a :class:`~tsrec.config.SmoothingPrior` (module docstring).

    Args:
        histories: one array per series, ``[T, C]`` (or ``[T]`` for one channel), the training part,
            NaN where missing.
        season: the season ``m`` in steps (1: none); ETS's seasonal component is fitted by
            statsforecast only for ``m <= 24``.
        horizon: ``H``, the steps held out at the end of each history for the gate.
        per_channel: one value per channel (else one pooled value).
        max_history: the last steps of each history read.

    Raises:
        ValueError: no history is long enough (``2 H + 2`` observed steps) or no fit succeeded.
    """
    from tsrec.models.parameters import ets_season
    from tsrec.models.stats import fill_context, require_statsforecast

    AutoETS = require_statsforecast().AutoETS
    arrays = [np.asarray(h, dtype=np.float64) for h in histories]
    arrays = [a[:, None] if a.ndim == 1 else a for a in arrays]
    if not arrays:
        raise ValueError("fit_smoothing_prior needs at least one history")
    channels = arrays[0].shape[1]
    fits: list[list[tuple[float, float, float]]] = [[] for _ in range(channels)]
    ets_sq, naive_sq = 0.0, 0.0
    for values in arrays:
        for c in range(channels):
            column = values[-max_history:, c]
            observed = ~np.isnan(column)
            if observed.sum() < 2 * horizon + 2:
                continue
            y = fill_context(column, observed)[np.argmax(observed):]  # from the first observed step
            fitted, held = y[:-horizon], y[-horizon:]
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    model = AutoETS(season_length=ets_season(season)).fit(fitted)
                    forecast = np.asarray(model.predict(horizon)["mean"], dtype=np.float64)
            except Exception:  # noqa: BLE001 - statsforecast raises many kinds; an unfitted history adds nothing
                continue
            fits[c].append(_decays(model.model_, season))
            scale = float(np.std(fitted)) or 1.0
            ets_sq += float(np.sum(((forecast - held) / scale) ** 2))
            naive_sq += float(np.sum(((_seasonal_naive(fitted, season, horizon) - held) / scale) ** 2))
    if not any(fits):
        raise ValueError(f"rsa prior='ets': no history of the training part could be fitted (each needs at least "
                         f"2 x {horizon} + 2 observed steps, or statsforecast failed on all of them); use "
                         "prior='none' for this data")
    groups = [f for f in fits if f] if per_channel else [[f for column in fits for f in column]]
    if per_channel and len(groups) != channels:
        raise ValueError(f"rsa prior='ets' with per_channel: {channels - len(groups)} of {channels} channels have no "
                         "history ETS could be fitted on; use per_channel=False (one pooled prior)")
    medians = np.array([np.median(np.array(g), axis=0) for g in groups])  # [G, 3]
    skill = ets_sq / naive_sq if naive_sq > 0 else float("nan")
    return SmoothingPrior(level_decay=tuple(medians[:, 0]), trend_decay=tuple(medians[:, 1]),
                          season_decay=tuple(medians[:, 2]), season=int(season), gate=gate_from_skill(skill),
                          skill=float(skill))


def _decays(model: dict[str, Any], season: int) -> tuple[float, float, float]:
    """``(1 - alpha, phi or 0, 1 - gamma or (1 - alpha)^m)`` of one statsforecast ETS fit."""
    alpha, _, gamma, phi = (float(v) for v in model["par"][:4])
    _, _, seasonal, damped = model["components"][:4]
    level = min(max(1.0 - alpha, 0.0), 0.9999)
    trend = min(max(phi, 0.0), 0.9999) if damped == "D" and np.isfinite(phi) else 0.0
    seasonal_decay = 1.0 - gamma if seasonal != "N" and np.isfinite(gamma) else level ** season
    return level, trend, min(max(seasonal_decay, 0.0), 0.9999)


def _seasonal_naive(y: np.ndarray, season: int, horizon: int) -> np.ndarray:
    """The last season of ``y`` repeated over ``horizon`` steps (the last value where ``y`` is shorter)."""
    m = season if 1 < season <= len(y) else 1
    return np.resize(y[-m:], horizon) if m > 1 else np.full(horizon, y[-1])


def with_smoothing_prior(network: Any, values: Sequence[np.ndarray], facts: DataFacts, *, freq: str,
                         horizon: int) -> Any:
    """``network`` (a model config) with ``rsa.prior_fit`` fitted on ``values`` (each series'
    training part, ``[T, C]``) where ``rsa.prior == "ets"`` and no fit is set; else ``network`` as
    it is. The season is the statistical models' (:func:`tsrec.models.naive.season_for` of
    ``freq``, the cycles in ``facts`` and the longest history read)."""
    rsa = getattr(network, "rsa", None)
    if rsa is None or rsa.prior != "ets" or rsa.prior_fit is not None:
        return network
    from tsrec.models.naive import season_for

    longest = min(max(len(v) for v in values), MAX_HISTORY) - horizon
    season, _ = season_for(freq, facts.periods, longest)
    prior = fit_smoothing_prior(values, season, horizon, per_channel=rsa.per_channel)
    return dataclasses.replace(network, rsa=dataclasses.replace(rsa, prior_fit=prior))
