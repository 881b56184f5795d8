"""StarSaber: the chain-graph reduction to a bidirectional RNN's fixed point, the vectorised layer
against a per-position reference written from the equations (float64), the causal option, RSA's
gate, gradients, config errors, and the estimator end to end."""

import math

import numpy as np
import pandas as pd
import pytest
import torch

import tsrec
from tsrec.config import DataFacts, RSAConfig
from tsrec.datasets.synthetic import recurrent_series
from tsrec.models import StarSaber, StarSaberConfig, build_model, model_config
from tsrec.nn.attention import rsa_parameters
from tsrec.nn.starsaber import StarSaberEncoder, StarSaberLayer

pytestmark = pytest.mark.usefixtures("one_thread")

FACTS = DataFacts(season=4, n_channels=2, n_time_features=3)


def rsa_config(n_heads, *, masked):
    return RSAConfig(kinds=(n_heads, 0, 0, 0, 0, 0), encoder_masked=masked).resolved(n_heads, FACTS)


def float64_layer(d_model=4, n_heads=2, *, rsa=None, seed=0, **options):
    """A float64 layer with random weights, its ReZero scale and RSA gate away from their starts."""
    torch.manual_seed(seed)
    layer = StarSaberLayer(d_model, n_heads, rsa=rsa, **options).double().eval()
    with torch.no_grad():
        if layer.alpha is not None:
            layer.alpha.fill_(0.7)
        if layer.rsa is not None:
            layer.rsa.gate.mu.fill_(0.3)
    return layer


def chain(length):
    """The bidirectional RNN's graph ``A[i, i - 1] = A[i, i + 1] = 1``."""
    ones = torch.ones(length - 1, dtype=torch.float64)
    return torch.diag(ones, -1) + torch.diag(ones, 1)


def birnn_residual(h, x, w_p, w_f, u, b):
    """``h_i - tanh(W_p h_{i-1} + W_f h_{i+1} + U x_i + b)`` for ``h, x [L, d]`` (``h_{-1} = h_L = 0``)."""
    zero = torch.zeros_like(h[:1])
    previous = torch.cat([zero, h[:-1]])
    following = torch.cat([h[1:], zero])
    return h - torch.tanh(previous @ w_p.T + following @ w_f.T + x @ u.T + b)


def newton_solve(residual, start, steps=10):
    """Root of ``residual`` by Newton's method on the flattened unknowns."""
    h = start.clone()
    for _ in range(steps):
        jacobian = torch.autograd.functional.jacobian(residual, h).reshape(h.numel(), h.numel())
        h = h - torch.linalg.solve(jacobian, residual(h).reshape(-1)).view_as(h)
    return h


def test_iterating_the_chain_graph_solves_the_bidirectional_rnn():
    """ZOO_SPEC's exactness test: the chain graph, one set of weights for every iteration, the plain
    update ``H <- Htilde`` (alpha = 1 without the residual) on a contraction (``|W_p| + |W_f| < 1``)
    converges to the solution of ``h_i = tanh(W_p h_{i-1} + W_f h_{i+1} + U x_i + b)``."""
    length, d = 7, 3
    layer = float64_layer(d, 1)
    with torch.no_grad():
        for linear in (layer.past, layer.future):
            linear.weight.mul_(0.4 / torch.linalg.matrix_norm(linear.weight, 2))
    x0 = torch.randn(1, length, d, dtype=torch.float64)
    h = torch.zeros_like(x0)
    with torch.no_grad():
        for _ in range(200):
            h, _ = layer.candidate(layer.follow(chain(length).unsqueeze(0), *layer.values(h)), x0)
    weights = (layer.past.weight, layer.future.weight, layer.input.weight, layer.input.bias)
    solved = newton_solve(lambda z: birnn_residual(z, x0[0], *weights), torch.zeros(length, d, dtype=torch.float64))
    assert birnn_residual(solved, x0[0], *weights).abs().max() < 1e-12
    torch.testing.assert_close(h[0], solved, rtol=0, atol=1e-6)


