"""Credit-assignment ops: Triton vs torch vs plain Python (pytest-benchmark).

Run: ``pytest bench/test_kernels.py --benchmark-json=out.json`` and turn the json
into a table with ``python scripts/bench_table.py out.json``.

Inputs are rollout batches of realistic shape: groups of K=8 trajectories of T=50
steps (16 groups = 6,400 rows, 160 = 64,000, 1,600 = 640,000), states drawn from 30
64-bit keys per group along a noisy progress index (trajectories share and revisit
states), about 40% of trajectories ending in the success sink ``(1 << 63) - 1``.
The graph ops run on the rollout graph of that batch (distinct states as nodes,
distinct transitions as edges, the sink as the target); ``graph_scores`` gets that
graph's trajectory counts and hop distances (made with the torch twins);
``shaped_advantage`` random potentials on its nodes and GraphGPO-like returns;
``discounted_returns`` and ``episode_scores`` the rewards of its trajectories;
``graph_return`` its hop distances to the sink (unreachable nodes too) and its rows' next
nodes; ``ordered_rows`` its columns under a random permutation; ``graph_arrays`` its rows'
node and edge ids at the GPU layout's capacities (2N node slots, N edge and group slots).

Implementations (``impl``):
- ``python``: the plain-Python references of tests/kernels/test_<family>.py on
  lists (only up to 64,000 rows: too slow beyond);
- ``torch``: the torch twins on CPU tensors;
- ``torch_cuda`` / ``triton``: the torch twins / the Triton kernels on CUDA tensors
  (only with a GPU; each call is followed by ``torch.cuda.synchronize()``).

Before timing, every torch/triton result is checked against the torch twin on CPU
(exact for integers, 1e-9 relative for float sums), so a wrong kernel fails
instead of reporting a speed-up.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from milegpo.credit.presets import ALFWORLD  # noqa: E402
from milegpo_kernels import (  # noqa: E402
    ScoreParams,
    ShapingParams,
    count_distinct,
    dense_ids,
    discounted_returns,
    episode_scores,
    graph_arrays,
    graph_return,
    graph_scores,
    hop_distance,
    max_normalize,
    max_times_potential,
    ordered_rows,
    segment_normalize,
    shaped_advantage,
    sibling_mean,
)
from tests.kernels.test_counting import reference_count_distinct  # noqa: E402
from tests.kernels.test_graph import reference_hop_distance, reference_max_times_potential  # noqa: E402
from tests.kernels.test_graph_layout import reference_graph_arrays  # noqa: E402
from tests.kernels.test_grouping import reference_dense_ids  # noqa: E402
from tests.kernels.test_ordering import reference_ordered_rows  # noqa: E402
from tests.kernels.test_returns import reference_discounted_returns, reference_episode_scores, reference_graph_return  # noqa: E402
from tests.kernels.test_scoring import reference_graph_scores  # noqa: E402
from tests.kernels.test_segment import reference_max_normalize, reference_segment_normalize, reference_sibling_mean  # noqa: E402
from tests.kernels.test_shaping import reference_shaped_advantage  # noqa: E402

SINK = (1 << 63) - 1
K, T, N_STATES = 8, 50, 30
SIZES = [6_400, 64_000, 640_000]
PYTHON_MAX_ROWS = 64_000
HAS_CUDA = torch.cuda.is_available()
IMPLS = ["python", "torch", "torch_cuda", "triton"]
FACTOR = 0.9


@functools.lru_cache(maxsize=None)
def rollout(rows: int) -> dict[str, torch.Tensor]:
    """One rollout batch of ``rows`` steps and its graph, as CPU tensors."""
    n_groups = rows // (K * T)
    rng = np.random.default_rng(rows)
    group = np.repeat(np.arange(n_groups), K * T)
    traj = np.repeat(np.arange(n_groups * K), T)
    t = np.tile(np.arange(T), n_groups * K)
    keys = rng.integers(-(2**63), 2**63 - 1, size=(n_groups, N_STATES), dtype=np.int64)
    idx = np.clip(t * N_STATES // T + rng.integers(-3, 4, size=rows), 0, N_STATES - 1)
    state = keys[group, idx]
    success = (rng.random(n_groups * K) < 0.4)[traj]
    next_state = np.roll(state, -1)
    last = t == T - 1
    next_state[last] = np.where(success[last], SINK, keys[group[last], N_STATES - 1])
    d = {
        "group": torch.from_numpy(group),
        "traj": torch.from_numpy(traj),
        "state": torch.from_numpy(state),
        "next_state": torch.from_numpy(next_state),
        "success": torch.from_numpy(success),
        "reward": torch.from_numpy(rng.standard_normal(rows)),
    }
    # rollout graph: nodes (group, key) over states and next states, edges distinct transitions
    nodes = dense_ids(torch.cat([d["group"], d["group"]]), torch.cat([d["state"], d["next_state"]]), backend="torch")
    v = int(nodes.count)
    node_of_state, node_of_next = nodes.ids[:rows], nodes.ids[rows:]
    edges = dense_ids(d["group"], d["state"], d["next_state"], backend="torch")
    src, dst = node_of_state[edges.is_first], node_of_next[edges.is_first]
    e = src.shape[0]
    edge_of_row = torch.empty(e, dtype=torch.int64)
    edge_of_row[edges.ids[edges.is_first]] = torch.arange(e)  # edges numbered by first row
    edge_of_row = edge_of_row[edges.ids]
    node_key = torch.empty(v, dtype=torch.int64)
    node_key[nodes.ids] = torch.cat([d["state"], d["next_state"]])
    node_group = torch.empty(v, dtype=torch.int64)
    node_group[nodes.ids] = torch.cat([d["group"], d["group"]])
    seed = torch.where(torch.from_numpy(rng.random(v) < 0.05), torch.from_numpy(rng.random(v)), torch.zeros(v, dtype=torch.float64))
    d.update(
        num_nodes=torch.tensor(v), num_groups=torch.tensor(n_groups), node_of_state=node_of_state, src=src, dst=dst,
        target=node_key == SINK, seed=seed, node_value=torch.from_numpy(rng.random(v)), node_group=node_group,
        edge_value=torch.from_numpy(rng.standard_normal(src.shape[0])),
        last=torch.from_numpy(last), order=torch.from_numpy(rng.permutation(rows)),
        invalid=torch.from_numpy(rng.random(rows) < 0.1), node_of_next=node_of_next,
        phi=torch.from_numpy(rng.random((v, 2)) * (rng.random((v, 1)) < 0.3)),
        r_graph=torch.from_numpy(np.where(rng.random(rows) < 0.4, 10.0 * 0.2 ** rng.integers(0, 5, rows), 0.0)),
        scores=_score_inputs(d, v, n_groups, node_of_state, node_of_next, edge_of_row, src, dst, node_group,
                             node_key == SINK),
        # rows are in group order, so each group's edges are one run: components for the
        # graph kernels, one program each (as the credit pipeline passes them)
        edge_offsets=torch.cat([torch.zeros(1, dtype=torch.int64),
                                torch.cumsum(torch.bincount(node_group[src], minlength=n_groups), 0)]),
        edge_of_row=edge_of_row, num_edges=torch.tensor(e), new_group=_run_starts(d["group"]),
        first=_run_starts(d["traj"]),
    )
    return d


def _run_starts(x: torch.Tensor) -> torch.Tensor:
    starts = torch.ones(x.shape[0], dtype=torch.bool)
    starts[1:] = x[1:] != x[:-1]
    return starts


def _score_inputs(d, v, n_groups, node_of_state, node_of_next, edge_of_row, src, dst, node_group, sink):
    """graph_scores' inputs for the rollout graph: its counts, made with the torch twins."""
    inc = torch.cat([node_of_state, node_of_next])
    nodes = count_distinct(inc, torch.cat([d["traj"], d["traj"]]), torch.cat([d["success"], d["success"]]), v,
                           backend="torch")
    visits = torch.bincount(node_of_state, minlength=v)
    e = src.shape[0]
    edges = count_distinct(edge_of_row, d["traj"], d["success"], e, backend="torch")
    first = _run_starts(d["traj"])
    k_count = torch.bincount(d["group"][first], minlength=n_groups)
    k_pos = torch.bincount(d["group"][first & d["success"]], minlength=n_groups)
    return (src, dst, torch.ones(e, dtype=torch.bool), node_group, torch.ones(v, dtype=torch.bool), sink,
            hop_distance(src, dst, sink, backend="torch"), nodes.distinct, nodes.distinct_pos,
            (visits - nodes.distinct).clamp(min=0), edges.distinct, edges.distinct_pos, k_count, k_pos)


