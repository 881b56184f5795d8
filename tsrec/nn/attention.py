"""Attention kernels behind one contract, each usable in RSA mode.

Kernel contract (:class:`AttentionKernel`)::

    kernel(q [B, H, Lq, E], k [B, H, Lk, E], v [B, H, Lk, D], *, causal, query_offset, need_weights, bias)
        -> KernelOutput(values [B, H, Lq, D], weights [B, H, Lq, Lk] | None, query_index [B, H, u] | None)

Query ``i`` sits at time ``i + query_offset`` and key ``j`` at time ``j``; ``causal`` lets a query see
only keys at or before its own time. ``bias`` (``[B or 1, H, Lq, Lk]``, ``-inf`` allowed, or None) is
added to the scaled scores before the softmax. ``query_index`` lists the rows a sparse kernel
computed exactly (ProbSparse's top-u queries); ``None`` means every row.

RSA (:class:`RSAMixer`) turns any kernel's output into
``(1 - sigmoid(mu)) * softmax(...) V + sigmoid(mu) * P V`` with the same ``V``, where ``P`` is the
layer's :class:`~tsrec.nn.rem.LearnableREM` evaluated at the real time lags of the queries (so REM
rows follow the queries a sparse kernel selected, and cross-attention gets a non-square REM); or,
with ``RSAConfig.mix="bias"``, gives the kernel the score bias ``sigmoid(mu) * B`` with ``B`` the
log of the REM's envelope (:func:`~tsrec.nn.rem.rem_log_envelope`).
:class:`AttentionLayer` owns the projections and puts kernel and mixer together.
"""

from __future__ import annotations

import abc
import functools
import inspect
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from tsrec._checks import check_int
from tsrec.config import RSAConfig
from tsrec.nn.rem import LearnableREM, lag_grid

__all__ = [
    "KernelOutput",
    "AttentionKernel",
    "FullAttention",
    "ProbSparseAttention",
    "LogSparseAttention",
    "KERNELS",
    "make_kernel",
    "register_kernel",
    "RSAGate",
    "RSAMixer",
    "AttentionLayer",
    "rsa_parameters",
]


@dataclass
class KernelOutput:
    """What an attention kernel returns (shapes in the module docstring)."""

    values: Tensor
    weights: Tensor | None = None
    query_index: Tensor | None = None


class AttentionKernel(nn.Module, abc.ABC):
    """Base class of the softmax attention kernels. ``scale`` defaults to ``1 / sqrt(E)``."""

    def __init__(self, *, dropout: float = 0.0, scale: float | None = None) -> None:
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.scale = scale

    def _scale(self, q: Tensor) -> float:
        return self.scale if self.scale is not None else 1.0 / math.sqrt(q.shape[-1])

    @abc.abstractmethod
    def forward(self, q: Tensor, k: Tensor, v: Tensor, *, causal: bool = False, query_offset: int = 0,
                need_weights: bool = False, bias: Tensor | None = None) -> KernelOutput:
        """Attend ``q`` to ``k``/``v``; see the module docstring for the contract."""


def _causal_allowed(query_len: int, key_len: int, query_offset: int, device: torch.device) -> Tensor:
    """``[Lq, Lk]`` bool, True where key time <= query time."""
    return lag_grid(query_len, key_len, offset=query_offset, device=device) >= 0


class FullAttention(AttentionKernel):
    """Dense softmax attention, optionally causal, dropout on the attention weights."""

    def allowed(self, query_len: int, key_len: int, *, causal: bool, query_offset: int,
                device: torch.device) -> Tensor | None:
        """``[Lq, Lk]`` bool mask of the keys each query may attend to (None: all)."""
        return _causal_allowed(query_len, key_len, query_offset, device) if causal else None

    def forward(self, q: Tensor, k: Tensor, v: Tensor, *, causal: bool = False, query_offset: int = 0,
                need_weights: bool = False, bias: Tensor | None = None) -> KernelOutput:
        allowed = self.allowed(q.shape[-2], k.shape[-2], causal=causal, query_offset=query_offset, device=q.device)
        if allowed is not None and not bool(allowed.any(-1).all()):
            raise ValueError(
                f"{type(self).__name__}: some queries may attend to no key (query_offset={query_offset}, "
                f"Lq={q.shape[-2]}, Lk={k.shape[-2]}, causal={causal}); use a non-causal kernel or a larger offset"
            )
        scale = self._scale(q)
        mask = allowed
        if bias is not None:  # an additive float mask: the bias, -inf where the pattern forbids
            mask = bias.to(q.dtype) if allowed is None else bias.to(q.dtype).masked_fill(~allowed, float("-inf"))
        if not need_weights:
            values = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, dropout_p=self.dropout.p if self.training else 0.0, scale=scale
            )
            return KernelOutput(values)
        scores = torch.matmul(q, k.transpose(-2, -1)) * scale  # [B, H, Lq, Lk]
        if mask is not None:
            scores = scores + mask if mask.is_floating_point() else scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        return KernelOutput(torch.matmul(self.dropout(weights), v), weights)


