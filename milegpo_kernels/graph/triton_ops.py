"""Triton kernels for graph relaxation: hop distances and the max-times potential.

Convergence without a host sync: each program owns one *component* of the edge
list (``edge_offsets``: edges ``[off[i], off[i + 1])``, no node shared between
components; without offsets the whole list is one component). It sweeps its edges
block by block, relaxing every edge with an atomic (``atomic_min`` on the int64
distance, ``atomic_max`` on the bit pattern of the non-negative potential), and
repeats the sweep until a sweep changes nothing (a counter summed from the atomics'
return values) or ``V + 1`` sweeps have run (the torch twin's bound). Updates are
applied in place (Gauss-Seidel), so a sweep sees the values of earlier blocks of the
same sweep; the fixed point is the same as the torch twin's synchronous (Jacobi)
iteration:

- hop distance: the shortest hop count, unique.
- max-times potential: the max over walks of ``seed(v) * f * f ...`` formed by
  repeated multiplication (``cand = phi[dst] * factor``, the twin's expression);
  rounding is monotone and ``f <= 1``, so max and multiplication commute and any
  relaxation order reaches the same bits.

Components need no grid-wide barrier: a program converges on its own nodes, which no
other program writes. The credit pipeline passes one component per task group
(nodes are (group, state) pairs, so no edge crosses groups): one program per group,
all groups in parallel, instead of one program sweeping the whole batch (hop distance
at 640,000 rows on an H200: 0.12 ms per group, 4.3 ms in one program, 1.1 ms for the
torch twin on CUDA; bench/RESULTS.md, 2026-11-30).
Self-loops may lie in any component (padding slots are self-loops): they never
change a value, and the kernels skip them without reading the relaxed array (a padding
component's 0 -> 0 edges would otherwise read node 0 while its own component's program
updates it: harmless, but a cross-program race all the same). Loads of the relaxed array
bypass L1 (``.cg``): atomics land in L2 and a stale L1 line could hide a change in the
final sweep.

Float atomic max uses the int bit pattern: for non-negative IEEE floats the order
of the bit patterns (as signed ints) is the order of the values. ``seed >= 0`` is
the op's contract (not checked: that would need a host sync).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..triton_helpers import f64_bits, f64_scalar
from .torch_ops import INF, check_edges

BLOCK = 4096  # edges per step when one program sweeps everything: a wide block hides latency
NUM_WARPS = 16
SEG_BLOCK = 1024  # edges per step with one program per component (a task group: ~10^2-10^3 edges)
SEG_WARPS = 4
SEM = "relaxed"  # atomics need no ordering: each returns the old value, a sweep ends in a block reduction


@triton.jit
def _hop_kernel(src_ptr, dst_ptr, off_ptr, dist_ptr, max_rounds, INF: tl.constexpr, BLOCK: tl.constexpr,
                SEM: tl.constexpr):
    """dist: (V,) int64, 0 at targets and INF elsewhere, relaxed in place; this program
    relaxes edges [off[pid], off[pid + 1])."""
    pid = tl.program_id(0)
    lo = tl.load(off_ptr + pid)
    hi = tl.load(off_ptr + pid + 1)
    changed = tl.full([], 1, tl.int32)
    rounds = tl.full([], 0, tl.int32)
    while changed > 0:
        changed = tl.full([], 0, tl.int32)
        for start in range(lo, hi, BLOCK):
            offs = start + tl.arange(0, BLOCK).to(tl.int64)
            m = offs < hi
            s = tl.load(src_ptr + offs, mask=m, other=0)
            d = tl.load(dst_ptr + offs, mask=m, other=0)
            m = m & (s != d)  # a self-loop changes nothing (padding edges are 0 -> 0: not read at all)
            dd = tl.load(dist_ptr + d, mask=m, other=INF, cache_modifier=".cg")
            cand = tl.minimum(dd + 1, INF)
            old = tl.atomic_min(dist_ptr + s, cand, mask=m, sem=SEM)
            changed += tl.sum((m & (cand < old)).to(tl.int32), axis=0)
        rounds += 1
        changed = tl.where(rounds > max_rounds, 0, changed)


@triton.jit
def _max_times_kernel(src_ptr, dst_ptr, off_ptr, phi_ptr, phi_bits_ptr, factor_bits, max_rounds, K: tl.constexpr,
                      BLOCK: tl.constexpr, SEM: tl.constexpr):
    """phi: (V, K) float >= 0, relaxed in place through phi_bits (same storage viewed
    as a signed int of the same width); factor: a float64's bits (rounded to phi's dtype
    here, as a tensor of that dtype would round it). This program relaxes the (edge,
    column) pairs of edges [off[pid], off[pid + 1])."""
    pid = tl.program_id(0)
    lo = tl.load(off_ptr + pid) * K
    hi = tl.load(off_ptr + pid + 1) * K
    f = f64_scalar(factor_bits).to(phi_ptr.dtype.element_ty)
    changed = tl.full([], 1, tl.int32)
    rounds = tl.full([], 0, tl.int32)
    while changed > 0:
        changed = tl.full([], 0, tl.int32)
        for start in range(lo, hi, BLOCK):
            offs = start + tl.arange(0, BLOCK).to(tl.int64)  # (edge, column) pairs, row-major
            m = offs < hi
            e = offs // K
            c = offs % K
            s = tl.load(src_ptr + e, mask=m, other=0) * K + c
            d = tl.load(dst_ptr + e, mask=m, other=0) * K + c
            m = m & (s != d)  # a self-loop changes nothing (factor <= 1; padding edges: not read at all)
            pd = tl.load(phi_ptr + d, mask=m, other=0.0, cache_modifier=".cg")
            cand = (pd * f).to(pd.dtype)
            cand_bits = cand.to(phi_bits_ptr.dtype.element_ty, bitcast=True)
            old = tl.atomic_max(phi_bits_ptr + s, cand_bits, mask=m, sem=SEM)
            changed += tl.sum((m & (cand_bits > old)).to(tl.int32), axis=0)
        rounds += 1
        changed = tl.where(rounds > max_rounds, 0, changed)


def _launch(edge_offsets, e: int, device):
    """(offsets, grid, block, warps): one program per component, or one for all edges."""
    if edge_offsets is None:  # [0, e] made on the device: a host tensor copied over would sync (e > 0)
        return torch.arange(0, e + 1, e, dtype=torch.int64, device=device), (1,), BLOCK, NUM_WARPS
    return edge_offsets.contiguous(), (edge_offsets.shape[0] - 1,), SEG_BLOCK, SEG_WARPS


def hop_distance_triton(src, dst, target: torch.Tensor, edge_offsets=None, *, sem: str = SEM) -> torch.Tensor:
    """Hop distance to the nearest target. src, dst: (E,) int64; target: (V,) bool;
    edge_offsets: see :func:`milegpo_kernels.hop_distance`. Returns (V,) int64,
    :data:`INF` where unreachable."""
    check_edges(src, dst, target.shape[0], "hop_distance", edge_offsets)
    if target.dtype != torch.bool or target.dim() != 1:
        raise TypeError(f"hop_distance: target must be (V,) bool, got {target.dtype} {tuple(target.shape)}")
    dist = torch.where(target, 0, INF)  # int64: scalars are kernel arguments, not tensors to fill
    e = src.shape[0]
    if e == 0:
        return dist
    off, grid, block, warps = _launch(edge_offsets, e, src.device)
    _hop_kernel[grid](src.contiguous(), dst.contiguous(), off, dist, target.shape[0] + 1, INF=INF, BLOCK=block,
                      SEM=sem, num_warps=warps)
    return dist


_BITS = {torch.float64: torch.int64, torch.float32: torch.int32}


def max_times_potential_triton(src, dst, seed: torch.Tensor, factor: float, edge_offsets=None, *,
                               sem: str = SEM) -> torch.Tensor:
    """Max-times potential. src, dst: (E,) int64; seed: (V,) or (V, k) float32/64, >= 0;
    edge_offsets: see :func:`milegpo_kernels.max_times_potential`. Returns the same
    shape as seed."""
    check_edges(src, dst, seed.shape[0], "max_times_potential", edge_offsets)
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
    k = 1 if phi.dim() == 1 else phi.shape[1]  # one independent relaxation per column
    flat = phi.view(-1)
    off, grid, block, warps = _launch(edge_offsets, e, src.device)
    _max_times_kernel[grid](
        src.contiguous(), dst.contiguous(), off, flat, flat.view(_BITS[phi.dtype]), f64_bits(factor),
        seed.shape[0] + 1, K=k, BLOCK=block, SEM=sem, num_warps=warps,
    )
    return phi
