"""Global gradient-boosted trees on lags (scikit-learn's ``HistGradientBoostingRegressor``), the
model that won M5 and that mlforecast and AutoGluon ship: one tree ensemble shared by every series
and channel (read each alone), fitted on the training windows (:meth:`GradientBoosting.fit_windows`).

- **Strategy**: recursive, as mlforecast's default: one model of the next value, fitted on the
  first step of every training window; the forecast applies it ``prediction_length`` times, each
  prediction appended to the series the next step's lags are read from. Measured against the
  direct strategy (one model of every step, the step a feature, ``H`` rows per window) on
  generated hourly panels of 20 series x 1,000 steps, ``H = 24``, the last 5 windows: MAE 0.491
  against 0.482 with a thresholded known-future covariate, 0.840 against 0.902 on a threshold
  autoregression, for 1.5 and 2.6 CPU-s of fitting against 6.5 and 6.4 (direct fits 200,000 rows).
- **Features** of the step after a series (the window read in its context's units,
  :meth:`~tsrec.models.windowed.WindowFit.normalised`, then the steps forecast so far; a missing
  value is NaN, which the trees send down the side they learnt for it): the last :data:`MAX_LAGS`
  values (or the whole context where shorter), :data:`SEASONAL_LAGS` values of the step's phase
  (``season_length`` and twice that back; none without a season), the means of the last
  :func:`rolling_windows` values, the window's future time features at the step (the calendar's,
  then the known-future covariates'; past-only covariates are 0 there), the covariates' last values
  over the context (what drove the values read, past-only ones included), the codes of the
  categorical static covariates (as numbers: a tree splits on them as on any feature), and the
  window's mean and scale (the level and spread it was read at). The time features and covariates
  are in the data's (scaled) units, not the window's: a threshold on a covariate is one threshold.
- **Fit**: one row per training window and channel, at most :data:`MAX_ROWS`, the windows drawn
  (without replacement, with the training seed) where there are more; rows whose context has no
  observed value, or whose target is missing, are left out. ``max_iter`` (200) trees at most,
  stopped early (scikit-learn's own: 10 iterations without progress on a tenth of the rows held
  out, drawn with the seed) where there are at least :data:`EARLY_STOPPING_ROWS` rows: the trees
  stop where more would fit the noise, and a small panel's fit stays short.
- **Saved without pickles**: the fitted trees are exported into flat node arrays (:class:`Trees`,
  scikit-learn's ``TreePredictor.nodes``: feature, threshold, where a missing value goes, children,
  leaf values; and the baseline), the state dict's ``_extra_state``, and forecasts walk those arrays
  (:meth:`Trees.predict`, vectorised over rows and trees): nothing of scikit-learn is needed to
  load or forecast.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch
from torch import Tensor

from tsrec._checks import check_int, check_optional_int
from tsrec.batch import ForecastBatch
from tsrec.config import DataFacts
from tsrec.models.base import ModelConfig
from tsrec.models.naive import choose_season
from tsrec.models.parameters import check_layout
from tsrec.models.windowed import Normalised, WindowFit, window_batches

if TYPE_CHECKING:
    from tsrec.data import WindowDataset

__all__ = ["EARLY_STOPPING_ROWS", "GBMConfig", "GradientBoosting", "MAX_LAGS", "MAX_ROWS", "SEASONAL_LAGS", "Trees",
           "rolling_windows"]

#: The most recent values read as lags.
MAX_LAGS = 24
#: Values of the target step's phase read (the latest ones, a season apart).
SEASONAL_LAGS = 2
#: The most training rows (window and channel) the trees are fitted on; more windows are drawn
#: among (the training seed's draw, without replacement).
MAX_ROWS = 200_000
#: The fewest rows on which the fit holds a tenth out to stop early.
EARLY_STOPPING_ROWS = 1_000
#: OpenMP threads the trees are fitted on. One: on a 2-core machine with other work running, scikit-learn's
#: two threads fitted 200 trees on 10,000 rows of 39 features in 53 CPU-s where one took 0.9 (their
#: barriers spin while the other thread waits for a core), as torch's threads do (tsrec.training.threads).
FIT_THREADS = 1
#: Rows walked through the trees at a time (a ``[rows, trees]`` table of node indices).
PREDICT_CHUNK = 4_096


def rolling_windows(context_length: int, season: int) -> tuple[int, ...]:
    """The lengths of the rolling means: 3 steps, a season and two (where there is one), each at
    most the context, shortest first."""
    seasonal = (season, 2 * season) if season > 1 else ()
    return tuple(sorted({min(w, context_length) for w in (3, *seasonal)}))


@dataclass(frozen=True)
class GBMConfig(ModelConfig):
    """Attributes:
        max_iter: the most trees (boosting iterations; fewer where early stopping ends the fit).
        learning_rate: the shrinkage of each tree's values.
        max_leaf_nodes: the most leaves of a tree.
        season_length: steps per season, for the seasonal lags and rolling means (1: none). None:
            the calendar's season confirmed or overruled by the data (as the statistical models'),
            1 where the context cannot hold one.
        channel_independent: True (the only choice): the trees read each channel alone.
    """

    max_iter: int = 200
    learning_rate: float = 0.1
    max_leaf_nodes: int = 31
    season_length: int | None = None
    channel_independent: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "max_iter", check_int("max_iter", self.max_iter, 1))
        object.__setattr__(self, "max_leaf_nodes", check_int("max_leaf_nodes", self.max_leaf_nodes, 2))
        object.__setattr__(self, "season_length", check_optional_int("season_length", self.season_length, 1))
        if isinstance(self.learning_rate, bool) or not isinstance(self.learning_rate, (int, float)) \
                or not math.isfinite(self.learning_rate) or self.learning_rate <= 0:
            raise ValueError(f"learning_rate must be a positive number, got {self.learning_rate!r}")
        object.__setattr__(self, "learning_rate", float(self.learning_rate))
        if not self.channel_independent:
            raise ValueError("gbm reads each channel alone (one tree ensemble for every channel): "
                             "use channel_independent=True")
        if self.output != "point":
            raise ValueError(f"gbm forecasts points only (its intervals are conformal: conformal_windows=<k>), "
                             f"got output={self.output!r}")

    def unresolved(self) -> list[str]:
        return super().unresolved() + (["season_length"] if self.season_length is None else [])

    def resolved(self, data: DataFacts) -> GBMConfig:
        config = super().resolved(data)
        season = config.season_length
        if season is None and config.context_length is not None:
            season, _ = choose_season(data.cycles, data.periods, config.context_length, 1)  # 1: no seasonal lags
        return dataclasses.replace(config, season_length=season)


class GradientBoosting(WindowFit):
    """The trees of the module, shared by every series and channel: :attr:`trees` (empty before the
    fit, which forecasts each window's mean) of :attr:`n_features` features."""

    config_class = GBMConfig
    missing_tail = ("gbm reads each missing step as missing (each tree sends it down the side it learnt) and "
                    "forecasts the requested dates; drop the missing rows to forecast from the last observation "
                    "instead")

    def __init__(self, config: GBMConfig) -> None:
        super().__init__(config)
        c = config
        self.n_lags = min(c.context_length, MAX_LAGS)
        self.season = c.season_length if c.season_length is not None and c.season_length > 1 else 1
        self.n_seasonal = SEASONAL_LAGS if self.season > 1 else 0
        self.windows = rolling_windows(c.context_length, self.season)
        self.n_features = (self.n_lags + len(self.windows) + self.n_seasonal + self.batch_features
                           + self.past_covariates + len(c.static_cardinalities) + 2)
        self.trees = Trees.empty()

    # ------------------------------------------------------------------ features
    def prepared(self, batch: ForecastBatch) -> tuple[Normalised, Tensor, Tensor, Tensor, Tensor]:
        """A batch of ``B`` windows of ``C`` channels -> ``(the normalised windows, contexts [R, Lc]
        (NaN where missing), loc [R, 1], scale [R, 1], exogenous features [R, H, E])`` in float64,
        ``R = B * C`` rows (the channel fastest): :meth:`_exogenous` of each row's window."""
        n = self.normalised(batch)
        n = dataclasses.replace(n, x=n.x.detach())  # nothing flows back through trees (RevIN's affine is unused)
        size, context, channels = n.x.shape
        x = torch.where(n.seen, n.x, math.nan).double().transpose(1, 2).reshape(size * channels, context)  # [R, Lc]
        loc = n.loc.double().transpose(1, 2).reshape(-1, 1)  # [R, 1]
        scale = n.scale.double().transpose(1, 2).reshape(-1, 1)  # [R, 1]
        return n, x, loc, scale, self._exogenous(batch, size).repeat_interleave(channels, dim=0)  # [R, H, E]

    def step_features(self, series: Tensor, exogenous: Tensor, loc: Tensor, scale: Tensor) -> Tensor:
        """The features ``[R, D]`` of the step after ``series`` ``[R, T]`` (normalised values, NaN
        where missing: the context, then the steps forecast so far), with that step's exogenous
        features ``[R, E]`` and the windows' ``loc``, ``scale`` ``[R, 1]``: the lags, the rolling
        means, the seasonal lags (``T - s``, ``T - 2 s``, NaN before the series), then the
        exogenous features, ``loc`` and ``scale`` (the module)."""
        steps = series.shape[1]
        lags = series[:, steps - self.n_lags:]  # [R, L]
        rolling = [series[:, steps - w:].nanmean(1, keepdim=True) for w in self.windows]  # [R, 1] each
        seasonal = [series[:, where, None] if (where := steps - self.season * (1 + j)) >= 0
                    else torch.full_like(loc, math.nan) for j in range(self.n_seasonal)]  # [R, 1] each
        return torch.cat([lags, *rolling, *seasonal, exogenous, loc, scale], dim=1)  # [R, D]

    def rows(self, batch: ForecastBatch) -> tuple[Tensor, Tensor | None, Tensor, Normalised]:
        """The training rows of a batch of ``B`` windows of ``C`` channels, one per window and
        channel (the channel fastest): ``(features [R, D] of each window's first step, its
        normalised target [R] or None (the batch has no future), usable [R], the normalised
        windows)``; a row is usable where its context has an observed value and its target is observed."""
        n, x, loc, scale, exogenous = self.prepared(batch)
        features = self.step_features(x, exogenous[:, 0], loc, scale)  # [R, D]
        usable = n.seen.any(1).reshape(-1)  # [B, C] -> [R]
        target = None
        if n.target is not None:
            target = n.target[:, 0].double().reshape(-1)  # [B, C] -> [R]
            usable = usable & n.observed[:, 0].reshape(-1)
        return features, target, usable, n

    def _exogenous(self, batch: ForecastBatch, size: int) -> Tensor:
        """``[B, H, F' + K + Kc]``: the future time features of each step, the covariates' last
        values over the context and the static codes, in the data's units (float64)."""
        horizon = self.config.prediction_length
        future = batch["future_time_feat"][..., :self.batch_features].double()  # [B, H, F']
        first = self.batch_features - self.past_covariates
        last = batch["past_time_feat"][:, -1, first:self.batch_features].double()  # [B, K]
        codes = batch.get("static_cat")
        kinds = len(self.config.static_cardinalities)
        statics = codes[:, :kinds].double() if codes is not None else future.new_zeros(size, kinds)  # [B, Kc]
        statics = statics.masked_fill(statics < 0, math.nan)  # a category fit never saw: missing, as the trees learnt
        return torch.cat([future, torch.cat([last, statics], dim=1)[:, None].expand(-1, horizon, -1)], dim=2)

    # ------------------------------------------------------------------ forecasting
    def forward(self, batch: ForecastBatch) -> Tensor:
        """``batch`` -> the forecast ``[B, H, C]`` in the batch's (scaled) units: the trees' next
        step, appended to the series, ``H`` times."""
        n, series, loc, scale, exogenous = self.prepared(batch)
        size, _, channels = n.x.shape
        for h in range(self.config.prediction_length):
            features = self.step_features(series, exogenous[:, h], loc, scale)  # [R, D]
            step = torch.from_numpy(self.trees.predict(features.numpy()))  # [R]
            series = torch.cat([series, step[:, None]], dim=1)  # [R, Lc + h + 1]
        y = series[:, -self.config.prediction_length:].reshape(size, channels, -1).transpose(1, 2)  # [B, H, C]
        return (y * n.scale.double() + n.loc.double()).to(batch["past_target"].dtype)

    def forecast(self, past_target: Tensor, past_time_feat: Tensor, future_time_feat: Tensor) -> Tensor:
        """``[B, Lc, 1]`` normalised values (every one observed), ``[B, Lc, F]``, ``[B, H, F]`` ->
        ``[B, H, 1, 1]`` in the same units: the trees on windows read as they are (no RevIN, no
        static covariate)."""
        revin, self.revin = self.revin, None
        try:
            y = self.forward({"past_target": past_target, "past_time_feat": past_time_feat,
                              "future_time_feat": future_time_feat})
        finally:
            self.revin = revin
        return y.unsqueeze(-1)

    # ------------------------------------------------------------------ fitting
    def fit_windows(self, windows: WindowDataset, seed: int = 0) -> None:
        """Fit the trees on the rows of ``windows`` (the module): at most :data:`MAX_ROWS`, the
        windows drawn with ``seed`` where there are more. ``ValueError`` where no row is usable."""
        from sklearn.ensemble import HistGradientBoostingRegressor
        from threadpoolctl import threadpool_limits  # scikit-learn's own dependency

        wanted = max(1, MAX_ROWS // self.config.n_channels)
        indices = None
        if len(windows) > wanted:
            drawn = np.random.default_rng(seed).choice(len(windows), size=wanted, replace=False)
            indices = torch.from_numpy(np.sort(drawn))
        xs, ys = [], []
        with torch.no_grad():
            for batch in window_batches(windows, indices):
                features, target, usable, _ = self.rows(batch)
                xs.append(features[usable].numpy())
                ys.append(target[usable].numpy())
        x, y = np.concatenate(xs), np.concatenate(ys)
        if not len(x):
            raise ValueError("gbm has no training row with an observed context and an observed target; use a "
                             "shorter prediction_length or context_length, or fill the missing values")
        # A feature missing in every row (a seasonal lag past every window's context: two years back in
        # 20 steps of yearly data) carries nothing, and scikit-learn 1.9 fails on such a column: fitted
        # as a constant, on which no tree splits, as earlier versions left it.
        x[:, np.isnan(x).all(axis=0)] = 0.0
        c = self.config
        model = HistGradientBoostingRegressor(
            max_iter=c.max_iter, learning_rate=c.learning_rate, max_leaf_nodes=c.max_leaf_nodes,
            early_stopping=len(x) >= EARLY_STOPPING_ROWS, validation_fraction=0.1, n_iter_no_change=10,
            random_state=seed)
        with threadpool_limits(limits=FIT_THREADS, user_api="openmp"):
            model.fit(x, y)
        self.trees = Trees.of(model)
        self.trees.check(self.n_features, type(self).__name__)

    def get_extra_state(self) -> dict[str, Tensor]:
        """The fitted :class:`Trees` as tensors: what ``state_dict`` saves of them."""
        return self.trees.tensors()

    def set_extra_state(self, state: Any) -> None:
        """Take the trees ``state`` (:meth:`get_extra_state`'s), checked (:meth:`Trees.from_tensors`)."""
        self.trees = Trees.from_tensors(state, self.n_features, type(self).__name__)


@dataclass(frozen=True)
class Trees:
    """Fitted regression trees laid end to end (``N`` nodes in all, ``T`` trees): what scikit-learn's
    ``TreePredictor.nodes`` hold of each node, without its classes.

    feature:      ``[N]`` int64, the feature a split reads (0 at a leaf).
    threshold:    ``[N]`` float64, a value at most this goes left.
    missing_left: ``[N]`` bool, a missing value (NaN) goes left.
    left, right:  ``[N]`` int64, the children's indices among all the nodes (0 at a leaf).
    leaf:         ``[N]`` bool, the node is a leaf.
    value:        ``[N]`` float64, a leaf's value (the learning rate applied).
    roots:        ``[T]`` int64, each tree's first node.
    baseline:     ``[1]`` float64, the prediction before any tree.
    """

    feature: np.ndarray
    threshold: np.ndarray
    missing_left: np.ndarray
    left: np.ndarray
    right: np.ndarray
    leaf: np.ndarray
    value: np.ndarray
    roots: np.ndarray
    baseline: np.ndarray

    #: The tensors of :meth:`tensors`: dtype and dimensions.
    LAYOUT: ClassVar[dict[str, tuple[torch.dtype, int]]] = {
        "feature": (torch.int64, 1), "threshold": (torch.float64, 1), "missing_left": (torch.bool, 1),
        "left": (torch.int64, 1), "right": (torch.int64, 1), "leaf": (torch.bool, 1), "value": (torch.float64, 1),
        "roots": (torch.int64, 1), "baseline": (torch.float64, 1)}

    @classmethod
    def empty(cls) -> Trees:
        """No tree: every prediction is 0."""
        nothing = np.zeros(0, np.int64)
        return cls(nothing, np.zeros(0), np.zeros(0, bool), nothing, nothing, np.zeros(0, bool), np.zeros(0), nothing,
                   np.zeros(1))

    @classmethod
    def of(cls, model: Any) -> Trees:
        """The trees of a fitted ``HistGradientBoostingRegressor`` (numerical splits only)."""
        nodes = [tree[0].nodes for tree in model._predictors]  # one tree per iteration for a regression
        if any(part["is_categorical"].any() for part in nodes):
            raise ValueError("gbm exports numerical splits only, and scikit-learn made a categorical one")
        sizes = np.array([len(part) for part in nodes], np.int64)
        starts = np.r_[0, np.cumsum(sizes)[:-1]].astype(np.int64)  # [T]
        if not nodes:
            return cls.empty()
        every = np.concatenate(nodes)
        offset = np.repeat(starts, sizes)  # [N]
        leaf = every["is_leaf"].astype(bool)
        return cls(feature=np.where(leaf, 0, every["feature_idx"]).astype(np.int64),
                   threshold=every["num_threshold"].astype(np.float64),
                   missing_left=every["missing_go_to_left"].astype(bool),
                   left=np.where(leaf, 0, every["left"].astype(np.int64) + offset),
                   right=np.where(leaf, 0, every["right"].astype(np.int64) + offset),
                   leaf=leaf, value=every["value"].astype(np.float64), roots=starts,
                   baseline=np.asarray(model._baseline_prediction, np.float64).reshape(1))

    def predict(self, x: np.ndarray) -> np.ndarray:
        """``[R, D]`` float64 features (NaN: missing) -> ``[R]``: the baseline plus every tree's leaf
        value, each row walked down all the trees at once, :data:`PREDICT_CHUNK` rows at a time."""
        out = np.full(len(x), self.baseline[0])
        if not len(self.roots):
            return out
        for start in range(0, len(x), PREDICT_CHUNK):
            rows = x[start:start + PREDICT_CHUNK]  # [r, D]
            node = np.broadcast_to(self.roots, (len(rows), len(self.roots))).copy()  # [r, T]
            which = np.arange(len(rows))[:, None]  # [r, 1]
            while True:
                inner = ~self.leaf[node]  # [r, T]
                if not inner.any():
                    break
                value = rows[which, self.feature[node]]  # [r, T]
                left = np.where(np.isnan(value), self.missing_left[node], value <= self.threshold[node])
                node = np.where(inner, np.where(left, self.left[node], self.right[node]), node)
            out[start:start + len(rows)] += self.value[node].sum(1)
        return out

    def tensors(self) -> dict[str, Tensor]:
        """The arrays as tensors of their own memory (:data:`LAYOUT`)."""
        return {name: torch.from_numpy(np.array(getattr(self, name))) for name in self.LAYOUT}

    @classmethod
    def from_tensors(cls, state: Any, n_features: int, owner: str) -> Trees:
        """The trees in ``state`` (what :meth:`tensors` wrote) of a model of ``n_features``
        features, checked (:meth:`check`): a ``ValueError`` naming what is wrong, never an IndexError later."""
        check_layout(state, cls.LAYOUT, f"{owner}'s fitted trees (its state dict's _extra_state)")
        trees = cls(**{name: state[name].numpy() for name in cls.LAYOUT})
        trees.check(n_features, owner)
        return trees

    def check(self, n_features: int, owner: str) -> None:
        """``ValueError`` where the arrays are not trees of ``n_features`` features: one length of
        every node array, a baseline of one value, roots among the nodes, and every split's feature
        among the features and its children after it (so that every walk ends at a leaf)."""
        where = f"{owner}'s fitted trees (its state dict's _extra_state)"
        count = len(self.feature)
        index = np.arange(count)
        inner = ~self.leaf
        problem = None
        if any(len(getattr(self, name)) != count for name in ("threshold", "missing_left", "left", "right", "leaf",
                                                               "value")):
            problem = "the node arrays differ in length"
        elif self.baseline.shape != (1,) or not np.isfinite(self.baseline).all():
            problem = f"the baseline is {self.baseline.tolist()}, not one finite value"
        elif ((self.roots < 0) | (self.roots >= count)).any():
            problem = "a tree's root is not among the nodes"
        elif ((self.feature[inner] < 0) | (self.feature[inner] >= n_features)).any():
            problem = f"a split reads a feature beyond the model's {n_features}"
        elif ((self.left[inner] <= index[inner]) | (self.right[inner] <= index[inner])
              | (self.left[inner] >= count) | (self.right[inner] >= count)).any():
            problem = "a split's children are not nodes after it"
        elif not np.isfinite(self.value[self.leaf]).all():
            problem = "a leaf's value is not finite"
        if problem is not None:
            raise ValueError(f"{where}: {problem}; the saved model was edited or corrupted: fit again")

