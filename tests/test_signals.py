"""Ctrl-C (SIGINT) and SIGTERM during training, in a script and in the ``tsrec`` command: the run
ends with the conventional status (a KeyboardInterrupt, exit 143 for SIGTERM; the command 130 and
143) and one line saying what was kept, instead of Lightning's exit 0 and nothing said.

Each case runs in its own process and is signalled once training is under way: a callback touches
a marker file in the second epoch (scripts), or the first epoch's checkpoint appears (the command).
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

# every case starts a Python process that imports torch and trains
pytestmark = pytest.mark.slow

# A script's head: a callback that, once training reaches {when}, touches the marker argv[1] and
# waits for the signal (Ctrl-C interrupts the wait; SIGTERM is flagged by Lightning, which stops
# training at the end of the batch).
SIGNAL_ME = """
import sys, time
from pathlib import Path
import lightning.pytorch as pl, numpy as np, pandas as pd, torch
from tsrec import Forecaster

class SignalMe(pl.Callback):
    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if {when}:
            Path(sys.argv[1]).touch()
            deadline = time.monotonic() + 300
            while not trainer.received_sigterm and time.monotonic() < deadline:
                time.sleep(0.01)

torch.set_num_threads(1)
"""

# Fits DLinear on a small frame into output_dir argv[2] ("" for none), signalled in its second epoch.
SCRIPT = SIGNAL_ME.format(when="trainer.current_epoch == 1 and batch_idx == 0") + """
t = np.arange(200)
df = pd.DataFrame({"y": np.sin(t / 4)}, index=pd.date_range("2024-01-01", periods=200, freq="h"))
Forecaster("dlinear", prediction_length=4, context_length=16, max_epochs=50, output_dir=sys.argv[2] or None,
           trainer_kwargs={"enable_progress_bar": False, "callbacks": [SignalMe()]}).fit(df)
print("after fit")
"""

# The default (auto) on data large enough for its networks, signalled at the first network's second step.
AUTO_SCRIPT = SIGNAL_ME.format(when="trainer.global_step == 1") + """
t = np.arange(1200)
df = pd.DataFrame({"y": np.sin(2 * np.pi * t / 24) + t / 600},
                  index=pd.date_range("2024-01-01", periods=1200, freq="h"))
Forecaster(prediction_length=4, trainer_kwargs={"enable_progress_bar": False, "callbacks": [SignalMe()]}).fit(df)
print("after fit")
"""

# The command with Forecaster.fit replaced by a wait: a signal before training starts.
CLI_WAITING = """
import sys, time
from pathlib import Path
from tsrec import cli, forecaster

def wait(self, *args, **kwargs):
    Path(sys.argv[1]).touch()
    time.sleep(300)

