"""What the skill table's statistical baselines cost in a default backtest, against statsforecast's
own ``cross_validation(refit=False)`` of the same models (issue 36, part 2).

Each of ``--series`` series of a long frame has ``--steps`` daily steps (a level, a weekly sine, a
slow trend, Gaussian noise). ``Forecaster("seasonal_naive", prediction_length=H)`` (nothing to
train, so only the baselines cost) is fitted on the steps before the test part and backtested on
each series' last ``--windows`` origins, ``H`` steps apart, with the default baselines (naive,
seasonal naive, ets and theta: AutoETS and AutoTheta fitted once per series on all the history
before its first origin and carried forward). The peer is ``StatsForecast(models=[AutoETS,
AutoTheta], freq="D", n_jobs=1).cross_validation(df, h=H, n_windows=..., step_size=H,
refit=False)`` with the season tsrec's skill table used, from the same long frame (renamed to
statsforecast's columns, outside the timing). A third row times the same backtest with the naive
baselines only (what the backtest costs without the statistical ones).

All in one process with ``OMP_NUM_THREADS=1``: an untimed warm-up of each side on a few series
(numba's compiled code loaded), then ``--repeats`` rounds per size, the sides interleaved in
alternating order. Timed: CPU seconds of the call (``time.process_time``), and wall seconds.
Each round also checks that tsrec's ets and theta columns equal statsforecast's forecasts (the
largest absolute difference is reported). Writes ``backtest_baselines.md``.

Usage::

    python -m benchmarks.backtest_baselines [--series 200 1000] [--steps 300] [--windows 10] [--repeats 3]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before numpy loads its BLAS

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from benchmarks.common import ROOT, command_line, git_commit, machine, now  # noqa: E402

HORIZON = 14
SEASON = 7
COLUMNS = {"id_col": "unique_id", "time_col": "ds", "target_col": "y"}
#: The sides, in the order of odd rounds (even rounds reverse it).
SIDES = ("tsrec", "statsforecast", "tsrec, naive baselines only")


def frame(n_series: int, steps: int, seed: int = 0) -> pd.DataFrame:
    """``n_series`` daily series of ``steps`` steps in statsforecast's long format (``unique_id``, ``ds``, ``y``)."""
    rng = np.random.default_rng(seed)
    t = np.arange(steps)
    level = rng.uniform(10, 50, (n_series, 1))
    y = (level + 0.01 * level * t / 7 + 0.1 * level * np.sin(2 * np.pi * t / SEASON + rng.uniform(0, 6, (n_series, 1)))
         + rng.standard_normal((n_series, steps)))
    return pd.DataFrame({"unique_id": np.repeat([f"s{i:05d}" for i in range(n_series)], steps),
                         "ds": np.tile(pd.date_range("2020-01-01", periods=steps, freq="D"), n_series),
                         "y": y.ravel()})


class Case:
    """One panel, a forecaster fitted on the steps before its test part, and the three timed calls."""

    def __init__(self, n_series: int, steps: int, windows: int) -> None:
        from tsrec import Forecaster

        self.df, self.windows = frame(n_series, steps), windows
        train = self.df[self.df.ds < self.df.ds.max() - pd.Timedelta(days=HORIZON * windows - 1)]
        self.forecaster = Forecaster("seasonal_naive", prediction_length=HORIZON).fit(train, **COLUMNS)
        self.season: int | None = None
        self.last: dict[str, pd.DataFrame] = {}

    def run(self, side: str) -> float:
        """CPU seconds of ``side``'s call (its result kept for :meth:`difference`)."""
        from statsforecast import StatsForecast
        from statsforecast.models import AutoETS, AutoTheta

        from tsrec.evaluation import backtest

        cpu = time.process_time()
        if side == "statsforecast":
            sf = StatsForecast(models=[AutoETS(season_length=self.season), AutoTheta(season_length=self.season)],
                               freq="D", n_jobs=1)
            self.last[side] = sf.cross_validation(df=self.df, h=HORIZON, n_windows=self.windows, step_size=HORIZON,
                                                  refit=False)
        else:
            baselines = ("naive", "seasonal_naive") if side.endswith("only") else None  # None: the default, all four
            result = backtest(self.forecaster, self.df, n_windows=self.windows, baselines=baselines, **COLUMNS)
            if baselines is None:
                self.last[side] = result.errors
                self.season = int(result.skill.set_index("baseline").loc["ets", "season"])
                self.fit = result.skill.set_index("baseline").loc["ets", "fit"]
        return time.process_time() - cpu

    def difference(self) -> float:
        """The largest absolute difference between tsrec's ets/theta forecasts and statsforecast's."""
        ours = self.last["tsrec"].sort_values(["item_id", "origin", "step"])
        theirs = self.last["statsforecast"].sort_values(["unique_id", "cutoff", "ds"])
        return max(float(np.max(np.abs(ours[f"y_{name}"].to_numpy() - theirs[model].to_numpy())))
                   for name, model in (("ets", "AutoETS"), ("theta", "AutoTheta")))


