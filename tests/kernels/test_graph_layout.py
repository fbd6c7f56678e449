"""graph_arrays: Triton kernel vs torch twin vs plain Python.

Rollout rows in (group, traj, t) order with dense ids numbered by first occurrence (as
dense_ids numbers them), at capacities equal to the counts (the CPU layout) and at the
static bounds (2N nodes, N edges, N groups: the GPU layout); no rows, one row, one-row
trajectories, counts and capacities around the kernel's block of 1024, sink and
negative keys, 1e5 rows. Ids out of range, ids that are not dense, counts past their
capacity and wrong dtypes are refused on CPU.
"""

from __future__ import annotations

import random

import pytest
import torch

from milegpo_kernels import GraphArrays, graph_arrays, graph_arrays_torch

from .helpers import BLOCK, I64_MIN, SINK

pytestmark = pytest.mark.usefixtures("garbage_empty")


def reference_graph_arrays(u, v, e, gid, group, state, next_state, new_group, first, success, n_nodes, n_edges, n_groups,
                    num_nodes, num_edges, num_groups, sink) -> dict:
    node_gid, node_key, node_group = [0] * num_nodes, [0] * num_nodes, [0] * num_nodes
    for i in range(len(u)):
        for slot, key in ((u[i], state[i]), (v[i], next_state[i])):
            node_gid[slot], node_key[slot], node_group[slot] = gid[i], key, group[i]
    node_valid = [j < n_nodes for j in range(num_nodes)]
    src, dst = [0] * num_edges, [0] * num_edges
    for i in range(len(u)):
        src[e[i]], dst[e[i]] = u[i], v[i]
    offsets = [n_edges] * num_groups + [num_edges]
    k, k_pos = [0] * num_groups, [0] * num_groups
    for i in range(len(u)):
        if new_group[i]:
            offsets[gid[i]] = e[i]
        if first[i]:
            k[gid[i]] += 1
            k_pos[gid[i]] += int(success[i])
    return {"node_gid": node_gid, "node_key": node_key, "node_group": node_group, "node_valid": node_valid,
            "is_sink": [node_valid[j] and node_key[j] == sink for j in range(num_nodes)], "src": src, "dst": dst,
            "edge_valid": [j < n_edges for j in range(num_edges)], "edge_offsets": offsets, "k_count": k,
            "k_pos_count": k_pos}


def rollout(rng: random.Random, n_groups: int, k: int, max_len: int, n_states: int = 6) -> dict:
    """Rows in (group, traj, t) order and their dense ids, numbered by first occurrence."""
    keys = [SINK, I64_MIN, -1, 0] + [rng.randrange(-(1 << 40), 1 << 40) for _ in range(n_states)]
    rows = {c: [] for c in ("group", "state", "next_state", "new_group", "first", "success", "gid")}
    for g_idx, raw in enumerate(sorted(rng.sample(range(-50, 10_000), n_groups))):
        for j in range(k):
            length, ok = rng.randint(1, max_len), rng.random() < 0.5
            s = rng.choice(keys)
            for t in range(length):
                ns = SINK if (ok and t == length - 1) else rng.choice(keys)
                for c, x in (("group", raw), ("state", s), ("next_state", ns), ("new_group", j == 0 and t == 0),
                             ("first", t == 0), ("success", ok), ("gid", g_idx)):
                    rows[c].append(x)
                s = ns
    nodes, edges = {}, {}
    rows["u"] = [nodes.setdefault((g, s), len(nodes)) for g, s in zip(rows["gid"], rows["state"])]
    rows["v"] = [nodes.setdefault((g, s), len(nodes)) for g, s in zip(rows["gid"], rows["next_state"])]
    rows["e"] = [edges.setdefault(p, len(edges)) for p in zip(rows["u"], rows["v"])]
    rows["counts"] = (len(nodes), len(edges), n_groups)
    return rows


def _args(r: dict, device, caps=None):
    n = len(r["u"])
    ints = [torch.tensor(r[c], dtype=torch.int64, device=device).reshape(n)
            for c in ("u", "v", "e", "gid", "group", "state", "next_state")]
    bools = [torch.tensor(r[c], dtype=torch.bool, device=device).reshape(n) for c in ("new_group", "first", "success")]
    counts = [torch.tensor(c, dtype=torch.int64, device=device) for c in r["counts"]]
    caps = r["counts"] if caps is None else caps
    return (*ints, *bools, *counts, *caps, SINK)


