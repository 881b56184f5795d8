"""The ``tsrec`` command line.

Commands (``tsrec <command> --help`` lists each one's options):

- ``quickstart``: train RSA-Informer on synthetic recurrent data (or a benchmark file), forecast
  held-out steps, and write the forecast, the learned gates, figures and metrics.
- ``fit``: train any registered model on a CSV file and save it.
- ``predict``: forecast the steps after the fitted data, or after a CSV file.
- ``backtest``: rolling-origin errors of a saved model on a CSV file.
- ``plot-gates``: the learned gates of a saved RSA model as a PNG/SVG.

User errors (a missing file, an unknown model, a bad option) end with one line
``tsrec: error: ...`` on stderr and exit status 2; ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:  # pandas loads when a command runs, so that --help and usage errors come at once
    import pandas as pd

__all__ = ["main", "build_parser"]

EXIT_ERROR = 2
TIME_COLUMNS = ("date", "timestamp", "ds", "time", "datetime")
PACKAGE_DIR = Path(__file__).resolve().parent


def is_user_error(err: BaseException) -> bool:
    """A problem with the user's input, told in one line: a file that cannot be read (``OSError``),
    or a ``ValueError``/``TypeError`` raised by tsrec's own checks. Anything else (a shape error or
    out-of-memory in torch, a ValueError deep inside numpy) is a bug and keeps its traceback."""
    if isinstance(err, OSError):
        return True
    if not isinstance(err, (ValueError, TypeError)):
        return False
    frame = err.__traceback__
    while frame is not None and frame.tb_next is not None:
        frame = frame.tb_next
    return frame is not None and Path(frame.tb_frame.f_code.co_filename).resolve().is_relative_to(PACKAGE_DIR)


class UsageError(Exception):
    """A command line argparse rejects."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line for main(), not usage + exit
        raise UsageError(f"{message} (see '{self.prog} --help')")


# ---------------------------------------------------------------------------------------- quickstart
@dataclass(frozen=True)
class QuickstartSettings:
    """Data size, window geometry, network and budget of one quickstart run."""

    steps: int
    context_length: int
    prediction_length: int
    epochs: int | None
    network: dict[str, Any] = field(default_factory=dict)
    training: dict[str, Any] = field(default_factory=dict)


# The default (rsa_patchtst at the Forecaster's default budget: a step budget scaled to the data,
# then the refit on all the history) on 2688 hourly steps (16 weeks) x 3 series, 72 batches of 32
# windows per epoch. --tiny runs in seconds.
QUICKSTART = QuickstartSettings(steps=24 * 7 * 16, context_length=96, prediction_length=24, epochs=None)
QUICKSTART_TINY = QuickstartSettings(
    steps=24 * 14, context_length=48, prediction_length=24, epochs=1,
    network=dict(e_layers=1, d_ff=16), training=dict(batch_size=64))
SYNTHETIC = dict(n_series=3, ar=0.9, innovation=0.3, cycle=24, amplitude=1.0, random_phase=True, noise=0.1)


def _quickstart_data(dataset: str, data_dir: str | None, steps: int, seed: int) -> tuple[pd.DataFrame, str]:
    """A wide frame of the last ``steps`` steps, and a one-line description of it."""
    if dataset.lower() == "synthetic":
        from tsrec.datasets.synthetic import recurrent_series

        df = recurrent_series(steps, seed=seed, **SYNTHETIC)
        return df, (f"synthetic: {df.shape[1]} hourly series, AR(1) decay {SYNTHETIC['ar']} + daily cycle + "
                    f"noise (tsrec.datasets.synthetic.recurrent_series)")
    from tsrec import datasets

    df = datasets.load(dataset, data_dir)
    info = datasets.get_info(dataset)
    return df.iloc[-steps:], f"{info.name}: its last {min(steps, len(df))} of {len(df)} steps, {df.shape[1]} variables"


