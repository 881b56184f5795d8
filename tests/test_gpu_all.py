"""benchmarks/gpu_all.sh and benchmarks.gpu_all (issue 40): the one call a lent GPU machine runs. Its
budget (stages stopped with their worker processes at their deadlines, runs not started that would end
past them, the cheapest settings first) and, slow, the whole script rehearsed on the CPU from a bundle
installed offline into a stand-in of the GPU machine's image."""

import argparse
import csv
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks import gpu_all, gpu_bundle, run
from benchmarks.common import ROOT
from tests.shared_data import SHARED_DATASETS

DATA = SHARED_DATASETS
REHEARSED = ("ETTh1.csv", "WTH.csv", "weather.csv")


def table1_settings():
    config = run.load_config(ROOT / gpu_all.TABLE1)
    return config, run.selected_runs(config, argparse.Namespace(dataset=None, horizon=None, model=None))


def test_cost_order_takes_the_settings_with_the_least_training_work_first_and_a_settings_models_together():
    config, settings = table1_settings()
    ordered = run.ordered(config, settings, "cost")
    assert sorted(ordered) == sorted(settings) and run.ordered(config, settings, "config") == settings
    pairs = [(s.dataset, s.horizon) for s in ordered]
    assert all(pairs[i] == pairs[i + 1] for i in range(0, len(pairs), 2))
    assert [s.model for s in ordered[:2]] == ["informer", "rsa_informer"]
    work = [run.training_work(config, s) for s in ordered]
    assert work == sorted(work)
    assert pairs[0] in {("ETTh1", 24), ("ETTh2", 24)} and pairs[-1] == ("ETTm1", 288)
    # work = training windows x (input + label + horizon) x epochs, by hand for ETTh1-24: 8,569 windows
    assert run.training_work(config, ordered[0]) == 8569 * (48 + 48 + 24) * 6


def test_pace_fits_a_fixed_cost_and_a_cost_per_unit_of_work():
    config, settings = table1_settings()
    pace = run.Pace(config)
    runs = [run.Run(*s[:3], 0, *s[3:]) for s in run.ordered(config, settings, "cost")]
    assert pace.projected_end(runs[0], 100.0) is None
    small, large = runs[0], runs[-1]
    pace.finished(small, 30.0)
    assert pace.seconds(2 * pace.work(small)) == pytest.approx(60.0)  # one run: its seconds per unit
    pace.finished(large, 20.0 + 1e-6 * pace.work(large))
    pace.finished(runs[10], 20.0 + 1e-6 * pace.work(runs[10]))
    pace.done[0] = (pace.work(small), 20.0 + 1e-6 * pace.work(small))
    assert pace.seconds(1e8) == pytest.approx(20.0 + 100.0)
    assert pace.projected_end(runs[5], 1000.0) == pytest.approx(1000.0 + 20.0 + 1e-6 * pace.work(runs[5]))


