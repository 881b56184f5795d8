"""RSA's two REM options of issue 26: the pre-softmax bias (``RSAConfig.mix="bias"``) and
per-channel REM parameters (``RSAConfig.per_channel``): exact maths on small cases, masks,
the unchanged gate mode, training, save/load and the errors."""

import json
import math

import numpy as np
import pandas as pd
import pytest
import torch

import tsrec
from tests.saved_models import write_format_4
from tsrec.config import DataFacts, RSAConfig
from tsrec.inspection import gate_table
from tsrec.models import build_model
from tsrec.nn.attention import AttentionLayer, FullAttention, ProbSparseAttention, RSAMixer
from tsrec.nn.rem import LearnableREM

pytestmark = pytest.mark.usefixtures("one_thread")

THREE_CHANNELS = DataFacts(season=24, sub_daily=True, n_channels=3, n_time_features=4)
QUIET = {"enable_progress_bar": False, "logger": False, "enable_checkpointing": False}


def batch(size, context, horizon, channels, features=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    return {"past_target": torch.randn(size, context, channels, generator=g),
            "past_time_feat": torch.randn(size, context, features, generator=g),
            "future_time_feat": torch.randn(size, horizon, features, generator=g)}


def set_rem(rem: LearnableREM, *, lam=(), gamma=(), theta=(), dilated_lam=(), dilated_gamma=(), dilated_theta=()):
    """Give the REM's heads chosen ``lambda``, ``gamma``, ``theta`` (through their reparameterisation)."""
    values = {"eta": torch.atanh(torch.tensor(lam, dtype=torch.float64)),
              "nu": torch.logit(torch.tensor(gamma, dtype=torch.float64)),
              "theta": torch.tensor(theta, dtype=torch.float64),
              "dilated_eta": torch.atanh(torch.tensor(dilated_lam, dtype=torch.float64)),
              "dilated_nu": torch.logit(torch.tensor(dilated_gamma, dtype=torch.float64)),
              "dilated_theta": torch.tensor(dilated_theta, dtype=torch.float64)}
    with torch.no_grad():
        for name, value in values.items():
            if value.numel():
                getattr(rem, name).copy_(value)


# Heads: regular lambda = -0.5, cos and sin sharing gamma = 0.8 and theta = 1.1, dilated (d = 2)
# regular lambda = 0.6.
KINDS = (1, 1, 1, 1, 0, 0)
PARAMS = dict(lam=[-0.5], gamma=[0.8], theta=[1.1], dilated_lam=[0.6])


def hand_bias(head: int, lag: int, masked: bool) -> float:
    """The log-envelope bias of :data:`KINDS` / :data:`PARAMS` at one lag, written out per head."""
    if masked and lag < 0:
        return -math.inf
    a = abs(lag)
    if head == 0:  # lambda = -0.5: log-decay and the period-2 sign (-1)^a
        return a * math.log(0.5) + math.cos(a * math.pi)
    if head == 1:
        return a * math.log(0.8) + math.cos(1.1 * a)
    if head == 2:
        return a * math.log(0.8) + math.sin(1.1 * a)
    if a % 2:  # dilated by 2: odd lags are off the head's grid
        return -math.inf
    return (a // 2) * math.log(0.6) + 1.0


@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("need_weights", [False, True])
def test_bias_mode_is_the_softmax_of_the_hand_computed_biased_scores(masked, need_weights):
    torch.manual_seed(0)
    length, dim = 5, 3
    mixer = RSAMixer(RSAConfig(kinds=KINDS, dilation=2, periods=(6.0,), dilated_periods=(6.0,), mix="bias",
                               gate_init=(0.4, 0.4)), 4, masked=masked).double()
    set_rem(mixer.rem, **PARAMS)
    g = 1 / (1 + math.exp(-0.4))
    q, k, v = (torch.randn(1, 4, length, dim, dtype=torch.float64) for _ in range(3))
    out = FullAttention()(q, k, v, need_weights=need_weights, bias=mixer.score_bias(length, length))
    expected = torch.empty(1, 4, length, dim, dtype=torch.float64)
    for h in range(4):
        for i in range(length):
            logits = [float(q[0, h, i] @ k[0, h, j]) / math.sqrt(dim) + g * hand_bias(h, i - j, masked)
                      if not math.isinf(hand_bias(h, i - j, masked)) else -math.inf for j in range(length)]
            weights = torch.softmax(torch.tensor(logits, dtype=torch.float64), dim=0)
            expected[0, h, i] = weights @ v[0, h]
    torch.testing.assert_close(out.values, expected)
    # the gate mode's output at the same parameters differs: the mixing really changed
    assert not torch.allclose(mixer.rem.product(v), torch.zeros_like(v))


def test_a_positive_decay_head_is_alibi():
    """lambda > 0: the cosine term is a constant the softmax ignores, leaving (i - j) log lambda."""
    mixer = RSAMixer(RSAConfig(kinds=(1, 0, 0, 0, 0, 0), dilation=1, periods=(4.0,), dilated_periods=(4.0,),
                               mix="bias"), 1, masked=False).double()
    set_rem(mixer.rem, lam=[0.7])
    bias = mixer.score_bias(6, 6)[0, 0]
    g = float(mixer.gate.values())
    lags = torch.arange(6)[:, None] - torch.arange(6)[None, :]
    alibi = g * lags.abs().double() * math.log(0.7)
    torch.testing.assert_close(torch.softmax(bias, -1), torch.softmax(alibi, -1))


@pytest.mark.parametrize("kernel", [FullAttention(), ProbSparseAttention(factor=1)])
def test_a_masked_bias_never_lets_a_query_see_its_future(kernel):
    """encoder_masked REMs in bias mode make the head causal, even with a non-causal kernel."""
    torch.manual_seed(0)
    rsa = RSAConfig(kinds=(1, 1, 1, 1, 0, 0), dilation=2, periods=(6.0,), dilated_periods=(6.0,), mix="bias")
    layer = AttentionLayer(kernel, 8, 4, rsa=rsa, rsa_masked=True).eval()
    x = torch.randn(2, 10, 8)
    changed = x.clone()
    changed[:, 6:] += 5.0  # the future of rows 0..5
    rows = slice(0, 6)
    if isinstance(kernel, ProbSparseAttention):  # lazy rows average V: compare the rows both computed
        rows = slice(0, 0)
        layer.kernel.factor = 100  # every query selected: all rows have a softmax
    torch.testing.assert_close(layer(x, x, x)[0][:, rows], layer(changed, changed, changed)[0][:, rows])
    # the unmasked REM does see the future
    layer.rsa.rem._masked = False
    assert not torch.allclose(layer(x, x, x)[0][:, :6], layer(changed, changed, changed)[0][:, :6])


def test_probsparse_applies_the_bias_rows_of_its_selected_queries():
    """With every query selected ProbSparse is full attention: with a bias too."""
    torch.manual_seed(0)
    rsa = RSAConfig(kinds=(1, 1, 1, 1, 0, 0), dilation=2, periods=(6.0,), dilated_periods=(6.0,), mix="bias")
    mixer = RSAMixer(rsa, 4, masked=False).double()
    q, k, v = (torch.randn(2, 4, 8, 3, dtype=torch.float64) for _ in range(3))
    bias = mixer.score_bias(8, 8)
    sparse = ProbSparseAttention(factor=100).eval()(q, k, v, bias=bias).values
    torch.testing.assert_close(sparse, FullAttention()(q, k, v, bias=bias).values)


# Outputs of a fixed-seed forward on main (commit 517720b, before mix and per_channel existed):
# the gate mode and shared REMs must give them unchanged.
MAIN_OUTPUTS = {
    "rsa_patchtst": ({}, [-0.7920058965682983, 0.3796320855617523, -0.29360803961753845], 23.89663314819336),
    "rsa_informer": (dict(d_model=16, n_heads=8, d_ff=16, e_layers=1, d_layers=1),
                     [0.04084194451570511, 0.3851161599159241, 1.0147762298583984], 38.495792388916016),
}


@pytest.mark.parametrize("name", sorted(MAIN_OUTPUTS))
def test_gate_mode_outputs_are_those_of_main(name):
    options, first, total = MAIN_OUTPUTS[name]
    torch.manual_seed(0)
    model = build_model(name, data=THREE_CHANNELS, context_length=48, prediction_length=12, **options).eval()
    with torch.no_grad():
        y = model(batch(2, 48, 12, 3))
    torch.testing.assert_close(y[0, :3, 0], torch.tensor(first), rtol=1e-5, atol=1e-6)
    assert float(y.abs().sum()) == pytest.approx(total, rel=1e-5)


@pytest.mark.parametrize("mix", ["gate", "bias"])
def test_each_row_gets_its_channels_rem(mix):
    """A per-channel layer on rows of channels (2, 0, 1, 2) equals, row by row, a shared layer
    holding that channel's parameters."""
    torch.manual_seed(0)
    rsa = RSAConfig(kinds=(1, 1, 1, 1, 0, 0), dilation=2, periods=(6.0,), dilated_periods=(6.0,), mix=mix,
                    per_channel=True)
    layer = AttentionLayer(FullAttention(), 8, 4, rsa=rsa, rsa_masked=False, rsa_channels=3).double()
    with torch.no_grad():  # channels apart
        for p in layer.rsa.rem.parameters():
            p.add_(0.3 * torch.randn_like(p))
    x = torch.randn(4, 7, 8, dtype=torch.float64)
    channel = torch.tensor([2, 0, 1, 2])
    out, _ = layer(x, x, x, channel=channel)
    shared = AttentionLayer(FullAttention(), 8, 4, rsa=RSAConfig(**{**rsa.to_dict(), "per_channel": False}),
                            rsa_masked=False).double()
    state = layer.state_dict()
    for row, c in enumerate(channel.tolist()):
        shared.load_state_dict({k: v[c] if k.startswith("rsa.rem.") else v for k, v in state.items()})
        torch.testing.assert_close(out[row], shared(x[row:row + 1], x[row:row + 1], x[row:row + 1])[0][0])
    with pytest.raises(ValueError, match="pass channel"):
        layer(x, x, x)


def test_per_channel_parameters_start_equal_and_part_after_a_training_step():
    torch.manual_seed(0)
    model = build_model("rsa_patchtst", data=THREE_CHANNELS, context_length=48, prediction_length=12,
                        rsa={"per_channel": True})
    rem = model.layers[0].attention.rsa.rem
    names = [name for name, _ in rem.named_parameters()]
    assert names and all(getattr(rem, n).shape[0] == 3 for n in names)
    assert all(torch.equal(getattr(rem, n)[0], getattr(rem, n)[c]) for n in names for c in (1, 2))
    # SGD: Adam's first step moves every parameter by its learning rate, whatever its gradient
    optimiser = torch.optim.SGD(model.parameters(), lr=0.1)
    data = batch(8, 48, 12, 3)
    target = torch.randn(8, 12, 3)
    torch.nn.functional.mse_loss(model(data), target).backward()
    optimiser.step()
    for n in names:
        rows = getattr(rem, n).detach()
        assert not torch.equal(rows[0], rows[1]) and not torch.equal(rows[1], rows[2]), n


def test_gate_table_reports_per_channel_rems_and_the_mix():
    torch.manual_seed(0)
    model = build_model("rsa_patchtst", data=THREE_CHANNELS, context_length=48, prediction_length=12,
                        rsa={"per_channel": True, "mix": "bias"})
    rem = model.layers[0].attention.rsa.rem
    with torch.no_grad():
        rem.theta.copy_(torch.tensor([[1.0], [2.0], [4.0]]))
    summary = gate_table(model, "h")
    assert len(summary) == 3 * 4 and summary["channel"].isna().all() and (summary["mix"] == "bias").all()
    cos0 = summary[(summary["layer"] == 0) & (summary["kind"] == "cos") & ~summary["dilated"]].iloc[0]
    assert cos0["theta"] == pytest.approx(2.0)  # the median over the channels
    each = gate_table(model, "h", channels="each")
    assert len(each) == 3 * 4 * 3 and each["channel"].tolist()[:4] == [0, 0, 0, 0]
    cos = each[(each["layer"] == 0) & (each["kind"] == "cos") & ~each["dilated"]]
    assert cos["theta"].tolist() == pytest.approx([1.0, 2.0, 4.0])
    # the period the REM shows at integer lags: theta 4 (above pi) is the cycle of 2 pi - 4
    assert cos["period_steps"].tolist() == pytest.approx([2 * math.pi / t * 8 for t in (1.0, 2.0, 2 * math.pi - 4.0)])
    shared = gate_table(build_model("rsa_patchtst", data=THREE_CHANNELS, context_length=48, prediction_length=12))
    assert shared["channel"].isna().all() and (shared["mix"] == "gate").all()
    with pytest.raises(ValueError, match="channels must be one of"):
        gate_table(model, channels="all")


def wide_frame(steps=24 * 16, seed=0):
    rng = np.random.default_rng(seed)
    t = np.arange(steps)
    data = {f"y{c}": np.sin(2 * np.pi * t / 24 + c) * (1 + c) + 0.1 * rng.standard_normal(steps) for c in range(3)}
    return pd.DataFrame(data, index=pd.date_range("2024-01-01", periods=steps, freq="h"))


@pytest.mark.parametrize("rsa", [{"mix": "bias"}, {"per_channel": True}])
def test_rsa_patchtst_trains_saves_and_loads_with_each_option(tmp_path, rsa):
    frame = wide_frame()
    forecaster = tsrec.Forecaster("rsa_patchtst", prediction_length=12, context_length=48, d_ff=16, e_layers=1,
                                  rsa=rsa, max_steps=4, val_windows=4, seed=0, trainer_kwargs=QUIET)
    forecaster.fit(frame)
    network = forecaster.resolved_settings.network
    assert network.rsa.mix == rsa.get("mix", "gate") and network.rsa.per_channel == rsa.get("per_channel", False)
    forecast = forecaster.predict()
    assert len(forecast) == 12 * 3 and np.isfinite(forecast["mean"]).all()
    loaded = tsrec.Forecaster.load(forecaster.save(tmp_path / "model"))
    assert loaded.resolved_settings.network.rsa == network.rsa
    pd.testing.assert_frame_equal(loaded.predict(), forecast)
    pd.testing.assert_frame_equal(loaded.gates(), forecaster.gates())


def test_a_model_saved_before_the_options_existed_loads_in_gate_mode(tmp_path):
    frame = wide_frame()
    forecaster = tsrec.Forecaster("rsa_patchtst", prediction_length=12, context_length=48, d_ff=16, e_layers=1,
                                  max_steps=2, val_windows=4, seed=0, trainer_kwargs=QUIET).fit(frame)
    path = forecaster.save(tmp_path / "model")
    meta_file = path / "forecaster.json"
    meta = json.loads(meta_file.read_text())
    removed = 0
    for section in ("settings", "resolved_settings"):
        rsa = meta[section]["network"]["rsa"]
        removed += rsa.pop("mix") == "gate" and rsa.pop("per_channel") is False
    assert removed == 2  # both sections held the new fields, now gone as in an older save
    meta_file.write_text(json.dumps(meta))
    write_format_4(path)  # as a tsrec before these options saved it
    loaded = tsrec.Forecaster.load(path)
    assert loaded.resolved_settings.network.rsa.mix == "gate" and not loaded.resolved_settings.network.rsa.per_channel
    pd.testing.assert_frame_equal(loaded.predict(), forecaster.predict())


@pytest.mark.parametrize("name, options, match", [
    ("rsa_informer", {"rsa": {"per_channel": True}}, "mixes the channels in every token"),
    ("rsa_informer", {"rsa": {"per_channel": True}, "channel_independent": True},
     "does not give its RSA layers the channel of each row"),
    ("rsa_starsaber", {"rsa": {"mix": "bias"}}, "no attention scores to bias"),
])
def test_unavailable_options_are_refused_with_the_fix(name, options, match):
    with pytest.raises(ValueError, match=match):
        build_model(name, data=THREE_CHANNELS, context_length=48, prediction_length=12, **options)


@pytest.mark.parametrize("options, error, match", [
    ({"mix": "softmax"}, ValueError, r"rsa mix must be one of \('gate', 'bias'\)"),
    ({"per_channel": 1}, TypeError, "rsa per_channel must be True or False"),
])
def test_bad_option_values_are_named(options, error, match):
    with pytest.raises(error, match=match):
        RSAConfig(**options)


def test_within_makes_the_heads_longer_than_the_window_plain():
    """``within(max_lag)``: dilated heads whose dilation exceeds ``max_lag`` join their kind's plain
    heads (last), the others keep their dilation in order; idempotent; round-trips through JSON."""
    rsa = RSAConfig(kinds=(1, 1, 1, 2, 1, 1), dilation=(3, 30, 12, 4), periods=(6.0,), dilated_periods=(7.0,))
    bound = rsa.within(11)
    assert bound.kinds == (2, 2, 1, 1, 0, 1) and bound.dilation == (3, 4) and bound.undilated == (1, 1, 0)
    assert bound.max_lag == 11 and bound.within(11) == bound
    assert bound.undilated_heads() == (False, True, False, True, False, False, False)
    assert RSAConfig.from_dict(bound.to_dict()) == bound
    every = RSAConfig(kinds=(0, 0, 0, 0, 2, 2), dilation=24, periods=(24.0,), dilated_periods=(7.0,)).within(23)
    assert every.kinds == (0, 2, 2, 0, 0, 0) and every.dilation == 24 and every.undilated == (0, 2, 2)
    fits = RSAConfig(kinds=(0, 0, 0, 0, 2, 2), dilation=24, periods=(24.0,), dilated_periods=(7.0,)).within(24)
    assert fits.kinds == (0, 0, 0, 0, 2, 2) and fits.undilated == (0, 0, 0)  # lag 24 is seen
    # resolution applies it: the data's day (24) on a 12-step window
    resolved = RSAConfig().resolved(4, DataFacts(season=24, periods=(24.0,)), max_lag=11)
    assert resolved.kinds == (0, 2, 2, 0, 0, 0) and resolved.undilated == (0, 1, 1)
    with pytest.raises(ValueError, match="needs kinds and dilation"):
        RSAConfig().within(11)


@pytest.mark.parametrize("options, match", [
    ({"undilated": (1, 0)}, "three non-negative head counts"),
    ({"undilated": (0, -1, 0)}, "three non-negative head counts"),
    ({"kinds": (0, 1, 1, 0, 1, 1), "undilated": (1, 0, 0)}, "counts more plain heads than kinds"),
    ({"max_lag": -1}, "max_lag"),
])
def test_bad_dilation_records_are_named(options, match):
    with pytest.raises((ValueError, TypeError), match=match):
        RSAConfig(**options)


def test_a_bias_whose_rem_reaches_no_key_is_refused():
    """Cross-attention whose queries all lie past the keys, a dilation no lag meets: no key left."""
    rsa = RSAConfig(kinds=(0, 0, 0, 1, 0, 0), dilation=7, periods=(4.0,), dilated_periods=(4.0,), mix="bias")
    mixer = RSAMixer(rsa, 1)
    with pytest.raises(ValueError, match="reach no key through their REM"):
        mixer.score_bias(2, 3, query_offset=3)  # lags 1..5: no multiple of 7


def test_plot_rem_draws_the_chosen_channels_rems():
    from tsrec.plotting import plot_rem

    torch.manual_seed(0)
    model = build_model("rsa_patchtst", data=THREE_CHANNELS, context_length=48, prediction_length=12,
                        rsa={"per_channel": True})
    rem = model.layers[0].attention.rsa.rem
    with torch.no_grad():
        rem.theta.copy_(torch.tensor([[1.0], [2.0], [4.0]]))
        expected = rem.matrix(7, channel=torch.tensor([2]))[0].numpy()  # [H, 7, 7] of channel 2
    fig = plot_rem(model, max_lag=6, channel=2)
    curves = fig.axes[0]
    lines = [line for line in curves.get_lines() if not line.get_label().startswith("_")]
    assert len(lines) == 4
    for h, line in enumerate(lines):
        np.testing.assert_allclose(line.get_ydata(), expected[h, 1:, 0], rtol=1e-5, atol=1e-7)  # f(l) = P[l, 0]
