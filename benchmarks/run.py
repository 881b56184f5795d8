"""Run declarative benchmark configs and render their tables.

Usage (from the repository root)::

    python -m benchmarks.run benchmarks/configs/paper_table_d128.toml [--dataset ETTh1] [--horizon 24]
        [--model rsa_informer] [--seeds 0 1 2] [--data-dir DIR] [--threads N] [--quick] [--out-dir DIR]
        [--jobs N] [--precision bf16-mixed] [--compile] [--order cost]
    python -m benchmarks.run --render benchmarks/results/paper_table.csv
    python -m benchmarks.run benchmarks/configs/paper_table_d128.toml --plan 3   # projected run times
    python -m benchmarks.run --merge DIR/paper_table.csv   # rows of a batch run elsewhere, back into results

A config (TOML) names the protocol, the settings (dataset -> horizons), the models, the seeds,
the model options shared by every run (``[model]``) and the training settings (``[training]``),
and per model ``[model_options.NAME]`` / ``[training_options.NAME]`` over those. ``[variants]`` names
variants of registered models for ablations (``rsa_patchtst_low_gate = "rsa_patchtst"``): a variant is
listed in ``models`` and gets its own options sections; its rows carry its name.
A long-horizon config may set ``context_length``, the input of its runs (default 96), as one length or a
list of them (a grid over inputs). ``train_fractions`` (default ``[1.0]``) is a grid over training data,
the few-shot protocol: a run at fraction ``f`` trains on the last ``f`` of the training part's windows
(rounded down, at least one; :func:`train_fraction_split`), validation and test unchanged, and its
metrics are on the data scaled with the statistics of the whole training part, as TimeLLM's and IBM
TSFM's few-shot protocols do (:func:`scaled_by_training_part`). Each row records its ``context_length``
and ``train_fraction``, both part of what identifies a run.
Each run follows the protocol end to end through the public API: ``tsrec.datasets.load`` and
``splits`` give train / validation / test frames (validation and test start ``context_length``
rows before their border), ``Forecaster.fit(train, val_df=val)`` fits the scaler on the training
rows only and trains with early stopping on validation, and ``tsrec.evaluation.backtest`` scores
every test window (none dropped) on the scaled data. One tidy row per run is appended to the
config's CSV as soon as the run has finished (runs already there are skipped, so an interrupted
batch resumes and loses at most the runs in flight), then the markdown table beside the paper's
numbers is rendered next to it. A run that fails is reported and the others carry on.

The machine, not the config, chooses ``--precision`` (Lightning's, ``32-true`` by default,
``bf16-mixed`` on a GPU) and ``--compile`` (``torch.compile`` of the network for training); both
are recorded in each row, and a run at another precision is another run. ``--jobs N`` runs up to
N runs at once, each in its own process on the same device (one GPU holds several small runs).

``--out-dir DIR`` writes results there instead of ``benchmarks/results``; a results CSV it does
not have yet starts as a copy of the committed one, so the runs committed already are skipped
(a batch on another machine, e.g. ``benchmarks/gpu_batch.sh``, resumes from the committed CSV).
``--merge DIR/<output>.csv`` brings such a batch's rows back: it appends those the committed CSV
lacks and redraws its table.

``--plan STEPS`` trains nothing in full: it times ``STEPS`` training steps and validation batches of
every selected run (real data, real Forecaster) and writes each run's projected time beside the
results CSV (``<output>_plan.md``), to plan runs before spending a machine on them.

``--quick`` runs a tiny version of every selected run (small network, a few batches, 32 test
windows) into ``--out-dir`` (default: a temporary directory): a smoke test, not a result.
"""

from __future__ import annotations

import argparse
import csv
import fcntl
import math
import multiprocessing
import multiprocessing.connection
import os
import shlex
import shutil
import sys
import tempfile
import time
import tomllib
import traceback
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from benchmarks.common import PRECISIONS, ROOT, git_commit, machine, now, read_rows
from benchmarks.paper import LONG_HORIZON_PUBLISHED_PATCHTST, PAPER_TABLE1

#: One row per run. New columns go at the end: a CSV with fewer columns (an older runner's) is read as
#: it is and rewritten with the new header by the next :func:`append_row`.
RESULT_COLUMNS = ["config", "protocol", "dataset", "horizon", "context_length", "label_length", "model", "seed",
                  "d_model", "mse", "mae", "test_windows", "epochs", "best_epoch", "train_seconds", "test_seconds",
                  "commit", "machine", "date", "command", "precision", "compile", "train_fraction"]
