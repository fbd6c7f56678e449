"""Graph relaxation over the rollout graph's edges (spec sections 3-6).

Edges are given as ``src``/``dst`` node ids (E,) int64; padded edge slots may be
self-loops, which change nothing. Both ops iterate to the fixed point; the number
of rounds is bounded by the longest shortest path of the graph.

- :func:`hop_distance`: directed hop distance from every node to the nearest
  target node (min-plus relaxation, ``dist[src] = min(dist[src], dist[dst] + 1)``);
  :data:`INF` where no target is reachable.
- :func:`max_times_potential`: ``phi(s) = max over v of seed(v) * factor^d(s, v)``,
  the max-times fixed point ``phi[src] = max(phi[src], factor * phi[dst])``. The
  power is formed by repeated multiplication (seed * factor * factor ...), which is
  also how the plain-Python reference forms it, so both agree to the last bit on
  CPU. Needs ``0 <= factor <= 1`` and ``seed >= 0``.

Both take an optional ``edge_offsets``: (S + 1,) int64, ``0 = off[0] <= off[1] <= ...
<= off[S] = E``, splitting the edge list into S *components*, edges ``[off[i],
off[i + 1])``, such that no node is an endpoint of (non-self-loop) edges in two
components, e.g. one component per task group of a rollout graph. The result does
not depend on it; the Triton kernels relax the components in parallel, one program
each. The torch twins check the contract (the Triton path checks only the shape:
reading the offsets would need a host sync).
"""

from __future__ import annotations

import torch

from .._backend import resolve
from .torch_ops import INF, hop_distance_torch, max_times_potential_torch

__all__ = ["INF", "hop_distance", "hop_distance_torch", "max_times_potential", "max_times_potential_torch"]


def hop_distance(src, dst, target, edge_offsets=None, *, backend: str = "auto") -> torch.Tensor:
    """Hop distance to the nearest target. src, dst: (E,) int64; target: (V,) bool;
    edge_offsets: optional (S + 1,) int64 components (module docstring).
    Returns (V,) int64, :data:`INF` where unreachable."""
    if resolve(backend, src, dst, target) == "triton":
        from .triton_ops import hop_distance_triton

        return hop_distance_triton(src, dst, target, edge_offsets)
    return hop_distance_torch(src, dst, target, edge_offsets)


def max_times_potential(src, dst, seed, factor: float, edge_offsets=None, *, backend: str = "auto") -> torch.Tensor:
    """Max-times potential. src, dst: (E,) int64; seed: (V,) or (V, k) float, >= 0;
    edge_offsets: optional (S + 1,) int64 components (module docstring).
    Returns the same shape as seed."""
    if resolve(backend, src, dst, seed) == "triton":
        from .triton_ops import max_times_potential_triton

        return max_times_potential_triton(src, dst, seed, factor, edge_offsets)
    return max_times_potential_torch(src, dst, seed, factor, edge_offsets)
