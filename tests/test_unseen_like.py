"""The benchmark on public data of other frequencies (``benchmarks/unseen_like.py``): its windows,
z-scoring and ratio arithmetic on hand-made examples, the runner's ``--quick`` on a small synthetic
dataset (rows, table, resume, skips), and the real datasets' loaders (skipped where the package that
ships a dataset is not installed)."""

import csv
import importlib.util
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchmarks import unseen_like as ul

CONFIG = Path(ul.ROOT, "benchmarks/configs/unseen_like.toml")


def _frame(values: dict[str, list[float]], freq: str = "MS", start: str = "2000-01-01") -> pd.DataFrame:
    """A long frame with one series per key, all on one grid."""
    parts = [pd.DataFrame({ul.ID: name, ul.TIME: pd.date_range(start, periods=len(v), freq=freq),
                           ul.TARGET: np.asarray(v, dtype=np.float64)}) for name, v in values.items()]
    return pd.concat(parts, ignore_index=True)


# ------------------------------------------------------------------------------------------ windows
def test_windows_cover_the_last_fifth_anchored_at_the_end():
    windows = ul.rolling_windows(100, 7, 7, 0.2)  # last 20 steps: origins 86 and 93 (79 would start too early)
    assert windows.origins.tolist() == [86, 93] and windows.first == 86
    assert ul.rolling_windows(100, 7, 1, 0.2).origins.tolist() == list(range(80, 94))  # every origin in the 20


@pytest.mark.parametrize("length,horizon,stride", [(1461, 14, 14), (2284, 13, 13), (120, 12, 12), (203, 8, 8),
                                                   (203, 8, 3), (57, 5, 1), (50, 10, 4)])
def test_every_window_of_the_last_fifth_is_scored_once(length, horizon, stride):
    """Count check against a plain loop: every window of ``stride``-spaced origins counted back from
    the end that lies wholly in the last 20% is there once, and no other."""
    n_test = math.ceil(0.2 * length)
    expected, origin = [], length - horizon
    while origin >= length - n_test:
        expected.insert(0, origin)
        origin -= stride
    windows = ul.rolling_windows(length, horizon, stride, 0.2)
    assert windows.origins.tolist() == expected
    truth = _frame({"a": list(range(length)), "b": list(range(length))})
    table = ul.window_table(truth, windows)
    assert len(table) == 2 * len(expected) * horizon
    per_window = table.groupby([ul.ID, "origin"]).size()
    assert len(per_window) == 2 * len(expected) and set(per_window) == {horizon}
    assert not table.duplicated([ul.ID, ul.TIME, "origin"]).any()
    assert table[ul.TIME].max() == truth[ul.TIME].max()  # the last window ends at the series' end


def test_a_horizon_longer_than_the_test_part_is_refused():
    with pytest.raises(ValueError, match="shorter than the horizon"):
        ul.rolling_windows(40, 12, 12, 0.2)


def test_seasonal_naive_repeats_the_last_season_before_the_origin():
    inputs = _frame({"a": list(range(10))})
    windows = ul.Windows(np.array([6]), horizon=5, stride=5)
    assert ul.naive_forecasts(inputs, windows, 2)["y_pred"].tolist() == [4, 5, 4, 5, 4]
    assert ul.naive_forecasts(inputs, windows, 1)["y_pred"].tolist() == [5] * 5
    assert ul.naive_forecasts(inputs, windows, 4)["y_pred"].tolist() == [2, 3, 4, 5, 2]


def test_missing_inputs_are_carried_forward_and_missing_truths_not_scored():
    truth = _frame({"a": [1, np.nan, 3, np.nan, np.nan, 6]})
    assert ul.model_inputs(truth)[ul.TARGET].tolist() == [1, 1, 3, 3, 3, 6]
    with pytest.raises(ValueError, match=r"\['b'\] start with a missing value"):
        ul.model_inputs(_frame({"a": [1.0, 2.0], "b": [np.nan, 1.0]}))


