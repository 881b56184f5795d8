"""Relevancy screening (ZOO_SPEC section 3): the layer against step-by-step references written from
the equations, the relevant set's bookkeeping by hand, batching, gradients, the config, and the
estimator end to end."""

import numpy as np
import pandas as pd
import pytest
import torch

import tsrec
from tsrec.datasets.synthetic import recurrent_series
from tsrec.models import RelevancyConfig, RelevancyRNN, build_model
from tsrec.nn import relevancy
from tsrec.nn.relevancy import RelevancyScreeningRNN, attend, empty_memory, screen

pytestmark = pytest.mark.usefixtures("one_thread")


def layer64(input_size=3, hidden_size=5, buffer_size=3, relevant_size=2, sharpness=4.0, seed=0):
    """A float64 layer; ``sharpness`` scales ``w`` so that the attention picks favourites and the
    relevant set sees replacements."""
    torch.manual_seed(seed)
    layer = RelevancyScreeningRNN(input_size, hidden_size, buffer_size, relevant_size).double()
    with torch.no_grad():
        layer.score.mul_(sharpness)
    return layer


def weights_of(layer):
    return (layer.input.weight, layer.input.bias, layer.recurrent.weight, layer.key.weight, layer.query.weight,
            layer.score)


def full_attention_rnn(layer, x):
    """``r = 0, k >= L``: ``h_t = tanh(U x_t + V s_t)``, ``s_t = (h_{t-1} + c_t) / 2``, ``c_t`` the
    additive attention of ``Va s_{t-1}`` over every past state; ``x [L, d_in]`` -> ``[L, d]``."""
    U, b, V, Ua, Va, w = weights_of(layer)
    h = s = torch.zeros(V.shape[0], dtype=x.dtype)
    past = []
    for x_t in x:
        c = torch.zeros_like(h)
        if past:
            a = torch.softmax(torch.stack([w @ torch.tanh(Va @ s + Ua @ h_j) for h_j in past]), dim=0)
            c = sum(a_j * h_j for a_j, h_j in zip(a, past))
        s = (h + c) / 2
        h = torch.tanh(U @ x_t + b + V @ s)
        past.append(h)
    return torch.stack(past)


def screened_rnn(layer, x):
    """The layer on one row ``x [L, d_in]``, step by step with Python lists as the authors' code:
    a FIFO buffer of ``[step, h, relevance]`` and a relevant set filled in order, then replacing
    its least relevant member. Returns the states ``[L, d]`` and the steps left in the set."""
    U, b, V, Ua, Va, w = weights_of(layer)
    h = s = torch.zeros(V.shape[0], dtype=x.dtype)
    buffer, relevant, states = [], [], []
    for t, x_t in enumerate(x):
        held = buffer + relevant
        c = torch.zeros_like(h)
        if held:
            a = torch.softmax(torch.stack([w @ torch.tanh(Va @ s + Ua @ entry[1]) for entry in held]), dim=0)
            c = sum(a_j * entry[1] for a_j, entry in zip(a, held))
            for a_j, entry in zip(a, buffer):
                entry[2] += a_j.item()
        s = (h + c) / 2
        h = torch.tanh(U @ x_t + b + V @ s)
        states.append(h)
        buffer.append([t, h, 0.0])
        if len(buffer) > layer.buffer_size:
            leaving = buffer.pop(0)
            if len(relevant) < layer.relevant_size:
                relevant.append(leaving)
            elif relevant:
                weakest = min(range(len(relevant)), key=lambda i: relevant[i][2])
                if leaving[2] > relevant[weakest][2]:
                    relevant[weakest] = leaving
    return torch.stack(states), sorted(entry[0] for entry in relevant)


def relevant_steps(memory, length, buffer_size):
    """The steps each row holds in its relevant set after ``length`` steps (sorted lists)."""
    return [sorted(step for step in row.tolist() if 0 <= step < length - buffer_size) for row in memory.steps]


@pytest.mark.parametrize("length, buffer_size", [(9, 9), (9, 20)])
def test_no_relevant_set_and_a_buffer_as_long_as_the_input_is_full_additive_attention(length, buffer_size):
    layer = layer64(buffer_size=buffer_size, relevant_size=0, sharpness=1.0)
    x = torch.randn(2, length, 3, dtype=torch.float64)
    out = layer(x)
    assert out.shape == (2, length, 5)
    for row in range(2):
        torch.testing.assert_close(out[row], full_attention_rnn(layer, x[row]), rtol=0, atol=1e-6)


def test_attention_forced_to_zero_is_the_plain_rnn(monkeypatch):
    layer = layer64()
    monkeypatch.setattr(relevancy, "attend", lambda query, memory, score: (torch.zeros_like(query),
                                                                           torch.zeros_like(memory.relevance)))
    x = torch.randn(2, 12, 3, dtype=torch.float64)
    U, b, V = layer.input.weight, layer.input.bias, layer.recurrent.weight
    out = layer(x)
    h = torch.zeros(2, 5, dtype=torch.float64)
    for t in range(12):
        h = torch.tanh(x[:, t] @ U.T + b + h @ V.T / 2)
        torch.testing.assert_close(out[:, t], h, rtol=0, atol=1e-6)