def _holdout_scores(forecast: pd.DataFrame, holdout: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, float]]:
    """``forecast`` with a ``y_true`` column from the wide ``holdout`` frame, and its MSE/MAE."""
    from tsrec import metrics

    truth = holdout.rename_axis("timestamp").reset_index().melt(
        id_vars="timestamp", var_name="item_id", value_name="y_true")
    truth["item_id"] = truth["item_id"].astype(str)
    scored = forecast.merge(truth, on=["item_id", "timestamp"], how="left")
    observed = scored["y_true"].notna().to_numpy()
    y_true, y_pred = scored["y_true"].to_numpy(), scored["mean"].to_numpy()
    return scored, {"mse": metrics.mse(y_true, y_pred, mask=observed), "mae": metrics.mae(y_true, y_pred, mask=observed)}


def _duration(value: Any, steps: float) -> str:
    """A half-life or period as ``12.0h`` / ``3.5d`` / ``15min``, or in steps without a duration."""
    import pandas as pd

    if not math.isfinite(steps):
        return "inf"
    if pd.isna(value):
        return f"{steps:.1f} steps"
    seconds = pd.Timedelta(value).total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= 0.99 * size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds:.0f}s"


def gate_lines(table: pd.DataFrame) -> list[str]:
    """One line per RSA layer: its gate(s) and its REM heads' cycle periods and decay half-lives."""
    lines = []
    for (attention, layer), rows in table.groupby(["attention", "layer"], sort=False):
        gates = rows["gate"].unique()
        gate = f"gate {gates[0]:.2f}" if len(gates) == 1 else "gates " + " ".join(f"{g:.2f}" for g in rows["gate"])
        heads = rows[rows["kind"] != "sin"]  # a sin head shares (gamma, theta) with its cos twin
        periods = [_duration(v, s) for v, s in zip(heads["period"], heads["period_steps"]) if math.isfinite(s)]
        lives = [_duration(v, s) for v, s in zip(heads["half_life"], heads["half_life_steps"])]
        lines.append(f"{attention} {layer}: {gate} | REM cycles {' '.join(periods) or '-'} | "
                     f"half-lives {' '.join(lives)}")
    return lines


