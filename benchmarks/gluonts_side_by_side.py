"""tsrec and GluonTS side by side, scored by GluonTS's ``Evaluator`` on the same windows.

ETTh1's ``OT`` column (one univariate series), the long-horizon borders (train 12 months,
validation 4, test 4; ``tsrec.datasets.splits("ETTh1", "long_horizon", ...)``), context 96,
horizon 24. Models: tsrec's ``rsa_patchtst`` and ``dlinear`` (also with ``revin=True``), all with
``output="quantile"``, through :class:`tsrec.interop.gluonts.TsrecEstimator`, and GluonTS's own
``DeepAREstimator`` and ``PatchTSTEstimator`` (``gluonts.torch``; Student-t outputs, their defaults;
PatchTST with patches of 16 steps at stride 8).

Every model gets the same budget: at most ``--epochs`` epochs of ``--batches-per-epoch`` batches
of 32 windows, drawn at random from the training part, Adam at 1e-3, and the weights of its best
validation epoch (no early stopping). Validation data in each library's form, covering the
validation part: tsrec gets one entry holding it (every window scored each epoch), GluonTS one
entry per ``--stride`` steps through it (its estimators score the last window of each entry).

Test: forecasts from every ``--stride``-th origin of the test part (``--windows`` of them, the same
for every model), each from the whole history before it, scored by ``gluonts.evaluation.Evaluator``
(quantiles 0.1, ..., 0.9; 100 sample paths for GluonTS's models): MSE (original units), MASE
(seasonal error of the whole history, season 24), ``mean_wQuantileLoss`` and ``Coverage[q]``. Fit
time is the wall time of ``estimator.train``.

Usage::

    python -m benchmarks.gluonts_side_by_side --threads 1 [--seeds 0 1] [--epochs 20]
        [--batches-per-epoch 50] [--stride 24] [--windows 120] [--data-dir ../shared/datasets]
        [--out-dir benchmarks/results] [--models ...]
    python -m benchmarks.gluonts_side_by_side --render benchmarks/results/gluonts_side_by_side.csv
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchmarks.common import ROOT, command_line, git_commit, machine, markdown_table, now, write_csv

CONTEXT, HORIZON, BATCH_SIZE, NUM_SAMPLES = 96, 24, 32, 100
LEVELS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
METRICS = ("MSE", "MASE", "mean_wQuantileLoss", "Coverage[0.1]", "Coverage[0.9]")
#: tsrec's models: registry name and options over tsrec's defaults.
TSREC_MODELS = {
    "tsrec rsa_patchtst": ("rsa_patchtst", {}),
    "tsrec dlinear": ("dlinear", {}),
    "tsrec dlinear revin=True": ("dlinear", {"revin": True}),
}
MODELS = (*TSREC_MODELS, "GluonTS DeepAR", "GluonTS PatchTST")
NAME = "gluonts_side_by_side"


@dataclass(frozen=True)
class Data:
    """The GluonTS datasets of one run: ``train`` and the two validation forms (see the module
    docstring), the test windows' inputs and their true series (history and horizon)."""

    train: list[dict[str, Any]]
    tsrec_validation: list[dict[str, Any]]
    gluonts_validation: list[dict[str, Any]]
    test_inputs: list[dict[str, Any]]
    test_truth: list[pd.Series]


def load_data(data_dir: str, stride: int, windows: int) -> Data:
    """ETTh1's ``OT`` cut at the long-horizon borders into GluonTS entries (item_id ``"OT"``)."""
    from tsrec import datasets

    frame = datasets.load("ETTh1", data_dir)
    split = datasets.splits("ETTh1", "long_horizon", context_length=CONTEXT, prediction_length=HORIZON,
                            n_rows=len(frame))
    values = frame["OT"].to_numpy(dtype=np.float32)
    start = pd.Period(frame.index[0], freq="h")

    def entry(first: int, end: int) -> dict[str, Any]:
        return {"start": start + first, "target": values[first:end], "item_id": "OT"}

    origins = list(range(split.test.border, split.test.end - HORIZON + 1, stride))[:windows]
    return Data(
        train=[entry(0, split.train.end)],
        tsrec_validation=[entry(split.val.start, split.val.end)],
        gluonts_validation=[entry(0, end) for end in range(split.val.border + HORIZON, split.val.end + 1, stride)],
        test_inputs=[entry(0, origin) for origin in origins],
        test_truth=[pd.Series(values[:origin + HORIZON], index=pd.period_range(start, periods=origin + HORIZON))
                    for origin in origins],
    )


def make_estimator(model: str, seed: int, epochs: int, batches: int, workdir: str) -> Any:
    """The estimator of ``model`` (one of :data:`MODELS`) under the shared budget."""
    if model in TSREC_MODELS:
        from tsrec.interop.gluonts import TsrecEstimator

        name, options = TSREC_MODELS[model]
        return TsrecEstimator(name, prediction_length=HORIZON, context_length=CONTEXT, freq="h", output="quantile",
                              max_epochs=epochs, batch_size=BATCH_SIZE, patience=None, seed=seed, **options,
                              trainer_kwargs={"limit_train_batches": batches, "accelerator": "cpu",
                                              "enable_progress_bar": False})
    trainer_kwargs = {"max_epochs": epochs, "accelerator": "cpu", "enable_progress_bar": False,
                      "enable_model_summary": False, "logger": False, "default_root_dir": workdir}
    shared = {"prediction_length": HORIZON, "context_length": CONTEXT, "batch_size": BATCH_SIZE,
              "num_batches_per_epoch": batches, "trainer_kwargs": trainer_kwargs}
    if model == "GluonTS DeepAR":
        from gluonts.torch import DeepAREstimator

        return DeepAREstimator(freq="h", **shared)
    if model == "GluonTS PatchTST":
        from gluonts.torch import PatchTSTEstimator

        return PatchTSTEstimator(patch_len=16, stride=8, **shared)
    raise ValueError(f"unknown model {model!r}; choose from {', '.join(MODELS)}")


