"""Past one machine: one process against two (DDP processes, Ray workers, Spark processes) at
training one epoch, predicting every series and backtesting them, on many hourly series read from
Parquet (``python -m benchmarks.pipeline --scale``).

Cases (``--cases``): ``N x T`` series of ``T`` hourly steps (:func:`benchmarks.frames.make_frame`),
written once to a folder of Parquet files, sorted by id, 10,000 series a file (``--data-dir``).
Model: DLinear, horizon 24, context 96, batches of ``--batch`` windows. Stages, each in a fresh
process (its wall seconds from the call to the result in memory), every worker with one thread:

- ``fit``: one epoch over every training window (cases of at most ``--train-max`` series), no
  validation, no refit; windows per second over all workers.
- ``predict``: the 24 steps after every series, from the Parquet data.
- ``backtest``: ``--origins`` origins per series, one step apart, scored (no baselines).

Paths (``--paths``): ``one`` (one process), ``ddp`` (``torchrun`` with 2 processes: ``fit`` with
Lightning's DDP strategy; ``predict``/``backtest`` of the loaded model in the process group, each
rank forecasting its shard of the windows), ``ray`` (:func:`tsrec.distributed.ray.fit_ray`,
``predict_ray``, ``backtest_ray`` with 2 workers on a local cluster of 2 CPUs) and ``spark``
(:mod:`tsrec.distributed.spark`, ``local[2]``). Predict and backtest read a model fitted once per
case by one process (20 steps), so every path forecasts with the same weights.

Peak memory per worker: the largest peak resident size (``VmHWM``) of any process of the path
(the process itself, its DDP ranks, Ray's workers, Spark's Python workers), polled every 0.2 s.
Every cell runs ``--repeats`` times, the paths interleaved within each repeat (the machines are
shared: a load that comes and goes falls on every path). Writes ``scale.csv`` (one row per run)
and ``scale.md`` after every run, keeping the rows of cells not run again (the command line in
``scale.md`` is the last run's); per cell the median wall seconds and their range, and the
speed-up of a path: the one-process median over its own, per stage and case.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before numpy loads its BLAS

import argparse  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pandas as pd  # noqa: E402

from benchmarks.common import ROOT, command_line, git_commit, machine, markdown_table, now  # noqa: E402

HORIZON = 24
CONTEXT = 96
COLUMNS = {"time_col": "ds", "id_col": "unique_id", "target_col": "y"}
CASES = ("10000x500", "100000x500")
PATHS = ("one", "ddp", "ray", "spark")
STAGES = ("fit", "predict", "backtest")
WORKERS = 2
FILE_SERIES = 10_000


def write_data(case: str, folder: Path) -> Path:
    """The case's series as Parquet files of :data:`FILE_SERIES` series each under ``folder/<case>``, once."""
    from benchmarks.frames import make_frame

    target = folder / case
    if (target / "_done").exists():
        return target
    n_series, length = (int(x) for x in case.split("x"))
    target.mkdir(parents=True, exist_ok=True)
    for k, start in enumerate(range(0, n_series, FILE_SERIES)):
        count = min(FILE_SERIES, n_series - start)
        frame = make_frame(count, length, seed=k)
        frame["unique_id"] = frame.unique_id.str.slice(1).astype(int).add(start).map("s{:06d}".format)
        frame.to_parquet(target / f"part-{k:03d}.parquet", row_group_size=1_000_000,
                         coerce_timestamps="us")  # Spark reads no nanosecond timestamps
    (target / "_done").touch()
    return target


def forecaster(**budget: Any) -> Any:
    from tsrec import Forecaster

    return Forecaster("dlinear", prediction_length=HORIZON, context_length=CONTEXT, val_windows=0, refit_full=False,
                      seed=0, **budget, trainer_kwargs={"enable_progress_bar": False, "logger": False})


