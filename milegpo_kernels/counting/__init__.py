"""Scatter milestone counting: distinct-trajectory counts per node / edge.

One incidence is one (segment, member) pair, e.g. (node, trajectory) for every
visit of a node. Per segment it returns how many distinct members touch it, how
many of those are positive (successful trajectories), and how many incidences it
has in all (visits), from which ``n_re = visits - distinct``.
All counts are int64, exact and deterministic.
"""

from __future__ import annotations

import torch

from .._backend import resolve
from .torch_ops import DistinctCounts, count_distinct_torch

__all__ = ["DistinctCounts", "count_distinct", "count_distinct_torch"]


def count_distinct(
    seg: torch.Tensor,
    member: torch.Tensor,
    positive: torch.Tensor,
    num_segments: int,
    *,
    num_members: int | None = None,
    backend: str = "auto",
) -> DistinctCounts:
    """Distinct-member counts per segment.

    seg: (M,) int64 in [0, num_segments); member: (M,) int64 (e.g. trajectory id);
    positive: (M,) bool, constant per member (its trajectory succeeded).
    num_members: optional bound with member in [0, num_members) (dense ids), which
    lets the torch path sort one packed key instead of two columns.
    Returns :class:`DistinctCounts` of (num_segments,) int64 tensors.
    """
    if resolve(backend, seg, member) == "triton":
        from .triton_ops import count_distinct_triton

        return count_distinct_triton(seg, member, positive, num_segments)
    return count_distinct_torch(seg, member, positive, num_segments, num_members)
