"""MSTL on long high-frequency columns: STL smoothing at every step against R's jumps (``stl_jumps``).

``python -m benchmarks.mstl_jumps [--columns ETTm1:OT ...] [--steps 8064] [--windows 10]``
fits ``mstl`` on the last ``steps`` steps of one column of a benchmark file before its last
``windows`` days (a day is the horizon: 24 hourly, 96 quarter-hourly, 144 ten-minute steps), once
with STL's trend and low-pass smoothers at every step (statsmodels' default) and once with
:func:`tsrec.models.stats.stl_jumps` (the default), one after the other, and backtests each over the
``windows`` days (stride one day, carried forward as ``cross_validation(refit=False)``, which
decomposes each window's history again). Prints and writes (``mstl_jumps.md`` in ``--out-dir``)
each run's fit and backtest CPU seconds, its MSE, and the jumps' ratios to every-step smoothing,
with the command, commit and machine. The files come from ``--data-dir`` (default
``$TSREC_DATA_DIR``, else ``../shared/datasets``). Run with ``OMP_NUM_THREADS=1``.
"""

from __future__ import annotations

import sys
import time
import warnings
from unittest import mock

import numpy as np
import pandas as pd

from benchmarks.common import markdown_table, provenance, write_report
from benchmarks.stats_history import column_frames, column_parser, scored_fit

#: Two long columns per sampling interval: hourly (seasons 24, 168), quarter-hourly (96, 672) and
#: ten-minute (144, 1,008).
COLUMNS = ("ETTh1:OT", "WTH:WetBulbCelsius", "ETTm1:OT", "ETTm2:OT", "weather:OT", "weather:T (degC)")


def run(frame: pd.DataFrame, horizon: int, windows: int, every_step: bool) -> dict[str, float]:
    """:func:`scored_fit` of ``mstl`` on ``frame`` with STL smoothing at every step where
    ``every_step``, else at :func:`~tsrec.models.stats.stl_jumps`; adds the backtest's CPU seconds."""
    started = time.process_time()
    if every_step:
        with mock.patch("tsrec.models.stats.stl_jumps", lambda seasons: {}):
            result = scored_fit(frame, "mstl", horizon, windows)
    else:
        result = scored_fit(frame, "mstl", horizon, windows)
    return {**result, "backtest_cpu_s": time.process_time() - started - result["fit_cpu_s"]}


def main(argv: list[str] | None = None) -> int:
    parser = column_parser("benchmarks.mstl_jumps", __doc__.splitlines()[0], COLUMNS)
    parser.add_argument("--steps", type=int, default=8064, help="steps fitted (default: 12 weeks of hours)")
    args = parser.parse_args(argv)
    given = sys.argv[1:] if argv is None else argv
    from tsrec.models.stats import stl_jumps

    warnings.simplefilter("ignore")
    rows = []
    for spec, frame in column_frames(args.columns, args.data_dir):
        horizon = int(pd.Timedelta("1D") / (frame.index[1] - frame.index[0]))
        frame = frame.iloc[-(args.steps + horizon * args.windows):]
        every = run(frame, horizon, args.windows, every_step=True)
        jumps = run(frame, horizon, args.windows, every_step=False)
        rows.append({"data": spec, "steps fitted": args.steps, "horizon": horizon,
                     "every step: fit CPU-s": every["fit_cpu_s"], "jumps: fit CPU-s": jumps["fit_cpu_s"],
                     "every step: backtest CPU-s": every["backtest_cpu_s"],
                     "jumps: backtest CPU-s": jumps["backtest_cpu_s"],
                     "every step: MSE": every["mse"], "jumps: MSE": jumps["mse"],
                     "MSE ratio": jumps["mse"] / every["mse"], "MAE ratio": jumps["mae"] / every["mae"],
                     "CPU ratio": (jumps["fit_cpu_s"] + jumps["backtest_cpu_s"])
                     / (every["fit_cpu_s"] + every["backtest_cpu_s"])})
        print(rows[-1], flush=True)
    table = pd.DataFrame(rows)
    geomean = {ratio: float(np.exp(np.log(table[ratio]).mean())) for ratio in ("MSE ratio", "MAE ratio", "CPU ratio")}
    text = "\n".join([
        "# MSTL on long high-frequency columns: STL smoothing at every step against R's jumps", "",
        f"`mstl` fitted on the last {args.steps} steps of one column before its last {args.windows} days and "
        f"backtested over those days (carried forward), its STL trend and low-pass smoothers evaluated at every "
        f"step (statsmodels' default) or every tenth of their windows (`stl_jumps`, the default: at hourly "
        f"seasons 24 and 168 {stl_jumps((24, 168))}); ratios: the jumps' run over the every-step run's "
        "(below 1: the jumps are better or cheaper).", "",
        markdown_table(table, floatfmt=".3f"), "",
        "Geometric mean of the ratios over the columns: "
        + ", ".join(f"{name} {value:.3f}" for name, value in geomean.items()) + ".", "",
        provenance("benchmarks.mstl_jumps", given), ""])
    write_report(args.out_dir / "mstl_jumps.md", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
