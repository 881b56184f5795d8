"""auto on a panel where a few products are launched inside its validation windows: their scale, their zeros.

``python -m benchmarks.launches [--seeds 0 1 2] [--series 40] [--launched 4] [--out-dir DIR]``
draws a synthetic weekly panel per seed (:func:`panel`: ``--series`` established series of 150 to
200 weeks, and ``--launched`` products at zero until 20 weeks before the test, then selling at a
level like the others'; the last 8 weeks of each are the test) and fits on the rest, one after the
other: the default ``Forecaster(prediction_length=8)`` as it is (a series with no scale before its
validation windows is divided by its scale from its first sale on: ``tsrec.validation.series_scales``;
the zeros before a launch read as missing: ``leading_zeros="missing"``), the default with those zeros
kept as data (``leading_zeros="keep"``, the rule before), the default with a launched product
divided by 1 (the scale rule before), the default with the launched products' zeros before their
first sale given as missing (NaN) in the frame, ``rsa_patchtst`` alone as it is, with the zeros kept
and with NaN, and ``ces``, ``ets`` and ``seasonal_naive`` alone. Prints and writes (``launches.md`` in
``--out-dir``) each run's test MASE on all the series, on the established ones and on the launched
ones (each absolute error over its series' in-sample naive MAE: a launched product's from its
first sale), its fit's CPU seconds and the default's validation scores and members, per seed and
as mean and spread over the seeds, with the command, commit and machine. Run with
``OMP_NUM_THREADS=1``.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
import warnings
from pathlib import Path
from unittest import mock

import numpy as np
import pandas as pd

from benchmarks.common import seeded_runs, seeds_report, write_report

HORIZON = 8
LAUNCHED_WEEKS = 20  # a launched product's weeks of sales before the test
RUNS = ("default", "default, zeros kept", "default, launches divided by 1", "default, NaN before launch",
        "rsa_patchtst", "rsa_patchtst, zeros kept", "rsa_patchtst, NaN before launch", "ces", "ets", "seasonal_naive")


def panel(series: int, launched: int, seed: int) -> pd.DataFrame:
    """A long frame (``unique_id``, ``ds``, ``y``, ``launched``) of ``series`` weekly series of 150 to
    200 weeks and ``launched`` of 200 weeks, zero but for their last ``LAUNCHED_WEEKS + HORIZON``,
    all ending on the same week: a level, a yearly cycle of a tenth of it, a random walk and noise."""
    rng = np.random.default_rng(seed)
    frames = []
    for i in range(series + launched):
        new = i >= series
        length = 200 if new else int(rng.integers(150, 201))
        t = np.arange(length)
        level = rng.uniform(50, 500)
        y = level * (1 + 0.1 * np.sin(2 * np.pi * (t + rng.integers(52)) / 52)) \
            + np.cumsum(rng.normal(0, 0.02 * level, length)) + rng.normal(0, 0.03 * level, length)
        if new:
            y[:length - LAUNCHED_WEEKS - HORIZON] = 0.0
        frames.append(pd.DataFrame({"unique_id": f"{'new' if new else 's'}{i}", "launched": new, "y": np.maximum(y, 0),
                                    "ds": pd.date_range(end="2024-12-29", periods=length, freq="W-SUN")}))
    return pd.concat(frames, ignore_index=True)


def divided_by_one(panel, first, metric, season):  # noqa: ANN001, ANN202 (tsrec.validation.series_scales' signature)
    """The rule before: a series' scale over its steps before ``first`` alone, 1 where it has none."""
    from tsrec.validation import _scale

    scale = np.ones((len(panel.items), len(panel.columns) if panel.layout == "wide" else 1))
    if metric == "smape":
        return scale
    for i, (item, end) in enumerate(zip(panel.items, first.tolist())):
        value = _scale(np.where(item.observed[:end], item.values[:end], np.nan), metric, season)
        scale[i] = np.where(np.isfinite(value) & (value > 0), value, 1.0)
    return scale


