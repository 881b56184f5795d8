"""How long Table 1 at d_model 512 takes on one H100, estimated before any GPU is lent (issue 40).

    python -m benchmarks.gpu_plan    # writes benchmarks/results/gpu_all_plan.md

For every run of ``configs/paper_table_d512.toml`` (seed 0): the protocol's train / validation / test
windows, and, counted here on the CPU with the real networks at the config's sizes, the FLOPs of one
training step and one forward pass (``FlopCounterMode`` on one window, times the batch: every layer is
per-window) and the operators one training step dispatches (each at least one kernel launch on a GPU).
Projected on the GPU at a stated effective throughput and launch cost:

- GPU seconds of a run = epochs x (train batches x step FLOPs + val batches x forward FLOPs) / throughput
  + test batches x forward FLOPs / throughput; the runs' kernels share the one GPU (no MPS), so a batch
  of runs takes at least the sum of their GPU seconds;
- CPU seconds of a run = the same batch counts x operators x :data:`LAUNCH_S` (Python dispatch and the
  launch, eager PyTorch), in parallel over the ``--jobs`` processes, plus :data:`START_S` per run (imports,
  data, CUDA context, test scoring);
- a batch's wall time = the larger of the two. Three throughputs bracket it (:data:`THROUGHPUTS`).

The runs are taken cheapest first (``benchmarks.run --order cost``); the table marks where the
Table 1 stage's share of the 9-minute budget ends at each throughput: the runs past it are the ones cut.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

import torch

from benchmarks import gpu_all
from benchmarks.common import ROOT, git_commit, machine, now

#: Effective bf16 throughputs of these networks' work on one H100, FLOP/s: pessimistic, middle, optimistic
#: (12%, 25% and 38% of 798 TFLOP/s, an 8192^3 bf16 matmul on an H100 as the device tool's notes give it, not
#: measured here (the project's own H200 run measured about 759 TFLOP/s, gpu_speed.md): small
#: matmuls of width 512, softmax, LayerNorm, GELU and dropout run far below the matmul peak).
THROUGHPUTS = (100e12, 200e12, 300e12)
#: Host seconds per dispatched operator of an eager step on the GPU machine (dispatch + kernel launch).
LAUNCH_S = 12e-6
#: Seconds per run outside its steps: interpreter and imports, reading the data, the CUDA context, scoring.
START_S = 25.0
#: Seconds the offline install of the bundle's wheels takes before the stages (an assumption).
INSTALL_S = 10.0
#: The Table 1 stage's share of the budget: the budget less the GPU tests, the speed table, the margin and
#: the wheels' install.
TABLE1_S = gpu_all.BUDGET_S - gpu_all.TESTS_S - gpu_all.SPEED_S - gpu_all.MARGIN_S - INSTALL_S
JOBS = gpu_all.JOBS
TABLE1 = ROOT / gpu_all.TABLE1


def measure(config: dict[str, Any], dataset: str, horizon: int, model: str) -> dict[str, float]:
    """FLOPs of a training step and of a forward pass at the config's batch, and the operators of a step."""
    from benchmarks.run import model_config_fields
    from benchmarks.speed import Setting, Stepper, flops, operators
    from tsrec import datasets
    from tsrec.models.presets import paper_options

    info = datasets.get_info(dataset)
    options = paper_options(dataset, horizon, model)
    context, prediction = options.pop("context_length"), options.pop("prediction_length")
    fields = model_config_fields(model)
    chosen = {key: value for key, value in {**config["model"], **options}.items() if key in fields}
    stepper = Stepper(model, chosen, Setting(batch=1, channels=len(info.columns), horizon=prediction), context)
    batch = config["training"]["batch_size"]
    stepper.step()  # first step: lazy state (optimizer moments) out of the counts
    step_flops = flops(stepper.step) * batch
    stepper.model.eval()
    with torch.no_grad():
        forward_flops = flops(lambda: stepper.model(stepper.batch)) * batch
    return {"step_flops": step_flops, "forward_flops": forward_flops, "ops": operators(stepper.step)}


def gpu_seconds(row: dict[str, Any], throughput: float, epochs: int) -> float:
    """GPU seconds of one run at ``throughput`` FLOP/s (module docstring)."""
    train, val, test = row["batches"]
    return (epochs * (train * row["step_flops"] + val * row["forward_flops"]) + test * row["forward_flops"]) / throughput


def host_seconds(row: dict[str, Any], epochs: int) -> float:
    """Host seconds of one run: its batches' dispatched operators and the fixed cost (module docstring)."""
    train, val, test = row["batches"]
    return (epochs * (train + val) + test) * row["ops"] * LAUNCH_S + START_S


