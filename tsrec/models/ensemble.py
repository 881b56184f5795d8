"""A weighted ensemble of fitted models: the network behind ``Forecaster("auto")`` (:mod:`tsrec.auto`)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor, nn

from tsrec.batch import ForecastBatch
from tsrec.models.base import ForecastModel, ModelConfig

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

__all__ = ["AUTO", "AUTO_CANDIDATES", "EVAL_METRICS", "Ensemble", "EnsembleConfig", "with_members"]

#: The registry name of the ensemble ``Forecaster("auto")`` fits (:mod:`tsrec.auto`).
AUTO = "auto"

#: The models ``Forecaster("auto")`` (the default model) scores: the statistical ones first (they
#: cost seconds), statsforecast's AutoETS, AutoTheta, AutoCES, DynamicOptimizedTheta and MSTL (when
#: the stats extra is installed; MSTL where the calendar has two seasons the history holds twice;
#: CrostonOptimized, ADIDA, IMAPA and TSB where the data are intermittent), seasonal naive, the last
#: value and the random walk with drift, the global ridge on lags and known-future features (fitted
#: in closed form) and the global gradient-boosted trees on lags (both read the covariates), then
#: the networks RSA in PatchTST, PatchTST and DLinear (all with RevIN), tried only on data with the
#: windows for them (:mod:`tsrec.auto`). The one list to extend with new candidates; auto scores
#: those with nothing to train before the trainable ones, whatever the order.
AUTO_CANDIDATES = ("ets", "theta", "ces", "dynamic_theta", "mstl", "croston", "adida", "imapa", "tsb", "seasonal_naive",
                   "naive", "drift", "ridge", "gbm", "rsa_patchtst", "patchtst", "dlinear")
#: What ``Forecaster("auto")`` selects and weights its candidates by (``eval_metric``), each scale-free
#: (:mod:`tsrec.auto`): ``"mase"`` (absolute errors over each series' in-sample seasonal naive error),
#: ``"rmsse"`` (the root of the squared errors over each series' in-sample squared one-step change,
#: the M5 competition's point metric), ``"mae"`` and ``"mse"`` (absolute and squared errors over each
#: series' standard deviation), ``"smape"`` and ``"wql"`` (AutoGluon's weighted quantile loss: the
#: pinball losses' total over the total ``|y|``, averaged over the levels, so that large series weigh
#: more; the quantiles of ``output="quantile"`` at its levels, point forecasts at 0.5, where it is
#: the weighted absolute percentage error). Not named: ``"rmsse"`` for intermittent data, else
#: ``"mase"`` (:func:`tsrec.validation.eval_metric_for`).
EVAL_METRICS = ("mase", "rmsse", "mae", "mse", "smape", "wql")
#: The outputs an ensemble can average: points, and quantiles (a weighted average of each level's
#: forecasts keeps them ordered); distributions' parameters do not average into their mixture.
ENSEMBLE_OUTPUTS = ("point", "quantile")


@dataclass(frozen=True)
class EnsembleConfig(ModelConfig):
    """What ``Forecaster("auto")`` chose.

    Attributes:
        candidates: the models scored on the validation windows.
        eval_metric: what the candidates are scored, selected and weighted by (:data:`EVAL_METRICS`;
            None, the default: chosen by the data at ``fit``, ``"rmsse"`` for intermittent data and
            ``"mase"`` for any other, and saved).
        scores: each candidate's validation score (``eval_metric``; NaN where it failed).
        members: the models of the ensemble (filled at ``fit``), with their resolved network settings
            ``member_configs`` (``ModelConfig.to_dict()``) and their ``weights`` (summing to 1).
    """

    candidates: tuple[str, ...] = AUTO_CANDIDATES
    eval_metric: str | None = None
    scores: tuple[float, ...] = ()
    members: tuple[str, ...] = ()
    member_configs: tuple[dict[str, Any], ...] = ()
    weights: tuple[float, ...] = ()
    revin: bool = False  # each member normalises its own windows

    def __post_init__(self) -> None:
        super().__post_init__()
        candidates = (self.candidates,) if isinstance(self.candidates, str) else tuple(self.candidates)
        if not candidates or not all(isinstance(c, str) for c in candidates) or "auto" in candidates:
            raise ValueError(f"candidates must name registered models (not 'auto'), got {self.candidates!r}")
        object.__setattr__(self, "candidates", candidates)
        if self.eval_metric is not None and self.eval_metric not in EVAL_METRICS:
            raise ValueError(f"eval_metric must be one of {EVAL_METRICS}, got {self.eval_metric!r}")
        if self.output not in ENSEMBLE_OUTPUTS:
            raise ValueError(f"an ensemble averages its members' forecasts, which works for output='point' or "
                             f"'quantile', not {self.output!r}; use one of those, or fit a model by name")
        if self.revin:
            raise ValueError("an ensemble applies no RevIN of its own (each member normalises its windows); "
                             "leave revin out")
        if not len(self.members) == len(self.member_configs) == len(self.weights):
            raise ValueError("members, member_configs and weights must have one entry per member")
        if self.weights and not math.isclose(sum(self.weights), 1.0, rel_tol=1e-9):
            raise ValueError(f"ensemble weights must sum to 1, got {self.weights!r}")

    def unresolved(self) -> list[str]:
        return super().unresolved() + ([] if self.members else ["members"])

    def leaderboard(self) -> pd.DataFrame:
        """The candidates' validation scores (``eval_metric``) and weights, best first (0: left out of
        the ensemble)."""
        import pandas as pd  # the models layer loads pandas only when asked for a table

        weights = dict(zip(self.members, self.weights))
        frame = pd.DataFrame({"model": list(self.candidates), "val_score": list(self.scores) or math.nan,
                              "weight": [weights.get(name, 0.0) for name in self.candidates]})
        frame.attrs["eval_metric"] = self.eval_metric
        return frame.sort_values("val_score", na_position="last", ignore_index=True)


class Ensemble(ForecastModel):
    """``sum_i w_i * member_i(batch)`` over the fitted members, each reading the last
    ``context_length`` steps of its own from the batch (the ensemble's context is the longest), or,
    for a member that reads whole histories, all the batch holds (up to its ``max_history``). Each
    member's forecast is raised to the batch's ``target_floor`` first, where it has one (a series
    never negative: :attr:`StandardScaler.floor <tsrec.data.scaling.StandardScaler>`): the average
    of what each member forecasts alone, which is what auto's validation and calibration score.

    ``members``: the networks of ``config.members``, in order, built by the registry
    (:func:`tsrec.models.registry.build_model`)."""

    config_class = EnsembleConfig
    trainable = False
    missing_tail = None  # each member says what it does
    untrained_outputs = ENSEMBLE_OUTPUTS

    def __init__(self, config: EnsembleConfig, members: Sequence[ForecastModel]) -> None:
        super().__init__(config)
        if len(members) != len(config.members):
            raise ValueError(f"an ensemble of {list(config.members)} needs {len(config.members)} member networks, "
                             f"got {len(members)}")
        self.members = nn.ModuleList(members)
        self.register_buffer("weights", torch.tensor(config.weights, dtype=torch.float32), persistent=False)

    @classmethod
    def default_context(cls, prediction_length: int, season: int) -> int:
        raise TypeError("an ensemble's context is its longest member's, known once they are fitted")

    def forecast(self, past_target: Tensor, past_time_feat: Tensor, future_time_feat: Tensor) -> Tensor:
        """``[B, Lc, C]``, ``[B, Lc, F]``, ``[B, H, F]`` -> ``[B, H, C, P]``: :meth:`forward` on a batch of
        just these fields (every value observed)."""
        out = self.forward({"past_target": past_target, "past_time_feat": past_time_feat,
                            "future_time_feat": future_time_feat})
        return out if out.dim() == 4 else out.unsqueeze(-1)

    def forward(self, batch: ForecastBatch) -> Tensor:
        floor = _scaled_floor(batch)  # [B, C] or None
        total = None
        for weight, member in zip(self.weights, self.members):
            # a member that reads whole histories takes all the batch holds (up to its cap), the others their context
            length = min(batch["past_target"].shape[1], type(member).max_history or math.inf) \
                if type(member).whole_history else member.config.context_length
            window = {key: value[:, -length:] if key in ("past_target", "past_observed", "past_time_feat") else value
                      for key, value in batch.items()}
            if not type(member).whole_history:  # a network computes in float32 (the windows may hold float64)
                window = {key: value.float() if value.is_floating_point() else value for key, value in window.items()}
            out = member(window)  # [B, H, C] or [B, H, C, Q]
            if floor is not None:
                low = floor.to(device=out.device, dtype=out.dtype)[:, None, :]  # [B, 1, C]
                out = torch.maximum(out, low if out.dim() == 3 else low[..., None])
            total = weight * out if total is None else total + weight * out
        return total

    def fit_series(self, values: Sequence[np.ndarray], observed: Sequence[np.ndarray],
                   like: ForecastModel | None = None) -> None:
        """Each member's :meth:`~tsrec.models.base.ForecastModel.fit_series` (the statistical members
        fit their parameters, which the ensemble's state dict carries, ``members.<i>._extra_state``);
        ``like`` is not passed on (an ensemble fitted on part of the series is not kept)."""
        for member in self.members:
            member.fit_series(values, observed)

    def describe(self) -> list[dict[str, Any]]:
        """One row per member: ``model``, ``weight``, ``context_length``."""
        return [{"model": name, "weight": float(w), "context_length": m.config.context_length}
                for name, w, m in zip(self.config.members, self.config.weights, self.members)]


def _scaled_floor(batch: ForecastBatch) -> Tensor | None:
    """``[B, C]`` float64: each window's ``target_floor`` in the batch's scaled units (-inf where it
    has none), or None where the batch carries no floor."""
    if "target_floor" not in batch:
        return None
    return (batch["target_floor"] - batch["target_loc"]) / batch["target_scale"]


def with_members(config: EnsembleConfig, members: list[tuple[str, ModelConfig]], weights: list[float],
                 scores: list[float]) -> EnsembleConfig:
    """``config`` with its fitted ``members`` (name, resolved network settings), their ``weights``
    and the candidates' validation ``scores``."""
    return dataclasses.replace(config, members=tuple(name for name, _ in members),
                               member_configs=tuple(c.to_dict() for _, c in members),
                               weights=tuple(float(w) for w in weights), scores=tuple(float(s) for s in scores))
