"""Triton kernels for segment reductions: normalisation, sibling means, max-normalisation, maxima.

Each op is a scatter pass that accumulates per-segment statistics with atomics,
then an elementwise pass that gathers them back and applies the torch twin's
formula term by term (same operations, same order, scalars in x's dtype), so
only the float sums can differ from the twin, in their last bits (atomics land
in any order). Counts are int64 atomics (exact), maxima and minima are atomics on
an order-preserving integer image of the float bits (exact). The normalisation's
passes are :mod:`milegpo_kernels.triton_helpers`' (``shaped_advantage`` runs them too).

Rows whose ``seg`` lies outside ``[0, num_segments)``: on CPU tensors (the
interpreter) the wrappers raise, as the torch twin does; on CUDA the kernels skip
them (checking would need a host sync).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..inputs import check_seg_range
from ..triton_helpers import (
    block_rows,
    f64_scalar,
    norm_accumulate,
    norm_accumulate_runs,
    norm_scalars,
    norm_square,
    norm_value,
    norm_workspace,
    ordered_bits,
    segment_block,
)
from .torch_ops import NORM_MODES, SINGLETON_MODES, check_seg

BLOCK = 1024
_BITS = {torch.float64: torch.int64, torch.float32: torch.int32}


@triton.jit
def _valid_values(x_ptr, seg_ptr, valid_ptr, M, S, HAS_VALID: tl.constexpr, BLOCK: tl.constexpr):
    """This program's rows that count (in bounds, segment id in [0, S), valid if a mask is
    given): their segment ids (0 elsewhere), the mask, and their x (0 elsewhere)."""
    rows, inb, seg, ok = segment_block(seg_ptr, M, S, BLOCK)
    if HAS_VALID:
        ok = ok & (tl.load(valid_ptr + rows, mask=ok, other=0) != 0)
    seg = tl.where(ok, seg, 0)
    x = tl.load(x_ptr + rows, mask=ok, other=0.0)
    return seg, ok, x


# ---------------------------------------------------------------------------
# segment_normalize
# ---------------------------------------------------------------------------


@triton.jit
def _scalar(bits, like):
    """A float64 scalar passed as its int64 bit pattern, in like's dtype."""
    return f64_scalar(bits).to(like.dtype)


@triton.jit
def _norm_stats_kernel(x_ptr, seg_ptr, cnt_ptr, sum_ptr, max_ptr, min_ptr, M, S,
                       IS64: tl.constexpr, RUNS: tl.constexpr, BLOCK: tl.constexpr):
    rows, inb, seg, ok = segment_block(seg_ptr, M, S, BLOCK)
    seg = tl.where(ok, seg, 0)
    x = tl.load(x_ptr + rows, mask=ok, other=0.0)
    if RUNS:
        norm_accumulate_runs(x, rows, seg_ptr, M, S, cnt_ptr, sum_ptr, max_ptr, min_ptr, IS64, BLOCK)
    else:
        norm_accumulate(x, seg, ok, cnt_ptr, sum_ptr, max_ptr, min_ptr, True, IS64)


@triton.jit
def _norm_var_kernel(x_ptr, seg_ptr, cnt_ptr, sum_ptr, sq_ptr, M, S, BLOCK: tl.constexpr):
    rows, inb, seg, ok = segment_block(seg_ptr, M, S, BLOCK)
    seg = tl.where(ok, seg, 0)
    norm_square(tl.load(x_ptr + rows, mask=ok, other=0.0), seg, ok, cnt_ptr, sum_ptr, sq_ptr)


@triton.jit
def _norm_out_kernel(x_ptr, seg_ptr, cnt_ptr, sum_ptr, sq_ptr, max_ptr, min_ptr, out_ptr, M, S, eps, one_eps, tol,
                     MEAN_STD: tl.constexpr, UNIT: tl.constexpr, IS64: tl.constexpr, BLOCK: tl.constexpr):
    rows, inb, seg, ok = segment_block(seg_ptr, M, S, BLOCK)
    seg = tl.where(ok, seg, 0)
    x = tl.load(x_ptr + rows, mask=inb, other=0.0)
    out = norm_value(x, seg, ok, cnt_ptr, sum_ptr, sq_ptr, max_ptr, min_ptr, _scalar(eps, x), _scalar(one_eps, x),
                     _scalar(tol, x), MEAN_STD, UNIT, IS64)
    tl.store(out_ptr + rows, out, mask=inb)


