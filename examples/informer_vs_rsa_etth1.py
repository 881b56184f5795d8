"""Informer vs RSA-Informer on ETTh1 under the RSA paper's protocol (Table 1, multivariate).

Informer's borders (12/4/4 months), its input lengths for the horizon, a scaler fitted on the
training months only, early stopping on the validation months, and MSE/MAE on the scaled data
over every test window (stride 1). The same network, data and seed for both models; RSA adds a
handful of scalars per layer.

    python examples/informer_vs_rsa_etth1.py [--horizon 24] [--data-dir DIR] [--tiny]

ETTh1.csv is looked up in --data-dir, $TSREC_DATA_DIR, then ~/.cache/tsrec/datasets. The full run
is the paper's recipe (d_model 512, up to 6 epochs): minutes on a GPU, hours on a CPU.
``--tiny`` (or ``TSREC_EXAMPLE_TINY=1``) trains a small network on a few batches and scores 16
test windows, to check that everything runs.
"""

from __future__ import annotations

import argparse
import os
import sys

from tsrec import Forecaster, datasets
from tsrec.evaluation import backtest
from tsrec.models.presets import paper_options

TINY_OPTIONS = dict(d_model=16, n_heads=8, d_ff=16, e_layers=1, d_layers=1, max_epochs=1)
TINY_TRAINER = {"limit_train_batches": 4, "limit_val_batches": 2}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--horizon", type=int, default=24, choices=(24, 48, 168, 336))
    parser.add_argument("--data-dir", help="directory holding ETTh1.csv")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tiny", action="store_true", help="run in seconds (CI)")
    args = parser.parse_args()
    tiny = args.tiny or os.environ.get("TSREC_EXAMPLE_TINY") == "1"

    if datasets.find_file("ETTh1", args.data_dir) is None:
        sys.exit(f"ETTh1.csv not found in {[str(d) for d in datasets.search_dirs(args.data_dir)]}; pass "
                 f"--data-dir, set ${datasets.ENV_VAR}, or fetch it with tsrec.datasets.download('ETTh1')")
    frame = datasets.load("ETTh1", args.data_dir)  # 17420 hourly rows x 7 variables
    results = {}
    for model in ("informer", "rsa_informer"):
        # context, label, horizon, the paper's training recipe (+ REM heads), tiny sizes for CI
        options = {**paper_options("ETTh1", args.horizon, model), **(TINY_OPTIONS if tiny else {})}
        context, horizon = options.pop("context_length"), options.pop("prediction_length")
        split = datasets.splits("ETTh1", "informer", context_length=context, prediction_length=horizon)
        train, val, test = (frame.iloc[split[name].start:split[name].end] for name in ("train", "val", "test"))
        forecaster = Forecaster(model, prediction_length=horizon, context_length=context, freq="h", seed=args.seed,
                                **options,
                                trainer_kwargs={"enable_progress_bar": not tiny, **(TINY_TRAINER if tiny else {})})
        forecaster.fit(train, val_df=val)  # scaler: the training months only
        result = backtest(forecaster, test, start=context, stride=1, n_windows=16 if tiny else None,
                          baselines=("naive", "seasonal_naive"))  # ets/theta: one fit per window, too slow here
        results[model] = result
        print(f"{model:>12}: {result.errors['origin'].nunique()} test windows, "
              f"MSE {result.metric('mse', 'scaled'):.4f}  MAE {result.metric('mae', 'scaled'):.4f} (scaled)")
        if model.startswith("rsa_"):
            gates = forecaster.gates().groupby(["attention", "layer"], sort=False)["gate"].first()
            print("  gates: " + ", ".join(f"{a} {i}: {g:.2f}" for (a, i), g in gates.items()))
    change = results["rsa_informer"].metric("mse", "scaled") / results["informer"].metric("mse", "scaled") - 1
    print(f"ETTh1-{args.horizon}, seed {args.seed}: RSA-Informer's test MSE is {100 * change:+.1f}% vs Informer's")


if __name__ == "__main__":
    main()
