"""Data layer: DataFrame canonicalisation, time-based splits, scaling, time features, windows.

Flow: ``canonicalize(df)`` -> ``Panel`` -> ``split_panel`` -> ``StandardScaler.fit`` on the
training part -> ``WindowDataset.from_panel`` / ``WindowDataset.for_prediction`` -> model ->
``StandardScaler.inverse_transform`` -> ``forecast_frame``; covariates join the windows' time features
(:mod:`tsrec.data.covariates`).
"""

from tsrec.data.calendar import Calendar
from tsrec.data.covariates import CovariateEncoder, CovariateValues
from tsrec.data.frame import Panel, Series, canonicalize, forecast_frame
from tsrec.data.scaling import StandardScaler
from tsrec.data.schema import Schema
from tsrec.data.source import Read, Source
from tsrec.data.split import OriginRange, SeriesTooShort, Split, split_panel
from tsrec.data.time_features import (
    data_facts,
    future_index,
    metric_season,
    normalize_freq,
    seasonality,
    step_duration,
    time_feature_dim,
    time_features,
)
from tsrec.data.windows import WindowCovariates, WindowDataset

__all__ = [
    "Calendar",
    "Read",
    "Schema",
    "Source",
    "CovariateEncoder",
    "CovariateValues",
    "OriginRange",
    "Panel",
    "Series",
    "SeriesTooShort",
    "Split",
    "StandardScaler",
    "WindowCovariates",
    "WindowDataset",
    "canonicalize",
    "data_facts",
    "forecast_frame",
    "future_index",
    "metric_season",
    "normalize_freq",
    "seasonality",
    "split_panel",
    "step_duration",
    "time_feature_dim",
    "time_features",
]
