"""Smoke tests of the benchmark harnesses (``--quick``): the runner on the real ETTh1 file, the speed
benchmark on random inputs, and their table rendering."""

import csv
import math
import multiprocessing
import shutil
from pathlib import Path

import pytest
import tomllib

from benchmarks import common, run, speed
from benchmarks.common import reset_peak_rss
from tests.shared_data import SHARED_DATASETS

# the naive baselines only: ets and theta would cost a statsforecast fit per series
NAIVE = ("naive", "seasonal_naive")

DATA = SHARED_DATASETS


@pytest.mark.shared_datasets("ETTh1.csv")
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


@pytest.mark.shared_datasets("ETTh1.csv")
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
        if "protocol" not in tomllib.loads(path.read_text()):
            continue  # another runner's config (unseen_like.toml: tests/test_unseen_like.py)
        config = run.load_config(path)
        assert {run.registered_model(config, model) for model in config["models"]} <= set(list_models()), path
        for dataset, horizons in config["settings"].items():
            for horizon in horizons:
                paper_setting(dataset, horizon, protocol=config["protocol"])


@pytest.mark.slow  # speed runs measure memory in fresh processes
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


# ------------------------------------------------------------------------------- speed on a GPU: one code path
def speed_row(**values):
    """A measured speed row as ``speed`` writes it (provenance included), with made-up numbers."""
    measured = {f"{kind}_{stat}_s": 0.01 for kind in speed.TIMED for stat in ("q1", "median", "q3")}
    return {**dict.fromkeys(speed.ROW_KEYS), **measured, "model": "informer", "length": 48, "label": 48,
            "horizon": 24, "batch": 32, "channels": 7, "time_features": 4, "d_model": 512, "parameters": 10,
            "steps": 20, "step_ops": 1234, "train_gflop": 90.0, "predict_batch_gflop": 30.0, "predict_window_gflop": 0.9,
            "matmul_gflops": 5e4, "flop_bound_s": 0.0018, "step_over_bound": 5.5, "predict_peak_mib": 60.0,
            "train_peak_mib": 300.0, "device": "NVIDIA H100 80GB HBM3", "precision": "bf16-mixed", "compiled": False,
            "graph_break_reasons": "", "error": "", "allow_tf32": False, "float32_matmul_precision": "highest",
            "cudnn_allow_tf32": True, "threads": 16, "commit": "abc1234", "machine": "m", "date": "d",
            "command": "python -m benchmarks.speed --device cuda", **values}


@pytest.mark.slow  # speed runs measure memory in fresh processes
def test_quick_speed_in_bf16_mixed_measures_the_long_horizon_models_from_input_96(tmp_path, one_thread):
    argv = ["--quick", "--threads", "1", "--precision", "bf16-mixed", "--models", "dlinear", "patchtst",
            "rsa_patchtst", "--lengths", "48", "96", "--out-dir", str(tmp_path)]
    assert speed.main(argv) == 0
    rows = speed.read_rows(tmp_path / "speed.csv")
    assert [(r["model"], r["length"], r["label"], r["horizon"]) for r in rows] == [
        ("dlinear", 96, None, 96), ("patchtst", 96, None, 96), ("rsa_patchtst", 96, None, 96)]  # none at 48
    for row in rows:
        assert (row["device"], row["precision"], row["compiled"], row["error"]) == ("cpu", "bf16-mixed", False, "")
        assert all(row[key] > 0 for key in ("step_median_s", "predict_window_median_s", "train_gflop",
                                            "matmul_gflops", "step_over_bound")), row
    dlinear, patchtst, rsa = rows
    assert dlinear["rsa_overhead_pct"] is None and patchtst["rsa_overhead_pct"] is None
    assert rsa["rsa_overhead_pct"] == pytest.approx(100 * (rsa["step_median_s"] / patchtst["step_median_s"] - 1))
    table = (tmp_path / "speed.md").read_text()
    assert "precision: bf16-mixed: forward and loss under autocast to bfloat16" in table
    assert "median bfloat16 square-matmul throughput" in table and "| rsa_patchtst | 96 | - |" in table
    assert not (tmp_path / "gpu_speed.csv").exists()


