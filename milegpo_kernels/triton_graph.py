"""Triton kernels for graph relaxation: hop distances and the max-times potential.

Convergence without a host sync: each op is ONE persistent program that sweeps
the edge list block by block, relaxing every edge with an atomic
(``atomic_min`` on the int64 distance, ``atomic_max`` on the bit pattern of the
non-negative potential), and repeats the sweep until a sweep changes nothing (a
device-side counter summed from the atomics' return values) or ``V + 1`` sweeps
have run (the torch twin's bound). Updates are applied in place (Gauss-Seidel), so
a sweep sees the values of earlier blocks of the same sweep; the fixed point is the
same as the torch twin's synchronous (Jacobi) iteration:

- hop distance: the shortest hop count, unique.
- max-times potential: the max over walks of ``seed(v) * f * f ...`` formed by
  repeated multiplication (``cand = phi[dst] * factor``, the twin's expression);
  rounding is monotone and ``f <= 1``, so max and multiplication commute and any
  relaxation order reaches the same bits.

Loads of the relaxed array bypass L1 (``.cg``): atomics land in L2 and a stale L1
line could hide a change in the final sweep. One program means one SM: the sweep
is sequential over edge blocks, which is fine for rollout graphs (short diameter,
<= a few 10^5 edges) and needs no grid-wide barrier.

Float atomic max uses the int bit pattern: for non-negative IEEE floats the order
of the bit patterns (as signed ints) is the order of the values. ``seed >= 0`` is
the op's contract (not checked: that would need a host sync).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .graph import INF, _check_edges

BLOCK = 4096  # edges per step of the sweep: one program, so a wide block hides latency
NUM_WARPS = 16


@triton.jit
def _hop_kernel(src_ptr, dst_ptr, dist_ptr, E, max_rounds, INF: tl.constexpr, BLOCK: tl.constexpr):
    """dist: (V,) int64, 0 at targets and INF elsewhere, relaxed in place."""
    changed = tl.full([], 1, tl.int32)
    rounds = tl.full([], 0, tl.int32)
    while changed > 0:
        changed = tl.full([], 0, tl.int32)
        for start in range(0, E, BLOCK):
            offs = start + tl.arange(0, BLOCK).to(tl.int64)
            m = offs < E
            s = tl.load(src_ptr + offs, mask=m, other=0)
            d = tl.load(dst_ptr + offs, mask=m, other=0)
            dd = tl.load(dist_ptr + d, mask=m, other=INF, cache_modifier=".cg")
            cand = tl.minimum(dd + 1, INF)
            old = tl.atomic_min(dist_ptr + s, cand, mask=m)
            changed += tl.sum((m & (cand < old)).to(tl.int32), axis=0)
        rounds += 1
        changed = tl.where(rounds > max_rounds, 0, changed)


@triton.jit
def _max_times_kernel(src_ptr, dst_ptr, phi_ptr, phi_bits_ptr, factor_ptr, E, max_rounds, BLOCK: tl.constexpr):
    """phi: (V',) float >= 0, relaxed in place through phi_bits (same storage viewed
    as a signed int of the same width); factor: (1,) in phi's dtype."""
    f = tl.load(factor_ptr)
    changed = tl.full([], 1, tl.int32)
    rounds = tl.full([], 0, tl.int32)
    while changed > 0:
        changed = tl.full([], 0, tl.int32)
        for start in range(0, E, BLOCK):
            offs = start + tl.arange(0, BLOCK).to(tl.int64)
            m = offs < E
            s = tl.load(src_ptr + offs, mask=m, other=0)
            d = tl.load(dst_ptr + offs, mask=m, other=0)
            pd = tl.load(phi_ptr + d, mask=m, other=0.0, cache_modifier=".cg")
            cand = (pd * f).to(pd.dtype)
            cand_bits = cand.to(phi_bits_ptr.dtype.element_ty, bitcast=True)
            old = tl.atomic_max(phi_bits_ptr + s, cand_bits, mask=m)
            changed += tl.sum((m & (cand_bits > old)).to(tl.int32), axis=0)
        rounds += 1
        changed = tl.where(rounds > max_rounds, 0, changed)


def hop_distance_triton(src, dst, target: torch.Tensor) -> torch.Tensor:
    """Hop distance to the nearest target. src, dst: (E,) int64; target: (V,) bool.
    Returns (V,) int64, :data:`INF` where unreachable."""
    _check_edges(src, dst, target.shape[0], "hop_distance")
    if target.dtype != torch.bool or target.dim() != 1:
        raise TypeError(f"hop_distance: target must be (V,) bool, got {target.dtype} {tuple(target.shape)}")
    dist = torch.where(
        target,
        torch.zeros((), dtype=torch.int64, device=target.device),
        torch.full((), INF, dtype=torch.int64, device=target.device),
    )
    e = src.shape[0]
    if e == 0:
        return dist
    _hop_kernel[(1,)](src.contiguous(), dst.contiguous(), dist, e, target.shape[0] + 1, INF=INF, BLOCK=BLOCK,
                      num_warps=NUM_WARPS)
    return dist


_BITS = {torch.float64: torch.int64, torch.float32: torch.int32}


def max_times_potential_triton(src, dst, seed: torch.Tensor, factor: float) -> torch.Tensor:
    """Max-times potential. src, dst: (E,) int64; seed: (V,) or (V, k) float32/64, >= 0.
    Returns the same shape as seed."""
    _check_edges(src, dst, seed.shape[0], "max_times_potential")
    if not (0.0 <= factor <= 1.0):
        raise ValueError(f"max_times_potential: factor must be in [0, 1], got {factor}")
    if seed.dtype not in _BITS:
        raise TypeError(f"max_times_potential: seed must be float32 or float64 on the triton path, got {seed.dtype}")
    if seed.dim() not in (1, 2):
        raise ValueError(f"max_times_potential: seed must be (V,) or (V, k), got {tuple(seed.shape)}")
    phi = seed.clone().contiguous()
    e = src.shape[0]
    if e == 0 or phi.numel() == 0:
        return phi
    if phi.dim() == 2:  # one independent relaxation per column: flatten (edge, column)
        k = phi.shape[1]
        col = torch.arange(k, device=src.device)
        src = (src[:, None] * k + col).reshape(-1)
        dst = (dst[:, None] * k + col).reshape(-1)
    flat = phi.view(-1)
    f = torch.full((1,), factor, dtype=phi.dtype, device=phi.device)
    _max_times_kernel[(1,)](
        src.contiguous(), dst.contiguous(), flat, flat.view(_BITS[phi.dtype]), f, src.shape[0], seed.shape[0] + 1,
        BLOCK=BLOCK, num_warps=NUM_WARPS,
    )
    return phi
