"""Do the gates tell the truth? ``Forecaster.gates()`` on series whose dynamics are known.

Each case is a :func:`tsrec.datasets.synthetic.recurrent_series` whose truth is set by hand: an
AR(1) decay of known half-life, a cycle of known period (24 steps, a day of hourly data, and 17,
which no calendar gives), a decay plus a cycle, and white noise (no recurrence at all). Every case
is fitted by the default model (``Forecaster()``, RSA-PatchTST) and a small RSA-Transformer with
the default training recipe under a small step budget, for several seeds and two lengths; the
gate table is then read against the truth:

- the data's own periods (``Forecaster.data_facts.periods``, which start the cycle heads'
  ``theta``) against the true period;
- every REM head's reported period and half-life against the truth, and against its start
  (``period_start_steps``, ``half_life_start_steps``: did training move it, or does the table
  report the start?);
- the gates on recurrent data against the gates on noise (the same seed gives both runs the same
  initial gates, so the comparison is paired).

Usage (each fit on one thread; 1281 CPU seconds in all when measured, ``--jobs`` fits at once)::

    OMP_NUM_THREADS=1 python -m benchmarks.gate_truth [--seeds 0 1 2] [--lengths 720 2880] [--steps 200] [--jobs 1]

writes one row per REM head and run to ``benchmarks/results/gate_truth.csv`` and the summary to
``gate_truth.md`` beside it.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchmarks.common import ROOT, command_line, git_commit, machine, markdown_table, now, write_csv

HORIZON = 24
#: A reported period counts as the true one within this relative error.
PERIOD_TOLERANCE = 0.10


@dataclass(frozen=True)
class Case:
    """One synthetic series design and its truth (None where the series has no such structure)."""

    name: str
    ar: float | None
    cycle: float | None
    innovation: float = 1.0
    noise: float = 0.1

    @property
    def half_life(self) -> float | None:
        """Steps for the AR(1) recurrence to halve: ``ln(1/2) / ln(ar)``."""
        return None if self.ar is None else math.log(0.5) / math.log(self.ar)

    @property
    def recurrent(self) -> bool:
        return self.ar is not None or self.cycle is not None

    def series(self, n_steps: int, seed: int) -> pd.DataFrame:
        from tsrec.datasets.synthetic import recurrent_series

        return recurrent_series(n_steps, ar=() if self.ar is None else self.ar, innovation=self.innovation,
                                cycle=self.cycle, noise=self.noise, seed=seed)


CASES = (
    Case("ar 0.9", ar=0.9, cycle=None),
    Case("cycle 24", ar=None, cycle=24, noise=0.3),
    Case("cycle 17", ar=None, cycle=17, noise=0.3),
    Case("ar 0.9 + cycle 24", ar=0.9, cycle=24, innovation=0.3),
    Case("white noise", ar=None, cycle=None, noise=1.0),
)
#: The models: the default (Forecaster()'s, at its defaults) and RSA-Transformer small enough for
#: one core to train in seconds (d_model 16, 1 encoder and 1 decoder layer; its 8 heads and their
#: default mix, two plain and two dilated cos/sin pairs per layer, are the registry's).
MODELS: dict[str, dict[str, Any]] = {
    "default (rsa_patchtst)": {},
    "rsa_transformer": dict(model="rsa_transformer", d_model=16, d_ff=32, e_layers=1, d_layers=1),
}


def fit_gates(model: dict[str, Any], case: Case, n_steps: int, seed: int, steps: int
              ) -> tuple[pd.DataFrame, tuple[float, ...]]:
    """Fit one forecaster (default recipe, ``steps`` optimizer steps) and return its gate table
    and the data's periods it found."""
    from tsrec import Forecaster

    options = dict(model)
    name = options.pop("model", None)
    args = () if name is None else (name,)
    forecaster = Forecaster(*args, prediction_length=HORIZON, freq="h", max_steps=steps, seed=seed,
                            trainer_kwargs={"enable_progress_bar": False, "logger": False,
                                            "enable_model_summary": False}, **options)
    forecaster.fit(case.series(n_steps, seed))
    return forecaster.gates(), forecaster.data_facts.periods


def one_run(label: str, case: Case, n_steps: int, seed: int, steps: int) -> tuple[list[dict[str, Any]], float]:
    """The head rows of one (model, case, length, seed) fit on one thread, and its CPU seconds."""
    import torch

    torch.set_num_threads(1)
    started = time.process_time()
    table, periods = fit_gates(MODELS[label], case, n_steps, seed, steps)
    rows = head_rows(table, model=label, case=case, n_steps=n_steps, seed=seed, periods=periods)
    return rows, time.process_time() - started


