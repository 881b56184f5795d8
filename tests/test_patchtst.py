"""PatchTST and RSA-PatchTST: patching by hand, shapes and gradients, RSA in patch units, errors,
and the estimator end to end."""

import math

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

import tsrec
from tsrec.config import DataFacts, RSAConfig
from tsrec.datasets.synthetic import recurrent_series
from tsrec.inspection import gate_table
from tsrec.models import PatchTST, PatchTSTConfig, build_model, model_config
from tsrec.models.patchtst import make_patches, patch_count
from tsrec.nn.attention import rsa_parameters

pytestmark = pytest.mark.usefixtures("one_thread")

HOURLY = DataFacts(season=24, sub_daily=True, n_channels=1, n_time_features=4)


def batch(size, context, horizon, channels, features=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    return {"past_target": torch.randn(size, context, channels, generator=g),
            "past_time_feat": torch.randn(size, context, features, generator=g),
            "future_time_feat": torch.randn(size, horizon, features, generator=g)}


@pytest.mark.parametrize("length, patch_len, stride, expected", [
    # 0..9 padded with 3 copies of 9: the last patch is all padding
    (10, 4, 3, [[0, 1, 2, 3], [3, 4, 5, 6], [6, 7, 8, 9], [9, 9, 9, 9]]),
    # (11 - 4) is not a multiple of 3: the last patch mixes the last real step and padding
    (11, 4, 3, [[0, 1, 2, 3], [3, 4, 5, 6], [6, 7, 8, 9], [9, 10, 10, 10]]),
    # no overlap, and a patch as long as the context
    (6, 2, 2, [[0, 1], [2, 3], [4, 5], [5, 5]]),
    (4, 4, 1, [[0, 1, 2, 3], [1, 2, 3, 3]]),
])
def test_patches_of_a_ramp_by_hand(length, patch_len, stride, expected):
    ramp = torch.arange(float(length))
    assert patch_count(length, patch_len, stride) == len(expected)
    assert make_patches(ramp, patch_len, stride).tolist() == expected
    # leading axes are kept: [B, C, L] -> [B, C, N, P]
    stacked = make_patches(torch.stack([ramp, 10 * ramp]).unsqueeze(0), patch_len, stride)
    assert stacked.shape == (1, 2, len(expected), patch_len)
    assert stacked[0, 1].tolist() == (10 * torch.tensor(expected, dtype=torch.float32)).tolist()


def test_the_network_embeds_the_patches_of_each_channel():
    """Without RevIN the embedding sees exactly the ramp's patches, channel by channel; the
    paper's input-96 setting (patch 16, stride 8) gives 12 patches."""
    model = build_model("patchtst", data=HOURLY, context_length=96, prediction_length=24, revin=False).eval()
    assert model.n_patches == 12 == model.position.shape[0]
    seen = {}
    model.embedding.register_forward_hook(lambda m, args, out: seen.update(patches=args[0]))
    ramp = torch.arange(96.0)
    past = torch.stack([ramp, -ramp], dim=-1).unsqueeze(0)  # [1, 96, 2]
    model({"past_target": past, "past_time_feat": torch.zeros(1, 96, 4), "future_time_feat": torch.zeros(1, 24, 4)})
    patches = seen["patches"]  # [B*C, N, P]
    assert patches.shape == (2, 12, 16)
    assert patches[0, 0].tolist() == list(range(16)) and patches[0, 10].tolist() == list(range(80, 96))
    assert patches[0, 11].tolist() == list(range(88, 96)) + [95] * 8  # end padding repeats the last value
    torch.testing.assert_close(patches[1], -patches[0])


@pytest.mark.parametrize("name", ["patchtst", "rsa_patchtst"])
@pytest.mark.parametrize("channels", [1, 3, 7])
def test_shapes_and_every_parameter_gets_a_gradient(name, channels):
    torch.manual_seed(0)
    facts = DataFacts(season=24, n_channels=channels, n_time_features=4)
    model = build_model(name, data=facts, context_length=48, prediction_length=12, e_layers=2)
    out = model(batch(5, 48, 12, channels))
    assert out.shape == (5, 12, channels) and torch.isfinite(out).all()
    out.pow(2).mean().backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not torch.any(p.grad != 0)]
    assert not missing, f"no gradient reaches {missing}"
    rsa = list(rsa_parameters(model))
    if name == "rsa_patchtst":
        # REM scalars (nu, theta, dilated_nu, dilated_theta) and the gate of each of the 2 layers
        assert len(rsa) == 2 * 5 and all(p.grad is not None and torch.any(p.grad != 0) for p in rsa)
        assert [(a, i) for a, i, _ in model.rsa_layers()] == [("encoder self", 0), ("encoder self", 1)]
    else:
        assert not rsa and model.rsa_layers() == []


