"""Training speed, prediction latency, FLOPs and peak memory of ``informer`` against ``rsa_informer``.

At each input length ``L`` (label length 48 at ``L = 48``, the ETTh1-24 setting, else ``L / 2``;
horizon 24), batch 32, 7 channels, 4 time features, ``d_model`` 512, float32 on the CPU, random
inputs:

- **training step**: ``zero_grad`` + forward + masked MSE + backward + Adam step, with the optimizer
  of ``ForecastingModule.configure_optimizers``, dropout on. Median and quartiles over ``--steps``.
- **prediction**: ``eval()`` + ``no_grad``, for the batch and for its first window alone.
- **FLOPs** of a training step (forward + backward) and of both predictions, counted by
  ``torch.utils.flop_counter.FlopCounterMode`` during each model's first, untimed calls (which
  also warm it up). Only matmuls and attention kernels count: elementwise work does not.
- **matmul throughput**: one fp32 ``[n, n] x [n, n]`` product timed after every round of steps, so
  under the same load. ``step / bound`` is the median step over ``FLOPs / throughput``.
- **peak memory**: peak resident-set growth of the first batch prediction and the first training
  step (which also allocates gradients and Adam's state) of the model in a fresh process, after a
  tiny model of the same kind has loaded the kernels.

The models' steps and predictions are interleaved, order alternating each round, so that load from
other processes hits both alike. Writes ``speed.csv`` (one row per model and length) and
``speed.md`` (rendered from those rows only).

Usage::

    python -m benchmarks.speed [--lengths 48 336 720 1440] [--steps 10] [--threads T] [--out-dir DIR]
    python -m benchmarks.speed --quick      # tiny sizes, a smoke test into a temporary directory
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode

from benchmarks.common import (
    ROOT,
    command_line,
    git_commit,
    in_fresh_process,
    machine,
    now,
    peak_rss_growth_mib,
    status_kb,
    write_csv,
)
from tsrec.batch import ForecastBatch
from tsrec.config import DataFacts, TrainingConfig
from tsrec.models import build_model
from tsrec.training import ForecastingModule, masked_loss

MODELS = ("informer", "rsa_informer")
DEFAULT_LENGTHS = (48, 336, 720, 1440)
QUICK_LENGTHS = (48, 96)
ETTH1_LENGTH = 48  # ETTh1-24: input 48, label 48, horizon 24
MAX_OVERHEAD_PCT = 10.0  # target: RSA overhead per training step
MAX_STEP_OVER_BOUND = 1.2  # target: step time / (FLOPs / matmul throughput)
TIMED = ("step", "predict_batch", "predict_window")  # the Case methods timed every round
Timings = dict[str, dict[str, list[float]]]


@dataclass(frozen=True)
class Setting:
    """Shapes of a run: ``batch`` windows of ``channels`` series with ``time_features`` calendar features,
    ``horizon`` steps ahead, a network of width ``d_model``; ``matmul`` is the side of the timed square product."""

    batch: int = 32
    channels: int = 7
    time_features: int = 4
    horizon: int = 24
    d_model: int = 512
    d_ff: int = 2048
    matmul: int = 2048

    def label_length(self, length: int) -> int:
        return length if length == ETTH1_LENGTH else length // 2


QUICK = Setting(batch=4, d_model=32, d_ff=64, matmul=256)


def random_batch(setting: Setting, length: int) -> ForecastBatch:
    """``past_target [B, L, C]``, ``past_time_feat [B, L, F]``, ``future_time_feat [B, H, F]``,
    ``future_target`` and ``future_observed [B, H, C]`` (all observed)."""
    b, c, f, h = setting.batch, setting.channels, setting.time_features, setting.horizon
    return {"past_target": torch.randn(b, length, c), "past_time_feat": torch.randn(b, length, f),
            "future_time_feat": torch.randn(b, h, f), "future_target": torch.randn(b, h, c),
            "future_observed": torch.ones(b, h, c)}


class Case:
    """One model at one input length, with its training optimizer and a random batch."""

    def __init__(self, name: str, setting: Setting, length: int) -> None:
        torch.manual_seed(0)
        data = DataFacts(season=24, sub_daily=True, n_channels=setting.channels,
                         n_time_features=setting.time_features)
        self.model = build_model(name, data=data, context_length=length, prediction_length=setting.horizon,
                                 label_length=setting.label_length(length), d_model=setting.d_model,
                                 d_ff=setting.d_ff)
        configured = ForecastingModule(self.model, TrainingConfig()).configure_optimizers()
        self.optimizer = configured["optimizer"] if isinstance(configured, dict) else configured
        self.batch = random_batch(setting, length)
        self.window = {key: value[:1] for key, value in self.batch.items()}

    def step(self) -> None:
        self.model.train()
        self.optimizer.zero_grad()
        forecast = self.model(self.batch)  # [B, H, C]
        masked_loss(forecast, self.batch["future_target"], self.batch["future_observed"], "mse").backward()
        self.optimizer.step()

    def predict_batch(self) -> torch.Tensor:
        return self._predict(self.batch)  # [B, H, C]

    def predict_window(self) -> torch.Tensor:
        return self._predict(self.window)  # [1, H, C]

    def _predict(self, batch: ForecastBatch) -> torch.Tensor:
        self.model.eval()
        with torch.no_grad():
            return self.model(batch)


def seconds(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def flops(run: Callable[[], object]) -> int:
    """FLOPs that ``FlopCounterMode`` counts while ``run()`` runs."""
    counter = FlopCounterMode(display=False)
    with counter:
        run()
    return counter.get_total_flops()


def quartiles(values: list[float]) -> tuple[float, float, float]:
    """First quartile, median, third quartile."""
    q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, median, q3


def peak_memory(name: str, setting: Setting, length: int, threads: int) -> dict[str, float | None]:
    """Peak RSS growth (MiB) of the first batch prediction and the first training step of ``name`` over
    the resident size with model, optimizer and batch allocated. Run it in a fresh process."""
    torch.set_num_threads(threads)
    tiny = Case(name, replace(setting, batch=2, d_model=16, d_ff=32), length)
    tiny.step()  # loads lazily initialised kernels and libraries
    tiny.predict_batch()
    del tiny
    case = Case(name, setting, length)
    base_kb = status_kb("VmRSS") or 0
    return {"predict_peak_mib": peak_rss_growth_mib(case.predict_batch, base_kb),
            "train_peak_mib": peak_rss_growth_mib(case.step, base_kb)}


def time_cases(cases: dict[str, Case], setting: Setting, steps: int) -> tuple[Timings, list[float]]:
    """Seconds of ``steps`` rounds of every timed call per case (``timings[name][kind]``), and the
    matmul GFLOP/s sampled after every round."""
    a, b = torch.randn(setting.matmul, setting.matmul), torch.randn(setting.matmul, setting.matmul)
    torch.mm(a, b)
    timings = {name: {kind: [] for kind in TIMED} for name in cases}
    matmul_gflops = []
    for round_ in range(steps):
        for name in (list(cases) if round_ % 2 == 0 else list(cases)[::-1]):
            for kind in TIMED:
                timings[name][kind].append(seconds(getattr(cases[name], kind)))
        matmul_gflops.append(2 * setting.matmul ** 3 / seconds(lambda: torch.mm(a, b)) / 1e9)
    return timings, matmul_gflops


def measure_length(setting: Setting, length: int, steps: int) -> list[dict[str, Any]]:
    """One row per model at ``length``: times, FLOPs, throughput reference, overhead and peak memory."""
    threads = torch.get_num_threads()
    memory = {name: in_fresh_process(peak_memory, name, setting, length, threads) for name in MODELS}
    cases = {name: Case(name, setting, length) for name in MODELS}
    # Each model's first calls are counted; they also allocate Adam's state and warm the kernels up.
    counted = {name: {kind: flops(getattr(case, kind)) for kind in TIMED} for name, case in cases.items()}
    timings, matmul_gflops = time_cases(cases, setting, steps)
    throughput = statistics.median(matmul_gflops) * 1e9  # FLOP/s
    informer_step = statistics.median(timings["informer"]["step"])
    rows = []
    for name, case in cases.items():
        train_flops = counted[name]["step"]
        spreads = {f"{kind}_{stat}_s": value for kind in TIMED
                   for stat, value in zip(("q1", "median", "q3"), quartiles(timings[name][kind]))}
        step = spreads["step_median_s"]
        rows.append({
            "model": name, "length": length, "label": setting.label_length(length), "horizon": setting.horizon,
            "batch": setting.batch, "channels": setting.channels, "time_features": setting.time_features,
            "d_model": setting.d_model, "parameters": sum(p.numel() for p in case.model.parameters()),
            "steps": steps, **spreads,
            "rsa_overhead_pct": None if name == "informer" else 100 * (step / informer_step - 1),
            "train_gflop": train_flops / 1e9, "predict_batch_gflop": counted[name]["predict_batch"] / 1e9,
            "predict_window_gflop": counted[name]["predict_window"] / 1e9,
            "matmul_gflops": throughput / 1e9, "flop_bound_s": train_flops / throughput,
            "step_over_bound": step * throughput / train_flops, **memory[name],
        })
    return rows


def _cell(value: float | None, template: str) -> str:
    return "-" if value is None else template.format(value)


def _spread(row: dict[str, Any], key: str, scale: float = 1.0, fmt: str = ".2f") -> str:
    """``median (q1-q3)`` of ``key`` in ``row``, times ``scale``."""
    return "{} ({}-{})".format(*(format(row[f"{key}_{stat}_s"] * scale, fmt) for stat in ("median", "q1", "q3")))


def targets(rows: list[dict[str, Any]]) -> list[tuple[str, str, int, str, bool]]:
    """``(target, model, L, measured, met)`` for every target the rows measure."""
    overhead = f"RSA overhead per training step <= {MAX_OVERHEAD_PCT:g}%"
    bound = f"training step <= {MAX_STEP_OVER_BOUND:g}x FLOPs / matmul throughput"
    return ([(overhead, r["model"], r["length"], f"{r['rsa_overhead_pct']:+.1f}%",
              r["rsa_overhead_pct"] <= MAX_OVERHEAD_PCT) for r in rows if r["rsa_overhead_pct"] is not None]
            + [(bound, r["model"], r["length"], f"{r['step_over_bound']:.2f}x",
                r["step_over_bound"] <= MAX_STEP_OVER_BOUND) for r in rows])


TRAINING_COLUMNS = (
    "Step: `zero_grad` + forward + masked MSE + backward + Adam, median (quartiles) in seconds over the timed "
    "steps, the two models interleaved. RSA overhead: rsa_informer's median step over informer's. GFLOP: counted "
    "by `FlopCounterMode` (matmuls and attention only). Matmul: median fp32 square-matmul throughput sampled "
    "between the steps. Bound: GFLOP / matmul throughput. Peak: resident-set growth of the first step in a fresh "
    "process (activations, gradients and Adam's state).")
PREDICTION_COLUMNS = (
    "`eval()` + `no_grad`, median (quartiles) in milliseconds, for the batch and for its first window. GFLOP: "
    "counted by `FlopCounterMode`. Peak: resident-set growth of the first batch prediction in a fresh process.")


def render(rows: list[dict[str, Any]]) -> str:
    """Markdown of the rows of one run: its command, commit, machine, date and threads, then the tables."""
    run = rows[0]
    lengths = ", ".join(str(length) for length in dict.fromkeys(r["length"] for r in rows))
    setting = (f"batch {run['batch']}, {run['channels']} channels, {run['time_features']} time features, "
               f"horizon {run['horizon']}, d_model {run['d_model']}")
    lines = [
        "# Training speed, prediction latency and memory: informer vs rsa_informer", "",
        f"- command: `{run['command']}`", f"- commit: `{run['commit']}`", f"- machine: {run['machine']}",
        f"- date: {run['date']}", f"- torch threads: {run['threads']}", f"- input lengths L: {lengths}",
        f"- setting: {setting}, float32 on the CPU, random inputs", "",
        "## Training step", "", TRAINING_COLUMNS, "",
        ("| model | L | label | parameters | steps | step s | RSA overhead | GFLOP | matmul GFLOP/s | bound s | "
         "step / bound | peak MiB |"),
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        *(f"| {r['model']} | {r['length']} | {r['label']} | {r['parameters']:,} | {r['steps']} | "
          f"{_spread(r, 'step')} | {_cell(r['rsa_overhead_pct'], '{:+.1f}%')} | {r['train_gflop']:.1f} | "
          f"{r['matmul_gflops']:.1f} | {r['flop_bound_s']:.2f} | {r['step_over_bound']:.2f}x | "
          f"{_cell(r['train_peak_mib'], '{:.0f}')} |" for r in rows),
        "", "## Prediction", "",
        PREDICTION_COLUMNS, "",
        "| model | L | batch ms | 1 window ms | batch GFLOP | 1 window GFLOP | peak MiB |",
        "|---|---:|---:|---:|---:|---:|---:|",
        *(f"| {r['model']} | {r['length']} | {_spread(r, 'predict_batch', 1e3, '.0f')} | "
          f"{_spread(r, 'predict_window', 1e3, '.1f')} | {r['predict_batch_gflop']:.1f} | "
          f"{r['predict_window_gflop']:.2f} | "
          f"{_cell(r['predict_peak_mib'], '{:.0f}')} |" for r in rows),
        "", "## Targets", "", "| target | model | L | measured | |", "|---|---|---:|---:|---|",
        *(f"| {target} | {model} | {length} | {measured} | {'met' if met else 'missed'} |"
          for target, model, length, measured, met in targets(rows)),
    ]
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.speed", description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+",
                        help=f"input lengths (default {' '.join(map(str, DEFAULT_LENGTHS))})")
    parser.add_argument("--steps", type=int, help="timed steps and predictions per model and length (default 10)")
    parser.add_argument("--threads", type=int, help="torch intra-op threads (default: torch's)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, 3 steps: a smoke test, not a result")
    parser.add_argument("--out-dir", type=Path, help="where speed.csv and speed.md go (default benchmarks/results; "
                                                     "a temporary directory with --quick)")
    args = parser.parse_args(argv)
    if args.steps is not None and args.steps < 2:
        parser.error("--steps needs at least 2 (for quartiles)")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    setting = QUICK if args.quick else Setting()
    lengths = sorted(set(args.lengths or (QUICK_LENGTHS if args.quick else DEFAULT_LENGTHS)))
    steps = args.steps or (3 if args.quick else 10)
    out_dir = args.out_dir or (Path(tempfile.mkdtemp(prefix="tsrec-speed-")) if args.quick
                               else ROOT / "benchmarks" / "results")
    provenance = {"threads": torch.get_num_threads(), "commit": git_commit(), "machine": machine(), "date": now(),
                  "command": command_line("benchmarks.speed", argv)}
    rows = []
    for length in lengths:
        rows += measure_length(setting, length, steps)
        print(f"L={length}: " + ", ".join(f"{r['model']} {r['step_median_s']:.2f} s/step" for r in rows[-len(MODELS):]),
              flush=True)
    rows = [{**row, **provenance} for row in rows]
    write_csv(out_dir / "speed.csv", rows)
    (out_dir / "speed.md").write_text(render(rows))
    print(f"wrote {out_dir / 'speed.csv'} and {out_dir / 'speed.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
