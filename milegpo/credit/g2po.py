"""G2PO: node values on the task group's state graph, a node-centric and an edge-centric term
(docs/algorithm.md, "G2PO").

"Group-Graph Policy Optimization for Long-Horizon Agentic Reinforcement Learning" (Wang et al., arXiv
2606.22995); the default settings are what the official code (``Nala-YN/G2PO``, ``g2po/core_g2po.py``)
computes under its ALFWorld / WebShop scripts, the paper's readings are switches (``g2po_*`` fields of
:class:`~milegpo.credit.CreditConfig`):

- (G1) visit value: v = gamma^(T - t) * R for the row at step t of a trajectory of T rows and summed
  reward R (gamma = ``g2po_gamma``);
- (G2) node value: V(q, s) = the mean of v over the rows of task group q in state s (every visit);
- (G3) reached value: V' = V(q, s of the trajectory's next row); on a last row ``g2po_success_value`` if
  the trajectory won, else ``g2po_failure_value`` (or, ``g2po_failure_next="node"``, V of its
  next_state's node where rows of the group are in that state);
- (G4) node-centric term: A_NC = Norm over the rows of the node (q, s) of x = V' - p * invalid
  (``g2po_penalty="return"``; ``"none"``: x = V'); a one-row node: 0;
- (G5) edge-centric term: A_EC = Norm over the rows of the task group of delta = V' - V(q, s); a one-row
  group: 0;
- (G6) episode term: A_EP = Norm_q(Z), GRPO's (``g2po_episode="row"``), or the trajectories' summed
  rewards normalised once each (``"trajectory"``; one trajectory: 0);
- (G7) A = A_EP + w * (A_NC + A_EC) (w = ``g2po_w``).

Norm is ``norm``: (x - mean) / (sample std + ``norm_eps``) or x - mean; equal values give 0.

This module holds the plain-Python oracle (one function per equation, :func:`g2po_reference`) and the
vectorised pipeline over :mod:`milegpo_kernels` ops (:func:`g2po_tables`): node ids by ``dense_ids``,
visit values by a discounted scan, node means and the two normalisations by segment ops. No graph search,
no host read on CUDA. Its fields (``g2po_*``) are declared here, with its registration at the bottom.
"""

from __future__ import annotations

import torch

from milegpo_kernels import dense_ids, discounted_returns, episode_scores, segment_normalize, segment_sum

from .config import CreditConfig, non_negative, unit_interval
from .reference import ReferenceTerms, decayed, normalize_segment, normalize_segments
from .registry import ConfigField, CreditMethod, register
from .vectorized import GroupOrderedRows, MethodOutput, per_trajectory_norm

F64 = torch.float64

#: G2PO's per-row arrays (``CreditResult.rows``): Z, Norm_q(Z) (GRPO's), v (G1), V(q, s) (G2), V' (G3),
#: A_NC (G4), A_EC (G5), A_EP (G6)
ROW_KEYS = ("episode_score", "episode_adv", "visit_value", "node_value", "next_value", "a_nc", "a_ec", "a_ep")


# --------------------------------------------------------------------------------------- the oracle
def visit_values(trajs: list, rows: list, config: CreditConfig) -> dict:
    """(G1) v = gamma^(T - t) * R of every row (R the trajectory's summed reward, t order), gamma^(T - t)
    as T - t multiplications of R. Returns {row index: v}."""
    out = {}
    for tr in trajs:
        total = 0.0
        for i in tr:
            total = total + rows[i]["reward"]
        for t, i in enumerate(tr):
            out[i] = decayed(total, config.g2po_gamma, len(tr) - t)
    return out


def node_values(trajs: list, rows: list, visit: dict) -> dict:
    """(G2) V(s) = the mean of v over the task group's rows in state s. Returns {state key: V}."""
    members: dict = {}
    for tr in trajs:
        for i in tr:
            members.setdefault(rows[i]["state"], []).append(i)
    out = {}
    for state, idx in members.items():
        total = 0.0
        for i in sorted(idx):
            total = total + visit[i]
        out[state] = total / len(idx)
    return out


def reached_values(trajs: list, rows: list, values: dict, config: CreditConfig) -> dict:
    """(G3) V' of every row: V of the next row's state; on a trajectory's last row the success value (won),
    else the failure value, or with ``g2po_failure_next="node"`` V of its next_state where the group has it.
    Returns {row index: V'}."""
    out = {}
    for tr in trajs:
        for i, j in zip(tr, tr[1:]):
            out[i] = values[rows[j]["state"]]
        last = rows[tr[-1]]
        if last["success"]:
            out[tr[-1]] = config.g2po_success_value
        elif config.g2po_failure_next == "node" and last["next_state"] in values:
            out[tr[-1]] = values[last["next_state"]]
        else:
            out[tr[-1]] = config.g2po_failure_value
    return out


