"""Triton kernels of :mod:`milegpo_kernels.returns`.

:func:`~milegpo_kernels.discounted_returns`: backward walks. Every row that ends a
trajectory starts a lane that walks its trajectory backward, ``R = reward[i] + gamma * R``,
storing as it goes, until the row before is another trajectory's last row (or the batch's
start). The walks are as long as the longest trajectory (the horizon); each step is one
load and one store per lane.

:func:`~milegpo_kernels.episode_scores`: a lane per trajectory start walks forward summing
the rewards, then walks back writing Z: two walks as long as the longest trajectory.

:func:`~milegpo_kernels.graph_return`: one pass over rows and nodes; a row reads its next
node's distance d and multiplies ``c`` by ``gamma`` d times (the block loops as long as its
largest d: the longest path to the sink, about the horizon), as the reference does; a node
writes its distance or -1.

Float scalars travel as their float64 bit patterns and the kernels are compiled without
FMA contraction: every step rounds as the plain-Python reference's.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..graph import INF
from ..triton_helpers import f64_bits, f64_scalar
from .torch_ops import GraphReturn

BLOCK = 1024


@triton.jit
def _returns_kernel(x_ptr, last_ptr, out_ptr, N, gamma, BLOCK: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    inb = rows < N
    active = inb & ((tl.load(last_ptr + rows, mask=inb, other=0) != 0) | (rows == N - 1))
    g = f64_scalar(gamma)
    i = rows
    running = tl.zeros((BLOCK,), tl.float64)
    n_active = tl.sum(active.to(tl.int32), axis=0)
    while n_active > 0:
        running = tl.where(active, tl.load(x_ptr + i, mask=active, other=0.0) + g * running, running)
        tl.store(out_ptr + i, running, mask=active)
        before_last = tl.load(last_ptr + i - 1, mask=active & (i > 0), other=1) != 0
        active = active & (i > 0) & ~before_last
        i = tl.where(active, i - 1, i)
        n_active = tl.sum(active.to(tl.int32), axis=0)


def discounted_returns_triton(reward: torch.Tensor, last: torch.Tensor, gamma: float) -> torch.Tensor:
    """See :func:`milegpo_kernels.discounted_returns` (inputs checked there)."""
    n = reward.shape[0]
    out = torch.empty_like(reward)
    if n == 0:
        return out
    _returns_kernel[(triton.cdiv(n, BLOCK),)](reward.contiguous(), last.contiguous().view(torch.int8), out, n,
                                             f64_bits(gamma), BLOCK=BLOCK, enable_fp_fusion=False)
    return out


@triton.jit
def _graph_return_kernel(dist_ptr, next_ptr, r_ptr, node_dist_ptr, N, V, c, gamma, INF_D, BLOCK: tl.constexpr):
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    row = i < N
    nxt = tl.load(next_ptr + i, mask=row, other=-1)
    ok = row & (nxt >= 0) & (nxt < V)
    d = tl.load(dist_ptr + tl.where(ok, nxt, 0), mask=ok, other=INF_D)
    reach = ok & (d < INF_D)
    d = tl.where(reach, d, 0)
    g = f64_scalar(gamma)
    r = tl.zeros((BLOCK,), tl.float64) + f64_scalar(c)
    k = tl.zeros((BLOCK,), tl.int64)
    todo = tl.max(d, axis=0)
    while todo > 0:
        r = tl.where(k < d, r * g, r)
        k += 1
        todo -= 1
    tl.store(r_ptr + i, tl.where(reach, r, 0.0), mask=row)
    node = i < V
    nd = tl.load(dist_ptr + i, mask=node, other=0)
    tl.store(node_dist_ptr + i, tl.where(nd < INF_D, nd, -1), mask=node)


def graph_return_triton(dist: torch.Tensor, next_node: torch.Tensor, c: float, gamma: float) -> GraphReturn:
    """See :func:`milegpo_kernels.graph_return` (inputs checked there)."""
    n, v = next_node.shape[0], dist.shape[0]
    out = GraphReturn(torch.empty(n, dtype=torch.float64, device=dist.device), torch.empty_like(dist))
    if max(n, v) == 0:
        return out
    _graph_return_kernel[(triton.cdiv(max(n, v), BLOCK),)](
        dist.contiguous(), next_node.contiguous(), out.r_graph, out.node_dist, n, v, f64_bits(c), f64_bits(gamma),
        INF, BLOCK=BLOCK, enable_fp_fusion=False)
    return out


@triton.jit
def _episode_kernel(x_ptr, invalid_ptr, last_ptr, out_ptr, N, penalty, BLOCK: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    inb = rows < N
    starts = inb & ((rows == 0) | (tl.load(last_ptr + rows - 1, mask=inb & (rows > 0), other=0) != 0))
    # forward: total = total + reward, from the first row to the last
    total = tl.zeros((BLOCK,), tl.float64)
    i = rows
    active = starts
    n_active = tl.sum(active.to(tl.int32), axis=0)
    while n_active > 0:
        total = tl.where(active, total + tl.load(x_ptr + i, mask=active, other=0.0), total)
        ends = (tl.load(last_ptr + i, mask=active, other=1) != 0) | (i == N - 1)
        active = active & ~ends
        i = tl.where(active, i + 1, i)
        n_active = tl.sum(active.to(tl.int32), axis=0)
    # back: i is each lane's last row
    pen = f64_scalar(penalty)
    active = starts
    n_active = tl.sum(active.to(tl.int32), axis=0)
    while n_active > 0:
        bad = tl.load(invalid_ptr + i, mask=active, other=0) != 0
        tl.store(out_ptr + i, tl.where(bad, total - pen, total), mask=active)
        active = active & (i > rows)
        i = tl.where(active, i - 1, i)
        n_active = tl.sum(active.to(tl.int32), axis=0)


def episode_scores_triton(reward: torch.Tensor, invalid: torch.Tensor, last: torch.Tensor,
                          penalty: float) -> torch.Tensor:
    """See :func:`milegpo_kernels.episode_scores` (inputs checked there)."""
    n = reward.shape[0]
    out = torch.empty_like(reward)
    if n == 0:
        return out
    i8 = torch.int8
    _episode_kernel[(triton.cdiv(n, BLOCK),)](reward.contiguous(), invalid.contiguous().view(i8),
                                             last.contiguous().view(i8), out, n, f64_bits(penalty), BLOCK=BLOCK,
                                             enable_fp_fusion=False)
    return out