def _check_float(x, name):
    if x.dtype not in _BITS or x.dim() != 1:
        raise TypeError(f"{name}: x must be (M,) float32 or float64 on the triton path, got {x.dtype} {tuple(x.shape)}")


#: reduce runs of equal segment ids in the block before the atomics of the first pass (a tuning
#: knob, same results up to the order of float sums; unmeasured on a GPU so far: off)
RUNS = False


def segment_normalize_triton(x, seg, num_segments: int, mode: str = "mean_std", eps: float = 1e-6,
                             singleton: str = "zero", *, runs: bool = RUNS) -> torch.Tensor:
    """Normalise x inside its segment; same contract as
    :func:`milegpo_kernels.segment.torch_ops.segment_normalize_torch`. x: (M,) float; seg: (M,) int64.
    runs: see :data:`RUNS` (``scripts/kernel_variants.py`` times both)."""
    check_seg(x, seg, num_segments, "segment_normalize")
    check_seg_range(seg, num_segments, "segment_normalize")
    if mode not in NORM_MODES:
        raise ValueError(f"segment_normalize: mode must be one of {NORM_MODES}, got {mode!r}")
    if singleton not in SINGLETON_MODES:
        raise ValueError(f"segment_normalize: singleton must be one of {SINGLETON_MODES}, got {singleton!r}")
    _check_float(x, "segment_normalize")
    m = x.shape[0]
    out = torch.empty_like(x)
    if m == 0:
        return out
    x, seg = x.contiguous(), seg.contiguous()
    cnt, tot, sq, mx, mn = norm_workspace(max(num_segments, 1), x.dtype, x.device)
    is64 = x.dtype == torch.float64
    grid = (triton.cdiv(m, BLOCK),)
    _norm_stats_kernel[grid](x, seg, cnt, tot, mx, mn, m, num_segments, IS64=is64, RUNS=runs, BLOCK=BLOCK)
    if mode == "mean_std":
        _norm_var_kernel[grid](x, seg, cnt, tot, sq, m, num_segments, BLOCK=BLOCK)
    _norm_out_kernel[grid](x, seg, cnt, tot, sq, mx, mn, out, m, num_segments, *norm_scalars(eps),
                           MEAN_STD=mode == "mean_std", UNIT=singleton == "unit", IS64=is64, BLOCK=BLOCK)
    return out


# ---------------------------------------------------------------------------
# sibling_mean
# ---------------------------------------------------------------------------


@triton.jit
def _sum_count_kernel(x_ptr, seg_ptr, valid_ptr, sum_ptr, cnt_ptr, M, S, HAS_VALID: tl.constexpr,
                      BLOCK: tl.constexpr):
    seg, ok, x = _valid_values(x_ptr, seg_ptr, valid_ptr, M, S, HAS_VALID, BLOCK)
    tl.atomic_add(sum_ptr + seg, x, mask=ok)
    tl.atomic_add(cnt_ptr + seg, tl.full((BLOCK,), 1, tl.int64), mask=ok)


@triton.jit
def _sibling_out_kernel(x_ptr, seg_ptr, valid_ptr, sum_ptr, cnt_ptr, mean_ptr, n_ptr, M, S,
                        HAS_VALID: tl.constexpr, BLOCK: tl.constexpr):
    rows, inb, seg, ok = segment_block(seg_ptr, M, S, BLOCK)
    seg = tl.where(ok, seg, 0)
    x = tl.load(x_ptr + rows, mask=inb, other=0.0)
    total = tl.load(sum_ptr + seg, mask=ok, other=0.0)
    n = tl.load(cnt_ptr + seg, mask=ok, other=0)
    others = tl.maximum(n - 1, 1).to(x.dtype)
    mean = tl.where(n > 1, (total - x) / others, 0.0)
    if HAS_VALID:
        valid = tl.load(valid_ptr + rows, mask=inb, other=0) != 0
        mean = tl.where(valid, mean, 0.0)
    tl.store(mean_ptr + rows, mean, mask=inb)
    tl.store(n_ptr + rows, n, mask=inb)


