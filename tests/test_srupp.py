"""SRU++ and RSA-SRU++: the vectorised layer against a step-by-step reference written from
ZOO_SPEC.md section 1, the recurrence's hand-written gradient, RSA mixing, the layer pattern,
dropout, config errors, and the estimator end to end."""

import copy
import math

import numpy as np
import pandas as pd
import pytest
import torch
from torch.nn import functional as F

import tsrec
from tsrec.config import DataFacts, RSAConfig
from tsrec.datasets.synthetic import recurrent_series
from tsrec.models import SRUpp, build_model, model_config
from tsrec.nn.attention import rsa_parameters
from tsrec.nn.sru import FactorisedProjection, SRUppAttention, SRUppLayer, SRUppStack, forget_recurrence

pytestmark = pytest.mark.usefixtures("one_thread")

B, L, D, D_ATT, HEADS = 3, 11, 8, 6, 2
FACTS = DataFacts(season=4, n_channels=2, n_time_features=3)


def reference_attention(proj, z, t, rem):
    """``A_t [B, d']``: query ``z_t`` attends to keys ``0..t`` head by head; with RSA, mixed with
    row ``t`` of the REMs ``rem [h, L, L]`` by the layer's gates."""
    k, v = (z[:, : t + 1] @ proj.w2.weight.T).chunk(2, dim=-1)  # [B, t + 1, d'] each
    width = z.shape[-1] // proj.n_heads
    heads = []
    for h in range(proj.n_heads):
        cols = slice(h * width, (h + 1) * width)
        scores = (k[:, :, cols] * z[:, t, None, cols]).sum(-1) / math.sqrt(width)  # [B, t + 1]
        head = (torch.softmax(scores, dim=-1).unsqueeze(-1) * v[:, :, cols]).sum(1)  # [B, width]
        if proj.rsa is not None:
            gates = proj.rsa.gate().flatten()
            g = gates[h % gates.numel()]
            head = (1 - g) * head + g * (rem[h, t, : t + 1, None] * v[:, :, cols]).sum(1)
        heads.append(head)
    return torch.cat(heads, dim=-1)


def reference_layer(layer, x):
    """``h [B, L, d]`` of ``layer`` on ``x [B, L, d_in]``, one step at a time from the equations."""
    proj = layer.projection
    attention = isinstance(proj, SRUppAttention)
    rem = proj.rsa.rem.matrix(x.shape[1]).to(x.dtype) if attention and proj.rsa is not None else None
    z = x @ proj.w1.weight.T  # [B, L, d']
    c = x.new_zeros(x.shape[0], layer.d)
    out = []
    for t in range(x.shape[1]):
        pre = z[:, t] + proj.alpha * reference_attention(proj, z, t, rem) if attention else z[:, t]
        o = F.layer_norm(pre, pre.shape[-1:], proj.norm.weight, proj.norm.bias, proj.norm.eps)
        u = o @ proj.w3.weight.T  # [B, k d]
        u0, u1, u2, *u3 = u.chunk(layer.n_chunks, dim=-1)
        f = torch.sigmoid(u1 + layer.v_f * c + layer.b_f)
        r = torch.sigmoid(u2 + layer.v_r * c + layer.b_r)
        c = f * c + (1 - f) * u0
        out.append(r * c + (1 - r) * (u3[0] if u3 else x[:, t]))
    return torch.stack(out, dim=1)


def rsa_config(n_heads):
    return RSAConfig(per_head_gate=True).resolved(n_heads, FACTS)


def randomised(layer):
    """Non-trivial norm affine parameters (the others are random from the start), float64, eval."""
    with torch.no_grad():
        layer.projection.norm.weight.uniform_(0.5, 1.5)
        layer.projection.norm.bias.uniform_(-0.5, 0.5)
    return layer.double().eval()


@pytest.mark.parametrize("d_in, attention, alpha", [
    (D, True, 0.0), (D, True, 0.7), (5, True, -1.3), (D, False, 0.0), (5, False, 0.0),
], ids=["alpha0", "alpha", "alpha-d_in", "no-attention", "no-attention-d_in"])
def test_layer_equals_the_step_by_step_reference(d_in, attention, alpha):
    torch.manual_seed(0)
    layer = randomised(SRUppLayer(d_in, D, D_ATT, HEADS, attention=attention, alpha_init=alpha))
    x = torch.randn(B, L, d_in, dtype=torch.float64)
    torch.testing.assert_close(layer(x), reference_layer(layer, x), rtol=0, atol=1e-6)