def test_a_batch_starts_no_run_that_would_end_past_its_deadline(monkeypatch, tmp_path):
    config, settings = table1_settings()
    runs = [run.Run(*s[:3], 0, *s[3:]) for s in run.ordered(config, settings, "cost")][:4]
    done = []

    def fake_run(batch, one):
        time.sleep(0.2)
        done.append(one)

    monkeypatch.setattr(run, "run_and_append", fake_run)
    batch = run.Batch(config, tmp_path / "x.csv", None, True, "cmd", "abc")
    # the first run takes 0.2 s for the least work; the next three (more work each) would end past a deadline
    # 0.3 s away: not started, and returned in order
    failed, late = run.run_batch(batch, runs, 1, deadline=time.time() + 0.3)
    assert failed == [] and done == runs[:1] and late == runs[1:]
    done.clear()
    failed, late = run.run_batch(batch, runs, 1, deadline=time.time() + 3600)
    assert done == runs and late == []


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, ended and not yet reaped by whoever adopted it, does not)."""
    for _ in range(20):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return False
        if state == "Z":
            return False
        time.sleep(0.1)
    return True


def plan_of(tmp_path, stage_list, budget):
    out, work = tmp_path / "out", tmp_path / "work"
    out.mkdir()
    work.mkdir()
    return gpu_all.Plan(stage_list, budget, work, out, rehearse=True)


def test_a_stage_past_its_deadline_is_stopped_with_its_children_and_its_results_kept(tmp_path, monkeypatch):
    """The second stage writes a result, starts a child that would outlive it, and sleeps past its limit:
    both are stopped at the deadline, the result is copied to OUT, and the last stage, left with too little
    of the budget, is skipped; the summary says so."""
    monkeypatch.setattr(gpu_all, "MIN_STAGE_S", 2.0)
    monkeypatch.setattr(gpu_all, "GRACE_S", 1.0)
    monkeypatch.setattr(gpu_all, "COPY_EVERY_S", 0.2)
    pid_file = tmp_path / "child.pid"
    python = sys.executable
    writer = f"open({str(tmp_path / 'work' / 'paper_table.csv')!r}, 'w').write('a,b\\n1,2\\n')"
    hanger = (f"{writer}; import subprocess, sys, time; "
              f"child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
              f"open({str(pid_file)!r}, 'w').write(str(child.pid)); time.sleep(60)")
    stage_list = [gpu_all.Stage("quick", [python, "-c", "print('hello')"], 5.0),
                  gpu_all.Stage("hangs", [python, "-c", hanger], 3.0),
                  gpu_all.Stage("late", [python, "-c", "print('never')"], None, reserve_s=4.0)]
    plan = plan_of(tmp_path, stage_list, budget=9.0)
    started = time.time()
    assert gpu_all.run(plan, started, ["out"]) == 1  # a stage was stopped
    assert time.time() - started < 9.0
    assert [(e.name, e.status) for e in plan.ended] == [("quick", "ok"), ("hangs", "stopped"), ("late", "skipped")]
    assert (plan.out / "paper_table.csv").read_text() == "a,b\n1,2\n"
    assert not alive(int(pid_file.read_text()))
    summary = json.loads((plan.out / gpu_all.SUMMARY).read_text())
    assert [s["status"] for s in summary["stages"]] == ["ok", "stopped", "skipped"]
    assert summary["stages"][2]["why"].endswith("s left of the budget") and summary["budget_s"] == 9.0
    log = (plan.out / gpu_all.LOG).read_text()
    assert "hello" in log and "===== hangs: stopped" in log and "never" not in log


def test_the_gpu_call_runs_the_issues_stages_in_order_within_the_budget():
    end = time.time() + gpu_all.BUDGET_S
    stage_list = gpu_all.stages(Path("/w"), jobs=12, threads=1, rehearse=False, end=end)
    assert [s.name for s in stage_list] == ["gpu_tests", "table1", "speed", "speed_compiled", "study_lookback"]
    tests, table1, speed, compiled = stage_list[:4]
    assert tests.limit_s == 60 and speed.limit_s == 60 and "--device" in speed.argv and "cuda" in speed.argv
    assert compiled.limit_s == gpu_all.COMPILED_S and compiled.argv[compiled.argv.index("--compile") + 1] == "on"
    lengths = speed.argv[speed.argv.index("--lengths") + 1:speed.argv.index("--budget-minutes")]
    assert lengths == ["48", "96", "336", "720", "1440"] and "rsa_patchtst" in speed.argv
    assert table1.reserve_s == gpu_all.SPEED_S + gpu_all.COMPILED_S + gpu_all.MARGIN_S
    argv = table1.argv
    assert argv[argv.index("--deadline") + 1] == f"{end - table1.reserve_s:.0f}"
    assert "--quick" not in argv and argv[argv.index("--precision") + 1] == "bf16-mixed"
    assert argv[argv.index("--order") + 1] == "cost" and argv[argv.index("--seeds") + 1] == "0"
    assert len(gpu_all.RESULT_FILES) + 2 <= 8  # what one device call brings back
    # --stages: some stages in another order; a stage without a limit keeps the limits of those after it
    table1, speed, tests = gpu_all.stages(Path("/w"), jobs=6, threads=1, rehearse=False, end=end,
                                          names=("table1", "speed", "gpu_tests"))
    assert table1.reserve_s == gpu_all.MARGIN_S + gpu_all.SPEED_S + gpu_all.TESTS_S
    assert table1.argv[table1.argv.index("--deadline") + 1] == f"{end - table1.reserve_s:.0f}"
    assert table1.argv[table1.argv.index("--jobs") + 1] == "6" and tests.reserve_s == gpu_all.MARGIN_S


@pytest.mark.slow
@pytest.mark.shared_datasets(*REHEARSED)
def test_the_whole_call_rehearsed_on_the_cpu_from_a_bundle_installed_offline_in_the_gpu_image(tmp_path):
    """The bundle built for this Python (its wheels from PyPI, as for the GPU), installed offline by
    gpu_all.sh into a clean folder, and every stage run at toy size by an interpreter that sees only the
    GPU image's packages (``-S``, image_site) beside the bundle's: no GluonTS, no tsrec install."""
    bundle, out = tmp_path / "bundle", tmp_path / "out"
    infos = [run_info(name) for name in REHEARSED]
    gpu_bundle.build(bundle, infos, DATA, gpu_bundle.pinned(), python_version=f"{sys.version_info[0]}.{sys.version_info[1]}")
    missing = gpu_bundle.image_site(tmp_path / "image")
    assert "torch" not in missing and "lightning" not in missing
    interpreter = tmp_path / "python"
    interpreter.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    interpreter.chmod(0o755)
    env = {key: value for key, value in os.environ.items() if key not in ("TSREC_DATA_DIR", "PYTHONPATH")}
    env.update(PYTHON=str(interpreter), SITE=str(tmp_path / "site"), PYTHONPATH=str(tmp_path / "image"),
               XDG_CACHE_HOME=str(tmp_path / "cache"), OMP_NUM_THREADS="1")
    done = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_all.sh"), str(bundle), str(out), "--rehearse",
                           "--jobs", "2"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500)
    log = (out / gpu_all.LOG).read_text() if (out / gpu_all.LOG).exists() else ""
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:] + log[-5000:]
    assert (tmp_path / "site" / "gluonts").is_dir()
    summary = json.loads((out / gpu_all.SUMMARY).read_text())
    assert [(s["name"], s["status"]) for s in summary["stages"]] == [
        ("gpu_tests", "ok"), ("table1", "ok"), ("speed", "ok"), ("speed_compiled", "ok"), ("study_lookback", "ok")]
    assert summary["rehearse"] and summary["seconds"] <= summary["budget_s"]
    table = list(csv.DictReader((out / "paper_table.csv").open()))
    assert sorted((r["dataset"], r["horizon"], r["model"]) for r in table) == sorted(
        (d, h, m) for d in ("ETTh1", "WTH") for h in ("24", "48") for m in ("informer", "rsa_informer"))
    assert all(r["precision"] == "bf16-mixed" and float(r["mse"]) > 0 for r in table)
    assert len(list(csv.DictReader((out / "long_lookback_five.csv").open()))) == 4
    assert list(csv.DictReader((out / "speed.csv").open())) and list(csv.DictReader((out / "speed_compiled.csv").open()))
    assert re.search(r"=+ \d+ skipped, \d+ deselected in ", log)  # the GPU tests collected (they skip on a CPU)


def run_info(filename):
    from tsrec.datasets import get_info

    return get_info(filename.removesuffix(".csv"))
