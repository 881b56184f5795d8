"""The ``tsrec`` command line: help, the quickstart end to end, fit/predict/backtest/plot-gates on
CSV files, and one-line errors (exit status 2, no traceback) for bad arguments and files."""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tsrec import Forecaster, cli
from tsrec.cli import GATES_MODEL, main, parse_options
from tsrec.config import DEFAULT_MODEL, TrainingConfig
from tests.shared_data import SHARED_DATASETS

COMMANDS = ["quickstart", "fit", "predict", "backtest", "plot-gates"]
TINY = ["--option", "d_model=16", "--option", "n_heads=8", "--option", "d_ff=16", "--option", "e_layers=1",
        "--option", "batch_size=64"]


@pytest.fixture(scope="module")
def long_csv(tmp_path_factory):
    """Three hourly series in a long CSV: id, ds, y (200 steps each)."""
    rng = np.random.default_rng(0)
    t = np.arange(200)
    frame = pd.concat([pd.DataFrame({"id": item, "ds": pd.date_range("2024-01-01", periods=200, freq="h"),
                                     "y": 5 * k + np.sin(2 * np.pi * t / 24) + 0.1 * rng.standard_normal(200)})
                       for k, item in enumerate("abc")])
    path = tmp_path_factory.mktemp("data") / "long.csv"
    frame.to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def fitted_dir(long_csv, tmp_path_factory):
    out = tmp_path_factory.mktemp("fit") / "model"
    assert main(["fit", "--data", str(long_csv), "--id-col", "id", "--time-col", "ds", "--target-col", "y",
                 "--model", "rsa_informer", "--prediction-length", "6", "--context-length", "24", "--epochs", "1",
                 *TINY, "--output", str(out)]) == 0
    return out


def run_error(capsys, argv):
    code = main(argv)
    err = capsys.readouterr().err
    return code, err