def _py(r: dict, caps=None):
    caps = r["counts"] if caps is None else caps
    return reference_graph_arrays(*(r[c] for c in ("u", "v", "e", "gid", "group", "state", "next_state", "new_group",
                                            "first", "success")), *r["counts"], *caps, SINK)


def _check(got: GraphArrays, want: dict):
    for name in GraphArrays._fields:
        assert getattr(got, name).cpu().tolist() == want[name], name


CASES = {"empty": (0, 1, 1), "one_row": (1, 1, 1), "one_group": (1, 8, 20), "one_row_trajectories": (5, 40, 1),
         "mixed": (7, 8, 50), "around_block": (9, 6, 40)}


@pytest.mark.parametrize("layout", ["counts", "static"])
@pytest.mark.parametrize("case", list(CASES))
def test_graph_arrays(case, layout, device):
    n_groups, k, max_len = CASES[case]
    r = rollout(random.Random(len(case)), n_groups, k, max_len) if n_groups else rollout(random.Random(0), 0, 1, 1)
    n = len(r["u"])
    caps = None if layout == "counts" else (2 * n, n, n)
    want = _py(r, caps)
    args = _args(r, device, caps)
    _check(graph_arrays(*args, backend="triton"), want)
    _check(graph_arrays_torch(*(a.cpu() if isinstance(a, torch.Tensor) else a for a in args)), want)


def test_graph_arrays_around_the_block_and_1e5(device):
    for n_groups, k, max_len, caps in ((3, 1, BLOCK, None), (1, 1, BLOCK - 1, (BLOCK + 1, BLOCK, BLOCK)),
                                       (260, 8, 99, "static")):
        r = rollout(random.Random(n_groups), n_groups, k, max_len)
        n = len(r["u"])
        caps = (2 * n, n, n) if caps == "static" else caps
        _check(graph_arrays(*_args(r, device, caps), backend="triton"), _py(r, caps))
    assert n > 100_000


def test_graph_arrays_errors(device):
    r = rollout(random.Random(1), 2, 3, 4)
    args = list(_args(r, device))
    n_nodes, n_edges = r["counts"][:2]
    with pytest.raises(ValueError, match=r"graph_arrays: u must be \(\d+,\) torch.int64"):
        graph_arrays(args[0].int(), *args[1:], backend="triton")
    with pytest.raises(ValueError, match=r"graph_arrays: success must be \(\d+,\) torch.bool"):
        graph_arrays(*args[:9], args[9].long(), *args[10:], backend="triton")
    with pytest.raises(ValueError, match=r"graph_arrays: n_edges must be a 0-d int64 tensor"):
        graph_arrays(*args[:11], args[11].reshape(1), *args[12:], backend="triton")
    with pytest.raises(ValueError, match=r"graph_arrays: num_groups must be an int >= 0"):
        graph_arrays(*args[:15], -1, SINK, backend="triton")
    with pytest.raises(ValueError, match=r"graph_arrays: sink must be an int64 key"):
        graph_arrays(*args[:16], 1 << 63, backend="triton")
    if device != "cpu":  # on CUDA the kernel skips such ids (a check would sync)
        return
    for backend in ("torch", "triton"):
        bad = list(args)
        bad[1] = bad[1].clone()
        bad[1][2] = n_nodes
        with pytest.raises(ValueError, match=rf"graph_arrays: v\[2\] = {n_nodes} is outside \[0, {n_nodes}\)"):
            graph_arrays(*bad, backend=backend)
        bad = list(args)
        bad[11] = torch.tensor(n_edges + 1)
        with pytest.raises(ValueError, match=rf"n_edges = {n_edges + 1} is outside \[0, num_edges = {n_edges}\]"):
            graph_arrays(*bad, backend=backend)
        bad = list(args)
        bad[10] = torch.tensor(n_nodes - 1)
        with pytest.raises(ValueError, match=rf"a node id is >= n_nodes = {n_nodes - 1}"):
            graph_arrays(*bad, backend=backend)
        bad = list(args)  # edge 0 taken by no row: edge ids are not dense
        bad[2] = torch.where(bad[2] == 0, 1, bad[2])
        with pytest.raises(ValueError, match=rf"slot 0 < n_edges = {n_edges} is no row's id"):
            graph_arrays(*bad, backend=backend)
