"""count_distinct (milegpo_kernels.counting): the Triton kernel vs its torch twin vs plain Python
(tests/kernels/helpers.py says how)."""

from __future__ import annotations

import random

import pytest
import torch

from milegpo_kernels import count_distinct
from milegpo_kernels.counting import count_distinct_torch

from .helpers import SIZES, i64, random_keys, to_cpu

pytestmark = pytest.mark.usefixtures("garbage_empty")


# plain-Python reference (the benchmarks import it)


def reference_count_distinct(seg, member, positive, num_segments):
    """(distinct, distinct_pos, total) per segment; positive read at the pair's first row."""
    distinct = [0] * num_segments
    distinct_pos = [0] * num_segments
    total = [0] * num_segments
    seen = set()
    for s, m, p in zip(seg, member, positive):
        total[s] += 1
        if (s, m) not in seen:
            seen.add((s, m))
            distinct[s] += 1
            distinct_pos[s] += int(p)
    return distinct, distinct_pos, total


def _incidences(n, num_segments, n_members, rng, member_keys="small"):
    seg = [rng.randrange(num_segments) for _ in range(n)]
    members = list(range(n_members)) if member_keys == "small" else random_keys(n_members, "adversarial", rng)
    member = [rng.choice(members) for _ in range(n)]
    won = {m: rng.random() < 0.4 for m in members}
    positive = [won[m] for m in member]
    return seg, member, positive


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("member_keys", ["small", "adversarial"])
def test_count_distinct(n, member_keys, device):
    rng = random.Random(n + 11)
    num_segments = max(1, n // 5) + 3  # some segments stay empty
    seg, member, positive = _incidences(n, num_segments, 40, rng, member_keys)
    want = reference_count_distinct(seg, member, positive, num_segments)
    args = (i64(seg, device), i64(member, device), torch.tensor(positive, dtype=torch.bool, device=device))
    got = count_distinct(*args, num_segments, backend="triton")
    twin = count_distinct_torch(*[a.cpu() for a in args], num_segments)
    for g, t, w in zip(got, twin, want):
        assert g.dtype == torch.int64 and g.shape == (num_segments,)
        assert to_cpu(g).tolist() == w
        assert t.tolist() == w


def test_count_distinct_no_segments(device):
    e = torch.empty(0, dtype=torch.int64, device=device)
    got = count_distinct(e, e, e.bool(), 0, backend="triton")
    assert all(g.shape == (0,) for g in got)
