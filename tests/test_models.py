"""One contract over every registered model, plus the Informer window arithmetic and the options."""

import dataclasses

import pytest
import torch

from tsrec.config import DataFacts, RSAConfig
from tsrec.models import (
    EncoderDecoderForecaster,
    TransformerConfig,
    build_model,
    list_models,
    model_config,
)
from tsrec.nn.attention import rsa_parameters
from tsrec.models.ensemble import with_members
from tsrec.models.stats import StatsConfig

B, LC, LABEL, H, C, F = 3, 32, 16, 8, 3, 4
DATA = DataFacts(season=4, n_channels=C, n_time_features=F)  # fills what the options leave to the data
# Every registered network but the ensemble, which is built from fitted members (its own test below).
NETWORKS = [name for name in list_models() if name != "auto"]
#: The models whose contracts are run by ``-m slow`` (.ci/run) alone: ARIMA's search costs 2-7 s per
#: case here (tests/test_stats_models.py holds its test against statsforecast in the default run).
SLOW_CONTRACTS = {"arima"}
CONTRACTS = [pytest.param(name, marks=pytest.mark.slow) if name in SLOW_CONTRACTS else name for name in NETWORKS]



def tiny_options(name, **extra):
    options = dict(context_length=LC, prediction_length=H, n_channels=C, n_time_features=F)
    spec_fields = model_config(name).to_dict()
    if "label_length" in spec_fields:
        # mix=False: with Informer's mix and one decoder layer, some decoder self-attention heads
        # cannot reach the forecast rows (see test_informer_mix_cuts_some_decoder_heads_off).
        options.update(label_length=LABEL, d_model=16, n_heads=8, d_ff=32, mix=False)
        if spec_fields["rsa"] is not None:
            options["rsa"] = RSAConfig(kinds=(1, 2, 2, 1, 1, 1), dilation=4)
    if "season_length" in spec_fields and spec_fields["season_length"] is None:  # not preset (naive's 1, croston's)
        options["season_length"] = 4
    if "alpha_init" in spec_fields:
        # Zero-initialised residual scales (SRU++'s alpha, StarSaber's ReZero) would leave the
        # weights behind them without gradient at the first step; start them open here.
        options["alpha_init"] = 0.5
    if "patch_len" in spec_fields:
        # LayerNorm: BatchNorm's running statistics move in the training-mode forward below, so a
        # fresh model would differ in eval mode (BatchNorm is covered in tests/test_patchtst.py).
        options["norm"] = "layer"
    options.update(extra)
    return options


def batch(seed=0):
    g = torch.Generator().manual_seed(seed)
    return {"past_target": torch.randn(B, LC, C, generator=g), "past_time_feat": torch.randn(B, LC, F, generator=g),
            "future_time_feat": torch.randn(B, H, F, generator=g)}


def test_registry_lists_the_paper_models_and_baselines():
    assert {"informer", "rsa_informer", "logsparse", "rsa_logsparse", "transformer", "rsa_transformer",
            "dlinear", "seasonal_naive"} <= set(list_models())


def test_unknown_model_and_option_errors_name_the_alternatives():
    with pytest.raises(ValueError, match="known models: .*informer"):
        build_model("infromer")
    with pytest.raises(TypeError, match="has no option.*d_modle"):
        model_config("informer", d_modle=8)


@pytest.mark.parametrize("name", CONTRACTS)
@pytest.mark.parametrize("extra", [{}, {"revin": True}, {"channel_independent": True}],
                         ids=["plain", "revin", "channel_independent"])
def test_model_contract(name, extra):
    torch.manual_seed(0)
    if extra.get("revin") and isinstance(model_config(name), StatsConfig):
        with pytest.raises(ValueError, match="RevIN does not apply"):
            build_model(name, data=DATA, **tiny_options(name, **extra))
        return
    model = build_model(name, data=DATA, **tiny_options(name, **extra))
    out = model(batch())
    assert out.shape == (B, H, C)
    assert torch.isfinite(out).all()

    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    if model.trainable:
        out.pow(2).mean().backward()
        missing = [n for n, p in params if p.grad is None or not torch.any(p.grad != 0)]
        assert not missing, f"no gradient reaches {missing}"
    if name.startswith("rsa_"):
        assert len(list(rsa_parameters(model))) > 0

    torch.manual_seed(0)
    again = build_model(name, data=DATA, **tiny_options(name, **extra))
    model.eval(), again.eval()
    torch.testing.assert_close(model(batch()), again(batch()), rtol=0, atol=0)


