"""Fitting: one read of the data and the settings -> a :class:`~tsrec.fitted.FittedState`.

::

    fit_state(read, settings, val=None, resume=False, prefitted=None) -> Fit(state, trainer)
      context     the one set, else the model's default capped by the shortest series (context_for)
      prepare     split_panel -> StandardScaler + CovariateEncoder (training rows only)
                  -> WindowDataset of the training and validation windows         (prepare)
      resolve     the data's facts (season, periods, channels, covariates) complete the settings
      train       Lightning, for the planned budget, early stopping on the validation windows
      refit       prepare again on all the history (no validation), a fresh network trained
                  for as many passes as the validated run needed
      fit_series  a model that is not trained fits what it keeps of each series on all the
                  history (the statistical models' parameters, ForecastModel.fit_series)
      fit_windows or on every window of all the history, covariates included, at once (the
                  ridge's closed form, the gradient-boosted trees; WindowFit.fit_windows)

No Forecaster is involved: ``Forecaster.fit`` reads its data, calls :func:`fit_state` (or
:func:`tsrec.auto.fit_auto` for ``"auto"``, which ends in it) and keeps what it returns, only when
it returns. Training runs through :func:`train`, which logs to the
settings' ``output_dir`` (or a temporary folder) and passes their ``trainer_kwargs`` to Lightning.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import random
import tempfile
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from tsrec.config import FAR_EXAMPLES, FAR_IQRS, SHIFT_STEPS, DataFacts, TrainingConfig
from tsrec.data import CovariateEncoder, CovariateValues, Panel, StandardScaler, WindowDataset, data_facts, split_panel
from tsrec.data.events import Events, far_events
from tsrec.data.launches import launch_note
from tsrec.data.periods import dominant_periods
from tsrec.data.scaling import OutlierWarning, item_blocks
from tsrec.data.source import Read
from tsrec.data.split import SeriesTooShort, Split, default_val_windows
from tsrec.data.tails import fills_tails, with_tails
from tsrec.data.time_features import seasonality
from tsrec.data.windows import far_as_missing
from tsrec.fitted import FittedState, TrainingSummary
from tsrec.models import ForecastModel, build_model, model_spec
from tsrec.models.ensemble import Ensemble, EnsembleConfig
from tsrec.models.windowed import WindowFit
from tsrec.nn.heads import RevIN
from tsrec.settings import ForecasterSettings
from tsrec.smoothing_prior import with_smoothing_prior
from tsrec.training.budget import Budget, plan_budget, refit_budget

__all__ = ["Fit", "Prefitted", "Prepared", "context_for", "fit_state", "history_cap", "history_for",
           "prepare", "report_far", "report_far_covariates", "report_unseen_categories", "require_observed",
           "resolve_far_values"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Fit:
    """What :func:`fit_state` returns: the fitted value and the Lightning ``Trainer`` of its last
    training run (None for a model fitted without training)."""

    state: FittedState
    trainer: Any = None


@dataclass(frozen=True)
class Prefitted:
    """An ensemble of members fitted elsewhere: ``Forecaster("auto")``'s (:mod:`tsrec.auto`).
    ``network``: its settings, members and weights filled; ``members``: the fitted member
    networks, in ``network.members``' order, taken as they are; ``context_length``: the longest
    member's; ``leaderboard``: the candidates' validation scores."""

    network: EnsembleConfig
    members: tuple[ForecastModel, ...]
    context_length: int
    leaderboard: pd.DataFrame


@dataclass(frozen=True)
class _Run:
    """One training run: its per-epoch history and what :class:`TrainingSummary` records of it."""

    history: list[dict[str, float]]
    best_epoch: int | None
    best_step: int | None
    budget: dict[str, Any]
    seconds: float
    trainer: Any = None


@dataclass(frozen=True)
class Prepared:
    """The split of a read, the scaling fitted on its training rows and, for a trainable model (or
    one fitted on windows), the windows: the sequence :func:`fit_state` runs for the validated run and again for the refit."""

    split: Split
    scaler: StandardScaler
    encoder: CovariateEncoder
    train_set: WindowDataset | None
    val_set: WindowDataset | None


def prepare(read: Read, val: Read | None, context: int, horizon: int, *, val_windows: int | None, robust: bool,
            nonnegative: bool, windows: bool) -> Prepared:
    """Split ``read`` (validation windows from its end, or ``val``'s), fit the target scaler (with
    ``robust``, :attr:`WindowConfig.robust <tsrec.config.WindowConfig.robust>`, isolated far values
    left out; with ``nonnegative``, the floor of the series never negative) and the covariate encoding on the training rows of each series, and with ``windows``
    build the training and validation :class:`WindowDataset` (isolated far values missing when the
    scaler is robust; a level shift kept, :func:`~tsrec.data.scaling.level_shifts`). A series too
    short for a training window (and its validation windows) gives none, and all of it is its
    training part (:func:`~tsrec.data.split_panel`'s ``skip_short``): a statistical model fits it
    whole, a windowed one forecasts it from a padded window; ``SeriesTooShort`` where windows are
    built and no series holds one."""
    panel = read.panel
    split = split_panel(panel, context, horizon, val_windows=val_windows, val_panel=None if val is None else val.panel,
                        skip_short=True)
    require_observed(panel, split.train_end)
    scaler = StandardScaler.fit([s.values for s in panel.items], [s.observed for s in panel.items], split.train_end,
                                robust=robust, nonnegative=nonnegative)
    encoder = CovariateEncoder.fit(read.schema.covariates, read.categorical, read.covariates, panel,
                                   split.train_end, robust=robust)
    if not windows:
        return Prepared(split, scaler, encoder, None, None)
    if all(stop <= start for start, stop in split.train):  # no series holds a window:
        split_panel(panel, context, horizon, val_windows=val_windows)  # the error that names the shortest
    encoded = encoder.encode(panel, read.covariates)
    train_set = WindowDataset.from_panel(panel, scaler, context, horizon, split.train, covariates=encoded,
                                         drop_far=True)
    if len(train_set) == 0:
        raise SeriesTooShort("no training window fits in the data; use a shorter context_length or "
                             "prediction_length, or fewer val_windows")
    if split.val is None:
        val_set = None
    elif val is None:  # the end of the same series: the same stored values, other origins
        val_set = train_set.at_origins(split.val)
    else:
        val_set = WindowDataset.from_panel(val.panel, scaler, context, horizon, split.val, scaler_rows=split.val_rows,
                                           covariates=encoder.encode(val.panel, val.covariates), drop_far=True)
    return Prepared(split, scaler, encoder, train_set, val_set)


def context_for(settings: ForecasterSettings, panel: Panel, val: Panel | None) -> int:
    """The context of a fit on ``panel``: for a model that reads whole histories
    (:func:`history_for`) the longest series; else the one set, else the model's default
    (:meth:`~tsrec.models.base.ForecastModel.default_context` at the frequency's season), capped
    so that at least half of the series (the lower median's length) hold one training window and
    its validation windows (a shorter series gives none, and is forecast from a padded window), and
    never below twice the horizon; for a rule on each window, fitted on none (naive, seasonal
    naive), the model's default."""
    window = settings.window
    model_class = model_spec(settings.model).model_class
    if model_class.whole_history:
        return history_for(model_class, window.context_length, panel)
    if window.context_length is not None:
        return window.context_length
    horizon = window.prediction_length
    wanted = model_class.default_context(horizon, seasonality(panel.calendar))
    if wanted <= 2 * horizon or not (model_class.trainable or model_class.fits_windows):
        return wanted
    lengths = sorted(len(item) for item in panel.items)
    typical = lengths[(len(lengths) - 1) // 2]  # at least half of the series are this long
    windows = 0 if val is not None else \
        default_val_windows(typical, horizon) if window.val_windows is None else window.val_windows
    extra = horizon + windows - 1 if windows else 0
    return max(2 * horizon, min(wanted, typical - horizon - extra))


def history_for(model_class: type[ForecastModel], context_length: int | None, panel: Panel) -> int:
    """The context of a model that reads whole histories (``model_class.whole_history``: the
    statistical models) on ``panel``: its longest series, so that every series is read whole (a
    shorter one's window starts with unobserved steps, which are not its history), capped by the
    user's ``context_length`` and the model's ``max_history`` where set."""
    longest = max(len(item) for item in panel.items)
    cap = history_cap(model_class, context_length)
    return longest if cap is None else min(longest, cap)


def history_cap(model_class: type[ForecastModel], context_length: int | None) -> int | None:
    """The most steps of each series a model that reads whole histories reads: the user's
    ``context_length`` or the model's ``max_history``, the smaller; None where neither is set."""
    caps = [cap for cap in (context_length, model_class.max_history) if cap is not None]
    return min(caps) if caps else None


def _facts(panel: Panel, split: Split, encoder: CovariateEncoder) -> DataFacts:
    """What the resolver reads off the training rows of ``panel``, where the values the scaler reads
    as missing are unobserved (:func:`~tsrec.data.windows.far_as_missing`: a typo of 1e7 every 97
    rows made the spectrum's lines the typos', and the season of a daily series with a weekly
    cycle 3)."""
    periods = dominant_periods([s.values[:end] for s, end in zip(panel.items, split.train_end)],
                               [s.observed[:end] for s, end in zip(panel.items, split.train_end)])
    return data_facts(panel.calendar, n_channels=len(panel.columns) if panel.layout == "wide" else 1, periods=periods,
                      n_covariate_features=encoder.n_features, static_cardinalities=encoder.cardinalities)


def fit_state(read: Read, settings: ForecasterSettings, *, val: Read | None = None, resume: bool = False,
              prefitted: Prefitted | None = None, like: ForecastModel | None = None,
              unkept: str | None = None) -> Fit:
    """Fit ``settings`` (the user's, as given to the Forecaster) on ``read`` (validation windows
    from its end, or ``val``); see the module. ``resume``: continue the run whose checkpoint is in
    the settings' ``output_dir``. ``prefitted``: a network fitted elsewhere, taken as it is (its
    scaler fitted on all the history when ``refit_full``). ``like``: the same statistical model
    fitted on the first steps of ``read``'s series, whose variants it keeps
    (:meth:`~tsrec.models.base.ForecastModel.fit_series`). ``unkept``: why a signal that stops
    training keeps nothing to resume from, where the caller removes ``output_dir`` (said in place of
    the advice to fit again with ``resume=True``). Nothing is kept anywhere: an exception leaves no
    trace but the logs and checkpoints in ``output_dir``."""
    given = settings  # what the state keeps: "auto" is decided again by each fit on its own data
    settings, events = resolve_far_values(settings, read)
    panel, horizon = read.panel, settings.window.prediction_length
    training = settings.training
    context = context_for(settings, panel, None if val is None else val.panel) if prefitted is None \
        else prefitted.context_length
    model_class = model_spec(settings.model).model_class
    trainable = model_class.trainable
    # A model that is not trained (statistical, seasonal naive, the ridge, an ensemble of members fitted
    # already) has nothing to validate: its scaler and the data's cycles come from all the history.
    val_windows = settings.window.val_windows if trainable or val is not None else 0
    # A model fitted on no window (one that reads whole histories, a rule on each window such as
    # seasonal naive, an ensemble of members fitted already) has no windows to split: the split sets
    # the training part the scaler and the data's cycles are taken from, which needs no context.
    # A series too short for a training window (and its validation windows) gives none: a statistical
    # model fits all of it (statsforecast's fallback, its last value, where it holds too few steps),
    # a windowed one forecasts it from a padded window (as naive or seasonal naive forecast any).
    windows = trainable or (model_class.fits_windows and prefitted is None)
    prepared = prepare(read, val, context if windows else 1, horizon, val_windows=val_windows,
                       robust=settings.window.robust, nonnegative=settings.window.nonnegative, windows=windows)
    kept = far_as_missing(panel, prepared.scaler)  # what the models read: far values missing
    facts = _facts(kept, prepared.split, prepared.encoder)
    effective = settings if prefitted is None else dataclasses.replace(settings, network=prefitted.network)
    if prefitted is None:  # RSAConfig(prior="ets"): the ETS fit of the training part the REMs start from
        train_values = [s.values[:end] for s, end in zip(panel.items, prepared.split.train_end)]
        effective = dataclasses.replace(effective, network=with_smoothing_prior(
            effective.network, train_values, facts, freq=panel.freq, horizon=horizon))
    resolved = effective.resolved(facts, freq=panel.freq, covariates=read.schema.covariates, context_length=context)
    started = time.perf_counter()
    _seed(training.seed, trainable)
    model = build_model(resolved.model, resolved.network) if prefitted is None else \
        Ensemble(resolved.network, prefitted.members)
    run, refit, scaler, encoder = _Run([], None, None, {}, 0.0), None, prepared.scaler, prepared.encoder
    if trainable:
        limit = training.time_limit
        refits = training.refit_full and prepared.split.val is not None and val is None
        budget = plan_budget(training, len(prepared.train_set))
        resolved = dataclasses.replace(resolved, training=dataclasses.replace(resolved.training,
                                                                              max_steps=budget.max_steps))
        with _far_values_named(panel, prepared.scaler):
            run = train(model, resolved, prepared.train_set, prepared.val_set, budget, resume=resume,
                        describe=(panel, None if val is None else val.panel), unkept=unkept,
                        max_seconds=None if limit is None else (limit / 2 if refits else limit))
            if refits:
                left = None if limit is None else limit - (time.perf_counter() - started)
                model, scaler, encoder, refit, run = _refit(resolved, read, context, run, budget, left, unkept)
    elif resume:
        raise ValueError(f"{settings.model!r} needs no training, so there is no run to resume; "
                         "fit without resume=True")
    elif prefitted is None and isinstance(model, WindowFit):  # the ridge, the trees: at once on every window
        model.fit_windows(prepared.train_set, seed=training.seed)
    elif prefitted is None:  # the statistical models: their parameters, fitted once on all the history
        model.fit_series([s.values for s in panel.items], [s.observed for s in kept.items], like=like)
    summary = TrainingSummary(pd.DataFrame(run.history, columns=list(TrainingSummary.COLUMNS)), run.best_epoch,
                              time.perf_counter() - started, run.best_step, run.budget, refit)
    # The history predict() forecasts from: the context, and a missing tail after it where a network forecasts one.
    if fills_tails(model.trainable, encoder.config.columns):
        history, covariate_history = with_tails(panel, read.covariates, context)
    else:
        history, covariate_history = panel.tail(context), read.covariates.tail(context)
    state = FittedState(settings=given, resolved=resolved, model=model.eval(), history=history,
                        scaler=scaler, covariates=encoder, covariate_history=covariate_history,
                        facts=facts, summary=summary, schema=read.schema,
                        leaderboard=None if prefitted is None else prefitted.leaderboard)
    report_far(state, panel, np.arange(len(panel.items)), "fit", stacklevel=4, events=events)
    report_far_covariates(state, panel, read.covariates, "fit", stacklevel=4)
    if val is not None:
        report_far(state, val.panel, np.asarray(prepared.split.val_rows), "fit", stacklevel=4)
    return Fit(state, run.trainer)


def _seed(seed: int, trainable: bool) -> None:
    """Seed Python's, NumPy's and torch's generators, as Lightning's ``seed_everything`` does; a
    network that trains gets that call itself (which also seeds its data loaders' workers), a model
    that does not train the same seeds without loading Lightning."""
    if trainable:
        import lightning.pytorch as pl

        pl.seed_everything(seed, workers=True, verbose=False)
        return
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _refit(resolved: ForecasterSettings, read: Read, context: int, run: _Run, budget: Budget,
           max_seconds: float | None, unkept: str | None,
           ) -> tuple[ForecastModel, StandardScaler, CovariateEncoder, dict[str, Any], _Run]:
    """Train a fresh model (same seed) on every window of ``read``, validation part included,
    for as many passes as ``run`` made up to its best check (:func:`refit_budget`), with the
    scaler and covariate encoding fitted on all of it. Returns them, the refit's record and the
    validated ``run`` with the refit's trainer."""
    import lightning.pytorch as pl

    training = resolved.training
    full = prepare(read, None, context, resolved.window.prediction_length, val_windows=0,
                   robust=resolved.window.robust, nonnegative=resolved.window.nonnegative, windows=True)
    best_step = run.best_step if run.best_step is not None else run.budget["steps_run"]
    best_epoch = run.best_epoch if run.best_epoch is not None else len(run.history)
    plan = refit_budget(budget, best_step=max(best_step, 1), best_epoch=max(best_epoch, 1),
                        train_windows=run.budget["train_windows"], full_windows=len(full.train_set),
                        batch_size=training.batch_size)
    pl.seed_everything(training.seed, workers=True, verbose=False)
    model = build_model(resolved.model, resolved.network)
    again = train(model, resolved, full.train_set, None, plan, describe=None, resume=False, unkept=unkept,
                  max_seconds=None if max_seconds is None else max(max_seconds, 1.0))
    record = {"windows": len(full.train_set), "steps": again.budget["steps_run"], "epochs": len(again.history),
              "seconds": again.seconds, "train_loss": again.history[-1]["train_loss"] if again.history else math.nan}
    return model, full.scaler, full.encoder, record, dataclasses.replace(run, trainer=again.trainer)


def train(model: ForecastModel, resolved: ForecasterSettings, train_set: WindowDataset, val_set: WindowDataset | None,
          budget: Budget, *, describe: tuple[Panel, Panel | None] | None, resume: bool,
          max_seconds: float | None, unkept: str | None = None) -> _Run:
    """Train ``model`` in place through Lightning for ``budget``, with early stopping and the
    best check's weights restored when ``val_set`` is given. Logs go to the settings'
    ``output_dir``, or to a temporary folder removed on return; with ``output_dir`` set and
    ``describe`` (the training and validation panels), per-epoch checkpoints too, and ``resume``
    continues from them (``unkept``: :func:`fit_state`'s). torch's intra-op threads are chosen for
    the network while it trains (:func:`~tsrec.training.threads.training_threads`)."""
    from tsrec.training import (
        EpochCheckpoint,
        ForecastingModule,
        RestoreBestWeights,
        SmoothedEarlyStopping,
        describe_run,
        fit_or_raise,
        make_loader,
        make_trainer,
        quiet_lightning,
        resume_checkpoint,
    )
    from tsrec.training.threads import torch_threads, training_threads

    training: TrainingConfig = resolved.training
    folder = None if resolved.trainer.output_dir is None else Path(resolved.trainer.output_dir)
    val_loader = None if val_set is None else make_loader(val_set, training, train=False)
    checkpoints = None if folder is None or describe is None else folder / "checkpoints"
    # a resumed run shares what it trains, not how it runs (the trainer section)
    what = {key: value for key, value in resolved.to_dict().items() if key != "trainer"}
    run = None if checkpoints is None else describe_run(what, *describe)
    ckpt_path = resume_checkpoint(checkpoints, run) if resume else None
    # what resume=True continues from if a signal stops this run: its own checkpoint, or in the
    # refit (describe None) the finished validated run's
    resumable = None if folder is None else folder / "checkpoints" / EpochCheckpoint.FILENAME
    started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        output_dir = folder or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tsrec-run-")))
        stack.enter_context(quiet_lightning())
        stack.enter_context(torch_threads(training_threads(model, resolved.trainer.threads)))
        module = ForecastingModule(model, training, schedule_steps=budget.schedule_steps)
        trainer = make_trainer(training, output_dir, budget=budget, validate=val_loader is not None,
                               trainer_kwargs=resolved.trainer.trainer_kwargs, max_seconds=max_seconds,
                               checkpoint=None if checkpoints is None else EpochCheckpoint(checkpoints, run))
        fit_or_raise(trainer, module, make_loader(train_set, training, train=True), val_loader,
                     ckpt_path=ckpt_path, resumable=resumable, unkept=unkept)
    log.debug("tsrec: training logs in %s", output_dir)
    restore = next((c for c in trainer.callbacks if isinstance(c, RestoreBestWeights)), None)
    stopping = next((c for c in trainer.callbacks if isinstance(c, SmoothedEarlyStopping)), None)
    seconds = time.perf_counter() - started
    stopped_by = "early stopping" if stopping is not None and stopping.stopped_epoch > 0 else \
        "time limit" if max_seconds is not None and seconds >= max_seconds else "budget"
    record = {"max_steps": budget.max_steps, "max_epochs": budget.max_epochs,
              "val_check_steps": budget.val_check_steps, "steps_per_epoch": budget.steps_per_epoch,
              "train_windows": len(train_set), "steps_run": int(trainer.global_step),
              "time_limit": training.time_limit, "stopped_by": stopped_by}
    found = restore is not None and restore.best_epoch is not None
    return _Run(module.history, restore.best_epoch + 1 if found else None, restore.best_step if found else None,
                record, seconds, trainer)


def require_observed(panel: Panel, train_end: Sequence[int]) -> None:
    """A ``ValueError`` naming the first series and column with no observed value in its
    training part: a model cannot learn, or forecast, a variable it has never seen."""
    for position, (item, end) in enumerate(zip(panel.items, train_end)):
        never = ~item.observed[:end].any(axis=0)  # [C]
        if never.any():
            channel = int(np.argmax(never))
            raise ValueError(f"{panel.channel_label(position, channel)} has no observed value in the training part "
                             f"(its first {end} steps{launch_note(item, channel)}); drop it, or fit on a frame where "
                             "it has data")


def resolve_far_values(settings: ForecasterSettings, read: Read) -> tuple[ForecasterSettings, Events | None]:
    """``settings`` with ``far_values="auto"`` resolved on ``read``: ``"keep"`` where its far values
    fall on the steps a dynamic covariate marks more often than chance
    (:func:`~tsrec.data.events.far_events`), else ``"missing"``; and the test's :class:`Events` where
    it keeps them (None otherwise, and for settings that name ``"missing"`` or ``"keep"``)."""
    window = settings.window
    if window.far_values != "auto":
        return settings, None
    events = far_events(read.panel, read.covariates, read.schema.covariates.dynamic)
    kept = events.covariate is not None
    return (dataclasses.replace(settings, window=dataclasses.replace(window, far_values="keep" if kept else "missing")),
            events if kept else None)


def report_far(state: FittedState, panel: Panel, rows: np.ndarray, when: str, *, stacklevel: int,
               isolated: bool = True, events: Events | None = None) -> None:
    """Warn (:class:`~tsrec.data.scaling.OutlierWarning`) about the observed values of ``panel``
    beyond the fences of their scaler row (``rows`` ``[N]``) of ``state``'s scaler: the fit data
    (``when="fit"``) or the contexts forecast from (``"predict"``). Level shifts (runs up to a
    series' end, :func:`~tsrec.data.scaling.level_shifts`) are named as such, with where each
    starts and its level, apart from the isolated far values (the first :data:`FAR_EXAMPLES`
    named with their series, column and timestamp): one warning, a sentence for each kind.
    ``isolated=False``: the level shifts alone (``predict`` of the fitted history, whose isolated far
    values the fit named). ``events``: why ``far_values="auto"`` kept them (:func:`resolve_far_values`)."""
    count, examples, shifts = _far_values(panel, state.scaler, rows)
    count = count if isolated else 0
    if not count and not shifts:
        return
    keep = state.resolved.window.far_values == "keep"
    revin = any(isinstance(m, RevIN) and m.far_iqrs is not None for m in state.model.modules())  # RevIN's far rule
    context = state.resolved.window.context_length
    where = "in the fit data" if when == "fit" else f"in the last {context} steps forecast from"
    said = []
    if shifts:
        named = ", ".join(f"{label} from {stamp} ({n} values up to its last, median {level:.6g})"
                          for label, stamp, n, level in shifts[:FAR_EXAMPLES])
        more = f" and {len(shifts) - FAR_EXAMPLES} more" if len(shifts) > FAR_EXAMPLES else ""
        if when == "fit":
            effect = "kept as data by the scaling and the training windows"
        elif revin and state.scaler.robust:  # RevIN judges in the robust scale, where the shift stands out
            effect = "kept: the network's instance normalisation reads a window that ends in one at its new level"
        else:
            effect = "the model forecasts from them as they are"
        said.append(f"{len(shifts)} series {where} end at a new level far outside their training distribution "
                    f"(at least {SHIFT_STEPS} values beyond one fence up to their last observed step: a level "
                    f"shift): {named}{more}; {effect}. If it is a run of mistakes instead, fix or drop those rows")
    if count:
        named = ", ".join(f"{label} at {stamp} ({value:.6g})" for label, stamp, value in examples)
        more = f" and {count - len(examples)} more" if count > len(examples) else ""
        if when == "predict" and state.scaler.robust:
            effect = "the model forecasts with them treated as missing, as it was fitted (far_values='keep' keeps them)"
        elif when == "predict":
            effect = ("the network's instance normalisation reads the ones far from their window as missing "
                      "(far_values='keep' reads them as they are)" if revin
                      else "the model forecasts from them as they are")
        elif state.scaler.robust:
            effect = "the model was fitted and forecasts with them treated as missing (far_values='keep' keeps them)"
        else:
            effect = ("they set their series' scale and the model was trained on them (scaling='robust' "
                      "leaves them out)" if not keep else "they set their series' scale and the model was "
                      "trained on them (far_values='keep')")
        marked = (" If they are real events that the covariates mark (a holiday, a promotion), fit with "
                  "far_values='keep': read as missing, they cannot be learned" if state.scaler.robust and
                  state.covariates.config.dynamic else "")
        check = " Check them (a typo, a wrong unit, a placeholder such as -9999?)" + marked
        if events is not None:
            effect = (f"far_values='auto' kept them as events that a covariate marks, not mistakes: "
                      f"{events.describe()}; they set their series' scale and the model was trained on them "
                      "(far_values='missing' reads them as missing)")
            check = ""
        said.append(f"{count} value(s) {where} lie far outside their series' training distribution (more than "
                    f"{FAR_IQRS:g} interquartile ranges beyond its quartiles), apart from any level shift: {named}"
                    f"{more}; {effect}.{check}")
    warnings.warn(". ".join(said), OutlierWarning, stacklevel=stacklevel)


def report_far_covariates(state: FittedState, panel: Panel, values: CovariateValues, when: str,
                          future: Sequence[np.ndarray] | None = None, *, context: bool = True,
                          stacklevel: int) -> None:
    """Warn (:class:`~tsrec.data.scaling.OutlierWarning`) naming the dynamic covariate values of
    ``panel`` (``values``, and ``future`` per item ``[H, Kf]`` at ``predict``; ``context=False``:
    those alone) far outside their training distribution, which the model reads as missing
    (:meth:`~tsrec.data.covariates.CovariateEncoder.read_as_missing`): the fit data (``when="fit"``)
    or what a forecast reads (``"predict"``)."""
    count, named = state.covariates.far_values(panel, values, future, context=context)
    if not count:
        return
    where = "in the fit data" if when == "fit" else "that the forecast reads"
    more = f" and {count - len(named)} more" if count > len(named) else ""
    warnings.warn(f"{count} covariate value(s) {where} lie far outside their training distribution (more than "
                  f"{FAR_IQRS:g} interquartile ranges beyond its quartiles, apart from a level shift): "
                  f"{', '.join(named)}{more}; the model reads them as missing, as their training mean "
                  "(far_values='keep' reads them as they are). Check them (a typo, a wrong unit, a placeholder "
                  "such as -9999?)", OutlierWarning, stacklevel=stacklevel)


def report_unseen_categories(state: FittedState, panel: Panel, values: CovariateValues, when: str, *,
                             stacklevel: int) -> None:
    """Warn naming the categorical static covariates of ``panel``'s series (``values``) whose
    category ``fit`` never saw (a new store of a new type), which every model reads as the average
    of the known ones (:data:`~tsrec.data.covariates.UNSEEN`), in ``when`` (``"predict"``,
    ``"backtest"``)."""
    if not (named := state.covariates.unseen(panel, values.static_cat)):
        return
    more = f" and {len(named) - 5} more" if len(named) > 5 else ""
    warnings.warn(f"{when}: {len(named)} static covariate value(s) are categories the model did not see in fit "
                  f"({'; '.join(named[:5])}{more}); each is read as the average of the known categories (a network's "
                  "embeddings averaged, the ridge's indicators 1/n each, the trees' missing value). Refit on data "
                  "that hold them to learn their effect", UserWarning, stacklevel=stacklevel)


@contextlib.contextmanager
def _far_values_named(panel: Panel, scaler: StandardScaler) -> Iterator[None]:
    """Training under it that diverges (:class:`~tsrec.training.TrainingDiverged`) on fit data with
    values far outside their series' training distribution that the training windows keep (a
    level shift; with ``far_values="keep"`` or ``scaling="standard"`` every far value) raises the
    error again with those values named, and the fix that works for them: no learning rate makes
    a jump of thousands of training scales predictable."""
    from tsrec.training import TrainingDiverged

    try:
        yield
    except TrainingDiverged as error:
        count, examples, shifts = _far_values(panel, scaler, np.arange(len(panel.items)))
        named = [f"{label} from {stamp} ({n} values up to its last, median {level:.6g})"
                 for label, stamp, n, level in shifts]
        if not scaler.robust:
            named += [f"{label} at {stamp} ({value:.6g})" for label, stamp, value in examples]
        if not named:
            raise
        further = " and more" if len(named) > FAR_EXAMPLES or (not scaler.robust and count > len(examples)) else ""
        fix = ("if they are mistakes (placeholders, typos, a wrong unit), set them to NaN or drop those rows; if they "
               "are real, fit with far_values='keep', which scales each series with all of its values" if scaler.robust
               else "set them to NaN or drop those rows (fitted with scaling='robust' and far_values='missing', the "
               "defaults, isolated ones are read as missing)")
        raise TrainingDiverged(
            f"{error.problem}. The fit data hold values far outside their series' training distribution, which the "
            f"training windows keep and which no learning rate or gradient clipping makes predictable: "
            f"{', '.join(named[:FAR_EXAMPLES])}{further}"
            f"; {fix}", error.problem) from None


def _far_values(panel: Panel, scaler: StandardScaler,
                rows: np.ndarray) -> tuple[int, list[tuple[str, Any, float]], list[tuple[str, Any, int, float]]]:
    """The observed values of ``panel`` beyond the fences of their scaler row (``rows`` ``[N]``,
    one per item), a block of items at a time: how many are isolated (not a level shift,
    :meth:`~tsrec.data.scaling.StandardScaler.far_parts`) and the first :data:`FAR_EXAMPLES` as
    ``(channel label, timestamp, value)``, in item, time and column order; and every level shift
    as ``(channel label, first timestamp, values, median value)``."""
    lengths = np.diff(panel.offsets)  # [N]
    count, examples, shifts = 0, [], []
    for block in item_blocks(lengths):
        values = np.concatenate([panel.items[i].values for i in block])  # [M, C]
        observed = np.concatenate([panel.items[i].observed for i in block])
        series = np.repeat(np.arange(len(block)), lengths[block])  # [M]
        far, shifted = scaler.far_parts(values, observed,
                                        np.repeat(np.asarray(rows)[block.start:block.stop], lengths[block]), series)
        count += int(far.sum())
        ends = np.cumsum(lengths[block])  # [n] end of each item's rows in the block

        def located(step: int) -> tuple[int, Any]:  # the item's position in the panel, and the step's timestamp
            position = int(np.searchsorted(ends, step, side="right"))
            at = int(step) - int(ends[position] - lengths[block.start + position])
            return block.start + position, panel.items[block.start + position].index[at]

        for step, c in np.argwhere(far)[:FAR_EXAMPLES - len(examples)]:
            position, stamp = located(step)
            examples.append((panel.channel_label(position, int(c)), stamp, float(values[step, c])))
        for c in range(values.shape[1]):
            run = shifted[:, c]
            for n in np.unique(series[run]):
                steps = np.flatnonzero(run & (series == n))
                position, stamp = located(int(steps[0]))
                shifts.append((panel.channel_label(position, c), stamp, len(steps),
                               float(np.median(values[steps, c]))))
    return count, examples, shifts
