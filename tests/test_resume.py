"""Resumable training and divergence: a fit killed with SIGKILL resumes from its last epoch's
checkpoint to exactly the model of an uninterrupted run; a resume that does not match its checkpoint
is refused; a diverging fit stops with an error and no model."""

import json
import os
import signal
import subprocess
import sys
import time

import lightning.pytorch as pl
import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.exceptions import NotFittedError

from tsrec import Forecaster
from tsrec.training import EpochCheckpoint, EpochShuffleSampler, TrainingDiverged, epoch_seed

QUIET = {"enable_progress_bar": False, "logger": False}
# A tiny PatchTST with dropout, shuffled windows and a halving learning rate whose best epoch is the
# second, so that early stopping ends it after the fourth: every kind of state a resumed run must
# restore (weights, Adam, schedule, best weights, early stopping, history, RNG) matters.
SETTINGS = {"model": "patchtst", "prediction_length": 4, "context_length": 16, "max_epochs": 10, "patience": 2,
            "lr_schedule": "halve", "learning_rate": 3e-2, "d_model": 8, "n_heads": 2, "e_layers": 1, "d_ff": 8,
            "dropout": 0.3, "seed": 2}

# Trains SETTINGS on the pickled frame argv[2] into output_dir argv[3]; in the third epoch, after one
# training step, it touches the marker argv[4] and hangs until it is killed.
TRAIN_UNTIL_KILLED = """
import json, sys, time
from pathlib import Path
import lightning.pytorch as pl, pandas as pd, torch
from tsrec import Forecaster

class HangInThirdEpoch(pl.Callback):
    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if trainer.current_epoch == 2 and batch_idx == 1:
            Path(sys.argv[4]).touch()
            time.sleep(600)

torch.set_num_threads(1)
settings = json.loads(sys.argv[1])
trainer_kwargs = {"enable_progress_bar": False, "logger": False, "callbacks": [HangInThirdEpoch()]}
Forecaster(**settings, output_dir=sys.argv[3], trainer_kwargs=trainer_kwargs).fit(pd.read_pickle(sys.argv[2]))
"""


def hourly(n=240, seed=0):
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    return pd.DataFrame({"y": np.sin(2 * np.pi * t / 24) + 0.5 * rng.standard_normal(n)},
                        index=pd.date_range("2024-01-01", periods=n, freq="h"))


def checkpoint_epochs(output_dir):
    """How many epochs the checkpoint in ``output_dir`` has finished."""
    checkpoint = torch.load(output_dir / "checkpoints" / EpochCheckpoint.FILENAME, weights_only=True)
    return len(checkpoint["tsrec_history"])


