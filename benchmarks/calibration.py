"""Calibration of the default Forecaster's intervals against statsforecast's conformal AutoETS.

Issue 38, part 4: on the ``unseen_like`` datasets (``benchmarks/configs/unseen_like.toml``, loaded
by ``benchmarks/unseen_like.py``) and slices of the shared ETT sets (``ETT_SLICES``: the last
``steps`` of ETTh1 and ETTm1, their 7 columns as 7 series), the default's 80, 90 and 95% intervals
(its conformal calibration, ``docs/intervals.md``) and statsforecast's ``AutoETS`` with
``ConformalIntervals(h=H)`` (its defaults: 2 windows), on the same windows.

Usage (from the repository root)::

    python -m benchmarks.calibration [--dataset X ...] [--seeds 0 1 2] [--out benchmarks/results/calibration.csv]
    python -m benchmarks.calibration --render benchmarks/results/calibration.csv

Protocol, per dataset (``unseen_like``'s windows and inputs, ``benchmarks/unseen_like.py``):

- **Windows**: origins over the last 20% of every series, one horizon apart, the last one ending
  at the series' end; missing inputs carried forward; missing truths scored for no model.
- **The default** (``Forecaster(prediction_length=H, seed=seed)``) is fitted once on the steps
  before the first origin (its calibration included), then ``tsrec.evaluation.backtest(...,
  levels=[80, 90, 95])`` forecasts every window from its own context.
- **statsforecast**: ``StatsForecast([AutoETS(season_length=m)]).cross_validation(h=H,
  n_windows=K, step_size=H, refit=True, level=[80, 90, 95], prediction_intervals=
  ConformalIntervals(h=H))``: AutoETS refitted before every origin, its conformal bands from 2
  windows of each series' history before that origin (statsforecast's default).
- **Scores**, per level over every scored (series, window, step): ``coverage`` (truth inside the
  band), ``width`` and ``winkler`` (:func:`tsrec.metrics.winkler_score`) in units of each series'
  standard deviation before the first origin (so that series of different sizes weigh alike), and
  ``coverage_se``: the binomial standard error of the coverage with each (series, window) counted
  as one draw (the steps of one window miss together; ``--render`` counts overlapping windows, a
  stride ``s`` below the horizon ``H``, ``s / H`` of a draw each, :func:`window_share`). ``cpu_seconds``: the process's CPU time for
  the fit and every window's forecast (one thread).
- **Learning after the fit** (issue 47): ``default`` is the default as users get it, its bands
  learning from the windows the backtest forecast after the fit (a rolling window of scores,
  ``docs/intervals.md``); ``default_no_update`` is the same fit with its bands frozen at ``fit``.
- **Long single-series tests** (``LONG``): co2 fitted once on its first half (1958-1980) and
  forecast over the 21 years after it (``co2_half``), beside ``co2`` (fit on the first 80%).
- **Seeds**: the default runs every ``--seeds`` seed where its first seed's fit trained a network,
  else the first only (statistical candidates do not depend on the seed); an interrupted command
  run again goes on from the rows its CSV holds.
- **Targets** (judged by ``--render``): the default covers within 3 points of each level on every
  dataset (seeds averaged), and its Winkler score is at or below statsforecast's on most datasets.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
import tomllib
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchmarks.common import ROOT, command_line, git_commit, machine, markdown_table, now
from benchmarks.unseen_like import ID, TARGET, TIME, Task, model_inputs, one_thread, prepare_task, rolling_windows, \
    training_stats, window_table
from tsrec import metrics
from tsrec.conformal import band_ends

RESULTS = ROOT / "benchmarks" / "results"
CONFIG = ROOT / "benchmarks" / "configs" / "unseen_like.toml"
LEVELS = (80, 90, 95)
#: The coverage target: within this many points of the level on every dataset.
WITHIN_POINTS = 3.0
#: The shared ETT sets' slices: the last ``steps`` of each file, its 7 columns as 7 series
#: (sized so that the whole run stays within about 30 CPU-minutes on one thread).
ETT_SLICES = {"ETTh1_last2880": dict(file="ETTh1.csv", freq="h", steps=2880, horizon=24, season=24),
              "ETTm1_last2880": dict(file="ETTm1.csv", freq="15min", steps=2880, horizon=96, season=96)}
COLUMNS = ["dataset", "model", "seed", "level", "status", "coverage", "coverage_se", "width", "winkler", "entries",
           "windows", "cpu_seconds", "calibration_cpu_seconds", "note", "commit", "machine", "date", "command"]
#: ``default``: the default as users get it (bands that learn after the fit, issue 47);
#: ``default_no_update``: the same fit, its bands frozen at ``fit`` (``Calibration.update="off"``).
MODELS = ("default", "default_no_update", "sf_autoets_conformal")
#: Long single-series tests (issue 47): ``unseen_like``'s dataset ``source`` with its test part the
#: last ``fraction`` of the series, so that one fit forecasts years past it.
LONG = {"co2_half": dict(source="co2", fraction=0.5)}
#: The default's trainable candidates (a run that trained one depends on the seed).
NETWORKS = ("rsa_patchtst", "patchtst", "dlinear")


def ett_task(name: str, spec: dict[str, Any], data_dir: Path) -> Task:
    """An ETT slice as an ``unseen_like`` task (long frame: one series per column)."""
    path = data_dir / spec["file"]
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: set TSREC_DATA_DIR or --data-dir to the folder with the ETT CSVs")
    wide = pd.read_csv(path, parse_dates=["date"]).tail(spec["steps"])
    truth = wide.melt(id_vars="date", var_name=ID, value_name=TARGET).rename(columns={"date": TIME})
    truth = truth.sort_values([ID, TIME], ignore_index=True)
    windows = rolling_windows(spec["steps"], spec["horizon"], spec["horizon"], 0.2)
    return Task(name, spec["freq"], spec["season"], truth, model_inputs(truth), windows, training_stats(truth, windows))


def scores(table: pd.DataFrame, lower: dict[int, np.ndarray], upper: dict[int, np.ndarray],
           std: np.ndarray) -> dict[int, dict[str, float]]:
    """Per level: coverage, its standard error over (series, window) draws, width and Winkler score
    in units of ``std`` ``[rows]`` over the rows of ``table`` with a truth."""
    seen = table["y_true"].notna().to_numpy()
    truth = table["y_true"].to_numpy(np.float64)
    windows = table.loc[seen, [ID, "origin"]].drop_duplicates().shape[0]
    out = {}
    for level in LEVELS:
        lo, hi = lower[level][seen] / std[seen], upper[level][seen] / std[seen]
        y = truth[seen] / std[seen]
        p = float(((lo <= y) & (y <= hi)).mean())
        out[level] = dict(coverage=p, coverage_se=math.sqrt(p * (1 - p) / windows), width=float(np.mean(hi - lo)),
                          winkler=metrics.winkler_score(y, lo, hi, level), entries=int(seen.sum()), windows=windows)
    return out


def run_default(task: Task, seed: int) -> dict[str, tuple[pd.DataFrame, float, float, str]]:
    """The default's bands of every window (``window_table`` rows with ``lo_<L>``/``hi_<L>``), as
    users get them (``"default"``: learning after the fit) and frozen at ``fit``
    (``"default_no_update"``), from one fit: per model its bands, CPU seconds (the fit and that
    backtest), the calibration's CPU seconds and a note."""
    from tsrec import Forecaster

    columns = dict(id_col=ID, time_col=TIME, target_col=TARGET)
    started = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = Forecaster(prediction_length=task.windows.horizon, seed=seed,
                       trainer_kwargs={"enable_progress_bar": False}).fit(task.train, **columns)
    fit_cpu = time.process_time() - started
    calibration = f.calibration
    board = f.leaderboard
    members = board[board.weight > 0]
    trained = board[board.model.isin(NETWORKS) & board.val_score.notna()]
    note = "members " + ", ".join(f"{r.model} {r.weight:.2f}" for r in members.itertuples()) + \
        f"; calibration {calibration.windows} origins x {calibration.stride} apart, {int(calibration.counts[0])} " \
        f"pooled scores, rolling window {calibration.rolling}" + \
        (f"; networks tried: {', '.join(trained.model)}" if len(trained) else "; no network tried")
    out = {}
    for model, update in (("default", calibration.update), ("default_no_update", "off")):
        started = time.process_time()
        bands = default_bands(task, frozen(f, update), columns)
        out[model] = (bands, fit_cpu + time.process_time() - started, calibration.cpu_seconds, note)
    return out