# op -> (argument builder from a rollout dict, python reference, public op)
def _args(op: str, r: dict) -> tuple:
    v, g = int(r["num_nodes"]), int(r["num_groups"])
    return {
        "dense_ids_nodes": lambda: (r["group"], r["state"]),
        "dense_ids_edges": lambda: (r["group"], r["state"], r["next_state"]),
        "count_distinct": lambda: (r["node_of_state"], r["traj"], r["success"], v),
        "hop_distance": lambda: (r["src"], r["dst"], r["target"]),
        "max_times_potential": lambda: (r["src"], r["dst"], r["seed"], FACTOR),
        "segment_normalize": lambda: (r["reward"], r["node_of_state"], v),
        "sibling_mean": lambda: (r["edge_value"], r["src"], v),
        "max_normalize": lambda: (r["node_value"], r["node_group"], g),
        "graph_scores": lambda: (*r["scores"], ScoreParams.of(ALFWORLD)),
        "discounted_returns": lambda: (r["reward"], r["last"], 0.95),
        "episode_scores": lambda: (r["reward"], r["invalid"], r["last"], 0.1),
        "graph_return": lambda: (r["scores"][6], r["node_of_next"], 10.0, 0.2),
        "ordered_rows": lambda: (r["order"], r["group"], r["traj"], r["state"], r["next_state"], r["success"],
                                 r["invalid"], r["reward"]),
        "shaped_advantage": lambda: (r["phi"], r["node_of_state"], r["node_of_next"], r["r_graph"], r["reward"],
                                     ShapingParams.of(ALFWORLD)),
        # groups are numbered 0..G-1 here: dense ids and raw ids at once; the GPU layout's capacities
        "graph_arrays": lambda: (r["node_of_state"], r["node_of_next"], r["edge_of_row"], r["group"], r["group"],
                                 r["state"], r["next_state"], r["new_group"], r["first"], r["success"],
                                 r["num_nodes"], r["num_edges"], r["num_groups"], 2 * r["group"].shape[0],
                                 r["group"].shape[0], r["group"].shape[0], SINK),
    }[op]()


