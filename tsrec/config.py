"""The settings leaves every layer shares: RSA, windows, training, and the facts read off the data.

Each setting has exactly one default, here (or in its model's config class for network options).
Settings that depend on the data (the season, REM dilations and initial periods, the REM head
mix for a given head count) default to ``None`` and are filled by ``resolved(...)`` from a
:class:`DataFacts` once the data is known; a value the user set is never replaced. This module
imports neither torch nor pandas: configs are plain frozen dataclasses that round-trip through
JSON with ``to_dict`` / ``from_dict``.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import types
import typing
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from tsrec._checks import check_choice, check_int, check_optional_int

__all__ = [
    "DEFAULT_MODEL",
    "Config",
    "CovariateConfig",
    "DataFacts",
    "RSAConfig",
    "TrainerConfig",
    "RSA_MIXES",
    "RSA_PRIORS",
    "SmoothingPrior",
    "TrainingConfig",
    "WindowConfig",
    "default_rem_kinds",
    "prior_rem_kinds",
    "static_embedding_dim",
]

#: The model ``Forecaster`` and ``tsrec fit`` fit when none is named: ``"auto"``, a fast selection
#: (statistical models first, networks only where the data have the windows for them, within a
#: budget that grows with the data; a validation-weighted ensemble of the best; tsrec.auto and
#: docs/auto.md). Name a model, e.g. ``Forecaster("rsa_patchtst", ...)``, for one network. Here, where
#: importing costs nothing, so that ``tsrec --help`` can name it.
DEFAULT_MODEL = "auto"

C = TypeVar("C", bound="Config")


class Config:
    """Mixin of the settings dataclasses: JSON round trip with unknown keys named, not dropped."""

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-compatible dict (nested configs become dicts, tuples lists)."""
        return _jsonable(dataclasses.asdict(self))  # type: ignore[call-overload]

    @classmethod
    def from_dict(cls: type[C], data: dict[str, Any]) -> C:
        """Inverse of :meth:`to_dict`; also takes the same dict written by hand (lists for tuples,
        dicts for nested configs). An unknown key is a ``TypeError`` that lists the known ones."""
        if not isinstance(data, dict):
            raise TypeError(f"{cls.__name__} settings must be a dict or a {cls.__name__}, got {type(data).__name__}")
        names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
        unknown = sorted(set(data) - set(names), key=str)
        if unknown:
            raise TypeError(f"{cls.__name__} has no setting(s) {unknown}; its settings are: {', '.join(names)}")
        hints = typing.get_type_hints(cls)
        return cls(**{key: _coerce(hints[key], value) for key, value in data.items()})

    @classmethod
    def coerce(cls: type[C], value: C | dict[str, Any]) -> C:
        """``value`` as this config: an instance is kept, a dict goes through :meth:`from_dict`."""
        return value if isinstance(value, cls) else cls.from_dict(value)  # type: ignore[arg-type]

    def unresolved(self) -> list[str]:
        """Names of the data-dependent fields still ``None`` (empty once resolved)."""
        return []


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def _coerce(hint: Any, value: Any) -> Any:
    """Rebuild nested configs and tuples from their JSON form."""
    if value is None:
        return None
    options = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
    for option in options:
        if isinstance(option, type) and issubclass(option, Config) and isinstance(value, dict):
            return option.from_dict(value)
    if isinstance(value, list):
        return tuple(_coerce(Any, v) for v in value)
    return value


@dataclass(frozen=True)
class DataFacts:
    """What the resolver reads off the fitted data.

    Attributes:
        season: steps per natural season of the frequency (24 for hourly data, 7 for daily).
        sub_daily: one step is shorter than a day, so one season (and one dilated REM step) is a day.
        n_channels: target variables the network sees jointly (``C``).
        n_time_features: features per step the network reads (``F``): the calendar features, then
            the ``n_covariate_features`` covariate features.
        periods: dominant cycle lengths found in the training part, in steps, strongest first
            (empty when none was looked for or found).
        n_covariate_features: the trailing features that come from covariates (dynamic, numeric
            static and the embeddings of categorical static covariates; 0 without covariates).
        static_cardinalities: categories of each categorical static covariate (embedded by the network).
        cycles: the calendar's natural cycles of the frequency in steps, shortest first (24 and 168
            for hourly data, 52.18 for weekly; :func:`tsrec.data.time_features.calendar_cycles`),
            from which the statistical models take their seasons (:func:`tsrec.models.naive.season_for`).
    """

    season: int
    sub_daily: bool = True
    n_channels: int = 1
    n_time_features: int = 0
    periods: tuple[float, ...] = ()
    n_covariate_features: int = 0
    static_cardinalities: tuple[int, ...] = ()
    cycles: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        check_int("season", self.season, 1)
        object.__setattr__(self, "cycles", tuple(float(c) for c in self.cycles))
        check_int("n_channels", self.n_channels, 1)
        check_int("n_time_features", self.n_time_features, 0)
        check_int("n_covariate_features", self.n_covariate_features, 0)
        object.__setattr__(self, "periods", tuple(float(p) for p in self.periods))
        object.__setattr__(self, "static_cardinalities",
                           tuple(check_int("static cardinality", c, 1) for c in self.static_cardinalities))

    def cycle_within(self, length: int) -> int | None:
        """The strongest cycle found, rounded to whole steps, if ``length`` steps hold it; None
        when no cycle was found or it is longer (a season the data do not show is never assumed)."""
        cycle = round(self.periods[0]) if self.periods else 0
        return cycle if 2 <= cycle <= length else None

    def in_token_units(self, steps_per_token: int) -> DataFacts:
        """The same facts for a model whose tokens span ``steps_per_token`` steps (PatchTST's
        stride): the season (at least 1) and the periods are measured in tokens."""
        k = check_int("steps_per_token", steps_per_token, 1)
        if k == 1:
            return self
        return dataclasses.replace(self, season=max(1, round(self.season / k)),
                                   periods=tuple(p / k for p in self.periods))


