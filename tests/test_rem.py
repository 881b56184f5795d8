"""Tests of the Recurrence Encoding Matrices (``tsrec.nn.rem``).

The reference ("oracle") throughout is the simple scalar RNN run step by step in a Python loop
(RSA_SPEC.md section 1): ``P @ V`` must equal it for every head kind, dilation, masking and
query/key alignment. Everything is CPU-only, offline and small.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from tsrec.config import RSAConfig
from tsrec.nn import rem as rem_module
from tsrec.nn.rem import (
    DENSE_MAX_ENTRIES,
    LearnableREM,
    cyclical_rem,
    lag_grid,
    regular_rem,
    toeplitz_apply,
    toeplitz_matrix,
)

ALL_KINDS = (1, 1, 1, 1, 1, 1)


def make_rem(kinds, *, dilation=24, masked=True, periods=(8.0,), dilated_periods=(8.0,)) -> LearnableREM:
    """A layer's REMs with every field explicit (periods of 8 steps start theta at pi / 4)."""
    config = RSAConfig(kinds=kinds, dilation=dilation, periods=periods, dilated_periods=dilated_periods)
    return LearnableREM(config, masked=masked)


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny ops on a busy shared CPU: intra-op threads only add contention (gradchecks through the
    FFT took 10 s instead of 0.5 s with 2 threads on a loaded 2-core machine)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)

# (query_len, key_len, offset): query i sits at time i + offset, key j at time j.
SHAPES = [
    pytest.param(7, 7, 0, id="square"),
    pytest.param(8, 9, 4, id="cross-attn(seq9,label5,pred3)"),
    pytest.param(6, 5, -2, id="negative-offset"),
    pytest.param(3, 11, 6, id="few-queries-late"),
]


# ----------------------------------------------------------------------------------------------
# The oracle: a scalar RNN run step by step.
# ----------------------------------------------------------------------------------------------

def rnn_oracle(values: np.ndarray, coef: complex, part: str, *, dilation: int, masked: bool,
               query_len: int, offset: int) -> np.ndarray:
    """Run ``h_t = coef * (h_{t-d} + v_{t-d})`` (and, unmasked, the same backwards in time).

    ``values`` ``[Lk, D]`` are the inputs at times ``0..Lk-1`` (zero elsewhere); the result holds
    ``part`` ("real" or "imag") of the state at the query times ``offset .. offset + Lq - 1``.
    """
    key_len, dim = values.shape
    t0 = min(0, offset)
    t1 = max(key_len - 1, offset + query_len - 1)
    n = t1 - t0 + 1
    v = np.zeros((n, dim), dtype=np.complex128)
    v[-t0:-t0 + key_len] = values  # time t lives at index t - t0
    d = dilation
    fwd = np.zeros((n, dim), dtype=np.complex128)
    for k in range(n):  # h_t = 0 for the first d steps, then the recurrence
        if k - d >= 0:
            fwd[k] = coef * (fwd[k - d] + v[k - d])
    state = fwd
    if not masked:  # anti-causal part, run backwards in time; lag 0 never contributes
        bwd = np.zeros((n, dim), dtype=np.complex128)
        for k in range(n - 1, -1, -1):
            if k + d < n:
                bwd[k] = coef * (bwd[k + d] + v[k + d])
        state = fwd + bwd
    rows = state[offset - t0: offset - t0 + query_len]
    return rows.real if part == "real" else rows.imag


def head_oracle(values: np.ndarray, kind: int, lam: float, gamma: float, theta: float, **kw) -> np.ndarray:
    """Oracle for one head described as by ``LearnableREM.head_parameters`` (0 regular, 1 cos, 2 sin)."""
    if kind == 0:
        return rnn_oracle(values, complex(lam, 0.0), "real", **kw)
    coef = gamma * np.exp(1j * theta)
    return rnn_oracle(values, coef, "real" if kind == 1 else "imag", **kw)


def test_oracle_sanity_hand_computed():
    """The oracle itself on a case small enough to write out: lambda = 0.5, v = (1, 2, 3)."""
    v = np.array([[1.0], [2.0], [3.0]])
    out = rnn_oracle(v, 0.5, "real", dilation=1, masked=True, query_len=3, offset=0)
    # h1 = 0, h2 = 0.5 * 1, h3 = 0.5 * (0.5 + 2)
    np.testing.assert_allclose(out[:, 0], [0.0, 0.5, 1.25])
    out = rnn_oracle(v, 0.5, "real", dilation=1, masked=False, query_len=3, offset=0)
    # plus the backward part: g3 = 0, g2 = 0.5 * 3, g1 = 0.5 * (1.5 + 2)
    np.testing.assert_allclose(out[:, 0], [1.75, 0.5 + 1.5, 1.25])


