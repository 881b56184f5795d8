"""Smoke tests of the benchmark harnesses (``--quick``): the runner on the real ETTh1 file, the speed
benchmark on random inputs, and their table rendering."""

import csv
import math
import multiprocessing
import shutil
from pathlib import Path

import pytest

from benchmarks import common, run, speed
from benchmarks.common import reset_peak_rss

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"


@pytest.mark.skipif(not (DATA / "ETTh1.csv").exists(), reason=f"ETTh1.csv not found in {DATA}")
def test_quick_paper_run_writes_rows_and_a_table(tmp_path):
    config = Path(run.ROOT, "benchmarks/configs/paper_table_d128.toml")
    args = [str(config), "--quick", "--dataset", "ETTh1", "--horizon", "24", "--seeds", "0", "--data-dir", str(DATA),
            "--out-dir", str(tmp_path)]
    assert run.main(args) == 0
    rows = list(csv.DictReader((tmp_path / "paper_table.csv").open()))
    assert [(r["dataset"], r["horizon"], r["model"], r["seed"]) for r in rows] == [
        ("ETTh1", "24", "informer", "0"), ("ETTh1", "24", "rsa_informer", "0")]
    for row in rows:
        assert set(run.RESULT_COLUMNS) == set(row)
        assert float(row["mse"]) > 0 and row["context_length"] == "48" and row["test_windows"] == "32"
        assert row["commit"] and row["machine"] and row["command"].startswith("python -m benchmarks.run")
    # resuming skips finished runs
    assert run.main(args) == 0
    assert len(list(csv.DictReader((tmp_path / "paper_table.csv").open()))) == 2
    table = (tmp_path / "paper_table.md").read_text()
    assert "| paper_d128-quick | ETTh1 | 24 | 16 | rsa_informer | 0 |" in table
    assert "0.414 / 0.450" in table  # the paper's RSA-Informer numbers beside ours


@pytest.mark.skipif(not (DATA / "ETTh1.csv").exists(), reason=f"ETTh1.csv not found in {DATA}")
def test_plan_times_steps_and_projects_the_protocol(tmp_path, monkeypatch):
    """--plan trains one step per run and writes projections = epochs x batches x measured times."""
    config = Path(run.ROOT, "benchmarks/configs/paper_table_d128.toml")
    # a small network keeps the test fast; the projection arithmetic is what is checked
    monkeypatch.setattr(run, "load_config", lambda path: {**run.tomllib.loads(Path(path).read_text()),
                                                          "model": run.QUICK_MODEL})
    rows = []
    real_plan_one = run.plan_one
    monkeypatch.setattr(run, "plan_one", lambda *a, **k: rows.append(real_plan_one(*a, **k)) or rows[-1])
    assert run.main([str(config), "--plan", "1", "--dataset", "ETTh1", "--horizon", "24", "--data-dir", str(DATA),
                     "--out-dir", str(tmp_path)]) == 0
    assert [(r["dataset"], r["horizon"], r["model"]) for r in rows] == [("ETTh1", 24, "informer"),
                                                                         ("ETTh1", 24, "rsa_informer")]
    for r in rows:
        assert r["windows"] == "8569/2857/2857" and r["train_s"] > 0 and r["val_s"] > 0
        expected = 6 * (268 * r["train_s"] + 90 * r["val_s"]) + 90 * r["val_s"]  # ceil(windows / 32) batches
        assert r["minutes"] * 60 == pytest.approx(expected)
    table = (tmp_path / "paper_table_plan.md").read_text()
    assert "| ETTh1 | 24 | rsa_informer | 48 | 8569/2857/2857 |" in table and "--plan 1" in table
    assert not (tmp_path / "paper_table.csv").exists()  # nothing is trained in full, no result row


def test_plan_rejects_bad_steps_and_quick():
    config = str(Path(run.ROOT, "benchmarks/configs/paper_table_d128.toml"))
    for extra in (["--plan", "0"], ["--plan", "2", "--quick"]):
        with pytest.raises(SystemExit):
            run.main([config, *extra])


def test_every_config_parses_and_names_known_models_and_settings():
    from tsrec import list_models
    from tsrec.datasets import paper_setting

    for path in sorted(Path(run.ROOT, "benchmarks/configs").glob("*.toml")):
        config = run.load_config(path)
        assert set(config["models"]) <= set(list_models()), path
        for dataset, horizons in config["settings"].items():
            for horizon in horizons:
                paper_setting(dataset, horizon, protocol=config["protocol"])


