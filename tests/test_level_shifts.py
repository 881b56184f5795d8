"""A real level shift is data, a typo is not (issue #39, class 2).

A series at 5 that jumps to 50 and stays there: the old code read the new values as outliers
(missing in training, far in RevIN's window), so the forecast continued the old level until the
new one filled about a quarter of the context, and blended the two after that; its warning called
the values a likely typo and suggested ``scaling="standard"``, which RevIN did not honour. Here:
the shift's runs (oracle against a loop), RevIN reading a window that ends in one at its new
level, forecasts of the default networks near the new level, one 1e9 typo still near the data's
level, the warning's two kinds, and ``far_values="keep"``, honoured by the scaler and RevIN.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tsrec import Forecaster
from tsrec.config import SHIFT_STEPS
from tsrec.data.scaling import OutlierWarning, level_shifts
from tsrec.nn.heads import RevIN

FAST = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow])
TRAIN = dict(max_epochs=2, batch_size=64, trainer_kwargs={"enable_progress_bar": False, "logger": False})
NETWORKS = {  # the default model and PatchTST (the issue's), small enough for a CPU test, and DLinear
    "rsa_patchtst": dict(d_model=16, n_heads=4, d_ff=16, e_layers=1, patch_len=8, stride=4),
    "patchtst": dict(d_model=16, n_heads=4, d_ff=16, e_layers=1, patch_len=8, stride=4),
    "dlinear": {},
}
HORIZON, CONTEXT, LENGTH = 6, 24, 160


def shifts_by_loop(side: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """:func:`level_shifts` of one series and channel (``[T]`` each), step by step from its end."""
    out = np.zeros(len(side), bool)
    seen = np.flatnonzero(observed)
    if not len(seen) or side[seen[-1]] == 0:
        return out
    run = []
    for t in seen[::-1]:
        if side[t] != side[seen[-1]]:
            break
        run.append(t)
    if len(run) >= SHIFT_STEPS:
        out[run] = True
    return out


@FAST
@given(lengths=st.lists(st.integers(0, 12), min_size=1, max_size=4), channels=st.integers(1, 2),
       seed=st.integers(0, 2**16))
def test_level_shifts_match_a_loop_from_each_series_end(lengths, channels, seed):
    rng = np.random.default_rng(seed)
    rows = sum(lengths)
    side = rng.choice([-1, 0, 1], size=(rows, channels), p=[0.2, 0.3, 0.5]).astype(np.int8)
    observed = rng.random((rows, channels)) > 0.2
    series = np.repeat(np.arange(len(lengths)), lengths)
    got = level_shifts(side, observed, series, len(lengths))
    for n, (start, stop) in enumerate(zip(np.r_[0, np.cumsum(lengths)[:-1]], np.cumsum(lengths))):
        for c in range(channels):
            np.testing.assert_array_equal(got[start:stop, c], shifts_by_loop(side[start:stop, c],
                                                                             observed[start:stop, c]))


def window(k: int, jump: float = 100.0, length: int = 48) -> torch.Tensor:
    """``[1, length, 1]``: a small cycle around 0 whose last ``k`` steps are ``jump`` higher."""
    x = 0.3 * torch.sin(torch.arange(length, dtype=torch.float64) / 3).view(1, length, 1)
    x[:, length - k:] += jump
    return x


@pytest.mark.parametrize("k", [SHIFT_STEPS, 6, 12, 24, 35, 40, 47])
def test_revin_reads_a_window_that_ends_in_a_level_shift_at_its_new_level(k):
    revin = RevIN(1, affine=False).double()
    y, (loc, scale) = revin.normalize(window(k))
    _, (clean_loc, clean_scale) = revin.normalize(window(0))
    # Moved by the difference of the parts' medians: the window's level is the new one, up to the cycle's swing.
    assert abs(float(loc) - 100.0 - float(clean_loc)) < 0.3 and float(scale) < 1.5 * float(clean_scale)
    assert torch.isfinite(y).all() and y.abs().max() < 4  # every value read, none masked as far
    assert y[0, -k:].std() > 0.1 if k > 3 else True  # the new level's cycle reaches the network


def test_revin_compiles_without_a_graph_break_and_normalises_as_it_does_eagerly():
    """Under ``torch.compile`` RevIN reads every window instead of selecting those that can hold a far
    value or a level shift (a data-dependent shape splits the graph): no graph break, the same
    values. A batch of a clean window, a shifted one and one with a typo."""
    x = torch.cat([window(0), window(12), window(0)])  # [3, L, 1]
    x[2, 5, 0] = 1e9
    revin = RevIN(1, affine=False).double()
    explained = torch._dynamo.explain(revin.normalize)(x)
    assert explained.graph_break_count == 0, explained.break_reasons
    torch._dynamo.reset()
    compiled = torch.compile(revin.normalize, backend="aot_eager", fullgraph=True)
    (y, (loc, scale)), (y_eager, (loc_eager, scale_eager)) = compiled(x), revin.normalize(x)
    for got, expected in ((y, y_eager), (loc, loc_eager), (scale, scale_eager)):
        torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)
    torch._dynamo.reset()


@pytest.mark.parametrize("values", [[1e9], [1e9, 1e9], [-1e9, 1e9, -1e9]])
def test_one_or_two_far_values_at_the_end_are_still_far_for_revin(values):
    x = window(0)
    x[0, -len(values):, 0] = torch.tensor(values, dtype=torch.float64)
    _, (loc, scale) = RevIN(1, affine=False).double().normalize(x)
    assert abs(float(loc)) < 0.5 and float(scale) < 1  # the window's own level: the values are missing


def test_a_level_shift_with_missing_steps_and_a_typo_before_it():
    x = window(8)
    observed = torch.ones_like(x)
    observed[0, -5] = 0  # a missing step inside the shift
    x[0, 10] = -1e9  # a typo long before it
    y, (loc, _) = RevIN(1, affine=False).double().normalize(x, observed)
    assert abs(float(loc) - 100.0) < 0.5 and abs(float(y[0, 10])) < 1e-9  # the typo read as the mean


def shifted(k: int, seed: int = 0) -> np.ndarray:
    """A series around 5 (a small daily cycle) whose last ``k`` values jumped to around 50."""
    rng = np.random.default_rng(seed)
    t = np.arange(LENGTH)
    y = 5 + 0.5 * np.sin(2 * np.pi * t / 24) + 0.1 * rng.standard_normal(LENGTH)
    y[LENGTH - k:] += 45
    return y


def frame(y: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame({"id": "a", "ds": pd.date_range("2024-01-01", periods=len(y), freq="h"), "y": y})


def fitted(model: str, y: np.ndarray, **options) -> Forecaster:
    forecaster = Forecaster(model, prediction_length=HORIZON, context_length=CONTEXT, **TRAIN, **NETWORKS[model],
                            **options)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OutlierWarning)
        return forecaster.fit(frame(y), id_col="id", time_col="ds", target_col="y")


@pytest.mark.parametrize("k", [4, 10])
@pytest.mark.parametrize("model", list(NETWORKS))
def test_after_a_persistent_shift_the_forecast_is_near_the_new_level(model, k, one_thread):
    forecaster = fitted(model, shifted(k))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OutlierWarning)
        got = forecaster.predict()["mean"].to_numpy()
    assert np.abs(got - 50).max() < 3, got  # the old code: 5.0 (k=4) and a blend from 18 to 30 (k=10)


@pytest.mark.parametrize("model", list(NETWORKS))
def test_a_single_1e9_typo_at_the_end_stays_near_the_data_level(model, one_thread):
    y = shifted(0)
    y[-1] = 1e9
    got = fitted(model, y).predict()
    assert np.abs(got["mean"].to_numpy() - 5).max() < 2, got


def test_the_warning_names_a_level_shift_as_one_and_a_typo_as_a_typo(one_thread):
    y = shifted(10)
    y[40] = 1e9
    forecaster = Forecaster("dlinear", prediction_length=HORIZON, context_length=CONTEXT, **TRAIN)
    with pytest.warns(OutlierWarning) as caught:
        forecaster.fit(frame(y), id_col="id", time_col="ds", target_col="y")
    (message,) = [str(w.message) for w in caught if w.category is OutlierWarning]
    assert ("1 series in the fit data end at a new level far outside their training distribution (at least 3 "
            "values beyond one fence up to their last observed step: a level shift): item 'a' (column 'y') from "
            "2024-01-07 06:00:00 (10 values up to its last, median 50") in message
    assert "kept as data" in message
    assert "1 value(s) in the fit data lie far outside" in message and "at 2024-01-02 16:00:00 (1e+09)" in message
    assert "treated as missing (far_values='keep' keeps them)" in message and "typo" in message
    with pytest.warns(OutlierWarning, match=r"1 series in the last 24 steps forecast from end at a new level.*"
                                            r"reads a window that ends in one at its new level") as caught:
        forecaster.predict()
    assert "typo" not in str(caught[0].message)  # the context holds the shift only


def test_far_values_keep_is_honoured_by_the_scaler_and_revin_and_saved(tmp_path, one_thread):
    """The fix the warning gives for real far values (spikes that happen): every value is data."""
    y = shifted(0)
    y[[30, 80, 150]] = 60.0  # three real spikes
    keep = fitted("patchtst", y, far_values="keep")
    default = fitted("patchtst", y)
    assert not keep.scaler.robust and default.scaler.robust
    assert keep.model.revin.far_iqrs is None and default.model.revin.far_iqrs is not None
    recent = frame(y)
    _, (loc, _) = keep.model.revin.normalize(torch.tensor(keep.scaler.transform(y[-24:, None], 0)[None]).float())
    _, (default_loc, _) = default.model.revin.normalize(
        torch.tensor(default.scaler.transform(y[-24:, None], 0)[None]).float())
    # The spike 10 steps before the end is in the window's mean with "keep" only.
    assert float(keep.scaler.inverse_transform(loc.numpy()[0], 0)[0, 0]) > 6.5
    assert float(default.scaler.inverse_transform(default_loc.numpy()[0], 0)[0, 0]) < 5.5
    keep.save(tmp_path / "m")
    back = Forecaster.load(tmp_path / "m")
    assert back.settings.window.far_values == "keep" and back.model.revin.far_iqrs is None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OutlierWarning)
        pd.testing.assert_frame_equal(back.predict(recent), keep.predict(recent))
    with pytest.raises(ValueError, match=r"far_values must be one of \('auto', 'missing', 'keep'\)"):
        Forecaster("dlinear", prediction_length=2, far_values="drop")