def frozen(forecaster: Any, update: str) -> Any:
    """``forecaster`` with its calibration's ``update`` set to ``update`` (a shallow copy: the
    fitted model is shared)."""
    import copy
    import dataclasses

    if forecaster.fitted.calibration.update == update:
        return forecaster
    other = copy.copy(forecaster)
    other.fitted = dataclasses.replace(forecaster.fitted, calibration=dataclasses.replace(
        forecaster.fitted.calibration, update=update))
    return other


def default_bands(task: Task, f: Any, columns: dict[str, str]) -> pd.DataFrame:
    """``f``'s bands of every window of ``task`` (its backtest, each window from its own context)."""
    from tsrec.evaluation import backtest

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        errors = backtest(f, task.inputs, start=task.first_origin, stride=task.windows.stride, baselines=("naive",),
                          levels=list(LEVELS), **columns).errors
    bands = errors[[ID, "timestamp", "origin"]].rename(columns={"timestamp": TIME}).copy()
    for level in LEVELS:
        low, high = band_ends(level)
        bands[f"lo_{level}"], bands[f"hi_{level}"] = errors[f"y_q{low}"].to_numpy(), errors[f"y_q{high}"].to_numpy()
    return bands


def run_statsforecast(task: Task) -> tuple[pd.DataFrame, float, str]:
    """statsforecast's AutoETS with ``ConformalIntervals(h=H)``, refitted before every origin."""
    from statsforecast import StatsForecast
    from statsforecast.models import AutoETS
    from statsforecast.utils import ConformalIntervals

    h = task.windows.horizon
    started = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sf = StatsForecast(models=[AutoETS(season_length=task.season)], freq=task.freq, n_jobs=1)
        cv = sf.cross_validation(h=h, df=task.inputs, n_windows=task.windows.count, step_size=task.windows.stride,
                                 refit=True, level=list(LEVELS), prediction_intervals=ConformalIntervals(h=h),
                                 id_col=ID, time_col=TIME, target_col=TARGET)
    cpu = time.process_time() - started
    cv["origin"] = cv.groupby([ID, "cutoff"])[TIME].transform("min")
    bands = cv[[ID, TIME, "origin"]].copy()
    for level in LEVELS:
        bands[f"lo_{level}"], bands[f"hi_{level}"] = cv[f"AutoETS-lo-{level}"].to_numpy(), \
            cv[f"AutoETS-hi-{level}"].to_numpy()
    return bands, cpu, "ConformalIntervals(h=H, n_windows=2), refit at every origin"