def default_rem_kinds(n_heads: int) -> tuple[int, int, int, int, int, int]:
    """The RSA paper's head mix for ``n_heads``: cos/sin pairs, half of them dilated by the
    season, and regular (decay) heads for the remainder: 8 heads give ``(0, 2, 2, 0, 2, 2)``."""
    quarter = n_heads // 4
    return (n_heads - 4 * quarter, quarter, quarter, 0, quarter, quarter)


def prior_rem_kinds(n_heads: int) -> tuple[int, int, int, int, int, int]:
    """The head mix of ``RSAConfig(prior="ets")`` for ``n_heads``: exponential smoothing lives in
    regular (decay) heads, so half of the heads are regular, plain (level, then the damped trend)
    and dilated by the season (the seasonal state), and one cos/sin pair of each kind per 8 heads
    holds the season's cycle: 8 heads give ``(2, 1, 1, 2, 1, 1)``, 4 give ``(2, 0, 0, 2, 0, 0)``."""
    pairs = n_heads // 8
    rest = n_heads - 4 * pairs
    return (rest - rest // 2, pairs, pairs, rest // 2, pairs, pairs)


#: How a head uses its REM (``RSAConfig.mix``): after the softmax through the gate, or before it as a bias.
RSA_MIXES = ("gate", "bias")
#: Where the REM heads start (``RSAConfig.prior``): at random (the paper's start) or from the ETS fit.
RSA_PRIORS = ("none", "ets")


@dataclass(frozen=True)
class SmoothingPrior(Config):
    """What ``RSAConfig(prior="ets")`` starts the REM heads from: the exponential smoothing (ETS)
    fitted on the training part (:func:`tsrec.smoothing_prior.fit_smoothing_prior`), one value per
    channel or one pooled value (the median over series and channels).

    Decays are per token of ``steps_per_token`` steps: the fit gives them per step (1), and
    :meth:`in_token_units` maps them onto a coarser grid (PatchTST's patches, one token per
    ``stride`` steps) as ``decay ** steps_per_token``: over ``s`` steps, simple exponential
    smoothing's weight decays by ``(1 - alpha) ** s``, so a normalised patch-lag REM with
    ``lambda_patch = (1 - alpha) ** s`` gives patch lag ``l`` exactly the smoothing weight of the
    ``s`` steps it spans (``s (l - 1) + 1 .. s l``).

    Attributes:
        level_decay: ``1 - alpha`` (alpha: ETS's level smoothing), per channel or pooled.
        trend_decay: ``phi`` of a damped trend, 0 where the fit has no damped trend.
        season_decay: per season, ``1 - gamma`` (gamma: ETS's seasonal smoothing); where the fit
            has no seasonal component, the level's decay over one season, ``(1 - alpha) ** m``.
        season: the season ``m`` in steps (1: none); in tokens it is ``season / steps_per_token``.
        gate: the gate's start ``sigmoid(mu)``, from ``skill`` (the fitter's rule).
        skill: ETS's MSE over seasonal naive's (naive without a season) on the held-out last
            windows of the training part; below 1 ETS is the better of the two.
        steps_per_token: time steps per token of the decays above.
    """

    level_decay: tuple[float, ...]
    trend_decay: tuple[float, ...]
    season_decay: tuple[float, ...]
    season: int
    gate: float
    skill: float
    steps_per_token: int = 1

    def __post_init__(self) -> None:
        sizes = {}
        for name in ("level_decay", "trend_decay", "season_decay"):
            raw = getattr(self, name)
            values = (raw,) if isinstance(raw, (int, float)) else tuple(raw)
            if not values or any(isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v < 1.0
                                 for v in values):
                raise ValueError(f"SmoothingPrior {name} must be decays in [0, 1), one per channel, got {raw!r}")
            object.__setattr__(self, name, tuple(float(v) for v in values))
            sizes[name] = len(values)
        if len(set(sizes.values())) != 1:
            raise ValueError(f"SmoothingPrior needs as many level, trend and season decays (one per channel, or "
                             f"one pooled), got {sizes}")
        check_int("season", self.season, 1)
        check_int("steps_per_token", self.steps_per_token, 1)
        if isinstance(self.gate, bool) or not isinstance(self.gate, (int, float)) or not 0.0 < self.gate < 1.0:
            raise ValueError(f"SmoothingPrior gate must be in (0, 1), got {self.gate!r}")

    @property
    def n_channels(self) -> int:
        """Channels with their own values (1: pooled)."""
        return len(self.level_decay)

    @property
    def season_tokens(self) -> float:
        """The season in tokens (patches for PatchTST)."""
        return self.season / self.steps_per_token

    def in_token_units(self, steps_per_token: int) -> SmoothingPrior:
        """The same prior on a grid of ``steps_per_token`` steps per token: step decays ``d``
        become ``d ** steps_per_token`` (``lambda_patch = (1 - alpha) ** stride``), the season decay
        (per season) is kept. A prior already on that grid is returned as it is."""
        k = check_int("steps_per_token", steps_per_token, 1)
        if self.steps_per_token == k:
            return self
        if self.steps_per_token != 1:
            raise ValueError(f"this SmoothingPrior is on a grid of {self.steps_per_token} steps per token and cannot "
                             f"be mapped onto {k}: map the per-step fit (steps_per_token=1) instead")
        return dataclasses.replace(self, level_decay=tuple(d ** k for d in self.level_decay),
                                   trend_decay=tuple(d ** k for d in self.trend_decay), steps_per_token=k)

# theta = 2 pi / 8 = pi / 4: the reported initialisation, kept where the data suggest no cycle.
_PAPER_PERIOD = 8.0


@dataclass(frozen=True)
class RSAConfig(Config):
    """RSA in every attention of a network: REM heads, their initialisation, and the gates.

    ``None`` fields depend on the data and are filled by :meth:`resolved` from the cycles found in
    the training part (:attr:`DataFacts.periods`), or, where none stands out, from the calendar
    season of the frequency. Lags, dilations and periods are counted in the model's tokens: time
    steps for most models, patches for PatchTST.

    Attributes:
        kinds: REM head counts ``(k1..k6)``: regular, cos, sin, dilated regular/cos/sin; they must
            sum to the layer's heads. None: :func:`default_rem_kinds`.
        dilation: dilation of the dilated heads, one int or one per dilated head. None: the
            strongest cycle found (rounded), else the season (24 for hourly data).
        periods: cycle lengths that initialise ``theta = 2 pi / period`` of the plain cos/sin
            pairs, used in turn. None: the cycles found and half the strongest (24 and 12 on hourly
            data with a daily cycle), else the season and its half.
        dilated_periods: the same for the dilated pairs, in dilated steps. None: the cycles found
            that are longer than the dilation, in dilated steps (a weekly cycle over a daily
            dilation gives 7), else a week and its half (7, 3.5 days) for sub-daily data, else 8
            (``theta = pi / 4``, the paper's start).
        encoder_masked: causal REM in encoder self-attention (decoder self and cross-attention
            REMs are always causal).
        per_head_gate: one gate per head instead of one per layer.
        gate_init: the gate logit ``mu ~ U(gate_init)`` (the paper: ``U(-3, 3)``).
        rem_on_lazy_queries: ProbSparse's lazy (not computed) rows get the REM term too (gate
            mode only: in bias mode the REM acts inside the softmax, which lazy rows skip).
        mix: how a head uses its REM. ``"gate"`` (default, the paper's form): after the softmax,
            ``(1 - g) softmax(QK^T / sqrt(d)) V + g P V``. ``"bias"``: before the softmax, as a
            log-decay bias ``softmax(QK^T / sqrt(d) + g B) V`` in the manner of ALiBi and
            Powerformer, where ``B`` is the log of the REM's non-negative envelope (decay heads:
            ``(i - j) log lambda``; cycle heads: ``log gamma^k + cos(k theta)``, a von Mises
            periodic factor; keys the REM cannot reach, future keys of a masked REM and lags off a
            dilated head's grid, get ``-inf``) and ``g = sigmoid(mu)`` is the same gate, now
            scaling the bias (see :class:`tsrec.nn.attention.RSAMixer`).
        per_channel: one set of REM parameters (``lambda``, ``gamma``, ``theta``) per (head,
            channel) instead of per head, all channels starting from the same per-head values.
            Channel-independent models only (PatchTST: every channel is its own sequence, so each
            may learn its own decays and cycles); models that mix channels refuse it.
        prior: where the REM heads start. ``"none"`` (default): the paper's random start and the
            periods above. ``"ets"``: from the exponential smoothing (statsforecast's ``AutoETS``)
            fitted on the training part (``prior_fit``, filled by ``fit``): ``lambda = 1 - alpha``
            on the plain regular heads (the second one at the damped trend's ``phi`` where the fit
            has one), the season ``m`` as the dilation, ``lambda = 1 - gamma`` (the seasonal
            smoothing) on the dilated regular heads, the plain cos/sin pairs at ``theta = 2 pi / m``
            (and ``2 pi / (m / 2)``) with the seasonal decay spread over the season as their
            envelope, and every layer's gate at ``prior_fit.gate`` (``clip(1 - r / 2, 0.05, 0.95)``,
            ``r`` ETS's MSE over seasonal naive's on held-out steps; ``gate_init`` is then not
            used). Regular heads are then *normalised*: ``f(l) = (1 - |lambda|) / |lambda| *
            lambda^l``, so that a head at ``lambda = 1 - alpha`` weighs lag ``l >= 1`` by
            ``alpha (1 - alpha)^(l - 1)``, exactly simple exponential smoothing's forecast from the
            steps before the query (cycle heads are not normalised). Unset fields default to the
            prior's: ``kinds`` to :func:`prior_rem_kinds`, ``dilation`` to the season in tokens,
            ``periods`` to the season and its half. On PatchTST the REM acts at patch lags:
            ``lambda_patch = (1 - alpha) ** stride`` and the season is ``m / stride`` patches
            (:meth:`SmoothingPrior.in_token_units`). One pooled value unless ``per_channel``,
            where each channel starts from its own fit. Off by default: its pre-registered study
            on RSA-PatchTST failed (worse than PatchTST in 15 of 21 pairs, MSE +12.2%;
            docs/when_rsa_helps.md).
        prior_fit: the fitted :class:`SmoothingPrior` (data-dependent: ``fit`` fills it from the
            training part with ``prior="ets"``; set it to start from another fit).
        max_lag: the longest lag, in tokens, that the attentions of the network see (filled by
            the network's config at resolution from its token count: PatchTST's ``n_patches - 1``,
            the encoder-decoder's shortest attention, ``min(context, label + horizon) - 1``, a
            sequence backbone's ``context - 1``; None where it is not known). A dilated head whose
            dilation is longer sees no lag but 0 on its grid: its REM is zero everywhere and gets
            no gradient. :meth:`resolved` makes every such head a plain head of the same kind
            (not a capped dilation: a dilation capped to the window would be a lag the data do
            not cycle at, seen at one lag on each side, where the plain head sees every lag and
            its cos/sin pair starts at the next plain period in turn: half the day where the day
            was the dilation). This applies to dilations the user set too; ``undilated`` says
            what was changed.
        undilated: how many heads of each kind (regular, cos, sin) resolution made plain because
            their dilation was longer than ``max_lag`` (they are the last heads of their kind's
            plain group in ``kinds``; :meth:`undilated_heads`). ``(0, 0, 0)`` when none was.
    """

    kinds: tuple[int, int, int, int, int, int] | None = None
    dilation: int | tuple[int, ...] | None = None
    periods: tuple[float, ...] | None = None
    dilated_periods: tuple[float, ...] | None = None
    encoder_masked: bool = True
    per_head_gate: bool = False
    gate_init: tuple[float, float] = (-3.0, 3.0)
    rem_on_lazy_queries: bool = True
    mix: Literal["gate", "bias"] = "gate"
    per_channel: bool = False
    prior: Literal["none", "ets"] = "none"
    prior_fit: SmoothingPrior | None = None
    max_lag: int | None = None
    undilated: tuple[int, int, int] = (0, 0, 0)

    def __post_init__(self) -> None:
        check_choice("rsa mix", self.mix, RSA_MIXES)
        object.__setattr__(self, "max_lag", check_optional_int("rsa max_lag", self.max_lag, 0))
        undilated = tuple(self.undilated) if isinstance(self.undilated, (tuple, list)) else ()
        if len(undilated) != 3 or any(isinstance(u, bool) or not isinstance(u, int) or u < 0 for u in undilated):
            raise ValueError(f"rsa undilated must be three non-negative head counts (regular, cos, sin), "
                             f"got {self.undilated!r}")
        object.__setattr__(self, "undilated", undilated)
        check_choice("rsa prior", self.prior, RSA_PRIORS)
        if self.prior_fit is not None:
            if self.prior != "ets":
                raise ValueError(f"rsa prior_fit is the ETS fit that prior='ets' starts from, but prior is "
                                 f"{self.prior!r}: set prior='ets', or drop prior_fit")
            if isinstance(self.prior_fit, dict):
                object.__setattr__(self, "prior_fit", SmoothingPrior.from_dict(self.prior_fit))
            if not isinstance(self.prior_fit, SmoothingPrior):
                raise TypeError(f"rsa prior_fit must be a SmoothingPrior, got {type(self.prior_fit).__name__}")
        if not isinstance(self.per_channel, bool):
            raise TypeError(f"rsa per_channel must be True or False, got {self.per_channel!r}")
        if self.kinds is not None:
            kinds = tuple(self.kinds)
            if len(kinds) != 6 or any(isinstance(k, bool) or not isinstance(k, int) or k < 0 for k in kinds):
                raise ValueError(f"rsa kinds must be six non-negative ints (k1..k6), got {self.kinds!r}")
            if sum(kinds) == 0:
                raise ValueError("rsa kinds must give at least one REM head")
            object.__setattr__(self, "kinds", kinds)
            if any(u > k for u, k in zip(self.undilated, kinds[:3])):
                raise ValueError(f"rsa undilated {self.undilated} counts more plain heads than kinds {kinds} has")
        if self.dilation is not None:
            many = isinstance(self.dilation, (tuple, list))
            values = tuple(self.dilation) if many else (self.dilation,)
            if any(isinstance(d, bool) or not isinstance(d, numbers.Integral) or d < 1 for d in values):
                raise ValueError(f"rsa dilation must be positive ints, got {self.dilation!r}")
            object.__setattr__(self, "dilation", tuple(int(d) for d in values) if many else int(self.dilation))
            if many and self.kinds is not None and len(values) != sum(self.kinds[3:]):
                raise ValueError(f"rsa dilation needs one value per dilated head ({sum(self.kinds[3:])}), "
                                 f"got {self.dilation!r}")
        for name in ("periods", "dilated_periods"):
            periods = getattr(self, name)
            if periods is None:
                continue
            periods = (periods,) if isinstance(periods, (int, float)) else tuple(periods)
            if not periods or any(isinstance(p, bool) or not isinstance(p, (int, float)) or not p > 0 for p in periods):
                raise ValueError(f"rsa {name} must be positive cycle lengths in steps, got {getattr(self, name)!r}")
            object.__setattr__(self, name, tuple(float(p) for p in periods))
        bounds = tuple(self.gate_init) if isinstance(self.gate_init, (tuple, list)) else ()
        if not (len(bounds) == 2 and all(isinstance(b, (int, float)) for b in bounds) and bounds[0] <= bounds[1]):
            raise ValueError(f"rsa gate_init must be (low, high) with low <= high, got {self.gate_init!r}")
        object.__setattr__(self, "gate_init", (float(bounds[0]), float(bounds[1])))

    def unresolved(self) -> list[str]:
        names = ("kinds", "dilation", "periods", "dilated_periods") + (("prior_fit",) if self.prior == "ets" else ())
        return [f"rsa.{name}" for name in names if getattr(self, name) is None]

    def resolved(self, n_heads: int, data: DataFacts, steps_per_token: int = 1,
                 max_lag: int | None = None) -> RSAConfig:
        """Fill every ``None`` field from the layer's ``n_heads`` and the data (see the class);
        ``data`` in token units, a token ``steps_per_token`` steps (the ETS prior is mapped onto
        that grid). ``prior_fit`` is not filled here (it needs the data themselves: ``fit`` does
        it, :func:`tsrec.smoothing_prior.with_smoothing_prior`). With ``max_lag`` (the longest lag
        in tokens the attention sees; else the config's own), dilated heads with a longer dilation
        become plain heads of their kind (:meth:`within`)."""
        config = self._filled(n_heads, data, steps_per_token)
        limit = self.max_lag if max_lag is None else check_int("rsa max_lag", max_lag, 0)
        return config if limit is None else config.within(limit)

    def _filled(self, n_heads: int, data: DataFacts, steps_per_token: int) -> RSAConfig:
        """The ``None`` fields filled (:meth:`resolved` without the dilation limit)."""
        prior = None if self.prior_fit is None else self.prior_fit.in_token_units(steps_per_token)
        config = dataclasses.replace(self, prior_fit=prior)
        if self.prior == "ets" and self.kinds is None:
            config = dataclasses.replace(config, kinds=prior_rem_kinds(n_heads))
        if prior is not None and prior.season > 1:  # the prior's season, in tokens, before the data's cycles
            season = prior.season_tokens
            config = dataclasses.replace(
                config, dilation=self.dilation if self.dilation is not None else max(1, round(season)),
                periods=self.periods if self.periods is not None else (season, season / 2.0))
        return config._resolved_from_data(n_heads, data)

    def _resolved_from_data(self, n_heads: int, data: DataFacts) -> RSAConfig:
        found = data.periods
        cycle = found[0] if found else float(data.season)
        dilation = self.dilation if self.dilation is not None else max(1, round(cycle))
        longest = max(dilation) if isinstance(dilation, tuple) else dilation
        longer = tuple(p / longest for p in found if p / longest >= 2.0)
        default_dilated = (7.0, 3.5) if data.sub_daily else (_PAPER_PERIOD,)
        return dataclasses.replace(
            self,
            kinds=self.kinds if self.kinds is not None else default_rem_kinds(n_heads),
            dilation=dilation,
            periods=self.periods if self.periods is not None else (*(found or (cycle,)), cycle / 2.0),
            dilated_periods=self.dilated_periods if self.dilated_periods is not None else (longer or default_dilated),
        )

    def within(self, max_lag: int) -> RSAConfig:
        """This (resolved) config for attentions that see lags up to ``max_lag`` tokens, recorded
        in ``max_lag``: every dilated head whose dilation is longer becomes a plain head of the
        same kind (appended to its kind's plain heads, counted in ``undilated``); the others keep
        their dilation (a per-head ``dilation`` keeps theirs, in order). Where none stays dilated,
        ``dilation`` keeps the value that was too long (the longest, of a per-head one), as the
        record of what ``undilated`` replaced. Idempotent."""
        if self.kinds is None or self.dilation is None:
            raise ValueError(f"rsa within(max_lag) needs kinds and dilation: resolve them first ({self.unresolved()})")
        max_lag = check_int("rsa max_lag", max_lag, 0)
        dilated = self.kinds[3:]
        per_head = self.dilation if isinstance(self.dilation, tuple) else (self.dilation,) * sum(dilated)
        starts = (0, dilated[0], dilated[0] + dilated[1])
        groups = [per_head[start:start + count] for start, count in zip(starts, dilated)]  # regular, cos, sin
        dead = tuple(sum(d > max_lag for d in group) for group in groups)
        if not any(dead):
            return dataclasses.replace(self, max_lag=max_lag)
        kept = tuple(d for group in groups for d in group if d <= max_lag)
        if isinstance(self.dilation, tuple):
            dilation: int | tuple[int, ...] = kept if kept else max(per_head)
        else:
            dilation = self.dilation
        kinds = tuple(k + n for k, n in zip(self.kinds[:3], dead)) + tuple(k - n for k, n in zip(dilated, dead))
        return dataclasses.replace(self, kinds=kinds, dilation=dilation, max_lag=max_lag,
                                   undilated=tuple(u + n for u, n in zip(self.undilated, dead)))

    def undilated_heads(self) -> tuple[bool, ...]:
        """Per head, in the REM's head order (``kinds``): whether it was a dilated head that
        resolution made plain (:attr:`undilated`, the last heads of each plain kind)."""
        if self.kinds is None:
            raise ValueError("rsa undilated_heads() needs kinds: resolve them first")
        flags: list[bool] = []
        for count, made_plain in zip(self.kinds[:3], self.undilated):
            flags += [False] * (count - made_plain) + [True] * made_plain
        return tuple(flags) + (False,) * sum(self.kinds[3:])

    @property
    def n_heads(self) -> int:
        """REM heads (the sum of ``kinds``); only once ``kinds`` is set."""
        if self.kinds is None:
            raise ValueError("rsa.kinds is not set yet: resolve the settings from the data first")
        return sum(self.kinds)


def static_embedding_dim(cardinality: int) -> int:
    """Width of the learned embedding of a categorical static covariate with ``cardinality``
    categories: GluonTS's rule, ``min(50, (cardinality + 1) // 2)``."""
    return min(50, (check_int("cardinality", cardinality, 1) + 1) // 2)


@dataclass(frozen=True)
class CovariateConfig(Config):
    """Which columns of the frame are covariates: inputs the model reads, never forecasts.

    Each field is a tuple of column names (a single name is taken as a one-name tuple). GluonTS
    calls them ``past_feat_dynamic_real``, ``feat_dynamic_real`` and ``feat_static_real`` /
    ``feat_static_cat``; tsrec takes the names below only.

    Attributes:
        past: dynamic covariates known only up to the forecast origin (e.g. measured temperature).
        future: dynamic covariates known for the forecast horizon too (a temperature forecast,
            holidays, prices); ``predict`` needs their values for every forecast step.
        static: one value per series (constant within each id of a long frame): numeric columns
            are scaled, any other dtype is categorical and embedded.
    """

    past: tuple[str, ...] = ()
    future: tuple[str, ...] = ()
    static: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        seen: dict[str, str] = {}
        for kind in ("past", "future", "static"):
            names = getattr(self, kind)
            names = () if names is None else (names,) if isinstance(names, str) else tuple(names)
            for name in names:
                if not isinstance(name, str):
                    raise TypeError(f"{kind} covariate names must be column names (str), got {name!r}")
                if name in seen:
                    raise ValueError(f"column {name!r} is named twice as a covariate ({seen[name]} and {kind}); "
                                     "name each covariate once")
                seen[name] = kind
            object.__setattr__(self, kind, names)

    @property
    def dynamic(self) -> tuple[str, ...]:
        """The dynamic covariates in feature order: the past ones, then the future ones."""
        return self.past + self.future

    @property
    def columns(self) -> tuple[str, ...]:
        """Every covariate column."""
        return self.dynamic + self.static


#: How far outside a series' training quartiles a value must lie, in interquartile ranges, to be
#: *far* from its training distribution (Tukey's fences, widened from his 3): what the robust
#: scaler treats as missing (:mod:`tsrec.data.scaling`), ``fit`` and ``predict`` warn about, and
#: RevIN treats as missing within a window (:class:`tsrec.nn.heads.RevIN`). 20 keeps every clean column of the ETT, WTH and
#: weather files inside (at 10, ETTh2's LULL, whose quartiles are -1.8 and 0, loses a regime of
#: 761 hours down to -31) and still catches weather.csv's -9999 placeholders in "wv" and "OT"
#: (over 500 IQRs out); a typo of 1e9 in a series around 5 is about 1e9 IQRs out.
FAR_IQRS = 20.0

#: The fewest observed values that make a *level shift*: a run of far values (beyond the same fence)
#: up to the last observed step of a series' training part, of the data forecast from, or of a
#: network's window. Such a run is data, not outliers: the scaler and RevIN keep it
#: (:func:`tsrec.data.scaling.level_shifts`, :class:`tsrec.nn.heads.RevIN`). Fewer (one or two far
#: values at the end: a typo?) stay far. 3 is the shortest run a typo is unlikely to make.
SHIFT_STEPS = 3

#: How many far values an :class:`~tsrec.data.scaling.OutlierWarning` names (it counts them all).
FAR_EXAMPLES = 5

FAR_VALUES = ("auto", "missing", "keep")
LEADING_ZEROS = ("missing", "keep")

GAP_POLICIES = ("raise", "warn")
MISSING_CONTEXT_POLICIES = ("nan", "raise")
SCALINGS = ("robust", "standard")


@dataclass(frozen=True)
class WindowConfig(Config):
    """The forecast window and the validation part.

    Attributes:
        prediction_length: steps to forecast (``H``).
        context_length: past steps the model reads. None: ``2 * prediction_length``.
        freq: pandas frequency of the data. None: inferred from the timestamps at every ``fit``.
        val_windows: validation forecast origins taken from the end of each series of the fit
            frame. None: those whose targets are its last 10% of steps (at least one window;
            ``tsrec.data.split.default_val_windows``); 0 trains without validation, early
            stopping or weight restore.
        gaps: ``"raise"`` (default) or ``"warn"``: what a frame whose frequency leaves most of its
            grid empty, or with a gap far longer than its usual spacing, gets
            (:func:`tsrec.data.canonicalize`); the error and the warning name the first gap.
        missing_context: ``"nan"`` (default) or ``"raise"``: a series or column with no observed
            value in a window's context gets NaN for its forecast and a warning naming it, or
            an error. A forecast is only ever made from observed data.
        scaling: how each series is scaled (:mod:`tsrec.data.scaling`). ``"robust"`` (default):
            values beyond robust fences (the training quartiles widened by ``FAR_IQRS``
            interquartile ranges) are treated as missing in training: left out of the mean and
            standard deviation and of the windows the model is fitted on, so that one extreme
            value cannot set a series' scale; on data without such values it is standard scaling
            exactly. ``"standard"``: mean and standard deviation of the training values as they
            are, all of them trained on (the long-horizon benchmarks' protocol).
            Either way ``fit`` and ``predict`` warn (:class:`~tsrec.data.scaling.OutlierWarning`)
            naming the series and timestamps of values beyond the fences.
        far_values: ``"auto"`` (default), ``"missing"`` or ``"keep"``: what values far from their
            series (beyond the fences above) or from their window (:class:`~tsrec.nn.heads.RevIN`)
            are. ``"missing"``: isolated far values (a typo, a placeholder) are missing, as
            ``scaling`` says, and the networks' instance normalisation reads a value far from its
            window as missing; a *level shift* (at least ``SHIFT_STEPS`` far values beyond one fence
            up to the last observed step) is data: kept by the scaler and the training windows, and
            a window ending in one is read at its new level. ``"keep"``: every value is data:
            the scaler's moments, the training windows and the instance normalisation read far
            values as they are (the scaler is then standard whatever ``scaling`` says). The fix
            for real far values that are not a level shift (spikes that happen). ``"auto"``:
            ``"keep"`` where the far values fall on the steps a dynamic covariate marks more often
            than chance (events it explains: a promotion, a holiday; :mod:`tsrec.data.events`),
            else ``"missing"``; resolved at ``fit`` on the data, with a warning when it keeps them.
        leading_zeros: ``"missing"`` (default) or ``"keep"``: what the zeros a series begins with
            are where they look like a product not launched yet, given as zeros (at least
            ``prediction_length`` of them, more than twice its longest later run of zeros, and a
            nonzero value after them: :func:`tsrec.data.launches.leading_zeros`; an intermittent
            series, whose zeros come in runs throughout, is never named). ``"missing"``: those steps
            are missing, as if the frame gave NaN there, for every model, its validation and its
            calibration, and each forecast reads the zeros before a series' first observed step at
            ``fit`` as missing too; ``fit`` warns naming the series. ``"keep"``: they are data (a
            sensor or a price that starts at zero), and ``fit`` warns naming them for ``auto`` and the
            networks, which forecast such a series from the zeros in its context.
        nonnegative: ``True`` (default): a series (a wide frame's column) whose observed training
            values are all at least 0 (counts, sales, load, prices) is never forecast below 0: its
            forecasts, quantiles, samples and interval bands are raised to 0 where they fall below
            (:attr:`StandardScaler.floor <tsrec.data.scaling.StandardScaler>`; ``predict``'s frame
            says how many values it raised, ``attrs["floored"]``). ``False``: forecasts as the model
            gives them.
    """

    prediction_length: int
    context_length: int | None = None
    freq: str | None = None
    val_windows: int | None = None
    gaps: str = "raise"
    missing_context: str = "nan"
    scaling: str = "robust"
    far_values: str = "auto"
    leading_zeros: str = "missing"
    nonnegative: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "prediction_length", check_int("prediction_length", self.prediction_length, 1))
        object.__setattr__(self, "context_length", check_optional_int("context_length", self.context_length, 1))
        object.__setattr__(self, "val_windows", check_optional_int("val_windows", self.val_windows, 0))
        if self.freq is not None and not isinstance(self.freq, str):
            raise TypeError(f"freq must be a pandas frequency string such as 'h', got {self.freq!r}")
        check_choice("gaps", self.gaps, GAP_POLICIES)
        check_choice("missing_context", self.missing_context, MISSING_CONTEXT_POLICIES)
        check_choice("scaling", self.scaling, SCALINGS)
        check_choice("far_values", self.far_values, FAR_VALUES)
        check_choice("leading_zeros", self.leading_zeros, LEADING_ZEROS)
        if not isinstance(self.nonnegative, bool):
            raise TypeError(f"nonnegative must be True or False, got {self.nonnegative!r}")

    @property
    def robust(self) -> bool:
        """Whether the scaler leaves isolated far values out (``scaling="robust"``, and
        ``far_values`` other than ``"keep"``: ``"auto"`` unresolved reads as ``"missing"``)."""
        return self.scaling == "robust" and self.far_values != "keep"

    @property
    def context(self) -> int:
        """``context_length``, or its default ``2 * prediction_length``."""
        return self.context_length if self.context_length is not None else 2 * self.prediction_length


LR_SCHEDULES = ("constant", "cosine", "halve")
LOSSES = ("mse", "mae")


@dataclass(frozen=True)
class TrainerConfig(Config):
    """How a fit runs, beside what it trains: saved with the model, so a loaded model trains and
    forecasts on the same devices and writes to the same folder.

    trainer_kwargs: passed to ``lightning.pytorch.Trainer`` unchanged, over tsrec's defaults; the
        values JSON cannot hold (callbacks, loggers and other objects) are not saved
        (:meth:`to_dict`), so pass them again to a loaded model
        (``Forecaster.load(path, trainer_kwargs=...)``).
    output_dir: where training writes its CSV logs and per-epoch checkpoints (None: a temporary
        folder, removed when ``fit`` returns).
    threads: torch's intra-op threads while a network trains (None: chosen for the work, see
        :func:`tsrec.training.threads.training_threads`: one for a small network, as every default
        network is, torch's own setting otherwise).
    """

    trainer_kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    output_dir: str | None = None
    threads: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.trainer_kwargs, dict):
            raise TypeError(f"trainer_kwargs must be a dict of lightning.pytorch.Trainer arguments, "
                            f"got {type(self.trainer_kwargs).__name__}")
        if self.threads is not None and (isinstance(self.threads, bool) or not isinstance(self.threads, int)
                                         or self.threads < 1):
            raise ValueError(f"threads must be a positive int (torch's intra-op threads while training) or None "
                             f"(chosen for the network), got {self.threads!r}")

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: the ``trainer_kwargs`` whose values are JSON values (None, booleans,
        numbers, text, and lists and dicts of them), and ``output_dir``."""
        return {"trainer_kwargs": {key: _jsonable(value) for key, value in self.trainer_kwargs.items()
                                   if isinstance(key, str) and _is_json(value)},
                "output_dir": self.output_dir, "threads": self.threads}


def _is_json(value: Any) -> bool:
    """Whether ``value`` is a JSON value (what :meth:`TrainerConfig.to_dict` keeps)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_is_json(v) for v in value)
    return isinstance(value, dict) and all(isinstance(k, str) and _is_json(v) for k, v in value.items())


