"""Quickstart through the Python API (``tsrec quickstart`` is the command-line version).

Fits the default model (``auto``: statistical models and, where the data hold enough windows, networks,
ensembled on validation) on synthetic hourly series with an exponentially decaying recurrence and a
daily cycle, forecasts the held-out last day with its 80% and 95% conformal intervals, scores it
against naive forecasts, and, beside it, trains RSA-PatchTST on the same data to show what RSA learns:
its gates and its REM heads' decays and cycles.

    python examples/quickstart.py [--output DIR] [--tiny]

``--tiny`` (or ``TSREC_EXAMPLE_TINY=1``) shrinks data and training to run in seconds.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from tsrec import Forecaster
from tsrec.datasets.synthetic import recurrent_series
from tsrec.evaluation import backtest
from tsrec.plotting import plot_backtest, plot_forecast, plot_gates

HORIZON = 24


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", default="quickstart-output", help="directory for the files and figures")
    parser.add_argument("--tiny", action="store_true", help="run in seconds (CI)")
    args = parser.parse_args()
    tiny = args.tiny or os.environ.get("TSREC_EXAMPLE_TINY") == "1"
    output = Path(args.output)
    output.mkdir(parents=True, exist_ok=True)

    # 3 series x 8 weeks of hourly data (2 with --tiny): AR(1) decay 0.9 + daily cycle + noise.
    df = recurrent_series(24 * 7 * (2 if tiny else 8), n_series=3, ar=0.9, innovation=0.3, cycle=24,
                          random_phase=True, noise=0.1, seed=0)
    train = df.iloc[:-HORIZON]  # the last day is held out

    # The default model, and what it chose.
    forecaster = Forecaster(prediction_length=HORIZON, seed=0).fit(train)
    print(forecaster.leaderboard[["model", "val_score", "weight", "note"]].to_string(index=False))
    forecast = forecaster.predict(levels=[80, 95])  # item_id, timestamp, mean, 0.025, 0.1, 0.9, 0.975
    forecast.to_csv(output / "forecast.csv", index=False)
    plot_forecast(df, forecast).savefig(output / "forecast.png")  # the bands, and the held-out day apart

    # Its skill on the held-out day: its error over each naive forecast's (below 1 beats it).
    result = backtest(forecaster, df, n_windows=1)
    print(result.skill[["baseline", "season", "mse_ratio", "mae_ratio"]].to_string(index=False))
    plot_backtest(result).savefig(output / "skill.png")

    # Beside it, RSA-PatchTST on the same data: the share of each layer's attention that is recurrence
    # (its gate), and the decays and cycles its REM heads learned, in hours.
    rsa = Forecaster("rsa_patchtst", prediction_length=HORIZON, context_length=48 if tiny else 96, seed=0,
                     refit_full=False, **(dict(max_epochs=1, e_layers=1) if tiny else dict(max_steps=300)))
    rsa.fit(train)
    gates = rsa.gates()  # one row per REM head; a cos head's sin twin shares its decay and period
    heads = gates[gates["kind"] != "sin"].rename(columns={"half_life_steps": "half_life_hours",
                                                          "period_steps": "period_hours"})  # hourly: a step an hour
    print(heads[["attention", "layer", "kind", "gate", "half_life_hours", "period_hours"]].to_string(index=False))
    plot_gates(rsa).savefig(output / "gates.png")
    print(f"files in {output}")


if __name__ == "__main__":
    main()