#: Lightning's precision of every run before the ``precision`` column (and of rows where it is blank).
DEFAULT_PRECISION = PRECISIONS[0]
#: Training settings that the command line chooses for the machine, never a config.
MACHINE_SETTINGS = ("precision", "compile")
RESULTS = ROOT / "benchmarks" / "results"
QUICK_MODEL = dict(d_model=16, d_ff=32, e_layers=1, d_layers=1)
QUICK_TRAINING = dict(max_epochs=1)
QUICK_TRAINER = dict(limit_train_batches=3, limit_val_batches=2)
QUICK_TEST_WINDOWS = 32
#: Test entries (windows x horizon x series) scored per ``backtest`` call (:func:`score_test`).
SCORE_CHUNK_ENTRIES = 4_000_000
LONG_HORIZONS = (96, 192, 336, 720)
#: The training fraction of every run without ``train_fractions`` in its config (and of rows from before the column).
FULL_TRAINING = 1.0


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
    variants = config.get("variants", {})
    if not isinstance(variants, dict) or not all(isinstance(model, str) for model in variants.values()):
        raise SystemExit(f"benchmarks.run: {path}: [variants] maps each variant's name to the registered model "
                         'it trains, e.g. rsa_patchtst_low_gate = "rsa_patchtst"')
    from tsrec import list_models

    if shadowed := sorted(set(variants) & set(list_models())):
        raise SystemExit(f"benchmarks.run: {path}: the variant(s) {shadowed} have the name of a registered model; "
                         "give each variant a name of its own, so that its rows cannot pass for that model's")
    context = config.get("context_length")
    contexts = context if isinstance(context, list) else [context]
    if context is not None and (config["protocol"] != "long_horizon" or not contexts
                                or any(type(c) is not int or c < 1 for c in contexts)):
        raise SystemExit(f"benchmarks.run: {path}: context_length = {context!r}: only a long_horizon config may set "
                         "its input length, to a positive whole number of steps or a list of them (its default is "
                         "96); the informer protocol takes each setting's from the paper")
    fractions = config.get("train_fractions", [FULL_TRAINING])
    if not isinstance(fractions, list) or not fractions or any(
            type(f) not in (int, float) or not 0 < f <= 1 for f in fractions):
        raise SystemExit(f"benchmarks.run: {path}: train_fractions = {fractions!r}: give a list of fractions of the "
                         "training windows, each in (0, 1], e.g. train_fractions = [0.05, 0.1]")
    for section in (config.get("training", {}), *config.get("training_options", {}).values()):
        if chosen := sorted(set(section) & set(MACHINE_SETTINGS)):
            raise SystemExit(f"benchmarks.run: {path} sets {chosen}: the machine chooses them; remove them from "
                             "the config and pass --precision / --compile on the command line")
    return config


def registered_model(config: dict[str, Any], model: str) -> str:
    """The registered model that ``model`` (a name in the config's ``models``) trains: itself, or the
    model a ``[variants]`` entry names."""
    return config.get("variants", {}).get(model, model)


def input_lengths(config: dict[str, Any], dataset: str, horizon: int) -> list[int]:
    """The inputs the config runs ``dataset`` at ``horizon`` with: its ``context_length`` (one or a list),
    else the protocol's (the paper's setting; 96 for long_horizon)."""
    from tsrec import datasets

    context = config.get("context_length")
    if context is None:
        return [datasets.paper_setting(dataset, horizon, protocol=config["protocol"])[0]]
    return context if isinstance(context, list) else [context]


def train_fraction_split(split: Any, fraction: float) -> Any:
    """``split`` (:class:`tsrec.datasets.Splits`) with its training part cut to the last ``fraction`` of
    its windows (rounded down, at least one): it starts ``context_length`` rows before the first kept
    window's origin, so that window is whole, and ends where it did. Validation and test are unchanged;
    the scaler rows are the kept training rows (the Forecaster fits its scaler on what it trains on; the
    runner scores the run in the whole training part's units, :func:`scaled_by_training_part`)."""
    import dataclasses

    if not 0 < fraction <= 1:
        raise ValueError(f"train fraction {fraction!r} is not in (0, 1]")
    train = split.train
    kept = max(1, math.floor(round(fraction * train.n_windows, 6)))
    start = train.end - (kept + train.context_length + train.prediction_length - 1)
    return dataclasses.replace(split, train=dataclasses.replace(train, start=start),
                               scaler_rows=range(start, train.end))


def scaled_by_training_part(frame: Any, train: Any) -> Any:
    """``frame`` (wide: one column per variable) standardised with the mean and population standard
    deviation of each column over the whole training part ``train`` (a :class:`tsrec.datasets.Split`;
    1 for a constant column): the few-shot protocol's scaling (TimeLLM's and IBM TSFM's fit their scaler
    on the whole training part, then keep a fraction of it), so the metrics of a run that trains on a
    fraction are in the same units as those of a run on all of it."""
    rows = frame.iloc[train.start:train.end]
    std = rows.std(ddof=0)
    return (frame - rows.mean()) / std.where(std > 0, 1.0)


