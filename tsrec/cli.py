"""The ``tsrec`` command line.

Commands (``tsrec <command> --help`` lists each one's options):

- ``quickstart``: fit the default model (``auto``) on synthetic recurrent data (or a benchmark file),
  forecast held-out steps with intervals, score it against naive forecasts, and beside it train
  RSA-PatchTST (:data:`GATES_MODEL`) on the same data to show its learned gates; writes the
  forecast, figures and metrics.
- ``fit``: train any registered model (default ``auto``) on a CSV file and save it; says what
  ``auto`` chose and why (its leaderboard).
- ``predict``: forecast the steps after the fitted data, or after a CSV file (``--levels``: intervals).
- ``backtest``: rolling-origin errors of a saved model on a CSV file.
- ``plot-gates``: the learned gates of a saved RSA model as a PNG/SVG.

User errors (a missing file, an unknown model, a bad option, a file that is not a CSV) end with one
line ``tsrec: error: ...`` on stderr and exit status 2; ``--debug`` shows the traceback instead.
Files named on the command line are checked (present, text in ``--encoding``, no line over
:data:`MAX_LINE_BYTES`) before torch loads. Ctrl-C (SIGINT) and SIGTERM end a command with one line
``tsrec: interrupted by ...`` (naming the checkpoint kept when training was under way) and exit
status 130 and 143, as a shell reports a process ended by those signals.
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import json
import math
import os
import signal
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:  # pandas loads when a command runs, so that --help and usage errors come at once
    import pandas as pd

from tsrec.config import DEFAULT_MODEL, TrainingConfig

__all__ = ["main", "build_parser"]

EXIT_ERROR = 2
EXIT_SIGINT = 128 + signal.SIGINT  # 130: the shell's status for a process ended by the signal
EXIT_SIGTERM = 128 + signal.SIGTERM  # 143
TIME_COLUMNS = ("date", "timestamp", "ds", "time", "datetime")
PACKAGE_DIR = Path(__file__).resolve().parent
#: The longest line a CSV file may have: a wide file of 100,000 series has lines of about 2 MB; a
#: longer line is a file without line breaks or separators, refused before it is parsed.
MAX_LINE_BYTES = 2**25
#: The longest cell of a time column taken for a timestamp (ISO 8601 with nanoseconds and a zone: 35).
MAX_TIMESTAMP_CHARS = 64
#: Characters of a cell or column name quoted in an error message at most.
MAX_QUOTED = 60


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


#: The RSA model the quickstart trains beside the default (``auto``, which may hold no RSA layer) for its gates.
GATES_MODEL = "rsa_patchtst"
#: The intervals of the quickstart's forecast (percent).
QUICKSTART_LEVELS = (80, 95)
# 1344 hourly steps (8 weeks) x 3 series: the default (auto) scores its statistical candidates and, as
# the data hold over 1,000 training windows, its networks within its CPU budget; RSA-PatchTST, trained
# beside it for its gates, runs 300 steps of 32 windows with the best validated weights kept (no refit
# on all the history). The whole command, the skill table's ETS and Theta included, stays under a
# minute of CPU (README.md says what was measured). --tiny runs in seconds.
QUICKSTART = QuickstartSettings(steps=24 * 7 * 8, context_length=96, prediction_length=24, epochs=None,
                                training=dict(refit_full=False, max_steps=300))
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


def gate_lines(table: pd.DataFrame) -> list[str]:
    """One line per RSA layer: its gate(s) and its REM heads' cycle periods and decay half-lives, in
    the data's own unit (:func:`tsrec.inspection.time_unit` of the table's ``attrs["freq"]``, as the figures),
    and how many dilated heads resolution made plain (the table's ``undilated``: a dilation longer
    than the lags the attention sees)."""
    from tsrec.inspection import time_unit

    unit, per_step = time_unit(table.attrs.get("freq"))
    lines = []
    for (attention, layer), rows in table.groupby(["attention", "layer"], sort=False):
        gates = rows["gate"].unique()
        gate = f"gate {gates[0]:.2f}" if len(gates) == 1 else "gates " + " ".join(f"{g:.2f}" for g in rows["gate"])
        heads = rows[rows["kind"] != "sin"]  # a sin head shares (gamma, theta) with its cos twin
        periods = [f"{steps * per_step:.1f}" for steps in heads["period_steps"] if math.isfinite(steps)]
        lives = [f"{steps * per_step:.1f}" if math.isfinite(steps) else "inf" for steps in heads["half_life_steps"]]
        plain = int(rows["undilated"].sum()) if "undilated" in rows else 0
        note = f" | {plain} dilated heads made plain (dilation longer than the lags seen)" if plain else ""
        lines.append(f"{attention} {layer}: {gate} | REM cycles {' '.join(periods) or '-'} | "
                     f"half-lives {' '.join(lives)} ({unit}){note}")
    return lines


#: How auto's validation errors are made comparable across series, for the metrics that do not
#: divide each series' errors by its scale (:func:`tsrec.validation.series_scales`).
SCALED_AS = {"smape": "errors relative to the forecast and the truth",
             "wql": "the total loss over the total |y|: large series weigh more"}


def auto_lines(forecaster: Any) -> list[str]:
    """What ``auto`` chose and why: its ensemble's members and weights, then its leaderboard (each
    candidate's validation error, weight and note: why it was skipped, stopped or failed)."""
    board = forecaster.leaderboard
    chosen = board[board["weight"] > 0]
    width = max(len("model"), *(len(name) for name in board["model"]))
    metric = board.attrs.get("eval_metric", "mase")
    rows = [f"{'model':<{width}}  {'val_' + metric:>9}  {'weight':>6}  note"]
    for row in board.itertuples():
        score = f"{row.val_score:.4g}" if math.isfinite(row.val_score) else "-"
        note = row.note if isinstance(row.note, str) else ""
        rows.append(f"{row.model:<{width}}  {score:>9}  {row.weight:>6.2f}  {note}".rstrip())
    scaled = SCALED_AS.get(metric, "each series' errors over its scale")
    return [f"auto chose {' + '.join(f'{row.model} x {row.weight:.2f}' for row in chosen.itertuples())}: the "
            f"weights that give the lowest validation {metric.upper()} (the last windows of every series, "
            f"{scaled}), shrunk toward the best few by the evidence; every candidate:",
            *(f"  {row}" for row in rows)]


