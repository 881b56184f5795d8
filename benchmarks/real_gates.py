"""What the default RSA model's REM heads learn on real data, beside the data's known cycles and ETS.

For each of ETTh1, ETTh2 (hourly), ETTm1 (15-minute) and weather (10-minute), the default RSA
model (``Forecaster("rsa_patchtst")``, every setting at its default but a short step budget) is
fitted on the long-horizon protocol's training part (input 96, horizon 96, validation on the
protocol's validation part, the train-only StandardScaler), and ``Forecaster.gates()`` is read
against the known cycles of the data (a day and a week: 24 and 168 hourly steps, 96 and 672
15-minute steps, 144 and 1008 10-minute steps) and against the smoothing constant ``alpha`` that
statsforecast's AutoETS fits on each channel (:func:`tsrec.smoothing_prior.fit_smoothing_prior`,
per channel, the last 2,000 steps of the training part, all but the last 96; its half-life is
``ln(1/2) / ln(1 - alpha)`` steps).

Usage (one thread; the data from ``--data-dir`` or TSREC_DATA_DIR)::

    OMP_NUM_THREADS=1 python -m benchmarks.real_gates --data-dir /work/shared/datasets [--steps 300] [--seed 0]

writes one row per REM head to ``benchmarks/results/real_gates.csv``, one row per channel's ETS
fit to ``real_gates_ets.csv`` and the summary to ``real_gates.md``.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchmarks.common import ROOT, command_line, git_commit, machine, markdown_table, now, write_csv
from benchmarks.gate_truth import PERIOD_TOLERANCE  # a learned period counts as a known cycle within it

RESULTS = ROOT / "benchmarks" / "results"
HORIZON, CONTEXT = 96, 96
#: The known cycles of each dataset in steps: a day and a week.
KNOWN_CYCLES = {"ETTh1": (24, 168), "ETTh2": (24, 168), "ETTm1": (96, 672), "weather": (144, 1008)}


def fit_one(dataset: str, data_dir: str | None, steps: int, seed: int) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """The gate table of the default RSA model on ``dataset``, the per-channel ETS fits, and facts of the run."""
    from tsrec import Forecaster, datasets
    from tsrec.smoothing_prior import fit_smoothing_prior

    info = datasets.get_info(dataset)
    frame = datasets.load(dataset, data_dir)
    split = datasets.splits(dataset, "long_horizon", context_length=CONTEXT, prediction_length=HORIZON,
                            n_rows=len(frame))
    train, val = (frame.iloc[split[name].start:split[name].end] for name in ("train", "val"))
    started = time.process_time()
    forecaster = Forecaster("rsa_patchtst", prediction_length=HORIZON, context_length=CONTEXT, freq=info.freq,
                            seed=seed, max_steps=steps, scaling="standard",
                            trainer_kwargs={"enable_progress_bar": False, "logger": False,
                                            "enable_model_summary": False})
    forecaster.fit(train, val_df=val)
    fit_cpu = time.process_time() - started
    gates = forecaster.gates()
    day, week = KNOWN_CYCLES[dataset]
    values = train.to_numpy(np.float64)  # [T, C]
    started = time.process_time()
    ets = fit_smoothing_prior([values], day, HORIZON, per_channel=True)
    ets_cpu = time.process_time() - started
    alphas = 1.0 - np.asarray(ets.level_decay)
    ets_rows = pd.DataFrame({"dataset": dataset, "channel": list(train.columns), "alpha": alphas,
                             "half_life_steps": [_half_life(a) for a in alphas],
                             "season": ets.season, "season_decay": ets.season_decay, "skill_pooled": ets.skill})
    facts = {"dataset": dataset, "freq": info.freq, "channels": values.shape[1], "train_rows": len(train),
             "data_periods": forecaster.data_facts.periods, "steps_run": forecaster.training_summary.budget.get(
                 "steps_run"), "fit_cpu_seconds": fit_cpu, "ets_cpu_seconds": ets_cpu, "day": day, "week": week}
    return gates.assign(dataset=dataset), ets_rows, facts


def _half_life(alpha: float) -> float:
    """Steps for a weight ``(1 - alpha)^k`` to halve."""
    return math.log(0.5) / math.log(1.0 - alpha) if 0.0 < alpha < 1.0 else (math.inf if alpha <= 0 else 0.0)


def _nearest_cycle(period: float, day: int, week: int) -> tuple[str, float]:
    """The known cycle nearest to ``period`` (a day or a week, or half of one: the default heads'
    second starts) and the relative distance."""
    candidates = {"day": day, "half day": day / 2, "week": week, "half week": week / 2}
    name = min(candidates, key=lambda k: abs(period - candidates[k]) / candidates[k])
    return name, abs(period - candidates[name]) / candidates[name]


def summary(heads: pd.DataFrame, ets: pd.DataFrame, facts: list[dict[str, Any]]) -> pd.DataFrame:
    rows = []
    for fact in facts:
        g = heads[heads["dataset"] == fact["dataset"]]
        cyc = g[g["kind"] != "regular"]
        near = [_nearest_cycle(p, fact["day"], fact["week"]) for p in cyc["period_steps"]]
        plain, dilated = cyc[~cyc["dilated"]], cyc[cyc["dilated"]]
        e = ets[ets["dataset"] == fact["dataset"]]
        layers = g.groupby(["attention", "layer"])[["gate_start", "gate"]].first()
        rows.append({
            "dataset": fact["dataset"], "known cycles (steps)": f"{fact['day']}, {fact['week']}",
            "data's periods found": ", ".join(f"{p:.1f}" for p in fact["data_periods"][:3]) or "none",
            "plain cos/sin periods: start -> learned (median)":
                f"{plain['period_start_steps'].median():.1f} -> {plain['period_steps'].median():.1f}",
            "dilated cos/sin periods: start -> learned (median)":
                f"{dilated['period_start_steps'].median():.1f} -> {dilated['period_steps'].median():.1f}",
            f"cycle heads within {100 * PERIOD_TOLERANCE:.0f}% of a day or week (or half)":
                f"{sum(d <= PERIOD_TOLERANCE for _, d in near)} of {len(near)}",
            "heads moved > 5%": f"{int(g['moved'].sum())} of {len(g)}",
            "half-lives: start -> learned (median steps)":
                f"{g['half_life_start_steps'].median():.1f} -> {g['half_life_steps'].median():.1f}",
            "gate: start -> learned (mean)": f"{layers['gate_start'].mean():.3f} -> {layers['gate'].mean():.3f}",
            "ETS alpha per channel: median [min, max]":
                f"{e['alpha'].median():.3f} [{e['alpha'].min():.3f}, {e['alpha'].max():.3f}]",
            "ETS half-life (median steps)": f"{e['half_life_steps'].median():.2f}",
            "steps run": fact["steps_run"], "fit CPU s": round(fact["fit_cpu_seconds"], 1),
            "ETS fits CPU s": round(fact["ets_cpu_seconds"], 1),
        })
    return pd.DataFrame(rows)


def report(table: pd.DataFrame, *, command: str, steps: int, seed: int) -> str:
    return "\n".join([
        "# The default RSA model's REM heads on real data (issue 37, part 4)", "",
        f"`{command}` at commit {git_commit()} on {machine()}, {now()}. "
        f"RSA-PatchTST at its defaults (seed {seed}), at most {steps} optimizer steps on the long-horizon "
        "protocol's training part (input 96, horizon 96), one thread. Per-head rows: real_gates.csv; per-channel "
        "ETS fits: real_gates_ets.csv. See docs/when_rsa_helps.md for the reading.", "",
        markdown_table(table.set_index("dataset").T.reset_index().rename(columns={"index": ""})), ""])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.real_gates", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", help="where the dataset CSVs are (default: TSREC_DATA_DIR)")
    parser.add_argument("--steps", type=int, default=300, help="optimizer steps per fit (default 300)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dataset", nargs="*", default=list(KNOWN_CYCLES), choices=list(KNOWN_CYCLES))
    parser.add_argument("--out-dir", default=str(RESULTS))
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    heads, ets, facts = [], [], []
    for dataset in args.dataset:
        g, e, f = fit_one(dataset, args.data_dir, args.steps, args.seed)
        heads.append(g)
        ets.append(e)
        facts.append(f)
        print(f"{dataset}: {f['steps_run']} steps, {f['fit_cpu_seconds']:.0f} CPU s (ETS {f['ets_cpu_seconds']:.0f})",
              flush=True)
    heads_frame, ets_frame = pd.concat(heads, ignore_index=True), pd.concat(ets, ignore_index=True)
    out = Path(args.out_dir)
    heads_frame = heads_frame.drop(columns=["half_life", "period"])  # the same as the *_steps columns, as durations
    write_csv(out / "real_gates.csv", heads_frame.to_dict("records"))
    write_csv(out / "real_gates_ets.csv", ets_frame.to_dict("records"))
    text = report(summary(heads_frame, ets_frame, facts), command=command_line("benchmarks.real_gates",
                  sys.argv[1:] if argv is None else argv), steps=args.steps, seed=args.seed)
    (out / "real_gates.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
