"""The vectorised estimator: the whole batch at once, built from milegpo_kernels ops.

No Python loop over rows, nodes, edges or groups: every per-group quantity is a
segment reduction, every graph quantity a relaxation over the edge list. Per-node
and per-edge arrays are allocated at a static capacity (2N nodes, N edges, N
groups) so that nothing here needs the host to learn a count: on CUDA tensors
with the Triton ops the pipeline makes no host synchronisation; the per-node
table is trimmed to the real node count only when it is read.

The same function runs the ``torch`` backend (torch twins of the ops) and the
``triton`` backend (the Triton kernels; on CPU under Triton's interpreter).
Equations refer to docs/milegpo-spec.md; the plain-Python twin of each step is in
:mod:`milegpo.credit.reference`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

from milegpo_kernels import (
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
    lexsort,
    max_times_potential,
    ordered_rows,
    segment_normalize,
    shaped_advantage,
)
from milegpo_kernels._backend import resolve

from .batch import SINK, StepBatch
from .config import CreditConfig
from .result import NODE_KEYS, ROW_KEYS, CreditResult

F64 = torch.float64


class NodeOrder:
    """The canonical node order, (group, key) ascending with padding slots last, of nodes
    numbered by slot (the Triton ops number them by first occurrence), found on first use:
    the sort runs only for a caller that reads the node table or the rows' node ids, never
    for the advantages."""

    def __init__(self, node_gid: torch.Tensor, node_valid: torch.Tensor, key: torch.Tensor):
        self.keys = (node_gid, node_valid, key)
        self._perm = self._rank = None

    def perm(self) -> torch.Tensor:
        """perm[i]: the slot of the i-th node in canonical order."""
        if self._perm is None:
            node_gid, node_valid, key = self.keys
            # group ids < capacity: int32 radix passes
            group_then_pad = torch.where(node_valid, node_gid, key.shape[0]).to(torch.int32)
            self._perm = lexsort(group_then_pad, key)
        return self._perm

    def rank(self) -> torch.Tensor:
        """rank[slot]: the slot's node index in canonical order."""
        if self._rank is None:
            perm = self.perm()
            self._rank = torch.empty_like(perm).scatter_(0, perm, torch.arange(perm.shape[0], device=perm.device))
        return self._rank


class LazyNodes(Mapping):
    """Per-node arrays held at capacity in slot order; put in canonical order (when ``order``
    is given) and trimmed to ``count`` nodes on first read."""

    def __init__(self, padded: dict[str, torch.Tensor], count: torch.Tensor, order: NodeOrder | None = None):
        self.padded, self.count, self.order, self._trimmed = padded, count, order, None

    def _table(self) -> dict[str, torch.Tensor]:
        if self._trimmed is None:
            padded = self.padded
            if self.order is not None:
                perm = self.order.perm()
                padded = _by_dtype(padded, lambda x: x.index_select(1, perm))
            n = int(self.count)
            self._trimmed = {k: v[:n] for k, v in padded.items()}
        return self._trimmed

    def __getitem__(self, key):
        return self._table()[key]

    def unordered(self) -> dict[str, torch.Tensor]:
        """The per-node arrays trimmed to the node count, in slot order: the same nodes as the
        table without the sort that puts them in canonical order (for order-free statistics)."""
        if self.order is None:
            return self._table()
        n = int(self.count)
        return {k: v[:n] for k, v in self.padded.items()}

    def __contains__(self, key):  # without the table (Mapping's would build it)
        return key in self.padded

    def __iter__(self):
        return iter(self.padded)

    def __len__(self):
        return len(self.padded)


class LazyRows(Mapping):
    """Per-row arrays; the node ids among them (``slots``: slot numbers) are mapped to the
    canonical node order on first read."""

    def __init__(self, keys: tuple[str, ...], plain: dict[str, torch.Tensor], slots: dict[str, torch.Tensor],
                 order: NodeOrder | None):
        self.keys, self.plain, self.slots, self.order = keys, plain, slots, order
        self._mapped: dict[str, torch.Tensor] = {}

    def __getitem__(self, key):
        if key in self.plain:
            return self.plain[key]
        if key not in self._mapped:
            x = self.slots[key]  # KeyError for a key that is not a row array
            self._mapped[key] = x if self.order is None else self.order.rank().index_select(0, x)
        return self._mapped[key]

    def __contains__(self, key):
        return key in self.keys

    def __iter__(self):
        return iter(self.keys)

    def __len__(self):
        return len(self.keys)