class LogSparseAttention(FullAttention):
    """LogSparse attention (Li et al., 2019): a query attends to keys at lags 0 and powers of two
    (``1, 2, 4, ...``), only backwards when causal, in both directions otherwise."""

    def allowed(self, query_len: int, key_len: int, *, causal: bool, query_offset: int,
                device: torch.device) -> Tensor:
        lags = lag_grid(query_len, key_len, offset=query_offset, device=device)
        a = lags.abs()
        log_pattern = (a == 0) | ((a & (a - 1)) == 0)
        return log_pattern & (lags >= 0) if causal else log_pattern


def _eager(method: Callable[..., Tensor]) -> Callable[..., Tensor]:
    """``method`` run eagerly under ``torch.compile`` (``torch.compiler.disable``), wrapped on its
    first call rather than here: the wrapping imports ``torch._dynamo`` (and sympy), about 1 CPU-s
    that a process which never compiles (a forecast, a fit of statistical models) need not pay."""
    disabled: Callable[..., Tensor] | None = None

    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Tensor:
        nonlocal disabled
        if disabled is None:
            disabled = torch.compiler.disable(method)
        return disabled(*args, **kwargs)

    return call


class ProbSparseAttention(AttentionKernel):
    """Informer's ProbSparse attention (Zhou et al., 2021).

    Each query's sparsity ``M = max_j(q k_j) - sum_j(q k_j) / Lk`` is estimated on
    ``factor * ceil(ln Lk)`` sampled keys; the ``u = factor * ceil(ln Lq)`` queries with the largest
    ``M`` get exact softmax attention, the other ("lazy") rows get ``mean(V)`` (non-causal) or
    ``cumsum(V)`` (causal), as Informer fills them. ``query_index`` reports the selected rows. A
    score ``bias`` applies to the selected rows' softmax (the sparsity measure that selects them
    reads ``Q K^T`` alone); lazy rows have no softmax and get none.

    Key sampling uses the global RNG while training; in eval mode it uses a fixed seed so that
    predictions are repeatable (drawn once per shape and device and kept, so that a compiled
    forward reads it without a graph break). As in Informer, the choice of the top-u rows is global: with
    ``causal=True`` every computed row sees only past keys, but which rows are computed depends on
    the whole sequence.
    """

    def __init__(self, *, factor: int, dropout: float = 0.0, scale: float | None = None) -> None:
        super().__init__(dropout=dropout, scale=scale)
        self.factor = check_int("factor", factor, 1)
        # The eval-mode key samples by (query_len, key_len, n_sample, device): drawn once
        # (:meth:`_eval_sample`), so that a compiled forward reads them instead of creating a
        # generator (a graph break in every layer) once they exist.
        self._eval_samples: dict[tuple[int, int, int, str], Tensor] = {}

    @_eager
    def _eval_sample(self, key: tuple[int, int, int, str], device: torch.device) -> Tensor:
        """``[Lq, n_sample]`` the eval-mode key sample of ``key`` (its lengths, sample size and
        device), drawn from a generator seeded 0 on ``device`` and kept: predictions are repeatable,
        and a compiled forward reads the kept sample (its first call, and this one, run eagerly)."""
        query_len, key_len, n_sample, _ = key
        generator = torch.Generator(device=device).manual_seed(0)
        sample = torch.randint(key_len, (query_len, n_sample), device=device, generator=generator)
        self._eval_samples[key] = sample
        return sample

    def forward(self, q: Tensor, k: Tensor, v: Tensor, *, causal: bool = False, query_offset: int = 0,
                need_weights: bool = False, bias: Tensor | None = None) -> KernelOutput:
        batch, heads, query_len, _ = q.shape
        key_len = k.shape[-2]
        if causal and (query_len != key_len or query_offset != 0):
            raise ValueError("causal ProbSparse attention needs self-attention (Lq == Lk, query_offset 0)")
        n_sample = min(self.factor * math.ceil(math.log(key_len)), key_len)
        n_top = min(self.factor * math.ceil(math.log(query_len)), query_len)
        if self.training:
            sample = torch.randint(key_len, (query_len, n_sample), device=q.device)
        else:
            key = (query_len, key_len, n_sample, str(q.device))
            sample = self._eval_samples[key] if key in self._eval_samples else self._eval_sample(key, q.device)
        top = _sampled_sparsity(q, k, sample).topk(n_top, dim=-1, sorted=False).indices  # [B, H, u]

        q_top = torch.gather(q, 2, top.unsqueeze(-1).expand(-1, -1, -1, q.shape[-1]))  # [B, H, u, E]
        scores = torch.matmul(q_top, k.transpose(-2, -1)) * self._scale(q)  # [B, H, u, Lk]
        if bias is not None:  # the bias rows of the selected queries
            rows = bias.expand(batch, heads, query_len, key_len)  # [B, H, Lq, Lk]
            scores = scores + torch.gather(rows, 2, top.unsqueeze(-1).expand(-1, -1, -1, key_len)).to(scores.dtype)
        if causal:
            future = top.unsqueeze(-1) < torch.arange(key_len, device=q.device)  # [B, H, u, Lk]
            scores = scores.masked_fill(future, float("-inf"))
        attn = self.dropout(torch.softmax(scores, dim=-1))
        lazy = v.cumsum(dim=-2) if causal else v.mean(dim=-2, keepdim=True).expand(-1, -1, query_len, -1)
        top_v = top.unsqueeze(-1).expand(-1, -1, -1, v.shape[-1])
        values = lazy.scatter(2, top_v, torch.matmul(attn, v).to(lazy.dtype))  # [B, H, Lq, D]
        weights = None
        if need_weights:
            weights = torch.full((batch, heads, query_len, key_len), 1.0 / key_len, dtype=attn.dtype, device=q.device)
            weights = weights.scatter(2, top.unsqueeze(-1).expand(-1, -1, -1, key_len), attn)
        return KernelOutput(values, weights, top)


