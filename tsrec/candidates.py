"""One ``auto`` candidate at a time: fitted on each series' history before the validation windows
(or before a calibration block), its forecasts of those windows, and its leaderboard row in the
making; what :func:`tsrec.auto.fit_auto` and the networks' successive halving
(:func:`tsrec.halving.fit_networks`) share::

    Candidates.fit(name, first)                          fit_state on each series' steps before first [I]
    Candidates.origins(name, fit, first, count, stride)  its forecasts of those windows      [W, H, C]
    Candidates.validation_forecasts(name, fit, scores)   every validation origin, or why it stopped
    Row, Clock, progress_line                            a leaderboard row, its seconds, its progress line
"""

from __future__ import annotations

import math
import sys
import time
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from tsrec.config import CovariateConfig
from tsrec.data.source import Read
from tsrec.fitted import ForecastResult
from tsrec.fitting import Fit, fit_state
from tsrec.forecasting import forecast_origins
from tsrec.models.base import ForecastModel
from tsrec.models.registry import model_spec
from tsrec.settings import ForecasterSettings
from tsrec.validation import HALVING_FACTOR, Scores, Validation

__all__ = ["SHARED_SETTINGS", "UNKEPT", "Candidates", "Clock", "Row", "join_note", "merged", "progress",
           "progress_line"]

#: Settings of the auto Forecaster that each candidate gets (the rest are its own defaults;
#: ``time_limit`` is the networks' budget instead, and networks are never refitted).
SHARED_SETTINGS = ("val_windows", "gaps", "missing_context", "scaling", "seed", "batch_size", "max_steps", "max_epochs",
                   "precision", "deterministic", "num_workers", "compile")

#: What a signal that stops a candidate's training says was kept: auto's networks train in a
#: temporary folder of its own, which goes with the fit, and auto cannot resume (``fit_state``'s ``unkept``).
UNKEPT = "auto trains its networks in a temporary folder, removed as its fit stops; fit again to start over"


@dataclass
class Row:
    """One leaderboard row in the making."""

    model: str
    val_score: float = math.nan
    fit_seconds: float = 0.0
    cpu_seconds: float = 0.0
    note: str = ""
    covariates: str = ""