@dataclass
class Tables:
    """What the pipeline computes, as plain tensors: the advantages, the per-row arrays (node ids
    as slot numbers), the per-node arrays at capacity in slot order, the node count and the
    nodes' group ids and valid flags, which with their keys sort them into canonical order (None:
    slots are in that order already).
    :mod:`milegpo.credit.graphed` keeps these as a CUDA graph's outputs."""

    adv: torch.Tensor
    rows: dict[str, torch.Tensor]
    slots: dict[str, torch.Tensor]
    nodes: dict[str, torch.Tensor]
    count: torch.Tensor | None
    order_keys: tuple[torch.Tensor, torch.Tensor] | None

    def tensors(self) -> list[torch.Tensor]:
        return [self.adv, *self.rows.values(), *self.slots.values(), *self.nodes.values(),
                *([] if self.count is None else [self.count]), *(self.order_keys or ())]

    def like(self, tensors: list[torch.Tensor]) -> Tables:
        """The same tables holding ``tensors`` (as :meth:`tensors` lists them)."""
        it = iter(tensors)
        adv = next(it)
        rows, slots, nodes = ({k: next(it) for k in d} for d in (self.rows, self.slots, self.nodes))
        count = None if self.count is None else next(it)
        order_keys = None if self.order_keys is None else (next(it), next(it))
        return Tables(adv, rows, slots, nodes, count, order_keys)

    def result(self, batch, method, config, variant, backend) -> CreditResult:
        order = None if self.order_keys is None else NodeOrder(*self.order_keys, self.nodes["key"])
        rows = LazyRows(ROW_KEYS[method], self.rows, self.slots, order)
        nodes = {} if self.count is None else LazyNodes(self.nodes, self.count, order)
        return CreditResult(method, variant, config, backend, batch, self.adv, rows, nodes)


def _capacity(count: torch.Tensor, bound: int, static: bool) -> int:
    """Array size for ``count`` items: the static bound (no host sync: the GPU path), or the
    count itself (on the host reading it is free, and smaller arrays are faster)."""
    return bound if static else int(count)


def estimate_vectorized(
    batch: StepBatch, method: str, config: CreditConfig, variant: str, backend: str = "torch",
    static_shapes: bool | None = None,
) -> CreditResult:
    """See :func:`milegpo.credit.estimate`. ``static_shapes``: size per-node / per-edge /
    per-group arrays by their static bounds (2N, N, N) instead of the real counts; the
    default is True on CUDA (no host sync) and False on CPU (smaller arrays)."""
    tables = credit_tables(batch, method, config, variant, backend, static_shapes)
    return tables.result(batch, method, config, variant, backend)


