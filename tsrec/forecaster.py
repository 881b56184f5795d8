"""The estimator users touch: ``Forecaster(model, ...).fit(df).predict()``, ``save`` / ``load``."""

from __future__ import annotations

import dataclasses
import functools
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from tsrec.auto import fit_auto
from tsrec.calibrating import calibrated
from tsrec.collective import by_series, gather_parts, world
from tsrec.config import DEFAULT_MODEL, CovariateConfig, DataFacts, TrainingConfig
from tsrec.conformal import Calibration
from tsrec.data import CovariateEncoder, Panel, StandardScaler, normalize_freq, source
from tsrec.data.launches import launched, report_leading_zeros
from tsrec.data.schema import Schema
from tsrec.data.source import Source
from tsrec.data.tails import fills_tails, tail_gap
from tsrec.fitted import FittedState, TrainingSummary
from tsrec.fitting import fit_state
from tsrec.forecasting import forecast_next, steps_read
from tsrec.models import ForecastModel, model_spec
from tsrec.models.ensemble import AUTO
from tsrec.saved_state import load_state, save_state
from tsrec.settings import ForecasterSettings

__all__ = ["DEFAULT_MODEL", "Forecaster"]


class Forecaster:
    """Train any registered model on a DataFrame and forecast the steps after it.

    Args:
        model: a name from :func:`tsrec.list_models`; default :data:`DEFAULT_MODEL` (``"auto"``):
            statistical models scored first, networks only where the data have the windows for
            them and within a budget that grows with the data, and a validation-weighted ensemble
            of the best (:mod:`tsrec.auto`, ``docs/auto.md``). Name one, e.g. ``"rsa_patchtst"``, to
            train that network alone.
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
            ``output_dir`` and the JSON values of ``trainer_kwargs`` are saved with the model
            (:class:`~tsrec.config.TrainerConfig`); objects such as callbacks are not.
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
        # The arguments themselves, for get_params: sklearn.base.clone checks that a copy's
        # constructor kept the very objects it was given, and the settings normalise them.
        self._params: dict[str, Any] = dict(model=model, prediction_length=prediction_length,
                                            context_length=context_length, freq=freq, val_windows=val_windows,
                                            output_dir=output_dir, trainer_kwargs=trainer_kwargs, **options)
        self.settings = ForecasterSettings.from_options(
            model, prediction_length=prediction_length, context_length=context_length,
            freq=None if freq is None else normalize_freq(freq), val_windows=val_windows, output_dir=output_dir,
            trainer_kwargs=trainer_kwargs, **options)
        self.fitted: FittedState | None = None
        #: The Lightning Trainer of the last successful fit's last training run (None before, and
        #: for a model fitted without training).
        self.trainer = None

    @property
    def output_dir(self) -> Path | None:
        """Where training writes its logs and checkpoints (:class:`~tsrec.config.TrainerConfig`)."""
        folder = self.settings.trainer.output_dir
        return None if folder is None else Path(folder)

    @property
    def trainer_kwargs(self) -> dict[str, Any]:
        """The ``lightning.pytorch.Trainer`` arguments (:class:`~tsrec.config.TrainerConfig`)."""
        return self.settings.trainer.trainer_kwargs

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
        """The last ``context_length`` steps of every fitted series (None before ``fit``); for a
        network, also a missing tail after them, which ``predict`` forecasts from the steps before
        it (:mod:`tsrec.data.tails`)."""
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
        ``fit``, capped by the shortest series; a statistical model reads whole histories, so its
        fitted one is the longest series, or the one set where that is shorter)."""
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
        """Train on ``df`` (validation from its end, or on ``val_df``: later steps of series of
        ``df``, each scaled with its statistics from ``df``); returns ``self``.

        ``df`` is a DataFrame (wide or long, see the class docstring) or long Parquet data: a file,
        a folder of ``*.parquet`` files or a list of files, read a chunk of series at a time
        (:func:`~tsrec.data.parquet.read_parquet`; ``id_col`` is then required unless its columns follow a
        convention: :mod:`tsrec.data.schema`). ``predict`` and
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

        With ``conformal_windows=k`` (:class:`~tsrec.config.ConformalConfig`; ``auto`` calibrates by
        default), a copy fitted on each series up to ``k + prediction_length - 1`` steps before its
        end forecasts those ``k`` origins, and their residuals calibrate ``predict(levels=...)``'s
        intervals (:mod:`tsrec.conformal`, ``docs/intervals.md``); the calibration is saved with
        the model and its cost is ``fitted.calibration.cpu_seconds``.

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
        schema = Schema(time_col, id_col, target_col,
                        CovariateConfig(past=past_covariates, future=future_covariates, static=static_covariates))
        window = self.settings.window
        read = source.read(df, schema, freq=window.freq, gaps=window.gaps)
        if isinstance(df, pd.DataFrame) and (note := read.schema.unread_note(df.columns, read.panel.columns)):
            warnings.warn(note, UserWarning, stacklevel=2)
        val = None if val_df is None else source.read(val_df, schema, categorical=read.categorical,
                                                      freq=read.panel.freq, gaps=window.gaps)
        return self.fit_read(read, val=val, resume=resume)

    def fit_read(self, read: source.Read, *, val: source.Read | None = None, resume: bool = False) -> Forecaster:
        """Fit on data already read (:class:`~tsrec.data.source.Read`, e.g. ``read.before(ends)``:
        what ``backtest(refit_every=...)`` refits on); ``fit`` reads its frame and calls this. The
        zeros a product not launched yet begins with are read as missing first (``leading_zeros``,
        :mod:`tsrec.data.launches`). ``Forecaster("auto")`` runs :func:`tsrec.auto.fit_auto`, every other model
        :func:`tsrec.fitting.fit_state`, calibrated where ``conformal_windows`` is set
        (:func:`tsrec.calibrating.calibrated`; auto calibrates from its validation). Returns ``self``."""
        window = self.settings.window
        panel, runs = launched(read.panel, window.prediction_length, window.leading_zeros)  # [I, C] runs of zeros
        missing = window.leading_zeros == "missing"
        if missing or self.model_name == AUTO or self.trainable:  # kept, the networks forecast from such zeros
            report_leading_zeros(runs, read.panel, missing=missing, stacklevel=4)
        read = dataclasses.replace(read, panel=panel)
        fit = fit_auto(read, self.settings, val=val, resume=resume) if self.model_name == AUTO else \
            calibrated(read, self.settings, fit_state(read, self.settings, val=val, resume=resume))
        self.fitted, self.trainer = fit.state, fit.trainer  # only once the fit (and its calibration) has succeeded
        return self

    @property
    def leaderboard(self) -> pd.DataFrame:
        """``Forecaster("auto")``: each candidate's validation score (``val_score``, on the
        ``eval_metric`` that ``attrs["eval_metric"]`` names) and its weight in the ensemble (0: left
        out), best first; after ``fit`` also its wall and CPU seconds, a ``note`` (the rungs a network
        trained, why it stopped or failed) and the covariates it read; ``attrs["calibration"]``: the
        windows its conformal bands were calibrated on, and why there are no more."""
        self._require_fitted()
        if self.model_name != AUTO:
            raise AttributeError(f"only Forecaster('auto') has a leaderboard; this one is {self.model_name!r}")
        return self.fitted.leaderboard if self.fitted.leaderboard is not None else \
            self.resolved_settings.network.leaderboard()

    # ------------------------------------------------------------------ predict
    def _require_fitted(self) -> None:
        if self.model is None:
            from sklearn.exceptions import NotFittedError

            raise NotFittedError("this Forecaster is not fitted yet: call fit(df) first, or Forecaster.load(path)")

    def predict(self, df: Source | None = None, *, future_covariates: pd.DataFrame | None = None,
                quantiles: Sequence[float] | None = None, num_samples: int | None = None,
                batch_size: int | None = None, levels: Sequence[float] | None = None,
                intervals: str | None = None, refit: bool = False) -> pd.DataFrame:
        """Forecast the ``prediction_length`` steps after the end of the fitted frame, or of ``df``
        (the fitted frame's columns; at least ``context_length`` steps of each series).

        ``df`` may hold series that ``fit`` never saw (a new product, a new meter): each is scaled with
        statistics of the history given and forecast from it, a statistical model (or ``auto``'s
        statistical members) fitting it there, with the fitted ensemble weights and conformal scores
        (``docs/models.md``, "Series new at predict"; a ``backtest`` scores them too).

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
        (``sample_0``, ...); the scaling is undone on every one of them. A calibrated point model
        (``auto`` by default) reads ``quantiles`` as the ends of its conformal bands (0.1 and 0.9:
        the 80% interval's; 0.5: ``mean``, about which they are symmetric).

        ``levels`` (percent, e.g. ``[80, 90]``, statsforecast's ``level``) adds each interval's
        bands as the quantile columns of its ends (80 -> ``"0.1"`` and ``"0.9"``): conformal bands
        around ``mean`` for a model calibrated at ``fit`` (``conformal_windows``; ``auto`` by
        default), else a probabilistic network's own quantiles; ``intervals="conformal"`` or
        ``"model"`` chooses. ``frame.attrs["intervals"]`` says which gave them (``docs/intervals.md``).

        The statistical models (``ets``, ``theta``, ...; ``auto``'s members) apply the parameters
        they fitted at ``fit`` to the history given, fitting nothing (statsforecast's ``forward``),
        except for a series whose history is more than twice the one it was fitted on
        (:data:`~tsrec.models.parameters.REFIT_GROWTH`); ``refit=True`` fits every series again on the
        history given (the parameters kept with the model are left as they are; ``docs/models.md``).

        Under a process group (DDP, ``torchrun``) every rank must call it; a long ``df`` is split
        by series among the ranks, each reading and forecasting its own, and every rank returns
        the whole forecast (``docs/scale.md``).
        """
        self._require_fitted()
        id_col = self.fitted.schema.id_col
        if df is not None and id_col is not None and world()[1] > 1:  # DDP: each rank reads and forecasts its series
            return by_series(df, id_col, functools.partial(self.predict, future_covariates=future_covariates,
                                                          quantiles=quantiles, num_samples=num_samples,
                                                          batch_size=batch_size, levels=levels, intervals=intervals,
                                                          refit=refit))
        if df is None:
            panel, values = self.panel, self.fitted.covariate_history
        else:
            # The forecasts read each series' last context_length steps: its earlier rows are not read
            # (all of them for a model that reads whole histories, or an ensemble with such members, up to its cap).
            last = steps_read(self.fitted)
            calibration = self.fitted.calibration
            if levels is not None and intervals in (None, "conformal") and calibration is not None \
                    and calibration.update == "rolling":
                last = None  # conformal bands that learn read the windows after the fit too
            options = dict(categorical=self.covariates.categorical, freq=self.freq, gaps=self.settings.window.gaps,
                           layout=self.panel.columns)
            read = source.read(df, self.fitted.schema, last=last, **options)
            gap = tail_gap(read.panel) if fills_tails(self.model.trainable, self.covariates.config.columns) else 0
            if gap and last is not None:  # a network forecasts a missing tail from the steps before it: read them
                read = source.read(df, self.fitted.schema, last=None if gap >= last else last + gap, **options)
            panel, values = read.panel.in_order_of(self.panel), read.covariates
        return forecast_next(self.fitted, panel, values, future_covariates=future_covariates, quantiles=quantiles,
                             num_samples=num_samples, batch_size=batch_size, levels=levels,
                             intervals=intervals, refit=refit).to_frame(panel)

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
        """Write the fitted model into the directory ``path`` (:func:`tsrec.saved_state.save_state`:
        ``forecaster.json`` with the settings, data description, scaler and every file's SHA-256,
        and ``weights.pt``, tensors only; crash-safe and safe under concurrent saves and loads,
        never a partial pair). Returns ``path``. Under an initialized process group (DDP) rank 0
        writes while the others wait for it, and every rank returns ``path``, or raises when rank 0
        could not write it: all must call it."""
        self._require_fitted()
        rank = world()[0]
        gather_parts(lambda: save_state(self.fitted, path) if rank == 0 else None)  # the others wait for rank 0's save
        return Path(path)

    @classmethod
    def load(cls, path: str | os.PathLike, *, trainer_kwargs: dict[str, Any] | None = None) -> Forecaster:
        """Load a directory written by :meth:`save`. Reads JSON and tensors only (no unpickling of
        arbitrary objects); a missing, foreign, corrupted or edited directory, or one saved by a
        newer tsrec, raises ``ValueError`` (:func:`tsrec.saved_state.load_state`).

        ``trainer_kwargs``: Lightning arguments over the saved ones (another ``accelerator``, the
        callbacks and loggers a save does not keep), for this model's forecasts and refits."""
        state = load_state(path)
        if trainer_kwargs:
            trainer = dataclasses.replace(state.settings.trainer,
                                          trainer_kwargs={**state.settings.trainer.trainer_kwargs, **trainer_kwargs})
            state = dataclasses.replace(state, settings=dataclasses.replace(state.settings, trainer=trainer))
        self = cls(**state.settings.to_options())
        self.settings, self.fitted = state.settings, state  # one settings object, as after fit
        return self

    @property
    def calibration(self) -> Calibration | None:
        """The conformal calibration of ``predict(levels=...)``'s intervals (None before ``fit``
        and for a model fitted without one; :mod:`tsrec.conformal`)."""
        return None if self.fitted is None else self.fitted.calibration

    def __repr__(self) -> str:
        state = "fitted" if self.model is not None else "not fitted"
        return (f"Forecaster({self.model_name!r}, prediction_length={self.prediction_length}, "
                f"context_length={self.context_length}, freq={self.freq!r}; {state})")
