"""How long one process takes to load a saved many-series model: the format a baseline commit
writes, read by that commit's code, against the format this checkout writes, read by this
checkout (``python -m benchmarks.model_load --series 100000``).

The model is :mod:`benchmarks.scale`'s: DLinear, horizon 24, context 96, 20 steps of batches of
1,024 windows on ``--series`` hourly series of ``--length`` steps read from Parquet
(:func:`benchmarks.scale.write_data`, kept in ``--data-dir``). The baseline's code (its tree,
extracted by ``git archive``) fits and saves it once; this checkout loads that copy and saves it
again in its own format, and (``--check``, the default) checks that both copies forecast every
series identically.

Each load runs in a fresh process pinned to one core (``taskset -c 0`` where there is one),
``OMP_NUM_THREADS=1`` and one torch thread; what is timed is ``Forecaster.load(path)``'s wall
and CPU time after tsrec's imports (what every Ray/Spark/DDP worker pays before its first series). One
untimed load of each copy first (the files in the page cache), then ``--repeats`` rounds, each
loading the baseline's copy and this checkout's, in alternating order. Writes
``model_load.csv`` (one row per load) and ``model_load.md`` (the command, commits, machine, file
sizes, median/min/max per side) into ``--out-dir``.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from benchmarks.common import ROOT, command_line, cpu_model, git_commit, markdown_table, now, write_csv

#: The last commit that writes format 6 (the per-series state in ``forecaster.json``).
BASELINE = "7839de7"

#: Fits the model with the code on ``PYTHONPATH`` (argv: data folder, target folder).
FIT = """
import sys
from benchmarks.scale import COLUMNS, forecaster
forecaster(max_steps=20, batch_size=1024).fit(sys.argv[1], **COLUMNS).save(sys.argv[2])
"""

#: One timed load with the code on ``PYTHONPATH`` (argv: the model folder); prints its seconds.
LOAD = """
import json, sys, time
import torch
torch.set_num_threads(1)
from tsrec import Forecaster
start, cpu = time.perf_counter(), time.process_time()
Forecaster.load(sys.argv[1])
print(json.dumps({"seconds": time.perf_counter() - start, "cpu_seconds": time.process_time() - cpu}))
"""


def tree_at(commit: str, folder: Path) -> Path:
    """The files of ``commit`` (``git archive``) under ``folder/tree-<commit>``, once."""
    target = folder / f"tree-{commit}"
    if not (target / "_done").exists():
        shutil.rmtree(target, ignore_errors=True)
        archive = subprocess.run(["git", "archive", "--format=tar", commit], cwd=ROOT, capture_output=True,
                                 check=True).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(target, filter="data")
        (target / "_done").touch()
    return target


def python(code: str, tree: Path, *args: str, pin: bool = False) -> str:
    """Run ``code`` in a fresh Python whose ``tsrec`` and ``benchmarks`` are ``tree``'s, one thread
    (pinned to core 0 with ``pin`` where ``taskset`` exists); its standard output."""
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    prefix = ["taskset", "-c", "0"] if pin and shutil.which("taskset") else []
    done = subprocess.run([*prefix, sys.executable, "-c", code, *args], cwd=tree, env=env, capture_output=True,
                          text=True)
    if done.returncode:
        raise RuntimeError(f"{code.strip().splitlines()[-1]} {' '.join(args)} failed in {tree}:\n{done.stderr[-3000:]}")
    return done.stdout


def models(args: argparse.Namespace) -> dict[str, Path]:
    """The baseline's copy of the model (fitted once) and this checkout's (saved again every run)."""
    from benchmarks.scale import write_data

    case = f"{args.series}x{args.length}"
    data = write_data(case, args.data_dir)
    baseline = args.data_dir / f"load-{case}-{args.baseline}"
    if not (baseline / "forecaster.json").exists():
        python(FIT, tree_at(args.baseline, args.data_dir), str(data), str(baseline))
    current = args.data_dir / f"load-{case}-current"
    python("import sys\nfrom tsrec import Forecaster\nForecaster.load(sys.argv[1]).save(sys.argv[2])",
           ROOT, str(baseline), str(current))
    return {"baseline": baseline, "current": current}


def check_forecasts(paths: dict[str, Path]) -> None:
    """Both copies, loaded by this checkout, forecast every series identically."""
    from tsrec import Forecaster

    baseline, current = (Forecaster.load(paths[side]).predict() for side in ("baseline", "current"))
    pd.testing.assert_frame_equal(baseline, current, check_exact=True)
    print(f"identical forecasts: {len(current)} rows", flush=True)


def sizes(path: Path) -> str:
    return ", ".join(f"{file.name} {file.stat().st_size:,} bytes" for file in sorted(path.iterdir()))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.model_load", description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=100_000)
    parser.add_argument("--length", type=int, default=500, help="steps per series in the fitted data")
    parser.add_argument("--repeats", type=int, default=7, help="timed loads of each copy, interleaved")
    parser.add_argument("--baseline", default=BASELINE, help="the commit whose code and format are compared")
    parser.add_argument("--check", action=argparse.BooleanOptionalAction, default=True,
                        help="check that both copies forecast identically (two predicts of every series)")
    parser.add_argument("--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "tsrec-scale")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args(argv)
    command = command_line("benchmarks.model_load", sys.argv[1:] if argv is None else argv)
    paths = models(args)
    trees = {"baseline": tree_at(args.baseline, args.data_dir), "current": ROOT}
    if args.check:
        check_forecasts(paths)

    def load(side: str) -> dict[str, float]:
        return json.loads(python(LOAD, trees[side], str(paths[side]), pin=True))

    for side in trees:  # untimed: the files in the page cache, the imports compiled
        load(side)
    rows: list[dict[str, Any]] = []
    for repeat in range(1, args.repeats + 1):
        for side in (("baseline", "current") if repeat % 2 else ("current", "baseline")):
            rows.append({"repeat": repeat, "side": side, **load(side)})
            print(json.dumps(rows[-1]), flush=True)
    commit = git_commit()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    write_csv(args.out_dir / "model_load.csv", [{**row, "series": args.series, "commit": commit} for row in rows])
    frame = pd.DataFrame(rows)
    cells = frame.groupby("side", sort=False).agg(
        loads=("seconds", "size"), median_seconds=("seconds", "median"), min_seconds=("seconds", "min"),
        max_seconds=("seconds", "max"), median_cpu_seconds=("cpu_seconds", "median"),
        min_cpu_seconds=("cpu_seconds", "min"), max_cpu_seconds=("cpu_seconds", "max")).reset_index()
    cells.insert(1, "code and format", [f"{args.baseline} (its format)", f"{commit} (its format)"])
    pinned = "pinned to core 0 (taskset -c 0), " if shutil.which("taskset") else ""
    lines = [
        f"# Loading a saved {args.series:,}-series model, one core", "",
        f"- command: `{command}`", f"- commit: {commit} (baseline {args.baseline})",
        f"- machine: {cpu_model()} x{os.cpu_count()}, each load in a fresh process {pinned}"
        "OMP_NUM_THREADS=1, one torch thread", f"- date: {now()}",
        f"- model: DLinear, horizon 24, context 96, {args.series:,} hourly series of {args.length} steps "
        "(benchmarks.scale's)",
        f"- files: baseline {sizes(paths['baseline'])}; current {sizes(paths['current'])}",
        "- forecasts of every series identical from both copies (checked in this run)" if args.check else
        "- forecasts not compared in this run (--no-check)", "",
        f"`Forecaster.load` after the imports, {args.repeats} loads per side in alternating order: wall seconds, and "
        "the CPU seconds of the loading process (less sensitive to other processes on a shared machine):", "",
        markdown_table(cells, floatfmt=".3f"), "", "Every load:", "", markdown_table(frame, floatfmt=".3f"), "",
    ]
    (args.out_dir / "model_load.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