@dataclass(frozen=True)
class Candidates:
    """What every candidate is fitted from: the auto model's ``settings``, the validation windows,
    each series up to its last observed step (``observed``, with the covariates: a candidate is
    fitted on its steps before the windows it forecasts), and what the leaderboard says of those."""

    settings: ForecasterSettings
    validation: Validation
    observed: Read
    covariates: CovariateConfig

    def settings_of(self, name: str, **overrides: Any) -> ForecasterSettings:
        """The settings candidate ``name`` is fitted with: the auto model's window and shared
        training settings, its ``output`` and quantile levels and its ``trainer_kwargs``, over the
        candidate's own defaults; then ``overrides``."""
        settings = self.settings
        window, training, network = settings.window, settings.training, settings.network
        options: dict[str, Any] = {"prediction_length": window.prediction_length, "freq": window.freq,
                                   "trainer_kwargs": settings.trainer.trainer_kwargs}
        for shared in SHARED_SETTINGS:
            for section in (window, training):
                if hasattr(section, shared):
                    options[shared] = getattr(section, shared)
        if network.output != "point":
            options.update(output=network.output, quantile_levels=network.quantile_levels)
        return ForecasterSettings.from_options(name, **{**options, **overrides})

    def reads(self, name: str) -> bool:
        """Whether candidate ``name`` reads the covariates (the networks, the ridge and the trees,
        :meth:`~tsrec.models.base.ForecastModel.reads_covariates`)."""
        return bool(self.covariates.columns) and model_spec(name).model_class.reads_covariates()

    def fit_and_score(self, name: str, scores: Scores, *, resume: bool = False, **overrides: Any) -> tuple[Fit, float]:
        """Candidate ``name`` (its settings with ``overrides``) fitted on the history before the
        validation windows, its covariates too where it reads them (``resume``: going on from the
        run whose checkpoint is in its ``output_dir``), and its validation score (its forecasts kept
        in ``scores``)."""
        fit, result = self.forecast(name, self.validation.first, resume=resume, **overrides)
        return fit, scores.add(name, result)

    def forecast(self, name: str, first: np.ndarray, *, like: ForecastModel | None = None, resume: bool = False,
                 **overrides: Any) -> tuple[Fit, ForecastResult]:
        """Candidate ``name`` fitted on each series' steps before ``first`` ``[I]`` (its covariates too
        where it reads them; ``like``: a statistical model's validated variants) and its forecasts of
        the validation's windows moved to start there (``count`` origins per series, ``stride``
        apart), in :func:`~tsrec.forecasting.window_origins`' order."""
        fit = self.fit(name, first, like=like, resume=resume, **overrides)
        return fit, self.origins(name, fit, first, self.validation.count, self.validation.stride)

    def fit(self, name: str, first: np.ndarray, *, like: ForecastModel | None = None, resume: bool = False,
            **overrides: Any) -> Fit:
        """Candidate ``name`` fitted on each series' steps before ``first`` ``[I]`` (as :meth:`forecast`)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # a candidate's own notes; its score says enough
            return fit_state(self._observed(name).before(first), self.settings_of(name, **overrides), resume=resume,
                             like=like, unkept=UNKEPT)

    def origins(self, name: str, fit: Fit, first: np.ndarray, count: np.ndarray, stride: int) -> ForecastResult:
        """``fit``'s forecasts of the windows from ``first`` ``[I]``, ``count`` ``[I]`` origins per series
        ``stride`` apart (:func:`~tsrec.forecasting.forecast_origins`), with the quantiles the validation
        scores (:attr:`~tsrec.validation.Validation.levels`)."""
        observed = self._observed(name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return forecast_origins(fit.state, observed.panel, observed.covariates, first, count, stride,
                                    levels=self.validation.levels)

    def _observed(self, name: str) -> Read:
        """What candidate ``name`` reads: the targets and covariates, or the targets alone."""
        return self.observed if self.reads(name) else self.observed.targets()

    def validation_forecasts(self, name: str, fit: Fit, scores: Scores) -> tuple[ForecastResult | None, str]:
        """``fit``'s forecasts of every validation origin (candidate ``name``), or None and why it
        stopped before them. A model whose every forecast costs about a fit
        (:attr:`~tsrec.models.base.ForecastModel.forecast_refits`) forecasts the independent windows
        first (one horizon apart) and stops there where its score on them is more than
        :data:`~tsrec.validation.HALVING_FACTOR` times the leader's on the same windows, as a network
        stops at its rung; else it forecasts the origins between them, and no window twice."""
        validation = self.validation
        horizon = validation.truth.shape[1]
        if not model_spec(name).model_class.forecast_refits or validation.windows == validation.horizons:
            return self.origins(name, fit, validation.first, validation.count, validation.stride), ""
        count = np.where(validation.validated, validation.horizons, 0)  # [I]
        windows = validation.independent  # [I * horizons]
        independent = self.origins(name, fit, validation.first, count, horizon)
        scores.check(name, independent, windows)
        leader, own = scores.leader_on(windows), scores.score_on(windows, independent)
        if leader is not None and own > HALVING_FACTOR * leader[1]:  # NaN (no score of its own) goes on
            behind = f"{own / leader[1]:.2g}x the leader ({leader[0]})" if leader[1] > 0 else \
                f"{own:.3g} where the leader ({leader[0]}) scores 0"
            return None, (f"stopped after {validation.horizons} of {validation.windows} origins per series (each of "
                          f"its forecasts costs about a fit): {behind} on them")
        # the origins k strides past each independent one (none past the last: the validation ends there)
        between = [self.origins(name, fit, validation.first + k * validation.stride, np.maximum(count - 1, 0), horizon)
                   for k in range(1, horizon // validation.stride)] if validation.horizons > 1 else []
        return merged([independent, *between]), ""

    @property
    def described(self) -> str:
        """The leaderboard's note of a candidate that reads the covariates."""
        parts = [f"{kind}: {', '.join(getattr(self.covariates, kind))}" for kind in ("past", "future", "static")
                 if getattr(self.covariates, kind)]
        return "; ".join(parts)

    @property
    def unused(self) -> str:
        """The leaderboard's note of a candidate that cannot read them (empty without covariates)."""
        return "none: scored on the targets alone (no covariate support)" if self.covariates.columns else ""


def progress(line: str) -> None:
    """One progress line on stderr when it is a terminal (never in captured or redirected output)."""
    if sys.stderr.isatty():
        print(f"tsrec auto: {line}", file=sys.stderr, flush=True)


def progress_line(row: Row) -> str:
    score = "no score" if math.isnan(row.val_score) else f"validation score {row.val_score:.4g}"
    return f"{row.model:<16} {score}, {row.cpu_seconds:.1f} CPU-s" + (f" ({row.note})" if row.note else "")


class Clock:
    """Wall and CPU seconds since it was created."""

    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def add_to(self, row: Row) -> None:
        row.fit_seconds += time.perf_counter() - self.wall
        row.cpu_seconds += time.process_time() - self.cpu


def merged(parts: list[ForecastResult]) -> ForecastResult:
    """The point forecasts of ``parts`` (windows of the same series, none twice) as one result in
    :func:`~tsrec.forecasting.window_origins`' order (series in order, each one's origins rising)."""
    items, origins = (np.concatenate([getattr(part, key) for part in parts]) for key in ("items", "origins"))
    order = np.lexsort((origins, items))  # [W]
    mean, scaled = (np.concatenate([getattr(part, key) for part in parts])[order] for key in ("mean", "scaled"))
    return ForecastResult(items[order], origins[order], mean, scaled)


def join_note(note: str, more: str) -> str:
    return f"{note}; {more}" if note else more
