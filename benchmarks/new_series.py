"""Series new at predict: a model fitted without half of a panel's series forecasts them.

``python -m benchmarks.new_series [--datasets fertility us_employment macrodata] [--models default ridge ets]
[--seeds 0 1 2] [--out-dir DIR]`` loads each of unseen_like's multi-series public datasets
(``benchmarks/configs/unseen_like.toml``; their missing values carried forward as there), holds out
every other series (sorted by id, the second, fourth, ...) as new, and scores the rolling windows
of the last fifth of every series (``H`` apart, unseen_like's protocol) with ``tsrec.evaluation.backtest``
for each model fitted on the steps before the first origin two ways: on every series (``warm``),
and on the other half alone (``cold``: the held-out series are new to it, each scaled by its own
steps before the first origin, ``FittedState.with_new_series``). On the held-out series only: MASE
(each absolute error over the series' in-sample seasonal naive MAE before the first origin) and the
MSE of errors z-scored by each series' mean and standard deviation before it, per seed, and the
ratio cold / warm with its mean and spread over the seeds, with the fits' CPU seconds, the command,
commit and machine; for the default, the members and weights each fit chose. Run with
``OMP_NUM_THREADS=1``.
"""

from __future__ import annotations

import argparse
import sys
import time
import tomllib
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.common import seeds_report, write_report
from benchmarks.unseen_like import ID, TARGET, TIME, load_dataset, model_inputs

CONFIG = Path(__file__).parent / "configs" / "unseen_like.toml"
DATASETS = ("fertility", "us_employment", "macrodata")
MODELS = ("default", "ridge", "ets")
TEST_FRACTION = 0.2
#: The columns whose mean and spread over the seeds the report gives.
COLUMNS = ["warm_mase", "cold_mase", "mase_ratio", "mse_z_ratio", "warm_fit_cpu_s", "cold_fit_cpu_s"]


def held_out(ids: pd.Index) -> set[str]:
    """Every other series, sorted by id (the second, fourth, ...): new to the ``cold`` fits."""
    return set(sorted(ids)[1::2])


def scores(errors: pd.DataFrame, train: pd.DataFrame, new: set[str]) -> dict[str, float]:
    """MASE and z-scored MSE of a backtest's ``errors`` on the ``new`` series (``train``: every
    series' steps before the first origin, whose mean and std z-score the errors)."""
    rows = errors[errors.item_id.isin(new) & errors.observed & errors.forecast]
    stats = train.groupby(ID)[TARGET].agg(["mean", "std"])
    error = (rows.y_pred - rows.y_true) / rows.item_id.map(stats["std"])
    return {"mase": float((np.abs(rows.y_pred - rows.y_true) / rows.seasonal_error).mean()),
            "mse_z": float((error ** 2).mean()), "entries": len(rows)}


def run(model: str, seed: int, frame: pd.DataFrame, horizon: int, new: set[str]) -> dict[str, object]:
    """Both fits of ``model`` and their backtests' scores on the held-out series."""
    from tsrec import Forecaster
    from tsrec.evaluation import backtest

    frame = frame.rename(columns={ID: "unique_id", TIME: "ds", TARGET: "y"})
    length = int(frame.groupby("unique_id").size().min())
    first = length - round(TEST_FRACTION * length / horizon) * horizon  # the first origin
    start = frame.ds.drop_duplicates().sort_values().iloc[first]
    train = frame[frame.ds < start]
    out: dict[str, object] = {"model": model, "seed": seed}
    for name, fitted_on in (("warm", train), ("cold", train[~train.unique_id.isin(new)])):
        options = {} if model == "default" else {"model": model}
        started = time.process_time()
        forecaster = Forecaster(**options, prediction_length=horizon, seed=seed).fit(fitted_on)
        out[f"{name}_fit_cpu_s"] = time.process_time() - started
        if model == "default":  # the members and weights chosen on the series it was fitted on
            network = forecaster.resolved_settings.network
            out[f"{name}_members"] = " ".join(f"{m} {w:.2f}" for m, w in zip(network.members, network.weights))
        errors = backtest(forecaster, frame, start=start, stride=horizon, baselines=["naive"]).errors
        for key, value in scores(errors, train.rename(columns={"unique_id": ID, "y": TARGET}), new).items():
            out[f"{name}_{key}"] = value
    out["mase_ratio"] = out["cold_mase"] / out["warm_mase"]
    out["mse_z_ratio"] = out["cold_mse_z"] / out["warm_mse_z"]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.new_series", description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--out-dir", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args(argv)
    given = sys.argv[1:] if argv is None else argv
    warnings.simplefilter("ignore")
    specs = tomllib.loads(CONFIG.read_text())["datasets"]
    rows = []
    for dataset in args.datasets:
        spec = specs[dataset]
        frame = model_inputs(load_dataset(dataset, spec))[[ID, TIME, TARGET]]
        new = held_out(pd.Index(frame[ID].unique()))
        for model in args.models:
            for seed in args.seeds:
                rows.append({"dataset": dataset, "series": spec["series"], "new": len(new),
                             **run(model, seed, frame, spec["horizon"], new)})
                print(rows[-1], flush=True)
    table = pd.DataFrame(rows)
    table.insert(0, "run", table.dataset + " " + table.model)
    intro = (
        "Every other series of each dataset (sorted by id) held out; each model fitted on the steps before the "
        "test's first origin of every series (`warm`) or of the others alone (`cold`: the held-out series are new "
        "to it), then backtested over the last fifth of every series, `H` apart (`benchmarks/new_series.py`). "
        "Scores on the held-out series alone: MASE (absolute errors over each series' in-sample seasonal naive "
        "MAE) and the MSE of errors z-scored by each series' mean and std before the first origin; `ratio`: cold "
        "over warm (1: a new series forecast as well as a fitted one). "
        "For one model (`ridge`, `ets`) the ratio measures the forecast of a series it was not fitted on (`ets` "
        "then fits it at every origin, where the warm fit carries its parameters forward); for `default` it also "
        "measures a choice of members and weights made on the other half of the series (per seed, "
        "`warm_members` and `cold_members`).")
    text = seeds_report("Series new at predict", intro, table, COLUMNS, "benchmarks.new_series", given)
    write_report(args.out_dir / "new_series.md", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