def _statsforecast_runs(task: Task) -> dict[str, tuple[pd.DataFrame, float, float, str]]:
    """:func:`run_statsforecast` as the run loop reads a run (no calibration CPU of its own)."""
    bands, cpu, note = run_statsforecast(task)
    return {"sf_autoets_conformal": (bands, cpu, math.nan, note)}


def long_task(name: str, spec: dict[str, Any], config: dict[str, Any]) -> Task:
    """A long single-series test (:data:`LONG`): ``unseen_like``'s dataset with its last
    ``fraction`` as the test part."""
    source = prepare_task(spec["source"], config["datasets"][spec["source"]], config.get("test_fraction", 0.2))
    length = int(source.truth.groupby(ID).size().max())
    windows = rolling_windows(length, source.windows.horizon, source.windows.stride, spec["fraction"])
    return dataclasses.replace(source, name=name, windows=windows,
                               stats=training_stats(source.truth, windows, source.season))


def score_run(task: Task, bands: pd.DataFrame) -> dict[int, dict[str, float]]:
    """:func:`scores` of ``bands`` on the task's windows (every window row must have its band)."""
    table = window_table(task.truth, task.windows)
    bands = bands.assign(**{ID: bands[ID].astype(str)})
    merged = table.assign(**{ID: table[ID].astype(str)}).merge(bands, on=[ID, TIME, "origin"], how="left",
                                                              validate="one_to_one")
    missing = merged[f"lo_{LEVELS[0]}"].isna() & merged["y_true"].notna()
    if missing.any():
        raise RuntimeError(f"{int(missing.sum())} scored rows have no band")
    std = merged[ID].map(task.stats["std"].rename(index=str)).to_numpy(np.float64)
    return scores(merged, {L: merged[f"lo_{L}"].to_numpy(np.float64) for L in LEVELS},
                  {L: merged[f"hi_{L}"].to_numpy(np.float64) for L in LEVELS}, std)


