"""tsrec's default Forecaster against the free baselines, on public data of other frequencies.

tsrec's default model is judged on hidden datasets it has never seen (daily, weekly and monthly
business data). This benchmark makes the same judgement on public data that ships inside PyPI
packages (``benchmarks/configs/unseen_like.toml`` names each dataset's source, frequency, number of
series and length; nothing is downloaded or committed, and statsmodels' ``get_rdataset`` is never
used, nor pmdarima's and sktime's sets, which are copies of R packages' data that Rdatasets holds).
Issue 36 added short seasonal panels of several series (two quarterly ones, and a weekly one made by
summing or averaging a daily panel over whole weeks), the anchor and the judgement against the best
free baseline with CPU seconds. Issue 46 added a covariate that drives the target
(``macro_consumption``), an intermittent series (``seattle_precipitation``), sub-daily data with two
seasons (``hourly_temps``) and one more short panel (``fertility``, yearly), MASE beside the z-scored
MSE, every candidate of the default run alone, and the default's validation ranking against the test's.
Four sets were then held out from every choice of the default (``sunspots``, ``nile``, ``stocks``,
``grunfeld``; ``benchmarks/results/holdout_plan.md``).

Usage (from the repository root)::

    python -m benchmarks.unseen_like benchmarks/configs/unseen_like.toml [--dataset X ...] [--model Y ...]
        [--seeds 0 1 2] [--out-dir DIR] [--quick] [--rerun] [--with-neuralforecast]
    python -m benchmarks.unseen_like --render benchmarks/results/unseen_like.csv

Protocol, per dataset (a long frame: ``item_id``, ``timestamp``, ``target``; all series on one grid):

- **Windows.** Horizon ``H`` and stride ``s`` from the config (``s = H`` by default). In a series of
  ``T`` steps the test part is its last ``n = ceil(0.2 T)`` steps. The forecast origins (position of a
  window's first forecast step) are ``T - H``, ``T - H - s``, ... while they stay at or after
  ``T - n``: ``k = floor((n - H) / s) + 1`` windows, the last one ending at the series' end. Every one
  is scored; none is dropped.
- **Covariates.** A dataset's config may name ``past_covariates`` and ``future_covariates`` (columns
  its loader returns beside the target, per series). tsrec's models are fitted with them as such
  (``fit(..., past_covariates=..., future_covariates=...)``) and the backtest reads them from the
  inputs: a future covariate with its observed values over each window (a scenario: the covariate's
  path taken as known), a past one up to each origin. The baselines, the anchor and neuralforecast
  read the target alone.
- **Missing values.** Inputs (what every model reads) carry the last observation forward, which
  never uses a value after an origin; a series may not start with a missing value. Truths that were
  missing are scored for no model. Every model reads the same inputs.
- **Training.** tsrec models are fitted once on the data before the first origin, through the
  public API with the Forecaster's defaults (``trainer_kwargs={"enable_progress_bar": False}`` and
  the seed aside): ``default`` is ``Forecaster(prediction_length=H, seed=seed).fit(train)``, whatever
  model tsrec picks when none is named; any other name (``auto``, ``patchtst``) is passed as the
  model, and one this tsrec lacks is recorded as skipped; a name of the config's ``[variants]`` is the
  model it maps to (``tsrec_naive``: tsrec's own ``naive``, whose name the baseline has). Every
  candidate of the default is also run alone at its defaults. A default run records its leaderboard
  (each candidate's ``val_score``, weight and note, and ``attrs["eval_metric"]``) as JSON in the
  ``leaderboard`` column. Then
  ``tsrec.evaluation.backtest(f, inputs, start=<first origin>, stride=s, baselines=("naive",))``
  forecasts every window from its own context (its skill table's statsforecast rows, fitted per
  window, would be charged to the model's CPU seconds: 18.7 of 19.05 CPU-s for a ``--quick`` default on
  co2). The free baselines, on the same windows: naive (the last value before the
  origin), seasonal naive (the last season, ``m`` = 7 daily, 52 weekly, 12 monthly, 4 quarterly;
  only when the history before the first origin holds ``2 m`` steps), and statsforecast's
  ``AutoETS(season_length=m)`` and ``AutoTheta(season_length=m)``, each refitted on all the history
  before every origin (``StatsForecast.cross_validation(refit=True)``). The best of seasonal naive,
  AutoETS and AutoTheta on a dataset (lowest MSE) is its *best free baseline*.
- **The anchor** (``sf_ensemble``): statsforecast's ensemble, the per-entry median of ``AutoETS``,
  ``AutoCES`` and ``AutoTheta`` with the same season, refit at every origin like the other
  statsforecast baselines (one ``cross_validation`` call with the three models). The median rather
  than the mean, as in Nixtla's own statistical ensemble (its M3 experiment), so that one member's
  divergent forecast does not drag the anchor; a member's missing forecast makes the entry missing.
- **Scores.** Errors are z-scored per series with the mean and (population) standard deviation of
  that series' observed training part (the steps before the first origin): ``e = (pred - true) / std``.
  MSE and MAE are the means over every scored entry of every window. MASE divides each absolute error
  by its series' in-sample seasonal naive MAE, ``mean |y_t - y_{t-m}|`` over the pairs of its observed
  training part (``m``: the config's season), and averages over the same entries. ``mse_ratio_naive`` is the
  model's MSE over the naive forecast's MSE on the same entries (below 1: better than the last value);
  ``mse_ratio_best_free`` over the best free baseline's MSE (``best_free`` names it; blank until
  seasonal naive, AutoETS and AutoTheta have all run or been skipped), ``mase_ratio_best_free`` over
  the best free baseline's by MASE (``best_free_mase``), ``cpu_ratio_ensemble`` the CPU seconds over
  the anchor's; these are recomputed from the CSV's rows whenever a row is added.
  ``train_observations`` is series x steps before the first origin.
- **CPU seconds** (``cpu_seconds``): the process's user + system time for the fit and every window's
  forecast (statsforecast's refits included), with any finished child process's. All runs of one
  command run one after another in one process on one thread: ``torch.set_num_threads(1)``, the
  BLAS/OpenMP pools of loaded libraries limited to 1 (threadpoolctl) and ``OMP_NUM_THREADS=1`` for
  children. Imports and one small statsforecast fit (its compilation) happen before the first run
  and count for none.
- **Targets** (judged by ``--render`` for ``default``, seeds averaged). Issue 46's, by MSE and by MASE
  each: within 2% of the best free baseline on every dataset, below it on at least two thirds, the
  geometric mean of the ratios at most 0.95; no candidate of the default (those of its recorded
  leaderboard) run alone more than 5% ahead of it on any dataset (the default's score over the
  candidate's above 1.05). Issue 36's cost: CPU seconds at most 60 on a dataset of at most 10,000
  training observations and at most 5x the anchor's on every dataset (fit and predict together:
  stricter than the fit alone).
- **Validation against test** (``--render``): per default run, its candidates' validation scores
  ranked against the same candidates' test scores run alone (MASE for ``eval_metric`` ``mase``, MSE
  for ``mse`` and ``rmsse``, MAE for ``mae``): Spearman's rank correlation, whether validation's best is the test's
  best, and the test score of validation's best over the test's best.

One tidy row per (dataset, model, seed) is appended to the CSV as soon as the run ends (runs already
there are skipped, so a stopped batch resumes), with the fit and predict wall seconds, the process's
CPU seconds, the commit, machine, date and the exact command; then the markdown table is rendered
from the CSV (a CSV written before the last columns existed is rewritten with them). A failed run is
reported and the others carry on. ``--rerun`` makes the selected runs again, each new row replacing
the run's old ones (to re-run the default after a change of tsrec:
``--rerun --model default --seeds 0 1 2``). Deterministic baselines have one row with a blank seed. A model
tsrec does not accept gets a ``skipped`` row with the reason, which a later successful run supersedes.

``--with-neuralforecast`` adds neuralforecast's PatchTST (``nf_patchtst``; a benchmark-only
dependency, ``pip install neuralforecast``) with its defaults and ``input_size = 2 H`` (tsrec's
default context), trained once before the first origin for at most the wall time the default
Forecaster's fit took on the same dataset and seed (Lightning's ``max_time``).

``--quick`` is a smoke test: tiny networks, a few training steps, results in a temporary folder.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import math
import os
import resource
import sys
import tempfile
import time
import tomllib
import traceback
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchmarks.common import ROOT, command_line, git_commit, machine, now

RESULTS = ROOT / "benchmarks" / "results"
#: One row per run; new columns go at the end.
RESULT_COLUMNS = ["config", "dataset", "freq", "horizon", "stride", "season", "model", "seed", "status", "n_series",
                  "windows", "entries", "mse", "mae", "naive_mse", "mse_ratio_naive", "fit_seconds",
                  "predict_seconds", "cpu_seconds", "note", "commit", "machine", "date", "command",
                  "train_observations", "best_free", "mse_ratio_best_free", "cpu_ratio_ensemble", "mase",
                  "leaderboard", "best_free_mase", "mase_ratio_best_free"]
#: The columns computed from the other rows of the same dataset (rewritten whenever a row is added).
DERIVED_COLUMNS = ("best_free", "mse_ratio_best_free", "cpu_ratio_ensemble", "best_free_mase", "mase_ratio_best_free")
#: The test scores every row has (``mase`` blank in rows written before it existed).
METRICS = ("mse", "mase")
#: The anchor: statsforecast's ensemble, the median of :data:`ENSEMBLE_MEMBERS` (module docstring).
ENSEMBLE = "sf_ensemble"
ENSEMBLE_MEMBERS = ("AutoETS", "AutoCES", "AutoTheta")
#: Deterministic models: one row each, no seed.
BASELINES = ("naive", "seasonal_naive", "auto_ets", "auto_theta", ENSEMBLE)
#: The free baselines whose best (lowest MSE) on a dataset the other models are judged against.
FREE_BASELINES = ("seasonal_naive", "auto_ets", "auto_theta")
#: statsforecast's models (its class names) behind each baseline; several: their median.
STATSFORECAST_MODELS = {"auto_ets": ("AutoETS",), "auto_theta": ("AutoTheta",), ENSEMBLE: ENSEMBLE_MEMBERS}
#: The name of the Forecaster with no model named (tsrec's default model).
DEFAULT = "default"
NEURALFORECAST = "nf_patchtst"
ID, TIME, TARGET = "item_id", "timestamp", "target"
#: Issue 36's targets for the default: its MSE within this share of the best free baseline's on every
#: dataset, and below it on at least half of them ...
WITHIN_BEST_FREE = 0.02
#: ... and its CPU seconds at most this many on a dataset of at most SMALL_DATASET observations before
#: the first origin, and at most CPU_TIMES_ENSEMBLE times the anchor's on every dataset.
CPU_SECONDS_SMALL, SMALL_DATASET, CPU_TIMES_ENSEMBLE = 60.0, 10_000, 5.0
QUICK_OPTIONS = dict(max_steps=3, d_model=16, d_ff=32, e_layers=1)
QUICK_TRAINER = dict(limit_val_batches=2)


class DatasetUnavailable(ImportError):
    """The package that ships a dataset is not installed (the message names the ``pip install``)."""


# ---------------------------------------------------------------------------------------------- datasets
def _require(module: str, package: str, dataset: str) -> Any:
    """Import ``module`` or raise :class:`DatasetUnavailable` naming the pip package that ships ``dataset``."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise DatasetUnavailable(f"dataset {dataset!r} ships inside the PyPI package {package!r}, which is not "
                                 f"installed here: pip install {package}") from err


