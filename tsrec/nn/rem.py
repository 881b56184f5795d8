"""Recurrence Encoding Matrices (REMs).

A simple (scalar-coefficient) linear RNN ``h_t = sum_{l>=1} f(l) v_{t-l}`` is a Toeplitz matrix
``P`` applied to the values ``V``: entry ``(i, j)`` is ``f(l)`` at the lag ``l`` between query ``i``
and key ``j``. Three coefficient families come out of the eigen-decomposition of a linear RNN
(see ``RSA_SPEC.md`` section 1):

- regular:  ``f(l) = lambda^l``
- cos:      ``f(l) = gamma^l cos(l theta)``
- sin:      ``f(l) = gamma^l sin(l theta)``

and their dilated (seasonal) versions, which are non-zero only at lags divisible by the dilation
``d`` and use ``l / d`` as the power.

Conventions used throughout:

- Query ``i`` sits at time ``i + offset``, key ``j`` at time ``j``; the lag is ``l = i + offset - j``.
- Masked (causal) REMs are non-zero only for ``l >= 1``; unmasked (bidirectional) REMs use
  ``|l| >= 1``. The lag-0 entry (the diagonal of a square REM) is always exactly 0.
- Every head kind is evaluated by one formula, ``sign^p * exp(p * log_mag) * cos(p * phase + shift)``
  with ``p = |l| / d``: regular heads have ``log_mag = log|lambda|``, ``sign = sign(lambda)``,
  ``phase = 0``; cos heads ``log_mag = log(gamma)``, ``phase = theta``, ``shift = 0``; sin heads the
  same with ``shift = -pi/2``. Powers go through ``exp(p * log|.|)``, which keeps negative
  ``lambda`` exact and gradients finite for ``|lambda|`` close to 1.

``P @ V`` never needs the dense ``[heads, Lq, Lk]`` matrix: because ``P`` is Toeplitz, it is a
convolution along time, computed here with FFTs in ``O(L log L)`` time and ``O(L)`` memory
(:func:`toeplitz_apply`); and because every head's coefficient is ``Re(w z^p)`` (``z = |m| e^{i
phase}``, ``w = e^{i shift}``), it is also the linear recurrence it comes from, run a chunk at a time
in ``O(L sqrt(L))`` (:func:`recurrence_apply`). :meth:`LearnableREM.product` picks the dense, the
chunked recurrence or the FFT path by size.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from tsrec._checks import check_int
from tsrec.config import RSAConfig, SmoothingPrior

__all__ = [
    "LearnableREM",
    "recurrence_apply",
    "regular_rem",
    "cyclical_rem",
    "lag_grid",
    "toeplitz_apply",
    "toeplitz_matrix",
    "rem_entries",
    "rem_log_envelope",
    "DENSE_MAX_ENTRIES",
    "SCAN_MIN_LENGTH",
]

# Where the recurrence does not apply (a REM that is not square, or per channel), dense `P @ V` is
# used while query_len * key_len is at most this many entries, above it the FFT path. Chosen from
# benchmarks/rem_speed.py at the Informer recipe's batch (32 windows, 8 heads of 64) at commit
# f4acf23: dense faster up to L = 1440 (dense/FFT 0.73 there) and slower at 2048, its [H, L, L]
# matrix smaller than the FFT's [B, H, D, 2L] buffers up to 2048. The rerun of
# benchmarks/results/rem_speed.md had the FFT 1.10x faster at 1440: the crossover lies near 1440.
DENSE_MAX_ENTRIES = 1440 * 1440

# A square self-attention REM of at least this many steps (and not per channel) is applied as its
# recurrence, a chunk at a time (recurrence_apply), instead of the dense matrix: from
# benchmarks/rem_speed.py at the Informer recipe's batch (benchmarks/results/rem_speed.md, forward +
# backward, one thread), the recurrence is 0.91x dense's speed at L = 96 and 1.53x, 1.77x, 2.70x
# and 2.84x faster at L = 256, 512, 720 and 1440. On the CPU only: not yet measured on a GPU.
SCAN_MIN_LENGTH = 256

_KINDS = ("regular", "cos", "sin")


def lag_grid(query_len: int, key_len: int | None = None, *, offset: int = 0,
             device: torch.device | str | None = None) -> Tensor:
    """Integer lags ``l[i, j] = i + offset - j`` of shape ``[query_len, key_len]``."""
    key_len = query_len if key_len is None else key_len
    _check_lengths(query_len, key_len)
    rows = torch.arange(query_len, device=device).unsqueeze(1) + offset
    cols = torch.arange(key_len, device=device).unsqueeze(0)
    return rows - cols


def _check_lengths(query_len: int, key_len: int) -> None:
    check_int("query_len", query_len, 1)
    check_int("key_len", key_len, 1)


def _as_head_vector(name: str, value: Tensor | float | Sequence[float], like: Tensor | None = None) -> Tensor:
    if not isinstance(value, Tensor):
        value = torch.as_tensor(value, dtype=torch.get_default_dtype() if like is None else like.dtype,
                                device=None if like is None else like.device)
    if value.dim() == 0:
        value = value.reshape(1)
    if value.dim() != 1:
        raise ValueError(f"{name} must be a 1-D tensor with one value per head, got shape {tuple(value.shape)}")
    return value


def _dilation_vector(dilation: int | Sequence[int] | Tensor, heads: int, device: torch.device) -> Tensor:
    d = torch.as_tensor(dilation, dtype=torch.long, device=device).reshape(-1)
    if d.numel() == 1:
        d = d.expand(heads)
    if d.numel() != heads:
        raise ValueError(f"dilation must be an int or one int per head ({heads}), got {d.numel()} values")
    if bool((d < 1).any()):
        raise ValueError(f"dilations must be >= 1, got {d.tolist()}")
    return d


def rem_entries(lags: Tensor, *, log_mag: Tensor, sign: Tensor, phase: Tensor, shift: Tensor,
                dilation: Tensor, masked: bool, log_scale: Tensor | None = None) -> Tensor:
    """Evaluate REM coefficients at integer ``lags`` for every head.

    Args:
        lags: integer lags, shape ``[Lq, Lk]`` or ``[..., H, Lq, Lk]`` (e.g. ``[B, H, u, Lk]``).
        log_mag, sign, phase, shift: per-head terms (see module docstring), ``[H]``, or
            ``[G, H]`` for ``G`` groups of rows with their own parameters (per-channel REMs:
            ``G`` channels, or ``B`` batch rows after picking each row's channel).
        dilation: per-head integer dilations ``[H]``.
        masked: causal REM (``l >= 1``) if True, bidirectional (``|l| >= 1``) if False.
        log_scale: per-head log factor ``log c`` (shaped as ``log_mag``), or None for ``c = 1``:
            the entries become ``c * sign^p |m|^p cos(.)`` (the normalised regular heads of the ETS
            prior, ``c = (1 - |lambda|) / |lambda|``), computed as ``exp(p log|m| + log c)``.

    Returns:
        ``[H, Lq, Lk]`` (or ``[G, H, Lq, Lk]``) for ``[Lq, Lk]`` lags, else the broadcast of the lags
        with the terms; exactly 0 where the lag is 0, negative (masked), or not divisible by the
        head's dilation.
    """
    power, valid = _lag_powers(lags, dilation, masked, log_mag.dtype, lag0=False)
    log_magnitude = power * log_mag[..., None, None]
    if log_scale is not None:
        log_magnitude = log_magnitude + log_scale[..., None, None]
    magnitude = torch.exp(log_magnitude)
    odd = torch.remainder(power, 2) == 1
    signed = torch.where(odd & (sign[..., None, None] < 0), -magnitude, magnitude)
    values = signed * torch.cos(power * phase[..., None, None] + shift[..., None, None])
    return torch.where(valid, values, torch.zeros_like(values))


def rem_log_envelope(lags: Tensor, *, log_mag: Tensor, sign: Tensor, phase: Tensor, shift: Tensor,
                     dilation: Tensor, masked: bool) -> tuple[Tensor, Tensor]:
    """The REM as an additive attention-score bias: the log of a non-negative envelope.

    A softmax weight ``exp(s + b)`` is ``exp(s)`` times the envelope ``exp(b)``, so a bias must be
    the log of a non-negative weight. A REM coefficient ``sign^p |m|^p cos(p phase + shift)``
    (``p = |l| / d``) is split into its magnitude, which becomes ALiBi's log-decay ``p log|m|``
    exactly, and its sign or oscillation, which a log cannot take (it is negative at anti-phase
    lags) and becomes the bounded periodic term ``cos(p phase' + shift)`` (the log of the von Mises
    factor ``exp(cos(.))``): in-phase lags are favoured by up to ``e^2`` over anti-phase ones,
    none is cut off, and the gradient in ``theta`` stays smooth (unlike ``log((1 + cos) / 2 + eps)``,
    whose log goes to ``log eps`` at anti-phase lags). A negative ``lambda`` is the oscillation of
    period 2: ``phase' = pi``. For a positive ``lambda`` the term is the constant 1, which the
    softmax ignores, leaving exactly ``(i - j) log lambda``.

    The envelope keeps the REM's support, with the lag 0 (weight 1) added so that every query of a
    self-attention keeps a key: a masked REM gives the future ``-inf`` (the head becomes causal,
    as ALiBi and Powerformer are), a dilated one the lags off its grid of multiples of ``d``.

    Args: as :func:`rem_entries`.

    Returns:
        ``(bias, support)``: the bias, finite on the support and 0 off it (the caller scales it, then
        fills ``-inf`` where ``support`` is False), shaped as :func:`rem_entries`' output, and the bool
        support ``[H, Lq, Lk]`` (or the lags' broadcast shape with ``[H]``).
    """
    power, support = _lag_powers(lags, dilation, masked, log_mag.dtype, lag0=True)
    phase = torch.where(sign < 0, torch.full_like(phase, math.pi), phase)  # (-1)^p = cos(p pi)
    bias = power * log_mag[..., None, None] + torch.cos(power * phase[..., None, None] + shift[..., None, None])
    return torch.where(support, bias, torch.zeros_like(bias)), support


def _lag_powers(lags: Tensor, dilation: Tensor, masked: bool, dtype: torch.dtype, *,
                lag0: bool) -> tuple[Tensor, Tensor]:
    """``(power, valid)``: the REM power ``|l| / d`` (0 where invalid, so that no ``0 * inf``
    arises) in ``dtype``, and where the REM reaches (lags ``>= 1``, or ``>= 0`` with ``lag0``; only
    positive ones when ``masked``; multiples of the head's dilation), both ``[.., H, Lq, Lk]``."""
    d = dilation[:, None, None]
    a = lags if masked else lags.abs()
    a = a.unsqueeze(-3) if lags.dim() == 2 else a  # [.., 1 or H, Lq, Lk]
    valid = (a >= (0 if lag0 else 1)) & (a % d == 0)
    return torch.where(valid, a // d, torch.zeros_like(a)).to(dtype), valid


def _safe_log_abs(x: Tensor) -> Tensor:
    return torch.log(x.abs().clamp_min(torch.finfo(x.dtype).tiny))


def regular_rem(lam: Tensor, query_len: int, key_len: int | None = None, *, dilation: int | Sequence[int] = 1,
                masked: bool = True, offset: int = 0) -> Tensor:
    """Dense regular REM ``f(l) = lam^(l/d)``, shape ``[heads, query_len, key_len]``.

    ``lam`` is 1-D with one value per head, each in ``(-1, 1)`` for a stable recurrence (not
    enforced: :class:`LearnableREM` reparameterises ``lam = tanh(eta)``).
    """
    lam = _as_head_vector("lam", lam)
    lags = lag_grid(query_len, key_len, offset=offset, device=lam.device)
    zeros = torch.zeros_like(lam)
    return rem_entries(lags, log_mag=_safe_log_abs(lam), sign=torch.sign(lam), phase=zeros, shift=zeros,
                       dilation=_dilation_vector(dilation, lam.numel(), lam.device), masked=masked)


def cyclical_rem(gamma: Tensor, theta: Tensor, query_len: int, key_len: int | None = None, *,
                 kind: str = "cos", dilation: int | Sequence[int] = 1, masked: bool = True,
                 offset: int = 0) -> Tensor:
    """Dense cyclical REM ``f(l) = gamma^(l/d) cos(theta l/d)`` (or ``sin``), ``[heads, Lq, Lk]``."""
    if kind not in ("cos", "sin"):
        raise ValueError(f"kind must be 'cos' or 'sin', got {kind!r}")
    gamma = _as_head_vector("gamma", gamma)
    theta = _as_head_vector("theta", theta, like=gamma)
    if gamma.shape != theta.shape:
        raise ValueError(f"gamma and theta need one value per head each, got {gamma.numel()} and {theta.numel()}")
    lags = lag_grid(query_len, key_len, offset=offset, device=gamma.device)
    shift = torch.full_like(gamma, 0.0 if kind == "cos" else -math.pi / 2)
    return rem_entries(lags, log_mag=_safe_log_abs(gamma), sign=torch.ones_like(gamma), phase=theta, shift=shift,
                       dilation=_dilation_vector(dilation, gamma.numel(), gamma.device), masked=masked)


def toeplitz_apply(kernel: Tensor, lag_start: int, values: Tensor, query_len: int, offset: int = 0) -> Tensor:
    """``out[..., h, i, :] = sum_j kernel[h, i + offset - j - lag_start] * values[..., h, j, :]``.

    The Toeplitz product of a per-head lag kernel with the values, by FFT along time.

    Args:
        kernel: ``[H, n]`` coefficients for lags ``lag_start .. lag_start + n - 1`` (or ``[B, H, n]``,
            one kernel per batch row); lags outside that range count as 0.
        lag_start: the lag of ``kernel[..., 0]``.
        values: ``[B, H, Lk, D]``.
        query_len: number of output rows ``Lq``; row ``i`` sits at time ``i + offset``.

    Returns:
        ``[B, H, Lq, D]`` in the dtype of ``values``. Time ``O((n + Lk) log(n + Lk))``, memory
        linear in ``n + Lk``.
    """
    batch, heads, key_len, dim = values.shape
    out_dtype = values.dtype
    work_dtype = torch.promote_types(values.dtype, torch.float32)
    n = kernel.shape[-1]
    # Linear convolution c = kernel * values along time; out[i] = c[i + offset - lag_start].
    start = offset - lag_start
    fft_len = _fast_fft_len(n + key_len - 1)
    # FFTs along the last dim (time moved there by a transpose view): about 2x faster and 25% less
    # peak memory in forward+backward than FFTs along dim -2 (benchmarks/rem_speed.py, L = 8192).
    kf = torch.fft.rfft(kernel.to(work_dtype), n=fft_len, dim=-1).unsqueeze(-2)  # [(B,) H, 1, F]
    vf = torch.fft.rfft(values.to(work_dtype).transpose(-1, -2), n=fft_len, dim=-1)  # [B, H, D, F]
    conv = torch.fft.irfft(vf * kf, n=fft_len, dim=-1)  # [B, H, D, fft_len]
    stop = start + query_len
    if start >= 0:
        out = conv[..., start:stop]
    else:  # first rows see no lag inside the kernel's range: zeros
        pad = conv.new_zeros(batch, heads, dim, min(-start, query_len))
        out = torch.cat([pad, conv[..., : max(stop, 0)]], dim=-1)
    return out.transpose(-1, -2).to(out_dtype)  # [B, H, Lq, D]


def toeplitz_matrix(kernel: Tensor, lag_start: int, query_len: int, key_len: int, offset: int = 0) -> Tensor:
    """The dense Toeplitz matrices ``P[..., h, i, j] = kernel[..., h, i + offset - j - lag_start]`` (0 outside).

    Args:
        kernel: ``[H, n]`` (or ``[B, H, n]``) coefficients for lags ``lag_start .. lag_start + n - 1``.
        query_len, key_len: ``Lq``, ``Lk``; row ``i`` sits at time ``i + offset``, column ``j`` at ``j``.

    Returns:
        ``[H, Lq, Lk]`` (or ``[B, H, Lq, Lk]``), laid out from the zero-padded kernel by a strided window view (no
        per-entry evaluation; the gradient sums back along the diagonals).
    """
    lo, hi = offset - (key_len - 1), offset + query_len - 1  # lags of the matrix's corners
    n = kernel.shape[-1]
    left, right = lag_start - lo, hi - (lag_start + n - 1)
    if left < 0 or right < 0:  # kernel reaches beyond the matrix: keep the lags in [lo, hi]
        kernel = kernel[..., max(-left, 0): n - max(-right, 0)]
        left, right = max(left, 0), max(right, 0)
    full = F.pad(kernel, (left, right)) if left or right else kernel  # [(B,) H, Lq + Lk - 1], lags lo..hi
    # Reversed, row i of P is the window starting at Lq - 1 - i: unfold gives the rows bottom-up.
    return full.flip(-1).unfold(-1, key_len, 1).flip(-2)  # [(B,) H, Lq, Lk]


def _fast_fft_len(n: int) -> int:
    """Smallest 2^a 3^b 5^c >= n (sizes FFT libraries handle fastest)."""
    best = 1 << max(n - 1, 0).bit_length()
    p5 = 1
    while p5 < best:
        p35 = p5
        while p35 < best:
            size = p35
            while size < n:
                size *= 2
            best = min(best, size)
            p35 *= 3
        p5 *= 5
    return best


def recurrence_apply(values: Tensor, log_mag: Tensor, angle: Tensor, shift: Tensor, *, masked: bool,
                     dilation: int = 1, chunk: int | None = None) -> Tensor:
    """``out[b, h, t] = sum_{p >= 1} exp(p log_mag[h]) cos(p angle[h] + shift[h]) v[b, h, t - p d]``
    (and, unmasked, the same over ``v[b, h, t + p d]``): a square REM of dilation ``d`` applied as the
    recurrence it encodes, ``s_t = z (s_{t-d} + v_{t-d})`` with ``z = exp(log_mag + i angle)`` (the
    output is ``Re(e^{i shift} s_t)``), over the ``d`` interleaved sequences of steps ``r, r + d, ...``,
    a chunk of ``C`` of their steps at a time.

    Within a chunk the ``[C, C]`` Toeplitz block is applied densely; across chunks each chunk's
    inputs are folded into one complex state ``U_k = sum_b z^(C - b) v_(kC + b)``, the states before
    chunk ``k`` are ``S_k = sum_{k' < k} z^((k - k' - 1) C) U_k'`` (a ``[K, K]`` complex Toeplitz
    product, as a real ``[2K, 2K]`` one) and reach the chunk's steps as ``Re(e^{i shift} z^a S_k)``;
    the anti-causal half (unmasked) is the same with the chunks read backwards, in the same
    products. Every power of ``z`` is non-negative, so nothing overflows. Time ``O(L C D + (L /
    C)^2 D)`` per head and batch row (``C = ceil(sqrt(L / d))``: ``O(L^1.5 D)`` against the dense
    ``O(L^2 D)``), in four batched matmuls over the heads.

    Args:
        values: ``[B, H, L, D]``.
        log_mag, angle, shift: ``[H]`` each (``log_mag <= 0``: a stable recurrence).
        masked: the causal sum alone; else the anti-causal one is added (a bidirectional REM).
        dilation: ``d``, the same for every head.
        chunk: ``C`` (default ``ceil(sqrt(L / d))``).

    Returns:
        ``[B, H, L, D]`` in the dtype of ``values``.
    """
    batch, heads, length, dim = values.shape
    steps = -(-length // dilation)  # per interleaved sequence
    size = chunk or max(1, math.ceil(math.sqrt(steps)))
    count = -(-steps // size)  # K chunks
    columns = batch * dilation * dim  # N: batch rows, phases and features, side by side
    dtype = values.dtype
    # [B, H, K C d, D] -> [H, C, K, B, d, D] -> [H, C, K N]: one copy.
    x = F.pad(values, (0, 0, 0, count * size * dilation - length)).view(batch, heads, count, size, dilation, dim)
    x = x.permute(1, 3, 2, 0, 4, 5).reshape(heads, size, count * columns)
    log_mag, angle, shift = log_mag.to(dtype)[:, None], angle.to(dtype)[:, None], shift.to(dtype)[:, None]
    p = torch.arange(size + 1, device=values.device, dtype=dtype)  # [C + 1] powers 0..C
    magnitude, phase = torch.exp(p * log_mag), p * angle  # [H, C + 1]: z^p
    # Within each chunk: the Toeplitz block of lags 0..C-1 (lag 0 is 0), and its transpose unmasked.
    block = toeplitz_matrix(magnitude[:, :size] * torch.cos(phase[:, :size] + shift) * (p[:size] > 0).to(dtype), 0,
                            size, size)  # [H, C, C]
    out = torch.bmm(block if masked else block + block.transpose(1, 2), x)  # [H, C, K N]
    if count > 1:
        up = (magnitude[:, :size], phase[:, :size])  # z^0 .. z^(C-1)
        down = (magnitude[:, 1:].flip(-1), phase[:, 1:].flip(-1))  # z^C .. z^1
        # Each chunk's inputs folded: U_k (causal: z^(C - b)), U'_k (anti-causal: z^b), real and imaginary.
        folds = [down] if masked else [down, up]
        fold = torch.stack([part for m, a in folds for part in (m * torch.cos(a), m * torch.sin(a))], dim=1)
        u = torch.bmm(fold, x).view(heads, fold.shape[1] * count, columns)  # [H, 2r K, N]
        # The chunks' states: M[k, k'] = z^((k - k' - 1) C) for k > k' (causal), its transpose (anti-causal).
        q = torch.arange(count, device=values.device, dtype=dtype)
        reach = torch.exp((q - 1).clamp_min(0) * size * log_mag) * (q > 0).to(dtype)  # [H, K]
        turn = (q - 1).clamp_min(0) * size * angle  # [H, K]
        real = toeplitz_matrix(reach * torch.cos(turn), 0, count, count)  # [H, K, K]
        imag = toeplitz_matrix(reach * torch.sin(turn), 0, count, count)
        carry = _complex_block(real, imag)  # [H, 2K, 2K]
        if not masked:
            zeros = torch.zeros_like(carry)
            carry = torch.cat([torch.cat([carry, zeros], dim=-1),
                               torch.cat([zeros, _complex_block(real.transpose(1, 2), imag.transpose(1, 2))], dim=-1)],
                              dim=-2)  # [H, 4K, 4K]
        states = torch.bmm(carry, u).view(heads, fold.shape[1], count * columns)  # [H, 2r, K N]
        # Re(e^{i shift} z^e S) = Re(w z^e) Re(S) - Im(w z^e) Im(S): e = a causal, C - a anti-causal.
        reach_in = torch.stack([part for m, a in ([up] if masked else [up, down])
                                for part in (m * torch.cos(a + shift), -m * torch.sin(a + shift))],
                               dim=-1)  # [H, C, 2r]
        out = torch.baddbmm(out, reach_in, states)  # [H, C, K N]
    out = out.view(heads, size, count, batch, dilation, dim).permute(3, 0, 2, 1, 4, 5)  # [B, H, K, C, d, D]
    return out.reshape(batch, heads, count * size * dilation, dim)[:, :, :length]


def _complex_block(real: Tensor, imag: Tensor) -> Tensor:
    """``[..., 2K, 2K]``: the real form ``[[Re, -Im], [Im, Re]]`` of the complex matrices ``real + i imag``
    ``[..., K, K]``."""
    return torch.cat([torch.cat([real, -imag], dim=-1), torch.cat([imag, real], dim=-1)], dim=-2)


def _joined(*parts: Tensor) -> Tensor:
    """``parts`` concatenated along the last axis, those of width 0 left out (one part: itself, no operator)."""
    kept = [part for part in parts if part.shape[-1]] or list(parts[:1])
    return kept[0] if len(kept) == 1 else torch.cat(kept, dim=-1)


def _init_theta(pairs: int, periods: tuple[float, ...]) -> Tensor:
    return torch.tensor([2 * math.pi / periods[i % len(periods)] for i in range(pairs)])


class LearnableREM(nn.Module):
    """The learnable REMs of one RSA layer: one REM per head, heads ordered as ``RSAConfig.kinds``
    (regular, cos, sin, dilated regular, dilated cos, dilated sin; a cos head and the sin head of
    the same rank share ``(gamma, theta)``).

    Parameters (all ``nn.Parameter``): ``eta`` for the regular heads (``lambda = tanh(eta)``,
    initialised ``U([-2,-1] U [1,2])``), ``nu`` and ``theta`` for the cos/sin pairs
    (``gamma = sigmoid(nu)``, ``nu ~ U(1, 2)``, ``theta = 2 pi / period`` from ``RSAConfig.periods``).
    Plain and dilated heads have their own parameters. Each is a vector ``[n]`` (one value per
    head or pair), or with ``config.per_channel`` a matrix ``[n_channels, n]`` whose rows all start
    from the same per-head draw; the methods then take ``channel [B]``, the channel of each batch
    row, and give every row its channel's REM.

    With ``config.prior == "ets"`` the heads start from ``config.prior_fit`` (a
    :class:`~tsrec.config.SmoothingPrior` in token units; per channel where it has one value per
    channel and the REM is per channel): plain regular heads at ``lambda = 1 - alpha`` (the second
    at the damped trend's ``phi`` where there is one), dilated regular heads at the seasonal decay
    over their dilation, ``season_decay ** (d / m)`` (``1 - gamma`` at ``d = m``; without a season
    the level's ``(1 - alpha) ** d``), plain cos/sin pairs with the envelope ``season_decay **
    (1 / m)`` per token (``theta`` from ``config.periods``, the season); dilated pairs start as
    without the prior. Starts are kept in ``[1e-4, 0.999]``. Regular heads are then normalised
    (:meth:`log_scale`), so that ``lambda = 1 - alpha`` weighs lag ``l`` by ``alpha (1 - alpha)^(l-1)``.

    Args:
        config: a resolved :class:`~tsrec.config.RSAConfig` (``kinds``, ``dilation``, ``periods``
            and ``dilated_periods`` set; see ``RSAConfig.resolved``).
        masked: causal REM (``l >= 1``) if True, bidirectional (``|l| >= 1``) if False.
        n_channels: channels with their own parameters when ``config.per_channel`` (ignored otherwise).
    """

    def __init__(self, config: RSAConfig, *, masked: bool = True, n_channels: int = 1) -> None:
        super().__init__()
        if config.prior == "ets" and config.prior_fit is None:
            raise ValueError("rsa prior='ets' starts the REM from the ETS fitted on the training part, but "
                             "rsa.prior_fit is not set: fit through Forecaster.fit (which fills it), or set it with "
                             "tsrec.smoothing_prior.fit_smoothing_prior(...)")
        if config.unresolved():
            raise ValueError(f"the REM needs {', '.join(config.unresolved())}: set them, or fill them from the data "
                             "with RSAConfig.resolved(n_heads, DataFacts(season=...))")
        self.config = config
        self._masked = masked
        self.n_channels = check_int("n_channels", n_channels, 1) if config.per_channel else 1
        k1, k2, k3, k4, k5, k6 = config.kinds
        pairs, dil_pairs = max(k2, k3), max(k5, k6)
        n_dil = k4 + k5 + k6
        dil = [config.dilation] * n_dil if isinstance(config.dilation, int) else list(config.dilation)
        eta, nu = self._init_eta(k1), torch.empty(pairs).uniform_(1.0, 2.0)
        dilated_eta = self._init_eta(k4)
        if config.prior_fit is not None:
            eta, nu, dilated_eta = self._prior_starts(config.prior_fit, k1, pairs, dil[:k4])
        self._scalar("eta", eta)
        self._scalar("nu", nu)
        self._scalar("theta", _init_theta(pairs, config.periods))
        self._scalar("dilated_eta", dilated_eta)
        self._scalar("dilated_nu", torch.empty(dil_pairs).uniform_(1.0, 2.0))
        self._scalar("dilated_theta", _init_theta(dil_pairs, config.dilated_periods))
        self.register_buffer("dilation", torch.tensor([1] * (k1 + k2 + k3) + dil, dtype=torch.long),
                             persistent=False)
        # 0 regular, 1 cos, 2 sin, per head; sin heads are cos heads shifted by -pi/2.
        kind = [0] * k1 + [1] * k2 + [2] * k3 + [0] * k4 + [1] * k5 + [2] * k6
        self.register_buffer("head_kind", torch.tensor(kind, dtype=torch.long), persistent=False)
        # Each head's place in the scalars laid end to end as [eta, dilated_eta, nu, dilated_nu] (and
        # theta, dilated_theta in the places of nu, dilated_nu): one gather puts them in head order.
        reg, cyc, dcyc = list(range(k1)), [k1 + k4 + r for r in range(pairs)], [k1 + k4 + pairs + r for r in range(dil_pairs)]
        source = reg + cyc[:k2] + cyc[:k3] + [k1 + r for r in range(k4)] + dcyc[:k5] + dcyc[:k6]
        self.register_buffer("source", torch.tensor(source, dtype=torch.long), persistent=False)
        #: Constants made once per device and dtype, not state: (device, dtype) -> the heads' shifts,
        #: (lag_lo, lag_hi, device, dtype) -> the lag tables of :meth:`kernel`.
        self._constants: dict[tuple[Any, ...], Any] = {}

    def _prior_starts(self, prior: SmoothingPrior, k1: int, pairs: int,
                      dilations: list[int]) -> tuple[Tensor, Tensor, Tensor]:
        """``(eta [G, k1], nu [G, pairs], dilated_eta [G, k4])`` from the ETS prior, ``G`` its
        channels (1 pooled); see the class."""
        rows = prior.n_channels
        if rows != 1 and (not self.per_channel or rows != self.n_channels):
            where = f"{self.n_channels} channels with their own REMs" if self.per_channel else \
                "one REM shared by every channel"
            raise ValueError(f"rsa prior_fit has values for {rows} channels, but the model has {where}: fit the prior "
                             "pooled (one value) for a shared REM, or one value per channel with rsa.per_channel=True")
        low, high = 1e-4, 0.999
        level = torch.tensor(prior.level_decay, dtype=torch.float64)[:, None]  # [G, 1]
        trend = torch.tensor(prior.trend_decay, dtype=torch.float64)[:, None]
        season = torch.tensor(prior.season_decay, dtype=torch.float64)[:, None]
        m = prior.season_tokens
        plain = level.expand(-1, k1).clone()  # [G, k1]: the level's decay, the second head the damped trend's
        if k1 >= 2:
            plain[:, 1:2] = torch.where(trend > 0, trend, level)
        d = torch.tensor(dilations, dtype=torch.float64)[None, :]  # [1, k4]
        dilated = season ** (d / m) if prior.season > 1 else level ** d  # [G, k4]
        envelope = (season ** (1.0 / m) if prior.season > 1 else level).expand(-1, pairs)  # [G, pairs]
        dtype = torch.get_default_dtype()
        return (torch.atanh(plain.clamp(low, high)).to(dtype), torch.logit(envelope.clamp(low, high)).to(dtype),
                torch.atanh(dilated.clamp(low, high)).to(dtype))

    def _scalar(self, name: str, init: Tensor) -> None:
        """A learnable vector ``[n]`` (``[n_channels, n]`` per channel), or an empty buffer when
        this layer has no head of that kind (so that every registered parameter takes part in the
        REM and receives a gradient). ``init`` is ``[n]``, or ``[G, n]`` (the ETS prior's starts:
        ``G`` is 1, or ``n_channels`` per channel)."""
        if init.dim() == 2 and not self.config.per_channel:
            init = init[0]
        if self.config.per_channel:
            init = init.expand(self.n_channels, -1).clone()  # every channel starts from the same draw
        if init.numel():
            self.register_parameter(name, nn.Parameter(init))
        else:
            self.register_buffer(name, init, persistent=False)

    @staticmethod
    def _init_eta(n: int) -> Tensor:
        magnitude = torch.empty(n).uniform_(1.0, 2.0)
        sign = torch.where(torch.rand(n) < 0.5, -1.0, 1.0)
        return magnitude * sign

    @property
    def n_heads(self) -> int:
        return self.config.n_heads

    @property
    def masked(self) -> bool:
        return self._masked

    @property
    def per_channel(self) -> bool:
        return self.config.per_channel

    def _parameters_of(self, channel: Tensor | None) -> tuple[Tensor, ...]:
        """``(eta, nu, theta, dilated_eta, dilated_nu, dilated_theta)``: ``[n]`` shared, ``[C, n]``
        per channel, or ``[B, n]`` per channel with ``channel [B]`` (each row's channel's values)."""
        names = ("eta", "nu", "theta", "dilated_eta", "dilated_nu", "dilated_theta")
        params = tuple(getattr(self, name) for name in names)
        if not self.per_channel or channel is None:
            return params
        if channel.dim() != 1:
            raise ValueError(f"channel must be a 1-D index with one channel per batch row, got shape "
                             f"{tuple(channel.shape)}")
        return tuple(p[channel] if p.shape[-1] else p for p in params)  # an absent kind stays empty

    def head_terms(self, channel: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Per-head ``(log_mag, sign, phase, shift)`` in head order, differentiable: each ``[H]``;
        per channel ``[C, H]``, or ``[B, H]`` with ``channel [B]`` (``shift`` stays ``[H]``). A
        shared REM ignores ``channel``."""
        log_mag, lam, theta = self._sources(channel)
        regular, cycles = lam.shape[-1] > 0, theta.shape[-1] > 0
        sign = _joined(*([torch.sign(lam)] if regular else []), *([torch.ones_like(theta)] if cycles else []))
        phase = _joined(*([torch.zeros_like(lam)] if regular else []), theta)
        return log_mag, sign.index_select(-1, self.source), phase.index_select(-1, self.source), \
            self._shift(log_mag.dtype)

    def _sources(self, channel: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
        """``(log_mag [.., H], lam [.., k1 + k4], theta [.., pairs + dilated pairs])``: the heads'
        log magnitudes in head order, and the regular heads' ``lambda`` and the pairs' ``theta`` as
        :attr:`source` lays them out (of width 0, and no operator spent on them, where the layer has
        none of those heads: the default layers have no regular heads)."""
        eta, nu, th, deta, dnu, dth = self._parameters_of(channel)
        lam, theta = _joined(eta, deta), _joined(th, dth)
        if lam.shape[-1]:
            lam = torch.tanh(lam)
        parts = [_safe_log_abs(lam)] if lam.shape[-1] else []
        if theta.shape[-1]:
            parts.append(nn.functional.logsigmoid(_joined(nu, dnu)))
        return _joined(*parts).index_select(-1, self.source), lam, theta

    def kernel(self, lag_lo: int, lag_hi: int, channel: Tensor | None = None) -> Tensor:
        """The REM coefficients at the lags ``lag_lo .. lag_hi``: ``[H, n]`` (``[B, H, n]`` per
        channel with ``channel [B]``), ``n = lag_hi - lag_lo + 1``; equal to :meth:`entries` (to
        rounding) in a few operators: the lags' powers and support are constants kept per range, and
        a negative ``lambda``'s sign ``(-1)^p`` is the phase ``p pi``."""
        log_mag, lam, theta = self._sources(channel)
        flipped = self._angles(lam, theta)
        power, reach = self._lag_table(lag_lo, lag_hi, log_mag.dtype)  # [H, n] each
        scale = self.log_scale(log_mag)
        start = reach if scale is None else reach + scale[..., None]  # -inf off the support: exp gives 0 there
        angle = torch.addcmul(self._shift(log_mag.dtype)[:, None], power, flipped[..., None])
        return torch.addcmul(start, power, log_mag[..., None]).exp() * angle.cos()

    def _angles(self, lam: Tensor, theta: Tensor) -> Tensor:
        """``[.., H]`` each head's angle per power: ``theta`` on the cycle heads, ``pi`` on a regular
        head of negative ``lambda`` (``(-1)^p = cos(p pi)``), else 0 (``lam``, ``theta`` as :meth:`_sources`')."""
        parts = [(lam < 0).to(lam.dtype) * math.pi] if lam.shape[-1] else []
        return _joined(*parts, theta).index_select(-1, self.source)

    def _recurrence_product(self, values: Tensor) -> Tensor:
        """``P @ V`` of the square REM (no offset, shared by the channels) by its recurrence
        (:func:`recurrence_apply`), one call per run of heads of one dilation (the plain heads,
        then the dilated ones: two runs where the dilated heads share theirs). ``values [B, H, L, D]``
        -> ``[B, H, L, D]``."""
        log_mag, lam, theta = self._sources(None)
        angle, shift = self._angles(lam, theta), self._shift(log_mag.dtype)
        scale = self.log_scale(log_mag)
        parts = [recurrence_apply(values[:, start:stop], log_mag[start:stop], angle[start:stop], shift[start:stop],
                                  masked=self.masked, dilation=dilation)
                 for dilation, start, stop in self._dilation_runs()]
        out = parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)
        return out if scale is None else out * torch.exp(scale).to(out.dtype)[:, None, None]

    def _dilation_runs(self) -> list[tuple[int, int, int]]:
        """``(dilation, start, stop)`` of each run of consecutive heads with one dilation (made once)."""
        runs = self._constants.get(("runs",))
        if runs is None:
            runs = []
            for head, dilation in enumerate(self.dilation.tolist()):
                if runs and runs[-1][0] == dilation:
                    runs[-1] = (dilation, runs[-1][1], head + 1)
                else:
                    runs.append((dilation, head, head + 1))
            self._constants[("runs",)] = runs
        return runs

    def _lag_table(self, lag_lo: int, lag_hi: int, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
        """``(power, support)`` ``[H, n]`` in ``dtype`` at the lags ``lag_lo .. lag_hi``: ``|l| / d``
        (0 off the support) and 1 where the REM reaches, else 0 (:func:`_lag_powers`); made once per
        range, device and dtype."""
        key = (lag_lo, lag_hi, self.dilation.device, dtype)
        table = self._constants.get(key)
        if table is None:
            lags = torch.arange(lag_lo, lag_hi + 1, device=self.dilation.device).unsqueeze(0)  # [1, n]
            power, valid = _lag_powers(lags, self.dilation, self.masked, dtype, lag0=False)
            reach = torch.zeros_like(power[:, 0]).masked_fill_(~valid[:, 0], -math.inf)
            table = self._constants[key] = (power[:, 0], reach)
        return table

    def _shift(self, dtype: torch.dtype) -> Tensor:
        """``[H]``: ``-pi/2`` on the sin heads, else 0, rounded once to ``dtype`` (not through float32)."""
        key = (self.head_kind.device, dtype)
        shift = self._constants.get(key)
        if shift is None:
            shift = self._constants[key] = (self.head_kind == 2).to(dtype) * (-math.pi / 2)
        return shift

    def log_scale(self, log_mag: Tensor) -> Tensor | None:
        """The normalisation of the regular heads under the ETS prior, ``log((1 - |lambda|) /
        |lambda|)`` per head (0 on cycle heads), from :meth:`head_terms`' ``log_mag`` (shaped as it);
        None without the prior. A regular REM ``c lambda^l`` with this ``c`` sums to 1 over the lags
        ``l >= 1`` of an unbounded history: at ``lambda = 1 - alpha`` its weights are ``alpha (1 -
        alpha)^(l - 1)``, simple exponential smoothing's. (In ``mix="bias"`` a per-head constant
        does not change the softmax, so the bias ignores it.)"""
        if self.config.prior != "ets":
            return None
        tiny = torch.finfo(log_mag.dtype).tiny
        scale = torch.log((1.0 - torch.exp(log_mag)).clamp_min(tiny)) - log_mag
        return torch.where(self.head_kind == 0, scale, torch.zeros_like(scale))

    def head_parameters(self) -> dict[str, Tensor]:
        """Per-head ``lambda``, ``gamma``, ``theta`` (NaN where a head has no such parameter),
        ``[H]``, or ``[C, H]`` per channel; ``kind`` (0 regular, 1 cos, 2 sin) and ``dilation``
        ``[H]``; detached, on the CPU, for reporting."""
        with torch.no_grad():
            log_mag, sign, phase, _ = self.head_terms()
            is_reg = self.head_kind == 0
            nan = torch.full_like(log_mag, float("nan"))
            magnitude = torch.exp(log_mag)
            return {
                "kind": self.head_kind.cpu(),
                "dilation": self.dilation.cpu(),
                "lambda": torch.where(is_reg, sign * magnitude, nan).cpu(),
                "gamma": torch.where(is_reg, nan, magnitude).cpu(),
                "theta": torch.where(is_reg, nan, phase).cpu(),
            }

    def _check_channel(self, channel: Tensor | None) -> None:
        if self.per_channel and channel is None:
            raise ValueError("this REM has parameters per channel (rsa.per_channel): pass channel [B], the "
                             "channel of each batch row")

    def entries(self, lags: Tensor, channel: Tensor | None = None) -> Tensor:
        """REM coefficients at integer ``lags`` (``[Lq, Lk]`` or ``[..., H, Lq, Lk]``): ``[H, Lq, Lk]``
        (per channel ``[C, H, Lq, Lk]``, or ``[B, H, Lq, Lk]`` with ``channel [B]``), or the
        broadcast shape of ``[..., H, Lq, Lk]`` lags."""
        log_mag, sign, phase, shift = self.head_terms(channel)
        return rem_entries(lags, log_mag=log_mag, sign=sign, phase=phase, shift=shift,
                           dilation=self.dilation, masked=self.masked, log_scale=self.log_scale(log_mag))

    def log_envelope(self, query_len: int, key_len: int | None = None, *, offset: int = 0,
                     channel: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """The score bias of :func:`rem_log_envelope` and its support: bias ``[H, Lq, Lk]`` (``[B, H,
        Lq, Lk]`` per channel with ``channel [B]``), support ``[H, Lq, Lk]`` bool."""
        self._check_channel(channel)
        lags = lag_grid(query_len, key_len, offset=offset, device=self.dilation.device)
        log_mag, sign, phase, shift = self.head_terms(channel)
        return rem_log_envelope(lags, log_mag=log_mag, sign=sign, phase=phase, shift=shift,
                                dilation=self.dilation, masked=self.masked)

    def matrix(self, query_len: int, key_len: int | None = None, *, offset: int = 0,
               channel: Tensor | None = None) -> Tensor:
        """Dense REMs ``[H, query_len, key_len]`` (per channel ``[C, H, Lq, Lk]``, or ``[B, H, Lq, Lk]``
        with ``channel [B]``)."""
        return self.entries(lag_grid(query_len, key_len, offset=offset, device=self.dilation.device), channel)

    def rows(self, query_index: Tensor, key_len: int, *, offset: int = 0, channel: Tensor | None = None) -> Tensor:
        """REM rows at the given query positions: ``query_index [B, H, u]`` -> ``[B, H, u, key_len]``
        (per channel, ``channel [B]`` picks each batch row's REM)."""
        self._check_channel(channel)
        keys = torch.arange(key_len, device=query_index.device)
        lags = query_index.unsqueeze(-1) + offset - keys  # [B, H, u, Lk]
        return self.entries(lags, channel)

    def product(self, values: Tensor, query_len: int | None = None, *, offset: int = 0,
                method: str = "auto", channel: Tensor | None = None) -> Tensor:
        """``P @ V`` for every query row.

        Args:
            values: ``[B, H, Lk, D]``.
            query_len: rows ``Lq`` (default ``Lk``); row ``i`` sits at time ``i + offset``.
            method: ``"dense"`` (build ``[H, Lq, Lk]``), ``"scan"`` (the recurrence a chunk at a
                time, :func:`recurrence_apply`: a square REM, ``offset`` 0, not per channel),
                ``"fft"`` (Toeplitz convolution, memory linear in ``L``) or ``"auto"``: on the CPU the
                scan for a square REM of at least ``SCAN_MIN_LENGTH`` steps shared by the channels;
                else dense up to ``DENSE_MAX_ENTRIES`` entries, else the FFT (on a GPU, where an RSA
                step is bound by kernel launches rather than FLOPs, the scan's extra operators are
                not yet measured against the dense product: dense stays there).
            channel: ``[B]``, the channel of each batch row; needed (only) per channel, where each
                row gets its own REM (dense ``[B, H, Lq, Lk]``, or ``[B, H, n]`` kernels for the FFT).

        Returns:
            ``[B, H, Lq, D]``.
        """
        key_len = values.shape[-2]
        query_len = key_len if query_len is None else query_len
        _check_lengths(query_len, key_len)
        if values.shape[1] != self.n_heads:
            raise ValueError(f"values have {values.shape[1]} heads, the REM has {self.n_heads}")
        self._check_channel(channel)
        if self.per_channel and channel.shape != values.shape[:1]:
            raise ValueError(f"channel needs one index per batch row ({values.shape[0]}), got shape {tuple(channel.shape)}")
        square = query_len == key_len and offset == 0 and not self.per_channel
        if method == "auto":
            method = "scan" if square and key_len >= SCAN_MIN_LENGTH and values.device.type == "cpu" else \
                "dense" if query_len * key_len <= DENSE_MAX_ENTRIES else "fft"
        if method not in ("dense", "scan", "fft"):
            raise ValueError(f"method must be 'auto', 'dense', 'scan' or 'fft', got {method!r}")
        if method == "scan":
            if not square:
                raise ValueError(f"method='scan' applies a square REM shared by the channels (query_len = key_len, "
                                 f"offset 0): got Lq={query_len}, Lk={key_len}, offset={offset}, per_channel="
                                 f"{self.per_channel}; use method='auto', 'dense' or 'fft'")
            return self._recurrence_product(values)
        batch, heads, _, dim = values.shape
        lag_lo, lag_hi = offset - (key_len - 1), offset + query_len - 1  # lags this product can meet
        if self.masked:
            lag_lo = max(lag_lo, 1)
        if lag_hi < lag_lo:  # every key lies in the future of every query
            return values.new_zeros(batch, heads, query_len, dim)
        # Every REM entry depends on the lag alone: evaluate each lag once ([(B,) H, n], n <= Lq + Lk - 1).
        if method == "fft":
            return toeplitz_apply(self.kernel(lag_lo, lag_hi, channel), lag_lo, values, query_len, offset)
        # Dense: every lag of the matrix, 0 off the support, so that it is laid out with no padding.
        lag_lo = offset - (key_len - 1)
        kernel = self.kernel(lag_lo, lag_hi, channel)  # [H, n], per channel [B, H, n]
        matrix = toeplitz_matrix(kernel.to(values.dtype), lag_lo, query_len, key_len, offset)  # [(B,) H, Lq, Lk]
        if self.per_channel:  # one REM per batch row
            return torch.matmul(matrix, values)  # [B, H, Lq, D]
        # Fold the batch into the columns: one [H, Lq, Lk] x [H, Lk, B*D] product, so neither P nor
        # its gradient is broadcast over the batch.
        folded = values.permute(1, 2, 0, 3).reshape(heads, key_len, batch * dim)  # [H, Lk, B*D]
        out = torch.bmm(matrix, folded)  # [H, Lq, B*D]
        return out.view(heads, query_len, batch, dim).permute(2, 0, 1, 3)  # [B, H, Lq, D]

    def extra_repr(self) -> str:
        c = self.config
        return f"kinds={c.kinds}, dilation={c.dilation}, masked={self.masked}"
