"""CPU cost of tsrec's statistical models against statsforecast's own call on the same panel.

``python -m benchmarks.stats_cost [--series 200] [--steps 300] [--repeats 2]`` fits and forecasts a
panel of positive monthly series (season 12) with ``Forecaster(name).fit(df).predict()`` and with
``StatsForecast(models=[...], freq="MS", n_jobs=1).forecast(df, h)``, interleaved, and prints each
one's CPU seconds (``time.process_time``; tsrec's split into ``fit``, where the models are fitted,
and ``predict``, where their parameters are applied to the history), their ratio and the largest
relative difference of the forecasts, and writes the table with the command, commit and machine
to ``stats_cost.md`` (``--out-dir``). Run with ``OMP_NUM_THREADS=1``.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

MODELS = {"ets": "AutoETS", "theta": "AutoTheta", "ces": "AutoCES", "dynamic_theta": "DynamicOptimizedTheta"}


def monthly_panel(series: int, steps: int, seed: int = 0) -> pd.DataFrame:
    """``series`` positive seasonal series of ``steps`` months, each with its own level, trend and phase."""
    rng = np.random.default_rng(seed)
    t = np.arange(steps)
    level, trend, phase = rng.uniform(20, 100, (3, series, 1)) * np.array([[[1.0]], [[0.002]], [[0.06]]])
    y = level * (1 + trend * t) * (1 + 0.2 * np.sin(2 * np.pi * t / 12 + phase)) + rng.standard_normal((series, steps))
    stamps = pd.date_range("2000-01-01", periods=steps, freq="MS")
    return pd.DataFrame({"unique_id": np.repeat([f"s{i:04d}" for i in range(series)], steps),
                         "ds": np.tile(stamps, series), "y": y.ravel()})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=200)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--horizon", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--out-dir", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args(argv)
    from benchmarks.common import command_line, git_commit, machine, now

    import statsforecast.models as sf_models
    from statsforecast import StatsForecast

    from tsrec import Forecaster

    df = monthly_panel(args.series, args.steps)
    columns = {"id_col": "unique_id", "time_col": "ds", "target_col": "y"}
    # warm both paths up once (imports, compiled code)
    StatsForecast(models=[sf_models.AutoETS(season_length=12)], freq="MS", n_jobs=1).forecast(df=df.head(300), h=2)
    lines = ["# tsrec's statistical models against statsforecast's own call", "",
             f"{args.series} monthly series x {args.steps} steps, horizon {args.horizon}, season 12: "
             "`Forecaster(name).fit(df).predict()` against `StatsForecast(models=[...], freq='MS', n_jobs=1)"
             ".forecast(df, h)`, interleaved; CPU seconds (`time.process_time`), medians of "
             f"{args.repeats} runs (`benchmarks/stats_cost.py`).", "",
             "| model | tsrec CPU s | of which predict | statsforecast CPU s | ratio | runs (tsrec; statsforecast) | "
             "largest relative difference of the forecasts |", "|---|---|---|---|---|---|---|"]
    print("\n".join(lines))
    for name in args.models:
        tsrec_s, predict_s, sf_s = [], [], []
        for _ in range(args.repeats):  # interleaved
            started = time.process_time()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                fitted = Forecaster(name, prediction_length=args.horizon).fit(df, **columns)
                predicting = time.process_time()
                ours = fitted.predict()
            tsrec_s.append(time.process_time() - started)
            predict_s.append(time.process_time() - predicting)
            started = time.process_time()
            model = getattr(sf_models, MODELS[name])(season_length=12)
            theirs = StatsForecast(models=[model], freq="MS", n_jobs=1).forecast(df=df, h=args.horizon)
            sf_s.append(time.process_time() - started)
        ours = ours.sort_values(["item_id", "timestamp"])["mean"].to_numpy()
        theirs = theirs.sort_values(["unique_id", "ds"])[repr(model)].to_numpy()
        difference = float(np.max(np.abs(ours - theirs) / np.abs(theirs)))
        lines.append(f"| {name} | {np.median(tsrec_s):.2f} | {np.median(predict_s):.3f} | {np.median(sf_s):.2f} | "
                     f"{np.median(tsrec_s) / np.median(sf_s):.2f}x | {', '.join(f'{x:.2f}' for x in tsrec_s)}; "
                     f"{', '.join(f'{x:.2f}' for x in sf_s)} | {difference:.1e} |")
        print(lines[-1], flush=True)
    command = command_line("benchmarks.stats_cost", sys.argv[1:] if argv is None else argv)
    lines += ["", f"Command: `OMP_NUM_THREADS=1 {command}`; commit {git_commit()}; machine: {machine()}; {now()}.", ""]
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "stats_cost.md").write_text("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