# ----------------------------------------------------------------------------------------------
# Oracle tests: functional REMs.
# ----------------------------------------------------------------------------------------------

HEADS = [
    pytest.param("regular", 0.8, None, id="regular+"),
    pytest.param("regular", -0.7, None, id="regular-"),
    pytest.param("cos", 0.9, 0.7, id="cos"),
    pytest.param("sin", 0.85, 2.3, id="sin"),
]


@pytest.mark.parametrize("query_len,key_len,offset", SHAPES)
@pytest.mark.parametrize("masked", [True, False], ids=["masked", "unmasked"])
@pytest.mark.parametrize("dilation", [1, 3])
@pytest.mark.parametrize("kind,mag,theta", HEADS)
def test_functional_rem_equals_step_by_step_rnn(kind, mag, theta, dilation, masked, query_len, key_len, offset):
    gen = torch.Generator().manual_seed(0)
    values = torch.randn(key_len, 3, generator=gen, dtype=torch.float64)
    kw = dict(dilation=dilation, masked=masked, offset=offset)
    if kind == "regular":
        P = regular_rem(torch.tensor([mag], dtype=torch.float64), query_len, key_len, **kw)
        coef, part = complex(mag, 0.0), "real"
    else:
        P = cyclical_rem(torch.tensor([mag], dtype=torch.float64), torch.tensor([theta], dtype=torch.float64),
                         query_len, key_len, kind=kind, **kw)
        coef, part = mag * np.exp(1j * theta), ("real" if kind == "cos" else "imag")
    assert P.shape == (1, query_len, key_len) and P.dtype == torch.float64
    expected = rnn_oracle(values.numpy(), coef, part, query_len=query_len, **kw)
    np.testing.assert_allclose((P[0] @ values).numpy(), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("query_len,key_len,offset", SHAPES)
@pytest.mark.parametrize("masked", [True, False], ids=["masked", "unmasked"])
@pytest.mark.parametrize("method", ["dense", "fft"])
def test_learnable_rem_every_head_equals_rnn(method, masked, query_len, key_len, offset):
    """All six kinds at once, per-head dilations, negative lambdas, cos/sin twins; both paths."""
    torch.manual_seed(1)
    rem = make_rem(kinds=(2, 2, 1, 2, 1, 2), dilation=(2, 3, 2, 4, 3), masked=masked, periods=(5.0, 7.0),
                   dilated_periods=(3.0,)).double()
    with torch.no_grad():
        rem.eta.copy_(torch.tensor([-1.3, 0.9]))  # lambda < 0 and > 0
        rem.dilated_eta.copy_(torch.tensor([1.2, -1.7]))
    values = torch.randn(2, rem.n_heads, key_len, 3, dtype=torch.float64)
    out = rem.product(values, query_len, offset=offset, method=method)
    assert out.shape == (2, rem.n_heads, query_len, 3)
    hp = rem.head_parameters()
    for b in range(2):
        for h in range(rem.n_heads):
            expected = head_oracle(values[b, h].numpy(), int(hp["kind"][h]), float(hp["lambda"][h]),
                                   float(hp["gamma"][h]), float(hp["theta"][h]), dilation=int(hp["dilation"][h]),
                                   masked=masked, query_len=query_len, offset=offset)
            np.testing.assert_allclose(out[b, h].detach().numpy(), expected, rtol=1e-10, atol=1e-12,
                                       err_msg=f"head {h} kind {int(hp['kind'][h])}")


def test_sin_heads_are_exact_in_float64():
    """A sin head's coefficient is gamma^l sin(l theta) to float64 precision (no float32 -pi/2)."""
    rem = make_rem(kinds=(0, 1, 1, 0, 0, 0)).double()
    P = rem.matrix(9)
    hp = rem.head_parameters()
    lags = torch.arange(1, 9, dtype=torch.float64)
    g, th = hp["gamma"][1].double(), hp["theta"][1].double()
    torch.testing.assert_close(P[1, 1:, 0].detach(), g ** lags * torch.sin(lags * th), rtol=1e-14, atol=1e-15)
    torch.testing.assert_close(P[0, 1:, 0].detach(), g ** lags * torch.cos(lags * th), rtol=1e-14, atol=1e-15)


# ----------------------------------------------------------------------------------------------
# Structure: exact zeros.
# ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("masked", [True, False], ids=["masked", "unmasked"])
def test_dilated_non_multiples_are_exactly_zero(masked):
    d, L = 4, 25
    lam = torch.tensor([0.9, -0.6], dtype=torch.float64)
    lags = lag_grid(L, L)
    a = lags if masked else lags.abs()
    on = (a >= 1) & (a % d == 0)
    for P in (regular_rem(lam, L, dilation=d, masked=masked),
              cyclical_rem(lam.abs(), torch.tensor([0.3, 1.1], dtype=torch.float64), L, dilation=d, masked=masked),
              cyclical_rem(lam.abs(), torch.tensor([0.3, 1.1], dtype=torch.float64), L, kind="sin", dilation=d,
                           masked=masked)):
        assert bool((P[:, ~on] == 0).all()), "entries at lags not divisible by d must be exactly 0"
    P = regular_rem(lam, L, dilation=d, masked=masked)
    assert bool((P[:, on] != 0).all())
    # lag d is lambda^1 (not lambda^0 = 1, not lambda^d), lag 2d is lambda^2
    torch.testing.assert_close(P[:, d, 0], lam)
    torch.testing.assert_close(P[:, 2 * d, 0], lam ** 2)
    rem = make_rem(kinds=(0, 0, 0, 2, 1, 1), dilation=d, masked=masked)
    M = rem.matrix(L)
    assert bool((M[:, ~on] == 0).all())
    assert not bool((M == 1).any()), "no entry may be lambda^0 = 1"


@pytest.mark.parametrize("masked", [True, False], ids=["masked", "unmasked"])
@pytest.mark.parametrize("offset", [0, 3, -4])
def test_lag_zero_is_exactly_zero(masked, offset):
    rem = make_rem(kinds=ALL_KINDS, dilation=1, masked=masked)
    with torch.no_grad():  # lambda, gamma = 1: tril(P) - I style tricks would leave 1 - 1 rounding or 1s
        rem.eta.fill_(30.0)
        rem.dilated_eta.fill_(30.0)
        rem.nu.fill_(40.0)
        rem.dilated_nu.fill_(40.0)
        rem.theta.zero_()
    Lq, Lk = 10, 12
    lags = lag_grid(Lq, Lk, offset=offset)
    for M in (rem.matrix(Lq, Lk, offset=offset), regular_rem(torch.tensor([1.0]), Lq, Lk, masked=masked, offset=offset),
              cyclical_rem(torch.tensor([1.0]), torch.tensor([0.0]), Lq, Lk, masked=masked, offset=offset)):
        assert bool((M[:, lags == 0] == 0).all())
    square = rem.matrix(9)
    assert bool((torch.diagonal(square, dim1=-2, dim2=-1) == 0).all())


@pytest.mark.parametrize("offset", [0, 5, -3])
def test_masked_rem_has_nothing_at_non_positive_lags(offset):
    rem = make_rem(kinds=ALL_KINDS, dilation=2, masked=True)
    Lq, Lk = 9, 11
    M = rem.matrix(Lq, Lk, offset=offset)
    lags = lag_grid(Lq, Lk, offset=offset)
    assert bool((M[:, lags <= 0] == 0).all())
    # and the unmasked one is symmetric in the lag
    U = make_rem(kinds=ALL_KINDS, dilation=2, masked=False)
    S = U.matrix(12)
    torch.testing.assert_close(S, S.transpose(-1, -2), rtol=0, atol=0)


# ----------------------------------------------------------------------------------------------
# FFT path == dense path; rows == gathered matrix rows.
# ----------------------------------------------------------------------------------------------

FFT_SHAPES = [
    pytest.param(1, 1, 0, id="1x1"),
    pytest.param(16, 16, 0, id="square"),
    pytest.param(16, 16, 3, id="square-offset"),
    pytest.param(20, 33, 21, id="cross-attn"),
    pytest.param(7, 20, 13, id="Lq<Lk"),
    pytest.param(20, 7, -5, id="Lq>Lk-neg-offset"),
    pytest.param(5, 5, -10, id="all-keys-in-future"),
    pytest.param(4, 6, 40, id="all-keys-far-past"),
    pytest.param(64, 50, 0, id="larger"),
]


@pytest.mark.parametrize("query_len,key_len,offset", FFT_SHAPES)
@pytest.mark.parametrize("masked", [True, False], ids=["masked", "unmasked"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_fft_equals_dense_and_auto(dtype, masked, query_len, key_len, offset):
    torch.manual_seed(2)
    rem = make_rem(kinds=(1, 2, 1, 1, 1, 2), dilation=(3, 2, 5, 3), masked=masked).to(dtype)
    values = torch.randn(3, rem.n_heads, key_len, 5, dtype=dtype)
    dense = rem.product(values, query_len, offset=offset, method="dense")
    fft = rem.product(values, query_len, offset=offset, method="fft")
    auto = rem.product(values, query_len, offset=offset, method="auto")
    assert dense.shape == fft.shape == auto.shape == (3, rem.n_heads, query_len, 5)
    assert fft.dtype == dense.dtype == dtype
    tol = dict(rtol=1e-10, atol=1e-11) if dtype == torch.float64 else dict(rtol=1e-4, atol=2e-5)
    torch.testing.assert_close(fft, dense, **tol)
    torch.testing.assert_close(auto, dense, **tol)
    torch.testing.assert_close(auto, fft, **tol)


@pytest.mark.parametrize("limit", [0, 10 ** 9])
def test_auto_switches_path_by_size(monkeypatch, limit):
    """Whichever path "auto" picks, it gives the same answer; and it does pick by DENSE_MAX_ENTRIES."""
    monkeypatch.setattr(rem_module, "DENSE_MAX_ENTRIES", limit)
    rem = make_rem(kinds=ALL_KINDS, dilation=2).double()
    values = torch.randn(2, 6, 30, 4, dtype=torch.float64)
    calls = []
    real_matrix = rem_module.toeplitz_matrix
    monkeypatch.setattr(rem_module, "toeplitz_matrix", lambda *a, **k: calls.append(1) or real_matrix(*a, **k))
    auto = rem.product(values, 25, offset=5)
    assert bool(calls) == (limit > 0)
    torch.testing.assert_close(auto, rem.product(values, 25, offset=5, method="fft"), rtol=1e-10, atol=1e-11)


@pytest.mark.parametrize("masked", [True, False], ids=["masked", "unmasked"])
@pytest.mark.parametrize(("kinds", "dilation"), [(ALL_KINDS, 2), ((1, 2, 1, 1, 1, 2), (3, 2, 5, 3)),
                                                 ((2, 1, 1, 0, 0, 0), 24)], ids=["all", "dilations", "plain"])
@pytest.mark.parametrize("length", [1, 30, 97])
def test_the_recurrence_equals_the_dense_product_and_its_gradients(masked, kinds, dilation, length):
    """method="scan" (the recurrence a chunk at a time, every dilation's interleaved sequences) is
    the dense product, in values and in the gradients to the values and to every REM scalar."""
    torch.manual_seed(3)
    rem = make_rem(kinds=kinds, dilation=dilation, masked=masked).double()
    values = torch.randn(2, rem.n_heads, length, 4, dtype=torch.float64, requires_grad=True)
    dense, scan = rem.product(values, method="dense"), rem.product(values, method="scan")
    torch.testing.assert_close(scan, dense, rtol=1e-10, atol=1e-11)
    if length == 1:  # no lag: the dense path gives zeros that depend on nothing
        return
    weights = torch.randn_like(dense)
    inputs = [values, *rem.parameters()]
    expected = torch.autograd.grad((dense * weights).sum(), inputs)
    for got, want in zip(torch.autograd.grad((scan * weights).sum(), inputs), expected):
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("chunk", [1, 4, 16, 200])
def test_the_recurrence_is_the_same_whatever_the_chunk(chunk):
    torch.manual_seed(4)
    heads, length = 3, 150
    log_mag = torch.log(torch.tensor([0.99, 0.5, 0.9], dtype=torch.float64))  # a slow decay reaches every chunk
    angle = torch.tensor([0.0, math.pi, 0.4], dtype=torch.float64)
    shift = torch.tensor([0.0, 0.0, -math.pi / 2], dtype=torch.float64)
    values = torch.randn(2, heads, length, 3, dtype=torch.float64)
    lags = torch.arange(length, dtype=torch.float64)
    kernel = torch.exp(lags * log_mag[:, None]) * torch.cos(lags * angle[:, None] + shift[:, None]) * (lags > 0)
    expected = toeplitz_matrix(kernel, 0, length, length) @ values
    got = rem_module.recurrence_apply(values, log_mag, angle, shift, masked=True, chunk=chunk)
    torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-11)


def test_auto_takes_the_recurrence_for_long_square_shared_rems_only(monkeypatch):
    monkeypatch.setattr(rem_module, "SCAN_MIN_LENGTH", 20)
    calls = []
    real = rem_module.recurrence_apply
    monkeypatch.setattr(rem_module, "recurrence_apply", lambda *a, **k: calls.append(1) or real(*a, **k))
    rem = make_rem(kinds=ALL_KINDS, dilation=2).float()
    values = torch.randn(2, 6, 30, 4)
    torch.testing.assert_close(rem.product(values), rem.product(values, method="dense"), rtol=1e-4, atol=2e-5)
    assert calls
    calls.clear()
    rem.product(values, 25, offset=5)  # not square: dense
    rem.product(values[:, :, :19])  # shorter than SCAN_MIN_LENGTH: dense
    assert not calls
    with pytest.raises(ValueError, match="method='scan' applies a square REM"):
        rem.product(values, 25, offset=5, method="scan")


def test_dense_max_entries_is_sane():
    assert isinstance(DENSE_MAX_ENTRIES, int) and 24 * 24 <= DENSE_MAX_ENTRIES <= 4096 * 4096


@pytest.mark.parametrize("offset", [0, 7, -2])
@pytest.mark.parametrize("masked", [True, False], ids=["masked", "unmasked"])
def test_rows_equal_gathered_matrix_rows(masked, offset):
    torch.manual_seed(3)
    rem = make_rem(kinds=(1, 1, 2, 1, 2, 1), dilation=3, masked=masked)
    B, H, Lq, Lk, u = 2, rem.n_heads, 40, 30, 6
    # random, non-contiguous, never the first rows: each (batch, head) picks its own indices
    index = torch.stack([torch.stack([torch.randperm(Lq - 10)[:u] + 10 for _ in range(H)]) for _ in range(B)])
    assert index.shape == (B, H, u) and int(index.min()) >= 10
    rows = rem.rows(index, Lk, offset=offset)
    assert rows.shape == (B, H, u, Lk)
    full = rem.matrix(Lq, Lk, offset=offset)  # [H, Lq, Lk]
    gathered = full.unsqueeze(0).expand(B, -1, -1, -1).gather(2, index.unsqueeze(-1).expand(-1, -1, -1, Lk))
    torch.testing.assert_close(rows, gathered, rtol=0, atol=0)
    first_rows = full[:, :u].unsqueeze(0).expand(B, -1, -1, -1)
    assert not torch.equal(rows, first_rows)


@pytest.mark.parametrize(("lag_start", "n"), [(-9, 25), (1, 11), (-30, 80), (4, 3)],
                         ids=["exact", "masked-part", "wider", "inner"])
@pytest.mark.parametrize("offset", [0, 5, -3])
def test_toeplitz_matrix_matches_definition(lag_start, n, offset):
    """P[h, i, j] = kernel[h, i + offset - j - lag_start], 0 where that lag is outside the kernel."""
    Lq, Lk = 12, 10
    kernel = torch.randn(3, n, dtype=torch.float64, requires_grad=True)
    P = toeplitz_matrix(kernel, lag_start, Lq, Lk, offset)
    expected = torch.zeros(3, Lq, Lk, dtype=torch.float64)
    for i in range(Lq):
        for j in range(Lk):
            k = i + offset - j - lag_start
            if 0 <= k < n:
                expected[:, i, j] = kernel[:, k].detach()
    assert P.shape == (3, Lq, Lk)
    torch.testing.assert_close(P, expected, rtol=0, atol=0)
    # the gradient of each kernel entry is the sum of the upstream gradient along its diagonal
    weight = torch.randn(3, Lq, Lk, dtype=torch.float64)
    (P * weight).sum().backward()
    expected_grad = torch.zeros_like(kernel)
    for i in range(Lq):
        for j in range(Lk):
            k = i + offset - j - lag_start
            if 0 <= k < n:
                expected_grad[:, k] += weight[:, i, j]
    torch.testing.assert_close(kernel.grad, expected_grad)


def test_toeplitz_apply_matches_explicit_sum():
    torch.manual_seed(4)
    H, n, Lk, Lq, lag_start, offset = 2, 9, 6, 5, -3, 2
    kernel = torch.randn(H, n, dtype=torch.float64)
    values = torch.randn(1, H, Lk, 2, dtype=torch.float64)
    out = toeplitz_apply(kernel, lag_start, values, Lq, offset)
    ref = torch.zeros(1, H, Lq, 2, dtype=torch.float64)
    for h in range(H):
        for i in range(Lq):
            for j in range(Lk):
                k = i + offset - j - lag_start
                if 0 <= k < n:
                    ref[0, h, i] += kernel[h, k] * values[0, h, j]
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)


# ----------------------------------------------------------------------------------------------
# Gradients.
# ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("masked", [True, False], ids=["masked", "unmasked"])
@pytest.mark.parametrize("dilation", [1, 2])
def test_gradcheck_regular_rem(dilation, masked):
    lam = torch.tensor([-0.6, 0.999, -0.999, 0.3], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda x: regular_rem(x, 7, 9, dilation=dilation, masked=masked, offset=2), (lam,))


@pytest.mark.parametrize("kind", ["cos", "sin"])
@pytest.mark.parametrize("dilation", [1, 3])
def test_gradcheck_cyclical_rem(kind, dilation):
    gamma = torch.tensor([0.7, 0.999], dtype=torch.float64, requires_grad=True)
    theta = torch.tensor([math.pi / 4, 2.0], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda g, t: cyclical_rem(g, t, 8, 8, kind=kind, dilation=dilation, masked=False), (gamma, theta))


@pytest.mark.parametrize("method", ["dense", "fft"])
@pytest.mark.parametrize("masked", [True, False], ids=["masked", "unmasked"])
def test_gradcheck_learnable_apply(method, masked):
    torch.manual_seed(5)
    rem = make_rem(kinds=ALL_KINDS, dilation=2, masked=masked).double()
    names = [n for n, _ in rem.named_parameters()]
    params = tuple(p.detach().clone().requires_grad_(True) for _, p in rem.named_parameters())
    values = torch.randn(1, 6, 7, 2, dtype=torch.float64, requires_grad=True)

    class Apply(nn.Module):  # functional_call needs a forward
        def __init__(self):
            super().__init__()
            self.rem = rem

        def forward(self, v):
            return self.rem.product(v, 6, offset=2, method=method)

    wrapper = Apply()

    def fn(v, *ps):
        return torch.func.functional_call(wrapper, {f"rem.{n}": p for n, p in zip(names, ps)}, (v,))

    assert torch.autograd.gradcheck(fn, (values, *params))


@pytest.mark.parametrize("method", ["dense", "fft"])
def test_float32_long_and_near_unit_root_is_finite(method):
    """|lambda| and gamma at (or rounded to) 1 with L = 2048 in float32: finite values and grads."""
    L = 2048
    rem = make_rem(kinds=(2, 1, 1, 2, 1, 1) if method == "fft" else (2, 0, 0, 0, 1, 0),
                                 dilation=7)
    with torch.no_grad():
        rem.eta.copy_(torch.tensor([3.8, -30.0]))  # lambda = 0.999, -1.0 in float32
        rem.nu.fill_(6.9)  # gamma = 0.999
        if method == "fft":
            rem.dilated_eta.copy_(torch.tensor([-3.8, 30.0]))
        rem.dilated_nu.fill_(30.0)  # gamma = 1 in float32
    values = torch.randn(1, rem.n_heads, L, 4, requires_grad=True)
    out = rem.product(values, method=method)
    assert torch.isfinite(out).all()
    out.square().mean().backward()
    for name, p in rem.named_parameters():
        assert torch.isfinite(p.grad).all(), name
    assert torch.isfinite(values.grad).all()
    # the far-lag coefficient is right: 0.999^(L-1)
    P_last = rem.entries(torch.tensor([[L - 1]]))[0, 0, 0]
    lam0 = math.tanh(3.8)
    assert P_last.item() == pytest.approx(lam0 ** (L - 1), rel=1e-3)


# ----------------------------------------------------------------------------------------------
# Parameters.
# ----------------------------------------------------------------------------------------------

KIND_CONFIGS = [
    (2, 1, 1, 2, 1, 1),
    (0, 2, 2, 0, 2, 2),
    (4, 0, 0, 4, 0, 0),
    (4, 2, 2, 0, 0, 0),
    (0, 0, 0, 0, 4, 4),
    (0, 1, 0, 0, 0, 1),
    (1, 0, 0, 0, 0, 0),
    (0, 0, 3, 0, 2, 0),
]


@pytest.mark.parametrize("method", ["dense", "fft"])
@pytest.mark.parametrize("kinds", KIND_CONFIGS, ids=lambda k: "k" + "".join(map(str, k)))
def test_every_rem_parameter_gets_a_gradient(kinds, method):
    torch.manual_seed(6)
    rem = make_rem(kinds=kinds, dilation=3)
    k1, k2, k3, k4, k5, k6 = kinds
    expected = {"eta": k1, "nu": max(k2, k3), "theta": max(k2, k3), "dilated_eta": k4,
                "dilated_nu": max(k5, k6), "dilated_theta": max(k5, k6)}
    params = dict(rem.named_parameters())
    assert set(params) == {n for n, c in expected.items() if c}
    for name, p in params.items():
        assert isinstance(p, nn.Parameter) and p.requires_grad
        assert p.numel() == expected[name]
    assert set(params) <= set(rem.state_dict())
    values = torch.randn(2, rem.n_heads, 16, 3)
    weight = torch.randn(2, rem.n_heads, 16, 3)
    (rem.product(values, method=method) * weight).sum().backward()
    for name, p in params.items():
        assert p.grad is not None, name
        assert bool((p.grad != 0).all()), f"{name} has a zero gradient: {p.grad}"


@pytest.mark.parametrize("per_channel", [False, True], ids=["shared", "per-channel"])
@pytest.mark.parametrize("method", ["dense", "fft"])
@pytest.mark.parametrize("kinds", KIND_CONFIGS, ids=lambda k: "k" + "".join(map(str, k)))
def test_a_layer_lacking_some_kinds_computes_nothing_for_them(kinds, method, per_channel):
    """The default RSA layers have no regular heads: the kinds a layer lacks cost no operator (none
    reads an empty tensor, forward or backward), and its product equals its entries' matrix."""
    torch.manual_seed(7)
    config = RSAConfig(kinds=kinds, dilation=3, periods=(8.0,), dilated_periods=(8.0,), per_channel=per_channel)
    rem = LearnableREM(config, n_channels=3).double()
    channel = torch.tensor([2, 0]) if per_channel else None
    values = torch.randn(2, rem.n_heads, 16, 3, dtype=torch.float64)
    rem.product(values, method=method, channel=channel)  # the lag tables, made once

    class EmptyReads(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.found = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if any(isinstance(a, torch.Tensor) and a.numel() == 0 for a in args):
                self.found.append(str(func))
            return func(*args, **(kwargs or {}))

    with EmptyReads() as mode:
        out = rem.product(values, method=method, channel=channel)
        out.sum().backward()
    assert mode.found == []
    expected = torch.matmul(rem.matrix(16, channel=channel), values)
    torch.testing.assert_close(out.detach(), expected.detach(), rtol=1e-10, atol=1e-12)


def test_parameters_follow_the_module_and_optimizer():
    rem = make_rem(kinds=ALL_KINDS, dilation=2)
    opt = torch.optim.SGD(rem.parameters(), lr=0.5)
    before = {n: p.detach().clone() for n, p in rem.named_parameters()}
    rem.product(torch.randn(1, 6, 10, 2)).square().sum().backward()
    opt.step()
    for n, p in rem.named_parameters():
        assert not torch.equal(p, before[n]), f"{n} did not move"


def test_reparameterisation_and_twins():
    torch.manual_seed(7)
    rem = make_rem(kinds=(3, 2, 2, 2, 1, 2), dilation=(4, 5, 6, 7, 8))
    hp = rem.head_parameters()
    kind = hp["kind"].tolist()
    assert kind == [0, 0, 0, 1, 1, 2, 2, 0, 0, 1, 2, 2]
    assert hp["dilation"].tolist() == [1] * 7 + [4, 5, 6, 7, 8]
    lam = hp["lambda"]
    torch.testing.assert_close(lam[:3], torch.tanh(rem.eta.detach()))
    torch.testing.assert_close(lam[7:9], torch.tanh(rem.dilated_eta.detach()))
    reg = hp["kind"] == 0
    assert bool((lam[reg].abs() < 1).all()) and bool(torch.isnan(lam[~reg]).all())
    gamma, theta = hp["gamma"], hp["theta"]
    assert bool(torch.isnan(gamma[reg]).all()) and bool(torch.isnan(theta[reg]).all())
    torch.testing.assert_close(gamma[3:5], torch.sigmoid(rem.nu.detach()))
    torch.testing.assert_close(gamma[5:7], torch.sigmoid(rem.nu.detach()))  # sin twins share gamma
    torch.testing.assert_close(theta[5:7], theta[3:5])  # and theta
    torch.testing.assert_close(gamma[9], torch.sigmoid(rem.dilated_nu.detach())[0])
    torch.testing.assert_close(gamma[10:12], torch.sigmoid(rem.dilated_nu.detach()))
    torch.testing.assert_close(theta[10], theta[9])
    assert bool(((gamma[~reg] > 0) & (gamma[~reg] < 1)).all())
    # the twins really share: moving nu[0] moves cos head 3 and sin head 5 together
    with torch.no_grad():
        rem.nu[0] += 1.0
    hp2 = rem.head_parameters()
    assert hp2["gamma"][3] == hp2["gamma"][5] and hp2["gamma"][3] != hp["gamma"][3]


def test_initialisation_ranges():
    torch.manual_seed(8)
    rem = make_rem(kinds=(200, 100, 100, 200, 100, 100))
    for eta in (rem.eta, rem.dilated_eta):
        mag = eta.detach().abs()
        assert bool(((mag >= 1) & (mag <= 2)).all())
        assert bool((eta > 0).any()) and bool((eta < 0).any())
    for nu in (rem.nu, rem.dilated_nu):
        assert bool(((nu >= 1) & (nu <= 2)).all())
    torch.testing.assert_close(rem.theta.detach(), torch.full((100,), math.pi / 4))
    torch.testing.assert_close(rem.dilated_theta.detach(), torch.full((100,), math.pi / 4))
    rem = make_rem(kinds=(0, 3, 3, 0, 2, 2), periods=(24.0, 12.0), dilated_periods=(7.0,))
    torch.testing.assert_close(rem.theta.detach(), torch.tensor([2 * math.pi / 24, 2 * math.pi / 12, 2 * math.pi / 24]))
    torch.testing.assert_close(rem.dilated_theta.detach(), torch.full((2,), 2 * math.pi / 7))


# ----------------------------------------------------------------------------------------------
# Validation.
# ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs,match", [
    (dict(kinds=(1, 1, 1, 1, 1)), "six"),
    (dict(kinds=(1, 1, 1, 1, 1, 1, 1)), "six"),
    (dict(kinds=(1, -1, 1, 0, 0, 0)), "non-negative"),
    (dict(kinds=(1.5, 0, 0, 0, 0, 0)), "ints"),
    (dict(kinds=(0, 0, 0, 0, 0, 0)), "at least one"),
    (dict(kinds=(0, 0, 0, 2, 1, 0), dilation=(24, 12)), "one value per dilated head"),
    (dict(kinds=(0, 0, 0, 1, 0, 0), dilation=0), "positive"),
    (dict(kinds=(0, 0, 0, 2, 0, 0), dilation=(3, -1)), "positive"),
    (dict(kinds=(0, 1, 1, 0, 0, 0), periods=(24.0, 0.0)), "periods"),
    (dict(kinds=(0, 0, 0, 0, 1, 1), dilated_periods=()), "dilated_periods"),
])
def test_bad_configs_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        RSAConfig(**kwargs)


