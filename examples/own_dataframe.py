"""Your own data: a long DataFrame with several series (one row per id and timestamp).

Fits the default model (``auto``) on three stores' hourly sales, forecasts the next day of each
store with its 80% and 95% intervals, backtests the last days against naive forecasts, and plots
forecasts and errors by horizon step.

    python examples/own_dataframe.py [--output DIR] [--tiny]

``--tiny`` (or ``TSREC_EXAMPLE_TINY=1``) shrinks data, model and training to run in seconds.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np
import pandas as pd

from tsrec import Forecaster
from tsrec.evaluation import backtest
from tsrec.plotting import plot_backtest, plot_forecast

HORIZON = 24
COLUMNS = dict(id_col="store", time_col="ds", target_col="sales")


def sales_frame(days: int, seed: int = 0) -> pd.DataFrame:
    """Long frame ``store, ds, sales``: a level per store, a daily profile, AR(1) noise; a few gaps."""
    rng = np.random.default_rng(seed)
    hours = np.arange(24 * days)
    parts = []
    for k, store in enumerate(("north", "centre", "south")):
        noise = np.zeros(hours.size)
        for t in range(1, hours.size):
            noise[t] = 0.8 * noise[t - 1] + rng.normal(scale=2.0)
        sales = 50 + 20 * k + 15 * np.sin(2 * np.pi * (hours - 6 - k) / 24) + noise
        parts.append(pd.DataFrame({"store": store, "sales": sales,
                                   "ds": pd.date_range("2024-01-01", periods=hours.size, freq="h")}))
    df = pd.concat(parts, ignore_index=True)
    return df.drop(index=rng.choice(len(df), size=len(df) // 200, replace=False))  # missing rows are masked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", default="own-dataframe-output", help="directory for the figures")
    parser.add_argument("--tiny", action="store_true", help="run in seconds (CI)")
    args = parser.parse_args()
    tiny = args.tiny or os.environ.get("TSREC_EXAMPLE_TINY") == "1"
    output = Path(args.output)

    df = sales_frame(days=14 if tiny else 90)
    cutoff = df["ds"].max() - pd.Timedelta(days=3)
    history = df[df["ds"] <= cutoff]  # the last 3 days are kept for the backtest

    forecaster = Forecaster(prediction_length=HORIZON, seed=0)  # the default model, auto
    forecaster.fit(history, **COLUMNS)
    print(forecaster.leaderboard[["model", "val_score", "weight"]].to_string(index=False))  # what it chose

    forecast = forecaster.predict(levels=[80, 95])  # the day after `history`, per store, with its bands
    print(forecast.groupby("item_id")["mean"].describe()[["mean", "min", "max"]])
    latest = forecaster.predict(df)  # the same model on the newest data: the day after `df`
    print(f"forecast from the newest data starts at {latest['timestamp'].min()}")

    # Three non-overlapping daily windows over the held-out days: errors, intervals' coverage, skill.
    result = backtest(forecaster, df, n_windows=3, stride=HORIZON, **COLUMNS)
    print(result.summary.to_string(index=False))
    print(result.skill.to_string(index=False))

    output.mkdir(parents=True, exist_ok=True)
    plot_forecast(df, forecast, **COLUMNS).savefig(output / "forecast.png")
    plot_backtest(result).savefig(output / "backtest.png")
    print(f"figures in {output}")


if __name__ == "__main__":
    main()
