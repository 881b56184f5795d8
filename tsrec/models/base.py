"""What every forecasting network shares: a typed config, the batch contract, RevIN and channel independence."""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Self

import torch
from torch import Tensor, nn

from tsrec._checks import check_choice, check_int, check_optional_int
from tsrec.batch import ForecastBatch
from tsrec.config import FAR_IQRS, FAR_VALUES, Config, DataFacts, RSAConfig, static_embedding_dim
from tsrec.nn.covariates import CovariateHead, StaticEmbedding
from tsrec.nn.heads import RevIN
from tsrec.nn.outputs import OUTPUTS, check_levels, make_output

if TYPE_CHECKING:
    import numpy as np

DEFAULT_QUANTILE_LEVELS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)

#: What a network does with a missing tail where it does not forecast it (a network with
#: covariates, or one in an ensemble, whose other members read the window as it is).
MISSING_TAIL_AS_MEAN = ("the networks read each missing step as the series' training mean (0 in scaled units; "
                        "RevIN's statistics leave it out) and forecast the requested dates; drop the missing rows to "
                        "forecast from the last observation instead")


@dataclass(frozen=True)
class ModelConfig(Config):
    """Settings every model has.

    The shape fields come from the window settings and the data, and are ``None`` until
    :meth:`resolved` fills them (the estimator does this at ``fit``); build a network directly by
    setting them, or by resolving with a :class:`~tsrec.config.DataFacts`.

    Attributes:
        context_length: past steps the model reads (``Lc``).
        prediction_length: future steps it forecasts (``H``).
        n_channels: target variables forecast jointly (``C``).
        n_time_features: features per step the core reads (``F``): the calendar features, then the
            ``n_covariate_features`` covariate features.
        n_covariate_features: the trailing time features that come from covariates (``K``): the
            batch's dynamic and numeric static covariates, then the embeddings of the categorical
            static covariates (``static_cardinalities``), which the network appends itself.
        static_cardinalities: categories of each categorical static covariate (the batch's
            ``static_cat`` codes); each gets a learned embedding of ``static_embedding_dim`` features.
        revin: reversible instance normalisation of each input window (RevIN, Kim et al., ICLR
            2022): each context is centred and scaled by its own observed mean and standard
            deviation, and the forecast scaled back. On by default for every trainable model: the
            per-series scaler is fitted on the whole training part, so a series that drifts reaches
            the model at levels it never trained on, and the models that read raw levels then
            forecast far from the last value (DLinear and the encoder-decoder and sequence models
            were 1.4x to 24x worse than the last value on drifting unseen data without it; RevIN
            lowered DLinear's long-horizon error on most settings, benchmarks/README.md). A context
            value far from the rest of its window (more than ``FAR_IQRS`` interquartile ranges
            beyond the window's quartiles, :class:`~tsrec.nn.heads.RevIN`) is read as missing, so
            one extreme value sets neither the window's scale nor the forecast; a window that ends
            in a level shift is read at its new level (:class:`~tsrec.nn.heads.RevIN`).
        far_values: the window settings' ``far_values`` (filled from them, as the shape): with
            ``"keep"`` RevIN reads every value as it is.
        channel_independent: run the core on each channel separately (``C = 1``), sharing weights.
        output: what the network forecasts per step and channel (:mod:`tsrec.nn.outputs`):
            ``"point"`` (default), ``"normal"`` or ``"studentt"`` (a distribution, trained by
            negative log-likelihood) or ``"quantile"`` (``quantile_levels``, pinball loss).
        quantile_levels: the levels the ``"quantile"`` output forecasts (default 0.1, ..., 0.9).
    """

    context_length: int | None = None
    prediction_length: int | None = None
    n_channels: int | None = None
    n_time_features: int | None = None
    n_covariate_features: int = 0
    static_cardinalities: tuple[int, ...] = ()
    revin: bool = True
    channel_independent: bool = False
    output: str = "point"
    quantile_levels: tuple[float, ...] = DEFAULT_QUANTILE_LEVELS
    far_values: str = "missing"

    #: Fields the estimator fills from its window settings and the data; never user options there.
    SHAPE_FIELDS: ClassVar[tuple[str, ...]] = ("context_length", "prediction_length", "n_channels", "n_time_features",
                                               "n_covariate_features", "static_cardinalities", "far_values")

    def __post_init__(self) -> None:
        for name in ("context_length", "prediction_length", "n_channels"):
            object.__setattr__(self, name, check_optional_int(name, getattr(self, name), 1))
        object.__setattr__(self, "n_time_features", check_optional_int("n_time_features", self.n_time_features, 0))
        self._check_covariates()
        check_choice("output", self.output, OUTPUTS)
        check_choice("far_values", self.far_values, FAR_VALUES)
        object.__setattr__(self, "quantile_levels", check_levels("quantile_levels", self.quantile_levels))

    def _check_covariates(self) -> None:
        """The covariate features fit in the time features, and the embeddings in the covariate features."""
        object.__setattr__(self, "n_covariate_features",
                           check_int("n_covariate_features", self.n_covariate_features, 0))
        object.__setattr__(self, "static_cardinalities",
                           tuple(check_int("static cardinality", c, 1) for c in self.static_cardinalities))
        if self.n_time_features is not None and self.n_covariate_features > self.n_time_features:
            raise ValueError(f"n_covariate_features ({self.n_covariate_features}) exceeds n_time_features "
                             f"({self.n_time_features}): covariates are part of the time features")
        if self.embedding_width > self.n_covariate_features:
            raise ValueError(f"the embeddings of static_cardinalities {self.static_cardinalities} take "
                             f"{self.embedding_width} features, more than n_covariate_features "
                             f"({self.n_covariate_features})")

    @property
    def embedding_width(self) -> int:
        """Features the embeddings of the categorical static covariates take (``E``)."""
        return sum(static_embedding_dim(c) for c in self.static_cardinalities)

    def unresolved(self) -> list[str]:
        """Fields still ``None`` that the network needs (empty for a buildable config), those of an
        ``rsa`` section included."""
        rsa = getattr(self, "rsa", None)
        return [name for name in self.SHAPE_FIELDS if getattr(self, name) is None] + (rsa.unresolved() if rsa else [])

    def _check_attention(self) -> None:
        """Checks shared by attention models (fields ``d_model``, ``n_heads``, ``rsa``): the width
        splits into the heads, and :meth:`_check_rsa`."""
        if self.d_model % self.n_heads:  # type: ignore[attr-defined]
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")  # type: ignore[attr-defined]
        self._check_rsa()

    def _check_rsa(self) -> None:
        """The RSA section (fields ``rsa``, ``n_heads``; a dict becomes an ``RSAConfig``) gives
        every head one REM kind."""
        rsa = getattr(self, "rsa", None)
        if rsa is None:
            return
        rsa = RSAConfig.coerce(rsa)
        object.__setattr__(self, "rsa", rsa)
        if rsa.kinds is not None and sum(rsa.kinds) != self.n_heads:  # type: ignore[attr-defined]
            raise ValueError(f"rsa.kinds {tuple(rsa.kinds)} give {sum(rsa.kinds)} REM heads but n_heads is "
                             f"{self.n_heads}; every head needs a REM kind")  # type: ignore[attr-defined]
        if rsa.per_channel and not self.channel_independent:
            raise ValueError(f"rsa.per_channel gives each channel its own REM parameters, but {type(self).__name__} "
                             "mixes the channels in every token (channel_independent=False): set "
                             "channel_independent=True, or rsa per_channel=False")

    def resolved(self, data: DataFacts) -> Self:
        """A copy with every ``None`` data-dependent field filled from ``data`` (here the channel,
        time-feature and covariate counts; subclasses add theirs). Fields already set are kept."""
        return dataclasses.replace(
            self,
            n_channels=self.n_channels if self.n_channels is not None else data.n_channels,
            n_time_features=self.n_time_features if self.n_time_features is not None else data.n_time_features,
            n_covariate_features=self.n_covariate_features or data.n_covariate_features,
            static_cardinalities=self.static_cardinalities or data.static_cardinalities,
        )


