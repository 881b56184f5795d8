"""``Forecaster("auto")``: candidates scored by a rolling-origin validation backtest on the fit
frame, then the best one or a validation-weighted ensemble, refitted on all the history.

1. **Validation.** Each series' last ``k`` horizons (the windows whose targets are its last 10%,
   one horizon apart, at least one and at most :data:`MAX_VAL_WINDOWS`) are held out; every
   candidate is fitted at its defaults on the steps before them and forecasts them
   (:func:`tsrec.evaluation.backtest`). Its score is the MSE of its errors z-scored per series
   (by the standard deviation of the held-out values), over the entries every candidate forecast.
2. **Choice.** Greedy ensemble selection with replacement (Caruana et al., ICML 2004): start from
   the best candidate and add, for up to :data:`ROUNDS` rounds, the candidate that most lowers the
   validation MSE of the equal-weighted average of those chosen so far; stop when none does. The
   weights are the shares of the rounds each candidate was chosen in, so the best single model is
   the answer whenever averaging does not help.
3. **Refit.** Each chosen candidate is fitted again on all the frame (its own validation and
   refit on all the history included) and the ensemble (:class:`~tsrec.models.ensemble.Ensemble`)
   averages their forecasts with the weights: point forecasts, or the quantiles of
   ``output="quantile"`` level by level (a weighted average of ordered quantiles stays ordered).

It costs one fit of every candidate on the shortened frame and one more of every member.
"""

from __future__ import annotations

import math
import time
import warnings
from typing import Any

import numpy as np
import pandas as pd

from tsrec.data.frame import Panel
from tsrec.data.schema import Schema
from tsrec.data.source import Read, Source, history_before, in_memory
from tsrec.data.split import VAL_FRACTION
from tsrec.evaluation import backtest
from tsrec.fitting import Fit, Prefitted, fit_state
from tsrec.forecaster import Forecaster
from tsrec.models.ensemble import AUTO, with_members
from tsrec.settings import ForecasterSettings

__all__ = ["AUTO", "MAX_VAL_WINDOWS", "ROUNDS", "fit_auto", "greedy_weights"]

#: The most validation windows per series (each costs the statistical candidates one fit).
MAX_VAL_WINDOWS = 5
#: Rounds of greedy ensemble selection (weights are multiples of 1 / ROUNDS).
ROUNDS = 10
#: Settings of the auto Forecaster that each candidate gets (the rest are its own defaults).
SHARED_SETTINGS = ("val_windows", "gaps", "missing_context", "scaling", "seed", "batch_size", "max_steps", "max_epochs",
                   "time_limit", "refit_full", "precision", "deterministic", "num_workers", "compile")


def greedy_weights(truth: np.ndarray, forecasts: np.ndarray, rounds: int = ROUNDS) -> np.ndarray:
    """Greedy ensemble selection with replacement: ``forecasts`` ``[M, E]`` of ``M`` candidates over
    ``E`` entries with true values ``truth`` ``[E]`` -> weights ``[M]`` summing to 1 (see the module)."""
    counts = np.zeros(len(forecasts))
    total = np.zeros_like(truth)
    best = math.inf
    for r in range(rounds):
        errors = [np.mean(((total + f) / (r + 1) - truth) ** 2) for f in forecasts]
        choice = int(np.argmin(errors))
        if errors[choice] >= best:
            break
        best = errors[choice]
        counts[choice] += 1
        total = total + forecasts[choice]
    return counts / counts.sum()


def _candidate_options(settings: ForecasterSettings) -> dict[str, Any]:
    """The options every candidate is built with: the auto Forecaster's window and shared training
    settings, its ``output`` and quantile levels, and its ``trainer_kwargs``."""
    window, training, network = settings.window, settings.training, settings.network
    options: dict[str, Any] = {"prediction_length": window.prediction_length, "freq": window.freq,
                               "trainer_kwargs": settings.trainer.trainer_kwargs}
    for name in SHARED_SETTINGS:
        for section in (window, training):
            if hasattr(section, name):
                options[name] = getattr(section, name)
    if network.output != "point":
        options.update(output=network.output, quantile_levels=network.quantile_levels)
    return options


def _candidates(settings: ForecasterSettings) -> list[str]:
    """The candidates that can run here: trainable ones only for a quantile output; ets and theta
    only with statsforecast installed (a warning says when they are left out)."""
    from tsrec.models import model_spec
    from tsrec.models.stats import STATS_EXTRA, StatsConfig, statsforecast_installed

    network = settings.network
    names = []
    for name in network.candidates:
        spec = model_spec(name)  # an unknown name: ValueError listing the known ones
        if network.output != "point" and not spec.model_class.trainable:
            continue
        if issubclass(spec.model_class.config_class, StatsConfig) and not statsforecast_installed():
            warnings.warn(f"auto leaves out {name}: statsforecast is not installed ({STATS_EXTRA})", UserWarning,
                          stacklevel=3)
            continue
        names.append(name)
    if not names:
        raise ValueError(f"no candidate of {list(network.candidates)} can forecast output={network.output!r}: "
                         "name trainable models in candidates")
    return names


