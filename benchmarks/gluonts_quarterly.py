"""tsrec's default GluonTS estimator against GluonTS's seasonal naive and AutoETS, on public quarterly panels.

``TsrecEstimator()`` (tsrec's default model, ``auto``, its conformal bands as ``QuantileForecast``)
and the baselines a GluonTS user reaches for are scored by GluonTS's own ``Evaluator`` on the same
windows (issue 48's targets).

Data (shipped inside the PyPI package statsmodels, loaded as ``benchmarks/unseen_like.py`` loads
them; nothing is downloaded or committed):

- ``macrodata``: 12 US macroeconomic series (FRED, BLS), quarterly 1959Q1 to 2009Q3, 203 quarters;
- ``danish_data``: Johansen and Juselius's Danish money demand data, 5 series, 1974Q1 to 1987Q3, 55
  quarters (short, as the hidden panel of issue 48: 4 series, 3 windows of 8).

Protocol, per dataset: horizon ``H = 8`` quarters; ``windows`` forecast origins ``stride`` steps
apart, the last window ending at the series' end (macrodata: 8 windows a year apart; danish_data:
2 windows a year apart, 43 quarters before the first origin). Every model trains once on each series cut at the first
origin, then forecasts every window from all the history before its origin. Scores: GluonTS's
``Evaluator`` with quantiles 0.05, 0.1, ..., 0.9, 0.95 (:data:`QUANTILES`), MASE against the
seasonal (4-quarter) naive error of each window's history, ``mean_wQuantileLoss`` over those
quantiles, ``Coverage[q]`` (the share of true values below the ``q`` quantile), MSE in the data's
units; CPU seconds are the process's user + system time of training and forecasting, one thread.

Models:

- ``tsrec default``: ``TsrecEstimator(prediction_length=8, quantiles=QUANTILES, seed=seed)``, nothing else set;
- ``tsrec default wql``: the same with ``eval_metric="wql"``: its candidates selected and weighted by the
  weighted quantile loss of their point forecasts (at level 0.5, the weighted absolute error) in
  place of MASE (issue 46's "the user's metric");
- ``tsrec rsa_patchtst``: ``TsrecEstimator("rsa_patchtst", ...)``, the estimator's default before issue 48
  (RSA in PatchTST, its own quantiles, the Forecaster's default budget);
- ``GluonTS SeasonalNaive``: ``gluonts.model.seasonal_naive.SeasonalNaivePredictor(season_length=4)``
  (a point forecast: every quantile is the forecast);
- ``GluonTS AutoETS``: ``gluonts.ext.statsforecast.AutoETSPredictor(season_length=4, quantile_levels=QUANTILES)``,
  statsforecast's AutoETS with its own intervals, fitted on each window's history.

Targets (issue 48): ``tsrec default`` at or below SeasonalNaive's MASE and AutoETS's
``mean_wQuantileLoss``, and its 5% and 95% quantiles' coverage within 5 points of 5% and 95% where
the windows can tell (two binomial standard errors, the ``series x windows`` draws counted as
independent, within 5 points).

Usage::

    python -m benchmarks.gluonts_quarterly [--datasets macrodata danish_data] [--models ...] [--seeds 0 1 2]
        [--out-dir benchmarks/results]
    python -m benchmarks.gluonts_quarterly --render benchmarks/results/gluonts_quarterly.csv
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchmarks.common import ROOT, command_line, git_commit, machine, markdown_table, now, write_csv

NAME = "gluonts_quarterly"
HORIZON, SEASON = 8, 4
QUANTILES = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95)
METRICS = ("MASE", "mean_wQuantileLoss", "Coverage[0.05]", "Coverage[0.95]", "MSE")
#: dataset -> (windows, stride)
DATASETS = {"macrodata": (8, 4), "danish_data": (2, 4)}
MODELS = ("tsrec default", "tsrec default wql", "tsrec rsa_patchtst", "GluonTS SeasonalNaive", "GluonTS AutoETS")
#: The tsrec models' estimator arguments beyond the protocol's (none: ``TsrecEstimator()``, the default).
TSREC_ARGUMENTS: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "tsrec default": ((), {}), "tsrec default wql": ((), {"eval_metric": "wql"}),
    "tsrec rsa_patchtst": (("rsa_patchtst",), {})}
SEEDED = tuple(TSREC_ARGUMENTS)  # the others are deterministic: one run, no seed
#: Coverage is judged where two binomial standard errors are within this many points.
TOLERANCE = 0.05


@dataclass(frozen=True)
class Windows:
    """One dataset's GluonTS entries: ``train`` (every series cut at the first origin), the test
    windows' ``inputs`` (each series up to an origin) and their ``truth`` (up to the origin + H)."""

    train: list[dict[str, Any]]
    inputs: list[dict[str, Any]]
    truth: list[pd.Series]
    series: int
    windows: int
    stride: int
    length: int