def spread(values: list[float]) -> str:
    """``mean ± standard deviation`` (the deviation only with two values or more)."""
    mean = statistics.fmean(values)
    return f"{mean:.2f} ± {statistics.stdev(values):.2f}" if len(values) > 1 else f"{mean:.2f}"


def main(argv: list[str] | None = None) -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--series", type=int, nargs="+", default=[200, 1_000])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--windows", type=int, default=10)
    parser.add_argument("--repeats", type=int, nargs="+", default=[3],
                        help="rounds per size (one number for all sizes, or one per size)")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args(argv)
    repeats = args.repeats * len(args.series) if len(args.repeats) == 1 else args.repeats
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    load = os.getloadavg()[0]
    warm = Case(5, args.steps, args.windows)  # numba's compiled code loaded before any timing
    for side in SIDES:
        warm.run(side)
    rows, checks = [], []
    for n_series, rounds in zip(args.series, repeats):
        case = Case(n_series, args.steps, args.windows)
        case.run("tsrec")  # untimed: the season statsforecast is given comes from tsrec's skill table
        times: dict[str, list[float]] = {side: [] for side in SIDES}
        for r in range(rounds):
            for side in SIDES if r % 2 == 0 else SIDES[::-1]:
                times[side].append(case.run(side))
                print(f"{n_series} series, round {r + 1}: {side} {times[side][-1]:.2f} CPU-s", flush=True)
            checks.append(case.difference())
        ratios = [t / s for t, s in zip(times["tsrec"], times["statsforecast"])]
        rows += [{"series": n_series, "side": side, "rounds": rounds, "cpu": spread(values),
                  "per_round": ", ".join(f"{v:.2f}" for v in values),
                  "ratio": spread(ratios) if side == "tsrec" else ""} for side, values in times.items()]
        fit, season = case.fit, case.season
    lines = ["| series | side | rounds | CPU s, mean ± sd | CPU s per round | tsrec / statsforecast, mean ± sd |",
             "|---:|---|---:|---:|---|---:|"]
    lines += [f"| {r['series']:,} | {r['side']} | {r['rounds']} | {r['cpu']} | {r['per_round']} | {r['ratio']} |"
              for r in rows]
    text = "\n".join([
        "# The skill table's statistical baselines against statsforecast's cross_validation(refit=False)",
        "",
        (f"A default `tsrec.evaluation.backtest` of `Forecaster(\"seasonal_naive\", prediction_length={HORIZON})` "
         f"(nothing to train: only the baselines cost) on N daily series of {args.steps} steps (weekly sine, trend, "
         f"noise), the last {args.windows} origins {HORIZON} steps apart, baselines naive, seasonal naive, ets and "
         f"theta (ets/theta: \"{fit}\", season {season}), against `StatsForecast([AutoETS, AutoTheta], freq='D', "
         f"n_jobs=1).cross_validation(h={HORIZON}, n_windows={args.windows}, step_size={HORIZON}, refit=False)` "
         "with the same season on the same frame, and the same backtest with the naive baselines only."),
        "",
        f"- command: `{command_line('benchmarks.backtest_baselines', sys.argv[1:] if argv is None else argv)}`",
        f"- git commit: `{git_commit()}`",
        f"- machine: {machine()}; OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}",
        (f"- date: {now()}; 1-min load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end "
         "(cores shared with other jobs: CPU seconds of the calling process, not wall time)"),
        ("- one process, a warm-up of every side first (numba's compiled code loaded), then the rounds with the "
         "sides interleaved in alternating order; the ratio is per round"),
        (f"- tsrec's ets and theta forecasts equal statsforecast's in every round: largest absolute difference "
         f"{max(checks):.3g}"),
        "",
        *lines,
    ]) + "\n"
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "backtest_baselines.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