@pytest.mark.parametrize("mu", [None, -1e4, 1e4], ids=["gates", "gate0", "gate1"])
def test_rsa_layer_equals_the_reference_mix(mu):
    """``(1 - g) softmax(.) v + g P v`` with causal REMs, at random gates, 0 and 1 (REMs only)."""
    torch.manual_seed(1)
    layer = randomised(SRUppLayer(D, D, D, 4, alpha_init=0.9, rsa=rsa_config(4)))
    if mu is not None:
        with torch.no_grad():
            layer.projection.rsa.gate.mu.fill_(mu)
    x = torch.randn(B, L, D, dtype=torch.float64)
    torch.testing.assert_close(layer(x), reference_layer(layer, x), rtol=0, atol=1e-6)


def test_rsa_with_gate_0_is_the_plain_layer():
    torch.manual_seed(2)
    rsa = SRUppLayer(D, D, D, 4, alpha_init=0.9, rsa=rsa_config(4)).double().eval()
    plain = SRUppLayer(D, D, D, 4, alpha_init=0.9).double().eval()
    plain.load_state_dict({k: v for k, v in rsa.state_dict().items() if ".rsa." not in k})
    with torch.no_grad():
        rsa.projection.rsa.gate.mu.fill_(-1e4)
    x = torch.randn(B, L, D, dtype=torch.float64)
    torch.testing.assert_close(rsa(x), plain(x), rtol=0, atol=1e-12)


def test_at_alpha_0_the_layer_is_an_sru_on_the_factorised_projection():
    torch.manual_seed(3)
    attending = SRUppLayer(D, D, D_ATT, HEADS).double().eval()
    projected = SRUppLayer(D, D, D_ATT, HEADS, attention=False).double().eval()
    projected.load_state_dict(attending.state_dict(), strict=False)
    assert isinstance(projected.projection, FactorisedProjection)
    x = torch.randn(B, L, D, dtype=torch.float64)
    torch.testing.assert_close(attending(x), projected(x), rtol=0, atol=0)


def test_recurrence_gradient_is_exact():
    g = torch.Generator().manual_seed(4)
    u, a = (torch.randn(2, 7, 3, dtype=torch.float64, generator=g, requires_grad=True) for _ in range(2))
    v = torch.randn(3, dtype=torch.float64, generator=g, requires_grad=True)
    assert torch.autograd.gradcheck(forget_recurrence, (u, a, v))
    # non-contiguous inputs (chunks of one projection), as the layer passes them
    whole = torch.randn(2, 7, 6, dtype=torch.float64, generator=g, requires_grad=True)
    assert torch.autograd.gradcheck(lambda w, v: forget_recurrence(*w.chunk(2, dim=-1), v), (whole, v))


def test_initialisation_follows_the_reference():
    layer = SRUppLayer(D, D, D_ATT, HEADS, dropout=0.19)
    assert torch.equal(layer.b_f, torch.zeros(D)) and torch.equal(layer.b_r, torch.full((D,), -2.0))
    assert layer.v_f.abs().max() <= 1 and layer.v_r.abs().max() <= 1
    assert torch.equal(layer.projection.alpha.detach(), torch.tensor(0.0))
    proj = layer.projection
    for linear, scale in ((proj.w1, 1.0), (proj.w2, 1.0), (proj.w3, 0.9)):  # W3 x sqrt(1 - dropout)
        fan_out, fan_in = linear.weight.shape
        bound = scale * math.sqrt(6 / (fan_in + fan_out))
        assert linear.bias is None and linear.weight.abs().max() <= bound
        assert linear.weight.abs().max() > 0.9 * bound


def test_recurrent_dropout_is_one_mask_over_time():
    """A dropped feature passes ``x`` through at every step; the others mix in the recurrence."""
    torch.manual_seed(5)
    layer = SRUppLayer(D, D, D_ATT, HEADS, alpha_init=0.5, recurrent_dropout=0.5).train()
    x = torch.randn(4, L, D)
    passed = layer(x) == x  # [B, L, d]
    assert passed.any() and not passed.all()
    assert torch.equal(passed.all(dim=1), passed.any(dim=1))
    layer.eval()
    assert not (layer(x) == x).any()


def test_attention_every_picks_the_attending_layers():
    stack = SRUppStack(16, 4, 8, 2, attention_every=2, rsa=rsa_config(2))
    attends = [isinstance(layer.projection, SRUppAttention) for layer in stack.layers]
    assert attends == [False, True, False, True]
    assert [layer.recurrent_dropout for layer in SRUppStack(16, 3, 8, 2, dropout=0.2).layers] == [0.2, 0.2, 0.0]
    model = build_model("rsa_srupp", data=FACTS, context_length=24, prediction_length=6, d_model=16,
                        d_attention=8, n_heads=2, n_layers=4, attention_every=2)
    assert [(name, i) for name, i, _ in model.rsa_layers()] == [("backbone", 0), ("backbone", 1)]
    with pytest.raises(ValueError, match="a layer without attention takes no rsa"):
        SRUppLayer(D, D, D_ATT, HEADS, attention=False, rsa=rsa_config(HEADS))