def head_rows(table: pd.DataFrame, *, model: str, case: Case, n_steps: int, seed: int,
              periods: tuple[float, ...]) -> list[dict[str, Any]]:
    """The gate table of one run as CSV rows, with the truth beside each head."""
    rows = []
    for r in table.itertuples(index=False):
        cyclical = r.kind != "regular"
        rows.append({
            "model": model, "case": case.name, "steps": n_steps, "seed": seed,
            "true_period": case.cycle if case.cycle is not None else math.nan,
            "true_half_life": case.half_life if case.half_life is not None else math.nan,
            "data_period": periods[0] if periods else math.nan,
            "attention": r.attention, "layer": r.layer, "head": r.head, "kind": r.kind, "dilated": r.dilated,
            "gate_start": r.gate_start, "gate": r.gate,
            "period_start": r.period_start_steps if cyclical else math.nan,
            "period": r.period_steps if cyclical else math.nan,
            "half_life_start": r.half_life_start_steps, "half_life": r.half_life_steps,
            "moved": bool(r.moved),
        })
    return rows


def run(seeds: list[int], lengths: list[int], steps: int, jobs: int) -> tuple[pd.DataFrame, float]:
    """Every (model, case, length, seed), each fit single-threaded in one of ``jobs`` worker
    processes: the head rows, and the CPU seconds of all the fits together."""
    runs = [(label, case, n_steps, seed, steps) for label in MODELS for case in CASES
            for n_steps in lengths for seed in seeds]
    rows: list[dict[str, Any]] = []
    cpu = 0.0
    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        for args, (head, seconds) in zip(runs, pool.map(one_run, *zip(*runs))):
            rows += head
            cpu += seconds
            label, case, n_steps, seed, _ = args
            print(f"{label} | {case.name} | {n_steps} steps | seed {seed}: {seconds:.1f} CPU s, "
                  f"data period {head[0]['data_period']:.2f}", flush=True)
    return pd.DataFrame(rows), cpu


# ------------------------------------------------------------------------------------ summaries
def relative(value: pd.Series, truth: pd.Series) -> pd.Series:
    return (value - truth).abs() / truth


def mean_sd(values: pd.Series, fmt: str = ".2f") -> str:
    values = values.dropna()
    if values.empty:
        return "-"
    sd = values.std(ddof=1) if len(values) > 1 else 0.0
    return f"{values.mean():{fmt}} ± {sd:{fmt}}"


def run_summary(heads: pd.DataFrame) -> pd.DataFrame:
    """One row per run (model, case, steps, seed): the data's period against the truth, the
    dominant cycle heads' error (the plain cos/sin heads started at the data's strongest period),
    the share of cycle heads within :data:`PERIOD_TOLERANCE` of the truth, how far training moved
    the heads, and the mean layer gate at the start and at the end."""
    keys = ["model", "case", "steps", "seed"]
    out = []
    for key, g in heads.groupby(keys, sort=False):
        cyc = g[g["kind"] != "regular"]
        truth, found = g["true_period"].iloc[0], g["data_period"].iloc[0]
        dominant = cyc[~cyc["dilated"] & np.isfinite(found) & (relative(cyc["period_start"], found) < 0.01)]
        layers = g.groupby(["attention", "layer"])[["gate_start", "gate"]].first()
        out.append({
            **dict(zip(keys, key)),
            "true_period": truth, "data_period": found,
            "data_period_error": relative(pd.Series([found]), pd.Series([truth])).iloc[0],
            "dominant_heads": len(dominant),
            "dominant_error_max": relative(dominant["period"], dominant["true_period"]).max(),
            "dominant_moved_max": relative(dominant["period"], dominant["period_start"]).max(),
            "cycle_heads_within": (relative(cyc["period"], cyc["true_period"]) <= PERIOD_TOLERANCE).mean(),
            "period_moved_median": relative(cyc["period"], cyc["period_start"]).median(),
            "half_life_moved_median": relative(g["half_life"], g["half_life_start"]).median(),
            "half_life_median": g["half_life"].median(), "true_half_life": g["true_half_life"].iloc[0],
            "heads_moved": g["moved"].mean(),
            "gate_start": layers["gate_start"].mean(), "gate": layers["gate"].mean(),
        })
    return pd.DataFrame(out)


def cycle_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per model, cyclical case and length: the periods' errors over seeds."""
    cyc = runs[np.isfinite(runs["true_period"])]
    rows = []
    for (model, case, steps), g in cyc.groupby(["model", "case", "steps"], sort=False):
        within = relative(g["data_period"], g["true_period"]) <= PERIOD_TOLERANCE
        dominant_ok = g["dominant_error_max"] <= PERIOD_TOLERANCE
        rows.append({"model": model, "case": case, "steps": steps, "seeds": len(g),
                     "data period (steps)": mean_sd(g["data_period"]),
                     "data period error": mean_sd(g["data_period_error"], ".3f"),
                     "dominant heads within 10%": f"{int(dominant_ok.sum())}/{len(g)}",
                     "dominant heads' worst error": mean_sd(g["dominant_error_max"], ".3f"),
                     "dominant heads moved (rel.)": mean_sd(g["dominant_moved_max"], ".3f"),
                     "cycle heads within 10%": mean_sd(g["cycle_heads_within"]),
                     "data period within 10%": f"{int(within.sum())}/{len(g)}"})
    return pd.DataFrame(rows)


