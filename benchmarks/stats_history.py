"""The statistical models on long series: all the history against the last ``LOCAL_HISTORY`` steps.

``python -m benchmarks.stats_history [--columns ETTh1:OT ...] [--horizon 24] [--windows 10]``
fits each statistical model (``ets``, ``ces``, ``dynamic_theta``, ``theta``) on one column of a
long benchmark file (all but its last ``windows x horizon`` steps), once reading the whole history
(the model's ``max_history`` lifted) and once at its default cap
(:data:`tsrec.models.stats.LOCAL_HISTORY`), one after the other, and backtests it over the last
``windows`` windows (stride ``horizon``, carried forward as ``cross_validation(refit=False)``).
Prints and writes (``stats_history.md`` in ``--out-dir``) each run's fit CPU seconds, its MSE and
MAE over the windows, and the capped run's ratios to the whole run's, with the command, commit and
machine. The files come from ``--data-dir`` (default ``$TSREC_DATA_DIR``, else ``../shared/datasets``).
Run with ``OMP_NUM_THREADS=1``.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.common import markdown_table, provenance, write_report

MODELS = ("ets", "ces", "dynamic_theta", "theta")
COLUMNS = ("ETTh1:OT", "ETTh1:HUFL", "ETTh2:OT", "WTH:WetBulbCelsius")
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "datasets"


def scored_fit(frame: pd.DataFrame, model: str, horizon: int, windows: int) -> dict[str, float]:
    """One fit of ``model`` on ``frame`` but its last ``windows`` horizons and its backtest over them
    (carried forward): the fit's CPU seconds and the backtest's MSE and MAE."""
    from tsrec import Forecaster
    from tsrec.evaluation import backtest

    started = time.process_time()
    fitted = Forecaster(model, prediction_length=horizon).fit(frame.iloc[:-horizon * windows])
    fit_seconds = time.process_time() - started
    errors = backtest(fitted, frame, n_windows=windows, baselines=("naive",)).errors
    error = errors.y_true - errors.y_pred
    return {"fit_cpu_s": fit_seconds, "mse": float(np.mean(error ** 2)), "mae": float(np.mean(np.abs(error)))}


def run(frame: pd.DataFrame, model: str, horizon: int, windows: int, whole: bool) -> dict[str, float]:
    """:func:`scored_fit` of ``model`` reading its whole history where ``whole``, else its default cap."""
    from tsrec.models.registry import model_spec

    model_class = model_spec(model).model_class
    cap = model_class.max_history
    try:
        model_class.max_history = None if whole else cap
        return scored_fit(frame, model, horizon, windows)
    finally:
        model_class.max_history = cap


def column_parser(module: str, description: str, columns: tuple[str, ...]) -> argparse.ArgumentParser:
    """The arguments of a benchmark over long columns of the benchmark files: ``--columns``
    (default ``columns``), ``--windows`` (backtest windows, default 10), ``--data-dir`` and ``--out-dir``."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=description)
    parser.add_argument("--columns", nargs="+", default=list(columns), help="FILE:COLUMN, e.g. ETTh1:OT")
    parser.add_argument("--windows", type=int, default=10)
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--out-dir", type=Path, default=Path(__file__).parent / "results")
    return parser


def column_frames(columns: list[str], data_dir: Path | None) -> Iterator[tuple[str, pd.DataFrame]]:
    """Each of ``columns`` (``FILE:COLUMN``) and its one-column frame, read from ``data_dir``
    (default ``$TSREC_DATA_DIR``'s loader default, else :data:`DEFAULT_DATA`)."""
    from tsrec.datasets import load

    for spec in columns:
        name, column = spec.split(":", 1)
        yield spec, load(name, data_dir or DEFAULT_DATA)[[column]]


def main(argv: list[str] | None = None) -> int:
    parser = column_parser("benchmarks.stats_history", __doc__.splitlines()[0], COLUMNS)
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--horizon", type=int, default=24)
    args = parser.parse_args(argv)
    given = sys.argv[1:] if argv is None else argv
    from tsrec.models.stats import LOCAL_HISTORY

    warnings.simplefilter("ignore")
    rows = []
    for spec, frame in column_frames(args.columns, args.data_dir):
        for model in args.models:
            whole = run(frame, model, args.horizon, args.windows, whole=True)
            capped = run(frame, model, args.horizon, args.windows, whole=False)
            capped_cpu = f"last {LOCAL_HISTORY}: fit CPU-s"
            rows.append({"data": spec, "steps fitted": len(frame) - args.horizon * args.windows, "model": model,
                         "whole: fit CPU-s": whole["fit_cpu_s"], capped_cpu: capped["fit_cpu_s"],
                         "whole: MSE": whole["mse"], f"last {LOCAL_HISTORY}: MSE": capped["mse"],
                         "MSE ratio": capped["mse"] / whole["mse"], "MAE ratio": capped["mae"] / whole["mae"]})
            print(rows[-1], flush=True)
    table = pd.DataFrame(rows)
    ratios = table.groupby("model", sort=False)[["MSE ratio", "MAE ratio"]].apply(
        lambda g: np.exp(np.log(g).mean())).reset_index()
    text = "\n".join([
        "# The statistical models on long series: all the history against its last steps", "",
        f"Each model fitted on all but the last {args.windows} x {args.horizon} steps of one column, reading the whole "
        f"history or its last {LOCAL_HISTORY} steps (the default), and backtested over those {args.windows} windows "
        "(carried forward); ratios: the capped run's over the whole run's (below 1: the cap is better).", "",
        markdown_table(table, floatfmt=".3f"), "",
        "Geometric mean of the ratios over the columns:", "",
        markdown_table(ratios, floatfmt=".3f"), "",
        provenance("benchmarks.stats_history", given), ""])
    write_report(args.out_dir / "stats_history.md", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
