"""Triton kernel of :func:`milegpo_kernels.discounted_returns`: backward walks.

Every row that ends a trajectory starts a lane that walks its trajectory backward,
``R = reward[i] + gamma * R``, storing as it goes, until the row before is another
trajectory's last row (or the batch's start). The walks are as long as the longest
trajectory (the horizon); each step is one load and one store per lane. The float
scalar travels as its float64 bit pattern and the kernel is compiled without FMA
contraction: every step rounds as the plain-Python reference's.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .triton_segment import f64_bits, f64_scalar

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