def test_channels_are_independent_and_share_weights():
    model = build_model("patchtst", data=DataFacts(season=24, n_channels=3), context_length=48,
                        prediction_length=12).eval()
    b = batch(2, 48, 12, 3)
    out = model(b)
    changed = dict(b, past_target=b["past_target"].clone())
    changed["past_target"][..., 1] += torch.randn(2, 48)
    again = model(changed)
    torch.testing.assert_close(again[..., [0, 2]], out[..., [0, 2]])
    assert not torch.allclose(again[..., 1], out[..., 1])
    # shared weights: a channel's forecast does not depend on its position
    swapped = dict(b, past_target=b["past_target"][..., [2, 1, 0]])
    torch.testing.assert_close(model(swapped), out[..., [2, 1, 0]])


def test_defaults_are_the_papers_etth_setting():
    config = PatchTSTConfig()
    assert (config.patch_len, config.stride, config.d_model, config.n_heads, config.e_layers, config.d_ff) \
        == (16, 8, 16, 4, 3, 128)
    assert (config.dropout, config.head_dropout, config.norm) == (0.3, 0.0, "batch")
    assert config.revin and config.channel_independent and config.rsa is None
    assert model_config("rsa_patchtst").rsa == RSAConfig(encoder_masked=False)
    model = build_model("patchtst", data=HOURLY, context_length=48, prediction_length=12)
    assert any(isinstance(m, nn.BatchNorm1d) for m in model.modules())
    layer_norm = build_model("patchtst", data=HOURLY, context_length=48, prediction_length=12, norm="layer")
    assert not any(isinstance(m, nn.BatchNorm1d) for m in layer_norm.modules())
    assert any(isinstance(m, nn.LayerNorm) for m in layer_norm.modules())


def test_rsa_is_resolved_in_patch_units():
    """Hourly data, stride 8: one day is 3 patches, so the dilation is 3 and the plain pairs start
    at periods of 3 and 1.5 patches; the dilated pairs at a week and its half, in days."""
    config = model_config("rsa_patchtst", context_length=96, prediction_length=24).resolved(HOURLY)
    assert config.rsa == RSAConfig(kinds=(0, 1, 1, 0, 1, 1), dilation=3, periods=(3.0, 1.5),
                                   dilated_periods=(7.0, 3.5), encoder_masked=False, max_lag=11)
    assert config.unresolved() == []
    mine = model_config("rsa_patchtst", context_length=96, prediction_length=24,
                        rsa={"dilation": 5, "periods": [6.0]}).resolved(HOURLY)
    assert (mine.rsa.dilation, mine.rsa.periods) == (5, (6.0,))  # set values are kept
    assert not mine.rsa.encoder_masked  # a dict refines the preset's RSA settings
    whole = model_config("rsa_patchtst", context_length=96, prediction_length=24, rsa=RSAConfig(dilation=5))
    assert whole.rsa.encoder_masked  # a config object replaces them whole
    stride4 = model_config("rsa_patchtst", context_length=96, prediction_length=24, stride=4).resolved(HOURLY)
    assert (stride4.rsa.dilation, stride4.rsa.periods) == (6, (6.0, 3.0))