# replaces: whether some row's relevant set ends other than as the first r steps. Not with k = 1
# (h_0, alone in memory at step 1, earns a weight of 1 that no later state can exceed), with no
# set, or with a set too large to fill.
@pytest.mark.parametrize("buffer_size, relevant_size, replaces", [(3, 2, True), (4, 6, True), (1, 1, False),
                                                                  (2, 0, False), (5, 30, False)])
def test_the_layer_equals_the_step_by_step_reference_with_its_bookkeeping(buffer_size, relevant_size, replaces):
    layer = layer64(buffer_size=buffer_size, relevant_size=relevant_size)
    x = torch.randn(3, 30, 3, dtype=torch.float64)
    out, memory = layer.scan(x)
    kept = relevant_steps(memory, 30, buffer_size)
    for row in range(3):
        states, relevant = screened_rnn(layer, x[row])
        torch.testing.assert_close(out[row], states, rtol=0, atol=1e-6)
        assert kept[row] == relevant
    assert any(row != list(range(min(relevant_size, 30 - buffer_size))) for row in kept) == replaces
    buffered = memory.steps.sort(dim=1).values[:, -buffer_size:]  # the buffer: the last k steps
    assert (buffered == torch.arange(30 - buffer_size, 30)).all()


def spiking_layer(buffer_size=3, relevant_size=1):
    """Width 1, ``h_t = tanh(x_t)`` (``U = 1``, ``V = 0``) and ``e_j = 40 tanh(h_j)`` (``Ua = 1``,
    ``Va = 0``): each step attends almost only to the largest state held."""
    layer = RelevancyScreeningRNN(1, 1, buffer_size, relevant_size).double()
    with torch.no_grad():
        for weight in (layer.input.weight, layer.key.weight):
            weight.fill_(1.0)
        for weight in (layer.input.bias, layer.recurrent.weight, layer.query.weight):
            weight.zero_()
        layer.score.fill_(40.0)
    return layer


def spikes(length, **heights):
    x = torch.zeros(1, length, 1, dtype=torch.float64)
    for step, height in heights.items():
        x[0, int(step[1:]), 0] = height
    return x


def test_relevance_bookkeeping_by_hand():
    """k = 3, r = 1. Zero states share the attention: h_0 earns 1 + 1/2 + 1/3 = 11/6 over steps
    1..3 and, leaving first, fills the empty relevant set. A small spike at step 3 draws all the
    attention until a larger one at step 4 arrives: it leaves with about 1 < 11/6 and is dropped,
    while the large spike earns 3 and replaces h_0. Zero states then draw (almost) nothing."""
    layer = spiking_layer()
    x = spikes(12, s3=0.6, s4=1.5)
    _, early = layer.scan(x[:, :7])  # steps 0..6: h_0 .. h_3 have left the buffer
    assert relevant_steps(early, 7, 3) == [[0]]
    _, memory = layer.scan(x)
    assert relevant_steps(memory, 12, 3) == [[4]]
    relevance = dict(zip(memory.steps[0].tolist(), memory.relevance[0].tolist()))
    assert relevance[4] == pytest.approx(3.0, abs=1e-3)
    assert all(relevance[step] < 1e-6 for step in (9, 10, 11))  # the buffer, outshone by h_4 in the set
    _, alone = layer.scan(spikes(12, s3=0.6))  # without the large spike the small one earns 3 and enters
    assert relevant_steps(alone, 12, 3) == [[3]]


def test_the_relevant_set_fills_in_order_then_replaces_only_on_a_strictly_higher_score():
    """Steps 0..3 leave a one-state buffer for a two-slot set, screened by relevance set by hand
    (no attention involved)."""
    memory = empty_memory(1, 3, 1, torch.zeros(1))  # k = 1, r = 2
    for step, relevance in enumerate([0.5, 0.2, 0.2, 0.7]):
        memory = screen(memory, torch.full((1, 1), float(step)), torch.zeros(1, 1), step, 1)
        memory = memory._replace(relevance=memory.relevance.masked_fill(memory.steps == step, relevance))
        if step == 2:
            assert sorted(memory.steps[0].tolist()) == [0, 1, 2]  # 0 and 1 filled the empty set
    # step 2 (0.2) left tied with step 1 (0.2), not strictly higher: dropped, step 3 took its slot
    assert sorted(memory.steps[0].tolist()) == [0, 1, 3]
    memory = screen(memory, torch.full((1, 1), 4.0), torch.zeros(1, 1), 4, 1)  # step 3 (0.7) replaces step 1
    assert sorted(memory.steps[0].tolist()) == [0, 3, 4]
    assert memory.values[0, :, 0].tolist() == memory.steps[0].float().tolist()  # each state kept its slot


def test_each_batch_row_equals_running_it_alone():
    layer = layer64(buffer_size=3, relevant_size=2)
    x = torch.randn(5, 25, 3, dtype=torch.float64)
    out, memory = layer.scan(x)
    kept = relevant_steps(memory, 25, 3)
    assert len({tuple(row) for row in kept}) > 1  # the rows screen differently
    for row in range(5):
        alone, alone_memory = layer.scan(x[row:row + 1])
        torch.testing.assert_close(out[row:row + 1], alone, rtol=0, atol=1e-12)
        assert relevant_steps(alone_memory, 25, 3) == [kept[row]]


