"""The synthetic batches of milegpo.credit.synthetic (the benchmarks' and the examples' inputs)."""

import torch

from milegpo.credit import SINK
from milegpo.credit.synthetic import benchmark_batch, random_batch


def test_synthetic_batches():
    b = benchmark_batch()
    assert len(b) == 16 * 8 * 50
    assert int(b.t.max()) == 49 and len(set(b.traj.tolist())) == 128 and len(set(b.group.tolist())) == 16
    a1, a2 = random_batch(seed=3), random_batch(seed=3)
    assert all(torch.equal(getattr(a1, k), getattr(a2, k)) for k in ("group", "traj", "t", "state", "reward"))
    assert not torch.equal(random_batch(seed=4).state, a1.state)
    s = random_batch(2, 5, 10, seed=1, outcome="success")
    assert bool(s.success.all()) and float(s.reward.sum()) == 10 * 10
    f = random_batch(2, 5, 10, seed=1, outcome="fail")
    assert not bool(f.success.any()) and float(f.reward.sum()) == 0
    one = random_batch(3, 1, 10, seed=2)
    assert len(set(one.traj.tolist())) == 3
    assert not bool((b.state == SINK).any()) and bool((b.state < 0).any())