def cmd_quickstart(args: argparse.Namespace) -> int:
    from tsrec.evaluation import backtest
    from tsrec.models.stats import statsforecast_installed
    from tsrec.forecaster import Forecaster
    from tsrec.plotting import plot_backtest, plot_forecast, plot_gate_history, plot_gates

    started, cpu = time.perf_counter(), time.process_time()
    settings = QUICKSTART_TINY if args.tiny else QUICKSTART
    epochs = args.epochs or settings.epochs
    output = Path(args.output)
    df, description = _quickstart_data(args.dataset, args.data_dir, args.steps or settings.steps, args.seed)
    horizon, context = settings.prediction_length, settings.context_length
    train, holdout = df.iloc[:-horizon], df.iloc[-horizon:]
    print(f"tsrec quickstart: {description}\n  fitting the default model (auto) and, for its gates, {GATES_MODEL} on "
          f"{len(train)} steps; the last {horizon} steps are held out; output in {output}", flush=True)
    forecaster = Forecaster(prediction_length=horizon, seed=args.seed).fit(train)
    forecast, scores = _holdout_scores(forecaster.predict(levels=QUICKSTART_LEVELS), holdout)
    result = backtest(forecaster, df, n_windows=1)  # the holdout window, against naive forecasts
    # --epochs replaces the RSA model's budget (its step cap too)
    training = settings.training if epochs is None else \
        {**{k: v for k, v in settings.training.items() if k != "max_steps"}, "max_epochs": epochs}
    rsa = Forecaster(GATES_MODEL, prediction_length=horizon, context_length=context, seed=args.seed,
                     output_dir=output / f"{GATES_MODEL}-training", **training, **settings.network).fit(train)
    rsa_scores = _holdout_scores(rsa.predict(), holdout)[1]
    gates = rsa.gates()

    output.mkdir(parents=True, exist_ok=True)
    forecast.to_csv(output / "forecast.csv", index=False)
    forecaster.leaderboard.to_csv(output / "leaderboard.csv", index=False)
    gates.to_csv(output / "gates.csv", index=False)
    plot_forecast(df, forecast, history_steps=2 * context).savefig(output / "forecast.png")
    plot_backtest(result).savefig(output / "skill.png")
    plot_gates(rsa).savefig(output / "gates.png")
    plot_gate_history(rsa).savefig(output / "gate_history.png")
    forecaster.save(output / "model")
    rsa.save(output / GATES_MODEL)
    skill = result.skill
    coverage = {f"{level}%": result.metric(f"interval_coverage_{level}", "fraction") for level in QUICKSTART_LEVELS}
    report = {
        "dataset": description,
        "model": forecaster.model_name,
        "ensemble": {row.model: row.weight for row in forecaster.leaderboard.itertuples() if row.weight > 0},
        "prediction_length": horizon,
        "holdout": f"the last {horizon} steps of every series, unseen in training",
        "units": "original",
        "scores": scores,
        "interval_coverage": coverage,
        "skill": {row.baseline: {"season": row.season, "mse_ratio": row.mse_ratio, "mae_ratio": row.mae_ratio}
                  for row in skill.itertuples()},
        "skill_units": "ratios of the model's error to the baseline's on the holdout, scaled units; below 1 "
                       "beats the baseline",
        "gates_model": {"model": GATES_MODEL, "context_length": context, "training": str(rsa.training_summary),
                        "scores": rsa_scores},
        "cpu_seconds": round(time.process_time() - cpu, 1),
    }
    (output / "metrics.json").write_text(json.dumps(report, indent=2))

    print(f"\ntsrec quickstart done in {time.perf_counter() - started:.0f} s ({report['cpu_seconds']:.0f} CPU-s); "
          f"files in {output}:")
    print("  " + " ".join(sorted(p.name + ("/" if p.is_dir() else "") for p in output.iterdir())))
    for line in auto_lines(forecaster):
        print(f"  {line}")
    print(f"  holdout ({horizon} steps, original units): auto MSE {scores['mse']:.4f} MAE {scores['mae']:.4f}; "
          f"{GATES_MODEL} MSE {rsa_scores['mse']:.4f} MAE {rsa_scores['mae']:.4f}")
    print("  intervals' coverage of the holdout: " + ", ".join(f"{k} {v:.0%}" for k, v in coverage.items()))
    print("  skill, auto's MSE over the baseline's on the holdout (below 1 beats it): " + " | ".join(
        f"{row.baseline.replace('_', ' ')}" + (f" ({row.season} steps)" if row.baseline != "naive" else "")
        + f" {row.mse_ratio:.2f}" for row in skill.itertuples()))
    if not statsforecast_installed():
        print("  (ETS and Theta, statsforecast's, are left out of auto's candidates and of the skill table: "
              "pip install \"tsrec[stats]\" adds them)")
    print(f"  {GATES_MODEL}'s learned gates sigmoid(mu), the share of the REM term (its decays and cycles) per layer:")
    for line in gate_lines(gates):
        print(f"    {line}")
    return 0


