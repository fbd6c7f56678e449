"""Triton kernels for segment reductions: normalisation, sibling means, max-normalisation.

Each op is a scatter pass that accumulates per-segment statistics with atomics,
then an elementwise pass that gathers them back and applies the torch twin's
formula term by term (same operations, same order, scalars in x's dtype), so
only the float sums can differ from the twin, in their last bits (atomics land
in any order). Counts are int64 atomics (exact), maxima and minima are atomics on
an order-preserving integer image of the float bits (exact; the normalisation takes
the max of the image and of its complement as unsigned keys, so that every
accumulator starts at zero: one memset per call), so the twin's
"all values equal" rule (``max - min <= 1e-12 * max(|max|, |min|, 1)``) gives the
same exact zeros.

Order-preserving image: for IEEE bits ``b`` read as a signed int, ``b`` itself when
``b >= 0`` (non-negative floats order like their bits), ``b ^ 0x7ff..f`` when
``b < 0`` (flips the magnitude of negative floats); the map is its own inverse.

Rows whose ``seg`` lies outside ``[0, num_segments)``: on CPU tensors (the
interpreter) the wrappers raise, as the torch twin does; on CUDA the kernels skip
them (checking would need a host sync).
"""

from __future__ import annotations

import struct

import torch
import triton
import triton.language as tl

from .segment import EQUAL_TOL, NORM_MODES, SINGLETON_MODES, _check_seg, check_seg_range

BLOCK = 1024
_BITS = {torch.float64: torch.int64, torch.float32: torch.int32}


@triton.jit
def _ordered(bits, IS64: tl.constexpr):
    if IS64:
        flipped = bits ^ 0x7FFFFFFFFFFFFFFF
    else:
        flipped = bits ^ 0x7FFFFFFF
    return tl.where(bits >= 0, bits, flipped)


