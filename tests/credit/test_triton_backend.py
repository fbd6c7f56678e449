"""estimate(..., backend="triton") equals the plain-Python reference for every method,
variant and preset. On CPU the Triton kernels run under Triton's interpreter
(tests/conftest.py sets TRITON_INTERPRET=1), so shapes stay small here."""

from __future__ import annotations

import os

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from milegpo.credit import SINK, StepBatch, estimate, presets
from milegpo.credit.batch import FIELDS
from milegpo.credit.synthetic import paths_batch
from milegpo_kernels import interpreter_on

from ..properties import examples
from .batches import make_batch
from .test_estimate import compare

pytestmark = pytest.mark.skipif(not (interpreter_on() or torch.cuda.is_available()),
                                reason="needs a GPU or TRITON_INTERPRET=1")


@pytest.mark.parametrize("seed, kwargs", [
    (0, dict(n_groups=2, k=4, horizon=8)),
    (1, dict(n_groups=3, k=5, horizon=12, n_states=3, p_self=0.6)),
    (2, dict(n_groups=2, k=6, horizon=6, mode="all_fail")),
    (3, dict(n_groups=2, k=4, horizon=6, mode="all_success")),
    (4, dict(n_groups=4, k=1, horizon=5)),
    (5, dict(n_groups=2, k=4, horizon=4, one_step=True)),
])
def test_triton_matches_reference(seed, kwargs):
    compare(make_batch(seed, **kwargs), backend="triton")


@settings(max_examples=examples(int(os.environ.get("MILEGPO_TRITON_EXAMPLES", "4"))))
@given(seed=st.integers(0, 2**32 - 1), n_groups=st.integers(1, 4), k=st.integers(1, 9),
       horizon=st.integers(1, 24), n_states=st.integers(1, 10), mode=st.sampled_from(["mixed", "all_success",
                                                                                       "all_fail"]),
       p_self=st.sampled_from([0.0, 0.2, 0.6]), p_invalid=st.sampled_from([0.0, 0.15, 0.5]),
       static_shapes=st.booleans())
def test_triton_matches_reference_random(seed, n_groups, k, horizon, n_states, mode, p_self, p_invalid,
                                         static_shapes):
    """Random batches (the torch path's random test, smaller: the interpreter is slow), in the
    host layout or the GPU's static one; MILEGPO_TRITON_EXAMPLES=N runs N of them (4 by default)."""
    batch = make_batch(seed, n_groups=n_groups, k=k, horizon=horizon, n_states=n_states, mode=mode,
                       p_self=p_self, p_invalid=p_invalid)
    compare(batch, backend="triton", static_shapes=True if static_shapes else None)


def test_triton_static_shapes_layout_matches_reference():
    # on a GPU the pipeline keeps arrays at their static bounds (no host sync): run that layout here
    compare(make_batch(7, n_groups=2, k=4, horizon=8, n_states=4), backend="triton", static_shapes=True)


def test_triton_unvalidated_batch_sorts_its_rows_itself():
    # a batch built with validate=False has no row_order: the pipeline runs its own row sort
    batch = make_batch(9, n_groups=3, k=4, horizon=7, n_states=4)
    shuffled = batch.select(torch.randperm(len(batch), generator=torch.Generator().manual_seed(1)))
    raw = StepBatch(**shuffled.as_dict(), validate=False)
    assert raw.row_order is None
    compare(raw, backend="triton")
    compare(raw, backend="triton", static_shapes=True)


def test_triton_groups_interleaved_by_trajectory_id():
    # trajectory ids that alternate between groups: the graph kernels relax one group per
    # program, which needs each group's edges in one run whatever the ids' order
    batch = make_batch(8, n_groups=3, k=4, horizon=8, n_states=4)
    trajs = torch.unique(batch.traj)
    new_id = torch.randperm(len(trajs), generator=torch.Generator().manual_seed(0))
    fields = {k: getattr(batch, k) for k in FIELDS}
    fields["traj"] = new_id[torch.searchsorted(trajs, batch.traj)]
    batch = StepBatch(**fields)
    tr_group = batch.group[torch.sort(batch.traj, stable=True).indices]
    assert bool((tr_group[1:] != tr_group[:-1]).sum() > 3)  # the groups do interleave in traj order
    compare(batch, backend="triton")
    compare(batch, backend="triton", static_shapes=True)


def test_triton_equal_branch_margins_and_exact_zero():
    paths = []
    for x in (1, 2, 3):
        paths += [(0, [100, x, SINK])] * 3 + [(0, [100, x])] * 4
    compare(paths_batch(paths, shuffle_seed=1), backend="triton")
    same = paths_batch([(0, [11, 12, 13, SINK])] * 6, rewards={k: [0.0, 0.0, 9.025] for k in range(6)})
    for method in ("grpo", "gigpo", "graphgpo", "milegpo"):
        r = estimate(same, method, presets.ALFWORLD, backend="triton")
        assert torch.equal(r.advantages, torch.zeros(len(same), dtype=torch.float64))


@pytest.mark.parametrize("method, variant", [("grpo", "full"), ("gigpo", "full"), ("graphgpo", "full"),
                                             ("milegpo", "md"), ("milegpo", "rcs"), ("milegpo", "full")])
@pytest.mark.parametrize("validated", [True, False])
def test_gpu_layout_pipeline_reads_nothing_on_the_host(method, variant, validated):
    """The CPU stand-in for the GPU's no-host-sync test, so that a change made without a GPU
    cannot slip one in: the Triton pipeline at the GPU's static layout, its host-side input checks
    off (as on CUDA tensors), makes none of the ops that would sync or copy from the host there,
    up to the advantages (trimming the node table on read is the one host read, by design)."""
    from milegpo.credit.vectorized import credit_tables
    from milegpo_kernels.inputs import host_checks
    from milegpo_kernels.testing import no_host_reads

    batch = make_batch(11, n_groups=3, k=4, horizon=8, n_states=4)
    if not validated:  # the pipeline sorts the rows itself
        batch = StepBatch(**batch.as_dict(), validate=False)
    with host_checks(False), no_host_reads(f"{method}/{variant}"):  # raises naming the host reads
        tables = credit_tables(batch, method, presets.ALFWORLD, variant, "triton", static_shapes=True)
        adv = tables.result(batch, method, presets.ALFWORLD, variant, "triton").advantages
    ref = estimate(batch, method, presets.ALFWORLD, variant, backend="reference").advantages
    torch.testing.assert_close(adv, ref, rtol=1e-9, atol=1e-9)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.gpu
def test_cuda_estimate_makes_no_host_sync():
    from milegpo.credit.synthetic import benchmark_batch

    batch = benchmark_batch(n_groups=16).to("cuda")
    estimate(batch, "milegpo", presets.ALFWORLD, backend="auto")  # warm-up: compile the kernels
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for method in ("grpo", "gigpo", "graphgpo", "milegpo"):
            result = estimate(batch, method, presets.ALFWORLD, backend="auto")
    finally:
        torch.cuda.set_sync_debug_mode(0)
    ref = estimate(batch.to("cpu"), "milegpo", presets.ALFWORLD, backend="torch")
    torch.testing.assert_close(result.advantages.cpu(), ref.advantages, atol=1e-9, rtol=1e-9)
