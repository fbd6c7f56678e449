"""Credit is group-local, which is what lets each process of a many-process run estimate only its own
task groups (MileGPOTrainer): for every method, variant, preset and backend, the batch split by task
group into 2 or 3 parts, each part's ids renumbered from 0 and its rows shuffled, gives every row the
advantage (and every per-row term) one estimate of the whole batch gives it, and the parts' merged
diagnostics are the whole batch's.

What in the pipeline could break this, and why it does not: group / trajectory ids are renumbered per
batch (dense run numbers: only their order inside a group matters, and a group's rows keep their order);
the normalisations Norm_q and Norm_{q,s} are per group and per (group, state); the GraphGPO / MileGPO
graph, distances, potentials and trajectory counts are per group (nodes are (group, key)); every
max-normalisation (centrality, c(e), psi-bar, S0+, S-, S_pcc+) is over one group's nodes or edges. HGPO's
history groups start from (group, state) and extend by the row before in the same trajectory, so every depth
stays inside a task group; G2PO's node values are means over (group, state), its A_EC normalises over a group.
CASES holds every registered method (hgpo and g2po included)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from milegpo.credit import FIELDS, StepBatch, diagnostics, estimate
from milegpo.credit.diagnostic_metrics import diagnostic_parts, diagnostics_from_parts, merge_diagnostic_parts
from milegpo.credit.synthetic import random_batch
from milegpo_kernels import interpreter_on

from .batches import make_batch
from .test_estimate import CASES, PRESETS


def split_by_group(batch: StepBatch, n_parts: int, seed: int, relabel: str) -> list[tuple[StepBatch, np.ndarray]]:
    """The batch's task groups dealt at random to ``n_parts`` parts (each gets at least one), each part's
    group and trajectory ids renumbered 0, 1, ... (so that ids repeat across parts). ``relabel="ordered"``:
    the rows and the ids keep their order (as in MileGPOTrainer, whose whole batch is the processes' rows
    one after another, ids offset by rank); ``"random"``: the rows are shuffled and the ids renumbered in
    a random order. Returns (part, rows of the batch it holds)."""
    rng = np.random.default_rng(seed)
    cols = batch.to_numpy()
    groups = rng.permutation(np.unique(cols["group"]))
    assert len(groups) >= n_parts, "the batch needs a group per part"
    owner = {int(g): i % n_parts for i, g in enumerate(groups)}
    parts = []
    for part in range(n_parts):
        rows = np.flatnonzero([owner[int(g)] == part for g in cols["group"]])
        if relabel == "random":
            rows = rows[rng.permutation(len(rows))]
        local = {k: cols[k][rows] for k in FIELDS}
        for name in ("group", "traj"):
            ids = np.unique(local[name])
            new_ids = np.arange(len(ids)) if relabel == "ordered" else rng.permutation(len(ids))
            new_id = dict(zip(ids.tolist(), new_ids.tolist()))
            local[name] = np.array([new_id[int(x)] for x in local[name]], dtype=np.int64)
        parts.append((StepBatch(**local), rows))
    return parts


def assert_same_diagnostics(got: dict, expected: dict, what: str) -> None:
    assert list(got) == list(expected), what
    for k, v in expected.items():
        if math.isnan(v):
            assert math.isnan(got[k]), f"{what} {k}: {got[k]} != nan"
        else:
            assert got[k] == pytest.approx(v, rel=1e-12, abs=1e-12), f"{what} {k}: {got[k]} != {v}"


def assert_group_local(batch: StepBatch, backend: str, n_parts: int, seed: int, relabel: str = "ordered",
                       cases=CASES) -> None:
    """Each part's credit is the whole batch's on its rows: bit for bit where rows and ids keep their order
    (a group's rows then meet the same operations in the same order in either batch); to rounding (1e-12)
    where they do not (the sums over a group's rows run in another order), and on the Triton backend, whose
    atomic sums run in no set order (on a GPU, and under the tests' shuffled interpreter): there one batch
    estimated twice may differ in the last bits."""
    parts = split_by_group(batch, n_parts, seed, relabel)

    def same(got, expected):
        if relabel == "ordered" and backend != "triton":
            return torch.equal(got, expected)
        return torch.allclose(got, expected, rtol=1e-12, atol=1e-12)

    for pname, cfg in PRESETS.items():
        for method, variant in cases:
            tag = f"{method}/{variant}/{pname}/{backend}/{n_parts} parts/{relabel} ids"
            whole = estimate(batch, method, cfg, variant, backend)
            results = [estimate(part, method, cfg, variant, backend) for part, _ in parts]
            for (part, rows), res in zip(parts, results):
                assert same(res.advantages, whole.advantages[rows]), f"{tag}: advantages"
                for k in whole.rows:
                    if k not in ("node", "next_node"):  # indices into each batch's own node table
                        assert same(res.rows[k], whole.rows[k][rows]), f"{tag}: rows[{k}]"
            merged = diagnostics_from_parts(merge_diagnostic_parts([diagnostic_parts(r) for r in results]))
            assert_same_diagnostics(merged, diagnostics(whole), tag)


@pytest.mark.parametrize("relabel", ["ordered", "random"])
@pytest.mark.parametrize("n_parts", [2, 3])
@pytest.mark.parametrize("seed", range(4))
def test_credit_of_groups_split_across_processes_equals_one_estimate(seed, n_parts, relabel):
    assert_group_local(make_batch(seed, n_groups=6, k=5, horizon=10, n_states=5), "torch", n_parts, seed, relabel)
    assert_group_local(random_batch(n_groups=6, group_size=4, horizon=12, seed=seed), "torch", n_parts, seed,
                       relabel)


@pytest.mark.parametrize("n_parts", [2, 3])
def test_reference_backend_is_group_local(n_parts):
    assert_group_local(make_batch(11, n_groups=4, k=4, horizon=6, n_states=4), "reference", n_parts, 11)


@pytest.mark.skipif(not (interpreter_on() or torch.cuda.is_available()), reason="needs a GPU or TRITON_INTERPRET=1")
def test_triton_backend_is_group_local():
    batch = make_batch(5, n_groups=3, k=3, horizon=5, n_states=4)
    assert_group_local(batch, "triton", 3, 5, cases=[("milegpo", "full")])  # the interpreter is slow: one case


@pytest.mark.skipif(not (interpreter_on() or torch.cuda.is_available()), reason="needs a GPU or TRITON_INTERPRET=1")
@pytest.mark.parametrize("method", ["hgpo", "g2po"])
def test_triton_backend_is_group_local_for_the_field_s_methods(method):
    # HGPO's deeper history groups and G2PO's node values on the Triton ops (issue 42)
    batch = make_batch(6, n_groups=3, k=3, horizon=6, n_states=3)
    assert_group_local(batch, "triton", 3, 6, relabel="random", cases=[(method, "full")])


def test_diagnostics_of_one_batch_come_from_its_parts():
    """diagnostics(result) is diagnostics_from_parts of its own parts; merging one part is the identity;
    an empty batch gives NaN shares and counts of 0."""
    result = estimate(random_batch(n_groups=3, seed=2), "milegpo")
    parts = diagnostic_parts(result)
    assert merge_diagnostic_parts([parts]) == parts
    assert diagnostics_from_parts(parts) == diagnostics(result)
    empty = estimate(StepBatch(**{k: np.zeros(0, dtype=bool if k in ("success", "invalid") else
                                           np.float64 if k == "reward" else np.int64) for k in FIELDS}), "milegpo")
    d = diagnostics(empty)
    assert d["rows"] == 0 and d["candidates"] == 0 and math.isnan(d["adv_mean"]) and math.isnan(d["tie_share"])
    merged = diagnostics_from_parts(merge_diagnostic_parts([diagnostic_parts(empty), parts]))
    assert_same_diagnostics(merged, diagnostics(result), "empty + batch")


def test_merging_parts_of_different_methods_is_refused():
    batch = random_batch(n_groups=2, seed=1)
    with pytest.raises(ValueError, match="part 1 has keys"):
        merge_diagnostic_parts([diagnostic_parts(estimate(batch, "milegpo")),
                                diagnostic_parts(estimate(batch, "grpo"))])