def _long(wide: pd.DataFrame) -> pd.DataFrame:
    """A wide frame (DatetimeIndex, one column per series) as the benchmark's long frame."""
    wide = wide.rename_axis(index=TIME, columns=ID)
    frame = wide.stack(future_stack=True).rename(TARGET).reset_index()
    frame[ID] = frame[ID].astype(str)
    frame[TARGET] = frame[TARGET].astype(np.float64)
    return frame.sort_values([ID, TIME], ignore_index=True)[[ID, TIME, TARGET]]


def load_seattle_weather() -> pd.DataFrame:
    data = _require("vega_datasets", "vega_datasets", "seattle_weather").local_data.seattle_weather()
    wide = data.set_index(pd.DatetimeIndex(data["date"]))[["precipitation", "temp_max", "temp_min", "wind"]]
    return _long(wide)


def load_co2() -> pd.DataFrame:
    datasets = _require("statsmodels.datasets", "statsmodels", "co2")
    return _long(datasets.co2.load_pandas().data[["co2"]])


def load_elnino() -> pd.DataFrame:
    """Nino 1+2 sea surface temperature: the package's year x month table as one monthly series."""
    datasets = _require("statsmodels.datasets", "statsmodels", "elnino")
    table = datasets.elnino.load_pandas().data.set_index("YEAR")  # [years, 12]
    values = table.to_numpy().ravel()  # year by year, January first
    index = pd.date_range(f"{int(table.index[0])}-01-01", periods=values.size, freq="MS")
    return _long(pd.DataFrame({"nino12": values}, index=index))


def load_elec_equip() -> pd.DataFrame:
    _require("statsmodels.datasets", "statsmodels", "elec_equip")
    from statsmodels.datasets import elec_equip

    data = elec_equip.load_pandas().data
    return _long(pd.DataFrame({"elec_equip": data.iloc[:, 0].to_numpy()}, index=pd.DatetimeIndex(data.index)))


def load_us_employment() -> pd.DataFrame:
    data = _require("vega_datasets", "vega_datasets", "us_employment").local_data.us_employment()
    wide = data.set_index(pd.DatetimeIndex(data["month"])).drop(columns=["month", "nonfarm_change"])
    return _long(wide)


def load_seattle_weekly() -> pd.DataFrame:
    """seattle_weather's daily panel aggregated to weeks of Sunday to Saturday (labelled by the
    Saturday): the week's total precipitation and mean max/min temperature and wind. Only the 208
    whole weeks are kept (2012-01-01 is a Sunday; the last five days, 2015-12-27 to 31, are left out)."""
    data = _require("vega_datasets", "vega_datasets", "seattle_weekly").local_data.seattle_weather()
    daily = data.set_index(pd.DatetimeIndex(data["date"]))[["precipitation", "temp_max", "temp_min", "wind"]]
    weeks = daily.resample("W-SAT")
    wide = weeks.mean().assign(precipitation=weeks["precipitation"].sum())[daily.columns]
    return _long(wide[weeks.size() == 7])


def _quarters(year: pd.Series, quarter: pd.Series) -> pd.DatetimeIndex:
    """The first day of each (year, quarter)."""
    return pd.PeriodIndex.from_fields(year=year.astype(int), quarter=quarter.astype(int),
                                      freq="Q").to_timestamp(how="start")


def load_macrodata() -> pd.DataFrame:
    datasets = _require("statsmodels.datasets", "statsmodels", "macrodata")
    data = datasets.macrodata.load_pandas().data
    return _long(data.drop(columns=["year", "quarter"]).set_index(_quarters(data["year"], data["quarter"])))


def load_danish_data() -> pd.DataFrame:
    """Johansen and Juselius's Danish money demand data: five quarterly series, 1974Q1 to 1987Q3."""
    datasets = _require("statsmodels.datasets", "statsmodels", "danish_data")
    data = datasets.danish_data.load_pandas().data
    return _long(data.set_index(pd.DatetimeIndex(data.index)))


def load_interest_inflation() -> pd.DataFrame:
    """(West) German inflation (the GDP deflator's quarterly log change) and long-term interest rate,
    1972Q2 to 1998Q4 (Lütkepohl's JMulTi data)."""
    datasets = _require("statsmodels.datasets", "statsmodels", "interest_inflation")
    data = datasets.interest_inflation.load_pandas().data
    return _long(data[["Dp", "R"]].set_index(_quarters(data["year"], data["quarter"])))


def load_macro_consumption() -> pd.DataFrame:
    """US real personal consumption (``realcons``, the target) with real disposable personal income
    (``realdpi``, a covariate column), quarterly 1959Q1 to 2009Q3: one series."""
    datasets = _require("statsmodels.datasets", "statsmodels", "macro_consumption")
    data = datasets.macrodata.load_pandas().data
    frame = data.set_index(_quarters(data["year"], data["quarter"]))[["realcons", "realdpi"]]
    frame = frame.rename_axis(index=TIME).rename(columns={"realcons": TARGET}).reset_index()
    return frame.assign(**{ID: "realcons"})[[ID, TIME, TARGET, "realdpi"]]


def load_seattle_precipitation() -> pd.DataFrame:
    """seattle_weather's daily precipitation alone (mm; no rain on 838 of the 1,461 days)."""
    data = _require("vega_datasets", "vega_datasets", "seattle_precipitation").local_data.seattle_weather()
    return _long(data.set_index(pd.DatetimeIndex(data["date"]))[["precipitation"]])


def load_hourly_temps() -> pd.DataFrame:
    """Hourly air temperature (F) of Seattle and San Francisco in 2010, on the whole hourly grid of the
    year: the package leaves out 2010-03-14 03:00 (the hour skipped by the change to daylight saving
    time, as the package labels the hours), which stays a missing value. The values are smooth, as
    climate normals are: at the same hour consecutive days differ by 0.16 F on average in Seattle."""
    local = _require("vega_datasets", "vega_datasets", "hourly_temps").local_data
    grid = pd.date_range("2010-01-01 00:00", "2010-12-31 23:00", freq="h")
    columns = {}
    for name, data in (("seattle", local.seattle_temps()), ("san_francisco", local.sf_temps())):
        series = data.set_index(pd.DatetimeIndex(data["date"]))["temp"]
        if not series.index.isin(grid).all():
            raise ValueError(f"hourly_temps: {name}'s hours are not on the hourly grid of 2010")
        columns[name] = series.reindex(grid)
    return _long(pd.DataFrame(columns, index=grid))


#: The years every series of :func:`load_fertility` has (the package's 2012 and 2013 are empty).
FERTILITY_YEARS = [str(year) for year in range(1960, 2012)]


def load_fertility() -> pd.DataFrame:
    """The World Bank's total fertility rate (births per woman), yearly 1960-2011, of the countries
    and regions with a value in every one of those years (192 of the package's 219 rows)."""
    datasets = _require("statsmodels.datasets", "statsmodels", "fertility")
    data = datasets.fertility.load_pandas().data.set_index("Country Code")[FERTILITY_YEARS].dropna()
    wide = data.T.set_axis(pd.date_range("1960-01-01", periods=len(FERTILITY_YEARS), freq="YS"), axis=0)
    return _long(wide)


def _yearly(years: pd.Series) -> pd.DatetimeIndex:
    """January 1 of each (float) year."""
    return pd.DatetimeIndex(pd.to_datetime(years.astype(int).astype(str), format="%Y"))


def load_sunspots() -> pd.DataFrame:
    """Wolf's yearly sunspot number, 1700-2008: one series with a cycle of about 11 years that no
    calendar season names."""
    datasets = _require("statsmodels.datasets", "statsmodels", "sunspots")
    data = datasets.sunspots.load_pandas().data
    return _long(pd.DataFrame({"sunspots": data["SUNACTIVITY"].to_numpy()}, index=_yearly(data["YEAR"])))


def load_nile() -> pd.DataFrame:
    """The Nile's yearly flow at Aswan (10^8 m^3), 1871-1970: one series with a level shift (1898)."""
    datasets = _require("statsmodels.datasets", "statsmodels", "nile")
    data = datasets.nile.load_pandas().data
    return _long(pd.DataFrame({"nile": data["volume"].to_numpy()}, index=_yearly(data["year"])))


#: The symbols of :func:`load_stocks` (the package's GOOG starts in 2004-08, off the others' grid).
STOCKS = ["AAPL", "AMZN", "IBM", "MSFT"]


def load_stocks() -> pd.DataFrame:
    """Monthly closing prices (USD) of four stocks, 2000-01 to 2010-03."""
    data = _require("vega_datasets", "vega_datasets", "stocks").local_data.stocks()
    wide = data.pivot(index="date", columns="symbol", values="price")[STOCKS]
    return _long(wide.set_axis(pd.DatetimeIndex(wide.index), axis=0))


def load_grunfeld() -> pd.DataFrame:
    """Grunfeld's investment data: gross investment (``invest``, the target) of 11 US firms, yearly
    1935-1954, with each firm's market value (``value``) and capital stock (``capital``) as past
    covariates."""
    datasets = _require("statsmodels.datasets", "statsmodels", "grunfeld")
    data = datasets.grunfeld.load_pandas().data
    frame = data.assign(**{ID: data["firm"].astype(str), TIME: _yearly(data["year"]),
                           TARGET: data["invest"].astype(np.float64)})
    return frame.sort_values([ID, TIME], ignore_index=True)[[ID, TIME, TARGET, "value", "capital"]]


LOADERS: dict[str, Callable[[], pd.DataFrame]] = {
    "seattle_weather": load_seattle_weather, "co2": load_co2, "elnino": load_elnino, "elec_equip": load_elec_equip,
    "us_employment": load_us_employment, "macrodata": load_macrodata, "seattle_weekly": load_seattle_weekly,
    "danish_data": load_danish_data, "interest_inflation": load_interest_inflation,
    "macro_consumption": load_macro_consumption, "seattle_precipitation": load_seattle_precipitation,
    "hourly_temps": load_hourly_temps, "fertility": load_fertility, "sunspots": load_sunspots, "nile": load_nile,
    "stocks": load_stocks, "grunfeld": load_grunfeld,
}