def prepare(config: dict[str, Any], dataset: str, horizon: int, model: str, seed: int, *, data_dir: str | None,
            quick: bool, trainer_kwargs: dict[str, Any] | None = None,
            machine_settings: dict[str, Any] | None = None, context_length: int | None = None,
            train_fraction: float = FULL_TRAINING) -> tuple[Any, dict[str, Any], Any]:
    """The unfitted Forecaster of one run, its train / val / test frames and the protocol's splits
    (the training part cut to ``train_fraction`` of its windows, :func:`train_fraction_split`).
    ``machine_settings``: ``precision`` and ``compile`` (:data:`MACHINE_SETTINGS`) over the config's training.
    ``context_length``: the run's input, one of :func:`input_lengths` (default: the first).
    A run on a fraction gets frames already scaled by :func:`scaled_by_training_part`: score it on them
    (``score_test(..., scaled=False)``), not on the Forecaster's scaling of its few training rows."""
    from tsrec import Forecaster, datasets
    from tsrec.models.presets import paper_options

    info = datasets.get_info(dataset)
    frame = datasets.load(dataset, data_dir)
    registered = registered_model(config, model)
    options = paper_options(dataset, horizon, registered) if config["protocol"] == "informer" else {}
    if config["protocol"] == "long_horizon":
        _, label, _ = datasets.paper_setting(dataset, horizon, protocol="long_horizon")
        options = dict(label_length=label, prediction_length=horizon)
    inputs = input_lengths(config, dataset, horizon)
    context = inputs[0] if context_length is None else context_length
    if context not in inputs:
        raise ValueError(f"{config['name']}: {dataset}-{horizon} runs with the input(s) {inputs}, not {context}")
    options.pop("context_length", None)
    prediction = options.pop("prediction_length")
    split = datasets.splits(dataset, config["protocol"], context_length=context, prediction_length=prediction,
                            n_rows=len(frame))
    if train_fraction != FULL_TRAINING:
        frame = scaled_by_training_part(frame, split.train)
        split = train_fraction_split(split, train_fraction)
    part = {name: frame.iloc[split[name].start:split[name].end] for name in ("train", "val", "test")}
    fields = model_config_fields(registered)
    model_options = {**config.get("model", {}), **config.get("model_options", {}).get(model, {}),
                     **({k: v for k, v in QUICK_MODEL.items() if k in fields} if quick else {})}
    options = {k: v for k, v in options.items() if k in fields}
    training = {**config.get("training", {}), **config.get("training_options", {}).get(model, {}),
                **(QUICK_TRAINING if quick else {}), **(machine_settings or {})}
    trainer_kwargs = {"enable_progress_bar": False, **(QUICK_TRAINER if quick else {}), **(trainer_kwargs or {})}
    # the protocol's train-only StandardScaler on every value (robust scaling would leave out weather.csv's -9999s)
    forecaster = Forecaster(registered, prediction_length=prediction, context_length=context, freq=info.freq,
                            seed=seed, scaling="standard", trainer_kwargs=trainer_kwargs,
                            **{**model_options, **options}, **training)
    return forecaster, part, split


def run_one(config: dict[str, Any], dataset: str, horizon: int, model: str, seed: int, *, data_dir: str | None,
            quick: bool, command: str, commit: str, machine_settings: dict[str, Any] | None = None,
            context_length: int | None = None, train_fraction: float = FULL_TRAINING) -> dict[str, Any]:
    """Train and test one (dataset, horizon, model, seed, input, training fraction) under the config's protocol.

    ``commit`` is the checkout's commit when the runner started (and imported tsrec): rows of a
    long run keep naming the code they ran even if the checkout changes meanwhile."""
    from tsrec.datasets import get_info

    forecaster, part, split = prepare(config, dataset, horizon, model, seed, data_dir=data_dir, quick=quick,
                                      machine_settings=machine_settings, context_length=context_length,
                                      train_fraction=train_fraction)
    context = forecaster.context_length
    started = time.perf_counter()
    forecaster.fit(part["train"], val_df=part["val"])
    train_seconds = time.perf_counter() - started
    started = time.perf_counter()
    mse, mae, n_test = score_test(forecaster, part["test"], QUICK_TEST_WINDOWS if quick else split.test.n_windows,
                                  scaled=train_fraction == FULL_TRAINING)  # else prepare scaled the frames
    test_seconds = time.perf_counter() - started
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
        "mse": mse, "mae": mae, "test_windows": n_test,
        "epochs": summary.epochs_run,
        "best_epoch": "" if summary.best_epoch is None else summary.best_epoch,
        "train_seconds": round(train_seconds, 1), "test_seconds": round(test_seconds, 1),
        "commit": commit, "machine": machine(), "date": now(), "command": command,
        "precision": forecaster.training.precision, "compile": forecaster.training.compile,
        "train_fraction": train_fraction,
    }


def score_test(forecaster: Any, test: Any, n_windows: int, *, scaled: bool = True) -> tuple[float, float, int]:
    """MSE and MAE on the scaled data (``scaled``: scaled by the forecaster's scaler, else ``test`` as it
    is) of the ``n_windows`` windows of ``test`` whose origins follow its first ``context_length`` rows one
    step apart, and the number of windows scored.

    ``backtest`` keeps one row per (window, step, series); over a whole test part that can exceed
    the memory (weather at horizon 720: 10,539 windows x 720 steps x 21 series = 159M rows), so the
    windows are scored in chunks of at most :data:`SCORE_CHUNK_ENTRIES` entries and the errors
    summed over the entries every metric scores (an observed target with a forecast)."""
    import numpy as np

    from tsrec.evaluation import backtest

    context, horizon = forecaster.context_length, forecaster.prediction_length
    chunk = max(1, SCORE_CHUNK_ENTRIES // (horizon * max(1, test.shape[1])))
    squared = absolute = 0.0
    entries = windows = 0
    for first in range(0, n_windows, chunk):
        errors = backtest(forecaster, test, start=context + first, n_windows=min(chunk, n_windows - first),
                          stride=1, batch_size=64, baselines=("naive", "seasonal_naive")).errors
        scored = (errors["observed"] & errors["forecast"]).to_numpy()
        suffix = "_scaled" if scaled else ""
        diff = (errors[f"y_pred{suffix}"].to_numpy(np.float64) - errors[f"y_true{suffix}"].to_numpy(np.float64))[scored]
        squared += float((diff ** 2).sum())
        absolute += float(np.abs(diff).sum())
        entries += diff.size
        windows += errors["origin"].nunique()
    return squared / entries, absolute / entries, windows


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
             steps: int, machine_settings: dict[str, Any] | None = None, context_length: int | None = None,
             train_fraction: float = FULL_TRAINING) -> dict[str, Any]:
    """Projected time of one full run on this machine: ``steps`` timed training and validation batches
    of the real Forecaster on the real data (one untimed batch first), scaled by the protocol's window
    counts: ``epochs x (train batches x step + val batches x val batch) + test batches x val batch``."""
    import statistics

    timer = _batch_timer()
    forecaster, part, split = prepare(
        config, dataset, horizon, model, 0, data_dir=data_dir, quick=False,
        trainer_kwargs={"max_epochs": 1, "limit_train_batches": steps + 1, "limit_val_batches": steps + 1,
                        "callbacks": [timer]}, machine_settings=machine_settings, context_length=context_length,
        train_fraction=train_fraction)
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
            "train_fraction": train_fraction, "train_s": train_s, "val_s": val_s, "minutes": projected / 60}


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
             "| data | H | model | context | windows train/val/test | train fraction | train s/step | val s/batch "
             "| projected min |",
             "|---|---:|---|---:|---|---:|---:|---:|---:|"]
    lines += [f"| {r['dataset']} | {r['horizon']} | {r['model']} | {r['context']} | {r['windows']} | "
              f"{r['train_fraction']:g} | {r['train_s']:.3f} | {r['val_s']:.3f} | {r['minutes']:.1f} |" for r in rows]
    lines += ["", f"Total: {total:.0f} minutes ({total / 60:.1f} hours) for one seed of every run listed, "
              "one run at a time."]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def model_config_fields(model: str) -> set[str]:
    import dataclasses

    from tsrec.models import model_spec

    return {f.name for f in dataclasses.fields(model_spec(model).model_class.config_class)}


