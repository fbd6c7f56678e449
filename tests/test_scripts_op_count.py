"""scripts/credit_op_count.py: the device-free count of what one credit call launches."""

import importlib.util
from pathlib import Path

import pytest

from milegpo_kernels import interpreter_on

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "credit_op_count.py"


@pytest.mark.skipif(not interpreter_on(), reason="counts under Triton's interpreter (TRITON_INTERPRET=1)")
def test_op_count_counts_aten_ops_and_triton_launches():
    spec = importlib.util.spec_from_file_location("credit_op_count", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    ops, launches = mod.count(400, "milegpo")
    assert ops["sort"] == 0  # a validated batch brings its row order; the node order waits for a reader
    read_ops, _ = mod.count(400, "milegpo", read_nodes=True)
    assert read_ops["sort"] == 2  # the node table read: the (group, key) lexsort
    raw_ops, _ = mod.count(400, "milegpo", row_order=False)
    assert raw_ops["sort"] == 3  # an unvalidated batch is sorted here
    assert "copy_" not in ops or ops["copy_"] < 20  # the interpreter's own copies are not counted
    assert launches["_hop_kernel"] == 1 and launches["_max_times_kernel"] == 1
    assert launches["_insert_kernel"] == 3  # nodes, edges, and the distinct counts of both in one call
    # the scoring (eqs. 2-18) and the shaping (eqs. 9-22) are one fused op each: 7 + 3 launches
    assert launches["_node_pcc_kernel"] == 1 and launches["_shape_out_kernel"] == 1
    assert "segment_max" not in str(launches) and "_seg_max_kernel" not in launches
    # the graph's tables, r^G and Z are one pass each
    assert launches["_graph_arrays_kernel"] == 1 and launches["_graph_return_kernel"] == 1
    assert launches["_episode_kernel"] == 1 and "scatter_add_" not in ops
    assert 40 < sum(ops.values()) + sum(launches.values()) < 90  # 407 before the fused ops, 61 after
    grpo_ops, grpo_launches = mod.count(400, "grpo")
    assert sum(grpo_ops.values()) < sum(ops.values()) and "_hop_kernel" not in grpo_launches