# ---------------------------------------------------------------------------------------- input files
def _cut(text: str, limit: int, *, quote: bool = False) -> str:
    """``text`` (``repr``'d with ``quote``), or its first ``limit`` characters and its length: a
    500 MB cell is never echoed."""
    shown = repr(text[:limit]) if quote else text[:limit]
    return shown if len(text) <= limit else f"{shown}... ({len(text):,} characters)"


def _quoted(value: object) -> str:
    """``value`` quoted for an error message, cut to :data:`MAX_QUOTED` characters."""
    return _cut(str(value), MAX_QUOTED, quote=True)


def _column_list(df: pd.DataFrame) -> str:
    """The first ten column names of ``df``, each cut, for an error message."""
    names = ", ".join(_quoted(c) for c in list(df.columns)[:10])
    return f"[{names}{', ...' if len(df.columns) > 10 else ''}]"


def _existing(path: str, what: str) -> Path:
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{what} {p} does not exist")
    return p


#: The files a command reads (its parser's default ``inputs``): dest -> what it names, whether it is a CSV file.
DATA_FILE = {"data": ("data file", True)}
MODEL_DIR = {"model_dir": ("model directory", False)}
SCAN_BLOCK = 2**22  # bytes check_text_file reads at a time


def check_inputs(args: argparse.Namespace) -> None:
    """Every file the command reads exists, and every CSV file is text in ``--encoding`` with no
    line over :data:`MAX_LINE_BYTES`: told before torch loads, which takes seconds (a minute under
    load), and before pandas spends time on a file it cannot parse."""
    for dest, (what, is_csv) in args.inputs.items():
        value = getattr(args, dest, None)
        if value is not None:
            path = _existing(value, what)
            if is_csv:
                check_text_file(path, args.encoding)