def naive_scale(y: np.ndarray) -> float:
    """A series' in-sample naive MAE over its training steps from its first nonzero value on."""
    y = y[np.argmax(y != 0):]
    return float(np.mean(np.abs(np.diff(y))))


def run(name: str, train: pd.DataFrame, test: pd.DataFrame) -> dict[str, object]:
    """One fit of run ``name`` (:data:`RUNS`) on ``train`` and its forecast scored on ``test``."""
    from tsrec import Forecaster

    started = time.process_time()
    frame = train.drop(columns="launched")
    model, _, variant = name.partition(", ")
    if variant == "NaN before launch":  # the zeros before each product's first sale given as missing
        frame = frame.assign(y=frame.y.where(frame.groupby("unique_id").y.transform(lambda y: (y != 0).cummax())))
    rule = mock.patch("tsrec.validation.series_scales", divided_by_one) if variant == "launches divided by 1" \
        else contextlib.nullcontext()
    options = {"leading_zeros": "keep"} if variant == "zeros kept" else {}  # the zeros before a launch as data
    with rule:
        fitted = Forecaster(prediction_length=HORIZON, **options) if model == "default" else \
            Forecaster(model, prediction_length=HORIZON, **options)
        fitted.fit(frame)
    seconds = time.process_time() - started
    forecast = fitted.predict().rename(columns={"item_id": "unique_id", "timestamp": "ds"})
    scored = forecast.merge(test, on=["unique_id", "ds"])
    scale = train.groupby("unique_id").y.apply(lambda y: naive_scale(y.to_numpy()))
    scored["scaled"] = np.abs(scored["mean"] - scored.y) / scored.unique_id.map(scale)
    out: dict[str, object] = {"mase_all": float(scored.scaled.mean()),
                              "mase_established": float(scored.scaled[~scored.launched].mean()),
                              "mase_launched": float(scored.scaled[scored.launched].mean()), "fit_cpu_s": seconds}
    if name.startswith("default"):
        board = fitted.leaderboard
        network = fitted.resolved_settings.network
        out["best_val_score"] = float(board.val_score.min())
        out["members"] = ", ".join(f"{m} {w:.2f}" for m, w in zip(network.members, network.weights))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.launches", description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--series", type=int, default=40)
    parser.add_argument("--launched", type=int, default=4)
    parser.add_argument("--out-dir", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args(argv)
    given = sys.argv[1:] if argv is None else argv
    warnings.simplefilter("ignore")
    table = seeded_runs(args.seeds, lambda seed: panel(args.series, args.launched, seed), RUNS, HORIZON, run)
    text = seeds_report(
        "auto with products launched inside its validation windows",
        f"{args.series} synthetic weekly series of 150 to 200 weeks and {args.launched} products launched "
        f"{LAUNCHED_WEEKS} weeks before the test per seed (`benchmarks/launches.py`), the last {HORIZON} weeks of "
        "each the test; the default as it is (a series with no scale before its validation windows divided by its "
        "scale from its first sale on; the zeros before a launch read as missing, leading_zeros='missing'), the "
        "default with those zeros kept as data (leading_zeros='keep'), the default with a launched product divided "
        "by 1 (the scale rule before), the default with the launched products' zeros before their first sale given "
        "as missing (NaN) in the frame, RSA-PatchTST alone as it is, with the zeros kept and with NaN, and three "
        "statistical models alone. MASE: each absolute error over its series' in-sample naive "
        "MAE (a launched product's from its first sale), averaged over every series' test steps, over the "
        "established series' and over the launched ones'.",
        table, ["mase_all", "mase_established", "mase_launched", "fit_cpu_s"], "benchmarks.launches", given,
        per_seed="Per seed (`best_val_score`: the leaderboard's lowest validation MASE):")
    write_report(args.out_dir / "launches.md", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