#: 15-minute data with a daily cycle (ETTm1/ETTm2): a day is 96 steps, 12 patches of stride 8.
QUARTER_HOURLY = DataFacts(season=96, periods=(96.0,), n_channels=1, n_time_features=4)
#: 10-minute data with a daily cycle (weather): a day is 144 steps, 18 patches.
TEN_MINUTE = DataFacts(season=144, periods=(144.0,), n_channels=1, n_time_features=4)


@pytest.mark.parametrize("facts, day", [(QUARTER_HOURLY, 12), (TEN_MINUTE, 18)])
def test_no_dilated_head_is_longer_than_the_patches_it_sees(facts, day):
    """Input 96 is 12 patches (lags up to 11): a day-long dilation (12 or 18 patches) would see no
    lag but 0, so the dilated pair becomes a plain pair, said in the resolved settings; at input
    336 (42 patches) the day fits and the heads stay dilated."""
    config = model_config("rsa_patchtst", context_length=96, prediction_length=96).resolved(facts)
    assert config.n_patches == 12 and config.rsa.max_lag == 11
    dilated = config.rsa.kinds[3:]
    assert sum(dilated) == 0 or config.rsa.dilation <= 11
    assert config.rsa.kinds == (0, 2, 2, 0, 0, 0) and config.rsa.undilated == (0, 1, 1)
    assert config.rsa.periods == (float(day), day / 2.0)  # the made-plain pair starts at half a day
    assert config.rsa.undilated_heads() == (False, True, False, True)
    assert config.resolved(facts) == config  # resolving again changes nothing
    long = model_config("rsa_patchtst", context_length=336, prediction_length=96).resolved(facts)
    assert long.rsa.kinds == (0, 1, 1, 0, 1, 1) and long.rsa.dilation == day and long.rsa.undilated == (0, 0, 0)
    assert long.rsa.max_lag == 41
    # a dilation the user set is bound too; a per-head one keeps the heads that fit
    mine = model_config("rsa_patchtst", context_length=96, prediction_length=96,
                        rsa={"kinds": (0, 0, 0, 2, 1, 1), "dilation": (3, 20, 4, 12)}).resolved(facts)
    assert mine.rsa.kinds == (1, 0, 1, 1, 1, 0) and mine.rsa.dilation == (3, 4) and mine.rsa.undilated == (1, 0, 1)


@pytest.mark.parametrize("mix", ["gate", "bias"])
def test_every_rem_head_gets_a_gradient_at_input_96(mix):
    """15-minute data at input 96: every REM scalar (per head and pair, not just per tensor) gets
    a gradient, before and after one optimizer step (a dilated head of 12 patches got none: its REM
    was zero at every lag the 12 patches hold), and mix='bias' has a key for every query."""
    torch.manual_seed(0)
    model = build_model("rsa_patchtst", data=QUARTER_HOURLY, context_length=96, prediction_length=96, e_layers=2,
                        rsa={"mix": mix})
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
    for _ in range(2):
        optimizer.zero_grad()
        out = model(batch(4, 96, 96, 1))
        assert torch.isfinite(out).all()
        out.pow(2).mean().backward()
        rem = [(name, p) for name, p in model.named_parameters() if ".rem." in name]
        assert rem and all(p.grad is not None and bool((p.grad != 0).all()) for _, p in rem), \
            [name for name, p in rem if p.grad is None or not bool((p.grad != 0).all())]
        optimizer.step()
    assert all(int(layer.rsa.rem.dilation.max()) <= 11 for _, _, layer in model.rsa_layers())


def test_gate_table_marks_heads_made_plain():
    torch.manual_seed(0)
    model = build_model("rsa_patchtst", data=QUARTER_HOURLY, context_length=96, prediction_length=96, e_layers=1)
    table = gate_table(model, "15min")
    assert table["undilated"].tolist() == [False, True, False, True] and not table["dilated"].any()
    assert (table["dilation"] == 1).all()
    np.testing.assert_allclose(table["period_steps"], [96.0, 48.0, 96.0, 48.0], rtol=1e-5)
    from tsrec.cli import gate_lines

    assert gate_lines(table)[0].endswith("| 2 dilated heads made plain (dilation longer than the lags seen)")
    kept = gate_table(build_model("rsa_patchtst", data=QUARTER_HOURLY, context_length=336, prediction_length=96,
                                  e_layers=1), "15min")
    assert not kept["undilated"].any() and kept["dilated"].tolist() == [False, False, True, True]


