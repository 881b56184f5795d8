"""The data path around training, tsrec against neuralforecast: preparation, training windows,
predict and backtest scoring on many short series and on one long series.

Cases (``--cases``): ``N x T`` series of ``T`` hourly steps (a daily sine, a level per series and
noise; ``unique_id``/``ds``/``y`` columns, rows in id-then-time order as users keep them). Each
(case, library, model) runs in a fresh process, one thread (``OMP_NUM_THREADS=1``,
``torch.set_num_threads(1)``), the libraries interleaved case by case. Stages, in CPU seconds
(``time.process_time``) of that process:

- ``prep``: from the ``fit`` call to the first training batch (reading the frame, windows,
  loaders, model construction), via a Lightning callback both libraries take.
- ``train``: ``--train-steps`` optimizer steps of ``--batch`` windows (tsrec's ``batch_size``,
  neuralforecast's ``windows_batch_size``, drawn from its default ``batch_size`` of 32 series per
  step); ``train_per_window_us`` divides by steps x batch.
- ``predict``: ``predict(df)``, the horizon after every series.
- ``predict_one``: the second ``predict`` of one series' frame (warm).
- ``backtest``: ``--origins`` origins per series, one step apart, scored against the truth, outside
  the fit: tsrec's ``backtest(forecaster, df, n_windows=...)`` (no baselines); neuralforecast's
  ``cross_validation(df, n_windows=..., refit=False)``, which trains again: the CPU of its training
  steps (from the callback) is taken out, its preparation is counted.

``peak_mib_predict`` is the process's peak resident memory after ``predict`` (data, fit,
predictions), ``peak_mib`` at the end (the backtest's error table included). Ratios are tsrec / neuralforecast.
Writes ``pipeline.csv`` and ``pipeline.md`` (``pipeline_parquet.*``, ``pipeline_epoch.*`` with
``--parquet``, ``--epoch``), rows from
every finished case, after each case.

``--scale`` runs :mod:`benchmarks.scale` instead (one process against two DDP processes, Ray
workers and Spark processes; its own options, ``--scale --help``).

Usage::

    python -m benchmarks.pipeline [--cases 1000x500 10000x500 1x200000 1x1000000] [--models dlinear patchtst]
        [--with-neuralforecast | --parquet DIR | --epoch] [--train-steps 20] [--batch 1024] [--origins 20] [--out-dir DIR]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before numpy loads its BLAS

import argparse  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from benchmarks.common import ROOT, command_line, git_commit, machine, markdown_table, now, write_csv  # noqa: E402
from benchmarks.frames import make_frame  # noqa: E402

HORIZON = 24
CONTEXT = 96
CASES = ("1000x500", "10000x500", "1x200000", "1x1000000")
MODELS = ("dlinear", "patchtst")
STAGES = ("prep", "train", "predict", "predict_one", "backtest")
NF_CLASSES = {"dlinear": "DLinear", "patchtst": "PatchTST"}


class Clock:
    """CPU times a training run reached: its first batch, the end of its last, its step count.
    Kept outside the callback, which neuralforecast deep-copies with its models."""

    def __init__(self) -> None:
        self.first_batch: float | None = None
        self.end: float | None = None
        self.steps = 0


def _stamp_callback(library: str, clock: Clock) -> Any:
    """A Lightning callback recording into ``clock`` (neuralforecast trains through the older
    ``pytorch_lightning`` namespace)."""
    import importlib

    pl = importlib.import_module("lightning.pytorch" if library == "tsrec" else "pytorch_lightning")

    class Stamp(pl.Callback):
        def __deepcopy__(self, memo: dict) -> Stamp:
            return self  # one clock, wherever the models are copied

        def on_train_batch_start(self, trainer, module, batch, batch_idx) -> None:  # noqa: ANN001
            if clock.first_batch is None:
                clock.first_batch = time.process_time()

        def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:  # noqa: ANN001
            clock.steps += 1
            clock.end = time.process_time()

    return Stamp()


def run_case(library: str, model: str, n_series: int, length: int, steps: int | None, batch: int, origins: int,
             parquet: str | None = None) -> dict:
    """One (library, model, case) in this process: the stages' CPU seconds and the peak memory.
    With ``parquet`` (tsrec only) the data are read from that file, never built as a frame here."""
    import torch

    torch.set_num_threads(1)
    if parquet is None:
        df = make_frame(n_series, length)
        one = df[df.unique_id == "s0"]
    else:
        df, one = parquet, pd.read_parquet(parquet, filters=[("unique_id", "==", "s0")])
    stamp = Clock()
    callback = _stamp_callback(library, stamp)
    row: dict[str, Any] = {"library": library, "model": model, "series": n_series, "length": length,
                           "source": "frame" if parquet is None else "parquet"}
    started = time.process_time()
    if library == "tsrec":
        from tsrec import Forecaster
        from tsrec.evaluation import backtest

        columns = {"time_col": "ds", "id_col": "unique_id", "target_col": "y"}
        budget = {"max_epochs": 1} if steps is None else {"max_steps": steps}  # None: one whole epoch
        forecaster = Forecaster(model, prediction_length=HORIZON, context_length=CONTEXT, batch_size=batch,
                                **budget, val_windows=0, refit_full=False, seed=0,
                                trainer_kwargs={"callbacks": [callback], "enable_progress_bar": False})
        forecaster.fit(df, **columns)
        predict = lambda frame: forecaster.predict(frame)  # noqa: E731
        evaluate = lambda: backtest(forecaster, df, n_windows=origins, stride=1, baselines=(), **columns)  # noqa: E731
    else:
        import logging

        from neuralforecast import NeuralForecast
        from neuralforecast import models as nf_models

        logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
        network = getattr(nf_models, NF_CLASSES[model])(
            h=HORIZON, input_size=CONTEXT, max_steps=steps, windows_batch_size=batch,
            val_check_steps=10**9, random_seed=0, callbacks=[callback], enable_progress_bar=False, logger=False,
            enable_model_summary=False, scaler_type="standard")
        forecaster = NeuralForecast(models=[network], freq="h")
        forecaster.fit(df)
        predict = lambda frame: forecaster.predict(df=frame)  # noqa: E731

        def evaluate() -> None:
            for fitted in (network, *forecaster.models):
                fitted.trainer_kwargs["callbacks"] = [_stamp_callback(library, again)]
            forecaster.cross_validation(df, n_windows=origins, step_size=1, refit=False)

        again = Clock()
    row["prep"] = stamp.first_batch - started
    row["train"] = stamp.end - stamp.first_batch
    row["train_steps"] = stamp.steps
    row["train_per_window_us"] = 1e6 * row["train"] / max(stamp.steps * batch, 1)
    for stage, call in (("predict", lambda: predict(df)), ("predict_one", lambda: predict(one))):
        if stage == "predict_one":
            predict(one)  # warm
        clock = time.process_time()
        call()
        row[stage] = time.process_time() - clock
    row["peak_mib_predict"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # fit and predict
    if origins:
        clock = time.process_time()
        evaluate()
        row["backtest"] = time.process_time() - clock
        if library != "tsrec" and again.first_batch is not None:
            row["backtest"] -= again.end - again.first_batch  # its retraining steps are not scoring
    row["peak_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return row


def write_parquet(case: str, folder: Path) -> str:
    """The case's frame written to ``folder/<case>.parquet`` (sorted by id, row groups of 1M rows), once."""
    path = folder / f"{case}.parquet"
    if not path.exists():
        n_series, length = (int(x) for x in case.split("x"))
        folder.mkdir(parents=True, exist_ok=True)
        make_frame(n_series, length).to_parquet(path, row_group_size=1_000_000)
    return str(path)