# ------------------------------------------------------------------------------------------ scores
def test_zscoring_and_ratio_to_naive_by_hand():
    """Two series with training parts [0, 2] (mean 1, std 1) and [0, 10] (mean 5, std 5); one window
    of two steps each, one truth missing."""
    truth = _frame({"a": [0, 2, 4, 6], "b": [0, 10, 20, np.nan]})
    windows = ul.rolling_windows(4, 2, 2, 0.5)
    assert windows.origins.tolist() == [2]
    stats = ul.training_stats(truth, windows)
    assert stats.loc["a"].tolist() == [1.0, 1.0] and stats.loc["b"].tolist() == [5.0, 5.0]
    table = ul.window_table(truth, windows).assign(y_pred=[5.0, 5.0, 25.0, 99.0])
    naive = ul.naive_forecasts(ul.model_inputs(truth), windows, 1)["y_pred"].to_numpy()
    assert naive.tolist() == [2, 2, 10, 10]
    result = ul.score(table, naive, stats)
    # z-scored errors of the model: a (5-4)/1, (5-6)/1; b (25-20)/5 and a missing truth
    assert result["entries"] == 3 and result["windows"] == 2
    assert result["mse"] == pytest.approx((1 + 1 + 1) / 3) and result["mae"] == pytest.approx(1.0)
    # naive: a (2-4)/1, (2-6)/1; b (10-20)/5
    assert result["naive_mse"] == pytest.approx((4 + 16 + 4) / 3)
    assert result["mse_ratio_naive"] == pytest.approx(3 / 24)


def test_a_constant_training_part_cannot_be_zscored():
    with pytest.raises(ValueError, match=r"\['flat'\] are constant"):
        ul.training_stats(_frame({"flat": [3, 3, 3, 4, 5]}), ul.rolling_windows(5, 1, 1, 0.4))


def test_forecasts_of_other_windows_are_refused():
    truth = _frame({"a": list(range(20))})
    table = ul.window_table(truth, ul.rolling_windows(20, 2, 2, 0.2))
    shifted = table.assign(origin=table["origin"] + pd.offsets.MonthBegin(1), y_pred=0.0)
    with pytest.raises(RuntimeError, match="windows differ"):
        ul.align(table, shifted[[ul.ID, ul.TIME, "origin", "y_pred"]], "x")


def test_means_show_three_significant_digits():
    assert ul._mean_std([0.00325, 0.00335]) == "0.00330 ± 0.00007" and ul._mean_std([0.6661]) == "0.666"


def test_targets_against_the_baselines():
    rows = {"default": [{"mse": "0.9"}, {"mse": "1.0"}], "naive": [{"mse": "1.0"}],
            "seasonal_naive": [{"mse": "0.8"}], "auto_ets": [{"mse": "0.92"}], "auto_theta": [{"mse": "0.95"}]}
    t = ul.targets(rows)
    assert t["default"] == pytest.approx(0.95) and t["best_stat"] == "auto_ets"
    assert ul._verdict(t["default"], t["naive"]) == "yes (0.95x)"
    assert ul._verdict(t["default"], t["seasonal_naive"]) == "no (1.19x)"
    assert ul._verdict(t["default"], t["best_stat_mse"], ul.WITHIN_BEST_STAT) == "yes (1.03x)"
    assert ul._verdict(0.97, 0.92, ul.WITHIN_BEST_STAT) == "no (1.05x)"  # 1.054: more than 5% behind


# ------------------------------------------------------------------------------------------ runner
TOY_CONFIG = """
name = "toy"
output = "toy.csv"
test_fraction = 0.2
seeds = [0]
baselines = ["naive", "seasonal_naive"]
models = ["default", "no_such_model"]

[datasets.toy]
source = "synthetic (this test)"
package = "none"
freq = "MS"
series = 2
length = 80
horizon = 8
season = 12
"""