def append_row(path: Path, row: dict[str, Any]) -> None:
    """Append ``row`` (keys: :data:`RESULT_COLUMNS`) to the CSV ``path``, created with its header if absent.

    Safe under concurrency: the file is locked (``flock``) while it is read and written, so rows that
    runs in other processes (``--jobs``, other runners) append at the same time land whole, under one
    header. A CSV of an older runner (its header a prefix of :data:`RESULT_COLUMNS`) is first rewritten
    in place with the full header, its rows blank in the new columns; a runner that does not lock (an
    older one) must not append to the same file in that instant."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+", newline="") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)  # released when the file is closed
        fh.seek(0)
        reader = csv.DictReader(fh)
        writer = csv.DictWriter(fh, fieldnames=RESULT_COLUMNS)
        if reader.fieldnames != RESULT_COLUMNS:  # a new (empty) file, or an older runner's
            header = reader.fieldnames or []
            if header != RESULT_COLUMNS[:len(header)]:
                raise ValueError(f"{path} is not a benchmarks.run results CSV: its columns {header} are not the "
                                 f"first of {RESULT_COLUMNS}; write these results to another --out-dir")
            rows = list(reader)
            fh.seek(0)
            fh.truncate()
            writer.writeheader()
            writer.writerows(rows)
        fh.seek(0, os.SEEK_END)
        writer.writerow(row)


def precision_of(row: dict[str, str]) -> str:
    """The row's Lightning precision; :data:`DEFAULT_PRECISION` for rows from before the column."""
    return row.get("precision") or DEFAULT_PRECISION


def train_fraction_of(row: dict[str, str]) -> float:
    """The row's training fraction; :data:`FULL_TRAINING` for rows from before the column."""
    return float(row.get("train_fraction") or FULL_TRAINING)


def run_key(row: dict[str, Any]) -> tuple[Any, ...]:
    """What makes a row the result of one run: a run whose key is in the CSV is done."""
    return (row["config"], row["dataset"], int(row["horizon"]), row["model"], int(row["seed"]), precision_of(row),
            int(row["context_length"]), train_fraction_of(row))


def start_from_committed(out: Path) -> None:
    """Start the results CSV ``out`` as a copy of the committed one of the same name (in
    ``benchmarks/results``) when ``out`` does not exist yet, so that committed runs are skipped."""
    committed = RESULTS / out.name
    if not out.exists() and committed.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(committed, out)
        print(f"{out}: started from {committed} ({len(read_rows(out))} runs)", flush=True)


