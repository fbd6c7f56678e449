"""Triton kernel of :func:`milegpo_kernels.ordered_rows`: one pass over the rows.

Each row reads its source row ``order[i]`` and its neighbours' (``order[i - 1]``,
``order[i + 1]``) group and trajectory, writes its columns in order and its run flags.
On CUDA an ``order`` entry outside ``[0, N)`` reads row 0 (checking would need a host sync;
on CPU the op refuses it).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .torch_ops import OrderedRows

BLOCK = 1024


@triton.jit
def _source(order_ptr, idx, mask, N):
    o = tl.load(order_ptr + idx, mask=mask, other=0)
    return tl.where(mask & (o >= 0) & (o < N), o, 0)


@triton.jit
def _ordered_rows_kernel(order_ptr, g_ptr, tr_ptr, s_ptr, ns_ptr, y_ptr, inv_ptr, rew_ptr, og_ptr, otr_ptr, os_ptr,
                         ons_ptr, oy_ptr, oinv_ptr, orew_ptr, starts_ptr, flags_ptr, last_ptr, N,
                         BLOCK: tl.constexpr):
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    inb = i < N
    o = _source(order_ptr, i, inb, N)
    g = tl.load(g_ptr + o, mask=inb, other=0)
    tr = tl.load(tr_ptr + o, mask=inb, other=0)
    tl.store(og_ptr + i, g, mask=inb)
    tl.store(otr_ptr + i, tr, mask=inb)
    tl.store(os_ptr + i, tl.load(s_ptr + o, mask=inb, other=0), mask=inb)
    tl.store(ons_ptr + i, tl.load(ns_ptr + o, mask=inb, other=0), mask=inb)
    tl.store(oy_ptr + i, tl.load(y_ptr + o, mask=inb, other=0), mask=inb)
    tl.store(oinv_ptr + i, tl.load(inv_ptr + o, mask=inb, other=0), mask=inb)
    tl.store(orew_ptr + i, tl.load(rew_ptr + o, mask=inb, other=0.0), mask=inb)
    has_prev = inb & (i > 0)
    p = _source(order_ptr, i - 1, has_prev, N)
    new_group = ~has_prev | (tl.load(g_ptr + p, mask=has_prev, other=0) != g)
    first = ~has_prev | (tl.load(tr_ptr + p, mask=has_prev, other=0) != tr)
    has_next = inb & (i < N - 1)
    q = _source(order_ptr, i + 1, has_next, N)
    last = ~has_next | (tl.load(tr_ptr + q, mask=has_next, other=0) != tr)
    tl.store(starts_ptr + i, new_group.to(tl.int64), mask=inb)
    tl.store(starts_ptr + N + i, first.to(tl.int64), mask=inb)
    tl.store(flags_ptr + i, new_group.to(tl.int8), mask=inb)
    tl.store(flags_ptr + N + i, first.to(tl.int8), mask=inb)
    tl.store(last_ptr + i, last.to(tl.int8), mask=inb)


def ordered_rows_triton(order, group, traj, state, next_state, success, invalid, reward) -> OrderedRows:
    """See :func:`milegpo_kernels.ordered_rows` (inputs checked there)."""
    n, dev = order.shape[0], order.device
    ints = torch.empty(4, n, dtype=torch.int64, device=dev)
    bools = torch.empty(2, n, dtype=torch.bool, device=dev)
    rew = torch.empty(n, dtype=torch.float64, device=dev)
    starts = torch.empty(2, n, dtype=torch.int64, device=dev)
    flags = torch.empty(2, n, dtype=torch.bool, device=dev)
    last = torch.empty(n, dtype=torch.bool, device=dev)
    out = OrderedRows(*ints.unbind(0), *bools.unbind(0), rew, starts, flags, last)
    if n == 0:
        return out
    i8 = torch.int8
    _ordered_rows_kernel[(triton.cdiv(n, BLOCK),)](
        order.contiguous(), group.contiguous(), traj.contiguous(), state.contiguous(), next_state.contiguous(),
        success.contiguous().view(i8), invalid.contiguous().view(i8), reward.contiguous(), *ints.unbind(0),
        bools[0].view(i8), bools[1].view(i8), rew, starts, flags.view(i8), last.view(i8), n, BLOCK=BLOCK)
    return out
