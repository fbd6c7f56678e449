"""The backend choice (milegpo_kernels._backend): torch on CPU tensors, Triton on CUDA ones, the
interpreter only where switched on, and no host sync on CUDA."""

from __future__ import annotations

import os
import random

import pytest
import torch

from milegpo_kernels import (
    count_distinct,
    dense_ids,
    hop_distance,
    max_normalize,
    max_times_potential,
    segment_max,
    segment_normalize,
    sibling_mean,
)
from milegpo_kernels.graph import hop_distance_torch, max_times_potential_torch
from milegpo_kernels.grouping import dense_ids_torch
from milegpo_kernels.segment import segment_max_torch

from .helpers import SINK, i64, random_keys, to_cpu

pytestmark = pytest.mark.usefixtures("garbage_empty")


def test_auto_backend_on_cpu_is_torch(device):
    """CPU tensors with backend="auto" take the torch path (its sorted ids)."""
    g, k = i64([1, 0, 1], "cpu"), i64([SINK, 5, SINK], "cpu")
    assert dense_ids(g, k).ids.tolist() == [1, 0, 1]  # sorted order: torch twin
    got = dense_ids(g.to(device), k.to(device), backend="triton")
    assert to_cpu(got.ids).tolist() == [0, 1, 0]  # first-occurrence order


def test_triton_on_cpu_needs_the_interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET"):
        dense_ids(i64([1], "cpu"), backend="triton")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"),
                    reason="needs CUDA with TRITON_INTERPRET=0")
def test_gpu_auto_backend_without_host_sync():
    """On CUDA, backend="auto" runs the kernels and no op synchronises with the host."""
    dev = "cuda"
    rng = random.Random(0)
    n = 5000
    g = torch.tensor([rng.randrange(8) for _ in range(n)], device=dev)
    k = torch.tensor(random_keys(n, "adversarial", rng), device=dev)
    x = torch.randn(n, dtype=torch.float64, device=dev)
    pos = torch.rand(n, device=dev) < 0.5
    seg = torch.randint(0, 100, (n,), device=dev)
    src, dst = torch.randint(0, 300, (n,), device=dev), torch.randint(0, 300, (n,), device=dev)
    target = torch.zeros(300, dtype=torch.bool, device=dev)
    target[0] = True

    def run_all():
        return (dense_ids(g, k), count_distinct(seg, g, pos, 100), hop_distance(src, dst, target),
                max_times_potential(src, dst, target.double(), 0.9), segment_normalize(x, seg, 100),
                sibling_mean(x, seg, 100), max_normalize(x.abs(), seg, 100), segment_max(x, seg, 100))

    warm = run_all()  # compiles
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        out = run_all()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
    assert int(out[0].count) == int(dense_ids_torch(g.cpu(), k.cpu()).count)
    assert torch.equal(out[2].cpu(), hop_distance_torch(src.cpu(), dst.cpu(), target.cpu()))
    assert torch.equal(out[3].cpu(), max_times_potential_torch(src.cpu(), dst.cpu(), target.double().cpu(), 0.9))
    for a, b in zip(warm[1], out[1]):
        assert torch.equal(a, b)  # integer atomics: deterministic
    assert torch.equal(out[7].cpu(), segment_max_torch(x.cpu(), seg.cpu(), 100))