def check_text_file(path: Path, encoding: str) -> None:
    """A ``ValueError`` when ``path`` is not text in ``encoding`` (naming the line, the byte and the
    encoding it looks like) or has a line longer than :data:`MAX_LINE_BYTES` (a file without line
    breaks or separators). Reads the file once, a block at a time: about 0.4 s for 175 MB."""
    decoder = codecs.getincrementaldecoder(encoding)()
    line, line_bytes, head = 1, 0, b""  # the line a block starts in, its bytes before the block, its start
    size = min(SCAN_BLOCK, MAX_LINE_BYTES)  # so that only the lines running over a block's ends can be too long
    with path.open("rb") as file:
        while block := file.read(size):
            try:
                decoder.decode(block)
            except UnicodeDecodeError as err:
                raise ValueError(_not_encoded(path, encoding, block, err.start,
                                              line + block.count(b"\n", 0, err.start))) from None
            first, last = block.find(b"\n"), block.rfind(b"\n")
            head = head or block[:MAX_QUOTED]
            if line_bytes + (len(block) if first < 0 else first) > MAX_LINE_BYTES:
                raise ValueError(f"{path}: line {line} is longer than {MAX_LINE_BYTES // 2**20} MiB (it starts "
                                 f"{_quoted(head.decode(encoding, errors='replace'))}): not a CSV file with one "
                                 "row per line; pass a comma-separated file with a header row")
            if first < 0:
                line_bytes += len(block)
            else:
                line += block.count(b"\n")
                line_bytes, head = len(block) - last - 1, block[last + 1:last + 1 + MAX_QUOTED]
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            raise ValueError(f"{path} ends inside a character: it is cut short or not {encoding} text") from None


def _not_encoded(path: Path, encoding: str, block: bytes, at: int, line: int) -> str:
    """What a file that does not decode as ``encoding`` at ``block[at]`` (on ``line``) looks like instead."""
    name = codecs.lookup(encoding).name.upper()
    where = f"byte 0x{block[min(at, len(block) - 1)]:02x} on line {line}"
    if block.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        guess = "utf-16"
    elif b"\x00" in block:
        return f"{path} is not a text file ({where} is not {name}, and it holds NUL bytes); pass a CSV file"
    else:
        guess = "latin-1"
    return (f"{path} is not {name} ({where}; it looks like {guess}?): re-save it as UTF-8, or pass "
            f"--encoding {guess} (or the encoding it was written in, e.g. cp1252)")


def _read_csv(path: str, time_col: str | None, encoding: str = "utf-8") -> tuple[pd.DataFrame, str]:
    """The CSV as a frame with its time column parsed, and that column's name (``time_col``, else
    the first of TIME_COLUMNS present, in any case). The file is read as :func:`check_text_file` has
    checked it."""
    import pandas as pd

    try:
        df = pd.read_csv(_existing(path, "data file"), encoding=encoding)
    except UnicodeDecodeError as err:  # check_text_file tells where; this is for a file changed since
        raise ValueError(f"{path} is not {encoding} text ({err.reason}); re-save it as UTF-8 or pass --encoding") \
            from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as err:
        raise ValueError(f"{path} is not a readable CSV file ({type(err).__name__}: {_cut(str(err), 200)}); pass a "
                         "comma-separated file with a header row") from None
    if len(df.columns) == 1 and (separator := next((c for c in ";\t|" if c in str(df.columns[0])), None)):
        raise ValueError(f"{path} looks {separator!r}-separated (its one column is {_quoted(df.columns[0])}); tsrec "
                         "reads comma-separated CSV: save it with commas, e.g. df.to_csv(path, index=False)")
    if time_col is None:
        named = {str(c).strip().lower(): c for c in reversed(df.columns)}  # the first column of each name
        time_col = next((named[c] for c in TIME_COLUMNS if c in named), None)  # 'Date' or 'DATE' too
        if time_col is None:
            raise ValueError(f"{path} has no time column named one of {TIME_COLUMNS}; pass --time-col "
                             f"(columns: {_column_list(df)})")
    elif time_col not in df.columns:
        raise ValueError(f"--time-col {_quoted(time_col)} is not a column of {path} (columns: {_column_list(df)})")
    df[time_col] = _parse_times(df[time_col], f"{path}: time column {_quoted(time_col)}")
    return df, time_col