def merge(source: Path, target: Path) -> int:
    """Append to ``target`` the rows of ``source`` whose runs (:func:`run_key`) it lacks and return
    how many: the rows of a batch run with ``--out-dir`` (started from the committed CSV) come back.
    A run that ``target`` has already, from this batch or another, is kept as it is there (never
    counted twice in a table's mean over seeds)."""
    have = {run_key(row) for row in read_rows(target)}
    added = 0
    for row in read_rows(source):
        if run_key(row) not in have:
            have.add(run_key(row))
            append_row(target, {column: row.get(column) or "" for column in RESULT_COLUMNS})
            added += 1
    return added


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
        key = (_label(row["config"], row), row["dataset"], int(row["horizon"]), row["d_model"], row["model"])
        groups[key].append(row)
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
    """Markdown of a long-horizon results CSV: test MSE (mean ± std over seeds) per setting (dataset,
    horizon, and input and training fraction where the CSV has several) and model, per-dataset averages
    over the horizons that every model has run, the published averages beside, and each RSA model
    against its base model paired by run (:func:`render_comparisons`)."""
    models = list(dict.fromkeys(_label(row["model"], row) for row in rows))
    runs: dict[tuple[str, int, int, float, str], list[dict[str, str]]] = defaultdict(list)
    for row in rows:
        runs[(*_setting(row), _label(row["model"], row))].append(row)
    settings = sorted({key[:4] for key in runs}, key=lambda s: (s[3], s[2], s[0], s[1]))
    where = csv_path.relative_to(ROOT) if csv_path.is_relative_to(ROOT) else csv_path
    contexts = sorted({context for _, _, context, _ in settings})
    fractions = sorted({fraction for _, _, _, fraction in settings})
    show_input, show_fraction = len(contexts) > 1, fractions != [FULL_TRAINING]
    few_shot = (f" training on the last {' or '.join(f'{f:g}' for f in fractions)} of the training windows;"
                if show_fraction else "")
    lines = [f"# {csv_path.stem}", "",
             f"Long-horizon protocol (input {' or '.join(map(str, contexts))}; ETT borders 12/4/4 months, weather "
             f"70/10/20;{few_shot} every test window; train-only standard scaling): test MSE on the scaled data, "
             "mean ± sample std over seeds (the seeds "
             f"run in brackets), mean training seconds per run. Every run's command, commit, machine and date are in "
             f"[{csv_path.name}]({csv_path.name}); `python -m benchmarks.run --render {where}` redraws this table.",
             "", "| data | H | " + "input | " * show_input + "train | " * show_fraction + " | ".join(models) + " |",
             "|---|---|" + "---|" * (show_input + show_fraction + len(models))]

    def grid_cells(context: int, fraction: float) -> str:
        return f"{context} | " * show_input + f"{fraction:g} | " * show_fraction

    for dataset, horizon, context, fraction in settings:
        cells = []
        for model in models:
            done = runs.get((dataset, horizon, context, fraction, model), [])
            cells.append("" if not done else f"{_mean_std([float(r['mse']) for r in done])} "
                         f"[{','.join(r['seed'] for r in done)}] {_mean([float(r['train_seconds']) for r in done]):.0f} s")
        lines.append(f"| {dataset} | {horizon} | {grid_cells(context, fraction)}" + " | ".join(cells) + " |")
    average_rows = []
    for dataset, context, fraction in dict.fromkeys((d, c, f) for d, _, c, f in settings):
        averages = [_mean([_mean([float(r["mse"]) for r in runs[(dataset, h, context, fraction, m)]])
                           for h in LONG_HORIZONS])
                    if all((dataset, h, context, fraction, m) in runs for h in LONG_HORIZONS) else None
                    for m in models]
        if all(a is None for a in averages):
            continue
        published = LONG_HORIZON_PUBLISHED_PATCHTST.get(dataset) \
            if (context, fraction) == (96, FULL_TRAINING) else None  # input-96 numbers, all the training data
        average_rows.append(f"| {dataset} | {grid_cells(context, fraction)}"
                            + " | ".join("" if a is None else f"{a:.3f}" for a in averages)
                            + f" | {'' if published is None else f'{published:.3f}'} |")
    if average_rows:  # an ablation over some horizons has none
        lines += ["", "Per-dataset average MSE over the four horizons 96-720 (seeds averaged first), for each model "
                  "that has run all four (blank otherwise); `PatchTST (published)` is the input-96 average quoted in "
                  "issue #11 (blank beside runs of another input or training fraction).", "",
                  "| data | " + "input | " * show_input + "train | " * show_fraction + " | ".join(models)
                  + " | PatchTST (published) |",
                  "|---|" + "---|" * (show_input + show_fraction + len(models) + 1), *average_rows]
    lines += render_comparisons(rows)
    out = csv_path.with_suffix(".md")
    out.write_text("\n".join(lines) + "\n")
    return out


def _setting(row: dict[str, str]) -> tuple[str, int, int, float]:
    """(dataset, horizon, input, training fraction) of a results row."""
    return row["dataset"], int(row["horizon"]), int(row["context_length"]), train_fraction_of(row)


def base_model(model: str, models: list[str]) -> str | None:
    """The model of ``models`` that the RSA model ``model`` adds RSA to: ``X`` for ``rsa_X`` and for its
    variants ``rsa_X_...`` (the longest such ``X``); None for a model without RSA or without its base."""
    bases = [base for base in models if not base.startswith("rsa_")
             and (model == f"rsa_{base}" or model.startswith(f"rsa_{base}_"))]
    return max(bases, key=len, default=None)


