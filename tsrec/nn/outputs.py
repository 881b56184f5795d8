"""What a network forecasts per step and channel: a point, a distribution or a set of quantiles.

Every trainable model ends in ``P = output.n_params`` numbers per step and channel,
``raw [..., P]``; a :class:`ForecastOutput` turns them into valid parameters (:meth:`params`),
undoes an affine normalisation on them (:meth:`affine`), trains them (:meth:`loss`) and reads
forecasts off them (:meth:`mean`, :meth:`quantiles`, :meth:`sample`). One setting picks it,
``ModelConfig.output``:

- ``"point"`` (``P = 1``): the forecast itself, trained by ``TrainingConfig.loss`` (MSE or MAE);
- ``"normal"`` / ``"studentt"`` (``P = 2`` / ``3``): a Gaussian / Student-t per step and channel
  through ``gluonts.torch.distributions``, trained by negative log-likelihood;
- ``"quantile"`` (``P = Q``): the ``quantile_levels`` directly, trained by the pinball loss, made
  non-crossing by construction (a first quantile, then non-negative increments).

Affine maps ``y = a x + b`` (RevIN's and the scaler's inverse) act on each parameter by its role:
locations and quantiles map like values (then quantiles are re-sorted, in case ``a < 0``),
scales multiply by ``|a|``, shapes (Student-t's ``df``) stay.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor
from torch.nn import functional as F

__all__ = ["OUTPUTS", "ForecastOutput", "PointOutput", "DistributionOutput", "QuantileOutput", "make_output",
           "masked_loss"]

OUTPUTS = ("point", "normal", "studentt", "quantile")

#: Roles of parameters under an affine map of the data.
LOCATION, SCALE, SHAPE = "location", "scale", "shape"


class ForecastOutput(abc.ABC):
    """The parameters a network emits per step and channel, and what they mean (module docstring)."""

    #: the role of each of the ``P`` parameters
    roles: tuple[str, ...]

    @property
    def n_params(self) -> int:
        return len(self.roles)

    @property
    def probabilistic(self) -> bool:
        return True

    @abc.abstractmethod
    def params(self, raw: Tensor) -> Tensor:
        """Unconstrained ``raw [..., P]`` -> valid parameters ``[..., P]``."""

    def affine(self, params: Tensor, shift: Tensor, scale: Tensor) -> Tensor:
        """Parameters of the data mapped by ``y = scale * x + shift``; ``shift``/``scale``
        broadcast against ``params[..., 0]``."""
        columns = []
        for i, role in enumerate(self.roles):
            p = params[..., i]
            columns.append(p * scale + shift if role == LOCATION else p * scale.abs() if role == SCALE else p)
        return torch.stack(columns, dim=-1)

    @abc.abstractmethod
    def loss(self, params: Tensor, target: Tensor, observed: Tensor, point_loss: str) -> Tensor:
        """Mean loss over the observed entries: ``params [..., P]``, ``target``/``observed [...]``."""

    @abc.abstractmethod
    def mean(self, params: Tensor) -> Tensor:
        """The point forecast ``[...]`` (GluonTS's ``Forecast.mean``)."""

    @abc.abstractmethod
    def quantiles(self, params: Tensor, levels: Sequence[float]) -> Tensor:
        """Quantiles ``[..., Q]`` at ``levels``, non-decreasing along the last axis."""

    def sample(self, params: Tensor, num_samples: int) -> Tensor:
        """Sample paths ``[num_samples, ...]`` (distribution outputs only; torch's global RNG)."""
        raise ValueError(f"a {type(self).__name__} has no distribution to sample: train with output='normal' "
                         "or output='studentt' for sample paths, or ask for quantiles")


def _masked_mean(values: Tensor, observed: Tensor) -> Tensor:
    return (values * observed).sum() / observed.sum().clamp_min(1.0)


def masked_loss(prediction: Tensor, target: Tensor, observed: Tensor, kind: str = "mse") -> Tensor:
    """Mean ``(prediction - target)^2`` (or ``|.|``) over observed entries; all ``[B, H, C]``."""
    error = prediction - target
    return _masked_mean(error.square() if kind == "mse" else error.abs(), observed)


class PointOutput(ForecastOutput):
    """One number per step, the forecast itself, trained by MSE or MAE. Its parameters are the
    forecast without a trailing parameter axis: ``[...]``, not ``[..., 1]``."""

    roles = (LOCATION,)

    @property
    def probabilistic(self) -> bool:
        return False

    def params(self, raw: Tensor) -> Tensor:
        """``raw [..., 1]`` -> the forecast ``[...]``."""
        return raw[..., 0]

    def affine(self, params: Tensor, shift: Tensor, scale: Tensor) -> Tensor:
        return params * scale + shift

    def loss(self, params: Tensor, target: Tensor, observed: Tensor, point_loss: str) -> Tensor:
        return masked_loss(params, target, observed, point_loss)

    def mean(self, params: Tensor) -> Tensor:
        return params

    def quantiles(self, params: Tensor, levels: Sequence[float]) -> Tensor:
        raise ValueError("a point forecast has no quantiles: train with output='quantile', 'normal' or 'studentt'")


class DistributionOutput(ForecastOutput):
    """A parametric distribution per step (``gluonts.torch.distributions``' Normal or Student-t
    output), trained by negative log-likelihood."""

    def __init__(self, kind: str) -> None:
        from tsrec._optional import quiet_gluonts_import

        with quiet_gluonts_import():
            from gluonts.torch.distributions import NormalOutput, StudentTOutput

        self.kind = kind
        self.gluonts = {"normal": NormalOutput, "studentt": StudentTOutput}[kind]()
        self.names = tuple(self.gluonts.args_dim)  # normal: loc, scale; studentt: df, loc, scale
        self.roles = tuple(LOCATION if n == "loc" else SCALE if n == "scale" else SHAPE for n in self.names)

    def params(self, raw: Tensor) -> Tensor:
        # GluonTS's domain maps take each argument as [..., 1] and squeeze that axis
        return torch.stack(self.gluonts.domain_map(*raw.unsqueeze(-1).unbind(-2)), dim=-1)

    def distribution(self, params: Tensor) -> torch.distributions.Distribution:
        return self.gluonts.distr_cls(**dict(zip(self.names, params.unbind(-1))))

    def loss(self, params: Tensor, target: Tensor, observed: Tensor, point_loss: str) -> Tensor:
        safe = torch.where(observed > 0, target, torch.zeros_like(target))  # unobserved targets may be NaN
        return _masked_mean(-self.distribution(params).log_prob(safe), observed)

    def mean(self, params: Tensor) -> Tensor:
        return params[..., self.names.index("loc")]  # the Student-t's mean too (its df > 2 by the domain map)

    def quantiles(self, params: Tensor, levels: Sequence[float]) -> Tensor:
        distribution = self.distribution(params)
        return torch.stack([distribution.icdf(torch.full_like(params[..., 0], float(q))) for q in levels], dim=-1)

    def sample(self, params: Tensor, num_samples: int) -> Tensor:
        return self.distribution(params).sample((num_samples,))


class QuantileOutput(ForecastOutput):
    """``Q`` quantiles per step at fixed ``levels`` (sorted), trained by the mean pinball loss;
    the lowest is free and each next one adds a softplus, so they never cross. Zero raw outputs
    give the standard normal's quantiles (the lowest offset by ``Phi^-1(q_1)``, each gap by the
    normal's gap), a prior on the scale the inputs are normalised to, so that training starts
    from a calibrated band rather than from gaps of ``softplus(0) = 0.69`` each."""

    def __init__(self, levels: Sequence[float]) -> None:
        self.levels = tuple(float(q) for q in levels)
        self.roles = (LOCATION,) * len(self.levels)
        normal = torch.distributions.Normal(0.0, 1.0).icdf(torch.tensor(self.levels, dtype=torch.float64))
        gaps = normal.diff()
        self._first = float(normal[0])
        self._gap_offsets = torch.log(torch.expm1(gaps))  # softplus(offset) = the normal's gap

    def params(self, raw: Tensor) -> Tensor:
        first = raw[..., :1] + self._first
        gaps = F.softplus(raw[..., 1:] + self._gap_offsets.to(raw.dtype).to(raw.device))
        return torch.cat([first, first + torch.cumsum(gaps, dim=-1)], dim=-1)

    def affine(self, params: Tensor, shift: Tensor, scale: Tensor) -> Tensor:
        return super().affine(params, shift, scale).sort(dim=-1).values  # a negative scale reverses the order

    def loss(self, params: Tensor, target: Tensor, observed: Tensor, point_loss: str) -> Tensor:
        levels = params.new_tensor(self.levels)
        diff = torch.where(observed > 0, target, torch.zeros_like(target)).unsqueeze(-1) - params  # [..., Q]
        pinball = torch.maximum(levels * diff, (levels - 1) * diff).mean(-1)
        return _masked_mean(pinball, observed)

    def mean(self, params: Tensor) -> Tensor:
        """The median where 0.5 is a level (as GluonTS's ``QuantileForecast``), else the mean of the quantiles."""
        return params[..., self.levels.index(0.5)] if 0.5 in self.levels else params.mean(-1)

    def quantiles(self, params: Tensor, levels: Sequence[float]) -> Tensor:
        missing = [q for q in levels if float(q) not in self.levels]
        if missing:
            raise ValueError(f"quantile levels {missing} were not trained; this model forecasts the levels "
                             f"{list(self.levels)} (set quantile_levels=... before fit to train others)")
        return params[..., [self.levels.index(float(q)) for q in levels]]


def make_output(kind: str, quantile_levels: Sequence[float]) -> ForecastOutput:
    """The :class:`ForecastOutput` of ``ModelConfig.output`` (``kind``) and ``quantile_levels``."""
    if kind == "point":
        return PointOutput()
    if kind == "quantile":
        return QuantileOutput(quantile_levels)
    return DistributionOutput(kind)


def check_levels(name: str, levels: Any) -> tuple[float, ...]:
    """``levels`` as a sorted tuple of distinct floats in (0, 1), or a ``ValueError`` naming ``name``.

    A level of a narrower float type (NumPy ``float32``, ``float16``) is read as the decimal it
    prints as (``np.float32(0.1)`` -> ``0.1``, not ``0.10000000149011612``), so that it names the
    same level as the Python float a user types.
    """
    try:
        values = tuple(sorted(_level(q) for q in levels))
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a list of quantile levels in (0, 1), e.g. [0.1, 0.5, 0.9]; "
                         f"got {levels!r}") from None
    if not values or any(not 0.0 < q < 1.0 for q in values) or len(set(values)) < len(values):
        raise ValueError(f"{name} must be distinct levels strictly between 0 and 1, e.g. [0.1, 0.5, 0.9]; "
                         f"got {levels!r}")
    return values


def _level(q: Any) -> float:
    """One quantile level as a Python float; a narrower float as the shortest decimal that reads
    back to it in its own precision."""
    if isinstance(q, np.floating) and np.finfo(q.dtype).bits < 64:
        return float(np.format_float_positional(q, unique=True, trim="-"))
    return float(q)