def load(name: str) -> Windows:
    """The windows of dataset ``name`` (:data:`DATASETS`)."""
    from benchmarks import unseen_like

    frame = unseen_like.LOADERS[name]()  # item_id, timestamp, target: quarter starts
    windows, stride = DATASETS[name]
    train, inputs, truth = [], [], []
    items = list(frame.groupby("item_id", sort=True))
    for item_id, rows in items:
        start = pd.Period(rows["timestamp"].iloc[0], freq="Q")
        values = rows["target"].to_numpy(np.float64)
        origins = [len(values) - HORIZON - stride * k for k in reversed(range(windows))]
        train.append({"start": start, "target": values[:origins[0]], "item_id": item_id})
        for origin in origins:
            inputs.append({"start": start, "target": values[:origin], "item_id": item_id})
            truth.append(pd.Series(values[:origin + HORIZON], index=pd.period_range(start, periods=origin + HORIZON)))
    return Windows(train, inputs, truth, len(items), windows, stride, len(items[0][1]))


def predictor(model: str, seed: int | None, data: Windows) -> Any:
    """``model`` trained on ``data.train`` (the GluonTS baselines need no training)."""
    if model in TSREC_ARGUMENTS:
        from tsrec.interop.gluonts import TsrecEstimator

        name, options = TSREC_ARGUMENTS[model]
        return TsrecEstimator(*name, prediction_length=HORIZON, quantiles=QUANTILES, seed=seed,
                              trainer_kwargs={"enable_progress_bar": False}, **options).train(data.train)
    if model == "GluonTS SeasonalNaive":
        from gluonts.model.seasonal_naive import SeasonalNaivePredictor

        return SeasonalNaivePredictor(prediction_length=HORIZON, season_length=SEASON)
    if model == "GluonTS AutoETS":
        from gluonts.ext.statsforecast import AutoETSPredictor

        return AutoETSPredictor(prediction_length=HORIZON, season_length=SEASON, quantile_levels=list(QUANTILES))
    raise ValueError(f"unknown model {model!r}; choose from {', '.join(MODELS)}")


def run_one(dataset: str, model: str, seed: int | None, data: Windows) -> dict[str, Any]:
    """Train, forecast every window, score: one CSV row."""
    from gluonts.evaluation import Evaluator

    started = time.process_time()
    fitted = predictor(model, seed, data)
    trained = time.process_time()
    forecasts = list(fitted.predict(data.inputs))
    done = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # GluonTS's own warnings about its metrics' NaN handling
        agg, _ = Evaluator(quantiles=QUANTILES, num_workers=0)(data.truth, forecasts, num_series=len(forecasts))
    return {**_describe(dataset, model, seed, data), "status": "ok", "note": "",
            **{metric: float(agg[metric]) for metric in METRICS},
            "train_cpu_s": round(trained - started, 2), "cpu_s": round(done - started, 2)}


def failed_run(dataset: str, model: str, seed: int | None, data: Windows, error: Exception) -> dict[str, Any]:
    """The row of a run that raised: its error, no scores."""
    note = " ".join(f"{type(error).__name__}: {error}".split())
    return {**_describe(dataset, model, seed, data), "status": "failed", "note": note[:300],
            **{metric: math.nan for metric in METRICS}, "train_cpu_s": math.nan, "cpu_s": math.nan}


def _describe(dataset: str, model: str, seed: int | None, data: Windows) -> dict[str, Any]:
    return {"dataset": dataset, "model": model, "seed": "" if seed is None else seed, "series": data.series,
            "length": data.length, "windows": data.windows, "stride": data.stride, "horizon": HORIZON}


def coverage_judged(draws: int, level: float) -> bool:
    """Whether ``draws`` independent windows tell a coverage ``level`` within :data:`TOLERANCE`:
    two binomial standard errors inside it."""
    return 2 * math.sqrt(level * (1 - level) / draws) <= TOLERANCE


def mean_spread(values: pd.Series, digits: int) -> str:
    """``mean ± sample std`` over seeds (the value alone for one run)."""
    values = values.astype(float)
    if len(values) == 1:
        return f"{values.iloc[0]:.{digits}f}"
    return f"{values.mean():.{digits}f} ± {values.std():.{digits}f}"


