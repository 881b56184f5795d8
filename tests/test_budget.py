"""The training budget (steps scaled to the data, epochs, a time limit), early stopping on a smoothed
validation loss, the cosine schedule, and the refit on all the history."""

from __future__ import annotations

import math

import lightning.pytorch as pl
from lightning.pytorch.callbacks import EarlyStopping
import numpy as np
import pandas as pd
import pytest
import torch

from tsrec import Forecaster
from tsrec.config import TrainingConfig
from tsrec.training import SmoothedEarlyStopping, cosine_lr_factor, plan_budget, refit_budget
from tsrec.training.budget import BUDGET_EPOCHS, COSINE_FLOOR, MAX_STEPS, MIN_STEPS, VAL_CHECKS, auto_steps

QUIET = {"enable_progress_bar": False, "logger": False}


def hourly(n=240, seed=0):
    t = np.arange(n)
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"y": 5 + np.sin(2 * np.pi * t / 24) + 0.1 * rng.standard_normal(n)},
                        index=pd.date_range("2024-01-01", periods=n, freq="h"))


# ------------------------------------------------------------------------------------ arithmetic
@pytest.mark.parametrize(("windows", "steps"), [(10, MIN_STEPS), (32 * 60, BUDGET_EPOCHS * 60), (10**7, MAX_STEPS)])
def test_the_default_budget_is_passes_over_the_windows_within_bounds(windows, steps):
    assert auto_steps(windows, 32) == steps
    budget = plan_budget(TrainingConfig(), windows)
    assert (budget.max_steps, budget.max_epochs, budget.schedule_steps) == (steps, None, steps)
    assert budget.val_check_steps == math.ceil(steps / VAL_CHECKS)


def test_an_epoch_budget_validates_every_epoch_and_a_step_budget_is_kept():
    epochs = plan_budget(TrainingConfig(max_epochs=3), 100)
    assert (epochs.max_epochs, epochs.max_steps, epochs.val_check_steps, epochs.steps_per_epoch) == (3, None, None, 4)
    assert epochs.total_steps == epochs.schedule_steps == 12
    both = plan_budget(TrainingConfig(max_epochs=3, max_steps=5), 100)
    assert both.total_steps == both.schedule_steps == 5
    steps = plan_budget(TrainingConfig(max_steps=77), 100)
    assert (steps.max_steps, steps.max_epochs, steps.val_check_steps) == (77, None, 4)


def test_a_step_cap_inside_the_first_epoch_of_an_epoch_budget_still_validates():
    """max_epochs with a max_steps shorter than one epoch: validated VAL_CHECKS times within the
    steps (once per epoch would never validate, and early stopping would find no val_loss)."""
    budget = plan_budget(TrainingConfig(max_epochs=2, max_steps=8, batch_size=10), 1000)  # 100 steps per epoch
    assert (budget.total_steps, budget.val_check_steps) == (8, math.ceil(8 / VAL_CHECKS))
    assert plan_budget(TrainingConfig(max_epochs=2, max_steps=150, batch_size=10), 1000).val_check_steps is None
    t = np.arange(240)
    df = pd.DataFrame({"y": np.sin(2 * np.pi * t / 24)}, index=pd.date_range("2024", periods=240, freq="h"))
    f = Forecaster("dlinear", prediction_length=6, context_length=24, max_epochs=2, max_steps=2, seed=0,
                   trainer_kwargs={"enable_progress_bar": False}).fit(df)
    assert f.training_summary.budget["steps_run"] == 2 and f.training_summary.best_step is not None


def test_the_refit_makes_as_many_passes_as_the_picked_run():
    budget = plan_budget(TrainingConfig(max_steps=1000), 3200)
    refit = refit_budget(budget, best_step=300, best_epoch=3, train_windows=3200, full_windows=4000, batch_size=32)
    assert (refit.max_steps, refit.max_epochs, refit.val_check_steps) == (375, None, None)
    assert refit.schedule_steps == 1250  # the schedule stretched alike, so the rate follows the same course
    epochs = refit_budget(plan_budget(TrainingConfig(max_epochs=10), 3200), best_step=300, best_epoch=3,
                          train_windows=3200, full_windows=4000, batch_size=32)
    assert (epochs.max_steps, epochs.max_epochs) == (None, 3)


def test_budget_settings_are_checked():
    for bad in ({"max_steps": 0}, {"max_epochs": 1.5}, {"time_limit": 0}, {"time_limit": "1h"}):
        with pytest.raises((ValueError, TypeError), match=next(iter(bad))):
            TrainingConfig(**bad)
    with pytest.raises(TypeError, match="refit_full must be True or False"):
        TrainingConfig(refit_full="yes")


def test_the_cosine_schedule_runs_from_the_rate_to_its_floor():
    assert cosine_lr_factor(0, 100) == 1.0
    assert cosine_lr_factor(50, 100) == pytest.approx((1 + COSINE_FLOOR) / 2)
    assert cosine_lr_factor(100, 100) == cosine_lr_factor(500, 100) == pytest.approx(COSINE_FLOOR)
    factors = [cosine_lr_factor(s, 100) for s in range(101)]
    assert all(a >= b for a, b in zip(factors, factors[1:]))


