"""statsforecast's intermittent-demand models as tsrec models: ``croston``, ``adida``, ``imapa`` and
``tsb``; and the rule that says whether series are intermittent (:func:`intermittency`).

They are statistical models of :mod:`tsrec.models.stats` (the optional extra ``tsrec[stats]``,
whole histories, original units, missing values filled from the last observation), for series of
many zeros (the demand for a slow-moving item): each forecasts a flat line, the demand per step.

- ``croston``: statsforecast's ``CrostonOptimized`` (Croston 1972): simple exponential smoothing
  (SES) of the nonzero demands and of the intervals between them, each smoothing parameter chosen
  in [0.1, 0.3] by in-sample squared error; the forecast is the smoothed demand over the smoothed
  interval.
- ``adida``: statsforecast's ``ADIDA`` (Nikolopoulos et al. 2011): the series summed over blocks
  of its mean interval between demands (rounded), SES of those sums (its parameter chosen as
  Croston's), divided by the block length.
- ``imapa``: statsforecast's ``IMAPA`` (Petropoulos and Kourentzes 2015): ADIDA's forecast at every
  block length from 1 to the mean interval, averaged.
- ``tsb``: statsforecast's ``TSB`` (Teunter, Syntetos and Babai 2011): SES of the nonzero demands
  (``alpha_d``) times SES of the probability of a demand (``alpha_p``), both set, not fitted
  (statsforecast takes them as arguments; 0.2 each by default).

**Fitted once, carried forward.** statsforecast has no ``forward`` for these models (its
``cross_validation(refit=False)`` refuses them), so tsrec keeps what their fit chooses and applies
it to each window as ``forward`` does for the others: ``croston`` keeps its two smoothing
parameters, ``adida`` its block length and smoothing parameter, ``imapa`` its largest block length
and one smoothing parameter per block length; a window's forecast runs statsforecast's own SES
(``ses_forecast``) with them over the window's history. On the history they were fitted on this is
statsforecast's forecast exactly; on a longer one it is what that fit forecasts without choosing its
parameters again. ``tsb`` has no fitted parameter: every window is statsforecast's ``TSB`` on it.
A series with no demand at fit (no positive value), or a window too short for the block length
kept, is fitted on the window's own history (statsforecast's forecast of it), as is every window
under :data:`~tsrec.models.parameters.REFIT_GROWTH` (:mod:`tsrec.models.stats`).
"""

from __future__ import annotations

import abc

import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from tsrec.models.stats import StatsConfig, StatsModel

__all__ = ["ADI_THRESHOLD", "ADIDA", "IMAPA", "INTERMITTENT_MODELS", "TSB", "Croston", "IntermittentConfig",
           "Intermittency", "TSBConfig", "intermittency"]

#: The registered intermittent-demand models (statsforecast's).
INTERMITTENT_MODELS = ("croston", "adida", "imapa", "tsb")
#: A series is intermittent where its average demand interval (ADI: observed steps per nonzero
#: one) is at least this: Syntetos, Boylan and Croston's (2005) cut-off between smooth or erratic
#: demand and intermittent or lumpy demand; at least 1 - 1 / 1.32 = 24% of its steps are zeros.
ADI_THRESHOLD = 1.32
#: Data are intermittent where at least this share of their series (a wide frame's columns count
#: one each) is intermittent and never negative.
INTERMITTENT_SHARE = 0.5


@dataclass(frozen=True)
class Intermittency:
    """What :func:`intermittency` found of ``series`` series (channels count one each)."""

    series: int
    intermittent: int
    zeros: float  # the share of zeros among every observed value
    median_adi: float  # the series' median ADI (inf where a median series has no demand)

    @property
    def detected(self) -> bool:
        """At least :data:`INTERMITTENT_SHARE` of the series are intermittent."""
        return self.series > 0 and self.intermittent >= INTERMITTENT_SHARE * self.series

    def describe(self) -> str:
        """The rule's verdict, with its numbers (the leaderboard's note)."""
        verdict = "intermittent" if self.detected else "not intermittent"
        return (f"{verdict}: {self.intermittent} of {self.series} series have an average demand interval >= "
                f"{ADI_THRESHOLD} and no negative value (median {self.median_adi:.2f}; {100 * self.zeros:.0f}% zeros)")