def _parse_times(column: pd.Series, where: str) -> pd.Series:
    """A text time column as datetimes, in one format read off its first value, so that a bad cell
    fails the file in seconds at any size (pandas would spend minutes guessing at a 500 MB cell).
    Anything else (numbers, no value) is returned as is, for the frame reader to judge."""
    import pandas as pd
    from pandas.tseries.api import guess_datetime_format

    start = column.first_valid_index()
    if start is None or not isinstance(column[start], str):
        return column
    first = column[start]
    fmt = guess_datetime_format(first) if len(first) <= MAX_TIMESTAMP_CHARS else None
    if fmt is None:  # no single format: parsed cell by cell, each of bounded length
        long = column.str.len().to_numpy() > MAX_TIMESTAMP_CHARS
        if long.any():
            row = int(long.argmax())
            raise ValueError(f"{where}, row {row + 1}, holds {_quoted(column.iloc[row])}, not a timestamp; fix or "
                             "drop that row")
    try:
        return pd.to_datetime(column, format=fmt)
    except (ValueError, TypeError, OverflowError) as err:
        parsed = pd.to_datetime(column, format=fmt, errors="coerce")
        bad = (parsed.isna() & column.notna()).to_numpy()
        if not bad.any():
            raise ValueError(f"{where} cannot be parsed as datetimes ({_cut(str(err), 200)})") from None
        row = int(bad.argmax())
        like = f"like {first!r} ({fmt})" if fmt else "pandas can parse"
        raise ValueError(f"{where}, row {row + 1}, holds {_quoted(column.iloc[row])}, not a timestamp {like}; fix or "
                         "drop that row") from None


# ---------------------------------------------------------------------------------------- fit / predict
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
    df, time_col = _read_csv(args.data, args.time_col, args.encoding)
    from tsrec import Forecaster

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
    print(f"saved {forecaster!r} to {output}")
    for line in fit_lines(forecaster, output / "training"):
        print(f"  {line}")
    return 0


def fit_lines(forecaster: Any, logs: Path) -> list[str]:
    """What a fit did, for ``tsrec fit``'s summary: the column convention the data were read in (if
    any), what ``auto`` chose and why (:func:`auto_lines`) or what a network's training ran, where
    its training logs are (when there are any), and an RSA model's learned gates."""
    from tsrec.models.ensemble import AUTO

    note = forecaster.fitted.schema.note
    lines = [] if note is None else [note]
    if forecaster.model_name == AUTO:
        lines += auto_lines(forecaster)
    elif forecaster.trainable:
        lines.append(f"trained {forecaster.training_summary}")
    elif type(forecaster.model).fits_windows:
        lines.append(f"{forecaster.model_name} fitted at once on every window of the history: nothing to train")
    else:
        lines.append(f"{forecaster.model_name} fits each series' history when it forecasts: nothing to train")
    if logs.exists():
        lines.append(f"training logs in {logs}")
    if forecaster.model.rsa_layers():
        lines += gate_lines(forecaster.gates())
    return lines


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


def _read_like_fit(path: str, columns: dict[str, Any], encoding: str) -> pd.DataFrame:
    """The CSV in the layout the model was fitted with: its time column, or a DatetimeIndex when
    the model was fitted (through the Python API) on a frame indexed by time."""
    import pandas as pd

    df, time_col = _read_csv(path, columns["time_col"], encoding)
    return df if columns["time_col"] is not None else df.set_index(pd.DatetimeIndex(df.pop(time_col)))


