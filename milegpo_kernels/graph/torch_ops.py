"""INF, the edge checks and the torch twins of :func:`milegpo_kernels.hop_distance` and
:func:`milegpo_kernels.max_times_potential` (synchronous scatter relaxations); the ops are described in
:mod:`milegpo_kernels.graph`."""

from __future__ import annotations

import torch

INF = 1 << 62


def check_edges(src, dst, num_nodes, name, edge_offsets=None):
    """Raise naming what is wrong with the edge list (dtypes, shapes) or ``edge_offsets``
    (dtype, shape, device); reads nothing on the host."""
    if src.dtype != torch.int64 or dst.dtype != torch.int64:
        raise TypeError(f"{name}: src and dst must be int64, got {src.dtype}, {dst.dtype}")
    if src.shape != dst.shape or src.dim() != 1:
        raise ValueError(f"{name}: src and dst must be (E,), got {tuple(src.shape)}, {tuple(dst.shape)}")
    if edge_offsets is not None:
        if edge_offsets.dtype != torch.int64 or edge_offsets.dim() != 1 or edge_offsets.shape[0] < 2:
            raise ValueError(f"{name}: edge_offsets must be (S + 1,) int64 with S >= 1, got {edge_offsets.dtype} "
                             f"{tuple(edge_offsets.shape)}")
        if edge_offsets.device != src.device:
            raise ValueError(f"{name}: edge_offsets is on {edge_offsets.device}, the edges on {src.device}")


def check_components(src, dst, num_nodes, edge_offsets, name):
    """The edge_offsets contract, read on the host (the torch twins' check)."""
    e = src.shape[0]
    off = edge_offsets
    if int(off[0]) != 0 or int(off[-1]) != e:
        raise ValueError(f"{name}: edge_offsets must start at 0 and end at the edge count {e}, got "
                         f"{int(off[0])} and {int(off[-1])}")
    bad = torch.nonzero(off[1:] < off[:-1])
    if bad.numel():
        i = int(bad[0, 0])
        raise ValueError(f"{name}: edge_offsets must be non-decreasing, got off[{i}]={int(off[i])} > "
                         f"off[{i + 1}]={int(off[i + 1])}")
    if e == 0:
        return
    comp = torch.searchsorted(off, torch.arange(e, device=src.device), right=True) - 1
    loop = src == dst  # self-loops change nothing: allowed in any component
    ends = torch.cat([src[~loop], dst[~loop]])
    c = torch.cat([comp[~loop], comp[~loop]])
    # "no component yet" must be above every component index (S - 1), not the edge count: with more
    # components than edges (groups of one edge, empty groups) an index >= E would read as a second one
    n_components = off.shape[0] - 1
    lo = torch.full((num_nodes,), n_components, dtype=torch.int64, device=src.device).scatter_reduce(0, ends, c, "amin")
    hi = torch.full((num_nodes,), -1, dtype=torch.int64, device=src.device).scatter_reduce(0, ends, c, "amax")
    shared = torch.nonzero((hi >= 0) & (lo != hi))
    if shared.numel():
        v = int(shared[0, 0])
        raise ValueError(f"{name}: edge_offsets components must not share nodes: node {v} is an endpoint of edges "
                         f"in components {int(lo[v])} and {int(hi[v])}")


def hop_distance_torch(src, dst, target: torch.Tensor, edge_offsets=None,
                       max_rounds: int | None = None) -> torch.Tensor:
    check_edges(src, dst, target.shape[0], "hop_distance", edge_offsets)
    if edge_offsets is not None:
        check_components(src, dst, target.shape[0], edge_offsets, "hop_distance")
    if target.dtype != torch.bool or target.dim() != 1:
        raise TypeError(f"hop_distance: target must be (V,) bool, got {target.dtype} {tuple(target.shape)}")
    inf = torch.full_like(target, INF, dtype=torch.int64)
    dist = torch.where(target, torch.zeros_like(inf), inf)
    if src.numel() == 0:
        return dist
    rounds = target.shape[0] if max_rounds is None else max_rounds
    for _ in range(rounds + 1):
        cand = (dist.index_select(0, dst) + 1).clamp_(max=INF)
        new = dist.scatter_reduce(0, src, cand, reduce="amin", include_self=True)
        if torch.equal(new, dist):
            break
        dist = new
    return dist


def max_times_potential_torch(src, dst, seed: torch.Tensor, factor: float, edge_offsets=None,
                              max_rounds: int | None = None):
    check_edges(src, dst, seed.shape[0], "max_times_potential", edge_offsets)
    if edge_offsets is not None:
        check_components(src, dst, seed.shape[0], edge_offsets, "max_times_potential")
    if not (0.0 <= factor <= 1.0):
        raise ValueError(f"max_times_potential: factor must be in [0, 1], got {factor}")
    if not seed.dtype.is_floating_point:
        raise TypeError(f"max_times_potential: seed must be floating point, got {seed.dtype}")
    phi = seed.clone()
    if src.numel() == 0:
        return phi
    idx = src if seed.dim() == 1 else src[:, None].expand(-1, seed.shape[1])
    rounds = seed.shape[0] if max_rounds is None else max_rounds
    for _ in range(rounds + 1):
        cand = phi.index_select(0, dst) * factor
        new = phi.scatter_reduce(0, idx, cand, reduce="amax", include_self=True)
        if torch.equal(new, phi):
            break
        phi = new
    return phi
