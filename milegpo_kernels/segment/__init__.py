"""Segment reductions: normalisation, sibling-branch means, maxima (spec sections 5-7).

A segment id array ``seg`` (M,) int64 in ``[0, num_segments)`` assigns every
element to a segment: rows to (group, state) step groups or task groups, edges to
their source node (its branches), nodes to their task group. ``valid`` (M,) bool
marks the elements that take part (padded slots do not); ``None`` means all.
"""

from __future__ import annotations

import torch

from .._backend import resolve
from .torch_ops import (
    EQUAL_TOL,
    NORM_MODES,
    SINGLETON_MODES,
    max_normalize_torch,
    segment_count,
    segment_max_torch,
    segment_normalize_torch,
    segment_sum,
    sibling_mean_torch,
    stacked,
)

__all__ = ["EQUAL_TOL", "NORM_MODES", "SINGLETON_MODES", "max_normalize", "max_normalize_torch", "segment_count",
           "segment_max", "segment_max_torch", "segment_normalize", "segment_normalize_torch", "segment_sum",
           "sibling_mean", "sibling_mean_torch", "stacked"]


def segment_max(x, seg, num_segments: int, valid=None, fill: float = 0.0, *, backend: str = "auto") -> torch.Tensor:
    """Max of x per segment, ``fill`` for segments with no valid element.

    On the Triton backend (CUDA tensors with ``auto``), float32 / float64 x go to
    :func:`milegpo_kernels.segment.triton_ops.segment_max_triton`; other dtypes stay on
    :func:`segment_max_torch`."""
    if x.dtype in (torch.float32, torch.float64) and resolve(backend, x, seg) == "triton":
        from .triton_ops import segment_max_triton

        return segment_max_triton(x, seg, num_segments, valid, fill)
    return segment_max_torch(x, seg, num_segments, valid, fill)


def segment_normalize(x, seg, num_segments: int, mode="mean_std", eps=1e-6, singleton="zero", *, backend="auto"):
    """See :func:`segment_normalize_torch`. x: (M,) float; seg: (M,) int64."""
    if resolve(backend, x, seg) == "triton":
        from .triton_ops import segment_normalize_triton

        return segment_normalize_triton(x, seg, num_segments, mode, eps, singleton)
    return segment_normalize_torch(x, seg, num_segments, mode, eps, singleton)


def sibling_mean(x, seg, num_segments: int, valid=None, *, backend="auto"):
    """See :func:`sibling_mean_torch`."""
    if resolve(backend, x, seg) == "triton":
        from .triton_ops import sibling_mean_triton

        return sibling_mean_triton(x, seg, num_segments, valid)
    return sibling_mean_torch(x, seg, num_segments, valid)


def max_normalize(x, seg, num_segments: int, valid=None, *, backend="auto"):
    """See :func:`max_normalize_torch`."""
    if resolve(backend, x, seg) == "triton":
        from .triton_ops import max_normalize_triton

        return max_normalize_triton(x, seg, num_segments, valid)
    return max_normalize_torch(x, seg, num_segments, valid)
