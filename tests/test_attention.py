"""Attention kernels and RSA mixing: oracle comparisons, causality, gate limits, REM row selection."""

import math

import pytest
import torch

from tsrec.config import RSAConfig
from tsrec.nn import attention as attention_module
from tsrec.nn.attention import (
    AttentionLayer,
    FullAttention,
    KernelOutput,
    LogSparseAttention,
    ProbSparseAttention,
    RSAMixer,
    make_kernel,
    rsa_parameters,
)

B, H, L, E = 2, 8, 24, 4
KINDS = (1, 1, 1, 1, 2, 2)


def rsa_config(kinds=KINDS, **kw) -> RSAConfig:
    """A resolved RSA config (dilation 3, theta started at pi / 4)."""
    return RSAConfig(kinds=kinds, dilation=3, periods=(8.0,), dilated_periods=(8.0,), **kw)


def qkv(length=L, key_len=None, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    key_len = length if key_len is None else key_len
    q = torch.randn(B, H, length, E, generator=g, dtype=dtype)
    k = torch.randn(B, H, key_len, E, generator=g, dtype=dtype)
    v = torch.randn(B, H, key_len, E, generator=g, dtype=dtype)
    return q, k, v


def naive_attention(q, k, v, allowed=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.softmax(scores, -1) @ v


def mixer(masked=True, **kw):
    m = RSAMixer(rsa_config(**kw), H, masked=masked).double()
    return m


def set_gate(m, value):
    with torch.no_grad():
        m.gate.mu.fill_({0.0: -1e4, 1.0: 1e4, 0.5: 0.0}[value])


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("offset,key_len", [(0, L), (10, 30)])
def test_full_attention_matches_naive_softmax(causal, offset, key_len):
    q, k, v = qkv(key_len=key_len)
    allowed = (torch.arange(L)[:, None] + offset >= torch.arange(key_len)[None]) if causal else None
    ref = naive_attention(q, k, v, allowed)
    kern = FullAttention()
    fast = kern(q, k, v, causal=causal, query_offset=offset)
    slow = kern(q, k, v, causal=causal, query_offset=offset, need_weights=True)
    torch.testing.assert_close(fast.values, ref)
    torch.testing.assert_close(slow.values, ref)
    torch.testing.assert_close(slow.weights.sum(-1), torch.ones(B, H, L, dtype=q.dtype))


def test_logsparse_attends_only_to_power_of_two_lags():
    q, k, v = qkv()
    out = LogSparseAttention()(q, k, v, causal=True, need_weights=True)
    lags = torch.arange(L)[:, None] - torch.arange(L)[None]
    allowed = (lags == 0) | ((lags > 0) & ((lags & (lags - 1)) == 0))
    assert torch.all(out.weights[..., ~allowed] == 0)
    assert torch.all(out.weights[..., allowed] > 0)
    torch.testing.assert_close(out.values, naive_attention(q, k, v, allowed))


def test_probsparse_with_every_query_selected_is_full_attention():
    q, k, v = qkv(length=8)
    kern = ProbSparseAttention(factor=8).eval()  # u = 8 * ceil(ln 8) >= 8: every row exact
    for causal in (False, True):
        allowed = torch.ones(8, 8, dtype=torch.bool).tril() if causal else None
        out = kern(q, k, v, causal=causal)
        torch.testing.assert_close(out.values, naive_attention(q, k, v, allowed))


@pytest.mark.parametrize("causal", [False, True])
def test_probsparse_lazy_rows_as_informer(causal):
    q, k, v = qkv(length=96)
    out = ProbSparseAttention(factor=2).eval()(q, k, v, causal=causal)
    u = 2 * math.ceil(math.log(96))
    assert out.query_index.shape == (B, H, u)
    lazy_fill = v.cumsum(-2) if causal else v.mean(-2, keepdim=True).expand_as(v)
    selected = torch.zeros(B, H, 96, dtype=torch.bool).scatter(2, out.query_index, True)
    torch.testing.assert_close(out.values[~selected], lazy_fill[~selected])


def test_probsparse_eval_is_repeatable():
    q, k, v = qkv(length=64, dtype=torch.float32)
    kern = ProbSparseAttention(factor=5).eval()
    torch.testing.assert_close(kern(q, k, v).values, kern(q, k, v).values, rtol=0, atol=0)


def test_probsparse_eval_samples_once_from_a_seeded_generator_and_compiles_without_a_break():
    """The eval-mode key sample is a generator seeded 0's draw, kept per shape: after the first
    (eager) call a compiled forward reads it, with no graph break (a generator created inside it
    broke the graph in every layer)."""
    q, k, v = qkv(length=64, dtype=torch.float32)
    kern = ProbSparseAttention(factor=5).eval()
    first = kern(q, k, v)
    n_sample = min(5 * math.ceil(math.log(64)), 64)
    expected = torch.randint(64, (64, n_sample), generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(kern._eval_samples[(64, 64, n_sample, "cpu")], expected, rtol=0, atol=0)
    torch._dynamo.reset()
    explained = torch._dynamo.explain(lambda q, k, v: kern(q, k, v).values)(q, k, v)
    assert explained.graph_break_count == 0, explained.break_reasons
    torch._dynamo.reset()
    torch.testing.assert_close(kern(q, k, v).values, first.values, rtol=0, atol=0)
    fresh = ProbSparseAttention(factor=5).eval()  # its first call compiled: the draw runs eagerly there too
    compiled = torch.compile(lambda q, k, v: fresh(q, k, v).values, backend="eager")
    torch.testing.assert_close(compiled(q, k, v), first.values, rtol=0, atol=0)
    torch._dynamo.reset()


@pytest.mark.parametrize("kernel", [FullAttention(), LogSparseAttention(), ProbSparseAttention(factor=1)])
@pytest.mark.parametrize("causal", [False, True])
def test_rsa_gate_limits(kernel, causal):
    """Gate 0 gives the plain kernel, gate 1 gives P @ V with the layer's REM."""
    kernel.eval()
    q, k, v = qkv(length=48)
    m = mixer()
    plain = kernel(q, k, v, causal=causal)
    set_gate(m, 0.0)
    torch.testing.assert_close(m(plain, v), plain.values, rtol=0, atol=0)
    set_gate(m, 1.0)
    expected = m.rem.matrix(48) @ v
    torch.testing.assert_close(m(kernel(q, k, v, causal=causal), v), expected)


def test_rsa_cross_attention_uses_real_time_lag():
    """Decoder query i sits at time seq_len - label_len + i, encoder key j at time j."""
    seq_len, label_len, horizon = 30, 10, 6
    q, k, v = qkv(length=label_len + horizon, key_len=seq_len)
    m = mixer()
    set_gate(m, 1.0)
    offset = seq_len - label_len
    out = m(FullAttention()(q, k, v, query_offset=offset), v, query_offset=offset)
    lam_ref = m.rem.matrix(seq_len + horizon)[:, offset:, :seq_len]  # rows/cols of the square REM by time
    torch.testing.assert_close(out, lam_ref @ v)


@pytest.mark.parametrize("chunk", [1 << 24, 2 * H * 30, 1])
def test_probsparse_sparsity_measure_matches_gathered_keys(monkeypatch, chunk):
    """The chunked ``q K^T`` measure equals Informer's definition on explicitly gathered sampled keys,
    whatever the chunking (one chunk, a few rows per chunk, and a single row per chunk)."""
    monkeypatch.setattr(attention_module, "_SPARSITY_CHUNK_ELEMENTS", chunk)
    q, k, _ = qkv(length=21, key_len=30)
    sample = torch.randint(30, (21, 9), generator=torch.Generator().manual_seed(3))
    k_sample = k[:, :, sample, :]  # [B, H, Lq, n, E]
    qk = (q.unsqueeze(-2) * k_sample).sum(-1)  # [B, H, Lq, n]
    expected = qk.max(-1).values - qk.sum(-1) / 30
    torch.testing.assert_close(attention_module._sampled_sparsity(q, k, sample), expected)


@pytest.mark.parametrize("on_lazy", [False, True])
def test_probsparse_rsa_uses_rem_rows_of_selected_queries(on_lazy):
    length = 96
    q, k, v = qkv(length=length)
    chosen = torch.tensor([5, 17, 40, 41, 77, 90])
    q[:, :, chosen] *= 50.0  # sharp queries get the largest sparsity measure
    kern = ProbSparseAttention(factor=1).eval()  # u = ceil(ln 96) = 5 rows
    m = mixer(rem_on_lazy_queries=on_lazy)
    set_gate(m, 0.5)
    plain = kern(q, k, v)
    index = plain.query_index
    assert set(index.flatten().tolist()) <= set(chosen.tolist())
    assert not torch.equal(index.sort(-1).values, torch.arange(index.shape[-1]).expand_as(index))
    mixed = m(plain, v)
    pv = m.rem.matrix(length) @ v  # [B, H, L, E]
    selected = torch.zeros(B, H, length, dtype=torch.bool).scatter(2, index, True)
    expected_sel = 0.5 * plain.values + 0.5 * pv
    torch.testing.assert_close(mixed[selected], expected_sel[selected])
    if on_lazy:
        torch.testing.assert_close(mixed[~selected], expected_sel[~selected])
    else:
        torch.testing.assert_close(mixed[~selected], plain.values[~selected], rtol=0, atol=0)


@pytest.mark.parametrize("kernel", [FullAttention, LogSparseAttention])
@pytest.mark.parametrize("length", [40, 600])  # 600: the REM takes its FFT path
def test_masked_rsa_layer_never_leaks_the_future(kernel, length):
    torch.manual_seed(0)
    layer = AttentionLayer(kernel(), 16, H, rsa=rsa_config()).double()
    with torch.no_grad():
        layer.rsa.gate.mu.fill_(0.0)
    x = torch.randn(1, length, 16, dtype=torch.float64)
    y = x.clone()
    cut = length // 2
    y[:, cut:] = torch.randn(1, length - cut, 16, dtype=torch.float64)
    out_x, _ = layer(x, x, x, causal=True)
    out_y, _ = layer(y, y, y, causal=True)
    torch.testing.assert_close(out_x[:, :cut], out_y[:, :cut])
    assert not torch.allclose(out_x[:, cut:], out_y[:, cut:])


def test_every_rsa_parameter_gets_a_gradient_and_is_reported():
    layer = AttentionLayer(ProbSparseAttention(factor=5), 32, H, rsa=rsa_config(per_head_gate=True))
    x = torch.randn(2, 50, 32)
    out, _ = layer(x, x, x)
    out.pow(2).mean().backward()
    params = list(rsa_parameters(layer))
    # eta, nu, theta, dilated_eta, dilated_nu, dilated_theta, mu
    assert len(params) == 7
    for p in params:
        assert isinstance(p, torch.nn.Parameter) and p.grad is not None and torch.all(p.grad != 0)
    assert layer.rsa.gate.values().shape == (H,)


def test_rsa_requires_a_rem_kind_for_every_head():
    with pytest.raises(ValueError, match="sum to 6, but the layer has 8 heads"):
        AttentionLayer(FullAttention(), 32, 8, rsa=rsa_config(kinds=(2, 2, 2, 0, 0, 0)))


def test_unresolved_rsa_settings_are_refused_with_the_fix():
    with pytest.raises(ValueError, match=r"rsa\.dilation, rsa\.periods.*RSAConfig\.resolved"):
        RSAMixer(RSAConfig(kinds=KINDS), H)


def test_kernel_registry_builds_by_name_and_refuses_unknown_names():
    assert isinstance(make_kernel("full", dropout=0.1, factor=3), FullAttention)
    prob = make_kernel("prob", dropout=0.0, factor=3)
    assert isinstance(prob, ProbSparseAttention) and prob.factor == 3
    assert isinstance(make_kernel("logsparse"), LogSparseAttention)
    with pytest.raises(ValueError, match="unknown attention kernel 'sparse'.*full, logsparse, prob"):
        make_kernel("sparse")


def test_attention_layer_mix_flattens_heads_like_informer():
    torch.manual_seed(0)
    layer = AttentionLayer(FullAttention(), 8, 2, mix=True)
    x = torch.randn(1, 3, 8)
    out, _ = layer(x, x, x)
    q, k, v = (layer._heads(f(x)) for f in (layer.query, layer.key, layer.value))
    heads = naive_attention(q, k, v)  # [1, 2, 3, 4]
    torch.testing.assert_close(out, layer.out(heads.reshape(1, 3, 8)))


@pytest.mark.parametrize("lazy", [False, True], ids=["every-query", "lazy-queries"])
@pytest.mark.parametrize("kernel_dtype,value_dtype", [(torch.float32, torch.bfloat16), (torch.bfloat16, torch.float32)])
def test_the_gate_mixes_a_kernel_output_and_values_of_different_dtypes(lazy, kernel_dtype, value_dtype):
    """Under CUDA's bf16 autocast the kernel's output is float32 (its softmax) and the values bfloat16 (found
    on the first GPU run: lerp refused them); the mix is taken in the wider dtype, equal to the float64 mix."""
    m = mixer(rem_on_lazy_queries=not lazy)
    set_gate(m, 0.5)
    _, _, v = qkv()
    out = torch.randn(B, H, L, E, dtype=torch.float64)
    index = torch.stack([torch.randperm(L)[:5] for _ in range(B * H)]).reshape(B, H, 5) if lazy else None
    want = m(KernelOutput(out, query_index=index), v)
    got = m.float()(KernelOutput(out.to(kernel_dtype), query_index=index), v.to(value_dtype))
    assert got.dtype == (kernel_dtype if lazy else torch.float32)
    torch.testing.assert_close(got.double(), want, atol=0.05, rtol=0.05)