def _validation_windows(lengths: list[int], horizon: int) -> int:
    """Validation windows per series: those whose targets are the shortest series' last 10%, one
    horizon apart, at least 1 and at most :data:`MAX_VAL_WINDOWS`."""
    return int(min(MAX_VAL_WINDOWS, max(1, round(VAL_FRACTION * min(lengths) / horizon))))


def _before_validation(df: pd.DataFrame, schema: Schema, panel: Panel, windows: int, horizon: int) -> pd.DataFrame:
    """The rows of ``df`` before each series' ``windows`` validation windows."""
    cut = [series.index[len(series) - windows * horizon] for series in panel.items]
    return history_before(df, schema, panel, cut)


def fit_auto(df: Source, read: Read, settings: ForecasterSettings, *, val: Read | None = None,
             resume: bool = False) -> Fit:
    """The fitted ensemble of ``settings`` (an auto model's): its candidates scored on ``df`` (read as
    ``read``), the weights chosen, the members refitted on all of ``df`` (see the module). The
    fitter ``Forecaster("auto").fit`` calls (the registry's hook,
    :func:`tsrec.models.registry.model_fitter`)."""
    refused = [what for what, given in (("covariates", read.schema.covariates.columns), ("val_df", val is not None),
                                        ("resume=True", resume)) if given]
    if refused:
        raise ValueError(f"Forecaster('auto') takes no {', '.join(refused)}: it validates its candidates on the "
                         "end of the fit frame and refits them; fit a model by name for these")
    panel, columns = read.panel, read.schema.columns
    df = in_memory(df, read.schema.id_col)  # Parquet read once for the candidates' fits and backtests
    horizon = settings.window.prediction_length
    options = _candidate_options(settings)
    windows = _validation_windows([len(s) for s in panel.items], horizon)
    shortened = _before_validation(df, read.schema, panel, windows, horizon)
    names, forecasts, rows, truth, keys = _candidates(settings), [], [], None, None
    for name in names:
        started = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # a candidate's own notes; its score says enough
                candidate = Forecaster(name, **options).fit(shortened, **columns)
                errors = backtest(candidate, df, n_windows=windows, stride=horizon, baselines=("naive",),
                                  **columns).errors
        except (ValueError, RuntimeError) as err:
            rows.append({"model": name, "val_mse": math.nan, "fit_seconds": time.perf_counter() - started,
                         "note": f"failed: {err}"})
            continue
        order = errors[["item_id", "origin", "step"]].astype(str).agg("|".join, axis=1).to_numpy()
        if keys is None:
            keys, truth = order, errors["y_true"].to_numpy(np.float64)
            scale = errors.groupby("item_id")["y_true"].transform("std").to_numpy(np.float64)
            scale = np.where(np.isfinite(scale) & (scale > 0), scale, 1.0)
        elif not np.array_equal(order, keys):
            raise RuntimeError(f"auto: {name}'s validation windows differ from the other candidates'")
        forecasts.append((name, errors["y_pred"].to_numpy(np.float64)))
        rows.append({"model": name, "val_mse": math.nan, "fit_seconds": time.perf_counter() - started, "note": ""})
    if not forecasts:
        raise ValueError("auto: every candidate failed on the fit frame: " +
                         "; ".join(f"{r['model']} {r['note']}" for r in rows))
    stacked = np.stack([f for _, f in forecasts]) / scale  # [M, E], z-scored per series
    target = truth / scale
    common = np.isfinite(target) & np.isfinite(stacked).all(axis=0)
    if not common.any():
        raise ValueError("auto: no validation entry has a true value and every candidate's forecast")
    weights = greedy_weights(target[common], stacked[:, common])
    scored = {name: float(np.mean((f[common] - target[common]) ** 2)) for (name, _), f in zip(forecasts, stacked)}
    weight_of = dict(zip([n for n, _ in forecasts], weights))
    for row in rows:
        row["val_mse"] = scored.get(row["model"], math.nan)
        row["weight"] = float(weight_of.get(row["model"], 0.0))
    chosen = [(name, w) for (name, _), w in zip(forecasts, weights) if w > 0]
    members = [Forecaster(name, **options).fit(df, **columns) for name, _ in chosen]
    candidates = settings.network.candidates
    network = with_members(settings.network, [(m.model_name, m.resolved_settings.network) for m in members],
                           [w for _, w in chosen], [scored.get(name, math.nan) for name in candidates])
    leaderboard = pd.DataFrame(rows, columns=["model", "val_mse", "weight", "fit_seconds", "note"])
    weights = {f"members.{i}.{key}": value for i, member in enumerate(members)
               for key, value in member.model.state_dict().items()}
    prefitted = Prefitted(network, weights, max(member.context_length for member in members),
                          leaderboard.sort_values("val_mse", na_position="last", ignore_index=True))
    return fit_state(read, settings, prefitted=prefitted)
