"""What the models fitted on windows share (the global ridge, :mod:`tsrec.models.ridge`, and the
gradient-boosted trees, :mod:`tsrec.models.gbm`): not trained but fitted at once on every training
window (:meth:`WindowFit.fit_windows`), each window read in its own
context's units (:meth:`WindowFit.normalised`: RevIN's mean and scale, the scale floored at
:data:`MIN_SCALE`), the windows gathered :data:`FIT_BATCH` at a time (:func:`window_batches`)."""

from __future__ import annotations

import abc
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from tsrec.batch import ForecastBatch
from tsrec.models.base import ForecastModel, ModelConfig

if TYPE_CHECKING:
    from tsrec.data import WindowDataset

__all__ = ["FIT_BATCH", "MIN_SCALE", "Normalised", "WindowFit", "window_batches"]

#: The smallest window scale the features are divided by, in the scaler's units (1: a series'
#: training standard deviation): a flat context would otherwise turn the next step's change into
#: a value of hundreds, and such windows would set the fit.
MIN_SCALE = 1e-2
#: Windows gathered at a time while a model is fitted on them.
FIT_BATCH = 4_096


@dataclass(frozen=True)
class Normalised:
    """A batch of ``B`` windows in its contexts' units (:meth:`WindowFit.normalised`).

    x:        ``[B, Lc, C]`` the context, ``(value - loc) / scale`` (where not ``seen``: whatever
              RevIN left there; each model says what it reads instead).
    seen:     ``[B, Lc, C]`` which context values are observed.
    loc:      ``[B, 1, C]`` the context's mean, in the batch's (scaled) units.
    scale:    ``[B, 1, C]`` its standard deviation, at least :data:`MIN_SCALE`.
    target:   ``[B, H, C]`` the future in the same units (None: the batch has none).
    observed: ``[B, H, C]`` which future values are observed (None with ``target``).
    """

    x: Tensor
    seen: Tensor
    loc: Tensor
    scale: Tensor
    target: Tensor | None
    observed: Tensor | None


class WindowFit(ForecastModel, abc.ABC):
    """A model fitted on the training windows at once (:attr:`fits_windows`, :meth:`fit_windows`),
    not trained."""

    trainable = False
    fits_windows = True

    def __init__(self, config: ModelConfig) -> None:
        super().__init__(config)
        #: future time features the batch holds (the categorical statics' embeddings are not among them)
        self.batch_features = config.n_time_features - config.embedding_width
        #: the covariates' columns among them (the last), read over the context too
        self.past_covariates = config.n_covariate_features - config.embedding_width

    @abc.abstractmethod
    def fit_windows(self, windows: WindowDataset, seed: int = 0) -> None:
        """Fit the model on every training window of ``windows`` (with its ``future_target``),
        once, at ``fit`` (:func:`tsrec.fitting.fit_state` calls it on all the history, with the
        covariates); ``seed``: the training settings' seed, for whatever the fit draws (the trees'
        subsamples)."""

    @classmethod
    def default_context(cls, prediction_length: int, season: int) -> int:
        """Twice the horizon, and at least two seasons of the calendar (the lags of the same phase)."""
        return max(2 * prediction_length, 2 * season)

    def normalised(self, batch: ForecastBatch) -> Normalised:
        """``batch``'s windows in their contexts' units (:class:`Normalised`): RevIN's statistics of
        the observed context values, the scale floored at :data:`MIN_SCALE` (the values divided by
        the floor where it applies); mean 0 and scale 1 without RevIN."""
        past = batch["past_target"]  # [B, Lc, C]
        seen = batch["past_observed"] > 0 if "past_observed" in batch else torch.ones_like(past, dtype=torch.bool)
        if self.revin is not None:
            x, (loc, scale) = self.revin.normalize(past, seen.to(past.dtype))
            floored = scale.clamp_min(MIN_SCALE)
            x, scale = x * (scale / floored), floored
        else:
            x, loc, scale = past, torch.zeros_like(past[:, :1]), torch.ones_like(past[:, :1])
        target, observed = batch.get("future_target"), None
        if target is not None:
            target = (target - loc) / scale  # [B, H, C]
            observed = batch["future_observed"] > 0 if "future_observed" in batch \
                else torch.ones_like(target, dtype=torch.bool)
        return Normalised(x, seen, loc, scale, target, observed)


def window_batches(windows: WindowDataset, indices: Tensor | None = None,
                   size: int = FIT_BATCH) -> Iterator[ForecastBatch]:
    """The windows of ``windows`` (those of ``indices`` ``[N]``, in that order; None: every one),
    gathered ``size`` at a time."""
    count = len(windows) if indices is None else len(indices)
    for start in range(0, count, size):
        stop = min(start + size, count)
        yield windows.gather(range(start, stop) if indices is None else indices[start:stop])