def test_quick_speed_run_measures_both_models(tmp_path, one_thread):
    """One length (each model's memory is measured in a fresh process, which takes seconds)."""
    argv = ["--quick", "--threads", "1", "--lengths", "96", "--out-dir", str(tmp_path)]
    assert speed.main(argv) == 0
    rows = list(csv.DictReader((tmp_path / "speed.csv").open()))
    assert [(r["model"], r["length"], r["label"]) for r in rows] == [("informer", "96", "48"),
                                                                    ("rsa_informer", "96", "48")]
    positive = ["step_q1_s", "step_median_s", "step_q3_s", "predict_batch_median_s", "predict_window_median_s",
                "train_gflop", "predict_batch_gflop", "predict_window_gflop", "matmul_gflops", "flop_bound_s",
                "step_over_bound"] + (["train_peak_mib"] if reset_peak_rss() else [])
    for row in rows:
        values = {key: float(row[key]) for key in positive}
        assert all(math.isfinite(v) and v > 0 for v in values.values()), row
        assert values["step_q1_s"] <= values["step_median_s"] <= values["step_q3_s"]
        assert values["train_gflop"] > 2 * values["predict_batch_gflop"] > 2 * values["predict_window_gflop"]
        assert values["step_over_bound"] == pytest.approx(
            values["step_median_s"] / (values["train_gflop"] / values["matmul_gflops"]))
        assert row["steps"] == "3" and row["threads"] == "1" and row["commit"]
    informer, rsa = rows
    assert informer["rsa_overhead_pct"] == ""  # rsa_informer's median step over informer's, in %
    assert float(rsa["rsa_overhead_pct"]) == pytest.approx(
        100 * (float(rsa["step_median_s"]) / float(informer["step_median_s"]) - 1))
    table = (tmp_path / "speed.md").read_text()
    assert rows[0]["command"] == "python -m benchmarks.speed " + " ".join(argv)
    assert f"`{rows[0]['command']}`" in table and f"`{rows[0]['commit']}`" in table
    assert "- input lengths L: 96" in table and "- torch threads: 1" in table
    for row in rows:
        assert f"| {row['model']} | {row['length']} | {row['label']} |" in table
    assert table.count("| RSA overhead per training step <= 10% |") == 1
    assert table.count("| training step <= 1.2x FLOPs / matmul throughput |") == 2


def test_speed_targets_are_judged_from_the_measured_numbers():
    rows = [{"model": "informer", "length": 48, "rsa_overhead_pct": None, "step_over_bound": 1.1},
            {"model": "rsa_informer", "length": 48, "rsa_overhead_pct": 10.0, "step_over_bound": 1.3},
            {"model": "rsa_informer", "length": 336, "rsa_overhead_pct": 10.4, "step_over_bound": 1.2}]
    assert [(model, length, measured, met) for _, model, length, measured, met in speed.targets(rows)] == [
        ("rsa_informer", 48, "+10.0%", True), ("rsa_informer", 336, "+10.4%", False),
        ("informer", 48, "1.10x", True), ("rsa_informer", 48, "1.30x", False), ("rsa_informer", 336, "1.20x", True)]


def test_speed_rejects_too_few_steps_for_quartiles():
    with pytest.raises(SystemExit):
        speed.main(["--quick", "--steps", "1"])


def test_long_horizon_table_averages_the_models_with_all_four_horizons_beside_the_published_number(tmp_path):
    rows = [{**{key: "" for key in run.RESULT_COLUMNS}, "config": "long_horizon", "protocol": "long_horizon",
             "dataset": dataset, "horizon": str(horizon), "model": model, "seed": str(seed),
             "mse": str(mse), "mae": "0.1", "train_seconds": "1.0"}
            for dataset, horizons in (("ETTh1", (96, 192, 336, 720)), ("ETTh2", (96,)))
            for horizon in horizons for model, mse in (("patchtst", 0.4), ("rsa_patchtst", 0.3))
            for seed in (0, 1)]
    rows.append({**rows[0], "model": "srupp", "mse": "0.5"})  # one horizon only: no average
    path = tmp_path / "long_horizon.csv"
    for row in rows:
        run.append_row(path, row)
    table = run.render(path).read_text()
    assert "| ETTh1 | 96 | 0.400 ± 0.000 [0,1] 1 s | 0.300 ± 0.000 [0,1] 1 s | 0.500 [0] 1 s |" in table
    assert "| ETTh1 | 0.400 | 0.300 |  | 0.469 |" in table  # srupp has one of the four horizons
    assert "| ETTh2 |" not in table.split("Per-dataset")[1]  # no model has all four horizons there