def node_centric_terms(rows: list, reached: dict, config: CreditConfig) -> dict:
    """(G4) A_NC = Norm over the rows of each (group, state) of x = V' - p * invalid (p only with
    ``g2po_penalty="return"``); a one-row node: 0. Returns {row index: A_NC}."""
    p = config.invalid_penalty if config.g2po_penalty == "return" else 0.0
    x = {i: reached[i] - p if rows[i]["invalid"] else reached[i] for i in reached}
    keys = {i: (rows[i]["group"], rows[i]["state"]) for i in x}
    return normalize_segments(x, keys, config.norm, config.norm_eps, "zero")


def edge_centric_terms(rows: list, reached: dict, values_by_group: dict, config: CreditConfig) -> dict:
    """(G5) A_EC = Norm over the rows of each task group of delta = V' - V(q, s); a one-row group: 0.
    values_by_group: {group: {state: V}}. Returns {row index: A_EC}."""
    delta = {i: reached[i] - values_by_group[rows[i]["group"]][rows[i]["state"]] for i in reached}
    keys = {i: rows[i]["group"] for i in delta}
    return normalize_segments(delta, keys, config.norm, config.norm_eps, "zero")


def trajectory_episode_terms(groups: dict, rows: list, config: CreditConfig) -> dict:
    """(G6, ``g2po_episode="trajectory"``) the paper's A_EP: each trajectory's summed reward (no penalty)
    normalised among its task group's trajectories, once each; one trajectory: 0. Returns {row index: A_EP}."""
    out = {}
    for trajs in groups.values():
        totals = []
        for tr in trajs:
            total = 0.0
            for i in tr:
                total = total + rows[i]["reward"]
            totals.append(total)
        for tr, a in zip(trajs, normalize_segment(totals, config.norm, config.norm_eps, "zero")):
            for i in tr:
                out[i] = a
    return out


def g2po_advantage(a_ep: float, a_nc: float, a_ec: float, config: CreditConfig) -> float:
    """(G7) A = A_EP + w * (A_NC + A_EC)."""
    return a_ep + config.g2po_w * (a_nc + a_ec)


def g2po_reference(terms: ReferenceTerms) -> list:
    """G2PO, plain Python: (G1-G3) per task group, (G4-G7) per node / group / row. Fills ``visit_value``,
    ``node_value``, ``next_value``, ``a_nc``, ``a_ec``, ``a_ep``; returns the N advantages."""
    rows, config, row_vals = terms.rows, terms.config, terms.row_vals
    visit: dict = {}
    reached: dict = {}
    values_by_group: dict = {}
    for group, trajs in terms.groups.items():
        v = visit_values(trajs, rows, config)
        values = node_values(trajs, rows, v)
        visit.update(v)
        values_by_group[group] = values
        reached.update(reached_values(trajs, rows, values, config))
    a_nc = node_centric_terms(rows, reached, config)
    a_ec = edge_centric_terms(rows, reached, values_by_group, config)
    if config.g2po_episode == "row":
        a_ep = terms.episode_adv
    else:
        a_ep = trajectory_episode_terms(terms.groups, rows, config)
    out = []
    for i in range(len(rows)):
        row_vals["visit_value"][i] = visit[i]
        row_vals["node_value"][i] = values_by_group[rows[i]["group"]][rows[i]["state"]]
        row_vals["next_value"][i] = reached[i]
        row_vals["a_nc"][i] = a_nc[i]
        row_vals["a_ec"][i] = a_ec[i]
        row_vals["a_ep"][i] = a_ep[i]
        out.append(g2po_advantage(a_ep[i], a_nc[i], a_ec[i], config))
    return out


# --------------------------------------------------------------------------------------- the pipeline
def visit_value_terms(rows: GroupOrderedRows, config: CreditConfig) -> torch.Tensor:
    """(G1) v of every row in (group, traj, t) order, (N,) float64: the summed reward R on each
    trajectory's last row, discounted back by one scan (gamma^(T-1-t) R), times gamma."""
    ops = rows.ops
    total = episode_scores(rows.reward, torch.zeros_like(rows.invalid), rows.traj_end, 0.0, **ops)
    last_only = torch.where(rows.traj_end, total, torch.zeros_like(total))
    return discounted_returns(last_only, rows.traj_end, config.g2po_gamma, **ops) * config.g2po_gamma


def node_value_terms(rows: GroupOrderedRows, visit: torch.Tensor, config: CreditConfig) -> tuple:
    """(G2, G3) V(q, s_t) and V' of every row, each (N,) float64, and the rows' node ids (N,) int64 with
    their capacity. Nodes are the dense ids of (group, state) over the rows' states and next_states (the
    latter only read by ``g2po_failure_next="node"``); a node's value is the mean of its rows' v."""
    n, ops = len(rows), rows.ops
    ids = dense_ids(torch.cat([rows.group, rows.group]), torch.cat([rows.state, rows.next_state]), **ops)
    cap = rows.capacity(ids.count, 2 * n)
    node, next_node = ids.ids[:n], ids.ids[n:]
    size = segment_sum(torch.ones_like(visit), node, cap)
    value = segment_sum(visit, node, cap) / size.clamp(min=1.0)
    at_state = value.index_select(0, node)
    # V' of a row that is not its trajectory's last: V of the next row's node
    following = torch.cat([at_state[1:], at_state[:1]])
    terminal = torch.where(rows.success, torch.full_like(visit, config.g2po_success_value),
                           torch.full_like(visit, config.g2po_failure_value))
    if config.g2po_failure_next == "node":
        known = size.index_select(0, next_node) > 0
        terminal = torch.where(~rows.success & known, value.index_select(0, next_node), terminal)
    reached = torch.where(rows.traj_end, terminal, following)
    return at_state, reached, node, cap


