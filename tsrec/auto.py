"""``Forecaster("auto")``, the default: statistical candidates first, networks only where the data
have the windows for them and within a budget that grows with the data, then a validation-weighted
ensemble.

1. **Validation.** Each series' last ``k`` horizons, one horizon apart, are held out
   (:func:`validation_windows`: AutoGluon's rule, 5 windows under 20 series, 3 under 100, else 2,
   and at most half of the shortest series). A series whose last values are missing is validated
   on windows ending at its last observed step, with a warning naming it (a forecast from a
   filled-in tail is never scored). Every candidate is fitted on the steps before the held-out ones
   and forecasts them (:func:`tsrec.evaluation.backtest`, no refit); its score is the MSE of its
   errors z-scored per series (by the standard deviation of the held-out values), over the entries
   every candidate forecast.
2. **Statistical candidates first** (those with nothing to train: ``ets``, ``theta``, ``ces``,
   ``dynamic_theta``, ``seasonal_naive``): the statsforecast ones are fitted once per series on
   all the history before the first validation window and carried forward over the windows with
   their fitted parameters (statsforecast's ``cross_validation(refit=False)``: a backtest's
   statistical baselines), so that they cost about one fit each; the members chosen are fitted
   again on all the history when they forecast.
3. **Networks** (the trainable candidates), only when the steps before the validation windows hold
   at least :data:`MIN_NETWORK_WINDOWS` training windows (counted at a context of twice the
   horizon), within :func:`network_budget` CPU seconds in all (it grows with the observations, and
   stays within a few times what the statistical candidates cost; ``time_limit`` sets it instead), by
   successive halving: every network trains for the first rung's share
   of its step budget (:data:`RUNGS`), is scored, and goes on to the next rung only if it is among
   the better half of the networks still training and within :data:`HALVING_FACTOR` of the
   leader's validation MSE (the leader may be a statistical model). Each run may spend the share of
   the budget left that its steps are of those still planned, so every network gets its first rung
   (a run that spends its share ends there, and a later rung goes on from it; one that early
   stopping ended trains no later rung). Rungs continue the same run
   from its checkpoint (``resume=True``), so a network that reaches the last rung has cost one
   training run. Networks are not refitted on the validation windows: the validated run is the
   member (AutoGluon's default, ``refit_full=False``); its RevIN makes it indifferent to the
   ensemble's scaler, which is fitted on all the history. A member without RevIN is refitted.
4. **Choice.** Greedy ensemble selection with replacement (Caruana et al., ICML 2004): for
   :data:`ROUNDS` rounds, add the candidate that most lowers the validation MSE of the
   equal-weighted average of those chosen so far (one may be chosen again), and keep the rounds'
   best ensemble. Running every round instead of stopping at the first round that does not improve
   lets a second candidate enter at a small weight (1/3, 1/4, ...) once the leader has been chosen
   a few times, where entering at 1/2 would not have helped. The weights are the shares of the
   kept rounds each candidate was chosen in.

5. **Intervals.** The validation backtest forecasts every origin of the validation windows, a
   stride that divides the horizon apart (:func:`_stride`; the choice reads the origins one horizon
   apart only), and the chosen ensemble's weighted forecast of all of them calibrates its conformal
   intervals (:mod:`tsrec.conformal`; ``conformal_windows=0``: none). Nothing is fitted again.
6. **Covariates.** The candidates that read covariates (the networks) are fitted and scored with
   those given to ``fit``; the statistical ones on the targets alone (the frame without the
   covariate columns). A network member with covariates is refitted on all the history.

The leaderboard lists every candidate: its validation MSE, weight, wall and CPU seconds, a
note (the rungs a network trained for, why it stopped, or why it was skipped) and the covariates it
read (``covariates``). On a terminal each
candidate prints one progress line on stderr.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from tsrec.config import CovariateConfig
from tsrec.data.frame import Panel
from tsrec.data.time_features import future_indexes
from tsrec.data.schema import Schema
from tsrec.data.source import Read, Source, history_before, in_memory
from tsrec.calibrating import fitted_scales
from tsrec.conformal import Calibration, calibrate, default_windows, observed_ends
from tsrec.evaluation import STATS_BASELINES, CoverageWarning, backtest
from tsrec.fitted import FittedState
from tsrec.fitting import Fit, Prefitted, fit_state
from tsrec.forecaster import Forecaster
from tsrec.models.ensemble import AUTO, with_members
from tsrec.settings import ForecasterSettings
from tsrec.training.budget import auto_steps

__all__ = ["AUTO", "HALVING_FACTOR", "MIN_NETWORK_WINDOWS", "ROUNDS", "RUNGS", "fit_auto", "greedy_weights",
           "network_budget", "validation_windows"]

#: Rounds of greedy ensemble selection (weights are multiples of 1 / ROUNDS).
ROUNDS = 20
#: Training windows (before the validation windows, at a context of twice the horizon) the data
#: must hold for the networks to be tried: fewer, and the statistical models are the better bet
#: (the issue-36 sets: the networks lost 4x on 4 quarterly series of 101 steps, won on 145 monthly
#: series of 285).
MIN_NETWORK_WINDOWS = 1_000
#: Successive halving's rungs: the shares of a network's step budget it has trained for when it is
#: scored (each rung continues the run of the one before).
RUNGS = (1 / 9, 1 / 3, 1.0)
#: A network whose validation MSE is more than this many times the leader's stops at its rung.
HALVING_FACTOR = 1.5
#: The networks' training budget in CPU seconds: this many, plus :data:`BUDGET_SECONDS_PER_OBSERVATION`
#: per observed value, at most :data:`MAX_BUDGET_SECONDS`, and at most :data:`STATS_COST_RATIO` times
#: what the statistical candidates cost (:func:`network_budget`): the issue-36 targets, a default fit
#: of 10,000 observations in 60 CPU-s and within 5x statsforecast's AutoETS + AutoCES + AutoTheta.
BUDGET_SECONDS = 10.0
BUDGET_SECONDS_PER_OBSERVATION = 1e-3
MAX_BUDGET_SECONDS = 1_800.0
STATS_COST_RATIO = 3.0
#: Settings of the auto Forecaster that each candidate gets (the rest are its own defaults;
#: ``time_limit`` is the networks' budget instead, and networks are never refitted).
SHARED_SETTINGS = ("val_windows", "gaps", "missing_context", "scaling", "seed", "batch_size", "max_steps", "max_epochs",
                   "precision", "deterministic", "num_workers", "compile")
#: The AutoGluon rule (series fewer than, windows): else :data:`MIN_VAL_WINDOWS`.
VAL_WINDOWS_RULE = ((20, 5), (100, 3))
MIN_VAL_WINDOWS = 2


def validation_windows(n_series: int, shortest: int, horizon: int) -> int:
    """Validation windows per series: 5 under 20 series, 3 under 100, else 2 (AutoGluon-TimeSeries's
    rule), as many as half of the ``shortest`` series holds, and at least one."""
    wanted = next((windows for below, windows in VAL_WINDOWS_RULE if n_series < below), MIN_VAL_WINDOWS)
    return max(1, min(wanted, shortest // 2 // horizon))


def network_budget(observations: int, time_limit: float | None = None, stats_seconds: float | None = None) -> float:
    """CPU seconds of network training in all for data of ``observations`` observed values: the
    user's ``time_limit`` where set; else :data:`BUDGET_SECONDS` +
    :data:`BUDGET_SECONDS_PER_OBSERVATION` per value, at most :data:`MAX_BUDGET_SECONDS`, and at
    most :data:`STATS_COST_RATIO` times ``stats_seconds``, the CPU seconds the statistical
    candidates cost (None: no such bound)."""
    if time_limit is not None:
        return float(time_limit)
    bounds = [MAX_BUDGET_SECONDS, BUDGET_SECONDS + BUDGET_SECONDS_PER_OBSERVATION * observations]
    bounds += [] if stats_seconds is None else [STATS_COST_RATIO * stats_seconds]
    return min(bounds)


def greedy_weights(truth: np.ndarray, forecasts: np.ndarray, rounds: int = ROUNDS) -> np.ndarray:
    """Greedy ensemble selection with replacement: ``forecasts`` ``[M, E]`` of ``M`` candidates over
    ``E`` entries with true values ``truth`` ``[E]`` -> weights ``[M]`` summing to 1: every round
    adds the candidate whose addition gives the lowest MSE, and the weights are those of the round
    with the lowest MSE (the earliest among equals; see the module)."""
    counts = np.zeros(len(forecasts))
    total = np.zeros_like(truth)
    best, best_counts = math.inf, counts
    for r in range(rounds):
        errors = np.mean(((total + forecasts) / (r + 1) - truth) ** 2, axis=1)  # [M]
        choice = int(np.argmin(errors))
        counts[choice] += 1
        total = total + forecasts[choice]
        if errors[choice] < best * (1 - 1e-12):  # ties and float noise keep the simpler ensemble
            best, best_counts = float(errors[choice]), counts.copy()
    return best_counts / best_counts.sum()


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
    """The candidates that can run here, those with nothing to train first: trainable ones only for
    a quantile output; statsforecast's only with it installed (a warning says when they are left out)."""
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
    return sorted(names, key=lambda name: model_spec(name).model_class.trainable)  # stable: statistical first