def _valid_arg(valid, x):
    if valid is None:
        return x, False  # dummy pointer, never read
    if valid.dtype != torch.bool or valid.shape != x.shape:
        raise TypeError(f"valid must be a bool tensor of shape {tuple(x.shape)}, got {valid.dtype} {tuple(valid.shape)}")
    return valid.contiguous().view(torch.int8), True


def sibling_mean_triton(x, seg, num_segments: int, valid=None):
    """Mean of x over the other valid elements of each element's segment; same
    contract as :func:`milegpo_kernels.segment.torch_ops.sibling_mean_torch`.
    Returns (mean (M,) x.dtype, n (M,) int64)."""
    check_seg(x, seg, num_segments, "sibling_mean")
    check_seg_range(seg, num_segments, "sibling_mean")
    _check_float(x, "sibling_mean")
    m = x.shape[0]
    mean = torch.empty_like(x)
    n = torch.empty(m, dtype=torch.int64, device=x.device)
    if m == 0:
        return mean, n
    x, seg = x.contiguous(), seg.contiguous()
    v, has_valid = _valid_arg(valid, x)
    s = max(num_segments, 1)
    tot = torch.zeros(s, dtype=x.dtype, device=x.device)
    cnt = torch.zeros(s, dtype=torch.int64, device=x.device)
    grid = (triton.cdiv(m, BLOCK),)
    _sum_count_kernel[grid](x, seg, v, tot, cnt, m, num_segments, HAS_VALID=has_valid, BLOCK=BLOCK)
    _sibling_out_kernel[grid](x, seg, v, tot, cnt, mean, n, m, num_segments, HAS_VALID=has_valid, BLOCK=BLOCK)
    return mean, n


# ---------------------------------------------------------------------------
# max_normalize
# ---------------------------------------------------------------------------


@triton.jit
def _seg_max_kernel(x_ptr, seg_ptr, valid_ptr, max_ptr, M, S, HAS_VALID: tl.constexpr, BLOCK: tl.constexpr):
    """max over the int bits of x, from 0: only non-negative x can raise it."""
    seg, ok, x = _valid_values(x_ptr, seg_ptr, valid_ptr, M, S, HAS_VALID, BLOCK)
    tl.atomic_max(max_ptr + seg, x.to(max_ptr.dtype.element_ty, bitcast=True), mask=ok)


@triton.jit
def _max_out_kernel(x_ptr, seg_ptr, valid_ptr, max_ptr, out_ptr, M, S, HAS_VALID: tl.constexpr,
                    BLOCK: tl.constexpr):
    rows, inb, seg, ok = segment_block(seg_ptr, M, S, BLOCK)
    seg = tl.where(ok, seg, 0)
    x = tl.load(x_ptr + rows, mask=inb, other=0.0)
    mx = tl.load(max_ptr + seg, mask=ok, other=0).to(x.dtype, bitcast=True)
    pos = mx > 0
    out = tl.where(pos, x / tl.where(pos, mx, 1.0), 0.0)
    if HAS_VALID:
        valid = tl.load(valid_ptr + rows, mask=inb, other=0) != 0
        out = tl.where(valid, out, 0.0)
    tl.store(out_ptr + rows, out, mask=inb)


