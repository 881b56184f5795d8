"""Relevancy screening (Kerg et al. 2020, "Untangling tradeoffs between recurrence and self-attention").

An RNN whose every step attends over a small memory of its own past states: the last ``k`` states
(a FIFO buffer) and a *relevant set* of at most ``r`` older states kept for the attention they drew
while in the buffer. At step ``t``, with ``M_t`` the states held in memory:

    e_j = w^T tanh(Va s_{t-1} + Ua h_j)      for h_j in M_t   (additive attention, empty slots masked)
    a   = softmax(e),   c_t = sum_j a_j h_j
    s_t = (h_{t-1} + c_t) / 2
    h_t = tanh(U x_t + V s_t)

with ``h_{-1} = 0`` and an empty memory before the first step (so ``s_0 = 0``). Each buffered state
accumulates the attention it receives (detached: a bookkeeping score, not a path for gradients).
When a state leaves the buffer it enters the relevant set if that has an empty slot, else it
replaces the set's least relevant member if its own score is strictly higher. A member's score is
the one it brought from the buffer: as in the authors' code (bhargav104/MemoryNets,
``RelMemRNN``), attention is counted only while a state sits in the buffer, so every candidate is
scored over the same ``k`` steps. Gradients flow through ``a`` and ``c_t`` into the stored states.

The recurrence is a loop over time; each step is a few dozen batched tensor operations on the
memory ``[B, k + r, d]`` and no Python work per batch row or memory slot. A state stays in its
memory slot until it is dropped (leaving the buffer for the relevant set changes its role, not its
slot), so a step writes one slot per row: the new state, over an empty slot, the state dropped
from the buffer, or the relevant set's member it displaces. The memory is written out of place
(a fresh ``[B, k + r, d]`` tensor per step): the attention of every step keeps its memory for the
backward pass, so an in-place write into a preallocated memory would corrupt the gradients.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor, nn

from tsrec._checks import check_int

__all__ = ["Memory", "RelevancyScreeningRNN", "accumulate", "attend", "empty_memory", "screen"]


class Memory(NamedTuple):
    """The attention memory of a batch: ``M = k + r`` slots per row, in no particular order (the
    attention is a softmax over a set).

    A state stays in the slot it was written to until it is dropped: what a slot holds follows from
    its step. Before step ``t`` the buffer is the states of steps ``t-k .. t-1``, the relevant set
    the older ones, and the remaining slots are empty.

    Attributes:
        values: the stored states ``h_j``, ``[B, M, d]``.
        keys: their attention keys ``Ua h_j``, ``[B, M, d]``.
        relevance: the attention each state accumulated while in the buffer ``[B, M]`` (no
            gradient); ``-inf`` in an empty slot, so that empty slots are filled first.
        steps: the time step of each stored state ``[B, M]`` (int64), ``-1`` in an empty slot.
    """

    values: Tensor
    keys: Tensor
    relevance: Tensor
    steps: Tensor


def empty_memory(size: int, slots: int, width: int, like: Tensor) -> Memory:
    """A memory of ``size`` rows, ``slots`` slots of ``width`` features, all empty, with the dtype
    and device of ``like``."""
    values = like.new_zeros(size, slots, width)
    relevance = like.new_full((size, slots), float("-inf"))
    steps = torch.full((size, slots), -1, dtype=torch.long, device=like.device)
    return Memory(values, values, relevance, steps)


def attend(query: Tensor, memory: Memory, score: Tensor) -> tuple[Tensor, Tensor]:
    """Additive attention of each row's query over its memory.

    ``query [B, d]`` (``Va s_{t-1}``), ``score [d]`` (``w``) -> context ``c_t [B, d]`` and weights
    ``a [B, M]`` (zero on empty slots). Needs at least one filled slot per row.
    """
    energy = torch.tanh(memory.keys + query.unsqueeze(1)) @ score  # [B, M]
    weights = torch.softmax(energy.masked_fill(memory.steps < 0, float("-inf")), dim=1)  # [B, M]
    context = torch.bmm(weights.unsqueeze(1), memory.values).squeeze(1)  # [B, d]
    return context, weights


def accumulate(memory: Memory, weights: Tensor, step: int, buffer_size: int) -> Memory:
    """Adds the attention ``weights [B, M]`` of ``step`` t (detached) to the relevance of the
    states in the buffer (steps ``t-k .. t-1``); members of the relevant set keep theirs."""
    earned = weights.detach().masked_fill(memory.steps < step - buffer_size, 0.0)
    return memory._replace(relevance=memory.relevance + earned)


def screen(memory: Memory, value: Tensor, key: Tensor, step: int, buffer_size: int) -> Memory:
    """Writes state ``h_t`` (``value [B, d]``, its ``key [B, d]``) of ``step`` t into one slot of
    each row, with relevance 0.

    Before the buffer is full, ``h_t`` takes an empty slot. Then ``h_{t-k}`` leaves the buffer: it
    joins the relevant set, staying in its slot, if the set has an empty slot or a member of
    strictly lower relevance, and ``h_t`` takes that empty slot or the least relevant member's;
    otherwise ``h_t`` takes its slot, dropping it. Out of place: the memory of the previous step
    stays intact for the backward pass.
    """
    leaving = step - buffer_size
    # Slots h_t may take besides the leaving state's: the empty ones (-inf) and the relevant set.
    evictable = memory.relevance.masked_fill(memory.steps >= max(leaving, 0), float("inf"))  # [B, M]
    slot = evictable.argmin(dim=1, keepdim=True)  # [B, 1]
    if leaving >= 0:
        leaving_slot = (memory.steps == leaving).int().argmax(dim=1, keepdim=True)  # [B, 1]
        joins = memory.relevance.gather(1, leaving_slot) > evictable.gather(1, slot)  # [B, 1]
        slot = torch.where(joins, slot, leaving_slot)
    taken = (torch.arange(slot.shape[0], device=slot.device), slot.squeeze(1))  # (rows, slots)
    return Memory(memory.values.index_put(taken, value), memory.keys.index_put(taken, key),
                  memory.relevance.index_put(taken, memory.relevance.new_zeros(())),
                  memory.steps.index_put(taken, memory.steps.new_tensor(step)))


class RelevancyScreeningRNN(nn.Module):
    """One relevancy-screening RNN layer: ``[B, L, d_in] -> [B, L, d]``, every step's ``h_t``.

    Args:
        input_size: ``d_in``, the features of ``x_t``.
        hidden_size: ``d``, the width of the states.
        buffer_size: ``k >= 1``, the last states always in memory.
        relevant_size: ``r >= 0``, the most older states kept for their relevance.

    Parameters: ``input`` (``U`` with its bias, Xavier-normal as the authors' ``iinit=xavier``),
    ``recurrent`` (``V``, orthogonal), ``key`` (``Ua``) and ``query`` (``Va``) without bias, and
    ``score`` (``w``, normal with the Xavier scale of a ``[1, d]`` matrix, as the authors' code).
    """

    def __init__(self, input_size: int, hidden_size: int, buffer_size: int = 10, relevant_size: int = 15) -> None:
        super().__init__()
        self.buffer_size = check_int("buffer_size", buffer_size, 1)
        self.relevant_size = check_int("relevant_size", relevant_size, 0)
        self.input = nn.Linear(input_size, hidden_size)
        self.recurrent = nn.Linear(hidden_size, hidden_size, bias=False)
        self.key = nn.Linear(hidden_size, hidden_size, bias=False)
        self.query = nn.Linear(hidden_size, hidden_size, bias=False)
        self.score = nn.Parameter(torch.empty(hidden_size))
        nn.init.xavier_normal_(self.input.weight)
        nn.init.orthogonal_(self.recurrent.weight)
        nn.init.normal_(self.score, std=(2.0 / (1 + hidden_size)) ** 0.5)

    def forward(self, x: Tensor) -> Tensor:
        """``x [B, L, d_in]`` -> all hidden states ``[B, L, d]``."""
        return self.scan(x)[0]

    def scan(self, x: Tensor) -> tuple[Tensor, Memory]:
        """``x [B, L, d_in]`` -> (all hidden states ``[B, L, d]``, the memory after the last step).

        The memory shows which past steps each row keeps (``memory.steps``: the last ``k`` steps
        and the relevant set) and the relevance they earned (``memory.relevance``).
        """
        size, length, _ = x.shape
        width = self.recurrent.in_features
        # U x_t + b for every step, unbound once: indexing drive[:, t] in the loop would cost a
        # [B, L, d] gradient buffer per step in the backward pass.
        drive = self.input(x).unbind(1)  # L x [B, d]
        # V and Va both read s_t (V for h_t, Va for the next step's query): one matmul per step.
        mixing = torch.cat([self.recurrent.weight, self.query.weight]).t()  # [d, 2d]
        h = torch.tanh(drive[0])  # s_0 = 0: no previous state, empty memory
        memory = empty_memory(size, self.buffer_size + self.relevant_size, width, h)
        memory = screen(memory, h, self.key(h), 0, self.buffer_size)
        query = h.new_zeros(size, width)  # Va s_0
        states = [h]
        for t in range(1, length):
            context, weights = attend(query, memory, self.score)  # [B, d], [B, M]
            memory = accumulate(memory, weights, t, self.buffer_size)
            recurrent, query = ((h + context) * 0.5 @ mixing).split(width, dim=1)  # V s_t, Va s_t
            h = torch.tanh(drive[t] + recurrent)
            memory = screen(memory, h, self.key(h), t, self.buffer_size)
            states.append(h)
        return torch.stack(states, dim=1), memory
