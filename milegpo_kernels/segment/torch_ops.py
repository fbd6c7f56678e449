"""The constants, input checks and torch twins of the segment reductions (scatters), and the torch-only
:func:`segment_sum`, :func:`segment_count` and :func:`stacked`; the ops are described in
:mod:`milegpo_kernels.segment`."""

from __future__ import annotations

import torch

NORM_MODES = ("mean_std", "mean")
SINGLETON_MODES = ("zero", "unit")
#: relative tolerance under which the values of a segment count as all equal
EQUAL_TOL = 1e-12


def check_seg(x, seg, num_segments, name):
    """Raise naming what is wrong with x, seg or num_segments (dtype, shape, sign); reads nothing on the
    host (:func:`milegpo_kernels.inputs.check_seg_range` reads the ids)."""
    if seg.dtype != torch.int64 or seg.dim() != 1:
        raise TypeError(f"{name}: seg must be (M,) int64, got {seg.dtype} {tuple(seg.shape)}")
    if x.shape[0] != seg.shape[0]:
        raise ValueError(f"{name}: x has {x.shape[0]} elements, seg has {seg.shape[0]}")
    if num_segments < 0:
        raise ValueError(f"{name}: num_segments must be >= 0, got {num_segments}")


def _mask(x, valid):
    return x if valid is None else torch.where(valid, x, torch.zeros_like(x))


def segment_sum(x, seg, num_segments: int, valid=None) -> torch.Tensor:
    """Sum of x per segment: (num_segments,) in x's dtype."""
    check_seg(x, seg, num_segments, "segment_sum")
    out = torch.zeros(num_segments, dtype=x.dtype, device=x.device)
    return out.scatter_add_(0, seg, _mask(x, valid))


def segment_count(seg, num_segments: int, valid=None) -> torch.Tensor:
    """Number of (valid) elements per segment: (num_segments,) int64."""
    ones = torch.ones(seg.shape[0], dtype=torch.int64, device=seg.device)
    return segment_sum(ones, seg, num_segments, valid)


def segment_max_torch(x, seg, num_segments: int, valid=None, fill: float = 0.0) -> torch.Tensor:
    """Max of x per segment, ``fill`` for segments with no valid element (scatter_reduce amax)."""
    check_seg(x, seg, num_segments, "segment_max")
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
    check_seg(x, seg, num_segments, "segment_normalize")
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