def movement_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per model and case (over seeds and lengths): how far training moved the REM heads."""
    rows = []
    for (model, case), g in runs.groupby(["model", "case"], sort=False):
        rows.append({"model": model, "case": case, "runs": len(g),
                     "heads moved > 5%": mean_sd(g["heads_moved"]),
                     "median period change": mean_sd(g["period_moved_median"], ".3f"),
                     "median half-life change": mean_sd(g["half_life_moved_median"], ".3f"),
                     "median half-life (steps)": mean_sd(g["half_life_median"], ".1f"),
                     "true half-life (steps)": "-" if not np.isfinite(g["true_half_life"].iloc[0])
                     else f"{g['true_half_life'].iloc[0]:.1f}"})
    return pd.DataFrame(rows)


def gate_table_by_case(runs: pd.DataFrame, noise_case: str = "white noise") -> pd.DataFrame:
    """Per model and case: the mean layer gate at the start and the end, and the end gate minus the
    same seed's and length's end gate on white noise (paired: both runs start from the same gates)."""
    noise = runs[runs["case"] == noise_case].set_index(["model", "steps", "seed"])["gate"]
    rows = []
    for (model, case), g in runs.groupby(["model", "case"], sort=False):
        paired = g.set_index(["model", "steps", "seed"])["gate"] - noise
        rows.append({"model": model, "case": case, "runs": len(g),
                     "gate at start": mean_sd(g["gate_start"]), "gate at end": mean_sd(g["gate"]),
                     "end - start": mean_sd(g["gate"] - g["gate_start"], ".3f"),
                     "end - noise's end": "-" if case == noise_case else mean_sd(paired, ".3f"),
                     "runs above noise": "-" if case == noise_case else f"{int((paired > 0).sum())}/{len(g)}"})
    return pd.DataFrame(rows)


def report(heads: pd.DataFrame, *, command: str, seconds: float, wall: float, jobs: int, seeds: list[int],
           lengths: list[int], steps: int) -> str:
    runs = run_summary(heads)
    cases = "\n".join(f"- `{c.name}`: `recurrent_series(ar={c.ar if c.ar is not None else ()}, "
                      f"innovation={c.innovation}, cycle={c.cycle}, noise={c.noise})`"
                      + (f", AR half-life {c.half_life:.2f} steps" if c.half_life else "") for c in CASES)
    models = "\n".join(f"- `{label}`: `Forecaster({', '.join(f'{k}={v!r}' for k, v in m.items())})`"
                       for label, m in MODELS.items())
    return f"""# Do the gates tell the truth? `gates()` on series with known dynamics

Every case fitted by each model for seeds {seeds} at lengths {lengths} (hourly steps), the default
training recipe (validation on the last windows, then a refit on all of them) under a budget of
{steps} optimizer steps, horizon {HORIZON}. Mean ± sample std over the runs named in each table.
Per-head rows: `gate_truth.csv` beside this file. Protocol: the docstring of
`benchmarks/gate_truth.py`.

- command: `OMP_NUM_THREADS=1 {command}`
- git commit: {git_commit()}
- machine: {machine()}
- date: {now()}
- cost: {seconds:.0f} CPU seconds for {len(runs)} fits, each on one thread ({wall:.0f} s wall with
  {jobs} at once on a machine shared with other jobs)

Cases:

{cases}

Models:

{models}

## Periods: the data's, the heads' start, the heads' end

`data period`: the strongest cycle `Forecaster.data_facts.periods` found in the training part,
which starts `theta` of each layer's first plain cos/sin pair (the *dominant cycle heads*).
`dominant heads within 10%`: runs in which every dominant head's reported period is within 10% of
the true period. `dominant heads moved`: the largest relative change of a dominant head's period
from its start. `cycle heads within 10%`: share of all cos/sin heads (dilated ones and the
second pairs, started at half the cycle or at a week, included) within 10% of the truth.

{markdown_table(cycle_table(runs), ".3f")}

## How far training moves the REM heads

Relative change from the start over every head (cyclical heads for the period); `heads moved > 5%`
is the share of heads whose `moved` column is True (period, or a regular head's half-life, or the
gate changed by more than 5%). The default models have no regular (pure decay) heads; their
half-lives are the decay envelopes `gamma` of the cos/sin heads, started at random
(`nu ~ U(1, 2)`).

{markdown_table(movement_table(runs), ".3f")}

## Gates on recurrent data against white noise

Mean of the layer gates `sigmoid(mu)`. `end - noise's end`: the run's end gate minus the end gate
of the white-noise run with the same model, seed and length (both started from the same gates).

{markdown_table(gate_table_by_case(runs), ".3f")}
"""


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--lengths", type=int, nargs="+", default=[720, 2880])
    parser.add_argument("--steps", type=int, default=200, help="optimizer steps per training run")
    parser.add_argument("--jobs", type=int, default=1, help="fits run at once, each on one thread")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    heads, seconds = run(args.seeds, args.lengths, args.steps, args.jobs)
    wall = time.perf_counter() - started
    write_csv(args.out_dir / "gate_truth.csv", heads.to_dict("records"))
    text = report(heads, command=command_line("benchmarks.gate_truth", argv), seconds=seconds, wall=wall,
                  jobs=args.jobs, seeds=args.seeds, lengths=args.lengths, steps=args.steps)
    (args.out_dir / "gate_truth.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