def render_comparisons(rows: list[dict[str, str]]) -> list[str]:
    """Markdown lines comparing each RSA model ``rsa_X`` (or variant ``rsa_X_...``, :func:`base_model`)
    with its base ``X`` where ``rows`` hold both (of one config, at one precision): runs paired by (dataset, horizon, input, training fraction, seed), per
    horizon and over all horizons, for each input and training fraction (:func:`benchmarks.sign_test.compare`).
    No lines when no such pair of models ran."""
    from benchmarks.sign_test import compare

    groups: dict[tuple[str, str, int, float], list[dict[str, str]]] = defaultdict(list)
    for row in rows:
        groups[(row["config"], precision_of(row), int(row["context_length"]), train_fraction_of(row))].append(row)
    table = []
    for (config, precision, context, fraction), group in sorted(groups.items(), key=lambda g: (g[0][3], g[0][2])):
        models = list(dict.fromkeys(row["model"] for row in group))
        for model in models:
            if (base := base_model(model, models)) is None:
                continue
            horizons = sorted({int(row["horizon"]) for row in group})
            for horizon in [*horizons, None]:
                chosen = [row for row in group if horizon is None or int(row["horizon"]) == horizon]
                result = compare(chosen, model, base)
                if not result.n:
                    continue
                table.append(f"| {_label(model, group[0])} | {base} | {context} | {fraction:g} | "
                             f"{'all' if horizon is None else horizon} | {result.n} | {result.wins} | "
                             f"{result.losses} | {result.p_value:.3f} | {100 * result.mean_change:+.2f}% | "
                             f"{'' if math.isnan(result.std_change) else f'{100 * result.std_change:.2f}%'} |")
    if not table:
        return []
    return ["", "Each RSA model against its base, runs paired by (dataset, horizon, input, training fraction, seed): "
            "pairs, pairs where RSA's MSE is lower (ahead) and higher (behind), the two-sided exact sign test over "
            "the pairs that are not ties, and the mean and sample std over the pairs of the relative MSE change "
            "(RSA - base) / base (negative: RSA ahead). `all` pools the horizons of that input and fraction.", "",
            "| RSA model | base | input | train | H | pairs | ahead | behind | sign test p | mean MSE change | std |",
            "|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|", *table]


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _label(name: str, row: dict[str, str]) -> str:
    """``name`` in a table, with the row's precision beside it unless it is the default: runs at
    another precision are shown apart, never averaged with the default's."""
    precision = precision_of(row)
    return name if precision == DEFAULT_PRECISION else f"{name} {precision}"


def add_selection_arguments(parser: argparse.ArgumentParser) -> None:
    """``--dataset/--horizon/--model``: the options that narrow a config's runs (:func:`selected_runs`)."""
    parser.add_argument("--dataset", nargs="*", help="only these datasets")
    parser.add_argument("--horizon", nargs="*", type=int, help="only these horizons")
    parser.add_argument("--model", nargs="*", help="only these models")


class Setting(NamedTuple):
    """What a config trains, short of the seed: one dataset, horizon, model, input and training fraction."""

    dataset: str
    horizon: int
    model: str
    context_length: int
    train_fraction: float = FULL_TRAINING


class Run(NamedTuple):
    """One run of a batch: a :class:`Setting` and a seed."""

    dataset: str
    horizon: int
    model: str
    seed: int
    context_length: int
    train_fraction: float = FULL_TRAINING


def setting_splits(config: dict[str, Any], setting: Setting) -> tuple[Any, int]:
    """The protocol's splits of ``setting`` (its input, the protocol's horizon) and its label length."""
    from tsrec import datasets

    _, label, horizon = datasets.paper_setting(setting.dataset, setting.horizon, protocol=config["protocol"])
    return datasets.splits(setting.dataset, config["protocol"], context_length=setting.context_length,
                           prediction_length=horizon), label


def training_work(config: dict[str, Any], setting: Setting) -> float:
    """What one run of ``setting`` trains on, to order runs by cost (:data:`ORDERS`): its training
    windows (of its fraction) x the steps each window feeds the network (input + label + horizon) x the
    config's epochs. Proportional to the run's training FLOPs for one architecture at one width."""
    split, label = setting_splits(config, setting)
    windows = max(1, math.floor(split.train.n_windows * setting.train_fraction))
    epochs = config.get("training", {}).get("max_epochs", 1)
    return float(windows * (setting.context_length + label + split.prediction_length) * epochs)


#: Orders of a batch's runs (``--order``): the config's (:func:`selected_runs`), or the least training work
#: first (:func:`training_work`; a setting's models together, in the config's order), so that a batch
#: stopped at a deadline has finished the cheap settings of every model and lost only the costliest.
ORDERS = ("config", "cost")


def ordered(config: dict[str, Any], settings: list[Setting], order: str) -> list[Setting]:
    """``settings`` in ``order`` (:data:`ORDERS`); the sort is stable, so ties keep the config's order."""
    if order == "config":
        return settings
    work = {s: training_work(config, s) for s in {s._replace(model="") for s in settings}}
    return sorted(settings, key=lambda s: work[s._replace(model="")])


def selected_runs(config: dict[str, Any], args: argparse.Namespace) -> list[Setting]:
    """The config's settings, narrowed by ``--dataset/--horizon/--model``, in its order: by training
    fraction, then by input (of a config that lists several), then datasets, horizons and models. So the
    smallest fraction and the first input of every dataset run before the others."""
    fractions = config.get("train_fractions", [FULL_TRAINING])
    listed = config.get("context_length") if isinstance(config.get("context_length"), list) else []
    settings = [Setting(dataset, horizon, model, context, fraction)
                for fraction in fractions
                for dataset, horizons in config["settings"].items() if not args.dataset or dataset in args.dataset
                for horizon in horizons if not args.horizon or horizon in args.horizon
                for context in input_lengths(config, dataset, horizon)
                for model in config["models"] if not args.model or model in args.model]
    return sorted(settings, key=lambda s: (fractions.index(s.train_fraction),
                                           listed.index(s.context_length) if listed else 0))


@dataclass(frozen=True)
class Batch:
    """What the runs of one config in one invocation share (picklable: runs may go to other processes)."""

    config: dict[str, Any]
    out: Path  # the results CSV
    data_dir: str | None
    quick: bool
    command: str
    commit: str
    machine_settings: dict[str, Any] = field(default_factory=dict)
    threads: int | None = None


