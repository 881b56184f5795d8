"""The chain below the estimator: source.read -> fit_state -> FittedState -> forecast, used without
a Forecaster; a failed fit changes nothing; the trainer settings reach a loaded model."""

import lightning.pytorch as pl
import numpy as np
import pandas as pd
import pytest
import torch

from tsrec import Forecaster
from tsrec.data import source
from tsrec.data.schema import Schema
from tsrec.fitting import fit_state
from tsrec.forecasting import forecast_next
from tsrec.settings import ForecasterSettings

QUIET = {"enable_progress_bar": False, "logger": False}
OPTIONS = dict(prediction_length=6, context_length=24, max_steps=4, batch_size=16, seed=3)


def frame(n: int = 120, ids=("a", "b")) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    t = np.arange(n)
    return pd.concat([pd.DataFrame({"id": item, "time": pd.date_range("2024-01-01", periods=n, freq="h"),
                                    "y": k + np.sin(2 * np.pi * t / 24) + 0.1 * rng.standard_normal(n)})
                      for k, item in enumerate(ids)], ignore_index=True)


def test_fit_state_and_forecast_next_without_a_forecaster_are_what_the_forecaster_does():
    df = frame()
    schema = Schema(time_col="time", id_col="id", target_col="y")
    read = source.read(df, schema, categorical=(), freq=None, gaps="raise")
    settings = ForecasterSettings.from_options("dlinear", **OPTIONS, trainer_kwargs=QUIET)
    fit = fit_state(read, settings)
    state = fit.state
    assert fit.trainer is not None and state.summary.refit is not None  # validated, then refitted
    forecaster = Forecaster("dlinear", **OPTIONS, trainer_kwargs=QUIET).fit(df, **schema.columns)
    for name, tensor in forecaster.model.state_dict().items():
        torch.testing.assert_close(state.model.state_dict()[name], tensor, rtol=0, atol=0)
    result = forecast_next(state, state.history, state.covariate_history)
    pd.testing.assert_frame_equal(result.to_frame(state.history), forecaster.predict())


class Boom(pl.Callback):
    """Raises at the end of the first training epoch once armed."""

    def __init__(self) -> None:
        self.armed = False

    def on_train_epoch_end(self, trainer, module) -> None:
        if self.armed:
            raise RuntimeError("boom")


def test_a_failed_fit_changes_no_attribute():
    boom = Boom()
    f = Forecaster("dlinear", **OPTIONS, trainer_kwargs={**QUIET, "callbacks": [boom]}).fit(frame(), id_col="id",
                                                                                          time_col="time")
    before = dict(vars(f))
    assert before["trainer"] is not None and before["fitted"] is not None
    boom.armed = True
    with pytest.raises(RuntimeError, match="boom"):
        f.fit(frame(ids=("c", "d")), id_col="id", time_col="time")
    assert vars(f).keys() == before.keys()
    assert all(vars(f)[key] is value for key, value in before.items())
    with pytest.raises(ValueError, match="has 20 time steps but context_length=24"):  # fails before training
        f.fit(frame(n=20), id_col="id", time_col="time")
    assert all(vars(f)[key] is value for key, value in before.items())


def test_trainer_settings_and_output_dir_reach_a_loaded_model(tmp_path):
    """trainer_kwargs (their JSON values; a callback object is not saved) and output_dir are saved
    with the settings, and a loaded model trains and forecasts with them."""
    kwargs = {**QUIET, "accelerator": "cpu", "gradient_clip_val": 0.5, "callbacks": [Boom()]}
    f = Forecaster("dlinear", **OPTIONS, output_dir=tmp_path / "run", trainer_kwargs=kwargs).fit(
        frame(), id_col="id", time_col="time")
    loaded = Forecaster.load(f.save(tmp_path / "model"))
    assert loaded.trainer_kwargs == {**QUIET, "accelerator": "cpu", "gradient_clip_val": 0.5}
    assert loaded.output_dir == tmp_path / "run"
    assert loaded.fitted.settings.trainer == loaded.settings.trainer
    assert loaded.get_params()["trainer_kwargs"] == loaded.trainer_kwargs
    pd.testing.assert_frame_equal(loaded.predict(), f.predict())
    again = loaded.unfitted_copy().fit(frame(), id_col="id", time_col="time")
    assert again.trainer.gradient_clip_val == 0.5
    assert (tmp_path / "run" / "checkpoints").is_dir()