def test_attention_carries_gradients_into_the_stored_states_and_empty_slots_get_none():
    memory = empty_memory(2, 4, 3, torch.zeros(1, dtype=torch.float64))
    for step in range(3):
        memory = screen(memory, torch.randn(2, 3, dtype=torch.float64), torch.randn(2, 3, dtype=torch.float64),
                        step, 4)
    values, keys = memory.values.requires_grad_(), memory.keys.requires_grad_()
    context, weights = attend(torch.randn(2, 3, dtype=torch.float64), memory, torch.randn(3, dtype=torch.float64))
    assert torch.allclose(weights.sum(1), torch.ones(2, dtype=torch.float64))
    context.sum().backward()
    filled = memory.steps >= 0
    for grad in (values.grad, keys.grad):
        assert (grad.abs().sum(2)[filled] > 0).all() and (grad[~filled] == 0).all()


def test_the_gradient_of_the_last_state_reaches_old_inputs_through_the_relevant_set(monkeypatch):
    """The paper's point: the last state's gradient w.r.t. the input of a step kept in the relevant
    set is orders of magnitude larger than what the recurrence alone carries (the gradient through
    the memory blocked) over the same distance."""
    layer = layer64(buffer_size=2, relevant_size=2)
    x = torch.randn(1, 20, 3, dtype=torch.float64, requires_grad=True)
    out, memory = layer.scan(x)
    old = relevant_steps(memory, 20, 2)[0][0]
    (through,) = torch.autograd.grad(out[0, -1].sum(), x)
    original = relevancy.attend
    monkeypatch.setattr(relevancy, "attend", lambda query, held, score: original(
        query, held._replace(values=held.values.detach(), keys=held.keys.detach()), score))
    (recurrent_only,) = torch.autograd.grad(layer(x)[0, -1].sum(), x)
    assert through[0, old].abs().max() > 1e3 * recurrent_only[0, old].abs().max()


@pytest.mark.parametrize("n_layers", [1, 2])
def test_every_parameter_gets_a_gradient_with_the_default_init(n_layers):
    torch.manual_seed(0)
    model = build_model("relevancy_rnn", context_length=30, prediction_length=6, n_channels=2, n_time_features=3,
                        d_model=8, n_layers=n_layers)
    assert isinstance(model, RelevancyRNN)
    assert len([m for m in model.backbone if isinstance(m, RelevancyScreeningRNN)]) == n_layers
    weight = model.backbone[0].recurrent.weight
    torch.testing.assert_close(weight @ weight.T, torch.eye(8))  # V starts orthogonal
    batch = {"past_target": torch.randn(4, 30, 2), "past_time_feat": torch.randn(4, 30, 3),
             "future_time_feat": torch.randn(4, 6, 3)}
    out = model(batch)
    assert out.shape == (4, 6, 2)
    out.pow(2).mean().backward()
    missing = [name for name, p in model.named_parameters() if p.grad is None or not torch.any(p.grad != 0)]
    assert not missing, f"no gradient reaches {missing}"


def test_config_defaults_and_errors():
    config = RelevancyConfig()
    assert (config.buffer_size, config.relevant_size, config.n_layers, config.rsa) == (10, 15, 1, None)
    with pytest.raises(ValueError, match="no RSA variant.*set rsa=None"):
        RelevancyConfig(rsa={})
    with pytest.raises(ValueError, match="buffer_size must be an integer >= 1, got 0"):
        RelevancyConfig(buffer_size=0)
    with pytest.raises(ValueError, match="relevant_size must be an integer >= 0, got -1"):
        RelevancyConfig(relevant_size=-1)
    with pytest.raises(TypeError, match="relevant_size must be an integer, got 2.5"):
        RelevancyConfig(relevant_size=2.5)
    with pytest.raises(ValueError, match="buffer_size must be an integer >= 1"):
        RelevancyScreeningRNN(4, 4, buffer_size=0)


def test_fit_predict_save_load_end_to_end(tmp_path):
    frame = recurrent_series(24 * 12, n_series=2, seed=1)
    forecaster = tsrec.Forecaster("relevancy_rnn", prediction_length=6, context_length=24, d_model=8,
                                  buffer_size=4, relevant_size=6, max_epochs=1, batch_size=64, val_windows=6,
                                  trainer_kwargs={"enable_progress_bar": False, "logger": False})
    forecaster.fit(frame)
    network = forecaster.resolved_settings.network
    assert (network.buffer_size, network.relevant_size) == (4, 6)
    forecast = forecaster.predict()
    assert len(forecast) == 2 * 6 and np.isfinite(forecast["mean"]).all()
    loaded = tsrec.Forecaster.load(forecaster.save(tmp_path / "model"))
    assert isinstance(loaded.model, RelevancyRNN)
    pd.testing.assert_frame_equal(loaded.predict(), forecast)
