"""SRU++ (Lei, 2021, "When Attention Meets Fast Recurrence"): attention on a factorised projection
feeding the elementwise recurrence of SRU (``ZOO_SPEC.md`` section 1).

One layer, on ``x [B, L, d_in]``, with attention width ``d' < d`` and ``n_heads`` heads::

    z   = W1 x                                   # d_in -> d', no bias
    q   = z ;  k, v = split(W2 z)                # d' -> 2 d': keys and values from q, not from x
    A   = softmax(q k^T / sqrt(d' / n_heads) + causal mask) v
    U   = W3 dropout(LayerNorm(z + alpha A))     # d' -> 3 d (4 d when d_in != d); alpha learned
    f_t = sigmoid(u1_t + v_f * c_{t-1} + b_f)    # forget gate
    r_t = sigmoid(u2_t + v_r * c_{t-1} + b_r)    # reset (highway) gate
    c_t = f_t * c_{t-1} + (1 - f_t) * u0_t       # c_0 = 0
    h_t = r_t * c_t + (1 - r_t) * x_t            # highway; u3_t replaces x_t when d_in != d

A layer without attention computes ``U = W3 dropout(LayerNorm(W1 x))`` (the ``alpha = 0`` case).
With RSA the attention becomes ``(1 - g) softmax(.) v + g P v`` with causal REMs ``P``
(:class:`~tsrec.nn.attention.RSAMixer`).

Only ``c`` is sequential: the gates read ``c_{t-1}``, so :func:`forget_recurrence` loops over time
on ``[B, d]`` slices, three tensor ops a step; its hand-written backward is one op a step, because
the gradient with respect to ``c`` obeys a linear recurrence. The reset gate and ``h`` are then
computed for all steps at once from the stacked states.

Initialisation follows the reference code (asappresearch/sru, branch 3.0.0-dev): Xavier-uniform
maps without bias (``W3`` scaled by ``sqrt(1 - dropout)``), ``v_f, v_r ~ U(-1, 1)``, ``b_f = 0``,
``b_r = -2`` (:data:`HIGHWAY_BIAS`: the layer starts close to the identity), ``alpha = alpha_init``
(0 in the paper: a fresh layer is a plain SRU on a factorised projection).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.autograd.function import FunctionCtx, once_differentiable
from torch.nn import functional as F

from tsrec._checks import check_fraction, check_int
from tsrec.config import RSAConfig
from tsrec.nn.attention import RSAMixer, make_kernel

__all__ = ["HIGHWAY_BIAS", "FactorisedProjection", "SRUppAttention", "SRUppLayer", "SRUppStack", "forget_recurrence"]

#: Initial bias ``b_r`` of the reset gate: ``sigmoid(-2) = 0.12``, so ``h`` starts mostly ``x``.
HIGHWAY_BIAS = -2.0


class _ForgetRecurrence(torch.autograd.Function):
    """``c_t = lerp(u_t, c_{t-1}, sigmoid(a_t + v * c_{t-1}))`` from ``c_0 = 0``; see :func:`forget_recurrence`."""

    @staticmethod
    def forward(ctx: FunctionCtx, u: Tensor, a: Tensor, v: Tensor) -> Tensor:
        batch, length, width = u.shape
        states = u.new_zeros(batch, length + 1, width)  # states[:, t] = c_t
        forget = u.new_empty(batch, length, width)  # forget[:, t - 1] = f_t
        c = states.unbind(1)
        for t, (u_t, a_t, f_t) in enumerate(zip(u.unbind(1), a.unbind(1), forget.unbind(1)), start=1):
            torch.addcmul(a_t, v, c[t - 1], out=f_t)
            f_t.sigmoid_()
            torch.lerp(u_t, c[t - 1], f_t, out=c[t])  # f c_{t-1} + (1 - f) u
        ctx.save_for_backward(u, v, states, forget)
        return states

    @staticmethod
    @once_differentiable
    def backward(ctx: FunctionCtx, grad_states: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        u, v, states, forget = ctx.saved_tensors  # type: ignore[attr-defined]
        c_prev, keep = states[:, :-1], 1 - forget
        # dc_t/da_t = (c_{t-1} - u_t) f_t (1 - f_t) and dc_t/dc_{t-1} = f_t + v dc_t/da_t
        dc_da = (c_prev - u).mul_(forget).mul_(keep)  # [B, L, d]
        dc_dprev = torch.addcmul(forget, dc_da, v)  # [B, L, d]
        # g_t = dLoss/dc_t through every path: g_t = grad_t + g_{t+1} dc_{t+1}/dc_t, backwards in time
        g = grad_states[:, 1:].clone(memory_format=torch.contiguous_format)  # [B, L, d]
        g_steps, dprev_steps = g.unbind(1), dc_dprev.unbind(1)
        for t in range(len(g_steps) - 2, -1, -1):
            g_steps[t].addcmul_(g_steps[t + 1], dprev_steps[t + 1])
        grad_a = dc_da.mul_(g)
        grad_v = (grad_a * c_prev).sum((0, 1))
        return g.mul_(keep), grad_a, grad_v


def forget_recurrence(u: Tensor, a: Tensor, v: Tensor) -> Tensor:
    """The states of SRU's forget-gate recurrence, from ``c_0 = 0``::

        f_t = sigmoid(a_t + v * c_{t-1});  c_t = f_t * c_{t-1} + (1 - f_t) * u_t

    Args:
        u: candidates ``[B, L, d]``.
        a: forget-gate pre-activations without the state term (``u1 + b_f``), ``[B, L, d]``.
        v: the state weights ``v_f``, ``[d]``.

    Returns:
        ``[B, L + 1, d]``: ``c_0 = 0`` then ``c_1 .. c_L``.

    A loop over time on ``[B, d]`` slices with a hand-written backward (first derivatives only):
    on one CPU thread 2 to 3 times faster than autograd through the same loop, scripted or not.
    """
    return _ForgetRecurrence.apply(u, a, v)


class FactorisedProjection(nn.Module):
    """``U = W3 dropout(LayerNorm(W1 x))``: ``[B, L, d_in] -> [B, L, d_out]`` through width ``d'``
    (the projection of an SRU++ layer without attention)."""

    def __init__(self, d_in: int, d_attention: int, d_out: int, *, dropout: float = 0.0) -> None:
        super().__init__()
        self.w1 = nn.Linear(d_in, d_attention, bias=False)
        self.norm = nn.LayerNorm(d_attention)
        self.dropout = nn.Dropout(dropout)
        self.w3 = nn.Linear(d_attention, d_out, bias=False)
        nn.init.xavier_uniform_(self.w1.weight)
        nn.init.xavier_uniform_(self.w3.weight)
        with torch.no_grad():
            self.w3.weight.mul_((1.0 - dropout) ** 0.5)  # as the reference: keeps U's scale under dropout

    def forward(self, x: Tensor) -> Tensor:
        return self.w3(self.dropout(self.norm(self.w1(x))))


class SRUppAttention(FactorisedProjection):
    """``U = W3 dropout(LayerNorm(z + alpha A))`` with ``z = W1 x`` and ``A`` causal multi-head
    attention of ``q = z`` over ``k, v = split(W2 z)``: ``[B, L, d_in] -> [B, L, d_out]``.

    ``rsa`` (a resolved :class:`~tsrec.config.RSAConfig`) mixes causal REMs into ``A``; the mixer
    is the attribute ``rsa``, where :meth:`~tsrec.models.sequence.SequenceForecaster.rsa_layers`
    finds it.
    """

    def __init__(self, d_in: int, d_attention: int, d_out: int, n_heads: int, *, alpha_init: float = 0.0,
                 dropout: float = 0.0, attn_dropout: float = 0.0, rsa: RSAConfig | None = None) -> None:
        super().__init__(d_in, d_attention, d_out, dropout=dropout)
        if d_attention % n_heads:
            raise ValueError(f"d_attention ({d_attention}) must be divisible by n_heads ({n_heads})")
        self.n_heads = n_heads
        self.w2 = nn.Linear(d_attention, 2 * d_attention, bias=False)
        nn.init.xavier_uniform_(self.w2.weight)
        self.kernel = make_kernel("full", dropout=attn_dropout)  # scale 1 / sqrt(d' / n_heads)
        self.alpha = nn.Parameter(torch.tensor(float(alpha_init)))
        self.rsa = RSAMixer(rsa, n_heads, masked=True) if rsa is not None else None

    def _heads(self, x: Tensor) -> Tensor:
        batch, length, _ = x.shape
        return x.view(batch, length, self.n_heads, -1).transpose(1, 2)  # [B, h, L, d'/h]

    def attend(self, z: Tensor) -> Tensor:
        """``A``: causal attention of ``z [B, L, d']`` to itself -> ``[B, L, d']``."""
        q = self._heads(z)
        k, v = (self._heads(part) for part in self.w2(z).chunk(2, dim=-1))
        bias = None if self.rsa is None else self.rsa.score_bias(q.shape[-2], k.shape[-2])  # rsa mix="bias"
        attended = self.kernel(q, k, v, causal=True, bias=bias)
        out = attended.values if self.rsa is None else self.rsa(attended, v)  # [B, h, L, d'/h]
        return out.transpose(1, 2).reshape(z.shape)

    def forward(self, x: Tensor) -> Tensor:
        z = self.w1(x)  # [B, L, d']
        return self.w3(self.dropout(self.norm(z + self.alpha * self.attend(z))))


class SRUppLayer(nn.Module):
    """One SRU++ layer (equations in the module docstring): ``x [B, L, d_in] -> h [B, L, d]``.

    Args:
        d_in, d: input and state widths; when they differ a fourth chunk of ``U`` replaces ``x``
            in the highway.
        d_attention: width ``d'`` of the factorised projection (and of the attention).
        n_heads: attention heads (REM heads with ``rsa``).
        attention: False for the projection without attention.
        alpha_init: initial ``alpha``.
        dropout: on the normalised projection, before ``W3``.
        attn_dropout: on the attention weights.
        recurrent_dropout: variational dropout of the highway's recurrent term: with one mask
            ``m [B, d]`` for all steps, ``h_t = x_t + m * r_t * (c_t - x_t)`` (a dropped feature
            passes ``x`` through), as the reference applies between layers.
        rsa: a resolved :class:`~tsrec.config.RSAConfig` for RSA attention (needs ``attention``).
    """

    def __init__(self, d_in: int, d: int, d_attention: int, n_heads: int, *, attention: bool = True,
                 alpha_init: float = 0.0, dropout: float = 0.0, attn_dropout: float = 0.0,
                 recurrent_dropout: float = 0.0, rsa: RSAConfig | None = None) -> None:
        super().__init__()
        self.d = check_int("d", d, 1)
        self.recurrent_dropout = check_fraction("recurrent_dropout", recurrent_dropout)
        self.n_chunks = 3 if d_in == d else 4
        d_out = self.n_chunks * d
        if attention:
            self.projection: FactorisedProjection = SRUppAttention(
                d_in, d_attention, d_out, n_heads, alpha_init=alpha_init, dropout=dropout,
                attn_dropout=attn_dropout, rsa=rsa)
        elif rsa is not None:
            raise ValueError("RSA needs an attention matrix: a layer without attention takes no rsa")
        else:
            self.projection = FactorisedProjection(d_in, d_attention, d_out, dropout=dropout)
        self.v_f = nn.Parameter(torch.empty(d).uniform_(-1.0, 1.0))
        self.v_r = nn.Parameter(torch.empty(d).uniform_(-1.0, 1.0))
        self.b_f = nn.Parameter(torch.zeros(d))
        self.b_r = nn.Parameter(torch.full((d,), HIGHWAY_BIAS))

    def forward(self, x: Tensor) -> Tensor:
        # Under autocast the projection (and the embedded x) come in half precision: the recurrence
        # and the highway run in the parameters' precision, as the reference's recurrence in float32.
        dtype = self.v_f.dtype
        u0, u1, u2, *u3 = self.projection(x).to(dtype).chunk(self.n_chunks, dim=-1)  # each [B, L, d]
        highway = (u3[0] if u3 else x).to(dtype)
        states = forget_recurrence(u0, u1 + self.b_f, self.v_f)  # [B, L + 1, d]
        c_prev, c = states[:, :-1], states[:, 1:]
        reset = torch.sigmoid(torch.addcmul(u2 + self.b_r, self.v_r, c_prev))  # [B, L, d]
        if self.training and self.recurrent_dropout > 0:
            mask = F.dropout(x.new_ones(x.shape[0], 1, self.d), self.recurrent_dropout)  # [B, 1, d]
            reset = reset * mask
        return torch.lerp(highway, c, reset)  # r c + (1 - r) x

    def extra_repr(self) -> str:
        return f"d={self.d}, recurrent_dropout={self.recurrent_dropout}"


class SRUppStack(nn.Module):
    """``n_layers`` SRU++ layers of width ``d_model``: ``[B, L, d_model] -> [B, L, d_model]``.

    Layer ``i`` (from 0) has attention when ``(i + 1) % attention_every == 0`` (every layer by
    default; with 2, the second, fourth, ...), the others the plain factorised projection, as the
    reference's ``attention_every_n_layers``. Every layer but the last applies ``dropout`` to its
    highway's recurrent term (:class:`SRUppLayer`'s ``recurrent_dropout``), as the reference.
    """

    def __init__(self, d_model: int, n_layers: int, d_attention: int, n_heads: int, *, attention_every: int = 1,
                 alpha_init: float = 0.0, dropout: float = 0.0, attn_dropout: float = 0.0,
                 rsa: RSAConfig | None = None) -> None:
        super().__init__()
        n_layers = check_int("n_layers", n_layers, 1)
        if check_int("attention_every", attention_every, 1) > n_layers:
            raise ValueError(f"attention_every ({attention_every}) exceeds n_layers ({n_layers}): no layer would "
                             "have attention")
        self.layers = nn.ModuleList()
        for i in range(n_layers):
            attention = (i + 1) % attention_every == 0
            self.layers.append(SRUppLayer(
                d_model, d_model, d_attention, n_heads, attention=attention, alpha_init=alpha_init,
                dropout=dropout, attn_dropout=attn_dropout, recurrent_dropout=dropout if i + 1 < n_layers else 0.0,
                rsa=rsa if attention else None))

    def forward(self, x: Tensor) -> Tensor:
        for layer in self.layers:
            x = layer(x)
        return x
