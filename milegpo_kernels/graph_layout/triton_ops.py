"""Triton kernel of :func:`milegpo_kernels.graph_arrays`: one pass over rows and slots.

Program i covers rows and slots ``[i * BLOCK, (i + 1) * BLOCK)``. A row writes its state's
and its next state's node slot (group id, key, raw group, valid, sink), its edge slot
(source, destination, valid), its group's first edge when it starts the group, and adds
one to K (and K+) of its group when it starts a trajectory (int64 atomics: exact). A
slot at or past its count writes the padding values (and a group slot past the group
count the empty component's offset). Rows write only slots below the counts (the ids
are dense), so the two kinds of write never meet; rows sharing a node or an edge write
the same values. On CUDA an id outside its capacity is skipped (a check would need a
host sync; on CPU the op refuses it).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .torch_ops import GraphArrays

BLOCK = 1024


@triton.jit
def _node_store(gid_ptr, key_ptr, grp_ptr, valid_ptr, sink_ptr, slot, g, key, grp, ok, SINK):
    tl.store(gid_ptr + slot, g, mask=ok)
    tl.store(key_ptr + slot, key, mask=ok)
    tl.store(grp_ptr + slot, grp, mask=ok)
    tl.store(valid_ptr + slot, tl.full(slot.shape, 1, tl.int8), mask=ok)
    tl.store(sink_ptr + slot, (key == SINK).to(tl.int8), mask=ok)


@triton.jit
def _graph_arrays_kernel(u_ptr, v_ptr, e_ptr, gid_ptr, grp_ptr, s_ptr, ns_ptr, new_group_ptr, first_ptr, y_ptr,
                         n_nodes_ptr, n_edges_ptr, n_groups_ptr, n_gid_ptr, n_key_ptr, n_grp_ptr, n_valid_ptr,
                         n_sink_ptr, src_ptr, dst_ptr, e_valid_ptr, off_ptr, k_ptr, N, V, E, G, SINK,
                         BLOCK: tl.constexpr):
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    # rows
    row = i < N
    u = tl.load(u_ptr + i, mask=row, other=-1)
    v = tl.load(v_ptr + i, mask=row, other=-1)
    e = tl.load(e_ptr + i, mask=row, other=-1)
    g = tl.load(gid_ptr + i, mask=row, other=-1)
    grp = tl.load(grp_ptr + i, mask=row, other=0)
    ok_u = row & (u >= 0) & (u < V)
    ok_v = row & (v >= 0) & (v < V)
    ok_e = row & (e >= 0) & (e < E) & ok_u & ok_v
    ok_g = row & (g >= 0) & (g < G)
    _node_store(n_gid_ptr, n_key_ptr, n_grp_ptr, n_valid_ptr, n_sink_ptr, tl.where(ok_u, u, 0), g,
                tl.load(s_ptr + i, mask=row, other=0), grp, ok_u, SINK)
    _node_store(n_gid_ptr, n_key_ptr, n_grp_ptr, n_valid_ptr, n_sink_ptr, tl.where(ok_v, v, 0), g,
                tl.load(ns_ptr + i, mask=row, other=0), grp, ok_v, SINK)
    e_slot = tl.where(ok_e, e, 0)
    tl.store(src_ptr + e_slot, u, mask=ok_e)
    tl.store(dst_ptr + e_slot, v, mask=ok_e)
    tl.store(e_valid_ptr + e_slot, tl.full((BLOCK,), 1, tl.int8), mask=ok_e)
    g_slot = tl.where(ok_g, g, 0)
    new_group = tl.load(new_group_ptr + i, mask=row, other=0) != 0
    tl.store(off_ptr + g_slot, e, mask=ok_g & new_group & (e >= 0) & (e < E))
    first = tl.load(first_ptr + i, mask=row, other=0) != 0
    y = tl.load(y_ptr + i, mask=row, other=0) != 0
    one = tl.full((BLOCK,), 1, tl.int64)
    tl.atomic_add(k_ptr + g_slot, one, mask=ok_g & first)
    tl.atomic_add(k_ptr + G + g_slot, one, mask=ok_g & first & y)
    # padding slots
    n_nodes = tl.load(n_nodes_ptr)
    n_edges = tl.load(n_edges_ptr)
    n_groups = tl.load(n_groups_ptr)
    zero = tl.zeros((BLOCK,), tl.int64)
    pad_v = (i >= n_nodes) & (i < V)
    tl.store(n_gid_ptr + i, zero, mask=pad_v)
    tl.store(n_key_ptr + i, zero, mask=pad_v)
    tl.store(n_grp_ptr + i, zero, mask=pad_v)
    tl.store(n_valid_ptr + i, zero.to(tl.int8), mask=pad_v)
    tl.store(n_sink_ptr + i, zero.to(tl.int8), mask=pad_v)
    pad_e = (i >= n_edges) & (i < E)
    tl.store(src_ptr + i, zero, mask=pad_e)
    tl.store(dst_ptr + i, zero, mask=pad_e)
    tl.store(e_valid_ptr + i, zero.to(tl.int8), mask=pad_e)
    tl.store(off_ptr + i, tl.where(i < G, zero + n_edges, E), mask=(i >= n_groups) & (i <= G))


def graph_arrays_triton(u, v, e, gid, group, state, next_state, new_group, first, success, n_nodes, n_edges,
                        n_groups, num_nodes: int, num_edges: int, num_groups: int, sink: int) -> GraphArrays:
    """See :func:`milegpo_kernels.graph_arrays` (inputs checked there)."""
    n, dev = u.shape[0], u.device
    ints = torch.empty(3, num_nodes, dtype=torch.int64, device=dev)
    flags = torch.empty(2, num_nodes, dtype=torch.bool, device=dev)
    edges = torch.empty(2, num_edges, dtype=torch.int64, device=dev)
    edge_valid = torch.empty(num_edges, dtype=torch.bool, device=dev)
    off = torch.empty(num_groups + 1, dtype=torch.int64, device=dev)
    k = torch.zeros(2, num_groups, dtype=torch.int64, device=dev)  # the atomics' memset
    out = GraphArrays(*ints.unbind(0), *flags.unbind(0), *edges.unbind(0), edge_valid, off, *k.unbind(0))
    i8 = torch.int8
    span = max(n, num_nodes, num_edges, num_groups + 1)
    _graph_arrays_kernel[(triton.cdiv(span, BLOCK),)](
        u.contiguous(), v.contiguous(), e.contiguous(), gid.contiguous(), group.contiguous(), state.contiguous(),
        next_state.contiguous(), new_group.contiguous().view(i8), first.contiguous().view(i8),
        success.contiguous().view(i8), n_nodes, n_edges, n_groups, *ints.unbind(0), flags[0].view(i8),
        flags[1].view(i8), *edges.unbind(0), edge_valid.view(i8), off, k, n, num_nodes, num_edges, num_groups, sink,
        BLOCK=BLOCK)
    return out