#: Attention kernels by name: the ``attention`` option of the encoder-decoder models. A new kernel
#: (a subclass of :class:`AttentionKernel` taking ``dropout`` and its own keyword options)
#: plugs in with :func:`register_kernel`.
KERNELS: dict[str, type[AttentionKernel]] = {}


def register_kernel(name: str, kernel_class: type[AttentionKernel]) -> None:
    """Make ``kernel_class`` available as ``attention=name``."""
    if name in KERNELS:
        raise ValueError(f"an attention kernel named {name!r} is already registered")
    KERNELS[name] = kernel_class


def make_kernel(name: str, **options: object) -> AttentionKernel:
    """The kernel registered as ``name``, built from the model's shared kernel ``options``
    (``dropout``, ``factor``, ...); each kernel takes the ones its ``__init__`` names."""
    if name not in KERNELS:
        raise ValueError(f"unknown attention kernel {name!r}; known kernels: {', '.join(sorted(KERNELS))}")
    kernel_class = KERNELS[name]
    accepted = inspect.signature(kernel_class.__init__).parameters
    return kernel_class(**{k: v for k, v in options.items() if k in accepted})


register_kernel("full", FullAttention)
register_kernel("logsparse", LogSparseAttention)
register_kernel("prob", ProbSparseAttention)


# Query rows per chunk of the sampled sparsity measure: at most this many [B, H, rows, Lk] scores at once.
_SPARSITY_CHUNK_ELEMENTS = 1 << 24