def tasks(names: list[str] | None, data_dir: Path) -> list[tuple[str, Any]]:
    """The datasets to run, ``unseen_like``'s then the ETT slices (lazily prepared)."""
    config = tomllib.loads(CONFIG.read_text())
    fraction = config.get("test_fraction", 0.2)
    plan = [(name, lambda n=name, s=spec: prepare_task(n, s, fraction)) for name, spec in config["datasets"].items()]
    plan += [(name, lambda n=name, s=spec: ett_task(n, s, data_dir)) for name, spec in ETT_SLICES.items()]
    plan += [(name, lambda n=name, s=spec: long_task(n, s, config)) for name, spec in LONG.items()]
    return [(name, make) for name, make in plan if names is None or name in names]


def run(args: argparse.Namespace, argv: list[str]) -> list[dict[str, Any]]:
    """Every planned run not already in ``args.out`` (its rows kept: an interrupted command goes
    on where it stopped). The default runs every seed only where its first seed tried a network
    (a fit of statistical models alone does not depend on the seed)."""
    stamp = dict(commit=git_commit(), machine=machine(), date=now(),
                 command=command_line("benchmarks.calibration", argv))
    rows: list[dict[str, Any]] = pd.read_csv(args.out).to_dict("records") if args.out.exists() else []
    done = {(r["dataset"], r["model"], None if pd.isna(r["seed"]) else int(r["seed"])) for r in rows}
    for name, make in tasks(args.dataset, args.data_dir):
        runs = [("default", seed, lambda t, s=seed: run_default(t, s)) for seed in args.seeds] + \
            [("sf_autoets_conformal", None, _statsforecast_runs)]
        runs = [run for run in runs if (name, run[0], run[1]) not in done and args.models in (None, run[0])]
        task = make() if runs else None
        for model, seed, go in runs:
            if model == "default" and seed != args.seeds[0] and not _tried_networks(rows, name, args.seeds[0]):
                continue
            try:
                results = {key: (score_run(task, bands), cpu, calibration, note, "ok")
                           for key, (bands, cpu, calibration, note) in go(task).items()}
            except Exception as err:  # a failed run is a row that says why, never a missing one
                results = {model: ({L: {} for L in LEVELS}, math.nan, math.nan, f"{type(err).__name__}: {err}",
                                   "failed")}
            for key, (result, cpu, calibration, note, status) in results.items():
                for level in LEVELS:
                    rows.append({"dataset": name, "model": key, "seed": seed, "level": level, "status": status,
                                 **{k: result[level].get(k, math.nan) for k in ("coverage", "coverage_se", "width",
                                                                                 "winkler", "entries", "windows")},
                                 "cpu_seconds": cpu, "calibration_cpu_seconds": calibration, "note": note, **stamp})
                print(f"{name} {key} seed={seed}: {status} {cpu:.1f} CPU-s "
                      + " ".join(f"{L}%:{result[L].get('coverage', math.nan):.3f}" for L in LEVELS), flush=True)
            write(rows, args.out)
    return rows


def _tried_networks(rows: list[dict[str, Any]], dataset: str, seed: int) -> bool:
    """Whether the default's run of ``seed`` on ``dataset`` trained a network (its note names the
    networks it tried)."""
    notes = [str(r["note"]) for r in rows if r["dataset"] == dataset and r["model"] == "default" and r["seed"] == seed]
    return any("networks tried" in note for note in notes)