def reference_layer(layer, h, x0):
    """One layer on one sequence ``h, x0 [L, d]``, a position, a head and a key at a time."""
    length, d = h.shape
    e = d // layer.n_heads
    maps = 2 if layer.gated else 1
    rem = layer.rsa.rem.matrix(length) if layer.rsa is not None else None
    gate = torch.sigmoid(layer.rsa.gate.mu).expand(layer.n_heads) if layer.rsa is not None else None
    out = []
    for i in range(length):
        pre = layer.input.weight @ x0[i] + layer.input.bias  # [maps * d]
        query = layer.query.weight @ h[i]
        for k in range(layer.n_heads):
            heads = slice(k * e, (k + 1) * e)
            keys = [j for j in range(length) if (j < i if layer.causal else j != i)]
            scores = torch.stack([query[heads] @ h[j, heads] / math.sqrt(e) for j in keys]) if keys else None
            attention = dict(zip(keys, torch.softmax(scores, 0))) if keys else {}
            for j in keys:
                weight = attention[j] if rem is None else (1 - gate[k]) * attention[j] + gate[k] * rem[k, i, j]
                value = (layer.past if j < i else layer.future).weight @ h[j]  # [maps * d]
                for r in range(maps):
                    rows = slice(r * d + k * e, r * d + (k + 1) * e)
                    pre[rows] = pre[rows] + weight * value[rows]
        candidate = torch.tanh(pre[:d])
        if layer.gated:
            z = torch.sigmoid(pre[d:])
            out.append((1 - z) * h[i] + z * candidate)
        else:
            out.append(h[i] + layer.alpha * candidate)
    return torch.stack(out)


@pytest.mark.parametrize("causal, rsa", [(False, None), (False, "masked"), (False, "unmasked"),
                                         (True, None), (True, "masked")])  # causal + unmasked is refused
@pytest.mark.parametrize("gated", [False, True], ids=["plain", "gated"])
@pytest.mark.parametrize("n_heads", [1, 2])
def test_layer_matches_the_per_position_reference(n_heads, gated, causal, rsa):
    config = None if rsa is None else rsa_config(n_heads, masked=rsa == "masked")
    layer = float64_layer(4, n_heads, gated=gated, causal=causal, rsa=config)
    h, x0 = torch.randn(2, 6, 4, dtype=torch.float64), torch.randn(2, 6, 4, dtype=torch.float64)
    with torch.no_grad():
        out = layer(h, x0)
        expected = torch.stack([reference_layer(layer, h[b], x0[b]) for b in range(2)])
    assert out.shape == (2, 6, 4)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("rsa", [None, "masked"])
@pytest.mark.parametrize("gated", [False, True], ids=["plain", "gated"])
def test_a_causal_stack_never_lets_a_later_step_change_an_earlier_output(gated, rsa):
    torch.manual_seed(0)
    config = None if rsa is None else rsa_config(2, masked=True)
    encoder = StarSaberEncoder(8, 2, 3, gated=gated, causal=True, alpha_init=0.0 if gated else 0.5, rsa=config)
    x0 = torch.randn(2, 10, 8)
    changed = x0.clone()
    changed[:, 6] += torch.randn(2, 8)
    out, again = encoder(x0), encoder(changed)
    torch.testing.assert_close(again[:, :6], out[:, :6], rtol=0, atol=0)
    assert not torch.allclose(again[:, 6:], out[:, 6:])
    bidirectional = StarSaberEncoder(8, 2, 3, gated=gated, alpha_init=0.0 if gated else 0.5)
    assert not torch.allclose(bidirectional(changed)[:, :6], bidirectional(x0)[:, :6])


def test_the_plain_stack_starts_as_the_identity():
    """ReZero: every alpha starts at 0, so the backbone first passes the embedding through."""
    encoder = StarSaberEncoder(8, 2, 3)
    x0 = torch.randn(2, 5, 8)
    torch.testing.assert_close(encoder(x0), x0, rtol=0, atol=0)


@pytest.mark.parametrize("masked", [True, False], ids=["masked", "unmasked"])
def test_the_rsa_gate_moves_the_graph_from_attention_to_the_rems(masked):
    """A closed gate gives the plain layer; an open one the REMs as the graph: a masked REM on the
    past only, an unmasked one on the past and, mirrored, on the future."""
    layer = float64_layer(4, 2, rsa=rsa_config(2, masked=masked))
    plain = float64_layer(4, 2)
    plain.load_state_dict({k: v for k, v in layer.state_dict().items() if not k.startswith("rsa.")})
    h, x0 = torch.randn(2, 6, 4, dtype=torch.float64), torch.randn(2, 6, 4, dtype=torch.float64)
    rem = layer.rsa.rem.matrix(6).detach()  # [n, L, L]
    past = torch.tril(rem, -1)
    assert past.abs().sum() > 0
    torch.testing.assert_close(torch.triu(rem, 1), torch.zeros_like(rem) if masked else past.transpose(-2, -1))
    with torch.no_grad():
        layer.rsa.gate.mu.fill_(-60.0)
        torch.testing.assert_close(layer(h, x0), plain(h, x0), rtol=0, atol=1e-12)
        layer.rsa.gate.mu.fill_(60.0)
        new, _ = layer.candidate(layer.follow(rem, *layer.values(h)), x0)
        torch.testing.assert_close(layer(h, x0), h + layer.alpha * new, rtol=0, atol=1e-12)