def _warn_missing_tails(panel: Panel, ends: list[int]) -> None:
    """Warn naming the series whose last values are missing (the first five, and how many more)."""
    tails = [(panel.item_label(i), len(item) - end, item.index[end - 1]) for i, (item, end) in
             enumerate(zip(panel.items, ends)) if end < len(item)]
    if not tails:
        return
    named = "; ".join(f"{label}: its last {n} step(s) after {stamp}" for label, n, stamp in tails[:5])
    more = f" and {len(tails) - 5} more series" if len(tails) > 5 else ""
    warnings.warn(f"auto: the last values of {len(tails)} series are missing ({named}{more}). The candidates are "
                  "validated on windows ending at each series' last observed step, so that none is credited for "
                  "forecasting from a filled-in tail; the forecast after the frame's end still reads the missing "
                  "steps as the model fills them (missing_context). Drop the missing rows to forecast from the "
                  "last observation", UserWarning, stacklevel=4)


def _rows_before(df: pd.DataFrame, schema: Schema, panel: Panel, positions: list[int]) -> pd.DataFrame:
    """The rows of ``df`` before each series' grid position ``positions`` ``[I]`` (its whole
    length or more: all of it)."""
    after = future_indexes(pd.DatetimeIndex([item.index[-1] for item in panel.items]), panel.freq, 1)  # [I]
    cut = [item.index[p] if p < len(item) else step for item, p, step in zip(panel.items, positions, after)]
    return history_before(df, schema, panel, cut)