def run_one(model: str, seed: int, epochs: int, batches: int, data: Data) -> dict[str, Any]:
    """Train ``model`` with ``seed``, forecast every test window, score them: one CSV row."""
    import lightning.pytorch as pl
    from gluonts.evaluation import Evaluator

    pl.seed_everything(seed, verbose=False)  # GluonTS's estimators draw from the global generators
    validation = data.tsrec_validation if model in TSREC_MODELS else data.gluonts_validation
    with tempfile.TemporaryDirectory(prefix="gluonts-side-by-side-") as workdir:
        estimator = make_estimator(model, seed, epochs, batches, workdir)
        started = time.perf_counter()
        predictor = estimator.train(data.train, validation_data=validation)
        fit_s = time.perf_counter() - started
        started = time.perf_counter()
        forecasts = list(predictor.predict(data.test_inputs, num_samples=NUM_SAMPLES))
        predict_s = time.perf_counter() - started
    agg, _ = Evaluator(quantiles=LEVELS, num_workers=0)(data.test_truth, forecasts, num_series=len(forecasts))
    return {"model": model, "seed": seed, "epochs": epochs, "batches_per_epoch": batches, "batch_size": BATCH_SIZE,
            "windows": len(forecasts), **{metric: float(agg[metric]) for metric in METRICS},
            "fit_s": round(fit_s, 1), "predict_s": round(predict_s, 1)}


def mean_spread(values: pd.Series, digits: int) -> str:
    """``mean ± sample std`` over seeds (the mean alone for one seed)."""
    if len(values) == 1:
        return f"{values.iloc[0]:.{digits}f}"
    return f"{values.mean():.{digits}f} ± {values.std():.{digits}f}"


def summary(rows: pd.DataFrame) -> pd.DataFrame:
    """One line per model: its seeds, each metric and the fit time as mean ± sample std."""
    lines = []
    for model, runs in rows.groupby("model", sort=False):
        line = {"model": model, "seeds": ",".join(str(s) for s in runs.seed)}
        line.update({metric: mean_spread(runs[metric], 3) for metric in METRICS})
        line["fit s"] = mean_spread(runs["fit_s"], 0)
        lines.append(line)
    return pd.DataFrame(lines)


def render(rows: pd.DataFrame) -> str:
    """The markdown report of the CSV ``rows``: provenance, the protocol, the summary, every run."""
    first = rows.iloc[0]
    protocol = (
        f"ETTh1's `OT` column (univariate), long-horizon borders (train 12 months, validation 4, test 4), "
        f"context {CONTEXT}, horizon {HORIZON}. Scored by GluonTS's `Evaluator` (quantiles 0.1, ..., 0.9) on "
        f"the same {first.windows} test windows (every {first.stride}th origin of the test part, each forecast "
        f"from the whole history before it). Budget for every model: at most {first.epochs} epochs of "
        f"{first.batches_per_epoch} batches of {first.batch_size} windows, Adam at 1e-3, best-validation weights, "
        "CPU. MSE in the data's units (degrees); MASE against the seasonal (24 h) naive error of the history; "
        "a calibrated model has Coverage[0.1] = 0.1 and Coverage[0.9] = 0.9. Mean ± sample std over seeds; "
        "fit time in seconds (wall time of `estimator.train`). Script: "
        "[benchmarks/gluonts_side_by_side.py](../gluonts_side_by_side.py)."
    )
    runs = rows[["model", "seed", *METRICS, "fit_s", "predict_s"]].astype({"fit_s": str, "predict_s": str})
    return "\n".join([
        "# tsrec and GluonTS side by side (ETTh1 `OT`, horizon 24)", "",
        f"`{first.command}` at commit {first.commit} on {first.machine}, {first.date}.", "",
        protocol, "",
        markdown_table(summary(rows)), "",
        "Every run:", "",
        markdown_table(runs), "",
    ])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batches-per-epoch", type=int, default=50)
    parser.add_argument("--stride", type=int, default=HORIZON, help="steps between test (and validation) origins")
    parser.add_argument("--windows", type=int, default=120, help="test windows (120 cover the test part at stride 24)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "datasets"))
    parser.add_argument("--out-dir", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--render", type=Path, metavar="CSV", help="only redraw the markdown report of this CSV")
    args = parser.parse_args(argv)
    report = args.out_dir / f"{NAME}.md"
    if args.render is not None:
        report.write_text(render(pd.read_csv(args.render)))
        return 0

    import lightning.pytorch  # noqa: F401  (sets its logger's level on import: quieten it after)
    import torch

    torch.set_num_threads(args.threads)
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", module="gluonts")
    warnings.filterwarnings("ignore", message=".*LeafSpec.*")
    provenance = {"command": command_line(f"benchmarks.{NAME}", argv), "commit": git_commit(), "machine": machine()}
    data = load_data(args.data_dir, args.stride, args.windows)
    rows = []
    for seed in args.seeds:
        for model in args.models:
            rows.append({**run_one(model, seed, args.epochs, args.batches_per_epoch, data), "stride": args.stride})
            print(rows[-1], file=sys.stderr, flush=True)
    rows = [{**row, **provenance, "date": now()} for row in rows]
    write_csv(args.out_dir / f"{NAME}.csv", rows)
    report.write_text(render(pd.DataFrame(rows)))
    print(markdown_table(summary(pd.DataFrame(rows))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
