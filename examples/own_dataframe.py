"""Your own data: a long DataFrame with several series (one row per id and timestamp).

Fits RSA-Informer on three stores' hourly sales, forecasts the next day of each store, backtests
the last days, and plots forecasts and errors by horizon step.

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

    network = dict(d_model=16, d_ff=16, e_layers=1) if tiny else dict(d_model=64, d_ff=128, e_layers=2)
    forecaster = Forecaster("rsa_informer", prediction_length=HORIZON, context_length=48 if tiny else 96,
                            n_heads=8, d_layers=1, max_epochs=1 if tiny else 8, learning_rate=1e-3,
                            output_dir=output / "training", **network)
    forecaster.fit(history, **COLUMNS)

    forecast = forecaster.predict()  # the day after `history`, per store
    print(forecast.groupby("item_id")["mean"].describe()[["mean", "min", "max"]])
    latest = forecaster.predict(df)  # the same model on the newest data: the day after `df`
    print(f"forecast from the newest data starts at {latest['timestamp'].min()}")

    # Three non-overlapping daily windows over the held-out days, original and scaled units.
    result = backtest(forecaster, df, n_windows=3, stride=HORIZON, **COLUMNS)
    print(result.summary.to_string(index=False))

    output.mkdir(parents=True, exist_ok=True)
    plot_forecast(df, forecast, **COLUMNS).savefig(output / "forecast.png")
    plot_backtest(result).savefig(output / "backtest.png")
    print(f"figures in {output}")


if __name__ == "__main__":
    main()
