"""torch's intra-op threads while a network trains (tsrec.training.threads)."""

from __future__ import annotations

import lightning.pytorch as pl
import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from tsrec import Forecaster
from tsrec.settings import ForecasterSettings
from tsrec.training.threads import SMALL_NETWORK_PARAMETERS, torch_threads, training_threads


def _sized(parameters: int) -> nn.Module:
    return nn.Linear(parameters - 1, 1)  # (parameters - 1) weights and a bias


def test_a_small_network_trains_on_one_thread_and_a_large_one_on_torchs_setting():
    with torch_threads(2):
        assert training_threads(_sized(SMALL_NETWORK_PARAMETERS - 1), None) == 1
        assert training_threads(_sized(SMALL_NETWORK_PARAMETERS), None) == 2
        assert training_threads(_sized(10), 3) == 3  # the user's count wins


def test_torch_threads_restores_the_count_even_after_an_error():
    with torch_threads(1):
        with pytest.raises(RuntimeError, match="inside"):
            with torch_threads(2):
                assert torch.get_num_threads() == 2
                raise RuntimeError("inside")
        assert torch.get_num_threads() == 1


class _ThreadsSeen(pl.Callback):
    def __init__(self) -> None:
        self.seen: set[int] = set()

    def on_train_batch_start(self, *args) -> None:
        self.seen.add(torch.get_num_threads())


def _frame(steps: int = 120) -> pd.DataFrame:
    t = np.arange(steps)
    return pd.DataFrame({"timestamp": pd.date_range("2024-01-01", periods=steps, freq="h"),
                         "y": np.sin(2 * np.pi * t / 24) + 0.01 * t})


@pytest.mark.parametrize("threads, expected", [(None, 1), (2, 2)])
def test_a_fit_trains_on_the_chosen_threads_and_restores_the_callers(threads, expected):
    seen = _ThreadsSeen()
    options = {} if threads is None else {"threads": threads}
    forecaster = Forecaster("dlinear", prediction_length=4, context_length=16, max_steps=3, seed=0,
                            trainer_kwargs={"callbacks": [seen], "enable_progress_bar": False}, **options)
    with torch_threads(2):
        forecaster.fit(_frame(), time_col="timestamp")
        assert torch.get_num_threads() == 2
    assert seen.seen == {expected}


def test_threads_is_a_setting_that_round_trips_and_refuses_nonsense():
    settings = ForecasterSettings.from_options("dlinear", prediction_length=4, threads=3)
    assert settings.trainer.threads == 3
    assert ForecasterSettings.from_options(**settings.to_options()).trainer.threads == 3
    assert ForecasterSettings.from_dict(settings.to_dict()).trainer.threads == 3
    for bad in (0, 1.5, True):
        with pytest.raises(ValueError, match="threads must be a positive int"):
            ForecasterSettings.from_options("dlinear", prediction_length=4, threads=bad)
