"""Segment reductions: normalisation, sibling-branch means, maxima (spec sections 5-7).

A segment id array ``seg`` (M,) int64 in ``[0, num_segments)`` assigns every
element to a segment: rows to (group, state) step groups or task groups, edges to
their source node (its branches), nodes to their task group. ``valid`` (M,) bool
marks the elements that take part (padded slots do not); ``None`` means all.
"""

from __future__ import annotations

import torch

from ._backend import resolve

NORM_MODES = ("mean_std", "mean")
SINGLETON_MODES = ("zero", "unit")
#: relative tolerance under which the values of a segment count as all equal
EQUAL_TOL = 1e-12


def _check_seg(x, seg, num_segments, name):
    if seg.dtype != torch.int64 or seg.dim() != 1:
        raise TypeError(f"{name}: seg must be (M,) int64, got {seg.dtype} {tuple(seg.shape)}")
    if x.shape[0] != seg.shape[0]:
        raise ValueError(f"{name}: x has {x.shape[0]} elements, seg has {seg.shape[0]}")
    if num_segments < 0:
        raise ValueError(f"{name}: num_segments must be >= 0, got {num_segments}")


def check_seg_range(seg, num_segments: int, name: str) -> None:
    """Raise ValueError naming the first element whose segment id is outside
    ``[0, num_segments)``. Reads the ids on the host: the Triton wrappers call it for
    CPU tensors (the interpreter) only; on CUDA their kernels skip such elements,
    since checking would need a host synchronisation."""
    if seg.is_cuda or seg.numel() == 0:
        return
    bad = torch.nonzero((seg < 0) | (seg >= num_segments))
    if bad.numel():
        i = int(bad[0, 0])
        raise ValueError(f"{name}: seg[{i}] = {int(seg[i])} is outside [0, {num_segments}) (num_segments)")


def _mask(x, valid):
    return x if valid is None else torch.where(valid, x, torch.zeros_like(x))


def segment_sum(x, seg, num_segments: int, valid=None) -> torch.Tensor:
    """Sum of x per segment: (num_segments,) in x's dtype."""
    _check_seg(x, seg, num_segments, "segment_sum")
    out = torch.zeros(num_segments, dtype=x.dtype, device=x.device)
    return out.scatter_add_(0, seg, _mask(x, valid))


def segment_count(seg, num_segments: int, valid=None) -> torch.Tensor:
    """Number of (valid) elements per segment: (num_segments,) int64."""
    ones = torch.ones(seg.shape[0], dtype=torch.int64, device=seg.device)
    return segment_sum(ones, seg, num_segments, valid)


def segment_max(x, seg, num_segments: int, valid=None, fill: float = 0.0, *, backend: str = "auto") -> torch.Tensor:
    """Max of x per segment, ``fill`` for segments with no valid element.

    On the Triton backend (CUDA tensors with ``auto``), float32 / float64 x go to
    :func:`milegpo_kernels.triton_segment.segment_max_triton`; other dtypes stay on
    :func:`segment_max_torch`."""
    if x.dtype in (torch.float32, torch.float64) and resolve(backend, x, seg) == "triton":
        from .triton_segment import segment_max_triton

        return segment_max_triton(x, seg, num_segments, valid, fill)
    return segment_max_torch(x, seg, num_segments, valid, fill)


def segment_max_torch(x, seg, num_segments: int, valid=None, fill: float = 0.0) -> torch.Tensor:
    """Max of x per segment, ``fill`` for segments with no valid element (scatter_reduce amax)."""
    _check_seg(x, seg, num_segments, "segment_max")
    lowest = -torch.inf if x.dtype.is_floating_point else torch.iinfo(x.dtype).min
    vals = x if valid is None else torch.where(valid, x, lowest)
    out = torch.full((num_segments,), lowest, dtype=x.dtype, device=x.device)
    out = out.scatter_reduce_(0, seg, vals, reduce="amax", include_self=True)
    return out.masked_fill_(segment_count(seg, num_segments, valid) == 0, fill)


def max_normalize_torch(x, seg, num_segments: int, valid=None) -> torch.Tensor:
    """x / (max of x over its segment), 0 where that max is 0; x >= 0 (eqs. 8, 13, 16, 18)."""
    mx = segment_max_torch(x, seg, num_segments, valid).index_select(0, seg)
    out = torch.where(mx > 0, x / torch.where(mx > 0, mx, torch.ones_like(mx)), torch.zeros_like(x))
    return _mask(out, valid)