def write(rows: list[dict[str, Any]], out: Path) -> None:
    frame = pd.DataFrame(rows, columns=COLUMNS)
    out.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(out, index=False, lineterminator="\r\n")
    out.with_suffix(".md").write_text(render(frame, out))


def window_share(name: str) -> float:
    """What one test window of dataset ``name`` counts as an independent draw: ``stride / horizon``
    where its windows overlap (their shared steps miss together), else 1; the library counts a
    calibration's independent scores so (:func:`tsrec.conformal.rolling_size`)."""
    datasets = tomllib.loads(CONFIG.read_text())["datasets"]
    spec = datasets.get(LONG[name]["source"] if name in LONG else name)
    if spec is None:  # the ETT slices: one window per horizon
        return 1.0
    return min(1.0, spec.get("stride", spec["horizon"]) / spec["horizon"])


def render(frame: pd.DataFrame, where: Path) -> str:
    """The markdown table: per dataset and level, the default's coverage and Winkler score (mean
    over seeds, with their range) beside statsforecast's, and the targets judged."""
    ok = frame[frame.status == "ok"]
    default = ok[ok.model == "default"].groupby(["dataset", "level"]).agg(
        coverage=("coverage", "mean"), cov_min=("coverage", "min"), cov_max=("coverage", "max"),
        windows=("windows", "mean"), width=("width", "mean"), winkler=("winkler", "mean"),
        winkler_sd=("winkler", "std"), seeds=("seed", "nunique"), cpu=("cpu_seconds", "mean"))
    sf = ok[ok.model == "sf_autoets_conformal"].set_index(["dataset", "level"])
    frozen_runs = ok[ok.model == "default_no_update"].groupby(["dataset", "level"]).agg(
        coverage=("coverage", "mean"), winkler=("winkler", "mean"))
    order = list(dict.fromkeys(frame.dataset))
    lines, table = [], []
    within_all, wins, compared, far, failed, over_draws = True, 0, 0, [], [], []
    for name in order:
        for level in LEVELS:
            if (name, level) not in default.index:
                table.append([name, level, "failed", "", "", "", "", "", "", "", ""])
                within_all = False
                failed.append(f"{name} failed")
                continue
            d = default.loc[(name, level)]
            s = sf.loc[(name, level)] if (name, level) in sf.index else None
            off = abs(100 * d.coverage - level)
            within = off <= WITHIN_POINTS
            within_all &= bool(within)
            draws = d.windows * window_share(name)  # independent windows
            se = math.sqrt(level / 100 * (1 - level / 100) / draws)  # binomial, at the level
            if not within and off > 200 * math.sqrt(level / 100 * (1 - level / 100) / d.windows):
                over_draws.append(f"{name} at {level}")  # far, were every window a draw
            mark = "" if within else " ✗" if off <= 200 * se else " ✗✗"
            if mark == " ✗✗":
                far.append(f"{name} at {level}")
            spread = f" ({int(d.seeds)} seeds: {100 * d.cov_min:.1f}-{100 * d.cov_max:.1f})" if d.seeds > 1 else ""
            u = frozen_runs.loc[(name, level)] if (name, level) in frozen_runs.index else None
            table.append([name, level, f"{100 * d.coverage:.1f}{spread} ± {100 * se:.1f}{mark}",
                          "" if u is None else f"{100 * u.coverage:.1f}",
                          "" if s is None else
                          f"{100 * s.coverage:.1f} ± {100 * s.coverage_se / math.sqrt(window_share(name)):.1f}",
                          f"{d.width:.3f}", "" if s is None else f"{s.width:.3f}",
                          f"{d.winkler:.3f}" + (f" ± {d.winkler_sd:.3f}" if d.seeds > 1 else ""),
                          "" if u is None else f"{u.winkler:.3f}",
                          "" if s is None else f"{s.winkler:.3f}",
                          "" if s is None else f"{d.winkler / s.winkler:.2f}"])
        if all((name, L) in default.index and (name, L) in sf.index for L in LEVELS):
            compared += 1
            wins += int(np.mean([default.loc[(name, L)].winkler <= sf.loc[(name, L)].winkler for L in LEVELS]) > 0.5)
    head = ["dataset", "level %", "default coverage % (seeds: range) ± s.e. at the level",
            "without update coverage %", "statsforecast coverage %", "default width", "sf width", "default Winkler",
            "without update Winkler", "sf Winkler", "Winkler ratio"]
    stamp = frame.iloc[0]
    lines += ["# Calibration: the default's conformal intervals vs statsforecast's conformal AutoETS", "",
              "Command: " + ", then ".join(f"`{c}`" for c in dict.fromkeys(frame.command))
              + " (the second went on from the first's rows)" * (frame.command.nunique() > 1) + "  ",
              f"Commit: {', '.join(f'`{c}`' for c in dict.fromkeys(frame.commit))} (the rows' own in the CSV)  ",
              f"Machine: {stamp.machine}  ", f"Date: {stamp.date}", "",
              "Coverage in percent (mean over seeds; the number of seeds and their range in brackets where "
              "networks were trained, one seed where the default fitted statistical models only; ± the "
              "binomial standard error of a coverage equal to the level, with each (series, window) one draw, "
              "and windows that overlap (a stride s below the horizon H) s / H of one, as the steps they share "
              "miss together; "
              "statsforecast's: ± that of its own coverage). Width and Winkler score in "
              "units of each series' standard deviation before the first origin (lower is better). ✗: "
              f"coverage more than {WITHIN_POINTS:g} points from the level but within two standard errors "
              "of it (too few windows to tell); ✗✗: more than 3 points and two standard errors away. Protocol: "
              "`benchmarks/calibration.py`.", "",
              markdown_table(pd.DataFrame(table, columns=head)), ""]
    cpu = ok.groupby(["dataset", "model"])["cpu_seconds"].mean().unstack()
    if "calibration_cpu_seconds" in ok:
        cpu["default calibration"] = ok[ok.model == "default"].groupby("dataset")["calibration_cpu_seconds"].mean()
    lines += ["CPU seconds per run (fit and every window's forecast, one thread; the default's calibration: "
              "`f.calibration.cpu_seconds`, its whole fit, which selection and calibration share):", "",
              markdown_table(cpu.reset_index(), ".1f"), ""]
    lines += ["## Targets", "",
              f"- Coverage within {WITHIN_POINTS:g} points of 80, 90 and 95% on every dataset: "
              + ("**met**" if within_all else "**not met** (✗ and ✗✗ rows)") + "; within "
              f"{WITHIN_POINTS:g} points or two binomial standard errors (issue 47's target, for sets with few "
              "windows): " + ("**met**" if not far and not failed else
                              f"**not met** ({', '.join(far + failed)})") + "; counting every (series, window) as "
              "one draw, overlapping or not: "
              + ("**met**" if not over_draws and not failed else f"**not met** ({', '.join(over_draws + failed)})")
              + ".",
              f"- Winkler score at or below statsforecast's conformal AutoETS (on most of the three levels) on at "
              f"least 9 of 11 datasets (issue 47's target; that share of those compared): {wins} of {compared} "
              + ("(**met**)" if compared and wins >= math.ceil(9 * compared / 11) else "(**not met**)")
              + ".", "",
              f"`python -m benchmarks.calibration --render {where}` redraws this table.", ""]
    notes = Path(where).with_name(Path(where).stem + "_notes.md")
    if notes.exists():  # what the table cannot say (the run's scope, costs against an earlier run)
        lines += [notes.read_text()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="python -m benchmarks.calibration", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", nargs="*", help="only these datasets (default: all)")
    parser.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    parser.add_argument("--models", choices=("default", "sf_autoets_conformal"),
                        help="only this model's runs (default: both)")
    parser.add_argument("--out", type=Path, default=RESULTS / "calibration.csv")
    parser.add_argument("--data-dir", type=Path, default=Path(__import__("os").environ.get(
        "TSREC_DATA_DIR", ROOT.parent / "shared" / "datasets")))
    parser.add_argument("--render", type=Path, metavar="CSV", help="only redraw the table of this results CSV")
    args = parser.parse_args(argv)
    if args.render is not None:
        frame = pd.read_csv(args.render)
        args.render.with_suffix(".md").write_text(render(frame, args.render))
        return 0
    with one_thread():
        run(args, argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
