"""Training-step time of the recurrence/attention backbones at one width, beside RSA-Informer,
PatchTST and DLinear.

Every model at ``d_model`` 64 (where it has one; the others at their defaults), batch 32, 7
channels, 4 time features, horizon 96, input lengths 96 and 336, float32 on the CPU, random
inputs. A step is ``zero_grad`` + forward + the model's training loss + backward + Adam (the
optimizer of ``ForecastingModule.configure_optimizers``), dropout on. The models' steps are
interleaved round by round, so load from other processes hits all alike; median and quartiles
over ``--steps`` rounds after one untimed warm-up step. Writes ``zoo_speed.csv`` and
``zoo_speed.md``.

Usage::

    python -m benchmarks.zoo_speed [--lengths 96 336] [--steps 10] [--threads 1] [--out-dir DIR]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from benchmarks.common import ROOT, command_line, git_commit, machine, markdown_table, now, write_csv
from benchmarks.speed import Setting, Stepper, seconds
from tsrec.models import model_config

MODELS = ("dlinear", "patchtst", "rsa_patchtst", "rsa_informer", "srupp", "rsa_srupp", "starsaber",
          "rsa_starsaber", "relevancy_rnn")
SETTING = Setting(horizon=96, d_model=64, d_ff=128)


def _width(name: str) -> dict[str, int]:
    """``name``'s ``d_model`` and ``d_ff`` at the benchmark's width, where it has them."""
    fields = model_config(name).to_dict()
    return {k: v for k, v in (("d_model", SETTING.d_model), ("d_ff", SETTING.d_ff)) if k in fields}


def measure(length: int, steps: int) -> list[dict[str, Any]]:
    steppers = {name: Stepper(name, _width(name), SETTING, length) for name in MODELS}
    for stepper in steppers.values():
        stepper.step()  # warm-up: kernels, Adam's state
    times: dict[str, list[float]] = {name: [] for name in MODELS}
    for round_ in range(steps):
        order = MODELS if round_ % 2 == 0 else MODELS[::-1]
        for name in order:
            times[name].append(seconds(steppers[name].step))
    rows = []
    for name, values in times.items():
        q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
        rows.append({"model": name, "length": length, "d_model": model_config(name).to_dict().get("d_model", "-"),
                     "parameters": sum(p.numel() for p in steppers[name].model.parameters()),
                     "step_median_s": median, "step_q1_s": q1, "step_q3_s": q3})
    return rows


def render(rows: list[dict[str, Any]], provenance: dict[str, Any]) -> str:
    table = [{"model": r["model"], "L": r["length"], "parameters": f"{r['parameters']:,}",
              "step s, median (q1-q3)": f"{r['step_median_s']:.3f} ({r['step_q1_s']:.3f}-{r['step_q3_s']:.3f})"}
             for r in rows]
    return "\n".join([
        "# Training step of the sequence backbones beside RSA-Informer, PatchTST and DLinear", "",
        f"- command: `{provenance['command']}`", f"- commit: `{provenance['commit']}`",
        f"- machine: {provenance['machine']}", f"- date: {provenance['date']}", "",
        f"Batch {SETTING.batch}, {SETTING.channels} channels, {SETTING.time_features} time features, horizon "
        f"{SETTING.horizon}, d_model {SETTING.d_model} (d_ff {SETTING.d_ff} where the model has one; PatchTST's "
        "patches and the zoo models' own defaults otherwise), float32, random inputs; steps interleaved across "
        "models, median and quartiles over the timed rounds.", "",
        markdown_table(pd.DataFrame(table)), ""])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="python -m benchmarks.zoo_speed", description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[96, 336])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--threads", type=int)
    parser.add_argument("--out-dir", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    provenance = {"threads": torch.get_num_threads(), "commit": git_commit(), "machine": machine(), "date": now(),
                  "command": command_line("benchmarks.zoo_speed", argv)}
    rows = [row for length in args.lengths for row in measure(length, args.steps)]
    write_csv(args.out_dir / "zoo_speed.csv", [{**row, **provenance} for row in rows])
    (args.out_dir / "zoo_speed.md").write_text(render(rows, provenance))
    print((args.out_dir / "zoo_speed.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