@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
def test_a_single_step_relates_to_nothing(causal):
    layer = float64_layer(4, 2, causal=causal)
    h, x0 = torch.randn(3, 1, 4, dtype=torch.float64), torch.randn(3, 1, 4, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(layer(h, x0), h + layer.alpha * torch.tanh(layer.input(x0)), rtol=0, atol=1e-12)


@pytest.mark.parametrize("name, options", [
    ("starsaber", {"alpha_init": 0.5}),
    ("starsaber", {"gated": True}),
    ("starsaber", {"causal": True, "alpha_init": 0.5}),
    ("rsa_starsaber", {"alpha_init": 0.5}),
    ("rsa_starsaber", {"gated": True, "causal": True, "rsa": {"encoder_masked": True}}),
])
def test_every_parameter_gets_a_gradient(name, options):
    torch.manual_seed(0)
    model = build_model(name, data=FACTS, context_length=24, prediction_length=6, d_model=8, n_heads=2,
                        n_layers=2, **options)
    g = torch.Generator().manual_seed(0)
    batch = {"past_target": torch.randn(3, 24, 2, generator=g), "past_time_feat": torch.randn(3, 24, 3, generator=g),
             "future_time_feat": torch.randn(3, 6, 3, generator=g)}
    out = model(batch)
    assert out.shape == (3, 6, 2) and torch.isfinite(out).all()
    out.pow(2).mean().backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not torch.any(p.grad != 0)]
    assert not missing, f"no gradient reaches {missing}"
    layers = model.rsa_layers()
    if name == "rsa_starsaber":
        assert [(a, i) for a, i, _ in layers] == [("backbone", 0), ("backbone", 1)]
        assert all(layer.rsa.rem.masked == layer.causal for _, _, layer in layers)
        assert len(list(rsa_parameters(model))) > 0
    else:
        assert layers == []


def test_presets_and_defaults():
    config = StarSaberConfig()
    assert (config.gated, config.causal, config.alpha_init, config.rsa) == (False, False, 0.0, None)
    assert model_config("rsa_starsaber").rsa == RSAConfig(encoder_masked=False)
    causal = model_config("rsa_starsaber", causal=True, rsa={"encoder_masked": True})
    assert causal.rsa.encoder_masked and causal.causal


@pytest.mark.parametrize("options, error, match", [
    ({"d_model": 10, "n_heads": 4}, ValueError, r"d_model \(10\) must be divisible by n_heads \(4\)"),
    ({"gated": True, "alpha_init": 0.5}, ValueError, "leave alpha_init at 0.0 with gated=True"),
    ({"causal": True, "rsa": RSAConfig(encoder_masked=False)}, ValueError, r"set rsa=\{'encoder_masked': True\}"),
    ({"alpha_init": float("nan")}, ValueError, "alpha_init must be a finite number"),
    ({"alpha_init": "0.1"}, ValueError, "alpha_init must be a finite number"),
    ({"gated": 1}, TypeError, "gated must be True or False"),
    ({"n_layers": 0}, ValueError, "n_layers must be an integer >= 1"),
    ({"dropout": 1.0}, ValueError, r"dropout must be in \[0, 1\)"),
    ({"rsa": RSAConfig(kinds=(8, 0, 0, 0, 0, 0))}, ValueError, "every head needs a REM kind"),
])
def test_bad_configs_are_refused_with_a_reason(options, error, match):
    with pytest.raises(error, match=match):
        StarSaberConfig(**options)


def test_causal_layers_refuse_bidirectional_rems():
    with pytest.raises(ValueError, match="use rsa.encoder_masked=True"):
        StarSaberLayer(4, 2, causal=True, rsa=rsa_config(2, masked=False))
    with pytest.raises(ValueError, match=r"set rsa=\{'encoder_masked': True\}"):
        model_config("rsa_starsaber", causal=True)


def test_fit_predict_save_load_end_to_end(tmp_path):
    frame = recurrent_series(24 * 12, n_series=2, seed=1)
    forecaster = tsrec.Forecaster("rsa_starsaber", prediction_length=12, context_length=48, d_model=16,
                                  n_layers=2, gated=True, max_epochs=1, val_windows=12,
                                  trainer_kwargs={"enable_progress_bar": False, "logger": False})
    forecaster.fit(frame)
    assert isinstance(forecaster.model, StarSaber) and forecaster.model.config.gated
    forecast = forecaster.predict()
    assert len(forecast) == 2 * 12 and np.isfinite(forecast["mean"]).all()
    gates = forecaster.gates()
    assert len(gates) == 2 * 4  # two layers of four REM heads
    loaded = tsrec.Forecaster.load(forecaster.save(tmp_path / "model"))
    assert isinstance(loaded.model, StarSaber)
    pd.testing.assert_frame_equal(loaded.predict(), forecast)
    pd.testing.assert_frame_equal(loaded.gates(), gates)
