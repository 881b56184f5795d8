"""Ablation: REM settings found in the data against the calendar's hand-picked ones.

RSA's dilation and initial cycle periods default to what :func:`tsrec.data.periods.dominant_periods`
finds in the training part (``tsrec.config.RSAConfig.resolved``); the paper picks them from the
calendar (a day and a week for hourly data; ``tsrec.models.presets.paper_rsa_settings``). On the
shared benchmark datasets the two coincide: every one has its dominant cycle at one day, which the
detector finds to within 0.1% (the table's first part lists what each resolves to), so the
long-horizon runs cannot tell them apart. This script measures where they differ: hourly series
whose cycle is not a day (``cycle`` steps), forecast by the same network once with the settings
from the data and once with the calendar's.

Usage::

    python -m benchmarks.rem_settings [--model rsa_patchtst] [--cycles 17 24 40] [--seeds 0 1 2]
        [--data-dir ../shared/datasets] [--out benchmarks/results/rem_settings.md]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd

from benchmarks.common import ROOT, git_commit, machine, markdown_table, now

STEPS, HORIZON, CONTEXT, TEST_WINDOWS = 24 * 7 * 10, 24, 96, 12
SERIES = dict(n_series=3, ar=0.9, innovation=0.3, amplitude=1.0, random_phase=True, noise=0.1)
TRAINING = dict(max_epochs=10, seed=0)


def calendar_rsa(model: str) -> dict[str, Any]:
    """The calendar's REM settings for hourly data, in the model's token units: dilation one day,
    plain cycles at a day and its half, dilated cycles at a week and its half (in days)."""
    from tsrec.models import model_config

    per_token = model_config(model).to_dict().get("stride", 1)
    day = 24 / per_token
    return dict(dilation=max(1, round(day)), periods=(day, day / 2), dilated_periods=(7.0, 3.5))


def resolved_on_datasets(model: str, data_dir: str | None) -> pd.DataFrame:
    """What the data-derived defaults resolve to on each shared dataset's training part."""
    from tsrec import datasets
    from tsrec.data import canonicalize, data_facts
    from tsrec.data.periods import dominant_periods
    from tsrec.models import model_config

    rows = []
    for name in datasets.dataset_names():
        if datasets.find_file(name, data_dir) is None:
            continue
        frame = datasets.load(name, data_dir)
        split = datasets.splits(name, "long_horizon", context_length=CONTEXT, prediction_length=96, n_rows=len(frame))
        panel = canonicalize(frame.iloc[split["train"].start:split["train"].end])
        periods = dominant_periods([s.values for s in panel.items], [s.observed for s in panel.items])
        facts = data_facts(panel.calendar, n_channels=len(panel.columns), periods=periods)
        rsa = model_config(model, context_length=CONTEXT, prediction_length=96).resolved(facts).rsa
        found = ", ".join(f"{p:.2f}" for p in periods)
        rows.append({"dataset": name, "freq": panel.freq, "periods found (steps)": found,
                     "calendar season": facts.season, "dilation": rsa.dilation,
                     "periods (tokens)": ", ".join(f"{p:.3f}" for p in rsa.periods)})
    return pd.DataFrame(rows)


def run(model: str, cycle: int, seed: int, settings: str) -> dict[str, Any]:
    """Test MSE (scaled) of ``model`` on synthetic hourly series with a ``cycle``-step cycle."""
    from tsrec import Forecaster
    from tsrec.datasets.synthetic import recurrent_series
    from tsrec.evaluation import backtest

    df = recurrent_series(STEPS, cycle=cycle, seed=seed, **SERIES)
    train = df.iloc[: -HORIZON * TEST_WINDOWS]
    rsa = calendar_rsa(model) if settings == "calendar" else {}
    started = time.perf_counter()
    forecaster = Forecaster(model, prediction_length=HORIZON, context_length=CONTEXT, rsa=rsa,
                            trainer_kwargs={"enable_progress_bar": False, "logger": False},
                            **{**TRAINING, "seed": seed}).fit(train)
    result = backtest(forecaster, df, n_windows=TEST_WINDOWS, baselines=("naive", "seasonal_naive"))
    gates = forecaster.gates()
    cos = gates[gates["kind"] == "cos"]
    return {"model": model, "cycle": cycle, "seed": seed, "settings": settings,
            "mse": result.metric("mse", "scaled"), "mse_ratio_naive": result.metric("mse_ratio_naive", "ratio"),
            "initial_periods": str(forecaster.resolved_settings.network.rsa.periods),
            "learned_periods_steps": ", ".join(f"{p:.1f}" for p in cos["period_steps"]),
            "seconds": round(time.perf_counter() - started, 1)}


def render(table: pd.DataFrame, datasets_table: pd.DataFrame, command: str) -> str:
    summary = table.groupby(["model", "cycle", "settings"])["mse"].agg(["mean", "std", "count"]).unstack("settings")
    lines = ["# REM settings: from the data or from the calendar", "",
             f"`{command}` at commit {git_commit()} on {machine()}, {now()}.", "",
             "What the data-derived defaults resolve to on the shared datasets (training part, input 96):", "",
             markdown_table(datasets_table), "",
             f"Synthetic hourly series ({STEPS} steps x {SERIES['n_series']}, AR(1) {SERIES['ar']} + one cycle of the "
             f"given length + noise), context {CONTEXT}, horizon {HORIZON}, the last {TEST_WINDOWS} windows held out; "
             "test MSE on the scaled data, mean ± sample std over seeds:", "",
             "| model | cycle | from the data | calendar (a day) |", "|---|---|---|---|"]
    for (model, cycle), row in summary.iterrows():
        cells = [f"{row[('mean', s)]:.4f} ± {row[('std', s)]:.4f} (n={int(row[('count', s)])})"
                 for s in ("data", "calendar")]
        lines.append(f"| {model} | {cycle} | {cells[0]} | {cells[1]} |")
    lines += ["", "Every run (initial and learned cycle periods of the cos heads, in steps):", "",
              markdown_table(table), ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="rsa_patchtst")
    parser.add_argument("--cycles", type=int, nargs="+", default=[17, 24, 40])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "datasets"))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "rem_settings.md")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    rows = [run(args.model, cycle, seed, settings) for cycle in args.cycles for seed in args.seeds
            for settings in ("data", "calendar")]
    table = pd.DataFrame(rows)
    table.to_csv(args.out.with_suffix(".csv"), index=False)
    command = "python -m benchmarks.rem_settings " + " ".join(sys.argv[1:])
    args.out.write_text(render(table, resolved_on_datasets(args.model, args.data_dir), command))
    print(args.out.read_text())


if __name__ == "__main__":
    main()