def cmd_quickstart(args: argparse.Namespace) -> int:
    from tsrec.evaluation import backtest
    from tsrec.forecaster import DEFAULT_MODEL, Forecaster
    from tsrec.plotting import plot_forecast, plot_gate_history, plot_gates

    started = time.perf_counter()
    settings = QUICKSTART_TINY if args.tiny else QUICKSTART
    epochs = args.epochs or settings.epochs
    output = Path(args.output)
    df, description = _quickstart_data(args.dataset, args.data_dir, args.steps or settings.steps, args.seed)
    horizon, context = settings.prediction_length, settings.context_length
    train, holdout = df.iloc[:-horizon], df.iloc[-horizon:]
    print(f"tsrec quickstart: {description}\n  training {DEFAULT_MODEL} on {len(train)} steps; the last {horizon} "
          f"steps are held out; output in {output}", flush=True)
    budget = {} if epochs is None else {"max_epochs": epochs}
    forecaster = Forecaster(DEFAULT_MODEL, prediction_length=horizon, context_length=context,
                            output_dir=output / "training", seed=args.seed, **budget,
                            **settings.training, **settings.network)
    fit_started = time.perf_counter()
    forecaster.fit(train)
    train_seconds = time.perf_counter() - fit_started
    forecast, scores = _holdout_scores(forecaster.predict(), holdout)
    skill = backtest(forecaster, df, n_windows=1).skill  # the holdout window, against naive forecasts
    gates = forecaster.gates()

    output.mkdir(parents=True, exist_ok=True)
    forecast.to_csv(output / "forecast.csv", index=False)
    gates.to_csv(output / "gates.csv", index=False)
    plot_forecast(df, forecast, history_steps=2 * context).savefig(output / "forecast.png")
    plot_gates(gates, data_periods=forecaster.data_facts.periods).savefig(output / "gates.png")
    plot_gate_history(forecaster).savefig(output / "gate_history.png")
    forecaster.save(output / "model")
    report = {
        "dataset": description,
        "model": DEFAULT_MODEL,
        "context_length": context,
        "prediction_length": horizon,
        "training": str(forecaster.training_summary),
        "budget": forecaster.training_summary.budget,
        "refit": forecaster.training_summary.refit,
        "holdout": f"the last {horizon} steps of every series, unseen in training",
        "units": "original",
        "scores": scores,
        "skill": {row.baseline: {"season": row.season, "mse_ratio": row.mse_ratio, "mae_ratio": row.mae_ratio}
                  for row in skill.itertuples()},
        "skill_units": "ratios of the model's error to the baseline's on the holdout, scaled units; below 1 "
                       "beats the baseline",
        "train_seconds": round(train_seconds, 1),
    }
    (output / "metrics.json").write_text(json.dumps(report, indent=2))

    print(f"\ntsrec quickstart done in {time.perf_counter() - started:.0f} s; files in {output}:")
    print("  forecast.csv forecast.png gates.csv gates.png gate_history.png metrics.json model/ training/")
    print(f"  holdout ({horizon} steps, original units): {DEFAULT_MODEL} MSE {scores['mse']:.4f} "
          f"MAE {scores['mae']:.4f}")
    print("  skill, the model's MSE over the baseline's on the holdout (below 1 beats it): " + " | ".join(
        f"{row.baseline.replace('_', ' ')}" + (f" ({row.season} steps)" if row.baseline != "naive" else "")
        + f" {row.mse_ratio:.2f}" for row in skill.itertuples()))
    print("  learned gates sigmoid(mu), share of the REM term per layer:")
    for line in gate_lines(gates):
        print(f"    {line}")
    return 0


# ---------------------------------------------------------------------------------------- fit / predict
def _existing(path: str, what: str) -> Path:
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{what} {p} does not exist")
    return p


def _read_csv(path: str, time_col: str | None) -> tuple[pd.DataFrame, str]:
    """The CSV as a frame, and its time column (``time_col``, else the first of TIME_COLUMNS present)."""
    import pandas as pd

    try:
        df = pd.read_csv(_existing(path, "data file"))
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
        raise ValueError(f"{path} is not a readable CSV file ({type(err).__name__}: {err}); pass a comma-separated "
                         "file with a header row") from err
    if len(df.columns) == 1 and (separator := next((c for c in ";\t|" if c in str(df.columns[0])), None)):
        raise ValueError(f"{path} looks {separator!r}-separated (its one column is {str(df.columns[0])!r}); tsrec "
                         "reads comma-separated CSV: save it with commas, e.g. df.to_csv(path, index=False)")
    if time_col is None:
        time_col = next((c for c in TIME_COLUMNS if c in df.columns), None)
        if time_col is None:
            raise ValueError(f"{path} has no time column named one of {TIME_COLUMNS}; pass --time-col "
                             f"(columns: {list(df.columns)[:10]})")
    elif time_col not in df.columns:
        raise ValueError(f"--time-col {time_col!r} is not a column of {path} (columns: {list(df.columns)[:10]})")
    return df, time_col


def parse_options(pairs: Sequence[str]) -> dict[str, Any]:
    """``["d_model=64", "rsa={\\"per_head_gate\\": true}", "lr_schedule=constant"]`` -> a dict; values
    are read as JSON when they parse (numbers, true/false/null, lists, objects), else kept as text."""
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise ValueError(f"bad --option {pair!r}: expected key=value, e.g. --option d_model=64")
        if key in options:
            raise ValueError(f"--option {key} is given twice")
        try:
            options[key] = json.loads(text)
        except json.JSONDecodeError:
            options[key] = text
    return options