def kill_in_third_epoch(df, output_dir, tmp_path):
    """Start a fit of SETTINGS in another process, SIGKILL it in the middle of its third epoch."""
    data, marker = tmp_path / "df.pkl", tmp_path / "hanging"
    df.to_pickle(data)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen([sys.executable, "-c", TRAIN_UNTIL_KILLED, json.dumps(SETTINGS), str(data),
                                str(output_dir), str(marker)], env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert process.poll() is None, f"the training process ended early:\n{process.stderr.read()}"
            assert time.monotonic() < deadline, "the training process did not reach its third epoch in 120 s"
            time.sleep(0.1)
        process.send_signal(signal.SIGKILL)
        assert process.wait(timeout=30) == -signal.SIGKILL
    finally:
        process.kill()
        process.stderr.close()


def test_a_fit_killed_mid_epoch_resumes_to_exactly_the_uninterrupted_model(tmp_path, one_thread):
    df = hourly()
    killed = tmp_path / "killed"
    kill_in_third_epoch(df, killed, tmp_path)
    assert checkpoint_epochs(killed) == 2  # the last finished epoch; the third was cut off mid-way
    resumed = Forecaster(**SETTINGS, output_dir=killed, trainer_kwargs=QUIET).fit(df, resume=True)
    whole = Forecaster(**SETTINGS, output_dir=tmp_path / "whole", trainer_kwargs=QUIET).fit(df)

    expected, got = whole.model.state_dict(), resumed.model.state_dict()
    assert expected.keys() == got.keys()
    assert all(torch.equal(expected[name], got[name]) for name in expected)
    pd.testing.assert_frame_equal(resumed.predict(), whole.predict(), check_exact=True)
    pd.testing.assert_frame_equal(resumed.training_summary.history.drop(columns="seconds"),
                                  whole.training_summary.history.drop(columns="seconds"), check_exact=True)
    summary = resumed.training_summary
    assert summary.best_epoch == whole.training_summary.best_epoch
    assert summary.best_epoch <= 2 < summary.epochs_run < SETTINGS["max_epochs"]  # both decided after the kill
    assert checkpoint_epochs(killed) == summary.epochs_run  # the checkpoints stay after a fit


def test_resuming_a_finished_run_trains_no_further(tmp_path, one_thread):
    """Early stopping ends this run before max_epochs; resuming from its last checkpoint stops too
    (Lightning does not save that a callback stopped training: tsrec's checkpoint does)."""
    settings = {**SETTINGS, "max_epochs": 30, "patience": 1, "learning_rate": 0.3}
    whole = Forecaster(**settings, output_dir=tmp_path, trainer_kwargs=QUIET).fit(hourly())
    assert whole.training_summary.epochs_run < 30
    again = Forecaster(**settings, output_dir=tmp_path, trainer_kwargs=QUIET).fit(hourly(), resume=True)
    pd.testing.assert_frame_equal(again.training_summary.history, whole.training_summary.history)
    assert all(torch.equal(v, again.model.state_dict()[k]) for k, v in whole.model.state_dict().items())


def test_epoch_orders_depend_on_the_seed_and_the_epoch_only():
    sampler = EpochShuffleSampler(50, seed=3)
    orders = []
    for epoch in (0, 1, 0):
        sampler.set_epoch(epoch)
        orders.append(list(sampler))
    assert orders[0] == orders[2] != orders[1] and sorted(orders[0]) == list(range(50))
    fresh = EpochShuffleSampler(50, seed=3)
    fresh.set_epoch(1)
    assert list(fresh) == orders[1]
    assert epoch_seed(3, 1) == epoch_seed(3, 1) != epoch_seed(3, 2) != epoch_seed(4, 1)


# ------------------------------------------------------------------------------------ refused resumes
@pytest.fixture
def one_epoch_run(tmp_path, one_thread):
    """The output_dir of a finished one-epoch DLinear fit, and its settings."""
    settings = {"model": "dlinear", "prediction_length": 4, "context_length": 16, "max_epochs": 1,
                "learning_rate": 1e-3}
    Forecaster(**settings, output_dir=tmp_path / "run", trainer_kwargs=QUIET).fit(hourly())
    return tmp_path / "run", settings


def test_resume_needs_a_checkpoint_of_the_same_settings_and_data(one_epoch_run, tmp_path):
    output_dir, settings = one_epoch_run
    with pytest.raises(ValueError, match=r"settings\.training\.learning_rate is 0\.002 here but 0\.001 in the checkpoint"):
        Forecaster(**{**settings, "learning_rate": 2e-3}, output_dir=output_dir).fit(hourly(), resume=True)
    with pytest.raises(ValueError, match=r"settings\.window\.prediction_length is 5 here but 4.*"
                                         r"Fit with the settings and data of that run, or without resume=True"):
        Forecaster(**{**settings, "prediction_length": 5}, output_dir=output_dir).fit(hourly(), resume=True)
    changed = hourly()
    changed.iloc[3, 0] += 1e-6
    with pytest.raises(ValueError, match=r"cannot resume from .*last\.ckpt.*: data has other values"):
        Forecaster(**settings, output_dir=output_dir).fit(changed, resume=True)
    with pytest.raises(ValueError, match=r"data\.steps is 200 here but 240"):
        Forecaster(**settings, output_dir=output_dir).fit(hourly().iloc[:200], resume=True)
    with pytest.raises(ValueError, match=r"no checkpoint to resume from: .*empty.*last\.ckpt does not exist"):
        Forecaster(**settings, output_dir=tmp_path / "empty").fit(hourly(), resume=True)
    with pytest.raises(ValueError, match="resume=True needs the output_dir of the run to resume"):
        Forecaster(**settings).fit(hourly(), resume=True)
    with pytest.raises(ValueError, match="'seasonal_naive' needs no training, so there is no run to resume"):
        Forecaster("seasonal_naive", prediction_length=4, output_dir=output_dir).fit(hourly(), resume=True)
    (output_dir / "checkpoints" / "last.ckpt").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="last.ckpt is not a readable tsrec training checkpoint"):
        Forecaster(**settings, output_dir=output_dir).fit(hourly(), resume=True)