def covariates_of(spec: dict[str, Any]) -> tuple[str, ...]:
    """The covariate columns a dataset's config names (``past_covariates`` then ``future_covariates``)."""
    return (*spec.get("past_covariates", ()), *spec.get("future_covariates", ()))


def load_dataset(name: str, spec: dict[str, Any]) -> pd.DataFrame:
    """The long frame of dataset ``name`` (``item_id`` str, ``timestamp``, ``target`` float with NaN
    where missing, then the covariate columns the config names), checked against the config's
    ``series``, ``length``, ``freq`` and covariates."""
    if name not in LOADERS:
        raise ValueError(f"no loader for dataset {name!r}; known: {sorted(LOADERS)}")
    frame = LOADERS[name]()
    extra = [c for c in frame.columns if c not in (ID, TIME, TARGET)]
    if extra != list(covariates_of(spec)):
        raise ValueError(f"{name}: loaded the covariate columns {extra}, the config names {list(covariates_of(spec))} "
                         "(past_covariates, future_covariates); correct the config")
    lengths = frame.groupby(ID).size()
    if len(lengths) != spec["series"] or set(lengths) != {spec["length"]}:
        raise ValueError(f"{name}: loaded {len(lengths)} series of lengths {sorted(set(lengths))}, the config says "
                         f"{spec['series']} of {spec['length']}; correct the config")
    grid = pd.date_range(frame[TIME].min(), periods=spec["length"], freq=spec["freq"])
    for item, times in frame.groupby(ID)[TIME]:
        if not times.reset_index(drop=True).equals(pd.Series(grid, name=TIME)):
            raise ValueError(f"{name}: series {item!r} is not on the regular {spec['freq']!r} grid from {grid[0]}")
    return frame


def model_inputs(frame: pd.DataFrame) -> pd.DataFrame:
    """What every model reads: ``frame`` with each missing target (and covariate) carried forward
    from the same series' last observation (causal). A series whose first value is missing is refused."""
    values = [c for c in frame.columns if c not in (ID, TIME)]
    heads = frame.groupby(ID, sort=False).head(1)
    missing = heads.loc[heads[values].isna().any(axis=1), ID].tolist()
    if missing:
        raise ValueError(f"series {missing} start with a missing value; nothing before it can be carried forward")
    filled = frame.copy()
    filled[values] = frame.groupby(ID)[values].ffill()
    return filled


# ---------------------------------------------------------------------------------------------- windows
@dataclass(frozen=True)
class Windows:
    """The forecast origins of a dataset (every series on one grid of ``length`` steps).

    Attributes:
        origins: ``[K]`` grid positions of each window's first forecast step, increasing.
        horizon: ``H``, steps per window.
        stride: steps between origins.
    """

    origins: np.ndarray
    horizon: int
    stride: int

    @property
    def first(self) -> int:
        """The first origin: the training part is every step before it."""
        return int(self.origins[0])

    @property
    def count(self) -> int:
        return len(self.origins)


def rolling_windows(length: int, horizon: int, stride: int, fraction: float) -> Windows:
    """Origins over the last ``ceil(fraction * length)`` steps, ``stride`` apart, the last window
    ending at the series' end: ``k = floor((n - H) / s) + 1`` of them (module docstring)."""
    n_test = math.ceil(fraction * length)
    if n_test < horizon:
        raise ValueError(f"the last {fraction:.0%} of {length} steps ({n_test}) is shorter than the horizon "
                         f"{horizon}: no window fits; use a shorter horizon")
    count = (n_test - horizon) // stride + 1
    last = length - horizon
    return Windows(np.arange(last - stride * (count - 1), last + 1, stride), horizon, stride)


def training_stats(truth: pd.DataFrame, windows: Windows, season: int = 1) -> pd.DataFrame:
    """Per series (index ``item_id``), the ``mean`` and population ``std`` of its observed values before
    the first origin, and MASE's ``scale``: the mean absolute error of the seasonal naive forecast
    (``season`` steps back) over that training part, ``mean |y_t - y_{t - season}|`` over the pairs
    observed at both ends. A constant training part (std 0) or one without a seasonal change (scale 0,
    or no pair) is refused: it cannot be scaled."""
    train = truth.groupby(ID, group_keys=False).head(windows.first)
    by_series = train.groupby(ID)[TARGET]
    changes = (train[TARGET] - by_series.shift(season)).abs()  # [rows]; NaN where either end is missing
    stats = by_series.agg(mean="mean", std=lambda x: float(np.std(x.dropna())))
    stats["scale"] = changes.groupby(train[ID]).mean()
    flat = stats.index[~(stats["std"] > 0) | ~(stats["scale"] > 0)].tolist()
    if flat:
        raise ValueError(f"series {flat} are constant (or empty, or never change over a season of {season}) before "
                         "the first origin: they cannot be scaled")
    return stats


def window_table(truth: pd.DataFrame, windows: Windows) -> pd.DataFrame:
    """One row per (series, window, step): ``item_id``, ``origin`` (timestamp of the first forecast
    step), ``step`` (1..H), ``timestamp``, ``y_true`` (NaN where missing). Rows ``[N * K * H]``."""
    parts = []
    offsets = (windows.origins[:, None] + np.arange(windows.horizon)[None, :]).ravel()  # [K * H]
    for item, series in truth.groupby(ID, sort=True):
        times = series[TIME].to_numpy()
        values = series[TARGET].to_numpy()
        parts.append(pd.DataFrame({
            ID: item, "origin": np.repeat(times[windows.origins], windows.horizon),
            "step": np.tile(np.arange(1, windows.horizon + 1), windows.count),
            TIME: times[offsets], "y_true": values[offsets]}))
    return pd.concat(parts, ignore_index=True)


def naive_forecasts(inputs: pd.DataFrame, windows: Windows, season: int) -> pd.DataFrame:
    """The seasonal naive forecast of every window, in :func:`window_table` row order: step ``h``
    (1..H) repeats ``y[o + h - 1 - m * ceil(h / m)]``, the last observed season before origin ``o``;
    ``season = 1`` is the naive (last value) forecast. Column ``y_pred``."""
    steps = np.arange(windows.horizon)  # [H]
    back = season * np.ceil((steps + 1) / season).astype(int)  # [H]
    source = windows.origins[:, None] + steps[None, :] - back[None, :]  # [K, H]
    if source.min() < 0:
        raise ValueError(f"a season of {season} steps reaches before the start of the series")
    parts = [series[TARGET].to_numpy()[source.ravel()] for _, series in inputs.groupby(ID, sort=True)]
    return pd.DataFrame({"y_pred": np.concatenate(parts)})


# ---------------------------------------------------------------------------------------------- scores
def zscored_errors(table: pd.DataFrame, stats: pd.DataFrame) -> np.ndarray:
    """``(y_pred - y_true) / std`` of each row's series (``[rows]``; NaN where the truth is missing)."""
    std = table[ID].map(stats["std"]).to_numpy(np.float64)
    return (table["y_pred"].to_numpy(np.float64) - table["y_true"].to_numpy(np.float64)) / std


def score(table: pd.DataFrame, naive: np.ndarray, stats: pd.DataFrame) -> dict[str, float | int]:
    """MSE and MAE of ``table``'s z-scored errors over the entries with a truth, the naive forecast's
    MSE on the same entries (``naive``: its predictions in ``table``'s row order) and the ratio, and
    MASE: each absolute error over its series' ``scale`` (:func:`training_stats`), averaged over the
    same entries."""
    errors = zscored_errors(table, stats)
    naive_errors = zscored_errors(table.assign(y_pred=naive), stats)
    scored = np.isfinite(table["y_true"].to_numpy(np.float64))
    if not np.isfinite(errors[scored]).all():
        raise ValueError(f"{int((~np.isfinite(errors[scored])).sum())} forecasts are missing or not finite")
    mse = float(np.mean(errors[scored] ** 2))
    naive_mse = float(np.mean(naive_errors[scored] ** 2))
    scaled = errors * (table[ID].map(stats["std"] / stats["scale"]).to_numpy(np.float64))  # (pred - true) / scale
    return {"windows": int(table.groupby([ID, "origin"]).ngroups), "entries": int(scored.sum()), "mse": mse,
            "mae": float(np.mean(np.abs(errors[scored]))), "naive_mse": naive_mse, "mse_ratio_naive": mse / naive_mse,
            "mase": float(np.mean(np.abs(scaled[scored])))}


# ---------------------------------------------------------------------------------------------- models
@dataclass(frozen=True)
class Task:
    """One dataset prepared for every model: its ``truth`` (missing values kept), the ``inputs``
    every model reads, the ``windows``, the training ``stats`` and the config's settings."""

    name: str
    freq: str
    season: int
    truth: pd.DataFrame
    inputs: pd.DataFrame
    windows: Windows
    stats: pd.DataFrame
    past_covariates: tuple[str, ...] = ()
    future_covariates: tuple[str, ...] = ()

    @property
    def first_origin(self) -> pd.Timestamp:
        return pd.Timestamp(self.inputs[TIME].iloc[self.windows.first])

    @property
    def train(self) -> pd.DataFrame:
        """The inputs before the first origin (what a model is fitted on once)."""
        return self.inputs[self.inputs[TIME] < self.first_origin]

    @property
    def train_observations(self) -> int:
        """Series x steps before the first origin (the size of the data a model is fitted on)."""
        return int(self.truth[ID].nunique()) * self.windows.first

    @property
    def has_two_seasons(self) -> bool:
        return self.windows.first >= 2 * self.season


def prepare_task(name: str, spec: dict[str, Any], fraction: float) -> Task:
    truth = load_dataset(name, spec)
    horizon = spec["horizon"]
    windows = rolling_windows(spec["length"], horizon, spec.get("stride", horizon), fraction)
    return Task(name, spec["freq"], spec["season"], truth, model_inputs(truth), windows,
                training_stats(truth, windows, spec["season"]), tuple(spec.get("past_covariates", ())),
                tuple(spec.get("future_covariates", ())))


def forecast_baseline(task: Task, model: str) -> pd.DataFrame:
    """Naive or seasonal naive forecasts in :func:`window_table` order (column ``y_pred``)."""
    if model == "seasonal_naive" and not task.has_two_seasons:
        raise SkipRun(f"the history before the first origin ({task.windows.first} steps) holds fewer than two "
                      f"seasons of {task.season}")
    return naive_forecasts(task.inputs, task.windows, 1 if model == "naive" else task.season)


