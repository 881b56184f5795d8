"""Run declarative benchmark configs and render their tables.

Usage (from the repository root)::

    python -m benchmarks.run benchmarks/configs/paper_table_d128.toml [--dataset ETTh1] [--horizon 24]
        [--model rsa_informer] [--seeds 0 1 2] [--data-dir DIR] [--threads N] [--quick] [--out-dir DIR]
    python -m benchmarks.run --render benchmarks/results/paper_table.csv
    python -m benchmarks.run benchmarks/configs/paper_table_d128.toml --plan 3   # projected run times

A config (TOML) names the protocol, the settings (dataset -> horizons), the models, the seeds,
the model options shared by every run (``[model]``) and the training settings (``[training]``),
and per model ``[model_options.NAME]`` / ``[training_options.NAME]`` over those.
Each run follows the protocol end to end through the public API: ``tsrec.datasets.load`` and
``splits`` give train / validation / test frames (validation and test start ``context_length``
rows before their border), ``Forecaster.fit(train, val_df=val)`` fits the scaler on the training
rows only and trains with early stopping on validation, and ``tsrec.evaluation.backtest`` scores
every test window (none dropped) on the scaled data. One tidy row per run is appended to the
config's CSV (runs already there are skipped, so an interrupted run resumes), then the markdown
table beside the paper's numbers is rendered next to it.

``--plan STEPS`` trains nothing in full: it times ``STEPS`` training steps and validation batches of
every selected run (real data, real Forecaster) and writes each run's projected time beside the
results CSV (``<output>_plan.md``), to plan runs before spending a machine on them.

``--quick`` runs a tiny version of every selected run (small network, a few batches, 32 test
windows) into ``--out-dir`` (default: a temporary directory): a smoke test, not a result.
"""

from __future__ import annotations

import argparse
import csv
import math
import shlex
import sys
import tempfile
import time
import tomllib
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT, git_commit, machine, now
from benchmarks.paper import LONG_HORIZON_PUBLISHED_PATCHTST, PAPER_TABLE1

RESULT_COLUMNS = ["config", "protocol", "dataset", "horizon", "context_length", "label_length", "model", "seed",
                  "d_model", "mse", "mae", "test_windows", "epochs", "best_epoch", "train_seconds", "test_seconds",
                  "commit", "machine", "date", "command"]
QUICK_MODEL = dict(d_model=16, n_heads=8, d_ff=32, e_layers=1, d_layers=1)
QUICK_TRAINING = dict(max_epochs=1)
QUICK_TRAINER = dict(limit_train_batches=3, limit_val_batches=2)
QUICK_TEST_WINDOWS = 32
LONG_HORIZONS = (96, 192, 336, 720)


def load_config(path: Path) -> dict[str, Any]:
    try:
        config = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise SystemExit(f"benchmarks.run: no config file {path}") from None
    except tomllib.TOMLDecodeError as err:
        raise SystemExit(f"benchmarks.run: {path} is not valid TOML: {err}") from None
    missing = [key for key in ("name", "protocol", "output", "models", "seeds", "settings") if key not in config]
    if missing:
        raise SystemExit(f"benchmarks.run: {path} lacks {missing}")
    return config


