"""Quickstart through the Python API (``tsrec quickstart`` is the command-line version).

Trains RSA-Informer on synthetic hourly series with an exponentially decaying recurrence and a
daily cycle, forecasts the held-out last day, compares with seasonal naive, and shows what RSA
learned: the gates and the REM kernels.

    python examples/quickstart.py [--output DIR] [--tiny]

``--tiny`` (or ``TSREC_EXAMPLE_TINY=1``) shrinks data, model and training to run in seconds.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from tsrec import Forecaster, metrics
from tsrec.datasets.synthetic import recurrent_series
from tsrec.plotting import plot_forecast, plot_gates, plot_rem

HORIZON = 24


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", default="quickstart-output", help="directory for the figures")
    parser.add_argument("--tiny", action="store_true", help="run in seconds (CI)")
    args = parser.parse_args()
    tiny = args.tiny or os.environ.get("TSREC_EXAMPLE_TINY") == "1"
    output = Path(args.output)

    # 3 series x 16 weeks of hourly data: AR(1) decay 0.9 + daily cycle + noise.
    df = recurrent_series(24 * 7 * (2 if tiny else 16), n_series=3, ar=0.9, innovation=0.3, cycle=24,
                          random_phase=True, noise=0.1, seed=0)
    train, holdout = df.iloc[:-HORIZON], df.iloc[-HORIZON:]

    network = dict(d_model=16, e_layers=1, d_ff=16) if tiny else dict(d_model=64, e_layers=2, d_ff=128)
    forecaster = Forecaster("rsa_informer", prediction_length=HORIZON, context_length=48 if tiny else 96,
                            n_heads=8, d_layers=1, max_epochs=1 if tiny else 5, batch_size=32, learning_rate=1e-3,
                            output_dir=output / "training", **network)
    forecaster.fit(train)

    forecast = forecaster.predict()  # item_id, timestamp, mean: the 24 hours after the training data
    naive = Forecaster("seasonal_naive", prediction_length=HORIZON, context_length=48).fit(train).predict()
    truth = holdout.to_numpy()  # [24, 3]
    for name, frame in (("rsa_informer", forecast), ("seasonal naive", naive)):
        pred = frame.pivot(index="timestamp", columns="item_id", values="mean")[df.columns].to_numpy()  # [24, 3]
        print(f"{name:>14}: holdout MSE {metrics.mse(truth, pred):.4f}  MAE {metrics.mae(truth, pred):.4f} "
              "(original units)")

    gates = forecaster.gates()  # one row per REM head of every RSA layer
    print(gates[["attention", "layer", "head", "kind", "gate", "half_life", "period"]].to_string(index=False))

    output.mkdir(parents=True, exist_ok=True)
    plot_forecast(df, forecast).savefig(output / "forecast.png")
    plot_gates(forecaster).savefig(output / "gates.png")
    plot_rem(forecaster, layer=0, attention="encoder self").savefig(output / "rem_encoder_0.png")
    print(f"figures in {output}")


if __name__ == "__main__":
    main()