def test_gate_table_reports_patch_periods_in_steps():
    torch.manual_seed(0)
    model = build_model("rsa_patchtst", data=HOURLY, context_length=96, prediction_length=24, e_layers=1)
    assert model.steps_per_token == 8
    assert all(not layer.rsa.rem.masked for _, _, layer in model.rsa_layers())
    table = gate_table(model, "h")
    assert len(table) == 4 and (table["steps_per_token"] == 8).all()
    plain = table[(table["kind"] != "regular") & ~table["dilated"]]
    dilated = table[(table["kind"] != "regular") & table["dilated"]]
    # theta = 2 pi / 3 per patch: 3 patches of 8 steps = 24 steps = 24 hours
    np.testing.assert_allclose(plain["theta"], 2 * math.pi / 3, rtol=1e-6)
    np.testing.assert_allclose(plain["period_steps"], 24.0, rtol=1e-5)
    # durations rounded to the millisecond: 24 h up to float32 theta
    np.testing.assert_allclose(plain["period"].dt.total_seconds(), 24 * 3600.0, rtol=1e-6)
    # theta = 2 pi / 7 per dilated step of 3 patches: a week
    np.testing.assert_allclose(dilated["period_steps"], 7 * 24.0, rtol=1e-5)
    assert (dilated["dilation"] == 3).all()
    gamma = dilated["gamma"].to_numpy()
    np.testing.assert_allclose(dilated["half_life_steps"], np.log(0.5) / np.log(gamma) * 3 * 8, rtol=1e-6)
    # a one-step-per-token model reports the same periods in steps as in tokens
    assert build_model("dlinear", data=HOURLY, context_length=48, prediction_length=12).steps_per_token == 1
    assert gate_table(build_model("patchtst", data=HOURLY, context_length=48, prediction_length=12)).empty


def test_gate_table_of_session_data_gives_no_durations():
    """A session's steps skip its closed hours: 16 steps of 'h 06:00-22:00' are a day, not 16
    hours, so the table keeps the steps and gives no wall-clock durations (the plot draws steps)."""
    torch.manual_seed(0)
    model = build_model("rsa_patchtst", data=HOURLY, context_length=96, prediction_length=24, e_layers=1)
    table = gate_table(model, "h 06:00-22:00")
    assert table["period"].isna().all() and table["half_life"].isna().all()
    np.testing.assert_allclose(table["period_steps"], gate_table(model, "h")["period_steps"])


@pytest.mark.parametrize("options, error, match", [
    (dict(context_length=12, patch_len=16), ValueError, r"patch_len \(16\) must be at most context_length \(12\)"),
    (dict(d_model=18, n_heads=4), ValueError, r"d_model \(18\) must be divisible by n_heads \(4\)"),
    (dict(channel_independent=False), ValueError, "channel-independent by design"),
    (dict(patch_len=4, stride=6), ValueError, r"stride \(6\) must be at most patch_len \(4\)"),
    (dict(patch_len=0), ValueError, "patch_len must be an integer >= 1"),
    (dict(stride=2.5), TypeError, "stride must be an integer, got 2.5"),
    (dict(dropout=1.0), ValueError, r"dropout must be in \[0, 1\)"),
    (dict(head_dropout=-0.1), ValueError, r"head_dropout must be in \[0, 1\)"),
    (dict(norm="group"), ValueError, "norm must be one of"),
    (dict(rsa=RSAConfig(kinds=(8, 0, 0, 0, 0, 0))), ValueError, "every head needs a REM kind"),
    (dict(rsa={"dilations": 3}), TypeError, "RSAConfig has no setting"),
])
def test_bad_configs_are_refused_with_a_reason(options, error, match):
    with pytest.raises(error, match=match):
        PatchTSTConfig(**options)