def cmd_predict(args: argparse.Namespace) -> int:
    forecaster, columns = _load(args.model_dir)
    future = None if args.future_covariates is None else _read_like_fit(args.future_covariates, columns, args.encoding)
    forecast = forecaster.predict(None if args.data is None else _read_like_fit(args.data, columns, args.encoding),
                                  future_covariates=future, quantiles=args.quantiles, num_samples=args.num_samples,
                                  levels=args.levels)
    forecast.to_csv(args.output, index=False)
    bands = "" if args.levels is None else \
        f" with the {' and '.join(f'{level:g}%' for level in args.levels)} intervals ({forecast.attrs['intervals']})"
    print(f"wrote {len(forecast)} forecast rows ({forecast['item_id'].nunique()} items x "
          f"{forecaster.prediction_length} steps){bands} to {args.output}")
    return 0


def cmd_backtest(args: argparse.Namespace) -> int:
    from tsrec.evaluation import backtest

    forecaster, columns = _load(args.model_dir)
    df = _read_like_fit(args.data, columns, args.encoding)
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


def _encoding(text: str) -> str:
    try:
        codecs.lookup(text)
    except LookupError:
        raise argparse.ArgumentTypeError(f"unknown encoding {text!r}; e.g. utf-8, latin-1, cp1252") from None
    return text


def _image_file(text: str) -> str:
    """An image file name with an extension matplotlib writes (checked before any work is done)."""
    from matplotlib.backend_bases import FigureCanvasBase

    formats = FigureCanvasBase.get_supported_filetypes()
    if Path(text).suffix.lower().removeprefix(".") not in formats:
        raise argparse.ArgumentTypeError(f"{text!r} is not an image file name; end it with one of "
                                         f"{', '.join('.' + f for f in sorted(formats))}")
    return text


def _budget(epochs: int | None) -> str:
    """The training budget of ``--epochs`` left at ``epochs``, for the help texts (None: the
    Forecaster's, read off :class:`~tsrec.config.TrainingConfig` rather than copied)."""
    epochs = TrainingConfig().max_epochs if epochs is None else epochs
    return "the Forecaster's step budget scaled to the data" if epochs is None else \
        f"{epochs} epoch{'' if epochs == 1 else 's'}"