# ------------------------------------------------------------------------------- batches (issue 15)
def result_row(**values):
    return {**{key: "" for key in run.RESULT_COLUMNS}, "config": "c", "protocol": "informer", "dataset": "ETTh1",
            "horizon": "24", "model": "informer", "seed": "0", "mse": "0.5", "mae": "0.5", "train_seconds": "1.0",
            "epochs": "1", "best_epoch": "1", "d_model": "16", **values}


def write_older_csv(path, rows):
    """A results CSV as the runner wrote it before the precision and compile columns."""
    columns = run.RESULT_COLUMNS[:-2]
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def test_appends_from_processes_at_once_land_whole_under_one_upgraded_header(tmp_path):
    path = tmp_path / "results.csv"
    write_older_csv(path, [result_row(seed="old")])
    rows = [result_row(seed=str(seed), precision="bf16-mixed", compile=True, command="x" * 20000)
            for seed in range(60)]  # rows longer than a write buffer: written in pieces
    context = multiprocessing.get_context("fork")  # the children only append: no torch, no threads
    start = context.Barrier(4)

    def append(rows):
        start.wait()
        for row in rows:
            run.append_row(path, row)

    processes = [context.Process(target=append, args=(rows[i::4],)) for i in range(4)]
    for process in processes:
        process.start()
    for process in processes:
        process.join()
    assert [process.exitcode for process in processes] == [0] * 4
    with path.open(newline="") as fh:
        assert next(csv.reader(fh)) == run.RESULT_COLUMNS
    read = run.read_rows(path)
    assert read[0]["seed"] == "old" and read[0]["precision"] == "" and run.precision_of(read[0]) == "32-true"
    assert sorted(int(row["seed"]) for row in read[1:]) == list(range(60))
    assert all(row["command"] == "x" * 20000 and row["compile"] == "True" and None not in row for row in read[1:])
    (tmp_path / "other.csv").write_text("model,mse\nx,1\n")
    with pytest.raises(ValueError, match="other.csv is not a benchmarks.run results CSV"):
        run.append_row(tmp_path / "other.csv", rows[0])


def test_an_out_dir_starts_from_the_committed_csv_and_runs_only_what_it_lacks(tmp_path, monkeypatch):
    """The committed paper_table.csv holds paper_d512 ETTh1-24 seed 0 of both models (in fp32)."""
    batches = []
    monkeypatch.setattr(run, "run_batch", lambda batch, runs, jobs: batches.append((batch, runs, jobs)) or [])
    args = [str(Path(run.ROOT, "benchmarks/configs/paper_table_d512.toml")), "--dataset", "ETTh1", "--horizon", "24",
            "--seeds", "0", "1", "--out-dir", str(tmp_path), "--jobs", "3"]
    assert run.main(args) == 0
    assert (tmp_path / "paper_table.csv").read_bytes() == (run.RESULTS / "paper_table.csv").read_bytes()
    batch, runs, jobs = batches[-1]
    assert runs == [("ETTh1", 24, "informer", 1), ("ETTh1", 24, "rsa_informer", 1)] and jobs == 3
    assert batch.out == tmp_path / "paper_table.csv"
    assert batch.machine_settings == {"precision": "32-true", "compile": False}
    assert run.main([*args, "--precision", "bf16-mixed", "--compile"]) == 0  # another precision: other runs
    assert len(batches[-1][1]) == 4 and batches[-1][0].machine_settings == {"precision": "bf16-mixed", "compile": True}


def test_merge_brings_back_only_the_rows_a_batch_added(tmp_path):
    committed = tmp_path / "results" / "paper_table.csv"
    committed.parent.mkdir()
    old = [result_row(seed=str(seed)) for seed in range(2)]
    write_older_csv(committed, old)
    batch = tmp_path / "gpu" / "paper_table.csv"
    batch.parent.mkdir()
    shutil.copyfile(committed, batch)  # how --out-dir starts it
    new = [result_row(seed="2", precision="bf16-mixed", compile=True), result_row(seed="3")]
    for row in new:
        run.append_row(batch, row)
    assert run.main(["--merge", str(batch), "--out-dir", str(committed.parent)]) == 0
    assert [row["seed"] for row in run.read_rows(committed)] == ["0", "1", "2", "3"]
    assert run.merge(batch, committed) == 0  # merging again adds nothing
    other = tmp_path / "other" / "paper_table.csv"  # another batch ran seed 3 too, and seed 4
    for row in (result_row(seed="3", mse="9.0"), result_row(seed="4")):
        run.append_row(other, row)
    assert run.merge(other, committed) == 1
    assert [(row["seed"], row["mse"]) for row in run.read_rows(committed)][3:] == [("3", "0.5"), ("4", "0.5")]
    table = (committed.parent / "paper_table.md").read_text()
    assert "| c | ETTh1 | 24 | 16 | informer | 0,1,3 |" in table
    assert "| c bf16-mixed | ETTh1 | 24 | 16 | informer | 2 |" in table  # never averaged with fp32 runs