def verdicts(rows: pd.DataFrame) -> list[str]:
    """The targets, judged per dataset for ``tsrec default`` (seeds averaged)."""
    lines = []
    for dataset, runs in rows.groupby("dataset", sort=False):
        failed = runs[(runs.model == "tsrec default") & (runs.status != "ok")]
        if len(failed):
            lines.append(f"- **{dataset}**: **not met**, the default failed ({failed.note.iloc[0]})")
            continue
        mean = runs.groupby("model")[list(METRICS)].mean()
        if not {"tsrec default", "GluonTS SeasonalNaive", "GluonTS AutoETS"} <= set(mean.index):
            continue
        tsrec, naive, ets = mean.loc["tsrec default"], mean.loc["GluonTS SeasonalNaive"], mean.loc["GluonTS AutoETS"]
        seeds = runs[runs.model == "tsrec default"]
        draws = int(runs["series"].iloc[0] * runs["windows"].iloc[0])
        parts = []
        for metric, name, other in (("MASE", "SeasonalNaive", naive), ("mean_wQuantileLoss", "AutoETS", ets)):
            digits = 3 if metric == "MASE" else 4
            met = int((seeds[metric] <= other[metric]).sum())
            parts.append(f"{metric} {tsrec[metric]:.{digits}f} vs {name}'s {other[metric]:.{digits}f} "
                         f"({'met' if tsrec[metric] <= other[metric] else '**not met**'} on the mean; "
                         f"{met} of {len(seeds)} seeds)")
        for level in (0.05, 0.95):
            got = tsrec[f"Coverage[{level}]"]
            se = math.sqrt(level * (1 - level) / draws)
            if coverage_judged(draws, level):
                verdict = "met" if abs(got - level) <= TOLERANCE else "**not met**"
            else:
                verdict = f"not judged: {draws} windows, two standard errors {200 * se:.1f} points"
            parts.append(f"Coverage[{level}] {100 * got:.1f}% ({verdict})")
        lines.append(f"- **{dataset}** ({draws} series-windows): " + "; ".join(parts) + ".")
    return lines


def read(path: Path) -> pd.DataFrame:
    """The rows of a results CSV (a deterministic model's seed blank: NaN)."""
    return pd.read_csv(path).fillna({"note": ""})


def render(rows: pd.DataFrame) -> str:
    """The markdown report of the CSV ``rows``."""
    first = rows.iloc[0]
    table = []
    for (dataset, model), runs in rows.groupby(["dataset", "model"], sort=False):
        line = {"dataset": dataset, "model": model,
                "seeds": ",".join(str(int(s)) for s in runs.seed if pd.notna(s)) or "-"}
        ok = runs[runs.status == "ok"]
        if ok.empty:
            line.update({metric: "failed" for metric in METRICS}, **{"CPU s": "-"})
        else:
            line.update({metric: mean_spread(ok[metric], 3 if metric != "mean_wQuantileLoss" else 4)
                         for metric in METRICS})
            line["CPU s"] = mean_spread(ok["cpu_s"], 1)
        table.append(line)
    sets = ", ".join(f"{d} ({r.series} series of {r.length} quarters; {r.windows} windows {r.stride} apart)"
                     for d, r in rows.groupby("dataset", sort=False).first().iterrows())
    return "\n".join([
        "# tsrec's default GluonTS estimator on public quarterly panels", "",
        f"`{first.command}` at commit {first.commit} on {first.machine}, {first.date}.", "",
        f"Data: {sets}; horizon {HORIZON}. Each model trains once on the series cut at the first origin and "
        "forecasts every window from all the history before it. Scored by GluonTS's `Evaluator` "
        f"(quantiles {', '.join(map(str, QUANTILES))}; MASE against the 4-quarter seasonal naive error of each "
        "window's history). Mean ± sample std over seeds; CPU seconds of training and forecasting on one "
        "thread. Script and protocol: [benchmarks/gluonts_quarterly.py](../gluonts_quarterly.py).", "",
        markdown_table(pd.DataFrame(table)), "",
        "Issue 48's targets for `tsrec default` (`TsrecEstimator()`):", "",
        *verdicts(rows), "",
    ])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out-dir", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--render", type=Path, metavar="CSV", help="only redraw the markdown report of this CSV")
    args = parser.parse_args(argv)
    report = args.out_dir / f"{NAME}.md"
    if args.render is not None:
        report.write_text(render(read(args.render)))
        return 0
    import torch

    torch.set_num_threads(1)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    stamp = {"command": command_line(f"benchmarks.{NAME}", argv), "commit": git_commit(), "machine": machine(),
             "date": now()}
    rows = []
    for dataset in args.datasets:
        data = load(dataset)
        for model in args.models:
            for seed in args.seeds if model in SEEDED else [None]:
                try:
                    row = {**run_one(dataset, model, seed, data), **stamp}
                except Exception as error:  # reported in the table; the other runs carry on
                    row = {**failed_run(dataset, model, seed, data, error), **stamp}
                scores = ", ".join(f"{m} {row[m]:.4g}" for m in METRICS)
                print(f"{dataset} {model} seed {seed}: {row['status']} {scores}, {row['cpu_s']} CPU-s {row['note']}",
                      flush=True)
                rows.append(row)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    csv = args.out_dir / f"{NAME}.csv"
    write_csv(csv, rows)
    report.write_text(render(read(csv)))
    print(f"wrote {csv} and {report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