def test_bad_lengths_and_arguments_raise():
    lam = torch.tensor([0.5])
    with pytest.raises(ValueError, match="query_len"):
        regular_rem(lam, 0)
    with pytest.raises(ValueError, match="key_len"):
        regular_rem(lam, 4, -3)
    with pytest.raises(ValueError, match="query_len"):
        cyclical_rem(lam, lam, 0)
    with pytest.raises(ValueError, match="kind"):
        cyclical_rem(lam, lam, 4, kind="tan")
    with pytest.raises(ValueError, match="dilation"):
        regular_rem(torch.tensor([0.5, 0.2]), 4, dilation=(1, 2, 3))
    with pytest.raises(ValueError, match="dilations"):
        regular_rem(lam, 4, dilation=0)
    rem = make_rem(kinds=(1, 1, 1, 0, 0, 0))
    values = torch.randn(1, 3, 5, 2)
    for method in ("dense", "fft", "auto"):
        with pytest.raises(ValueError, match="query_len"):
            rem.product(values, 0, method=method)
    with pytest.raises(ValueError, match="key_len"):
        rem.product(torch.randn(1, 3, 0, 2), 4, method="fft")
    with pytest.raises(ValueError, match="heads"):
        rem.product(torch.randn(1, 4, 5, 2))
    with pytest.raises(ValueError, match="method"):
        rem.product(values, method="loop")