@pytest.mark.parametrize("name", ["paper_table.csv", "long_horizon.csv"])
def test_committed_csvs_render_the_same_tables_once_their_header_has_the_new_columns(tmp_path, name):
    older = tmp_path / "older" / name
    older.parent.mkdir()
    shutil.copyfile(run.RESULTS / name, older)
    upgraded = tmp_path / name
    shutil.copyfile(older, upgraded)
    rows = run.read_rows(older)
    run.append_row(upgraded, {**rows[0], "seed": "99", "precision": "bf16-mixed", "compile": True})
    before = run.render(older).read_text().replace(str(older), str(upgraded))
    after = run.render(upgraded).read_text()
    assert len(run.read_rows(upgraded)) == len(rows) + 1
    if name == "paper_table.csv":
        assert set(before.splitlines()) < set(after.splitlines())  # one more line: the bf16 run, apart
    assert " bf16-mixed |" in after and "bf16-mixed" not in before


def test_a_config_may_not_choose_the_machines_settings(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('name = "c"\nprotocol = "informer"\noutput = "c.csv"\nmodels = ["dlinear"]\nseeds = [0]\n'
                    '[settings]\nETTh1 = [24]\n[training_options.dlinear]\nprecision = "bf16-mixed"\n')
    with pytest.raises(SystemExit, match=r"sets \['precision'\]: the machine chooses them; .* --precision"):
        run.load_config(path)


@pytest.mark.skipif(not (DATA / "ETTh1.csv").exists(), reason=f"ETTh1.csv not found in {DATA}")
def test_a_failed_run_is_reported_and_the_others_carry_on(tmp_path, monkeypatch, capsys):
    """Two runs at once in their own processes; ETTh2's file is missing, so its run fails."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "ETTh1.csv").symlink_to(DATA / "ETTh1.csv")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("TSREC_DATA_DIR", raising=False)
    config = str(Path(run.ROOT, "benchmarks/configs/long_horizon.toml"))
    assert run.main([config, "--quick", "--dataset", "ETTh2", "ETTh1", "--horizon", "96", "--model", "naive",
                     "--seeds", "0", "--jobs", "2", "--threads", "1", "--data-dir", str(data),
                     "--out-dir", str(tmp_path / "out")]) == 1
    assert [row["dataset"] for row in run.read_rows(tmp_path / "out" / "long_horizon.csv")] == ["ETTh1"]
    assert "1 runs failed: ETTh2-96 naive seed 0; the same command runs them again" in capsys.readouterr().err


def test_rows_name_the_commit_of_a_copied_checkout_without_git(tmp_path, monkeypatch):
    monkeypatch.setattr(common, "ROOT", tmp_path)  # not a git checkout
    monkeypatch.setenv(common.COMMIT_VAR, "abc1234")
    assert common.git_commit() == "abc1234"
    monkeypatch.delenv(common.COMMIT_VAR)
    assert common.git_commit() == "unknown"


def test_scoring_the_test_part_in_chunks_equals_one_backtest(monkeypatch):
    """The runner scores a test part in chunks of windows (one backtest over weather-720 would hold
    159M error rows); the chunks' pooled MSE / MAE are those of a single backtest."""
    import numpy as np
    import pandas as pd

    from tsrec import Forecaster
    from tsrec.evaluation import backtest

    rng = np.random.default_rng(0)
    t = np.arange(300)
    df = pd.DataFrame({"a": np.sin(t / 4) + rng.normal(0, 0.1, 300), "b": np.cos(t / 7) + rng.normal(0, 0.1, 300)},
                      index=pd.date_range("2024-01-01", periods=300, freq="h"))
    df.iloc[250:255, 0] = np.nan  # unobserved targets are left out of both
    forecaster = Forecaster("seasonal_naive", prediction_length=8, context_length=24).fit(df.iloc[:200])
    test = df.iloc[200 - 24:]
    n_windows = len(test) - 24 - 8 + 1
    whole = backtest(forecaster, test, start=24, stride=1, batch_size=64)
    monkeypatch.setattr(run, "SCORE_CHUNK_ENTRIES", 7 * 8 * 2)  # 7 windows per chunk, the last one shorter
    mse, mae, windows = run.score_test(forecaster, test, n_windows)
    assert windows == n_windows == whole.errors.origin.nunique()
    assert mse == pytest.approx(whole.metric("mse", "scaled"), rel=1e-12)
    assert mae == pytest.approx(whole.metric("mae", "scaled"), rel=1e-12)