def test_unresolved_and_too_short_contexts_are_named():
    with pytest.raises(ValueError, match=r"needs .*rsa\.kinds, rsa\.dilation"):
        build_model("rsa_patchtst", context_length=48, prediction_length=12, n_channels=1, n_time_features=0)
    frame = recurrent_series(200, seed=0)
    with pytest.raises(ValueError, match=r"patch_len \(16\) must be at most context_length \(8\)"):
        tsrec.Forecaster("patchtst", prediction_length=4, context_length=8).fit(frame)


def test_fit_predict_save_load_end_to_end(tmp_path):
    frame = recurrent_series(24 * 20, n_series=2, seed=1)
    forecaster = tsrec.Forecaster("rsa_patchtst", prediction_length=12, context_length=48, d_ff=32, e_layers=1,
                                  max_epochs=1, val_windows=12,
                                  trainer_kwargs={"enable_progress_bar": False, "logger": False})
    forecaster.fit(frame)
    network = forecaster.resolved_settings.network
    # in patches: a day is 3 patches of 8 hours (the first period may be a cycle found in the data)
    assert network.rsa.dilation == 3 and network.rsa.periods[0] == pytest.approx(3.0, rel=0.02)
    forecast = forecaster.predict()
    assert len(forecast) == 2 * 12 and np.isfinite(forecast["mean"]).all()
    gates = forecaster.gates()
    assert len(gates) == 4 and (gates["steps_per_token"] == 8).all()
    assert pd.api.types.is_timedelta64_dtype(gates["period"])
    loaded = tsrec.Forecaster.load(forecaster.save(tmp_path / "model"))
    assert isinstance(loaded.model, PatchTST)
    pd.testing.assert_frame_equal(loaded.predict(), forecast)
    pd.testing.assert_frame_equal(loaded.gates(), gates)


def test_the_fit_says_which_heads_were_made_plain(tmp_path):
    """15-minute data with a daily cycle at input 96: the resolved settings and the gate table say
    that the day-long dilated pair (12 patches, the input holds lags 0-11) became a plain pair,
    and a saved model loads with the same heads."""
    t = np.arange(96 * 40)
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"y": 10 + np.sin(2 * np.pi * t / 96) + 0.1 * rng.standard_normal(t.size)},
                      index=pd.date_range("2024-01-01", periods=t.size, freq="15min"))
    f = tsrec.Forecaster("rsa_patchtst", prediction_length=24, context_length=96, e_layers=1, max_steps=2,
                         trainer_kwargs={"enable_progress_bar": False, "logger": False}).fit(df)
    rsa = f.resolved_settings.network.rsa
    assert (rsa.max_lag, rsa.kinds, rsa.dilation, rsa.undilated) == (11, (0, 2, 2, 0, 0, 0), 12, (0, 1, 1))
    assert f.gates()["undilated"].tolist() == [False, True, False, True]
    loaded = tsrec.Forecaster.load(f.save(tmp_path / "model"))
    assert loaded.resolved_settings.network.rsa == rsa
    pd.testing.assert_frame_equal(loaded.gates(), f.gates())


def test_a_short_horizon_gets_a_context_of_two_patches():
    """2 x a horizon of 7 would not hold one 16-step patch: the default context is two patches."""
    t = np.arange(200)
    df = pd.DataFrame({"y": 5 + np.sin(2 * np.pi * t / 7)}, index=pd.date_range("2024-01-01", periods=200, freq="D"))
    f = tsrec.Forecaster("rsa_patchtst", prediction_length=7, max_steps=3, trainer_kwargs={"enable_progress_bar": False}).fit(df)
    assert f.context_length == f.resolved_settings.window.context_length == 32
    assert len(f.predict()) == 7
    assert tsrec.Forecaster("patchtst", prediction_length=24, max_steps=3).fit(df).context_length == 48
