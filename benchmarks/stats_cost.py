"""CPU cost of tsrec's statistical models against statsforecast's own call on the same panel.

``python -m benchmarks.stats_cost [--series 200] [--steps 300] [--repeats 2]`` fits and forecasts a
panel of positive monthly series (season 12) with ``Forecaster(name).fit(df).predict()`` and with
``StatsForecast(models=[...], freq="MS", n_jobs=1).forecast(df, h)``, interleaved, and prints each
one's CPU seconds (``time.process_time``), their ratio and the largest relative difference of the
forecasts. Run with ``OMP_NUM_THREADS=1``.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pandas as pd

MODELS = {"ets": "AutoETS", "theta": "AutoTheta", "ces": "AutoCES", "dynamic_theta": "DynamicOptimizedTheta"}


def monthly_panel(series: int, steps: int, seed: int = 0) -> pd.DataFrame:
    """``series`` positive seasonal series of ``steps`` months, each with its own level, trend and phase."""
    rng = np.random.default_rng(seed)
    t = np.arange(steps)
    level, trend, phase = rng.uniform(20, 100, (3, series, 1)) * np.array([[[1.0]], [[0.002]], [[0.06]]])
    y = level * (1 + trend * t) * (1 + 0.2 * np.sin(2 * np.pi * t / 12 + phase)) + rng.standard_normal((series, steps))
    stamps = pd.date_range("2000-01-01", periods=steps, freq="MS")
    return pd.DataFrame({"unique_id": np.repeat([f"s{i:04d}" for i in range(series)], steps),
                         "ds": np.tile(stamps, series), "y": y.ravel()})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=200)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--horizon", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    args = parser.parse_args()
    import statsforecast.models as sf_models
    from statsforecast import StatsForecast

    from tsrec import Forecaster

    df = monthly_panel(args.series, args.steps)
    columns = {"id_col": "unique_id", "time_col": "ds", "target_col": "y"}
    # warm both paths up once (imports, compiled code)
    StatsForecast(models=[sf_models.AutoETS(season_length=12)], freq="MS", n_jobs=1).forecast(df=df.head(300), h=2)
    print(f"{args.series} series x {args.steps} steps, horizon {args.horizon}; CPU seconds (time.process_time)")
    for name in args.models:
        tsrec_s, sf_s = [], []
        for _ in range(args.repeats):  # interleaved
            started = time.process_time()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                ours = Forecaster(name, prediction_length=args.horizon).fit(df, **columns).predict()
            tsrec_s.append(time.process_time() - started)
            started = time.process_time()
            model = getattr(sf_models, MODELS[name])(season_length=12)
            theirs = StatsForecast(models=[model], freq="MS", n_jobs=1).forecast(df=df, h=args.horizon)
            sf_s.append(time.process_time() - started)
        ours = ours.sort_values(["item_id", "timestamp"])["mean"].to_numpy()
        theirs = theirs.sort_values(["unique_id", "ds"])[repr(model)].to_numpy()
        difference = float(np.max(np.abs(ours - theirs) / np.abs(theirs)))
        print(f"{name:14s} tsrec {np.median(tsrec_s):7.2f}  statsforecast {np.median(sf_s):7.2f}  ratio "
              f"{np.median(tsrec_s) / np.median(sf_s):5.2f}  (runs {[round(s, 2) for s in tsrec_s]} vs "
              f"{[round(s, 2) for s in sf_s]}); largest relative difference {difference:.1e}")


if __name__ == "__main__":
    main()
