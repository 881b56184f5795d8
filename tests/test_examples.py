"""Every script in examples/ runs end to end with tiny settings (TSREC_EXAMPLE_TINY=1), in a subprocess.
The four that train (5-9 s each) are marked slow, for the default run's 5 minutes: the paths they
walk are tested beside their code (test_cli's quickstart, test_forecaster, test_plotting,
test_datasets' ETTh1 loader, test_evaluation's backtests), and `.ci/run` runs them, with the ETTh1
example's error without its file (a fresh interpreter, 6 s)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.shared_data import SHARED_DATASETS

ROOT = Path(__file__).resolve().parents[1]


def run_example(name: str, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TSREC_EXAMPLE_TINY": "1"}
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / name), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.mark.slow
def test_quickstart_example(tmp_path):
    proc = run_example("quickstart.py", tmp_path, "--output", "out")
    assert "seasonal_naive" in proc.stdout and "mse_ratio" in proc.stdout and "half_life_hours" in proc.stdout
    for name in ("forecast.csv", "forecast.png", "skill.png", "gates.png"):
        assert (tmp_path / "out" / name).stat().st_size > 0
    header = (tmp_path / "out" / "forecast.csv").read_text().splitlines()[0]
    assert header == "item_id,timestamp,mean,0.025,0.1,0.9,0.975"


@pytest.mark.slow
def test_own_dataframe_example(tmp_path):
    proc = run_example("own_dataframe.py", tmp_path, "--output", "out")
    assert "forecast from the newest data starts at" in proc.stdout and "mse" in proc.stdout
    assert "interval_coverage_95" in proc.stdout and "mse_ratio" in proc.stdout
    for name in ("forecast.png", "backtest.png"):
        assert (tmp_path / "out" / name).stat().st_size > 0


@pytest.mark.slow
def test_gate_plots_example(tmp_path):
    proc = run_example("gate_plots.py", tmp_path, "--output", "out")
    assert "recurrent: mean gate" in proc.stdout and "noise: mean gate" in proc.stdout
    for case in ("recurrent", "noise"):
        for figure in ("gates", "rem", "gate-history"):
            assert (tmp_path / "out" / f"{figure}-{case}.png").stat().st_size > 0


@pytest.mark.slow
@pytest.mark.shared_datasets("ETTh1.csv")
def test_informer_vs_rsa_etth1_example(tmp_path):
    proc = run_example("informer_vs_rsa_etth1.py", tmp_path, "--data-dir", str(SHARED_DATASETS))
    assert "informer: 16 test windows" in proc.stdout and "rsa_informer: 16 test windows" in proc.stdout
    assert "RSA-Informer's test MSE is" in proc.stdout


@pytest.mark.slow  # 6 s: a fresh interpreter importing torch for one error
def test_informer_vs_rsa_etth1_example_without_the_file(tmp_path):
    env = {**os.environ, "TSREC_EXAMPLE_TINY": "1", "XDG_CACHE_HOME": str(tmp_path / "cache")}
    env.pop("TSREC_DATA_DIR", None)
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "informer_vs_rsa_etth1.py"), "--data-dir",
                           str(tmp_path)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1
    assert proc.stderr.startswith("ETTh1.csv not found") and "Traceback" not in proc.stderr