@torch.no_grad()  # only the top-u indices are used: no gradient flows through the measure
def _sampled_sparsity(q: Tensor, k: Tensor, sample: Tensor) -> Tensor:
    """Informer's query sparsity ``M_i = max_s(q_i k_{sample[i, s]}) - sum_s(q_i k_{sample[i, s]}) / Lk``.

    ``q [B, H, Lq, E]``, ``k [B, H, Lk, E]``, ``sample [Lq, n]`` key indices -> ``[B, H, Lq]``. The
    sampled scores are gathered from ``q K^T`` computed a chunk of query rows at a time, which is
    faster than gathering ``[B, H, Lq, n, E]`` sampled keys (``n E`` exceeds ``Lk`` at the lengths
    Informer runs) and bounds the memory at ``_SPARSITY_CHUNK_ELEMENTS`` scores.
    """
    batch, heads, query_len, _ = q.shape
    key_len = k.shape[-2]
    rows = max(1, _SPARSITY_CHUNK_ELEMENTS // (batch * heads * key_len))
    parts = []
    for start in range(0, query_len, rows):
        scores = torch.matmul(q[:, :, start:start + rows], k.transpose(-2, -1))  # [B, H, rows, Lk]
        index = sample[start:start + rows].expand(batch, heads, -1, -1)  # [B, H, rows, n]
        picked = scores.gather(-1, index)  # [B, H, rows, n]
        parts.append(picked.amax(-1) - picked.sum(-1) / key_len)
    return torch.cat(parts, dim=-1)  # [B, H, Lq]


class RSAGate(nn.Module):
    """The learned mixing gate ``sigmoid(mu)``: one per layer, or one per head."""

    def __init__(self, n_heads: int, *, per_head: bool, init: tuple[float, float]) -> None:
        super().__init__()
        self.mu = nn.Parameter(torch.empty(n_heads if per_head else 1).uniform_(*init))

    def forward(self) -> Tensor:
        """Gate values shaped ``[1, H or 1, 1, 1]`` to broadcast over ``[B, H, L, D]``."""
        return torch.sigmoid(self.mu).view(1, -1, 1, 1)

    def values(self) -> Tensor:
        """Detached gate values ``[H or 1]`` for reporting."""
        return torch.sigmoid(self.mu.detach()).cpu()


class RSAMixer(nn.Module):
    """A layer's REMs and gate, and how its heads use them (``config.mix``).

    ``"gate"`` (the paper's form), after the kernel: ``(1 - g) * attention + g * (P @ V)``
    (:meth:`forward`). ``"bias"``, inside the kernel: :meth:`score_bias` gives the kernel
    ``g * B`` to add to the scores before the softmax, ``B`` the log of the REM's envelope
    (:func:`~tsrec.nn.rem.rem_log_envelope`: ALiBi's ``(i - j) log lambda`` on decay heads, the
    log-decay plus a von Mises periodic term on cycle heads, ``-inf`` where the REM does not
    reach), and :meth:`forward` passes the kernel's output through. The gate ``g = sigmoid(mu)``
    is the same parameter with the same start (``gate_init``): in bias mode it scales the finite
    bias, so that ``g -> 0`` leaves plain attention over the keys the REM reaches (the causal
    half of a masked REM, a dilated head's grid). Rows a sparse kernel does not compute get no
    bias (ProbSparse's lazy rows). With the ETS prior (``config.prior_fit``) the gate starts at
    ``prior_fit.gate`` instead of ``U(gate_init)``.

    Args:
        config: a resolved :class:`~tsrec.config.RSAConfig`.
        n_heads: the layer's heads (one REM each).
        masked: causal REMs.
        n_channels: channels with their own REM parameters when ``config.per_channel``; every
            call then takes ``channel [B]``, the channel of each batch row.
    """

    def __init__(self, config: RSAConfig, n_heads: int, *, masked: bool = True, n_channels: int = 1) -> None:
        super().__init__()
        self.config = config
        self.rem = LearnableREM(config, masked=masked, n_channels=n_channels)
        if self.rem.n_heads != n_heads:
            raise ValueError(
                f"REM head counts {config.kinds} sum to {self.rem.n_heads}, but the layer has {n_heads} heads; "
                "give every head a REM kind"
            )
        # The ETS prior starts every gate at its fitted value; else mu ~ U(gate_init).
        prior = config.prior_fit
        init = config.gate_init if prior is None else (math.log(prior.gate / (1.0 - prior.gate)),) * 2
        self.gate = RSAGate(n_heads, per_head=config.per_head_gate, init=init)

    def score_bias(self, query_len: int, key_len: int, *, query_offset: int = 0,
                   channel: Tensor | None = None) -> Tensor | None:
        """The kernel's score bias ``g * B``: ``[1, H, Lq, Lk]`` (``[B, H, Lq, Lk]`` per channel),
        ``-inf`` off the REM's support; None in gate mode."""
        if self.config.mix != "bias":
            return None
        bias, support = self.rem.log_envelope(query_len, key_len, offset=query_offset, channel=channel)
        if not bool(support.any(-1).all()):
            raise ValueError(
                f"rsa mix='bias': some queries reach no key through their REM (Lq={query_len}, Lk={key_len}, "
                f"query_offset={query_offset}, dilations {self.rem.dilation.tolist()}, masked={self.rem.masked}); "
                "use mix='gate' for this attention, or smaller dilations"
            )
        bias = self.gate() * (bias if bias.dim() == 4 else bias.unsqueeze(0))  # [1 or B, H, Lq, Lk]
        return bias.masked_fill(~support, float("-inf"))

    def forward(self, attended: KernelOutput, v: Tensor, *, query_offset: int = 0,
                channel: Tensor | None = None) -> Tensor:
        """``attended.values [B, H, Lq, D]``, ``v [B, H, Lk, D]`` -> mixed ``[B, H, Lq, D]`` (bias
        mode: ``attended.values``, the kernel already used the REM)."""
        out = attended.values
        if self.config.mix == "bias":
            return out
        g = self.gate()
        query_len, key_len = out.shape[-2], v.shape[-2]
        if attended.query_index is None or self.config.rem_on_lazy_queries:
            pv = self.rem.product(v, query_len, offset=query_offset, channel=channel)
            return _lerp(out, pv, g)  # (1 - g) out + g PV
        index = attended.query_index  # [B, H, u]
        rows = self.rem.rows(index, key_len, offset=query_offset, channel=channel).to(v.dtype)  # [B, H, u, Lk]
        index_d = index.unsqueeze(-1).expand(-1, -1, -1, out.shape[-1])  # [B, H, u, D]
        mixed = _lerp(torch.gather(out, 2, index_d), torch.matmul(rows, v), g)
        return out.scatter(2, index_d, mixed.to(out.dtype))


def _lerp(start: Tensor, end: Tensor, weight: Tensor) -> Tensor:
    """``torch.lerp`` in the wider dtype of ``start`` and ``end``: under CUDA's autocast the kernel's
    output can be float32 (its softmax) while the REM product is bfloat16, and ``lerp`` takes one dtype."""
    if start.dtype == end.dtype == weight.dtype:
        return torch.lerp(start, end, weight)
    dtype = torch.promote_types(start.dtype, end.dtype)
    return torch.lerp(start.to(dtype), end.to(dtype), weight.to(dtype))


class AttentionLayer(nn.Module):
    """Multi-head attention: projections, a kernel, optional RSA mixing, output projection.

    ``rsa`` (a resolved :class:`~tsrec.config.RSAConfig`) adds RSA mixing with causal REMs, or
    bidirectional ones with ``rsa_masked=False``; with ``rsa.per_channel``, ``rsa_channels`` REM
    parameter sets, one per channel, and :meth:`forward` takes each batch row's ``channel``. ``mix=True`` reproduces Informer's ``mix`` option (head outputs are flattened as
    ``[B, H, L, D] -> [B, L, H*D]`` without moving the head axis back).
    """

    def __init__(self, kernel: AttentionKernel, d_model: int, n_heads: int, *, rsa: RSAConfig | None = None,
                 rsa_masked: bool = True, rsa_channels: int = 1, mix: bool = False, d_head: int | None = None) -> None:
        super().__init__()
        if d_head is None:
            if d_model % n_heads:
                raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
            d_head = d_model // n_heads
        self.kernel = kernel
        self.n_heads = n_heads
        self.mix = mix
        self.query = nn.Linear(d_model, d_head * n_heads)
        self.key = nn.Linear(d_model, d_head * n_heads)
        self.value = nn.Linear(d_model, d_head * n_heads)
        self.out = nn.Linear(d_head * n_heads, d_model)
        self.rsa = RSAMixer(rsa, n_heads, masked=rsa_masked, n_channels=rsa_channels) if rsa is not None else None

    def _heads(self, x: Tensor) -> Tensor:
        b, length, _ = x.shape
        return x.view(b, length, self.n_heads, -1).transpose(1, 2)  # [B, H, L, E]

    def forward(self, queries: Tensor, keys: Tensor, values: Tensor, *, causal: bool = False,
                query_offset: int = 0, need_weights: bool = False,
                channel: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """``queries [B, Lq, d_model]``, ``keys``/``values [B, Lk, d_model]`` -> ``([B, Lq, d_model], weights)``;
        ``channel [B]``: each row's channel, for per-channel REMs."""
        b, query_len, _ = queries.shape
        q, k, v = self._heads(self.query(queries)), self._heads(self.key(keys)), self._heads(self.value(values))
        bias = None if self.rsa is None else self.rsa.score_bias(query_len, k.shape[-2], query_offset=query_offset,
                                                                 channel=channel)
        # Only RSA's bias mode passes a bias: kernels registered before the keyword existed keep working.
        extra = {} if bias is None else {"bias": bias}
        attended = self.kernel(q, k, v, causal=causal, query_offset=query_offset, need_weights=need_weights, **extra)
        out = attended.values if self.rsa is None else self.rsa(attended, v, query_offset=query_offset,
                                                                channel=channel)
        if not self.mix:
            out = out.transpose(1, 2)  # [B, Lq, H, D]
        out = out.reshape(b, query_len, -1)  # [B, Lq, H*D]
        return self.out(out), attended.weights


def rsa_parameters(module: nn.Module) -> Iterator[nn.Parameter]:
    """The REM scalars and gates of every RSA layer in ``module`` (for their own optimiser group)."""
    for sub in module.modules():
        if isinstance(sub, RSAMixer):
            yield from sub.parameters()
