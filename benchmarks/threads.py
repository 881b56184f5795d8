"""CPU and wall time of a PatchTST training step on one and on two intra-op threads, by network width.

The evidence behind :data:`tsrec.training.threads.SMALL_NETWORK_PARAMETERS`: a network trains on one
thread when a second one costs more CPU than it saves wall time. Per width (``d_model``, with
``d_ff = 8 d_model`` capped at 256), a PatchTST of the registry's defaults otherwise on 7 channels,
context 336, horizon 96, batch 32: ``--steps`` Adam steps timed on 1 thread, then on 2 (then again,
``--rounds`` times interleaved), after two warm-up steps. Reported: the median CPU seconds
(``time.process_time``) and wall seconds per step of each count, and the ratios 2 threads / 1 thread.
Writes ``threads.md`` (``--output``).

Usage::

    python -m benchmarks.threads [--widths 16 32 64 128] [--steps 10] [--rounds 3] [--out-dir DIR] [--output threads.md]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch

from benchmarks.common import ROOT, command_line, git_commit, machine, now
from tsrec.data import Calendar, data_facts
from tsrec.models import build_model
from tsrec.training.threads import SMALL_NETWORK_PARAMETERS, torch_threads

CHANNELS, CONTEXT, HORIZON, BATCH = 7, 336, 96, 32


def _network(width: int) -> torch.nn.Module:
    facts = data_facts(Calendar("h"), n_channels=CHANNELS, periods=(24.0,))
    return build_model("patchtst", data=facts, prediction_length=HORIZON, context_length=CONTEXT, d_model=width,
                       d_ff=min(8 * width, 256), n_heads=4)


def _time_steps(model: torch.nn.Module, optimizer: torch.optim.Optimizer, batch: dict, steps: int) -> tuple[float, float]:
    """CPU and wall seconds per step of ``steps`` optimizer steps."""
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(steps):
        optimizer.zero_grad()
        model(batch).pow(2).mean().backward()
        optimizer.step()
    return (time.process_time() - cpu) / steps, (time.perf_counter() - wall) / steps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--widths", type=int, nargs="+", default=[16, 32, 64, 128])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out-dir", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--output", default="threads.md", help="file name of the table in --out-dir")
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    batch = {"past_target": torch.randn(BATCH, CONTEXT, CHANNELS), "past_observed": torch.ones(BATCH, CONTEXT, CHANNELS),
             "past_time_feat": torch.zeros(BATCH, CONTEXT, 4), "future_time_feat": torch.zeros(BATCH, HORIZON, 4)}
    rows, load_before = [], os.getloadavg()[0]
    for width in args.widths:
        model = _network(width)
        optimizer = torch.optim.Adam(model.parameters())
        times: dict[int, list[tuple[float, float]]] = {1: [], 2: []}
        for _ in range(args.rounds):
            for threads in (1, 2):
                with torch_threads(threads):
                    _time_steps(model, optimizer, batch, 2)
                    times[threads].append(_time_steps(model, optimizer, batch, args.steps))
        cpu = {t: statistics.median(c for c, _ in v) for t, v in times.items()}
        wall = {t: statistics.median(w for _, w in v) for t, v in times.items()}
        size = sum(p.numel() for p in model.parameters())
        rows.append((width, size, cpu[1], wall[1], cpu[2], wall[2]))
        print(f"d_model {width}: {size:,} parameters; 1 thread {cpu[1]*1e3:.0f} CPU-ms {wall[1]*1e3:.0f} ms; "
              f"2 threads {cpu[2]*1e3:.0f} CPU-ms {wall[2]*1e3:.0f} ms", flush=True)
    lines = ["# Intra-op threads for training", "",
             "CPU and wall time per training step of PatchTST (7 channels, context 336, horizon 96, batch 32) on one "
             "and two torch intra-op threads, medians of interleaved rounds (`benchmarks/threads.py`). tsrec trains "
             f"networks of fewer than {SMALL_NETWORK_PARAMETERS:,} parameters on one thread "
             "(`tsrec.training.threads`).", "",
             "| d_model | parameters | 1 thread CPU-ms | 1 thread ms | 2 threads CPU-ms | 2 threads ms "
             "| CPU 2/1 | wall speed-up 2/1 |", "|---|---|---|---|---|---|---|---|"]
    for width, size, c1, w1, c2, w2 in rows:
        lines.append(f"| {width} | {size:,} | {c1*1e3:.0f} | {w1*1e3:.0f} | {c2*1e3:.0f} | {w2*1e3:.0f} | "
                     f"{c2 / c1:.2f}x | {w1 / w2:.2f}x |")
    lines += ["", f"Command: `{command_line('benchmarks.threads', sys.argv[1:] if argv is None else argv)}`; commit {git_commit()}; machine: {machine()}; {now()}; "
              f"{args.rounds} rounds of {args.steps} steps per count; load average (1 min) "
              f"{load_before:.1f} before, {os.getloadavg()[0]:.1f} after: other processes' threads compete "
              "with the second one.", ""]
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / args.output).write_text("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