forecaster.Forecaster.fit = wait
sys.exit(cli.main(sys.argv[2:]))
"""

TIMEOUT = 300  # seconds for a process to reach the marker or to end: generous, the machine may be loaded


def signal_when(marker: Path, argv: list[str], signum: int, tmp_path: Path) -> tuple[int, str, str]:
    """Run ``argv``, send ``signum`` once ``marker`` exists; its exit status, stdout and stderr."""
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    with out.open("w") as stdout, err.open("w") as stderr:
        # SIGINT at its default in the child: a shell starts background jobs with it ignored, and a
        # Python started with SIGINT ignored never turns it into KeyboardInterrupt.
        process = subprocess.Popen(argv, stdout=stdout, stderr=stderr, env=env,
                                   preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        try:
            deadline = time.monotonic() + TIMEOUT
            while not marker.exists():
                assert process.poll() is None, f"ended before training was under way:\n{err.read_text()}"
                assert time.monotonic() < deadline, f"no {marker} after {TIMEOUT} s"
                time.sleep(0.05)
            process.send_signal(signum)
            process.wait(timeout=TIMEOUT)
        finally:
            process.kill()  # a no-op once it has ended
    return process.returncode, out.read_text(), err.read_text()


def test_sigterm_ends_a_script_with_status_143_and_one_line_naming_the_checkpoint(tmp_path):
    output_dir = tmp_path / "run"
    code, out, err = signal_when(tmp_path / "marker", [sys.executable, "-c", SCRIPT, str(tmp_path / "marker"),
                                                       str(output_dir)], signal.SIGTERM, tmp_path)
    checkpoint = output_dir / "checkpoints" / "last.ckpt"
    assert code == 143
    assert err.splitlines() == [f"interrupted by SIGTERM: kept the checkpoint of the last finished epoch, {checkpoint}; "
                                "fit again with resume=True ('tsrec fit ... --resume') to continue from it"]
    assert "after fit" not in out and checkpoint.is_file()


def test_ctrl_c_raises_keyboard_interrupt_from_fit_after_saying_nothing_was_kept(tmp_path):
    code, out, err = signal_when(tmp_path / "marker", [sys.executable, "-c", SCRIPT, str(tmp_path / "marker"), ""],
                                 signal.SIGINT, tmp_path)
    line = "interrupted by Ctrl-C (SIGINT): nothing kept: checkpoints are written only when output_dir is set"
    assert code == -signal.SIGINT  # an uncaught KeyboardInterrupt: Python ends by SIGINT (130 in a shell)
    lines = err.splitlines()
    assert lines[0] == line and lines[-1] == f"KeyboardInterrupt: {line}"
    assert "after fit" not in out


def test_sigterm_during_autos_networks_says_nothing_was_kept_without_advising_resume(tmp_path):
    """auto's networks train in its own temporary folder, removed as the signal ends its fit, and
    auto refuses resume=True: the line says so instead of naming a checkpoint."""
    from tsrec.candidates import UNKEPT

    code, out, err = signal_when(tmp_path / "marker", [sys.executable, "-c", AUTO_SCRIPT, str(tmp_path / "marker")],
                                 signal.SIGTERM, tmp_path)
    assert code == 143
    assert f"interrupted by SIGTERM: nothing kept: {UNKEPT}" in err.splitlines()
    assert "resume=True" not in err and "after fit" not in out


@pytest.fixture(scope="module")
def wide_csv(tmp_path_factory):
    index = pd.date_range("2024-01-01", periods=150, freq="h")
    path = tmp_path_factory.mktemp("data") / "wide.csv"
    pd.DataFrame({"date": index, "load": np.sin(np.arange(150) / 4)}).to_csv(path, index=False)
    return path


@pytest.mark.parametrize("signum, code, name", [(signal.SIGTERM, 143, "SIGTERM"),
                                                (signal.SIGINT, 130, "Ctrl-C (SIGINT)")], ids=["SIGTERM", "SIGINT"])
def test_a_signal_ends_tsrec_fit_with_its_status_and_one_line(signum, code, name, wide_csv, tmp_path):
    model = tmp_path / "model"
    checkpoint = tmp_path / ".model.training" / "checkpoints" / "last.ckpt"  # written after the first epoch
    argv = [sys.executable, "-m", "tsrec.cli", "fit", "--data", str(wide_csv), "--model", "dlinear",
            "--prediction-length", "8", "--epochs", "10000", "--option", "patience=null", "--output", str(model)]
    status, out, err = signal_when(checkpoint, argv, signum, tmp_path)
    assert status == code
    assert err.splitlines() == [f"tsrec: interrupted by {name}: kept the checkpoint of the last finished epoch, "
                                f"{checkpoint}; fit again with resume=True ('tsrec fit ... --resume') to continue "
                                "from it"]
    assert out == "" and not model.exists() and checkpoint.is_file()


def test_sigterm_before_training_ends_tsrec_with_143_and_one_line(wide_csv, tmp_path):
    argv = [sys.executable, "-c", CLI_WAITING, str(tmp_path / "marker"), "fit", "--data", str(wide_csv),
            "--model", "dlinear", "--prediction-length", "8", "--output", str(tmp_path / "model")]
    status, out, err = signal_when(tmp_path / "marker", argv, signal.SIGTERM, tmp_path)
    assert status == 143 and err.splitlines() == ["tsrec: interrupted by SIGTERM"] and out == ""


def test_training_terminated_stops_a_pytest_run_like_ctrl_c(tmp_path):
    """pytest reports a SystemExit as one failed test and goes on; a KeyboardInterrupt ends the run."""
    (tmp_path / "test_stop.py").write_text(
        "from tsrec.training import TrainingTerminated\n"
        "def test_terminated():\n    raise TrainingTerminated('interrupted by SIGTERM', None)\n"
        "def test_after():\n    pass\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", str(tmp_path / "test_stop.py")],
                          capture_output=True, text=True, timeout=TIMEOUT, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout  # pytest's status for an interrupted run
    assert "TrainingTerminated: interrupted by SIGTERM" in proc.stdout and "no tests ran" in proc.stdout
