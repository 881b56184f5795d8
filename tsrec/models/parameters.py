"""What a statistical model keeps of its fit of each series (:mod:`tsrec.models.stats`): the
parameters statsforecast's ``forward`` needs, packed into a handful of arrays however many series
(:class:`Parameters`, saved as the model's state dict's ``_extra_state``, checked when read back),
and the rule that says when a window is fitted again instead (:func:`refits`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import numpy as np
import torch
from torch import Tensor

__all__ = ["ETS_MAX_SEASON", "ETS_WIDTH", "FITTED", "LAST_VALUE", "NONE", "REFIT_GROWTH", "VARIANT_GROWTH", "Packing",
           "Parameters", "check_layout", "ets_codes", "ets_components", "ets_count", "ets_fit", "ets_season",
           "ets_valid", "keeps_variant", "refits"]


#: A series is fitted again on a window's history where that history is longer than this many
#: times the history its parameters were fitted on. At 2, more than half of what the window holds
#: is new to the parameters: they were estimated on under half of the evidence there now is, and
#: are estimated again. Below it (a backtest's windows after the fit, ``predict`` on the fitted data
#: or a little more) they are carried forward, as statsforecast's ``cross_validation(refit=False)``
#: carries them.
REFIT_GROWTH = 2.0


def refits(read: np.ndarray, fitted: np.ndarray) -> np.ndarray:
    """Whether windows that read ``read`` steps of their series (``[W]``, from the series' first step
    or the model's cap) are fitted again rather than carried forward from parameters fitted on
    ``fitted`` steps (``[W]``): where ``read > REFIT_GROWTH * fitted`` (:data:`REFIT_GROWTH`)."""
    return np.asarray(read) > REFIT_GROWTH * np.asarray(fitted)


#: A series fitted again on a longer history keeps the variant an earlier fit chose (ETS's
#: components, Theta's model type, CES's season type; auto's members keep their validated ones)
#: only where the longer history is at most this many times the earlier one: the choice was read
#: off at least four fifths of the evidence the full search would read. Past it the search runs
#: again: measured on unseen_like (seed 1), keeping the variants of fits on 60 of 96 monthly steps
#: (us_employment) and on about 2/5 of yearly series (fertility) cost 8.9% and 21.9% in test MSE,
#: where seven sets did not move at all (co2 among them, its history grown 1.04x).
VARIANT_GROWTH = 1.25


def keeps_variant(steps: np.ndarray, fitted: np.ndarray) -> np.ndarray:
    """Whether series of ``steps`` steps (``[N]``) keep the variant of a fit of ``fitted`` steps
    (``[N]``): where ``steps <= VARIANT_GROWTH * fitted`` (:data:`VARIANT_GROWTH`)."""
    return np.asarray(steps) <= VARIANT_GROWTH * np.asarray(fitted)


#: What :class:`Parameters` holds for a series and channel: nothing (it is fitted on each window),
#: a statsforecast fit, or statsforecast's failure (the window's last value).
NONE, FITTED, LAST_VALUE = 0, 1, 2


class Packing(Protocol):
    """How a statistical model packs one fit (:class:`Parameters`' ``codes`` and ``values``)."""

    statsforecast_name: str

    def code_width(self) -> int:
        """How many codes one fit takes."""

    def valid_codes(self, codes: np.ndarray) -> np.ndarray:
        """``[K]`` whether the codes ``[K, J]`` describe a fit."""

    def value_count(self, codes: np.ndarray) -> np.ndarray:
        """``[K]`` the values a fit with these codes ``[K, J]`` has."""

    def encode(self, fitted: Any) -> tuple[list[int], np.ndarray]:
        """The codes and values of a statsforecast fit of this model."""

    def decode(self, codes: np.ndarray, values: np.ndarray) -> Any:
        """The statsforecast model whose ``forward`` applies the fit of ``codes`` and ``values``."""


@dataclass(frozen=True)
class Parameters:
    """A statistical model's fitted parameters of ``N`` series and ``C`` channels, packed into five
    arrays however many series there are (its state dict's ``_extra_state``, saved as tensors).

    status: ``[N, C]`` int8, :data:`NONE`, :data:`FITTED` or :data:`LAST_VALUE`.
    steps:  ``[N]`` int64, the steps of each series the fit read (its length, up to the model's cap).
    codes:  ``[N, C, J]`` int64, the model's discrete choices (:meth:`Packing.code_width` of them:
            ETS's ``m`` and components, Theta's ``m`` and model type, ...).
    values: ``[V]`` float64, every fitted (series, channel)'s real parameters laid end to end.
    ends:   ``[N * C]`` int64, where each (series, channel)'s values end (series-major, channel fastest).
    """

    status: np.ndarray
    steps: np.ndarray
    codes: np.ndarray
    values: np.ndarray
    ends: np.ndarray

    #: The tensors of :meth:`tensors`: dtype and dimensions.
    LAYOUT: ClassVar[dict[str, tuple[torch.dtype, int]]] = {
        "status": (torch.int8, 2), "steps": (torch.int64, 1), "codes": (torch.int64, 3), "values": (torch.float64, 1),
        "ends": (torch.int64, 1)}

    @classmethod
    def empty(cls, channels: int, width: int) -> Parameters:
        """No series fitted (every window is fitted on its own history)."""
        return cls(np.zeros((0, channels), np.int8), np.zeros(0, np.int64), np.zeros((0, channels, width), np.int64),
                   np.zeros(0), np.zeros(0, np.int64))

    def entry(self, row: int, channel: int) -> tuple[np.ndarray, np.ndarray]:
        """The codes ``[J]`` and values of series ``row``'s ``channel``."""
        k = row * self.status.shape[1] + channel
        start = int(self.ends[k - 1]) if k else 0
        return self.codes[row, channel], self.values[start:int(self.ends[k])]

    def tensors(self) -> dict[str, Tensor]:
        """The arrays as tensors of their own memory (:data:`LAYOUT`)."""
        return {name: torch.from_numpy(np.array(getattr(self, name), dtype=np.dtype(str(dtype).removeprefix("torch."))))
                for name, (dtype, _) in self.LAYOUT.items()}

    @classmethod
    def from_tensors(cls, state: Any, model: Packing, channels: int) -> Parameters:
        """The parameters in ``state`` (what :meth:`tensors` wrote) of ``model``'s ``channels``,
        checked: a ``ValueError`` naming the tensor and what is wrong with it, never an IndexError later."""
        where = f"{type(model).__name__}'s fitted parameters (its state dict's _extra_state)"
        check_layout(state, cls.LAYOUT, where)
        status, steps, codes, values, ends = (state[name].numpy() for name in cls.LAYOUT)
        width = model.code_width()
        n = len(status)
        problems = []
        if status.shape[1:] != (channels,) or codes.shape != (n, channels, width) or steps.shape != (n,) \
                or ends.shape != (n * channels,):
            problems.append(f"status {list(status.shape)}, steps {list(steps.shape)}, codes {list(codes.shape)} and "
                            f"ends {list(ends.shape)} are not [N, {channels}], [N], [N, {channels}, {width}] and "
                            f"[N * {channels}] of one N")
        elif ((status != NONE) & (status != FITTED) & (status != LAST_VALUE)).any():
            problems.append(f"status holds {sorted(set(status.ravel().tolist()) - {NONE, FITTED, LAST_VALUE})}, not "
                            f"{NONE}, {FITTED} or {LAST_VALUE}")
        elif (steps < 0).any():
            problems.append("steps has negative entries")
        else:
            bounds = np.r_[0, ends]  # [N * C + 1]
            counts = np.diff(bounds)  # [N * C]
            fitted = status.ravel() == FITTED
            if (counts < 0).any() or bounds[-1] != len(values):
                problems.append(f"ends do not cut the {len(values)} values in order")
            elif (counts[~fitted] != 0).any():
                problems.append("ends give values to a series that was not fitted")
            else:
                flat = codes.reshape(n * channels, width)[fitted]  # [K, J]
                bad = ~model.valid_codes(flat) | (counts[fitted] != model.value_count(flat))
                if bad.any():
                    k = int(np.flatnonzero(fitted)[np.argmax(bad)])
                    problems.append(f"series row {k // channels}, channel {k % channels} has codes "
                                    f"{flat[np.argmax(bad)].tolist()} and {int(counts[k])} values, which are not a "
                                    f"{model.statsforecast_name} fit")
        if problems:
            raise ValueError(f"{where}: {problems[0]}; the saved model was edited or corrupted: fit again")
        return cls(status, steps, codes, values, ends)


def check_layout(state: Any, layout: dict[str, tuple[torch.dtype, int]], where: str) -> None:
    """Refuse a saved ``_extra_state`` (``state``) that is not a dict of exactly the tensors of
    ``layout`` (name: dtype and dimensions): a ``ValueError`` that names ``where`` it was read and
    each tensor that is wrong."""
    if not isinstance(state, dict) or set(state) != set(layout):
        keys = sorted(map(str, state)) if isinstance(state, dict) else type(state).__name__
        raise ValueError(f"{where} hold {keys}, not {sorted(layout)}; the saved model was edited or corrupted: "
                         "fit again")
    wrong = [f"{name} is {_described(state[name])}, not {str(dtype).removeprefix('torch.')} with {ndim} "
             f"dimension{'s' * (ndim > 1)}" for name, (dtype, ndim) in layout.items()
             if not (isinstance(state[name], Tensor) and state[name].dtype == dtype and state[name].ndim == ndim)]
    if wrong:
        raise ValueError(f"{where}: {'; '.join(wrong)}; the saved model was edited or corrupted: fit again")


def _described(value: Any) -> str:
    """How :meth:`Parameters.from_tensors` names what the state holds under a key."""
    if not isinstance(value, Tensor):
        return type(value).__name__
    return f"{str(value.dtype).removeprefix('torch.')} {list(value.shape)}"


#: ETS's components as statsforecast writes them (``"MAAD"``: error, trend, season, damped or not), each a code.
ETS_COMPONENTS = ("AM", "NAM", "NAM", "ND")
#: Codes of an ETS fit: ``m``, the four components' positions in :data:`ETS_COMPONENTS`, ``n_params``.
ETS_WIDTH = 6


#: The longest season statsforecast's ETS fits a seasonal component for (as R's ``ets``): its
#: recursions hold at most 24 seasonal states. Its search over a longer season fits the seasonal
#: models anyway, only to find them without a likelihood and choose among the others: the same fit
#: at 60x-600x the cost (one series of 2,000 five-minute steps at season 288: 4.9 CPU-s against 0.08;
#: of 4,000: 9.9 against 0.13; of 17,280: 340 against 0.55).
ETS_MAX_SEASON = 24


def ets_season(season: int) -> int:
    """The ``season_length`` tsrec gives statsforecast's ``AutoETS`` for a ``season``: itself up to
    :data:`ETS_MAX_SEASON`, else 1 (no season: the models statsforecast chooses among either way)."""
    return season if season <= ETS_MAX_SEASON else 1


def ets_codes(fit: dict[str, Any]) -> tuple[list[int], np.ndarray]:
    """The codes and ``par`` of statsforecast's ETS fit (``AutoETS.model_``)."""
    components = fit["components"]
    return ([int(fit["m"]), *(choices.index(c) for choices, c in zip(ETS_COMPONENTS, components)),
             int(fit["n_params"])], np.asarray(fit["par"], dtype=np.float64))


def ets_components(codes: np.ndarray) -> str:
    """The four letters of the ETS fit of ``codes``: error, trend and season (as statsforecast's
    ``model``, e.g. ``"AAN"``), then ``"D"`` where the trend is damped, else ``"N"``."""
    return "".join(choices[int(c)] for choices, c in zip(ETS_COMPONENTS, codes[1:5]))


def ets_fit(codes: np.ndarray, values: np.ndarray) -> dict[str, Any]:
    """What statsforecast's ``forward_ets`` reads of a fit (``m``, ``components``, ``par``,
    ``n_params``; ``fit``, the optimiser's report, it only passes on)."""
    components = ets_components(codes)
    return {"m": int(codes[0]), "components": components, "par": np.array(values), "n_params": int(codes[5]),
            "fit": None}


def ets_valid(codes: np.ndarray) -> np.ndarray:
    """``[K]`` whether the ETS codes ``[K, 6]`` name a model."""
    sizes = np.array([len(choices) for choices in ETS_COMPONENTS])
    return (codes[:, 0] >= 1) & ((codes[:, 1:5] >= 0) & (codes[:, 1:5] < sizes)).all(axis=1) & (codes[:, 5] >= 0)


def ets_count(codes: np.ndarray) -> np.ndarray:
    """``[K]`` the values of the ETS fits of ``codes`` ``[K, 6]``: alpha, beta, gamma and phi, the
    level, a trend and ``m`` seasonal states where the model has them."""
    return 5 + (codes[:, 2] > 0) + (codes[:, 3] > 0) * codes[:, 0]
