"""RSA's ETS prior (RSAConfig(prior="ets")): the REM heads hold the fitted exponential smoothing.

Oracle tests: with the gate fixed at 1 and the prior's parameters frozen, the REM part of a head
is simple exponential smoothing (weights ``alpha (1 - alpha)^k``), and a dilated regular head is
the seasonal state's smoothing; then the mapping onto PatchTST's patch grid, the fitter, the user's
errors, and one fit through the Forecaster.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from tsrec.config import DataFacts, RSAConfig, SmoothingPrior, prior_rem_kinds
from tsrec.nn.attention import KernelOutput, RSAMixer
from tsrec.nn.rem import LearnableREM


@pytest.fixture
def float64():
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)


def _prior(alpha: float, *, season: int = 1, gamma: float | None = None, phi: float = 0.0,
           gate: float = 0.9) -> SmoothingPrior:
    season_decay = 1.0 - gamma if gamma is not None else (1.0 - alpha) ** season
    return SmoothingPrior(level_decay=(1.0 - alpha,), trend_decay=(phi,), season_decay=(season_decay,),
                          season=season, gate=gate, skill=0.2)


def _frozen(module: torch.nn.Module) -> torch.nn.Module:
    for p in module.parameters():
        p.requires_grad_(False)
    return module


def _ses_forecasts(v: np.ndarray, alpha: float) -> np.ndarray:
    """Row i: simple exponential smoothing's level after v[:i] (level 0 before the first step),
    i.e. its one-step forecast of v[i], by the recursion, along axis -2 of ``v [..., L, D]``."""
    out = np.zeros_like(v)
    level = np.zeros_like(v[..., 0, :])
    for i in range(v.shape[-2]):
        out[..., i, :] = level
        level = alpha * v[..., i, :] + (1 - alpha) * level
    return out


@pytest.mark.parametrize("alpha", [0.05, 0.3, 0.8])
def test_regular_head_is_simple_exponential_smoothing(float64, alpha):
    config = RSAConfig(kinds=(1, 0, 0, 0, 0, 0), dilation=1, periods=(8.0,), dilated_periods=(8.0,),
                       prior="ets", prior_fit=_prior(alpha))
    rem = _frozen(LearnableREM(config, masked=True))
    lags = torch.arange(-3, 40)
    weights = rem.entries(lags[None, :])[0, 0]  # [n]
    expected = torch.where(lags >= 1, alpha * (1 - alpha) ** (lags - 1.0), torch.zeros(()))
    torch.testing.assert_close(weights, expected, rtol=1e-12, atol=1e-15)
    # the normalisation: over an unbounded history the weights sum to 1
    assert rem.entries(torch.arange(1, 4000)[None, :])[0, 0].sum().item() == pytest.approx(1.0, abs=1e-12)

    # The whole RSA part of a head with the gate fixed at 1: (1 - g) attention + g P V = SES of V.
    mixer = _frozen(RSAMixer(config, 1, masked=True))
    mixer.gate.mu.fill_(math.inf)  # sigmoid(inf) = 1 exactly
    v = torch.randn(2, 1, 30, 3)
    attention = KernelOutput(torch.randn(2, 1, 30, 3), None)
    out = mixer(attention, v)
    torch.testing.assert_close(out, torch.from_numpy(_ses_forecasts(v.numpy(), alpha)), rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(rem.product(v, method="fft"), out, rtol=1e-9, atol=1e-10)


def test_dilated_regular_head_is_the_seasonal_smoothing(float64):
    gamma, m = 0.4, 6
    config = RSAConfig(kinds=(0, 0, 0, 1, 0, 0), dilation=m, periods=(8.0,), dilated_periods=(8.0,),
                       prior="ets", prior_fit=_prior(0.3, season=m, gamma=gamma))
    rem = _frozen(LearnableREM(config))
    lags = torch.arange(0, 10 * m)
    weights = rem.entries(lags[None, :])[0, 0]
    k = lags // m
    expected = torch.where((lags > 0) & (lags % m == 0), gamma * (1 - gamma) ** (k - 1.0), torch.zeros(()))
    torch.testing.assert_close(weights, expected, rtol=1e-12, atol=1e-15)


def test_heads_start_from_the_fit(float64):
    alpha, phi, gamma, m = 0.3, 0.9, 0.2, 12
    config = RSAConfig(prior="ets", prior_fit=_prior(alpha, season=m, gamma=gamma, phi=phi, gate=0.8)).resolved(
        8, DataFacts(season=24, periods=(24.0,)))
    assert config.kinds == prior_rem_kinds(8) == (2, 1, 1, 2, 1, 1)
    assert config.dilation == m and config.periods == (12.0, 6.0)
    mixer = RSAMixer(config, 8)
    p = mixer.rem.head_parameters()
    # heads: regular (level, damped trend), cos, sin, dilated regular x2, dilated cos, dilated sin
    torch.testing.assert_close(p["lambda"][[0, 1, 4, 5]], torch.tensor([1 - alpha, phi, 1 - gamma, 1 - gamma]))
    torch.testing.assert_close(p["gamma"][2:4], torch.full((2,), (1 - gamma) ** (1 / m)))  # the envelope
    torch.testing.assert_close(p["theta"][2:4], torch.full((2,), 2 * math.pi / m))
    torch.testing.assert_close(mixer.gate.values(), torch.tensor([0.8]))


def test_the_patch_grid(float64):
    """PatchTST's REM acts at patch lags (stride s steps each): lambda_patch = (1 - alpha)^s, the
    season m / s patches; and the same REM then weighs patch lag l by (1 - lambda_patch) lambda_patch^(l-1)."""
    from tsrec.models.patchtst import PatchTSTConfig

    alpha, stride = 0.1, 8
    network = PatchTSTConfig(context_length=96, prediction_length=24, stride=stride,
                             rsa=RSAConfig(prior="ets", prior_fit=_prior(alpha, season=24, gamma=0.3)))
    rsa = network.resolved(DataFacts(season=24)).rsa
    assert rsa.prior_fit.steps_per_token == stride
    assert rsa.prior_fit.level_decay == pytest.approx(((1 - alpha) ** stride,))
    assert rsa.prior_fit.season_tokens == 3.0 and rsa.dilation == 3
    assert rsa.resolved(network.n_heads, DataFacts(season=3), steps_per_token=stride) == rsa  # idempotent
    lam = (1 - alpha) ** stride
    rem = LearnableREM(rsa)
    assert rem.head_parameters()["lambda"][0].item() == pytest.approx(lam)
    weights = rem.entries(torch.arange(1, 6)[None, :])[0, 0]
    torch.testing.assert_close(weights, (1 - lam) * lam ** torch.arange(0, 5.0))
    # patch lag l carries the smoothing weight of the stride steps it spans, steps s(l-1)+1 .. s l
    steps = torch.arange(1, 5 * stride + 1, dtype=torch.float64)
    mass = (alpha * (1 - alpha) ** (steps - 1)).view(5, stride).sum(1)
    torch.testing.assert_close(weights, mass)


def test_per_channel_starts(float64):
    prior = SmoothingPrior(level_decay=(0.5, 0.9), trend_decay=(0.0, 0.0), season_decay=(0.5, 0.9), season=1,
                           gate=0.5, skill=1.0)
    config = RSAConfig(kinds=(1, 0, 0, 0, 0, 0), dilation=1, periods=(8.0,), dilated_periods=(8.0,),
                       per_channel=True, prior="ets", prior_fit=prior)
    lam = LearnableREM(config, n_channels=2).head_parameters()["lambda"]  # [C, H]
    torch.testing.assert_close(lam[:, 0], torch.tensor([0.5, 0.9]))
    with pytest.raises(ValueError, match="values for 2 channels, but the model has 3 channels"):
        LearnableREM(config, n_channels=3)
    with pytest.raises(ValueError, match="one REM shared by every channel"):
        LearnableREM(RSAConfig(**{**config.__dict__, "per_channel": False}))


def test_invalid_uses_are_named():
    with pytest.raises(ValueError, match="rsa prior must be one of"):
        RSAConfig(prior="arima")
    with pytest.raises(ValueError, match="set prior='ets', or drop prior_fit"):
        RSAConfig(prior_fit=_prior(0.3))
    with pytest.raises(ValueError, match="rsa.prior_fit is not set: fit through Forecaster.fit"):
        LearnableREM(RSAConfig(prior="ets").resolved(8, DataFacts(season=24)))
    with pytest.raises(ValueError, match="decays in \\[0, 1\\)"):
        SmoothingPrior(level_decay=(1.0,), trend_decay=(0.0,), season_decay=(0.5,), season=1, gate=0.5, skill=1.0)
    with pytest.raises(ValueError, match="cannot be mapped onto 4"):
        _prior(0.3).in_token_units(8).in_token_units(4)


def test_a_model_without_rems_refuses_the_prior():
    from tsrec import Forecaster

    with pytest.raises(TypeError, match="rsa"):
        Forecaster("dlinear", prediction_length=4, rsa={"prior": "ets"})


def test_config_round_trip():
    config = RSAConfig(prior="ets", prior_fit=_prior(0.3, season=4))
    assert RSAConfig.from_dict(config.to_dict()) == config


def _local_level(alpha: float, n: int, seed: int) -> np.ndarray:
    """The model simple exponential smoothing is optimal for: y_t = l_{t-1} + e_t, l_t = l_{t-1} + alpha e_t."""
    e = np.random.default_rng(seed).normal(size=n)
    level = 10 + np.concatenate([[0.0], np.cumsum(alpha * e[:-1])])
    return level + e


def test_the_fit_recovers_alpha():
    pytest.importorskip("statsforecast")
    from tsrec.smoothing_prior import fit_smoothing_prior, gate_from_skill

    prior = fit_smoothing_prior([_local_level(0.3, 600, s) for s in range(5)], season=1, horizon=10)
    assert prior.n_channels == 1 and prior.season == 1
    assert 1 - prior.level_decay[0] == pytest.approx(0.3, abs=0.1)
    assert prior.gate == gate_from_skill(prior.skill)
    assert gate_from_skill(0.0) == 0.95 and gate_from_skill(1.0) == 0.5 and gate_from_skill(3.0) == 0.05
    with pytest.raises(ValueError, match="no history of the training part could be fitted"):
        fit_smoothing_prior([np.arange(10.0)], season=1, horizon=10)


def test_fit_fills_the_prior_and_saves_it(tmp_path):
    pytest.importorskip("statsforecast")
    from tsrec import Forecaster

    n = 400
    index = pd.date_range("2021-01-01", periods=n, freq="h")
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"y": np.sin(2 * np.pi * np.arange(n) / 24) + rng.normal(0, 0.1, n)}, index=index)
    forecaster = Forecaster("rsa_patchtst", prediction_length=24, seed=0, max_steps=2, rsa={"prior": "ets"},
                            trainer_kwargs={"enable_progress_bar": False}).fit(frame)
    rsa = forecaster.fitted.resolved.network.rsa
    assert rsa.prior_fit is not None and rsa.prior_fit.season == 24
    assert rsa.prior_fit.steps_per_token == forecaster.fitted.resolved.network.stride
    gates = forecaster.gates()
    assert np.allclose(gates["gate_start"], rsa.prior_fit.gate)
    forecaster.save(tmp_path / "m")
    again = Forecaster.load(tmp_path / "m")
    assert again.fitted.resolved.network.rsa == rsa
    pd.testing.assert_frame_equal(again.predict(frame), forecaster.predict(frame))


def test_the_recurrence_path_keeps_the_normalisation_of_the_regular_heads(float64):
    config = RSAConfig(kinds=(2, 1, 1, 1, 0, 0), dilation=4, periods=(8.0,), dilated_periods=(8.0,), prior="ets",
                       prior_fit=_prior(0.3, season=4, gamma=0.2, phi=0.9))
    rem = LearnableREM(config, masked=True)
    values = torch.randn(2, rem.n_heads, 50, 3)
    torch.testing.assert_close(rem.product(values, method="scan"), rem.product(values, method="dense"))