# extra keyword arguments of the Triton path: the graph ops get the per-group components
TRITON_KWARGS = {
    "hop_distance": lambda r: {"edge_offsets": r["edge_offsets"]},
    "max_times_potential": lambda r: {"edge_offsets": r["edge_offsets"]},
}

OPS = {
    "dense_ids_nodes": (reference_dense_ids, dense_ids),
    "dense_ids_edges": (reference_dense_ids, dense_ids),
    "count_distinct": (reference_count_distinct, count_distinct),
    "hop_distance": (reference_hop_distance, hop_distance),
    "max_times_potential": (reference_max_times_potential, max_times_potential),
    "segment_normalize": (reference_segment_normalize, segment_normalize),
    "sibling_mean": (reference_sibling_mean, sibling_mean),
    "max_normalize": (reference_max_normalize, max_normalize),
    "graph_scores": (reference_graph_scores, graph_scores),
    "discounted_returns": (reference_discounted_returns, discounted_returns),
    "episode_scores": (reference_episode_scores, episode_scores),
    "graph_return": (reference_graph_return, graph_return),
    "ordered_rows": (reference_ordered_rows, ordered_rows),
    "shaped_advantage": (reference_shaped_advantage, shaped_advantage),
    "graph_arrays": (reference_graph_arrays, graph_arrays),
}


def _to(args, device):
    return tuple(a.to(device) if isinstance(a, torch.Tensor) else a for a in args)


def _as_list(x):
    return x.tolist() if isinstance(x, torch.Tensor) else x


def _check(op, got, want):
    """got (any device) vs the CPU torch twin's result."""
    if op.startswith("dense_ids"):
        assert int(got.count) == int(want.count) and torch.equal(got.is_first.cpu(), want.is_first)
        return
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    for a, b in zip(got, want):
        a = a.cpu()
        if b.dtype.is_floating_point:
            assert torch.allclose(a, b, rtol=1e-9, atol=1e-12), f"{op}: kernel result differs from the torch twin"
        else:
            assert torch.equal(a, b), f"{op}: kernel result differs from the torch twin"


@pytest.mark.parametrize("rows", SIZES)
@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(
    "op",
    [pytest.param(op, marks=pytest.mark.benchmark(group=op)) for op in OPS],
)
def test_op(benchmark, op, impl, rows):
    if impl == "python" and rows > PYTHON_MAX_ROWS:
        pytest.skip(f"plain Python only up to {PYTHON_MAX_ROWS} rows")
    if impl in ("torch_cuda", "triton") and not HAS_CUDA:
        pytest.skip("needs CUDA")
    r = rollout(rows)
    py_fn, fn = OPS[op]
    args = _args(op, r)
    benchmark.extra_info.update(op=op, impl=impl, rows=rows)
    benchmark.group = op
    if impl == "python":
        py_args = tuple(_as_list(a) for a in args)
        benchmark.pedantic(py_fn, args=py_args, rounds=3, iterations=1, warmup_rounds=0)
        return
    device, backend = ("cpu", "torch") if impl == "torch" else ("cuda", "torch" if impl == "torch_cuda" else "triton")
    dev_args = _to(args, device)
    kw = {k: v.to(device) for k, v in TRITON_KWARGS[op](r).items()} if impl == "triton" and op in TRITON_KWARGS else {}
    want = fn(*args, backend="torch")
    _check(op, fn(*dev_args, backend=backend, **kw), want)  # also compiles the kernels

    if device == "cuda":
        def call():
            out = fn(*dev_args, backend=backend, **kw)
            torch.cuda.synchronize()
            return out
    else:
        def call():
            return fn(*dev_args, backend=backend, **kw)

    benchmark.pedantic(call, rounds=5 if rows >= 640_000 else 20, iterations=1, warmup_rounds=1)