def training_dir(output: Path) -> Path:
    """Where ``tsrec fit --output OUTPUT`` trains: ``.OUTPUT.training`` beside it."""
    return output.parent / f".{output.name}.training"


def cmd_fit(args: argparse.Namespace) -> int:
    from tsrec import Forecaster

    df, time_col = _read_csv(args.data, args.time_col)
    options = parse_options(args.option)
    if args.epochs is not None:
        options["max_epochs"] = args.epochs
    output = Path(args.output)
    # Training logs go beside the model folder while it trains and move into it once the model is
    # saved, so an existing model at --output is only replaced by a complete new one.
    logs = training_dir(output)
    trainer_kwargs = None if args.progress is None else {"enable_progress_bar": args.progress}
    forecaster = Forecaster(args.model, prediction_length=args.prediction_length, context_length=args.context_length,
                            freq=args.freq, output_dir=logs, trainer_kwargs=trainer_kwargs, **options)
    forecaster.fit(df, time_col=time_col, id_col=args.id_col, target_col=args.target_col, resume=args.resume,
                   past_covariates=args.past_covariates, future_covariates=args.future_covariates,
                   static_covariates=args.static_covariates)
    forecaster.save(output)
    if logs.exists():  # models that need no training write no logs
        os.replace(logs, output / "training")
    print(f"saved {forecaster!r} to {output} (training logs in {output / 'training'}); "
          f"trained {forecaster.training_summary}")
    if forecaster.model.rsa_layers():
        for line in gate_lines(forecaster.gates()):
            print(f"  {line}")
    return 0


def _load(model_dir: str) -> tuple[Any, dict[str, Any]]:
    """The saved Forecaster and the data columns it was fitted with (``time_col``, ``id_col``, ``target_col``)."""
    from tsrec import Forecaster

    forecaster = Forecaster.load(_existing(model_dir, "model directory"))
    unfinished = training_dir(Path(model_dir))
    if unfinished.exists():
        print(f"tsrec: warning: an interrupted 'tsrec fit' into {model_dir} left {unfinished}: this is the model "
              f"saved before it; finish that fit with 'tsrec fit ... --output {model_dir} --resume', or delete "
              f"{unfinished}", file=sys.stderr)
    return forecaster, forecaster.columns


def _read_like_fit(path: str, columns: dict[str, Any]) -> pd.DataFrame:
    """The CSV in the layout the model was fitted with: its time column, or a DatetimeIndex when
    the model was fitted (through the Python API) on a frame indexed by time."""
    import pandas as pd

    df, time_col = _read_csv(path, columns["time_col"])
    return df if columns["time_col"] is not None else df.set_index(pd.DatetimeIndex(df.pop(time_col)))


def cmd_predict(args: argparse.Namespace) -> int:
    forecaster, columns = _load(args.model_dir)
    future = None if args.future_covariates is None else _read_like_fit(args.future_covariates, columns)
    forecast = forecaster.predict(None if args.data is None else _read_like_fit(args.data, columns),
                                  future_covariates=future, quantiles=args.quantiles, num_samples=args.num_samples)
    forecast.to_csv(args.output, index=False)
    print(f"wrote {len(forecast)} forecast rows ({forecast['item_id'].nunique()} items x "
          f"{forecaster.prediction_length} steps) to {args.output}")
    return 0


def cmd_backtest(args: argparse.Namespace) -> int:
    from tsrec.evaluation import backtest

    forecaster, columns = _load(args.model_dir)
    df = _read_like_fit(args.data, columns)
    result = backtest(forecaster, df, n_windows=args.windows, stride=args.stride, baselines=args.baselines, **columns)
    result.errors.to_csv(args.output, index=False)
    print(f"wrote {len(result.errors)} error rows to {args.output}")
    print(result.summary.to_string(index=False))
    print(result.skill.to_string(index=False))
    if args.plot:
        from tsrec.plotting import plot_backtest

        plot_backtest(result).savefig(args.plot)
        print(f"wrote {args.plot}")
    return 0


