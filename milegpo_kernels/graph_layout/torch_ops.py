"""The result type, the input checks and the torch twin of :func:`milegpo_kernels.graph_arrays`
(scatters and fills); the op is described in :mod:`milegpo_kernels.graph_layout`."""

from __future__ import annotations

from typing import NamedTuple

import torch

from ..inputs import check_id_ranges, reads_host

INT_COLUMNS = ("u", "v", "e", "gid", "group", "state", "next_state")
BOOL_COLUMNS = ("new_group", "first", "success")


class GraphArrays(NamedTuple):
    """Per node slot (num_nodes,): ``node_gid``, ``node_key``, ``node_group`` int64 and
    ``node_valid``, ``is_sink`` bool; per edge slot (num_edges,): ``src``, ``dst`` int64,
    ``edge_valid`` bool; ``edge_offsets`` (num_groups + 1,) int64; per group (num_groups,):
    ``k_count``, ``k_pos_count`` int64."""

    node_gid: torch.Tensor
    node_key: torch.Tensor
    node_group: torch.Tensor
    node_valid: torch.Tensor
    is_sink: torch.Tensor
    src: torch.Tensor
    dst: torch.Tensor
    edge_valid: torch.Tensor
    edge_offsets: torch.Tensor
    k_count: torch.Tensor
    k_pos_count: torch.Tensor


def check_inputs(cols: dict, counts: dict, caps: dict, sink) -> None:
    """Raise ValueError naming the first input of :func:`milegpo_kernels.graph_arrays` that is wrong: a
    column's dtype / shape / device, a count, a capacity, the sink; on the host also an id outside its
    capacity or ids that are not dense (:func:`milegpo_kernels.inputs.reads_host`)."""
    n, dev = cols["u"].shape[0], cols["u"].device
    for name, t in cols.items():
        dtype = torch.bool if name in BOOL_COLUMNS else torch.int64
        if t.dtype != dtype or t.shape != (n,) or t.device != dev:
            raise ValueError(f"graph_arrays: {name} must be ({n},) {dtype} on {dev}, got {t.dtype} "
                             f"{tuple(t.shape)} on {t.device}")
    for name, c in counts.items():
        if c.dtype != torch.int64 or c.dim() != 0 or c.device != dev:
            raise ValueError(f"graph_arrays: {name} must be a 0-d int64 tensor on {dev}, got {c.dtype} "
                             f"{tuple(c.shape)} on {c.device}")
    for name, cap in caps.items():
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 0:
            raise ValueError(f"graph_arrays: {name} must be an int >= 0, got {cap!r}")
    if isinstance(sink, bool) or not isinstance(sink, int) or not -(1 << 63) <= sink < (1 << 63):
        raise ValueError(f"graph_arrays: sink must be an int64 key, got {sink!r}")
    if not reads_host(cols["u"]):
        return  # on CUDA reading the ids or counts would be a host sync
    nodes, edges, groups = caps["num_nodes"], caps["num_edges"], caps["num_groups"]
    check_id_ranges({"u": (cols["u"], nodes), "v": (cols["v"], nodes), "e": (cols["e"], edges),
                     "gid": (cols["gid"], groups)}, "graph_arrays")
    for (name, c), (cap_name, cap), ids in zip(counts.items(), caps.items(),
                                               ((cols["u"], cols["v"]), (cols["e"],), (cols["gid"],))):
        count = int(c)
        if not 0 <= count <= cap:
            raise ValueError(f"graph_arrays: {name} = {count} is outside [0, {cap_name} = {cap}]")
        hit = torch.zeros(cap, dtype=torch.bool)
        for x in ids:
            hit[x] = True
        if bool(hit[count:].any()):
            raise ValueError(f"graph_arrays: a {name[2:-1]} id is >= {name} = {count}")
        missing = torch.nonzero(~hit[:count])
        if missing.numel():
            raise ValueError(f"graph_arrays: slot {int(missing[0, 0])} < {name} = {count} is no row's id "
                             "(ids must be dense)")


def graph_arrays_torch(u, v, e, gid, group, state, next_state, new_group, first, success, n_nodes, n_edges,
                       n_groups, num_nodes: int, num_edges: int, num_groups: int, sink: int) -> GraphArrays:
    """The torch twin of :func:`graph_arrays`."""
    dev = u.device
    node_valid = torch.arange(num_nodes, device=dev) < n_nodes
    node_gid, node_key, node_group = torch.zeros(3, num_nodes, dtype=torch.int64, device=dev).scatter_(
        1, torch.cat([u, v]).expand(3, -1), torch.stack([gid.repeat(2), torch.cat([state, next_state]),
                                                         group.repeat(2)]))
    is_sink = node_valid & (node_key == sink)
    src, dst = torch.zeros(2, num_edges, dtype=torch.int64, device=dev).scatter_(
        1, e.expand(2, -1), torch.stack([u, v])).unbind(0)
    edge_valid = torch.arange(num_edges, device=dev) < n_edges
    # group g's first row holds its first edge; slot num_groups + 1 takes the other rows' writes
    off = n_edges.expand(num_groups + 2).clone()
    off.scatter_(0, torch.where(new_group, gid, num_groups + 1), e)
    off[num_groups:num_groups + 1].fill_(num_edges)
    k_count, k_pos_count = torch.zeros(2, num_groups, dtype=torch.int64, device=dev).scatter_add_(
        1, gid.expand(2, -1), torch.stack([first, first & success]).to(torch.int64)).unbind(0)
    return GraphArrays(node_gid, node_key, node_group, node_valid, is_sink, src, dst, edge_valid,
                       off[:num_groups + 1], k_count, k_pos_count)