@dataclass(frozen=True)
class TrainingConfig(Config):
    """How a model is trained.

    **The budget.** By default (``max_epochs`` and ``max_steps`` both None) training runs for a
    number of optimizer steps scaled to the data, :func:`tsrec.training.budget.auto_steps`:
    ``BUDGET_EPOCHS`` passes over the training windows, at least ``MIN_STEPS`` and at most
    ``MAX_STEPS`` steps, validated ``VAL_CHECKS`` times over the budget, so that a small data set
    gets many passes and a large one a bounded cost. ``max_steps`` sets the step budget,
    ``max_epochs`` an epoch budget validated once per epoch (the benchmark protocols' form; with
    both, training ends at whichever comes first). ``time_limit`` bounds the wall time of ``fit``.
    The resolved budget is recorded in ``Forecaster.resolved_settings.training`` and
    ``Forecaster.training_summary``.

    **Refit on all the history.** With ``refit_full`` (the default) and validation taken from the
    end of the fit frame, the run on the training part only picks the budget (the step of the
    lowest validation loss), then a fresh model is trained with the same seed on every window of
    the frame, validation part included, for that many passes (the steps scaled by the ratio of
    windows), so that the last observations shape the forecast. It costs a second run of at most
    the picked length. No refit without validation or with a separate ``val_df``.

    The learning rate is the one recipe the long-horizon benchmark trains every model with, under
    which PatchTST and RSA-PatchTST reach or beat the published averages (Adam at 1e-3 held
    constant, REM scalars at 10x); a model may register its own defaults over it (the
    encoder-decoder family trains at Informer's 1e-4, decayed by a cosine over the budget;
    ``tsrec.models.model_spec(name).training``), and the user's settings override both. The RSA
    paper's recipe is :data:`tsrec.models.presets.PAPER_TRAINING`.

    Attributes:
        max_epochs: an epoch budget, validated once per epoch; None: the step budget.
        max_steps: a budget in optimizer steps; None with ``max_epochs`` None: scaled to the
            number of training windows (see above).
        time_limit: seconds ``fit`` may train for in all (selection run and refit); training ends
            after the step that crosses it, keeping the best weights so far. None: no limit.
        refit_full: retrain on all the history after validation has picked the budget (see above).
        batch_size: windows per step (the last partial batch is kept).
        learning_rate: Adam learning rate of the backbone.
        lr_schedule: ``"constant"`` keeps ``learning_rate``; ``"cosine"`` decays it by a half
            cosine over the budget to ``COSINE_FLOOR`` of its start; ``"halve"`` is Informer's
            schedule (epochs 1 and 2 at ``learning_rate``, then halved every epoch: for short epoch
            budgets only, as it is near zero after a dozen epochs).
        rsa_lr_multiplier: REM scalars and gates train in their own Adam group at
            ``learning_rate * rsa_lr_multiplier`` (at the backbone's rate they barely move; see
            RSA_SPEC section 4.6), following the same schedule.
        covariate_lr_multiplier: the covariate path (covariate head and static embeddings,
            :mod:`tsrec.nn.covariates`) trains in its own Adam group at ``learning_rate *
            covariate_lr_multiplier``, following the same schedule: its weights start random and
            must reach the covariates' effect, and Adam moves a weight by about the learning rate
            per step, too slowly at the backbone's rate for the few steps of a small data set.
        patience: early stopping after this many validation checks without a new lowest
            *smoothed* validation loss (an exponential moving average over the checks, so that one
            lucky check does not end training); the weights of the check with the lowest validation
            loss are restored at the end. ``None`` disables early stopping.
        loss: ``"mse"`` or ``"mae"``, over observed future values only.
        shuffle: shuffle training windows (the RSA paper's protocol uses a sequential sampler).
        gradient_clip_val: clip gradient norm to this value (None: no clipping).
        precision: passed to Lightning (``"32-true"``, ``"bf16-mixed"`` on GPU, ...).
        compile: run the network through ``torch.compile`` in the training and validation steps
            (predictions run it uncompiled): faster steps on a GPU after a one-off compilation of
            each step's graph. The weights and their names stay the network's own, so a model
            trained with it saves, loads and predicts as one trained without it.
        deterministic: ask torch for deterministic algorithms.
        seed: seeds Python, NumPy and torch (and the workers) before the model is built.
        num_workers: DataLoader workers.
    """

    max_epochs: int | None = None
    max_steps: int | None = None
    time_limit: float | None = None
    refit_full: bool = True
    batch_size: int = 32
    learning_rate: float = 1e-3
    lr_schedule: str = "constant"
    rsa_lr_multiplier: float = 10.0
    covariate_lr_multiplier: float = 10.0
    patience: int | None = 5
    loss: str = "mse"
    shuffle: bool = True
    gradient_clip_val: float | None = None
    precision: str = "32-true"
    compile: bool = False
    deterministic: bool = False
    seed: int = 0
    num_workers: int = 0

    def __post_init__(self) -> None:
        for name, minimum in (("batch_size", 1), ("seed", 0), ("num_workers", 0)):
            object.__setattr__(self, name, check_int(name, getattr(self, name), minimum))
        for name in ("max_epochs", "max_steps", "patience"):
            object.__setattr__(self, name, check_optional_int(name, getattr(self, name), 1))
        for name in ("learning_rate", "rsa_lr_multiplier", "covariate_lr_multiplier"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
                raise ValueError(f"{name} must be a positive number, got {value!r}")
        if self.time_limit is not None and (isinstance(self.time_limit, bool) or not isinstance(
                self.time_limit, (int, float)) or not 0 < self.time_limit < math.inf):
            raise ValueError(f"time_limit must be a positive number of seconds or None, got {self.time_limit!r}")
        if not isinstance(self.refit_full, bool):
            raise TypeError(f"refit_full must be True or False, got {self.refit_full!r}")
        if self.gradient_clip_val is not None and not self.gradient_clip_val > 0:
            raise ValueError(f"gradient_clip_val must be > 0 or None, got {self.gradient_clip_val!r}")
        check_choice("lr_schedule", self.lr_schedule, LR_SCHEDULES)
        check_choice("loss", self.loss, LOSSES)


#: How conformal calibration scores a residual (:class:`ConformalConfig`).
CONFORMAL_SCORES = ("scaled", "absolute")
#: How conformal calibration pools the scores of the horizon steps (:class:`ConformalConfig`).
CONFORMAL_POOLING = ("steps", "none")
#: Whether the conformal scores learn from the data ``predict`` and a backtest see after the fit.
CONFORMAL_UPDATES = ("rolling", "off")


@dataclass(frozen=True)
class ConformalConfig(Config):
    """Split-conformal calibration of the intervals of ``predict(levels=...)`` (:mod:`tsrec.conformal`).

    At ``fit``, a copy of the model fitted on the data before the last ``windows + H - 1`` steps of
    every series forecasts ``windows`` rolling origins there; the absolute residuals of each
    horizon step (divided by their series' scale, ``scores``), pooled over series, channels and
    windows, give the band of that step.

    Attributes:
        windows: calibration origins per series (``conformal_windows``). None: calibrated only for
            ``auto`` (whose members' validation runs already stand fitted before its validation
            windows, so it costs forecasts only), with :func:`tsrec.conformal.default_windows`
            origins; 0: never. An integer calibrates any model on that many origins (for a network,
            at the cost of one more training run on the shortened data; for a statistical model,
            one statsforecast fit per series and origin).
        scores: ``"scaled"`` (the default): residuals divided by each series' and channel's scale
            (its mean absolute one-step change over the fit data), so that series of different
            sizes share one calibration and each gets a band of its own width; ``"absolute"``:
            residuals in the data's units, one band width for every series.
        pooling: ``"steps"``: each step's scores are divided by the step's profile (their mean) and
            pooled over the steps, so that every step's band reads the tail of all of them, at the
            width of its own profile (:func:`tsrec.conformal.calibrate`); ``"none"``: each step reads
            its own scores only. None: ``"steps"`` for ``auto`` (and wherever ``update`` is on),
            else ``"none"``.
        update: ``"rolling"``: ``predict`` and a backtest learn from the observations after the fit:
            the forecasts the model would have made there replace the oldest scores of a rolling
            window (:mod:`tsrec.conformal_update`, ``docs/intervals.md``); ``"off"``: the scores stay
            those of ``fit``. None: ``"rolling"`` for ``auto``, else ``"off"``.
    """

    windows: int | None = None
    scores: str = "scaled"
    pooling: str | None = None
    update: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "windows", check_optional_int("conformal_windows", self.windows, 0))
        check_choice("conformal_scores", self.scores, CONFORMAL_SCORES)
        if self.pooling is not None:
            check_choice("conformal_pooling", self.pooling, CONFORMAL_POOLING)
        if self.update is not None:
            check_choice("conformal_update", self.update, CONFORMAL_UPDATES)
        if self.update == "rolling" and self.pooling == "none":
            raise ValueError("conformal_update='rolling' learns from the scores of every horizon step pooled "
                             "(conformal_pooling='steps'); pass conformal_pooling='steps' (or leave it unset), or "
                             "conformal_update='off'")

    def resolved_for(self, auto: bool) -> ConformalConfig:
        """This config with ``pooling`` and ``update`` set: unset ones are ``"steps"`` and
        ``"rolling"`` for ``auto`` (``auto=True``), else ``"none"`` and ``"off"`` (every other model's
        calibration as before they existed), where ``update`` needs ``pooling``."""
        update = self.update or ("rolling" if auto else "off")
        pooling = self.pooling or ("steps" if auto or update == "rolling" else "none")
        return dataclasses.replace(self, pooling=pooling, update=update)

    def to_dict(self) -> dict[str, Any]:
        """As :meth:`Config.to_dict`, without ``pooling`` and ``update`` where unset (the files of
        settings that leave them unset read as before they existed)."""
        return {key: value for key, value in super().to_dict().items()
                if value is not None or key not in ("pooling", "update")}
