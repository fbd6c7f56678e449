"""Triton kernel for scatter milestone counting (distinct members per segment).

The (segment, member) incidences are grouped by the hash-table kernel of
:mod:`milegpo_kernels.grouping.triton_ops`; its ``is_first`` marks the first occurrence of every
distinct pair (the same position the torch twin marks: its stable lexsort keeps
the smallest row of each tuple first). ``_count_kernel`` then scatters with int64
atomic adds: ``distinct[seg] += first``, ``distinct_pos[seg] += first & positive``,
``total[seg] += 1``. Integer addition is associative, so the counts are exact and
the same whatever order the atomics land in.

Rows whose ``seg`` lies outside ``[0, num_segments)``: on CPU tensors (the
interpreter) the wrapper raises, as the torch twin does; on CUDA the kernel skips
them (checking would need a host sync).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..grouping.triton_ops import dense_ids_triton
from ..inputs import check_seg_range
from .torch_ops import DistinctCounts, check_inputs

BLOCK = 1024


@triton.jit
def _count_kernel(seg_ptr, first_ptr, pos_ptr, distinct_ptr, distinct_pos_ptr, total_ptr, M, S,
                  BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    rows = pid * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    inb = rows < M
    seg = tl.load(seg_ptr + rows, mask=inb, other=0)
    ok = inb & (seg >= 0) & (seg < S)
    seg = tl.where(ok, seg, 0)
    first = tl.load(first_ptr + rows, mask=ok, other=0) != 0
    pos = tl.load(pos_ptr + rows, mask=ok, other=0) != 0
    one = tl.full((BLOCK,), 1, tl.int64)
    tl.atomic_add(distinct_ptr + seg, one, mask=ok & first)
    tl.atomic_add(distinct_pos_ptr + seg, one, mask=ok & first & pos)
    tl.atomic_add(total_ptr + seg, one, mask=ok)


def count_distinct_triton(seg, member, positive, num_segments: int) -> DistinctCounts:
    """Distinct-member counts per segment; same contract as
    :func:`milegpo_kernels.count_distinct`.

    seg: (M,) int64 in [0, num_segments); member: (M,) int64; positive: (M,) bool.
    Returns :class:`DistinctCounts` of (num_segments,) int64 tensors.
    """
    check_inputs(seg, member, positive, num_segments)
    check_seg_range(seg, num_segments, "count_distinct")
    device = seg.device
    m = seg.shape[0]
    distinct, distinct_pos, total = torch.zeros(3, num_segments, dtype=torch.int64, device=device).unbind(0)  # one memset
    if m == 0 or num_segments == 0:
        return DistinctCounts(distinct, distinct_pos, total)
    pairs = dense_ids_triton(seg, member)
    first = pairs.is_first.contiguous().view(torch.int8)
    pos = positive.contiguous().view(torch.int8)
    grid = (triton.cdiv(m, BLOCK),)
    _count_kernel[grid](seg.contiguous(), first, pos, distinct, distinct_pos, total, m, num_segments, BLOCK=BLOCK)
    return DistinctCounts(distinct, distinct_pos, total)