def g2po_tables(rows: GroupOrderedRows, row_values: dict[str, torch.Tensor], config: CreditConfig,
                variant: str) -> MethodOutput:
    """G2PO on the (group, traj, t)-ordered rows: (G1) :func:`visit_value_terms`, (G2, G3)
    :func:`node_value_terms`, (G4, G5) two segment normalisations, (G6) GRPO's term or the trajectories',
    (G7) the sum."""
    ops = rows.ops
    visit = visit_value_terms(rows, config)
    value, reached, node, cap = node_value_terms(rows, visit, config)
    penalised = config.g2po_penalty == "return"
    x = torch.where(rows.invalid, reached - config.invalid_penalty, reached) if penalised else reached
    a_nc = segment_normalize(x, node, cap, config.norm, config.norm_eps, "zero", **ops)
    a_ec = segment_normalize(reached - value, rows.group, rows.group_cap, config.norm, config.norm_eps, "zero", **ops)
    if config.g2po_episode == "row":
        a_ep = row_values["episode_adv"]
    else:  # the trajectories' summed rewards, once each (one trajectory: 0)
        total = episode_scores(rows.reward, torch.zeros_like(rows.invalid), rows.traj_end, 0.0, **ops)
        a_ep = per_trajectory_norm(rows, total, config.replace(episode_single_value="zero"))
    adv = a_ep + config.g2po_w * (a_nc + a_ec)
    return MethodOutput(adv, {**row_values, "visit_value": visit, "node_value": value, "next_value": reached,
                              "a_nc": a_nc, "a_ec": a_ec, "a_ep": a_ep})


# --------------------------------------------------------------------------------------- the registration
#: The largest magnitude of a G2PO value or weight: their squares in the group statistics overflowed float64 past it
#: (NaN / inf advantages)
G2PO_MAX = 1e100


def _magnitude(name: str, v) -> None:
    if abs(v) > G2PO_MAX:
        raise ValueError(f"CreditConfig.{name} must be at most {G2PO_MAX:g} in magnitude (larger values "
                         f"overflow float64 in the group statistics), got {v}")


def _weight(name: str, v) -> None:
    non_negative(name, v)
    _magnitude(name, v)


#: G2PO's CreditConfig fields (defaults: the official scripts, Nala-YN/G2PO g2po/core_g2po.py)
G2PO_FIELDS = (
    ConfigField("g2po_w", 1.0, "w in A = A_EP + w * (A_NC + A_EC) (G7; 0: GRPO).", float, _weight),
    ConfigField("g2po_gamma", 0.95, "the discount of a visit's value v = gamma^(T - t) * R (G1; the code's literal "
                "0.95, not gamma).", float, unit_interval),
    ConfigField("g2po_success_value", 10.0, "V' of a won trajectory's last row (G3; the code's SUCCESS_REWARD, "
                "undiscounted).", float, _magnitude),
    ConfigField("g2po_failure_value", 0.0, "V' of a lost trajectory's last row (G3).", float, _magnitude),
    ConfigField("g2po_episode", "row", "A_EP (G6): \"row\" (the code: GRPO's Norm_q(Z), episode_* fields) or "
                "\"trajectory\" (the paper: the trajectories' summed rewards, once each, no penalty; one "
                "trajectory: 0).", ("row", "trajectory")),
    ConfigField("g2po_penalty", "return", "where invalid_penalty enters G2PO's node-centric term (G4; "
                "PENALTY_PLACES): \"return\" (the code: off an invalid row's reached value, x = V' - "
                "invalid_penalty) or \"none\" (the paper).", ("none", "return")),
    ConfigField("g2po_failure_next", "zero", "V' of a lost trajectory's last row (G3): \"zero\" (the code: "
                "g2po_failure_value) or \"node\" (V of the node of its last next_state, g2po_failure_value where no "
                "row of the group is in that state).", ("zero", "node")),
)

register(CreditMethod(
    "g2po", "A = Norm_q(Z) + w * (Norm_{q,s}(V') + Norm_q(V' - V(s))): node values on the group's state graph "
    "(G2PO, arXiv 2606.22995)",
    g2po_reference, g2po_tables, row_keys=ROW_KEYS, fields=G2PO_FIELDS))


__all__ = ["ROW_KEYS", "G2PO_FIELDS", "G2PO_MAX", "g2po_reference", "g2po_tables", "visit_values", "node_values",
           "reached_values", "node_centric_terms", "edge_centric_terms", "trajectory_episode_terms", "g2po_advantage",
           "visit_value_terms", "node_value_terms"]