def build_parser() -> argparse.ArgumentParser:
    """The ``tsrec`` argument parser with its subcommands."""
    parser = _Parser(prog="tsrec", description="Time-series forecasting with Self-Attention with Recurrence (RSA).")
    parser.add_argument("--debug", action="store_true", help="show full tracebacks instead of one-line errors")
    common = _Parser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    csv_files = _Parser(add_help=False)  # the commands that read CSV files
    csv_files.add_argument("--encoding", type=_encoding, default="utf-8",
                           help="text encoding of the CSV files (default utf-8), e.g. latin-1 or cp1252")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    quick = commands.add_parser(
        "quickstart", parents=[common],
        help=f"fit the default model on recurrent data, with {GATES_MODEL}'s learned gates beside it",
        description="Fit the default model (auto) on synthetic series with decay and daily cycles (or on a benchmark "
                    "file), forecast the held-out last steps with 80 and 95% intervals, score it against naive "
                    f"forecasts, and train {GATES_MODEL} (RSA in PatchTST) on the same data to show its learned gates; "
                    "writes forecast.csv, forecast.png, skill.png, leaderboard.csv, gates.csv, gates.png, "
                    f"gate_history.png, metrics.json and the two models (model/, {GATES_MODEL}/).")
    quick.add_argument("--dataset", default="synthetic",
                       help="'synthetic' (default) or a benchmark name such as ETTh1 (its file must be present)")
    quick.add_argument("--data-dir", help="directory with the benchmark files (default $TSREC_DATA_DIR, then the "
                                          "user cache)")
    quick.add_argument("--output", default="tsrec-quickstart", help="output directory (default ./tsrec-quickstart)")
    quick.add_argument("--epochs", type=_positive_int,
                       help=f"{GATES_MODEL}'s epoch budget (default: {QUICKSTART.training['max_steps']:,} steps; "
                            f"{_budget(QUICKSTART_TINY.epochs)} with --tiny)")
    quick.add_argument("--steps", type=_positive_int,
                       help=f"the most recent steps used (default {QUICKSTART.steps}, {QUICKSTART_TINY.steps} with "
                            "--tiny)")
    quick.add_argument("--seed", type=int, default=0, help="seed of the data and the training (default 0)")
    quick.add_argument("--tiny", action="store_true", help="a tiny data set and RSA model that run in seconds (tests)")
    quick.set_defaults(handler=cmd_quickstart, inputs={})

    fit = commands.add_parser(
        "fit", parents=[common, csv_files], help="train a model on a CSV file and save it",
        description="Fit a registered model (default: auto, tsrec's default) on a CSV file (wide: a time column and "
                    "one column per variable; long: with --id-col and --target-col, or columns named unique_id, ds, y "
                    "or item_id, timestamp, target) and save it to --output; says what auto chose and why.")
    fit.add_argument("--data", required=True, help="CSV file")
    fit.add_argument("--time-col", help=f"timestamp column (default: the first of {', '.join(TIME_COLUMNS)}, in "
                                        "any case)")
    fit.add_argument("--id-col", help="series id column: makes the frame long (one series per id)")
    fit.add_argument("--target-col", help="long frames: the value column; wide frames: the one column to forecast")
    fit.add_argument("--model", default=DEFAULT_MODEL,
                     help=f"model name from tsrec.list_models() (default {DEFAULT_MODEL}, as Forecaster's)")
    fit.add_argument("--prediction-length", type=_positive_int, required=True, help="steps to forecast")
    fit.add_argument("--context-length", type=_positive_int, help="past steps read (default 2 x prediction length)")
    fit.add_argument("--freq", help="pandas frequency, e.g. h or 15min, or a session such as 'h 09:00-17:00 Mon-Fri' "
                     "(default: inferred, sessions too)")
    fit.add_argument("--epochs", type=_positive_int, help=f"an epoch budget (default: {_budget(None)})")
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
    fit.set_defaults(handler=cmd_fit, inputs=DATA_FILE)

    predict = commands.add_parser(
        "predict", parents=[common, csv_files], help="forecast with a saved model",
        description="Forecast the prediction length after the data the model was fitted on, or after --data "
                    "(same columns as the fit data).")
    predict.add_argument("--model-dir", required=True, help="directory written by 'tsrec fit' or Forecaster.save")
    predict.add_argument("--data", help="CSV file to forecast from (default: the end of the fitted data)")
    predict.add_argument("--output", required=True,
                         help="CSV file for the forecast (item_id, timestamp, mean, and the bands of --levels)")
    predict.add_argument("--future-covariates", metavar="FILE",
                         help="CSV file with the future covariates at every forecast step of every series (same "
                              "time and id columns as the fit data); needed by a model fitted with them")
    predict.add_argument("--levels", type=float, nargs="+", metavar="L",
                         help="add the bands of these intervals (percent), e.g. --levels 80 95: columns 0.025, 0.1, "
                              "0.9, 0.975 (the default model's conformal bands, calibrated at fit; any model fitted "
                              "with --option conformal_windows=K, or a probabilistic network's own)")
    predict.add_argument("--quantiles", type=float, nargs="+", metavar="Q",
                         help="add a column per quantile level, e.g. --quantiles 0.1 0.5 0.9: a probabilistic "
                              "network's own (fitted with --option output=quantile, normal or studentt), else the "
                              "ends of the conformal bands (0.1 and 0.9: the 80%% interval; 0.5: the forecast)")
    predict.add_argument("--num-samples", type=int, metavar="N",
                         help="add N sample paths, sample_0 ... (a model fitted with output=normal or studentt)")
    predict.set_defaults(handler=cmd_predict, inputs={
        **MODEL_DIR, **DATA_FILE, "future_covariates": ("future covariates file", True)})

    back = commands.add_parser(
        "backtest", parents=[common, csv_files], help="rolling-origin errors of a saved model on a CSV file",
        description="Forecast from rolling origins at the end of --data with a saved model and write the tidy "
                    "errors (item_id, origin, step, timestamp, y_true, y_pred, ...) to --output.")
    back.add_argument("--model-dir", required=True, help="directory written by 'tsrec fit' or Forecaster.save")
    back.add_argument("--data", required=True, help="CSV file with the same columns as the fit data")
    back.add_argument("--windows", type=_positive_int, help="windows per series (default 1)")
    back.add_argument("--stride", type=_positive_int, help="steps between origins (default: the prediction length)")
    back.add_argument("--output", required=True, help="CSV file for the errors")
    back.add_argument("--plot", type=_image_file, help="also write MSE/MAE by horizon step to this PNG/SVG")
    back.add_argument("--baselines", nargs="+", choices=("naive", "seasonal_naive", "ets", "theta"),
                      help="the baselines the skill ratios compare with (default: all four with the stats extra, "
                           "else the naive ones; ets and theta are fitted once per series and carried forward "
                           "over the origins)")
    back.set_defaults(handler=cmd_backtest, inputs={**MODEL_DIR, **DATA_FILE})

    gates = commands.add_parser(
        "plot-gates", parents=[common], help="plot the learned gates of a saved RSA model",
        description="Bar chart of the learned gates sigmoid(mu) per RSA layer, with the REM heads' half-lives "
                    "and periods.")
    gates.add_argument("--model-dir", required=True, help="directory written by 'tsrec fit' or Forecaster.save")
    gates.add_argument("--output", required=True, type=_image_file, help="image file (.png, .svg, .pdf)")
    gates.set_defaults(handler=cmd_plot_gates, inputs=MODEL_DIR)
    return parser