def forecast_statsforecast(task: Task, model: str) -> pd.DataFrame:
    """statsforecast's AutoETS / AutoTheta, or the median of its :data:`ENSEMBLE_MEMBERS` (the
    anchor), each refitted on all the history before every origin with the calendar's season in one
    ``cross_validation(refit=True)`` on one core; rows ``item_id``, ``timestamp``, ``origin``,
    ``y_pred``. A member's missing forecast stays missing (the median is not taken over the others)."""
    try:
        from statsforecast import StatsForecast
        from statsforecast import models as sf_models
    except ImportError as err:
        raise ImportError(f"{model} is statsforecast's; install it (a benchmark-only dependency): "
                          "pip install statsforecast") from err

    members = [getattr(sf_models, m)(season_length=task.season) for m in STATSFORECAST_MODELS[model]]
    sf = StatsForecast(models=members, freq=task.freq, n_jobs=1)
    cv = sf.cross_validation(h=task.windows.horizon, df=task.inputs[[ID, TIME, TARGET]],  # the target alone
                             n_windows=task.windows.count, step_size=task.windows.stride, refit=True, id_col=ID,
                             time_col=TIME, target_col=TARGET)
    # [rows]; one member: itself. Each member's column is named by its alias (AutoCES's is "CES").
    cv["y_pred"] = np.median(cv[[m.alias for m in members]].to_numpy(np.float64), axis=1)
    cv["origin"] = cv.groupby([ID, "cutoff"])[TIME].transform("min")
    return cv[[ID, TIME, "origin", "y_pred"]]


def tsrec_forecaster(model: str, horizon: int, seed: int, quick: bool,
                     model_options: dict[str, Any] | None = None) -> Any:
    """The Forecaster a run judges: the defaults but the seed, a silent progress bar and the
    config's ``model_options`` of a variant (``--quick``: a tiny network trained for a few steps)."""
    from tsrec import Forecaster

    named = {} if model == DEFAULT else {"model": model}
    options: dict[str, Any] = {"seed": seed, **(model_options or {})}
    trainer = {"enable_progress_bar": False}
    try:
        forecaster = Forecaster(**named, prediction_length=horizon, trainer_kwargs=trainer, **options)
    except (ValueError, KeyError) as err:
        if model == DEFAULT:
            raise
        reason = str(err).split(";")[0]  # the first clause, without the list of known models
        raise SkipRun(f"tsrec does not accept model {model!r} yet ({type(err).__name__}: {reason})") from err
    if not quick:
        return forecaster
    import dataclasses

    from tsrec.models import model_spec

    fields = {f.name for f in dataclasses.fields(model_spec(forecaster.model_name).model_class.config_class)}
    options.update({k: v for k, v in QUICK_OPTIONS.items() if k in fields or k == "max_steps"})
    return Forecaster(**named, prediction_length=horizon, trainer_kwargs={**trainer, **QUICK_TRAINER}, **options)


def forecast_tsrec(task: Task, model: str, seed: int, quick: bool,
                   config: dict[str, Any] | None = None) -> tuple[pd.DataFrame, float, float, str, str]:
    """Fit once before the first origin, then backtest every window; rows ``item_id``, ``timestamp``,
    ``origin``, ``y_pred``, with the fit's and the backtest's wall seconds, :func:`training_note` and
    :func:`leaderboard_record`. A model the config's ``[variants]`` names (``tsrec_naive = "naive"``)
    is its base model with the options of ``[model_options.NAME]`` (as in ``benchmarks.run``). The
    task's covariates are given to ``fit`` as past or future covariates, as the config names them;
    the backtest reads them from the inputs (future ones over each window too: their observed values)."""
    from benchmarks.run import registered_model
    from tsrec.evaluation import backtest

    config = config or {}
    forecaster = tsrec_forecaster(registered_model(config, model), task.windows.horizon, seed, quick,
                                  config.get("model_options", {}).get(model))
    columns = dict(id_col=ID, time_col=TIME, target_col=TARGET)
    started = time.perf_counter()
    forecaster.fit(task.train, past_covariates=list(task.past_covariates) or None,
                   future_covariates=list(task.future_covariates) or None, **columns)
    fit_seconds = time.perf_counter() - started
    started = time.perf_counter()
    # The benchmark scores its own baselines: backtest's skill table keeps only the free naive row, as
    # its default statsforecast rows (fitted per window) would be charged to this model's CPU seconds.
    result = backtest(forecaster, task.inputs, start=task.first_origin, stride=task.windows.stride,
                      baselines=("naive",), **columns)
    predict_seconds = time.perf_counter() - started
    errors = result.errors
    return (errors[[ID, TIME, "origin", "y_pred"]], fit_seconds, predict_seconds, training_note(forecaster),
            leaderboard_record(forecaster))


def leaderboard_record(forecaster: Any) -> str:
    """A selection's (``auto``, the default) validation as JSON: ``{"eval_metric": ..., "candidates":
    [{"model", "val_score", "weight", "note"}, ...]}`` from ``forecaster.leaderboard`` (a score that is
    NaN, a candidate that failed or was skipped, is null); empty for any other model."""
    board = getattr(forecaster, "leaderboard", None)
    if board is None:
        return ""
    candidates = [{"model": str(row.model), "weight": float(row.weight),
                   "val_score": float(row.val_score) if np.isfinite(row.val_score) else None,
                   "note": row.note if isinstance(getattr(row, "note", None), str) else ""}
                  for row in board.itertuples()]
    return json.dumps({"eval_metric": board.attrs.get("eval_metric"), "candidates": candidates})


def training_note(forecaster: Any) -> str:
    """What the fit did, in a few words: for a selection (``auto``, the default) its members and
    weights (from its leaderboard); for a network, the step that validation picked out of the
    budget, what stopped the run, and the refit on all the history (from ``training_summary``)."""
    board = getattr(forecaster, "leaderboard", None)
    if board is not None:
        members = board[board.weight > 0].sort_values("weight", ascending=False)
        return "members " + ", ".join(f"{row.model} {row.weight:.2f}" for row in members.itertuples())
    summary = forecaster.training_summary
    if not forecaster.trainable or summary is None:
        return ""
    budget = summary.budget or {}
    limit = budget.get("max_steps") or f"{budget.get('max_epochs')} epochs"
    note = f"best step {summary.best_step} of {limit}, {budget.get('steps_run')} run ({budget.get('stopped_by')})"
    refit = summary.refit or {}
    if "skipped" in refit:
        return note + f"; no refit ({refit['skipped']})"
    return note + (f"; refit {refit['steps']} steps on all the history" if "steps" in refit else "")


def forecast_neuralforecast(task: Task, seed: int, seconds: float) -> pd.DataFrame:
    """neuralforecast's PatchTST (its defaults, ``input_size = 2 H``) fitted once before the first
    origin for at most ``seconds`` of training, forecasting every window; rows as
    :func:`forecast_tsrec`'s."""
    try:
        from neuralforecast import NeuralForecast
        from neuralforecast.models import PatchTST
    except ImportError as err:
        raise SkipRun("neuralforecast is not installed (a benchmark-only dependency: pip install neuralforecast)") \
            from err
    horizon = task.windows.horizon
    model = PatchTST(h=horizon, input_size=2 * horizon, random_seed=seed, enable_progress_bar=False,
                     enable_model_summary=False, logger=False, max_time={"seconds": max(1, round(seconds))})
    nf = NeuralForecast(models=[model], freq=task.freq)
    cv = nf.cross_validation(df=task.inputs[[ID, TIME, TARGET]], n_windows=task.windows.count,
                             step_size=task.windows.stride,
                             refit=False, id_col=ID, time_col=TIME, target_col=TARGET)
    cv = cv.rename(columns={"PatchTST": "y_pred"})
    cv["origin"] = cv.groupby([ID, "cutoff"])[TIME].transform("min")
    return cv[[ID, TIME, "origin", "y_pred"]]


class SkipRun(Exception):
    """A run that cannot be made here (a model tsrec does not accept yet, a missing optional
    package, too short a history): recorded as ``skipped`` with the reason, never as a failure."""


def align(table: pd.DataFrame, forecasts: pd.DataFrame, model: str) -> pd.DataFrame:
    """``table`` (:func:`window_table`) with each row's ``y_pred`` from ``forecasts`` (keyed by
    ``item_id``, ``origin``, ``timestamp``); a window the model did not forecast, or one it
    forecast that the protocol lacks, is an error."""
    forecasts = forecasts.assign(**{ID: forecasts[ID].astype(str)})
    merged = table.merge(forecasts, on=[ID, "origin", TIME], how="left", validate="one_to_one")
    if merged["y_pred"].isna().any() or len(forecasts) != len(table):
        raise RuntimeError(f"{model}: forecast {len(forecasts)} entries with {int(merged['y_pred'].isna().sum())} of "
                           f"the protocol's {len(table)} missing; its windows differ from the protocol's")
    return merged


# ---------------------------------------------------------------------------------------------- runs
def cpu_seconds() -> float:
    """CPU seconds (user + system) this process and its finished children have used so far."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Every run inside on one thread, as CPU seconds are compared: one torch intra-op thread, one
    BLAS/OpenMP thread in the libraries already loaded (threadpoolctl, where installed), and
    ``OMP_NUM_THREADS=1`` for any process a run starts; all three restored on the way out."""
    import torch

    threads, omp = torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        pools = contextlib.nullcontext()
    else:
        pools = threadpool_limits(1)
    try:
        with pools:
            yield
    finally:
        torch.set_num_threads(threads)
        if omp is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = omp


def warm_up_statsforecast() -> None:
    """Fit statsforecast's models once on a small synthetic series, so that no run's CPU seconds
    include the one-time cost of importing and compiling them (as tsrec's and Lightning's imports are
    kept out too). Nothing without statsforecast installed."""
    try:
        from statsforecast import StatsForecast
        from statsforecast import models as sf_models
    except ImportError:
        return
    steps = np.arange(48)
    frame = pd.DataFrame({ID: "warm-up", TIME: pd.date_range("2000-01-01", periods=48, freq="QS"),
                          TARGET: 10 + np.sin(steps * np.pi / 2) + 0.1 * steps})
    members = sorted({m for names in STATSFORECAST_MODELS.values() for m in names})
    sf = StatsForecast(models=[getattr(sf_models, m)(season_length=4) for m in members], freq="QS", n_jobs=1)
    sf.cross_validation(h=4, df=frame, n_windows=2, step_size=4, id_col=ID, time_col=TIME, target_col=TARGET)


@dataclass(frozen=True)
class Context:
    """What every run of one invocation shares."""

    config: dict[str, Any]
    out: Path
    quick: bool
    command: str
    commit: str
    rerun: bool = False