def prepare(config: dict[str, Any], dataset: str, horizon: int, model: str, seed: int, *, data_dir: str | None,
            quick: bool, trainer_kwargs: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any], Any]:
    """The unfitted Forecaster of one run, its train / val / test frames and the protocol's splits."""
    from tsrec import Forecaster, datasets
    from tsrec.models.presets import paper_options

    info = datasets.get_info(dataset)
    frame = datasets.load(dataset, data_dir)
    options = paper_options(dataset, horizon, model) if config["protocol"] == "informer" else {}
    if config["protocol"] == "long_horizon":
        context, label, _ = datasets.paper_setting(dataset, horizon, protocol="long_horizon")
        options = dict(context_length=context, label_length=label, prediction_length=horizon)
    context, prediction = options.pop("context_length"), options.pop("prediction_length")
    split = datasets.splits(dataset, config["protocol"], context_length=context, prediction_length=prediction,
                            n_rows=len(frame))
    part = {name: frame.iloc[split[name].start:split[name].end] for name in ("train", "val", "test")}
    fields = model_config_fields(model)
    model_options = {**config.get("model", {}), **config.get("model_options", {}).get(model, {}),
                     **({k: v for k, v in QUICK_MODEL.items() if k in fields} if quick else {})}
    options = {k: v for k, v in options.items() if k in fields}
    training = {**config.get("training", {}), **config.get("training_options", {}).get(model, {}),
                **(QUICK_TRAINING if quick else {})}
    trainer_kwargs = {"enable_progress_bar": False, **(QUICK_TRAINER if quick else {}), **(trainer_kwargs or {})}
    forecaster = Forecaster(model, prediction_length=prediction, context_length=context, freq=info.freq, seed=seed,
                            trainer_kwargs=trainer_kwargs, **{**model_options, **options}, **training)
    return forecaster, part, split


def run_one(config: dict[str, Any], dataset: str, horizon: int, model: str, seed: int, *, data_dir: str | None,
            quick: bool, command: str, commit: str) -> dict[str, Any]:
    """Train and test one (dataset, horizon, model, seed) under the config's protocol.

    ``commit`` is the checkout's commit when the runner started (and imported tsrec): rows of a
    long run keep naming the code they ran even if the checkout changes meanwhile."""
    from tsrec.datasets import get_info
    from tsrec.evaluation import backtest

    forecaster, part, split = prepare(config, dataset, horizon, model, seed, data_dir=data_dir, quick=quick)
    context = forecaster.context_length
    started = time.perf_counter()
    forecaster.fit(part["train"], val_df=part["val"])
    train_seconds = time.perf_counter() - started
    started = time.perf_counter()
    result = backtest(forecaster, part["test"], start=context, stride=1,
                      n_windows=QUICK_TEST_WINDOWS if quick else None, batch_size=64)
    test_seconds = time.perf_counter() - started
    n_test = result.errors.origin.nunique()
    if not quick and n_test != split.test.n_windows:
        raise RuntimeError(f"{dataset}-{horizon}: scored {n_test} test windows, the protocol has "
                           f"{split.test.n_windows}")
    network = forecaster.resolved_settings.network  # every setting the model was built with
    summary = forecaster.training_summary
    return {
        "config": config["name"] + ("-quick" if quick else ""), "protocol": config["protocol"],
        "dataset": get_info(dataset).name,
        "horizon": horizon, "context_length": context,
        "label_length": getattr(network, "label_length", ""), "model": model, "seed": seed,
        "d_model": getattr(network, "d_model", ""),
        "mse": result.metric("mse", "scaled"), "mae": result.metric("mae", "scaled"), "test_windows": n_test,
        "epochs": summary.epochs_run,
        "best_epoch": "" if summary.best_epoch is None else summary.best_epoch,
        "train_seconds": round(train_seconds, 1), "test_seconds": round(test_seconds, 1),
        "commit": commit, "machine": machine(), "date": now(), "command": command,
    }


def _batch_timer() -> Any:
    """A Lightning callback recording the seconds between consecutive train (and validation) batch
    ends: one optimisation step (or forward pass) including the loading of its batch."""
    import lightning.pytorch as pl

    class BatchTimer(pl.Callback):
        def __init__(self) -> None:
            self.seconds: dict[str, list[float]] = {"train": [], "val": []}
            self._last: dict[str, float | None] = {"train": None, "val": None}

        def _tick(self, kind: str) -> None:
            now = time.perf_counter()
            if self._last[kind] is not None:
                self.seconds[kind].append(now - self._last[kind])
            self._last[kind] = now

        def on_train_batch_end(self, *args: Any, **kwargs: Any) -> None:
            self._tick("train")

        def on_validation_batch_end(self, *args: Any, **kwargs: Any) -> None:
            self._tick("val")

    return BatchTimer()


