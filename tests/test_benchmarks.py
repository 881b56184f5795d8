"""Smoke test of the benchmark harness (``--quick``) on the real ETTh1 file, and its table rendering."""

import csv
from pathlib import Path

import pytest

from benchmarks import run

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
