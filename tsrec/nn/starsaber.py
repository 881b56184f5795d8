"""StarSaber: a bidirectional RNN's equations solved by a fixed number of fixed-point iterations.

A bidirectional RNN is the set of equations ``h_i = tanh(W_p h_{i-1} + W_f h_{i+1} + U x_i + b)``
over all positions at once; iterating them, ``H^(l) = F(H^(l-1))``, converges to their solution
when ``F`` is a contraction (Banach). StarSaber (seed 000, ``ZOO_SPEC.md`` section 2) stops after
a fixed number of iterations (= layers) with their own weights, and replaces the chain "previous /
next position" by a learned relation graph. One layer, on ``H [B, L, d]`` and the embedded input
``X0 [B, L, d]``, per head (``n_heads`` heads of width ``d / n_heads``)::

    S      = (H Wb) H^T / sqrt(d / n_heads)        # bilinear relation scores, diagonal masked out
    A      = softmax(S)                            # the relation graph, one per head
    C      = (A * past) H Wp + (A * future) H Wf   # past: j < i, future: j > i; separate maps
    Htilde = tanh(C + X0 Wx + b)                   # direct path from the input to every layer
    H'     = H + alpha * Htilde                    # ReZero residual; no feed-forward block

The keys of head ``k`` are the ``k``-th slice of ``H``; the heads' contexts are concatenated.
The gated variant is a GRU's fixed point: ``z = sigmoid(C_z + X0 Wxz + b_z)`` with its own past
and future maps on the same graph, and ``H' = (1 - z) * H + z * Htilde``.

``causal=True`` keeps only the past (the softmax runs over ``j < i``), so that no position sees a
later one. With RSA the graph is mixed with the layer's REMs, ``A' = (1 - g) A + g P``, before the
past/future split: a masked REM acts on the past only; an unmasked one is the masked REM on the
past and its mirror (the same coefficients at the lag ``j - i``) on the future.

Cost: the learned graph goes through fused attention
(:func:`torch.nn.functional.scaled_dot_product_attention`), which never holds a ``[B, n_heads,
L, L]`` matrix; the REMs are one dense ``[n_heads, L, L]`` matrix shared by the batch. Time is
``O(B L^2 d)`` per layer, memory ``O(B L d + n_heads L^2)`` beside the attention's own buffers.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from tsrec._checks import check_fraction, check_int
from tsrec.config import RSAConfig
from tsrec.nn.attention import RSAMixer

__all__ = ["StarSaberEncoder", "StarSaberLayer"]


def _shared_matmul(matrix: Tensor, values: Tensor) -> Tensor:
    """``matrix [n or 1, L, L] @ values [B, n, L, w] -> [B, n, L, w]`` with the batch folded into
    the columns, so that the matrix (and its gradient) is never repeated over the batch."""
    b, heads, length, width = values.shape
    folded = values.permute(1, 2, 0, 3).reshape(heads, length, b * width)  # [n, L, B * w]
    return torch.matmul(matrix, folded).view(heads, length, b, width).permute(2, 0, 1, 3)


class StarSaberLayer(nn.Module):
    """One fixed-point iteration ``(H [B, L, d], X0 [B, L, d]) -> H' [B, L, d]`` (module docstring).

    Args:
        d_model: width ``d`` of the states and of the embedded input.
        n_heads: heads of the relation graph; must divide ``d_model``.
        gated: the GRU fixed point ``(1 - z) H + z Htilde`` instead of ``H + alpha Htilde``.
        causal: relate each position to earlier ones only (no future map).
        alpha_init: the ReZero scale's initial value (plain update only).
        dropout: on ``Htilde`` before the update.
        rsa: a resolved :class:`~tsrec.config.RSAConfig` (one REM head per head) to mix the graph
            with REMs, masked (causal) unless ``rsa.encoder_masked`` is False; None for none.
    """

    def __init__(self, d_model: int, n_heads: int, *, gated: bool = False, causal: bool = False,
                 alpha_init: float = 0.0, dropout: float = 0.0, rsa: RSAConfig | None = None) -> None:
        super().__init__()
        self.d_model, self.n_heads = check_int("d_model", d_model), check_int("n_heads", n_heads)
        if d_model % n_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
        if causal and rsa is not None and not rsa.encoder_masked:
            raise ValueError("a causal layer keeps only the past: an unmasked REM's future half would be "
                             "dropped; use rsa.encoder_masked=True")
        self.gated, self.causal = gated, causal
        maps = 2 if gated else 1  # candidate (and gate) rows of every map below
        self.query = nn.Linear(d_model, d_model, bias=False)  # Wb
        self.past = nn.Linear(d_model, maps * d_model, bias=False)  # Wp (and Wp_z)
        self.future = None if causal else nn.Linear(d_model, maps * d_model, bias=False)  # Wf (and Wf_z)
        self.input = nn.Linear(d_model, maps * d_model)  # Wx, b (and Wxz, b_z)
        self.alpha = None if gated else nn.Parameter(torch.tensor(float(alpha_init)))
        self.dropout = nn.Dropout(check_fraction("dropout", dropout))
        self.rsa = RSAMixer(rsa, n_heads, masked=rsa.encoder_masked) if rsa is not None else None

    def _heads(self, x: Tensor) -> Tensor:
        """``[B, L, m * d]`` (``m`` maps of ``n_heads`` slices) -> ``[B, n_heads, L, m * d_head]``."""
        b, length, width = x.shape
        maps = width // self.d_model
        return x.view(b, length, maps, self.n_heads, -1).permute(0, 3, 1, 2, 4).reshape(b, self.n_heads, length, -1)

    def _merge(self, x: Tensor) -> Tensor:
        """``[B, n_heads, L, m * d_head]`` -> ``[B, L, m, d]``, the inverse layout of :meth:`_heads`."""
        b, heads, length, width = x.shape
        maps = width * heads // self.d_model
        return x.view(b, heads, length, maps, -1).permute(0, 2, 3, 1, 4).reshape(b, length, maps, self.d_model)

    def values(self, h: Tensor) -> tuple[Tensor, Tensor | None]:
        """``H [B, L, d]`` -> the past and future values ``H Wp``, ``H Wf``, each
        ``[B, n_heads, L, m * d_head]`` (``m = 2`` maps when gated); no future values when causal."""
        future = self._heads(self.future(h)) if self.future is not None else None
        return self._heads(self.past(h)), future

    def attend(self, h: Tensor, past: Tensor, future: Tensor | None) -> Tensor:
        """``(A * past) H Wp + (A * future) H Wf`` for the learned graph ``A = softmax(S)``, from
        ``H [B, L, d]`` and :meth:`values`; ``[B, n_heads, L, m * d_head]``.

        Fused attention, never materialising ``A``: causal, rows ``1..L-1`` attend to keys
        ``0..L-2`` up to their own index (row 0 has no past: zero context); bidirectional, each row
        attends to every key twice, once as past (``H Wp``, allowed where ``j < i``) and once as
        future (``H Wf``, allowed where ``j > i``), one softmax over both (the shared normaliser).
        """
        q, k = self._heads(self.query(h)), self._heads(h)  # [B, n, L, d_head]
        scale = q.shape[-1] ** -0.5
        # Fused kernels want queries and keys as wide as the values (gated: 2 d_head); zero columns
        # leave the scores unchanged (without them PyTorch's CPU kernel falls back to the unfused one).
        widen = (0, past.shape[-1] - q.shape[-1])
        q, k = F.pad(q, widen), F.pad(k, widen)
        length = h.shape[1]
        if future is None:
            context = F.scaled_dot_product_attention(q[:, :, 1:], k[:, :, :-1], past[:, :, :-1], is_causal=True,
                                                     scale=scale)
            return F.pad(context, (0, 0, 1, 0))
        if length == 1:  # a single position relates to nothing
            return torch.zeros_like(past)
        i = torch.arange(length, device=h.device).unsqueeze(1)
        j = torch.arange(length, device=h.device).unsqueeze(0)
        allowed = torch.cat([j < i, j > i], dim=-1)  # [L, 2L]
        return F.scaled_dot_product_attention(q, torch.cat([k, k], dim=-2), torch.cat([past, future], dim=-2),
                                              attn_mask=allowed, scale=scale)

    @staticmethod
    def follow(graph: Tensor, past: Tensor, future: Tensor | None) -> Tensor:
        """``(graph * past) H Wp + (graph * future) H Wf`` for a graph ``[n_heads or 1, L, L]``
        shared by the batch (its strictly lower triangle is the past, its strictly upper one the
        future, its diagonal is not used), with :meth:`values` (``future=None``: the past only);
        ``[B, n_heads, L, m * d_head]``."""
        context = _shared_matmul(torch.tril(graph, -1), past)
        return context if future is None else context + _shared_matmul(torch.triu(graph, 1), future)

    def candidate(self, context: Tensor, x0: Tensor) -> tuple[Tensor, Tensor | None]:
        """``Htilde = tanh(C + X0 Wx + b)`` and, gated, ``z = sigmoid(C_z + X0 Wxz + b_z)``, each
        ``[B, L, d]`` (``z`` is None for the plain update), from a context ``[B, n_heads, L,
        m * d_head]`` (:meth:`attend`, :meth:`follow`) and ``X0 [B, L, d]``."""
        b, length, _ = x0.shape
        pre = self._merge(context) + self.input(x0).view(b, length, -1, self.d_model)  # [B, L, m, d]
        gate = torch.sigmoid(pre[:, :, 1]) if self.gated else None
        return torch.tanh(pre[:, :, 0]), gate

    def forward(self, h: Tensor, x0: Tensor) -> Tensor:
        """``H [B, L, d]``, ``X0 [B, L, d]`` -> ``H' [B, L, d]``."""
        past, future = self.values(h)
        context = self.attend(h, past, future)
        if self.rsa is not None:  # (1 - g) A + g P, applied to the values: the contexts mix the same way
            rem = self.rsa.rem.matrix(h.shape[1]).to(h.dtype)  # [n, L, L]; a masked REM has no future half
            rem = self.follow(rem, past, None if self.rsa.rem.masked else future)
            context = torch.lerp(context, rem, self.rsa.gate().to(h.dtype))
        new, gate = self.candidate(context, x0)
        new = self.dropout(new)
        return h + self.alpha * new if gate is None else torch.lerp(h, new, gate)

    def extra_repr(self) -> str:
        return f"n_heads={self.n_heads}, gated={self.gated}, causal={self.causal}"


class StarSaberEncoder(nn.Module):
    """``n_layers`` StarSaber iterations, each with its own weights: ``X0 [B, L, d] -> H [B, L, d]``.

    The iteration starts at ``H^(0) = X0`` and every layer reads ``X0`` again (the direct input
    path). Options as :class:`StarSaberLayer`.
    """

    def __init__(self, d_model: int, n_heads: int, n_layers: int, *, gated: bool = False, causal: bool = False,
                 alpha_init: float = 0.0, dropout: float = 0.0, rsa: RSAConfig | None = None) -> None:
        super().__init__()
        self.layers = nn.ModuleList(
            StarSaberLayer(d_model, n_heads, gated=gated, causal=causal, alpha_init=alpha_init, dropout=dropout,
                           rsa=rsa)
            for _ in range(check_int("n_layers", n_layers)))

    def forward(self, x0: Tensor) -> Tensor:
        """``X0 [B, L, d]`` -> ``H^(n_layers) [B, L, d]``."""
        h = x0
        for layer in self.layers:
            h = layer(h, x0)
        return h
