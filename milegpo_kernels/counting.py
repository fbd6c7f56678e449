"""Scatter milestone counting: distinct-trajectory counts per node / edge.

One incidence is one (segment, member) pair, e.g. (node, trajectory) for every
visit of a node. Per segment it returns how many distinct members touch it, how
many of those are positive (successful trajectories), and how many incidences it
has in all (visits), from which ``n_re = visits - distinct``.
All counts are int64, exact and deterministic.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from ._backend import resolve
from .grouping import dense_ids_torch


class DistinctCounts(NamedTuple):
    """Each (S,) int64: distinct members, distinct positive members, incidences."""

    distinct: torch.Tensor
    distinct_pos: torch.Tensor
    total: torch.Tensor


def _check(seg, member, positive, num_segments):
    n = seg.shape[0]
    if seg.dtype != torch.int64 or member.dtype != torch.int64:
        raise TypeError(f"count_distinct: seg and member must be int64, got {seg.dtype}, {member.dtype}")
    if positive.dtype != torch.bool:
        raise TypeError(f"count_distinct: positive must be bool, got {positive.dtype}")
    if member.shape != (n,) or positive.shape != (n,):
        raise ValueError(
            "count_distinct: seg, member and positive must have the same shape (M,), got "
            f"{tuple(seg.shape)}, {tuple(member.shape)}, {tuple(positive.shape)}"
        )
    if num_segments < 0:
        raise ValueError(f"count_distinct: num_segments must be >= 0, got {num_segments}")


def count_distinct_torch(seg, member, positive, num_segments: int, num_members: int | None = None) -> DistinctCounts:
    _check(seg, member, positive, num_segments)
    device = seg.device
    zeros = torch.zeros(num_segments, dtype=torch.int64, device=device)
    if seg.shape[0] == 0:
        return DistinctCounts(zeros, zeros.clone(), zeros.clone())
    if num_members is not None and num_segments * num_members < (1 << 62):
        # members are dense ids: one sort of the packed pair instead of two
        pairs = dense_ids_torch(seg * num_members + member)
    else:
        pairs = dense_ids_torch(seg, member)
    first = pairs.is_first.to(torch.int64)
    distinct = zeros.clone().scatter_add_(0, seg, first)
    distinct_pos = zeros.clone().scatter_add_(0, seg, first * positive.to(torch.int64))
    total = zeros.clone().scatter_add_(0, seg, torch.ones_like(first))
    return DistinctCounts(distinct, distinct_pos, total)


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
        from .triton_counting import count_distinct_triton

        return count_distinct_triton(seg, member, positive, num_segments)
    return count_distinct_torch(seg, member, positive, num_segments, num_members)