def max_normalize_triton(x, seg, num_segments: int, valid=None) -> torch.Tensor:
    """x / (max of x over its segment's valid elements), 0 where that max is not
    positive; same contract as :func:`milegpo_kernels.segment.torch_ops.max_normalize_torch`.

    The max starts at 0 and is taken on the int bit pattern of x (order-preserving
    for x >= 0; negative x never raise it, which gives the twin's result: a
    segment whose max is <= 0 maps to 0)."""
    check_seg(x, seg, num_segments, "max_normalize")
    check_seg_range(seg, num_segments, "max_normalize")
    _check_float(x, "max_normalize")
    m = x.shape[0]
    out = torch.empty_like(x)
    if m == 0:
        return out
    x, seg = x.contiguous(), seg.contiguous()
    v, has_valid = _valid_arg(valid, x)
    mx = torch.zeros(max(num_segments, 1), dtype=_BITS[x.dtype], device=x.device)
    grid = (triton.cdiv(m, BLOCK),)
    _seg_max_kernel[grid](x, seg, v, mx, m, num_segments, HAS_VALID=has_valid, BLOCK=BLOCK)
    _max_out_kernel[grid](x, seg, v, mx, out, m, num_segments, HAS_VALID=has_valid, BLOCK=BLOCK)
    return out


# ---------------------------------------------------------------------------
# segment_max
# ---------------------------------------------------------------------------


@triton.jit
def _seg_max_any_kernel(x_ptr, seg_ptr, valid_ptr, key_ptr, M, S, HAS_VALID: tl.constexpr, IS64: tl.constexpr,
                        BLOCK: tl.constexpr):
    """key[seg] = max of the order-preserving integer image of x's bits (any sign)."""
    seg, ok, x = _valid_values(x_ptr, seg_ptr, valid_ptr, M, S, HAS_VALID, BLOCK)
    key = ordered_bits(x.to(key_ptr.dtype.element_ty, bitcast=True), IS64)
    tl.atomic_max(key_ptr + seg, key, mask=ok, sem="relaxed")


@triton.jit
def _seg_max_out_kernel(key_ptr, out_ptr, fill_ptr, S, EMPTY: tl.constexpr, IS64: tl.constexpr, BLOCK: tl.constexpr):
    """out = the float of key, ``fill`` where no element came."""
    segs = block_rows(S, BLOCK)
    m = segs < S
    key = tl.load(key_ptr + segs, mask=m, other=EMPTY)
    fill = tl.load(fill_ptr)
    val = ordered_bits(key, IS64).to(fill.dtype, bitcast=True)
    tl.store(out_ptr + segs, tl.where(key == EMPTY, fill, val), mask=m)


def segment_max_triton(x, seg, num_segments: int, valid=None, fill: float = 0.0) -> torch.Tensor:
    """Max of x per segment over its valid elements, ``fill`` where there is none; same
    contract as :func:`milegpo_kernels.segment.torch_ops.segment_max_torch` for float32 / float64 x.

    One scatter of integer ``atomic_max`` on the order-preserving image of the float
    bits (exact, no compare-and-swap loop: the torch twin's float64 ``scatter_reduce``
    loops on contended segments), then one pass over the segments. The image's
    smallest value marks an empty segment: only the negative NaN with every bit set
    maps there, and a NaN in x is outside the op's contract."""
    check_seg(x, seg, num_segments, "segment_max")
    check_seg_range(seg, num_segments, "segment_max")
    _check_float(x, "segment_max")
    ity = _BITS[x.dtype]
    out = torch.empty(num_segments, dtype=x.dtype, device=x.device)
    if num_segments == 0:
        return out
    empty = torch.iinfo(ity).min
    key = torch.full((num_segments,), empty, dtype=ity, device=x.device)
    m = x.shape[0]
    is64 = x.dtype == torch.float64
    if m:
        x, seg = x.contiguous(), seg.contiguous()
        v, has_valid = _valid_arg(valid, x)
        _seg_max_any_kernel[(triton.cdiv(m, BLOCK),)](x, seg, v, key, m, num_segments, HAS_VALID=has_valid,
                                                      IS64=is64, BLOCK=BLOCK)
    fill_t = torch.full((1,), fill, dtype=x.dtype, device=x.device)  # a fill kernel, no host->device copy
    _seg_max_out_kernel[(triton.cdiv(num_segments, BLOCK),)](key, out, fill_t, num_segments, EMPTY=empty, IS64=is64,
                                                             BLOCK=BLOCK)
    return out
