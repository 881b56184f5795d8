"""CPU time of :func:`tsrec.evaluation.backtest` against the number of series, and against the
implementation it replaced.

Each of ``--series`` series of a long frame has :data:`STEPS` hourly steps (a level, a daily sine,
Gaussian noise, 1% of the values missing). ``Forecaster("naive", prediction_length=24)`` (context 48,
nothing to train) is fitted on the frame and backtested on each series' last :data:`WINDOWS` origins,
:data:`STRIDE` steps apart, with the naive and seasonal naive baselines only. Timed: the ``backtest``
call (reading the frame, forecasting the windows, the errors frame and every metric), in CPU seconds
(``time.process_time``) and wall seconds, each size in a fresh process. The reference is
``tsrec/evaluation.py`` as of :data:`REFERENCE_COMMIT` (windows read one at a time, MASE filtering the
errors once per series: quadratic in the series), read with ``git show`` and run with the rest of the
current tsrec, at ``--reference-series`` only. ``OMP_NUM_THREADS`` is 1 unless set otherwise. Writes
``backtest_scaling.md``.

Usage::

    python -m benchmarks.backtest_scaling [--series 250 1000 4000] [--reference-series 1000] [--out-dir DIR]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before numpy loads its BLAS

import argparse  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import types  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from benchmarks.common import ROOT, command_line, git_commit, in_fresh_process, machine, now  # noqa: E402

#: The last commit whose backtest scores one series at a time (the reference being replaced).
REFERENCE_COMMIT = "577afe1"
SERIES = (250, 1_000, 4_000)
STEPS = 500
HORIZON = 24
WINDOWS = 20
#: Origins this many steps apart: 20 windows 24 steps apart would leave less than the context of 48.
STRIDE = 12
BASELINES = ("naive", "seasonal_naive")
COLUMNS = {"id_col": "item_id", "time_col": "timestamp", "target_col": "y"}


def frame(n_series: int, seed: int = 0) -> pd.DataFrame:
    """``n_series`` hourly series of :data:`STEPS` steps in long format (``item_id``, ``timestamp``, ``y``)."""
    rng = np.random.default_rng(seed)
    t = np.arange(STEPS)
    y = rng.uniform(1, 5, (n_series, 1)) + np.sin(2 * np.pi * t / 24) + 0.1 * rng.standard_normal((n_series, STEPS))
    y[rng.random(y.shape) < 0.01] = np.nan
    return pd.DataFrame({"item_id": np.repeat([f"s{i:05d}" for i in range(n_series)], STEPS),
                         "timestamp": np.tile(pd.date_range("2024-01-01", periods=STEPS, freq="h"), n_series),
                         "y": y.ravel()})


def reference_backtest() -> Callable[..., object]:
    """``backtest`` of ``tsrec/evaluation.py`` at :data:`REFERENCE_COMMIT`."""
    source = subprocess.run(["git", "show", f"{REFERENCE_COMMIT}:tsrec/evaluation.py"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout
    module = types.ModuleType("reference_evaluation")
    exec(compile(source, f"{REFERENCE_COMMIT}:tsrec/evaluation.py", "exec"), module.__dict__)
    return module.backtest


def measure(n_series: int, reference: bool) -> dict[str, float]:
    """Seconds of one backtest of :func:`frame` ``(n_series)`` by the current or the reference code."""
    import torch

    from tsrec import Forecaster
    from tsrec.evaluation import backtest

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    run = reference_backtest() if reference else backtest
    df = frame(n_series)
    forecaster = Forecaster("naive", prediction_length=HORIZON).fit(df, **COLUMNS)
    cpu, wall = time.process_time(), time.perf_counter()
    result = run(forecaster, df, n_windows=WINDOWS, stride=STRIDE, baselines=BASELINES, **COLUMNS)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {"rows": len(result.errors), "cpu_s": cpu, "wall_s": wall, "mse": result.metric("mse", "original"),
            "mase": result.metric("mase", "scale-free")}


def table(rows: list[dict[str, object]]) -> str:
    """The measurements as a markdown table."""
    lines = ["| code | series | error rows | CPU s | CPU ms per series | wall s | MSE | MASE |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['code']} | {r['series']:,} | {r['rows']:,} | {r['cpu_s']:.2f} | "
              f"{1000 * r['cpu_s'] / r['series']:.2f} | {r['wall_s']:.2f} | {r['mse']:.10g} | {r['mase']:.10g} |"
              for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--series", type=int, nargs="+", default=list(SERIES))
    parser.add_argument("--reference-series", type=int, nargs="*", default=[1_000],
                        help="sizes to time the reference at too (none: skip it)")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args(argv)
    load = os.getloadavg()[0]
    rows = []
    for n_series in args.series:
        for reference in (False, True) if n_series in args.reference_series else (False,):
            result = in_fresh_process(measure, n_series, reference)
            rows.append({"code": f"old ({REFERENCE_COMMIT})" if reference else "new", "series": n_series, **result})
            print(table(rows[-1:]).splitlines()[-1], flush=True)
    commit = git_commit()
    ratios = [f"{old['cpu_s'] / new['cpu_s']:.1f}x less CPU at {new['series']:,} series" for new in rows
              for old in rows if old["series"] == new["series"] and old["code"] != "new" and new["code"] == "new"]
    text = "\n".join([
        "# Backtest CPU time against the number of series",
        "",
        (f"`tsrec.evaluation.backtest` of `Forecaster(\"naive\", prediction_length={HORIZON})` (context 48, nothing "
         f"to train) on a long frame of N hourly series of {STEPS} steps (1% missing), {WINDOWS} origins per series "
         f"{STRIDE} steps apart, `baselines={BASELINES}`."),
        "",
        f"- command: `{command_line('benchmarks.backtest_scaling', sys.argv[1:] if argv is None else argv)}`",
        (f"- git commit: `{commit}`; old = `tsrec/evaluation.py` at `{REFERENCE_COMMIT}` (windows read one by one, "
         "MASE filtering the errors frame once per series), run with the rest of this commit's tsrec"),
        f"- machine: {machine()}; OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}",
        (f"- date: {now()}; 1-min load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end "
         "(cores shared with other jobs: CPU seconds, not wall time)"),
        ("- time: the whole `backtest` call (reading the frame, forecasting the windows through Lightning, the "
         "errors frame, every metric), one call per row, each in a fresh process after fitting"),
        "",
        table(rows),
        "",
        "; ".join(ratios) + "." if ratios else "",
    ]).rstrip() + "\n"
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "backtest_scaling.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
