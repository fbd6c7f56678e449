"""Triton helpers the op families share: a block's rows and their segment ids, float scalars
passed as bits, the order-preserving integer image of float bits, and the passes of a segment
normalisation (:mod:`milegpo_kernels.segment` and :mod:`milegpo_kernels.shaping` run them).

Float scalars: a Python float argument reaches a kernel as float32, so a launcher passes a
float64 as the int64 with the same bits (:func:`f64_bits`) and the kernel reads it back
(:func:`f64_scalar`).

Order-preserving image (:func:`ordered_bits`): for IEEE bits ``b`` read as a signed int, ``b``
itself when ``b >= 0`` (non-negative floats order like their bits), ``b ^ 0x7ff..f`` when
``b < 0`` (flips the magnitude of negative floats); the map is its own inverse. Maxima and
minima are integer atomics on it (exact).

Segment normalisation: :func:`norm_accumulate` (or :func:`norm_accumulate_runs`) adds each
row's count, value and keys to its segment (int64 atomics for the counts, exact; the max of the
image and of its complement as unsigned keys, so that every accumulator starts at zero: one
memset per call, :func:`norm_workspace`); :func:`norm_square` the squared deviations (mode
``mean_std``); :func:`norm_value` applies the torch twin's formula term by term (same
operations, same order, scalars in x's dtype), so only the float sums can differ from the
twin, in their last bits (atomics land in any order), and the twin's "all values equal" rule
(``max - min <= 1e-12 * max(|max|, |min|, 1)``) gives the same exact zeros.
"""

from __future__ import annotations

import struct

import torch
import triton
import triton.language as tl

from .segment.torch_ops import EQUAL_TOL


@triton.jit
def ordered_bits(bits, IS64: tl.constexpr):
    """The order-preserving integer image of float bits (int64 if IS64, else int32: see the
    module); the map is its own inverse."""
    if IS64:
        flipped = bits ^ 0x7FFFFFFFFFFFFFFF
    else:
        flipped = bits ^ 0x7FFFFFFF
    return tl.where(bits >= 0, bits, flipped)


@triton.jit
def block_rows(M, BLOCK: tl.constexpr):
    """This program's BLOCK row indices as int64 (M, the row count, is the caller's to mask by)."""
    pid = tl.program_id(0).to(tl.int64)
    return pid * BLOCK + tl.arange(0, BLOCK).to(tl.int64)


@triton.jit
def segment_block(seg_ptr, M, S, BLOCK: tl.constexpr):
    """This program's rows, which of them are in bounds, their segment ids, and which rows have a
    segment id in [0, S) (the others take part in nothing)."""
    rows = block_rows(M, BLOCK)
    inb = rows < M
    seg = tl.load(seg_ptr + rows, mask=inb, other=0)
    ok = inb & (seg >= 0) & (seg < S)
    return rows, inb, seg, ok


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
    return ordered_bits(key, IS64).to(x.dtype, bitcast=True)


@triton.jit
def _ukey(x, IS64: tl.constexpr):
    """x's order-preserving unsigned key: its max over a segment is the max of x, the max of its
    complement ``~key`` is the complement of the min's key."""
    if IS64:
        bits = x.to(tl.int64, bitcast=True)
    else:
        bits = x.to(tl.int32, bitcast=True)
    return _unsigned(ordered_bits(bits, IS64), IS64)


@triton.jit
def norm_accumulate(x, seg, ok, cnt_ptr, sum_ptr, max_ptr, min_ptr, COUNT: tl.constexpr, IS64: tl.constexpr):
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
def norm_accumulate_runs(x, rows, seg_ptr, M, S, cnt_ptr, sum_ptr, max_ptr, min_ptr, IS64: tl.constexpr,
                         BLOCK: tl.constexpr):
    """Pass 1 as :func:`norm_accumulate`, with each run of equal segment ids inside the block
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
def norm_square(x, seg, ok, cnt_ptr, sum_ptr, sq_ptr):
    """Pass 2 (mode mean_std): sq += (x - mean)^2 per segment."""
    _, dev = _norm_mean(x, seg, ok, cnt_ptr, sum_ptr)
    tl.atomic_add(sq_ptr + seg, dev * dev, mask=ok)


@triton.jit
def norm_value(x, seg, ok, cnt_ptr, sum_ptr, sq_ptr, max_ptr, min_ptr, eps, one_eps, tol, MEAN_STD: tl.constexpr,
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