def plan_one(config: dict[str, Any], dataset: str, horizon: int, model: str, *, data_dir: str | None,
             steps: int) -> dict[str, Any]:
    """Projected time of one full run on this machine: ``steps`` timed training and validation batches
    of the real Forecaster on the real data (one untimed batch first), scaled by the protocol's window
    counts: ``epochs x (train batches x step + val batches x val batch) + test batches x val batch``."""
    import statistics

    timer = _batch_timer()
    forecaster, part, split = prepare(
        config, dataset, horizon, model, 0, data_dir=data_dir, quick=False,
        trainer_kwargs={"max_epochs": 1, "limit_train_batches": steps + 1, "limit_val_batches": steps + 1,
                        "callbacks": [timer]})
    forecaster.fit(part["train"], val_df=part["val"])
    if not forecaster.trainable:  # nothing to train; its forecasts cost next to nothing
        train_s = val_s = 0.0
    else:
        train_s, val_s = (statistics.median(timer.seconds[kind]) for kind in ("train", "val"))
    batch, epochs = forecaster.training.batch_size, forecaster.training.max_epochs
    batches = {name: math.ceil(split[name].n_windows / batch) for name in ("train", "val", "test")}
    projected = epochs * (batches["train"] * train_s + batches["val"] * val_s) + batches["test"] * val_s
    return {"dataset": dataset, "horizon": horizon, "model": model, "context": forecaster.context_length,
            "windows": "/".join(str(split[name].n_windows) for name in ("train", "val", "test")),
            "train_s": train_s, "val_s": val_s, "minutes": projected / 60}


def render_plan(rows: list[dict[str, Any]], path: Path, *, command: str, commit: str, steps: int) -> Path:
    """Markdown table of :func:`plan_one` rows with the command, commit, machine and load."""
    import os

    total = sum(r["minutes"] for r in rows)
    lines = [f"# Projected run times: {path.stem.removesuffix('_plan')}", "",
             f"- command: `{command}`", f"- commit: `{commit}`", f"- machine: {machine()}",
             f"- date: {now()}; load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}",
             f"- method: per run, the median of {steps} timed training steps (forward, loss, backward, Adam, "
             "with the loading of the batch) and of as many validation batches, after one untimed batch each, "
             "through the real Forecaster on the real data; projected run = epochs x (training batches x step + "
             "validation batches x validation batch) + test batches x validation batch. A projection from "
             "measured steps, not a measured run.", "",
             "| data | H | model | context | windows train/val/test | train s/step | val s/batch | projected min |",
             "|---|---:|---|---:|---|---:|---:|---:|"]
    lines += [f"| {r['dataset']} | {r['horizon']} | {r['model']} | {r['context']} | {r['windows']} | "
              f"{r['train_s']:.3f} | {r['val_s']:.3f} | {r['minutes']:.1f} |" for r in rows]
    lines += ["", f"Total: {total:.0f} minutes ({total / 60:.1f} hours) for one seed of every run listed, "
              "one run at a time."]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def model_config_fields(model: str) -> set[str]:
    import dataclasses

    from tsrec.models import model_spec

    return {f.name for f in dataclasses.fields(model_spec(model).model_class.config_class)}


def read_rows(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def append_row(path: Path, row: dict[str, Any]) -> None:
    new = not path.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=RESULT_COLUMNS)
        if new:
            writer.writeheader()
        writer.writerow(row)


def _mean_std(values: list[float]) -> str:
    if not values:
        return ""
    mean = sum(values) / len(values)
    if len(values) == 1:
        return f"{mean:.3f}"
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    return f"{mean:.3f} ± {std:.3f}"