# Covariates: 3 batch features (e.g. a past covariate, its flag, a future covariate) and one
# categorical static covariate with 3 categories, embedded in 2 features by the network.
K, CARDINALITY = 3, 3
COVARIATE_DATA = DataFacts(season=4, n_channels=C, n_time_features=F + K + 2, n_covariate_features=K + 2,
                           static_cardinalities=(CARDINALITY,))


def covariate_batch(seed=0):
    g = torch.Generator().manual_seed(seed)
    return {**batch(seed), "past_time_feat": torch.randn(B, LC, F + K, generator=g),
            "future_time_feat": torch.randn(B, H, F + K, generator=g),
            "static_cat": torch.randint(0, CARDINALITY, (B, 1), generator=g)}


@pytest.mark.parametrize("name", CONTRACTS)
@pytest.mark.parametrize("extra", [{}, {"channel_independent": True}], ids=["plain", "channel_independent"])
def test_model_contract_with_covariates(name, extra):
    """Every trainable model forecasts from the covariates (the shared covariate path: static
    embeddings in the time features, the covariate head), with gradient reaching every weight."""
    torch.manual_seed(0)
    model = build_model(name, data=COVARIATE_DATA, **tiny_options(name, n_time_features=F + K + 2, **extra))
    data = covariate_batch()
    out = model(data)
    assert out.shape == (B, H, C) and torch.isfinite(out).all()
    if not model.trainable:
        return
    out.pow(2).mean().backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not torch.any(p.grad != 0)]
    assert not missing, f"no gradient reaches {missing}"
    model.eval()
    moved = dict(data, future_time_feat=data["future_time_feat"].clone())
    moved["future_time_feat"][..., -1] += 1.0  # one known-future covariate at every forecast step
    other = dict(data, static_cat=(data["static_cat"] + 1) % CARDINALITY)
    assert not torch.allclose(model(moved), model(data))
    assert not torch.allclose(model(other), model(data))


@pytest.mark.parametrize("base", ["informer", "logsparse", "transformer"])
def test_rsa_adds_only_a_handful_of_scalars_per_layer(base):
    options = tiny_options(base)
    plain = build_model(base, data=DATA, **options)
    rsa = build_model(f"rsa_{base}", data=DATA, **options, rsa=RSAConfig(kinds=(0, 2, 2, 0, 2, 2), dilation=4))
    n_plain = sum(p.numel() for p in plain.parameters())
    n_rsa = sum(p.numel() for p in rsa.parameters())
    layers = rsa.rsa_layers()
    assert len(layers) == 4  # 2 encoder self, 1 decoder self, 1 cross
    # per layer: 2 (gamma, theta) pairs, 2 dilated pairs, 1 gate = 9 scalars
    assert n_rsa - n_plain == 9 * len(layers)
    assert [(name, i) for name, i, _ in layers] == [("encoder self", 0), ("encoder self", 1),
                                                    ("decoder self", 0), ("cross", 0)]


def test_informer_window_arithmetic_by_hand():
    """Context 6, label 3, horizon 2: the decoder reads x[3:6] then 2 zeros, with the calendar
    features of steps 3..7; decoder step 0 sits at time 6 - 3 = 3, so the cross-attention, which
    computes the 2 forecast rows only, places them at times 6 and 7 for the cross REM."""
    config = TransformerConfig(context_length=6, label_length=3, prediction_length=2, n_channels=1,
                               n_time_features=1, d_model=8, n_heads=8, d_ff=8, attention="full", revin=False,
                               rsa=RSAConfig(kinds=(8, 0, 0, 0, 0, 0)))
    model = EncoderDecoderForecaster(config.resolved(DataFacts(season=2))).eval()
    past = torch.arange(1.0, 7.0).view(1, 6, 1)
    past_tf = torch.arange(0.0, 6.0).view(1, 6, 1) / 10
    future_tf = torch.tensor([6.0, 7.0]).view(1, 2, 1) / 10
    seen = {}
    model.dec_embedding.register_forward_hook(lambda m, args, out: seen.update(dec=args))
    cross = model.decoder.layers[0].cross_attention
    cross.register_forward_hook(lambda m, args, kwargs, out: seen.update(cross=(args, kwargs)), with_kwargs=True)
    model({"past_target": past, "past_time_feat": past_tf, "future_time_feat": future_tf})
    dec_in, dec_tf = seen["dec"]
    assert dec_in.flatten().tolist() == [4.0, 5.0, 6.0, 0.0, 0.0]
    torch.testing.assert_close(dec_tf.flatten(), torch.tensor([0.3, 0.4, 0.5, 0.6, 0.7]))
    (queries, keys, _), kwargs = seen["cross"]
    assert queries.shape[1] == 2 and keys.shape[1] == 6 and kwargs["query_offset"] == 6


