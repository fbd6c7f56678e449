"""The vectorised estimator: the whole batch at once, built from milegpo_kernels ops.

No Python loop over rows, nodes, edges or groups: every per-group quantity is a
segment reduction, every graph quantity a relaxation over the edge list. Per-node
and per-edge arrays are allocated at a static capacity (2N nodes, N edges, N
groups) so that nothing here needs the host to learn a count: on CUDA tensors
with the Triton ops the pipeline makes no host synchronisation; the per-node
table is trimmed to the real node count only when it is read.

The same function runs the ``torch`` backend (torch twins of the ops) and the
``triton`` backend (the Triton kernels; on CPU under Triton's interpreter).
:func:`credit_tables` runs the pipeline as named stages, one per part of
docs/algorithm.md, each method stopping at its own advantage:

- :func:`order_rows`: the rows in (group, traj, t) order (section 1); every method;
- :func:`episode_terms`: Z and Norm_q(Z) (eq. 22; GRPO's advantage); every method;
- :func:`gigpo_step_terms`: R_t, Norm_{q,s}(R_t) and GiGPO's advantage (section 9);
- :func:`rollout_graph`: nodes, edges and trajectory counts (section 2); GraphGPO, MileGPO;
- :func:`graph_return_terms`: d(s, g) and r^G (eq. 1); GraphGPO, MileGPO;
- :func:`graphgpo_advantage`: A^G and GraphGPO's advantage (eqs. 21-22 with eta = 0);
- :func:`milestone_trap_scores`: S0+, S-, b, psi-bar, S_pcc+ and the potentials' seeds
  (eqs. 2-8, 11-19); MileGPO;
- :func:`potentials`: Phi+ and Phi- (eqs. 7, 8, 19); MileGPO;
- :func:`shaping_and_advantage`: delta+/-, r^M, A^G, A^mix, A^res and MileGPO's advantage
  (eqs. 9-10, 20-22).

A method's vectorised estimator (:mod:`milegpo.credit.paper` for the paper's four, :mod:`milegpo.credit.hgpo`,
:mod:`milegpo.credit.g2po`) strings stages together and returns a :class:`MethodOutput`; :func:`method_tables`
keeps its declared arrays. The plain-Python twin of each equation is in :mod:`milegpo.credit.reference`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch

from milegpo_kernels import (
    INF,
    GraphArrays,
    GraphReturn,
    GraphScores,
    ScoreParams,
    ShapedAdvantage,
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
    segment_max,
    segment_normalize,
    shaped_advantage,
)
from milegpo_kernels import resolve_backend

from .batch import SINK, StepBatch
from .config import CreditConfig
from .registry import CreditMethod, get_method
from .result import BOOL_KEYS, INT_KEYS, CreditResult, Tables, apply_by_dtype, check_advantages

F64 = torch.float64


def estimate_vectorized(
    batch: StepBatch, method: str | CreditMethod, config: CreditConfig, variant: str, backend: str = "torch",
    static_shapes: bool | None = None,
) -> CreditResult:
    """See :func:`milegpo.credit.estimate`. ``static_shapes``: size per-node / per-edge /
    per-group arrays by their static bounds (2N, N, N) instead of the real counts; the
    default is True on CUDA (no host sync) and False on CPU (smaller arrays)."""
    spec = method if isinstance(method, CreditMethod) else get_method(method)
    tables = credit_tables(batch, spec, config, variant, backend, static_shapes)
    return tables.result(batch, spec.name, config, variant, backend)


class MethodOutput(NamedTuple):
    """What a method's vectorised estimator (:attr:`CreditMethod.vectorized
    <milegpo.credit.registry.CreditMethod.vectorized>`) returns, every array in (group, traj, t) order.

    adv: (N,) float64, the advantages. rows: per-row arrays (N,), at least the method's ``row_keys`` (``node`` /
    ``next_node`` as node slots). nodes: per-node arrays at capacity (V_cap,), at least its ``node_keys`` (None:
    no rollout graph). graph: the :class:`RolloutGraph` the nodes belong to (None: no rollout graph)."""

    adv: torch.Tensor
    rows: dict[str, torch.Tensor]
    nodes: dict[str, torch.Tensor] | None = None
    graph: RolloutGraph | None = None


def credit_tables(batch: StepBatch, method: str | CreditMethod, config: CreditConfig, variant: str, backend: str,
                  static_shapes: bool | None = None) -> Tables:
    """The pipeline of :func:`estimate_vectorized`, its outputs as :class:`Tables`: the stages the
    module's docstring lists, up to the advantage of ``method`` (its registered ``vectorized``
    estimator, :class:`~milegpo.credit.registry.CreditMethod`, takes over after the episode terms)."""
    spec = method if isinstance(method, CreditMethod) else get_method(method)
    static = batch.device.type == "cuda" if static_shapes is None else static_shapes
    if len(batch) == 0:
        return _empty(batch, spec)
    rows = order_rows(batch, backend, static)
    return method_tables(spec, rows, spec.vectorized(rows, episode_terms(rows, config), config, variant))


# ------------------------------------------------------------------------------ rows and episodes
@dataclass
class GroupOrderedRows:
    """The batch's rows in (group, traj, t) order: each trajectory contiguous, and each group's
    edges too (the graph kernels relax one group per program). Every column (N,), in that order.

    order: int64, the permutation: row i here is the batch's row ``order[i]``.
    raw_group, state, next_state: int64, the batch's columns; success, invalid: bool; reward: float64.
    group, traj: int64, dense ids (the run numbers of the group and traj columns).
    group_start, traj_start, traj_end: bool, the row starts its group / starts / ends its trajectory.
    n_groups: () int64; group_cap: the size of per-group arrays (:meth:`capacity`).
    static: arrays at their static bounds (the GPU layout: no host read); backend: of the ops.
    milestone: bool, the batch's column (only BEACON reads it).
    """

    order: torch.Tensor
    raw_group: torch.Tensor
    state: torch.Tensor
    next_state: torch.Tensor
    success: torch.Tensor
    invalid: torch.Tensor
    reward: torch.Tensor
    group: torch.Tensor
    traj: torch.Tensor
    group_start: torch.Tensor
    traj_start: torch.Tensor
    traj_end: torch.Tensor
    n_groups: torch.Tensor
    group_cap: int
    static: bool
    backend: str
    milestone: torch.Tensor

    def __len__(self) -> int:
        return int(self.order.shape[0])

    @property
    def ops(self) -> dict:
        """The keywords every op takes: the backend."""
        return {"backend": self.backend}

    def capacity(self, count: torch.Tensor, bound: int) -> int:
        """Array size for ``count`` items: the static bound (no host sync: the GPU path), or the
        count itself (on the host reading it is free, and smaller arrays are faster)."""
        return bound if self.static else int(count)

    def unsort(self, values: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Per-row arrays back in the batch's order: one scatter per dtype for all of them."""
        order = self.order
        return apply_by_dtype(values, lambda x: torch.empty_like(x).scatter_(1, order.expand_as(x), x))


def order_rows(batch: StepBatch, backend: str, static: bool) -> GroupOrderedRows:
    """The batch's rows in (group, traj, t) order with their dense group and trajectory ids (spec
    section 1: rows come in any order). A validated batch brings that order from the host
    (``batch.row_order``); otherwise it is sorted here (t is validated to 0..T-1, so it sorts as
    int32: half the radix passes)."""
    order = batch.row_order
    if order is None:
        order = lexsort(batch.group, batch.traj, batch.t.to(torch.int32))
    ordered = ordered_rows(order, batch.group, batch.traj, batch.state, batch.next_state, batch.success,
                           batch.invalid, batch.reward, backend=backend)
    # Runs: rows are in group order and in (traj, t) order, so group ids and trajectory ids are
    # the run numbers of the group and traj columns (no hash table: its slots would be hot)
    group, traj = (torch.cumsum(ordered.starts, 1) - 1).unbind(0)
    group_start, traj_start = ordered.first_flags.unbind(0)
    n_groups = group[-1] + 1
    n = len(batch)
    return GroupOrderedRows(order, ordered.group, ordered.state, ordered.next_state, ordered.success, ordered.invalid,
                            ordered.reward, group, traj, group_start, traj_start, ordered.last, n_groups,
                            n if static else int(n_groups), static, backend, batch.milestone.index_select(0, order))


def episode_terms(rows: GroupOrderedRows, config: CreditConfig) -> dict[str, torch.Tensor]:
    """Eq. 22's episode term: ``episode_score`` Z = the trajectory's rewards summed in step order
    (as the reference sums) minus ``invalid_penalty`` on an invalid row (``episode_penalty="row"``)
    or minus ``invalid_penalty`` times the trajectory's invalid count on each of its rows
    (``"trajectory"``), and ``episode_adv`` Norm_q(Z) over the rows of each task group, or over its
    trajectories once each (``episode_norm_over``; a group of one value: mean 0, std 1, or 0 with
    ``episode_single_value="zero"``). Each (N,) float64; Norm_q(Z) is GRPO's advantage."""
    ops = rows.ops
    if config.episode_penalty == "row":
        z = episode_scores(rows.reward, rows.invalid, rows.traj_end, config.invalid_penalty, **ops)
    else:  # the trajectory's return: two sums per trajectory, as the reference forms them
        no_flags = torch.zeros_like(rows.invalid)
        total = episode_scores(rows.reward, no_flags, rows.traj_end, 0.0, **ops)
        n_invalid = episode_scores(rows.invalid.to(F64), no_flags, rows.traj_end, 0.0, **ops)
        z = total - config.invalid_penalty * n_invalid
    single = config.episode_single_value
    if config.episode_norm_over == "rows":
        episode_adv = segment_normalize(z, rows.group, rows.group_cap, config.norm, config.norm_eps, single, **ops)
    else:
        episode_adv = per_trajectory_norm(rows, z, config)
    return {"episode_score": z, "episode_adv": episode_adv}


def per_trajectory_norm(rows: GroupOrderedRows, z: torch.Tensor, config: CreditConfig) -> torch.Tensor:
    """Norm_q over the trajectories of each group, one value each (``episode_norm_over="trajectories"``):
    the score of each trajectory's last row is normalised among its group's (every other row goes to a
    one-row segment of its own, whose value is dropped), then broadcast to the trajectory's rows. No
    host read. z: (N,) float64, one score per trajectory; returns (N,) float64."""
    n, ops = len(rows), rows.ops
    row_ids = torch.arange(n, device=z.device)
    seg = torch.where(rows.traj_end, rows.group, rows.group_cap + row_ids)
    normed = segment_normalize(z, seg, rows.group_cap + n, config.norm, config.norm_eps,
                               config.episode_single_value, **ops)
    per_traj = torch.zeros(n + 1, dtype=F64, device=z.device)  # slot n: the dropped rows
    per_traj.scatter_(0, torch.where(rows.traj_end, rows.traj, n), normed)
    return per_traj.index_select(0, rows.traj)


def penalised_discounted_returns(rows: GroupOrderedRows, penalty: str, config: CreditConfig) -> torch.Tensor:
    """R_t = sum over k >= t of gamma^(k-t) reward_k of every row, (N,) float64, one backward scan, with
    ``invalid_penalty`` where ``penalty`` (one of ``PENALTY_PLACES``) puts it on an invalid row: ``"reward"`` off
    its reward before discounting (the GraphGPO recipe, reference.step_reward), ``"return"`` off its return after
    (verl-agent's trainer, reference.penalised_step_returns), ``"none"`` nowhere. GiGPO's ``step_penalty`` and
    HGPO's ``hgpo_penalty`` both read it."""
    reward = rows.reward
    if penalty == "reward":
        reward = torch.where(rows.invalid, reward - config.invalid_penalty, reward)
    returns = discounted_returns(reward, rows.traj_end, config.gamma, **rows.ops)
    if penalty == "return":
        returns = torch.where(rows.invalid, returns - config.invalid_penalty, returns)
    return returns


def gigpo_step_terms(rows: GroupOrderedRows, episode_adv: torch.Tensor,
                     config: CreditConfig) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """GiGPO (spec section 9): step groups are (group, state); ``step_return`` R_t = sum over k >= t
    of gamma^(k-t) reward_k (reward_k - ``invalid_penalty`` on an invalid row with
    ``step_penalty="reward"``, the GraphGPO recipe; minus ``invalid_penalty`` on an invalid row after
    discounting with ``step_penalty="return"``, verl-agent's trainer), ``step_adv`` Norm_{q,s}(R_t), and the
    advantage A = Norm_q(Z) + step_weight * Norm_{q,s}(R_t). Returns (A, {step_return, step_adv}), each (N,)
    float64."""
    step_groups = dense_ids(rows.group, rows.state, **rows.ops)
    step_return = penalised_discounted_returns(rows, config.step_penalty, config)
    step_cap = rows.capacity(step_groups.count, len(rows))
    step_adv = segment_normalize(step_return, step_groups.ids, step_cap, config.norm, config.norm_eps, "zero",
                                 **rows.ops)
    adv = episode_adv + config.step_weight * step_adv
    return adv, {"step_return": step_return, "step_adv": step_adv}


# ------------------------------------------------------------------------------ the rollout graph
@dataclass
class TrajectoryCounts:
    """Spec section 2's trajectory sets, counted: per node slot (V_cap,) int64 ``node_traj`` |T(v)|,
    ``node_pos`` |T+(v)|, ``node_revisit`` n_re(v); per edge slot (E_cap,) int64 ``edge_traj``
    |T(e)|, ``edge_pos`` |T+(e)|."""

    node_traj: torch.Tensor
    node_pos: torch.Tensor
    node_revisit: torch.Tensor
    edge_traj: torch.Tensor
    edge_pos: torch.Tensor


@dataclass
class RolloutGraph:
    """The rollout graph of every task group at once (spec section 2), nodes and edges numbered by
    slot. node / next_node / edge: (N,) int64, the slots of each row's s_t, s_{t+1} and (s_t,
    s_{t+1}) in group order; n_nodes, n_edges: () int64; node_cap, edge_cap: the slot counts;
    arrays: the node and edge tables (:class:`milegpo_kernels.GraphArrays`); edge_offsets: each
    group's first edge, the components of the Triton graph kernels (None for the torch twins,
    which read none); counts: the trajectory counts."""

    node: torch.Tensor
    next_node: torch.Tensor
    edge: torch.Tensor
    n_nodes: torch.Tensor
    n_edges: torch.Tensor
    node_cap: int
    edge_cap: int
    arrays: GraphArrays
    edge_offsets: torch.Tensor | None
    counts: TrajectoryCounts
    rows: GroupOrderedRows


def rollout_graph(rows: GroupOrderedRows) -> RolloutGraph:
    """Nodes (distinct (group, state key)), edges (distinct (group, s_t, s_{t+1})), the node and
    edge tables and the trajectory counts of spec section 2, for all groups in one pass each."""
    n, ops = len(rows), rows.ops
    # Node incidences: every row's state, plus the next_state of the rows whose next_state is
    # not the next row's state: the last rows (all rows on the GPU layout, where selecting the
    # last rows would need a host sync; the extra incidences repeat nodes already there and
    # change no node set or count).
    tail = None if rows.static else torch.nonzero(rows.traj_end).squeeze(1)

    def at_tail(x):
        """x at the rows whose next_state is an incidence of its own (the last rows, or all)."""
        return x if tail is None else x.index_select(-1, tail)

    incidences = torch.cat([torch.stack([rows.group, rows.state]),
                            at_tail(torch.stack([rows.group, rows.next_state]))], 1)  # (2, incidences)
    node_ids = dense_ids(incidences[0], incidences[1], **ops)  # (group, state) -> node
    node_cap = rows.capacity(node_ids.count, 2 * n)
    node, next_node_at_tail = node_ids.ids[:n], node_ids.ids[n:]
    # s_{t+1} of a non-last row is the state of the next row
    next_node = (next_node_at_tail if tail is None else
                 torch.cat([node[1:], node[:1]]).scatter_(0, tail, next_node_at_tail))
    edge_ids = dense_ids(node * node_cap + next_node, **ops)  # (group, state, next_state) as a packed node pair
    edge = edge_ids.ids
    edge_cap = rows.capacity(edge_ids.count, n)
    # the node and edge tables at capacity, each group's first edge (the components of the graph
    # kernels, one per group) and K, K+ per group: one op (one Triton pass on a GPU)
    arrays = graph_arrays(node, next_node, edge, rows.group, rows.raw_group, rows.state, rows.next_state,
                          rows.group_start, rows.traj_start, rows.success, node_ids.count, edge_ids.count,
                          rows.n_groups, node_cap, edge_cap, rows.group_cap, SINK, **ops)
    edge_offsets = arrays.edge_offsets if resolve_backend(rows.backend, arrays.src) == "triton" else None

    # Distinct-trajectory counts, nodes and edges in one call (edge j is segment node_cap + j). A
    # trajectory touches a node as the state of a row or as the next_state of its last row (any
    # other next_state is the next row's state); those incidences are the node's visits. On the
    # GPU layout the other rows' next_state go to dump segments, one per row (a single one would
    # be a hot slot for the counting atomics).
    n_dump = n if tail is None else 0
    n_slots = node_cap + edge_cap  # node segments, then edge segments
    next_visit = (next_node_at_tail if n_dump == 0 else
                  torch.where(rows.traj_end, next_node_at_tail, torch.arange(n_slots, n_slots + n, device=node.device)))
    counted = count_distinct(torch.cat([node, next_visit, edge + node_cap]),
                             torch.cat([rows.traj, at_tail(rows.traj), rows.traj]),
                             torch.cat([rows.success, at_tail(rows.success), rows.success]), n_slots + n_dump,
                             num_members=n, **ops)
    node_traj, edge_traj = counted.distinct[:node_cap], counted.distinct[node_cap:n_slots]
    node_pos, edge_pos = counted.distinct_pos[:node_cap], counted.distinct_pos[node_cap:n_slots]
    node_revisit = counted.total[:node_cap] - node_traj
    counts = TrajectoryCounts(node_traj, node_pos, node_revisit, edge_traj, edge_pos)
    return RolloutGraph(node, next_node, edge, node_ids.count, edge_ids.count, node_cap, edge_cap, arrays,
                        edge_offsets, counts, rows)


def graph_terms(rows: GroupOrderedRows, row_values: dict[str, torch.Tensor], config: CreditConfig):
    """The stages the rollout-graph methods share: :func:`rollout_graph` and :func:`graph_return_terms`, the
    invalid-action penalty off r^G with ``graph_penalty="return"``. Adds ``r_graph``, ``node``, ``next_node`` to
    ``row_values``; returns (graph, d(s, g) (V_cap,) int64, the GraphReturn, the per-node values ``group``,
    ``key``, ``is_sink``, ``dist``)."""
    graph = rollout_graph(rows)
    dist, graph_ret = graph_return_terms(graph, config)
    if config.graph_penalty == "return":  # verl-agent's GraphGPO trainer (reference.graph_return)
        graph_ret = graph_ret._replace(r_graph=torch.where(rows.invalid, graph_ret.r_graph - config.invalid_penalty,
                                                           graph_ret.r_graph))
    row_values.update(r_graph=graph_ret.r_graph, node=graph.node, next_node=graph.next_node)
    arrays = graph.arrays
    node_values = {"group": arrays.node_group, "key": arrays.node_key, "is_sink": arrays.is_sink,
                   "dist": graph_ret.node_dist}
    return graph, dist, graph_ret, node_values


def graph_return_terms(graph: RolloutGraph, config: CreditConfig) -> tuple[torch.Tensor, GraphReturn]:
    """Eq. 1: d(s, g) for every node slot, (V_cap,) int64 (one reverse BFS from g), and the GraphGPO
    return r^G = c * gamma_G^d(s_{t+1}, g), (N,) float64, as c * gamma_G * gamma_G ... (the
    reference's repeated products); 0 where g is unreachable (``graph_unreachable``,
    ``graph_distance_offset``: :func:`return_distance`). :func:`graph_terms` subtracts the invalid-action
    penalty from it with ``graph_penalty="return"``."""
    arrays, ops = graph.arrays, graph.rows.ops
    dist = hop_distance(arrays.src, arrays.dst, arrays.is_sink, graph.edge_offsets, **ops)
    if config.graph_unreachable == "zero" and config.graph_distance_offset == 0:
        return dist, graph_return(dist, graph.next_node, config.c, config.gamma_g, **ops)
    decayed = graph_return(return_distance(graph, dist, config), graph.next_node, config.c, config.gamma_g, **ops)
    # the node table reports the search's distances (reference: dist_g, -1 where g is unreachable)
    return dist, GraphReturn(decayed.r_graph, torch.where(dist < INF, dist, -1))


def return_distance(graph: RolloutGraph, dist: torch.Tensor, config: CreditConfig) -> torch.Tensor:
    """The hops eq. 1 decays over, per node slot (V_cap,) int64 (reference.return_distance): d(s, g) +
    ``graph_distance_offset``; where g is unreachable INF, or with ``graph_unreachable="max_plus_one"`` the
    largest finite d(., g) of the node's group + 1 (+ the offset), g's 0 included: 0 + 1 in a group without
    a success."""
    arrays, ops = graph.arrays, graph.rows.ops
    finite = dist < INF
    if config.graph_unreachable == "max_plus_one":
        group_max = segment_max(dist.to(F64), arrays.node_gid, graph.rows.group_cap, valid=finite & arrays.node_valid,
                                fill=-1.0, **ops).to(torch.int64).index_select(0, arrays.node_gid)
        dist = torch.where(finite, dist, group_max.clamp(min=0) + 1)  # no success: g at 0, every node at 1
        finite = dist < INF
    return torch.where(finite, dist + config.graph_distance_offset, INF)


def graphgpo_advantage(graph: RolloutGraph, r_graph: torch.Tensor, episode_adv: torch.Tensor,
                       config: CreditConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """GraphGPO (eqs. 21-22 with eta = 0): A^G = Norm_{q,s}(r^G) over the rows of each (group,
    state) node and A = w_step * A^G + w_ep * Norm_q(Z). Returns (A, A^G), each (N,) float64."""
    a_graph = segment_normalize(r_graph, graph.node, graph.node_cap, config.norm, config.norm_eps, "zero",
                                **graph.rows.ops)
    return config.w_step * a_graph + config.w_ep * episode_adv, a_graph


# ------------------------------------------------------------------------------ MileGPO
def milestone_trap_scores(graph: RolloutGraph, dist: torch.Tensor, config: CreditConfig,
                          variant: str) -> GraphScores:
    """Milestone and trap scores (MD, eqs. 2-6; their max-normalised forms, RCS eq. 8) and the
    progress-contrastive calibration (PCC, eqs. 11-18), up to the seeds of the potentials of
    ``variant`` (eqs. 7, 8, 19): one op (seven Triton passes on a GPU). Per node slot (V_cap,)."""
    arrays, counts = graph.arrays, graph.counts
    return graph_scores(arrays.src, arrays.dst, arrays.edge_valid, arrays.node_gid, arrays.node_valid, arrays.is_sink,
                        dist, counts.node_traj, counts.node_pos, counts.node_revisit, counts.edge_traj,
                        counts.edge_pos, arrays.k_count, arrays.k_pos_count, ScoreParams.of(config), variant,
                        **graph.rows.ops)


def potentials(graph: RolloutGraph, seeds: torch.Tensor, config: CreditConfig) -> torch.Tensor:
    """Phi+ and Phi- (eqs. 7, 8, 19): Phi(s) = max over candidates v of seed(v) * omega^d(s, v), one
    joint max-times relaxation over the edges. seeds: (V_cap, 2) float64; returns (V_cap, 2) float64."""
    arrays = graph.arrays
    return max_times_potential(arrays.src, arrays.dst, seeds, config.omega, graph.edge_offsets, **graph.rows.ops)


def shaping_and_advantage(graph: RolloutGraph, phi: torch.Tensor, r_graph: torch.Tensor, episode_adv: torch.Tensor,
                          config: CreditConfig) -> ShapedAdvantage:
    """The shaping terms delta+ / delta- (eqs. 9-10), the shaped return r^M (eq. 20), A^G, A^mix and
    A^res (Norm_{q,s}, eq. 21) and the advantage A (eq. 22): one op (three Triton passes on a GPU).
    Per row (N,) float64."""
    return shaped_advantage(phi, graph.node, graph.next_node, r_graph, episode_adv, ShapingParams.of(config),
                            **graph.rows.ops)


# ------------------------------------------------------------------------------ the tables
def method_tables(method: CreditMethod, rows: GroupOrderedRows, out: MethodOutput) -> Tables:
    """The outputs of ``method``: its advantages checked (:func:`check_advantages`) and, with its per-row arrays
    (its ``row_keys``), back in the batch's order (node ids kept as slot numbers); with a graph its per-node
    arrays (``node_keys``) at capacity, the node count and the keys of the canonical node order."""
    if not isinstance(out, MethodOutput):
        raise ValueError(f"credit method {method.name!r}: its vectorized estimator returned a "
                         f"{type(out).__name__}; expected a milegpo.credit.vectorized.MethodOutput")
    adv = check_advantages(method.name, out.adv, rows.order.shape[-1])  # shape and dtype; estimate reads the values
    missing = [k for k in method.row_keys if k not in out.rows] + [k for k in method.node_keys
                                                                   if k not in (out.nodes or {})]
    if missing:
        raise ValueError(f"credit method {method.name!r}: its vectorized estimator returned no {missing} (its "
                         "row_keys / node_keys)")
    out_rows = rows.unsort({"adv": adv, **{k: out.rows[k] for k in method.row_keys}})
    adv = out_rows.pop("adv")
    slots = {k: out_rows.pop(k) for k in ("node", "next_node") if k in out_rows}
    graph = out.graph
    if graph is None:
        return Tables(adv, out_rows, slots, {}, None, None, method.row_keys)
    # the torch ops number nodes in (group, key) order already; the Triton ops by first occurrence
    order_keys = None if rows.backend == "torch" else (graph.arrays.node_gid, graph.arrays.node_valid)
    return Tables(adv, out_rows, slots, {k: out.nodes[k] for k in method.node_keys}, graph.n_nodes, order_keys,
                  method.row_keys)


def _empty(batch: StepBatch, method: CreditMethod) -> Tables:
    """The tables of an empty batch: every array of ``method`` with 0 rows / 0 nodes."""
    dev = batch.device
    f = torch.zeros(0, dtype=F64, device=dev)
    i = torch.zeros(0, dtype=torch.int64, device=dev)
    rows = {k: (i if k in INT_KEYS else f) for k in method.row_keys if k not in ("node", "next_node")}
    slots = {k: i for k in method.row_keys if k in ("node", "next_node")}
    nodes = {k: (i if k in INT_KEYS else torch.zeros(0, dtype=torch.bool, device=dev) if k in BOOL_KEYS else f)
             for k in method.node_keys}
    count = torch.zeros((), dtype=torch.int64, device=dev) if nodes else None
    return Tables(f, rows, slots, nodes, count, None, method.row_keys)