@triton.jit
def _rows(M, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    return pid * BLOCK + tl.arange(0, BLOCK).to(tl.int64)


@triton.jit
def _segment_block(seg_ptr, M, S, BLOCK: tl.constexpr):
    """This program's rows, which of them are in bounds, their segment ids, and which rows have a
    segment id in [0, S) (the others take part in nothing)."""
    rows = _rows(M, BLOCK)
    inb = rows < M
    seg = tl.load(seg_ptr + rows, mask=inb, other=0)
    ok = inb & (seg >= 0) & (seg < S)
    return rows, inb, seg, ok


@triton.jit
def _valid_values(x_ptr, seg_ptr, valid_ptr, M, S, HAS_VALID: tl.constexpr, BLOCK: tl.constexpr):
    """This program's rows that count (in bounds, segment id in [0, S), valid if a mask is
    given): their segment ids (0 elsewhere), the mask, and their x (0 elsewhere)."""
    rows, inb, seg, ok = _segment_block(seg_ptr, M, S, BLOCK)
    if HAS_VALID:
        ok = ok & (tl.load(valid_ptr + rows, mask=ok, other=0) != 0)
    seg = tl.where(ok, seg, 0)
    x = tl.load(x_ptr + rows, mask=ok, other=0.0)
    return seg, ok, x


# ---------------------------------------------------------------------------
# segment_normalize
# ---------------------------------------------------------------------------


@triton.jit
def _unsigned(key, IS64: tl.constexpr):
    """Order-preserving map of a signed key to an unsigned one (flip the sign bit): an atomic
    max over it needs no slot initialised to the smallest value, zero is."""
    if IS64:
        return (key ^ (-9223372036854775807 - 1)).to(tl.uint64, bitcast=True)
    else:
        return (key ^ (-2147483647 - 1)).to(tl.uint32, bitcast=True)


@triton.jit
def _float_of_unsigned(u, x, IS64: tl.constexpr):
    """The float (x's dtype) whose order-preserving unsigned key is u."""
    if IS64:
        key = u.to(tl.int64, bitcast=True) ^ (-9223372036854775807 - 1)
    else:
        key = u.to(tl.int32, bitcast=True) ^ (-2147483647 - 1)
    return _ordered(key, IS64).to(x.dtype, bitcast=True)


@triton.jit
def _ukey(x, IS64: tl.constexpr):
    """x's order-preserving unsigned key: its max over a segment is the max of x, the max of its
    complement ``~key`` is the complement of the min's key."""
    if IS64:
        bits = x.to(tl.int64, bitcast=True)
    else:
        bits = x.to(tl.int32, bitcast=True)
    return _unsigned(_ordered(bits, IS64), IS64)


@triton.jit
def _norm_accumulate(x, seg, ok, cnt_ptr, sum_ptr, max_ptr, min_ptr, COUNT: tl.constexpr, IS64: tl.constexpr):
    """Pass 1 of a segment normalisation: cnt += 1 (if COUNT), sum += x, and the max of x's key
    and of its complement (zero-filled slots) per segment."""
    if COUNT:
        tl.atomic_add(cnt_ptr + seg, tl.full(x.shape, 1, tl.int64), mask=ok)
    tl.atomic_add(sum_ptr + seg, x, mask=ok)
    key = _ukey(x, IS64)
    tl.atomic_max(max_ptr + seg, key, mask=ok)
    tl.atomic_max(min_ptr + seg, ~key, mask=ok)


@triton.jit
def _runs_combine(f1, c1, s1, hi1, lo1, f2, c2, s2, hi2, lo2):
    """Segmented scan: a run restarts where f2 is set."""
    new = f2 != 0
    return (f1 | f2, tl.where(new, c2, c1 + c2), tl.where(new, s2, s1 + s2), tl.where(new, hi2, tl.maximum(hi1, hi2)),
            tl.where(new, lo2, tl.maximum(lo1, lo2)))


@triton.jit
def _run_key(seg_ptr, idx, M, S):
    """Segment id of row idx; -1 out of bounds or range (such rows take part in nothing)."""
    inb = (idx >= 0) & (idx < M)
    seg = tl.load(seg_ptr + idx, mask=inb, other=-1)
    return tl.where(inb & (seg >= 0) & (seg < S), seg, -1)


@triton.jit
def _norm_accumulate_runs(x, rows, seg_ptr, M, S, cnt_ptr, sum_ptr, max_ptr, min_ptr, IS64: tl.constexpr,
                          BLOCK: tl.constexpr):
    """Pass 1 as :func:`_norm_accumulate`, with each run of equal segment ids inside the block
    reduced first (a segmented scan) and one atomic per run: rows sorted by segment (the
    episode term: hundreds of rows per task group) then stop contending for a few slots."""
    key = _run_key(seg_ptr, rows, M, S)
    lane = tl.arange(0, BLOCK)
    start = (lane == 0) | (key != _run_key(seg_ptr, rows - 1, M, S))
    end = (lane == BLOCK - 1) | (key != _run_key(seg_ptr, rows + 1, M, S))
    ok = key >= 0
    ukey = _ukey(x, IS64)
    _, cnt, tot, hi, lo = tl.associative_scan((start.to(tl.int32), ok.to(tl.int64), tl.where(ok, x, 0.0), ukey, ~ukey),
                                              0, _runs_combine)
    seg = tl.where(ok, key, 0)
    last = end & ok
    tl.atomic_add(cnt_ptr + seg, cnt, mask=last)
    tl.atomic_add(sum_ptr + seg, tot, mask=last)
    tl.atomic_max(max_ptr + seg, hi, mask=last)
    tl.atomic_max(min_ptr + seg, lo, mask=last)


@triton.jit
def _norm_mean(x, seg, ok, cnt_ptr, sum_ptr):
    n = tl.load(cnt_ptr + seg, mask=ok, other=1)
    total = tl.load(sum_ptr + seg, mask=ok, other=0.0)
    return n, x - total / tl.maximum(n, 1).to(x.dtype)


@triton.jit
def _norm_square(x, seg, ok, cnt_ptr, sum_ptr, sq_ptr):
    """Pass 2 (mode mean_std): sq += (x - mean)^2 per segment."""
    _, dev = _norm_mean(x, seg, ok, cnt_ptr, sum_ptr)
    tl.atomic_add(sq_ptr + seg, dev * dev, mask=ok)


@triton.jit
def _norm_value(x, seg, ok, cnt_ptr, sum_ptr, sq_ptr, max_ptr, min_ptr, eps, one_eps, tol, MEAN_STD: tl.constexpr,
                UNIT: tl.constexpr, IS64: tl.constexpr):
    """Pass 3: the torch twin's formula term by term. eps, one_eps (1 + eps), tol (EQUAL_TOL):
    scalars in x's dtype."""
    n, dev = _norm_mean(x, seg, ok, cnt_ptr, sum_ptr)
    if MEAN_STD:
        sq = tl.load(sq_ptr + seg, mask=ok, other=0.0)
        var = sq / tl.maximum(n - 1, 1).to(x.dtype)
        if IS64:
            std = tl.sqrt(var)  # sqrt.rn.f64: correctly rounded, like torch
        else:
            std = tl.sqrt_rn(var)
        out = dev / (std + eps)
    else:
        out = dev
    mx = _float_of_unsigned(tl.load(max_ptr + seg, mask=ok, other=0), x, IS64)
    mn = _float_of_unsigned(~tl.load(min_ptr + seg, mask=ok, other=0), x, IS64)
    scale = tl.maximum(tl.maximum(tl.abs(mx), tl.abs(mn)), 1.0)
    equal = (mx - mn) <= tol * scale
    out = tl.where(equal, 0.0, out)
    if UNIT:
        if MEAN_STD:
            single = x / one_eps
        else:
            single = x
    else:
        single = tl.zeros_like(x)
    return tl.where(n == 1, single, out)


@triton.jit
def f64_scalar(bits):
    """A float64 scalar passed as its int64 bit pattern (:func:`f64_bits`)."""
    return bits.to(tl.int64).to(tl.float64, bitcast=True)


@triton.jit
def _scalar(bits, like):
    """A float64 scalar passed as its int64 bit pattern, in like's dtype."""
    return f64_scalar(bits).to(like.dtype)


@triton.jit
def _norm_stats_kernel(x_ptr, seg_ptr, cnt_ptr, sum_ptr, max_ptr, min_ptr, M, S,
                       IS64: tl.constexpr, RUNS: tl.constexpr, BLOCK: tl.constexpr):
    rows, inb, seg, ok = _segment_block(seg_ptr, M, S, BLOCK)
    seg = tl.where(ok, seg, 0)
    x = tl.load(x_ptr + rows, mask=ok, other=0.0)
    if RUNS:
        _norm_accumulate_runs(x, rows, seg_ptr, M, S, cnt_ptr, sum_ptr, max_ptr, min_ptr, IS64, BLOCK)
    else:
        _norm_accumulate(x, seg, ok, cnt_ptr, sum_ptr, max_ptr, min_ptr, True, IS64)


@triton.jit
def _norm_var_kernel(x_ptr, seg_ptr, cnt_ptr, sum_ptr, sq_ptr, M, S, BLOCK: tl.constexpr):
    rows, inb, seg, ok = _segment_block(seg_ptr, M, S, BLOCK)
    seg = tl.where(ok, seg, 0)
    _norm_square(tl.load(x_ptr + rows, mask=ok, other=0.0), seg, ok, cnt_ptr, sum_ptr, sq_ptr)


@triton.jit
def _norm_out_kernel(x_ptr, seg_ptr, cnt_ptr, sum_ptr, sq_ptr, max_ptr, min_ptr, out_ptr, M, S, eps, one_eps, tol,
                     MEAN_STD: tl.constexpr, UNIT: tl.constexpr, IS64: tl.constexpr, BLOCK: tl.constexpr):
    rows, inb, seg, ok = _segment_block(seg_ptr, M, S, BLOCK)
    seg = tl.where(ok, seg, 0)
    x = tl.load(x_ptr + rows, mask=inb, other=0.0)
    out = _norm_value(x, seg, ok, cnt_ptr, sum_ptr, sq_ptr, max_ptr, min_ptr, _scalar(eps, x), _scalar(one_eps, x),
                      _scalar(tol, x), MEAN_STD, UNIT, IS64)
    tl.store(out_ptr + rows, out, mask=inb)


_UNSIGNED = {torch.float64: torch.uint64, torch.float32: torch.uint32}


def norm_workspace(s: int, dtype, device, columns: int = 1):
    """Zero-filled accumulators of a segment normalisation of ``columns`` value arrays over the
    same ``s`` segments, from one memset: the count, then per column the sum, the sum of
    squares (x's dtype) and the max / min keys (unsigned, x's width)."""
    ws = torch.zeros((1 + 4 * columns) * s, dtype=torch.int64, device=device)
    cnt, rest = ws[:s], ws[s:].view(4 * columns, s)
    cols = []
    for c in range(columns):
        tot, sq, mx, mn = rest[4 * c:4 * c + 4].unbind(0)
        cols += [tot.view(dtype)[:s], sq.view(dtype)[:s], mx.view(_UNSIGNED[dtype])[:s], mn.view(_UNSIGNED[dtype])[:s]]
    return (cnt, *cols)


def f64_bits(x: float) -> int:
    """A float64 as the int64 with the same bits (how the kernels take float scalars: a Python
    float argument reaches a kernel as float32)."""
    return struct.unpack("<q", struct.pack("<d", float(x)))[0]


def norm_scalars(eps: float) -> tuple[int, int, int]:
    """eps, 1 + eps and EQUAL_TOL as bits for the normalisation kernels."""
    return f64_bits(eps), f64_bits(1.0 + eps), f64_bits(EQUAL_TOL)


def _check_float(x, name):
    if x.dtype not in _BITS or x.dim() != 1:
        raise TypeError(f"{name}: x must be (M,) float32 or float64 on the triton path, got {x.dtype} {tuple(x.shape)}")


#: reduce runs of equal segment ids in the block before the atomics of the first pass (a tuning
#: knob, same results up to the order of float sums; unmeasured on a GPU so far: off)
RUNS = False


def segment_normalize_triton(x, seg, num_segments: int, mode: str = "mean_std", eps: float = 1e-6,
                             singleton: str = "zero", *, runs: bool = RUNS) -> torch.Tensor:
    """Normalise x inside its segment; same contract as
    :func:`milegpo_kernels.segment.segment_normalize_torch`. x: (M,) float; seg: (M,) int64.
    runs: see :data:`RUNS` (``scripts/kernel_variants.py`` times both)."""
    _check_seg(x, seg, num_segments, "segment_normalize")
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
    rows, inb, seg, ok = _segment_block(seg_ptr, M, S, BLOCK)
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
    contract as :func:`milegpo_kernels.segment.sibling_mean_torch`.
    Returns (mean (M,) x.dtype, n (M,) int64)."""
    _check_seg(x, seg, num_segments, "sibling_mean")
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
    rows, inb, seg, ok = _segment_block(seg_ptr, M, S, BLOCK)
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
    positive; same contract as :func:`milegpo_kernels.segment.max_normalize_torch`.

    The max starts at 0 and is taken on the int bit pattern of x (order-preserving
    for x >= 0; negative x never raise it, which gives the twin's result: a
    segment whose max is <= 0 maps to 0)."""
    _check_seg(x, seg, num_segments, "max_normalize")
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
    key = _ordered(x.to(key_ptr.dtype.element_ty, bitcast=True), IS64)
    tl.atomic_max(key_ptr + seg, key, mask=ok, sem="relaxed")


@triton.jit
def _seg_max_out_kernel(key_ptr, out_ptr, fill_ptr, S, EMPTY: tl.constexpr, IS64: tl.constexpr, BLOCK: tl.constexpr):
    """out = the float of key, ``fill`` where no element came."""
    segs = _rows(S, BLOCK)
    m = segs < S
    key = tl.load(key_ptr + segs, mask=m, other=EMPTY)
    fill = tl.load(fill_ptr)
    val = _ordered(key, IS64).to(fill.dtype, bitcast=True)
    tl.store(out_ptr + segs, tl.where(key == EMPTY, fill, val), mask=m)


def segment_max_triton(x, seg, num_segments: int, valid=None, fill: float = 0.0) -> torch.Tensor:
    """Max of x per segment over its valid elements, ``fill`` where there is none; same
    contract as :func:`milegpo_kernels.segment.segment_max_torch` for float32 / float64 x.

    One scatter of integer ``atomic_max`` on the order-preserving image of the float
    bits (exact, no compare-and-swap loop: the torch twin's float64 ``scatter_reduce``
    loops on contended segments), then one pass over the segments. The image's
    smallest value marks an empty segment: only the negative NaN with every bit set
    maps there, and a NaN in x is outside the op's contract."""
    _check_seg(x, seg, num_segments, "segment_max")
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