def run_one(ctx: Context, task: Task, model: str, seed: int | None) -> dict[str, Any]:
    """Forecast every window of ``task`` with ``model`` and return its row (status ``ok``)."""
    table = window_table(task.truth, task.windows)
    naive = naive_forecasts(task.inputs, task.windows, 1)["y_pred"].to_numpy()
    cpu = cpu_seconds()
    started = time.perf_counter()
    predict_seconds, note, board = 0.0, "", ""
    if model in ("naive", "seasonal_naive"):
        scored = table.assign(y_pred=forecast_baseline(task, model)["y_pred"].to_numpy())
        fit_seconds = time.perf_counter() - started
    elif model in STATSFORECAST_MODELS:
        scored = align(table, forecast_statsforecast(task, model), model)
        fit_seconds = time.perf_counter() - started  # fitted anew at every origin: fitting is the run
    elif model == NEURALFORECAST:
        budget = default_fit_seconds(ctx.out, ctx.config["name"], task.name, seed)
        scored = align(table, forecast_neuralforecast(task, seed, budget), model)
        fit_seconds = time.perf_counter() - started
    else:
        forecasts, fit_seconds, predict_seconds, note, board = forecast_tsrec(task, model, seed, ctx.quick, ctx.config)
        scored = align(table, forecasts, model)
    cpu = cpu_seconds() - cpu
    return {**row_key(ctx, task, model, seed), "status": "ok", **score(scored, naive, task.stats),
            "fit_seconds": round(fit_seconds, 2), "predict_seconds": round(predict_seconds, 2),
            "cpu_seconds": round(cpu, 2), "note": note, "leaderboard": board, **provenance(ctx)}


def default_fit_seconds(out: Path, config: str, dataset: str, seed: int) -> float:
    """The default Forecaster's fit seconds on ``dataset`` with ``seed`` in the results (the equal
    wall time neuralforecast's PatchTST trains for); :class:`SkipRun` when it has not run."""
    for row in read_rows(out):
        if (row["config"], row["dataset"], row["model"], row["seed"], row["status"]) == \
                (config, dataset, DEFAULT, str(seed), "ok"):
            return float(row["fit_seconds"])
    raise SkipRun(f"no {DEFAULT} run of {dataset} with seed {seed} yet, whose fit time nf_patchtst would match")


def row_key(ctx: Context, task: Task, model: str, seed: int | None) -> dict[str, Any]:
    return {"config": ctx.config["name"] + ("-quick" if ctx.quick else ""), "dataset": task.name,
            "freq": task.freq, "horizon": task.windows.horizon, "stride": task.windows.stride,
            "season": task.season, "model": model, "seed": "" if seed is None else seed,
            "n_series": task.truth[ID].nunique(), "train_observations": task.train_observations}


def provenance(ctx: Context) -> dict[str, str]:
    return {"commit": ctx.commit, "machine": machine(), "date": now(), "command": ctx.command}


def skipped_row(ctx: Context, task: Task, model: str, seed: int | None, why: str) -> dict[str, Any]:
    blank = dict.fromkeys(("windows", "entries", "mse", "mae", "naive_mse", "mse_ratio_naive", "fit_seconds",
                           "predict_seconds", "cpu_seconds", "mase", "leaderboard"), "")
    return {**row_key(ctx, task, model, seed), "status": "skipped", **blank, "note": why, **provenance(ctx)}