@pytest.mark.parametrize("d_layers", [1, 2])
@pytest.mark.parametrize("mix", [True, False])
@pytest.mark.parametrize("rsa", [None, RSAConfig(kinds=(2, 1, 1, 2, 1, 1), dilation=3)])
def test_decoder_keeping_the_forecast_rows_equals_the_full_decoder(d_layers, mix, rsa):
    """Dropping the label rows after the last self-attention changes no forecast value (rows are
    independent from there on; the cross REM keeps the rows' real times)."""
    torch.manual_seed(0)
    config = TransformerConfig(context_length=12, label_length=6, prediction_length=4, n_channels=2,
                               n_time_features=1, d_model=16, n_heads=8, d_ff=8, d_layers=d_layers, mix=mix,
                               attention="full", rsa=rsa)
    model = EncoderDecoderForecaster(config.resolved(DataFacts(season=3))).double().eval()
    x = torch.randn(3, 10, 16, dtype=torch.float64)  # decoder input [B, label + H, d]
    memory = torch.randn(3, 12, 16, dtype=torch.float64)
    full = model.decoder(x, memory, cross_offset=6)  # [B, 10, d]
    kept = model.decoder(x, memory, cross_offset=6, keep_last=4)  # [B, 4, d]
    assert kept.shape == (3, 4, 16)
    torch.testing.assert_close(kept, full[:, -4:])


def test_dlinear_starts_as_the_window_mean_and_naive_repeats_the_season():
    constant = torch.full((1, LC, C), 2.5)
    dl = build_model("dlinear", context_length=LC, prediction_length=H, n_channels=C, n_time_features=0)
    out = dl({"past_target": constant, "past_time_feat": constant[..., :0], "future_time_feat": constant[:, :H, :0]})
    torch.testing.assert_close(out, torch.full((1, H, C), 2.5))
    naive = build_model("seasonal_naive", context_length=LC, prediction_length=H, n_channels=1, n_time_features=0,
                        season_length=3)
    past = torch.arange(float(LC)).view(1, LC, 1)
    out = naive({"past_target": past, "past_time_feat": past[..., :0], "future_time_feat": past[:, :H, :0]})
    out = out.flatten().tolist()
    assert out == [LC - 3, LC - 2, LC - 1] * 2 + [LC - 3, LC - 2]


def test_invalid_configs_are_refused_with_a_reason():
    with pytest.raises(ValueError, match="label_length"):
        TransformerConfig(context_length=8, label_length=9)
    with pytest.raises(ValueError, match="every head needs a REM kind"):
        TransformerConfig(n_heads=8, rsa=RSAConfig(kinds=(1, 1, 1, 0, 0, 0)))
    with pytest.raises(ValueError, match="distil=False"):
        TransformerConfig(distil=True, rsa=RSAConfig())
    with pytest.raises(ValueError, match="prediction_length must be an integer >= 1"):
        TransformerConfig(prediction_length=0)
    with pytest.raises(TypeError, match="RSAConfig has no setting.*'dilations'.*its settings are: kinds"):
        TransformerConfig(rsa={"dilations": 24})
    with pytest.raises(ValueError, match="attention must be one of"):
        TransformerConfig(attention="sparse")


def test_a_model_with_unresolved_settings_names_them_and_the_fix():
    with pytest.raises(ValueError, match=r"needs label_length, rsa\.kinds, rsa\.dilation.*resolved\(DataFacts"):
        build_model("rsa_informer", context_length=LC, prediction_length=H, n_channels=C, n_time_features=F)