def sibling_mean_torch(x, seg, num_segments: int, valid=None):
    """Unweighted mean of x over the *other* valid elements of each element's segment.

    Returns (mean (M,), n (M,) int64): n is the number of valid elements in the
    element's segment; mean is 0 where n <= 1 (eqs. 12 and 15)."""
    total = segment_sum(x, seg, num_segments, valid).index_select(0, seg)
    n = segment_count(seg, num_segments, valid).index_select(0, seg)
    others = (n - 1).clamp(min=1).to(x.dtype)
    mean = torch.where(n > 1, (total - x) / others, torch.zeros_like(x))
    return _mask(mean, valid), n


def segment_normalize_torch(
    x, seg, num_segments: int, mode: str = "mean_std", eps: float = 1e-6, singleton: str = "zero"
) -> torch.Tensor:
    """Normalise x inside its segment (Norm_{q,s} and Norm_q of eqs. 21-22).

    mode ``mean_std``: (x - mean) / (std + eps), unbiased std; ``mean``: x - mean.
    A segment of one element gives 0 (``singleton="zero"``) or is normalised with
    mean 0, std 1 (``singleton="unit"``, verl-agent's episode term). A segment whose
    values are all equal (to a relative 1e-12) gives exactly 0.
    """
    _check_seg(x, seg, num_segments, "segment_normalize")
    if mode not in NORM_MODES:
        raise ValueError(f"segment_normalize: mode must be one of {NORM_MODES}, got {mode!r}")
    if singleton not in SINGLETON_MODES:
        raise ValueError(f"segment_normalize: singleton must be one of {SINGLETON_MODES}, got {singleton!r}")
    zeros = torch.zeros(num_segments, dtype=x.dtype, device=x.device)
    n = zeros.scatter_add(0, seg, torch.ones_like(x))  # exact: counts are small integers
    mean = zeros.scatter_add(0, seg, x) / n.clamp(min=1)
    dev = x - mean.index_select(0, seg)
    if mode == "mean_std":
        var = zeros.scatter_add(0, seg, dev * dev) / (n - 1).clamp(min=1)
        out = dev / (var.sqrt_().index_select(0, seg) + eps)
    else:
        out = dev
    # include_self=False: a segment's max / min over its own elements only
    mx = zeros.scatter_reduce(0, seg, x, reduce="amax", include_self=False)
    mn = zeros.scatter_reduce(0, seg, x, reduce="amin", include_self=False)
    scale = torch.maximum(mx.abs(), mn.abs()).clamp_(min=1.0)
    equal = (mx - mn) <= EQUAL_TOL * scale
    single = n == 1
    if singleton == "zero":
        return torch.where((equal | single).index_select(0, seg), torch.zeros_like(out), out)
    out = torch.where(equal.index_select(0, seg), torch.zeros_like(out), out)
    unit = x / (1.0 + eps) if mode == "mean_std" else x
    return torch.where(single.index_select(0, seg), unit, out)


def segment_normalize(x, seg, num_segments: int, mode="mean_std", eps=1e-6, singleton="zero", *, backend="auto"):
    """See :func:`segment_normalize_torch`. x: (M,) float; seg: (M,) int64."""
    if resolve(backend, x, seg) == "triton":
        from .triton_segment import segment_normalize_triton

        return segment_normalize_triton(x, seg, num_segments, mode, eps, singleton)
    return segment_normalize_torch(x, seg, num_segments, mode, eps, singleton)


def sibling_mean(x, seg, num_segments: int, valid=None, *, backend="auto"):
    """See :func:`sibling_mean_torch`."""
    if resolve(backend, x, seg) == "triton":
        from .triton_segment import sibling_mean_triton

        return sibling_mean_triton(x, seg, num_segments, valid)
    return sibling_mean_torch(x, seg, num_segments, valid)


def max_normalize(x, seg, num_segments: int, valid=None, *, backend="auto"):
    """See :func:`max_normalize_torch`."""
    if resolve(backend, x, seg) == "triton":
        from .triton_segment import max_normalize_triton

        return max_normalize_triton(x, seg, num_segments, valid)
    return max_normalize_torch(x, seg, num_segments, valid)


def stacked(op, xs, seg, num_segments: int, valid=None, **kwargs):
    """One call of a segment op for several value arrays over the same segments (the
    copies' segments offset by ``num_segments``): fewer, larger ops. Returns one
    result per array (for ops returning tuples, a tuple per array)."""
    k = len(xs)
    cat_seg = torch.cat([seg + i * num_segments for i in range(k)])
    if valid is not None:
        kwargs["valid"] = torch.cat(valid) if isinstance(valid, (list, tuple)) else valid.repeat(k)
    out = op(torch.cat(xs), cat_seg, k * num_segments, **kwargs)
    if isinstance(out, tuple):
        return list(zip(*(o.chunk(k) for o in out)))
    return out.chunk(k)