def cmd_plot_gates(args: argparse.Namespace) -> int:
    from tsrec.plotting import plot_gates

    forecaster, _ = _load(args.model_dir)
    plot_gates(forecaster).savefig(args.output)
    print(f"wrote {args.output}")
    for line in gate_lines(forecaster.gates()):
        print(f"  {line}")
    return 0


# ---------------------------------------------------------------------------------------- parser
def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The ``tsrec`` argument parser with its subcommands."""
    parser = _Parser(prog="tsrec", description="Time-series forecasting with Self-Attention with Recurrence (RSA).")
    parser.add_argument("--debug", action="store_true", help="show full tracebacks instead of one-line errors")
    common = _Parser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    quick = commands.add_parser(
        "quickstart", parents=[common], help="train RSA-Informer on recurrent data and show what it learned",
        description="Train RSA-PatchTST on synthetic series with decay and daily cycles (or on a benchmark file), "
                    "forecast the held-out last steps, score it against naive forecasts, and write forecast.csv, "
                    "forecast.png, gates.csv, gates.png, gate_history.png, metrics.json and the model.")
    quick.add_argument("--dataset", default="synthetic",
                       help="'synthetic' (default) or a benchmark name such as ETTh1 (its file must be present)")
    quick.add_argument("--data-dir", help="directory with the benchmark files (default $TSREC_DATA_DIR, then the "
                                          "user cache)")
    quick.add_argument("--output", default="tsrec-quickstart", help="output directory (default ./tsrec-quickstart)")
    quick.add_argument("--epochs", type=_positive_int,
                       help="an epoch budget (default: the Forecaster's step budget scaled to the data; 1 with --tiny)")
    quick.add_argument("--steps", type=_positive_int, help="the most recent steps used (default 2688, 336 with --tiny)")
    quick.add_argument("--seed", type=int, default=0, help="seed of the data and the training (default 0)")
    quick.add_argument("--tiny", action="store_true", help="a tiny model and data set that run in seconds (tests)")
    quick.set_defaults(handler=cmd_quickstart)

    fit = commands.add_parser(
        "fit", parents=[common], help="train a model on a CSV file and save it",
        description="Train a registered model on a CSV file (wide: a time column and one column per variable; "
                    "long: with --id-col and --target-col) and save it to --output.")
    fit.add_argument("--data", required=True, help="CSV file")
    fit.add_argument("--time-col", help=f"timestamp column (default: the first of {', '.join(TIME_COLUMNS)})")
    fit.add_argument("--id-col", help="series id column: makes the frame long (one series per id)")
    fit.add_argument("--target-col", help="long frames: the value column; wide frames: the one column to forecast")
    fit.add_argument("--model", default="rsa_patchtst",
                     help="model name from tsrec.list_models() (default rsa_patchtst, as Forecaster's)")
    fit.add_argument("--prediction-length", type=_positive_int, required=True, help="steps to forecast")
    fit.add_argument("--context-length", type=_positive_int, help="past steps read (default 2 x prediction length)")
    fit.add_argument("--freq", help="pandas frequency, e.g. h or 15min (default: inferred)")
    fit.add_argument("--epochs", type=_positive_int,
                     help="an epoch budget (default: the Forecaster's step budget scaled to the data)")
    fit.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                     help="a model or training option, repeatable: d_model=64, learning_rate=1e-3, "
                          "rsa='{\"per_head_gate\": true}' (values are read as JSON when they parse)")
    for kind, example in (("past", "measured temperature"), ("future", "a temperature forecast, holidays"),
                          ("static", "one value per series, e.g. a region")):
        fit.add_argument(f"--{kind}-covariates", nargs="+", metavar="COL",
                         help=f"{kind} covariate columns ({example}): read, not forecast")
    fit.add_argument("--output", required=True, help="directory for the saved model and its training logs")
    fit.add_argument("--resume", action="store_true",
                     help="continue the interrupted 'tsrec fit' into the same --output with the same data and options "
                          "from its last finished epoch (it trains in .OUTPUT.training beside --output)")
    fit.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                     help="progress bar on stderr (default: only when stderr is a terminal)")
    fit.set_defaults(handler=cmd_fit)

    predict = commands.add_parser(
        "predict", parents=[common], help="forecast with a saved model",
        description="Forecast the prediction length after the data the model was fitted on, or after --data "
                    "(same columns as the fit data).")
    predict.add_argument("--model-dir", required=True, help="directory written by 'tsrec fit' or Forecaster.save")
    predict.add_argument("--data", help="CSV file to forecast from (default: the end of the fitted data)")
    predict.add_argument("--output", required=True, help="CSV file for the forecast (item_id, timestamp, mean)")
    predict.add_argument("--future-covariates", metavar="FILE",
                         help="CSV file with the future covariates at every forecast step of every series (same "
                              "time and id columns as the fit data); needed by a model fitted with them")
    predict.add_argument("--quantiles", type=float, nargs="+", metavar="Q",
                         help="add a column per quantile level, e.g. --quantiles 0.1 0.5 0.9 (a model fitted with "
                              "--option output=quantile, normal or studentt)")
    predict.add_argument("--num-samples", type=int, metavar="N",
                         help="add N sample paths, sample_0 ... (a model fitted with output=normal or studentt)")
    predict.set_defaults(handler=cmd_predict)

    back = commands.add_parser(
        "backtest", parents=[common], help="rolling-origin errors of a saved model on a CSV file",
        description="Forecast from rolling origins at the end of --data with a saved model and write the tidy "
                    "errors (item_id, origin, step, timestamp, y_true, y_pred, ...) to --output.")
    back.add_argument("--model-dir", required=True, help="directory written by 'tsrec fit' or Forecaster.save")
    back.add_argument("--data", required=True, help="CSV file with the same columns as the fit data")
    back.add_argument("--windows", type=_positive_int, help="windows per series (default 1)")
    back.add_argument("--stride", type=_positive_int, help="steps between origins (default: the prediction length)")
    back.add_argument("--output", required=True, help="CSV file for the errors")
    back.add_argument("--plot", help="also write MSE/MAE by horizon step to this PNG/SVG")
    back.add_argument("--baselines", nargs="+", choices=("naive", "seasonal_naive", "ets", "theta"),
                      help="the baselines the skill ratios compare with (default: all four with the stats extra, "
                           "else the naive ones; ets and theta fit once per window)")
    back.set_defaults(handler=cmd_backtest)

    gates = commands.add_parser(
        "plot-gates", parents=[common], help="plot the learned gates of a saved RSA model",
        description="Bar chart of the learned gates sigmoid(mu) per RSA layer, with the REM heads' half-lives "
                    "and periods.")
    gates.add_argument("--model-dir", required=True, help="directory written by 'tsrec fit' or Forecaster.save")
    gates.add_argument("--output", required=True, help="image file (.png, .svg, .pdf)")
    gates.set_defaults(handler=cmd_plot_gates)
    return parser


def _error(message: object) -> int:
    print(f"tsrec: error: {' '.join(str(message).split())}", file=sys.stderr)
    return EXIT_ERROR


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``tsrec`` command line on ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as err:
        return _error(err)
    except SystemExit as done:  # --help
        return int(done.code or 0)
    try:
        from tsrec.training import quiet_lightning

        with quiet_lightning():
            return args.handler(args)
    except (OSError, ValueError, TypeError) as err:
        if args.debug or not is_user_error(err):
            raise
        return _error(err)
    except KeyboardInterrupt:
        print("tsrec: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