def read_rows(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def append_row(path: Path, row: dict[str, Any]) -> None:
    """Append ``row`` to the CSV ``path`` (created with the header of :data:`RESULT_COLUMNS`; a CSV
    with an older header, a prefix of it, is first rewritten with the new one, its rows' new columns
    blank)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not path.exists() or path.stat().st_size == 0
    if not new:
        with path.open(newline="") as fh:
            header = next(csv.reader(fh), [])
        if header != RESULT_COLUMNS[:len(header)]:
            raise ValueError(f"{path} is not an unseen_like results CSV (columns {header}); use another --out-dir")
        if header != RESULT_COLUMNS:
            write_rows(path, read_rows(path))
    with path.open("a", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=RESULT_COLUMNS)
        if new:
            writer.writeheader()
        writer.writerow(row)


def record(path: Path, row: dict[str, Any], replace: bool) -> None:
    """Add ``row`` to the CSV ``path`` (:func:`append_row`); with ``replace``, in place of the rows of
    the same run (config, dataset, model, seed), which are dropped."""
    if not replace:
        append_row(path, row)
        return
    kept = [r for r in read_rows(path) if run_id(r) != run_id(row)]
    append_row(path, row)  # checks (and upgrades) the header
    write_rows(path, kept + [row])


def write_rows(path: Path, rows: list[dict[str, Any]]) -> None:
    """Write ``rows`` to ``path`` with the header of :data:`RESULT_COLUMNS` (missing columns blank)."""
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=RESULT_COLUMNS, restval="")
        writer.writeheader()
        writer.writerows(rows)


def best_free(ok: dict[str, list[dict[str, str]]], metric: str = "mse") -> str | None:
    """The free baseline (:data:`FREE_BASELINES`) with the lowest ``metric`` (:data:`METRICS`) among
    ``ok`` (a dataset's rows of status ``ok`` by model), or None when none of them has it."""
    ran = [m for m in FREE_BASELINES if m in ok and _has(ok[m], metric)]
    return min(ran, key=lambda m: _mean(ok[m], metric)) if ran else None


def with_derived_columns(rows: list[dict[str, str]], configured: set[str] | None = None) -> list[dict[str, str]]:
    """``rows`` with :data:`DERIVED_COLUMNS` computed per (config, dataset) from its ``ok`` rows:
    ``best_free`` (:func:`best_free`), each ok row's MSE over that baseline's, and its CPU seconds over
    the anchor's (:data:`ENSEMBLE`). Blank where the reference has not run; ``best_free`` stays blank
    while a free baseline that ``configured`` names has neither run nor been skipped there."""
    groups: dict[tuple[str, str], list[dict[str, str]]] = defaultdict(list)
    for row in rows:
        groups[(row["config"], row["dataset"])].append(row)
    references = {}  # (config, dataset) -> per metric the best free baseline and its score; the anchor's CPU-s
    for key, group in groups.items():
        ok = ok_by_model(group)
        pending = {m for m in FREE_BASELINES if configured is None or m in configured} - {r["model"] for r in group}
        bests = {metric: None if pending else best_free(ok, metric) for metric in METRICS}
        references[key] = ({metric: (best, best and _mean(ok[best], metric)) for metric, best in bests.items()},
                           float(ok[ENSEMBLE][0]["cpu_seconds"]) if ENSEMBLE in ok else None)
    out = []
    for row in rows:
        bests, anchor_cpu = references[(row["config"], row["dataset"])]
        derived = dict.fromkeys(DERIVED_COLUMNS, "")
        for metric, (best, best_score) in bests.items():
            if row["status"] == "ok" and best is not None and row.get(metric):
                derived.update({BEST_FREE_COLUMN[metric]: best,
                                f"{metric}_ratio_best_free": float(row[metric]) / best_score})
        if row["status"] == "ok" and anchor_cpu:
            derived["cpu_ratio_ensemble"] = float(row["cpu_seconds"]) / anchor_cpu
        out.append({**row, **derived})
    return out


#: The column naming the best free baseline by each metric.
BEST_FREE_COLUMN = {"mse": "best_free", "mase": "best_free_mase"}


def ok_by_model(rows: list[dict[str, str]]) -> dict[str, list[dict[str, str]]]:
    """The rows of status ``ok`` by model, in the order they come."""
    ok: dict[str, list[dict[str, str]]] = defaultdict(list)
    for row in rows:
        if row["status"] == "ok":
            ok[row["model"]].append(row)
    return ok


def refresh(path: Path, config: dict[str, Any]) -> None:
    """Rewrite the CSV ``path`` with its derived columns recomputed, and the ``train_observations`` of
    rows written before that column existed filled in from ``config`` (what :func:`rolling_windows`
    gives for the dataset's length, horizon and stride)."""
    rows = read_rows(path)
    for row in rows:
        spec = config["datasets"].get(row["dataset"])
        if not row.get("train_observations") and spec is not None:
            first = rolling_windows(spec["length"], spec["horizon"], spec.get("stride", spec["horizon"]),
                                    config["test_fraction"]).first
            row["train_observations"] = str(spec["series"] * first)
    write_rows(path, with_derived_columns(rows, set(config["baselines"])))


def run_id(row: dict[str, Any]) -> tuple[str, str, str, str]:
    return (str(row["config"]), str(row["dataset"]), str(row["model"]), str(row["seed"]))


def planned_runs(config: dict[str, Any], args: argparse.Namespace) -> list[tuple[str, str, int | None]]:
    """``(dataset, model, seed)`` of the config narrowed by the command line, in the config's order:
    baselines first (seed None), then tsrec models per seed, then the optional models (with
    ``--with-neuralforecast``) and the config's ``extra_models`` that ``--model`` names."""
    models = [*config["baselines"], *config["models"], *(config.get("optional_models", [])
                                                         if args.with_neuralforecast else []),
              *(m for m in config.get("extra_models", []) if m in (args.model or []))]
    seeds = args.seeds if args.seeds is not None else config["seeds"]
    unknown = sorted(set(args.model or []) - set(models))
    if unknown:
        raise SystemExit(f"benchmarks.unseen_like: models {unknown} are not in the config (or need "
                         f"--with-neuralforecast); known: {models}")
    runs = []
    for dataset in config["datasets"]:
        if args.dataset and dataset not in args.dataset:
            continue
        for model in models:
            if args.model and model not in args.model:
                continue
            runs += [(dataset, model, None)] if model in BASELINES else [(dataset, model, s) for s in seeds]
    return runs


def run_all(ctx: Context, runs: list[tuple[str, str, int | None]]) -> list[str]:
    """Run ``runs`` one after the other, appending each row as it ends; return the failed runs'
    names (each reported with its traceback; the others carry on). Rows already in the CSV (status
    ``ok``) are skipped, unless ``ctx.rerun``: then every run is made again and its row replaces the
    run's earlier rows; a skip is recorded once."""
    rows = read_rows(ctx.out)
    done = set() if ctx.rerun else {run_id(r) for r in rows if r["status"] == "ok"}
    skipped = {(run_id(r), r["note"]) for r in rows if r["status"] == "skipped"}
    name = ctx.config["name"] + ("-quick" if ctx.quick else "")
    tasks: dict[str, Task] = {}
    failed = []
    todo = [r for r in runs if (name, r[0], r[1], "" if r[2] is None else str(r[2])) not in done]
    print(f"{len(todo)} runs to do ({len(runs) - len(todo)} already in {ctx.out})", flush=True)
    for dataset, model, seed in todo:
        label = f"{dataset} {model}" + ("" if seed is None else f" seed {seed}")
        try:
            if dataset not in tasks:
                tasks[dataset] = prepare_task(dataset, ctx.config["datasets"][dataset], ctx.config["test_fraction"])
            row = run_one(ctx, tasks[dataset], model, seed)
        except SkipRun as why:
            row = skipped_row(ctx, tasks[dataset], model, seed, str(why))
            print(f"{label}: skipped ({why})", flush=True)
            if (run_id(row), row["note"]) not in skipped:
                record(ctx.out, row, ctx.rerun)
                refresh(ctx.out, ctx.config)
            continue
        except Exception as err:  # noqa: BLE001 (reported with its traceback; the batch goes on)
            traceback.print_exc()
            print(f"benchmarks.unseen_like: {label} failed ({type(err).__name__}: {err}); the other runs carry on",
                  file=sys.stderr, flush=True)
            failed.append(label)
            continue
        record(ctx.out, row, ctx.rerun)
        refresh(ctx.out, ctx.config)
        print(f"{label}: mse {row['mse']:.4f} mase {row['mase']:.4f} ratio to naive {row['mse_ratio_naive']:.3f} "
              f"({row['windows']} windows, fit {row['fit_seconds']} s, {row['cpu_seconds']} CPU-s)", flush=True)
    return failed


# ---------------------------------------------------------------------------------------------- table
def _decimals(value: float) -> int:
    """Decimals that show ``value`` with three significant digits (at least 3)."""
    return 3 if value == 0 else max(3, 2 - math.floor(math.log10(abs(value))))


def _mean_std(values: list[float]) -> str:
    """Mean ± sample std (the mean alone for one value), to three significant digits of the mean."""
    if not values:
        return ""
    mean = float(np.mean(values))
    digits = _decimals(mean)
    if len(values) == 1:
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {float(np.std(values, ddof=1)):.{digits}f}"


def _mean_mse(runs: list[dict[str, str]]) -> float:
    return _mean(runs, "mse")


def _mean(runs: list[dict[str, str]], metric: str) -> float:
    """The mean of ``metric`` over ``runs`` (its seeds)."""
    return float(np.mean([float(r[metric]) for r in runs]))


def _has(runs: list[dict[str, str]], metric: str) -> bool:
    """Whether every one of ``runs`` has ``metric`` (rows written before a column existed lack it)."""
    return all(r.get(metric) not in (None, "") for r in runs)


def _geomean(values: list[float]) -> float:
    return float(np.exp(np.mean(np.log(values))))


#: Issue 46's targets for the default, by each metric: within WITHIN_BEST_FREE of the best free
#: baseline on every dataset, ahead of it on at least AHEAD_SHARE of them, the geometric mean of
#: its ratios to it at most GEOMEAN_BEST_FREE; and no candidate run alone at its defaults more than
#: BEATEN_BY ahead of it (the default's score over the candidate's above 1 + BEATEN_BY).
AHEAD_SHARE, GEOMEAN_BEST_FREE, BEATEN_BY = 2 / 3, 0.95, 0.05
#: The results row of a selection's candidate run alone, where its name is a baseline's: tsrec's own
#: naive and seasonal naive run as the config's variants of these names.
CANDIDATE_ROWS = {"naive": "tsrec_naive", "seasonal_naive": "tsrec_seasonal_naive"}
#: The test score that matches each ``eval_metric`` the validation ranked by (MASE for any other):
#: ``rmsse`` (squared errors over a per-series scale, auto's metric on intermittent data) by the
#: test's MSE, which ranks as it does on one series and differs only in the per-series scale on more.
TEST_METRIC = {"mase": "mase", "mse": "mse", "mae": "mae", "rmsse": "mse"}


@dataclass(frozen=True)
class DefaultJudgement:
    """Issue 46's targets for the default Forecaster on one dataset by one metric (its seeds averaged),
    and issue 36's cost target.

    Attributes:
        dataset: its name.
        metric: the test score judged (:data:`METRICS`).
        train_observations: series x steps before the first origin.
        best_free: the best free baseline there by ``metric`` (:data:`FREE_BASELINES`).
        ratio: the default's mean score over the best free baseline's.
        cpu: the default's mean CPU seconds (fit and every window's forecast).
        anchor_cpu: the anchor's (:data:`ENSEMBLE`) CPU seconds, None where it has not run.
        best_alone: the default's candidate that scored best run alone (None: none ran alone).
        alone_ratio: the default's mean score over that candidate's.
    """

    dataset: str
    metric: str
    train_observations: int
    best_free: str
    ratio: float
    cpu: float
    anchor_cpu: float | None
    best_alone: str | None = None
    alone_ratio: float | None = None

    @property
    def within(self) -> bool:
        return self.ratio <= 1 + WITHIN_BEST_FREE

    @property
    def ahead(self) -> bool:
        return self.ratio < 1

    @property
    def beaten(self) -> bool | None:
        """Whether a candidate run alone beats the default by more than :data:`BEATEN_BY` (None: none ran)."""
        return None if self.alone_ratio is None else self.alone_ratio > 1 + BEATEN_BY

    @property
    def small(self) -> bool:
        return self.train_observations <= SMALL_DATASET

    @property
    def cpu_small_ok(self) -> bool | None:
        """At most :data:`CPU_SECONDS_SMALL` on a small dataset (None on a larger one: not judged)."""
        return self.cpu <= CPU_SECONDS_SMALL if self.small else None

    @property
    def cpu_anchor_ok(self) -> bool | None:
        """At most :data:`CPU_TIMES_ENSEMBLE` times the anchor's CPU seconds (None without the anchor)."""
        return None if self.anchor_cpu is None else self.cpu <= CPU_TIMES_ENSEMBLE * self.anchor_cpu


def leaderboards(runs: list[dict[str, str]]) -> list[tuple[str, dict[str, Any]]]:
    """The recorded validation (:func:`leaderboard_record`) of each of ``runs`` that has one, with its seed."""
    return [(r["seed"], json.loads(r["leaderboard"])) for r in runs if r.get("leaderboard")]


def candidate_row(candidate: str) -> str:
    """The results row (model) of ``candidate`` run alone (:data:`CANDIDATE_ROWS`)."""
    return CANDIDATE_ROWS.get(candidate, candidate)


def candidates_alone(ok: dict[str, list[dict[str, str]]], metric: str, model: str = DEFAULT) -> list[str]:
    """The rows of the candidates of ``model`` (the default, or another selection: every candidate of
    its recorded leaderboards) that ran alone on this dataset with ``metric``."""
    names = dict.fromkeys(candidate_row(c["model"]) for _, board in leaderboards(ok.get(model, []))
                          for c in board["candidates"])
    return [name for name in names if name in ok and _has(ok[name], metric)]


def selections(by_dataset: dict[str, dict[str, list[dict[str, str]]]]) -> list[str]:
    """The models other than the default whose runs recorded a leaderboard (the default with other
    options, e.g. ``default_mse``), in the order of the results."""
    return list(dict.fromkeys(model for ok in by_dataset.values() for model, runs in ok.items()
                              if model != DEFAULT and leaderboards(runs)))


def judge_default(by_dataset: dict[str, dict[str, list[dict[str, str]]]],
                  metric: str = "mse", model: str = DEFAULT) -> list[DefaultJudgement]:
    """The :class:`DefaultJudgement` of ``model`` (the default, or another selection) by ``metric`` on
    every dataset where it and a free baseline have that score (``by_dataset``: dataset -> model ->
    its ``ok`` rows)."""
    judged = []
    for dataset, ok in by_dataset.items():
        best = best_free(ok, metric)
        if model not in ok or best is None or not _has(ok[model], metric):
            continue
        runs = ok[model]
        score = _mean(runs, metric)
        alone = candidates_alone(ok, metric, model)
        best_alone = min(alone, key=lambda m: _mean(ok[m], metric)) if alone else None
        anchor = float(ok[ENSEMBLE][0]["cpu_seconds"]) if ENSEMBLE in ok else None
        judged.append(DefaultJudgement(dataset, metric, int(runs[0]["train_observations"]), best,
                                       score / _mean(ok[best], metric),
                                       float(np.mean([float(r["cpu_seconds"]) for r in runs])), anchor, best_alone,
                                       None if best_alone is None else score / _mean(ok[best_alone], metric)))
    return judged


def target_verdicts(judged: list[DefaultJudgement]) -> tuple[str, str, str]:
    """Over ``judged``, each target as ``met``/``not met`` with the counts behind it: issue 46's
    accuracy (within :data:`WITHIN_BEST_FREE` of the best free baseline on every dataset, ahead of it
    on at least :data:`AHEAD_SHARE` of them, geometric mean of the ratios at most
    :data:`GEOMEAN_BEST_FREE`), its candidates (none run alone ahead by more than :data:`BEATEN_BY` on
    any dataset, which needs them run everywhere) and issue 36's cost (:data:`CPU_SECONDS_SMALL` on
    the small datasets, at most :data:`CPU_TIMES_ENSEMBLE` times the anchor on every dataset, which
    needs the anchor everywhere)."""
    n = len(judged)
    if not n:
        return ("not judged (no dataset has the default and a free baseline)", "not judged", "not judged")
    within, ahead = sum(j.within for j in judged), sum(j.ahead for j in judged)
    mean = _geomean([j.ratio for j in judged])
    met = within == n and ahead >= AHEAD_SHARE * n and mean <= GEOMEAN_BEST_FREE
    accuracy = (f"{'met' if met else 'not met'}: within {WITHIN_BEST_FREE:.0%} on {within} of {n} datasets, ahead on "
                f"{ahead} of {n}, geometric mean {mean:.3f}")
    alone = [j for j in judged if j.beaten is not None]
    beaten = sum(bool(j.beaten) for j in alone)
    candidates = (f"{'met' if beaten == 0 and len(alone) == n else 'not met'}: a candidate alone more than "
                  f"{BEATEN_BY:.0%} ahead on {beaten} of {len(alone)} datasets"
                  + ("" if len(alone) == n else f" ({n - len(alone)} without the candidates run alone)"))
    small = [j for j in judged if j.small]
    anchored = [j for j in judged if j.anchor_cpu is not None]
    small_ok, anchor_ok = sum(bool(j.cpu_small_ok) for j in small), sum(bool(j.cpu_anchor_ok) for j in anchored)
    met = small_ok == len(small) and anchor_ok == len(anchored) == n
    cost = (f"{'met' if met else 'not met'}: <= {CPU_SECONDS_SMALL:.0f} CPU-s on {small_ok} of the {len(small)} "
            f"datasets of <= {SMALL_DATASET:,} observations, <= {CPU_TIMES_ENSEMBLE:g}x the anchor on {anchor_ok} "
            f"of {n}" + ("" if len(anchored) == n else f" ({n - len(anchored)} without the anchor's run)"))
    return accuracy, candidates, cost


@dataclass(frozen=True)
class RankAgreement:
    """How one default run's validation ranking (its recorded leaderboard) predicted the test ranking
    of the same candidates run alone, on the test score matching its ``eval_metric`` (:data:`TEST_METRIC`).

    Attributes:
        dataset, seed: the default run.
        eval_metric: what validation ranked by.
        test_metric: the test score compared (:data:`METRICS`, or ``mae``).
        candidates: the candidates with a validation score and a test run alone (validation's order).
        rho: Spearman's rank correlation between their validation scores and test scores (NaN under 3).
        val_best, test_best: the candidate each ranks first.
        regret: ``val_best``'s test score over ``test_best``'s.
    """

    dataset: str
    seed: str
    eval_metric: str
    test_metric: str
    candidates: tuple[str, ...]
    rho: float
    val_best: str
    test_best: str
    regret: float


def spearman(a: list[float], b: list[float]) -> float:
    """Spearman's rank correlation of ``a`` and ``b`` (average ranks for ties; NaN under 3 pairs or
    where either is constant)."""
    if len(a) < 3:
        return math.nan
    ranks = pd.DataFrame({"a": a, "b": b}).rank()
    if ranks["a"].nunique() < 2 or ranks["b"].nunique() < 2:
        return math.nan
    return float(np.corrcoef(ranks["a"], ranks["b"])[0, 1])


def rank_agreements(by_dataset: dict[str, dict[str, list[dict[str, str]]]]) -> list[RankAgreement]:
    """A :class:`RankAgreement` for every default run with a recorded leaderboard and at least one
    candidate scored on validation that also ran alone (its test score: the mean over its seeds)."""
    out = []
    for dataset, ok in by_dataset.items():
        for seed, board in leaderboards(ok.get(DEFAULT, [])):
            test_metric = TEST_METRIC.get(board["eval_metric"], "mase")
            pairs = [(c["model"], c["val_score"], _mean(ok[candidate_row(c["model"])], test_metric))
                     for c in board["candidates"] if c["val_score"] is not None
                     and candidate_row(c["model"]) in ok and _has(ok[candidate_row(c["model"])], test_metric)]
            if not pairs:
                continue
            pairs.sort(key=lambda p: p[1])
            names, val, test = zip(*pairs)
            best = int(np.argmin(test))
            out.append(RankAgreement(dataset, seed, board["eval_metric"], test_metric, names,
                                     spearman(list(val), list(test)), names[0], names[best], test[0] / test[best]))
    return out


def _yes(flag: bool | None) -> str:
    return "" if flag is None else ("yes" if flag else "no")


def _ratio_best_free(runs: list[dict[str, str]], ok: dict[str, list[dict[str, str]]],
                     metric: str = "mse") -> float | None:
    best = best_free(ok, metric)
    return None if best is None or not _has(runs, metric) else _mean(runs, metric) / _mean(ok[best], metric)


def _model_order(row: dict[str, str]) -> int:
    """Baselines first, in :data:`BASELINES`' order, then the other models as they come (a stable sort)."""
    return BASELINES.index(row["model"]) if row["model"] in BASELINES else len(BASELINES)


def _mean_cpu(runs: list[dict[str, str]]) -> float:
    return float(np.mean([float(r["cpu_seconds"] or 0) for r in runs]))


def _cell(runs: list[dict[str, str]], metric: str) -> str:
    """Mean ± std of ``metric`` over ``runs``, blank where a row lacks it."""
    return _mean_std([float(r[metric]) for r in runs]) if _has(runs, metric) else ""


def _ratio_cell(runs: list[dict[str, str]], ok: dict[str, list[dict[str, str]]], metric: str) -> str:
    best = best_free(ok, metric)
    if best is None or not _has(runs, metric):
        return ""
    return _mean_std([float(r[metric]) / _mean(ok[best], metric) for r in runs])


def _number(value: float | None, digits: int = 3) -> str:
    return "" if value is None or not np.isfinite(value) else f"{value:.{digits}f}"


def render(csv_path: Path) -> Path:
    """Markdown beside ``csv_path``: per dataset, each model's z-scored MSE, MAE, MASE, MSE ratio to
    naive and ratios to the best free baseline (mean ± std over seeds) and CPU seconds, and the
    default's validation against its candidates' test scores; then the default's targets by each
    metric (:func:`target_verdicts`), how validation's ranking predicted the test's
    (:func:`rank_agreements`) and the tables across the datasets (:func:`across_datasets`)."""
    rows = read_rows(csv_path)
    where = csv_path.relative_to(ROOT) if csv_path.is_relative_to(ROOT) else csv_path
    by_dataset: dict[str, dict[str, list[dict[str, str]]]] = defaultdict(lambda: defaultdict(list))
    skips: dict[tuple[str, str], str] = {}
    for row in sorted(rows, key=_model_order):
        if row["status"] == "ok":
            by_dataset[row["dataset"]][row["model"]].append(row)
        else:
            skips[(row["dataset"], row["model"])] = row["note"]
    lines = [f"# {csv_path.stem}", "",
             "tsrec's default Forecaster and the free baselines on public data of other frequencies "
             "(protocol: `benchmarks/unseen_like.py`; data: `benchmarks/configs/unseen_like.toml`). Errors "
             "z-scored per series with its training part's mean and std; MSE and MAE over every entry of "
             "every window of the last 20%; MASE: each absolute error over its series' in-sample seasonal naive "
             "MAE (over its training part), averaged over the same entries; `ratio to naive` is the MSE over the "
             "naive (last value) forecast's on the same entries, `MSE / best free` and `MASE / best free` over the "
             "best free baseline's by that score (the lowest of seasonal naive, AutoETS and AutoTheta); "
             f"`{ENSEMBLE}` (the anchor) is the median of statsforecast's {', '.join(ENSEMBLE_MEMBERS)}. "
             "`CPU s`: the process's CPU seconds for the fit and every window's forecast (statsforecast's models "
             "refit at every origin), one thread. Mean ± sample std over seeds (baselines are deterministic). "
             f"Every run's command, commit, machine and date are in [{csv_path.name}]({csv_path.name}); "
             f"`python -m benchmarks.unseen_like --render {where}` redraws this table.", ""]
    for dataset, ok in by_dataset.items():
        lines += dataset_section(dataset, ok, skips)
    lines += targets_section(by_dataset) + ranking_section(by_dataset) + across_datasets(by_dataset)
    out = csv_path.with_suffix(".md")
    out.write_text("\n".join(lines) + "\n")
    return out


def dataset_section(dataset: str, ok: dict[str, list[dict[str, str]]], skips: dict[tuple[str, str], str]) -> list[str]:
    """Markdown lines of one dataset: every model's scores, the models not run, and the default's
    recorded validation beside its candidates' test scores run alone."""
    first = next(iter(ok.values()))[0]
    best = best_free(ok)
    lines = [f"## {dataset} ({first['freq']}, {first['n_series']} series, H = {first['horizon']}, stride "
             f"{first['stride']}, season {first['season']}, {first['windows']} windows)", ""]
    if first.get("train_observations"):
        lines += [f"{int(first['train_observations']):,} observations (series x steps) before the first origin"
                  + ("" if best is None else f"; the best free baseline is {best} by MSE, "
                     f"{best_free(ok, 'mase')} by MASE") + ".", ""]
    lines += ["| model | seeds | MSE | MAE | MASE | ratio to naive | MSE / best free | MASE / best free | fit s | "
              "CPU s |", "|---|---|---|---|---|---|---|---|---|---|"]
    for model, runs in ok.items():
        runs = sorted(runs, key=lambda r: int(r["seed"] or 0))
        lines.append("| " + " | ".join([
            model, ",".join(r["seed"] for r in runs) or "-", _cell(runs, "mse"), _cell(runs, "mae"),
            _cell(runs, "mase"), _cell(runs, "mse_ratio_naive"), _ratio_cell(runs, ok, "mse"),
            _ratio_cell(runs, ok, "mase"), f"{np.mean([float(r['fit_seconds']) for r in runs]):.1f}",
            f"{_mean_cpu(runs):.1f}"]) + " |")
    lines += [f"- {model}: not run ({why})" for (d, model), why in skips.items() if d == dataset and model not in ok]
    boards = leaderboards(ok.get(DEFAULT, []))
    if boards:
        seed, board = boards[0]
        lines += ["", f"The default's validation (seed {seed}, `eval_metric` {board['eval_metric']}) beside each "
                  "candidate's test scores run alone (blank: not run alone):", "",
                  "| candidate | validation score | weight | test MASE | test MSE | note |",
                  "|---|---|---|---|---|---|"]
        for c in board["candidates"]:
            runs = ok.get(candidate_row(c["model"]), [])
            note = c.get("note", "").replace("|", "/").replace("\n", " ")
            lines.append(f"| {c['model']} | {_number(c['val_score'], 4)} | {c['weight']:.2f} | "
                         f"{_cell(runs, 'mase') if runs else ''} | {_cell(runs, 'mse') if runs else ''} | {note} |")
    lines.append("")
    return lines


def targets_section(by_dataset: dict[str, dict[str, list[dict[str, str]]]]) -> list[str]:
    """Markdown lines: issue 46's targets for the default by MSE and by MASE (a table each), then issue
    36's cost target."""
    lines = ["## The default's targets", "",
             "Issue 46's targets for the default Forecaster (its seeds averaged), by each test score: within "
             f"{WITHIN_BEST_FREE:.0%} of the best free baseline on every dataset, ahead of it on at least "
             f"two thirds of them and at most {GEOMEAN_BEST_FREE:g} in geometric mean; and no candidate of "
             f"the default run alone at its defaults more than {BEATEN_BY:.0%} ahead of it on any dataset (`beaten`: "
             f"the default's score over the best candidate's above {1 + BEATEN_BY:g}; the candidates are those of "
             "its recorded leaderboards that ran alone).", ""]
    for metric in METRICS:
        judged = judge_default(by_dataset, metric)
        name = metric.upper()
        lines += [f"By {name}:", "",
                  f"| dataset | best free | default / best free | within {WITHIN_BEST_FREE:.0%} | ahead | "
                  "best candidate alone | default / it | beaten |", "|---|---|---|---|---|---|---|---|"]
        for j in judged:
            lines.append(f"| {j.dataset} | {j.best_free} | {j.ratio:.3f} | {_yes(j.within)} | {_yes(j.ahead)} | "
                         f"{j.best_alone or ''} | {_number(j.alone_ratio)} | {_yes(j.beaten)} |")
        accuracy, candidates, _ = target_verdicts(judged)
        lines += ["", f"- Accuracy target ({name}): {accuracy}.", f"- Candidates alone ({name}): {candidates}."]
        unjudged = [d for d in by_dataset if d not in {j.dataset for j in judged}]
        if unjudged:
            lines.append(f"- Not judged by {name} (no {DEFAULT} run, or no free baseline, with that score): "
                         f"{', '.join(unjudged)}.")
        lines.append("")
    for model in selections(by_dataset):
        lines += selection_targets(by_dataset, model)
    judged = judge_default(by_dataset)
    lines += [f"Issue 36's cost target: at most {CPU_SECONDS_SMALL:.0f} CPU-s on a dataset of at most "
              f"{SMALL_DATASET:,} observations before the first origin, and at most {CPU_TIMES_ENSEMBLE:g}x the CPU "
              f"seconds of `{ENSEMBLE}` on every dataset; the fit's and every window's forecast together (stricter "
              "than the fit alone).", "",
              f"| dataset | observations | default CPU s | {ENSEMBLE} CPU s | default / {ENSEMBLE} | "
              f"<= {CPU_SECONDS_SMALL:.0f} CPU-s | <= {CPU_TIMES_ENSEMBLE:g}x |", "|---|---|---|---|---|---|---|"]
    for j in judged:
        anchor = ("", "") if j.anchor_cpu is None else (f"{j.anchor_cpu:.1f}", f"{j.cpu / j.anchor_cpu:.2f}x")
        lines.append(f"| {j.dataset} | {j.train_observations:,} | {j.cpu:.1f} | {anchor[0]} | {anchor[1]} | "
                     f"{_yes(j.cpu_small_ok) or 'larger'} | {_yes(j.cpu_anchor_ok)} |")
    lines += ["", f"- Cost target: {target_verdicts(judged)[2]}.", ""]
    return lines


def selection_targets(by_dataset: dict[str, dict[str, list[dict[str, str]]]], model: str) -> list[str]:
    """Markdown lines: issue 46's targets for another selection ``model`` (the default with other
    options), by the test score that matches the ``eval_metric`` it validated by (MSE for ``mse``,
    else MASE), beside the default's on the same datasets."""
    named = sorted({board["eval_metric"] for ok in by_dataset.values()
                    for _, board in leaderboards(ok.get(model, []))})
    metric = TEST_METRIC.get(named[0], "mase") if len(named) == 1 else "mase"
    judged = judge_default(by_dataset, metric, model)
    default = {j.dataset: j for j in judge_default(by_dataset, metric)}
    name = metric.upper()
    title = f"`{model}` (the default validated, selected and weighted by `eval_metric` {', '.join(named)}), by {name}, " \
        "beside the default:"
    header = f"| dataset | best free | {model} / best free | within {WITHIN_BEST_FREE:.0%} | ahead | " \
        f"best candidate alone | {model} / it | beaten | default / best free |"
    lines = [title, "", header, "|---|---|---|---|---|---|---|---|---|"]
    for j in judged:
        ours = default.get(j.dataset)
        lines.append(f"| {j.dataset} | {j.best_free} | {j.ratio:.3f} | {_yes(j.within)} | {_yes(j.ahead)} | "
                     f"{j.best_alone or ''} | {_number(j.alone_ratio)} | {_yes(j.beaten)} | "
                     f"{'' if ours is None else f'{ours.ratio:.3f}'} |")
    accuracy, candidates, _ = target_verdicts(judged)
    return lines + ["", f"- Accuracy target ({name}, {model}): {accuracy}.",
                    f"- Candidates alone ({name}, {model}): {candidates}.", ""]


def ranking_section(by_dataset: dict[str, dict[str, list[dict[str, str]]]]) -> list[str]:
    """Markdown lines: per default run with a recorded leaderboard, how its validation ranking of the
    candidates predicted their test ranking run alone (:func:`rank_agreements`)."""
    agreements = rank_agreements(by_dataset)
    if not agreements:
        return []
    lines = ["## Validation ranking against the test ranking", "",
             "Per default run: its candidates ranked by their validation score (the leaderboard's `val_score`, on "
             "its `eval_metric`) against the same candidates run alone, ranked by the matching test score (MASE "
             "for `mase` and any metric the test lacks, MSE for `mse`, MAE for `mae`; seeds averaged). `rho`: "
             "Spearman's rank correlation (1: the same order; blank under 3 candidates); `regret`: the test "
             "score of validation's best over the test's best (1: validation picked the test's best).", "",
             "| dataset | seed | eval_metric | test score | candidates | rho | validation's best | test's best | "
             "same | regret |", "|---|---|---|---|---|---|---|---|---|---|"]
    for a in agreements:
        lines.append(f"| {a.dataset} | {a.seed} | {a.eval_metric} | {a.test_metric} | {len(a.candidates)} | "
                     f"{_number(a.rho, 2)} | {a.val_best} | {a.test_best} | {_yes(a.val_best == a.test_best)} | "
                     f"{a.regret:.3f} |")
    rhos = [a.rho for a in agreements if np.isfinite(a.rho)]
    same = sum(a.val_best == a.test_best for a in agreements)
    lines += ["", f"- Validation's best was the test's best in {same} of {len(agreements)} runs"
              + ("" if not rhos else f"; mean rho {np.mean(rhos):.2f} over {len(rhos)} runs") + ".", ""]
    return lines


def across_datasets(by_dataset: dict[str, dict[str, list[dict[str, str]]]]) -> list[str]:
    """Markdown lines: per model, its ratio to the best free baseline on every dataset by MSE and by
    MASE (seeds averaged; blank where it did not run or lacks the score), the geometric mean of the
    ratios where it has them on every dataset, and its CPU seconds; then, for the models that ran
    everywhere, the geometric mean over the datasets of the MSE ratio to naive, and on how many
    datasets each has the lowest MSE."""
    models = list(dict.fromkeys(m for ok in by_dataset.values() for m in ok))
    everywhere = [m for m in models if all(m in ok for ok in by_dataset.values())]
    if not models:
        return []
    datasets = list(by_dataset)
    lines = ["## Across the datasets", ""]
    for metric in METRICS:
        lines += [f"Each model's {metric.upper()} ratio to the best free baseline of each dataset by {metric.upper()} "
                  "(its seeds averaged; below 1: better), with the geometric mean where it has one on every dataset.",
                  "", "| model | " + " | ".join(datasets) + " | geometric mean |",
                  "|---|" + "---|" * (len(datasets) + 1)]
        for model in models:
            ratios = [_ratio_best_free(ok[model], ok, metric) if model in ok else None for ok in by_dataset.values()]
            mean = _geomean(ratios) if all(r is not None for r in ratios) else None
            lines.append(f"| {model} | " + " | ".join("" if r is None else f"{r:.3f}" for r in ratios)
                         + f" | {'' if mean is None else f'{mean:.3f}'} |")
        lines.append("")
    lines += ["| model (CPU s) | " + " | ".join(datasets) + " |", "|---|" + "---|" * len(datasets)]
    for model in models:
        lines.append(f"| {model} | " + " | ".join(f"{_mean_cpu(ok[model]):.1f}" if model in ok else ""
                                                   for ok in by_dataset.values()) + " |")
    if not everywhere:
        return lines
    wins = defaultdict(int)
    for ok in by_dataset.values():
        wins[min(ok, key=lambda m: _mean_mse(ok[m]))] += 1
    lines += ["", "Geometric mean over the datasets of each model's MSE ratio to naive (its seeds averaged first), "
              "and on how many datasets it has the lowest MSE of all the models run there.", "",
              "| model | geometric mean ratio to naive | lowest MSE on |", "|---|---|---|"]
    for model in everywhere:
        ratios = [float(np.mean([float(r["mse_ratio_naive"]) for r in ok[model]])) for ok in by_dataset.values()]
        lines.append(f"| {model} | {_geomean(ratios):.3f} | {wins[model]} of {len(by_dataset)} |")
    return lines


# ---------------------------------------------------------------------------------------------- main
def load_config(path: Path) -> dict[str, Any]:
    try:
        config = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise SystemExit(f"benchmarks.unseen_like: no config file {path}") from None
    missing = [k for k in ("name", "output", "test_fraction", "seeds", "baselines", "models", "datasets")
               if k not in config]
    if missing:
        raise SystemExit(f"benchmarks.unseen_like: {path} lacks {missing}")
    if "datasets_from" in config:  # a list of names whose tables another config (beside this one) holds
        others = load_config(path.parent / config["datasets_from"])["datasets"]
        absent = [name for name in config["datasets"] if name not in others]
        if absent:
            raise SystemExit(f"benchmarks.unseen_like: {path}: datasets {absent} are not in {config['datasets_from']}")
        config["datasets"] = {name: others[name] for name in config["datasets"]}
    unknown = sorted(set(config["baselines"]) - set(BASELINES))
    if unknown:
        raise SystemExit(f"benchmarks.unseen_like: {path}: unknown baselines {unknown}; known: {list(BASELINES)}")
    for name, spec in config["datasets"].items():
        lacking = [k for k in ("source", "package", "freq", "series", "length", "horizon", "season") if k not in spec]
        if lacking:
            raise SystemExit(f"benchmarks.unseen_like: {path}: dataset {name} lacks {lacking}")
        for kind in ("past_covariates", "future_covariates"):
            names = spec.get(kind, [])
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                raise SystemExit(f"benchmarks.unseen_like: {path}: dataset {name}'s {kind} must be a list of column "
                                 f"names, got {names!r}")
    return config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.unseen_like", description=__doc__.split("\n\n")[0])
    parser.add_argument("config", nargs="?", type=Path, help="benchmarks/configs/unseen_like.toml")
    parser.add_argument("--render", type=Path, metavar="CSV", help="only redraw the table of this results CSV")
    parser.add_argument("--dataset", nargs="*", help="only these datasets")
    parser.add_argument("--model", nargs="*", help="only these models (baselines included)")
    parser.add_argument("--seeds", nargs="*", type=int, help="these seeds instead of the config's")
    parser.add_argument("--out-dir", type=Path, help="where results go (default benchmarks/results; a temporary "
                                                     "folder with --quick)")
    parser.add_argument("--quick", action="store_true", help="tiny smoke-test runs (not results)")
    parser.add_argument("--rerun", action="store_true", help="make the selected runs again, even those already in "
                                                             "the CSV, each new row replacing the run's old ones")
    parser.add_argument("--with-neuralforecast", action="store_true",
                        help="add neuralforecast's PatchTST at the default's wall time (pip install neuralforecast)")
    args = parser.parse_args(argv)
    if args.render:
        print(render(args.render))
        return 0
    if args.config is None:
        parser.error("give a config, or --render CSV")
    config = load_config(args.config)
    with one_thread():
        return run_command(args, config, argv)


def run_command(args: argparse.Namespace, config: dict[str, Any], argv: list[str] | None) -> int:
    """:func:`main`'s runs (not ``--render``), on one thread."""
    # tsrec is imported before the commit is read, so rows name the code that ran; Lightning too, so
    # that the first run's fit seconds do not include its import.
    import lightning.pytorch  # noqa: F401

    import tsrec.evaluation  # noqa: F401
    import tsrec.training  # noqa: F401

    runs = planned_runs(config, args)
    if any(model in STATSFORECAST_MODELS for _, model, _ in runs):
        warm_up_statsforecast()
    out_dir = args.out_dir or (Path(tempfile.mkdtemp(prefix="tsrec-unseen-")) if args.quick else RESULTS)
    ctx = Context(config, out_dir / config["output"], args.quick,
                  command_line("benchmarks.unseen_like", sys.argv[1:] if argv is None else argv), git_commit(),
                  args.rerun)
    failed = run_all(ctx, runs)
    if ctx.out.exists():
        print(render(ctx.out))
    if failed:
        print(f"benchmarks.unseen_like: {len(failed)} runs failed: {', '.join(failed)}; the same command runs them "
              "again (finished runs are skipped)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
