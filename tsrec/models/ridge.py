"""A global ridge regression on lags and known-future features, fitted in closed form.

One linear map, shared by every series (and, ``channel_independent``, every channel), from a
window's features to its whole horizon at once (direct multi-horizon: one output per step and
channel), fitted on the training windows by ridge regression with no gradient step:

- **Features** of a window (each normalised by its own context, as RevIN: the observed context
  values' mean and standard deviation, the target forecast in those units and scaled back): the
  last ``context_length`` values (``[Lc * C']``), the covariates over the context (``[Lc * K]``:
  past and known-future ones, what drove the values read), the window's future time features
  flattened (``[H * F']``: the calendar's, then the known-future covariates'; past-only covariates
  are 0 there) and one indicator per category of each categorical static covariate, these
  exogenous features divided by the window's scale (so that their effects are in the series' units, whatever the window's
  spread: :meth:`LagRidge.features`), the window's mean and 1 over its scale, and an intercept.
  A missing context value reads as the window's mean (0 in normalised units).
- **Fit** (:meth:`LagRidge.fit_windows`): one pass over the training windows accumulates the
  sufficient statistics (the features' sums and cross-products with themselves and with the
  targets, ``[D, D]`` and ``[D, H * C']``: bounded memory, never a design matrix of every window),
  then the columns are centred (the intercept is not penalised) and standardised, and the ridge
  is solved through the eigendecomposition of the Gram matrix, for every ``alpha`` of the grid at
  once.
- **alpha**: the penalty per window on the standardised coefficients (the objective is the mean
  squared error over the windows plus ``alpha`` times the squared norm). Not set: chosen by
  generalized cross-validation (Golub, Heath and Wahba, 1979), the rotation-invariant form of
  leave-one-out that the eigendecomposition gives exactly from the sufficient statistics (exact
  leave-one-out needs every window's leverage, a second pass), over the grid :data:`ALPHAS`,
  fixed in advance: ``10 ** (k / 2)`` for ``k = -12 .. 6`` (1e-6 to 1e3, half-decades).

Windows whose context has no observed value, or whose horizon has an unobserved value, are left
out of the fit (per channel where channel-independent).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor

from tsrec.batch import ForecastBatch
from tsrec.models.base import ModelConfig
from tsrec.models.windowed import WindowFit, window_batches

if TYPE_CHECKING:
    from tsrec.data import WindowDataset

__all__ = ["ALPHAS", "LagRidge", "MAX_FEATURES", "RidgeConfig"]

#: The penalties generalized cross-validation chooses among (see the module).
ALPHAS = tuple(10.0 ** (k / 2) for k in range(-12, 7))
#: The most features a window may have: the Gram matrix is ``[D, D]`` in float64 (8,192: 0.5 GB).
MAX_FEATURES = 8_192


@dataclass(frozen=True)
class RidgeConfig(ModelConfig):
    """Attributes:
        alpha: the penalty per window on the standardised coefficients; None (default): chosen by
            generalized cross-validation over :data:`ALPHAS` at ``fit`` (the module).
        channel_independent: one map for every channel (default), read on each alone; False reads
            every channel's lags together and forecasts them jointly (``C`` times the features).
    """

    alpha: float | None = None
    channel_independent: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.alpha is not None:
            if isinstance(self.alpha, bool) or not isinstance(self.alpha, (int, float)) \
                    or not math.isfinite(self.alpha) or self.alpha <= 0:
                raise ValueError(f"alpha must be a positive number (or None: chosen by generalized "
                                 f"cross-validation), got {self.alpha!r}")
            object.__setattr__(self, "alpha", float(self.alpha))
        if self.output != "point":
            raise ValueError(f"ridge forecasts points only (its intervals are conformal: conformal_windows=<k>), "
                             f"got output={self.output!r}")


class LagRidge(WindowFit):
    """``y = features(window) @ coef`` (the module): fitted in closed form (:meth:`fit_windows`),
    not trained. Buffers: ``coef`` ``[D + 1, H * C']`` (the intercept last), in the normalised
    units of :meth:`design`, and ``alpha``, the penalty used (NaN before the fit)."""

    config_class = RidgeConfig
    missing_tail = ("ridge reads each missing step as its window's mean and forecasts the requested dates; drop the "
                    "missing rows to forecast from the last observation instead")

    def __init__(self, config: RidgeConfig) -> None:
        super().__init__(config)
        c = config
        self.n_features = (c.context_length * (self.core_channels + self.past_covariates)
                           + c.prediction_length * self.batch_features + sum(c.static_cardinalities)
                           + 2 * self.core_channels)
        if self.n_features > MAX_FEATURES:
            raise ValueError(f"ridge would read {self.n_features} features per window (context_length "
                             f"{c.context_length} x ({self.core_channels} channel(s) + {self.past_covariates} "
                             f"covariate features) + prediction_length "
                             f"{c.prediction_length} x {self.batch_features} time features), more than "
                             f"{MAX_FEATURES}: use a shorter context_length, or channel_independent=True")
        outputs = c.prediction_length * self.core_channels
        self.register_buffer("coef", torch.zeros(self.n_features + 1, outputs, dtype=torch.float64))
        self.register_buffer("alpha", torch.tensor(math.nan, dtype=torch.float64))

    def design(self, batch: ForecastBatch) -> tuple[Tensor, Tensor | None, Tensor, tuple[Tensor, Tensor]]:
        """A batch of ``B`` windows -> ``(features [B', D], target [B', H * C'] or None, usable [B'],
        (loc, scale) [B, 1, C] each)`` with ``B' = B * C`` rows where channel-independent (channel
        fastest), else ``B``: the features (:meth:`features`), the normalised future target where the
        batch has one, which rows the fit may use (an observed context, a fully observed horizon),
        and the window statistics that undo the normalisation."""
        n = self.normalised(batch)
        loc, scale = n.loc, n.scale
        x = torch.where(n.seen, n.x, 0.0)  # [B, Lc, C] a missing value reads as the window's mean
        features = self.features(x, loc, scale, batch["past_time_feat"], batch["future_time_feat"],
                                 batch.get("static_cat"))
        usable = n.seen.any(1)  # [B, C]
        target = n.target
        if target is not None:
            usable = usable & n.observed.all(1)
        if self.core_channels == 1:
            usable = usable.reshape(-1)  # [B*C]
            target = None if target is None else target.transpose(1, 2).reshape(len(features), -1)  # [B*C, H]
        else:
            usable = usable.all(1)  # [B]
            target = None if target is None else target.flatten(1)  # [B, H * C]
        return features, target, usable, (loc, scale)

    def features(self, x: Tensor, loc: Tensor, scale: Tensor, past_time_feat: Tensor, future_time_feat: Tensor,
                 static_cat: Tensor | None) -> Tensor:
        """The features ``[B', D]`` of windows of normalised values ``x`` ``[B, Lc, C]`` (0 where
        missing) with statistics ``loc``, ``scale`` ``[B, 1, C]``, past and future time features
        ``[B, Lc, F' or more]``, ``[B, H, F' or more]`` and categorical static codes ``[B, Kc]``
        (None: none given): ``[x (Lc * C'), exogenous / s (Lc * K + H * F' + sum(cardinalities)),
        loc / scale (C'), 1 / scale (C')]``, the exogenous features being the covariates' ``K``
        columns over the context (what drove the values read), the future time features and the
        static indicators, and ``s`` the row's scale (the mean of the channels' where they are read jointly).
        Dividing the exogenous features by the scale gives their effects in the series' units
        (the scaler's) once the forecast is scaled back: a covariate that adds ``b x`` to a series
        adds it to every window, whatever the window's own spread; ``loc / scale`` and ``1 / scale``
        let the forecast's level and constant be set in those units too."""
        size, _, channels = x.shape
        future = future_time_feat[..., :self.batch_features].flatten(1).to(x.dtype)  # [B, H * F']
        first = self.batch_features - self.past_covariates
        past = past_time_feat[..., first:self.batch_features].flatten(1).to(x.dtype)  # [B, Lc * K]
        statics = [torch.nn.functional.one_hot(static_cat[:, k], n).to(x.dtype) if static_cat is not None
                   else x.new_zeros(size, n) for k, n in enumerate(self.config.static_cardinalities)]  # [B, n] each
        exogenous = torch.cat([past, future, *statics], dim=1)  # [B, E]
        if self.core_channels == 1:
            x = x.transpose(1, 2).reshape(size * channels, -1)  # [B*C, Lc]
            loc, scale = loc.transpose(1, 2).reshape(-1, 1), scale.transpose(1, 2).reshape(-1, 1)  # [B*C, 1] each
            exogenous = exogenous.repeat_interleave(channels, dim=0) / scale  # [B*C, E]
        else:
            x, loc, scale = x.flatten(1), loc.flatten(1), scale.flatten(1)  # [B, Lc * C], [B, C], [B, C]
            exogenous = exogenous / scale.mean(1, keepdim=True)  # [B, E]
        return torch.cat([x, exogenous, loc / scale, 1.0 / scale], dim=1)  # [B', D]

    def forward(self, batch: ForecastBatch) -> Tensor:
        """``batch`` -> the forecast ``[B, H, C]`` in the batch's (scaled) units."""
        features, _, _, (loc, scale) = self.design(batch)  # [B', D]
        size, channels = batch["past_target"].shape[0], batch["past_target"].shape[2]
        y = self._linear(features)  # [B', H * C']
        if self.core_channels == 1:
            y = y.reshape(size, channels, -1).transpose(1, 2)  # [B, H, C]
        else:
            y = y.reshape(size, self.config.prediction_length, channels)  # [B, H, C]
        return (y * scale + loc).to(batch["past_target"].dtype)

    def forecast(self, past_target: Tensor, past_time_feat: Tensor, future_time_feat: Tensor) -> Tensor:
        """``[B, Lc, C']`` normalised values (every one observed), ``[B, Lc, F]``, ``[B, H, F]`` ->
        ``[B, H, C', 1]`` in the same units: the map on windows normalised already (mean 0, scale 1,
        no static covariate)."""
        size, _, channels = past_target.shape
        zero = past_target.new_zeros(size, 1, channels)
        y = self._linear(self.features(past_target, zero, zero + 1.0, past_time_feat, future_time_feat,
                                       None))  # [B, H * C']
        return y.reshape(size, -1, channels).unsqueeze(-1) if channels > 1 else y.reshape(size, -1, 1, 1)

    def _linear(self, features: Tensor) -> Tensor:
        """``[B', D]`` -> ``[B', H * C']``: the fitted map, intercept included, in float64."""
        coef = self.coef
        return features.to(coef.dtype) @ coef[:-1] + coef[-1]

    def fit_windows(self, windows: WindowDataset, seed: int = 0) -> None:
        """Fit the map on every window of ``windows`` (each with its ``future_target``): the
        sufficient statistics in one pass of :data:`~tsrec.models.windowed.FIT_BATCH` windows at a
        time, then the closed form (the module; ``seed`` is not used: nothing is drawn). ``ValueError``
        where no window is usable."""
        stats = _Moments()
        with torch.no_grad():
            for batch in window_batches(windows):
                features, target, usable, _ = self.design(batch)
                stats.add(features[usable], target[usable])
        if stats.count == 0:
            raise ValueError("ridge has no training window with an observed context and a fully observed horizon; "
                             "use a shorter prediction_length or context_length, or fill the missing values")
        coef, alpha = stats.solve(self.config.alpha)
        self.coef.copy_(torch.from_numpy(coef))
        self.alpha.fill_(alpha)


class _Moments:
    """The sufficient statistics of a ridge regression, accumulated in float64 about the first rows'
    means (a shift that keeps the centring exact where a column's mean is large against its
    spread): the row count, the sums of the shifted features ``[D]`` and targets ``[M]``, and the
    cross-products ``X^T X`` ``[D, D]``, ``X^T Y`` ``[D, M]`` and the targets' sums of squares ``[M]``."""

    def __init__(self) -> None:
        self.count = 0
        self.shift: tuple[Tensor, Tensor] | None = None
        self.sums: list[np.ndarray] = []

    def add(self, x: Tensor, y: Tensor) -> None:
        """Rows ``x`` ``[n, D]`` with targets ``y`` ``[n, M]``."""
        if not len(x):
            return
        x, y = x.double(), y.double()
        if self.shift is None:
            self.shift = (x.mean(0), y.mean(0))
        x, y = x - self.shift[0], y - self.shift[1]
        parts = [p.numpy() for p in (x.sum(0), y.sum(0), x.T @ x, x.T @ y, (y * y).sum(0))]
        self.sums = parts if not self.sums else [a + b for a, b in zip(self.sums, parts)]
        self.count += len(x)

    def solve(self, alpha: float | None) -> tuple[np.ndarray, float]:
        """``(coef [D + 1, M], alpha)``: the ridge of the penalty ``alpha`` (None: the grid's
        :func:`gcv` choice) on the centred, standardised columns, mapped back to the raw features
        with the intercept last. A column constant over the rows (to 1e-8 of its mean) gets 0."""
        n = self.count
        sx, sy, xx, xy, yy = self.sums
        mx, my = sx / n, sy / n  # [D], [M] about the shift
        gram = xx - n * np.outer(mx, mx)  # [D, D] centred
        cross = xy - n * np.outer(mx, my)  # [D, M]
        rss0 = yy - n * my ** 2  # [M] the centred targets' sums of squares
        std = np.sqrt(np.clip(np.diag(gram), 0.0, None) / n)  # [D]
        shift_x, shift_y = (s.numpy() for s in self.shift)
        varies = std > 1e-8 * np.maximum(np.abs(mx + shift_x), 1.0)  # [D]
        std = np.where(varies, std, 1.0)
        gram = np.where(np.outer(varies, varies), gram / np.outer(std, std), 0.0)
        cross = np.where(varies[:, None], cross / std[:, None], 0.0)
        eigenvalues, vectors = np.linalg.eigh(gram)  # [D], [D, D]
        eigenvalues = np.clip(eigenvalues, 0.0, None)
        rotated = vectors.T @ cross  # [D, M]
        if alpha is None:
            alpha = ALPHAS[int(np.argmin(gcv(eigenvalues, rotated, rss0, n, ALPHAS)))]
        w = vectors @ (rotated / (eigenvalues + n * alpha)[:, None])  # [D, M] standardised
        w = np.where(varies[:, None], w / std[:, None], 0.0)
        intercept = (my + shift_y) - (mx + shift_x) @ w  # [M]
        return np.concatenate([w, intercept[None]], axis=0), float(alpha)


def gcv(eigenvalues: np.ndarray, rotated: np.ndarray, rss0: np.ndarray, n: int,
        alphas: Sequence[float]) -> np.ndarray:
    """Generalized cross-validation ``n * RSS / (n - df) ** 2`` ``[A]`` of the ridge at each of
    ``alphas`` (per-window penalties) from the eigendecomposition of the centred Gram matrix
    (``eigenvalues`` ``[D]``; ``rotated`` ``[D, M]``, the eigenvectors' products with the centred
    targets; ``rss0`` ``[M]`` the centred targets' sums of squares; ``n`` rows), the residuals summed
    over the ``M`` outputs (one penalty for all) and ``df`` the hat matrix's trace, the intercept's 1
    included. ``RSS = sum_M rss0 - sum_j |r_j|^2 / l_j (1 - (a / (l_j + a))^2)`` with ``a = n * alpha``
    (``r_j``: row ``j`` of ``rotated``, ``l_j`` its eigenvalue)."""
    positive = eigenvalues > eigenvalues.max(initial=0.0) * 1e-12  # [D] the directions the windows span
    energy = np.where(positive, (rotated ** 2).sum(1) / np.where(positive, eigenvalues, 1.0), 0.0)  # [D]
    scores = []
    for alpha in alphas:
        a = n * alpha
        shrink = eigenvalues / (eigenvalues + a)  # [D]
        rss = rss0.sum() - (energy * (1.0 - (1.0 - shrink) ** 2)).sum()
        df = 1.0 + shrink.sum()
        scores.append(n * max(rss, 0.0) / max(n - df, 1e-12) ** 2 if n > df else math.inf)
    return np.asarray(scores)
