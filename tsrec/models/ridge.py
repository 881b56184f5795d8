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
  per block of :data:`CV_BLOCKS`; then the columns are centred (the intercept is not penalised)
  and standardised, and the ridge is solved through the eigendecomposition of the Gram matrix, for
  every ``alpha`` of the grid at once.
- **alpha**: the penalty per window on the standardised coefficients (the objective is the mean
  squared error over the windows plus ``alpha`` times the squared norm). Not set: chosen by
  blocked cross-validation (Bergmeir and Benitez, 2012) over the grid :data:`ALPHAS`, fixed in
  advance: ``10 ** (k / 2)`` for ``k = -12 .. 6`` (1e-6 to 1e3, half-decades). Each series'
  windows are cut into :data:`CV_BLOCKS` contiguous blocks in time order (a series' only window
  goes to the block of its position: :meth:`~tsrec.data.WindowDataset.time_blocks`); each block
  is forecast by the ridge of every ``alpha`` fitted on the other blocks (their sums: the totals
  less the block's), and the ``alpha`` of the least squared error over the blocks is chosen (the
  grid's largest where no block has others to fit on). Windows one
  step apart share all but one step of their horizons, so leaving one out (and generalized
  cross-validation, its rotation-invariant form, which this replaced) forecasts it from windows
  that hold its own targets, and picked penalties too small: on unseen_like's quarterly
  consumption with a known-future income, 1e-5 where the blocks choose 1e-3, and a validation
  MASE of 3.35 against 0.69.

Windows whose context has no observed value, or whose horizon has an unobserved value, are left
out of the fit (per channel where channel-independent).
"""

from __future__ import annotations

import math
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

__all__ = ["ALPHAS", "CV_BLOCKS", "LagRidge", "MAX_FEATURES", "RidgeConfig"]

#: The penalties the blocked cross-validation chooses among (see the module).
ALPHAS = tuple(10.0 ** (k / 2) for k in range(-12, 7))
#: Contiguous blocks of each series' windows, in time order, that the cross-validation holds out
#: in turn (the usual five folds).
CV_BLOCKS = 5
#: The most features a window may have at ``fit``: a ``[D, D]`` float64 Gram matrix per block (4,096:
#: 0.7 GB). Checked at ``fit`` only, so that a model fitted under the earlier limit (8,192, one
#: matrix) still loads.
MAX_FEATURES = 4_096


@dataclass(frozen=True)
class RidgeConfig(ModelConfig):
    """Attributes:
        alpha: the penalty per window on the standardised coefficients; None (default): chosen by
            blocked cross-validation over :data:`ALPHAS` at ``fit`` (the module).
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
                raise ValueError(f"alpha must be a positive number (or None: chosen by blocked "
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
        statics = [_indicators(static_cat[:, k], n).to(x.dtype) if static_cat is not None
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
        sufficient statistics per block of each series' windows (:data:`CV_BLOCKS`) in one pass of
        :data:`~tsrec.models.windowed.FIT_BATCH` windows at a time, then the closed form (the module;
        ``seed`` is not used: nothing is drawn). ``ValueError`` where no window is usable."""
        c = self.config
        if self.n_features > MAX_FEATURES:  # at fit, not at construction: a model fitted before loads
            raise ValueError(f"ridge would read {self.n_features} features per window (context_length "
                             f"{c.context_length} x ({self.core_channels} channel(s) + {self.past_covariates} "
                             f"covariate features) + prediction_length "
                             f"{c.prediction_length} x {self.batch_features} time features), more than "
                             f"{MAX_FEATURES}: use a shorter context_length, or channel_independent=True")
        blocks = windows.time_blocks(CV_BLOCKS)  # [N]
        stats = _Moments(CV_BLOCKS)
        done = 0
        with torch.no_grad():
            for batch in window_batches(windows):
                features, target, usable, _ = self.design(batch)
                size = len(batch["past_target"])
                block = blocks[done:done + size]  # [B] window_batches gathers the windows in order
                done += size
                if self.core_channels == 1:  # one row per window and channel, the channel fastest
                    block = block.repeat_interleave(batch["past_target"].shape[2])
                stats.add(features[usable], target[usable], block[usable])
        if stats.count == 0:
            raise ValueError("ridge has no training window with an observed context and a fully observed horizon; "
                             "use a shorter prediction_length or context_length, or fill the missing values")
        coef, alpha = stats.solve(self.config.alpha)
        self.coef.copy_(torch.from_numpy(coef))
        self.alpha.fill_(alpha)


def _indicators(codes: Tensor, n: int) -> Tensor:
    """``[B, n]`` the one-hot indicators of category ``codes`` ``[B]`` among ``n``; ``1 / n`` each for
    a negative code (a category ``fit`` never saw): the average of the known categories' effects."""
    seen = codes >= 0  # [B]
    onehot = torch.nn.functional.one_hot(codes.clamp(min=0), n).double()  # [B, n]
    return torch.where(seen[:, None], onehot, 1.0 / n)


class _Moments:
    """The sufficient statistics of a ridge regression, per block of rows, accumulated in float64
    about the first rows' means (a shift that keeps the centring exact where a column's mean is
    large against its spread): each block's row count and its sums of the shifted features ``[D]``
    and targets ``[M]``, cross-products ``X^T X`` ``[D, D]`` and ``X^T Y`` ``[D, M]`` and the
    targets' sums of squares ``[M]``."""

    def __init__(self, blocks: int = 1) -> None:
        self.counts = np.zeros(blocks, dtype=np.int64)
        self.shift: tuple[Tensor, Tensor] | None = None
        self.sums: list[list[np.ndarray] | None] = [None] * blocks

    @property
    def count(self) -> int:
        return int(self.counts.sum())

    def add(self, x: Tensor, y: Tensor, block: Tensor | None = None) -> None:
        """Rows ``x`` ``[n, D]`` with targets ``y`` ``[n, M]``, of blocks ``block`` ``[n]`` (None: the first)."""
        if not len(x):
            return
        x, y = x.double(), y.double()
        if self.shift is None:
            self.shift = (x.mean(0), y.mean(0))
        x, y = x - self.shift[0], y - self.shift[1]
        block = torch.zeros(len(x), dtype=torch.int64) if block is None else block
        for b in torch.unique(block).tolist():
            rows = block == b
            xb, yb = x[rows], y[rows]
            parts = [p.numpy() for p in (xb.sum(0), yb.sum(0), xb.T @ xb, xb.T @ yb, (yb * yb).sum(0))]
            held = self.sums[b]
            self.sums[b] = parts if held is None else [a + c for a, c in zip(held, parts)]
            self.counts[b] += len(xb)

    def solve(self, alpha: float | None) -> tuple[np.ndarray, float]:
        """``(coef [D + 1, M], alpha)``: the ridge of the penalty ``alpha`` (None: the grid's
        :meth:`held_out_errors` choice) on the centred, standardised columns, mapped back to the raw
        features with the intercept last. A column constant over the rows (to 1e-8 of its mean) gets 0."""
        n = self.count
        sums = self._total()
        mx = sums[0] / n  # [D] about the shift
        std = np.sqrt(np.clip(np.diag(sums[2]) / n - mx ** 2, 0.0, None))  # [D]
        shift_x, shift_y = (s.numpy() for s in self.shift)
        varies = std > 1e-8 * np.maximum(np.abs(mx + shift_x), 1.0)  # [D]
        std = np.where(varies, std, 1.0)
        if alpha is None:
            errors = self.held_out_errors(std, varies)  # [A]
            alpha = ALPHAS[int(np.argmin(errors))] if np.isfinite(errors).any() else ALPHAS[-1]
        mx, my, w = _Ridge.of(n, sums, std, varies).coefficients(n * alpha)
        intercept = (my + shift_y) - (mx + shift_x) @ w  # [M]
        return np.concatenate([w, intercept[None]], axis=0), float(alpha)

    def held_out_errors(self, std: np.ndarray, varies: np.ndarray) -> np.ndarray:
        """``[A]`` the squared errors, summed over every block and output, of each block forecast by
        the ridge of each of :data:`ALPHAS` fitted on the other blocks (on the columns ``std``
        standardises, those ``varies`` marks); inf where no block has other blocks' rows to fit on."""
        total, n = self._total(), self.count
        errors = np.zeros(len(ALPHAS))
        scored = False
        for held, count in zip(self.sums, self.counts.tolist()):
            if held is None or n - count < 2:
                continue
            scored = True
            sx, sy, xx, xy, yy = held
            rest = _Ridge.of(n - count, [a - b for a, b in zip(total, held)], std, varies)
            for j, alpha in enumerate(ALPHAS):
                mx, my, w = rest.coefficients((n - count) * alpha)  # [D], [M], [D, M]
                b = my - mx @ w  # [M] the intercept, about the shift
                # sum over the block's rows of (y - b - x w)^2, from its sums alone
                errors[j] += float((yy - 2 * b * sy - 2 * (xy * w).sum(0) + count * b ** 2 + 2 * b * (sx @ w)
                                    + ((xx @ w) * w).sum(0)).sum())
        return errors if scored else np.full(len(ALPHAS), math.inf)

    def _total(self) -> list[np.ndarray]:
        """The sums over every block (the list of :class:`_Moments`' docstring)."""
        held = [sums for sums in self.sums if sums is not None]
        return [sum(parts[1:], parts[0]) for parts in zip(*held)]


@dataclass(frozen=True)
class _Ridge:
    """The eigendecomposition of ``n`` rows' centred, standardised Gram matrix (:meth:`of`), from
    which the ridge of every penalty follows (:meth:`coefficients`)."""

    mx: np.ndarray
    my: np.ndarray
    std: np.ndarray
    varies: np.ndarray
    eigenvalues: np.ndarray
    vectors: np.ndarray
    rotated: np.ndarray

    @classmethod
    def of(cls, n: int, sums: list[np.ndarray], std: np.ndarray, varies: np.ndarray) -> _Ridge:
        """Of the sums of ``n`` rows (:class:`_Moments`' list), the columns divided by ``std`` ``[D]``
        and those not ``varies`` ``[D]`` left out."""
        sx, sy, xx, xy, _ = sums
        mx, my = sx / n, sy / n  # [D], [M] about the shift
        gram = xx - n * np.outer(mx, mx)  # [D, D] centred
        cross = xy - n * np.outer(mx, my)  # [D, M]
        gram = np.where(np.outer(varies, varies), gram / np.outer(std, std), 0.0)
        cross = np.where(varies[:, None], cross / std[:, None], 0.0)
        eigenvalues, vectors = np.linalg.eigh(gram)  # [D], [D, D]
        return cls(mx, my, std, varies, np.clip(eigenvalues, 0.0, None), vectors, vectors.T @ cross)

    def coefficients(self, penalty: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(mx [D], my [M], w [D, M])``: the means about the shift and the raw columns' weights of
        the ridge of ``penalty`` (``n * alpha``)."""
        w = self.vectors @ (self.rotated / (self.eigenvalues + penalty)[:, None])  # [D, M] standardised
        return self.mx, self.my, np.where(self.varies[:, None], w / self.std[:, None], 0.0)
