"""What a fresh Python process costs, start to exit, for three short jobs a user runs, in this
checkout against another (``--code DIR``, e.g. an earlier commit's worktree), interleaved:

    OMP_NUM_THREADS=1 python -m benchmarks.process_cost --code DIR [--repeats 7] [--out-dir DIR]

- ``import``: ``from tsrec import Forecaster``;
- ``fit``: the default fitted on 12 synthetic monthly series of 120 steps (too few windows for the
  networks: the statistical candidates, the ridge and the trees) and its forecast with 80% bands;
- ``load``: a saved default (saved once, untimed, by the same checkout's code) loaded and forecast;
- ``statsforecast``: the peer, statsforecast's AutoETS + AutoCES + AutoTheta fitted on the same
  series and forecast with 80% bands (no tsrec: the same script on both sides).

Each run is its own interpreter (``OMP_NUM_THREADS=1``), timed from outside by the operating
system's accounting of the finished child (``os.wait4``: user + system CPU seconds and its peak
resident memory), so the imports, the process start and the exit count, as they do for a user's
script, a command-line call or a batch job. Runs alternate between the checkouts job by job;
each round runs every job, so that the ratio of this checkout's ``fit`` to ``statsforecast`` is
paired too. The table gives the medians, the spread (min-max) and the median of the paired ratios. Writes
``process_cost.md`` into ``--out-dir`` (default ``benchmarks/results``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.common import ROOT, command_line, cpu_model, git_commit, now, write_report

#: The series of the ``fit`` and ``load`` jobs: 12 monthly series of 120 steps, a trend, a yearly cycle, noise.
DATA = """
import warnings
warnings.simplefilter("ignore")
import numpy as np, pandas as pd
from tsrec import Forecaster
rng = np.random.default_rng(0)
t = np.arange(120)
df = pd.concat([pd.DataFrame({"item_id": f"s{i}", "timestamp": pd.date_range("2010", periods=120, freq="MS"),
                              "target": 50 + 0.1 * i * t + 5 * np.sin(2 * np.pi * t / 12 + i) + rng.normal(0, 1, 120)})
                for i in range(12)])
"""
#: Each job's script; ``MODEL`` stands for the saved model's folder (a quoted path).
JOBS = {
    "import": "from tsrec import Forecaster",
    "fit": DATA + "Forecaster(prediction_length=12, seed=0).fit(df).predict(levels=[80])",
    "load": "import warnings\nwarnings.simplefilter('ignore')\nfrom tsrec import Forecaster\n"
            "Forecaster.load(MODEL).predict(levels=[80])",
}
SAVE = DATA + "Forecaster(prediction_length=12, seed=0).fit(df).save(MODEL)"
JOBS["statsforecast"] = DATA.replace("from tsrec import Forecaster\n", "") + """
from statsforecast import StatsForecast
from statsforecast.models import AutoCES, AutoETS, AutoTheta
frame = df.rename(columns={"item_id": "unique_id", "timestamp": "ds", "target": "y"})
models = [AutoETS(season_length=12), AutoCES(season_length=12), AutoTheta(season_length=12)]
StatsForecast(models=models, freq="MS").forecast(df=frame, h=12, level=[80])"""


def run(code: Path, script: str) -> tuple[float, float]:
    """``script`` in a fresh interpreter importing tsrec from ``code``: its CPU seconds (user +
    system) and peak resident memory (MiB), from the operating system's accounting of the child."""
    env = {**os.environ, "PYTHONPATH": str(code), "OMP_NUM_THREADS": "1"}
    child = subprocess.Popen([sys.executable, "-c", script], env=env, cwd=tempfile.gettempdir(),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    stderr = child.stderr.read()  # type: ignore[union-attr]
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise RuntimeError(f"{script!r} failed with {code} on the path:\n{stderr.decode()[-2000:]}")
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def measure(sides: dict[str, Path], jobs: list[str], repeats: int, models: dict[str, Path]) -> dict:
    """``{job: {side: [(cpu, peak), ...]}}``: an untimed round first, then ``repeats`` rounds, each
    running every job on both sides, the sides in alternating order."""
    runs: dict[str, dict[str, list[tuple[float, float]]]] = {job: {side: [] for side in sides} for job in jobs}
    order = list(sides)
    for repeat in range(repeats + 1):
        for job in jobs:
            for side in order if repeat % 2 == 0 else order[::-1]:
                result = run(sides[side], JOBS[job].replace("MODEL", repr(str(models[side]))))
                if repeat:
                    runs[job][side].append(result)
    return runs


def peer_ratio(runs: dict, side: str) -> str:
    """The median over rounds of ``side``'s ``fit`` over its ``statsforecast`` run of the same round."""
    pairs = zip(runs["fit"][side], runs["statsforecast"][side])
    return f"{statistics.median(fit[0] / peer[0] for fit, peer in pairs):.2f}x"


def table(runs: dict, sides: list[str]) -> str:
    """One row per job: each side's median CPU seconds (min-max) and peak MiB, and the median of the
    paired CPU ratios (this checkout over the other)."""
    this, other = sides
    lines = [f"| job | {this}: CPU s | {other}: CPU s | CPU ratio | {this}: peak MiB | {other}: peak MiB |",
             "|---|---|---|---|---|---|"]
    for job, by_side in runs.items():
        cells = []
        for side in sides:
            cpu = [c for c, _ in by_side[side]]
            cells.append(f"{statistics.median(cpu):.2f} ({min(cpu):.2f}-{max(cpu):.2f})")
        ratio = statistics.median(a[0] / b[0] for a, b in zip(by_side[this], by_side[other]))
        peaks = [f"{statistics.median(p for _, p in by_side[side]):.0f}" for side in sides]
        lines.append(f"| {job} | {cells[0]} | {cells[1]} | {ratio:.2f}x | {peaks[0]} | {peaks[1]} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--code", type=Path, required=True, help="the other checkout (its root folder)")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--jobs", nargs="+", choices=list(JOBS), default=list(JOBS))
    parser.add_argument("--out-dir", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args(argv)
    sides = {git_commit(): ROOT, f"{_commit_of(args.code)} (--code)": args.code.resolve()}
    with tempfile.TemporaryDirectory() as folder:
        models = {side: Path(folder) / f"model{i}" for i, side in enumerate(sides)}
        if "load" in args.jobs:
            for side, code in sides.items():
                run(code, SAVE.replace("MODEL", repr(str(models[side]))))
        runs = measure(sides, args.jobs, args.repeats, models)
    peer = "" if not {"fit", "statsforecast"} <= set(args.jobs) else (
        "A fresh process's `fit` over statsforecast's in the same round: " +
        ", ".join(f"{side} {peer_ratio(runs, side)}" for side in sides) + ".\n\n")
    text = (f"# What a fresh process costs\n\n{table(runs, list(sides))}\n\n{peer}"
            f"Medians of {args.repeats} runs per side (min-max), alternating; the ratio is the median of the "
            "paired ratios. Command: `OMP_NUM_THREADS=1 "
            f"{command_line('benchmarks.process_cost', argv if argv is not None else sys.argv[1:])}`; "
            f"machine: {cpu_model()} x{os.cpu_count()}; {now()}.\n")
    write_report(args.out_dir / "process_cost.md", text)
    return 0


def _commit_of(code: Path) -> str:
    """The commit checked out at ``code`` (its short hash), or ``unknown``."""
    try:
        return subprocess.run(["git", "-C", str(code), "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


if __name__ == "__main__":
    raise SystemExit(main())