@pytest.mark.slow  # speed runs measure memory in fresh processes
def test_a_model_that_fails_to_compile_gets_a_row_saying_why_and_the_others_carry_on(tmp_path, one_thread,
                                                                                      monkeypatch):
    def compile_case(case):  # in place of torch.compile: informer stays eager, rsa_informer's compilation fails
        if case.name == "rsa_informer":
            raise RuntimeError("no compiler | here\nmore detail")

    monkeypatch.setattr(speed.Case, "compile", compile_case)
    argv = ["--quick", "--threads", "1", "--lengths", "96", "--compile", "both", "--out-dir", str(tmp_path)]
    assert speed.main(argv) == 0
    rows = speed.read_rows(tmp_path / "speed.csv")
    assert [(r["model"], r["compiled"], r["error"]) for r in rows] == [
        ("informer", False, ""), ("rsa_informer", False, ""), ("informer", True, ""),
        ("rsa_informer", True, "RuntimeError: no compiler / here")]
    eager, eager_rsa, compiled, failed = rows
    assert eager_rsa["rsa_overhead_pct"] == pytest.approx(  # against the eager informer, not the compiled one
        100 * (eager_rsa["step_median_s"] / eager["step_median_s"] - 1))
    assert compiled["first_step_s"] > 0 and compiled["graphs"] == 0 and compiled["train_peak_mib"] is None
    assert failed["step_median_s"] is None and failed["rsa_overhead_pct"] is None
    table = (tmp_path / "speed.md").read_text()
    assert "| rsa_informer (compiled) | 96 | RuntimeError: no compiler / here |" in table.split("## Not measured")[1]
    assert "| informer | 96 | " in table.split("## Compilation")[1] and "| informer (compiled) | 96 | 48 |" in table
    assert table.count("| RSA overhead per training step <= 10% |") == 1