@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_help_for_every_command(command, capsys):
    assert main([command, "--help"] if command else ["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: tsrec {command}".rstrip())
    if not command:
        assert all(name in out for name in COMMANDS)


def test_quickstart_tiny_writes_every_file(tmp_path, capsys):
    out = tmp_path / "qs"
    assert main(["quickstart", "--tiny", "--output", str(out)]) == 0
    for name in ("forecast.csv", "forecast.png", "skill.png", "leaderboard.csv", "gates.csv", "gates.png",
                 "gate_history.png", "metrics.json"):
        assert (out / name).stat().st_size > 0, name
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["model"] == DEFAULT_MODEL == "auto" and metrics["gates_model"]["model"] == GATES_MODEL
    assert metrics["units"] == "original" and metrics["prediction_length"] == 24
    assert set(metrics["scores"]) == {"mse", "mae"} and all(np.isfinite(list(metrics["scores"].values())))
    assert metrics["skill"]["naive"]["mse_ratio"] > 0 and metrics["skill"]["seasonal_naive"]["season"] == 24
    assert set(metrics["interval_coverage"]) == {"80%", "95%"}
    assert sum(metrics["ensemble"].values()) == pytest.approx(1.0)
    forecast = pd.read_csv(out / "forecast.csv", parse_dates=["timestamp"])
    assert list(forecast.columns) == ["item_id", "timestamp", "mean", "0.025", "0.1", "0.9", "0.975", "y_true"]
    assert len(forecast) == 3 * 24 and forecast["y_true"].notna().all()
    assert (forecast["0.025"] < forecast["0.1"]).all() and (forecast["0.9"] < forecast["0.975"]).all()
    assert metrics["scores"]["mse"] == pytest.approx(np.mean((forecast["mean"] - forecast["y_true"]) ** 2))
    inside = (forecast["0.1"] <= forecast["y_true"]) & (forecast["y_true"] <= forecast["0.9"])
    assert metrics["interval_coverage"]["80%"] == pytest.approx(inside.mean())
    assert len(pd.read_csv(out / "gates.csv")) == 1 * 4  # rsa_patchtst (--tiny: 1 RSA layer) x 4 heads
    default = Forecaster.load(out / "model")
    assert default.model_name == "auto"
    np.testing.assert_allclose(default.predict()["mean"], forecast["mean"], rtol=1e-5)
    assert Forecaster.load(out / GATES_MODEL).model_name == GATES_MODEL
    summary = capsys.readouterr().out
    assert "auto chose" in summary and "seasonal naive (24 steps)" in summary
    assert "encoder self 0: gate" in summary and "(hours)" in summary
    lines = summary.splitlines()
    listed = lines[next(i for i, line in enumerate(lines) if line.endswith(f"files in {out}:")) + 1].split()
    assert "leaderboard.csv" in listed and all((out / name.rstrip("/")).exists() for name in listed)


@pytest.mark.slow  # 7 s; test_quickstart_tiny_writes_every_file runs the quickstart in the default run
@pytest.mark.shared_datasets("ETTh1.csv")
def test_quickstart_on_a_benchmark_file(tmp_path):
    out = tmp_path / "qs"
    assert main(["quickstart", "--tiny", "--dataset", "etth1", "--data-dir", str(SHARED_DATASETS),
                 "--output", str(out)]) == 0
    assert json.loads((out / "metrics.json").read_text())["dataset"].startswith("ETTh1")
    assert set(pd.read_csv(out / "forecast.csv")["item_id"]) == {"HUFL", "HULL", "MUFL", "MULL", "LUFL", "LULL", "OT"}


def test_fit_predict_backtest_plot_gates_on_a_long_csv(fitted_dir, long_csv, tmp_path):
    forecast_csv = tmp_path / "forecast.csv"
    assert main(["predict", "--model-dir", str(fitted_dir), "--output", str(forecast_csv)]) == 0
    forecast = pd.read_csv(forecast_csv, parse_dates=["timestamp"])
    assert len(forecast) == 3 * 6 and forecast["timestamp"].min() == pd.Timestamp("2024-01-09 08:00")
    # a newer file: the forecast starts after its end
    newer = pd.read_csv(long_csv, parse_dates=["ds"]).assign(ds=lambda d: d["ds"] + pd.Timedelta(days=10))
    newer.to_csv(tmp_path / "newer.csv", index=False)
    assert main(["predict", "--model-dir", str(fitted_dir), "--data", str(tmp_path / "newer.csv"),
                 "--output", str(forecast_csv)]) == 0
    assert pd.read_csv(forecast_csv, parse_dates=["timestamp"])["timestamp"].min() == pd.Timestamp("2024-01-19 08:00")

    errors_csv = tmp_path / "errors.csv"
    assert main(["backtest", "--model-dir", str(fitted_dir), "--data", str(long_csv), "--windows", "2",
                 "--output", str(errors_csv), "--plot", str(tmp_path / "backtest.png")]) == 0
    errors = pd.read_csv(errors_csv)
    assert {"item_id", "origin", "step", "timestamp", "y_true", "y_pred"} <= set(errors.columns)
    assert len(errors) == 3 * 2 * 6 and sorted(errors["step"].unique()) == list(range(1, 7))
    assert (tmp_path / "backtest.png").stat().st_size > 0

    assert main(["plot-gates", "--model-dir", str(fitted_dir), "--output", str(tmp_path / "gates.svg")]) == 0
    assert b"<svg" in (tmp_path / "gates.svg").read_bytes()[:1000]
    assert list((fitted_dir / "training").glob("logs/version_*/metrics.csv"))  # training logs beside the model


@pytest.fixture(scope="module")
def nixtla_csv(tmp_path_factory):
    """Three hourly series named as Nixtla names them: unique_id, ds, y (200 steps each)."""
    rng = np.random.default_rng(1)
    t = np.arange(200)
    frame = pd.concat([pd.DataFrame({"unique_id": item, "ds": pd.date_range("2024-01-01", periods=200, freq="h"),
                                     "y": 5 * k + np.sin(2 * np.pi * t / 24) + 0.1 * rng.standard_normal(200)})
                       for k, item in enumerate("abc")])
    path = tmp_path_factory.mktemp("data") / "nixtla.csv"
    frame.to_csv(path, index=False)
    return path


def test_fit_says_what_auto_chose_and_predict_writes_the_bands_of_levels(nixtla_csv, tmp_path, capsys):
    out = tmp_path / "model"
    assert main(["fit", "--data", str(nixtla_csv), "--prediction-length", "6", "--output", str(out)]) == 0
    summary = capsys.readouterr().out
    board = Forecaster.load(out).leaderboard
    assert "Forecaster('auto'" in summary
    assert "read as a long frame in Nixtla's column names: id_col='unique_id', time_col='ds', target_col='y'" in summary
    chosen = board[board.weight > 0]
    assert "auto chose " + " + ".join(f"{m} x {w:.2f}" for m, w in zip(chosen.model, chosen.weight)) in summary
    for row in board.itertuples():  # every candidate, with its weight (a saved leaderboard keeps no notes)
        assert any(line.split()[:1] == [row.model] and f"{row.weight:.2f}" in line for line in summary.splitlines())
    assert "dlinear" in summary and "skipped: " in summary  # too few windows for the networks, and said why
    assert "epochs" not in summary and "training logs" not in summary  # auto's statistical members train nothing
    assert not (out / "training").exists()
    forecast_csv = tmp_path / "forecast.csv"
    assert main(["predict", "--model-dir", str(out), "--levels", "80", "95", "--output", str(forecast_csv)]) == 0
    assert "with the 80% and 95% intervals (conformal)" in capsys.readouterr().out
    forecast = pd.read_csv(forecast_csv)
    assert list(forecast.columns) == ["item_id", "timestamp", "mean", "0.025", "0.1", "0.9", "0.975"]
    expected = Forecaster.load(out).predict(levels=[80, 95])
    np.testing.assert_allclose(forecast[["0.025", "0.1", "0.9", "0.975"]], expected[["0.025", "0.1", "0.9", "0.975"]])
    assert main(["predict", "--model-dir", str(out), "--quantiles", "0.1", "0.5", "0.9", "--output",
                 str(forecast_csv)]) == 0  # the default's quantiles: its bands' ends, and the forecast
    quantiles = pd.read_csv(forecast_csv)
    assert list(quantiles.columns) == ["item_id", "timestamp", "mean", "0.1", "0.5", "0.9"]
    np.testing.assert_allclose(quantiles[["0.1", "0.9"]], forecast[["0.1", "0.9"]])
    np.testing.assert_allclose(quantiles["0.5"], quantiles["mean"])


def test_plot_gates_of_a_quarterly_rsa_model_tells_quarters(tmp_path, capsys):
    t = np.arange(80)
    frame = pd.DataFrame({"date": pd.date_range("1990-01-01", periods=80, freq="QS"),
                          "gdp": 100 + t + 3 * np.sin(2 * np.pi * t / 4)})
    frame.to_csv(tmp_path / "quarterly.csv", index=False)
    model = tmp_path / "model"
    assert main(["fit", "--data", str(tmp_path / "quarterly.csv"), "--model", "rsa_patchtst", "--prediction-length",
                 "4", "--epochs", "1", "--output", str(model)]) == 0
    capsys.readouterr()
    assert main(["plot-gates", "--model-dir", str(model), "--output", str(tmp_path / "gates.png")]) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "gates.png").stat().st_size > 0 and "(quarters)" in out and "encoder self 0: gate" in out


