"""The segment reductions (milegpo_kernels.segment: segment_normalize, sibling_mean, max_normalize,
segment_max): the Triton kernels vs their torch twins vs plain Python (tests/kernels/helpers.py
says how)."""

from __future__ import annotations

import math
import random

import pytest
import torch

from milegpo_kernels import count_distinct, max_normalize, segment_max, segment_normalize, sibling_mean
from milegpo_kernels.segment import (
    EQUAL_TOL,
    max_normalize_torch,
    segment_max_torch,
    segment_normalize_torch,
    sibling_mean_torch,
)

from .helpers import BLOCK, SIZES, check_close, i64, to_cpu

pytestmark = pytest.mark.usefixtures("garbage_empty")


# plain-Python references (the benchmarks import them)


def _segments(seg, num_segments, valid=None):
    members = [[] for _ in range(num_segments)]
    for i, s in enumerate(seg):
        if valid is None or valid[i]:
            members[s].append(i)
    return members


def reference_segment_normalize(x, seg, num_segments, mode="mean_std", eps=1e-6, singleton="zero"):
    members = _segments(seg, num_segments)
    out = [0.0] * len(x)
    for rows in members:
        vals = [x[i] for i in rows]
        n = len(vals)
        if n == 0:
            continue
        if n == 1:
            i = rows[0]
            out[i] = 0.0 if singleton == "zero" else (x[i] / (1.0 + eps) if mode == "mean_std" else x[i])
            continue
        mx, mn = max(vals), min(vals)
        if mx - mn <= EQUAL_TOL * max(abs(mx), abs(mn), 1.0):
            continue
        mean = sum(vals) / n
        std = math.sqrt(sum((v - mean) ** 2 for v in vals) / (n - 1))
        for i in rows:
            out[i] = (x[i] - mean) / (std + eps) if mode == "mean_std" else x[i] - mean
    return out


def reference_sibling_mean(x, seg, num_segments, valid=None):
    members = _segments(seg, num_segments, valid)
    mean, n = [0.0] * len(x), [0] * len(x)
    for rows in members:
        total = sum(x[i] for i in rows)
        for i in rows:
            if len(rows) > 1:
                mean[i] = (total - x[i]) / (len(rows) - 1)
    for i, s in enumerate(seg):
        n[i] = len(members[s])
    return mean, n


def reference_segment_max(x, seg, num_segments, valid=None, fill=0.0):
    return [max((x[i] for i in rows), default=fill) for rows in _segments(seg, num_segments, valid)]


def reference_max_normalize(x, seg, num_segments, valid=None):
    members = _segments(seg, num_segments, valid)
    out = [0.0] * len(x)
    for rows in members:
        mx = max((x[i] for i in rows), default=0.0)
        for i in rows:
            out[i] = x[i] / mx if mx > 0 else 0.0
    return out


def reference_flat_segments(x, seg, num_segments) -> list[bool]:
    """Per element: its segment has one element or all-equal values (to EQUAL_TOL), so that
    segment_normalize gives it exactly 0 by design."""
    flat = [True] * len(x)
    for rows in _segments(seg, num_segments):
        vals = [x[i] for i in rows]
        if len(vals) > 1:
            mx, mn = max(vals), min(vals)
            if mx - mn > EQUAL_TOL * max(abs(mx), abs(mn), 1.0):
                for i in rows:
                    flat[i] = False
    return flat