# ----------------------------------------------------------------------------------------------
# Memory: the FFT path is linear in L.
# ----------------------------------------------------------------------------------------------

class _LargestTensor(TorchDispatchMode):
    """Records the largest number of elements of any tensor an aten op produces."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in torch.utils._pytree.tree_leaves(out):
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel())
        return out


@pytest.mark.parametrize("masked", [True, False], ids=["masked", "unmasked"])
def test_fft_path_memory_is_linear_at_L_20000(masked):
    """A dense [8, 20000, 20000] float32 REM would be 12.8 GB; the FFT path must never build
    anything near L*L elements, in the forward or the backward pass."""
    L, H, D = 20_000, 8, 4
    rem = make_rem(kinds=(2, 1, 1, 2, 1, 1), dilation=24, masked=masked)
    values = torch.randn(1, H, L, D, requires_grad=True)
    with _LargestTensor() as probe:
        out = rem.product(values, method="fft")
        out.square().mean().backward()
    assert out.shape == (1, H, L, D) and torch.isfinite(out).all()
    assert all(torch.isfinite(p.grad).all() for p in rem.parameters())
    # the largest intermediate is O(H * L * D) (FFT buffers), far below L * L = 4e8
    assert probe.largest <= 16 * H * L * D, probe.largest
    # "auto" (the chunked recurrence at this size) stays linear too
    with _LargestTensor() as probe:
        with torch.no_grad():
            rem.product(values, method="auto")
    assert probe.largest <= 16 * H * L * D, probe.largest


def test_dense_path_probe_sees_the_matrix():
    """Control for the probe above: the dense path does create [H, L, L]."""
    L = 64
    rem = make_rem(kinds=(1, 1, 0, 0, 0, 0))
    with _LargestTensor() as probe:
        with torch.no_grad():
            rem.product(torch.randn(1, 2, L, 4), method="dense")
    assert probe.largest >= 2 * L * L