def render(csv_path: Path) -> Path:
    """Markdown next to ``csv_path``: mean ± std over seeds of MSE and MAE, the paper's numbers beside."""
    rows = read_rows(csv_path)
    if rows and all(row["protocol"] == "long_horizon" for row in rows):
        return render_long_horizon(csv_path, rows)
    groups: dict[tuple, list[dict[str, str]]] = defaultdict(list)
    for row in rows:
        groups[(row["config"], row["dataset"], int(row["horizon"]), row["d_model"], row["model"])].append(row)
    lines = [f"# {csv_path.stem}", "",
             "Test MSE / MAE on the scaled data (train-only standard scaling), mean ± sample std over seeds;",
             "`paper` is Table 1 of Huang et al. (ICLR 2023). Every run's command, commit, machine and date are",
             f"in [{csv_path.name}]({csv_path.name}). Regenerate this table with",
             f"`python -m benchmarks.run --render {csv_path.relative_to(ROOT) if csv_path.is_relative_to(ROOT) else csv_path}`.",
             "", "| config | data | H | d_model | model | seeds | MSE | MAE | paper MSE / MAE | epochs (best) | train s |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for (config, dataset, horizon, d_model, model), runs in sorted(groups.items()):
        paper = PAPER_TABLE1.get((dataset, horizon), {}).get(model)
        lines.append("| " + " | ".join([
            config, dataset, str(horizon), d_model, model, ",".join(r["seed"] for r in runs),
            _mean_std([float(r["mse"]) for r in runs]), _mean_std([float(r["mae"]) for r in runs]),
            f"{paper[0]:.3f} / {paper[1]:.3f}" if paper else "",
            ",".join(f"{r['epochs']}({r['best_epoch']})" for r in runs),
            f"{sum(float(r['train_seconds']) for r in runs) / len(runs):.0f}",
        ]) + " |")
    out = csv_path.with_suffix(".md")
    out.write_text("\n".join(lines) + "\n")
    return out


def render_long_horizon(csv_path: Path, rows: list[dict[str, str]]) -> Path:
    """Markdown of a long-horizon results CSV: test MSE (mean ± std over seeds) per setting and model,
    per-dataset averages over the horizons that every model has run, the published averages beside."""
    models = list(dict.fromkeys(row["model"] for row in rows))
    runs: dict[tuple[str, int, str], list[dict[str, str]]] = defaultdict(list)
    for row in rows:
        runs[(row["dataset"], int(row["horizon"]), row["model"])].append(row)
    settings = sorted({(dataset, horizon) for dataset, horizon, _ in runs})
    where = csv_path.relative_to(ROOT) if csv_path.is_relative_to(ROOT) else csv_path
    lines = [f"# {csv_path.stem}", "",
             "Long-horizon protocol (input 96; ETT borders 12/4/4 months, weather 70/10/20; every test window; "
             "train-only standard scaling): test MSE on the scaled data, mean ± sample std over seeds (the seeds "
             f"run in brackets), mean training seconds per run. Every run's command, commit, machine and date are in "
             f"[{csv_path.name}]({csv_path.name}); `python -m benchmarks.run --render {where}` redraws this table.",
             "", "| data | H | " + " | ".join(models) + " |", "|---|---|" + "---|" * len(models)]
    for dataset, horizon in settings:
        cells = []
        for model in models:
            done = runs.get((dataset, horizon, model), [])
            cells.append("" if not done else f"{_mean_std([float(r['mse']) for r in done])} "
                         f"[{','.join(r['seed'] for r in done)}] {_mean([float(r['train_seconds']) for r in done]):.0f} s")
        lines.append(f"| {dataset} | {horizon} | " + " | ".join(cells) + " |")
    lines += ["", "Per-dataset average MSE over the four horizons 96-720 (seeds averaged first), for each model that "
              "has run all four (blank otherwise); `PatchTST (published)` is the input-96 average quoted in issue "
              "#11.", "",
              "| data | " + " | ".join(models) + " | PatchTST (published) |",
              "|---|" + "---|" * (len(models) + 1)]
    for dataset in dict.fromkeys(d for d, _ in settings):
        averages = [_mean([_mean([float(r["mse"]) for r in runs[(dataset, h, m)]]) for h in LONG_HORIZONS])
                    if all((dataset, h, m) in runs for h in LONG_HORIZONS) else None for m in models]
        if all(a is None for a in averages):
            continue
        published = LONG_HORIZON_PUBLISHED_PATCHTST.get(dataset)
        lines.append(f"| {dataset} | " + " | ".join("" if a is None else f"{a:.3f}" for a in averages)
                     + f" | {'' if published is None else f'{published:.3f}'} |")
    out = csv_path.with_suffix(".md")
    out.write_text("\n".join(lines) + "\n")
    return out


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def selected_runs(config: dict[str, Any], args: argparse.Namespace) -> list[tuple[str, int, str]]:
    """``(dataset, horizon, model)`` of the config, in its order, narrowed by ``--dataset/--horizon/--model``."""
    return [(dataset, horizon, model)
            for dataset, horizons in config["settings"].items() if not args.dataset or dataset in args.dataset
            for horizon in horizons if not args.horizon or horizon in args.horizon
            for model in config["models"] if not args.model or model in args.model]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("configs", nargs="*", type=Path, help="TOML configs under benchmarks/configs")
    parser.add_argument("--render", type=Path, help="only render the markdown table of this results CSV")
    parser.add_argument("--dataset", nargs="*", help="only these datasets")
    parser.add_argument("--horizon", nargs="*", type=int, help="only these horizons")
    parser.add_argument("--model", nargs="*", help="only these models")
    parser.add_argument("--seeds", nargs="*", type=int, help="these seeds instead of the config's")
    parser.add_argument("--data-dir", help="directory with the dataset CSVs (else TSREC_DATA_DIR, then the cache)")
    parser.add_argument("--threads", type=int, help="torch intra-op threads")
    parser.add_argument("--quick", action="store_true", help="tiny smoke-test runs (results are not benchmarks)")
    parser.add_argument("--plan", type=int, metavar="STEPS",
                        help="train nothing in full: time STEPS training steps of every selected run and write "
                             "its projected run time (one seed) to <output>_plan.md")
    parser.add_argument("--out-dir", type=Path, help="where results go (default benchmarks/results; "
                                                     "a temporary directory with --quick)")
    args = parser.parse_args(argv)
    command = "python -m benchmarks.run " + shlex.join(sys.argv[1:] if argv is None else argv)
    if args.render:
        print(render(args.render))
        return 0
    if not args.configs:
        parser.error("give at least one config, or --render CSV")
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    # Everything a run uses is imported before the commit is read, so rows name the code that ran.
    import tsrec.evaluation  # noqa: F401
    import tsrec.models.presets  # noqa: F401
    import tsrec.training  # noqa: F401

    commit = git_commit()
    if args.plan is not None and (args.plan < 1 or args.quick):
        parser.error("--plan takes a number of steps >= 1 and does not combine with --quick")
    out_dir = args.out_dir or (Path(tempfile.mkdtemp(prefix="tsrec-bench-")) if args.quick
                               else ROOT / "benchmarks" / "results")
    for path in args.configs:
        config = load_config(path)
        out = out_dir / config["output"]
        if args.plan is not None:
            rows = []
            for dataset, horizon, model in selected_runs(config, args):
                rows.append(plan_one(config, dataset, horizon, model, data_dir=args.data_dir, steps=args.plan))
                print(f"{dataset}-{horizon} {model}: {rows[-1]['train_s']:.3f} s/step, projected "
                      f"{rows[-1]['minutes']:.1f} min", flush=True)
            print(render_plan(rows, out.with_name(f"{out.stem}_plan.md"), command=command, commit=commit,
                              steps=args.plan))
            continue
        name = config["name"] + ("-quick" if args.quick else "")
        done = {(r["config"], r["dataset"], r["horizon"], r["model"], r["seed"]) for r in read_rows(out)}
        for dataset, horizon, model in selected_runs(config, args):
            for seed in args.seeds if args.seeds is not None else config["seeds"]:
                if (name, dataset, str(horizon), model, str(seed)) in done:
                    continue
                row = run_one(config, dataset, horizon, model, seed, data_dir=args.data_dir,
                              quick=args.quick, command=command, commit=commit)
                append_row(out, row)
                print(f"{dataset}-{horizon} {model} seed {seed}: mse {row['mse']:.4f} mae {row['mae']:.4f} "
                      f"({row['train_seconds']} s train, best epoch {row['best_epoch']})", flush=True)
        if out.exists():
            print(render(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
