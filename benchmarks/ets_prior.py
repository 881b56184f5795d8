"""The verdict of issue 37's pre-registered study: RSA-PatchTST started from exponential smoothing.

The plan, written before any run with the option: ``benchmarks/results/ets_prior_plan.md``. The
runs come from two configs of the existing runners (nothing here trains anything):

    python -m benchmarks.unseen_like benchmarks/configs/ets_prior.toml        # part A -> ets_prior.csv
    python -m benchmarks.run benchmarks/configs/ets_prior_few_shot.toml       # part B -> ets_prior_few_shot.csv

Part B's ``rsa_patchtst_ets`` runs are paired with the committed ``patchtst`` and ``rsa_patchtst``
runs of ``few_shot.csv`` at the same dataset, horizon, input, fraction and seed. This module reads
the three CSVs, pairs the runs by (dataset, seed) within each part, and judges the pass rule with
``benchmarks.sign_test`` (its exact sign test and mean relative MSE change, unchanged):

    python -m benchmarks.ets_prior            # writes benchmarks/results/ets_prior.md and prints it

Pass rule (the plan's): over all pairs of both parts, ``rsa_patchtst_ets`` is ahead of ``patchtst``
(lower MSE) in at least 75% of the pairs AND its mean gain, the mean over pairs of ``(mse_patchtst -
mse_ets_prior) / mse_patchtst``, is at least 5%, AND on every short panel (part A) its mean MSE over
the seeds is at most 1.05x statsforecast's AutoETS's. Judged on the pairs that ran; labelled partial
while fewer than the planned pairs have run.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tomllib
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT, git_commit, read_rows
from benchmarks.sign_test import PairedComparison, compare

RESULTS = ROOT / "benchmarks" / "results"
CONFIGS = ROOT / "benchmarks" / "configs"
PRIOR, PATCHTST, RSA, ETS = "rsa_patchtst_ets", "patchtst", "rsa_patchtst", "auto_ets"
WIN_SHARE, MEAN_GAIN, ETS_MARGIN = 0.75, 0.05, 1.05


def part_a_rows(path: Path) -> list[dict[str, str]]:
    """``benchmarks.unseen_like`` rows (status ok) as ``benchmarks.sign_test`` rows: one input
    (``context_length`` 0: the Forecaster's default) and the whole training part (fraction 1)."""
    return [{"part": "A", "dataset": r["dataset"], "horizon": r["horizon"], "context_length": "0",
             "train_fraction": "1.0", "seed": r["seed"] or "-1", "model": r["model"], "mse": r["mse"],
             "cpu_seconds": r.get("cpu_seconds", ""), "commit": r["commit"], "machine": r["machine"],
             "command": r["command"]}
            for r in (read_rows(path) if path.exists() else []) if r["status"] == "ok"]


def part_b_rows(prior_path: Path, few_shot_path: Path, config: dict[str, Any]) -> list[dict[str, str]]:
    """The prior's few-shot rows and the committed few-shot rows of the other two models at the
    plan's datasets, horizons and fraction."""
    settings = {(d, h) for d, hs in config["settings"].items() for h in hs}
    fractions = {float(f) for f in config["train_fractions"]}
    rows = (read_rows(prior_path) if prior_path.exists() else []) + \
        [r for r in read_rows(few_shot_path) if r["model"] in (PATCHTST, RSA)]
    return [{**r, "part": "B"} for r in rows
            if (r["dataset"], int(r["horizon"])) in settings and float(r["train_fraction"]) in fractions]


def _mean_sd(values: list[float]) -> str:
    if not values:
        return "-"
    sd = f" ± {statistics.stdev(values):.4f}" if len(values) > 1 else ""
    return f"{statistics.fmean(values):.4f}{sd} ({len(values)})"


def _mse(rows: list[dict[str, str]], dataset: str, model: str) -> list[float]:
    return [float(r["mse"]) for r in rows if r["dataset"] == dataset and r["model"] == model]


def verdict(rows: list[dict[str, str]], short_panels: list[str], planned_pairs: int) -> tuple[str, list[str]]:
    """``(verdict, lines)``: PASS / FAIL (``(partial)`` while pairs are missing) and why."""
    against = compare(rows, PRIOR, PATCHTST)
    gain = -against.mean_change
    ratios = {}
    for dataset in short_panels:
        ours, ets = _mse(rows, dataset, PRIOR), _mse(rows, dataset, ETS)
        if ours and ets:
            ratios[dataset] = statistics.fmean(ours) / ets[0]
    checks = [
        (against.win_share >= WIN_SHARE, f"ahead of patchtst in {against.wins} of {against.n} pairs "
                                         f"({100 * against.win_share:.0f}%; needs >= {100 * WIN_SHARE:.0f}%)"),
        (gain >= MEAN_GAIN, f"mean gain over patchtst {100 * gain:+.1f}% (needs >= {100 * MEAN_GAIN:.0f}%)"),
        (bool(ratios) and all(r <= ETS_MARGIN for r in ratios.values()),
         "MSE over AutoETS's on the short panels: " + (", ".join(f"{d} {r:.2f}x" for d, r in ratios.items()) or "-")
         + f" (needs <= {ETS_MARGIN:.2f}x on every one)"),
    ]
    passed = all(ok for ok, _ in checks) and not math.isnan(gain)
    partial = against.n < planned_pairs or len(ratios) < len(short_panels)
    lines = [f"- {'met' if ok else 'missed'}: {text}" for ok, text in checks]
    if not against.n:
        return "no pairs have run yet", lines
    label = ("PASS" if passed else "FAIL") + (f" (partial: {against.n} of {planned_pairs} pairs)" if partial else "")
    return label, lines


def render(rows: list[dict[str, str]], config_a: dict[str, Any], config_b: dict[str, Any]) -> str:
    short = list(config_a["datasets"])
    planned = len(short) * len(config_a["seeds"]) + \
        sum(len(h) for h in config_b["settings"].values()) * len(config_b["train_fractions"]) * len(config_b["seeds"])
    label, checks = verdict(rows, short, planned)
    out = ["# The ETS prior of RSA: the pre-registered study (issue 37)", "",
           "Plan (committed before any run with the option): [ets_prior_plan.md](ets_prior_plan.md). "
           "Rendered by `python -m benchmarks.ets_prior` from ets_prior.csv (part A), ets_prior_few_shot.csv and "
           "few_shot.csv (part B).", "", f"**Verdict: {label}**", "", *checks, "",
           "## Sign tests (benchmarks.sign_test: exact, two-sided, ties left out)", ""]
    for part in ("all", "A", "B"):
        chosen = rows if part == "all" else [r for r in rows if r["part"] == part]
        for baseline in (PATCHTST, RSA):
            comparison: PairedComparison = compare(chosen, PRIOR, baseline)
            out.append(f"- {part if part == 'all' else 'part ' + part}: {comparison.describe()}")
    out += ["", "## MSE per dataset: mean ± sample std over seeds (runs)", "",
            "| part | dataset | horizon | rsa_patchtst_ets | patchtst | rsa_patchtst | AutoETS | ets_prior / AutoETS |"
            " ahead of patchtst |", "|---|---|---|---|---|---|---|---|---|"]
    datasets = list(dict.fromkeys((r["part"], r["dataset"], r["horizon"]) for r in rows))
    for part, dataset, horizon in datasets:
        within = [r for r in rows if r["dataset"] == dataset and r["part"] == part]
        ours, ets = _mse(within, dataset, PRIOR), _mse(within, dataset, ETS)
        ratio = f"{statistics.fmean(ours) / ets[0]:.2f}x" if ours and ets else "-"
        versus = compare(within, PRIOR, PATCHTST)
        out.append(f"| {part} | {dataset} | {horizon} | {_mean_sd(ours)} | {_mean_sd(_mse(within, dataset, PATCHTST))} "
                   f"| {_mean_sd(_mse(within, dataset, RSA))} | {f'{ets[0]:.4f}' if ets else '-'} | {ratio} "
                   f"| {versus.wins} of {versus.n} |")
    starts = read_rows(RESULTS / "ets_prior_starts.csv")
    if starts:
        out += ["", "## What the prior started from (part A; `python -m benchmarks.ets_prior --starts`)", "",
                "alpha per step; lambda_patch = (1 - alpha)^stride on the regular heads; skill = ETS's MSE over "
                "seasonal naive's on the held-out steps; gate_start = clip(1 - skill / 2, 0.05, 0.95).", "",
                "| " + " | ".join(starts[0]) + " |", "|" + "---|" * len(starts[0]),
                *["| " + " | ".join(row.values()) + " |" for row in starts]]
    cpu = [float(r["cpu_seconds"]) for r in rows if r["part"] == "A" and r.get("cpu_seconds")]
    wall = [float(r["train_seconds"]) + float(r["test_seconds"]) for r in rows
            if r["part"] == "B" and r["model"] == PRIOR]
    out += ["", "## Provenance", "",
            f"- rsa_patchtst_ets runs: {len([r for r in rows if r['model'] == PRIOR])}; part A's {len(cpu)} runs "
            f"(every model) {sum(cpu) / 60:.1f} CPU-minutes; part B's rsa_patchtst_ets runs {sum(wall) / 60:.1f} "
            "wall-minutes of training and testing (one thread each; part B's other rows are few_shot.csv's)",
            f"- commits: {', '.join(sorted({r['commit'] for r in rows if r.get('commit')}))}",
            f"- machines: {'; '.join(sorted({r['machine'] for r in rows if r.get('machine')}))}",
            "- commands:", *[f"  - `{c}`" for c in sorted({r['command'] for r in rows if r.get('command')})]]
    return "\n".join(out) + "\n"


def prior_starts(config_a: dict[str, Any]) -> list[dict[str, Any]]:
    """What ``rsa_patchtst_ets`` started from on each part-A panel: the resolved ``rsa.prior_fit``
    of a fit on the data before the first test origin (the prior does not depend on the seed; the
    fit trains one step)."""
    from benchmarks import unseen_like as ul
    from tsrec import Forecaster

    rows = []
    for name, spec in config_a["datasets"].items():
        task = ul.prepare_task(name, spec, config_a["test_fraction"])
        f = Forecaster("rsa_patchtst", prediction_length=spec["horizon"], seed=0, max_steps=1, rsa={"prior": "ets"},
                       trainer_kwargs={"enable_progress_bar": False})
        f.fit(task.train, id_col=ul.ID, time_col=ul.TIME, target_col=ul.TARGET)
        network = f.resolved_settings.network
        prior = network.rsa.prior_fit
        k = prior.steps_per_token
        rows.append({"dataset": name, "stride": network.stride, "season_steps": prior.season,
                     "dilation_patches": network.rsa.dilation, "alpha": round(1 - prior.level_decay[0] ** (1 / k), 4),
                     "lambda_patch": round(prior.level_decay[0], 4), "damped_phi": round(prior.trend_decay[0], 4),
                     "season_decay": round(prior.season_decay[0], 4), "skill": round(prior.skill, 3),
                     "gate_start": round(prior.gate, 3), "commit": git_commit()})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ets_prior", description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=RESULTS, help="where the CSVs are and the table goes")
    parser.add_argument("--starts", action="store_true", help="also fit the prior on each part-A panel and write "
                        "what the REMs started from to ets_prior_starts.csv (one training step each)")
    args = parser.parse_args(argv)
    config_a = tomllib.loads((CONFIGS / "ets_prior.toml").read_text())
    config_b = tomllib.loads((CONFIGS / "ets_prior_few_shot.toml").read_text())
    if args.starts:
        from benchmarks import unseen_like as ul
        from benchmarks.common import write_csv

        write_csv(args.results / "ets_prior_starts.csv", prior_starts(ul.load_config(CONFIGS / "ets_prior.toml")))
    rows = part_a_rows(args.results / config_a["output"]) + \
        part_b_rows(args.results / config_b["output"], args.results / "few_shot.csv", config_b)
    text = render(rows, config_a, config_b)
    (args.results / "ets_prior.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
