"""End-to-end credit: the plain-Python reference vs the vectorised torch backend.

MileGPO full (ALFWorld preset) on 16 groups x 8 trajectories x 50 steps = 6,400 rows
and on 10x that (160 groups, 64,000 rows). Ratios are measured in this run:
``speedup_vs_reference`` (reference median / torch median, same batch) and
``growth_vs_6400`` (64,000-row median / 6,400-row median, same backend; linear
growth is 10). A speed-up is recorded only after torch matched the reference on the
benchmark batch itself.
"""

from __future__ import annotations

import pytest
import torch

from milegpo.credit import estimate, presets
from milegpo.credit.synthetic import benchmark_batch

SIZES = {6400: 16, 64000: 160}
_BATCHES: dict[int, object] = {}
_CHECKED: set[int] = set()


def batch_of(rows: int):
    if rows not in _BATCHES:
        _BATCHES[rows] = benchmark_batch(n_groups=SIZES[rows], group_size=8, horizon=50, seed=0)
        assert len(_BATCHES[rows]) == rows
    return _BATCHES[rows]


def check_agreement(rows: int) -> None:
    if rows in _CHECKED:
        return
    b = batch_of(rows)
    ref = estimate(b, "milegpo", presets.ALFWORLD, "full", backend="reference").advantages
    got = estimate(b, "milegpo", presets.ALFWORLD, "full", backend="torch").advantages
    torch.testing.assert_close(got, ref, atol=1e-9, rtol=1e-9)
    _CHECKED.add(rows)


@pytest.mark.parametrize("rows", sorted(SIZES))
@pytest.mark.parametrize("backend", ["reference", "torch"])
def test_credit_milegpo_full(benchmark, medians, record_ratio, rows, backend):
    benchmark.group = f"credit milegpo full, {rows} rows"
    b = batch_of(rows)
    check_agreement(rows)
    rounds = 3 if backend == "reference" else 10
    benchmark.pedantic(estimate, args=(b, "milegpo", presets.ALFWORLD, "full", backend), rounds=rounds,
                       iterations=1, warmup_rounds=1)
    benchmark.extra_info.update(rows=rows, backend=backend, torch_threads=torch.get_num_threads())
    medians[f"{backend}/{rows}"] = benchmark.stats.stats.median
    if backend == "torch" and f"reference/{rows}" in medians:
        record_ratio(benchmark, "speedup_vs_reference", medians[f"reference/{rows}"] / medians[f"torch/{rows}"])
    if rows == 64000 and f"{backend}/6400" in medians:
        record_ratio(benchmark, "growth_vs_6400", medians[f"{backend}/64000"] / medians[f"{backend}/6400"])