class StepRates(pl.Callback):
    def __init__(self) -> None:
        self.rates: list[float] = []

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self.rates.append(trainer.optimizers[0].param_groups[0]["lr"])


def test_a_cosine_schedule_decays_per_step_over_the_budget():
    record = StepRates()
    f = Forecaster("dlinear", prediction_length=4, context_length=16, max_steps=40, lr_schedule="cosine",
                   learning_rate=1e-2, patience=None, refit_full=False,
                   trainer_kwargs={**QUIET, "callbacks": [record]}).fit(hourly())
    assert f.training_summary.budget["steps_run"] == len(record.rates) == 40
    np.testing.assert_allclose(record.rates, [1e-2 * cosine_lr_factor(s, 40) for s in range(40)], rtol=1e-6)


# ------------------------------------------------------------------------------------ early stopping
def test_smoothed_early_stopping_is_not_fooled_by_one_lucky_check():
    """Validation losses falling by 0.05 a check after one lucky check (0.7): plain early stopping
    with patience 3 stops at the fifth check (three checks without beating 0.7); on the moving average
    (1.0, 0.85, 0.85, 0.825, 0.7875, 0.74375, 0.696875) the falling trend keeps it going."""
    losses = (1.0, 0.7, 0.85, 0.8, 0.75, 0.7, 0.65)
    plain = EarlyStopping("val_loss", patience=3, mode="min")
    assert [plain._evaluate_stopping_criteria(torch.tensor(v))[0] for v in losses][:5] == [False] * 4 + [True]
    stop = SmoothedEarlyStopping("val_loss", patience=3)
    assert [stop._evaluate_stopping_criteria(torch.tensor(v))[0] for v in losses] == [False] * 7
    assert float(stop.smoothed) == pytest.approx(0.696875)
    restored = SmoothedEarlyStopping("val_loss", patience=3)
    restored.load_state_dict(stop.state_dict())
    assert float(restored.smoothed) == pytest.approx(0.696875) and restored.wait_count == stop.wait_count
    # a loss that keeps rising ends training after `patience` checks
    rising = SmoothedEarlyStopping("val_loss", patience=3)
    assert [rising._evaluate_stopping_criteria(torch.tensor(v))[0] for v in (1.0, 2.0, 3.0, 4.0)] == \
        [False, False, False, True]


# ------------------------------------------------------------------------------------ fit
def test_the_default_fit_trains_a_scaled_step_budget_and_refits_on_all_the_history():
    f = Forecaster("dlinear", prediction_length=4, context_length=16, trainer_kwargs=QUIET).fit(hourly())
    summary, training = f.training_summary, f.resolved_settings.training
    budget = summary.budget
    assert training.max_steps == budget["max_steps"] == auto_steps(budget["train_windows"], 32)
    assert budget["val_check_steps"] == math.ceil(budget["max_steps"] / VAL_CHECKS)
    assert budget["stopped_by"] in ("budget", "early stopping") and budget["steps_run"] <= budget["max_steps"]
    assert 1 <= summary.best_step <= budget["steps_run"]
    full_windows = 240 - 16 - 4 + 1
    assert summary.refit["windows"] == full_windows > budget["train_windows"]
    assert summary.refit["steps"] == math.ceil(summary.best_step * full_windows / budget["train_windows"])
    again = type(summary).from_dict(summary.to_dict())
    assert (again.budget, again.refit, again.best_step) == (summary.budget, summary.refit, summary.best_step)


def test_the_refit_lets_the_last_observations_shape_the_forecast():
    """The validation part (the last 10%) is trained on by the refit: a level shift there moves the
    scaler and the forecast; with refit_full=False it changes neither."""
    df = hourly()
    shifted = df.assign(y=np.r_[df.y.to_numpy()[:-20], df.y.to_numpy()[-20:] + 3.0])
    options = dict(prediction_length=4, context_length=16, max_epochs=2, trainer_kwargs=QUIET)
    for refit in (True, False):
        a, b = (Forecaster("dlinear", refit_full=refit, **options).fit(frame) for frame in (df, shifted))
        moved = not np.array_equal(a.scaler.loc, b.scaler.loc)
        same_weights = all(torch.equal(p, q) for p, q in zip(a.model.parameters(), b.model.parameters()))
        assert moved == refit and same_weights == (not refit)
        assert (a.training_summary.refit is not None) == refit


def test_no_refit_without_validation_or_with_a_separate_validation_frame():
    df = hourly()
    options = dict(prediction_length=4, context_length=16, max_epochs=1, trainer_kwargs=QUIET)
    assert Forecaster("dlinear", val_windows=0, **options).fit(df).training_summary.refit is None
    assert Forecaster("dlinear", **options).fit(df.iloc[:200], val_df=df.iloc[180:]).training_summary.refit is None


def test_a_time_limit_ends_training_and_is_recorded():
    f = Forecaster("dlinear", prediction_length=4, context_length=16, time_limit=1e-3, refit_full=False,
                   trainer_kwargs=QUIET).fit(hourly())
    budget = f.training_summary.budget
    assert budget["stopped_by"] == "time limit" and budget["time_limit"] == 1e-3
    assert 1 <= budget["steps_run"] < budget["max_steps"]
    assert "stopped by time limit" in str(f.training_summary)