def test_mixed_precision_keeps_the_recurrence_in_float32():
    """Under autocast (``precision="bf16-mixed"``) the projections run in bfloat16, the recurrence in float32."""
    torch.manual_seed(8)
    model = build_model("rsa_srupp", data=FACTS, context_length=24, prediction_length=6, alpha_init=0.5).eval()
    batch = {"past_target": torch.randn(5, 24, 2), "past_time_feat": torch.randn(5, 24, 3),
             "future_time_feat": torch.randn(5, 6, 3)}
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(batch)
        hidden = model.backbone(torch.randn(5, 24, 64))
    assert hidden.dtype == torch.float32 and torch.isfinite(out).all()
    out.float().pow(2).mean().backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters())
    torch.testing.assert_close(out.float(), model(batch), rtol=0, atol=0.03)  # bfloat16: ~3 significant digits


@pytest.mark.parametrize("name", ["srupp", "rsa_srupp"])
def test_every_parameter_gets_a_gradient(name):
    torch.manual_seed(6)
    model = build_model(name, data=FACTS, context_length=24, prediction_length=6, n_layers=3, attention_every=2,
                        alpha_init=0.5)
    batch = {"past_target": torch.randn(5, 24, 2), "past_time_feat": torch.randn(5, 24, 3),
             "future_time_feat": torch.randn(5, 6, 3)}
    out = model(batch)
    assert out.shape == (5, 6, 2) and torch.isfinite(out).all()
    out.pow(2).mean().backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not torch.any(p.grad != 0)]
    assert not missing, f"no gradient reaches {missing}"
    assert (len(list(rsa_parameters(model))) > 0) == (name == "rsa_srupp")


@pytest.mark.parametrize("options, match", [
    ({"d_attention": 64}, r"d_attention \(64\) must be below d_model \(64\).*set d_attention"),
    ({"d_attention": 30}, r"d_attention \(30\) must be divisible by n_heads \(4\)"),
    ({"attention_every": 3}, r"attention_every \(3\) exceeds n_layers \(2\).*set attention_every <= 2"),
    ({"alpha_init": float("nan")}, "alpha_init must be a finite number"),
    ({"alpha_init": "0.5"}, "alpha_init must be a finite number"),
    ({"attn_dropout": 1.0}, r"attn_dropout must be in \[0, 1\)"),
    ({"rsa": {"encoder_masked": False}}, "rsa.encoder_masked must be True"),
])
def test_bad_configs_are_refused_with_a_reason(options, match):
    with pytest.raises(ValueError, match=match):
        model_config("rsa_srupp", **options)


def test_defaults():
    config = model_config("srupp")
    assert (config.d_model, config.d_attention, config.n_layers, config.n_heads) == (64, 32, 2, 4)
    assert (config.attention_every, config.alpha_init, config.rsa) == (1, 0.0, None)
    assert model_config("rsa_srupp").rsa == RSAConfig()


def test_fit_predict_save_load_end_to_end(tmp_path):
    frame = recurrent_series(24 * 12, n_series=2, seed=1)
    forecaster = tsrec.Forecaster("rsa_srupp", prediction_length=12, context_length=48, d_model=16, d_attention=8,
                                  n_layers=1, max_epochs=1, val_windows=12,
                                  trainer_kwargs={"enable_progress_bar": False, "logger": False})
    forecaster.fit(frame)
    assert isinstance(forecaster.model, SRUpp)
    forecast = forecaster.predict()
    assert len(forecast) == 2 * 12 and np.isfinite(forecast["mean"]).all()
    gates = forecaster.gates()
    assert len(gates) == 4 and (gates["attention"] == "backbone").all()  # one row per REM head, 4 heads
    loaded = tsrec.Forecaster.load(forecaster.save(tmp_path / "model"))
    pd.testing.assert_frame_equal(loaded.predict(), forecast)
    pd.testing.assert_frame_equal(loaded.gates(), gates)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_layer_runs_unchanged_on_cuda():
    torch.manual_seed(7)
    layer = randomised(SRUppLayer(D, D, D, 4, alpha_init=0.9, rsa=rsa_config(4)))
    on_cuda = copy.deepcopy(layer).cuda()
    x = torch.randn(B, L, D, dtype=torch.float64)
    x_cpu, x_cuda = x.clone().requires_grad_(), x.cuda().requires_grad_()
    out = on_cuda(x_cuda)
    torch.testing.assert_close(out.cpu(), reference_layer(layer, x), rtol=0, atol=1e-6)
    out.sum().backward()
    layer(x_cpu).sum().backward()
    torch.testing.assert_close(x_cuda.grad.cpu(), x_cpu.grad, rtol=0, atol=1e-9)