# ------------------------------------------------------------------------------------- workers
def run_stage(path: str, stage: str, data: str, model: str, batch: int, origins: int, out: str) -> None:
    """One (path, stage) in this process (for ``ddp``: in each of the ranks ``torchrun`` started);
    writes its result as JSON to ``out`` (rank 0)."""
    import torch

    torch.set_num_threads(1)
    rank = int(os.environ.get("RANK", 0))
    if path == "ddp":
        import torch.distributed as dist

        dist.init_process_group("gloo")
    _import(path)  # the libraries' import time is not the stage's
    started = time.perf_counter()
    result: dict[str, Any] = {}
    if stage == "fit":
        unfitted = forecaster(max_epochs=1, batch_size=batch)
        if path == "one":
            fitted = unfitted.fit(data, **COLUMNS)
        elif path == "ddp":
            fitted = unfitted.set_params(trainer_kwargs={"strategy": "ddp", "devices": WORKERS, "accelerator": "cpu",
                                                         "enable_progress_bar": False, "logger": False}).fit(
                data, **COLUMNS)
        elif path == "ray":
            from tsrec.distributed.ray import fit_ray

            fitted = fit_ray(unfitted, data, num_workers=WORKERS, **COLUMNS)
        else:
            from tsrec.distributed.spark import fit_spark

            _spark()  # fit_spark runs on the active session
            fitted = fit_spark(unfitted, data, num_processes=WORKERS, **COLUMNS)
        result["windows"] = int(fitted.training_summary.budget["train_windows"]) if fitted.training_summary else None
    elif stage == "predict":
        result["rows"] = len(_predict(path, data, model))
    else:
        result["rows"] = _backtest(path, data, model, origins)
    result["seconds"] = time.perf_counter() - started
    if rank == 0:
        Path(out).write_text(json.dumps(result))


def _import(path: str) -> None:
    """Import what ``path``'s stages run (tsrec, Lightning, and Ray or Spark)."""
    import tsrec.evaluation  # noqa: F401  (the Forecaster, Lightning through it)
    import tsrec.training  # noqa: F401

    if path == "ray":
        import tsrec.distributed.ray  # noqa: F401
    elif path == "spark":
        import tsrec.distributed.spark  # noqa: F401


def _predict(path: str, data: str, model: str) -> pd.DataFrame:
    from tsrec import Forecaster

    if path in ("one", "ddp"):
        return Forecaster.load(model).predict(data)
    if path == "ray":
        from tsrec.distributed.ray import predict_ray

        return predict_ray(model, data, num_workers=WORKERS)
    from tsrec.distributed.spark import predict_spark

    return predict_spark(model, _spark().read.parquet(data)).toPandas()


def _backtest(path: str, data: str, model: str, origins: int) -> int:
    from tsrec import Forecaster

    options = {"n_windows": origins, "stride": 1, "baselines": ()}
    if path in ("one", "ddp"):
        from tsrec.evaluation import backtest

        return len(backtest(Forecaster.load(model), data, **options, **COLUMNS).errors)
    if path == "ray":
        from tsrec.distributed.ray import backtest_ray

        return len(backtest_ray(model, data, num_workers=WORKERS, **options).errors)
    from tsrec.distributed.spark import backtest_spark

    return len(backtest_spark(model, _spark().read.parquet(data), **options).errors)


def _spark() -> Any:
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # local workers run this interpreter

    return (SparkSession.builder.master(f"local[{WORKERS}]").config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", str(4 * WORKERS)).getOrCreate())


# -------------------------------------------------------------------------------------- driver
class PeakMemory:
    """The largest peak resident size (``VmHWM``, MiB) of the processes descended from this one,
    polled every 0.2 s from ``/proc`` while the block runs (Ray's workers are the raylet's children,
    which a local cluster started by the stage makes descendants too)."""

    def __init__(self) -> None:
        self.peak_mib = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _poll(self) -> None:
        while not self._stop.wait(0.2):
            for pid in _descendants(os.getpid()):
                try:
                    status = Path(f"/proc/{pid}/status").read_text()
                except OSError:
                    continue
                for line in status.splitlines():
                    if line.startswith("VmHWM:"):
                        self.peak_mib = max(self.peak_mib, int(line.split()[1]) / 1024)


def _descendants(root: int) -> list[int]:
    """The pids of ``root``'s descendants (children, their children, ...), from ``/proc``."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int(Path(entry, "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        for child in children.get(pid, []):
            found.append(child)
            todo.append(child)
    return found


def measure(path: str, stage: str, case: str, data: Path, model: Path, args: argparse.Namespace) -> dict:
    """One cell in a fresh process (``torchrun`` for ``ddp``): wall seconds, windows per second,
    peak MiB per worker, or the error's last line."""
    n_series = int(case.split("x")[0])
    row: dict[str, Any] = {"case": case, "series": n_series, "path": path, "stage": stage,
                           "workers": 1 if path == "one" else WORKERS}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        worker = json.dumps([path, stage, str(data), str(model), args.batch, args.origins, str(out)])
        module = ["-m", "benchmarks.scale", "--worker", worker]
        command = ([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={WORKERS}",
                    *module] if path == "ddp" else [sys.executable, *module])
        with PeakMemory() as memory:
            done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=args.timeout,
                                  env={**os.environ, "OMP_NUM_THREADS": "1"})
        row["peak_mib_per_worker"] = memory.peak_mib
        if done.returncode != 0 or not out.exists():
            tail = [line for line in done.stderr.strip().splitlines() if line.strip()] or ["no output"]
            row["error"] = tail[-1][:200]
            return row
        row.update(json.loads(out.read_text()))
    if stage == "fit" and row.get("windows"):
        row["windows_per_second"] = row["windows"] / row["seconds"]
    elif stage == "predict":
        row["windows_per_second"] = n_series / row["seconds"]
    elif stage == "backtest":
        row["windows_per_second"] = n_series * args.origins / row["seconds"]
    return row