def test_a_failed_checkpoint_write_leaves_the_previous_checkpoint_whole(one_epoch_run, monkeypatch):
    output_dir, settings = one_epoch_run
    last = output_dir / "checkpoints" / EpochCheckpoint.FILENAME
    before = last.read_bytes()

    def write_half_then_fail(trainer, filepath, weights_only=None, storage_options=None):
        with open(filepath, "wb") as file:
            file.write(before[: len(before) // 2])
        raise OSError("no space left on device")

    monkeypatch.setattr(pl.Trainer, "save_checkpoint", write_half_then_fail)
    with pytest.raises(OSError, match="no space left"):
        Forecaster(**settings, output_dir=output_dir, trainer_kwargs=QUIET).fit(hourly())
    assert last.read_bytes() == before
    monkeypatch.undo()
    resumed = Forecaster(**settings, output_dir=output_dir, trainer_kwargs=QUIET).fit(hourly(), resume=True)
    assert resumed.training_summary.epochs_run == 1


def test_ctrl_c_just_after_the_first_checkpoint_says_it_was_kept(tmp_path, monkeypatch, one_thread):
    """A Ctrl-C that lands after the first epoch's checkpoint is renamed into place, before the trainer
    counts that epoch finished, still names the checkpoint (it is whole); a file an earlier fit
    left at that path is not this fit's: without one of its own, nothing was kept."""
    written = EpochCheckpoint.on_train_epoch_end

    def write_then_interrupt(self, trainer, pl_module):
        written(self, trainer, pl_module)
        assert trainer.current_epoch == 0
        raise KeyboardInterrupt

    monkeypatch.setattr(EpochCheckpoint, "on_train_epoch_end", write_then_interrupt)
    output_dir = tmp_path / "run"
    last = output_dir / "checkpoints" / EpochCheckpoint.FILENAME
    with pytest.raises(KeyboardInterrupt, match=f"kept the checkpoint of the last finished epoch, {last}"):
        Forecaster(**SETTINGS, output_dir=output_dir, trainer_kwargs=QUIET).fit(hourly())
    assert checkpoint_epochs(output_dir) == 1

    def interrupt(self, trainer, pl_module):
        raise KeyboardInterrupt

    monkeypatch.setattr(EpochCheckpoint, "on_train_epoch_end", interrupt)  # the earlier fit's file stays
    with pytest.raises(KeyboardInterrupt, match="nothing kept: no epoch had finished"):
        Forecaster(**SETTINGS, output_dir=output_dir, trainer_kwargs=QUIET).fit(hourly())


# ------------------------------------------------------------------------------------ divergence
def test_a_diverging_fit_stops_with_an_error_naming_the_learning_rate_the_epoch_and_the_fix(one_thread):
    f = Forecaster("dlinear", prediction_length=4, context_length=16, max_epochs=3, learning_rate=1e4,
                   trainer_kwargs=QUIET)
    with pytest.raises(TrainingDiverged, match=r"diverged in epoch 1 at learning_rate=10000: the mean training "
                                               r"loss reached .*Lower learning_rate .* or set gradient_clip_val"):
        f.fit(hourly())
    assert issubclass(TrainingDiverged, ValueError)
    assert f.model is None and f.training_summary is None
    with pytest.raises(NotFittedError):
        f.predict()


class PoisonSecondEpoch(pl.Callback):
    """Makes one weight NaN at the start of the second epoch."""

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        if trainer.current_epoch == 1:
            with torch.no_grad():
                next(pl_module.parameters()).view(-1)[0] = float("nan")


def test_a_non_finite_loss_stops_training_before_its_epoch_is_checkpointed(tmp_path, one_thread):
    f = Forecaster("dlinear", prediction_length=4, context_length=16, max_epochs=3, gradient_clip_val=5.0,
                   output_dir=tmp_path, trainer_kwargs={**QUIET, "callbacks": [PoisonSecondEpoch()]})
    with pytest.raises(TrainingDiverged, match=r"epoch 2 .*the training loss became nan.*smaller gradient_clip_val "
                                               r"than 5"):
        f.fit(hourly())
    assert f.model is None
    assert checkpoint_epochs(tmp_path) == 1
