"""auto on many short seasonal series: the series whose validation would cost them their season left out or kept.

``python -m benchmarks.short_seasons [--seeds 0 1 2] [--series 1000] [--out-dir DIR]``
draws a synthetic panel per seed (:func:`panel`: ``--series`` monthly series of 3 to 6 years, a
yearly cycle whose size follows the level, a random walk and noise; the last 12 months of each are
the test), and fits on the rest, one after the other: the default ``Forecaster(prediction_length=12)``
as it is (series whose steps before the validation windows hold fewer than two years, where all of
them hold two, left out of the validation: ``tsrec.auto._seasons_kept``), the default with every
series long enough validated (the rule switched off), and ``ces``, ``ets`` and ``seasonal_naive``
alone. Prints and writes (``short_seasons.md`` in ``--out-dir``) each run's test MAE and MASE (over
each series' in-sample seasonal naive MAE), its fit's CPU seconds and the default's members, per
seed and as mean and spread over the seeds, with the command, commit and machine. Run with
``OMP_NUM_THREADS=1``.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
import warnings
from pathlib import Path
from unittest import mock

import numpy as np
import pandas as pd

from benchmarks.common import seeded_runs, seeds_report, write_report

HORIZON = 12
RUNS = ("default", "default, every series validated", "ces", "ets", "seasonal_naive")


def panel(series: int, seed: int) -> pd.DataFrame:
    """A long frame (``unique_id``, ``ds``, ``y``) of ``series`` monthly series of 36 to 72 months
    ending on the same month: a level, a yearly cycle of a fifth of it, a random walk and noise."""
    rng = np.random.default_rng(seed)
    frames = []
    for i in range(series):
        length = int(rng.integers(36, 73))
        t = np.arange(length)
        y = rng.uniform(50, 500) * (1 + 0.2 * np.sin(2 * np.pi * (t + rng.integers(12)) / 12)) \
            + np.cumsum(rng.normal(0, 3, length)) + rng.normal(0, 5, length)
        frames.append(pd.DataFrame({"unique_id": f"s{i}", "ds": pd.date_range(end="2024-12-01", periods=length,
                                                                                freq="MS"), "y": y}))
    return pd.concat(frames, ignore_index=True)


def run(name: str, train: pd.DataFrame, test: pd.DataFrame) -> dict[str, object]:
    """One fit of run ``name`` (:data:`RUNS`) on ``train`` and its forecast scored on ``test``."""
    from tsrec import Forecaster

    started = time.process_time()
    if name.startswith("default"):
        every = mock.patch("tsrec.auto._seasons_kept", lambda ends, validated, span, season: validated) \
            if name != "default" else contextlib.nullcontext()
        with every:
            fitted = Forecaster(prediction_length=HORIZON).fit(train)
    else:
        fitted = Forecaster(name, prediction_length=HORIZON).fit(train)
    seconds = time.process_time() - started
    forecast = fitted.predict().rename(columns={"item_id": "unique_id", "timestamp": "ds"})
    scored = forecast.merge(test, on=["unique_id", "ds"])
    scale = train.groupby("unique_id").y.apply(lambda y: np.mean(np.abs(y.to_numpy()[12:] - y.to_numpy()[:-12])))
    error = np.abs(scored["mean"] - scored.y)
    members = ""
    if name.startswith("default"):
        network = fitted.resolved_settings.network
        members = ", ".join(f"{m} {w:.2f}" for m, w in zip(network.members, network.weights))
    return {"mae": float(error.mean()), "mase": float((error / scored.unique_id.map(scale)).mean()),
            "fit_cpu_s": seconds, "members": members,
            "validation": fitted.leaderboard.attrs.get("validation", "") if name.startswith("default") else ""}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.short_seasons", description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--series", type=int, default=1000)
    parser.add_argument("--out-dir", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args(argv)
    given = sys.argv[1:] if argv is None else argv
    warnings.simplefilter("ignore")
    table = seeded_runs(args.seeds, lambda seed: panel(args.series, seed), RUNS, HORIZON, run)
    text = seeds_report(
        "auto on many short seasonal series",
        f"{args.series} synthetic monthly series of 36 to 72 months per seed (`benchmarks/short_seasons.py`), "
        f"the last {HORIZON} of each the test; the default as it is, the default with every series long enough "
        "validated (before the rule that leaves out a series whose steps before its validation windows hold fewer "
        "than two years where all of them hold two), and three statistical models alone.",
        table, ["mae", "mase", "fit_cpu_s"], "benchmarks.short_seasons", given)
    write_report(args.out_dir / "short_seasons.md", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
