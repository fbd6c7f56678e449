"""The rollout graph's node and edge arrays from the rows' dense ids: one op.

Rows come in (group, traj, t) order with dense ids already found (:func:`dense_ids`):
``u`` / ``v`` the node of each row's state / next state, ``e`` its edge, ``gid`` its
group (numbered 0..G-1). :func:`graph_arrays` lays the graph out at static capacities
(``num_nodes`` >= V nodes, ``num_edges`` >= E edges, ``num_groups`` >= G groups, so that
on a GPU nothing waits for the host to learn a count):

- per node slot: its group id, state key and raw group (0 in padding slots past the
  node count), whether it holds a node, whether it is the sink (key == ``sink``);
- per edge slot: its source and destination node (0 -> 0 in padding slots, a self-loop
  that changes no relaxation), whether it holds an edge;
- ``edge_offsets`` (num_groups + 1,): group g's edges start at the edge of its first
  row (edges are numbered in order of first occurrence and rows come in group order);
  groups past G are empty (at E); the last entry is ``num_edges``, so padding edge
  slots form the last component (the ``edge_offsets`` of :func:`hop_distance`);
- per group: K, its trajectories, and K+, its successful ones (spec section 2).

The torch twin is a score of small ops (scatters, comparisons, fills); the Triton
kernel writes everything in one pass over rows and slots (plus one memset for K).

Inputs: ``u``, ``v``, ``e``, ``gid``, ``group`` (raw group ids), ``state``,
``next_state`` (N,) int64; ``new_group`` (row starts a group), ``first`` (row starts a
trajectory), ``success`` (N,) bool; ``n_nodes``, ``n_edges``, ``n_groups`` 0-d int64
tensors (the counts, on the rows' device); ``sink`` an int64 key. Ids must be dense:
every slot below a count is some row's id, and ids are below their capacity. On CPU
the op checks that and raises ValueError naming the first offence; on CUDA (where a
check would be a host sync) ids outside their capacity are skipped.
"""

from __future__ import annotations

from .._backend import resolve
from .torch_ops import BOOL_COLUMNS, INT_COLUMNS, GraphArrays, check_inputs, graph_arrays_torch

__all__ = ["GraphArrays", "graph_arrays", "graph_arrays_torch"]


def graph_arrays(u, v, e, gid, group, state, next_state, new_group, first, success, n_nodes, n_edges, n_groups,
                 num_nodes: int, num_edges: int, num_groups: int, sink: int, *,
                 backend: str = "auto") -> GraphArrays:
    """See the module."""
    cols = dict(zip(INT_COLUMNS + BOOL_COLUMNS, (u, v, e, gid, group, state, next_state, new_group, first, success)))
    check_inputs(cols, {"n_nodes": n_nodes, "n_edges": n_edges, "n_groups": n_groups},
                 {"num_nodes": num_nodes, "num_edges": num_edges, "num_groups": num_groups}, sink)
    args = (*cols.values(), n_nodes, n_edges, n_groups, num_nodes, num_edges, num_groups, sink)
    if resolve(backend, u) == "triton":
        from .triton_ops import graph_arrays_triton

        return graph_arrays_triton(*args)
    return graph_arrays_torch(*args)