class ForecastModel(nn.Module, abc.ABC):
    """Base of every registered network.

    ``forward(batch) -> [B, H, C]``: the named :class:`~tsrec.batch.ForecastBatch` in, the
    (scaled) forecast out. Subclasses implement :meth:`forecast` on ``core_channels`` channels;
    RevIN, channel independence and the covariate path are applied here, once for every model.

    Covariates (``config.n_covariate_features > 0``, trainable models): the embeddings of the
    categorical static covariates are appended to every step's time features, which
    :meth:`forecast` receives whole, and a :class:`~tsrec.nn.covariates.CovariateHead` on the
    covariate features adds its forecast to the core's (before RevIN is undone; one head per core
    channel, so channel-independent networks share it across channels). A network that reads time
    features thus sees the covariates twice; one that ignores them (PatchTST, DLinear) or the
    horizon's (the sequence backbones) still forecasts from them.
    """

    config_class: ClassVar[type[ModelConfig]] = ModelConfig
    trainable: ClassVar[bool] = True
    #: The network gives its RSA layers each batch row's channel (:meth:`row_channels`), so that
    #: ``rsa.per_channel`` REMs can pick their channel's parameters.
    per_channel_rsa: ClassVar[bool] = False
    #: The model is fitted on the training windows at once (``fit_windows`` of
    #: :class:`~tsrec.models.windowed.WindowFit`: a closed form, no
    #: gradient step), not trained: it reads the covariates as the networks do, but has nothing to
    #: validate, no budget and no minimum of windows (the ridge and the gradient-boosted trees,
    #: :mod:`tsrec.models.windowed`).
    fits_windows: ClassVar[bool] = False
    #: The outputs a model that is not trained can give.
    untrained_outputs: ClassVar[tuple[str, ...]] = ("point",)
    #: The model reads every series' whole history (the statistical models): its context is the
    #: longest series (or a cap), and a shorter series' window starts with unobserved steps that
    #: are not its history (:attr:`reads_whole_history`).
    whole_history: ClassVar[bool] = False
    #: The most steps a model that reads whole histories reads of each series where its cost
    #: demands a cap (None: all of them; the user's ``context_length`` caps it too).
    max_history: ClassVar[int | None] = None
    #: Forecasting from a longer history costs the model about a fit (MSTL decomposes each history
    #: again, as statsforecast's ``forward`` does), where the others carry their fit forward cheaply:
    #: auto scores it on its independent validation windows before every origin
    #: (:func:`tsrec.auto.fit_auto`).
    forecast_refits: ClassVar[bool] = False
    #: What the model does with a series whose last values are missing, said in ``predict``'s
    #: warning that names such series (None: nothing to say, as for an ensemble, whose members say it).
    missing_tail: ClassVar[str | None] = (
        "the networks forecast the missing steps from each series' last observation, prediction_length steps at a "
        "time, and the requested dates from those forecasts")

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        if not isinstance(config, self.config_class):
            raise TypeError(f"{type(self).__name__} needs a {self.config_class.__name__}, got {type(config).__name__}")
        missing = config.unresolved()
        if missing:
            raise ValueError(f"{type(self).__name__} needs {', '.join(missing)}: set them, or fill them from the data "
                             f"with config.resolved(DataFacts(season=..., n_channels=..., n_time_features=...))")
        rsa = getattr(config, "rsa", None)
        if rsa is not None and rsa.per_channel and not self.per_channel_rsa:
            raise ValueError(f"{type(self).__name__} does not give its RSA layers the channel of each row, so "
                             "rsa.per_channel is not available for it: set rsa per_channel=False, or use "
                             "patchtst / rsa_patchtst")
        self.config = config
        self.core_channels = 1 if config.channel_independent else config.n_channels
        self.revin = RevIN(config.n_channels, far_iqrs=None if config.far_values == "keep" else FAR_IQRS) \
            if config.revin else None
        if not self.trainable and config.output not in self.untrained_outputs:
            raise ValueError(f"{type(self).__name__} is not trained, so it has only a point forecast: "
                             f"use output='point', or a trainable model for output={config.output!r}")
        self.output = make_output(config.output, config.quantile_levels)
        covariates = self.trainable and config.n_covariate_features > 0
        self.static_embedding = StaticEmbedding(config.static_cardinalities) \
            if covariates and config.static_cardinalities else None
        self.covariate_head = CovariateHead(config.context_length, config.prediction_length,
                                            config.n_covariate_features, self.core_channels * self.n_params) \
            if covariates else None

    @classmethod
    def default_context(cls, prediction_length: int, season: int) -> int:
        """The ``context_length`` a Forecaster gives this model when none is set (capped at ``fit``
        by what half of the series hold, :func:`tsrec.fitting.context_for`): twice the horizon, the
        window the networks' defaults were chosen with."""
        return 2 * prediction_length

    @property
    def reads_whole_history(self) -> bool:
        """Whether this model or one of its parts (an ensemble's members) reads whole histories:
        its windows then hold the longest series' steps (:func:`tsrec.forecasting.context_read`),
        a shorter series' starting with unobserved steps, in float64."""
        return any(type(m).whole_history for m in self.modules() if isinstance(m, ForecastModel))

    def fit_series(self, values: Sequence[np.ndarray], observed: Sequence[np.ndarray],
                   like: ForecastModel | None = None) -> None:
        """Fit what a model that is not trained keeps of each fitted series, once, at ``fit``
        (:func:`tsrec.fitting.fit_state` calls it on all the history read): ``values[i]``,
        ``observed[i]`` ``[T_i, C]`` are series ``i``'s (the scaler's row ``i``, a window's
        ``series``) in the data's units. The statistical models fit their parameters here and
        apply them to each window's history in :meth:`forward` (:mod:`tsrec.models.stats`); a
        model that keeps nothing (a network, seasonal naive) does nothing (this default).
        ``like``: the same model fitted already on the first steps of these series, whose choices
        (a statistical model's variant per series) the fit may keep."""

    @classmethod
    def reads_covariates(cls) -> bool:
        """Whether the model reads the covariates given to ``fit``: the networks and the models
        fitted on windows (the statistical models read the targets alone)."""
        return cls.trainable or cls.fits_windows

    @property
    def n_params(self) -> int:
        """Numbers per step and channel the core emits (``P``: 1 for a point forecast)."""
        return self.output.n_params

    @abc.abstractmethod
    def forecast(self, past_target: Tensor, past_time_feat: Tensor, future_time_feat: Tensor) -> Tensor:
        """``[B, Lc, C']``, ``[B, Lc, F]``, ``[B, H, F]`` -> ``[B, H, C', P]`` with ``C' = core_channels``
        and ``P = n_params`` (unconstrained; :attr:`output` maps them to valid parameters)."""

    def forward(self, batch: ForecastBatch) -> Tensor:
        """``batch`` (``past_target``, ``past_time_feat``, ``future_time_feat``, optionally
        ``past_observed`` and ``static_cat``) -> the forecast ``[B, H, C]`` for a point output, else
        the output's parameters ``[B, H, C, P]`` (:mod:`tsrec.nn.outputs`), in the batch's (scaled) units."""
        x = batch["past_target"]  # [B, Lc, C]
        past_time_feat, future_time_feat = self.time_features(batch)  # [B, Lc, F], [B, H, F]
        stats = None
        if self.revin is not None:
            x, stats = self.revin.normalize(x, batch.get("past_observed"))
        size, _, channels = x.shape
        if self.config.channel_independent and channels > 1:
            x = x.transpose(1, 2).reshape(size * channels, -1, 1)  # [B*C, Lc, 1]
            past_time_feat = past_time_feat.repeat_interleave(channels, dim=0)
            future_time_feat = future_time_feat.repeat_interleave(channels, dim=0)
        y = self.forecast(x, past_time_feat, future_time_feat)  # [B', H, C', P]
        if self.covariate_head is not None:
            k = self.config.n_covariate_features
            effect = self.covariate_head(past_time_feat[..., -k:], future_time_feat[..., -k:])  # [B', H, C'*P]
            y = y + effect.unflatten(-1, (self.core_channels, self.n_params))
        if self.config.channel_independent and channels > 1:
            y = y.reshape(size, channels, *y.shape[1:]).squeeze(3).transpose(1, 2)  # [B, H, C, P]
        params = self.output.params(y)  # [B, H, C] for a point output
        if stats is not None:
            params = self.output.affine(params, *self.revin.inverse_affine(stats))
        return params

    def row_channels(self, rows: int, device: torch.device) -> Tensor:
        """The channel of each row of the batch :meth:`forecast` receives, ``[rows]`` long (for a
        channel-independent model). :meth:`forward` folds ``[B, Lc, C]`` into ``B * C`` rows with the
        channel fastest (``x.transpose(1, 2).reshape(B * C, Lc, 1)``): row ``r`` holds channel ``r % C``."""
        channels = self.config.n_channels
        if rows % channels:
            raise ValueError(f"{rows} rows are not whole windows of {channels} channels; pass forecast() the batch "
                             "forward() folded")
        return torch.arange(rows, device=device) % channels

    def time_features(self, batch: ForecastBatch) -> tuple[Tensor, Tensor]:
        """The batch's ``past_time_feat`` ``[B, Lc, F - E]`` and ``future_time_feat`` ``[B, H, F - E]``
        with the embeddings ``[B, E]`` of its categorical static covariates (``static_cat``
        ``[B, Kc]``) appended to every step: ``[B, Lc, F]``, ``[B, H, F]``."""
        past, future = batch["past_time_feat"], batch["future_time_feat"]
        if self.static_embedding is None:
            return past, future
        if "static_cat" not in batch:
            raise ValueError(f"{type(self).__name__} embeds {len(self.config.static_cardinalities)} categorical "
                             "static covariates: the batch needs their codes as static_cat [B, Kc]")
        embedded = self.static_embedding(batch["static_cat"])[:, None]  # [B, 1, E]
        return (torch.cat([past, embedded.expand(-1, past.shape[1], -1)], dim=-1),
                torch.cat([future, embedded.expand(-1, future.shape[1], -1)], dim=-1))

    def rsa_layers(self) -> list[tuple[str, int, nn.Module]]:
        """``(attention name, layer index, AttentionLayer)`` for every layer with RSA (none by default)."""
        return []

    @property
    def steps_per_token(self) -> int:
        """How many time steps one attention token spans (1: one token per step; PatchTST: its
        stride). REM lags, dilations and periods are counted in tokens; multiply by this to get steps."""
        return 1


def zeros_like_future(past_target: Tensor, prediction_length: int) -> Tensor:
    """``[B, H, C]`` zeros with the dtype and device of ``past_target``."""
    return torch.zeros(past_target.shape[0], prediction_length, past_target.shape[2],
                       dtype=past_target.dtype, device=past_target.device)


def forecast_from_data(model: ForecastModel, batch: ForecastBatch) -> Tensor:
    """``model``'s scaled forecast of ``batch`` (``[B, H, C]``, or ``[B, H, C, P]``), NaN for every
    channel of a window whose context holds no observed value: a forecast is only ever made from data
    (what ``predict_step`` and :func:`~tsrec.training.predict_batches` return)."""
    out = model(batch)
    observed = batch.get("past_observed")
    if observed is None:
        return out
    blind = observed.sum(1) == 0  # [B, C]
    return out.masked_fill(blind.view(blind.shape[0], 1, *blind.shape[1:], *(1,) * (out.dim() - 3)), float("nan"))
