"""Models by name: ``list_models()``, ``model_config(name, **options)``, ``build_model(name, ...)``."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from tsrec.config import Config, DataFacts, RSAConfig, TrainingConfig
from tsrec.models.base import ForecastModel, ModelConfig
from tsrec.models.dlinear import DLinear
from tsrec.models.intermittent import ADIDA, IMAPA, TSB, Croston
from tsrec.models.ensemble import AUTO, Ensemble, EnsembleConfig
from tsrec.models.gbm import GradientBoosting
from tsrec.models.naive import Drift, SeasonalNaive
from tsrec.models.patchtst import PatchTST
from tsrec.models.relevancy import RelevancyRNN
from tsrec.models.ridge import LagRidge
from tsrec.models.srupp import SRUpp
from tsrec.models.starsaber import StarSaber
from tsrec.models.stats import ARIMA, CES, ETS, MSTL, DynamicTheta, Theta
from tsrec.models.transformer import EncoderDecoderForecaster


@dataclass(frozen=True)
class ModelSpec:
    """A registered model: its network class, its preset config fields (``defaults``), and the
    training settings it trains best with where they differ from ``TrainingConfig``'s
    (``training``; the user's settings always win)."""

    model_class: type[ForecastModel]
    defaults: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    training: dict[str, Any] = field(default_factory=dict)


_REGISTRY: dict[str, ModelSpec] = {}


def register(name: str, model_class: type[ForecastModel], description: str = "", *,
             training: dict[str, Any] | None = None, **defaults: Any) -> None:
    """Register ``model_class`` under ``name`` with preset config ``defaults`` and, where the model
    trains best otherwise, its own ``training`` defaults (``TrainingConfig`` fields)."""
    if name in _REGISTRY:
        raise ValueError(f"a model named {name!r} is already registered")
    unknown = sorted(set(training or {}) - {f.name for f in dataclasses.fields(TrainingConfig)})
    if unknown:
        raise TypeError(f"training defaults {unknown} are not TrainingConfig fields")
    _REGISTRY[name] = ModelSpec(model_class, dict(defaults), description, dict(training or {}))


def list_models() -> list[str]:
    """Names accepted by :func:`build_model` and ``Forecaster``."""
    return sorted(_REGISTRY)


def model_spec(name: str) -> ModelSpec:
    if name not in _REGISTRY:
        raise ValueError(f"unknown model {name!r}; known models: {', '.join(list_models())}")
    return _REGISTRY[name]


def model_config(name: str, **options: Any) -> ModelConfig:
    """The typed config of model ``name``: its preset, overridden by ``options``.

    Nested settings (``rsa``) may be given as their config object, which replaces the preset's, or
    as a dict of fields, which refines the preset's (``rsa_patchtst``'s bidirectional REMs stay).
    Data-dependent fields left out stay ``None`` until ``config.resolved(data)``.
    """
    spec = model_spec(name)
    config_class = spec.model_class.config_class
    known = [f.name for f in dataclasses.fields(config_class)]
    unknown = sorted(set(options) - set(known), key=str)
    if unknown:
        raise TypeError(f"model {name!r} has no option(s) {unknown}; its options are: {', '.join(known)}")
    merged = dict(spec.defaults)
    for key, value in options.items():
        preset = merged.get(key)
        # A dict refines the preset's nested settings; a config object replaces them whole.
        merged[key] = preset.from_dict({**dataclasses.asdict(preset), **value}) \
            if isinstance(value, dict) and isinstance(preset, Config) else value
    return config_class(**merged)


def build_model(name: str, config: ModelConfig | None = None, *, data: DataFacts | None = None,
                **options: Any) -> ForecastModel:
    """Build model ``name`` from ``config`` (or from its preset and ``options``); with ``data``,
    data-dependent fields left ``None`` are filled first (``config.resolved(data)``)."""
    spec = model_spec(name)
    if config is not None and options:
        raise TypeError("pass either a config or options, not both")
    config = config if config is not None else model_config(name, **options)
    config = config if data is None else config.resolved(data)
    if isinstance(config, EnsembleConfig):
        return Ensemble(config, [build_model(member, model_spec(member).model_class.config_class.from_dict(dict(c)))
                                 for member, c in zip(config.members, config.member_configs)])
    return spec.model_class(config)


# The encoder-decoder family trains at its reference rate (Informer's code and Time-Series-Library:
# Adam at 1e-4), its REM scalars at 100x that (RSA_SPEC 4.6); the other models at TrainingConfig's
# defaults (1e-3 held constant, REM scalars at 10x), the long-horizon benchmark's recipe
# (benchmarks/README.md). Both put the REM scalars at 1e-2. Informer's own schedule halves the rate
# every epoch after the second, which leaves 1/256 of it by epoch 10 of a small data set's many
# short epochs; by default the family decays it by a half cosine over the step budget instead (to a
# tenth), and the RSA paper's recipe keeps the halving (tsrec.models.presets.PAPER_TRAINING).
ENCODER_DECODER_TRAINING = dict(learning_rate=1e-4, lr_schedule="cosine", rsa_lr_multiplier=100.0)
for _attention, _base in (("prob", "informer"), ("logsparse", "logsparse"), ("full", "transformer")):
    register(_base, EncoderDecoderForecaster, f"{_base} encoder-decoder ({_attention} attention)",
             training=ENCODER_DECODER_TRAINING, attention=_attention)
    register(f"rsa_{_base}", EncoderDecoderForecaster, f"{_base} with RSA in every attention",
             training=ENCODER_DECODER_TRAINING, attention=_attention, rsa=RSAConfig())
register("dlinear", DLinear, "DLinear: moving-average decomposition + two linear maps")
register("seasonal_naive", SeasonalNaive, "repeat the last season")
register("naive", SeasonalNaive, "repeat the last value", season_length=1)
register("drift", Drift, "the random walk with drift: the line through each series' first and last values, extended")
# statsforecast's automatic models, fitted on every series' whole history with the calendar's
# season, all series in one call (the optional extra tsrec[stats]; docs/models.md)
register("ets", ETS, "statsforecast's AutoETS: exponential smoothing chosen by AICc, on the whole history")
register("theta", Theta, "statsforecast's AutoTheta: the Theta method's best variant, on the whole history")
register("ces", CES, "statsforecast's AutoCES: complex exponential smoothing chosen by AIC, on the whole history")
register("dynamic_theta", DynamicTheta, "statsforecast's DynamicOptimizedTheta: the Theta method with optimised, "
         "time-varying coefficients, on the whole history")
register("arima", ARIMA, "statsforecast's AutoARIMA: stepwise seasonal ARIMA search on the last 1,000 steps; "
         "slow (seconds per series), so auto leaves it out unless named")
register("mstl", MSTL, "statsforecast's MSTL: the calendar's several seasons (a day and a week for sub-daily "
         "data) by STL, the trend by AutoETS, on the whole history")
# statsforecast's intermittent-demand models (series of many zeros; auto tries them where the data are
# intermittent: tsrec.models.intermittent.intermittency)
register("croston", Croston, "statsforecast's CrostonOptimized: smoothed nonzero demands over smoothed intervals "
         "between them, for intermittent demand")
register("adida", ADIDA, "statsforecast's ADIDA: smoothed sums over blocks of the mean demand interval, spread "
         "over the block, for intermittent demand")
register("imapa", IMAPA, "statsforecast's IMAPA: ADIDA's forecasts at every block length up to the mean demand "
         "interval, averaged, for intermittent demand")
register("tsb", TSB, "statsforecast's TSB: smoothed nonzero demands times the smoothed probability of a demand "
         "(alpha_d, alpha_p set, 0.2 each), for intermittent demand")
register("ridge", LagRidge, "a global ridge regression on each window's lags and known-future features, every step "
         "of the horizon at once, fitted in closed form (its penalty by blocked cross-validation)")
register("gbm", GradientBoosting, "global gradient-boosted trees (scikit-learn's HistGradientBoostingRegressor) on "
         "each window's lags, seasonal lags, rolling means, calendar, covariates and static codes")
register("patchtst", PatchTST, "PatchTST: channel-independent patches, RevIN, Transformer encoder")
# Bidirectional REMs: every patch lies in the forecast's past, so a causal REM would only hide
# from each patch its later neighbours, which the encoder's full attention sees anyway.
register("rsa_patchtst", PatchTST, "PatchTST with RSA over patch lags", rsa=RSAConfig(encoder_masked=False))
register("starsaber", StarSaber, "StarSaber: fixed-point iterations of a bidirectional RNN on a learned relation graph")
# Bidirectional REMs, as the relation graph looks both ways: the masked REM mixes into its past
# half and its mirror into its future half (causal=True needs rsa={"encoder_masked": True}).
register("rsa_starsaber", StarSaber, "StarSaber with its relation graph mixed with REMs",
         rsa=RSAConfig(encoder_masked=False))
register("relevancy_rnn", RelevancyRNN, "RNN attending over a buffer of its last states and a relevant set of "
         "older ones kept for the attention they drew (Kerg et al. 2020)")
register(AUTO, Ensemble, "the best of its candidates, or a validation-weighted ensemble of them (tsrec.auto)")
register("srupp", SRUpp, "SRU++: causal attention on a factorised projection feeding SRU's elementwise recurrence")
register("rsa_srupp", SRUpp, "SRU++ with causal REMs mixed into every attention", rsa=RSAConfig())