def _segment_data(n, rng, kind="random"):
    """Values with all-equal segments, near-equal ones, singletons and empty segments."""
    num_segments = max(1, n // 4) + 2
    seg = [rng.randrange(num_segments) for _ in range(n)]
    if kind == "random":
        x = [rng.gauss(0.0, 1.0) for _ in range(n)]
    elif kind == "offset":  # large offset, small spread: cancellation in the mean
        x = [1e6 + rng.gauss(0.0, 1e-3) for _ in range(n)]
    else:
        raise ValueError(kind)
    for i, s in enumerate(seg):
        if s % 5 == 0:
            x[i] = 3.25  # all equal -> exactly 0
        elif s % 5 == 1:
            x[i] = -2.0 * (1.0 + (0.4e-12 if i % 2 else 0.0))  # equal within the relative 1e-12
    return x, seg, num_segments


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("mode,singleton", [("mean_std", "zero"), ("mean_std", "unit"), ("mean", "zero"), ("mean", "unit")])
def test_segment_normalize(n, mode, singleton, device):
    x, seg, num_segments = _segment_data(n, random.Random(n + len(mode)))
    want = reference_segment_normalize(x, seg, num_segments, mode, 1e-6, singleton)
    xt = torch.tensor(x, dtype=torch.float64, device=device)
    st = i64(seg, device)
    got = segment_normalize(xt, st, num_segments, mode, 1e-6, singleton, backend="triton")
    assert got.shape == (n,) and got.dtype == torch.float64
    check_close(got, want)
    twin = segment_normalize_torch(xt.cpu(), st.cpu(), num_segments, mode, 1e-6, singleton)
    check_close(got, twin)  # includes: the twin's exact zeros are exact zeros here
    check_close(twin, want)


@pytest.mark.parametrize("n", [1, 7, BLOCK - 1, BLOCK + 1, 2500])
@pytest.mark.parametrize("order", ["sorted", "random", "long_runs"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_segment_normalize_runs_variant(n, order, dtype, device):
    # the first pass reduces runs of equal segment ids inside the block before its atomics
    from milegpo_kernels.segment.triton_ops import segment_normalize_triton

    rng = random.Random(n + len(order))
    x, seg, num_segments = _segment_data(n, rng)
    if order == "sorted":
        seg = sorted(seg)
    elif order == "long_runs":  # few segments, runs crossing block boundaries
        num_segments = 3
        seg = [min(2, i * 3 // n) for i in range(n)]
    x = [float(torch.tensor(v, dtype=dtype)) for v in x]  # values exact in dtype
    want = reference_segment_normalize(x, seg, num_segments)
    xt, st = torch.tensor(x, dtype=dtype, device=device), i64(seg, device)
    got = segment_normalize_triton(xt, st, num_segments, runs=True)
    check_close(got, want, rtol=1e-12 if dtype == torch.float64 else 1e-4)
    plain = segment_normalize_triton(xt, st, num_segments, runs=False)
    check_close(got, plain.cpu(), rtol=1e-12 if dtype == torch.float64 else 1e-4)


def test_segment_normalize_offset_and_float32(device):
    x, seg, num_segments = _segment_data(1500, random.Random(2), "offset")
    xt, st = torch.tensor(x, dtype=torch.float64, device=device), i64(seg, device)
    got = segment_normalize(xt, st, num_segments, backend="triton")
    twin = segment_normalize_torch(xt.cpu(), st.cpu(), num_segments)
    check_close(got, twin, rtol=1e-6)  # mean of ~1e6: the spread is 1e-9 of it, sums differ in the last bits
    x, seg, num_segments = _segment_data(1500, random.Random(4))
    xt, st = torch.tensor(x, dtype=torch.float32, device=device), i64(seg, device)
    check_close(segment_normalize(xt, st, num_segments, backend="triton"), segment_normalize_torch(xt.cpu(), st.cpu(), num_segments), rtol=1e-5)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("with_valid", [False, True])
def test_sibling_mean(n, with_valid, device):
    rng = random.Random(n + 5)
    x, seg, num_segments = _segment_data(n, rng)
    valid = [rng.random() < 0.7 for _ in range(n)] if with_valid else None
    want_mean, want_n = reference_sibling_mean(x, seg, num_segments, valid)
    xt, st = torch.tensor(x, dtype=torch.float64, device=device), i64(seg, device)
    if with_valid:
        xt = torch.where(torch.tensor(valid, dtype=torch.bool, device=device), xt, torch.full_like(xt, float("nan")))  # padded slots
    vt = None if valid is None else torch.tensor(valid, dtype=torch.bool, device=device)
    mean, cnt = sibling_mean(xt, st, num_segments, vt, backend="triton")
    check_close(mean, want_mean)
    assert cnt.dtype == torch.int64 and to_cpu(cnt).tolist() == want_n
    t_mean, t_cnt = sibling_mean_torch(xt.cpu(), st.cpu(), num_segments, None if vt is None else vt.cpu())
    check_close(mean, t_mean)
    assert torch.equal(to_cpu(cnt), t_cnt)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("with_valid", [False, True])
def test_max_normalize(n, with_valid, device):
    rng = random.Random(n + 9)
    x, seg, num_segments = _segment_data(n, rng)
    x = [abs(v) if s % 7 else 0.0 for v, s in zip(x, seg)]  # x >= 0; some all-zero segments
    valid = [rng.random() < 0.7 for _ in range(n)] if with_valid else None
    want = reference_max_normalize(x, seg, num_segments, valid)
    xt, st = torch.tensor(x, dtype=torch.float64, device=device), i64(seg, device)
    vt = None if valid is None else torch.tensor(valid, dtype=torch.bool, device=device)
    got = max_normalize(xt, st, num_segments, vt, backend="triton")
    assert to_cpu(got).tolist() == want  # a max and one division: exact
    assert max_normalize_torch(xt.cpu(), st.cpu(), num_segments, None if vt is None else vt.cpu()).tolist() == want
    x32 = xt.float()
    got32 = max_normalize(x32, st, num_segments, vt, backend="triton")
    assert got32.dtype == torch.float32
    check_close(got32, max_normalize_torch(x32.cpu(), st.cpu(), num_segments, None if vt is None else vt.cpu()), rtol=1e-6)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("with_valid", [False, True])
def test_segment_max(n, with_valid, device):
    """Any sign, -0.0, infinities, empty segments and a fill value; float64 and float32."""
    rng = random.Random(n + 13)
    x, seg, num_segments = _segment_data(n, rng)
    special = [0.0, -0.0, float("inf"), -float("inf"), -1e308, 5e-324]
    x = [rng.choice(special) if rng.random() < 0.1 else v for v in x]
    valid = [rng.random() < 0.7 for _ in range(n)] if with_valid else None
    vt = None if valid is None else torch.tensor(valid, dtype=torch.bool, device=device)
    st = i64(seg, device)
    for dtype in (torch.float64, torch.float32):
        xt = torch.tensor(x, dtype=dtype, device=device)
        for fill in (0.0, -7.5):
            want = reference_segment_max(to_cpu(xt).tolist(), seg, num_segments, valid, fill)
            got = segment_max(xt, st, num_segments, vt, fill, backend="triton")
            assert got.dtype == dtype and got.shape == (num_segments,)
            assert to_cpu(got).tolist() == want  # a max is exact
            twin = segment_max_torch(xt.cpu(), st.cpu(), num_segments, None if vt is None else vt.cpu(), fill)
            assert twin.tolist() == want


def test_segment_max_edges(device):
    x = torch.tensor([torch.finfo(torch.float64).min, 2.0, -3.0], dtype=torch.float64, device=device)
    s = i64([0, 1, 1], device)
    got = segment_max(x, s, 3, fill=9.0, backend="triton")
    lowest = torch.finfo(torch.float64).min  # a real value, not an empty segment
    assert to_cpu(got).tolist() == [lowest, 2.0, 9.0] == segment_max_torch(x.cpu(), s.cpu(), 3, fill=9.0).tolist()
    assert segment_max(x[:0], s[:0], 0, backend="triton").shape == (0,)
    assert to_cpu(segment_max(x[:0], s[:0], 2, fill=1.5, backend="triton")).tolist() == [1.5, 1.5]
    ints = i64([4, -1, 7], device)  # integers stay on the torch path
    assert to_cpu(segment_max(ints, s, 2, backend="triton")).tolist() == [4, 7]


@pytest.mark.skipif(torch.cuda.is_available(), reason="on CUDA the kernels skip such rows (a check would sync)")
def test_segment_ids_out_of_range_raise_on_cpu(device):
    x = torch.ones(4, dtype=torch.float64, device=device)
    for seg, bad in (([0, 1, 3, 0], "seg\\[2\\] = 3 is outside \\[0, 3\\)"), ([0, -1, 1, 2], "seg\\[1\\] = -1")):
        s = i64(seg, device)
        for name, call in {
            "segment_normalize": lambda: segment_normalize(x, s, 3, backend="triton"),
            "sibling_mean": lambda: sibling_mean(x, s, 3, backend="triton"),
            "max_normalize": lambda: max_normalize(x, s, 3, backend="triton"),
            "segment_max": lambda: segment_max(x, s, 3, backend="triton"),
            "count_distinct": lambda: count_distinct(s, s, x > 0, 3, backend="triton"),
        }.items():
            with pytest.raises(ValueError, match=f"{name}: {bad}"):
                call()


def test_segment_errors(device):
    x = torch.zeros(3, dtype=torch.float64, device=device)
    s = i64([0, 1, 1], device)
    with pytest.raises(ValueError, match="mode"):
        segment_normalize(x, s, 2, mode="median", backend="triton")
    with pytest.raises(TypeError, match="float32 or float64"):
        max_normalize(x.half(), s, 2, backend="triton")