def intermittency(values: list[np.ndarray], observed: list[np.ndarray]) -> Intermittency:
    """Whether the series ``values[i]``, ``observed[i]`` ``[T_i, C]`` are intermittent: a series
    (each channel) is where it is never negative and its ADI, observed steps over nonzero ones, is at
    least :data:`ADI_THRESHOLD` (a series without a nonzero value has an infinite ADI); the data are
    where at least :data:`INTERMITTENT_SHARE` of their series are. A channel with nothing observed
    counts for nothing."""
    adis, flags, zeros, seen = [], [], 0, 0
    for x, mask in zip(values, observed):
        x, mask = np.asarray(x, dtype=np.float64), np.asarray(mask, dtype=bool)  # [T, C]
        steps = mask.sum(axis=0)  # [C]
        nonzero = (mask & (x != 0)).sum(axis=0)
        negative = (mask & (x < 0)).any(axis=0)
        for c in np.flatnonzero(steps > 0).tolist():
            adi = steps[c] / nonzero[c] if nonzero[c] else np.inf
            adis.append(adi)
            flags.append(adi >= ADI_THRESHOLD and not negative[c])
        zeros += int((steps - nonzero).sum())
        seen += int(steps.sum())
    return Intermittency(len(adis), int(sum(flags)), zeros / seen if seen else 0.0,
                         float(np.median(adis)) if adis else float("nan"))


@dataclass(frozen=True)
class IntermittentConfig(StatsConfig):
    """No season: the intermittent-demand models forecast a flat line (``season_length`` 1, the only
    value they take)."""

    season_length: int | None = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.season_length != 1:
            raise ValueError(f"the intermittent-demand models have no season: leave season_length out (it is 1), "
                             f"got {self.season_length!r}")