def plan_rows(config: dict[str, Any]) -> list[dict[str, Any]]:
    """Every run of the config (seed 0) in ``--order cost``, with its windows, batches, FLOPs and operators."""
    from benchmarks.run import ordered, selected_runs, setting_splits

    settings = ordered(config, selected_runs(config, argparse.Namespace(dataset=None, horizon=None, model=None)),
                       "cost")
    batch = config["training"]["batch_size"]
    rows = []
    for setting in settings:
        split, _ = setting_splits(config, setting)
        windows = [split[name].n_windows for name in ("train", "val", "test")]
        rows.append({"dataset": setting.dataset, "horizon": setting.horizon, "model": setting.model,
                     "context": setting.context_length, "windows": windows,
                     "batches": [math.ceil(n / batch) for n in windows],
                     **measure(config, setting.dataset, setting.horizon, setting.model)})
        print(f"{setting.dataset}-{setting.horizon} {setting.model}: {rows[-1]['step_flops'] / 1e9:.0f} GFLOP/step, "
              f"{rows[-1]['ops']} ops/step", flush=True)
    return rows


def cut_points(rows: list[dict[str, Any]], epochs: int) -> dict[float, tuple[int, float]]:
    """Per throughput: how many runs (cheapest first) finish within :data:`TABLE1_S`, and the wall
    seconds of all of them."""
    cuts = {}
    for throughput in THROUGHPUTS:
        gpu = host = 0.0
        fitting = None
        for index, row in enumerate(rows):
            gpu, host = gpu + gpu_seconds(row, throughput, epochs), host + host_seconds(row, epochs)
            if fitting is None and max(gpu, host / JOBS) > TABLE1_S:
                fitting = index
        cuts[throughput] = (len(rows) if fitting is None else fitting, max(gpu, host / JOBS))
    return cuts


def render(rows: list[dict[str, Any]], epochs: int, path: Path, command: str) -> str:
    cuts = cut_points(rows, epochs)
    lines = [
        "# Table 1 at d_model 512 on one H100: the estimate before the GPU (issue 40)", "",
        f"Command: `{command}`; commit {git_commit()}; counted on {machine()}; {now()}.", "",
        "FLOPs counted by `FlopCounterMode` on the real networks (one window, times the batch of 32); operators",
        "dispatched by one training step. Projected (see `benchmarks/gpu_plan.py`): GPU seconds = FLOPs / an",
        f"effective bf16 throughput (runs share the GPU); host seconds = batches x operators x {LAUNCH_S * 1e6:g} us",
        f"+ {START_S:g} s per run, over {JOBS} processes; a batch's wall time is the larger. The Table 1 stage has",
        f"{TABLE1_S:g} s of the {gpu_all.BUDGET_S:g} s budget. Runs in `--order cost`, cheapest first.", "",
        "| # | run | input | train/val/test windows | GFLOP/step | ops/step | "
        + " | ".join(f"GPU s at {t / 1e12:g} TF/s" for t in THROUGHPUTS) + " | host s |",
        "|---|---|---:|---|---:|---:|" + "---:|" * len(THROUGHPUTS) + "---:|",
    ]
    for index, row in enumerate(rows, 1):
        gpus = [gpu_seconds(row, t, epochs) for t in THROUGHPUTS]
        marks = "".join(f" (cut at {t / 1e12:g} TF/s)" for t in THROUGHPUTS if index > cuts[t][0])
        lines.append(f"| {index} | {row['dataset']}-{row['horizon']} {row['model']}{marks} | {row['context']} | "
                     f"{'/'.join(map(str, row['windows']))} | {row['step_flops'] / 1e9:.0f} | {row['ops']} | "
                     + " | ".join(f"{g:.1f}" for g in gpus) + f" | {host_seconds(row, epochs):.0f} |")
    total_gpu = {t: sum(gpu_seconds(row, t, epochs) for row in rows) for t in THROUGHPUTS}
    total_host = sum(host_seconds(row, epochs) for row in rows)
    lines += ["", f"All {len(rows)} runs: GPU {', '.join(f'{total_gpu[t]:.0f} s at {t / 1e12:g} TF/s' for t in THROUGHPUTS)}; "
              f"host {total_host:.0f} s, {total_host / JOBS:.0f} s over {JOBS} processes.", ""]
    for throughput, (fitting, wall) in cuts.items():
        lines.append(f"- At {throughput / 1e12:g} TFLOP/s: all runs take about {wall:.0f} s; {fitting} of {len(rows)} "
                     f"runs fit in {TABLE1_S:g} s" + ("." if fitting == len(rows) else
                                                       f"; cut: runs {fitting + 1}-{len(rows)} (the costliest settings)."))
    text = "\n".join(lines) + "\n"
    path.write_text(text)
    return text


def main() -> int:
    from benchmarks.run import load_config

    config = load_config(TABLE1)
    torch.set_num_threads(1)
    rows = plan_rows(config)
    path = ROOT / "benchmarks" / "results" / "gpu_all_plan.md"
    print(render(rows, config["training"]["max_epochs"], path, "python -m benchmarks.gpu_plan"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