def _toy() -> pd.DataFrame:
    t = np.arange(80)
    return _frame({"x": 10 + np.sin(2 * np.pi * t / 12), "y": 0.1 * t + np.cos(2 * np.pi * t / 12)})


def test_quick_run_writes_rows_and_a_table_and_resumes(tmp_path, monkeypatch, one_thread):
    monkeypatch.setitem(ul.LOADERS, "toy", _toy)
    config = tmp_path / "toy.toml"
    config.write_text(TOY_CONFIG)
    out = tmp_path / "out"
    # a row already there is not run again (its made-up MSE stays)
    ul.append_row(out / "toy.csv", {**dict.fromkeys(ul.RESULT_COLUMNS, ""), "config": "toy-quick", "dataset": "toy",
                                    "model": "naive", "seed": "", "status": "ok", "n_series": "2", "windows": "4",
                                    "mse": "123.0", "mae": "1", "mse_ratio_naive": "1", "fit_seconds": "0",
                                    "freq": "MS", "horizon": "8", "stride": "8", "season": "12"})
    args = [str(config), "--quick", "--out-dir", str(out)]
    assert ul.main(args) == 0
    rows = list(csv.DictReader((out / "toy.csv").open()))
    assert [(r["model"], r["seed"], r["status"]) for r in rows] == [
        ("naive", "", "ok"), ("seasonal_naive", "", "ok"), ("default", "0", "ok"), ("no_such_model", "0", "skipped")]
    naive, seasonal, default, skipped = rows
    assert naive["mse"] == "123.0"
    for row in (seasonal, default):
        assert row["windows"] == "4"  # 2 series x 2 windows of 8 in the last 16 steps
        assert row["entries"] == "32" and float(row["mse"]) > 0 and float(row["mse_ratio_naive"]) > 0
        assert row["commit"] and row["machine"] and row["command"].startswith("python -m benchmarks.unseen_like")
    assert float(seasonal["mse_ratio_naive"]) < 1  # both series repeat a yearly cycle
    assert default["note"].startswith("best step ") and naive["note"] == ""  # what the fit did
    assert "unknown model" in skipped["note"]
    table = (out / "toy.md").read_text()
    assert "## toy (MS, 2 series, H = 8, stride 8, season 12, 4 windows)" in table
    assert "| naive | - | 123.000 |" in table and "| default | 0 |" in table
    assert "- no_such_model: not run (tsrec does not accept model 'no_such_model' yet" in table
    assert "| toy | " in table.split("## The default's targets")[1] and "| met on | | 1 of 1 |" in table
    assert "| naive | 1.000 | 0 of 1 |" in table.split("## Across the datasets")[1]  # its made-up MSE is the worst
    # the same command again runs nothing new (the skip is not recorded twice)
    assert ul.main(args) == 0
    assert len(list(csv.DictReader((out / "toy.csv").open()))) == 4


# ------------------------------------------------------------------------------------------ datasets
def test_a_missing_package_names_the_pip_install():
    with pytest.raises(ul.DatasetUnavailable, match="pip install some_package"):
        ul._require("no_such_module_here", "some_package", "some_dataset")


@pytest.mark.parametrize("name", list(ul.load_config(CONFIG)["datasets"]))
def test_the_datasets_load_as_the_config_describes(name):
    spec = ul.load_config(CONFIG)["datasets"][name]
    if importlib.util.find_spec(spec["package"]) is None:
        pytest.skip(f"{name} ships inside {spec['package']}, not installed here (pip install {spec['package']})")
    frame = ul.load_dataset(name, spec)  # checks the number of series, their length and grid
    assert list(frame.columns) == [ul.ID, ul.TIME, ul.TARGET]
    task = ul.prepare_task(name, spec, 0.2)
    assert task.windows.first >= math.floor(0.8 * spec["length"]) and (task.stats["std"] > 0).all()
    assert not task.inputs[ul.TARGET].isna().any()
