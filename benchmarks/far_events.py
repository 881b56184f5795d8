"""Far values a covariate marks (promotions) against far values that are mistakes (typos), under each
``far_values``.

``python -m benchmarks.far_events [--seeds 0 1 2] [--out-dir DIR]`` draws two synthetic daily
panels per seed (:func:`panel`: 5 series of 400 days around 100 to 140 with noise of 5, the last
14 days of each the test): ``promo``, where a known-future covariate ``promo`` (1 on about 4% of
days, one day of each test) adds 200, and ``typos``, where a known-future covariate ``temp``
drives nothing and three days of each series' training part hold a typo of 1e4. On each it fits
the default ``Forecaster(prediction_length=14)`` with ``far_values`` ``"auto"`` (the default),
``"missing"`` (what the default was before ``"auto"``) and ``"keep"``, one after the other, and
writes (``far_events.md`` in ``--out-dir``) each fit's test MAE over every step and over the
promotion days, the resolved ``far_values``, the members and the fit's CPU seconds, per seed and
as mean and spread over the seeds, with the command, commit and machine. Run with
``OMP_NUM_THREADS=1``.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.common import markdown_table, over_seeds, provenance, seeded_runs, write_report

HORIZON = 14
DAYS = 400
SERIES = 5
RUNS = ("auto", "missing", "keep")
#: Each panel's covariate (a known-future one).
COVARIATE = {"promo": "promo", "typos": "temp"}
#: Each panel's scores (the promotion days' MAE on the panel that has them).
COLUMNS = {"promo": ["mae", "mae_promo", "fit_cpu_s"], "typos": ["mae", "fit_cpu_s"]}


def panel(kind: str, seed: int) -> pd.DataFrame:
    """A long frame (``unique_id``, ``ds``, ``y`` and the covariate of ``kind``, :data:`COVARIATE`)
    of :data:`SERIES` daily series of :data:`DAYS` days: ``"promo"``, a promotion on about 4% of
    days (and on one day of the test) adding 200; ``"typos"``, a covariate that drives nothing and
    three typos of 1e4 per series at random days before the test."""
    rng = np.random.default_rng(seed)
    frames = []
    for i in range(SERIES):
        y = 100 + 10 * i + 5 * rng.standard_normal(DAYS)
        frame = pd.DataFrame({"unique_id": f"s{i}", "ds": pd.date_range("2023-01-01", periods=DAYS, freq="D")})
        if kind == "promo":
            promo = (rng.random(DAYS) < 0.04).astype(float)
            promo[-HORIZON:] = 0.0
            promo[-1 - int(rng.integers(HORIZON))] = 1.0
            frame["promo"] = promo
            y = y + 200 * promo
        else:
            frame["temp"] = rng.normal(15, 8, DAYS)
            y[rng.choice(DAYS - HORIZON, 3, replace=False)] = 1e4
        frame["y"] = y
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def run(kind: str, name: str, train: pd.DataFrame, test: pd.DataFrame) -> dict[str, object]:
    """The default fitted with ``far_values=name`` on ``train`` (panel ``kind``), scored on ``test``."""
    from tsrec import Forecaster

    covariate = COVARIATE[kind]
    started = time.process_time()
    fitted = Forecaster(prediction_length=HORIZON, far_values=name, seed=0,
                        trainer_kwargs={"enable_progress_bar": False, "logger": False})
    fitted.fit(train, future_covariates=[covariate])
    seconds = time.process_time() - started
    forecast = fitted.predict(future_covariates=test[["unique_id", "ds", covariate]])
    scored = forecast.rename(columns={"item_id": "unique_id", "timestamp": "ds"}).merge(test, on=["unique_id", "ds"])
    error = np.abs(scored["mean"] - scored.y)
    network = fitted.resolved_settings.network
    promo = {"mae_promo": float(error[scored.promo == 1].mean())} if kind == "promo" else {}
    return {"mae": float(error.mean()), **promo, "fit_cpu_s": seconds,
            "far_values": fitted.resolved_settings.window.far_values,
            "members": ", ".join(f"{m} {w:.2f}" for m, w in zip(network.members, network.weights))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.far_events", description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--out-dir", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args(argv)
    given = sys.argv[1:] if argv is None else argv
    warnings.simplefilter("ignore")
    lines = ["# Far values a covariate marks, and far values that are mistakes", "", __doc__.split("\n\n")[1]
             .replace("\n", " "), ""]
    for kind in COVARIATE:
        table = seeded_runs(args.seeds, lambda seed, kind=kind: panel(kind, seed), RUNS, HORIZON,
                            lambda name, train, test, kind=kind: run(kind, name, train, test))
        lines += [f"## {kind}", "", "Mean and spread (standard deviation) over the seeds:", "",
                  markdown_table(over_seeds(table, COLUMNS[kind]), floatfmt=".3f"), "", "Per seed:", "",
                  markdown_table(table, floatfmt=".3f"), ""]
    write_report(args.out_dir / "far_events.md", "\n".join(lines + [provenance("benchmarks.far_events", given), ""]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
