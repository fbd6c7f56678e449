"""milegpo.credit.result's lazy views: the Triton pipeline leaves the canonical node order for the
reader (the advantages need no sort of the nodes; the node table and the rows' node ids sort them
once, on first read), and Tables rebuild the same result from other tensors."""

from __future__ import annotations

import pytest
import torch

from milegpo.credit import diagnostics, estimate, presets
from milegpo.credit import result as res
from milegpo.credit import vectorized as vec
from milegpo.credit.result import LazyNodes, LazyRows
from milegpo.credit.vectorized import credit_tables
from milegpo_kernels import interpreter_on

from .batches import make_batch

pytestmark = pytest.mark.skipif(not (interpreter_on() or torch.cuda.is_available()),
                                reason="needs a GPU or TRITON_INTERPRET=1")


@pytest.fixture
def sorts(monkeypatch):
    """Counts the lexsort calls of the pipeline (the row sort) and of the result's node order, by
    the number of keys."""
    calls = []
    real = vec.lexsort

    def counting(*keys):
        calls.append(len(keys))
        return real(*keys)

    for module in (vec, res):
        monkeypatch.setattr(module, "lexsort", counting)
    return calls


@pytest.mark.parametrize("static_shapes", [False, True])
def test_node_order_sorted_on_first_read_only(sorts, static_shapes):
    batch = make_batch(3, n_groups=3, k=4, horizon=8, n_states=4)
    assert batch.row_order is not None
    r = vec.estimate_vectorized(batch, "milegpo", presets.ALFWORLD, "full", backend="triton",
                                static_shapes=static_shapes)
    assert sorts == []  # advantages and the other row arrays: no sort at all
    assert isinstance(r.rows, LazyRows) and isinstance(r.nodes, LazyNodes)
    _ = r.rows["a_mix"], r.advantages
    assert sorts == []
    node = r.rows["node"]
    assert sorts == [2]  # (group, key): one lexsort
    _ = r.nodes["key"], r.rows["next_node"], r.nodes["phi_pos"]
    assert sorts == [2]  # shared by the node table and both id columns
    ref = estimate(batch, "milegpo", presets.ALFWORLD, backend="reference")
    assert torch.equal(node, ref.rows["node"])
    assert torch.equal(r.nodes["key"], ref.nodes["key"])
    assert list(r.rows) == list(ref.rows) and list(r.nodes) == list(ref.nodes)


def test_diagnostics_need_no_node_order(sorts):
    batch = make_batch(4, n_groups=2, k=5, horizon=8, n_states=3)
    r = estimate(batch, "milegpo", presets.ALFWORLD, backend="triton")
    d = diagnostics(r)
    assert sorts == []
    ref = diagnostics(estimate(batch, "milegpo", presets.ALFWORLD, backend="reference"))
    assert d.keys() == ref.keys()
    for k in d:
        assert d[k] == pytest.approx(ref[k], nan_ok=True), k


@pytest.mark.parametrize("method", ["grpo", "gigpo", "graphgpo", "milegpo"])
def test_tables_like_rebuilds_the_same_result(method):
    # what estimate(cuda_graph=True) does with a replay's outputs: the same tables, other tensors
    batch = make_batch(5, n_groups=2, k=4, horizon=6, n_states=4)
    tables = credit_tables(batch, method, presets.ALFWORLD, "full", "triton", static_shapes=True)
    copy = tables.like([t.clone() for t in tables.tensors()])
    assert all(a is not b for a, b in zip(tables.tensors(), copy.tensors()))
    got = copy.result(batch, method, presets.ALFWORLD, "full", "triton")
    want = estimate(batch, method, presets.ALFWORLD, backend="triton")  # matches the reference: test_triton_backend
    # two runs of the kernels: float sums may differ in their last bits (atomics land in any order
    # on a GPU, and under the interpreter's shuffled lane order); integer tables are exact
    torch.testing.assert_close(got.advantages, want.advantages, rtol=1e-12, atol=1e-12)
    assert list(got.rows) == list(want.rows) and list(got.nodes) == list(want.nodes)
    for k in want.rows:
        torch.testing.assert_close(got.rows[k], want.rows[k], rtol=1e-12, atol=1e-12, msg=k)
    for k in want.nodes:
        torch.testing.assert_close(got.nodes[k], want.nodes[k], rtol=1e-12, atol=1e-12, msg=k)


def test_empty_batch_tables():
    batch = make_batch(0, n_groups=1, k=2, horizon=3).select(torch.zeros(0, dtype=torch.long))
    for method in ("grpo", "milegpo"):
        tables = credit_tables(batch, method, presets.ALFWORLD, "full", "triton", static_shapes=True)
        r = tables.like(tables.tensors()).result(batch, method, presets.ALFWORLD, "full", "triton")
        assert len(r) == 0 and all(v.numel() == 0 for v in r.rows.values())
        assert all(v.numel() == 0 for v in r.nodes.values())