@pytest.mark.parametrize("context, label, horizon, undilated", [
    (96, 48, 48, (0, 2, 2)),  # the paper's ETTm1 48: a day (96 steps) is longer than every self-attention
    (672, 96, 24, (0, 0, 0)),  # the paper's ETTm1 24: decoder self-attention sees 120 steps, the day fits
])
def test_informer_dilations_are_bound_by_its_shortest_attention(context, label, horizon, undilated):
    """One RSA section serves the encoder, decoder and cross-attention: its dilation must fit the
    shortest of them, else that attention's dilated heads see no lag (zero REM, no gradient)."""
    facts = DataFacts(season=96, n_channels=1, n_time_features=4)
    config = model_config("rsa_informer", context_length=context, label_length=label, prediction_length=horizon,
                          rsa=dict(dilation=96)).resolved(facts)
    assert config.max_lag == config.rsa.max_lag == min(context, label + horizon) - 1
    assert config.rsa.undilated == undilated
    assert config.rsa.kinds == tuple(k + u for k, u in zip((0, 2, 2), undilated)) + \
        tuple(k - u for k, u in zip((0, 2, 2), undilated))
    torch.manual_seed(0)
    model = EncoderDecoderForecaster(config)
    for _, _, layer in model.rsa_layers():
        assert int(layer.rsa.rem.dilation.max()) <= config.max_lag


def test_sequence_backbones_bind_dilations_by_their_context():
    facts = DataFacts(season=96, n_channels=1, n_time_features=4)
    short = model_config("rsa_srupp", context_length=64, prediction_length=16).resolved(facts)
    assert short.rsa.max_lag == 63 and short.rsa.undilated == (0, 1, 1) and sum(short.rsa.kinds[3:]) == 0
    long = model_config("rsa_srupp", context_length=192, prediction_length=16).resolved(facts)
    assert long.rsa.undilated == (0, 0, 0) and long.rsa.kinds[3:] == (0, 1, 1)


def test_data_dependent_fields_fill_from_the_data_and_never_replace_a_set_value():
    facts = DataFacts(season=7, sub_daily=False, n_channels=2, n_time_features=3)
    config = model_config("rsa_informer", context_length=28, prediction_length=7, n_heads=4).resolved(facts)
    assert (config.label_length, config.n_channels, config.n_time_features) == (14, 2, 3)
    assert config.rsa == RSAConfig(kinds=(0, 1, 1, 0, 1, 1), dilation=7, periods=(7.0, 3.5), dilated_periods=(8.0,),
                                   max_lag=20)  # decoder self-attention: 14 + 7 steps
    mine = RSAConfig(kinds=(4, 0, 0, 0, 0, 0), dilation=2, periods=(5.0,), dilated_periods=(3.0,), per_head_gate=True)
    kept = model_config("rsa_informer", context_length=28, prediction_length=7, n_heads=4, label_length=3,
                        rsa=mine).resolved(facts)
    assert kept.rsa == dataclasses.replace(mine, max_lag=9) and kept.label_length == 3
    naive = model_config("seasonal_naive", context_length=5, prediction_length=2)
    with pytest.warns(UserWarning, match="no natural cycle and none stood out"):
        assert naive.resolved(facts).season_length == 1  # neither the calendar nor the data have a cycle
    daily = dataclasses.replace(facts, cycles=(7.0, 365.25))
    with pytest.warns(UserWarning, match=r"history read \(5 steps\) cannot hold 1 season\(s\) of the shortest cycle, "
                                         r"7 steps"):
        assert naive.resolved(daily).season_length == 1  # the calendar's week does not fit a 5-step context
    longer = dataclasses.replace(naive, context_length=14)
    assert longer.resolved(daily).season_length == 7  # the calendar's, where the data show no line
    assert longer.resolved(dataclasses.replace(daily, periods=(6.96, 30.0))).season_length == 7  # confirmed
    assert longer.resolved(dataclasses.replace(daily, periods=(10.0,))).season_length == 10  # overruled


def test_nn_module_apply_works_on_rsa_models():
    """LearnableREM once overrode nn.Module.apply (P @ V): model.apply(init_fn) crashed."""
    model = build_model("rsa_informer", data=DATA, **tiny_options("rsa_informer"))
    seen = []
    model.apply(lambda module: seen.append(type(module).__name__))
    assert "LearnableREM" in seen and "EncoderDecoderForecaster" in seen