def test_the_gpu_path_runs_with_the_device_swapped_for_the_cpu(tmp_path, one_thread, monkeypatch):
    """What a GPU changes, short of CUDA itself: memory from the allocator in this process (no fresh
    process), rows naming the GPU, gpu_speed.* files."""
    monkeypatch.setattr(speed.Options, "cuda", property(lambda self: True))
    monkeypatch.setattr(speed, "device_name", lambda device: "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(speed, "in_fresh_process", lambda *args: pytest.fail("a fresh process on the GPU path"))
    calls = []
    monkeypatch.setattr(speed, "cuda_peak_growth_mib", lambda run, device: calls.append(run()) or 7.0)
    assert speed.main(["--quick", "--threads", "1", "--lengths", "96", "--precision", "bf16-mixed", "--out-dir",
                       str(tmp_path)]) == 0
    rows = speed.read_rows(tmp_path / "gpu_speed.csv")
    assert not (tmp_path / "speed.csv").exists() and len(calls) == 4  # a batch prediction and a step per model
    assert [(r["model"], r["device"], r["precision"], r["train_peak_mib"], r["predict_peak_mib"]) for r in rows] == [
        (model, "NVIDIA H100 80GB HBM3", "bf16-mixed", 7.0, 7.0) for model in ("informer", "rsa_informer")]
    table = (tmp_path / "gpu_speed.md").read_text()
    assert "Peak: torch's CUDA allocator during one step" in table and "`allow_tf32=False`" in table


def test_speed_rows_land_in_files_named_by_their_device_and_read_back_typed(tmp_path):
    assert speed.output_stem("cpu") == "speed" and speed.output_stem("NVIDIA H100 80GB HBM3") == "gpu_speed"
    rows = [speed_row(), speed_row(model="rsa_informer", compiled=True, first_step_s=40.0, first_predict_batch_s=9.0,
                                   first_predict_window_s=8.0, graphs=7, graph_breaks=0, rsa_overhead_pct=4.0)]
    csv_path, md_path = speed.write_results(tmp_path, rows)
    assert (csv_path.name, md_path.name) == ("gpu_speed.csv", "gpu_speed.md")
    assert speed.read_rows(csv_path) == rows
    table = md_path.read_text()
    assert "| informer | 48 | 48 | 10 | 20 | 10.0 (10.0-10.0) | - | 1,234 | 90.0 | 50000 | 1.80 | 5.50x | 300 |" in table
    assert "`allow_tf32=False`, `float32_matmul_precision='highest'`, cuDNN `allow_tf32=True`" in table
    assert "device: NVIDIA H100 80GB HBM3; precision: bf16-mixed" in table and "torch's CUDA allocator" in table
    assert "| rsa_informer | 48 | 40.0 | 9.0 | 8.0 | 7 | 0 | - |" in table
    assert speed.write_results(tmp_path, [speed_row(device="cpu")])[0].name == "speed.csv"


def test_speed_render_joins_the_rows_of_two_runs_on_one_device_and_precision(tmp_path):
    first, second, other = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    speed.write_results(first, [speed_row(length=48)])
    speed.write_results(second, [speed_row(length=720, compiled=True, command="python -m benchmarks.speed b")])
    speed.write_results(other, [speed_row(precision="32-true")])
    assert speed.main(["--render", str(first / "gpu_speed.csv"), str(second / "gpu_speed.csv"),
                       "--out-dir", str(tmp_path)]) == 0
    assert [(r["length"], r["compiled"]) for r in speed.read_rows(tmp_path / "gpu_speed.csv")] == [(48, False),
                                                                                                  (720, True)]
    table = (tmp_path / "gpu_speed.md").read_text()
    assert "- command: `python -m benchmarks.speed --device cuda; python -m benchmarks.speed b`" in table
    assert "- input lengths L: 48, 720" in table
    with pytest.raises(SystemExit, match="more than one device or precision"):
        speed.main(["--render", str(first / "gpu_speed.csv"), str(other / "gpu_speed.csv")])


def test_rsa_overhead_pairs_each_rsa_model_with_its_base_at_the_same_length_and_compile_setting():
    rows = [speed_row(model="informer", step_median_s=1.0), speed_row(model="rsa_informer", step_median_s=1.1),
            speed_row(model="rsa_informer", compiled=True, step_median_s=0.5),  # no compiled informer
            speed_row(model="patchtst", length=96, step_median_s=2.0),
            speed_row(model="rsa_patchtst", length=96, step_median_s=2.2),
            speed_row(model="rsa_patchtst", length=336, step_median_s=3.0),  # no patchtst at 336
            speed_row(model="dlinear", length=96, step_median_s=0.1),
            speed_row(model="informer", length=336, error="RuntimeError: out of memory", step_median_s=None),
            speed_row(model="rsa_informer", length=336, step_median_s=2.0)]  # its base failed
    speed.add_overheads(rows)
    overheads = [None if r["rsa_overhead_pct"] is None else round(r["rsa_overhead_pct"], 6) for r in rows]
    assert overheads == [None, 10.0, None, None, 10.0, None, None, None, None]


def test_committed_cpu_speed_rows_still_render_their_tables():
    """speed.csv was written before the device, precision and compile columns: its rows read as CPU, float32, eager."""
    rows = speed.read_rows(Path(run.ROOT, "benchmarks/results/speed.csv"))
    assert {(r["device"], r["precision"], r["compiled"], r["error"]) for r in rows} == {("cpu", "32-true", False, "")}
    rendered = speed.render(rows).splitlines()
    committed = Path(run.ROOT, "benchmarks/results/speed.md").read_text().splitlines()
    tables = [line for line in committed if line.startswith("|")]
    assert len(tables) >= 10 and [line for line in tables if line not in rendered] == []


def test_speed_budget_skips_lengths_whose_estimate_passes_it(monkeypatch, capsys):
    assert speed.projected_seconds([], 96, 2) is None
    assert speed.projected_seconds([speed.Done(48, 2, 10.0, 4.0)], 96, 5) == pytest.approx((4 + 6 * 2) * 5 / 2)
    now = [0.0]

    def measure_length(models, length, options, compiled):  # 10 s per 48 steps of input, 1 s of it compiling
        now[0] += 10 * length / 48
        return [{**speed.blank_row(name, setting, length, options, compiled), "step_median_s": 0.1,
                 "first_step_s": 1.0 if compiled else None} for name, setting in models.items()]

    monkeypatch.setattr(speed, "measure_length", measure_length)
    options = speed.Options(device=speed.torch.device("cpu"))
    settings = {name: speed.MODEL_SETTINGS[name] for name in ("informer", "rsa_informer")}
    saved = []
    rows = speed.run_lengths(settings, [48, 96, 192, 384], options, (False, True), 60.0, saved.append,
                             clock=lambda: now[0])
    done = [(r["length"], r["compiled"]) for r in rows if not r["error"]][::2]
    # eager: 10 + 20 s, then 40 s more for 192 would end at 70; compiled: 10 s, then 2 + 2 x 8 s for 96
    assert done == [(48, False), (96, False), (48, True), (96, True)]
    skipped = [(r["length"], r["compiled"], r["error"]) for r in rows if r["error"]][::2]
    assert skipped == [(192, False, "skipped: about 40 s more would pass the 1-minute budget"),
                       (384, False, "skipped: about 80 s more would pass the 1-minute budget"),
                       (192, True, "skipped: about 38 s more would pass the 1-minute budget"),
                       (384, True, "skipped: about 74 s more would pass the 1-minute budget")]
    assert len(saved) == 8 and saved[-1] is rows
    assert "L=48 eager: informer 100.0 ms/step, rsa_informer 100.0 ms/step; took 10 s; estimate for the eager " \
           "lengths left: 2.3 min" in capsys.readouterr().out


@pytest.mark.skipif(speed.torch.cuda.is_available(), reason="this machine has a CUDA device")
def test_speed_on_cuda_without_a_cuda_device_is_refused():
    with pytest.raises(SystemExit, match="torch sees no CUDA device"):
        speed.main(["--quick", "--device", "cuda"])


@pytest.mark.slow
def test_quick_speed_compiles_a_model_on_the_cpu(tmp_path, one_thread):
    """torch.compile through inductor's C++ backend: about half a minute for DLinear on a 2-core machine."""
    argv = ["--quick", "--threads", "1", "--lengths", "96", "--models", "dlinear", "--compile", "--out-dir",
            str(tmp_path)]
    assert speed.main(argv) == 0
    (row,) = speed.read_rows(tmp_path / "speed.csv")
    assert (row["model"], row["compiled"], row["error"]) == ("dlinear", True, "")
    assert row["graphs"] >= 1 and row["first_step_s"] > 0 and row["step_median_s"] > 0


@pytest.mark.gpu
@pytest.mark.skipif(not speed.torch.cuda.is_available(), reason="needs a CUDA device (pytest -m gpu on a GPU)")
def test_quick_speed_on_the_gpu_in_bf16_eager_and_compiled(tmp_path):
    """The GPU table's code path at tiny sizes: about 1-2 minutes, mostly compiling."""
    argv = ["--quick", "--device", "cuda", "--precision", "bf16-mixed", "--compile", "both", "--lengths", "96",
            "--models", "informer", "rsa_informer", "dlinear", "--out-dir", str(tmp_path)]
    assert speed.main(argv) == 0
    rows = speed.read_rows(tmp_path / "gpu_speed.csv")
    assert not (tmp_path / "speed.csv").exists()
    assert [(r["model"], r["compiled"], r["error"]) for r in rows] == [
        (model, compiled, "") for compiled in (False, True) for model in ("informer", "rsa_informer", "dlinear")]
    for row in rows:
        assert row["device"] == speed.torch.cuda.get_device_name() and row["precision"] == "bf16-mixed"
        assert row["train_peak_mib"] > 0 and row["predict_peak_mib"] > 0 and row["step_median_s"] > 0
    assert all(r["first_step_s"] > 0 and r["graphs"] is not None for r in rows if r["compiled"])
    assert rows[1]["rsa_overhead_pct"] is not None and rows[4]["rsa_overhead_pct"] is not None


def test_long_horizon_table_averages_the_models_with_all_four_horizons_beside_the_published_number(tmp_path):
    rows = [{**{key: "" for key in run.RESULT_COLUMNS}, "config": "long_horizon", "protocol": "long_horizon",
             "dataset": dataset, "horizon": str(horizon), "context_length": "96", "model": model,
             "seed": str(seed), "mse": str(mse), "mae": "0.1", "train_seconds": "1.0"}
            for dataset, horizons in (("ETTh1", (96, 192, 336, 720)), ("ETTh2", (96,)))
            for horizon in horizons for model, mse in (("patchtst", 0.4), ("rsa_patchtst", 0.3))
            for seed in (0, 1)]
    rows.append({**rows[0], "model": "srupp", "mse": "0.5"})  # one horizon only: no average
    path = tmp_path / "long_horizon.csv"
    for row in rows:
        run.append_row(path, row)
    table = run.render(path).read_text()
    assert "Long-horizon protocol (input 96;" in table
    assert "| ETTh1 | 96 | 0.400 ± 0.000 [0,1] 1 s | 0.300 ± 0.000 [0,1] 1 s | 0.500 [0] 1 s |" in table
    assert "| ETTh1 | 0.400 | 0.300 |  | 0.469 |" in table  # srupp has one of the four horizons
    assert "| ETTh2 |" not in table.split("Per-dataset")[1]  # no model has all four horizons there
    # RSA against its base, paired by run: 5 settings x 2 seeds, RSA 25% lower in each; srupp has no RSA model
    assert "| rsa_patchtst | patchtst | 96 | 1 | 96 | 4 | 4 | 0 | 0.125 | -25.00% | 0.00% |" in table
    assert "| rsa_patchtst | patchtst | 96 | 1 | all | 10 | 10 | 0 | 0.002 | -25.00% | 0.00% |" in table
    assert "| rsa_srupp" not in table
    path.unlink()
    for row in rows:
        run.append_row(path, {**row, "context_length": "336"})
    table = run.render(path).read_text()
    assert "Long-horizon protocol (input 336;" in table
    assert "| ETTh1 | 0.400 | 0.300 |  |  |" in table  # no input-96 published average beside input-336 runs
    path.unlink()
    for row in rows:
        if row["dataset"] == "ETTh2":  # an ablation at some horizons: no averages at all
            run.append_row(path, row)
    table = run.render(path).read_text()
    assert "| ETTh2 | 96 | 0.400 ± 0.000 [0,1] 1 s | 0.300 ± 0.000 [0,1] 1 s |" in table
    assert "Per-dataset" not in table


# ------------------------------------------------------------------------------- batches (issue 15)
def result_row(**values):
    return {**{key: "" for key in run.RESULT_COLUMNS}, "config": "c", "protocol": "informer", "dataset": "ETTh1",
            "horizon": "24", "model": "informer", "seed": "0", "mse": "0.5", "mae": "0.5", "train_seconds": "1.0",
            "epochs": "1", "best_epoch": "1", "d_model": "16", "context_length": "48", **values}


def write_older_csv(path, rows):
    """A results CSV as the runner wrote it before the precision and compile columns (and train_fraction)."""
    columns = run.RESULT_COLUMNS[:run.RESULT_COLUMNS.index("precision")]
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
    """The committed paper_table.csv holds paper_d512 ETTh1-24 seed 0 of both models, in fp32 (the CPU)
    and in bf16-mixed (the GPU calls)."""
    batches = []
    monkeypatch.setattr(run, "run_batch",
                        lambda batch, runs, jobs, deadline: batches.append((batch, runs, jobs)) or ([], []))
    args = [str(Path(run.ROOT, "benchmarks/configs/paper_table_d512.toml")), "--dataset", "ETTh1", "--horizon", "24",
            "--seeds", "0", "1", "--out-dir", str(tmp_path), "--jobs", "3"]
    assert run.main(args) == 0
    assert (tmp_path / "paper_table.csv").read_bytes() == (run.RESULTS / "paper_table.csv").read_bytes()
    batch, runs, jobs = batches[-1]
    assert runs == [("ETTh1", 24, "informer", 1, 48, 1.0), ("ETTh1", 24, "rsa_informer", 1, 48, 1.0)] and jobs == 3
    assert batch.out == tmp_path / "paper_table.csv"
    assert batch.machine_settings == {"precision": "32-true", "compile": False}
    assert run.main([*args, "--precision", "bf16-mixed", "--compile"]) == 0  # another precision: other runs
    assert batches[-1][1] == [("ETTh1", 24, "informer", 1, 48, 1.0), ("ETTh1", 24, "rsa_informer", 1, 48, 1.0)]
    assert batches[-1][0].machine_settings == {"precision": "bf16-mixed", "compile": True}


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
    assert after.count(" bf16-mixed |") > before.count(" bf16-mixed |")  # the new run shows, apart


@pytest.mark.parametrize(("section", "error"), [
    ('[training_options.dlinear]\nprecision = "bf16-mixed"\n',
     r"sets \['precision'\]: the machine chooses them; .* --precision"),
    ('[variants]\ndlinear_wide = { individual = true }\n',
     r"\[variants\] maps each variant's name to the registered model it trains"),
    ('[variants]\npatchtst = "rsa_patchtst"\n', r"variant\(s\) \['patchtst'\] have the name of a registered model"),
    ("train_fractions = 0.05\n", r"train_fractions = 0.05: give a list of fractions .* in \(0, 1\]"),
    ("train_fractions = [0.05, 0]\n", r"train_fractions = \[0.05, 0\]: give a list of fractions"),
    ("train_fractions = [1.5]\n", r"train_fractions = \[1.5\]: give a list of fractions"),
    ("train_fractions = []\n", r"train_fractions = \[\]: give a list of fractions"),
])
def test_a_config_is_refused_with_the_fix(tmp_path, section, error):
    path = tmp_path / "c.toml"
    top, tables = (section, "") if section.startswith("train_fractions") else ("", section)
    path.write_text('name = "c"\nprotocol = "informer"\noutput = "c.csv"\nmodels = ["dlinear"]\nseeds = [0]\n'
                    + top + '[settings]\nETTh1 = [24]\n' + tables)
    with pytest.raises(SystemExit, match=error):
        run.load_config(path)


@pytest.mark.shared_datasets("ETTh1.csv")
def test_a_variant_trains_its_registered_model_with_its_own_options(tmp_path):
    path = tmp_path / "ablation.toml"
    path.write_text('name = "ablation"\nprotocol = "long_horizon"\noutput = "ablation.csv"\n'
                    'models = ["rsa_patchtst", "decay"]\nseeds = [0]\n[settings]\nETTh1 = [96]\n'
                    '[variants]\ndecay = "rsa_patchtst"\n[model_options.decay]\nrsa = { kinds = [4, 0, 0, 0, 0, 0] }\n')
    config = run.load_config(path)
    kinds = {}
    for model in config["models"]:
        forecaster, _, _ = run.prepare(config, "ETTh1", 96, model, 0, data_dir=str(DATA), quick=False)
        assert forecaster.model_name == "rsa_patchtst"
        kinds[model] = forecaster.settings.network.rsa.kinds
    assert kinds == {"rsa_patchtst": None, "decay": (4, 0, 0, 0, 0, 0)}  # the preset's, the variant's
    assert run.main([str(path), "--quick", "--data-dir", str(DATA), "--out-dir", str(tmp_path / "out")]) == 0
    assert [row["model"] for row in run.read_rows(tmp_path / "out" / "ablation.csv")] == ["rsa_patchtst", "decay"]


@pytest.mark.parametrize(("protocol", "context"), [("informer", "336"), ("long_horizon", "0"),
                                                   ("long_horizon", '"336"'), ("long_horizon", "[]"),
                                                   ("long_horizon", '[336, "720"]'), ("informer", "[336]")])
def test_an_input_length_is_refused_unless_a_long_horizon_config_gives_a_positive_whole_number(
        tmp_path, protocol, context):
    path = tmp_path / "c.toml"
    path.write_text(f'name = "c"\nprotocol = "{protocol}"\noutput = "c.csv"\nmodels = ["dlinear"]\nseeds = [0]\n'
                    f'context_length = {context}\n[settings]\nETTh1 = [96]\n')
    with pytest.raises(SystemExit, match="only a long_horizon config may set its input length"):
        run.load_config(path)


@pytest.mark.shared_datasets("ETTh1.csv")
def test_a_long_horizon_config_sets_the_input_length_of_its_runs_rows_and_table(tmp_path):
    path = tmp_path / "inputs.toml"
    path.write_text('name = "inputs"\nprotocol = "long_horizon"\noutput = "inputs.csv"\nmodels = ["dlinear"]\n'
                    'seeds = [0]\ncontext_length = 192\n[settings]\nETTh1 = [96]\n')
    config = run.load_config(path)
    forecaster, part, _ = run.prepare(config, "ETTh1", 96, "dlinear", 0, data_dir=str(DATA), quick=False)
    assert forecaster.context_length == 192
    assert len(part["test"]) == 192 + 2880  # the test months, from one input before their border
    assert run.main([str(path), "--quick", "--data-dir", str(DATA), "--out-dir", str(tmp_path / "out")]) == 0
    assert [row["context_length"] for row in run.read_rows(tmp_path / "out" / "inputs.csv")] == ["192"]
    assert "Long-horizon protocol (input 192;" in (tmp_path / "out" / "inputs.md").read_text()


@pytest.mark.slow  # two benchmark runs in their own processes
@pytest.mark.shared_datasets("ETTh1.csv")
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
    assert "1 runs failed: ETTh2-96 naive seed 0 (input 96); the same command runs them again" in \
        capsys.readouterr().err


def test_rows_name_the_commit_of_a_copied_checkout_without_git(tmp_path, monkeypatch):
    monkeypatch.setattr(common, "ROOT", tmp_path)  # not a git checkout
    monkeypatch.setenv(common.COMMIT_VAR, "abc1234")
    assert common.git_commit() == "abc1234"
    monkeypatch.delenv(common.COMMIT_VAR)
    assert common.git_commit() == "unknown"


def test_the_commit_variable_names_a_copy_whose_git_metadata_is_stale(monkeypatch):
    """The GPU machine's copy had git metadata at its session's first commit: the bundle's commit wins."""
    monkeypatch.setenv(common.COMMIT_VAR, "abc1234")
    assert common.git_commit() == "abc1234"
    monkeypatch.delenv(common.COMMIT_VAR)
    assert common.git_commit() not in ("abc1234", "unknown")


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
    whole = backtest(forecaster, test, start=24, stride=1, batch_size=64, baselines=NAIVE)
    monkeypatch.setattr(run, "SCORE_CHUNK_ENTRIES", 7 * 8 * 2)  # 7 windows per chunk, the last one shorter
    mse, mae, windows = run.score_test(forecaster, test, n_windows)
    assert windows == n_windows == whole.errors.origin.nunique()
    assert mse == pytest.approx(whole.metric("mse", "scaled"), rel=1e-12)
    assert mae == pytest.approx(whole.metric("mae", "scaled"), rel=1e-12)
    mse, mae, windows = run.score_test(forecaster, test, n_windows, scaled=False)  # in the frame's own units
    assert (mse, mae) == pytest.approx((whole.metric("mse", "original"), whole.metric("mae", "original")), rel=1e-12)


# ------------------------------------------------------------------------------- few-shot and inputs (issue 26)
def test_a_training_fraction_keeps_the_last_windows_of_the_training_part_whole():
    from tsrec.datasets import splits

    split = splits("ETTh1", "long_horizon", context_length=96, prediction_length=96)
    assert split.train.n_windows == 8449
    for fraction, kept in ((0.05, 422), (0.1, 844), (1.0, 8449), (1e-6, 1)):
        cut = run.train_fraction_split(split, fraction)
        assert cut.train.n_windows == kept and cut.train.end == split.train.end == 8640
        assert cut.train.start == 8640 - (kept + 96 + 96 - 1)  # the first kept window's input is whole
        assert cut.scaler_rows == range(cut.train.start, 8640)
        assert (cut.val, cut.test) == (split.val, split.test)
    for fraction in (0.0, 1.5):
        with pytest.raises(ValueError, match=f"train fraction {fraction} is not in"):
            run.train_fraction_split(split, fraction)


def few_shot_config(tmp_path, extra=""):
    path = tmp_path / "few.toml"
    path.write_text('name = "few"\nprotocol = "long_horizon"\noutput = "few.csv"\nmodels = ["patchtst", '
                    '"rsa_patchtst"]\nseeds = [0]\ntrain_fractions = [0.05, 0.1]\n' + extra
                    + '[settings]\nETTh1 = [96]\n[training]\nmax_epochs = 1\n')
    return path


@pytest.mark.shared_datasets("ETTh1.csv")
def test_a_few_shot_run_trains_on_the_last_fraction_of_the_training_windows(tmp_path):
    config = run.load_config(few_shot_config(tmp_path))
    forecaster, part, split = run.prepare(config, "ETTh1", 96, "patchtst", 0, data_dir=str(DATA), quick=True,
                                          train_fraction=0.05)
    assert split.n_windows == {"train": 422, "val": 2785, "test": 2785}
    assert len(part["train"]) == 422 + 96 + 96 - 1 and part["train"].index[-1] == part["val"].index[96 - 1]
    forecaster.fit(part["train"], val_df=part["val"])
    assert forecaster.training_summary.budget["train_windows"] == 422
    # the frames are scaled with the whole training part's statistics (8640 rows), not the kept rows'
    from tsrec import datasets

    raw = datasets.load("ETTh1", str(DATA))
    mean, std = raw.iloc[:8640].mean(), raw.iloc[:8640].std(ddof=0)
    for name in ("train", "val", "test"):
        expected = (raw.loc[part[name].index] - mean) / std
        assert part[name].to_numpy() == pytest.approx(expected.to_numpy(), rel=1e-9, abs=1e-12)


def test_the_few_shot_scaling_standardises_each_column_on_the_whole_training_part():
    import numpy as np
    import pandas as pd
    from tsrec.datasets import Split

    frame = pd.DataFrame({"a": [1.0, 3.0, 5.0, 100.0], "b": [2.0, 2.0, 2.0, 7.0]})
    scaled = run.scaled_by_training_part(frame, Split("train", 0, 2, 0, 1, 1))  # rows 0 and 1
    assert np.allclose(scaled["a"], [-1.0, 1.0, 3.0, 98.0]) and np.allclose(scaled["b"], [0.0, 0.0, 0.0, 5.0])


@pytest.mark.shared_datasets("ETTh1.csv")
def test_a_few_shot_config_runs_each_fraction_resumes_and_tables_the_paired_comparison(tmp_path, capsys):
    args = [str(few_shot_config(tmp_path)), "--quick", "--data-dir", str(DATA), "--out-dir", str(tmp_path / "out")]
    assert run.main(args) == 0
    assert "ETTh1-96 rsa_patchtst seed 0 (input 96, 0.05 of the training windows): mse" in capsys.readouterr().out
    rows = run.read_rows(tmp_path / "out" / "few.csv")
    assert [(row["model"], row["train_fraction"]) for row in rows] == [
        ("patchtst", "0.05"), ("rsa_patchtst", "0.05"), ("patchtst", "0.1"), ("rsa_patchtst", "0.1")]
    assert run.main(args) == 0 and len(run.read_rows(tmp_path / "out" / "few.csv")) == 4  # resumed: nothing to do
    table = (tmp_path / "out" / "few.md").read_text()
    assert "training on the last 0.05 or 0.1 of the training windows;" in table
    assert "| data | H | train | patchtst | rsa_patchtst |" in table and "| ETTh1 | 96 | 0.1 | " in table
    for fraction in ("0.05", "0.1"):
        assert f"| rsa_patchtst | patchtst | 96 | {fraction} | all | 1 | " in table


@pytest.mark.shared_datasets("ETTh1.csv")
def test_a_list_of_inputs_runs_every_setting_at_each_input_first_input_first(tmp_path):
    path = few_shot_config(tmp_path, "context_length = [192, 144]\n")
    config = run.load_config(path)
    forecaster, part, _ = run.prepare(config, "ETTh1", 96, "patchtst", 0, data_dir=str(DATA), quick=True,
                                      context_length=144)
    assert forecaster.context_length == 144 and len(part["test"]) == 144 + 2880
    with pytest.raises(ValueError, match=r"ETTh1-96 runs with the input\(s\) \[192, 144\], not 96"):
        run.prepare(config, "ETTh1", 96, "patchtst", 0, data_dir=str(DATA), quick=True, context_length=96)
    assert run.main([str(path), "--quick", "--model", "patchtst", "--data-dir", str(DATA),
                     "--out-dir", str(tmp_path / "out")]) == 0
    rows = run.read_rows(tmp_path / "out" / "few.csv")
    assert [(row["context_length"], row["train_fraction"]) for row in rows] == [
        ("192", "0.05"), ("144", "0.05"), ("192", "0.1"), ("144", "0.1")]
    assert "| data | H | input | train | patchtst |" in (tmp_path / "out" / "few.md").read_text()


@pytest.mark.shared_datasets("ETTh1.csv")
def test_plan_projects_a_few_shot_run_from_its_kept_windows(tmp_path, monkeypatch):
    monkeypatch.setattr(run, "load_config", lambda path: {**run.tomllib.loads(Path(path).read_text()),
                                                          "model": dict(d_model=16, d_ff=32, e_layers=1)})
    assert run.main([str(few_shot_config(tmp_path)), "--plan", "1", "--model", "patchtst", "--data-dir", str(DATA),
                     "--out-dir", str(tmp_path)]) == 0
    table = (tmp_path / "few_plan.md").read_text()
    assert "| ETTh1 | 96 | patchtst | 96 | 422/2785/2785 | 0.05 |" in table
    assert "| ETTh1 | 96 | patchtst | 96 | 844/2785/2785 | 0.1 |" in table


def test_an_rsa_model_and_its_variants_are_compared_with_their_base_model():
    models = ["patchtst", "patchtst_wide", "rsa_patchtst", "rsa_patchtst_low_gate", "rsa_patchtst_wide", "rsa_srupp",
              "rsa_informer_x", "dlinear"]
    assert [run.base_model(model, models) for model in models] == [
        None, None, "patchtst", "patchtst", "patchtst_wide", None, None, None]


def test_rows_from_before_the_train_fraction_column_are_runs_on_all_the_training_data(tmp_path):
    path = tmp_path / "results.csv"
    write_older_csv(path, [result_row(context_length="96")])
    run.append_row(path, result_row(context_length="96", seed="1", train_fraction=0.05))
    old, new = run.read_rows(path)
    assert old["train_fraction"] == "" and run.run_key(old)[-2:] == (96, 1.0)
    assert run.run_key(new)[-2:] == (96, 0.05)
    assert run.run_key({**old, "train_fraction": "1.0"}) == run.run_key(old)  # what a new run of it would write


def test_scale_results_give_each_cells_median_range_and_the_speedup_of_medians():
    from benchmarks.scale import render

    runs = {"one": (4.0, 2.0, 3.0), "ddp": (2.0, 1.0, 6.0)}
    rows = [dict(case="c", series=10, path=path, stage="predict", workers=1 + (path == "ddp"), seconds=s,
                 windows_per_second=10 / s, peak_mib_per_worker=100.0 + k, repeat=k + 1, command="x", commit="y",
                 date="z") for path, seconds in runs.items() for k, s in enumerate(seconds)]
    text = render(rows, "# header")
    assert "| c | predict | one | 3 | 3.00 | 2.00 | 4.00 | 3.33 | 102.00 | 1.00 |" in text
    assert "| c | predict | ddp | 3 | 2.00 | 1.00 | 6.00 | 5.00 | 102.00 | 1.50 |" in text


def test_process_cost_tables_medians_and_the_median_of_paired_ratios_and_names_a_failed_script(tmp_path):
    from benchmarks.process_cost import run, table

    runs = {"import": {"a": [(1.0, 100.0), (2.0, 110.0), (3.0, 120.0)], "b": [(4.0, 300.0), (2.0, 310.0), (5.0, 320.0)]}}
    assert table(runs, ["a", "b"]).splitlines()[2] == \
        "| import | 2.00 (1.00-3.00) | 4.00 (2.00-5.00) | 0.60x | 110 | 310 |"  # ratios 0.25, 1.0, 0.6
    with pytest.raises(RuntimeError, match=r"(?s)'raise SystemExit\(3\)' failed with .*"):
        run(tmp_path, "raise SystemExit(3)")
    cpu, peak = run(tmp_path, "x = bytearray(200 * 2 ** 20)")
    assert cpu > 0 and peak > 200
