"""What the statistical models cost in a backtest and at predict, against statsforecast's own
``cross_validation(refit=False)`` of the same models (issues 36 and 45).

Panels (each series a level, a seasonal sine, a slow trend and Gaussian noise; statsforecast's long
format, ``unique_id``, ``ds``, ``y``):

- ``weekly``: 7 series of 773 weekly steps, horizon 13 (the panel of issue 45);
- ``daily``: 8 series of 6,000 daily steps, horizon 14;
- ``panel``: ``--series`` daily series of 300 steps, horizon 14 (many short series).

Timed sides, each the last ``--windows`` origins of every series, a horizon apart:

- ``<model> backtest``: ``Forecaster(model)`` (``ets`` or ``theta``) fitted on each series'
  steps before its first origin, then ``backtest(f, df, n_windows=..., baselines=())``: the fit
  carried forward over the windows. Its peer, ``<model> statsforecast``:
  ``StatsForecast([AutoETS | AutoTheta](season_length=<the season tsrec resolved>), freq, n_jobs=1)
  .cross_validation(df, h, n_windows, step_size=h, refit=False)`` (its fit included).
- ``baselines backtest`` (``panel`` only): a default backtest of ``Forecaster("seasonal_naive")``
  (nothing to train: only the baselines cost; naive, seasonal naive, ets and theta, each the
  registered model fitted before the first origin), against ``baselines statsforecast``:
  ``cross_validation(refit=False)`` of AutoETS and AutoTheta together, with the skill table's season.
- ``<model> fit`` and ``<model> predict``: ``Forecaster(model).fit(df)`` on all of each series, then
  ``predict()`` (the parameters applied to the history, nothing fitted again).

All in one process with ``OMP_NUM_THREADS=1`` and one torch thread: an untimed warm-up of every side
on a small panel (numba's compiled code loaded), then ``--repeats`` rounds per panel, the sides
interleaved, in reversed order every other round. Timed: CPU seconds of the call
(``time.process_time``); the ratios are per round. Each round checks that tsrec's forecasts equal
statsforecast's (the largest relative difference is reported). Writes ``backtest_baselines.md``.

Usage::

    python -m benchmarks.backtest_baselines [--panels weekly daily panel] [--series 200] [--windows 10] [--repeats 3]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before numpy loads its BLAS

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from benchmarks.common import ROOT, command_line, git_commit, machine, now  # noqa: E402

COLUMNS = {"id_col": "unique_id", "time_col": "ds", "target_col": "y"}
#: statsforecast's class of each model.
MODELS = {"ets": "AutoETS", "theta": "AutoTheta"}


@dataclass(frozen=True)
class Panel:
    """A generated panel: ``series`` series of ``steps`` steps at ``freq`` with a sine of ``season``
    steps; forecast ``horizon`` steps ahead."""

    name: str
    series: int
    steps: int
    freq: str
    season: float
    horizon: int
    baselines: bool = False  # time the default backtest's baselines too

    def frame(self, seed: int = 0) -> pd.DataFrame:
        rng = np.random.default_rng(seed)
        t = np.arange(self.steps)
        level = rng.uniform(10, 50, (self.series, 1))
        phase = rng.uniform(0, 6, (self.series, 1))
        y = (level + 0.01 * level * t / self.season + 0.1 * level * np.sin(2 * np.pi * t / self.season + phase)
             + rng.standard_normal((self.series, self.steps)))
        stamps = pd.date_range("2000-01-02", periods=self.steps, freq=self.freq)
        return pd.DataFrame({"unique_id": np.repeat([f"s{i:05d}" for i in range(self.series)], self.steps),
                             "ds": np.tile(stamps, self.series), "y": y.ravel()})


def panels(series: int) -> dict[str, Panel]:
    return {"weekly": Panel("weekly", 7, 773, "W", 52.18, 13),
            "daily": Panel("daily", 8, 6_000, "D", 7.0, 14),
            "panel": Panel("panel", series, 300, "D", 7.0, 14, baselines=True)}


class Case:
    """One panel, the frames of its backtests, and its timed sides (:meth:`run`)."""

    def __init__(self, panel: Panel, windows: int) -> None:
        self.panel, self.windows = panel, windows
        self.df = panel.frame()
        self.train = self.df[self.df.groupby("unique_id").cumcount(ascending=False) >= panel.horizon * windows]
        self.seasons: dict[str, int] = {}
        self.last: dict[str, np.ndarray] = {}
        self.fitted: dict[str, object] = {}

    @property
    def sides(self) -> list[str]:
        names = [f"{model} {side}" for model in MODELS for side in ("backtest", "statsforecast", "fit", "predict")]
        return names + (["baselines backtest", "baselines statsforecast"] if self.panel.baselines else [])

    def run(self, side: str) -> float:
        """CPU seconds of ``side``'s call (its forecasts kept for :meth:`difference`)."""
        from statsforecast import StatsForecast
        import statsforecast.models as sf_models

        from tsrec import Forecaster
        from tsrec.evaluation import backtest

        model, what = side.split(" ")
        h, windows = self.panel.horizon, self.windows
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cpu = time.process_time()
            if what == "statsforecast":
                names = list(MODELS) if model == "baselines" else [model]
                sf = StatsForecast(models=[getattr(sf_models, MODELS[name])(season_length=self.seasons[name])
                                           for name in names], freq=self.panel.freq, n_jobs=1)
                cv = sf.cross_validation(df=self.df, h=h, n_windows=windows, step_size=h, refit=False)
                seconds = time.process_time() - cpu
                cv = cv.sort_values(["unique_id", "cutoff", "ds"])
                for name in names:
                    self.last[f"{name} {'baselines ' if model == 'baselines' else ''}statsforecast"] = \
                        cv[MODELS[name]].to_numpy()
                return seconds
            if what == "backtest" and model == "baselines":
                f = Forecaster("seasonal_naive", prediction_length=h).fit(self.train, **COLUMNS)
                cpu = time.process_time()
                result = backtest(f, self.df, n_windows=windows, **COLUMNS)
                seconds = time.process_time() - cpu
                errors, skill = result.errors.sort_values(["item_id", "origin", "step"]), result.skill
                for name in MODELS:
                    self.last[f"{name} baselines backtest"] = errors[f"y_{name}"].to_numpy()
                    self.seasons[name] = int(skill.set_index("baseline").loc[name, "season"])
                self.fit_note = skill.set_index("baseline").loc["ets", "fit"]
                return seconds
            if what == "backtest":
                f = Forecaster(model, prediction_length=h).fit(self.train, **COLUMNS)
                result = backtest(f, self.df, n_windows=windows, baselines=(), **COLUMNS)
                seconds = time.process_time() - cpu
                self.seasons[model] = f.resolved_settings.network.season_length
                self.last[side] = result.errors.sort_values(["item_id", "origin", "step"]).y_pred.to_numpy()
                return seconds
            if what == "fit":
                self.fitted[model] = Forecaster(model, prediction_length=h).fit(self.df, **COLUMNS)
                return time.process_time() - cpu
            self.fitted[model].predict()
            return time.process_time() - cpu

    def difference(self) -> float:
        """The largest relative difference between tsrec's forecasts and statsforecast's."""
        pairs = [(f"{m} backtest", f"{m} statsforecast") for m in MODELS]
        if self.panel.baselines:
            pairs += [(f"{m} baselines backtest", f"{m} baselines statsforecast") for m in MODELS]
        return max(float(np.max(np.abs(self.last[a] - self.last[b]) / np.abs(self.last[b]))) for a, b in pairs)


