"""Training-step time of RSA-PatchTST with each REM option of issue 26 beside the default and PatchTST.

The models of ``configs/rsa_mixing.toml`` at the study's shapes: tsrec's PatchTST defaults (patch
16, stride 8, d_model 16, 4 heads, 3 layers), batch 32 windows of 7 channels, input 96 (12
patches), horizon 96, float32, random inputs. A step is ``zero_grad`` + forward + MSE + backward +
the training optimizer's step (``ForecastingModule.configure_optimizers``), dropout on. Steps are
interleaved across the variants round by round (reversed every other round), so load from other
processes hits all alike; median and quartiles over ``--steps`` rounds after one untimed warm-up.

Usage::

    python -m benchmarks.rsa_mixing_speed [--steps 20] [--length 96] [--horizon 96] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from typing import Any

import pandas as pd
import torch

from benchmarks.common import command_line, git_commit, machine, markdown_table, now
from benchmarks.speed import Setting, random_batch, seconds
from tsrec.config import DataFacts, TrainingConfig
from tsrec.models import build_model
from tsrec.training import ForecastingModule

#: label -> (registered model, options): the variants of configs/rsa_mixing.toml.
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "patchtst": ("patchtst", {}),
    "rsa_patchtst (gate)": ("rsa_patchtst", {}),
    "rsa_patchtst mix=bias": ("rsa_patchtst", {"rsa": {"mix": "bias"}}),
    "rsa_patchtst per_channel": ("rsa_patchtst", {"rsa": {"per_channel": True}}),
}


class Stepper:
    """One variant with its optimizer and a random batch; :meth:`step` trains once."""

    def __init__(self, name: str, options: dict[str, Any], setting: Setting, length: int) -> None:
        torch.manual_seed(0)
        data = DataFacts(season=24, sub_daily=True, n_channels=setting.channels, n_time_features=setting.time_features)
        self.model = build_model(name, data=data, context_length=length, prediction_length=setting.horizon, **options)
        configured = ForecastingModule(self.model, TrainingConfig()).configure_optimizers()
        self.optimizer = configured["optimizer"] if isinstance(configured, dict) else configured
        self.batch = random_batch(setting, length)

    def step(self) -> None:
        self.model.train()
        self.optimizer.zero_grad()
        loss = self.model.output.loss(self.model(self.batch), self.batch["future_target"],
                                      self.batch["future_observed"], "mse")
        loss.backward()
        self.optimizer.step()


def measure(setting: Setting, length: int, steps: int) -> pd.DataFrame:
    steppers = {label: Stepper(name, options, setting, length) for label, (name, options) in VARIANTS.items()}
    for stepper in steppers.values():
        stepper.step()  # warm-up
    times: dict[str, list[float]] = {label: [] for label in steppers}
    labels = list(steppers)
    for round_ in range(steps):
        for label in labels if round_ % 2 == 0 else labels[::-1]:
            times[label].append(seconds(steppers[label].step))
    base = statistics.median(times["rsa_patchtst (gate)"])
    rows = []
    for label, values in times.items():
        q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
        rows.append({"variant": label, "step ms, median (q1-q3)": f"{1e3 * median:.1f} ({1e3 * q1:.1f}-{1e3 * q3:.1f})",
                     "vs rsa_patchtst": f"{median / base:.2f}x"})
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="python -m benchmarks.rsa_mixing_speed", description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--length", type=int, default=96)
    parser.add_argument("--horizon", type=int, default=96)
    parser.add_argument("--threads", type=int)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    setting = Setting(horizon=args.horizon, d_model=None, d_ff=None)
    table = measure(setting, args.length, args.steps)
    print("\n".join([f"- command: `{command_line('benchmarks.rsa_mixing_speed', argv)}`",
                     f"- commit: `{git_commit()}`", f"- machine: {machine()}",
                     f"- date: {now()}", "", markdown_table(table)]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