def run_and_append(batch: Batch, run: Run) -> None:
    """Train and test one run and append its row to the batch's CSV as soon as it has finished."""
    row = run_one(batch.config, run.dataset, run.horizon, run.model, run.seed, data_dir=batch.data_dir,
                  quick=batch.quick, command=batch.command, commit=batch.commit,
                  machine_settings=batch.machine_settings, context_length=run.context_length,
                  train_fraction=run.train_fraction)
    append_row(batch.out, row)
    print(f"{_describe(run)}: mse {row['mse']:.4f} mae {row['mae']:.4f} "
          f"({row['train_seconds']} s train, best epoch {row['best_epoch']})", flush=True)


def _run_in_process(batch: Batch, run: Run) -> None:
    """:func:`run_and_append` in a process of its own (a spawned one: its torch threads are set anew)."""
    if batch.threads:
        import torch

        torch.set_num_threads(batch.threads)
    run_and_append(batch, run)


class Pace:
    """When a run would finish, from the runs finished so far: their wall seconds fitted as a fixed cost
    plus a cost per unit of :func:`training_work` (least squares over the finished runs, the fixed cost
    at least 0; from one run or runs of one size alone, its seconds per unit). Measured under the batch's
    concurrency, so it errs long once fewer runs share the device."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.done: list[tuple[float, float]] = []  # (work, seconds) of each finished run

    def work(self, run: Run) -> float:
        return training_work(self.config, Setting(run.dataset, run.horizon, run.model, run.context_length,
                                                  run.train_fraction))

    def finished(self, run: Run, seconds: float) -> None:
        self.done.append((self.work(run), seconds))

    def seconds(self, work: float) -> float | None:
        """Projected wall seconds of a run of ``work``; None before a run has finished."""
        if not self.done:
            return None
        n = len(self.done)
        mean_w = sum(w for w, _ in self.done) / n
        mean_t = sum(t for _, t in self.done) / n
        spread = sum((w - mean_w) ** 2 for w, _ in self.done)
        if spread > 0:
            rate = sum((w - mean_w) * (t - mean_t) for w, t in self.done) / spread
            fixed = mean_t - rate * mean_w
            if rate > 0 and fixed >= 0:
                return fixed + rate * work
        return mean_t / mean_w * work

    def projected_end(self, run: Run, start: float) -> float | None:
        """Wall-clock time (``time.time()``) at which ``run`` started at ``start`` would end; None before a
        run has finished."""
        seconds = self.seconds(self.work(run))
        return None if seconds is None else start + seconds


def run_batch(batch: Batch, runs: list[Run], jobs: int, deadline: float | None = None) -> tuple[list[Run], list[Run]]:
    """Run ``runs``, up to ``jobs`` at once; return those that failed (each reported on stderr as it
    fails, the others carry on) and those not started because of ``deadline``.

    ``jobs == 1`` runs them here, one after the other. More run one process per run (spawned, so each
    starts clean and may use CUDA), all on the same device; each appends its row when it finishes
    (:func:`append_row` locks the CSV), so a batch stopped midway loses only the runs in flight.
    ``deadline`` (``time.time()``): no run starts whose projected end (:class:`Pace`) lies after it, so the
    device's share goes to the runs that can finish; those are returned as not started, in order."""
    failed: list[Run] = []
    not_started: list[Run] = []
    pace = Pace(batch.config)

    def report(run: Run, why: str) -> None:
        failed.append(run)
        print(f"benchmarks.run: {_describe(run)} failed ({why}); the other runs carry on", file=sys.stderr, flush=True)

    def too_late(run: Run) -> bool:
        end = None if deadline is None else pace.projected_end(run, time.time())
        if end is None or end <= deadline:
            return False
        not_started.append(run)
        print(f"benchmarks.run: {_describe(run)} not started: it would end about {end - deadline:.0f} s after "
              "the deadline", file=sys.stderr, flush=True)
        return True

    if jobs == 1:
        for run in runs:
            if too_late(run):
                continue
            started = time.time()
            try:
                run_and_append(batch, run)
                pace.finished(run, time.time() - started)
            except Exception as err:  # noqa: BLE001 (reported with its traceback; the batch goes on)
                traceback.print_exc()
                report(run, type(err).__name__)
        return failed, not_started
    context = multiprocessing.get_context("spawn")
    pending, running = list(runs), {}
    try:
        while pending or running:
            while pending and len(running) < jobs:
                run = pending.pop(0)
                if too_late(run):
                    continue
                process = context.Process(target=_run_in_process, args=(batch, run), name=_describe(run))
                process.start()
                running[process.sentinel] = (process, run, time.time())
            for sentinel in multiprocessing.connection.wait(list(running)):
                process, run, started = running.pop(sentinel)
                process.join()
                if process.exitcode != 0:
                    report(run, f"exit code {process.exitcode}")
                else:
                    pace.finished(run, time.time() - started)
    finally:  # interrupted: the runs in flight end with it
        for process, _, _ in running.values():
            process.terminate()
    return failed, not_started


