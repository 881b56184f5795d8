"""What the default model (``Forecaster(prediction_length=H)``, the auto selection) costs to fit,
predict and backtest, against statsforecast on the same data, interleaved, in CPU seconds on one
thread; and against another checkout of tsrec (``--code DIR``, e.g. an earlier commit's worktree).

    OMP_NUM_THREADS=1 python -m benchmarks.auto_cost [--repeats 2] [--datasets NAME ...] [--code DIR]
        [--out-dir DIR]

Datasets (default :data:`DATASETS`): those of ``benchmarks/configs/unseen_like.toml`` (loaded from
their PyPI packages, each series' first 80%, as the benchmark fits on), ``monthly_panel``, a synthetic panel of 145
monthly series of 285 steps (trend, a yearly cycle and noise; the issue-36 shape), ``daily_panel``, 8
synthetic daily series of 6,000 days (issue 46's backtest target: ``--backtest-windows 60``),
``half_hourly``, one synthetic half-hourly series of 12 weeks with a daily and a weekly cycle (MSTL's shape), and
``hourly_panel``, 50 synthetic hourly series of 4,000 hours with a daily and a weekly cycle (a load panel).

Per dataset and repeat, one after another: statsforecast's AutoETS + AutoCES + AutoTheta fit and
forecast (this process); the default fitted, its ``predict`` and a 10-window (``--backtest-windows``) backtest of it (no
refit, ``baselines=()``) in a fresh process of this checkout; the same fit and predict in a fresh
process of ``--code`` (when given); and statsforecast's ``cross_validation(refit=False)`` over the
same windows of the statistical members the default chose (each process measures its own CPU
seconds: torch's, Lightning's and tsrec's imports are not counted (Lightning and ``torch._dynamo``
are imported before the timing on both sides: an earlier checkout's ``import tsrec`` loaded them, and
this one's fit loads them where a network trains; :mod:`benchmarks.process_cost` times whole
processes); what a checkout imports when its fit first needs it, statsforecast's models and
scikit-learn's trees, is, as it is in a user's first fit in a process: 0.5 and 0.3 CPU-s on one
Intel Xeon core). Prints one row per dataset (medians over the repeats) and
writes the table with the command, commit and machine to ``auto_cost.md``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

CONFIG = Path(__file__).parent / "configs" / "unseen_like.toml"
#: The datasets measured by default (``monthly_panel`` is synthetic, the others unseen_like's).
DATASETS = ["macrodata", "us_employment", "elec_equip", "monthly_panel"]


def _long_frame(values: list[np.ndarray], prefix: str, start: str, freq: str) -> pd.DataFrame:
    """A long frame (``item_id``, ``timestamp``, ``target``) of one series per array of ``values``, named
    ``prefix`` and its position, each from ``start`` at ``freq``."""
    return pd.concat([pd.DataFrame({"item_id": f"{prefix}{i}", "timestamp": pd.date_range(start, periods=len(y),
                                                                                         freq=freq), "target": y})
                      for i, y in enumerate(values)], ignore_index=True)


def monthly_panel(series: int = 145, steps: int = 285, seed: int = 0) -> tuple[pd.DataFrame, int, int]:
    """A long frame (``item_id``, ``timestamp``, ``target``) of ``series`` monthly series, horizon 18, season 12."""
    rng = np.random.default_rng(seed)
    t = np.arange(steps)
    values = []
    for _ in range(series):
        level, slope, amp = rng.uniform(50, 150), rng.normal(0, 0.1), rng.uniform(2, 15)
        y = level + slope * t + amp * np.sin(2 * np.pi * (t + rng.integers(12)) / 12) + rng.normal(0, 2, steps)
        values.append(y + np.cumsum(rng.normal(0, 0.5, steps)))
    return _long_frame(values, "s", "2000-01-01", "MS"), 18, 12


def daily_panel(series: int = 8, steps: int = 6000, seed: int = 0) -> tuple[pd.DataFrame, int, int]:
    """A long frame of ``series`` daily series of ``steps`` days (a random-walk level, a weekly and a
    yearly cycle, noise; issue 46's 8 x 6,000 daily panel), horizon 14, season 7."""
    rng = np.random.default_rng(seed)
    t = np.arange(steps)
    values = []
    for _ in range(series):
        weekly, yearly = rng.normal(0, 3, 7), rng.uniform(5, 20)
        values.append(rng.uniform(50, 150) + weekly[t % 7]
                      + yearly * np.sin(2 * np.pi * (t + rng.integers(365)) / 365.25)
                      + np.cumsum(rng.normal(0, 0.3, steps)) + rng.normal(0, 2, steps))
    return _long_frame(values, "d", "2000-01-01", "D"), 14, 7


def half_hourly(steps: int = 4032, seed: int = 0) -> tuple[pd.DataFrame, int, int]:
    """One half-hourly series of ``steps`` (12 weeks: a load-like daily profile, quieter weekends, a
    slow random-walk level and noise), horizon 48 (a day), season 48: the shape where auto tries
    MSTL (a day and a week)."""
    rng = np.random.default_rng(seed)
    t = np.arange(steps)
    day = 30 + 10 * np.sin(2 * np.pi * (t % 48) / 48 - 2) + 4 * np.sin(4 * np.pi * (t % 48) / 48)
    weekend = np.where((t // 48) % 7 >= 5, 0.8, 1.0)
    y = 100 + np.cumsum(rng.normal(0, 0.2, steps)) + day * weekend + rng.normal(0, 1.5, steps)
    return pd.DataFrame({"item_id": "load", "timestamp": pd.date_range("2000-06-05", periods=steps, freq="30min"),
                         "target": y}), 48, 48


def hourly_panel(series: int = 50, steps: int = 4000, seed: int = 0) -> tuple[pd.DataFrame, int, int]:
    """A long frame of ``series`` hourly series of ``steps`` hours (a daily cycle of its own phase and
    size, a weekly one, a random-walk level, noise): a load or sensor panel of 200,000 observations,
    horizon 24, season 24 (auto tries MSTL there: a day and a week)."""
    rng = np.random.default_rng(seed)
    t = np.arange(steps)
    values = [100 + rng.uniform(5, 20) * np.sin(2 * np.pi * (t + rng.integers(24)) / 24)
              + rng.uniform(0, 10) * np.sin(2 * np.pi * t / 168) + np.cumsum(rng.normal(0, 0.3, steps))
              + rng.normal(0, 2, steps) for _ in range(series)]
    return _long_frame(values, "h", "2020-01-01", "h"), 24, 24


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


#: statsforecast's class of each statistical candidate of the default.
STATSFORECAST = {"ets": "AutoETS", "theta": "AutoTheta", "ces": "AutoCES", "dynamic_theta": "DynamicOptimizedTheta"}
#: The backtest's windows by default (the issue-45 target: at most 2x statsforecast's refit=False
#: cross-validation; issue 46's is 60 windows of the 8 x 6,000 daily panel, ``--backtest-windows 60``).
BACKTEST_WINDOWS = 10
#: The synthetic datasets, by name.
SYNTHETIC = {"monthly_panel": monthly_panel, "daily_panel": daily_panel, "half_hourly": half_hourly,
             "hourly_panel": hourly_panel}


def load(name: str) -> tuple[pd.DataFrame, int, int]:
    """Dataset ``name``: its frame, horizon and season."""
    return SYNTHETIC[name]() if name in SYNTHETIC else unseen_like(name)


def worker(path: Path, horizon: int, backtests: bool, wanted: int = BACKTEST_WINDOWS) -> dict:
    """The default fitted, in this process, on the frame pickled at ``path``: its fit, predict and
    (``backtests``) ``wanted``-window backtest CPU seconds, what it chose and why. Imports tsrec alone (from
    whichever checkout is first on the path), no benchmark module."""
    # tsrec loads these two when a network trains: here, untimed, on both sides (see the module).
    import lightning.pytorch  # noqa: F401
    import torch
    import torch._dynamo

    from tsrec import Forecaster

    torch.set_num_threads(1)
    frame = pd.read_pickle(path)
    columns = dict(id_col="item_id", time_col="timestamp", target_col="target")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        forecaster, fit_seconds = cpu(lambda: Forecaster(prediction_length=horizon, seed=0, trainer_kwargs={
            "enable_progress_bar": False, "logger": False}).fit(frame, **columns))
        _, predict_seconds = cpu(forecaster.predict)
        backtest_seconds, windows = math.nan, windows_of(frame, horizon, wanted)
        if backtests:
            from tsrec.evaluation import backtest

            _, backtest_seconds = cpu(lambda: backtest(forecaster, frame, n_windows=windows, baselines=(), **columns))
    board = forecaster.leaderboard
    network = forecaster.resolved_settings.network  # the ensemble's members and their settings
    members = dict(zip(getattr(network, "members", ()), getattr(network, "member_configs", ())))
    return {"fit": fit_seconds, "predict": predict_seconds, "backtest": backtest_seconds, "windows": windows,
            "mstl_seasons": members.get("mstl", {}).get("season_lengths"),
            "chosen": {m: float(w) for m, w in zip(board.model, board.weight) if w > 0},
            "notes": {m: n for m, n in zip(board.model, board.note) if isinstance(n, str) and n}}


def windows_of(frame: pd.DataFrame, horizon: int, wanted: int) -> int:
    """The backtest's windows on ``frame``: ``wanted``, or as many one horizon apart as its shortest
    series holds after a first step."""
    return int(min(wanted, (frame.groupby("item_id").size().min() - 1) // horizon))


def run_worker(code: Path, path: Path, horizon: int, backtests: bool, wanted: int = BACKTEST_WINDOWS) -> dict:
    """:func:`worker` in a fresh process that imports tsrec from the checkout ``code`` (this file run
    as a script from there, with ``code`` alone on ``PYTHONPATH``)."""
    env = {**os.environ, "PYTHONPATH": str(code), "OMP_NUM_THREADS": "1"}
    argv = [sys.executable, str(Path(__file__).resolve()), "--worker", str(path), "--horizon", str(horizon),
            "--backtest-windows", str(wanted)]
    out = subprocess.run(argv + (["--backtest"] if backtests else []), env=env, capture_output=True, text=True,
                         check=True, cwd=code)
    return json.loads(out.stdout.strip().splitlines()[-1])


def fit_statsforecast(frame: pd.DataFrame, horizon: int, season: int, freq: str) -> float:
    from statsforecast import StatsForecast
    from statsforecast.models import AutoCES, AutoETS, AutoTheta

    df = frame.rename(columns={"item_id": "unique_id", "timestamp": "ds", "target": "y"})
    models = [AutoETS(season_length=season), AutoCES(season_length=season), AutoTheta(season_length=season)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, seconds = cpu(lambda: StatsForecast(models=models, freq=freq, n_jobs=1).forecast(df=df, h=horizon))
    return seconds


def cross_validation(frame: pd.DataFrame, horizon: int, season: int, freq: str, members: list[str],
                     wanted: int = BACKTEST_WINDOWS, mstl_seasons: list[int] | None = None) -> float:
    """statsforecast's ``cross_validation(refit=False)`` over the backtest's windows
    (:func:`windows_of`), one horizon apart, of the statistical ``members`` (an ``mstl`` member with
    the ``mstl_seasons`` and STL jumps it was fitted with; CPU seconds; NaN without any)."""
    import statsforecast.models as sf
    from statsforecast import StatsForecast

    from tsrec.models.stats import stl_jumps

    models = [getattr(sf, STATSFORECAST[m])(season_length=season) for m in members if m in STATSFORECAST]
    if "mstl" in members and mstl_seasons:
        models.append(sf.MSTL(season_length=list(mstl_seasons), stl_kwargs=stl_jumps(mstl_seasons)))
    if not models:
        return math.nan
    df = frame.rename(columns={"item_id": "unique_id", "timestamp": "ds", "target": "y"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, seconds = cpu(lambda: StatsForecast(models=models, freq=freq, n_jobs=1).cross_validation(
            df=df, h=horizon, n_windows=windows_of(frame, horizon, wanted), step_size=horizon, refit=False))
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--datasets", nargs="+", default=DATASETS)
    parser.add_argument("--code", type=Path, help="another checkout of tsrec, measured the same way, interleaved")
    parser.add_argument("--out-dir", type=Path, default=Path(__file__).parent / "results")
    parser.add_argument("--backtest-windows", type=int, default=BACKTEST_WINDOWS,
                        help="the backtest's windows, one horizon apart (fewer where the shortest series holds fewer)")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--horizon", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--backtest", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if os.environ.get("OMP_NUM_THREADS") != "1":
        parser.error("run with OMP_NUM_THREADS=1 (one thread, as the issue's target is stated)")
    if args.worker:
        print(json.dumps(worker(args.worker, args.horizon, args.backtest, args.backtest_windows)))
        return 0
    from benchmarks.common import command_line, git_commit, machine, now

    here = Path(__file__).resolve().parents[1]
    command = command_line("benchmarks.auto_cost", sys.argv[1:] if argv is None else argv)
    provenance = (f"Command: `OMP_NUM_THREADS=1 {command}`; commit {git_commit()}; machine: {machine()}; {now()}; "
                  f"medians of {args.repeats} interleaved runs.")
    earlier = "" if args.code is None else f"; `earlier`: the checkout at {args.code}"
    header = ["dataset", "series x steps", "observations", "fit CPU-s", "predict CPU-s", "predict / fit",
              "statsforecast CPU-s", "fit ratio", "backtest CPU-s", "sf cross_validation CPU-s", "backtest ratio",
              "chosen", *([] if args.code is None else ["earlier fit CPU-s", "fit vs earlier", "earlier predict CPU-s",
                                                        "fit + predict vs earlier", "earlier chosen"]),
              "notes"]
    lines = ["# The default's fit, predict and backtest against statsforecast", "",
             "CPU seconds on one thread (`benchmarks/auto_cost.py`): the default Forecaster's fit, predict and "
             f"{args.backtest_windows}-window backtest (fewer where the shortest series holds fewer), statsforecast's "
             "AutoETS + AutoCES + AutoTheta fit and forecast on "
             "the same data, and statsforecast's cross_validation(refit=False) of the statistical members chosen "
             f"over the same windows, interleaved{earlier}.", "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    print("\n".join(lines[-2:]))
    folder = Path(tempfile.mkdtemp(prefix="tsrec-auto-cost-"))
    for name in args.datasets:
        frame, horizon, season = load(name)
        path = folder / f"{name}.pkl"
        frame.to_pickle(path)
        freq = pd.infer_freq(frame.loc[frame.item_id == frame.item_id.iloc[0], "timestamp"])
        runs, before, theirs, validations = [], [], [], []
        for _ in range(args.repeats):  # interleaved, so that a busy machine slows every side alike
            theirs.append(fit_statsforecast(frame, horizon, season, freq))
            runs.append(run_worker(here, path, horizon, backtests=True, wanted=args.backtest_windows))
            if args.code is not None:
                before.append(run_worker(args.code, path, horizon, backtests=False))
            validations.append(cross_validation(frame, horizon, season, freq, list(runs[-1]["chosen"]),
                                                args.backtest_windows, runs[-1].get("mstl_seasons")))
        fit, predict, backtest = (float(np.median([r[key] for r in runs])) for key in ("fit", "predict", "backtest"))
        sf, cv = float(np.median(theirs)), float(np.median(validations))
        chosen = ", ".join(f"{m} {w:.2f}" for m, w in runs[-1]["chosen"].items())
        notes = "; ".join(f"{m}: {n}" for m, n in runs[-1]["notes"].items())
        series = frame.item_id.nunique()
        row = (f"| {name} | {series} x {len(frame) // series} | {frame.target.notna().sum()} | {fit:.1f} | "
               f"{predict:.2f} | {predict / fit:.3f} | {sf:.1f} | {fit / sf:.2f}x | {backtest:.1f} | {cv:.1f} | "
               f"{backtest / cv:.2f}x | {chosen}")
        if args.code is not None:
            old_fit, old_predict = (float(np.median([r[key] for r in before])) for key in ("fit", "predict"))
            row += (f" | {old_fit:.1f} | {fit / old_fit:.2f}x | {old_predict:.2f} | "
                    f"{(fit + predict) / (old_fit + old_predict):.2f}x | "
                    + ", ".join(f"{m} {w:.2f}" for m, w in before[-1]["chosen"].items()))
        lines.append(row + f" | {notes} |")
        print(lines[-1], flush=True)
    shutil.rmtree(folder)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "auto_cost.md").write_text("\n".join([*lines, "", provenance, ""]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
