"""What RSA learned, in figures: gates per layer, REM kernels, and the gates during training.

Trains a small RSA-Transformer twice with the same seed and budget: on strongly recurrent
synthetic series (decay and a daily cycle) and on white noise. Both runs start from the same gates
(0.5 here); whether the recurrent run's gates end higher depends on the set-up and is not a
property to rely on: docs/when_rsa_helps.md ("What the gates do and do not tell") measures it. The
gate plots mark the data's own periods (none are found in white noise) and draw hollow the REM
heads that training left at their start.

    python examples/gate_plots.py [--output DIR] [--tiny]

``--tiny`` (or ``TSREC_EXAMPLE_TINY=1``) shrinks the training to run in seconds.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from tsrec import Forecaster
from tsrec.datasets.synthetic import recurrent_series
from tsrec.plotting import plot_gate_history, plot_gates, plot_rem


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", default="gate-plots-output", help="directory for the figures")
    parser.add_argument("--tiny", action="store_true", help="run in seconds (CI)")
    args = parser.parse_args()
    tiny = args.tiny or os.environ.get("TSREC_EXAMPLE_TINY") == "1"
    output = Path(args.output)
    output.mkdir(parents=True, exist_ok=True)

    steps = 24 * (14 if tiny else 56)
    data = {
        "recurrent": recurrent_series(steps, ar=0.95, innovation=0.3, cycle=24, noise=0.05, seed=0),
        "noise": recurrent_series(steps, ar=(), cycle=None, noise=1.0, seed=0),
    }
    for name, df in data.items():
        # Gates start at 0.5 (mu = 0) so that training alone moves them; the same data size, seed
        # and number of epochs for both runs (no early stopping).
        forecaster = Forecaster("rsa_transformer", prediction_length=24, context_length=48, freq="h",
                                d_model=16, n_heads=4, d_ff=32, e_layers=1, d_layers=1, rsa={"gate_init": (0.0, 0.0)},
                                max_epochs=1 if tiny else 3, patience=None, lr_schedule="constant",
                                learning_rate=1e-3, rsa_lr_multiplier=30, seed=0, output_dir=output / f"training-{name}")
        forecaster.fit(df)
        gates = forecaster.gates()
        print(f"{name:>9}: mean gate {gates.groupby(['attention', 'layer'])['gate'].first().mean():.3f}")
        plot_gates(forecaster).savefig(output / f"gates-{name}.png")
        plot_rem(forecaster, layer=0, attention="encoder self").savefig(output / f"rem-{name}.png")
        plot_gate_history(forecaster).savefig(output / f"gate-history-{name}.png")  # one point per epoch
    print(f"figures in {output}")


if __name__ == "__main__":
    main()