def _in_subprocess(library: str, model: str, case: str, args: argparse.Namespace) -> dict:
    n_series, length = (int(x) for x in case.split("x"))
    parquet = None if args.parquet is None else write_parquet(case, args.parquet)
    command = [sys.executable, "-m", "benchmarks.pipeline", "--worker", json.dumps(
        [library, model, n_series, length, None if args.epoch else args.train_steps, args.batch, args.origins if n_series > 1 else 0, parquet])]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"library": library, "model": model, "series": n_series, "length": length,
                "source": "frame" if parquet is None else "parquet", **{stage: float("nan") for stage in STAGES}, "error": tail[:200]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def help_seconds(repeats: int = 5) -> float:
    """Median wall seconds of ``tsrec --help`` (the console script beside this Python) in a fresh process."""
    script = str(Path(sys.executable).with_name("tsrec"))
    times = []
    for _ in range(repeats):
        clock = time.perf_counter()
        subprocess.run([script, "--help"], cwd=ROOT, capture_output=True, check=True)
        times.append(time.perf_counter() - clock)
    return float(np.median(times))


def render(rows: list[dict], header: str) -> str:
    frame = pd.DataFrame(rows)
    lines = [header, "", "CPU seconds per stage (one thread), peak resident MiB:", "",
             markdown_table(frame, floatfmt=".3f"), ""]
    if {"tsrec", "neuralforecast"} <= set(frame.get("library", ())):
        keys = ["model", "series", "length", "source"]
        ours = frame[frame.library == "tsrec"].set_index(keys)
        theirs = frame[frame.library == "neuralforecast"].set_index(keys)
        stages = [s for s in (*STAGES, "train_per_window_us", "peak_mib_predict", "peak_mib")
                  if s in ours and s in theirs]
        ratio = (ours[stages] / theirs[stages]).reset_index()
        lines += ["tsrec / neuralforecast (below 1: tsrec cheaper):", "", markdown_table(ratio, floatfmt=".2f"), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if "--scale" in argv:
        from benchmarks.scale import main as scale

        scale([a for a in argv if a != "--scale"])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=list(CASES))
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--with-neuralforecast", action="store_true")
    parser.add_argument("--train-steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--origins", type=int, default=20)
    parser.add_argument("--out-dir", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--epoch", action="store_true", help="train tsrec for one whole epoch instead of --train-steps")
    parser.add_argument("--parquet", type=Path, help="read each case from a Parquet file written into this folder "
                        "(tsrec only; neuralforecast takes frames)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(run_case(*json.loads(args.worker))))
        return
    if (args.parquet is not None or args.epoch) and args.with_neuralforecast:
        parser.error("--parquet and --epoch measure tsrec only; leave out --with-neuralforecast")
    libraries = ["tsrec"] + (["neuralforecast"] if args.with_neuralforecast else [])
    header = "\n".join([
        "# Data path around training: tsrec against neuralforecast", "",
        f"- command: `{command_line('benchmarks.pipeline', argv)}`",
        f"- commit: {git_commit()}", f"- machine: {machine()}", f"- date: {now()}",
        f"- horizon {HORIZON}, context {CONTEXT}, "
        f"{'one epoch' if args.epoch else f'{args.train_steps} training steps'} of batches of {args.batch} windows, "
        f"{args.origins} backtest origins (many-series cases)",
        f"- `tsrec --help`: {help_seconds():.2f} s wall (median of 5 fresh processes)",
    ])
    rows: list[dict] = []
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for case in args.cases:
        for model in args.models:
            for library in libraries if len(rows) % 2 == 0 else libraries[::-1]:
                row = _in_subprocess(library, model, case, args)
                rows.append(row)
                print(json.dumps(row), flush=True)
        name = "pipeline" + ("_parquet" if args.parquet is not None else "") + ("_epoch" if args.epoch else "")
        write_csv(args.out_dir / f"{name}.csv", rows)
        (args.out_dir / f"{name}.md").write_text(render(rows, header) + "\n")


if __name__ == "__main__":
    main()