def spread(values: list[float], digits: int = 2) -> str:
    """``mean ± standard deviation`` (the deviation only with two values or more)."""
    mean = statistics.fmean(values)
    return f"{mean:.{digits}f} ± {statistics.stdev(values):.{digits}f}" if len(values) > 1 else f"{mean:.{digits}f}"


def main(argv: list[str] | None = None) -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--panels", nargs="+", default=["weekly", "daily", "panel"], choices=["weekly", "daily",
                                                                                             "panel"])
    parser.add_argument("--series", type=int, default=200, help="series of the 'panel' panel")
    parser.add_argument("--windows", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every panel's steps (a quick run: 0.1)")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args(argv)
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    load = os.getloadavg()[0]
    chosen = {name: panels(args.series)[name] for name in args.panels}
    if args.scale != 1.0:
        chosen = {name: Panel(p.name, p.series, max(6 * p.horizon + args.windows * p.horizon,
                                                     int(p.steps * args.scale)), p.freq, p.season, p.horizon,
                              p.baselines) for name, p in chosen.items()}
    warm = Case(Panel("warm", 2, 200, "D", 7.0, 7, baselines=True), 2)  # numba's compiled code loaded first
    for side in ("baselines backtest", *warm.sides):
        warm.run(side)
    rows, costs, checks, notes = [], [], [], {}
    for name, panel in chosen.items():
        case = Case(panel, args.windows)
        for side in ("baselines backtest",) * panel.baselines + ("ets backtest", "theta backtest"):
            case.run(side)  # untimed: the seasons statsforecast is given come from tsrec's resolved models
        times: dict[str, list[float]] = {side: [] for side in case.sides}
        for r in range(args.repeats):
            for side in case.sides if r % 2 == 0 else case.sides[::-1]:
                if side.endswith("predict") and side.split(" ")[0] not in case.fitted:
                    case.run(side.replace("predict", "fit"))  # the reversed order reaches predict before fit
                times[side].append(case.run(side))
                print(f"{name}, round {r + 1}: {side} {times[side][-1]:.3f} CPU-s", flush=True)
            checks.append(case.difference())
        if panel.baselines:
            notes[name] = case.fit_note
        for model in (*MODELS, *(["baselines"] if panel.baselines else [])):
            ours, theirs = times[f"{model} backtest"], times[f"{model} statsforecast"]
            ratios = [a / b for a, b in zip(ours, theirs)]
            label = "default backtest's baselines (ets, theta)" if model == "baselines" else model
            season = f"{case.seasons['ets']}, {case.seasons['theta']}" if model == "baselines" else case.seasons[model]
            rows.append(f"| {name} ({panel.series} x {panel.steps:,}, h={panel.horizon}) | {label} | {season} | "
                        f"{spread(ours)} | {spread(theirs)} | {spread(ratios)} | "
                        f"{', '.join(f'{a:.2f}/{b:.2f}' for a, b in zip(ours, theirs))} |")
        for model in MODELS:
            fit, predict = times[f"{model} fit"], times[f"{model} predict"]
            costs.append(f"| {name} | {model} | {spread(fit)} | {spread(predict, 3)} | "
                         f"{spread([p / f for p, f in zip(predict, fit)], 4)} |")
    text = "\n".join([
        "# The statistical models in a backtest and at predict, against statsforecast's cross_validation(refit=False)",
        "",
        (f"Each panel's last {args.windows} origins per series, a horizon apart. tsrec: `Forecaster(model)` fitted "
         "on each series' steps before its first origin, then `backtest(..., baselines=())` (the fit carried "
         "forward); statsforecast: `StatsForecast([AutoETS | AutoTheta](season_length=<tsrec's>), n_jobs=1)"
         ".cross_validation(h, n_windows, step_size=h, refit=False)`, its fit included. The default backtest's "
         "baselines: `backtest` of `Forecaster(\"seasonal_naive\")` (nothing to train) with naive, seasonal naive, "
         "ets and theta (each the registered model fitted before the first origin: "
         f"\"{next(iter(notes.values()), '')}\"), against the cross-validation of AutoETS and AutoTheta together."),
        "",
        f"- command: `{command_line('benchmarks.backtest_baselines', sys.argv[1:] if argv is None else argv)}`",
        f"- git commit: `{git_commit()}`",
        f"- machine: {machine()}; OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}",
        (f"- date: {now()}; 1-min load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end "
         "(cores shared with other jobs: CPU seconds of the calling process, not wall time)"),
        ("- one process, a warm-up of every side first (numba's compiled code loaded), then the rounds with the "
         "sides interleaved, in reversed order every other round; the ratios are per round"),
        (f"- tsrec's forecasts equal statsforecast's in every round: largest relative difference {max(checks):.2g}"),
        "",
        "| panel | model | season | tsrec CPU s, mean ± sd | statsforecast CPU s, mean ± sd | tsrec / statsforecast, "
        "mean ± sd | per round (tsrec/statsforecast) |",
        "|---|---|---:|---:|---:|---:|---|",
        *rows,
        "",
        "`Forecaster(model).fit(df)` on all of each series, then `predict()` (the fitted parameters applied, "
        "nothing fitted again):",
        "",
        "| panel | model | fit CPU s | predict CPU s | predict / fit |",
        "|---|---|---:|---:|---:|",
        *costs,
    ]) + "\n"
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "backtest_baselines.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
