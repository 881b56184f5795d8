"""What the default model (``Forecaster(prediction_length=H)``, the auto selection) costs to fit,
against statsforecast's ensemble (AutoETS + AutoCES + AutoTheta, fit and forecast) on the same data,
interleaved, in CPU seconds on one thread.

    OMP_NUM_THREADS=1 python -m benchmarks.auto_cost [--repeats 2] [--datasets NAME ...] [--out-dir DIR]

Datasets (default :data:`DATASETS`): those of ``benchmarks/configs/unseen_like.toml`` (loaded from their PyPI packages, each
series' first 80%, as the benchmark fits on), and ``monthly_panel``, a synthetic panel of 145
monthly series of 285 steps (trend, a yearly cycle and noise; the issue-36 shape). Prints one row per
dataset: observations, tsrec's fit CPU seconds (and its predict's), statsforecast's, their ratio
(the median over the repeats), and what the default chose (its leaderboard's members and notes);
writes the table with the command, commit and machine to ``auto_cost.md``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import tomllib
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

CONFIG = Path(__file__).parent / "configs" / "unseen_like.toml"
#: The datasets measured by default (``monthly_panel`` is synthetic, the others unseen_like's).
DATASETS = ["macrodata", "us_employment", "elec_equip", "monthly_panel"]


def monthly_panel(series: int = 145, steps: int = 285, seed: int = 0) -> tuple[pd.DataFrame, int, int]:
    """A long frame (``item_id``, ``timestamp``, ``target``) of ``series`` monthly series, horizon 18, season 12."""
    rng = np.random.default_rng(seed)
    t = np.arange(steps)
    frames = []
    for i in range(series):
        level, slope, amp = rng.uniform(50, 150), rng.normal(0, 0.1), rng.uniform(2, 15)
        y = level + slope * t + amp * np.sin(2 * np.pi * (t + rng.integers(12)) / 12) + rng.normal(0, 2, steps)
        y += np.cumsum(rng.normal(0, 0.5, steps))
        frames.append(pd.DataFrame({"item_id": f"s{i}", "timestamp": pd.date_range("2000-01-01", periods=steps,
                                                                                    freq="MS"), "target": y}))
    return pd.concat(frames, ignore_index=True), 18, 12


def unseen_like(name: str) -> tuple[pd.DataFrame, int, int]:
    """Dataset ``name`` of the unseen_like config: its first 80% per series (missing values carried
    forward, as the benchmark's models read them), its horizon and season."""
    from benchmarks.unseen_like import load_dataset, model_inputs

    spec = tomllib.loads(CONFIG.read_text())["datasets"][name]
    frame = model_inputs(load_dataset(name, spec))
    keep = int(0.8 * spec["length"])
    frame = frame.groupby("item_id", group_keys=False).head(keep).reset_index(drop=True)
    return frame, spec["horizon"], spec["season"]


def cpu(call):
    """``call()``'s result and the CPU seconds it took (this process, every thread)."""
    started = time.process_time()
    result = call()
    return result, time.process_time() - started


def fit_tsrec(frame: pd.DataFrame, horizon: int):
    from tsrec import Forecaster

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        forecaster, seconds = cpu(lambda: Forecaster(prediction_length=horizon, seed=0, trainer_kwargs={
            "enable_progress_bar": False, "logger": False}).fit(frame, id_col="item_id", time_col="timestamp",
                                                              target_col="target"))
        _, predict_seconds = cpu(forecaster.predict)
    return forecaster, seconds, predict_seconds


def fit_statsforecast(frame: pd.DataFrame, horizon: int, season: int, freq: str) -> float:
    from statsforecast import StatsForecast
    from statsforecast.models import AutoCES, AutoETS, AutoTheta

    df = frame.rename(columns={"item_id": "unique_id", "timestamp": "ds", "target": "y"})
    models = [AutoETS(season_length=season), AutoCES(season_length=season), AutoTheta(season_length=season)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, seconds = cpu(lambda: StatsForecast(models=models, freq=freq, n_jobs=1).forecast(df=df, h=horizon))
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--datasets", nargs="+", default=DATASETS)
    parser.add_argument("--out-dir", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args(argv)
    if os.environ.get("OMP_NUM_THREADS") != "1":
        parser.error("run with OMP_NUM_THREADS=1 (one thread, as the issue's target is stated)")
    import torch

    from benchmarks.common import command_line, git_commit, machine, now

    torch.set_num_threads(1)
    provenance = (f"Command: `OMP_NUM_THREADS=1 {command_line('benchmarks.auto_cost', sys.argv[1:] if argv is None else argv)}`; "
                  f"commit {git_commit()}; machine: {machine()}; {now()}; medians of {args.repeats} interleaved runs.")
    lines = ["# The default's fit against statsforecast's ensemble", "",
             "CPU seconds on one thread (`benchmarks/auto_cost.py`): the default Forecaster's fit and predict, and "
             "statsforecast's AutoETS + AutoCES + AutoTheta fit and forecast on the same data, interleaved.", "",
             "| dataset | series x steps | observations | tsrec fit CPU-s | tsrec predict CPU-s | statsforecast "
             "CPU-s | fit ratio | chosen | notes |", "|---|---|---|---|---|---|---|---|---|"]
    print("\n".join(lines[-2:]))
    for name in args.datasets:
        frame, horizon, season = monthly_panel() if name == "monthly_panel" else unseen_like(name)
        freq = pd.infer_freq(frame.loc[frame.item_id == frame.item_id.iloc[0], "timestamp"])
        ours, theirs, predicts, forecaster = [], [], [], None
        for _ in range(args.repeats):  # interleaved, so that a busy machine slows both alike
            theirs.append(fit_statsforecast(frame, horizon, season, freq))
            forecaster, seconds, predict_seconds = fit_tsrec(frame, horizon)
            ours.append(seconds)
            predicts.append(predict_seconds)
        board = forecaster.leaderboard
        chosen = ", ".join(f"{m} {w:.2f}" for m, w in zip(board.model, board.weight) if w > 0)
        notes = "; ".join(f"{m}: {n}" for m, n in zip(board.model, board.note) if n)
        series = frame.item_id.nunique()
        lines.append(f"| {name} | {series} x {len(frame) // series} | {frame.target.notna().sum()} | "
                     f"{np.median(ours):.1f} | {np.median(predicts):.1f} | {np.median(theirs):.1f} | "
                     f"{np.median(ours) / np.median(theirs):.2f}x | {chosen} | {notes} |")
        print(lines[-1], flush=True)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "auto_cost.md").write_text("\n".join([*lines, "", provenance, ""]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