def fit_model(case: str, data: Path, folder: Path) -> Path:
    """The model every path forecasts with: 20 steps on the case's data, one process, saved once."""
    target = folder / f"model-{case}"
    if not (target / "forecaster.json").exists():
        forecaster(max_steps=20, batch_size=1024).fit(str(data), **COLUMNS).save(target)
    return target


def render(rows: list[dict], header: str) -> str:
    frame = pd.DataFrame(rows)
    lines = [header, ""]
    done = frame[frame["seconds"].notna()] if "seconds" in frame else frame.iloc[:0]
    if not done.empty:
        cells = done.groupby(["case", "stage", "path"], sort=False).agg(
            runs=("seconds", "size"), median_seconds=("seconds", "median"), min_seconds=("seconds", "min"),
            max_seconds=("seconds", "max"), windows_per_second=("windows_per_second", "median"),
            peak_mib_per_worker=("peak_mib_per_worker", "max")).reset_index()
        one = cells[cells.path == "one"].set_index(["case", "stage"])["median_seconds"]
        cells["speedup"] = [one.get((r.case, r.stage), float("nan")) / r.median_seconds for r in cells.itertuples()]
        lines += ["Per cell: the median wall seconds of its runs and their range, windows per second (fit: "
                  "training windows; predict: series; backtest: series x origins) at the median, the largest "
                  "peak resident MiB of any process, and the speed-up (one process's median over the path's):", "",
                  markdown_table(cells, floatfmt=".2f"), ""]
    shown = frame.drop(columns=[c for c in ("command", "commit", "date") if c in frame])
    lines += ["Every run:", "", markdown_table(shown, floatfmt=".2f"), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.pipeline --scale", description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=list(CASES))
    parser.add_argument("--paths", nargs="+", default=list(PATHS), choices=PATHS)
    parser.add_argument("--stages", nargs="+", default=list(STAGES), choices=STAGES)
    parser.add_argument("--train-max", type=int, default=10_000, help="fit only cases of at most this many series")
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--origins", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3, help="runs of every cell, the paths interleaved")
    parser.add_argument("--timeout", type=int, default=3600, help="seconds before a cell counts as failed")
    parser.add_argument("--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "tsrec-scale")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        run_stage(*json.loads(args.worker))
        return
    command = command_line('benchmarks.pipeline', ['--scale', *(sys.argv[1:] if argv is None else argv)])
    header = "\n".join([
        "# Past one machine: one process against two workers", "",
        f"- last command: `{command}` (each row's own command, commit and date are in scale.csv)",
        f"- commit: {git_commit()}", f"- machine: {machine()}", f"- date: {now()}",
        f"- DLinear, horizon {HORIZON}, context {CONTEXT}, batches of {args.batch}, {args.origins} backtest origins "
        f"one step apart, one thread per worker, {WORKERS} workers",
    ])
    args.out_dir.mkdir(parents=True, exist_ok=True)
    csv = args.out_dir / "scale.csv"
    rows: list[dict] = pd.read_csv(csv).to_dict("records") if csv.exists() else []
    rerun = {(case, path, stage) for case in args.cases for path in args.paths for stage in args.stages}
    rows = [r for r in rows if (r["case"], r["path"], r["stage"]) not in rerun]  # a cell run again replaces its rows
    for case in args.cases:
        data = write_data(case, args.data_dir)
        model = fit_model(case, data, args.data_dir)
        for repeat in range(1, args.repeats + 1):
            for stage in args.stages:
                if stage == "fit" and int(case.split("x")[0]) > args.train_max:
                    continue
                for path in args.paths:
                    row = {**measure(path, stage, case, data, model, args), "repeat": repeat, "command": command,
                           "commit": git_commit(), "date": now()}
                    rows.append(row)
                    print(json.dumps(row), flush=True)
                    pd.DataFrame(rows).to_csv(csv, index=False)
                    (args.out_dir / "scale.md").write_text(render(rows, header) + "\n")


if __name__ == "__main__":
    main()