@dataclass(frozen=True)
class TSBConfig(IntermittentConfig):
    """``alpha_d``: the smoothing of the nonzero demands; ``alpha_p``: of the probability of a
    demand (each in (0, 1]; statsforecast's ``TSB`` takes them set, not fitted)."""

    alpha_d: float = 0.2
    alpha_p: float = 0.2

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("alpha_d", "alpha_p"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0.0 < value <= 1.0:
                raise ValueError(f"{name} must be in (0, 1], got {value!r}")
            object.__setattr__(self, name, float(value))


class _Carried:
    """A fit of one history, carried forward: ``forward(y, h)`` as statsforecast's models have it
    (``{"mean": [h]}``), by the model's :meth:`Intermittent.apply` of the fit's codes and values."""

    def __init__(self, model: Intermittent, codes: np.ndarray, values: np.ndarray) -> None:
        self.model, self.codes, self.values = model, codes, values

    def forward(self, y: np.ndarray, h: int) -> dict[str, np.ndarray]:
        return {"mean": np.full(h, self.model.apply(self.codes, self.values, np.asarray(y, dtype=np.float64)))}


class Intermittent(StatsModel):
    """An intermittent-demand model of statsforecast (see the module), with no season."""

    config_class = IntermittentConfig

    def statsforecast_model(self) -> Any:
        return getattr(self._models, self.statsforecast_name)()


class CarriedIntermittent(Intermittent):
    """An intermittent-demand model fitted per history by the steps statsforecast's fit takes (its
    own functions: ``_optimized_ses_forecast`` chooses the smoothing), what it chooses kept as codes
    and values, applied to each window by :meth:`apply`."""

    def valid_codes(self, codes: np.ndarray) -> np.ndarray:
        return np.ones(len(codes), bool)

    def encode(self, fitted: Any) -> tuple[list[int], np.ndarray]:
        codes, values = fitted
        return codes, np.asarray(values, dtype=np.float64)

    def decode(self, codes: np.ndarray, values: np.ndarray) -> Any:
        return _Carried(self, codes, values)

    def _fit_groups(self, y: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> list[Any]:
        """Each history's ``(codes, values)`` (:meth:`fit_one`), None where it has no demand."""
        return [self.fit_one(y[start:start + n]) if (y[start:start + n] > 0).any() else None
                for start, n in zip(starts.tolist(), lengths.tolist())]

    @abc.abstractmethod
    def fit_one(self, y: np.ndarray) -> tuple[list[int], list[float]]:
        """The codes and values statsforecast's fit of ``y`` (with a positive value) chooses."""

    @abc.abstractmethod
    def apply(self, codes: np.ndarray, values: np.ndarray, y: np.ndarray) -> float:
        """The forecast (one value per step) of the history ``y`` by the fit ``codes``, ``values``."""

    def _own(self, y: np.ndarray) -> float:
        """statsforecast's forecast of ``y`` fitted on itself."""
        return float(self.statsforecast_model().forecast(y=y, h=1)["mean"][0])

    def _ses(self, x: np.ndarray, alpha: float) -> float:
        """statsforecast's SES one step after ``x`` with smoothing ``alpha``."""
        return float(self._models._ses_forecast(x, alpha)[0])

    def _alpha(self, x: np.ndarray) -> float:
        """The smoothing statsforecast's optimised SES chooses for ``x`` (in [0.1, 0.3])."""
        return float(self._models._optimized_ses_forecast(x)[2])

    def _blocks(self, y: np.ndarray, size: int) -> np.ndarray:
        """``y``'s sums over blocks of ``size`` steps ending at its last step (the first
        ``len(y) % size`` left out, as statsforecast's ADIDA and IMAPA cut them)."""
        return self._models._chunk_sums(y[len(y) % size:], size)

    def _block_length(self, y: np.ndarray) -> int:
        """The mean interval between ``y``'s nonzero values, rounded (ADIDA's block length)."""
        return round(self._models._intervals(y).mean())


class Croston(CarriedIntermittent):
    """statsforecast's ``CrostonOptimized``: keeps the smoothing of the demands and of the intervals."""

    statsforecast_name = "CrostonOptimized"

    def value_count(self, codes: np.ndarray) -> np.ndarray:
        return np.full(len(codes), 2)

    def fit_one(self, y: np.ndarray) -> tuple[list[int], list[float]]:
        models = self._models
        return [], [self._alpha(models._demand(y)), self._alpha(models._intervals(y))]

    def apply(self, codes: np.ndarray, values: np.ndarray, y: np.ndarray) -> float:
        demand = self._models._demand(y)
        if not demand.size:
            return self._own(y)  # statsforecast's: the last value
        size = self._ses(demand, float(values[0]))
        interval = self._ses(self._models._intervals(y), float(values[1]))
        return size / interval if interval != 0.0 else size


class Blocked(CarriedIntermittent):
    """A model of block sums (ADIDA, IMAPA): its one code is a block length (at least 1)."""

    def code_width(self) -> int:
        """The block length."""
        return 1

    def valid_codes(self, codes: np.ndarray) -> np.ndarray:
        return codes[:, 0] >= 1


class ADIDA(Blocked):
    """statsforecast's ``ADIDA``: keeps the block length and the smoothing of the block sums."""

    statsforecast_name = "ADIDA"

    def value_count(self, codes: np.ndarray) -> np.ndarray:
        return np.ones(len(codes), np.int64)

    def fit_one(self, y: np.ndarray) -> tuple[list[int], list[float]]:
        size = self._block_length(y)
        return [size], [self._alpha(self._blocks(y, size))]

    def apply(self, codes: np.ndarray, values: np.ndarray, y: np.ndarray) -> float:
        size = int(codes[0])
        if not (y != 0).any():
            return 0.0
        sums = self._blocks(y, size)
        return self._ses(sums, float(values[0])) / size if sums.size else self._own(y)


class IMAPA(Blocked):
    """statsforecast's ``IMAPA``: keeps the largest block length (its code) and the smoothing of the
    sums of each block length up to it."""

    statsforecast_name = "IMAPA"

    def value_count(self, codes: np.ndarray) -> np.ndarray:
        return codes[:, 0].astype(np.int64)

    def fit_one(self, y: np.ndarray) -> tuple[list[int], list[float]]:
        largest = self._block_length(y)
        return [largest], [self._alpha(self._blocks(y, size)) for size in range(1, largest + 1)]

    def apply(self, codes: np.ndarray, values: np.ndarray, y: np.ndarray) -> float:
        largest = int(codes[0])
        if not (y != 0).any():
            return 0.0
        if len(y) < largest:
            return self._own(y)
        return float(np.mean([self._ses(self._blocks(y, size), float(values[size - 1])) / size
                              for size in range(1, largest + 1)]))


class TSB(Intermittent):
    """statsforecast's ``TSB`` with the config's ``alpha_d`` and ``alpha_p``: nothing is fitted,
    so nothing is kept, and every window is statsforecast's forecast of it."""

    config_class = TSBConfig
    statsforecast_name = "TSB"
    carries_parameters = False

    def statsforecast_model(self) -> Any:
        return self._models.TSB(alpha_d=self.config.alpha_d, alpha_p=self.config.alpha_p)