def _error(message: object) -> int:
    print(f"tsrec: error: {' '.join(_cut(str(message), 2000).split())}", file=sys.stderr)
    return EXIT_ERROR


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised by the handler :func:`main` installs. Like Ctrl-C it stops whatever runs,
    training included (Lightning's own SIGTERM handler has flagged it by then, so training reports
    SIGTERM), and the command ends with status 143."""


def _raise_terminated(signum: int, frame: Any) -> NoReturn:
    raise Terminated


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    """SIGTERM raises :class:`Terminated` for the duration (from the main thread only, where Python
    runs signal handlers); the previous handler is restored after."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)


@contextlib.contextmanager
def _log_lines(debug: bool) -> Iterator[None]:
    """The warnings tsrec logs (what a training stopped by a signal kept) as ``tsrec: ...`` lines on
    stderr, and the Python warnings it gives (a series auto does not validate, intervals that miss)
    as ``tsrec: warning: ...`` lines, not Python's file, line and source; ``debug``: Python's own."""
    import logging
    import warnings

    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter("tsrec: %(message)s"))
    logger = logging.getLogger("tsrec")
    logger.addHandler(handler)
    shown = warnings.showwarning
    if not debug:
        warnings.showwarning = _warning_line
    try:
        yield
    finally:
        logger.removeHandler(handler)
        warnings.showwarning = shown


def _warning_line(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: Any = None, line: str | None = None) -> None:
    """One warning as one ``tsrec: warning: ...`` line on stderr (:func:`warnings.showwarning`'s signature)."""
    print(f"tsrec: warning: {' '.join(str(message).split())}", file=sys.stderr)


def _interrupted(err: KeyboardInterrupt) -> int:
    """The exit status of a command stopped by Ctrl-C or SIGTERM, after its one line on stderr.
    Training logged its line already (what it kept) and raised with it as the message."""
    terminated = isinstance(err, (Terminated, SystemExit))  # SystemExit: tsrec.training.TrainingTerminated
    if not err.args:
        print(f"tsrec: interrupted by {'SIGTERM' if terminated else 'Ctrl-C (SIGINT)'}", file=sys.stderr)
    return EXIT_SIGTERM if terminated else EXIT_SIGINT


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``tsrec`` command line on ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as err:
        return _error(err)
    except SystemExit as done:  # --help
        return int(done.code or 0)
    with _sigterm_raises(), _log_lines(args.debug):
        try:
            check_inputs(args)
            return args.handler(args)  # torch and Lightning load in there, quietened where they train and predict
        except (OSError, ValueError, TypeError) as err:
            if args.debug or not is_user_error(err):
                raise
            return _error(err)
        except KeyboardInterrupt as err:
            return _interrupted(err)


if __name__ == "__main__":
    sys.exit(main())
