"""The estimator users touch: ``Forecaster(model, ...).fit(df).predict()``, ``save`` / ``load``."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import math
import os
import tempfile
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from tsrec._checks import check_int
from tsrec.config import DEFAULT_MODEL, FAR_IQRS, CovariateConfig, DataFacts, TrainingConfig
from tsrec.data import (
    CovariateEncoder,
    CovariateValues,
    Panel,
    StandardScaler,
    WindowCovariates,
    WindowDataset,
    data_facts,
    future_index,
    normalize_freq,
    split_panel,
)
from tsrec.data.covariates import check_context, read_future
from tsrec.data import source
from tsrec.data.schema import Schema
from tsrec.data.source import Source
from tsrec.data.scaling import OutlierWarning, item_blocks
from tsrec.data.periods import dominant_periods
from tsrec.data.split import default_val_windows
from tsrec.data.time_features import seasonality
from tsrec.models import ForecastModel, build_model, model_spec
from tsrec.models.ensemble import AUTO
from tsrec.nn.outputs import check_levels
from tsrec.fitted import FittedState, ForecastResult, TrainingSummary, unscale
from tsrec.settings import ForecasterSettings
from tsrec.training.budget import Budget, plan_budget, refit_budget

__all__ = ["DEFAULT_MODEL", "Forecaster"]

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class _Run:
    """One training run: its per-epoch history and what :class:`TrainingSummary` records of it."""

    history: list[dict[str, float]]
    best_epoch: int | None
    best_step: int | None
    budget: dict[str, Any]
    seconds: float


class Forecaster:
    """Train any registered model on a DataFrame and forecast the steps after it.

    Args:
        model: a name from :func:`tsrec.list_models`; default :data:`DEFAULT_MODEL`
            (``rsa_patchtst``): RSA in the backbone with the lowest long-horizon error measured
            (tied with PatchTST on ETTh1/ETTh2; ``benchmarks/README.md``).
        prediction_length: steps to forecast.
        context_length: past steps the model reads (default ``2 * prediction_length``, or the
            model's longer default capped by the shortest series: 32 steps at least for PatchTST,
            ten seasons for ``ets`` and ``theta``, the longest member's for ``auto``).
        freq: pandas frequency of the data (inferred from the timestamps at every ``fit`` when None).
        val_windows: validation forecast origins taken from the end of each series of the fit frame
            (default: those whose targets are its last 10% of steps, at least one; 0 trains without
            validation, early stopping or weight restore).
        output_dir: where training writes its CSV logs and per-epoch checkpoints (kept after
            ``fit``; what ``resume=True`` continues from). Default: a temporary folder, removed
            when ``fit`` returns (never the working directory).
        trainer_kwargs: passed to ``lightning.pytorch.Trainer`` unchanged, over tsrec's defaults.
        **options: training settings (:class:`~tsrec.config.TrainingConfig` fields such as
            ``max_epochs``, ``batch_size``, ``learning_rate``, ``seed``, ``precision``) and model
            options (fields of the model's config such as ``d_model``, ``n_heads``, ``e_layers``,
            ``label_length``, ``rsa``).

    The arguments become one typed :class:`~tsrec.settings.ForecasterSettings` (``.settings``);
    ``fit`` completes it from the data (``.resolved_settings``). The Forecaster follows the
    scikit-learn estimator protocol: ``get_params``, ``set_params`` and ``sklearn.base.clone``.

    ``fit`` accepts a wide frame (DatetimeIndex or ``time_col``, one numeric column per variable,
    forecast jointly) or a long frame (``id_col``, ``time_col``, ``target_col``; many series),
    with covariate columns named by ``past_covariates``, ``future_covariates`` and
    ``static_covariates``. ``predict`` returns a long frame with columns ``item_id``,
    ``timestamp``, ``mean``.
    """

    def __init__(self, model: str = DEFAULT_MODEL, *, prediction_length: int, context_length: int | None = None,
                 freq: str | None = None, val_windows: int | None = None, output_dir: str | os.PathLike | None = None,
                 trainer_kwargs: dict[str, Any] | None = None, **options: Any) -> None:
        # Kept verbatim for get_params / sklearn.base.clone.
        self._params: dict[str, Any] = dict(model=model, prediction_length=prediction_length,
                                            context_length=context_length, freq=freq, val_windows=val_windows,
                                            output_dir=output_dir, trainer_kwargs=trainer_kwargs, **options)
        if trainer_kwargs is not None and not isinstance(trainer_kwargs, dict):
            raise TypeError(f"trainer_kwargs must be a dict of lightning.pytorch.Trainer arguments, "
                            f"got {type(trainer_kwargs).__name__}")
        self.settings = ForecasterSettings.from_options(
            model, prediction_length=prediction_length, context_length=context_length,
            freq=None if freq is None else normalize_freq(freq), val_windows=val_windows, **options)
        self.output_dir = None if output_dir is None else Path(output_dir)
        self.trainer_kwargs = dict(trainer_kwargs or {})
        self._unfit()

    def _unfit(self) -> None:
        self.fitted: FittedState | None = None
        self.trainer = None

    # ------------------------------------------------------------------ fitted state
    @property
    def model(self) -> ForecastModel | None:
        """The trained network (None before ``fit``)."""
        return None if self.fitted is None else self.fitted.model

    @property
    def resolved_settings(self) -> ForecasterSettings | None:
        """The settings as completed from the data at ``fit`` (None before)."""
        return None if self.fitted is None else self.fitted.resolved

    @property
    def training_summary(self) -> TrainingSummary | None:
        return None if self.fitted is None else self.fitted.summary

    @property
    def data_facts(self) -> DataFacts | None:
        return None if self.fitted is None else self.fitted.facts

    @property
    def panel(self) -> Panel | None:
        """The last ``context_length`` steps of every fitted series (None before ``fit``)."""
        return None if self.fitted is None else self.fitted.history

    @property
    def scaler(self) -> StandardScaler | None:
        return None if self.fitted is None else self.fitted.scaler

    @property
    def covariates(self) -> CovariateEncoder | None:
        """The fitted covariate encoding (None before ``fit``)."""
        return None if self.fitted is None else self.fitted.covariates

    # ------------------------------------------------------------------ settings
    @property
    def model_name(self) -> str:
        return self.settings.model

    @property
    def prediction_length(self) -> int:
        return self.settings.window.prediction_length

    @property
    def context_length(self) -> int:
        """The past steps the model reads: the fitted one, else the one set, else twice the
        horizon (a model with a longer default, :meth:`ForecastModel.default_context`, gets it at
        ``fit``, capped by the shortest series)."""
        if self.resolved_settings is not None:
            return self.resolved_settings.window.context_length
        return self.settings.window.context

    @property
    def val_windows(self) -> int | None:
        return self.settings.window.val_windows

    @property
    def scaling(self) -> str:
        """How series are scaled (:attr:`WindowConfig.scaling <tsrec.config.WindowConfig>`)."""
        return self.settings.window.scaling

    @property
    def freq(self) -> str | None:
        """The fitted data's frequency, or the one set (None before ``fit`` when inferred)."""
        return self.panel.freq if self.panel is not None else self.settings.window.freq

    @property
    def training(self) -> TrainingConfig:
        return self.settings.training

    @property
    def trainable(self) -> bool:
        return model_spec(self.model_name).model_class.trainable

    @property
    def columns(self) -> dict[str, Any]:
        """The ``time_col``, ``id_col`` and ``target_col`` of the last ``fit``."""
        if self.fitted is None:
            return {"time_col": None, "id_col": None, "target_col": None}
        return self.fitted.schema.columns

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor arguments (scikit-learn protocol; ``deep`` is accepted for it)."""
        return dict(self._params)

    def set_params(self, **params: Any) -> Forecaster:
        """Change constructor arguments (validated as in the constructor); a fitted model is
        dropped, so ``fit`` again. Returns ``self``."""
        merged = {**self._params, **params}
        fresh = type(self)(**merged)
        self.__dict__.update(fresh.__dict__)
        return self

    def unfitted_copy(self) -> Forecaster:
        """A new, unfitted Forecaster with the same settings (``sklearn.base.clone``); refitting
        it on the same data with the same seed trains the same model."""
        from sklearn.base import clone

        return clone(self)

    # ------------------------------------------------------------------ fit
    def fit(self, df: Source, *, time_col: str | None = None, id_col: str | None = None,
            target_col: str | None = None, val_df: Source | None = None, resume: bool = False,
            past_covariates: Sequence[str] | None = None, future_covariates: Sequence[str] | None = None,
            static_covariates: Sequence[str] | None = None) -> Forecaster:
        """Train on ``df`` (validation from its end, or on ``val_df``); returns ``self``.

        ``df`` is a DataFrame (wide or long, see the class docstring) or long Parquet data: a file,
        a folder of ``*.parquet`` files or a list of files, read a chunk of series at a time
        (:func:`~tsrec.data.parquet.read_parquet`; ``id_col`` is then required). ``predict`` and
        ``backtest`` take the same.

        Training runs for the budget of :class:`~tsrec.config.TrainingConfig` (by default a number
        of optimizer steps scaled to the training windows, validated 20 times, with early stopping
        on the smoothed validation loss and the best check's weights kept). When the validation
        part is the end of ``df`` and ``refit_full`` is on (the default), a fresh model is then
        trained on all of ``df``, validation part included, for as many passes as the validated
        run needed, so that the last observations shape the forecast (``refit_full=False`` keeps
        the validated run's model, trained without the validation part). The budget, the best
        check and the refit are recorded in :attr:`training_summary`.

        Covariates are columns of ``df`` (and ``val_df``) that the model reads and does not
        forecast (:class:`~tsrec.config.CovariateConfig`): ``past_covariates`` are known up to the
        forecast origin only, ``future_covariates`` also over the horizon (``predict`` then needs
        their values: its ``future_covariates`` frame), ``static_covariates`` have one value per
        series (constant within each id of a long frame; numeric ones are scaled, others are
        categories, embedded, fixed at ``fit``). Numeric covariates are scaled per column with
        statistics of the training part only; a missing dynamic value in training reads as the
        training mean. They are saved with the model and listed in
        ``resolved_settings.covariates``; ``self.covariates`` is the fitted encoding.

        With ``output_dir`` set, the complete training state of every finished epoch is written to
        ``output_dir/checkpoints/last.ckpt`` (atomically: a kill leaves the previous or the new
        one); it stays there after ``fit`` returns. ``resume=True`` continues the run that wrote it,
        given the same data and settings (anything else is a ``ValueError`` naming the
        differences), and trains exactly the model the uninterrupted run would have (on CPU; every
        epoch's shuffling and dropout depend only on the seed and the epoch).

        Raises :class:`tsrec.training.TrainingDiverged` (a ``ValueError`` naming the epoch, the
        learning rate and the fix) when an epoch's training loss is not finite or explodes; no
        model is fitted from that run (a new Forecaster stays unfitted).

        Signals during training (:func:`tsrec.training.fit_or_raise`) log one line naming the
        signal and the checkpoint kept for ``resume=True`` (with ``output_dir`` set, once an epoch
        has finished), and leave the Forecaster as it was: Ctrl-C (SIGINT) raises a
        ``KeyboardInterrupt`` with that line; SIGTERM raises
        :class:`~tsrec.training.TrainingTerminated`, a ``SystemExit`` with status 143 that ends
        the program unless caught.
        """
        covariates = CovariateConfig(past=past_covariates, future=future_covariates, static=static_covariates)
        schema = Schema(time_col, id_col, target_col, covariates)
        columns = schema.columns
        categorical = source.categorical(df, schema)
        gaps = self.settings.window.gaps
        read = source.read(df, schema, categorical=categorical, freq=self.settings.window.freq, gaps=gaps)
        val = None if val_df is None else source.read(val_df, schema, categorical=categorical, freq=read.panel.freq,
                                                      gaps=gaps)
        panel, values = read.panel, read.covariates
        val_panel, val_values = (None, None) if val is None else (val.panel, val.covariates)
        auto = self._fit_auto_members(df, panel, columns, covariates, val_df, resume) if self.model_name == AUTO else None
        context = self._context_for(panel, val_panel) if auto is None else auto.context_length
        # an ensemble's scaler is its trained members' (fitted on all the history when they refit)
        val_windows = 0 if auto is not None and self.training.refit_full else self.val_windows
        split = split_panel(panel, context, self.prediction_length, val_windows=val_windows, val_panel=val_panel)
        _require_observed(panel, split.train_end)
        scaler, encoder = _fit_scaling(panel, values, covariates, categorical, split.train_end, self.scaling)
        periods = dominant_periods([s.values[:end] for s, end in zip(panel.items, split.train_end)],
                                   [s.observed[:end] for s, end in zip(panel.items, split.train_end)])
        facts = data_facts(panel.freq, n_channels=len(panel.columns) if panel.layout == "wide" else 1,
                           periods=periods, n_covariate_features=encoder.n_features,
                           static_cardinalities=encoder.cardinalities)
        settings = self.settings if auto is None else dataclasses.replace(self.settings, network=auto.network)
        resolved = settings.resolved(facts, freq=panel.freq, covariates=covariates, context_length=context)
        started = time.perf_counter()
        import lightning.pytorch as pl

        pl.seed_everything(self.training.seed, workers=True, verbose=False)
        model = build_model(resolved.model, resolved.network)
        if auto is not None:
            for network, member in zip(model.members, auto.members):
                network.load_state_dict(member.model.state_dict())
        run, refit = _Run([], None, None, {}, 0.0), None
        if self.trainable:
            train_covariates = encoder.encode(panel, values)
            val_covariates = train_covariates if val_panel is None else encoder.encode(val_panel, val_values)
            limit = self.training.time_limit
            refits = self.training.refit_full and split.val is not None and val_panel is None
            train_set, val_set = self._datasets(panel, val_panel, split, scaler, (train_covariates, val_covariates),
                                                context)
            budget = plan_budget(self.training, len(train_set))
            resolved = dataclasses.replace(resolved, training=dataclasses.replace(
                resolved.training, max_steps=budget.max_steps))
            run = self._train(model, resolved, train_set, val_set, budget, describe=(panel, val_panel), resume=resume,
                              max_seconds=None if limit is None else (limit / 2 if refits else limit))
            if refits:
                left = None if limit is None else limit - (time.perf_counter() - started)
                model, scaler, encoder, refit = self._refit(resolved, panel, values, covariates, categorical, run,
                                                            budget, left, context)
        elif resume:
            raise ValueError(f"{self.model_name!r} needs no training, so there is no run to resume; "
                             "fit without resume=True")
        summary = TrainingSummary(pd.DataFrame(run.history, columns=list(TrainingSummary.COLUMNS)), run.best_epoch,
                                  time.perf_counter() - started, run.best_step, run.budget, refit)
        self.fitted = FittedState(settings=self.settings, resolved=resolved, model=model.eval(),
                                  history=panel.tail(context), scaler=scaler, covariates=encoder,
                                  covariate_history=values.tail(context), facts=facts, summary=summary,
                                  schema=schema, leaderboard=None if auto is None else auto.leaderboard)
        self._report_far(panel, scaler, np.arange(len(panel.items)), "fit", stacklevel=3)
        if val_panel is not None:
            self._report_far(val_panel, scaler, np.asarray(split.val_rows), "fit", stacklevel=3)
        return self

    def _fit_auto_members(self, df: pd.DataFrame, panel: Panel, columns: dict[str, Any], covariates: CovariateConfig,
                          val_df: pd.DataFrame | None, resume: bool) -> Any:
        """``Forecaster("auto")``'s candidates scored, weighted and refitted (:mod:`tsrec.auto`)."""
        from tsrec.models.registry import model_fitter

        refused = [what for what, given in (("covariates", covariates.columns),
                                            ("val_df", val_df is not None),
                                            ("resume=True", resume)) if given]
        if refused:
            raise ValueError(f"Forecaster('auto') takes no {', '.join(refused)}: it validates its candidates on the "
                             "end of the fit frame and refits them; fit a model by name for these")
        return model_fitter(AUTO)(self, df, panel, columns)

    @property
    def leaderboard(self) -> pd.DataFrame:
        """``Forecaster("auto")``: each candidate's validation MSE (errors z-scored per series) and
        its weight in the ensemble (0: left out), best first; after ``fit`` also its ``fit_seconds``
        and a ``note`` (why it failed)."""
        self._require_fitted()
        if self.model_name != AUTO:
            raise AttributeError(f"only Forecaster('auto') has a leaderboard; this one is {self.model_name!r}")
        return self.fitted.leaderboard if self.fitted.leaderboard is not None else \
            self.resolved_settings.network.leaderboard()

    def _context_for(self, panel: Panel, val_panel: Panel | None) -> int:
        """The context of a fit on ``panel``: the one set, else the model's default
        (:meth:`~tsrec.models.base.ForecastModel.default_context` at the frequency's season), capped
        so that the shortest series still holds one training window and its validation windows,
        and never below twice the horizon."""
        if self.settings.window.context_length is not None:
            return self.settings.window.context_length
        horizon = self.prediction_length
        wanted = model_spec(self.model_name).model_class.default_context(horizon, seasonality(panel.freq))
        if wanted <= 2 * horizon:
            return wanted
        shortest = min(len(item) for item in panel.items)
        windows = 0 if val_panel is not None else \
            default_val_windows(shortest, horizon) if self.val_windows is None else self.val_windows
        extra = horizon + windows - 1 if windows else 0
        return max(2 * horizon, min(wanted, shortest - horizon - extra))

    def _datasets(self, panel: Panel, val_panel: Panel | None, split: Any, scaler: StandardScaler,
                  covariates: tuple[WindowCovariates, WindowCovariates],
                  context: int) -> tuple[WindowDataset, WindowDataset | None]:
        """The training windows of ``split`` and its validation windows (None without validation),
        with values far from the training distribution missing when the scaler is robust
        (``scaling="robust"``).
        ``covariates``: the encoded covariates of the training panel and of the validation panel."""
        train_set = WindowDataset.from_panel(panel, scaler, context, self.prediction_length, split.train,
                                             covariates=covariates[0], drop_far=True)
        if len(train_set) == 0:
            raise ValueError("no training window fits in the data; use a shorter context_length or "
                             "prediction_length, or fewer val_windows")
        if split.val is None:
            return train_set, None
        if val_panel is None:  # the end of the same series: the same stored values, other origins
            return train_set, train_set.at_origins(split.val)
        return train_set, WindowDataset.from_panel(val_panel, scaler, context, self.prediction_length, split.val,
                                                   scaler_rows=split.val_rows, covariates=covariates[1], drop_far=True)

    def _refit(self, resolved: ForecasterSettings, panel: Panel, values: CovariateValues, covariates: CovariateConfig,
               categorical: Sequence[str], run: _Run, budget: Budget, max_seconds: float | None, context: int
               ) -> tuple[ForecastModel, StandardScaler, CovariateEncoder, dict[str, Any]]:
        """Train a fresh model (same seed) on every window of ``panel``, validation part included,
        for as many passes as ``run`` made up to its best check (:func:`refit_budget`), with the
        scaler and covariate encoding fitted on all of it. Returns them and the refit's record."""
        import lightning.pytorch as pl

        full = split_panel(panel, context, self.prediction_length, val_windows=0)
        scaler, encoder = _fit_scaling(panel, values, covariates, categorical, full.train_end, self.scaling)
        encoded = encoder.encode(panel, values)
        train_set, _ = self._datasets(panel, None, full, scaler, (encoded, encoded), context)
        best_step = run.best_step if run.best_step is not None else run.budget["steps_run"]
        best_epoch = run.best_epoch if run.best_epoch is not None else len(run.history)
        plan = refit_budget(budget, best_step=max(best_step, 1), best_epoch=max(best_epoch, 1),
                            train_windows=run.budget["train_windows"], full_windows=len(train_set),
                            batch_size=self.training.batch_size)
        pl.seed_everything(self.training.seed, workers=True, verbose=False)
        model = build_model(resolved.model, resolved.network)
        again = self._train(model, resolved, train_set, None, plan, describe=None, resume=False,
                            max_seconds=None if max_seconds is None else max(max_seconds, 1.0))
        record = {"windows": len(train_set), "steps": again.budget["steps_run"], "epochs": len(again.history),
                  "seconds": again.seconds,
                  "train_loss": again.history[-1]["train_loss"] if again.history else math.nan}
        return model, scaler, encoder, record

    def _train(self, model: ForecastModel, resolved: ForecasterSettings, train_set: WindowDataset,
               val_set: WindowDataset | None, budget: Budget, *, describe: tuple[Panel, Panel | None] | None,
               resume: bool, max_seconds: float | None) -> _Run:
        """Train ``model`` in place through Lightning for ``budget``, with early stopping and the
        best check's weights restored when ``val_set`` is given. Logs go to ``output_dir``, or to a
        temporary folder removed on return; with ``output_dir`` set and ``describe`` (the
        training and validation panels), per-epoch checkpoints too, and ``resume`` continues
        from them."""
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

        val_loader = None if val_set is None else make_loader(val_set, self.training, train=False)
        checkpoints = None if self.output_dir is None or describe is None else self.output_dir / "checkpoints"
        run = None if checkpoints is None else describe_run(resolved.to_dict(), *describe)
        ckpt_path = resume_checkpoint(checkpoints, run) if resume else None
        # what resume=True continues from if a signal stops this run: its own checkpoint, or in the
        # refit (describe None) the finished validated run's
        resumable = None if self.output_dir is None else self.output_dir / "checkpoints" / EpochCheckpoint.FILENAME
        started = time.perf_counter()
        with contextlib.ExitStack() as stack:
            output_dir = self.output_dir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tsrec-run-")))
            stack.enter_context(quiet_lightning())
            module = ForecastingModule(model, self.training, schedule_steps=budget.schedule_steps)
            self.trainer = make_trainer(self.training, output_dir, budget=budget, validate=val_loader is not None,
                                        trainer_kwargs=self.trainer_kwargs, max_seconds=max_seconds,
                                        checkpoint=None if checkpoints is None else EpochCheckpoint(checkpoints, run))
            fit_or_raise(self.trainer, module, make_loader(train_set, self.training, train=True), val_loader,
                         ckpt_path=ckpt_path, resumable=resumable)
        log.debug("tsrec: training logs in %s", output_dir)
        callbacks = self.trainer.callbacks
        restore = next((c for c in callbacks if isinstance(c, RestoreBestWeights)), None)
        stopping = next((c for c in callbacks if isinstance(c, SmoothedEarlyStopping)), None)
        seconds = time.perf_counter() - started
        stopped_by = "early stopping" if stopping is not None and stopping.stopped_epoch > 0 else \
            "time limit" if max_seconds is not None and seconds >= max_seconds else "budget"
        record = {"max_steps": budget.max_steps, "max_epochs": budget.max_epochs,
                  "val_check_steps": budget.val_check_steps, "steps_per_epoch": budget.steps_per_epoch,
                  "train_windows": len(train_set), "steps_run": int(self.trainer.global_step),
                  "time_limit": self.training.time_limit, "stopped_by": stopped_by}
        found = restore is not None and restore.best_epoch is not None
        return _Run(module.history, restore.best_epoch + 1 if found else None, restore.best_step if found else None,
                    record, seconds)

    # ------------------------------------------------------------------ predict
    def _require_fitted(self) -> None:
        if self.model is None:
            from sklearn.exceptions import NotFittedError

            raise NotFittedError("this Forecaster is not fitted yet: call fit(df) first, or Forecaster.load(path)")

    def predict(self, df: Source | None = None, *, future_covariates: pd.DataFrame | None = None,
                quantiles: Sequence[float] | None = None, num_samples: int | None = None,
                batch_size: int | None = None) -> pd.DataFrame:
        """Forecast the ``prediction_length`` steps after the end of the fitted frame, or of ``df``
        (same columns, or known ids, as the fitted frame; at least ``context_length`` steps).

        A model fitted with future covariates needs ``future_covariates``: a frame in the fit
        frame's layout (its time column or a DatetimeIndex, and ``id_col`` for a long frame) with a
        finite value of every future covariate at every forecast step of every series (other rows
        are ignored). A missing, short, misaligned or NaN future covariate, and a dynamic covariate
        missing in the context, is a ``ValueError`` naming the series, the column and the first
        such timestamp.

        Returns a long frame with ``item_id``, ``timestamp`` and ``mean``, in original units. A
        probabilistic model (``output="normal"``, ``"studentt"`` or ``"quantile"``) adds one column
        per level of ``quantiles`` (named as GluonTS's ``QuantileForecast`` keys: ``"0.1"``,
        ``"0.5"``, ...; never crossing) and, for a distribution, ``num_samples`` sample paths
        (``sample_0``, ...); the scaling is undone on every one of them.

        Under a process group (DDP, ``torchrun``) every rank must call it; a long ``df`` is split
        by series among the ranks, each reading and forecasting its own, and every rank returns
        the whole forecast (``docs/scale.md``).
        """
        self._require_fitted()
        from tsrec.distributed.collective import world

        id_col = self.fitted.schema.id_col
        if df is not None and id_col is not None and world()[1] > 1:  # DDP: each rank reads and forecasts its series
            from tsrec.distributed.collective import by_series

            return by_series(df, id_col, functools.partial(self.predict, future_covariates=future_covariates,
                                                          quantiles=quantiles, num_samples=num_samples,
                                                          batch_size=batch_size))
        if df is None:
            panel, values = self.panel, self.fitted.covariate_history
        else:
            # The forecasts read each series' last context_length steps: its earlier rows are not read.
            read = source.read(df, self.fitted.schema, categorical=self.covariates.categorical, freq=self.freq,
                               gaps=self.settings.window.gaps, last=self.context_length, layout=self.panel.columns)
            panel, values = read.panel.in_order_of(self.panel), read.covariates
        return self.forecast_panel(panel, values, future_covariates=future_covariates, quantiles=quantiles,
                                   num_samples=num_samples, batch_size=batch_size).to_frame(panel)

    def forecast_panel(self, panel: Panel, values: CovariateValues | None = None, *,
                       future_covariates: pd.DataFrame | None = None, quantiles: Sequence[float] | None = None,
                       num_samples: int | None = None, batch_size: int | None = None) -> ForecastResult:
        """The forecasts of the ``prediction_length`` steps after every series of ``panel`` (known
        ids of the fitted data, read with the fitted schema or built directly), as arrays: what
        :meth:`predict` returns as a frame. ``values``: ``panel``'s covariates (None for a model
        without covariates); the other arguments as for :meth:`predict`."""
        self._require_fitted()
        if not self.model.output.probabilistic and (quantiles is not None or num_samples is not None):
            raise ValueError(f"{self.model_name} was trained with output='point', so it has no quantiles or "
                             "samples; refit with output='quantile', 'normal' or 'studentt'")
        levels = () if quantiles is None else check_levels("quantiles", quantiles)
        num_samples = None if num_samples is None else check_int("num_samples", num_samples, 1)
        if values is None:
            if self.covariates.config.columns:
                raise ValueError(f"{self.model_name} reads the covariates {list(self.covariates.config.columns)}: "
                                 "pass their values with the series (predict a frame that holds them)")
            values = CovariateValues.none(panel)
        rows = self.panel.check_compatible(panel)
        # The windows read the last context_length steps only: they are built from those alone.
        recent = panel.tail(self.context_length)
        dataset = WindowDataset.for_prediction(
            recent, self.scaler, self.context_length, self.prediction_length, scaler_rows=rows,
            covariates=self._prediction_covariates(recent, values.tail(self.context_length), future_covariates))
        self._report_far(recent, self.scaler, rows, "predict", stacklevel=4)
        result = self.forecast(dataset, rows, np.arange(len(panel.items)), np.diff(panel.offsets), levels=levels,
                               num_samples=num_samples, batch_size=batch_size)
        self._report_blind(panel, result.blind)
        return result

    def forecast(self, dataset: WindowDataset, rows: np.ndarray, items: np.ndarray, origins: np.ndarray, *,
                 levels: Sequence[float] = (), num_samples: int | None = None,
                 batch_size: int | None = None) -> ForecastResult:
        """The forecasts of every window of ``dataset`` in the data's units (:func:`~tsrec.fitted.unscale`).

        rows:    ``[N]`` each window's scaler row; ``items``, ``origins`` ``[N]``: its series'
                 position in the panel the windows come from and its first forecast step.
        levels, num_samples: quantiles and sample paths (probabilistic models only).
        """
        outputs = self.forecast_windows(dataset, batch_size=batch_size)
        return unscale(self.model, self.scaler, outputs, np.asarray(rows), np.asarray(items), np.asarray(origins),
                       levels=levels, num_samples=num_samples)

    def _prediction_covariates(self, panel: Panel, values: CovariateValues,
                               future_covariates: pd.DataFrame | None) -> WindowCovariates:
        """The covariates of the prediction windows of ``panel``: its ``values`` (every dynamic
        covariate known over the context) and the future covariates of the horizon, from
        ``future_covariates``."""
        config = self.covariates.config
        horizon = self.prediction_length
        if future_covariates is not None and not config.future:
            raise ValueError(f"{self.model_name} was fitted without future covariates, so it reads no "
                             "future_covariates; leave them out, or refit with future_covariates=[<columns>]")
        if future_covariates is None and config.future:
            steps = future_index(panel.items[0].index[-1], panel.freq, horizon)
            raise ValueError(f"{self.model_name} was fitted with the future covariates {list(config.future)}: pass "
                             f"predict(future_covariates=<frame>) with their values at the {horizon} forecast steps "
                             f"of every series ({steps[0]} .. {steps[-1]} for {panel.item_label(0)})")
        check_context(panel, values, config, self.context_length)
        if config.future:
            future = read_future(future_covariates, panel, config, horizon, time_col=self.fitted.schema.time_col,
                                 id_col=self.fitted.schema.id_col)
        else:
            future = tuple(np.zeros((horizon, 0)) for _ in panel.items)
        return self.covariates.encode(panel, values, future)

    def _report_blind(self, panel: Panel, blind: np.ndarray) -> None:
        """Name the series and columns ``blind`` ``[N, C]`` marks (no observed value in their
        context; their forecast is NaN): a warning, or with ``missing_context="raise"`` an error."""
        if not blind.any():
            return
        names = [panel.channel_label(int(n), int(c)) for n, c in zip(*np.nonzero(blind))]
        problem = (f"{len(names)} series have no observed value in their last {self.context_length} steps, so they "
                   f"get no forecast: {', '.join(names[:5])}{' ...' if len(names) > 5 else ''}")
        if self.settings.window.missing_context == "raise":
            raise ValueError(problem + "; pass data whose last context_length steps hold observations")
        warnings.warn(problem + "; their forecast is NaN (missing_context='raise' makes this an error)",
                      UserWarning, stacklevel=3)

    def _report_far(self, panel: Panel, scaler: StandardScaler, rows: np.ndarray, when: str, *,
                    stacklevel: int) -> None:
        """Warn (:class:`~tsrec.data.scaling.OutlierWarning`) naming the first
        :data:`FAR_EXAMPLES` observed values of ``panel`` beyond the fences of their scaler row
        (``rows`` ``[N]``), with their series, column and timestamp: the fit data (``when="fit"``)
        or the contexts forecast from (``"predict"``)."""
        count, examples = _far_values(panel, scaler, rows)
        if not count:
            return
        named = ", ".join(f"{label} at {stamp} ({value:.6g})" for label, stamp, value in examples)
        more = f" and {count - len(examples)} more" if count > len(examples) else ""
        where = "in the fit data" if when == "fit" else f"in the last {self.context_length} steps forecast from"
        if when == "predict":
            effect = ("the network's instance normalisation reads the ones far from their window as missing"
                      if getattr(self.model.config, "revin", False) else "the model forecasts from them as they are")
        elif scaler.robust:
            effect = "the model was fitted with them treated as missing (scaling='standard' keeps them)"
        else:
            effect = "they set their series' scale and the model was trained on them (scaling='robust' leaves them out)"
        warnings.warn(f"{count} value(s) {where} lie far outside their series' training distribution (more than "
                      f"{FAR_IQRS:g} interquartile ranges beyond its quartiles): {named}{more}; {effect}. Check them "
                      "(a typo, a wrong unit, a placeholder such as -9999?)", OutlierWarning, stacklevel=stacklevel)

    def forecast_windows(self, dataset: WindowDataset, *, batch_size: int | None = None) -> np.ndarray:
        """Scaled outputs for every window of ``dataset``, in order, batched (the last partial batch
        included), on the accelerator the model trains on (``trainer_kwargs``' ``accelerator``,
        default ``"auto"``; :func:`~tsrec.training.predict_batches`, without a Lightning Trainer
        where it adds nothing): point forecasts ``[N, H, C]``, or a probabilistic output's
        parameters ``[N, H, C, P]``.

        Under an initialized process group (e.g. on every rank of a script that fitted with
        ``trainer_kwargs={"strategy": "ddp", ...}``, or started by ``torchrun``) each rank forecasts
        its contiguous share of the windows and every rank gets all of them back, in order
        (:mod:`tsrec.training.sharding`; ``predict`` and ``backtest`` of long data split the series
        among the ranks before this, :func:`tsrec.distributed.collective.by_series`): every rank
        gets what one process returns, and every rank must call it."""
        self._require_fitted()
        from tsrec.training import ForecastingModule, make_predict_trainer, predict_batches, predict_device, \
            quiet_lightning
        from tsrec.distributed.collective import gather
        from tsrec.training.sharding import ShardSampler

        shape = (0, self.prediction_length, self.model.config.n_channels)
        empty = np.zeros(shape + ((self.model.n_params,) if self.model.output.probabilistic else ()), np.float32)
        if len(dataset) == 0:
            return empty
        module, size = ForecastingModule(self.model, self.training), batch_size or self.training.batch_size
        device = predict_device(self.trainer_kwargs)
        if device is not None:
            outputs = predict_batches(module, dataset, size, device=device)
        else:  # an accelerator only Lightning knows how to place the model on
            with quiet_lightning():
                loader = torch.utils.data.DataLoader(dataset, batch_size=size, sampler=ShardSampler(len(dataset)),
                                                     collate_fn=dataset.collate)
                outputs = make_predict_trainer(self.training, self.trainer_kwargs).predict(module, loader)
        self.model.eval()
        return gather(np.concatenate([out.float().cpu().numpy() for out in outputs]) if outputs else empty)

    # ------------------------------------------------------------------ gates
    def gates(self, *, channels: str = "median") -> pd.DataFrame:
        """One row per RSA gate and REM head: ``layer``, ``attention``, ``head``, ``kind``, ``gate``,
        ``lambda``, ``gamma``, ``theta``, ``dilation``, in the data's time units the decay
        ``half_life`` and the cycle ``period`` (``freq`` steps, e.g. hours for ``"h"``), and the
        values training started from with whether it ``moved`` them; per-channel REMs by their
        median over the channels, or with ``channels="each"`` one row per channel
        (:func:`tsrec.inspection.gate_table`)."""
        self._require_fitted()
        from tsrec.inspection import gate_table, initial_network

        resolved = self.resolved_settings
        start = None if self.model_name == AUTO else initial_network(resolved.model, resolved.network,
                                                                      resolved.training.seed)
        return gate_table(self.model, self.freq, channels=channels, start=start)

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | os.PathLike) -> Path:
        """Write the fitted model into the directory ``path`` (:meth:`tsrec.fitted.FittedState.save`:
        ``forecaster.json`` with the settings, data description, scaler and every file's SHA-256,
        and ``weights.pt``, tensors only; crash-safe and safe under concurrent saves and loads,
        never a partial pair). Returns ``path``. Under an initialized process group (DDP) rank 0
        writes while the others wait for it, and every rank returns ``path``, or raises when rank 0
        could not write it: all must call it."""
        self._require_fitted()
        from tsrec.distributed.collective import gather_parts, world

        rank = world()[0]
        gather_parts(lambda: self.fitted.save(path) if rank == 0 else None)  # the others wait for rank 0's save
        return Path(path)

    @classmethod
    def load(cls, path: str | os.PathLike) -> Forecaster:
        """Load a directory written by :meth:`save`. Reads JSON and tensors only (no unpickling of
        arbitrary objects); a missing, foreign, corrupted or edited directory, or one saved by a
        newer tsrec, raises ``ValueError`` (:meth:`tsrec.fitted.FittedState.load`)."""
        state = FittedState.load(path)
        self = cls(**state.settings.to_options())
        self.fitted = state
        return self

    def __repr__(self) -> str:
        state = "fitted" if self.model is not None else "not fitted"
        return (f"Forecaster({self.model_name!r}, prediction_length={self.prediction_length}, "
                f"context_length={self.context_length}, freq={self.freq!r}; {state})")


def _fit_scaling(panel: Panel, values: CovariateValues, covariates: CovariateConfig, categorical: Sequence[str],
                 train_end: Sequence[int], scaling: str) -> tuple[StandardScaler, CovariateEncoder]:
    """The target scaler (``scaling``: :attr:`WindowConfig.scaling <tsrec.config.WindowConfig>`) and the
    covariate encoding fitted on rows ``[0, train_end[i])`` of each item."""
    scaler = StandardScaler.fit([s.values for s in panel.items], [s.observed for s in panel.items], train_end,
                                robust=scaling == "robust")
    return scaler, CovariateEncoder.fit(covariates, categorical, values, panel, train_end)


#: How many far values an :class:`~tsrec.data.scaling.OutlierWarning` names (it counts them all).
FAR_EXAMPLES = 5


def _far_values(panel: Panel, scaler: StandardScaler, rows: np.ndarray) -> tuple[int, list[tuple[str, Any, float]]]:
    """How many observed values of ``panel`` lie beyond the fences of their scaler row (``rows``
    ``[N]``, one per item), and the first :data:`FAR_EXAMPLES` as ``(channel label, timestamp,
    value)``, in item, time and column order; a block of items at a time."""
    lengths = np.diff(panel.offsets)  # [N]
    count, examples = 0, []
    for block in item_blocks(lengths):
        values = np.concatenate([panel.items[i].values for i in block])  # [M, C]
        observed = np.concatenate([panel.items[i].observed for i in block])
        far = scaler.far(values, np.repeat(np.asarray(rows)[block.start:block.stop], lengths[block])) & observed
        count += int(far.sum())
        ends = np.cumsum(lengths[block])  # [n] end of each item's rows in the block
        for step, c in np.argwhere(far)[:FAR_EXAMPLES - len(examples)]:
            position = int(np.searchsorted(ends, step, side="right"))
            item = panel.items[block.start + position]
            at = int(step) - int(ends[position] - lengths[block.start + position])
            examples.append((panel.channel_label(block.start + position, int(c)), item.index[at],
                             float(values[step, c])))
    return count, examples


def _require_observed(panel: Panel, train_end: Sequence[int]) -> None:
    """A ``ValueError`` naming the first series and column with no observed value in its
    training part: a model cannot learn, or forecast, a variable it has never seen."""
    for position, (item, end) in enumerate(zip(panel.items, train_end)):
        never = ~item.observed[:end].any(axis=0)  # [C]
        if never.any():
            raise ValueError(f"{panel.channel_label(position, int(np.argmax(never)))} has no observed value in the "
                             f"training part (its first {end} steps); drop it, or fit on a frame where it has data")