def test_fit_a_wide_csv_with_one_target_column(tmp_path):
    index = pd.date_range("2024-01-01", periods=150, freq="h")
    frame = pd.DataFrame({"date": index, "load": np.sin(np.arange(150) / 4), "temp": np.cos(np.arange(150) / 4)})
    frame.to_csv(tmp_path / "wide.csv", index=False)
    assert main(["fit", "--data", str(tmp_path / "wide.csv"), "--target-col", "load", "--model", "dlinear",
                 "--prediction-length", "8", "--epochs", "1", "--output", str(tmp_path / "model")]) == 0
    assert main(["predict", "--model-dir", str(tmp_path / "model"), "--data", str(tmp_path / "wide.csv"),
                 "--output", str(tmp_path / "fc.csv")]) == 0  # `date` found, `temp` ignored
    assert set(pd.read_csv(tmp_path / "fc.csv")["item_id"]) == {"load"}


def test_an_interrupted_refit_keeps_the_previous_model(tmp_path, monkeypatch, capsys):
    index = pd.date_range("2024-01-01", periods=150, freq="h")
    pd.DataFrame({"date": index, "load": np.sin(np.arange(150) / 4)}).to_csv(tmp_path / "wide.csv", index=False)
    fit = ["fit", "--data", str(tmp_path / "wide.csv"), "--model", "dlinear", "--prediction-length", "8",
           "--epochs", "1", "--output", str(tmp_path / "model")]
    assert main(fit) == 0
    before = Forecaster.load(tmp_path / "model").predict()

    def interrupted(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(Forecaster, "fit", interrupted)
    assert main(fit + ["--option", "seed=1"]) == 130
    monkeypatch.undo()
    pd.testing.assert_frame_equal(Forecaster.load(tmp_path / "model").predict(), before)
    (tmp_path / ".model.training").mkdir()  # what a killed fit leaves: predict still works, and says so
    capsys.readouterr()
    assert main(["predict", "--model-dir", str(tmp_path / "model"), "--output", str(tmp_path / "fc.csv")]) == 0
    assert "interrupted 'tsrec fit'" in capsys.readouterr().err
    (tmp_path / ".model.training").rmdir()
    assert main(fit + ["--option", "seed=1"]) == 0  # a complete refit replaces it, logs included
    assert list((tmp_path / "model" / "training").glob("logs/version_*/metrics.csv"))
    assert list((tmp_path / "model" / "training").glob("checkpoints/last.ckpt"))
    assert not (tmp_path / ".model.training").exists()


def test_fit_resume_without_an_interrupted_run_says_so(tmp_path, capsys):
    index = pd.date_range("2024-01-01", periods=150, freq="h")
    pd.DataFrame({"date": index, "load": np.sin(np.arange(150) / 4)}).to_csv(tmp_path / "wide.csv", index=False)
    assert main(["fit", "--data", str(tmp_path / "wide.csv"), "--model", "dlinear", "--prediction-length", "8",
                 "--epochs", "1", "--output", str(tmp_path / "model"), "--resume"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "resume" in err and "checkpoint" in err


def test_parse_options_reads_json_values():
    assert parse_options(["d_model=64", "learning_rate=1e-3", "lr_schedule=constant", "patience=null",
                          'rsa={"per_head_gate": true}']) == {
        "d_model": 64, "learning_rate": 1e-3, "lr_schedule": "constant", "patience": None,
        "rsa": {"per_head_gate": True}}


def bad_commands(csv: str, tmp: Path) -> dict[str, tuple[list[str], str]]:
    fit = ["fit", "--data", csv, "--id-col", "id", "--target-col", "y", "--prediction-length", "6",
           "--output", str(tmp / "out")]
    return {
        "missing data file": (["fit", "--data", str(tmp / "nope.csv"), "--model", "dlinear", "--prediction-length",
                               "6", "--output", str(tmp / "out")], "does not exist"),
        "unknown model": ([*fit, "--model", "gpt5"], "unknown model 'gpt5'"),
        "option without =": ([*fit, "--model", "dlinear", "--option", "d_model"], "expected key=value"),
        "unknown option": ([*fit, "--model", "dlinear", "--option", "colour=1"], "unknown option(s) ['colour'] for model 'dlinear'"),
        "bad option value": ([*fit, "--model", "dlinear", "--option", "max_epochs=0"], "max_epochs"),
        "missing time column": ([*fit[:-2], "--model", "dlinear", "--time-col", "when", "--output", str(tmp / "o")],
                                "--time-col 'when'"),
        "missing required argument": (["fit", "--data", csv], "required"),
        "not a positive int": ([*fit, "--model", "dlinear", "--prediction-length", "zero"], "positive integer"),
        "unknown command": (["frobnicate"], "invalid choice"),
        "missing model dir": (["predict", "--model-dir", str(tmp / "nope"), "--output", str(tmp / "f.csv")],
                              "does not exist"),
        "not a model dir": (["plot-gates", "--model-dir", str(tmp), "--output", str(tmp / "g.png")],
                            "not a saved tsrec Forecaster"),
        "unknown dataset": (["quickstart", "--tiny", "--dataset", "mnist", "--output", str(tmp / "q")],
                            "unknown dataset 'mnist'"),
        "semicolon-separated file": (["fit", "--data", str(tmp / "semi.csv"), "--prediction-length", "2",
                                      "--output", str(tmp / "o")], "semi.csv looks ';'-separated"),
        "unsupported image extension": (["plot-gates", "--model-dir", str(tmp), "--output", str(tmp / "g.xyz")],
                                        "'" + str(tmp / "g.xyz") + "' is not an image file name; end it with one of "),
        "unsupported plot extension": (["backtest", "--model-dir", str(tmp), "--data", csv, "--output",
                                        str(tmp / "e.csv"), "--plot", str(tmp / "b.txt")], ".png, .ps"),
        "unknown encoding": ([*fit, "--encoding", "klingon"], "unknown encoding 'klingon'"),
    }


@pytest.mark.parametrize("case", list(bad_commands("x.csv", Path("."))))
def test_errors_are_one_line_with_exit_status_2(case, long_csv, tmp_path, capsys):
    (tmp_path / "semi.csv").write_text("date;y\n2024-01-01;1\n2024-01-02;2\n")
    argv, message = bad_commands(str(long_csv), tmp_path)[case]
    code, err = run_error(capsys, argv)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("tsrec: error: ") and message in err, err
    assert "Traceback" not in err


def test_missing_benchmark_file_is_a_one_line_error(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("TSREC_DATA_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    code, err = run_error(capsys, ["quickstart", "--tiny", "--dataset", "ETTh1", "--data-dir", str(tmp_path),
                                   "--output", str(tmp_path / "q")])
    assert code == 2 and err.startswith("tsrec: error: ") and "ETTh1.csv" in err and err.count("\n") == 1


def _torch_shape_bug(*args, **kwargs):
    import torch

    return torch.zeros(2, 3) @ torch.zeros(2, 3)  # RuntimeError raised inside torch


def _numpy_value_bug(*args, **kwargs):
    return np.zeros(3).reshape(2)  # ValueError raised inside numpy, not by a tsrec check


@pytest.mark.parametrize("bug, kind", [(_torch_shape_bug, RuntimeError), (_numpy_value_bug, ValueError)],
                         ids=["torch shape error", "numpy ValueError"])
def test_a_bug_keeps_its_traceback(bug, kind, long_csv, tmp_path, monkeypatch):
    """Only user errors become one line; an error from inside torch or numpy is a bug to report."""
    monkeypatch.setattr(Forecaster, "fit", bug)
    with pytest.raises(kind):
        main(["fit", "--data", str(long_csv), "--id-col", "id", "--target-col", "y", "--model", "dlinear",
              "--prediction-length", "6", "--output", str(tmp_path / "out")])


@pytest.mark.parametrize("content", ["", "\x00\xff\xfe binary\n"], ids=["empty", "binary"])
def test_unreadable_csv_is_a_one_line_error_naming_the_file(content, tmp_path, capsys):
    path = tmp_path / "bad.csv"
    path.write_bytes(content.encode("latin-1"))
    code, err = run_error(capsys, ["fit", "--data", str(path), "--model", "dlinear", "--prediction-length", "6",
                                   "--output", str(tmp_path / "out")])
    assert code == 2 and err.count("\n") == 1 and str(path) in err, err


def test_debug_shows_the_exception(tmp_path):
    argv = ["fit", "--data", str(tmp_path / "nope.csv"), "--model", "dlinear", "--prediction-length", "6",
            "--output", str(tmp_path / "out")]
    with pytest.raises(FileNotFoundError):
        main(["--debug", *argv])
    with pytest.raises(FileNotFoundError):
        main([*argv, "--debug"])


def test_module_entry_point_exits_with_a_one_line_error(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "tsrec.cli", "predict", "--model-dir", str(tmp_path / "nope"),
                           "--output", str(tmp_path / "f.csv")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"tsrec: error: model directory {tmp_path / 'nope'} does not exist"]


def test_help_names_the_default_model_and_budget(capsys):
    helps = {}
    for command in ["", *COMMANDS]:
        main([command, "--help"] if command else ["--help"])
        helps[command] = " ".join(capsys.readouterr().out.split())
    assert not any("Informer" in text for text in helps.values())
    assert f"fit the default model on recurrent data, with {GATES_MODEL}'s learned gates" in helps[""]
    assert "Fit the default model (auto)" in helps["quickstart"] and f"train {GATES_MODEL} (RSA in PatchTST)" \
        in helps["quickstart"] and GATES_MODEL == "rsa_patchtst"
    assert f"(default {DEFAULT_MODEL}, as Forecaster's)" in helps["fit"]
    assert TrainingConfig().max_epochs is None  # the budget the help texts describe
    assert "--epochs EPOCHS an epoch budget (default: the Forecaster's step budget scaled to the data)" in helps["fit"]
    assert "rsa_patchtst's epoch budget (default: 300 steps; 1 epoch with --tiny)" in helps["quickstart"]
    assert "--levels L [L ...] add the bands of these intervals (percent)" in helps["predict"]


# ------------------------------------------------------------------------------------------ hostile files
def test_a_latin1_file_says_so_and_reads_with_encoding(tmp_path, capsys):
    path = tmp_path / "latin.csv"
    path.write_bytes("date,caf\u00e9\n2024-01-01 00:00,1\n2024-01-01 01:00,2\n".encode("latin-1"))
    code, err = run_error(capsys, ["fit", "--data", str(path), "--prediction-length", "2", "--output",
                                   str(tmp_path / "out")])
    assert code == 2 and err.count("\n") == 1
    assert f"{path} is not UTF-8 (byte 0xe9 on line 1; it looks like latin-1?): re-save it as UTF-8, or pass " \
           "--encoding latin-1" in err
    df, time_col = cli._read_csv(str(path), None, "latin-1")
    assert time_col == "date" and list(df.columns) == ["date", "caf\u00e9"]
    assert df["date"].dtype == "datetime64[ns]"


def test_the_time_column_is_found_in_any_case_and_its_absence_names_the_columns(tmp_path, capsys):
    """sktime's Airline.csv names it 'Date'; the first of the usual names wins, whatever its case."""
    path = tmp_path / "air.csv"
    path.write_text("Value,Date,TIME\n1,1949-01,1949-01\n2,1949-02,1949-02\n")
    df, time_col = cli._read_csv(str(path), None)
    assert time_col == "Date" and df["Date"].dtype == "datetime64[ns]" and df["TIME"].dtype == object
    path.write_text("Value,When\n1,1949-01\n")
    code, err = run_error(capsys, ["fit", "--data", str(path), "--prediction-length", "2", "--output",
                                   str(tmp_path / "out")])
    assert code == 2 and "has no time column named one of ('date', 'timestamp', 'ds', 'time', 'datetime'); pass " \
        "--time-col (columns: ['Value', 'When'])" in err


def test_a_line_longer_than_the_limit_fails_before_pandas_parses_the_file(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cli, "MAX_LINE_BYTES", 2**20)
    monkeypatch.setattr(pd, "read_csv", lambda *args, **kwargs: pytest.fail("the file was parsed"))
    path = tmp_path / "dump.csv"
    path.write_text("date,y\n2024-01-01 00:00,1\n" + "x" * 3 * 2**20 + "\n")
    code, err = run_error(capsys, ["fit", "--data", str(path), "--prediction-length", "2", "--output",
                                   str(tmp_path / "out")])
    assert code == 2 and err.count("\n") == 1 and len(err) < 400
    assert f"{path}: line 3 is longer than 1 MiB (it starts 'xxx" in err


@pytest.mark.parametrize("row", [1, 3])
def test_a_huge_time_cell_fails_in_seconds_without_being_echoed(row, tmp_path, capsys):
    rows = ["2024-01-01 00:00,1", "2024-01-01 01:00,2", "2024-01-01 02:00,3"]
    rows[row - 1] = "9" * 5_000_000 + ",0"  # pandas spent minutes guessing a format for such a first cell
    path = tmp_path / "huge.csv"
    path.write_text("date,y\n" + "\n".join(rows) + "\n")
    started = time.perf_counter()
    code, err = run_error(capsys, ["fit", "--data", str(path), "--prediction-length", "2", "--output",
                                   str(tmp_path / "out")])
    assert time.perf_counter() - started < 5
    assert code == 2 and err.count("\n") == 1 and len(err) < 400
    assert f"time column 'date', row {row}, holds '{'9' * 60}'... (5,000,000 characters), not a timestamp" in err


def test_a_bad_timestamp_names_its_row_and_the_format(tmp_path, capsys):
    path = tmp_path / "bad.csv"
    path.write_text("date,y\n2024-01-01 00:00,1\n2024-01-01 01:00,2\nyesterday,3\n")
    code, err = run_error(capsys, ["fit", "--data", str(path), "--prediction-length", "2", "--output",
                                   str(tmp_path / "out")])
    assert code == 2 and "time column 'date', row 3, holds 'yesterday', not a timestamp like '2024-01-01 00:00' " \
                          "(%Y-%m-%d %H:%M)" in err


# Runs the command, then prints which heavy libraries it imported.
IMPORTED = """
import sys
from tsrec.cli import main
code = main(sys.argv[1:])
print(sorted(m for m in ("torch", "lightning", "pandas") if m in sys.modules))
sys.exit(code)
"""


@pytest.mark.parametrize("case", ["missing file", "missing model", "latin-1 file"])
def test_file_errors_come_before_torch_is_imported(case, tmp_path):
    (tmp_path / "latin.csv").write_bytes("date,y\n2024-01-01,caf\u00e9\n".encode("latin-1"))
    argv = {"missing file": ["fit", "--data", str(tmp_path / "nope.csv"), "--prediction-length", "2",
                             "--output", str(tmp_path / "out")],
            "missing model": ["predict", "--model-dir", str(tmp_path / "nope"), "--output", str(tmp_path / "f.csv")],
            "latin-1 file": ["fit", "--data", str(tmp_path / "latin.csv"), "--prediction-length", "2",
                             "--output", str(tmp_path / "out")]}[case]
    proc = subprocess.run([sys.executable, "-c", IMPORTED, *argv], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and proc.stdout == "[]\n", proc.stderr
    assert proc.stderr.startswith("tsrec: error: ") and proc.stderr.count("\n") == 1


@pytest.mark.slow  # two auto fits in fresh processes, 22 s
def test_a_warning_is_one_line_naming_tsrec_and_python_s_own_with_debug(tmp_path):
    """auto's warning for a series it does not validate (a new store, 20 days beside 200, horizon 14)
    reads as the errors do, not as Python's file, line number and source line."""
    frame = pd.concat([pd.DataFrame({"unique_id": item, "ds": pd.date_range(end="2024-06-30", periods=n, freq="D"),
                                     "y": 10 + np.sin(np.arange(n))}) for item, n in (("a", 200), ("b", 200),
                                                                                      ("new", 20))])
    frame.to_csv(tmp_path / "stores.csv", index=False)
    argv = ["fit", "--data", str(tmp_path / "stores.csv"), "--prediction-length", "14", "--output",
            str(tmp_path / "out")]
    proc = subprocess.run([sys.executable, "-c", IMPORTED, *argv], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == ["tsrec: warning: auto: 1 series hold fewer than 140 steps (item 'new' (20 "
                                        "steps)), too few for 5 validation window(s) of prediction_length=14 and as "
                                        "long a history before them: they are not validated, and the ensemble chosen "
                                        "on the other 2 forecasts them"]
    debug = subprocess.run([sys.executable, "-c", IMPORTED, "--debug", *argv], capture_output=True, text=True,
                           timeout=300)
    assert "UserWarning: auto: 1 series hold fewer" in debug.stderr and "cli.py" in debug.stderr


@pytest.mark.slow  # 5-7 s: a fresh interpreter importing GluonTS and torch
def test_gluonts_json_warning_is_silenced(tmp_path):
    """GluonTS warns at import when orjson/ujson are missing; tsrec's GluonTS imports hide it."""
    code = ("import tsrec.interop.gluonts\n"
            "from tsrec.nn.outputs import DistributionOutput\n"
            "DistributionOutput('studentt')\n")
    proc = subprocess.run([sys.executable, "-W", "always", "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "json" not in proc.stderr, proc.stderr


# ------------------------------------------------------------------------------------------ the console script
ROOT = Path(__file__).resolve().parents[1]


def tsrec_script() -> str:
    """The ``tsrec`` console script installed with this Python (``pip install -e .``), as a user runs it."""
    beside = Path(sys.executable).with_name("tsrec")
    found = str(beside) if beside.is_file() else shutil.which("tsrec")
    assert found, "the tsrec console script is not installed: pip install -e ."
    return found


@pytest.mark.slow
def test_every_command_through_the_console_script(nixtla_csv, tmp_path):
    """quickstart, fit (the default), predict --levels, backtest --plot and plot-gates, each run as the
    ``tsrec`` script (this tree first on PYTHONPATH, so that the script runs the code under test)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}

    def tsrec(*argv: str) -> str:
        proc = subprocess.run([tsrec_script(), *argv], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc.stdout

    assert all(command in tsrec("--help") for command in COMMANDS)
    out = tsrec("quickstart", "--tiny", "--output", "qs")
    assert "auto chose" in out and (tmp_path / "qs" / "forecast.png").stat().st_size > 0
    out = tsrec("fit", "--data", str(nixtla_csv), "--prediction-length", "6", "--output", "model")
    assert "Forecaster('auto'" in out and "auto chose" in out and "Nixtla's column names" in out
    out = tsrec("predict", "--model-dir", "model", "--levels", "80", "95", "--output", "forecast.csv")
    assert "with the 80% and 95% intervals (conformal)" in out
    assert {"0.025", "0.975"} <= set(pd.read_csv(tmp_path / "forecast.csv").columns)
    out = tsrec("backtest", "--model-dir", "model", "--data", str(nixtla_csv), "--windows", "2", "--output",
                "errors.csv", "--plot", "backtest.png")
    assert "mse_ratio" in out and (tmp_path / "backtest.png").stat().st_size > 0
    out = tsrec("plot-gates", "--model-dir", f"qs/{GATES_MODEL}", "--output", "gates.png")
    assert "encoder self 0: gate" in out and (tmp_path / "gates.png").stat().st_size > 0