def test_config_round_trips_through_json():
    import json

    config = model_config("rsa_informer", rsa={"kinds": (4, 0, 0, 4, 0, 0), "dilation": 24, "periods": [24.0]})
    assert config.rsa == RSAConfig(kinds=(4, 0, 0, 4, 0, 0), dilation=24, periods=(24.0,))
    again = type(config).from_dict(json.loads(json.dumps(config.to_dict())))
    assert again == config
    assert again.rsa.kinds == (4, 0, 0, 4, 0, 0)


def test_distilling_halves_the_encoder_axis():
    model = build_model("informer", data=DATA, **tiny_options("informer", distil=True))
    memory, _ = model.encoder(model.enc_embedding(batch()["past_target"], batch()["past_time_feat"]))
    assert memory.shape[1] == LC // 2


def test_informer_mix_cuts_some_decoder_heads_off():
    """Informer's mix flattens [B, H, L, D] as [B, L, H*D]: with one decoder layer the forecast rows
    (the last H of label + H) hold only the last heads, so the REMs of the first heads of decoder
    self-attention get no gradient. Kept for fidelity to the paper's baseline; documented in
    TransformerConfig."""
    model = build_model("rsa_informer", data=DATA, **{**tiny_options("rsa_informer"), "mix": True})
    model(batch()).pow(2).mean().backward()
    rem = model.decoder.layers[0].self_attention.rsa.rem
    # rows 16..23 of 24 with 8 heads of size 2: heads 16*8//24 = 5 .. 7 (the dilated heads)
    assert rem.eta.grad is None or torch.all(rem.eta.grad == 0)
    assert torch.any(rem.dilated_nu.grad != 0)


def test_the_ensemble_network_is_the_weighted_sum_of_its_members_each_on_its_own_context():
    torch.manual_seed(0)
    short = build_model("dlinear", data=DATA, **{**tiny_options("dlinear"), "context_length": LC // 2})
    long = build_model("seasonal_naive", data=DATA, **tiny_options("seasonal_naive"))
    config = with_members(model_config("auto", context_length=LC, prediction_length=H, n_channels=C,
                                       n_time_features=F),
                          [("dlinear", short.config), ("seasonal_naive", long.config)], [0.25, 0.75], [])
    ensemble = build_model("auto", config).eval()
    ensemble.members[0].load_state_dict(short.state_dict())
    window = batch()
    half = {k: v[:, -(LC // 2):] if k.startswith("past") else v for k, v in window.items()}
    with torch.no_grad():
        expected = 0.25 * short.eval()(half) + 0.75 * long(window)
        torch.testing.assert_close(ensemble(window), expected)
        plain = {k: window[k] for k in ("past_target", "past_time_feat", "future_time_feat")}
        torch.testing.assert_close(ensemble.forecast(*plain.values())[..., 0], ensemble(plain))
    with pytest.raises(ValueError, match="weights must sum to 1"):
        with_members(config, [("dlinear", short.config)], [0.5], [])
    with pytest.raises(ValueError, match="needs members"):
        build_model("auto", model_config("auto", context_length=LC, prediction_length=H, n_channels=C,
                                          n_time_features=F))


def test_seasonal_naive_never_repeats_a_missing_value():
    """A missing value of the last season: the same phase of the latest earlier season that has it;
    a phase missing in every season of the context: the context's last observed value."""
    import torch

    from tsrec.models import build_model

    model = build_model("seasonal_naive", context_length=8, prediction_length=5, n_channels=1, n_time_features=0,
                        season_length=4)
    past = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]).view(1, 8, 1)
    observed = torch.ones_like(past)
    observed[0, 5] = 0  # phase 1 of the last season: taken from the season before (2.0)
    observed[0, [2, 6], 0] = 0  # phase 2: missing in both seasons -> the last observed value, 8.0
    batch = {"past_target": past, "past_observed": observed, "past_time_feat": torch.zeros(1, 8, 0),
             "future_time_feat": torch.zeros(1, 5, 0)}
    torch.testing.assert_close(model(batch)[0, :, 0], torch.tensor([5.0, 2.0, 8.0, 8.0, 5.0]))
    torch.testing.assert_close(model({**batch, "past_observed": torch.ones_like(past)})[0, :, 0],
                               torch.tensor([5.0, 6.0, 7.0, 8.0, 5.0]))