def _describe(run: Run) -> str:
    fraction = "" if run.train_fraction == FULL_TRAINING else f", {run.train_fraction:g} of the training windows"
    return f"{run.dataset}-{run.horizon} {run.model} seed {run.seed} (input {run.context_length}{fraction})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("configs", nargs="*", type=Path, help="TOML configs under benchmarks/configs")
    parser.add_argument("--render", type=Path, help="only render the markdown table of this results CSV")
    parser.add_argument("--merge", nargs="+", type=Path, metavar="CSV",
                        help="only merge: append the rows of these results CSVs (a batch's --out-dir, e.g. from a "
                             "GPU machine) that the CSV of the same name in benchmarks/results (or --out-dir) "
                             "lacks, and redraw its table")
    add_selection_arguments(parser)
    parser.add_argument("--seeds", nargs="*", type=int, help="these seeds instead of the config's")
    parser.add_argument("--data-dir", help="directory with the dataset CSVs (else TSREC_DATA_DIR, then the cache)")
    parser.add_argument("--threads", type=int, help="torch intra-op threads (of each run, with --jobs)")
    parser.add_argument("--quick", action="store_true", help="tiny smoke-test runs (results are not benchmarks)")
    parser.add_argument("--plan", type=int, metavar="STEPS",
                        help="train nothing in full: time STEPS training steps of every selected run and write "
                             "its projected run time (one seed) to <output>_plan.md")
    parser.add_argument("--out-dir", type=Path,
                        help="where results go (default benchmarks/results; a temporary directory with --quick). "
                             "A results CSV it lacks starts as a copy of the committed one (not with --quick), so "
                             "committed runs are skipped; --merge brings the new rows back")
    parser.add_argument("--jobs", type=int, default=1,
                        help="runs at once, each in its own process on the same device (default 1: one after the "
                             "other in this process)")
    parser.add_argument("--precision", choices=PRECISIONS, default=DEFAULT_PRECISION,
                        help="Lightning precision of training and test (default %(default)s; bf16-mixed on a GPU)")
    parser.add_argument("--compile", action="store_true", help="train the network compiled by torch.compile")
    parser.add_argument("--order", choices=ORDERS, default="config",
                        help="the config's order (default), or 'cost': the settings with the least training "
                             "work first, a setting's models together (a batch cut by a deadline loses the "
                             "costliest settings of every model)")
    parser.add_argument("--deadline", type=float, metavar="EPOCH",
                        help="start no run whose projected end (a fixed cost plus a cost per unit of training "
                             "work, fitted on the finished runs) lies after this time (seconds since the epoch, "
                             "as `date +%%s`)")
    args = parser.parse_args(argv)
    command = "python -m benchmarks.run " + shlex.join(sys.argv[1:] if argv is None else argv)
    if args.render:
        print(render(args.render))
        return 0
    if args.merge:
        for source in args.merge:
            target = (args.out_dir or RESULTS) / source.name
            print(f"{target}: {merge(source, target)} rows of {source} appended")
            print(render(target))
        return 0
    if not args.configs:
        parser.error("give at least one config, or --render CSV, or --merge CSV")
    if args.plan is not None and (args.plan < 1 or args.quick or args.jobs != 1):
        parser.error("--plan takes a number of steps >= 1 and does not combine with --quick or --jobs")
    if args.jobs < 1:
        parser.error("--jobs takes a number of runs >= 1")
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    # Everything a run uses is imported before the commit is read, so rows name the code that ran.
    import tsrec.evaluation  # noqa: F401
    import tsrec.models.presets  # noqa: F401
    import tsrec.training  # noqa: F401

    commit = git_commit()
    machine_settings = {"precision": args.precision, "compile": args.compile}
    out_dir = args.out_dir or (Path(tempfile.mkdtemp(prefix="tsrec-bench-")) if args.quick else RESULTS)
    failed: list[Run] = []
    not_started: list[Run] = []
    for path in args.configs:
        config = load_config(path)
        out = out_dir / config["output"]
        if args.plan is not None:
            rows = []
            for setting in selected_runs(config, args):
                rows.append(plan_one(config, setting.dataset, setting.horizon, setting.model, data_dir=args.data_dir,
                                     steps=args.plan, machine_settings=machine_settings,
                                     context_length=setting.context_length, train_fraction=setting.train_fraction))
                print(f"{_describe(Run(*setting[:3], 0, *setting[3:]))}: {rows[-1]['train_s']:.3f} s/step, "
                      f"projected {rows[-1]['minutes']:.1f} min", flush=True)
            print(render_plan(rows, out.with_name(f"{out.stem}_plan.md"), command=command, commit=commit,
                              steps=args.plan))
            continue
        if not args.quick:  # quick rows are never committed ones
            start_from_committed(out)
        name = config["name"] + ("-quick" if args.quick else "")
        done = {run_key(row) for row in read_rows(out)}
        runs = [run for setting in ordered(config, selected_runs(config, args), args.order)
                for run in (Run(*setting[:3], seed, *setting[3:])
                            for seed in (args.seeds if args.seeds is not None else config["seeds"]))
                if run_key({**run._asdict(), "config": name, "precision": args.precision}) not in done]
        print(f"{path}: {len(runs)} runs to do, up to {args.jobs} at once; results in {out}", flush=True)
        batch = Batch(config, out, args.data_dir, args.quick, command, commit, machine_settings, args.threads)
        failed_here, late = run_batch(batch, runs, args.jobs, args.deadline)
        failed += failed_here
        not_started += late
        if out.exists():
            print(render(out))
    if not_started:
        print(f"benchmarks.run: {len(not_started)} runs not started before the deadline: "
              f"{', '.join(map(_describe, not_started))}", file=sys.stderr)
    if failed:
        print(f"benchmarks.run: {len(failed)} runs failed: {', '.join(map(_describe, failed))}; the same command "
              "runs them again (finished runs are skipped)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