@dataclass
class _Scorer:
    """The validation backtest every candidate is scored on: ``frame`` (each series up to its last
    observed step; ``targets``: the same without the covariate columns, what a candidate without
    covariates reads), ``windows`` one horizon apart; the first candidate scored fixes the entries,
    their true values and the per-series scale of the z-scoring.

    The backtest forecasts origins ``stride`` apart over the same span (``stride`` divides the
    horizon): the selection reads the origins one horizon apart only (``selected``), and the
    ensemble's conformal calibration all of them (``raw``, ``raw_truth``; :func:`_calibration`)."""

    frame: pd.DataFrame
    targets: pd.DataFrame
    columns: dict[str, Any]
    windows: int
    horizon: int
    stride: int
    keys: np.ndarray | None = None
    selected: np.ndarray | None = None  # [R] the rows of the origins one horizon apart
    truth: np.ndarray | None = None  # [E] z-scored
    scale: np.ndarray | None = None  # [E]
    forecasts: dict[str, np.ndarray] = field(default_factory=dict)  # name -> [E] z-scored
    raw_truth: np.ndarray | None = None  # [R] the data's units
    labels: np.ndarray | None = None  # [R] each row's item_id
    raw: dict[str, np.ndarray] = field(default_factory=dict)  # name -> [R] the data's units

    @property
    def origins(self) -> int:
        """Origins per series the backtest forecasts."""
        return (self.windows - 1) * self.horizon // self.stride + 1

    def score(self, name: str, candidate: Forecaster, *, baseline: str | None = None) -> float:
        """``candidate``'s validation forecasts, or with ``baseline`` (a statistical one of
        :func:`~tsrec.evaluation.backtest`) that baseline's on the same windows, kept under ``name``;
        returns their MSE over the entries forecast (see :meth:`common` for the entries all forecast)."""
        frame = self.frame if candidate.covariates.config.columns else self.targets
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CoverageWarning)  # a candidate's quantiles are not what auto scores
            errors = backtest(candidate, frame, n_windows=self.origins, stride=self.stride,
                              baselines=("naive",) if baseline is None else ("naive", baseline), **self.columns).errors
        order = errors[["item_id", "origin", "step"]].astype(str).agg("|".join, axis=1).to_numpy()
        if self.keys is None:
            rank = errors.groupby("item_id", sort=False)["origin"].rank(method="dense").to_numpy(np.int64)  # 1..origins
            self.selected = (self.origins - rank) % (self.horizon // self.stride) == 0
            self.raw_truth, self.labels = errors["y_true"].to_numpy(np.float64), errors["item_id"].to_numpy()
            chosen = errors[self.selected]
            scale = chosen.groupby("item_id")["y_true"].transform("std").to_numpy(np.float64)
            self.keys, self.scale = order, np.where(np.isfinite(scale) & (scale > 0), scale, 1.0)
            self.truth = self.raw_truth[self.selected] / self.scale
        elif not np.array_equal(order, self.keys):
            raise RuntimeError(f"auto: {name}'s validation windows differ from the other candidates'")
        self.raw[name] = errors["y_pred" if baseline is None else f"y_{baseline}"].to_numpy(np.float64)
        forecast = self.raw[name][self.selected] / self.scale
        self.forecasts[name] = forecast
        entries = np.isfinite(self.truth) & np.isfinite(forecast)
        return float(np.mean((forecast[entries] - self.truth[entries]) ** 2)) if entries.any() else math.nan

    def common(self) -> np.ndarray:
        """``[E]`` the entries with a true value and every kept candidate's forecast."""
        return np.isfinite(self.truth) & np.all([np.isfinite(f) for f in self.forecasts.values()], axis=0)


@dataclass
class _Row:
    """One leaderboard row in the making."""

    model: str
    val_mse: float = math.nan
    fit_seconds: float = 0.0
    cpu_seconds: float = 0.0
    note: str = ""
    covariates: str = ""


def _progress(line: str) -> None:
    """One progress line on stderr when it is a terminal (never in captured or redirected output)."""
    if sys.stderr.isatty():
        print(f"tsrec auto: {line}", file=sys.stderr, flush=True)


class _Clock:
    """Wall and CPU seconds since it was created."""

    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def add_to(self, row: _Row) -> None:
        row.fit_seconds += time.perf_counter() - self.wall
        row.cpu_seconds += time.process_time() - self.cpu


def _network_windows(lengths: list[int], channels: int, horizon: int, windows: int) -> int:
    """Training windows of single series (a wide frame's ``channels`` count one each, as the
    channel-independent networks read them) before ``windows`` validation windows, at a context of
    ``2 * horizon``."""
    return channels * int(sum(max(0, length - windows * horizon - 3 * horizon + 1) for length in lengths))


def fit_auto(df: Source, read: Read, settings: ForecasterSettings, *, val: Read | None = None,
             resume: bool = False) -> Fit:
    """The fitted ensemble of ``settings`` (an auto model's): its candidates scored on ``df`` (read as
    ``read``), the weights chosen, the members put together (see the module). The fitter
    ``Forecaster("auto").fit`` calls (the registry's hook, :func:`tsrec.models.registry.model_fitter`)."""
    from tsrec.models import model_spec

    refused = [what for what, given in (("val_df", val is not None), ("resume=True", resume)) if given]
    if refused:
        raise ValueError(f"Forecaster('auto') takes no {', '.join(refused)}: it validates its candidates on the "
                         "end of the fit frame; fit a model by name for these")
    panel, columns, schema = read.panel, read.schema.columns, read.schema
    started = time.process_time()
    df = in_memory(df, schema.id_col)  # Parquet read once for the candidates' fits and backtests
    covariates = _Covariates.of(schema)
    horizon = settings.window.prediction_length
    options = _candidate_options(settings)
    ends = observed_ends(panel).tolist()
    if 0 in ends:
        raise ValueError(f"{panel.item_label(ends.index(0))} has no observed value: drop it, or fit on a frame where "
                         "it has data")
    _warn_missing_tails(panel, ends)
    channels = len(panel.columns) if panel.layout == "wide" else 1
    windows = validation_windows(len(panel.items) * channels, min(ends), horizon)
    observed_frame = _rows_before(df, schema, panel, ends)
    shortened = _rows_before(df, schema, panel, [end - windows * horizon for end in ends])
    calibrating = settings.conformal.windows != 0
    wanted = settings.conformal.windows or default_windows(len(panel.items) * channels)
    scorer = _Scorer(observed_frame, covariates.targets(observed_frame), columns, windows, horizon,
                     _stride(horizon, windows, wanted) if calibrating else horizon)
    names = _candidates(settings)
    rows = {name: _Row(name) for name in names}
    fitted: dict[str, Forecaster] = {}
    statistical = [name for name in names if not model_spec(name).model_class.trainable]
    carrier: list[Forecaster] = []  # the seasonal naive model whose backtest carries the statistical forecasts
    for name in statistical:
        rows[name].covariates = covariates.unused
        _score_statistical(name, rows[name], scorer, options, covariates.targets(shortened), columns, carrier)
    networks = [name for name in names if name not in statistical]
    if networks:
        for name in networks:
            rows[name].covariates = covariates.described
        observations = int(sum(item.observed.sum() for item in panel.items))
        _fit_networks(networks, rows, fitted, scorer, settings, options, shortened, {**columns, **covariates.fit},
                      lengths=ends, channels=channels, windows=windows, observations=observations)
    kept = [name for name in names if name in scorer.forecasts]
    if not kept:
        raise ValueError("auto: no candidate was scored on the fit frame: " +
                         "; ".join(f"{r.model} {r.note}" for r in rows.values()))
    common = scorer.common()
    if not common.any():
        raise ValueError("auto: no validation entry has a true value and every candidate's forecast")
    stacked = np.stack([scorer.forecasts[name] for name in kept])  # [M, E] z-scored
    weights = greedy_weights(scorer.truth[common], stacked[:, common])
    weight_of = dict(zip(kept, weights))
    chosen = [(name, w) for name, w in zip(kept, weights) if w > 0]
    members = [_member(name, fitted.get(name), options, df, columns, rows[name], covariates) for name, _ in chosen]
    network = with_members(settings.network, [(m.model_name, m.resolved_settings.network) for m in members],
                           [w for _, w in chosen], [rows[name].val_mse if name in rows else math.nan
                                                    for name in settings.network.candidates])
    leaderboard = pd.DataFrame([{"model": r.model, "val_mse": r.val_mse, "weight": float(weight_of.get(r.model, 0.0)),
                                 "fit_seconds": r.fit_seconds, "cpu_seconds": r.cpu_seconds, "note": r.note,
                                 "covariates": r.covariates} for r in rows.values()],
                               columns=LEADERBOARD_COLUMNS)
    state = {f"members.{i}.{key}": value for i, member in enumerate(members)
             for key, value in member.model.state_dict().items()}
    prefitted = Prefitted(network, state, max(member.context_length for member in members),
                          leaderboard.sort_values("val_mse", na_position="last", ignore_index=True))
    fit = fit_state(read, settings, prefitted=prefitted)
    if not calibrating:
        return fit
    calibration = _calibration(scorer, chosen, fit.state, panel, settings, started)
    return dataclasses.replace(fit, state=dataclasses.replace(fit.state, calibration=calibration))


#: The leaderboard's columns.
LEADERBOARD_COLUMNS = ["model", "val_mse", "weight", "fit_seconds", "cpu_seconds", "note", "covariates"]


@dataclass(frozen=True)
class _Covariates:
    """The covariates given to ``auto``'s fit: what the candidates that take them are fitted with
    (``fit``: the ``past_covariates``, ... arguments), the columns the others drop, and what the
    leaderboard says of each (``described``, ``unused``)."""

    config: CovariateConfig
    fit: dict[str, Any]

    @classmethod
    def of(cls, schema: Schema) -> _Covariates:
        config = schema.covariates
        return cls(config, dict(past_covariates=config.past, future_covariates=config.future,
                                static_covariates=config.static) if config.columns else {})

    def targets(self, frame: pd.DataFrame) -> pd.DataFrame:
        """``frame`` without the covariate columns (what a statistical model reads)."""
        return frame.drop(columns=list(self.config.columns)) if self.config.columns else frame

    @property
    def described(self) -> str:
        """The leaderboard's note of a candidate that reads the covariates."""
        parts = [f"{kind}: {', '.join(getattr(self.config, kind))}" for kind in ("past", "future", "static")
                 if getattr(self.config, kind)]
        return "; ".join(parts)

    @property
    def unused(self) -> str:
        """The leaderboard's note of a candidate that cannot read them (empty without covariates)."""
        return "none: scored on the targets alone (no covariate support)" if self.config.columns else ""


def _stride(horizon: int, windows: int, wanted: int) -> int:
    """The validation backtest's stride: the largest divisor of ``horizon`` that gives about
    ``wanted`` origins per series over the ``windows`` horizons of the validation span (at least
    ``windows``: the horizon itself)."""
    available = (windows - 1) * horizon + 1  # origins one step apart
    most = max(1, (available - 1) // max(1, wanted - 1))
    return max(d for d in range(1, horizon + 1) if horizon % d == 0 and d <= most)


def _calibration(scorer: _Scorer, chosen: list[tuple[str, float]], state: FittedState, panel: Panel,
                 settings: ForecasterSettings, started: float) -> Calibration:
    """The conformal calibration of the ensemble of ``chosen`` (name, weight): its forecasts of the
    validation backtest's every origin (the weighted sum of its members' validated forecasts, made
    before the validation span) against the truth (:func:`tsrec.conformal.calibrate`); ``state``:
    the fitted ensemble, whose series' scales the scores are divided by."""
    horizon = settings.window.prediction_length
    channels = len(panel.columns) if panel.layout == "wide" else 1
    mean = sum(weight * scorer.raw[name] for name, weight in chosen).reshape(-1, horizon, channels)  # [W, H, C]
    truth = scorer.raw_truth.reshape(mean.shape)
    labels = scorer.labels.reshape(mean.shape)[:, 0, :]  # [W, C] the item_id of each window's channels
    rows, fitted_scale = fitted_scales(state, panel)
    if panel.layout == "wide":
        of_label = {label: fitted_scale[rows[0], c] for c, label in enumerate(panel.columns)}
    else:
        of_label = {label: fitted_scale[row, 0] for label, row in zip(panel.item_ids, rows)}
    window_scale = np.vectorize(of_label.__getitem__, otypes=[np.float64])(labels)  # [W, C]
    return calibrate(mean, truth, np.isfinite(truth), window_scale, fitted_scale, scorer.origins, scorer.stride,
                     settings.conformal, time.process_time() - started)


def _score_statistical(name: str, row: _Row, scorer: _Scorer, options: dict[str, Any], shortened: pd.DataFrame,
                       columns: dict[str, Any], carrier: list[Forecaster]) -> None:
    """Score the statistical candidate ``name`` (nothing is trained); fills its ``row`` (a failure is
    its note). A statsforecast model that is also a backtest baseline (:data:`~tsrec.evaluation.
    STATS_BASELINES`) is fitted once per series on the history before the first validation window
    and carried forward over the windows (statsforecast's ``cross_validation(refit=False)``), as
    the baseline of a backtest of ``carrier`` (a seasonal naive model fitted on ``shortened``, made
    at the first call); the others are fitted on all the history before each window."""
    clock = _Clock()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # a candidate's own notes; its score says enough
            if name in STATS_BASELINES:
                if not carrier:
                    carrier.append(Forecaster("seasonal_naive", **options).fit(shortened, **columns))
                row.val_mse = scorer.score(name, carrier[0], baseline=name)
            else:
                row.val_mse = scorer.score(name, Forecaster(name, **options).fit(shortened, **columns))
    except (ValueError, RuntimeError) as err:
        row.note = f"failed: {err}"
    clock.add_to(row)
    _progress(_progress_line(row))


def _progress_line(row: _Row) -> str:
    score = "no score" if math.isnan(row.val_mse) else f"validation MSE {row.val_mse:.4g}"
    return f"{row.model:<16} {score}, {row.cpu_seconds:.1f} CPU-s" + (f" ({row.note})" if row.note else "")


def _fit_networks(networks: list[str], rows: dict[str, _Row], fitted: dict[str, Forecaster], scorer: _Scorer,
                  settings: ForecasterSettings, options: dict[str, Any], shortened: pd.DataFrame,
                  columns: dict[str, Any], *, lengths: list[int], channels: int, windows: int,
                  observations: int) -> None:
    """Successive halving of the ``networks`` on ``shortened``, scored by ``scorer`` (see the module);
    fills their ``rows`` and, for those scored, ``fitted``.

    The budget is CPU seconds of this process. Each (network, rung) run may spend the share of what
    is left that its steps are of the steps still planned (the rest of this rung, and the later
    rungs for the networks halving would keep), so that the first networks cannot spend the
    others' rung 1; what a run leaves unspent goes to the runs after it."""
    horizon = settings.window.prediction_length
    available = _network_windows(lengths, channels, horizon, windows)
    if available < MIN_NETWORK_WINDOWS:
        for name in networks:
            rows[name].note = (f"skipped: {available} training windows < {MIN_NETWORK_WINDOWS} (networks are tried "
                               "only on data with at least that many)")
            _progress(_progress_line(rows[name]))
        return
    stats = sum(row.cpu_seconds for row in rows.values() if row.model not in networks) or None
    budget = network_budget(observations, settings.training.time_limit, stats)
    training = settings.training
    steps = training.max_steps if training.max_steps is not None or training.max_epochs is not None else \
        auto_steps(available, training.batch_size)
    targets = [max(1, math.ceil(share * steps)) for share in RUNGS]  # [R] steps trained by the end of each rung
    deltas = np.diff([0, *targets])  # [R]
    started = time.process_time()
    alive = list(networks)
    with tempfile.TemporaryDirectory(prefix="tsrec-auto-") as folder:
        for rung in range(len(RUNGS)):
            order = list(alive)
            for position, name in enumerate(order):
                left = budget - (time.process_time() - started)
                if left <= 0:
                    rows[name].note = _join(rows[name].note, f"stopped before rung {rung + 1}: the networks' budget "
                                                             f"of {budget:.0f} CPU-s was spent")
                    alive.remove(name)
                    continue
                planned = _planned_steps(deltas, rung, len(order) - position, len(order))
                limit = _CpuLimit.of(left * deltas[rung] / planned)
                run: dict[str, Any] = {"callbacks": [*options["trainer_kwargs"].get("callbacks", []), limit]}
                if training.max_epochs is None:
                    run["max_steps"] = targets[rung]  # the rung's end; the settings' max_steps is the whole run's
                clock = _Clock()
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", UserWarning)
                        candidate = Forecaster(name, **{**options, "max_steps": steps, "refit_full": False,
                                                        "output_dir": f"{folder}/{name}",
                                                        "trainer_kwargs": {**options["trainer_kwargs"], **run}})
                        candidate.fit(shortened, resume=rung > 0, **columns)
                    rows[name].val_mse = scorer.score(name, candidate)
                    fitted[name] = candidate
                    summary = candidate.training_summary.budget
                    why = ", the budget's share ran out" if limit.fired else \
                        "" if summary["stopped_by"] == "budget" else f", {summary['stopped_by']}"
                    rows[name].note = f"rung {rung + 1}: {summary['steps_run']} steps{why}"
                    if summary["stopped_by"] != "budget":  # early stopping ended its run: no later rung
                        alive.remove(name)
                except (ValueError, RuntimeError) as err:
                    rows[name].note = f"failed at rung {rung + 1}: {err}"
                    scorer.forecasts.pop(name, None)
                    fitted.pop(name, None)
                    alive.remove(name)
                clock.add_to(rows[name])
                _progress(_progress_line(rows[name]))
            if rung + 1 < len(RUNGS):
                alive = _halve(alive, rows, rung)
    for name in networks:
        if name not in fitted:
            scorer.forecasts.pop(name, None)


def _planned_steps(deltas: np.ndarray, rung: int, waiting: int, alive: int) -> float:
    """The steps still planned when ``waiting`` of the ``alive`` networks have rung ``rung`` to
    train (``deltas`` ``[R]`` steps per rung): theirs, and the later rungs' for the networks that
    halving would keep (half, rounded up, at each rung)."""
    total, survivors = float(waiting * deltas[rung]), alive
    for later in range(rung + 1, len(deltas)):
        survivors = math.ceil(survivors / 2)
        total += survivors * deltas[later]
    return total


class _CpuLimit:
    """A Lightning callback (built by :meth:`of`) that ends the run once this process has spent
    ``seconds`` of CPU time from its creation, as a step budget would end it (the step reached
    becomes the run's last), so that a later rung resumes it from there."""

    @staticmethod
    def of(seconds: float) -> Any:
        import lightning.pytorch as pl

        class CpuLimit(pl.Callback):
            def __init__(self) -> None:
                self.deadline, self.fired = time.process_time() + seconds, False

            def on_train_batch_end(self, trainer: Any, *args: Any) -> None:
                if time.process_time() >= self.deadline:
                    trainer.fit_loop.epoch_loop.max_steps, self.fired = trainer.global_step, True

        return CpuLimit()


def _halve(alive: list[str], rows: dict[str, _Row], rung: int) -> list[str]:
    """The networks that go on after ``rung``: the better half of ``alive``, those within
    :data:`HALVING_FACTOR` of the leader's validation MSE (the best of every candidate scored);
    the others' notes say why they stopped."""
    scored = {name: row.val_mse for name, row in rows.items() if not math.isnan(row.val_mse)}
    if not scored:
        return alive
    leader = min(scored, key=scored.get)
    ranked = sorted(alive, key=lambda name: scored.get(name, math.inf))
    keep = ranked[:math.ceil(len(ranked) / 2)]
    survivors = []
    for name in ranked:
        ratio = scored.get(name, math.inf) / scored[leader] if scored[leader] > 0 else math.inf
        if name in keep and ratio <= HALVING_FACTOR:
            survivors.append(name)
        elif name != leader:
            why = f"{ratio:.2g}x the leader ({leader})" if ratio > HALVING_FACTOR else \
                "in the worse half of the networks"
            rows[name].note = _join(rows[name].note, f"stopped at rung {rung + 1}: {why}")
    return survivors


def _join(note: str, more: str) -> str:
    return f"{note}; {more}" if note else more


def _member(name: str, validated: Forecaster | None, options: dict[str, Any], df: pd.DataFrame,
            columns: dict[str, Any], row: _Row, covariates: _Covariates) -> Forecaster:
    """The fitted member ``name``: a statistical model fitted on all of ``df``'s targets (nothing to
    train), a network's validated run (RevIN makes it indifferent to the ensemble's scaler), or a
    network without RevIN, or with covariates, refitted on all of ``df`` (its seconds added to
    ``row``): a network's covariates are scaled with the statistics of its own training part,
    which must be the ensemble's (fitted on all of ``df``)."""
    reads = bool(covariates.fit) and validated is not None
    if validated is not None and getattr(validated.resolved_settings.network, "revin", False) and not reads:
        return validated
    clock = _Clock()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        member = Forecaster(name, **options).fit(df, **columns, **covariates.fit) if reads else \
            Forecaster(name, **options).fit(covariates.targets(df), **columns)
    if validated is not None:
        clock.add_to(row)
        why = "its covariates scaled as the ensemble's" if reads else "no RevIN"
        row.note = _join(row.note, f"refitted on all the history ({why})")
    return member
