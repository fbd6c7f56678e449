"""The result type, the input checks and the torch twin of :func:`milegpo_kernels.count_distinct`
(sorts, then scatter adds); the op is described in :mod:`milegpo_kernels.counting`."""

from __future__ import annotations

from typing import NamedTuple

import torch

from ..grouping.torch_ops import dense_ids_torch


class DistinctCounts(NamedTuple):
    """Each (S,) int64: distinct members, distinct positive members, incidences."""

    distinct: torch.Tensor
    distinct_pos: torch.Tensor
    total: torch.Tensor


def check_inputs(seg, member, positive, num_segments):
    """Raise naming the argument of :func:`milegpo_kernels.count_distinct` that is wrong (dtype, shape, a
    negative ``num_segments``)."""
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
    check_inputs(seg, member, positive, num_segments)
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