def credit_tables(batch: StepBatch, method: str, config: CreditConfig, variant: str, backend: str,
                  static_shapes: bool | None = None) -> Tables:
    """The pipeline of :func:`estimate_vectorized`, its outputs as :class:`Tables`."""
    ops = {"backend": backend}
    static = batch.device.type == "cuda" if static_shapes is None else static_shapes
    cfg = config
    n = len(batch)
    dev = batch.device
    if n == 0:
        return _empty(batch, method)

    # rows in (group, traj, t) order: each trajectory contiguous, and each group's edges
    # too (the graph kernels relax one group per program). A validated batch brings that
    # order from the host; otherwise sort here (t is validated to 0..T-1, so it sorts as
    # int32: half the radix passes).
    order = batch.row_order
    if order is None:
        order = lexsort(batch.group, batch.traj, batch.t.to(torch.int32))
    r = ordered_rows(order, batch.group, batch.traj, batch.state, batch.next_state, batch.success, batch.invalid,
                     batch.reward, **ops)
    g_raw, s, ns, y, inv, rew = r.group, r.state, r.next_state, r.success, r.invalid, r.reward
    # Runs: rows are in group order and in (traj, t) order, so group ids and trajectory ids are
    # the run numbers of the group and traj columns (no hash table: its slots would be hot)
    gid, tid = (torch.cumsum(r.starts, 1) - 1).unbind(0)
    new_group, first = r.first_flags.unbind(0)
    last = r.last
    n_groups = gid[-1] + 1
    gcap = _capacity(n_groups, n, static)

    def unsort(xs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Rows back in the batch's order: one scatter per dtype for all the arrays."""
        return _by_dtype(xs, lambda x: torch.empty_like(x).scatter_(1, order.expand_as(x), x))

    # Episode term: Z = sum of the trajectory's rewards - invalid penalty (eq. 22), summed in step
    # order as the reference sums
    z = episode_scores(rew, inv, last, cfg.invalid_penalty, **ops)
    ez = segment_normalize(z, gid, gcap, cfg.norm, cfg.norm_eps, "unit", **ops)
    rows: dict[str, torch.Tensor] = {"episode_score": z, "episode_adv": ez}

    if method == "grpo":
        return _finish(method, backend, ez, rows, {}, None, unsort)

    if method == "gigpo":
        step_seg = dense_ids(gid, s, **ops)
        ret = discounted_returns(rew, last, cfg.gamma, **ops)
        if cfg.invalid_penalty_on_step_return:  # verl-agent parity (reference.penalised_step_returns)
            ret = torch.where(inv, ret - cfg.invalid_penalty, ret)
        step_cap = _capacity(step_seg.count, n, static)
        step_adv = segment_normalize(ret, step_seg.ids, step_cap, cfg.norm, cfg.norm_eps, "zero", **ops)
        rows.update(step_return=ret, step_adv=step_adv)
        adv = ez + cfg.step_weight * step_adv
        return _finish(method, backend, adv, rows, {}, None, unsort)

    # ---------------------------------------------------------------- the graph
    # Node incidences: every row's state, plus the next_state of the rows whose
    # next_state is not the next row's state: the last rows (all rows on the GPU
    # layout, where selecting the last rows would need a host sync; the extra
    # incidences repeat nodes already there and change no node set or count).
    tail = None if static else torch.nonzero(last).squeeze(1)

    def at_tail(x):
        """x at the rows whose next_state is an incidence of its own (the last rows, or all)."""
        return x if tail is None else x.index_select(-1, tail)

    inc = torch.cat([torch.stack([gid, s]), at_tail(torch.stack([gid, ns]))], 1)  # (2, incidences)
    node_ids = dense_ids(inc[0], inc[1], **ops)  # (group, state) -> node
    vcap = _capacity(node_ids.count, 2 * n, static)
    u, v_tail = node_ids.ids[:n], node_ids.ids[n:]
    # s_{t+1} of a non-last row is the state of the next row
    v = v_tail if tail is None else torch.cat([u[1:], u[:1]]).scatter_(0, tail, v_tail)
    n_nodes = node_ids.count
    edge_ids = dense_ids(u * vcap + v, **ops)  # (group, state, next_state) as a packed node pair
    e = edge_ids.ids
    ecap = _capacity(edge_ids.count, n, static)
    # the node and edge tables at capacity, each group's first edge (the components of the graph
    # kernels, one per group) and K, K+ per group: one op (one Triton pass on a GPU)
    ga = graph_arrays(u, v, e, gid, g_raw, s, ns, new_group, first, y, n_nodes, edge_ids.count, n_groups, vcap, ecap,
                      gcap, SINK, **ops)
    node_gid, node_key, node_valid, is_sink = ga.node_gid, ga.node_key, ga.node_valid, ga.is_sink
    src, dst, k_count, k_pos_count = ga.src, ga.dst, ga.k_count, ga.k_pos_count
    edge_off = ga.edge_offsets if resolve(backend, src) == "triton" else None  # the torch twins read no components

    # Distinct-trajectory counts (section 2), nodes and edges in one call (edge j is segment
    # vcap + j). A trajectory touches a node as the state of a row or as the next_state of
    # its last row (any other next_state is the next row's state); those incidences are the
    # node's visits. On the GPU layout the other rows' next_state go to dump segments, one
    # per row (a single one would be a hot slot for the counting atomics).
    dump = n if tail is None else 0
    v_seg = v_tail if dump == 0 else torch.where(last, v_tail, torch.arange(vcap + ecap, vcap + ecap + n, device=dev))
    counts = count_distinct(torch.cat([u, v_seg, e + vcap]), torch.cat([tid, at_tail(tid), tid]),
                            torch.cat([y, at_tail(y), y]), vcap + ecap + dump, num_members=n, **ops)
    n_traj, e_traj = counts.distinct[:vcap], counts.distinct[vcap:vcap + ecap]
    n_pos, e_pos = counts.distinct_pos[:vcap], counts.distinct_pos[vcap:vcap + ecap]
    n_re = counts.total[:vcap] - n_traj  # revisits

    # GraphGPO return r^G = c * gamma_G^d(s_{t+1}, g) (eq. 1); one reverse BFS from g.
    dist = hop_distance(src, dst, is_sink, edge_off, **ops)
    gr = graph_return(dist, v, cfg.c, cfg.gamma_g, **ops)  # c g g ...: the reference's repeated products
    r_graph = gr.r_graph
    rows.update(r_graph=r_graph, node=u, next_node=v)
    nodes = {"group": ga.node_group, "key": node_key, "is_sink": is_sink, "dist": gr.node_dist}

    if method == "graphgpo":
        a_graph = segment_normalize(r_graph, u, vcap, cfg.norm, cfg.norm_eps, "zero", **ops)
        rows.update(a_graph=a_graph)
        adv = cfg.w_step * a_graph + cfg.w_ep * ez
        return _finish(method, backend, adv, rows, nodes, n_nodes, unsort, (node_gid, node_valid))

    # Milestone / trap scores (eqs. 2-8) and the progress-contrastive calibration (eqs. 11-18),
    # up to the seeds of the potentials for this variant: one op (seven Triton passes on a GPU)
    sc = graph_scores(src, dst, ga.edge_valid, node_gid, node_valid, is_sink, dist, n_traj, n_pos, n_re, e_traj, e_pos,
                      k_count, k_pos_count, ScoreParams.of(cfg), variant, **ops)

    # Potentials (eqs. 7, 8, 19): one joint max-times relaxation for Phi+ and Phi-
    phi = max_times_potential(src, dst, sc.seeds, cfg.omega, edge_off, **ops)
    phi_pos, phi_neg = phi[:, 0], phi[:, 1]

    # Shaping terms (eqs. 9-10), the shaped return (eq. 20), its normalisation inside (group,
    # state) and the advantage (eqs. 21-22): one op (three Triton passes on a GPU)
    sh = shaped_advantage(phi, u, v, r_graph, ez, ShapingParams.of(cfg), **ops)
    rows.update(a_graph=sh.a_graph, r_shaped=sh.r_shaped, a_mix=sh.a_mix, a_res=sh.a_res, delta_pos=sh.delta_pos,
                delta_neg=sh.delta_neg)
    nodes.update(n_traj=n_traj, n_pos=n_pos, n_revisit=n_re, coverage=sc.coverage, is_milestone=sc.is_milestone,
                 is_trap=sc.is_trap, s0_pos=sc.s0_pos, s_neg=sc.s_neg, s_pcc=sc.s_pcc, b=sc.b, psi_bar=sc.psi_bar,
                 retained=sc.retained, phi_pos=phi_pos, phi_neg=phi_neg)
    return _finish(method, backend, sh.adv, rows, nodes, n_nodes, unsort, (node_gid, node_valid))


def _by_dtype(xs: dict[str, torch.Tensor], fn) -> dict[str, torch.Tensor]:
    """``fn`` applied to the arrays of each dtype stacked as rows of one 2-d tensor
    (one kernel for all of them instead of one each); returns rows of the results."""
    groups: dict[torch.dtype, list[str]] = {}
    for k, x in xs.items():
        groups.setdefault(x.dtype, []).append(k)
    out = {}
    for keys in groups.values():
        out.update(zip(keys, fn(torch.stack([xs[k] for k in keys])).unbind(0)))
    return {k: out[k] for k in xs}


def _finish(method, backend, adv, rows, nodes, n_nodes, unsort, graph=None) -> Tables:
    """graph: (node_gid, node_valid): the nodes' group ids (numbered in the order of the raw
    group ids) and which slots hold nodes."""
    out_rows = unsort({"adv": adv, **{k: rows[k] for k in ROW_KEYS[method]}})
    adv = out_rows.pop("adv")
    slots = {k: out_rows.pop(k) for k in ("node", "next_node") if k in out_rows}
    if n_nodes is None:
        return Tables(adv, out_rows, slots, {}, None, None)
    # the torch ops number nodes in (group, key) order already; the Triton ops by first occurrence
    order_keys = None if backend == "torch" else graph
    return Tables(adv, out_rows, slots, {k: nodes[k] for k in NODE_KEYS[method]}, n_nodes, order_keys)


def _empty(batch, method) -> Tables:
    dev = batch.device
    f = torch.zeros(0, dtype=F64, device=dev)
    i = torch.zeros(0, dtype=torch.int64, device=dev)
    rows = {k: f for k in ROW_KEYS[method] if k not in ("node", "next_node")}
    slots = {k: i for k in ROW_KEYS[method] if k in ("node", "next_node")}
    nodes = {k: (i if k in ("group", "key", "dist", "n_traj", "n_pos", "n_revisit") else
                 torch.zeros(0, dtype=torch.bool, device=dev) if k in ("is_sink", "is_milestone", "is_trap",
                                                                      "retained") else f)
             for k in NODE_KEYS[method]}
    count = torch.zeros((), dtype=torch.int64, device=dev) if nodes else None
    return Tables(f, rows, slots, nodes, count, None)
